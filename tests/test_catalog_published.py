"""Catalog entries taken from slime's scripts (issue 14), cross-checked with the models' published config.json.

The catalog entries whose hf_fields is empty use slime's script's MODEL_ARGS as they are (catalog.py,
slime_models.json): acrl does not translate their architectures. compiler/_pipeline/model_args/
published_configs.json holds, for each model behind such an entry, the architecture fields of its published
config.json with the copy they were read from (repository, commit, path), or why none was found. Every field there
that MODEL_ARGS can say is compared here with the entry's MODEL_ARGS, in effect (hf_config.compare: an absent flag
is Megatron's default, numbers by value). A disagreement is either slime's script being wrong, which needs a
documented catalog.CORRECTIONS entry that makes the catalog follow the published value, or a conversion convention,
which belongs in the table below.

Field -> flag, and the conventions of slime's scripts this test encodes:
  num_hidden_layers -> --num-layers; hidden_size -> --hidden-size; num_attention_heads -> --num-attention-heads;
  num_key_value_heads -> --num-query-groups (equal to the heads: multi-head attention, no --group-query-attention);
  head_dim -> --kv-channels, except for multi-latent attention, where Megatron sizes heads by --qk-head-dim,
    --qk-pos-emb-head-dim and --v-head-dim and slime's scripts fill --kv-channels by their own convention;
  intermediate_size -> --ffn-hidden-size (gpt-oss: its one intermediate_size is the experts' size, so also
    --moe-ffn-hidden-size); a config without one (Qwen3.5 MoE: every layer is MoE) leaves --ffn-hidden-size unread;
  vocab_size -> --vocab-size (gpt-oss: slime's script gives it as --padded-vocab-size);
  rms_norm_eps -> --norm-epsilon; rope_theta (rope_parameters.rope_theta) -> --rotary-base (int);
  partial_rotary_factor -> --rotary-percent; Gemma 4: the sliding layers' rope_parameters give --rotary-base and
    --rotary-percent, the full-attention layers' values are read from the checkpoint's config.json by slime's gemma4
    provider (slime_plugins/models/gemma4_provider.py:168-171 at fa3c990), as are global_head_dim and
    num_global_key_value_heads, so they are not flags;
  tie_word_embeddings false -> --untie-embeddings-and-output-weights; attention_bias -> --add-qkv-bias (gpt-oss:
    biases everywhere, so no --disable-bias-linear); use_qk_norm -> --qk-layernorm;
  n_routed_experts / num_experts / num_local_experts -> --num-experts; moe_intermediate_size ->
    --moe-ffn-hidden-size; num_experts_per_tok / top_k_experts -> --moe-router-topk; n_shared_experts x
    moe_intermediate_size or shared_expert_intermediate_size -> --moe-shared-expert-intermediate-size;
  first_k_dense_replace k -> --moe-layer-freq [0]*k+[1]*(layers-k) (MoE on every layer otherwise);
  routed_scaling_factor -> --moe-router-topk-scaling-factor (1.0: the flag absent, Megatron's default None scales
    nothing); n_group / topk_group -> --moe-router-num-groups / --moe-router-group-topk (1: ungrouped routing, which
    the flag absent and 1 both mean, so not compared); scoring_func -> --moe-router-score-function;
  q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim -> --q-lora-rank, --kv-lora-rank,
    --qk-head-dim, --qk-pos-emb-head-dim, --v-head-dim (and --multi-latent-attention);
  rope_scaling (YaRN) factor, mscale, mscale_all_dim -> --rotary-scaling-factor, --mscale, --mscale-all-dim
    (gpt-oss: slime's script gives the factor as --rope-scaling-factor);
  gpt-oss: sliding_window w -> --window-size w,0; swiglu_limit -> --activation-func-clamp-value;
  max_position_embeddings -> --max-position-embeddings, a setting, compared where the script sets it;
  num_nextn_predict_layers is not compared: --mtp-num-layers is a training choice (slime's DeepSeek-V3 scripts
    train without the published MTP layer).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pytest

from acrl.compiler._pipeline.model_args.catalog import CATALOG, CORRECTIONS
from acrl.compiler._pipeline.model_args.hf_config import compare
from acrl.compiler._spec.flags import parse_flags
from conftest import REPO

DATA = REPO / "tests" / "data" / "published_configs.json"  # test data: the compiler never reads it
PUBLISHED = json.loads(DATA.read_text(encoding="utf-8"))
MODELS: Mapping[str, Any] = PUBLISHED["models"]
SCRIPT_ENTRIES = sorted(name for name, e in CATALOG.items() if not e.hf_fields)

Expected = dict[str, tuple[str, ...] | None]  # flag -> its values (() for a bare flag), None: the flag absent


def _first(fields: Mapping[str, Any], *names: str) -> Any:
    return next((fields[n] for n in names if fields.get(n) is not None), None)


def _num(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _attention(f: Mapping[str, Any], gpt_oss: bool, mla: bool, out: Expected) -> None:
    if "num_key_value_heads" in f and "num_attention_heads" in f:
        grouped = f["num_key_value_heads"] != f["num_attention_heads"]
        out["--group-query-attention"] = () if grouped else None
        out["--num-query-groups"] = (str(f["num_key_value_heads"]),) if grouped else None
    if "head_dim" in f and not mla:
        out["--kv-channels"] = (str(f["head_dim"]),)
    if "attention_bias" in f:
        if gpt_oss:
            out["--disable-bias-linear"] = None if f["attention_bias"] else ()
        else:
            out["--add-qkv-bias"] = () if f["attention_bias"] else None
    if "use_qk_norm" in f:
        out["--qk-layernorm"] = () if f["use_qk_norm"] else None
    if mla:
        out["--multi-latent-attention"] = ()
        for field, flag in (("q_lora_rank", "--q-lora-rank"), ("kv_lora_rank", "--kv-lora-rank"),
                            ("qk_nope_head_dim", "--qk-head-dim"), ("qk_rope_head_dim", "--qk-pos-emb-head-dim"),
                            ("v_head_dim", "--v-head-dim")):
            if f.get(field) is not None:
                out[flag] = (str(f[field]),)


def _rope(f: Mapping[str, Any], gpt_oss: bool, out: Expected) -> None:
    parameters = f.get("rope_parameters") or {}
    if "sliding_attention" in parameters:  # Gemma 4: the sliding layers' RoPE (see the module docstring)
        parameters = {"partial_rotary_factor": 1.0, **parameters["sliding_attention"]}
    theta = _first({**parameters, **f}, "rope_theta")
    if theta is not None:
        out["--rotary-base"] = (_num(theta),)
    partial = _first({**parameters, **f}, "partial_rotary_factor")
    if partial is not None:
        out["--rotary-percent"] = (str(partial),)
    scaling = f.get("rope_scaling") or {}
    if scaling.get("type", scaling.get("rope_type")) == "yarn":
        if gpt_oss:
            out["--rope-scaling-factor"] = (_num(scaling["factor"]),)
        else:
            out["--rotary-scaling-factor"] = (_num(scaling["factor"]),)
            out["--mscale"] = (str(scaling.get("mscale", 1.0)),)
            out["--mscale-all-dim"] = (str(scaling.get("mscale_all_dim", 0.0)),)


def _moe(f: Mapping[str, Any], layers: int, gpt_oss: bool, out: Expected) -> None:
    experts = _first(f, "n_routed_experts", "num_experts", "num_local_experts")
    if experts is None:
        return
    out["--num-experts"] = (str(experts),)
    expert_ffn = f["intermediate_size"] if gpt_oss else f.get("moe_intermediate_size")
    if expert_ffn is not None:
        out["--moe-ffn-hidden-size"] = (str(expert_ffn),)
    topk = _first(f, "num_experts_per_tok", "experts_per_token", "top_k_experts")
    if topk is not None:
        out["--moe-router-topk"] = (str(topk),)
    shared = f.get("shared_expert_intermediate_size")
    if shared is None and f.get("n_shared_experts") is not None and expert_ffn is not None:
        shared = f["n_shared_experts"] * expert_ffn
    if shared is not None:
        out["--moe-shared-expert-intermediate-size"] = (str(shared),) if shared else None
    dense = f.get("first_k_dense_replace", 0)
    out["--moe-layer-freq"] = (f"[0]*{dense}+[1]*{layers - dense}" if dense else f"[1]*{layers}",)
    if "routed_scaling_factor" in f:
        factor = f["routed_scaling_factor"]
        out["--moe-router-topk-scaling-factor"] = None if factor == 1.0 else (str(factor),)
    for field, flag in (("n_group", "--moe-router-num-groups"), ("topk_group", "--moe-router-group-topk")):
        if f.get(field, 1) != 1:
            out[flag] = (str(f[field]),)
    if "scoring_func" in f:
        out["--moe-router-score-function"] = (f["scoring_func"],)


def expected_flags(fields: Mapping[str, Any], script_args: tuple[str, ...]) -> Expected:
    """What each field of a published config.json says MODEL_ARGS must hold (the module docstring's table)."""
    f = fields
    archs = f.get("architectures") or []
    gpt_oss, mla = "GptOssForCausalLM" in archs, f.get("kv_lora_rank") is not None
    script = parse_flags(script_args)
    layers = f.get("num_hidden_layers") or int(script["--num-layers"][0])  # a cut model: the script's layers
    out: Expected = {"--num-layers": (str(layers),), "--hidden-size": (str(f["hidden_size"]),)}
    if "num_attention_heads" in f:
        out["--num-attention-heads"] = (str(f["num_attention_heads"]),)
    if "intermediate_size" in f:
        out["--ffn-hidden-size"] = (str(f["intermediate_size"]),)
    out["--padded-vocab-size" if gpt_oss else "--vocab-size"] = (str(f["vocab_size"]),)
    if "rms_norm_eps" in f:
        out["--norm-epsilon"] = (str(f["rms_norm_eps"]),)
    if "tie_word_embeddings" in f:
        out["--untie-embeddings-and-output-weights"] = None if f["tie_word_embeddings"] else ()
    _attention(f, gpt_oss, mla, out)
    _rope(f, gpt_oss, out)
    _moe(f, layers, gpt_oss, out)
    if gpt_oss:
        out["--window-size"] = (f"{f['sliding_window']},0",)
        out["--activation-func-clamp-value"] = (str(f["swiglu_limit"]),)
    if "--max-position-embeddings" in script and "max_position_embeddings" in f:
        out["--max-position-embeddings"] = (str(f["max_position_embeddings"]),)
    return out


def disagreements(name: str, fields: Mapping[str, Any]) -> dict[str, str]:
    """flag -> message, for each flag where catalog entry ``name``'s MODEL_ARGS differ from ``fields`` in effect."""
    args = CATALOG[name].model_args()
    want = expected_flags(fields, args)
    have = parse_flags(args)
    ours = [t for flag in want if flag in have for t in (flag, *have[flag])]
    theirs = [t for flag, values in want.items() if values is not None for t in (flag, *values)]
    source = MODELS[name]["source"] if name in MODELS else {"hf_model": "the test"}
    found = compare(ours, f"acrl catalog: {name}", theirs, f"{source['hf_model']} config.json")
    return {m.flag: m.message for m in found}


def test_every_script_entry_is_checked_or_says_why_not() -> None:
    assert sorted([*MODELS, *PUBLISHED["not_found"]]) == SCRIPT_ENTRIES
    assert not set(MODELS) & set(PUBLISHED["not_found"])
    assert all(len(why) > 30 for why in PUBLISHED["not_found"].values())


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_source_is_a_pinned_public_copy(name: str) -> None:
    source = MODELS[name]["source"]
    assert source["repository"].startswith("https://github.com/") and source["path"].endswith(".json")
    assert re.fullmatch(r"[0-9a-f]{40}", source["commit"])
    assert re.fullmatch(r"[\w.-]+/[\w.-]+", source["hf_model"])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_entry_agrees_with_the_published_config(name: str) -> None:
    found = disagreements(name, MODELS[name]["fields"])
    assert set(found) == {flag for flag, _ in CORRECTIONS.get(name, ())}, found


def test_every_model_has_its_shape_checked() -> None:
    """The table reads the fields that size every model: a field renamed in the data would not go unnoticed."""
    wants = {n: set(expected_flags(m["fields"], CATALOG[n].model_args())) for n, m in MODELS.items()}
    subsets = {"glm4.7-30B-A3B", "kimi-k2-thinking"}  # copies without rms_norm_eps and rope_theta
    for name, want in wants.items():
        shape = {"--num-layers", "--hidden-size", "--num-attention-heads"}
        if not name.startswith("qwen3.5-35B"):  # every layer is MoE: its config.json has no dense intermediate_size
            shape.add("--ffn-hidden-size")
        if name not in subsets:
            shape |= {"--norm-epsilon", "--rotary-base"}
        assert shape <= want, name
        assert "--vocab-size" in want or "--padded-vocab-size" in want
    assert {n for n, want in wants.items() if "--num-experts" not in want} == {"mimo-7B-rl", "gemma4-31B",
                                                                               "qwen3.5-27B"}


@pytest.mark.parametrize(("name", "field", "value", "flag"), [
    ("deepseek-v3", "rms_norm_eps", 1e-05, "--norm-epsilon"),
    ("kimi-k2", "first_k_dense_replace", 3, "--moe-layer-freq"),
    ("glm4.5-106B-A12B", "num_key_value_heads", 96, "--num-query-groups"),
    ("glm5.2-744B-A40B", "rope_parameters", {"rope_theta": 1000000}, "--rotary-base"),
    ("gemma4-26B-A4B", "tie_word_embeddings", False, "--untie-embeddings-and-output-weights"),
    ("gpt-oss-20B", "vocab_size", 201024, "--padded-vocab-size"),
    ("qwen3.5-35B-A3B", "shared_expert_intermediate_size", 1024, "--moe-shared-expert-intermediate-size"),
    ("deepseek-v3-5layer", "rope_scaling", {"type": "yarn", "factor": 4, "mscale": 1.0, "mscale_all_dim": 1.0},
     "--rotary-scaling-factor"),
])
def test_a_published_value_the_entry_does_not_carry_is_reported(name: str, field: str, value: Any, flag: str) -> None:
    assert set(disagreements(name, {**MODELS[name]["fields"], field: value})) == {flag}
