"""The static memory estimate (compiler/_pipeline/validate/memory.py, parameters.py; docs/memory.md), rule ACRL-M007.

Parameter totals are the published ones: the safetensors totals on the models' Hugging Face pages (Qwen, Meta), and
llama.cpp's count of GLM-Z1-32B-0414 (the GLM-4-32B-0414 architecture): 32.57B.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from acrl.compiler import Bundle, SpecError
from acrl.compiler._pipeline.model_args.catalog import CATALOG
from acrl.compiler._pipeline.parse import SpecSource
from acrl.compiler._pipeline.structure import structure
from acrl.compiler._pipeline.validate.memory import GIB, estimate_memory
from acrl.compiler._pipeline.validate.parameters import Architecture, architecture, count_parameters, padded_vocab
from acrl.compiler._spec.flags import parse_flags
from acrl.compiler._spec.tables import Spec
from conftest import EXAMPLE_SPECS, MINIMAL, merge, slime_model_args

Compile = Callable[..., Bundle]

PUBLISHED = {  # catalog name -> published parameter total
    "qwen2.5-3B": 3.09e9, "qwen2.5-7B": 7.62e9, "qwen2.5-72B-Instruct": 72.7e9, "qwen3-4B": 4.02e9,
    "qwen3-8B": 8.19e9, "qwen3-30B-A3B": 30.5e9, "qwen3-235B-A22B": 235e9, "llama3.1-8B-Instruct": 8.03e9,
    "llama3.2-3B-Instruct": 3.21e9, "glm4-32B": 32.57e9,
}


def arch(name: str) -> Architecture:
    a = architecture(parse_flags(CATALOG[name].model_args()))
    assert isinstance(a, Architecture), a
    return a


def spec_of(overrides: dict[str, Any] | None = None) -> Spec:
    data = merge(MINIMAL, overrides or {})
    spec, diagnostics = structure(SpecSource("spec.toml", "", data, {}))
    assert spec is not None, [d.format() for d in diagnostics]
    return spec


def estimate(model: str, overrides: dict[str, Any] | None = None) -> Any:
    e = estimate_memory(spec_of(overrides), parse_flags(CATALOG[model].model_args()))
    assert not isinstance(e, str), e
    return e


@pytest.mark.parametrize(("name", "published"), sorted(PUBLISHED.items()))
def test_parameter_count_matches_the_published_total(name: str, published: float) -> None:
    assert count_parameters(arch(name)).total == pytest.approx(published, rel=0.01)


def test_exact_counts_of_dense_gqa_and_moe_models() -> None:
    # Hugging Face's own totals (safetensors metadata), to the parameter
    assert count_parameters(arch("qwen2.5-3B")).total == 3_085_938_688  # qkv bias, tied
    assert count_parameters(arch("llama3.1-8B-Instruct")).total == 8_030_261_248  # untied
    assert count_parameters(arch("qwen3-30B-A3B")).total == 30_532_122_624  # 128 experts, qk-norm, head_dim 128


def test_a_hand_counted_toy_model() -> None:
    flags = parse_flags(["--num-layers", "2", "--hidden-size", "64", "--ffn-hidden-size", "128",
                         "--num-attention-heads", "4", "--group-query-attention", "--num-query-groups", "2",
                         "--kv-channels", "32", "--swiglu", "--disable-bias-linear", "--add-qkv-bias",
                         "--normalization", "RMSNorm", "--vocab-size", "1000", "--untie-embeddings-and-output-weights",
                         "--use-rotary-position-embeddings"])
    a = architecture(flags)
    assert isinstance(a, Architecture)
    q, kv = 4 * 32, 2 * 2 * 32
    layer = 64 * (q + kv) + (q + kv) + q * 64 + 3 * 64 * 128 + 2 * 64
    vocab = padded_vocab(a)
    assert vocab == 1024  # padded to a multiple of 128
    count = count_parameters(a)
    assert count.layers == ((layer, 0), (layer, 0))
    assert count.total == 2 * layer + 2 * vocab * 64 + 64
    assert padded_vocab(a, tensor=8) == 1024 and padded_vocab(a, tensor=3) == 1152


def test_moe_layers_follow_the_layer_pattern() -> None:
    base = ["--num-layers", "4", "--hidden-size", "8", "--num-attention-heads", "2", "--vocab-size", "128",
            "--ffn-hidden-size", "16", "--swiglu", "--num-experts", "4", "--moe-ffn-hidden-size", "4",
            "--moe-shared-expert-intermediate-size", "6", "--moe-shared-expert-gate", "--disable-bias-linear"]
    a = architecture(parse_flags([*base, "--moe-layer-freq", "[0]*1+[1]*3"]))
    assert isinstance(a, Architecture) and a.moe_pattern == "0111"
    dense, moe = count_parameters(a).layers[:2]
    assert moe[1] == 4 * 3 * 8 * 4 and dense[1] == 0
    assert moe[0] - dense[0] == 4 * 8 + 3 * 8 * 6 + 8 - 3 * 8 * 16  # router + gated shared expert - dense MLP
    every_other = architecture(parse_flags([*base, "--moe-layer-freq", "2"]))
    assert isinstance(every_other, Architecture) and every_other.moe_pattern == "1010"


def test_deepseek_v3_multi_latent_attention() -> None:
    scripts = slime_model_args()
    a = architecture(parse_flags(scripts["deepseek-v3"]))
    assert isinstance(a, Architecture) and a.mla is not None
    assert count_parameters(a).total == pytest.approx(671e9, rel=0.01)  # without the MTP layer


def test_glm4_32b_slime_script_is_not_the_published_model() -> None:
    scripts = slime_model_args()
    script = architecture(parse_flags(scripts["glm4-32B"]))
    assert isinstance(script, Architecture)
    assert count_parameters(script).total == pytest.approx(34.68e9, rel=0.001)  # 64 layers, 8 KV heads
    assert count_parameters(arch("glm4-32B")).total == pytest.approx(32.57e9, rel=0.001)


@pytest.mark.parametrize(("flags", "why"), [
    (["--hidden-size", "64"], "--num-layers"),
    (["--num-layers", "x", "--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size", "10"], "--num-layers"),
    (["--num-layers", "-2", "--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size", "10"], "--num-layers"),
    (["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size", "10",
      "--num-experts", "2", "--moe-layer-freq", "[1]*3"], "--moe-layer-freq"),
    (["--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size", "10",
      "--num-experts", "2", "--moe-layer-freq", "[1]*99999999999999"], "--moe-layer-freq"),
])
def test_unreadable_architectures_say_why(flags: list[str], why: str) -> None:
    reason = architecture(parse_flags(flags))
    assert isinstance(reason, str) and why in reason


# --- the actor --------------------------------------------------------------------------------------------------

def test_actor_bytes_per_parameter() -> None:
    """bf16 weights (2 B), fp32 gradients (4 B), Adam's fp32 master weights and moments (12 B) over DP."""
    n = count_parameters(arch("qwen3-8B"), tensor=4).total
    e = estimate("qwen3-8B", {"parallel": {"tensor": 4}, "train": {"optimizer_cpu_offload": False}})
    per_gpu = n / 4
    assert e.actor.parameters_per_gpu == pytest.approx(per_gpu, abs=1)
    assert e.actor.weights == pytest.approx(2 * per_gpu / GIB)
    assert e.actor.gradients == pytest.approx(4 * per_gpu / GIB)
    assert e.actor.data_parallel == 2  # 8 GPUs / TP 4
    assert e.actor.optimizer == pytest.approx(12 * per_gpu / 2 / GIB)


