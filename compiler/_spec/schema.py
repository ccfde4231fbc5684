"""The spec as a JSON Schema (draft 2020-12), generated from the attrs classes of ``_spec``.

TOML editors that read JSON Schema (Taplo, Even Better TOML) use it to complete and check specs;
docs/reference.md is generated from it. It states what the one cattrs converter of ``_structure``
accepts, type by type: strict primitives (an integer is not a float, "8" is not 8), Literal
enums, extra keys forbidden in every table, string tables (``[eval.datasets]``, ``[env.vars]``)
and flag tables (``[model.args]``, ``[extra.flags]``) whose values are a boolean, a number, a
string or an array of numbers and strings. ``T | None`` keys are optional without a default: TOML
has no null, so leaving the key out is how a spec says "unset".

Cross-field rules (docs/rules.md) are not in the schema; ``acrl-compile`` checks them.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, get_args, get_origin

import attrs

from .profiles import DEFAULT_INTEGRATION, INTEGRATIONS
from .setting import FUNCTION, LONGEST, MAX_STRING, VISIBLE, FlagValue, Kind
from .tables import AgentCore, Experiment, Spec

DRAFT = "https://json-schema.org/draft/2020-12/schema"
# Not in JSON Schema: the slime flag a key maps to, and the value at which acrl leaves it out.
FLAG_KEYWORD = "x-acrl-flag"
OMIT_IF_KEYWORD = "x-acrl-omit-if"
SWITCHES_KEYWORD = "x-acrl-switches"  # [[value, flag], ...]: the store-true flag each value passes (setting switches)
AT_LAUNCH_KEYWORD = "x-acrl-at-launch"  # true: train.sh decides at launch whether the flag is passed
CUSTOM_CONFIG_KEYWORD = "x-acrl-custom-config"  # the custom_config.yaml key the value is written to

_PRIMITIVE = {bool: "boolean", int: "integer", float: "number", str: "string"}
_FLAG_VALUE: dict[str, Any] = {  # maxLength bounds the strings only
    "type": ["boolean", "number", "string", "array"], "maxLength": MAX_STRING,
    "items": {"type": ["number", "string"], "maxLength": MAX_STRING},
}
_BOUNDS = (("ge", "minimum"), ("gt", "exclusiveMinimum"), ("le", "maximum"), ("lt", "exclusiveMaximum"))


def spec_schema() -> dict[str, Any]:
    """The JSON Schema of an acrl spec: a plain JSON-ready dict, in the spec's own key order."""
    root: dict[str, Any] = {
        "$schema": DRAFT,
        "title": "acrl experiment spec",
        "description": "A TOML experiment spec compiled by acrl-compile into a slime run bundle. Generated from "
                       "acrl's spec classes by `acrl schema`; cross-field rules are checked by acrl-compile.",
    }
    root.update(_table(Spec, "", custom_config_keys()))
    # A spec that extends a base need not repeat the base's tables: the top-level tables are required
    # only of a spec without extends (a required key inside a table still is; docs/spec.md).
    root["if"] = {"not": {"required": ["extends"]}}
    root["then"] = {"required": root.pop("required")}
    root["allOf"] = _integration_tables()
    root["properties"] = {"extends": _EXTENDS, **root["properties"], "sweep": _SWEEP}
    return root


def _integration_tables() -> list[dict[str, Any]]:
    """[agentcore] is required with integration "agentcore" (the default; not checked with extends, whose base may
    hold it: ACRL-I001) and not allowed with "slime" or "custom" (ACRL-I002)."""
    others = [name for name in INTEGRATIONS if name != DEFAULT_INTEGRATION]
    default = {"properties": {"experiment": {"properties": {"integration": {"const": DEFAULT_INTEGRATION}}}}}
    chosen = {"required": ["experiment"], "properties": {"experiment": {
        "required": ["integration"], "properties": {"integration": {"enum": others}}}}}
    return [{"if": {"not": {"required": ["extends"]}, **default}, "then": {"required": ["agentcore"]}},
            {"if": chosen, "then": {"not": {"required": ["agentcore"]}}}]


