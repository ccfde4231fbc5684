"""The verdict on one flag (known, unknown, unverifiable), and what slime's parsers do with an abbreviated flag.

slime parses its command line in phases (``parse_args`` of slime/utils/arguments.py; the same at every commit acrl
has facts for, lines at 624b824):

* a pre-parse of ``--train-backend`` and the debug modes, ``allow_abbrev=False`` (:1591);
* phase 1, ``sglang_parse_args`` (slime/backends/sglang_utils/arguments.py:203-226): an argparse parser with the
  default ``allow_abbrev=True``, read with ``parse_known_args``. It holds sglang's ServerArgs as ``--sglang-*``,
  sglang_router's RouterArgs as ``--router-*`` (``RouterArgs.add_cli_args(parser, use_router_prefix=True)``, :34;
  not at v0.3.0), slime's ``--sglang-router-*``, ``--sglang-server-concurrency``, ``--sglang-config`` and the one
  flag without that prefix, ``--prefill-num-servers`` (:125). A prefix of exactly one of its flags is expanded to
  it, and its values are merged over phase 2's (slime/utils/arguments.py:1630-1633); a prefix of several stops it:
  argparse's "ambiguous option" error, exit status 2, before anything starts. (Its pre-parse, ``temp_parser`` at
  :216-220, abbreviates too, into ``--rollout-num-gpus-per-engine``; but its only product, the default of
  ``sglang_tensor_parallel_size``, is read nowhere: ``validate_args`` takes phase 2's value, :173-181.)
* phase 2, ``megatron_parse_args``: Megatron-LM's parser, ``allow_abbrev=False`` (megatron/training/arguments.py:90
  at 1dcf0daf), with slime's own arguments added, read with ``parse_known_args``: an abbreviation is not expanded
  and is ignored silently, like any flag it does not define.

So an abbreviation of a slime or Megatron flag (``--use-ti`` for ``--use-tis``) does nothing, and a prefix of the
sglang parser's flags (``--sglang``, ``--prefill``) is expanded or stops slime. Rules ACRL-F003 (the targeted
commit's facts) and ACRL-F004 (a checkout here) name either as an abbreviation.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from .commit_facts import commit_facts

__all__ = [
    "GENERATED",
    "Abbreviation",
    "FlagCheck",
    "FlagStatus",
    "abbreviation",
    "megatron_parser_at",
    "registers_router",
    "router_at",
    "sglang_parser_at",
    "sglang_parser_flags",
]

# Families of flags slime's sglang parser generates at run time (from sglang's ServerArgs, sglang_router's
# RouterArgs): neither a checkout's source nor acrl's commit facts list them.
GENERATED = ("--router-", "--sglang-")
SGLANG_PARSER_OWN = ("--prefill-num-servers",)  # the sglang parser's flag without either prefix (see above)

SGLANG_FILE = "slime/backends/sglang_utils/arguments.py"
MEGATRON_FILE = "megatron/training/arguments.py"


class FlagStatus(enum.Enum):
    """What the checkouts say about one flag."""

    KNOWN = "known"
    UNKNOWN = "unknown"
    UNVERIFIABLE = "unverifiable"


@attrs.frozen
class Abbreviation:
    """A flag that is a prefix of flags slime's parsers define, and which of them the sglang parser would take."""

    flag: str
    longer: tuple[str, ...]  # every flag it is a prefix of, sorted
    sglang: tuple[str, ...]  # those of slime's sglang parser (phase 1); a generated family as "--sglang-*"
    parsers: tuple[str, str] = ("", "")  # where the sglang parser and Megatron's allow_abbrev=False are, as cited

    @property
    def expanded(self) -> str | None:
        """The flag slime's sglang parser expands it to (a prefix of exactly one of its flags), else None."""
        one = len(self.sglang) == 1 and not self.sglang[0].endswith("*")
        return self.sglang[0] if one else None

    @property
    def ambiguous(self) -> bool:
        """Whether it stops slime's sglang parser: a prefix of several of its flags, or of a generated family."""
        return len(self.sglang) > 1 or any(s.endswith("*") for s in self.sglang)


@attrs.frozen
class FlagCheck:
    """The verdict on one flag, with close matches among the accepted flags; an unknown flag that is a prefix of
    accepted ones carries its :class:`Abbreviation`."""

    flag: str
    status: FlagStatus
    suggestions: tuple[str, ...] = ()
    reason: str = ""
    abbreviation: Abbreviation | None = None


def abbreviation(flag: str, flags: Iterable[str], sglang: Iterable[str], families: Iterable[str],
                 parsers: tuple[str, str]) -> Abbreviation | None:
    """``flag`` as an abbreviation: of ``flags`` (every flag slime's parsers define), of which ``sglang`` are the
    sglang parser's; ``families`` are the prefixes of the flags that parser generates; ``parsers`` where the two
    parsers are, as messages cite them. None when ``flag`` is a flag, a prefix of none, or itself inside a
    generated family (``--sglang-mem``: rules ACRL-F005, F007)."""
    families = tuple(families)
    flags = frozenset(flags)
    if len(flag) < 3 or not flag.startswith("--") or flag in flags or flag.startswith(families):
        return None
    covered = tuple(p for p in families if p.startswith(flag))  # whole families it is a prefix of
    inside = sorted(f for f in sglang if f.startswith(flag) and not f.startswith(covered))
    longer = tuple(sorted(f for f in flags if f.startswith(flag)))
    if not longer and not covered:
        return None
    return Abbreviation(flag, longer, (*(f"{p}*" for p in covered), *inside), parsers)


def sglang_parser_flags(flags: Iterable[str]) -> frozenset[str]:
    """Those of ``flags`` (a commit's, from its facts) that slime's sglang parser defines."""
    return frozenset(f for f in flags if f.startswith(GENERATED) or f in SGLANG_PARSER_OWN)


def _parsers(commit: str) -> Mapping[str, Mapping[str, Any]] | None:
    """The parsers of slime ``commit`` as acrl's facts of it record them (compiler/_slime/commits, generated by
    flag_facts from parser_facts.py), else None."""
    facts = commit_facts(commit)
    return facts.parsers if facts is not None and facts.parsers else None


def registers_router(commit: str) -> bool | None:
    """Whether slime ``commit`` (full id or a prefix of 7+ hex digits) registers sglang_router's --router-* flags;
    None when acrl does not know that commit."""
    found = _parsers(commit)
    return None if found is None else found["sglang"]["router_line"] is not None


def sglang_parser_at(commit: str) -> str:
    """Where slime ``commit``'s sglang parser is, as messages cite it."""
    found = _parsers(commit)
    line = f":{found['sglang']['line']}" if found is not None else ""
    return f"{SGLANG_FILE}{line} sglang_parse_args"


def router_at(commit: str) -> str:
    """Where slime ``commit`` registers sglang_router's --router-* flags, as messages cite it."""
    found = _parsers(commit)
    line = f":{found['sglang']['router_line']}" if found is not None and found["sglang"]["router_line"] else ""
    return f"{SGLANG_FILE}{line} RouterArgs.add_cli_args"


def megatron_parser_at(commit: str) -> str:
    """Where the ``allow_abbrev=False`` of the Megatron-LM slime ``commit`` runs is, as messages cite it."""
    facts = commit_facts(commit)
    if facts is None or not facts.parsers:
        return f"Megatron-LM {MEGATRON_FILE}"
    return f"Megatron-LM {MEGATRON_FILE}:{facts.parsers['megatron']['line']} at {facts.megatron_commit[:8]}"
