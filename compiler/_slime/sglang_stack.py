"""The sglang a slime commit runs, as acrl knows it: the flags slime makes of sglang's ServerArgs, their
deprecations, and the ServerArgs fields a server group may override.

slime's Docker image pins sglang (``ARG SGLANG_IMAGE_TAG`` on line 1 of docker/Dockerfile) and patches it
(docker/patch/latest/sglang*.patch). The patches are slime's, per commit: v0.3.1 and 624b824 both run sglang
0.5.15.post1, but only 624b824 adds sglang-deterministic.patch (``--enable-fp32-moe-router``). So the facts are
keyed by slime commit: ``python -m acrl.compiler._slime.sglang_facts ... -o compiler/_slime/sglang`` writes
sglang/<slime commit>.json next to this module, named by its ``provenance.slime.commit``, and rewrites
sglang/index.json from those files: per commit, the sglang version and the deprecated aliases that sglang keeps
for a flag slime still defines. Which commits acrl has sglang facts for, and which sglang each runs, is that
index (tests/test_sglang_facts.py holds it to each commit's flag facts, compiler/_slime/commits/, and to the files).

Reads are lazy: the small index when a compile passes a ``--sglang-*`` flag (the argv's alias renaming needs only
it), a commit's big file only when a rule reads its flags or fields (an escape-hatch ``--sglang-*`` flag, a server
group's overrides), once per process.

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

__all__ = ["SglangFacts", "SglangFile", "commits_with_facts", "sglang_at", "sglang_version", "slime_flag",
           "slime_flag_names"]

FACTS_DIR = Path(__file__).with_name("sglang")
INDEX = "index.json"
_PLAIN_FLAG = re.compile(r"--[a-z0-9][a-z0-9-]*")


class SglangFile:
    """What one facts file says: the flags slime's sglang parser defines, the ServerArgs fields."""

    def __init__(self, data: Mapping[str, Any]) -> None:
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

    def aliases(self) -> dict[str, str]:
        """Each flag sglang keeps only as a deprecated alias (DeprecatedAliasStoreAction: same value, same dest) of
        a flag slime defines -> that flag: what the index records for :func:`slime_flag`."""
        out = {}
        for flag, argument in sorted(self.flags.items()):
            if argument.get("action") == "DeprecatedAliasStoreAction":
                new = "--sglang-" + str(argument["deprecated"]["new_flag"]).lstrip("-")
                if _PLAIN_FLAG.fullmatch(new) and new in self.flags:
                    out[flag] = new
        return out


@functools.cache
def _read(commit: str) -> SglangFile:
    """The big file of ``commit`` (a full id the index names), parsed once per process."""
    return SglangFile(json.loads((FACTS_DIR / f"{commit}.json").read_text(encoding="utf-8")))


class SglangFacts:
    """What slime's sglang parser accepts at one commit, and what a server group may override. The commit, its
    sglang version and aliases come from the index; the flags and fields are read on first use."""

    def __init__(self, commit: str, version: str, aliases: Mapping[str, str]) -> None:
        self.commit, self.version, self.aliases = commit, version, dict(aliases)

    @property
    def _file(self) -> SglangFile:
        return _read(self.commit)

    @property
    def fields(self) -> frozenset[str]:
        return self._file.fields

    @property
    def flags(self) -> Mapping[str, dict[str, Any]]:
        return self._file.flags

    @property
    def dropped(self) -> Mapping[str, str]:
        return self._file.dropped

    @property
    def own(self) -> frozenset[str]:
        return self._file.own

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
        return self.aliases.get(flag, flag)

    def field_suggestions(self, key: str) -> list[str]:
        return difflib.get_close_matches(key, sorted(self.fields), n=3, cutoff=0.75)


@functools.cache
def _index() -> Mapping[str, SglangFacts]:
    data = json.loads((FACTS_DIR / INDEX).read_text(encoding="utf-8"))
    return {commit: SglangFacts(commit, row["sglang_version"], row["aliases"])
            for commit, row in data["commits"].items()}


def commits_with_facts() -> list[str]:
    """The slime commits (full ids) acrl has sglang facts for (the index; no big file is read)."""
    return sorted(_index())


def sglang_at(commit: str) -> SglangFacts | None:
    """The facts of the sglang slime ``commit`` runs (a full id or a prefix of at least 7 hex digits), or None when
    acrl has none for that commit. Only the index is read here."""
    commit = commit.lower()
    if len(commit) < 7:
        return None
    found = [known for known in _index() if known.startswith(commit) or commit.startswith(known)]
    return _index()[found[0]] if len(found) == 1 else None


def sglang_version(commit: str) -> str | None:
    """The sglang version slime ``commit`` runs, where acrl has its facts (no big file is read)."""
    facts = sglang_at(commit)
    return facts.version if facts is not None else None


def slime_flag(commit: str, flag: str) -> str:
    """The flag acrl passes for a spec key's ``flag`` at slime ``commit``: the same, or for a ``--sglang-*`` flag
    that the commit's sglang keeps only as a deprecated alias, the flag it is an alias of (same value, same dest).
    Reads only the index."""
    if not flag.startswith("--sglang-"):
        return flag
    facts = sglang_at(commit)
    return flag if facts is None else facts.renamed(flag)


def slime_flag_names(flag: str) -> list[str]:
    """``flag`` and each flag :func:`slime_flag` makes of it at a commit acrl has facts for."""
    return list(dict.fromkeys([flag, *(slime_flag(commit, flag) for commit in commits_with_facts())]))
