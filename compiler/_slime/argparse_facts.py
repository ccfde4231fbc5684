"""What slime's argument parsing does with each flag of a slime commit and its Megatron-LM (generator only, issue 15).

:mod:`.flag_facts` lists the flags a commit accepts; this module says, per flag, what the parse would do with its
value, read by acrl's existing readers from the same trees (slime extracted at the commit, Megatron-LM with slime's
docker patches applied):

* slime's own ``add_argument`` / ``reset_arg`` calls of every ``arguments*.py`` under ``slime/`` by
  :func:`.default_facts.parse_defaults` (slime/utils/arguments.py first: a flag two files define keeps its first);
* Megatron-LM's ``add_argument`` calls and ``ArgumentGroupFactory`` dataclass fields by
  :func:`.megatron_defaults.megatron_defaults` (the factory's type, ``nargs="+"`` of a list, the choices of a
  Literal or an Enum, ``store_true`` / ``store_false`` of a bool, argparse_meta winning);
* slime's ``reset_arg`` on a flag Megatron defines changes only its default (slime 624b824
  slime/utils/arguments.py:19-32: ``action.default = kwargs["default"]`` when given, nothing else), so the flag keeps
  Megatron's definition with slime's default (``"reset"``: where); on a flag Megatron lacks it adds it, as slime's;
* deprecations by :func:`.deprecations.read_deprecations`.

Each flag's record: ``owner`` (the parser that defines it: slime or megatron), ``at`` (file:line of the definition;
a factory field's own line, with ``field``), ``action`` (argparse's; none is ``store``),
``type`` (``int`` / ``float`` / ``str`` / ... as argparse converts the value; ``str`` when none is written and the
action takes values; a callable's source text otherwise), ``nargs``, ``choices``, ``default`` (a literal) or
``expression`` (its source text, never guessed), ``aliases`` (the other option strings, ``--no-x`` of a
``BooleanOptionalAction`` included) and ``deprecated``. An alias has ``{"alias_of": flag}`` only.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .default_facts import SLIME_ARGUMENTS_PY, _called, parse_defaults
from .deprecations import read_deprecations
from .megatron_defaults import megatron_defaults
from .model_facts import FactsError

_NO_VALUE = frozenset({"store_true", "store_false", "store_const", "append_const", "count", "help", "version"})
_BOOL_OPTIONAL = "BooleanOptionalAction"
_KEYS = ("owner", "at", "field", "reset", "action", "type", "nargs", "choices", "default", "expression", "aliases",
         "deprecated")


def _jsonable(value: Any, where: str) -> Any:
    if isinstance(value, tuple | list):
        return [_jsonable(v, where) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v, where) for k, v in value.items()}
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise FactsError(f"{where}: a literal JSON cannot hold ({value!r})")


def _record(owner: str, at: str, fact: dict[str, Any], flag: str, others: Iterable[str]) -> dict[str, Any]:
    """The record of one argparse argument read by parse_defaults or megatron_defaults, recorded under ``flag``
    (``others``: its other option strings)."""
    action = fact.get("action", "store")
    out: dict[str, Any] = {"owner": owner, "at": at}
    if action != "store":
        out["action"] = action
    if "type" in fact:
        out["type"] = fact["type"]
    elif action in ("store", "append") and fact.get("nargs") != 0:
        out["type"] = "str"  # argparse hands the value over as written
    for key in ("nargs", "choices", "default", "expression"):
        if key in fact:
            out[key] = _jsonable(fact[key], at)
    aliases = list(others)
    if action.rsplit(".", 1)[-1] == _BOOL_OPTIONAL:  # argparse adds --no-x for each --x
        aliases += [f"--no-{n[2:]}" for n in [flag, *aliases] if n.startswith("--")]
    if aliases:
        out["aliases"] = sorted(set(aliases))
    return out


def _reset_defaults(source: str) -> set[int]:
    """The lines of the ``reset_arg`` calls that pass ``default=`` (only those change a Megatron flag)."""
    return {node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and _called(node) == "reset_arg"
            and any(k.arg == "default" for k in node.keywords)}


def _primary(names: Iterable[str]) -> str:
    """The option string a factory flag is recorded under: its shortest (``--save-interval`` over
    ``--persistent-save-interval``, ``--no-x`` over ``--disable-x``)."""
    return min(names, key=lambda n: (len(n), n))


def flag_details(slime_root: Path, slime_files: Iterable[str], megatron_root: Path, megatron_files: Iterable[str],
                 names: set[str]) -> dict[str, dict[str, Any]]:
    """{flag: record} of every flag in ``names`` (the flags :mod:`.flag_facts` read), sorted; aliases as
    ``{"alias_of": flag}``. Raises FactsError when a flag of ``names`` has no record, or a record no flag."""
    records: dict[str, dict[str, Any]] = {}
    alias_of: dict[str, str] = {}

    def add(flag: str, record: dict[str, Any]) -> None:
        records[flag] = record
        for alias in record.get("aliases", ()):
            alias_of.setdefault(alias, flag)

    resets: dict[str, tuple[str, dict[str, Any], bool]] = {}
    slime_texts = []
    for rel in sorted(slime_files, key=lambda f: (f != SLIME_ARGUMENTS_PY, f)):
        text = (slime_root / rel).read_text(encoding="utf-8")
        slime_texts.append((rel, text))
        with_default = _reset_defaults(text)
        for flag, fact in parse_defaults(text).items():
            at = f"{rel}:{fact['line']}"
            if fact.get("via") == "reset_arg":
                resets.setdefault(flag, (at, fact, fact["line"] in with_default))
            elif flag not in records and flag not in alias_of:  # a flag two files define keeps the first
                add(flag, _record("slime", at, fact, flag, fact["aliases"]))
    keys: dict[int, list[str]] = {}  # an alias's entry is its flag's fact: each fact once, with all its keys
    facts = megatron_defaults(megatron_root, detail=True)
    for flag, fact in facts.items():
        keys.setdefault(id(fact), []).append(flag)
    for stored in keys.values():
        fact = facts[stored[0]]
        if "names" in fact:  # a factory field: its fact is copied under each of its names
            primary = _primary(fact["names"])
            if records.get(primary, {}).get("at") == fact["at"]:
                continue
            record = _record("megatron", fact["at"], fact, primary, [n for n in fact["names"] if n != primary])
            record["field"] = fact["via"].removeprefix("ArgumentGroupFactory ")
        else:  # an add_argument: recorded under its first option string, the others its aliases
            primary = next(n for n in stored if n not in fact.get("aliases", ()))
            record = _record("megatron", fact["via"], fact, primary, fact.get("aliases", ()))
        if primary in records or primary in alias_of:
            first = records.get(alias_of.get(primary, primary), {}).get("at")
            raise FactsError(f"{primary} is defined twice ({first} and {record['at']}): which definition the parse "
                             "takes is not read here")
        add(primary, record)
    for flag, (at, fact, sets_default) in resets.items():
        target = alias_of.get(flag, flag)
        if target not in records:  # reset_arg adds the flag Megatron lacks, with all its keywords
            add(flag, _record("slime", at, fact, flag, fact["aliases"]))
            continue
        if sets_default:  # without default=, reset_arg leaves Megatron's flag as it is
            records[target]["reset"] = at
            for key in ("default", "expression"):
                records[target].pop(key, None)
            key = "default" if "default" in fact else "expression"
            records[target][key] = _jsonable(fact[key], at)
    megatron_texts = [(rel, (megatron_root / rel).read_text(encoding="utf-8")) for rel in sorted(megatron_files)]
    for flag, mark in read_deprecations([*slime_texts, *megatron_texts]).items():
        target = alias_of.get(flag, flag)
        if target in records:
            records[target].setdefault("deprecated", mark)
    out: dict[str, dict[str, Any]] = {f: {k: r[k] for k in _KEYS if k in r} for f, r in records.items()}
    out.update({alias: {"alias_of": flag} for alias, flag in alias_of.items() if alias not in records})
    missing, extra = sorted(names - out.keys()), sorted(f for f in out.keys() - names if f.startswith("--"))
    if missing or extra:
        raise FactsError("the argparse facts disagree with the flags read: "
                         + "; ".join(part for part in (f"no record of {', '.join(missing)}" if missing else "",
                                                       f"records of flags not read: {', '.join(extra)}" if extra
                                                       else "") if part))
    return {f: out[f] for f in sorted(out) if f.startswith("--")}
