"""Hugging Face config.json -> MODEL_ARGS, and the field-by-field comparison of two MODEL_ARGS lists.

Facts: the published config.json files in tests/fixtures/hf, and slime's 39 model scripts resolved to MODEL_ARGS
and the fields slime compares at launch, generated from slime's code into tests/data/slime (see its README.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acrl.compiler._pipeline.model_args.catalog import entry
from acrl.compiler._pipeline.model_args.hf_config import HF_FIELD, SETTINGS, compare, derive_model_args
from conftest import SLIME_HEAD, SLIME_PIN, slime_facts, slime_model_args

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "hf"

# fixture directory -> the catalog entry written from the same published config (Instruct and base share args).
FIXTURE_ENTRY = {
    "Qwen2.5-3B-Instruct": "qwen2.5-3B", "Qwen2.5-32B-Instruct": "qwen2.5-32B-Instruct", "Qwen3-4B": "qwen3-4B",
    "Qwen3-30B-A3B": "qwen3-30B-A3B", "Llama-3.1-8B-Instruct": "llama3.1-8B-Instruct",
    "Llama-3.2-3B-Instruct": "llama3.2-3B-Instruct", "GLM-4-9B-0414": "glm4-9B",
}


@pytest.fixture(scope="module")
def slime_args() -> dict[str, list[str]]:
    return slime_model_args()


def fixture(name: str) -> dict[str, Any]:
    config: dict[str, Any] = json.loads((FIXTURES / name / "config.json").read_text())
    return config


def flags(args: tuple[str, ...] | list[str]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for token in args:
        if token.startswith("--"):
            current = out[token] = []
        else:
            current.append(token)
    return out


QWEN2: dict[str, Any] = {
    "architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "hidden_size": 1024, "intermediate_size": 4096,
    "num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 4, "rms_norm_eps": 1e-06,
    "rope_theta": 1000000.0, "vocab_size": 1000, "tie_word_embeddings": True,
}


def test_every_fixture_has_a_catalog_entry() -> None:
    assert sorted(p.name for p in FIXTURES.iterdir()) == sorted(FIXTURE_ENTRY)


@pytest.mark.parametrize("name", sorted(FIXTURE_ENTRY))
def test_fixture_derives_the_catalog_args(name: str) -> None:
    derived = derive_model_args(fixture(name))
    assert derived.unsupported == ()
    catalog = entry(FIXTURE_ENTRY[name])
    assert catalog is not None
    # the config.json translation; the catalog's own settings (from slime's script) are not in config.json
    assert compare(derived.args, f"{name}/config.json", catalog.derived().args, catalog.source) == []
    assert compare(catalog.derived().args, catalog.source, derived.args, f"{name}/config.json") == []


@pytest.mark.parametrize("name", sorted(FIXTURE_ENTRY))
def test_fixture_agrees_with_slimes_script(name: str, slime_args: dict[str, list[str]]) -> None:
    """Every architecture flag agrees with slime's script of the same model, except the documented differences;
    what slime's script adds beyond the architecture (grouped GEMM, dispatcher...) is at most a warning."""
    catalog = entry(FIXTURE_ENTRY[name])
    assert catalog is not None and catalog.slime_script is not None
    script = slime_args[catalog.slime_script]
    mismatches = compare(script, f"slime {catalog.slime_script}.sh", derive_model_args(fixture(name)).args,
                         f"{name}/config.json")
    assert {m.flag for m in mismatches if m.severity == "error"} == {f for f, _ in catalog.slime_differences}
    assert {m.flag for m in mismatches if m.severity == "warning"} <= SETTINGS
    both = set(flags(script)) & set(flags(derive_model_args(fixture(name)).args))
    assert {m.flag for m in mismatches} & both <= {f for f, _ in catalog.slime_differences}


def test_qwen25_32b_instruct_epsilon_is_caught(slime_args: dict[str, list[str]]) -> None:
    derived = derive_model_args(fixture("Qwen2.5-32B-Instruct"))
    [mismatch] = compare(slime_args["qwen2.5-32B"], "slime scripts/models/qwen2.5-32B.sh", derived.args,
                         "Qwen2.5-32B-Instruct/config.json")
    assert (mismatch.flag, mismatch.a_value, mismatch.b_value) == ("--norm-epsilon", "1e-5", "1e-06")
    assert (mismatch.hf_field, mismatch.severity) == ("rms_norm_eps", "error")
    assert mismatch.message == (
        "--norm-epsilon: 1e-5 in slime scripts/models/qwen2.5-32B.sh, but 1e-06 in Qwen2.5-32B-Instruct/config.json "
        "(config.json field rms_norm_eps). Fix: use --norm-epsilon 1e-06, as in Qwen2.5-32B-Instruct/config.json")


