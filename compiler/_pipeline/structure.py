"""Stage 2, structure: TOML data -> frozen attrs classes, with every error reported at once.

One cattrs converter, configured here and nowhere else: extra keys are forbidden, primitives are
strict (TOML already has types: "8" is not 8, and true is not 1), and the detailed validation
errors cattrs collects are translated into diagnostics that point at the key's line.
"""

from __future__ import annotations

import ast
import difflib
import functools
import math
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Literal, TypeVar, get_args, get_origin

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.errors import AttributeValidationNote, ForbiddenExtraKeysError, IterableValidationNote

from .._spec import profiles
from .._spec.setting import FlagValue
from .._spec.tables import Spec, table_class
from ..errors import Diagnostic
from .parse import KeyPath, SpecSource

T = TypeVar("T")
_MAPPING_NOTE = "Structuring mapping value @ key "


class _Mismatch(Exception):
    """A value of the wrong type or outside an enum; carries a user-facing message and hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


_TOML_TYPE = {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
              list: "an array", dict: "a table"}


def _toml_type(value: object) -> str:
    for py, name in _TOML_TYPE.items():
        if type(value) is py:
            return name
    return type(value).__name__


SHOWN = 60  # the most characters of a value a message shows


def shown_value(value: object) -> str:
    """``value`` as a message shows it: repr, cut to SHOWN characters (an integer of any size, a
    string of a megabyte: the message stays a line)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** SHOWN:
        digits = len(str(abs(value))) if abs(value).bit_length() < 14_000 else "over 4,000"
        return f"{'a negative' if value < 0 else 'an'} integer of {digits} digits"
    text = repr(value) if not isinstance(value, float) else f"{value:g}"
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def _expect(value: object, ok: bool, what: str, example: str) -> None:
    if not ok:
        raise _Mismatch(f"expected {what}, got {_toml_type(value)} ({shown_value(value)})",
                        f"write it as {example}")


def _str(value: object, _: object) -> str:
    _expect(value, isinstance(value, str), "a string", 'a quoted string, e.g. "text"')
    assert isinstance(value, str)
    if "\0" in value:
        raise _Mismatch("strings cannot contain a NUL character", "remove the \\u0000 escape")
    return value


def _int(value: object, _: object) -> int:
    _expect(value, type(value) is int, "an integer", "a whole number without quotes, e.g. 8")
    assert isinstance(value, int)
    return value


def _float(value: object, _: object) -> float:
    _expect(value, type(value) in (int, float), "a number", "a number without quotes, e.g. 0.5")
    assert isinstance(value, int | float)
    if not math.isfinite(value):
        raise _Mismatch(f"expected a finite number, got {value}", "use a finite number")
    return float(value)


def _bool(value: object, _: object) -> bool:
    _expect(value, type(value) is bool, "a boolean", "true or false, without quotes")
    assert isinstance(value, bool)
    return value


def _literal(value: object, cl: Any) -> object:
    choices = get_args(cl)
    if value in choices and type(value) is type(choices[0]):
        return value
    shown = ", ".join(repr(c).replace("'", '"') for c in choices)
    close = difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
    hint = f'did you mean "{close[0]}"?' if close else f"use one of {shown}"
    raise _Mismatch(f"{shown_value(value)} is not one of {shown}".replace("'", '"'), hint)


def _flag_value(value: object, _: object) -> FlagValue:
    if type(value) in (bool, int, str):
        return typing.cast(FlagValue, _str(value, None) if isinstance(value, str) else value)
    if type(value) is float:
        return _float(value, None)
    if isinstance(value, list) and all(type(v) in (int, float, str) for v in value):
        for v in value:
            if isinstance(v, str):
                _str(v, None)
        return list(value)
    raise _Mismatch(f"expected a flag value (boolean, number, string or array of them), got "
                    f"{_toml_type(value)}", "true for a store-true flag, or the flag's value")


def _is_literal(tp: Any) -> bool:
    return get_origin(tp) is Literal


def _is_list(tp: Any) -> bool:
    return get_origin(tp) is list


def _array_factory(tp: Any, conv: cattrs.Converter) -> Callable[[object, Any], list[Any]]:
    """cattrs' list hook, which takes any iterable (a string character by character, a table as
    its keys), behind a check that the TOML value is an array."""
    items: Callable[[object, Any], list[Any]] = list_structure_factory(tp, conv)

    def structure_array(value: object, cl: Any) -> list[Any]:
        _expect(value, type(value) is list, "an array", 'an array in brackets, e.g. ["A", "B"]')
        return items(value, cl)

    return structure_array


