"""The sglang a slime commit runs, as acrl knows it: the flags slime makes of sglang's ServerArgs, their
deprecations, and the ServerArgs fields a server group may override.

slime's Docker image pins sglang (``ARG SGLANG_IMAGE_TAG`` on line 1 of docker/Dockerfile) and patches it
(docker/patch/latest/sglang*.patch). The facts of each such sglang, patches applied, are generated from its wheel
by ``python -m acrl.compiler._slime.sglang_facts`` into sglang/<version>.json next to this module; :data:`SGLANG_OF`
says which slime commit runs which. A file is read only when a compile needs it (its first ``--sglang-*`` flag or
server-group override to check), once per process.

slime's sglang parser (slime/backends/sglang_utils/arguments.py, ``add_sglang_arguments``) registers every sglang
argument but ``skipped_args`` with each option ``--x`` as ``--sglang-x``, next to its own ``--sglang-*`` flags
(router address, server concurrency, ``--sglang-config``); it parses with ``parse_known_args``, so any other
``--sglang-*`` flag is ignored silently, and abbreviations of its flags are accepted.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .sglang_args import skip_name, slime_options

__all__ = ["SGLANG_OF", "SglangFacts", "sglang_at", "sglang_version", "slime_flag", "slime_flag_names"]

# slime commit -> the sglang version its Docker image runs (docker/Dockerfile:1 at each commit).
SGLANG_OF: Mapping[str, str] = {
    "624b824a898ab0ec1fcb4d373004c7f3852bf515": "0.5.15.post1",  # ARG SGLANG_IMAGE_TAG=v0.5.15.post1-cu129
    "fa3c990af6f18efd3fd9922698bf4bf4048d1263": "0.5.13",  # ARG SGLANG_IMAGE_TAG=v0.5.13-cu129
}
FACTS_DIR = Path(__file__).with_name("sglang")
_PLAIN_FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")


def _commit_of(commit: str) -> str | None:
    """The known commit ``commit`` names (a prefix of at least 7 hex digits, or the full id), else None."""
    commit = commit.lower()
    if len(commit) < 7:
        return None
    return next((known for known in SGLANG_OF if known.startswith(commit) or commit.startswith(known)), None)


def sglang_version(commit: str) -> str | None:
    """The sglang version slime ``commit`` runs, where acrl has its facts (no file is read)."""
    known = _commit_of(commit)
    return SGLANG_OF[known] if known is not None else None


class SglangFacts:
    """What slime's sglang parser accepts at one commit, and what a server group may override."""

    def __init__(self, commit: str, data: Mapping[str, Any]) -> None:
        self.commit = commit
        self.version: str = data["provenance"]["sglang_version"]
        self.fields: frozenset[str] = frozenset(data["fields"])
        slime = data["slime"]
        skipped = frozenset(slime["skipped"])
        self.flags: dict[str, dict[str, Any]] = {}  # --sglang-x -> its sglang argument
        self.dropped: dict[str, str] = {}  # --sglang-x of an argument slime skips -> the name it skips it by
        for argument in data["arguments"]:
            for option in slime_options(argument, skipped):
                self.flags.setdefault(option, argument)
            for option in slime_options(argument, frozenset()):
                if option not in self.flags:
                    self.dropped[option] = str(skip_name(argument))
        self.own: frozenset[str] = frozenset(slime["own"])  # slime's own --sglang-* flags

    @property
    def shown(self) -> str:
        """``sglang 0.5.15.post1 (slime 624b824a8's image)``."""
        return f"sglang {self.version} (slime {self.commit[:9]}'s image)"

    def known(self, flag: str) -> bool:
        return flag in self.own or flag in self.flags

    def expansions(self, flag: str) -> list[str]:
        """The flags ``flag`` abbreviates (argparse's allow_abbrev: the parser's options it is a prefix of)."""
        return sorted(f for f in (*self.own, *self.flags) if f.startswith(flag) and f != flag)

    def suggestions(self, flag: str) -> list[str]:
        return difflib.get_close_matches(flag, [*self.own, *self.flags], n=3, cutoff=0.75)

    def deprecation(self, flag: str) -> tuple[str | None, str] | None:
        """(the replacement as slime spells it; "") when sglang deprecates ``flag`` for another, (None, sglang's help)
        when ``flag`` is deprecated and does nothing; None when it is not deprecated."""
        argument = self.flags.get(flag)
        if argument is None or "deprecated" not in argument:
            return None
        new_flag = argument["deprecated"].get("new_flag")
        if new_flag is None:  # DeprecatedAction: it only logs a warning
            return None, " ".join(str(argument["deprecated"].get("help", "")).split())
        return "--sglang-" + new_flag.lstrip("-"), ""

    def renamed(self, flag: str) -> str:
        """``flag``, or the flag it is a deprecated alias of (same value, same dest) where slime has that flag."""
        argument = self.flags.get(flag)
        if argument is None or argument.get("action") != "DeprecatedAliasStoreAction":
            return flag
        new = "--sglang-" + str(argument["deprecated"]["new_flag"]).lstrip("-")
        return new if _PLAIN_FLAG.fullmatch(new) and new in self.flags else flag

    def field_suggestions(self, key: str) -> list[str]:
        return difflib.get_close_matches(key, sorted(self.fields), n=3, cutoff=0.75)


@functools.cache
def _load(commit: str) -> SglangFacts:
    path = FACTS_DIR / f"{SGLANG_OF[commit]}.json"
    return SglangFacts(commit, json.loads(path.read_text(encoding="utf-8")))


def sglang_at(commit: str) -> SglangFacts | None:
    """The facts of the sglang slime ``commit`` runs, or None when acrl has none for that commit."""
    known = _commit_of(commit)
    return _load(known) if known is not None else None


def slime_flag(commit: str, flag: str) -> str:
    """The flag acrl passes for a spec key's ``flag`` at slime ``commit``: the same, or for a ``--sglang-*`` flag
    that the commit's sglang keeps only as a deprecated alias, the flag it is an alias of (same value, same dest)."""
    if not flag.startswith("--sglang-"):
        return flag
    facts = sglang_at(commit)
    return flag if facts is None else facts.renamed(flag)


def slime_flag_names(flag: str) -> list[str]:
    """``flag`` and each flag :func:`slime_flag` makes of it at a commit acrl has facts for."""
    return list(dict.fromkeys([flag, *(slime_flag(commit, flag) for commit in SGLANG_OF)]))
