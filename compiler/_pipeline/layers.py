"""Stage 3a, resolve layers: ``extends = "base.toml"`` and ``--set KEY=VALUE``.

A spec is the top layer of a stack: the base spec it extends (and that one's base, and so on), the
spec itself, then each ``--set`` in command-line order. Layers are merged by one rule: a table
merges key by key with the table below it; any other value (an array, an array of tables, a
scalar) replaces the value below it. The result is one :class:`SpecSource` whose every key
remembers the file and line (or the ``--set``) that wrote it, so that the later stages, the error
messages and ``acrl explain`` need not know there were layers.
"""

from __future__ import annotations

import difflib
import hashlib
import os
import tomllib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args, get_origin

import attrs

from .._secrets import redact
from .._spec.tables import Spec, table_class
from ..errors import Diagnostic, SpecError, dotted
from .bundle import read_input
from .key_positions import Scanner
from .parse import (
    NO_LINE,
    KeyPath,
    SpecSource,
    Written,
    decode_spec,
    read_spec,
    toml_bounds,
    unreadable_hint,
)

EXTENDS = "extends"
MAX_BASES = 64  # specs in one extends chain: each is read whole (up to 1 MiB) and kept for messages
SWEEP = "sweep"


def load_spec(path: Path, *, data: bytes | None = None, display_name: str | None = None,
              overrides: Sequence[str] = ()) -> SpecSource:
    """Read the spec at ``path`` (``data``: its bytes, if already read), resolve its ``extends``
    chain and apply the ``--set`` overrides, in order. Raises SpecError."""
    source = read_spec(path, display_name=display_name) if data is None else \
        decode_spec(data, display_name or str(path))
    return apply_overrides(resolve_extends(source, opened=str(path)), overrides)


def resolve_extends(source: SpecSource, *, opened: str | None = None) -> SpecSource:
    """``source`` merged onto the chain of specs it extends (paths relative to the extending file).
    ``opened``: the path the spec was read from, when its display name is another."""
    if EXTENDS not in source.data:
        return source
    layers = [source]
    opened_paths = [opened or source.name]
    try:
        bases = _read_bases(layers, opened_paths)
    except SpecError as exc:  # the chain is broken: what the layers read so far can still be checked
        raise _with_own_errors(exc, layers) from None
    merged = _without_extends(layers[-1])
    for layer in reversed(layers[:-1]):
        merged = overlay(merged, _without_extends(layer), named=layer)
    return SpecSource(source.name, source.text, merged.data, merged.positions, merged.files, merged.texts,
                      bases=tuple(bases), base_paths=tuple(opened_paths[1:]))


def _with_own_errors(exc: SpecError, layers: list[SpecSource]) -> SpecError:
    """``exc`` (a base that cannot be read or merged) with the errors of the keys the layers read so far wrote
    themselves: an unknown key, a value of the wrong type or refused (a bad path or name). They are errors whatever
    the missing base holds, since a key the spec writes wins over the base's. A missing required key or table is not
    one (the base may hold it), and no rule runs: the closing line says so."""
    from .structure import is_set, problems  # lazy: structure reads the key suggestions, which import this module

    merged = _without_extends(layers[-1])
    for layer in reversed(layers[:-1]):
        merged = overlay(merged, _without_extends(layer), named=layer)
    merged = attrs.evolve(merged, data={k: v for k, v in merged.data.items() if k != SWEEP})
    own = [d for paths, d in problems(merged)[1] if is_set(merged.data, paths[0])]
    unchecked = exc.unchecked or "No other check of the spec ran, as it needs the base spec"
    return SpecError([*exc.diagnostics, *own], unchecked=unchecked)