_EXTENDS: dict[str, Any] = {
    "type": "string", "minLength": 1,
    "description": "A base spec this one extends: a path relative to this file. Tables merge key by key with the "
                   "base's; any other value (arrays and arrays of tables included) replaces the base's.",
}
_SWEEP: dict[str, Any] = {
    "type": "object", "title": "[sweep]",
    "description": "Compile one bundle per point, under -o DIR, with an index DIR/sweep.json. The points are the "
                   "grid's cartesian product, then each table of points.",
    "properties": {
        "grid": {"type": "object", "additionalProperties": {"type": "array", "minItems": 1},
                 "description": 'Dotted spec key = array of its values, e.g. "rollout.batch_size" = [32, 64]: '
                                "every combination of the keys' values is a point."},
        "points": {"type": "array", "items": {"type": "object", "minProperties": 1},
                   "description": 'Points written out, each a table of dotted spec key = value, e.g. '
                                  '{ "rollout.temperature" = 0.7 }.'},
    },
    "additionalProperties": False,
}


def custom_config_keys() -> dict[str, str]:
    """Spec key -> the custom_config.yaml key it is written to. Found by rendering the custom config of
    a spec whose [experiment] and [agentcore] values are unique markers, so that it cannot go stale."""
    from .._pipeline.render import custom_config  # lazy: _pipeline imports _spec; at the top it is a cycle

    marks: dict[int, str] = {}
    tables: dict[str, Any] = {}
    for table, cl in (("experiment", Experiment), ("agentcore", AgentCore)):
        values: dict[str, Any] = {f.name: object() for f in attrs.fields(cl)}
        marks.update({id(mark): f"{table}.{name}" for name, mark in values.items()})
        tables[table] = cl(**values)
    data = custom_config(Spec(**tables, model=typing.cast(Any, None), data=typing.cast(Any, None)))
    return {marks[id(value)]: key for key, value in data.items() if id(value) in marks}


def _table(cl: type, path: str, written_to: Mapping[str, str]) -> dict[str, Any]:
    properties: dict[str, Any] = {}
    required: list[str] = []
    for field in attrs.fields(cl):
        properties[field.name] = _property(field, f"{path}{field.name}", written_to)
        if field.default is attrs.NOTHING:
            required.append(field.name)
    out: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        out["required"] = required
    out["additionalProperties"] = False
    return out


def _property(field: attrs.Attribute[Any], name: str, written_to: Mapping[str, str]) -> dict[str, Any]:
    tp, optional = _unwrap_optional(field.type)
    meta = field.metadata
    out: dict[str, Any] = {}
    if attrs.has(tp):
        out["title"] = f"[{field.name}]"
        out["description"] = _description(meta.get("doc") or tp.__doc__)
        out.update(_table(tp, f"{name}.", written_to))
        return out
    out["description"] = _description(meta.get("doc"))
    out.update(_value(tp, name))
    if meta.get("kind") is not None:  # the kind of the value, or of each value of a table or an array
        target = out if tp is str else out.get("additionalProperties", out.get("items", {}))
        target.update(_kind(meta["kind"]))
    if meta.get("key_kind") is not None:
        out["propertyNames"] = _kind(meta["key_kind"])
    for bound, keyword in _BOUNDS:
        if meta.get(bound) is not None:
            out[keyword] = meta[bound]
    default = default_value(field)
    if default is not attrs.NOTHING and (not optional or default is not None):  # num_rollout: 1 unless num_epoch
        out["default"] = default
    if meta.get("flag"):
        out[FLAG_KEYWORD] = meta["flag"]
    if meta.get("switches"):
        out[SWITCHES_KEYWORD] = [[value, flag] for value, flag in meta["switches"].items()]
    if meta.get("at_launch"):
        out[AT_LAUNCH_KEYWORD] = True
    if meta.get("omit_if", attrs.NOTHING) is not attrs.NOTHING:
        out[OMIT_IF_KEYWORD] = meta["omit_if"]
    if name in written_to:
        out[CUSTOM_CONFIG_KEYWORD] = written_to[name]
    return out


