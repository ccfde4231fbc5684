"""extends = "base.toml": layered specs, where every value still says which file and line set it."""

from __future__ import annotations

import json
import os
import time
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

import acrl.compiler._pipeline.compile as compile_module
from acrl.compiler import compile_spec
from acrl.compiler._cli.main import acrl_main, compile_main
from acrl.compiler._fast import cache as _cache
from acrl.compiler._pipeline.layers import layer, load_spec, merge_data, overlay
from acrl.compiler._pipeline.parse import parse_spec_text
from acrl.compiler._review.explain import explain_path
from acrl.compiler.errors import SpecError
from conftest import MINIMAL


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def base_text(**tables: dict[str, Any]) -> str:
    data = {**MINIMAL, **tables}
    return tomli_w.dumps(data)


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def errors_of(path: Path) -> list[Any]:
    with pytest.raises(SpecError) as caught:
        compile_spec(path)
    return [d for d in caught.value.diagnostics if d.severity == "error"]


def test_tables_merge_key_by_key_and_arrays_replace(tmp_path: Path) -> None:
    write(tmp_path / "base.toml", base_text(rollout={"batch_size": 16, "temperature": 0.5},
                                            env={"forward": ["A", "B"], "vars": {"X": "1", "Y": "2"}}))
    child = write(tmp_path / "child.toml", 'extends = "base.toml"\n[rollout]\ntemperature = 0.9\n'
                                           '[env]\nforward = ["C"]\nvars = { Y = "3" }\n')
    spec = compile_spec(child).spec
    assert (spec.rollout.batch_size, spec.rollout.temperature) == (16, 0.9)  # merged, the child's wins
    assert spec.env.forward == ["C"]  # an array replaces
    assert spec.env.vars == {"X": "1", "Y": "3"}  # a table (inline too) merges


def test_an_array_of_tables_replaces_and_takes_its_positions_along() -> None:
    lower = parse_spec_text('[[runs]]\nname = "a"\n[[runs]]\nname = "b"\n[t]\nx = 1\n', "base.toml")
    upper = parse_spec_text('[[runs]]\nname = "c"\n[t]\ny = 2\n', "top.toml")
    merged = overlay(lower, upper, named=upper)
    assert merged.data == {"runs": [{"name": "c"}], "t": {"x": 1, "y": 2}}
    assert ("runs", 1) not in merged.positions and ("runs", 1, "name") not in merged.positions
    assert merged.locate(("runs", 0, "name")) == ("top.toml", (2, 1))
    assert merged.locate(("t", "x")) == ("base.toml", (6, 1))
    assert merge_data({"a": {"b": 1, "c": [1]}}, {"a": {"c": [2]}}) == {"a": {"b": 1, "c": [2]}}


def test_a_chain_of_three_and_explain_names_each_values_file_and_line(tmp_path: Path) -> None:
    grand = write(tmp_path / "bases" / "grand.toml", base_text(rollout={"batch_size": 16, "temperature": 0.5}))
    parent = write(tmp_path / "bases" / "parent.toml", 'extends = "grand.toml"\n[rollout]\ntemperature = 0.7\n')
    child = write(tmp_path / "exp" / "child.toml",
                  'extends = "../bases/parent.toml"\n[experiment]\nid = "child-exp"\n')
    bundle = compile_spec(child)
    assert (bundle.spec.experiment.id, bundle.spec.rollout.temperature, bundle.spec.rollout.batch_size) == \
        ("child-exp", 0.7, 16)
    origins = {i.name: i.origin for i in explain_path(child).keys}
    assert origins["experiment.id"].text == f"{child} line 3"
    assert (origins["rollout.temperature"].file, origins["rollout.temperature"].line) == \
        (os.path.normpath(parent), 3)
    assert (origins["rollout.batch_size"].file, origins["rollout.batch_size"].line) == \
        (os.path.normpath(grand), line_of(grand, "batch_size"))
    assert origins["rollout.top_p"].kind == "default"
    manifest = json.loads(bundle.files["manifest.json"])
    assert [b["path"] for b in manifest["extends"]] == ["../bases/parent.toml", "grand.toml"]
    resolved = tomllib.loads(bundle.files["spec.toml"].decode())
    assert "extends" not in resolved and resolved["rollout"]["temperature"] == 0.7


