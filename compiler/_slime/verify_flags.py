"""Check flags against the slime and Megatron checkouts when they are on the compiling machine.

What was verified depends on the machine, so it is reported (stderr, --json) but never written
into the bundle: the same spec must give the same bytes everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from .._pipeline.model_args.resolve import is_dir_here
from .._spec.tables import Spec

FlagChecker = Callable[[str], tuple[str, Sequence[str]]]  # flag -> (known|unknown|unverifiable, close)


@attrs.frozen
class FlagVerification:
    check: FlagChecker | None
    notes: tuple[str, ...]


def verify_flags(spec: Spec) -> FlagVerification:
    """Read the accepted flags from ``[slime] dir`` / ``megatron_dir`` if they exist here."""
    slime_dir = Path(spec.slime.dir)
    megatron_dir = Path(spec.slime.megatron_dir)
    accepted = None
    if is_dir_here(slime_dir):  # the reader is only imported where there is something to read
        from .source import read_accepted_flags  # lazy: the reader is loaded only where there is a checkout

        accepted = read_accepted_flags(slime_dir, megatron_dir if is_dir_here(megatron_dir) else None)
    if accepted is None:
        return FlagVerification(None, (
            f"flags not verified: no slime checkout at {spec.slime.dir} on this machine (compile where slime "
            "is checked out to check every [extra] flag against its parsers)",))
    from .source import read_git_commit  # lazy: as above, only where a checkout was read

    notes: list[str] = []
    commit = read_git_commit(slime_dir)
    target = spec.slime.commit.lower()
    if commit is not None and not (commit.startswith(target) or target.startswith(commit)):
        notes.append(f"{spec.slime.dir} is at commit {commit[:12]}, but the spec targets {target[:12]}; "
                     "flags were checked against the checkout")
    notes += [f"a flag not found may still exist: {gap}" for gap in accepted.gaps]
    if accepted.unverified_prefixes:
        notes.append("flags starting with " + ", ".join(accepted.unverified_prefixes) +
                     " are generated from sglang at run time and were not verified")

    def check(flag: str) -> tuple[str, Sequence[str]]:
        result = accepted.check(flag)
        return result.status.value, tuple(result.suggestions)

    return FlagVerification(check, tuple(notes))