def test_optimizer_offload_precision_and_gradient_dtype() -> None:
    offloaded = estimate("qwen3-8B", {"train": {"optimizer_cpu_offload": True}})
    assert offloaded.actor.optimizer == 0 and offloaded.actor.offload_fraction == 1
    half = estimate("qwen3-8B", {"extra": {"flags": {"--optimizer-offload-fraction": 0.5}}})
    full = estimate("qwen3-8B", {"train": {"optimizer_cpu_offload": False}})
    assert half.actor.optimizer == pytest.approx(full.actor.optimizer / 2)
    low = estimate("qwen3-8B", {"train": {"optimizer_cpu_offload": False},
                                "extra": {"flags": {"--exp-avg-dtype": "bf16", "--exp-avg-sq-dtype": "bf16"}}})
    assert low.actor.optimizer_bytes == 8 and low.actor.optimizer == pytest.approx(full.actor.optimizer * 8 / 12)
    ignored = estimate("qwen3-8B", {"train": {"optimizer_cpu_offload": False, "precision_aware_optimizer": False},
                                    "extra": {"flags": {"--exp-avg-dtype": "bf16"}}})
    assert ignored.actor.optimizer_bytes == 12  # only the precision-aware optimizer honours the dtypes
    bf16 = estimate("qwen3-8B", {"train": {"accumulate_allreduce_grads_in_fp32": False}})
    assert bf16.actor.gradients == pytest.approx(offloaded.actor.gradients / 2) and bf16.actor.grad_dtype == "bf16"