def test_derived_args_keep_the_field_they_came_from() -> None:
    derived = derive_model_args({**QWEN2, "rope_theta": None, "rope_parameters": {"rope_theta": 10000.0,
                                                                                   "rope_type": "default"}})
    assert derived.source("--norm-epsilon") == "rms_norm_eps"
    assert derived.source("--num-query-groups") == "num_key_value_heads"
    assert derived.source("--rotary-base") == "rope_parameters.rope_theta"
    assert flags(derived.args)["--rotary-base"] == ["10000"]
    assert derived.source("--spec") is None


def test_epsilon_is_written_as_the_config_has_it() -> None:
    assert flags(derive_model_args(QWEN2).args)["--norm-epsilon"] == ["1e-06"]
    assert flags(derive_model_args({**QWEN2, "rms_norm_eps": 0.000001}).args)["--norm-epsilon"] == ["1e-06"]


def test_unknown_architecture_names_the_fields_instead_of_guessing() -> None:
    deepseek = {"architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168, "intermediate_size": 18432,
                "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
                "rms_norm_eps": 1e-06, "rope_theta": 10000, "vocab_size": 129280, "kv_lora_rank": 512,
                "q_lora_rank": 1536, "n_routed_experts": 256, "first_k_dense_replace": 3, "torch_dtype": "bfloat16"}
    derived = derive_model_args(deepseek)
    assert derived.args == ()
    [why] = derived.unsupported
    assert "'DeepseekV3ForCausalLM'" in why and "Qwen3MoeForCausalLM" in why
    assert "first_k_dense_replace, kv_lora_rank, n_routed_experts, q_lora_rank" in why
    assert "torch_dtype" not in why


def test_missing_fields_are_named() -> None:
    config = {k: v for k, v in QWEN2.items() if k not in ("hidden_size", "rms_norm_eps")}
    derived = derive_model_args({**config, "num_hidden_layers": "4"})
    assert derived.args == ()
    assert derived.unsupported == ("missing or non-numeric fields: num_hidden_layers, hidden_size, rms_norm_eps",)
    assert "architectures: None" in derive_model_args({**QWEN2, "architectures": None}).unsupported[0]
    assert derive_model_args({**QWEN2, "num_attention_heads": 0}).unsupported == (
        "missing or non-numeric fields: num_attention_heads",)


@pytest.mark.parametrize("theta", [1000000.5, 1e-3])
def test_non_integer_rope_theta_is_unsupported(theta: float) -> None:
    derived = derive_model_args({**QWEN2, "rope_theta": theta})
    assert "--rotary-base" not in derived.args
    assert derived.unsupported == (f"rope_theta: {theta!r} is not an integer, and Megatron's --rotary-base is an int",)


def test_integral_float_theta_is_an_int() -> None:
    assert flags(derive_model_args({**QWEN2, "rope_theta": 5000000.0}).args)["--rotary-base"] == ["5000000"]


@pytest.mark.parametrize(("a", "b"), [("1e-6", "1e-06"), ("1e-6", "0.000001"), ("1e-06", "0.0000010"),
                                      ("1000000", "1e6"), ("1000000", "1E+6"), ("1.0", "1"), ("0.5", "5e-1")])
def test_numbers_compare_by_value(a: str, b: str) -> None:
    assert compare(["--norm-epsilon", a], "a", ["--norm-epsilon", b], "b") == []


def test_different_numbers_differ() -> None:
    [m] = compare(["--rotary-base", "10000"], "a", ["--rotary-base", "1e6"], "b")
    assert (m.a_value, m.b_value, m.fix) == ("10000", "1e6", "use --rotary-base 1e6, as in b")


def test_absent_flag_is_megatrons_default() -> None:
    assert compare(["--norm-epsilon", "1e-5", "--rotary-percent", "1.0"], "a", [], "b") == []
    [m] = compare(["--norm-epsilon", "1e-6"], "a", [], "b")
    assert m.b_value == "absent (Megatron default 1e-5)"
    assert m.fix == "drop --norm-epsilon, as in b"


def test_tied_and_untied_embeddings() -> None:
    assert "--untie-embeddings-and-output-weights" not in derive_model_args(QWEN2).args
    untied = derive_model_args({**QWEN2, "tie_word_embeddings": False}).args
    assert "--untie-embeddings-and-output-weights" in untied
    # absent: every supported config class defaults to untied
    no_field = {k: v for k, v in QWEN2.items() if k != "tie_word_embeddings"}
    assert "--untie-embeddings-and-output-weights" in derive_model_args(no_field).args
    [m] = compare(derive_model_args(QWEN2).args, "script", untied, "config.json")
    assert (m.flag, m.a_value, m.b_value, m.hf_field) == ("--untie-embeddings-and-output-weights", "absent",
                                                          "present", "tie_word_embeddings")
    assert m.fix == "use --untie-embeddings-and-output-weights, as in config.json"
    [m] = compare(untied, "script", derive_model_args(QWEN2).args, "config.json")
    assert m.fix == "drop --untie-embeddings-and-output-weights, as in config.json"


