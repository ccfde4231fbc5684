"""manifest.json as a typed Manifest (compiler/_pipeline/manifest.py): every manifest acrl writes goes
through the one converter and back to the same bytes, and a field of another shape is refused
naming its key (by `acrl verify` and `acrl run` once the manifest matches its own hash)."""

from __future__ import annotations

import copy
import io
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from test_tamper import set_at

from acrl.compiler import BundleReadError, Manifest, acrl_main, compile_spec, read_bundle
from acrl.compiler._pipeline.manifest import ManifestShapeError
from acrl.compiler._pipeline.reading import manifest_hash, read_files
from acrl.compiler._pipeline.render import manifest_json
from acrl.runtime._run import RunOptions, run_bundle
from conftest import MINIMAL, REPO, forge_manifest, merge

GOLDEN = REPO / "tests" / "golden"
GOLDENS = sorted(p.name for p in GOLDEN.iterdir() if (p / "manifest.json").is_file())


def round_trip(raw: bytes) -> bytes:
    return manifest_json(Manifest.from_json(json.loads(raw)).as_json())


@pytest.mark.parametrize("golden", GOLDENS)
def test_every_golden_manifest_round_trips_to_the_same_bytes(golden: str) -> None:
    raw = (GOLDEN / golden / "manifest.json").read_bytes()
    manifest = Manifest.from_json(json.loads(raw))
    assert manifest_json(manifest.as_json()) == raw
    assert manifest_hash(manifest.as_json()) == manifest.bundle_hash == json.loads(raw)["bundle_hash"]
    assert manifest.derived.actor_gpus == json.loads(raw)["derived"]["actor_gpus"]  # typed, not a dict


def test_a_manifest_with_extends_overrides_and_warnings_round_trips(tmp_path: Path) -> None:
    """The optional sections (extends, overrides) and the renamed keys ("from") survive the trip."""
    base = merge(MINIMAL, {"model": {"args": None, "type": "qwen2.5-32B-Instruct",  # warns ACRL-M007
                                     "overrides": {"norm-epsilon": "1e-6"}},
                           "parallel": {"tensor": 1, "sequence_parallel": False},
                           "train": {"optimizer_cpu_offload": False}, "rollout": {"gpus_per_engine": 4}})
    (tmp_path / "base.toml").write_text(tomli_w.dumps(base))
    (tmp_path / "child.toml").write_text('extends = "base.toml"\n[rollout]\ntemperature = 0.9\n')
    bundle = compile_spec(tmp_path / "child.toml", overrides=['experiment.id="set-exp"', "rollout.top_p=0.5"])
    raw = bundle.files["manifest.json"]
    data = json.loads(raw)
    assert [e["path"] for e in data["extends"]] == ["base.toml"] and data["overrides"][0]["from"] == "--set"
    assert data["warnings"] and data["model_args"]["overrides"] == {"--norm-epsilon": "1e-6"}
    manifest = Manifest.from_json(data)
    assert manifest.overrides is not None and manifest.overrides[0].from_ == "--set"
    assert manifest.extends is not None and "rollout.temperature" not in manifest.extends[0].keys
    assert manifest_json(manifest.as_json()) == raw
    # every field of the optional sections and of a warning, as for the goldens (an override's value: any TOML value)
    assert_each_field_refused(data, Manifest.from_json,
                              any_value=lambda path: path[0] == "overrides" and path[2] == "value")


