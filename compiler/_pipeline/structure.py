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
from cattrs.cols import list_structure_factory, mapping_structure_factory
from cattrs.errors import AttributeValidationNote, ForbiddenExtraKeysError, IterableValidationNote

from .._spec import profiles
from .._spec.setting import FlagValue
from .._spec.tables import TOOLKIT_SLIME_COMMIT, Spec
from ..errors import Diagnostic
from .parse import KeyPath, SpecSource
from .values import check_values, field_at
from .values import shown_value as shown_value  # the rules show values as the type errors do

MAX_STRING = 16_384  # characters of any string: no key needs more (a path has at most 4,095 bytes)
SUGGESTED = 200  # unknown keys of one table given a suggestion (each reads the aliases and compares spellings)

T = TypeVar("T")
_MAPPING_NOTE = "Structuring mapping value @ key "


class _Mismatch(Exception):
    """A value of the wrong type or outside an enum; carries a user-facing message and hint. ``written``: the value
    as it should be written (the user's own, in the right type), for a fix that names the key."""

    def __init__(self, message: str, hint: str = "", written: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.written = written


_TOML_TYPE = {bool: "a boolean", int: "an integer", float: "a float", str: "a string",
              list: "an array", dict: "a table"}


def _toml_type(value: object) -> str:
    for py, name in _TOML_TYPE.items():
        if type(value) is py:
            return name
    return type(value).__name__


def toml_value(value: Any) -> str:
    """``value`` as a fix writes it (compiler/_pipeline/suggest.py)."""
    from .suggest import toml_value as written  # lazy: only an error's fix writes a value

    return written(value)


def _expect(value: object, ok: bool, what: str, shape: str, written: str | None = None) -> None:
    if not ok:
        raise _Mismatch(f"expected {what}, got {_toml_type(value)} ({shown_value(value)})", f"write it as {shape}",
                        written)


def _as_number(value: object, whole: bool) -> str | None:
    """The user's value written as a TOML number, where it is one in quotes ("8", "1e-6") or a whole float."""
    if isinstance(value, str):
        try:
            number = float(value.replace("_", ""))
        except ValueError:
            return None
        if not math.isfinite(number) or (whole and not number.is_integer()):
            return None
        return str(int(number)) if whole else value.strip()
    if whole and type(value) is float and value.is_integer() and abs(value) < 2 ** 63:
        return str(int(value))
    return None


def _as_bool(value: object) -> str | None:
    if isinstance(value, str) and value.strip().lower() in ("true", "false", "yes", "no", "on", "off"):
        return "true" if value.strip().lower() in ("true", "yes", "on") else "false"
    return {0: "false", 1: "true"}.get(value) if isinstance(value, int) and type(value) is int else None


def _str(value: object, _: object) -> str:
    quoted = None
    if type(value) in (int, float, bool):
        quoted = '"' + (str(value).lower() if isinstance(value, bool) else str(value)) + '"'
    elif isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        quoted = toml_value(value[0])  # ["x"] where one string is meant
    _expect(value, isinstance(value, str), "a string", 'a quoted string, e.g. "text"', quoted)
    assert isinstance(value, str)
    if "\0" in value:
        raise _Mismatch("strings cannot contain a NUL character", "remove the \\u0000 escape")
    if len(value) > MAX_STRING:
        raise _Mismatch(f"too long: {len(value):,} characters (the limit of any string is {MAX_STRING:,})",
                        "give a shorter value: no key needs this much")
    return value


def _int(value: object, _: object) -> int:
    whole = f"a whole number: {math.floor(value)} or {math.ceil(value)}" if isinstance(value, float) and \
        math.isfinite(value) and abs(value) < 2 ** 53 else "a whole number without quotes"
    _expect(value, type(value) is int, "an integer", whole, _as_number(value, True))
    assert isinstance(value, int)
    return value


def _float(value: object, _: object) -> float:
    _expect(value, type(value) in (int, float), "a number", "a number without quotes", _as_number(value, False))
    assert isinstance(value, int | float)
    if not math.isfinite(value):
        raise _Mismatch(f"expected a finite number, got {value}", "use a finite number")
    return float(value)


def _bool(value: object, _: object) -> bool:
    _expect(value, type(value) is bool, "a boolean", "true or false, without quotes", _as_bool(value))
    assert isinstance(value, bool)
    return value


def _literal(value: object, cl: Any) -> object:
    choices = get_args(cl)
    if value in choices and type(value) is type(choices[0]):
        return value
    shown = ", ".join(repr(c).replace("'", '"') for c in choices)
    folded = {str(c).lower(): c for c in choices}
    close = [folded[str(value).lower()]] if str(value).lower() in folded else \
        difflib.get_close_matches(str(value), [str(c) for c in choices], n=1)
    hint = f'did you mean "{close[0]}"?' if close else f"use one of {shown}"
    raise _Mismatch(f"{shown_value(value)} is not one of {shown}".replace("'", '"'), hint,
                    toml_value(close[0]) if close else None)


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


def _is_dict(tp: Any) -> bool:
    return get_origin(tp) is dict


def _array_factory(tp: Any, conv: cattrs.Converter) -> Callable[[object, Any], list[Any]]:
    """cattrs' list hook, which takes any iterable (a string character by character, a table as
    its keys), behind a check that the TOML value is an array."""
    items: Callable[[object, Any], list[Any]] = list_structure_factory(tp, conv)

    def structure_array(value: object, cl: Any) -> list[Any]:
        one = toml_value([value]) if type(value) in (str, int, float) else None  # one value where a list is meant
        _expect(value, type(value) is list, "an array", 'an array in brackets, e.g. ["A", "B"]', one)
        return items(value, cl)

    return structure_array


def _table_factory(tp: Any, conv: cattrs.Converter) -> Callable[[object, Any], dict[Any, Any]]:
    """cattrs' mapping hook behind a check that the TOML value is a table (an array of paths where [eval]
    datasets are name = path pairs: "'list' object has no attribute 'items'" otherwise)."""
    pairs: Callable[[object, Any], dict[Any, Any]] = typing.cast(Any, mapping_structure_factory(tp, conv))

    def structure_table(value: object, cl: Any) -> dict[Any, Any]:
        if not isinstance(value, Mapping):
            from .suggest import table_example  # lazy: only an error's fix writes an example

            raise _Mismatch(f"expected a table of name = value pairs, got {_toml_type(value)} "
                            f"({shown_value(value)})", "write it as a table: one name = value per line under "
                            "its [table] header, or inline as { name = value }", table_example(value))
        return pairs(value, cl)

    return structure_table


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
    conv.register_structure_hook_factory(_is_dict, _table_factory)
    # Unstructuring needs none of the generated code's checks: cattrs' own field loop is as exact
    # for these classes and saves generating and compiling a function per table (~3 ms).
    conv.register_unstructure_hook_func(attrs.has, conv.unstructure_attrs_asdict)
    return conv


# A problem found while structuring: the keys it makes unknown (the key itself; for an unknown key, also the keys it
# was probably meant to be), and its diagnostic.
Found = tuple[tuple[KeyPath, ...], Diagnostic]


def structure(source: SpecSource) -> tuple[Spec | None, list[Diagnostic]]:
    """Structure ``source.data`` into a Spec. Returns (spec or None, diagnostics): None at the first error
    (compiler/_pipeline/partial.py builds what it can of an invalid spec, to check the rest)."""
    spec, found, _ = problems(source)
    return (spec, []) if not found else (None, [d for _, d in found])


def problems(source: SpecSource) -> tuple[Spec | None, list[Found], frozenset[KeyPath]]:
    """The spec (None when it has errors), every problem of structuring it in file order, and the keys whose
    problem leaves their value of the right type (a path, a name or a function refused: values.py)."""
    checked = list(check_values(source.data, Spec))
    found: list[Found] = [((path,), source.diagnostic(path, message, hint=fix)) for path, message, fix, _ in checked]
    kept = frozenset(path for path, _, _, keep in checked if keep)
    found += _missing_agentcore(source)
    try:
        spec = converter().structure(dict(source.data), Spec)
    except Exception as exc:  # cattrs raises exception groups; translate every leaf
        seen = {paths[0] for paths, _ in found}  # one error a key: a NUL byte is a path's own problem too
        leaf = [f for f in leaves(source, exc, (), Spec) if f[0][0] not in seen]
        return None, _in_file_order([*found, *leaf]), kept - {p for paths, _ in leaf for p in paths}
    if found:
        return None, found, kept
    return profiles.apply(spec, spec.experiment.integration, functools.partial(is_set, source.data)), [], kept


def _missing_agentcore(source: SpecSource) -> list[Found]:
    """[agentcore] is required with integration = "agentcore" (the default): ACRL-I001, reported with the other
    missing tables (validate/integration.py holds the rule for a Spec built otherwise)."""
    experiment = source.data.get("experiment")
    integration = experiment.get("integration", "agentcore") if isinstance(experiment, Mapping) else "agentcore"
    if integration != "agentcore" or "agentcore" in source.data:
        return []
    key = ("experiment", "integration") if ("experiment", "integration") in source.positions else ()
    return [((("agentcore",),), _at(source, key, "missing required table [agentcore]", rule="ACRL-I001", hint=(
        'add an [agentcore] table (runtime_arn = "...", s3_bucket = "..."), or set [experiment] integration = '
        '"slime" for slime\'s own rollout')))]


def is_set(data: Mapping[str, Any], path: KeyPath) -> bool:
    """Whether the spec's data (the file, its bases, --set and a sweep point, merged) sets the key ``path``: the
    integration profile (compiler/_spec/profiles.py) supplies only the keys it does not."""
    node: Any = data
    for step in path:
        if not isinstance(node, Mapping) or step not in node:
            return False
        node = node[step]
    return True


def _in_file_order(found: list[Found]) -> list[Found]:
    return sorted(found, key=lambda f: (f[1].line is None, f[1].line or 0, f[1].column or 0))


def _value_at(data: Mapping[str, Any], path: KeyPath) -> Any:
    node: Any = data
    for step in path:
        node = node[step] if isinstance(node, Mapping) and step in node else \
            node[step] if isinstance(node, list) and isinstance(step, int) and step < len(node) else None
    return node


def leaves(source: SpecSource, exc: BaseException, path: KeyPath, cl: Any) -> Iterator[Found]:
    """Every leaf error cattrs collected in ``exc`` (raised structuring the value at ``path``, of type ``cl``)."""
    if isinstance(exc, ForbiddenExtraKeysError):
        from .suggest import Suggestion, unknown_key  # lazy: only an unknown key reads the other names of keys

        known = [f.name for f in attrs.fields(exc.cl)]
        if not path:  # resolved before structuring, so never seen here, but a misspelling of them may be
            known += ["extends", "sweep"]
        slime = source.data.get("slime")
        commit = slime.get("commit") if isinstance(slime, Mapping) else None
        commit = commit if isinstance(commit, str) else TOOLKIT_SLIME_COMMIT
        for i, extra in enumerate(sorted(exc.extra_fields)):
            value = _value_at(source.data, (*path, extra))
            where = f"[{'.'.join(map(str, path))}]" if path else "the top level"
            found = unknown_key(path, extra, value, known, commit) if i < SUGGESTED else \
                Suggestion(f"keys allowed in {where}: {', '.join(known)}")
            yield ((*path, extra), *found.targets), source.diagnostic((*path, extra), f"unknown key {extra!r}",
                                                                       hint=found.hint)
    elif isinstance(exc, ExceptionGroup):
        for sub in exc.exceptions:
            step, sub_type = _step(sub, cl)
            yield from leaves(source, sub, path if step is None else (*path, step), sub_type)
    elif isinstance(exc, KeyError):
        table = ".".join(str(p) for p in path[:-1])
        where = f"[{table}]" if table else "the spec"
        missing = path[-1]
        if attrs.has(cl):
            name = ".".join(map(str, path))
            keys = "; ".join(f"{f.name} = ... ({f.metadata['doc'].rstrip('.')})" for f in attrs.fields(cl)
                             if f.default is attrs.NOTHING)
            yield (path,), _at(source, path[:-1], f"missing required table [{name}]",
                               f"add a [{name}] table" + (f" with {keys}" if keys else ""))
        else:
            doc = _doc(path)
            yield (path,), source.diagnostic(path, f"missing required key {missing!r} in {where}",
                                             hint=f"add {missing} = ... under {where}" + (f" ({doc})" if doc else ""))
    elif isinstance(exc, _Mismatch):
        yield (path,), source.diagnostic(path, exc.message, hint=_fix(path, exc))
    elif isinstance(exc, TypeError | ValueError | AttributeError) and _is_table(cl):
        name = ".".join(map(str, path))
        yield (path,), source.diagnostic(path, f"expected a table, got {_toml_type(_value_at(source.data, path))} "
                                               f"({shown_value(_value_at(source.data, path))})",
                                         hint=f"write it as a [{name}] table, its keys one per line below it")
    else:
        yield (path,), source.diagnostic(path, f"invalid value: {exc}")


def _at(source: SpecSource, path: KeyPath, message: str, hint: str, rule: str = "") -> Diagnostic:
    """A diagnostic at ``path``, or, where the spec wrote nothing to point at (a missing table), after its last line:
    where the table can be added (no line of the spec is quoted: none is wrong)."""
    if source.position(path) is not None:
        return source.diagnostic(path, message, hint=hint, rule=rule)
    lines = source.text.splitlines()
    return attrs.evolve(source.diagnostic(path, message, hint=hint, rule=rule), line=len(lines) + 1, column=1,
                        source_line="")


def _doc(path: KeyPath) -> str:
    """The doc of the key at ``path`` (its declaration's words), without the final '.'."""
    field = field_at(path)
    return str(field.metadata.get("doc", "")).rstrip(".") if field is not None else ""


def _fix(path: KeyPath, exc: _Mismatch) -> str:
    """The fix of a type error: the user's value, written right, at its own key where it has one."""
    if exc.written is None:
        return exc.hint
    key = next((step for step in reversed(path) if isinstance(step, str)), None)
    if key is None or isinstance(path[-1], int):  # an item of an array: the value alone
        return f"write it as {exc.written}"
    if exc.hint.startswith("did you mean"):
        return exc.hint
    return f"write it as {key} = {exc.written}"


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


def unstructure(spec: Spec) -> dict[str, Any]:
    """The spec as plain TOML-ready data, with None values left out (TOML has no null)."""
    return typing.cast(dict[str, Any], _drop_none(converter().unstructure(spec)))


def _drop_none(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):  # [sglang.models.NAME] server_groups: an array of tables
        return [_drop_none(v) for v in value]
    return value

