"""The facts acrl ships per slime commit (compiler/_slime/commits/<commit>.json, made by :mod:`.flag_facts` from
slime's and Megatron-LM's code): the flags each commit accepts, its SGLang version and model scripts. Read lazily,
one small file per commit asked about; :func:`absent_flags` says which flags a commit lacks and, from the other
commits' facts, since when."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import NamedTuple

COMMITS_DIR = Path(__file__).parent / "commits"
# Generated from SGLang's ServerArgs at run time, not defined in slime's or Megatron's source: never "absent".
GENERATED_PREFIXES = ("--sglang-",)


class CommitFacts(NamedTuple):
    commit: str
    date: str
    tags: tuple[str, ...]
    slime_flags: frozenset[str]
    megatron_flags: frozenset[str]
    sglang_version: str
    model_scripts: tuple[str, ...]
    megatron_commit: str = ""

    @property
    def flags(self) -> frozenset[str]:
        return self.slime_flags | self.megatron_flags

    @property
    def name(self) -> str:
        """How messages name the commit: its tag, else its first 7 hex digits."""
        return self.tags[0] if self.tags else self.commit[:7]


@functools.cache
def _files() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in COMMITS_DIR.glob("*.json")))


@functools.cache
def _load(commit: str) -> CommitFacts:
    data = json.loads((COMMITS_DIR / f"{commit}.json").read_text(encoding="utf-8"))
    p = data["provenance"]
    return CommitFacts(commit, p["commit_date"], tuple(p["tags"]), frozenset(data["flags"]["slime"]),
                       frozenset(data["flags"]["megatron"]), data["sglang_version"], tuple(data["model_scripts"]),
                       p["megatron"]["commit"])


def commit_facts(commit: str) -> CommitFacts | None:
    """The facts of ``commit`` (a full hash or a prefix of at least 7 hex digits), or None when acrl has none."""
    commit = commit.lower()
    if len(commit) < 7:
        return None
    found = [c for c in _files() if c.startswith(commit) or commit.startswith(c)]
    return _load(found[0]) if len(found) == 1 else None


def known_commits() -> list[CommitFacts]:
    """Every commit acrl has facts for, oldest first."""
    return sorted((_load(c) for c in _files()), key=lambda f: f.date)


def _why(flag: str, facts: CommitFacts) -> str:
    having = [c for c in known_commits() if flag in c.flags]
    if not having:
        return f"defined at none of the slime commits acrl has facts for ({', '.join(c.name for c in known_commits())})"
    later = [c for c in having if c.date > facts.date]
    if len(later) == len(having):
        return f"added to slime after {facts.name} (present at {', '.join(c.name for c in later)})"
    if not later:
        return f"removed from slime after {having[-1].name}"
    return f"not at {facts.name} (present at {', '.join(c.name for c in having)})"


class AbsentFlags(Mapping[str, str]):
    """The flags ``facts``' commit does not define, each with since when (from the other commits' facts): ``flag in
    absent`` for any flag, generated ``--sglang-*`` flags never; iterating gives the flags other commits define."""

    def __init__(self, facts: CommitFacts) -> None:
        self.facts = facts

    def __contains__(self, flag: object) -> bool:
        return isinstance(flag, str) and flag.startswith("--") and flag not in self.facts.flags and \
            not flag.startswith(GENERATED_PREFIXES)

    def __getitem__(self, flag: str) -> str:
        if flag not in self:
            raise KeyError(flag)
        return _why(flag, self.facts)

    def __iter__(self) -> Iterator[str]:
        others = sorted(set().union(*(c.flags for c in known_commits())) - self.facts.flags)
        return iter(f for f in others if f in self)

    def __len__(self) -> int:
        return sum(1 for _ in self)


def absent_flags(commit: str) -> AbsentFlags | None:
    """The flags ``commit`` lacks (see :class:`AbsentFlags`), or None when acrl has no facts about it."""
    facts = commit_facts(commit)
    return None if facts is None else AbsentFlags(facts)
