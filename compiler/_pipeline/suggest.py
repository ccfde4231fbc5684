"""What an unknown key was meant to be: the fix of an "unknown key" error, and the keys it names.

In order, the first that applies: the same table's key written with '-' or another case; another name of a key
(SlimeRunner's fields, slime's flags, short names such as tp: compiler/_spec/aliases.py, compiler/_spec/flag_index.py);
the same name in other tables (``lr`` under [rollout] is [train] lr); a slime flag that no key owns ([extra.flags]);
a close spelling in the same table, then in the others. A name that could mean several keys names them all, and a
SlimeRunner name whose words mislead says what it meant (``num_gpus`` is the node's GPUs, never the rollout's). The
fix writes the user's own value at the key it suggests. ``targets`` are the keys the user probably meant to set: the
compile does not trust their defaults (compiler/_pipeline/partial.py).
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from .._spec.aliases import DERIVED, SHORT_NAMES, SLIME_RUNNER, SLIME_RUNNER_MEANING, TABLE_NAMES
from .._spec.schema import toml_literal
from .._spec.tables import table_types
from .parse import KeyPath

SHOWN = 60  # the most characters of a value a fix shows


@attrs.frozen
class Suggestion:
    hint: str
    targets: tuple[KeyPath, ...] = ()


def toml_value(value: Any) -> str:
    """``value`` as TOML writes it on one line (``1e-06``, ``"text"``, ``[1, 2]``, ``{ a = "x" }``), cut to SHOWN
    characters."""
    try:
        text = toml_literal(value)
    except TypeError:
        text = repr(value)
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def _normal(name: str) -> str:
    return name.strip().lower().replace("-", "_").lstrip("_")


def unknown_key(table: KeyPath, name: str, value: Any, known: Sequence[str], commit: str) -> Suggestion:
    """The fix for the unknown key ``name`` (holding ``value``) of the table at ``table`` (``()``: the top level),
    whose keys are ``known``. ``commit``: the targeted slime commit, whose flags an [extra.flags] fix may name."""
    norm = _normal(name)
    if not norm:
        return Suggestion(f"an empty key name: remove it; keys allowed here: {', '.join(known)}")
    if not table and isinstance(value, Mapping):  # a table
        tables = list(table_types())
        close = [t for t in tables if t == norm] or ([TABLE_NAMES[norm]] if norm in TABLE_NAMES else []) or \
            difflib.get_close_matches(name, tables, n=1, cutoff=0.6)
        if close:
            return Suggestion(f'did you mean "{close[0]}"?', ((close[0],),))
        return Suggestion(f"tables allowed: {', '.join(tables)}")
    same = next((k for k in known if _normal(k) == norm), None)
    if same is not None:
        return Suggestion(f'did you mean "{same}"?', ((*table, same),))
    owners = [t for t in _owners().get(norm, ()) if (t,) != table]
    if len(owners) == 1:
        here = f", not of [{'.'.join(map(str, table))}]" if table else ", not a top-level key"
        return Suggestion(f"{norm} is a key of [{owners[0]}]{here}: write {_written(norm, value)} under "
                          f"[{owners[0]}]", ((owners[0], norm),))
    if owners:
        shown = " and ".join(f"[{t}]" for t in owners)
        return Suggestion(f"{norm} is a key of {shown}: write {_written(norm, value)} under the table you mean",
                          tuple((t, norm) for t in owners))
    if norm in DERIVED:
        return Suggestion(DERIVED[norm].format(value=toml_value(value)), (("train", "num_steps_per_rollout"),))
    found = _alias(norm)
    if found is not None:
        target, subject = found
        return _move(table, value, target, subject)
    hatch = _slime_flag(norm, commit)
    if hatch is not None:
        return Suggestion(f"no spec key sets slime's {hatch}: pass it in the escape hatch, as "
                          f'"{hatch}" = {toml_value(value)} under [extra.flags]')
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    if close:
        return Suggestion(f'did you mean "{close[0]}"?', ((*table, close[0]),))
    anywhere = difflib.get_close_matches(norm, list(_all_keys()), n=2, cutoff=0.8)
    if anywhere:
        shown = " or ".join(f"[{k.rpartition('.')[0]}] {k.rpartition('.')[2]}" for k in anywhere)
        return Suggestion(f"did you mean {shown}?", tuple(tuple(k.split(".")) for k in anywhere))
    where = f"[{'.'.join(map(str, table))}]" if table else "the top level"
    return Suggestion(f"keys allowed in {where}: {', '.join(known)}")


def _alias(norm: str) -> tuple[str, str] | None:
    """(the spec key, the user's word as the fix names it) for another name of a key."""
    if norm in SLIME_RUNNER:
        return SLIME_RUNNER[norm], SLIME_RUNNER_MEANING.get(norm, f"SlimeRunner's {norm}")
    if norm in SHORT_NAMES:
        return SHORT_NAMES[norm], norm
    from .._spec.flag_index import flag_index  # lazy: only an unknown key reads the flags' index

    flag = "--" + norm.replace("_", "-")
    key = flag_index().get(flag)
    return (key.path, f"slime's {flag}") if key is not None else None


def _written(key: str, value: Any) -> str:
    return key if isinstance(value, Mapping) else f"{key} = {toml_value(value)}"


def _move(table: KeyPath, value: Any, target: str, subject: str) -> Suggestion:
    """The fix that writes ``value`` at ``target`` ("table.key")."""
    to_table, _, key = target.partition(".")
    path = (to_table, key)
    if (to_table,) == table:
        return Suggestion(f'did you mean "{key}"? {subject} is {key} here: write {_written(key, value)}', (path,))
    return Suggestion(f"{subject} is [{to_table}] {key} in a spec: write {_written(key, value)} under [{to_table}]",
                      (path,))


def _slime_flag(norm: str, commit: str) -> str | None:
    """``--norm-with-dashes`` when the targeted slime (or Megatron-LM) defines it."""
    from .._slime.commit_facts import commit_facts  # lazy: only an unknown key reads a commit's flags

    facts = commit_facts(commit)
    flag = "--" + norm.replace("_", "-")
    return flag if facts is not None and flag in facts.flags else None


@functools.cache
def _owners() -> dict[str, tuple[str, ...]]:
    """Each key name and the tables that have it."""
    out: dict[str, tuple[str, ...]] = {}
    for t, cls in table_types().items():
        for f in attrs.fields(cls):
            out[f.name] = (*out.get(f.name, ()), t)
    return out


@functools.cache
def _all_keys() -> list[str]:
    return [f"{t}.{f.name}" for t, cls in table_types().items() for f in attrs.fields(cls)]


def table_example(value: object) -> str | None:
    """An array of strings written as the table of name = value pairs it was meant to be, or None: ``NAME=VALUE``
    items split at '=' (["A=1"] is { A = "1" }), a path named by its stem (["/data/gsm8k/test.jsonl"] is
    { gsm8k = "/data/gsm8k/test.jsonl" })."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) for v in value):
        return None
    if value[0].startswith("--"):  # an argument list, as a train.sh passes flags: [extra.flags]' name = value pairs
        flags = _flags(value)
        text = toml_literal(flags)
        return text if len(text) <= 4 * SHOWN else None
    pairs = dict(_pair(v) for v in value)
    return toml_value(pairs) if len(pairs) == len(value) else None


def _flags(argv: list[str]) -> dict[str, Any]:
    """["--apply-chat-template", "--rm-type", "deepscaler"] as { apply-chat-template = true, rm-type = "deepscaler" }:
    a flag alone is true, one value is the value, several a list (as [extra.flags] passes them back)."""
    from .._spec.flags import parse_flags  # lazy: as table_example, only an error's fix reads it

    return {flag[2:]: True if not values else values[0] if len(values) == 1 else values
            for flag, values in parse_flags(argv).items()}


def _pair(item: str) -> tuple[str, str]:
    name, equals, rest = item.partition("=")
    if equals and name.strip() and name.strip().replace("_", "").replace("-", "").isalnum():
        return name.strip(), rest.strip()
    return _stem(item), item


def _stem(path: str) -> str:
    """A name for a dataset path: its file name without extensions, or its directory's where that is a split's name
    (/data/aime.jsonl -> aime, /data/gsm8k/test.jsonl -> gsm8k)."""
    parts = [p for p in path.split("/") if p]
    name = parts[-1].split(".")[0] if parts else ""
    if name.lower() in ("test", "train", "eval", "val", "valid", "validation", "dev", "data") and len(parts) > 1:
        name = parts[-2]
    return name if name.replace("_", "").replace("-", "").isalnum() else "name"