def _leaves(node: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if isinstance(node, dict) and node:
        return [leaf for key, value in node.items() for leaf in _leaves(value, (*path, key))]
    if isinstance(node, list) and node:
        return [leaf for i, value in enumerate(node) for leaf in _leaves(value, (*path, str(i)))]
    return [(path, node)]


def _wrong(value: Any) -> Any:
    """A value of another JSON type than ``value``'s (1 and "1", true and 1 are different)."""
    if value is None:
        return {"x": 1}  # neither a string nor a number: wrong for every optional scalar
    if isinstance(value, bool | dict | list | int | float):
        return "x"
    return 1

def assert_each_field_refused(data: Any, from_json: Callable[[Any], object],
                              any_value: Callable[[tuple[str, ...]], bool]) -> None:
    """Each leaf of ``data`` given a value of the wrong JSON type is refused, naming its dotted key."""
    for path, value in _leaves(data):
        if any_value(path):
            continue
        broken = copy.deepcopy(data)
        set_at(broken, path, _wrong(value))
        with pytest.raises(ManifestShapeError) as caught:
            from_json(broken)
        assert caught.value.key == ".".join(path)



FIELDS = [(name, path) for name in GOLDENS
          for path, _ in _leaves(json.loads((GOLDEN / name / "manifest.json").read_text()))]


@pytest.mark.parametrize(("golden", "path"), FIELDS, ids=[f"{n}:{'.'.join(p)}" for n, p in FIELDS])
def test_a_value_of_another_type_in_any_field_is_refused_naming_its_key(golden: str, path: tuple[str, ...]) -> None:
    data = json.loads((GOLDEN / golden / "manifest.json").read_text())
    node: Any = data
    for step in path:
        node = node[int(step)] if isinstance(node, list) else node[step]
    set_at(data, path, _wrong(node))
    with pytest.raises(ManifestShapeError) as caught:
        Manifest.from_json(data)
    assert caught.value.key == ".".join(path)


@pytest.mark.parametrize("key", ["acrl_version", "exp_id", "files", "spec", "slime", "model_args", "derived",
                                 "warnings", "bundle_format"])
def test_a_missing_field_is_refused_naming_it(key: str) -> None:
    data = json.loads((GOLDEN / GOLDENS[0] / "manifest.json").read_text())
    del data[key]
    with pytest.raises(ManifestShapeError) as caught:
        Manifest.from_json(data)
    assert caught.value.key == key


@pytest.mark.parametrize("path", [("surprise",), ("derived", "surprise"), ("model_args", "surprise")])
def test_a_key_acrl_never_writes_is_refused_naming_it(path: tuple[str, ...]) -> None:
    data = json.loads((GOLDEN / GOLDENS[0] / "manifest.json").read_text())
    set_at(data, path, 1)
    with pytest.raises(ManifestShapeError) as caught:
        Manifest.from_json(data)
    assert caught.value.key == ".".join(path)


def copy_golden(tmp_path: Path, name: str = GOLDENS[0]) -> Path:
    target = tmp_path / "bundle"
    shutil.copytree(GOLDEN / name, target)
    return target


def test_a_forged_manifest_of_another_shape_is_refused_by_verify_and_run(tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """A manifest that matches its own hash (a forger's) but has a field acrl never writes so is not
    read as one: `acrl verify` exits 2 naming manifest.json and the key, `acrl run` refuses it."""
    bundle = copy_golden(tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    forge_manifest(bundle, derived=dict(manifest["derived"], actor_gpus="8"))
    assert acrl_main(["verify", str(bundle)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(f"{bundle / 'manifest.json'}: is not an acrl manifest: derived.actor_gpus: ")
    assert "\n  fix: " in err and "Traceback" not in err
    with pytest.raises(BundleReadError) as caught:
        run_bundle(RunOptions(str(bundle), dry_run=True), out=io.StringIO())
    assert caught.value.exit_code == 2 and "derived.actor_gpus" in caught.value.message


def test_an_edited_field_of_another_shape_is_reported_modified_as_before(tmp_path: Path) -> None:
    """Without a matching hash the edit is a modification (what `acrl verify` always said), not a shape error."""
    bundle = copy_golden(tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    (bundle / "manifest.json").write_text(json.dumps(dict(manifest, derived={"actor_gpus": "8"})))
    result = read_bundle(bundle)
    assert not result.intact and result.verification.recomputed_hash is not None and result.manifest is None


@pytest.mark.parametrize("golden", GOLDENS)
def test_read_bundle_gives_the_verified_files_and_the_typed_manifest(golden: str) -> None:
    bundle = read_bundle(GOLDEN / golden)
    raw = (GOLDEN / golden / "manifest.json").read_bytes()
    assert bundle.intact and bundle.files == read_files(GOLDEN / golden)
    assert bundle.manifest == Manifest.from_json(json.loads(raw))
    assert bundle.exp_id == bundle.manifest.exp_id == json.loads(raw)["exp_id"]


# --- sweep.json --------------------------------------------------------------------------------------------------

def test_a_sweep_index_with_valid_and_invalid_points_round_trips(tmp_path: Path) -> None:
    from acrl.compiler._cli.main import compile_main
    from acrl.compiler._pipeline.sweep_index import SweepIndex

    spec = tmp_path / "sweep.toml"
    spec.write_text(tomli_w.dumps(MINIMAL) + '\n[sweep]\ngrid = { "rollout.batch_size" = [32, 0] }\n')
    assert compile_main([str(spec), "-o", str(tmp_path / "out"), "--keep-going"]) == 1
    raw = (tmp_path / "out" / "sweep.json").read_bytes()
    index = SweepIndex.from_json(json.loads(raw))
    assert [p.name for p in index.points] == ["batch_size=32"] and index.invalid is not None
    assert index.invalid[0].errors[0].key == "rollout.batch_size" and index.to_bytes() == raw
    valid = SweepIndex(spec=index.spec, points=index.points)  # no invalid point: no "invalid" key
    assert "invalid" not in json.loads(valid.to_bytes()) and SweepIndex.from_json(valid.as_json()) == valid
    assert_each_field_refused(json.loads(raw), SweepIndex.from_json, any_value=lambda path: path[-1] == "value")


def test_the_manifest_converter_leaves_the_spec_converters_generated_functions(tmp_path: Path) -> None:
    """Writing and reading manifests must not make the next compile generate the spec's structuring
    functions again (~13 ms a compile; it did when the manifest's hooks were registered on the spec's
    own converter after its first use). A fresh interpreter, so that nothing ran before."""
    import subprocess
    import sys

    script = """if True:
        import json, sys
        from pathlib import Path
        from acrl.compiler import Manifest, compile_spec
        from acrl.compiler._pipeline.structure import converter
        from acrl.compiler._spec.tables import Spec
        bundle = compile_spec(Path(sys.argv[1]))
        hook = converter().get_structure_hook(Spec)
        Manifest.from_json(json.loads(compile_spec(Path(sys.argv[1])).files["manifest.json"]))
        compile_spec(Path(sys.argv[1]))
        print(converter().get_structure_hook(Spec) is hook)
    """
    spec = REPO / "specs" / "gsm8k-qwen2.5-3b-smoke.toml"
    out = subprocess.run([sys.executable, "-c", script, str(spec)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"