def test_qwen3_moe_fields() -> None:
    derived = derive_model_args(fixture("Qwen3-30B-A3B"))
    got = flags(derived.args)
    assert {f: got[f] for f in ("--num-experts", "--moe-ffn-hidden-size", "--moe-router-topk", "--moe-layer-freq",
                                "--moe-router-score-function", "--ffn-hidden-size", "--kv-channels",
                                "--position-embedding-type")} == {
        "--num-experts": ["128"], "--moe-ffn-hidden-size": ["768"], "--moe-router-topk": ["8"],
        "--moe-layer-freq": ["[1]*48"], "--moe-router-score-function": ["softmax"], "--ffn-hidden-size": ["6144"],
        "--kv-channels": ["128"], "--position-embedding-type": ["rope"]}
    assert "--moe-router-pre-softmax" not in got  # norm_topk_prob: true renormalizes the top-k, Megatron's default
    assert "--moe-shared-expert-intermediate-size" not in got
    assert derived.source("--moe-ffn-hidden-size") == "moe_intermediate_size"


def test_dense_layers_and_sparse_step_give_the_layer_pattern() -> None:
    config = {**fixture("Qwen3-30B-A3B"), "num_hidden_layers": 6, "decoder_sparse_step": 2, "mlp_only_layers": [5]}
    assert flags(derive_model_args(config).args)["--moe-layer-freq"] == ["[0]*1+[1]*1+[0]*1+[1]*1+[0]*2"]


def test_qwen2_moe_shared_expert_and_pre_softmax() -> None:
    config = {**QWEN2, "architectures": ["Qwen2MoeForCausalLM"], "num_experts": 60, "moe_intermediate_size": 1408,
              "num_experts_per_tok": 4, "shared_expert_intermediate_size": 5632, "norm_topk_prob": False}
    got = flags(derive_model_args(config).args)
    assert got["--moe-shared-expert-intermediate-size"] == ["5632"]
    assert got["--moe-shared-expert-gate"] == got["--moe-router-pre-softmax"] == got["--add-qkv-bias"] == []
    assert "--qk-layernorm" not in got
    missing = {k: v for k, v in config.items() if k != "num_experts"}
    assert derive_model_args(missing).unsupported == ("missing MoE fields: num_experts",)


def test_glm4_uses_slimes_spec_and_sandwich_norms() -> None:
    got = flags(derive_model_args(fixture("GLM-4-9B-0414")).args)
    assert got["--spec"] == ["slime_plugins.models.glm4", "get_glm_spec"]
    assert got["--rotary-percent"] == ["0.5"]
    for flag in ("--post-self-attn-layernorm", "--post-mlp-layernorm", "--rotary-interleaved", "--add-qkv-bias"):
        assert got[flag] == []
    assert "--kv-channels" not in got  # head_dim 128 == 4096 / 32


def test_llama3_rope_scaling() -> None:
    got = flags(derive_model_args(fixture("Llama-3.1-8B-Instruct")).args)
    assert got["--use-rope-scaling"] == [] and got["--rope-scaling-factor"] == ["8.0"]
    config = fixture("Llama-3.1-8B-Instruct")
    config["rope_scaling"] = {**config["rope_scaling"], "low_freq_factor": 2.0}
    assert derive_model_args(config).unsupported == (
        "rope_scaling.low_freq_factor: 2.0; Megatron's llama3 scaling hard-codes 1.0",)


def test_slimes_rotary_scaling_factor_is_not_the_llama3_factor() -> None:
    """--rotary-scaling-factor is read by YaRN only; Megatron's llama3 scaling reads --rope-scaling-factor."""
    script = ["--use-rope-scaling", "--rotary-scaling-factor", "32.0"]
    [m] = compare(script, "script", ["--use-rope-scaling", "--rope-scaling-factor", "32.0"], "config.json")
    assert (m.flag, m.a_value, m.b_value) == ("--rope-scaling-factor", "absent (Megatron default 8.0)", "32.0")
    yarn = ["--multi-latent-attention", "--rotary-scaling-factor", "40"]
    assert [m.flag for m in compare(yarn, "a", yarn[:1], "b")] == ["--rotary-scaling-factor"]