def test_pipeline_stages_hold_the_embedding_and_the_output_layer() -> None:
    a = arch("llama3.1-8B-Instruct")  # untied: 32 layers, 128256 x 4096 embedding and output layer
    one = estimate("llama3.1-8B-Instruct", {"parallel": {"tensor": 1, "sequence_parallel": False}})
    four = estimate("llama3.1-8B-Instruct", {"parallel": {"tensor": 1, "pipeline": 4, "sequence_parallel": False}})
    count = count_parameters(a)
    layer = count.layers[0][0]
    assert one.actor.parameters_per_gpu == count.total
    assert four.actor.parameters_per_gpu == 8 * layer + count.output + count.final_norm  # the last stage
    tied = estimate("qwen3-4B", {"parallel": {"tensor": 1, "pipeline": 4, "sequence_parallel": False}})
    tied_count = count_parameters(arch("qwen3-4B"))
    assert tied.actor.parameters_per_gpu == 9 * tied_count.layers[0][0] + tied_count.embedding + \
        tied_count.final_norm  # tied: the last stage keeps its own copy of the embedding


def test_expert_parallelism_shards_the_experts() -> None:
    a = arch("qwen3-30B-A3B")
    count = count_parameters(a, tensor=2)
    dense = count.total - count.experts
    e = estimate("qwen3-30B-A3B", {"parallel": {"expert": 4}, "train": {"optimizer_cpu_offload": False},
                                   "model": {"args": None, "type": "qwen3-30B-A3B"}})
    assert e.actor.parameters_per_gpu == pytest.approx(dense / 2 + count.experts / 8, abs=1)  # EP 4 x ETP 2
    assert e.actor.expert_data_parallel == 1 and e.actor.data_parallel == 4
    assert e.actor.optimizer == pytest.approx(12 * (dense / 2 / 4 + count.experts / 8) / GIB)


# --- the rollout engine ------------------------------------------------------------------------------------------

def test_engine_weights_and_kv_cache() -> None:
    e = estimate("qwen2.5-3B")  # 2 GPUs per engine, 0.7 x 80 GiB
    assert e.rollout.weights == pytest.approx(2 * 3_085_938_688 / 2 / GIB)
    assert e.rollout.static == pytest.approx(56.0)
    assert e.rollout.kv_bytes_per_token == 2 * 36 * 1 * 128 * 2  # K and V, 36 layers, 2 KV heads / TP 2, bf16
    assert e.rollout.kv_tokens == int((56.0 - e.rollout.weights) * GIB / (2 * 36 * 128 * 2))
    replicated = estimate("qwen2.5-3B", {"rollout": {"gpus_per_engine": 8}})
    assert replicated.rollout.kv_bytes_per_token == 2 * 36 * 1 * 128 * 2  # 2 KV heads on 8 ranks: one each
    fp8 = estimate("qwen2.5-3B", {"extra": {"flags": {"--sglang-kv-cache-dtype": "fp8_e4m3"}}})
    assert fp8.rollout.kv_bytes_per_token == e.rollout.kv_bytes_per_token / 2
    pp = estimate("qwen2.5-3B", {"rollout": {"gpus_per_engine": 4}, "extra": {"flags": {"--sglang-pp-size": 2}}})
    assert (pp.rollout.engine_tp, pp.rollout.kv_bytes_per_token) == (2, 2 * 18 * 1 * 128 * 2)


def test_colocated_phases_share_the_gpu() -> None:
    e = estimate("qwen2.5-3B")
    assert e.colocated and e.offload_train and e.offload_rollout
    assert e.training_phase == pytest.approx(e.actor.total + 2.0)  # two CUDA contexts: actor and engine
    assert e.rollout_phase == pytest.approx(e.rollout.static + 2.0)
    kept = estimate("qwen2.5-3B", {"extra": {"flags": {"--no-offload-rollout": True, "--no-offload-train": True}}})
    assert kept.training_phase == pytest.approx(e.training_phase + e.rollout.static)
    assert kept.rollout_phase == pytest.approx(e.rollout_phase + e.actor.total)
    apart = estimate("qwen2.5-3B", {"cluster": {"colocate": False, "rollout_num_gpus": 8}})
    assert apart.training_phase == pytest.approx(e.actor.total + 1.0)


