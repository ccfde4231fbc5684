"""`acrl schema`: the JSON Schema accepts every example spec and resolved spec, rejects broken ones,
states the attrs defaults, ranges and flags, and agrees with acrl's own converter on typed values."""

from __future__ import annotations

import functools
import json
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
import tomli_w
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from acrl.compiler import parse_spec_text
from acrl.compiler._cli.main import acrl_main
from acrl.compiler._pipeline.structure import structure
from acrl.compiler._spec.schema import (
    FLAG_KEYWORD,
    OMIT_IF_KEYWORD,
    default_value,
    plain,
    schema_json,
    spec_schema,
)
from acrl.compiler._spec.tables import table_types
from conftest import EXAMPLE_SPECS, MINIMAL, REPO, merge

GOLDEN_SPECS = sorted((REPO / "tests" / "golden").glob("*/spec.toml"))
VALIDATOR = jsonschema.Draft202012Validator(spec_schema())


def errors(data: dict[str, Any]) -> list[str]:
    return sorted(e.message for e in VALIDATOR.iter_errors(data))


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = spec_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


@pytest.mark.parametrize("path", EXAMPLE_SPECS + GOLDEN_SPECS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_example_spec_and_resolved_golden_spec_is_valid(path: Path) -> None:
    assert errors(tomllib.loads(path.read_text(encoding="utf-8"))) == []


def test_there_are_example_specs_to_validate() -> None:
    assert len(EXAMPLE_SPECS) >= 3 and len(GOLDEN_SPECS) == len(EXAMPLE_SPECS)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"experiment": {"num_rollout": "8"}}, "'8' is not of type 'integer'"),
    ({"cluster": {"colocate": 1}}, "1 is not of type 'boolean'"),
    ({"train": {"lr": "1e-6"}}, "'1e-6' is not of type 'number'"),
    ({"rollout": {"batch_sise": 32}}, "Additional properties are not allowed ('batch_sise' was unexpected)"),
    ({"rollouts": {}}, "Additional properties are not allowed ('rollouts' was unexpected)"),
    ({"rollout": {"batch_size": 0}}, "0 is less than the minimum of 1"),
    ({"sglang": {"mem_fraction_static": 1.0}}, "1.0 is greater than or equal to the maximum of 1"),
    ({"rollout": {"temperature": 0}}, "0 is less than or equal to the minimum of 0"),
    ({"agentcore": {"gateway_port": 70000}}, "70000 is greater than the maximum of 65535"),
    ({"algorithm": {"advantage_estimator": "grpoo"}}, "'grpoo' is not one of ['grpo', 'gspo', 'cispo', "
                                                      "'reinforce_plus_plus', 'reinforce_plus_plus_baseline', 'ppo']"),
    ({"experiment": {"id": None}}, "'id' is a required property"),
    ({"data": None}, "'data' is a required property"),
    ({"model": {"args": {"num-layers": {"x": 1}}}}, "{'x': 1} is not of type 'boolean', 'number', 'string', 'array'"),
    ({"model": {"args": {"x": [True]}}}, "True is not of type 'number', 'string'"),
    ({"eval": {"datasets": {"gsm8k": 1}}}, "1 is not of type 'string'"),
    ({"env": {"forward": ["A", 2]}}, "2 is not of type 'string'"),
    ({"extra": {"args": "--x"}}, "'--x' is not of type 'array'"),
    ({"experiment": {"seed": -1}}, "-1 is less than the minimum of 0"),
])
def test_broken_specs_are_rejected(overrides: dict[str, Any], message: str) -> None:
    assert errors(merge(MINIMAL, overrides)) == [message]


def test_minimal_spec_is_valid() -> None:
    assert errors(dict(MINIMAL)) == []


# --- the schema says what the attrs classes say ---------------------------------------------------