def _read_bases(layers: list[SpecSource], opened_paths: list[str]) -> list[tuple[str, str, str]]:
    """Read the chain of bases of ``layers[0]``, appending each to ``layers`` (and the path it was opened at to
    ``opened_paths``); returns (as written, sha256, name in messages) of each. Raises SpecError."""
    seen = [os.path.realpath(opened_paths[0])]
    bases: list[tuple[str, str, str]] = []
    current = layers[0]
    while EXTENDS in current.data:
        ref = current.data[EXTENDS]
        if not isinstance(ref, str) or not ref.strip():
            shown = f"{type(ref).__name__} {ref!r}" if not isinstance(ref, str) else "an empty string"
            raise SpecError([current.diagnostic((EXTENDS,), f"expected the path of a base spec, got {shown}",
                                                hint='write extends = "base.toml", a path relative to this file')])
        here = os.path.dirname(opened_paths[-1])
        base_path = os.path.normpath(os.path.join(here, ref))
        base_name = os.path.normpath(os.path.join(os.path.dirname(current.name), ref))
        try:
            real = os.path.realpath(base_path)
        except ValueError:  # a NUL byte: no file has such a name
            real = base_path
        if len(layers) > MAX_BASES:
            raise SpecError([current.diagnostic((EXTENDS,), f"too large: an extends chain of over {MAX_BASES} specs "
                                                "(the limit)", hint="shorten the chain: merge some bases into one")])
        if real in seen:
            chain = " -> ".join([*(layer.name for layer in layers), base_name])
            raise SpecError([current.diagnostic((EXTENDS,), f"extends cycle: {chain}",
                                                hint="a spec cannot extend itself, directly or through its bases: "
                                                     "remove one extends of the cycle")])
        try:
            raw = read_input(base_path)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            hint = f"extends is a path relative to the extending file's directory ({here or '.'}): check the path, " \
                "and that the file exists and is readable"
            raise SpecError([current.diagnostic(
                (EXTENDS,), f"cannot read the base spec {base_name}: {reason}",
                hint=unreadable_hint(exc, hint) if isinstance(exc, OSError) else hint)]) from None
        current = decode_spec(raw, base_name)  # its TOML errors name the base file
        layers.append(current)
        opened_paths.append(base_path)
        seen.append(real)
        bases.append((ref, hashlib.sha256(raw).hexdigest(), base_name))
    return bases


def _without_extends(source: SpecSource) -> SpecSource:
    data = {k: v for k, v in source.data.items() if k != EXTENDS}
    positions = {p: pos for p, pos in source.positions.items() if p[0] != EXTENDS}
    return SpecSource(source.name, source.text, data, positions, source.files, source.texts,
                      source.bases, source.overrides, source.base_paths)


def overlay(lower: SpecSource, upper: SpecSource, *, named: SpecSource) -> SpecSource:
    """``upper`` merged onto ``lower`` (tables merge key by key, other values replace), named and
    with the text and inputs of ``named`` (one of the two)."""
    positions = dict(lower.positions)
    files = {p: lower.written_by(p) for p in lower.positions}
    replaced = list(_replaced(lower.data, upper.data, ()))
    if replaced:
        prefixes = set(replaced)
        for path in [p for p in positions if any(p[:n] in prefixes for n in range(1, len(p) + 1))]:
            del positions[path]
            del files[path]
    for path, pos in upper.positions.items():
        positions[path] = pos
        files[path] = upper.written_by(path)
    texts = {**lower.texts, **upper.texts}
    for layer in (lower, upper):
        if layer is not named and layer.text:
            texts[layer.name] = layer.text
    return SpecSource(named.name, named.text, merge_data(lower.data, upper.data), positions,
                      {p: w for p, w in files.items() if w != Written(named.name)}, texts, named.bases,
                      (*lower.overrides, *upper.overrides), named.base_paths)


def merge_data(lower: Mapping[str, Any], upper: Mapping[str, Any]) -> dict[str, Any]:
    """``upper`` on ``lower``: tables merge key by key; every other value replaces."""
    out = dict(lower)
    for key, value in upper.items():
        below = out.get(key)
        out[key] = merge_data(below, value) if isinstance(below, Mapping) and isinstance(value, Mapping) else value
    return out


def _replaced(lower: Mapping[str, Any], upper: Mapping[str, Any], path: KeyPath) -> Iterator[KeyPath]:
    """The paths of every value of ``upper`` that replaces what is below it: any value that is not a
    table, and a table laid on a value that is not one (``--set rollout.batch_size.x=1``)."""
    for key, value in upper.items():
        below = lower.get(key)
        if isinstance(value, Mapping) and (below is None or isinstance(below, Mapping)):
            yield from _replaced(below or {}, value, (*path, key))
        else:
            yield (*path, key)


# --- --set KEY=VALUE ---


def apply_overrides(source: SpecSource, overrides: Sequence[str]) -> SpecSource:
    """``source`` with each ``--set KEY=VALUE`` applied on top, in order. Raises SpecError listing
    every malformed one."""
    layers: list[SpecSource] = []
    problems: list[Diagnostic] = []
    for arg in overrides:
        try:
            layers.append(override_layer(arg))
        except SpecError as exc:
            problems += exc.diagnostics
    if problems:
        raise SpecError(problems)
    for layer in layers:
        source = overlay(source, layer, named=source)
    return source


def override_layer(arg: str, *, origin: str = "--set") -> SpecSource:
    """A one-key layer for ``--set KEY=VALUE``: VALUE is a TOML value."""
    where = f"{origin} {arg}"
    path, value = parse_assignment(arg, where=where)
    if path[0] == EXTENDS:
        raise SpecError([Diagnostic("error", "extends cannot be set on the command line", file=where, key=EXTENDS,
                                    hint="write extends = \"base.toml\" in the spec, or compile the base itself with "
                                         "--set for the keys to change")])
    if path[0] not in {f.name for f in attrs.fields(Spec)} | {SWEEP}:
        # the table is unknown: a did-you-mean across tables (optimizer.lr -> train.lr), which the
        # structuring stage, seeing only the top level, cannot give
        problem = key_problem(path)
        if problem is not None:
            raise SpecError([Diagnostic("error", problem[0], file=where, key=dotted(path), hint=problem[1])])
    return layer(path, value, where, origin=origin)