def test_a_structure_error_points_at_the_base_file_that_set_the_value(tmp_path: Path) -> None:
    base = write(tmp_path / "base.toml", base_text(rollout={"batch_size": "16", "batch_sise": 3}))
    child = write(tmp_path / "child.toml", 'extends = "base.toml"\n[rollout]\ntemperature = "hot"\n')
    found = {(d.key, d.file, d.line) for d in errors_of(child)}
    assert found == {("rollout.batch_size", str(base), line_of(base, "batch_size =")),
                     ("rollout.batch_sise", str(base), line_of(base, "batch_sise")),
                     ("rollout.temperature", str(child), 3)}
    shown = str(SpecError(errors_of(child)))
    assert f"{base}:{line_of(base, 'batch_size =')}:1: error: [rollout] batch_size" in shown
    assert 'batch_size = "16"' in shown  # the base's own line is quoted


def test_a_rule_error_points_at_the_base_file(tmp_path: Path) -> None:
    base = write(tmp_path / "base.toml", base_text(eval={"interval": 5}))
    child = write(tmp_path / "child.toml", 'extends = "base.toml"\n')
    (error,) = errors_of(child)
    assert error.rule == "ACRL-E001" and error.file == str(base) and error.line == line_of(base, "interval = 5")


def test_a_cycle_is_reported_with_the_chain(tmp_path: Path) -> None:
    a = write(tmp_path / "a.toml", 'extends = "b.toml"\n')
    b = write(tmp_path / "b.toml", '# b\nextends = "a.toml"\n')
    (error,) = errors_of(a)
    assert error.message == f"extends cycle: {a} -> {b} -> {a}"
    assert (error.file, error.line, error.key) == (str(b), 2, "extends")
    self_loop = write(tmp_path / "self.toml", 'extends = "self.toml"\n')
    assert errors_of(self_loop)[0].message == f"extends cycle: {self_loop} -> {self_loop}"


def test_a_missing_base_names_the_file_the_key_and_the_fix(tmp_path: Path) -> None:
    child = write(tmp_path / "child.toml", '# an experiment\n\n\nextends = "nowhere/base.toml"\n')
    (error,) = errors_of(child)
    assert error.message == f"cannot read the base spec {tmp_path / 'nowhere' / 'base.toml'}: No such file or directory"
    assert (error.file, error.key, error.line) == (str(child), "extends", 4)
    assert "relative to the extending file's directory" in error.hint


def test_a_base_that_is_not_toml_is_a_syntax_error_in_the_base(tmp_path: Path) -> None:
    base = write(tmp_path / "base.toml", "[rollout]\nbatch_size = = 3\n")
    child = write(tmp_path / "child.toml", 'extends = "base.toml"\n')
    (error,) = errors_of(child)
    assert error.file == str(base) and error.line == 2 and error.message.startswith("expected a value here")


@pytest.mark.parametrize(("value", "shown"), [("3", "int 3"), ('""', "an empty string"), ('["a.toml"]', "list")])
def test_extends_must_be_a_path(tmp_path: Path, value: str, shown: str) -> None:
    child = write(tmp_path / "child.toml", f"extends = {value}\n")
    (error,) = errors_of(child)
    assert shown in error.message and error.key == "extends" and error.line == 1
    assert 'extends = "base.toml"' in error.hint