# --- the rule ------------------------------------------------------------------------------------------------------

def test_a_32b_model_on_one_gpu_per_rank_without_offload_warns_with_the_numbers(compile_overrides: Compile) -> None:
    bundle = compile_overrides({"model": {"args": None, "type": "qwen2.5-32B-Instruct"},
                                "parallel": {"tensor": 1, "sequence_parallel": False},
                                "train": {"optimizer_cpu_offload": False}, "rollout": {"gpus_per_engine": 4}})
    (w,) = [w for w in bundle.warnings if w.rule == "ACRL-M007"]
    n = 32_763_876_352
    for number in (2 * n / GIB, 4 * n / GIB, 12 * n / 8 / GIB, 2 * n / GIB + 4 * n / GIB + 12 * n / 8 / GIB + 2):
        assert f"{number:.1f} GiB" in w.message
    assert "more than [cluster] gpu_memory_gib = 80" in w.message and "32.76B" in w.message
    assert w.key == "parallel.tensor"
    assert "optimizer_cpu_offload = true" in w.hint and "tensor (now 1)" in w.hint
    assert json.loads(bundle.files["manifest.json"])["warnings"][0]["rule"] == "ACRL-M007"
    with pytest.raises(SpecError, match="ACRL-M007"):
        compile_overrides({"model": {"args": None, "type": "qwen2.5-32B-Instruct"},
                           "parallel": {"tensor": 1, "sequence_parallel": False},
                           "train": {"optimizer_cpu_offload": False}, "rollout": {"gpus_per_engine": 4}}, strict=True)


def test_more_gpu_memory_makes_it_fit(compile_overrides: Compile) -> None:
    setup = {"model": {"args": None, "type": "qwen3-8B"}, "parallel": {"tensor": 1, "sequence_parallel": False}}
    # 8.19B parameters x (2 + 4) bytes + two CUDA contexts = 47.8 GiB per GPU
    (w,) = compile_overrides(merge(setup, {"cluster": {"gpu_memory_gib": 40}})).warnings
    assert w.rule == "ACRL-M007" and "47.8 GiB" in w.message and w.key == "parallel.tensor"
    assert compile_overrides(setup).warnings == ()


def test_engine_without_room_for_the_kv_cache(compile_overrides: Compile) -> None:
    bundle = compile_overrides({"model": {"args": None, "type": "qwen3-32B"}, "parallel": {"tensor": 8},
                                "rollout": {"gpus_per_engine": 1}})
    (w,) = [w for w in bundle.warnings if w.rule == "ACRL-M007"]
    assert "61.0 GiB of bf16 weights" in w.message and "0.7 x 80 GiB = 56.0 GiB" in w.message
    assert w.key == "rollout.gpus_per_engine" and "gpus_per_engine" in w.hint


def test_kv_cache_smaller_than_one_sequence(compile_overrides: Compile) -> None:
    long = {"model": {"args": None, "type": "qwen3-8B"}, "rollout": {"gpus_per_engine": 1, "max_context_len": 65536},
            "train": {"max_tokens_per_gpu": 65536}}
    assert compile_overrides(long).warnings == ()
    (w,) = compile_overrides(merge(long, {"sglang": {"mem_fraction_static": 0.25}})).warnings
    # 0.25 x 80 = 20 GiB less 15.3 GiB of weights; 36 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 144 KiB a token
    tokens = int((20 - 2 * 8_190_735_360 / GIB) * GIB / (36 * 8 * 128 * 2 * 2))
    assert w.rule == "ACRL-M007" and "144 KiB per token" in w.message and "4.7 GiB" in w.message
    assert f"{tokens:,} tokens" in w.message and "65,536 tokens ([rollout] max_context_len)" in w.message