@functools.cache
def converter() -> cattrs.Converter:
    """The one converter of acrl specs."""
    conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
    conv.register_structure_hook(str, _str)
    conv.register_structure_hook(int, _int)
    conv.register_structure_hook(float, _float)
    conv.register_structure_hook(bool, _bool)
    conv.register_structure_hook(FlagValue, _flag_value)
    conv.register_structure_hook_func(_is_literal, _literal)
    conv.register_structure_hook_factory(_is_list, _array_factory)
    # Unstructuring needs none of the generated code's checks: cattrs' own field loop is as exact
    # for these classes and saves generating and compiling a function per table (~3 ms).
    conv.register_unstructure_hook_func(attrs.has, conv.unstructure_attrs_asdict)
    return conv


def structure(source: SpecSource) -> tuple[Spec | None, list[Diagnostic]]:
    """Structure ``source.data`` into a Spec. Returns (spec or None, diagnostics)."""
    ranges = [*_range_diagnostics(source, source.data, Spec, ()), *_path_diagnostics(source)]
    ranges += _missing_agentcore(source)
    try:
        spec = converter().structure(dict(source.data), Spec)
    except Exception as exc:  # cattrs raises exception groups; translate every leaf
        return None, _in_file_order([*_diagnostics(source, exc, (), Spec), *ranges])
    if ranges:
        return None, ranges
    return profiles.apply(spec, spec.experiment.integration, functools.partial(is_set, source.data)), []


def _missing_agentcore(source: SpecSource) -> list[Diagnostic]:
    """[agentcore] is required with integration = "agentcore" (the default): ACRL-I001, reported with the other
    missing tables (validate/integration.py holds the rule for a Spec built otherwise)."""
    experiment = source.data.get("experiment")
    integration = experiment.get("integration", "agentcore") if isinstance(experiment, Mapping) else "agentcore"
    if integration != "agentcore" or "agentcore" in source.data:
        return []
    key = ("experiment", "integration") if ("experiment", "integration") in source.positions else ()
    return [source.diagnostic(key, "missing required table [agentcore]", rule="ACRL-I001", hint=(
        'add an [agentcore] table, or set [experiment] integration = "slime" for slime\'s own rollout'))]


def is_set(data: Mapping[str, Any], path: KeyPath) -> bool:
    """Whether the spec's data (the file, its bases, --set and a sweep point, merged) sets the key ``path``: the
    integration profile (compiler/_spec/profiles.py) supplies only the keys it does not."""
    node: Any = data
    for step in path:
        if not isinstance(node, Mapping) or step not in node:
            return False
        node = node[step]
    return True


def _in_file_order(diagnostics: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.line is None, d.line or 0, d.column or 0))


def _diagnostics(source: SpecSource, exc: BaseException, path: KeyPath, cl: Any) -> Iterator[Diagnostic]:
    if isinstance(exc, ForbiddenExtraKeysError):
        known = [f.name for f in attrs.fields(exc.cl)]
        if not path:  # resolved before structuring, so never seen here, but a misspelling of them may be
            known += ["extends", "sweep"]
        for extra in sorted(exc.extra_fields):
            close = difflib.get_close_matches(extra, known, n=1, cutoff=0.6)
            table = ".".join(str(p) for p in path)
            where = f"[{table}]" if table else "the top level"
            hint = f'did you mean "{close[0]}"?' if close else f"keys allowed in {where}: {', '.join(known)}"
            yield source.diagnostic((*path, extra), f"unknown key {extra!r}", hint=hint)
    elif isinstance(exc, ExceptionGroup):
        for sub in exc.exceptions:
            step, sub_type = _step(sub, cl)
            yield from _diagnostics(source, sub, path if step is None else (*path, step), sub_type)
    elif isinstance(exc, KeyError):
        table = ".".join(str(p) for p in path[:-1])
        where = f"[{table}]" if table else "the spec"
        missing = path[-1]
        if attrs.has(cl):
            yield source.diagnostic(path[:-1], f"missing required table [{'.'.join(map(str, path))}]",
                                    hint=f"add a [{'.'.join(map(str, path))}] table")
        else:
            yield source.diagnostic(path, f"missing required key {missing!r} in {where}",
                                    hint=f"add {missing} = ... under {where}")
    elif isinstance(exc, _Mismatch):
        yield source.diagnostic(path, exc.message, hint=exc.hint)
    elif isinstance(exc, TypeError | ValueError | AttributeError) and _is_table(cl):
        yield source.diagnostic(path, f"expected a table, got {exc}", hint="write it as a [table]")
    else:
        yield source.diagnostic(path, f"invalid value: {exc}")


