"""MODEL_ARGS from the catalog or the checkpoint's config.json, overrides, and the cross-check
against config.json (issue 3)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tomli_w

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._pipeline.model_args.catalog import entry
from acrl.compiler._pipeline.model_args.hf_config import compare, derive_model_args
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
    (diag,) = [d for d in info.value.diagnostics if d.severity == "error"]  # a 32B model at TP 2 also warns (M007)
    assert diag.rule == "ACRL-M005" and diag.key == "model.type"
    catalog = entry("qwen2.5-32B")
    assert catalog is not None
    config = json.loads((HF / "Qwen2.5-32B-Instruct" / "config.json").read_text())
    (m,) = [m for m in compare(catalog.model_args(), f"acrl catalog: {catalog.name} ({catalog.source})",
                               derive_model_args(config).args, f"{tmp_path}/models/Qwen2.5-32B-Instruct/config.json")
            if m.severity == "error"]
    assert (m.flag, m.a_value, m.b_value, m.hf_field) == ("--norm-epsilon", "1e-05", "1e-06", "rms_norm_eps")
    assert diag.message == m.problem  # the rule reports the comparison's own finding
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
    # config.json says the architecture; slime's performance settings are the catalog's own (from slime's script)
    assert sorted(bundle.model_args.args) == sorted(found.derived().args)
    assert found.model_args() == found.derived().args + found.settings
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
    assert any("MODEL_ARGS checked against" in n for n in here.notes)
    assert not any("MODEL_ARGS checked against" in n for n in away.notes)
    assert here_files == dict(away.files)


def test_unknown_model_type_suggests_a_catalog_name(write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(model_spec(write_spec, type="qwen2.5-3b-instruct", args_source="catalog"))
    assert "qwen2.5-3B" in str(info.value)


def test_hf_source_without_config_and_bad_hf_config(write_spec: SpecWriter, tmp_path: Path) -> None:
    """Each is one error at the key to change, with a line and a fix."""
    (tmp_path / "bad.json").write_text("[1, 2]")
    for model, key in (({"type": "x", "args_source": "hf"}, "model.dir"),
                       ({"type": "qwen2.5-3B", "hf_config": "missing/config.json"}, "model.hf_config"),
                       ({"type": "qwen2.5-3B", "hf_config": "bad.json"}, "model.hf_config")):
        with pytest.raises(SpecError) as info:
            compile_spec(model_spec(write_spec, **model))
        (diag,) = info.value.diagnostics
        assert (diag.severity, diag.key, diag.rule) == ("error", key, "") and diag.line and diag.hint


def test_hf_config_relative_to_the_spec_is_checked(write_spec: SpecWriter, tmp_path: Path) -> None:
    shutil.copy(HF / "Qwen2.5-32B-Instruct" / "config.json", tmp_path / "config.json")
    with pytest.raises(SpecError) as info:
        compile_spec(model_spec(write_spec, type="qwen2.5-32B", hf_config="config.json"))
    (diag,) = [d for d in info.value.diagnostics if d.rule == "ACRL-M005"]
    assert diag.key == "model.type" and diag.message.startswith("--norm-epsilon: ")


# --- slime's script against the catalog entry of the same name (ACRL-M008) -----------------------------------------

GLM4_32B_SH = """#!/bin/bash
# as in slime's scripts/models/glm4-32B.sh
MODEL_ARGS=(
   --spec "slime_plugins.models.glm4" "get_glm_spec"
   --swiglu
   --num-layers 64
   --hidden-size 6144
   --ffn-hidden-size 23040
   --num-attention-heads 48
   --max-position-embeddings 32768
   --seq-length 32768
   --use-rotary-position-embeddings
   --disable-bias-linear
   --normalization "RMSNorm"
   --norm-epsilon 1e-5
   --rotary-base 10000
   --group-query-attention
   --num-query-groups 8
   --vocab-size 151552
   --post-self-attn-layernorm
   --post-mlp-layernorm
   --rotary-interleaved
   --rotary-percent 0.5
   --no-rope-fusion
   --untie-embeddings-and-output-weights
)
"""
# slime's qwen2.5-1.5B.sh has the rope_theta of Qwen2.5-Math-1.5B
QWEN25_15B_SH = """MODEL_ARGS=(
   --swiglu --num-layers 28 --hidden-size 1536 --ffn-hidden-size 8960 --num-attention-heads 12
   --use-rotary-position-embeddings --disable-bias-linear --add-qkv-bias --normalization "RMSNorm"
   --norm-epsilon 1e-6 --rotary-base 10000 --group-query-attention --num-query-groups 2 --vocab-size 151936
)
"""


def flag_tokens_of(script: str) -> list[str]:
    """The MODEL_ARGS words of a script written above (one array, words separated by blanks, "RMSNorm" quoted)."""
    body = script.split("(", 1)[1].rsplit(")", 1)[0]
    return [word.strip('"') for word in body.split()]


def script_spec(write_spec: SpecWriter, tmp_path: Path, model_type: str, **model: object) -> Path:
    """A spec whose MODEL_ARGS come from a fake slime checkout holding slime's script for ``model_type``; GLM-4-32B
    at TP 8 fits 8 GPUs (ACRL-M007 stays quiet)."""
    models = tmp_path / "slime" / "scripts" / "models"
    models.mkdir(parents=True, exist_ok=True)
    (models / "glm4-32B.sh").write_text(GLM4_32B_SH)
    (models / "qwen2.5-1.5B.sh").write_text(QWEN25_15B_SH)
    spec = merge(MINIMAL, {"model": {"args": None}, "slime": {"dir": str(tmp_path / "slime")},
                           "parallel": {"tensor": 8 if model_type == "glm4-32B" else 2}})
    spec["model"].update(type=model_type, args_source="script", **model)
    return write_spec(text=tomli_w.dumps(spec))


def test_slime_script_differing_from_the_published_config_is_an_error(write_spec: SpecWriter,
                                                                      tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        compile_spec(script_spec(write_spec, tmp_path, "glm4-32B"), display_name="spec.toml")
    errors = {d.message.split(":")[0]: d for d in exc.value.diagnostics}
    assert sorted(errors) == ["--num-layers", "--num-query-groups"]
    layers = errors["--num-layers"]
    assert layers.rule == "ACRL-M008" and layers.severity == "error" and layers.key == "model.type"
    catalog = entry("glm4-32B")
    assert catalog is not None
    script = f"{tmp_path}/slime/scripts/models/glm4-32B.sh"
    found = {m.flag: m for m in compare(list(flag_tokens_of(GLM4_32B_SH)), script, catalog.model_args(),
                                        f"acrl catalog: glm4-32B ({catalog.source})") if m.severity == "error"}
    assert (found["--num-layers"].a_value, found["--num-layers"].b_value) == ("64", "61")
    assert found["--num-layers"].hf_field == "num_hidden_layers"
    # the problem, then the catalog entry's own note on this known difference
    assert layers.message.startswith(f"{found['--num-layers'].problem} (a known difference: "
                                     f"{dict(catalog.slime_differences)['--num-layers']})")
    assert layers.hint.startswith('use --num-layers 61, as in acrl catalog: glm4-32B (THUDM/GLM-4-32B-0414): in the '
                                  'spec, [model.overrides] "num-layers" = "61", or args_source = "catalog"')
    groups = errors["--num-query-groups"]
    assert (found["--num-query-groups"].a_value, found["--num-query-groups"].b_value) == ("8", "2")
    assert groups.rule == "ACRL-M008" and groups.message.startswith(found["--num-query-groups"].problem)
    assert '"group-query-attention" = true and "num-query-groups" = "2"' in groups.hint


def test_what_is_not_architecture_is_a_note(write_spec: SpecWriter, tmp_path: Path) -> None:
    # a script whose context length differs from the catalog's (slime's own sets 32768, as the catalog does): a
    # setting, not the model's shape
    path = script_spec(write_spec, tmp_path, "glm4-32B", overrides={"num-layers": 61, "num-query-groups": 2})
    script = tmp_path / "slime" / "scripts" / "models" / "glm4-32B.sh"
    script.write_text(GLM4_32B_SH.replace("--seq-length 32768", "--seq-length 8192"))
    bundle = compile_spec(path)
    assert any("--seq-length" in n and "not an error" in n for n in bundle.notes)
    assert any("checked against acrl catalog: glm4-32B" in n for n in bundle.notes)


def test_overrides_settle_the_difference_either_way(write_spec: SpecWriter, tmp_path: Path) -> None:
    published = compile_spec(script_spec(write_spec, tmp_path, "glm4-32B",
                                         overrides={"num-layers": 61, "num-query-groups": 2}))
    assert published.warnings == ()
    args = list(published.model_args.args)
    assert args[args.index("--num-layers") + 1] == "61" and args[args.index("--num-query-groups") + 1] == "2"
    kept = compile_spec(script_spec(write_spec, tmp_path, "glm4-32B",
                                    overrides={"num-layers": 64, "num-query-groups": 8}))
    assert kept.warnings == ()


def test_a_script_matching_another_catalog_entry_names_it(write_spec: SpecWriter, tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        compile_spec(script_spec(write_spec, tmp_path, "qwen2.5-1.5B"))
    (w,) = exc.value.diagnostics
    catalog = entry("qwen2.5-1.5B")
    assert catalog is not None
    (m,) = compare(list(flag_tokens_of(QWEN25_15B_SH)), f"{tmp_path}/slime/scripts/models/qwen2.5-1.5B.sh",
                   catalog.model_args(), f"acrl catalog: qwen2.5-1.5B ({catalog.source})")
    assert (m.flag, m.a_value, m.b_value) == ("--rotary-base", "10000", "1000000")
    assert w.rule == "ACRL-M008" and w.message.startswith(f"{m.problem} (a known difference: ")
    assert w.hint.endswith('set [model] type = "qwen2.5-math-1.5B" and args_source = "catalog"')


def test_the_checkpoints_config_json_decides_instead_of_the_catalog(write_spec: SpecWriter, tmp_path: Path) -> None:
    math = entry("qwen2.5-math-1.5B")
    assert math is not None
    (tmp_path / "config.json").write_text(json.dumps(dict(math.hf_fields)))
    bundle = compile_spec(script_spec(write_spec, tmp_path, "qwen2.5-1.5B", hf_config="config.json"))
    assert bundle.warnings == ()  # the script matches the checkpoint: the catalog's Qwen2.5-1.5B is not this model
    assert any("checked against config.json" in n for n in bundle.notes)


# --- kv_channels explicit when head_dim differs from hidden / heads (ACRL-M006) -----------------------------------

QWEN3_4B_ARGS = {"swiglu": True, "num-layers": 36, "hidden-size": 2560, "ffn-hidden-size": 9728,
                 "num-attention-heads": 32, "group-query-attention": True, "num-query-groups": 8,
                 "use-rotary-position-embeddings": True, "disable-bias-linear": True, "normalization": "RMSNorm",
                 "norm-epsilon": "1e-6", "rotary-base": 1000000, "vocab-size": 151936, "qk-layernorm": True}


def test_missing_kv_channels_is_an_error_naming_the_head_dim(write_spec: SpecWriter) -> None:
    path = model_spec(write_spec, type="qwen3-4B", args=QWEN3_4B_ARGS)
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    (diag,) = info.value.diagnostics
    assert diag.rule == "ACRL-M006" and diag.key == "model.args"
    assert "hidden size / attention heads = 2560 / 32 = 80" in diag.message
    assert "acrl catalog: qwen3-4B (Qwen/Qwen3-4B) has head_dim 128" in diag.message
    assert diag.hint == 'add "kv-channels" = 128 to [model.args]'
    assert compile_spec(model_spec(write_spec, type="qwen3-4B", args={**QWEN3_4B_ARGS, "kv-channels": 128}))


def test_kv_channels_is_not_inferred_from_another_models_entry(write_spec: SpecWriter) -> None:
    # [model] type names the script or catalog entry; args of another shape are not held to its head_dim
    bundle = compile_spec(model_spec(write_spec, type="qwen3-4B", args={**QWEN3_4B_ARGS, "hidden-size": 4096}))
    assert not [w for w in bundle.warnings if w.rule == "ACRL-M006"]


def test_removing_kv_channels_by_override_is_an_error(write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(model_spec(write_spec, type="qwen3-4B", overrides={"kv-channels": False}))
    (diag,) = info.value.diagnostics
    assert diag.rule == "ACRL-M006" and diag.hint == 'add "kv-channels" = 128 to [model.overrides]'
    assert diag.key == "model.overrides"


def test_the_checkpoints_head_dim_is_reported_once(write_spec: SpecWriter, tmp_path: Path) -> None:
    path = model_spec(write_spec, type="qwen3-4B", args=QWEN3_4B_ARGS, dir=str(checkpoint(tmp_path, "Qwen3-4B")))
    with pytest.raises(SpecError) as info:
        compile_spec(path)
    (diag,) = info.value.diagnostics
    assert diag.rule == "ACRL-M005" and diag.message.startswith("--kv-channels: absent (hidden size / heads = 80)")
    assert diag.hint.endswith('[model.overrides] "kv-channels" = "128"; or use the catalog entry of this type: '
                              'args_source = "catalog"')


def test_hidden_size_not_divisible_by_heads_needs_kv_channels(write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(model_spec(write_spec, type="qwen3-4B",
                                args={**QWEN3_4B_ARGS, "num-attention-heads": 24, "num-query-groups": 8}))
    assert [(d.rule, d.key) for d in info.value.diagnostics] == [("ACRL-M006", "model.args")]


def test_a_script_without_kv_channels_is_reported_once(write_spec: SpecWriter, tmp_path: Path) -> None:
    """M008 (script vs catalog) names the missing --kv-channels; M006 does not say it a second time."""
    models = tmp_path / "slime" / "scripts" / "models"
    models.mkdir(parents=True)
    (models / "qwen3-4B.sh").write_text(
        "MODEL_ARGS=(--swiglu --num-layers 36 --hidden-size 2560 --ffn-hidden-size 9728 --num-attention-heads 32\n"
        " --group-query-attention --num-query-groups 8 --use-rotary-position-embeddings --disable-bias-linear\n"
        " --normalization RMSNorm --norm-epsilon 1e-6 --rotary-base 1000000 --vocab-size 151936 --qk-layernorm\n"
        " --untie-embeddings-and-output-weights)\n")
    spec = merge(MINIMAL, {"model": {"args": None}, "slime": {"dir": str(tmp_path / "slime")}})
    spec["model"].update(type="qwen3-4B", args_source="script")
    with pytest.raises(SpecError) as exc:
        compile_spec(write_spec(text=tomli_w.dumps(spec)))
    about_kv = [d for d in exc.value.diagnostics if "--kv-channels" in d.message]
    assert [d.rule for d in about_kv] == ["ACRL-M008"]