@pytest.mark.parametrize(("change", "why"), [
    ({"use_sliding_window": True}, "use_sliding_window: true"),
    ({"layer_types": ["full_attention", "sliding_attention"]}, "layer_types: some layers are not full_attention"),
    ({"rope_scaling": {"type": "yarn", "factor": 4.0}}, "rope_scaling: rope_type 'yarn' on Qwen2ForCausalLM"),
    ({"hidden_act": "gelu"}, "hidden_act: 'gelu'"),
    ({"architectures": ["Qwen3ForCausalLM"], "attention_bias": True}, "attention_bias: true also puts a bias"),
    ({"mlp_bias": True}, "mlp_bias: true"),
])
def test_features_megatron_cannot_express(change: dict[str, Any], why: str) -> None:
    [reported] = derive_model_args({**QWEN2, **change}).unsupported
    assert reported.startswith(why)


def test_full_attention_layer_types_and_default_rope_are_fine() -> None:
    config = {**QWEN2, "layer_types": ["full_attention"] * 4, "rope_scaling": {"rope_type": "default"}}
    assert derive_model_args(config).unsupported == ()


def test_rotary_aliases_and_query_groups() -> None:
    assert compare(["--use-rotary-position-embeddings"], "a", ["--position-embedding-type", "rope"], "b") == []
    mha = ["--num-attention-heads", "32"]
    assert compare([*mha, "--group-query-attention", "--num-query-groups", "32"], "a", mha, "b") == []
    [m] = compare([*mha, "--num-query-groups", "8"], "a", [*mha, "--group-query-attention", "--num-query-groups",
                                                           "8"], "b")
    assert m.a_value == "32 (no --group-query-attention: multi-head attention, --num-query-groups 8 ignored)"
    assert m.fix == "use --group-query-attention --num-query-groups 8, as in b"
    [m] = compare([*mha, "--group-query-attention", "--num-query-groups", "8"], "a", mha, "b")
    assert m.fix == "drop --group-query-attention and --num-query-groups (multi-head attention), as in b"


def test_kv_channels_default_is_hidden_over_heads() -> None:
    base = ["--hidden-size", "4096", "--num-attention-heads", "32"]
    assert compare([*base, "--kv-channels", "128"], "a", base, "b") == []
    assert [m.flag for m in compare([*base, "--kv-channels", "256"], "a", base, "b")] == ["--kv-channels"]


def test_flags_in_one_list_only_are_reported() -> None:
    [m] = compare(["--spec", "slime_plugins.models.glm4", "get_glm_spec", "--qk-layernorm"], "a",
                  ["--qk-layernorm"], "b")
    assert (m.flag, m.a_value, m.b_value, m.severity) == ("--spec", "slime_plugins.models.glm4 get_glm_spec",
                                                          "absent", "error")
    [m] = compare([], "a", ["--qk-layernorm"], "b")
    assert (m.a_value, m.b_value, m.fix) == ("absent", "present", "use --qk-layernorm, as in b")


def test_settings_differences_are_warnings() -> None:
    [m] = compare(["--moe-grouped-gemm", "--num-experts", "8"], "a", ["--num-experts", "8"], "b")
    assert (m.flag, m.severity) == ("--moe-grouped-gemm", "warning")
    assert "performance or training setting" in m.fix


@pytest.mark.parametrize("freq", ["[1]*4", "[1,1,1,1]", "1", "[1]*2+[1]*2"])
def test_moe_layer_freq_forms(freq: str) -> None:
    base = ["--num-layers", "4", "--num-experts", "8"]
    assert compare([*base, "--moe-layer-freq", freq], "a", base, "b") == []
    assert [m.flag for m in compare([*base, "--moe-layer-freq", freq], "a",
                                    [*base, "--moe-layer-freq", "[0]*1+[1]*3"], "b")] == ["--moe-layer-freq"]


def test_every_slime_script_compares_equal_to_itself(slime_args: dict[str, list[str]]) -> None:
    for name, args in slime_args.items():
        assert compare(args, name, list(args), name) == [], name


# slime compares some Megatron destinations that no flag of the same name sets: Megatron stored --norm-epsilon as
# layernorm_epsilon before it became norm_epsilon, and slime checks both.
DEST_FLAG = {"layernorm_epsilon": "--norm-epsilon"}


@pytest.mark.parametrize("commit", [SLIME_HEAD, SLIME_PIN])
def test_hf_field_agrees_with_every_pair_slime_checks(commit: str) -> None:
    """Every (config.json field, Megatron argument) pair slime's _hf_validate_args compares at launch, as generated
    from slime's code (tests/data/slime/<commit>/hf_checks.json), is a pair of acrl's HF_FIELD."""
    pairs = slime_facts("hf_checks.json", commit)["pairs"]
    assert {p["megatron"] for p in pairs} >= {"num_layers", "hidden_size", "rotary_base", "norm_epsilon"}
    for pair in pairs:
        flag = DEST_FLAG.get(pair["megatron"], "--" + pair["megatron"].replace("_", "-"))
        assert HF_FIELD.get(flag, "").split(" ")[0] == pair["hf"], (flag, pair)