def _step(exc: BaseException, cl: Any) -> tuple[str | int | None, Any]:
    """The key or index a cattrs validation note says ``exc`` happened at, and the type there."""
    for note in getattr(exc, "__notes__", ()):
        if isinstance(note, AttributeValidationNote):
            return note.name, note.type
        if isinstance(note, IterableValidationNote):
            return note.index, None
        if isinstance(note, str) and note.startswith(_MAPPING_NOTE):
            key = note[len(_MAPPING_NOTE):]
            try:
                return str(ast.literal_eval(key)), None
            except (ValueError, SyntaxError):
                return key, None
    return None, cl


def _is_table(cl: Any) -> bool:
    return cl is not None and (attrs.has(cl) or get_origin(cl) is dict)


def _range_diagnostics(source: SpecSource, data: Any, cl: Any, path: KeyPath) -> Iterator[Diagnostic]:
    """Check the ge/gt/le/lt bounds of every numeric value, on the raw data, so that range errors
    are reported together with type errors."""
    if not isinstance(data, Mapping):
        return
    for field in attrs.fields(cl):
        if field.name not in data:
            continue
        value = data[field.name]
        here = (*path, field.name)
        inner = _attrs_class(field.type)
        if inner is not None:
            yield from _range_diagnostics(source, value, inner, here)
            continue
        if not isinstance(value, int | float) or isinstance(value, bool):
            continue
        for bound, test, word in (("ge", value.__ge__, "at least"), ("gt", value.__gt__, "greater than"),
                                  ("le", value.__le__, "at most"), ("lt", value.__lt__, "less than")):
            limit = field.metadata.get(bound)
            if limit is not None and not test(limit):
                yield source.diagnostic(here, f"must be {word} {limit:g}, got {shown_value(value)}",
                                        hint=f"set {field.name} to a value {word} {limit:g}")


# Keys whose value is a file system path (on the cluster, and some read here too: [slime] dir,
# [model] dir's config.json, hf_config). A path the system cannot name is refused at its key rather
# than failing in an os call ("File name too long").
PATH_KEYS: tuple[KeyPath, ...] = (
    ("model", "dir"), ("model", "ref_load"), ("model", "hf_config"), ("data", "path"), ("slime", "dir"),
    ("slime", "megatron_dir"), ("checkpoint", "save"), ("checkpoint", "save_hf"), ("cuda", "home"),
    ("eval", "datasets", "*"))
NAME_MAX = 255  # bytes of one path component (Linux, and most file systems)
PATH_MAX = 4095  # bytes of a whole path (Linux's 4096 with the terminating NUL)


def _path_diagnostics(source: SpecSource) -> Iterator[Diagnostic]:
    """A located error for every path key whose value no file system accepts as a name."""
    for key in PATH_KEYS:
        for path, value in _values_at(source.data, key, ()):
            if not isinstance(value, str):
                continue  # the type error is reported by structuring
            size = len(value.encode("utf-8", "surrogatepass"))
            longest = max((len(part.encode("utf-8", "surrogatepass")) for part in value.split("/")), default=0)
            if size > PATH_MAX:
                yield source.diagnostic(path, f"path too long: {size:,} bytes (the limit is {PATH_MAX:,})",
                                        hint="give a shorter path")
            elif longest > NAME_MAX:
                yield source.diagnostic(path, f"path component too long: {longest:,} bytes between two '/' "
                                        f"(the limit is {NAME_MAX})", hint="give a path whose every name is "
                                        f"at most {NAME_MAX} bytes")


def _values_at(data: Any, key: KeyPath, path: KeyPath) -> Iterator[tuple[KeyPath, Any]]:
    if not key:
        yield path, data
        return
    if not isinstance(data, Mapping):
        return
    steps = list(data) if key[0] == "*" else [key[0]] if key[0] in data else []
    for step in steps:
        yield from _values_at(data[step], key[1:], (*path, step))


def _attrs_class(tp: Any) -> Any:
    return table_class(tp)  # [agentcore]'s ``AgentCore | None`` too


def unstructure(spec: Spec) -> dict[str, Any]:
    """The spec as plain TOML-ready data, with None values left out (TOML has no null)."""
    return typing.cast(dict[str, Any], _drop_none(converter().unstructure(spec)))


def _drop_none(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):  # [sglang.models.NAME] server_groups: an array of tables
        return [_drop_none(v) for v in value]
    return value