def layer(path: KeyPath, value: Any, where: str, *, origin: str) -> SpecSource:
    """A layer that sets one key from the command line: written by ``where`` (``--set KEY=VALUE``), no line."""
    data: Any = value
    for step in reversed(path):
        data = {step: data}
    return SpecSource(where, "", data, {path: NO_LINE}, {path: Written(where, "set")}, {},
                      overrides=((dotted(path), value, origin),))


def parse_assignment(arg: str, *, where: str) -> tuple[KeyPath, Any]:
    """``KEY=VALUE`` -> (key path, value). KEY is a TOML key (dotted, parts may be quoted)."""
    def fail(message: str, hint: str, key: str = "") -> SpecError:
        return SpecError([Diagnostic("error", message, file=where, key=key, hint=hint)])

    key_hint = "write --set TABLE.KEY=VALUE, e.g. --set rollout.batch_size=64"
    try:
        path, end = parse_key(arg)
    except ValueError:
        raise fail("expected KEY=VALUE, with a TOML key", key_hint) from None
    if end >= len(arg) or arg[end] != "=":
        raise fail("expected KEY=VALUE, with a TOML key", key_hint)
    text = arg[end + 1:].strip()
    shown = dotted(path)
    bounds = toml_bounds(text)
    if bounds is not None:
        raise fail(bounds[0], bounds[1], shown)
    try:
        parsed = tomllib.loads(f"value = {text}")
    except tomllib.TOMLDecodeError:
        parsed = {}
    if set(parsed) != {"value"}:
        secret = redact(arg) != arg  # a secret-named key or a secret-shaped value: never echoed
        what = "an empty value" if not text else "the value is not a TOML value" if secret else \
            f"{text!r} is not a TOML value"
        raise fail(f"{what} (a string must be quoted)",
                   f"quote strings: --set '{shown}=\"value\"'; numbers, true/false, [arrays] and {{tables}} "
                   "are written as in TOML", shown)
    return path, parsed["value"]


def parse_key(text: str) -> tuple[KeyPath, int]:
    """The TOML key at the start of ``text`` and the offset after it. Raises ValueError."""
    scanner = Scanner(text)
    try:
        parts = scanner.key()
        scanner.skip_ws(False)
        # the scanner walks text tomllib has validated: a '#' would start a comment, a """ key pass
        tomllib.loads(f"{text[:scanner.i]} = 0")
    except (tomllib.TOMLDecodeError, IndexError):
        raise ValueError(text) from None
    if not parts:
        raise ValueError(text)
    return tuple(name for name, _ in parts), scanner.i


def _spec_keys(tp: Any = Spec, prefix: str = "") -> list[str]:
    """Every dotted key of a spec's tables (``train.lr``), for a did-you-mean across tables."""
    out: list[str] = []
    for field in attrs.fields(tp):
        if (table := table_class(field.type)) is not None:
            out += _spec_keys(table, f"{prefix}{field.name}.")
        else:
            out.append(prefix + field.name)
    return out


def key_problem(path: KeyPath) -> tuple[str, str] | None:
    """(message, fix) when ``path`` names no key a spec can have; did-you-mean for a misspelling."""
    tp: Any = Spec
    for n, step in enumerate(path):
        if (cls := table_class(tp)) is not None:
            fields = {f.name: f.type for f in attrs.fields(cls)}
            if step not in fields:
                close = difflib.get_close_matches(str(step), list(fields), n=1, cutoff=0.6)
                table = f"[{dotted(path[:n])}]" if n else "the top level"
                same_leaf = [k for k in _spec_keys() if k.rsplit(".", 1)[-1] == str(path[-1])]
                hint = f'did you mean "{dotted((*path[:n], close[0]))}"?' if close else \
                    f'did you mean "{same_leaf[0]}"?' if len(same_leaf) == 1 else \
                    f"keys allowed in {table}: {', '.join(fields)}"
                return f"unknown key {dotted(path)!r}", hint
            tp = fields[step]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            return f"{dotted(path[:n])} is not a table, so {dotted(path)!r} is no key", \
                f"sweep {dotted(path[:n])} itself"
    if table_class(tp) is not None:
        return f"[{dotted(path)}] is a table", f"sweep one of its keys, e.g. \"{dotted(path)}.KEY\""
    return None