def fields_with_schema() -> list[tuple[str, attrs.Attribute[Any], dict[str, Any], bool]]:
    """(dotted key, attrs field, its schema, required) for every key of every table, and of the tables inside a
    table ([kuberay.head]) instead of the table itself."""
    schema = spec_schema()
    out = []

    def add(name: str, table: Any, table_schema: dict[str, Any]) -> None:
        for field in attrs.fields(table):
            if attrs.has(field.type):
                add(f"{name}.{field.name}", field.type, table_schema["properties"][field.name])
                continue
            out.append((f"{name}.{field.name}", field, table_schema["properties"][field.name],
                        field.name in table_schema.get("required", ())))
    for name, table in table_types().items():
        add(name, table, schema["properties"][name])
    return out


FIELDS = fields_with_schema()


@pytest.mark.parametrize(("key", "field", "prop", "required"), FIELDS, ids=[f[0] for f in FIELDS])
def test_schema_default_is_the_attrs_default(key: str, field: attrs.Attribute[Any], prop: dict[str, Any],
                                             required: bool) -> None:
    default = default_value(field)
    if default is attrs.NOTHING:
        assert required and "default" not in prop
    elif default is None:  # TOML has no null: an unset key is left out, so it has no default
        assert not required and "default" not in prop
    else:
        assert not required and prop["default"] == default and type(prop["default"]) is type(default)
        assert VALIDATOR.evolve(schema=prop).is_valid(default), f"{key}: the default violates its own schema"


def test_defaults_are_what_the_converter_fills_in() -> None:
    spec, diagnostics = structure(parse_spec_text(tomli_w.dumps(MINIMAL), "minimal.toml"))
    assert spec is not None and diagnostics == []
    for key, _, prop, _required in FIELDS:
        *path, name = key.split(".")
        if path[0] not in MINIMAL or name not in MINIMAL[path[0]]:
            value = functools.reduce(getattr, path, spec)
            assert prop.get("default") == plain(getattr(value, name)), key


@pytest.mark.parametrize(("key", "field", "prop", "required"), FIELDS, ids=[f[0] for f in FIELDS])
def test_ranges_flags_and_descriptions_come_from_the_metadata(key: str, field: attrs.Attribute[Any],
                                                              prop: dict[str, Any], required: bool) -> None:
    meta = field.metadata
    for bound, keyword in (("ge", "minimum"), ("gt", "exclusiveMinimum"), ("le", "maximum"),
                           ("lt", "exclusiveMaximum")):
        assert prop.get(keyword) == meta[bound], (key, bound)
    assert prop.get(FLAG_KEYWORD) == meta["flag"]
    assert prop.get(OMIT_IF_KEYWORD, attrs.NOTHING) == meta["omit_if"]
    assert prop["description"] == " ".join(meta["doc"].split()) and prop["description"]


def test_every_table_forbids_extra_keys_as_the_converter_does() -> None:
    schema = spec_schema()
    assert schema["additionalProperties"] is False
    for name, table in schema["properties"].items():
        if name == "extends":  # a string, the one top-level key that is no table
            continue
        assert table["additionalProperties"] is False, name
        assert table["title"] == f"[{name}]"


def test_agentcore_keys_name_their_custom_config_key() -> None:
    agentcore = spec_schema()["properties"]["agentcore"]["properties"]
    assert agentcore["timeout"]["x-acrl-custom-config"] == "acr_timeout"
    assert agentcore["runtime_arn"]["x-acrl-custom-config"] == "agent_runtime_arn"
    assert spec_schema()["properties"]["experiment"]["properties"]["id"]["x-acrl-custom-config"] == "exp_id"


# --- the schema and the converter agree ---------------------------------------------------------

LEAVES = [(key.split(".")[0], key.split(".")[1]) for key, *_ in FIELDS]
ARRAYS = {(key.split(".")[0], key.split(".")[1]) for key, _, prop, _ in FIELDS if prop.get("type") == "array"}
WORD = st.text("abcdefghijklmnopqrstuvwxyz_-", min_size=1, max_size=8)
# Integral floats are left out: JSON Schema counts 2.0 as an integer, acrl does not (docs/editor.md says so).
FLOAT = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e9, max_value=1e9).filter(
    lambda f: not f.is_integer())
