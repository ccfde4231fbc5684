"""The facts acrl ships per slime commit (compiler/_slime/commits/<commit>.json, made by :mod:`.flag_facts` from
slime's and Megatron-LM's code): the flags each commit accepts, its SGLang version and model scripts. Read lazily,
one small file per commit asked about; :func:`absent_flags` says which flags a commit lacks and, from the other
commits' facts, since when. What slime's parse does with each flag (type, choices, default, action, nargs, aliases,
deprecation: :class:`FlagFact`) is in commits/argparse/<commit>.json, read only when :meth:`CommitFacts.argparse` is
first asked (an escape-hatch flag's value is checked), so a compile without one never reads it."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, NamedTuple

COMMITS_DIR = Path(__file__).parent / "commits"
ARGPARSE_DIR = COMMITS_DIR / "argparse"
# Generated from SGLang's ServerArgs at run time, not defined in slime's or Megatron's source: never "absent".
GENERATED_PREFIXES = ("--sglang-",)


class FlagFact(NamedTuple):
    """What slime's parse does with one flag at a commit (commits/argparse/<commit>.json, :mod:`.argparse_facts`)."""

    flag: str  # the option string it is recorded under (an alias's flag)
    owner: str  # "slime" or "megatron": the parser that defines it
    at: str  # file:line of its definition (a factory field's line, see ``field``)
    action: str = "store"
    type: str | None = None  # "int", "float", "str", "json.loads"...: how argparse converts the value
    nargs: int | str | None = None
    choices: tuple[Any, ...] | None = None
    default: Any = None
    expression: str | None = None  # the default's source text when it is not a literal
    aliases: tuple[str, ...] = ()
    field: str | None = None  # Config.field of a flag ArgumentGroupFactory makes
    reset: str | None = None  # where slime's reset_arg sets the default
    deprecated: Mapping[str, Any] | None = None  # {"text", "at", "use"?, "refused"?}


class CommitFacts(NamedTuple):
    commit: str
    date: str
    tags: tuple[str, ...]
    slime_flags: frozenset[str]
    megatron_flags: frozenset[str]
    sglang_version: str
    model_scripts: tuple[str, ...]
    megatron_commit: str = ""
    # where slime's sglang parser and Megatron-LM's parser are, and whether each expands abbreviations (flag_facts,
    # from parser_facts.py): {"sglang": {"file", "line", "allow_abbrev", "router_line"}, "megatron": {...}}
    parsers: Mapping[str, Mapping[str, Any]] = {}

    @property
    def flags(self) -> frozenset[str]:
        return self.slime_flags | self.megatron_flags

    @property
    def name(self) -> str:
        """How messages name the commit: its tag, else its first 7 hex digits."""
        return self.tags[0] if self.tags else self.commit[:7]

    def argparse(self, flag: str) -> FlagFact | None:
        """What slime's parse does with ``flag`` (an alias: with its flag's definition), or None when the commit
        does not define it or acrl has no such facts of the commit."""
        records = _argparse(self.commit)
        record = records.get(flag) if records is not None else None
        if record is not None and "alias_of" in record:
            flag, record = record["alias_of"], records.get(record["alias_of"]) if records is not None else None
        if record is None:
            return None
        fields: dict[str, Any] = {k: tuple(v) if k in ("choices", "aliases") else v for k, v in record.items()}
        return FlagFact(flag=flag, **fields)

    def defined(self, fact: FlagFact) -> str:
        """Where a flag is defined, as messages say it: "slime 624b824 slime/utils/arguments.py:1129", "Megatron-LM
        1dcf0daf (slime 624b824's) megatron/training/arguments.py:2168"."""
        if fact.owner == "slime":
            return f"slime {self.name} {fact.at}"
        return f"Megatron-LM {self.megatron_commit[:8]} (slime {self.name}'s) {fact.at}"


@functools.cache
def _files() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in COMMITS_DIR.glob("*.json")))


@functools.cache
def _load(commit: str) -> CommitFacts:
    data = json.loads((COMMITS_DIR / f"{commit}.json").read_text(encoding="utf-8"))
    p = data["provenance"]
    return CommitFacts(commit, p["commit_date"], tuple(p["tags"]), frozenset(data["flags"]["slime"]),
                       frozenset(data["flags"]["megatron"]), data["sglang_version"], tuple(data["model_scripts"]),
                       p["megatron"]["commit"], data["parsers"])


@functools.cache
def _argparse(commit: str) -> dict[str, dict[str, Any]] | None:
    path = ARGPARSE_DIR / f"{commit}.json"
    if not path.is_file():
        return None
    records: dict[str, dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))["flags"]
    return records


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
