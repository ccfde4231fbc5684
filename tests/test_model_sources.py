"""MODEL_ARGS from the catalog or the checkpoint's config.json, overrides, and the cross-check
against config.json (issue 3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tomli_w

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._catalog import entry
from conftest import MINIMAL, REPO, SpecWriter, merge

HF = REPO / "tests" / "fixtures" / "hf"


def model_spec(write_spec: SpecWriter, **model: object) -> Path:
    spec = merge(MINIMAL, {"model": {"args": None}})
    spec["model"].update(model)
    return write_spec(text=tomli_w.dumps(spec))


def checkpoint(tmp_path: Path, name: str) -> Path:
    """A checkpoint directory on 'this machine' holding the published config.json."""
    target = tmp_path / "models" / name
    target.mkdir(parents=True)
    shutil.copy(HF / name / "config.json", target / "config.json")
    return target


def test_qwen25_32b_norm_epsilon_mismatch_is_a_compile_error(write_spec: SpecWriter, tmp_path: Path) -> None:
    path = model_spec(write_spec, type="qwen2.5-32B", dir=str(checkpoint(tmp_path, "Qwen2.5-32B-Instruct")))
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    (diag,) = info.value.diagnostics
    assert diag.rule == "ACRL-M005" and diag.key == "model.type"
    assert "--norm-epsilon" in diag.message
    assert ("1e-05" in diag.message or "1e-5" in diag.message) and ("1e-06" in diag.message or "1e-6" in diag.message)
    assert "acrl catalog: qwen2.5-32B" in diag.message and "config.json" in diag.message
    assert "rms_norm_eps" in diag.message
    assert diag.hint.endswith('[model.overrides] "norm-epsilon" = "1e-06"; '
                              'or set [model] type = "qwen2.5-32B-Instruct"')


def test_an_explicit_override_wins_and_is_recorded(write_spec: SpecWriter, tmp_path: Path) -> None:
    path = model_spec(write_spec, type="qwen2.5-32B", dir=str(checkpoint(tmp_path, "Qwen2.5-32B-Instruct")),
                      overrides={"norm-epsilon": "1e-6"})
    bundle = compile_spec(path)
    args = list(bundle.model_args.args)
    assert args[args.index("--norm-epsilon") + 1] == "1e-6"
    header = bundle.files["model_args.sh"].decode()
    assert "# overridden by the spec's [model.overrides]: --norm-epsilon 1e-6\n" in header
    assert json.loads(bundle.files["manifest.json"])["model_args"]["overrides"] == {"--norm-epsilon": "1e-6"}
    assert any("checked against" in n for n in bundle.notes)


def test_the_instruct_catalog_entry_agrees_with_the_checkpoint(write_spec: SpecWriter, tmp_path: Path) -> None:
    path = model_spec(write_spec, type="qwen2.5-32B-Instruct", dir=str(checkpoint(tmp_path, "Qwen2.5-32B-Instruct")),
                      args_source="catalog")
    bundle = compile_spec(path)
    assert bundle.model_args.source == "catalog"


@pytest.mark.parametrize(("name", "catalog"), [("Qwen2.5-3B-Instruct", "qwen2.5-3B"), ("Qwen3-4B", "qwen3-4B"),
                                               ("Qwen3-30B-A3B", "qwen3-30B-A3B"),
                                               ("Llama-3.1-8B-Instruct", "llama3.1-8B-Instruct")])
def test_hf_source_derives_the_catalog_args(write_spec: SpecWriter, tmp_path: Path, name: str, catalog: str) -> None:
    path = model_spec(write_spec, type=catalog, dir=str(checkpoint(tmp_path, name)), args_source="hf")
    bundle = compile_spec(path)
    found = entry(catalog)
    assert found is not None
    assert sorted(bundle.model_args.args) == sorted(found.model_args())
    provenance = json.loads(bundle.files["manifest.json"])["model_args"]
    assert provenance["source"] == "hf" and provenance["from"].endswith(f"{name}/config.json")
    assert provenance["sha256"] == __import__("hashlib").sha256((HF / name / "config.json").read_bytes()).hexdigest()


def test_auto_prefers_the_catalog_and_the_bundle_does_not_depend_on_the_machine(write_spec: SpecWriter,
                                                                                tmp_path: Path) -> None:
    local = checkpoint(tmp_path, "Qwen2.5-3B-Instruct")
    here = compile_spec(model_spec(write_spec, type="qwen2.5-3B", dir=str(local)))
    here_files = dict(here.files)
    shutil.rmtree(local)  # the same spec, compiled where the checkpoint is not
    away = compile_spec(model_spec(write_spec, type="qwen2.5-3B", dir=str(local)))
    assert here.model_args.source == away.model_args.source == "catalog"
    assert here.model_args.args == away.model_args.args
    assert any("checked against" in n for n in here.notes) and not any("checked against" in n for n in away.notes)
    assert here_files == dict(away.files)


def test_unknown_model_type_suggests_a_catalog_name(write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(model_spec(write_spec, type="qwen2.5-3b-instruct", args_source="catalog"))
    assert "qwen2.5-3B" in str(info.value)


def test_hf_source_without_config_and_bad_hf_config(write_spec: SpecWriter, tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="is not on this machine"):
        compile_spec(model_spec(write_spec, type="x", args_source="hf"))
    with pytest.raises(SpecError, match="does not exist"):
        compile_spec(model_spec(write_spec, type="qwen2.5-3B", hf_config="missing/config.json"))
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(SpecError, match="not a JSON object"):
        compile_spec(model_spec(write_spec, type="qwen2.5-3B", hf_config="bad.json"))


def test_hf_config_relative_to_the_spec_is_checked(write_spec: SpecWriter, tmp_path: Path) -> None:
    shutil.copy(HF / "Qwen2.5-32B-Instruct" / "config.json", tmp_path / "config.json")
    with pytest.raises(SpecError, match="norm-epsilon"):
        compile_spec(model_spec(write_spec, type="qwen2.5-32B", hf_config="config.json"))