SCALAR = st.one_of(st.booleans(), st.integers(-3, 70000), FLOAT, st.sampled_from(
    ["", "grpo", "auto", "8", "warning", "x.y"]), WORD)
VALUE = st.one_of(SCALAR, st.lists(st.one_of(st.integers(-2, 9), FLOAT, WORD), max_size=3),
                  st.lists(st.booleans(), min_size=1, max_size=2),
                  st.dictionaries(WORD, SCALAR, max_size=2), st.dictionaries(WORD, st.dictionaries(WORD, SCALAR),
                                                                             min_size=1, max_size=1))


@settings(max_examples=300, deadline=None)
@given(changes=st.lists(st.tuples(st.sampled_from(LEAVES), VALUE), min_size=1, max_size=3))
def test_the_schema_accepts_exactly_what_the_converter_accepts(changes: list[tuple[tuple[str, str], Any]]) -> None:
    data = merge(MINIMAL, {})
    for (table, key), value in changes:
        assume(not (isinstance(value, str | dict) and (table, key) in ARRAYS))  # the converter's bug, tested below
        data.setdefault(table, {})[key] = value
    source = parse_spec_text(tomli_w.dumps(data), "spec.toml")
    spec, diagnostics = structure(source)
    assert (spec is not None) == VALIDATOR.is_valid(source.data), (diagnostics, errors(dict(source.data)))


@pytest.mark.parametrize("value", ["WANDB_ENTITY", {"WANDB_ENTITY": "x"}], ids=["string", "table"])
@pytest.mark.parametrize(("table", "key"), sorted(ARRAYS))
def test_a_non_array_for_an_array_key_is_rejected_by_the_converter_as_by_the_schema(table: str, key: str,
                                                                                   value: Any) -> None:
    data = merge(MINIMAL, {table: {key: value}})
    assert not VALIDATOR.is_valid(data)
    spec, _ = structure(parse_spec_text(tomli_w.dumps(data), "spec.toml"))
    assert spec is None


# --- the command -------------------------------------------------------------------------------


def test_acrl_schema_prints_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert acrl_main(["schema"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out) == spec_schema() and err == ""


def test_acrl_schema_o_writes_it_to_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert acrl_main(["schema", "-o", str(tmp_path / "s.json")]) == 0
    assert capsys.readouterr() == ("", "")
    assert (tmp_path / "s.json").read_text(encoding="utf-8") == schema_json()


def test_acrl_schema_o_to_an_unwritable_place_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "missing" / "s.json"
    assert acrl_main(["schema", "-o", str(target)]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"{target}: cannot write the schema: No such file or directory\n" \
                                "  fix: choose a writable path with -o\n"


# --- a real editor engine ----------------------------------------------------------------------


TAPLO = shutil.which("taplo", path=str(Path(sys.executable).parent)) or shutil.which("taplo")


def test_taplo_reads_the_schema_directive_of_docs_editor_md(tmp_path: Path) -> None:
    schema = REPO / "docs" / "acrl-spec.schema.json"
    good = tmp_path / "good.toml"
    good.write_text(f"#:schema {schema}\n" + (REPO / "specs" / "qwen3-4b-multiturn.toml").read_text(), "utf-8")
    bad = tmp_path / "bad.toml"
    bad.write_text(f"#:schema {schema}\n" + (REPO / "specs" / "gsm8k-qwen2.5-3b-smoke.toml").read_text()
                   .replace("num_rollout = 1", 'num_rollout = "1"'), "utf-8")
    assert TAPLO is not None, "taplo (the engine of Even Better TOML) comes with the test extra: pip install '.[test]'"
    ok = subprocess.run([TAPLO, "check", str(good)], capture_output=True, text=True, check=False)
    assert ok.returncode == 0, ok.stderr
    broken = subprocess.run([TAPLO, "check", str(bad)], capture_output=True, text=True, check=False)
    assert broken.returncode == 1 and '"1" is not of type "integer"' in broken.stderr
