"""Check flags against the slime and Megatron checkouts on the compiling machine (_slime/checkout.py: the
``--slime-checkout`` / ``--megatron-checkout`` options, their variables, else ``[slime] dir`` / ``megatron_dir``
where those exist here).

What was verified depends on the machine, so it is reported (stderr, --json) but never written
into the bundle: the same spec must give the same bytes everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import attrs

from .._spec.tables import Spec
from .checkout import MEGATRON_OPTION, SLIME_OPTION, SPEC_SLIME, Checkout, missing_hint
from .commit_facts import CommitFacts, commit_facts
from .sglang_stack import sglang_version

FlagChecker = Callable[[str], tuple[str, Sequence[str]]]  # flag -> (known|unknown|unverifiable, close)


@attrs.frozen
class FlagVerification:
    check: FlagChecker | None
    notes: tuple[str, ...]
    where: str = ""  # the checkouts read, as messages name them


def _differences(checkout: frozenset[str], facts: CommitFacts, shown: int = 6) -> str:
    """How the checkout's flags differ from the targeted commit's (its facts), for the note about the two."""
    extra, missing = sorted(checkout - facts.flags), sorted(facts.flags - checkout)
    if not extra and not missing:
        return f"; it defines the same flags as acrl's facts of slime {facts.name}"

    def listed(flags: list[str]) -> str:
        return ", ".join(flags[:shown]) + (f" and {len(flags) - shown} more" if len(flags) > shown else "")

    parts = [f"has {len(extra)} flag(s) slime {facts.name} lacks ({listed(extra)})" if extra else "",
             f"lacks {len(missing)} of its flag(s) ({listed(missing)})" if missing else ""]
    return f"; compared with acrl's facts of slime {facts.name}, the checkout " + " and ".join(p for p in parts if p)


def verify_flags(spec: Spec, slime: Checkout | None, megatron: Checkout | None) -> FlagVerification:
    """Read the accepted flags from this machine's slime checkout and Megatron-LM checkout, if any."""
    accepted = None
    if slime is not None:  # the reader is only imported where there is something to read
        from .source import read_accepted_flags  # lazy: the reader is loaded only where there is a checkout

        accepted = read_accepted_flags(Path(slime.path), Path(megatron.path) if megatron is not None else None)
    facts = commit_facts(spec.slime.commit)
    version = sglang_version(spec.slime.commit)
    sglang_note = "" if version is None else \
        f"; the --sglang-* flags are held to acrl's facts of sglang {version}, slime {spec.slime.commit[:9]}'s"
    if slime is None and facts is not None:
        return FlagVerification(None, (
            f"flags checked against acrl's facts of slime {facts.name} (generated from its code and Megatron-LM's, "
            f"python -m acrl.compiler._slime.flag_facts); no slime checkout on this machine{sglang_note}",))
    if slime is None:
        return FlagVerification(None, (
            f"flags not verified: no slime checkout on this machine ({SPEC_SLIME} {spec.slime.dir} is the cluster's "
            f"path and does not exist here) and acrl has no facts of slime {spec.slime.commit[:12]}; "
            f"{missing_hint('every [extra] flag against its parsers')}{sglang_note}",))
    if accepted is None:
        return FlagVerification(None, (
            f"flags not verified: {slime.shown()} is not a slime checkout (no slime/utils/arguments.py)",))
    notes: list[str] = []
    if slime.via != SPEC_SLIME:
        notes.append(f"flags checked against the slime checkout {slime.shown()}" +
                     (f" and the Megatron-LM checkout {megatron.shown()}" if megatron is not None else ""))
    else:
        notes.append(f"flags checked against {SPEC_SLIME} {slime.path}: the cluster's path, read because it exists on "
                     f"this machine ({SLIME_OPTION} DIR reads another checkout)")
    target = spec.slime.commit.lower()
    commit = slime.commit
    if commit is not None and not (commit.startswith(target) or target.startswith(commit)):
        notes.append(f"{slime.path} is at commit {commit[:12]}, but the spec targets {target[:12]}; "
                     "flags were checked against the checkout" + ("" if facts is None else
                                                                   _differences(accepted.flags, facts)))
    gaps = [gap if megatron is not None or "no Megatron-LM checkout" not in gap else
            f"{gap} (give one with {MEGATRON_OPTION} DIR)" for gap in accepted.gaps]
    notes += [f"a flag not found may still exist: {gap}" for gap in gaps]
    unverified = [p for p in accepted.unverified_prefixes if version is None or p != "--sglang-"]
    if unverified:
        notes.append("flags starting with " + ", ".join(unverified) +
                     " are generated from sglang at run time and were not verified" + sglang_note)

    def check(flag: str) -> tuple[str, Sequence[str]]:
        result = accepted.check(flag)
        return result.status.value, tuple(result.suggestions)

    return FlagVerification(check, tuple(notes), slime.shown())
