"""The architecture MODEL_ARGS describe and its parameter count, by where Megatron places them (embedding,
output layer, final norm, and per layer: dense and expert parameters). Pure arithmetic over the frozen
MODEL_ARGS; the memory estimate (memory.py) and docs/memory.md build on it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import attrs

from ..model_args.hf_config import moe_layer_pattern

_MODELED_SPECS = frozenset({"slime_plugins.models.glm4"})  # --spec modules whose layers are standard + norms
_MAX_SIZE, _MAX_LAYERS = 10**9, 100_000
Flags = Mapping[str, Sequence[str]]



@attrs.frozen
class Mla:
    """Multi-latent attention (DeepSeek-V3 style) dimensions."""

    q_lora_rank: int | None
    kv_lora_rank: int
    qk_head_dim: int
    qk_pos_dim: int
    v_head_dim: int


@attrs.frozen
class Architecture:
    """The shape of the network Megatron builds, read from MODEL_ARGS (Megatron's defaults where a flag is absent)."""

    layers: int
    hidden: int
    ffn_hidden: int
    heads: int
    query_groups: int
    kv_channels: int
    vocab: int
    tied: bool
    gated_mlp: bool  # --swiglu: three projections instead of two
    qkv_bias: bool
    linear_bias: bool  # no --disable-bias-linear: every linear layer has a bias
    qk_norm: bool
    norm_size: int  # parameters of one norm: hidden (RMSNorm) or 2 x hidden (LayerNorm)
    norms_per_layer: int
    position_rows: int  # learned absolute position embeddings; 0 with RoPE
    experts: int
    moe_ffn_hidden: int
    shared_ffn_hidden: int
    shared_gate: bool
    moe_pattern: str  # "0"/"1" per layer, "1" a MoE layer
    output_gate: bool  # --attention-output-gate: the query projection also produces a gate
    mla: Mla | None
    vocab_divisible_by: int
    unmodeled: tuple[str, ...]  # features whose parameters are not counted exactly


def flag_int(flags: Flags, flag: str) -> int | None:
    """The flag's value when it is a plausible size (1 to a billion), else None: the estimate never fails on a
    value Megatron or slime would reject anyway."""
    values = flags.get(flag)
    try:
        value = int(values[0]) if values else None
    except ValueError:
        return None
    return value if value is not None and 0 < value <= _MAX_SIZE else None


def architecture(flags: Flags) -> Architecture | str:
    """The architecture MODEL_ARGS describe, or why it cannot be read (a required flag is missing or implausible)."""
    required = {f: flag_int(flags, f)
                for f in ("--num-layers", "--hidden-size", "--num-attention-heads", "--vocab-size")}
    missing = [f for f, v in required.items() if v is None]
    if missing:
        return f"MODEL_ARGS lack a positive {', '.join(missing)}"
    if (required["--num-layers"] or 0) > _MAX_LAYERS:
        return f"--num-layers above {_MAX_LAYERS}"
    layers, hidden, heads, vocab = (v or 0 for v in required.values())
    gated = "--swiglu" in flags
    # Megatron's default FFN size: 4h, or 2/3 of it rounded down to a multiple of 64 for a gated MLP.
    ffn = flag_int(flags, "--ffn-hidden-size") or (int(8 * hidden / 3 / 64) * 64 if gated else 4 * hidden)
    gqa = "--group-query-attention" in flags
    groups = (flag_int(flags, "--num-query-groups") if gqa else None) or heads
    experts = flag_int(flags, "--num-experts") or 0
    if experts:
        freq = flags.get("--moe-layer-freq") or ["1"]
        pattern = moe_layer_pattern("".join(freq), layers)
        if pattern is None or len(pattern) != layers or set(pattern) - {"0", "1"}:
            return f"--moe-layer-freq {' '.join(freq)} does not give one 0 or 1 per layer ({layers} layers)"
    else:
        pattern = "0" * layers
    mla = None
    if "--multi-latent-attention" in flags:
        mla = Mla(flag_int(flags, "--q-lora-rank"), flag_int(flags, "--kv-lora-rank") or 32,
                  flag_int(flags, "--qk-head-dim") or 128, flag_int(flags, "--qk-pos-emb-head-dim") or 64,
                  flag_int(flags, "--v-head-dim") or 128)
    position = (flags.get("--position-embedding-type") or ["learned_absolute"])[0]
    learned = position == "learned_absolute" and not {"--use-rotary-position-embeddings",
                                                      "--no-position-embedding"} & set(flags)
    unmodeled = []
    if flags.get("--spec") and flags["--spec"][0] not in _MODELED_SPECS:
        unmodeled.append(f"--spec {' '.join(flags['--spec'])} (its layers are counted as standard attention and MLP)")
    if "--mtp-num-layers" in flags:
        unmodeled.append("--mtp-num-layers (the multi-token-prediction layers are not counted)")
    if "--use-gated-attention" in flags:
        unmodeled.append("--use-gated-attention (counted as standard attention)")
    normalization = (flags.get("--normalization") or ["LayerNorm"])[0]
    return Architecture(
        layers=layers, hidden=hidden, ffn_hidden=ffn, heads=heads, query_groups=groups,
        kv_channels=flag_int(flags, "--kv-channels") or hidden // heads, vocab=vocab,
        tied="--untie-embeddings-and-output-weights" not in flags, gated_mlp=gated,
        qkv_bias="--add-qkv-bias" in flags, linear_bias="--disable-bias-linear" not in flags,
        qk_norm="--qk-layernorm" in flags, norm_size=hidden if normalization == "RMSNorm" else 2 * hidden,
        norms_per_layer=2 + ("--post-self-attn-layernorm" in flags) + ("--post-mlp-layernorm" in flags),
        position_rows=(flag_int(flags, "--max-position-embeddings") or flag_int(flags, "--seq-length") or 4096)
        if learned else 0,
        experts=experts, moe_ffn_hidden=flag_int(flags, "--moe-ffn-hidden-size") or ffn,
        shared_ffn_hidden=flag_int(flags, "--moe-shared-expert-intermediate-size") or 0,
        shared_gate="--moe-shared-expert-gate" in flags, moe_pattern=pattern,
        output_gate="--attention-output-gate" in flags, mla=mla,
        vocab_divisible_by=flag_int(flags, "--make-vocab-size-divisible-by") or 128, unmodeled=tuple(unmodeled))


# --- parameters ----------------------------------------------------------------------------------------------

@attrs.frozen
class ParameterCount:
    """Parameters by where Megatron places them."""

    embedding: int  # word (and learned position) embeddings: the first pipeline stage
    output: int  # the output layer's own weights; 0 when tied to the embedding
    final_norm: int
    layers: tuple[tuple[int, int], ...]  # (dense, expert) parameters of each transformer layer

    @property
    def experts(self) -> int:
        return sum(e for _, e in self.layers)

    @property
    def total(self) -> int:
        return self.embedding + self.output + self.final_norm + sum(d + e for d, e in self.layers)


def padded_vocab(a: Architecture, tensor: int = 1) -> int:
    """Megatron pads the vocabulary to a multiple of make-vocab-size-divisible-by x tensor parallel size."""
    multiple = a.vocab_divisible_by * tensor
    return math.ceil(a.vocab / multiple) * multiple


def _attention(a: Architecture) -> int:
    h = a.hidden
    if a.mla is not None:
        m = a.mla
        qk = m.qk_head_dim + m.qk_pos_dim
        q = h * m.q_lora_rank + m.q_lora_rank * a.heads * qk if m.q_lora_rank else h * a.heads * qk
        kv = h * (m.kv_lora_rank + m.qk_pos_dim) + m.kv_lora_rank * a.heads * (m.qk_head_dim + m.v_head_dim)
        norms = ((m.q_lora_rank or 0) + m.kv_lora_rank) if a.qk_norm else 0
        return q + kv + a.heads * m.v_head_dim * h + norms
    q = a.heads * a.kv_channels * (2 if a.output_gate else 1)
    kv = 2 * a.query_groups * a.kv_channels
    n = h * (q + kv) + a.heads * a.kv_channels * h
    n += (q + kv if a.qkv_bias or a.linear_bias else 0) + (h if a.linear_bias else 0)
    return n + (2 * a.kv_channels if a.qk_norm else 0)


def _mlp(a: Architecture, ffn: int) -> int:
    projections = 3 if a.gated_mlp else 2
    bias = (ffn * (projections - 1) + a.hidden) if a.linear_bias else 0
    return a.hidden * ffn * projections + bias


def count_parameters(a: Architecture, tensor: int = 1) -> ParameterCount:
    """Parameters of the model Megatron builds, with the vocabulary padded for ``tensor`` parallel ranks."""
    attention_and_norms = _attention(a) + a.norms_per_layer * a.norm_size
    layers = []
    for kind in a.moe_pattern:
        if kind == "1":
            shared = (_mlp(a, a.shared_ffn_hidden) + (a.hidden if a.shared_gate else 0)) if a.shared_ffn_hidden else 0
            layers.append((attention_and_norms + a.experts * a.hidden + shared, a.experts * _mlp(a, a.moe_ffn_hidden)))
        else:
            layers.append((attention_and_norms + _mlp(a, a.ffn_hidden), 0))
    vocab = padded_vocab(a, tensor)
    return ParameterCount(embedding=vocab * a.hidden + a.position_rows * a.hidden,
                          output=0 if a.tied else vocab * a.hidden, final_norm=a.norm_size, layers=tuple(layers))


# --- the training actor ----------------------------------------------------------------------------------------