def test_memory_hungry_mem_fraction_static_with_colocate(compile_overrides: Compile) -> None:
    (w,) = compile_overrides({"sglang": {"mem_fraction_static": 0.99}}).warnings
    assert w.rule == "ACRL-M007" and "79.2 GiB" in w.message and "81.2 GiB" in w.message
    assert w.hint == "lower [sglang] mem_fraction_static to at most 0.97"


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_example_specs_fit(path: Any) -> None:
    from acrl.compiler import compile_spec

    bundle = compile_spec(path)
    e = estimate_memory(bundle.spec, parse_flags(bundle.model_args.args))
    assert not isinstance(e, str)
    assert e.training_phase < 0.5 * e.gpu and e.rollout_phase < e.gpu and e.rollout.kv_tokens > 100_000
    assert not [w for w in bundle.warnings if w.rule == "ACRL-M007"]


def test_unreadable_model_args_give_no_estimate_and_no_error(compile_overrides: Compile) -> None:
    bundle = compile_overrides({"model": {"args": {"num-layers": "many"}}})
    assert not [w for w in bundle.warnings if w.rule == "ACRL-M007"]
    assert isinstance(estimate_memory(bundle.spec, parse_flags(bundle.model_args.args)), str)
    garbage = {"--optimizer-offload-fraction": "lots", "--expert-tensor-parallel-size": -3,
               "--sglang-pp-size": "x", "--exp-avg-dtype": "int3"}
    assert not isinstance(estimate("qwen2.5-3B", {"extra": {"flags": garbage}}), str)


# --- the spec key --------------------------------------------------------------------------------------------------

def test_gpu_memory_default_and_range(compile_overrides: Compile) -> None:
    bundle = compile_overrides()
    assert bundle.spec.cluster.gpu_memory_gib == 80.0
    assert "gpu_memory_gib = 80.0\n" in bundle.files["spec.toml"].decode()
    assert compile_overrides({"cluster": {"gpu_memory_gib": 141}}).spec.cluster.gpu_memory_gib == 141.0
    for bad in (0, -8, 5000):
        with pytest.raises(SpecError) as info:
            compile_overrides({"cluster": {"gpu_memory_gib": bad}})
        (diag,) = info.value.diagnostics
        assert diag.key == "cluster.gpu_memory_gib" and diag.hint


@pytest.mark.parametrize("path", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_docs_memory_md_shows_what_the_code_computes(path: Any) -> None:
    from acrl.compiler import compile_spec
    from conftest import REPO

    bundle = compile_spec(path)
    e = estimate_memory(bundle.spec, parse_flags(bundle.model_args.args))
    assert not isinstance(e, str)
    (row,) = [line for line in (REPO / "docs" / "memory.md").read_text().splitlines()
              if line.startswith(f"| specs/{path.name} ")]
    for number in (e.training_phase, e.rollout_phase, e.rollout.kv_cache, e.actor.weights, e.actor.gradients):
        assert f"{number:.1f} GiB" in row or f"{number:.1f} +" in row, (number, row)


def test_more_pipeline_stages_than_layers_is_estimated_at_once() -> None:
    """The estimate never walks a stage per pipeline rank: a huge size (an error ACRL-M002 reports) is instant."""
    import time

    from acrl.compiler._pipeline.validate.memory import _stages
    from acrl.compiler._pipeline.validate.parameters import count_parameters

    a = arch("qwen2.5-3B")
    count = count_parameters(a, 1)
    start = time.perf_counter()
    stages = _stages(count, 10**9, a.tied)
    assert time.perf_counter() - start < 0.5
    assert len(stages) == len(count.layers) + 1 and stages[-1][1] == 0
    assert sum(d for d, _ in stages) >= sum(d for d, _ in count.layers)


def test_dp_attention_shards_the_kv_heads_over_the_attention_tensor_size() -> None:
    # qwen3-30B-A3B: 4 KV heads. An engine of 8 GPUs without DP attention shards them (one per rank, replicated);
    # with DP attention 8 each rank runs the whole attention of its own requests: all 4 KV heads per token.
    # The engine's sizes are the placement model's (placement.EngineParallel).
    plain = estimate("qwen3-30B-A3B", {"rollout": {"gpus_per_engine": 8}})
    dp = estimate("qwen3-30B-A3B", {"rollout": {"gpus_per_engine": 8}, "sglang": {"data_parallel_size": 8},
                                    "extra": {"flags": {"--sglang-enable-dp-attention": True}}})
    assert plain.rollout.engine_tp == dp.rollout.engine_tp == 8
    assert dp.rollout.kv_bytes_per_token == 4 * plain.rollout.kv_bytes_per_token
    assert dp.rollout.weights == plain.rollout.weights