def _value(tp: Any, name: str) -> dict[str, Any]:
    """The schema of one value of type ``tp``, as the converter structures it."""
    if tp is FlagValue:
        return dict(_FLAG_VALUE)
    if tp is str:
        return {"type": "string", "maxLength": MAX_STRING}
    if tp in _PRIMITIVE:
        return {"type": _PRIMITIVE[tp]}
    if attrs.has(tp):  # a table inside a table or an array ([sglang.models.NAME], its server_groups)
        return {"description": _description(tp.__doc__), **_table(tp, f"{name}.", {})}
    origin = get_origin(tp)
    if origin is Literal:
        choices = list(get_args(tp))
        return {"type": _PRIMITIVE[type(choices[0])], "enum": choices}
    if origin is list:
        (item,) = get_args(tp)
        return {"type": "array", "items": _value(item, name)}
    if origin is dict:
        key, item = get_args(tp)
        if key is not str:
            raise TypeError(f"{name}: table keys are strings in TOML, not {key}")
        return {"type": "object", "additionalProperties": _value(item, name)}
    raise TypeError(f"{name}: no JSON Schema for {tp!r}; teach acrl.compiler._spec.schema this type")


def _kind(kind: Kind) -> dict[str, Any]:
    """What a string of ``kind`` matches (compiler/_pipeline/values.py checks the same; a path's limit is in bytes
    there, in characters here, the most JSON Schema can say)."""
    return {"minLength": 1, "maxLength": LONGEST[kind], "pattern": FUNCTION if kind == "function" else VISIBLE}


def _unwrap_optional(tp: Any) -> tuple[Any, bool]:
    """``T | None`` -> (T, True); FlagValue and other unions without None are left as they are."""
    if get_origin(tp) in (types.UnionType, typing.Union):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(get_args(tp)) == 2:
            return args[0], True
        if len(args) < len(get_args(tp)):
            raise TypeError(f"no JSON Schema for {tp!r}: only T | None is optional")
    return tp, False


def default_value(field: attrs.Attribute[Any]) -> Any:
    """The field's default as TOML/JSON data (a factory is called), or attrs.NOTHING when required."""
    default: Any = field.default
    factory = getattr(default, "factory", None) if isinstance(default, attrs.Factory) else None  # type: ignore[arg-type]
    if factory is not None:
        default = factory(None) if default.takes_self else factory()  # the default of a table written empty
    return default if default is attrs.NOTHING else plain(default)


def plain(value: Any) -> Any:
    """``value`` as TOML/JSON data: a table (an attrs instance) as its keys with None left out, recursively."""
    if attrs.has(type(value)):  # a table in a default ([kuberay.worker] tolerations): its keys, None left out
        return {f.name: plain(getattr(value, f.name)) for f in attrs.fields(type(value))
                if getattr(value, f.name) is not None}
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def _description(doc: str | None) -> str:
    return " ".join((doc or "").split())


def schema_json() -> str:
    """The schema as the text `acrl schema` prints and the repository ships (docs/acrl-spec.schema.json)."""
    return json.dumps(spec_schema(), indent=2, ensure_ascii=False) + "\n"


def toml_literal(value: Any) -> str:
    """``value`` as TOML writes it: how the reference docs show defaults and `acrl explain` shows values."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid TOML basic string
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, Mapping):
        items = ", ".join(f"{_toml_key(k)} = {toml_literal(v)}" for k, v in value.items())
        return f"{{ {items} }}" if items else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    raise TypeError(f"no TOML literal for {value!r}")


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else toml_literal(key)
