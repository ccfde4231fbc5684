"""--set KEY=VALUE: a TOML value, checked exactly as the file's values are, and recorded."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from acrl.compiler import compile_spec
from acrl.compiler._cli.main import acrl_main, compile_main
from acrl.compiler._pipeline.layers import parse_assignment
from acrl.compiler._review.explain import explain_path
from acrl.compiler.errors import SpecError, dotted
from conftest import SpecWriter


def errors(spec: Path, *overrides: str) -> list[Any]:
    with pytest.raises(SpecError) as caught:
        compile_spec(spec, overrides=overrides)
    return [d for d in caught.value.diagnostics if d.severity == "error"]


@pytest.mark.parametrize(("arg", "path", "value"), [
    ("rollout.batch_size=64", ("rollout", "batch_size"), 64),
    ('eval.datasets.gsm8k="/data/test.jsonl"', ("eval", "datasets", "gsm8k"), "/data/test.jsonl"),
    ("env.forward=['A', 'B']", ("env", "forward"), ["A", "B"]),
    ("model.args = {num-layers = 2}", ("model", "args"), {"num-layers": 2}),
    ('eval.datasets."a.b" = "/x"', ("eval", "datasets", "a.b"), "/x"),
    ("train.lr=3e-6", ("train", "lr"), 3e-6),
    ("cluster.colocate=false", ("cluster", "colocate"), False),
])
def test_the_value_is_parsed_as_toml(arg: str, path: tuple[str, ...], value: Any) -> None:
    assert parse_assignment(arg, where="--set") == (path, value)


def test_overrides_are_applied_in_order_and_recorded_in_the_manifest(write_spec: SpecWriter) -> None:
    spec = write_spec({"rollout": {"batch_size": 16}})
    bundle = compile_spec(spec, overrides=["rollout.batch_size=64", 'eval.datasets.gsm8k="/data/test.jsonl"',
                                           "eval.interval=5", "rollout.batch_size=48"])
    assert bundle.spec.rollout.batch_size == 48 and bundle.spec.eval.datasets == {"gsm8k": "/data/test.jsonl"}
    manifest = json.loads(bundle.files["manifest.json"])
    assert manifest["overrides"] == [
        {"key": "rollout.batch_size", "value": 64, "from": "--set"},
        {"key": "eval.datasets.gsm8k", "value": "/data/test.jsonl", "from": "--set"},
        {"key": "eval.interval", "value": 5, "from": "--set"},
        {"key": "rollout.batch_size", "value": 48, "from": "--set"},
    ]
    resolved = tomllib.loads(bundle.files["spec.toml"].decode())
    assert resolved["rollout"]["batch_size"] == 48  # spec.toml is the spec with the overrides applied
    assert "overrides" not in json.loads(compile_spec(spec).files["manifest.json"])  # only when there are any


def test_a_bare_word_is_an_error_that_says_to_quote_it(write_spec: SpecWriter) -> None:
    (error,) = errors(write_spec(), "data.path=/data/x.jsonl")
    assert error.file == "--set data.path=/data/x.jsonl" and error.line is None and error.key == "data.path"
    assert "quote strings: --set 'data.path=\"value\"'" in error.hint


@pytest.mark.parametrize("arg", ["rollout.batch_size", "=3", "rollout..x=1", "rollout.batch_size=", "a=1\nb=2",
                                 'extends="base.toml"', "#x=1", "rollout.#=1", '"""batch_size"""=1'])
def test_malformed_assignments_are_errors(write_spec: SpecWriter, arg: str) -> None:
    (error,) = errors(write_spec(), arg)
    assert error.file == f"--set {arg}"


def test_a_value_of_the_wrong_type_points_at_the_set(write_spec: SpecWriter,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec()
    assert compile_main([str(spec), "--set", 'rollout.batch_size="64"', "--set", "rollout.batch_sise=3",
                         "--set", "train.lr=0", "-o", str(spec.parent / "out")]) == 1
    err = capsys.readouterr().err
    assert '--set rollout.batch_size="64": error: [rollout] batch_size: expected an integer, got a string' in err
    assert "--set rollout.batch_sise=3: error: [rollout] batch_sise: unknown key 'batch_sise'\n" \
           '  fix: did you mean "batch_size"?' in err
    assert "--set train.lr=0: error: [train] lr: must be greater than 0" in err
    assert "3 errors; nothing was written." in err and not (spec.parent / "out").exists()


def test_a_rule_error_caused_by_a_set_points_at_it(write_spec: SpecWriter) -> None:
    (error,) = errors(write_spec(), "eval.interval=5")  # an interval without datasets
    assert error.rule == "ACRL-E001" and error.file == "--set eval.interval=5"


def test_explain_says_a_value_came_from_its_set(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec()
    origins = {i.name: i.origin for i in explain_path(spec, ["rollout.temperature=0.5"]).keys}
    assert (origins["rollout.temperature"].kind, origins["rollout.temperature"].text) == \
        ("set", "--set rollout.temperature=0.5")
    assert origins["experiment.id"].kind == "spec"
    assert acrl_main(["explain", str(spec), "--set", "rollout.temperature=0.5", "rollout.temperature"]) == 0
    assert "origin: --set rollout.temperature=0.5" in capsys.readouterr().out  # the golden wording
    assert acrl_main(["explain", "--set=rollout.temperature=0.25", str(spec), "rollout.temperature", "--json"]) == 0
    (key,) = json.loads(capsys.readouterr().out)["keys"]
    assert key["name"] == "rollout.temperature" and key["value"] == 0.25
    assert key["origin"]["kind"] == "set" and key["origin"]["line"] is None


def test_sets_are_part_of_the_cache_key_and_of_check(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str],
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = write_spec()
    for n, size in enumerate((64, 64, 32)):  # the second is a cache hit; the third must not be
        out = tmp_path / f"out{n}"
        assert compile_main([str(spec), "--set", f"rollout.batch_size={size}", "-o", str(out)]) == 0
        assert tomllib.loads((out / "spec.toml").read_text())["rollout"]["batch_size"] == size
    assert compile_main([str(spec), "--check", "--set", "rollout.batch_size=32", "-o", str(tmp_path / "out2")]) == 0
    assert compile_main([str(spec), "--check", "-o", str(tmp_path / "out2")]) == 1
    assert acrl_main(["compile", str(spec), "--set", "rollout.batch_size=32", "-o", str(tmp_path / "out2")]) == 0
    assert "unchanged" in capsys.readouterr().out


def test_dotted_quotes_keys_that_are_not_bare() -> None:
    assert dotted(("eval", "datasets", "a.b")) == 'eval.datasets."a.b"'
    assert dotted(("rollout", "batch_size")) == "rollout.batch_size"


def test_a_set_that_turns_a_value_into_a_table_points_at_the_set(write_spec: SpecWriter) -> None:
    # the table replaces the file's integer: the error is the --set's, not the file's line
    spec = write_spec({"rollout": {"batch_size": 16}})
    [error] = errors(spec, "rollout.batch_size.x=1")
    assert (error.file, error.line, error.key) == ("--set rollout.batch_size.x=1", None, "rollout.batch_size")


def test_a_key_in_an_unknown_table_gets_a_did_you_mean_to_the_key_of_that_name(write_spec: SpecWriter) -> None:
    (error,) = errors(write_spec(), "optimizer.lr=1e-6")
    assert (error.file, error.key) == ("--set optimizer.lr=1e-6", "optimizer.lr")
    assert error.message == "unknown key 'optimizer.lr'" and error.hint == 'did you mean "train.lr"?'
    (error,) = errors(write_spec(), "rollout.batch_sise=3")  # a known table: the structuring stage says it
    assert error.hint == 'did you mean "batch_size"?'