@pytest.mark.parametrize("extends", ["5", '"missing.toml"'])
def test_a_broken_extends_still_reports_the_specs_own_errors_and_the_closing_line(
        tmp_path: Path, extends: str, capsys: pytest.CaptureFixture[str]) -> None:
    # the spec's own unknown key and out-of-range value are errors whatever the base holds; its missing tables
    # ([model], [data], ...) are not (the base may hold them), and no rule runs
    child = write(tmp_path / "child.toml", f'extends = {extends}\n[experiment]\nid = "x"\nnmu_rollout = 3\n'
                  "[rollout]\nbatch_size = 0\n")
    with pytest.raises(SpecError) as caught:
        compile_spec(child)
    assert [(d.key, d.line) for d in caught.value.diagnostics] == [
        ("extends", 1), ("experiment.nmu_rollout", 4), ("rollout.batch_size", 6)]
    assert caught.value.unchecked
    assert compile_main([str(child), "-o", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err.endswith("fixing these may reveal more.\n")
    chained = write(tmp_path / "mid.toml", 'extends = "gone.toml"\n[rollout]\nbatch_size = -1\n')
    top = write(tmp_path / "top.toml", 'extends = "mid.toml"\n[experiment]\nid = "x"\n')  # a base's own errors too
    with pytest.raises(SpecError) as caught:
        compile_spec(top)
    assert [(d.file, d.key) for d in caught.value.diagnostics] == [(str(chained), "extends"),
                                                                   (str(chained), "rollout.batch_size")]


def test_the_cli_prints_no_traceback_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    child = write(tmp_path / "child.toml", 'extends = "missing.toml"\n')
    assert compile_main([str(child), "-o", str(tmp_path / "out")]) == 1
    err = capsys.readouterr().err
    assert f"{child}:1:1: error: extends: cannot read the base spec" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_bundles_of_an_extending_spec_verify_diff_and_explain(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    write(tmp_path / "base.toml", base_text(rollout={"batch_size": 16}))
    child = write(tmp_path / "child.toml", 'extends = "base.toml"\n[rollout]\nbatch_size = 64\n')
    out = tmp_path / "bundle"
    assert compile_main([str(child), "-o", str(out)]) == 0
    assert acrl_main(["verify", str(out)]) == 0
    assert acrl_main(["diff", str(out), str(child)]) == 0  # the bundle is what the spec compiles to
    capsys.readouterr()
    assert acrl_main(["diff", str(out), str(tmp_path / "base.toml"), "--format", "json"]) == 1
    spec_changes = json.loads(capsys.readouterr().out)["sections"]["spec"]
    assert {"key": "rollout.batch_size", "change": "changed", "before": 64, "after": 16} in spec_changes
    assert acrl_main(["explain", str(out), "rollout.batch_size", "--json"]) == 0
    (key,) = json.loads(capsys.readouterr().out)["keys"]
    assert key["value"] == 64 and key["origin"]["kind"] == "bundle" and key["origin"]["file"] == f"{out}/spec.toml"


def test_explain_of_a_bundle_says_which_base_or_set_gave_a_value(tmp_path: Path) -> None:
    """The bundle's spec.toml is merged; the manifest keeps which base (or --set) set each value."""
    write(tmp_path / "bases" / "grand.toml", base_text(rollout={"batch_size": 16, "temperature": 0.5}))
    write(tmp_path / "bases" / "parent.toml", 'extends = "grand.toml"\n[rollout]\ntemperature = 0.7\n')
    child = write(tmp_path / "exp" / "child.toml", 'extends = "../bases/parent.toml"\n[rollout]\ntop_p = 0.9\n')
    out = tmp_path / "bundle"
    assert compile_main([str(child), "-o", str(out), "--set", "eval.datasets={ gsm8k = \"/d/t.jsonl\" }",
                         "--set", "eval.interval=5"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    parent_keys, grand_keys = (set(b["keys"]) for b in manifest["extends"])
    assert parent_keys == {"rollout.temperature"}
    assert {"rollout.batch_size", "experiment.id"} <= grand_keys and "rollout.temperature" not in grand_keys
    assert "rollout.top_p" not in parent_keys | grand_keys  # the child's own
    origins = {i.name: i.origin.text for i in explain_path(out).keys}
    assert origins["rollout.temperature"].endswith("set by ../bases/parent.toml (through extends)")
    assert origins["rollout.batch_size"].endswith("set by grand.toml (through extends)")
    assert origins["eval.datasets.gsm8k"].endswith('set by --set eval.datasets={ gsm8k = "/d/t.jsonl" }')
    assert origins["eval.interval"].endswith("set by --set eval.interval=5")
    assert "set by" not in origins["rollout.top_p"] and "set by" not in origins["rollout.n_samples_per_prompt"]


def test_load_spec_keeps_the_base_paths_for_the_cache(tmp_path: Path) -> None:
    base = write(tmp_path / "base.toml", base_text())
    child = write(tmp_path / "child.toml", 'extends = "base.toml"\n')
    assert load_spec(child).base_paths == (str(base),)


def test_editing_a_base_file_is_a_cache_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(_cache, "_TIMESTAMP_SLACK_NS", 0)  # the base's ctime (now) cannot be dated back
    compiled: list[str] = []
    real = compile_module.compile_source  # what the CLI's front door calls after load_spec

    def spy(source: Any, **kwargs: Any) -> compile_module.Bundle:
        compiled.append(source.name)
        return real(source, **kwargs)

    monkeypatch.setattr(compile_module, "compile_source", spy)
    base = write(tmp_path / "base.toml", base_text(rollout={"batch_size": 16}))
    past = time.time() - 60  # older than the compile: the cache may trust its stat (the racy-input rule)
    os.utime(base, (past, past))
    time.sleep(0.01)
    child = write(tmp_path / "child.toml", 'extends = "base.toml"\n')
    assert compile_main([str(child), "-o", str(tmp_path / "a")]) == 0
    assert len(list((tmp_path / "cache" / "acrl" / "compile").glob("*.acrl-compile"))) == 1  # it was kept
    assert compile_main([str(child), "-o", str(tmp_path / "a2")]) == 0  # a hit, as long as the base is unchanged
    assert len(compiled) == 1
    write(base, base_text(rollout={"batch_size": 32}))
    assert compile_main([str(child), "-o", str(tmp_path / "b")]) == 0
    assert tomllib.loads((tmp_path / "b" / "spec.toml").read_text())["rollout"]["batch_size"] == 32
    assert len(compiled) == 2
    capsys.readouterr()
    signatures = [sig for path, sig in _entries_inputs(tmp_path / "cache") if path == str(base.resolve())]
    assert signatures and all(sig is not None for sig in signatures)


def _entries_inputs(home: Path) -> list[tuple[str, Any]]:
    found = []
    for entry in (home / "acrl" / "compile").glob("*.acrl-compile"):
        decoded = _cache._decode(entry.read_bytes())
        assert decoded is not None
        found += list(decoded.inputs)
    return found


def test_the_manifest_is_the_same_whatever_name_the_spec_is_shown_by(tmp_path: Path) -> None:
    """The keys each base set are found by the base's name in messages, not by the path it was opened
    by: with a display name (compile_spec(..., display_name=...)) the two differ."""
    write(tmp_path / "bases" / "base.toml", base_text(rollout={"batch_size": 16}))
    child = write(tmp_path / "exp" / "child.toml", 'extends = "../bases/base.toml"\n[rollout]\ntop_p = 0.9\n')
    shown = compile_spec(child, display_name="child.toml").files["manifest.json"]
    assert shown == compile_spec(child).files["manifest.json"]
    assert "rollout.batch_size" in json.loads(shown)["extends"][0]["keys"]


def _resolves(data: Any, path: tuple[str | int, ...]) -> bool:
    for step in path:
        found = (isinstance(data, dict) and step in data) or (isinstance(data, list) and isinstance(step, int)
                                                              and step < len(data))
        if not found:
            return False
        data = data[step]
    return True


_KEYS = st.sampled_from(["a", "b", "c"])
_VALUES = st.recursive(st.one_of(st.integers(0, 3), st.just("s"), st.lists(st.integers(0, 3), max_size=2),
                                 st.lists(st.fixed_dictionaries({"k": st.integers(0, 3)}), min_size=1, max_size=2)),
                       lambda inner: st.dictionaries(_KEYS, inner, min_size=1, max_size=3), max_leaves=6)
_SPECS = st.dictionaries(st.sampled_from(["x", "y"]), st.dictionaries(_KEYS, _VALUES, min_size=1, max_size=3),
                         max_size=2)


@settings(max_examples=300, deadline=None)
@given(lower=_SPECS, upper=_SPECS, path=st.lists(st.sampled_from(["x", "a", "b"]), min_size=1, max_size=3),
       value=_VALUES)
def test_every_merged_position_is_of_a_merged_value_and_of_the_layer_that_wrote_it(
        lower: dict[str, Any], upper: dict[str, Any], path: list[str], value: Any) -> None:
    below = parse_spec_text(tomli_w.dumps(lower), "base.toml")
    above = parse_spec_text(tomli_w.dumps(upper), "child.toml")
    merged = overlay(below, above, named=above)
    assert merged.data == merge_data(lower, upper)
    assert all(_resolves(merged.data, p) for p in merged.positions)
    assert all(merged.locate(p)[0] == "child.toml" for p in above.positions)
    with_set = overlay(merged, layer(tuple(path), value, "--set", origin="--set"), named=merged)
    assert all(_resolves(with_set.data, p) for p in with_set.positions)
    assert with_set.locate(tuple(path))[0] == "--set"
