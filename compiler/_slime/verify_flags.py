"""Check flags against the slime and Megatron checkouts on the compiling machine (_slime/checkout.py: the
``--slime-checkout`` / ``--megatron-checkout`` options, their variables, else ``[slime] dir`` / ``megatron_dir``
where those exist here).

What was verified depends on the machine, so it is reported (stderr, --json) but never written
into the bundle: the same spec must give the same bytes everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

import attrs

from .._spec.tables import Spec
from .checkout import MEGATRON_OPTION, SLIME_OPTION, SPEC_SLIME, Checkout
from .commit_facts import CommitFacts, commit_facts
from .flag_verdict import FlagCheck
from .sglang_stack import sglang_version

FlagChecker = Callable[[str], FlagCheck]  # flag -> known, unknown (maybe an abbreviation) or unverifiable


@attrs.frozen
class FlagVerification:
    check: FlagChecker | None
    notes: tuple[str, ...]
    where: str = ""  # the checkouts read, as messages name them


def _listed(flags: list[str], shown: int = 8) -> str:
    return ", ".join(flags[:shown]) + (f" and {len(flags) - shown} more" if len(flags) > shown else "")


def _differences(checkout: frozenset[str], facts: CommitFacts, used: Collection[str]) -> str:
    """How the checkout's flags differ from the targeted commit's (its facts), for the note about the two: how many
    differ, and which of them the spec passes (``used``: its argv's flags), the ones the two checks judge apart."""
    extra, missing = checkout - facts.flags, facts.flags - checkout
    if not extra and not missing:
        return f"; it defines the same flags as acrl's facts of slime {facts.name}"
    counts = [f"has {len(extra)} flag(s) slime {facts.name} lacks" if extra else "",
              f"lacks {len(missing)} of its flag(s)" if missing else ""]
    text = f"; compared with acrl's facts of slime {facts.name}, the checkout " + " and ".join(c for c in counts if c)
    spec_extra, spec_missing = sorted(set(used) & extra), sorted(set(used) & missing)
    if not spec_extra and not spec_missing:
        return text + "; none of them is a flag this spec passes"
    which = [f"the checkout has {', '.join(spec_extra)}, which slime {facts.name} lacks" if spec_extra else "",
             f"the checkout lacks {', '.join(spec_missing)}, which slime {facts.name} has" if spec_missing else ""]
    return text + "; of the flags this spec passes, " + " and ".join(w for w in which if w)


def _escape_hatch(spec: Spec) -> bool:
    """Whether the spec has escape-hatch flags ([extra.flags], an [extra] args token starting with --)."""
    return bool(spec.extra.flags) or any(token.startswith("--") for token in spec.extra.args)


def verify_flags(spec: Spec, slime: Checkout | None, megatron: Checkout | None,
                 used: Collection[str] = ()) -> FlagVerification:
    """Read the accepted flags from this machine's slime checkout and Megatron-LM checkout, if any; ``used``: the
    flags the spec's argv passes. What no check can say about an escape-hatch flag is rule ACRL-F008's warning,
    flag by flag: the notes only say what checked the flags, and without facts or a checkout (and no escape-hatch
    flag to warn about) that nothing did."""
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
    if slime is None:  # ACRL-F008 names each escape-hatch flag, with the fix
        return FlagVerification(None, () if _escape_hatch(spec) else (
            f"flags not checked: acrl has no facts of slime {spec.slime.commit[:12]} and no slime checkout is on "
            f"this machine ({SLIME_OPTION} DIR){sglang_note}",))
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
                                                                   _differences(accepted.flags, facts, used)))
    scoped = dict(accepted.scopes)
    for gap in accepted.gaps:
        if gap in scoped:
            notes.append(f"{_listed(sorted(scoped[gap]))} may still exist: {gap}")
        else:
            notes.append(f"a flag not found may still exist: {gap}" + ("" if megatron is not None or
                         "no Megatron-LM checkout" not in gap else f" (give one with {MEGATRON_OPTION} DIR)"))
    unverified = [p for p in accepted.unverified_prefixes if version is None or p != "--sglang-"]
    if unverified:
        notes.append("flags starting with " + ", ".join(unverified) +
                     " are generated from sglang at run time and were not verified" + sglang_note)
    return FlagVerification(accepted.check, tuple(notes), slime.shown())
