"""Hugging Face config.json -> slime/Megatron MODEL_ARGS, and a field-by-field comparison of two MODEL_ARGS lists.

The translation is ../shared/slime/hf_megatron_mapping.md written as code, in the token conventions of slime's
scripts/models/*.sh. What config.json says that Megatron cannot express is reported, never guessed. Pure: no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Literal

import attrs

from ..._spec.flags import parse_flags

# Megatron flag -> the config.json field it must agree with (hf_megatron_mapping.md), for messages.
HF_FIELD: Mapping[str, str] = {
    "--num-layers": "num_hidden_layers", "--hidden-size": "hidden_size", "--ffn-hidden-size": "intermediate_size",
    "--num-attention-heads": "num_attention_heads", "--num-query-groups": "num_key_value_heads",
    "--kv-channels": "head_dim", "--norm-epsilon": "rms_norm_eps", "--normalization": "rms_norm_eps (RMSNorm)",
    "--rotary-base": "rope_theta", "--rotary-percent": "partial_rotary_factor", "--vocab-size": "vocab_size",
    "--untie-embeddings-and-output-weights": "tie_word_embeddings", "--add-qkv-bias": "attention_bias",
    "--disable-bias-linear": "attention_bias / mlp_bias", "--qk-layernorm": "architectures (q_norm, k_norm)",
    "--swiglu": "hidden_act", "--position-embedding-type": "architectures (RoPE)",
    "--max-position-embeddings": "max_position_embeddings", "--use-rope-scaling": "rope_scaling.rope_type",
    "--rope-scaling-factor": "rope_scaling.factor", "--num-experts": "num_experts",
    "--moe-ffn-hidden-size": "moe_intermediate_size", "--moe-router-topk": "num_experts_per_tok",
    "--moe-shared-expert-intermediate-size": "shared_expert_intermediate_size",
    "--moe-shared-expert-gate": "shared_expert_intermediate_size", "--moe-router-pre-softmax": "norm_topk_prob",
    "--moe-layer-freq": "decoder_sparse_step / mlp_only_layers / first_k_dense_replace",
    "--moe-router-score-function": "scoring_func", "--moe-router-enable-expert-bias": "topk_method",
    "--moe-router-topk-scaling-factor": "routed_scaling_factor", "--moe-router-num-groups": "n_group",
    "--moe-router-group-topk": "topk_group", "--multi-latent-attention": "q_lora_rank / kv_lora_rank",
    "--q-lora-rank": "q_lora_rank", "--kv-lora-rank": "kv_lora_rank", "--qk-head-dim": "qk_nope_head_dim",
    "--qk-pos-emb-head-dim": "qk_rope_head_dim", "--v-head-dim": "v_head_dim",
    "--rotary-scaling-factor": "rope_scaling.factor (YaRN)", "--mscale": "rope_scaling.mscale",
    "--mscale-all-dim": "rope_scaling.mscale_all_dim", "--mtp-num-layers": "num_nextn_predict_layers",
    "--rotary-interleaved": "architectures (GLM RoPE)", "--post-self-attn-layernorm": "architectures (GLM-4 norms)",
    "--post-mlp-layernorm": "architectures (GLM-4 norms)", "--apply-layernorm-1p": "architectures ((1+w) RMSNorm)",
    "--use-gated-attention": "architectures (gated attention)", "--attention-output-gate": "architectures (gated "
    "attention)", "--spec": "architectures",
}
# Performance and training settings: they do not change the weights or the forward pass, so a difference is a warning.
SETTINGS = frozenset({
    "--max-position-embeddings", "--seq-length", "--moe-grouped-gemm", "--moe-permute-fusion",
    "--moe-token-dispatcher-type", "--moe-token-drop-policy", "--moe-aux-loss-coeff",
    "--moe-router-load-balancing-type", "--moe-router-bias-update-rate", "--moe-router-dtype",
    "--attention-softmax-in-fp32", "--no-rope-fusion", "--no-masked-softmax-fusion", "--make-vocab-size-divisible-by",
    "--enable-experimental", "--allgather-cp",
})
# What Megatron uses when a flag is absent (megatron/training/arguments.py), so that absent == default compares equal.
_DEFAULTS: Mapping[str, str] = {
    "--norm-epsilon": "1e-5", "--normalization": "LayerNorm", "--rotary-base": "10000", "--rotary-percent": "1.0",
    "--position-embedding-type": "learned_absolute", "--moe-router-topk": "2", "--moe-router-score-function": "softmax",
    "--moe-layer-freq": "1", "--moe-aux-loss-coeff": "0", "--moe-token-drop-policy": "probs",
    "--moe-token-dispatcher-type": "allgather", "--rope-scaling-factor": "8.0", "--rotary-scaling-factor": "1.0",
    "--mscale": "1.0", "--mscale-all-dim": "0.0",
}
_QWEN2 = frozenset({"Qwen2ForCausalLM", "Qwen2MoeForCausalLM"})
_QWEN3 = frozenset({"Qwen3ForCausalLM", "Qwen3MoeForCausalLM"})
_MOE = frozenset({"Qwen2MoeForCausalLM", "Qwen3MoeForCausalLM"})
_GLM4, _LLAMA = "Glm4ForCausalLM", "LlamaForCausalLM"
SUPPORTED_ARCHITECTURES = _QWEN2 | _QWEN3 | {_GLM4, _LLAMA}
_REQUIRED = ("num_hidden_layers", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
             "rms_norm_eps", "vocab_size")
# Fields that do not shape the network Megatron builds (tokens, dtype, caching, context length, training-only knobs).
_NOT_ARCHITECTURE = frozenset({
    "_name_or_path", "architectures", "model_type", "torch_dtype", "dtype", "transformers_version", "bos_token_id",
    "eos_token_id", "pad_token_id", "use_cache", "initializer_range", "attention_dropout", "max_position_embeddings",
    "max_window_layers", "pretraining_tp", "output_router_logits", "router_aux_loss_coef", "auto_map",
})
# Megatron's llama3 RoPE scaling hard-codes these (rotary_pos_embedding.py); only the factor is a flag.
_LLAMA3_FIXED = (("low_freq_factor", 1.0), ("high_freq_factor", 4.0), ("original_max_position_embeddings", 8192))


@attrs.frozen
class Derived:
    """MODEL_ARGS derived from a config.json, where each flag came from, and what could not be expressed."""

    args: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]  # (Megatron flag, config.json field it came from)
    unsupported: tuple[str, ...]  # one sentence per field or feature Megatron args cannot express

    def source(self, flag: str) -> str | None:
        """The config.json field ``flag`` was derived from."""
        return dict(self.sources).get(flag)


@attrs.frozen
class Mismatch:
    """One flag on which two MODEL_ARGS lists disagree; ``fix`` proposes ``b``'s value."""

    flag: str
    a_value: str
    b_value: str
    a_source: str
    b_source: str
    hf_field: str
    fix: str
    severity: Literal["error", "warning"]
    # [model.overrides] entries (name, TOML value) that give ``b``'s value: ("norm-epsilon", '"1e-06"')
    b_override: tuple[tuple[str, str], ...] = ()

    @property
    def override_hint(self) -> str:
        """``[model.overrides] "norm-epsilon" = "1e-06"``: what to write in the spec to adopt ``b``'s value."""
        return "[model.overrides] " + " and ".join(f'"{name}" = {value}' for name, value in self.b_override)

    @property
    def problem(self) -> str:
        """What differs: the flag, both values and sources, and the config.json field (no fix)."""
        field = f" (config.json field {self.hf_field})" if self.hf_field else ""
        return f"{self.flag}: {self.a_value} in {self.a_source}, but {self.b_value} in {self.b_source}{field}"

    @property
    def message(self) -> str:
        """One line for the user: :attr:`problem`, then the fix."""
        return f"{self.problem}. Fix: {self.fix}"


class _Builder:
    def __init__(self) -> None:
        self.args: list[str] = []
        self.sources: list[tuple[str, str]] = []
        self.unsupported: list[str] = []

    def add(self, flag: str, field: str, *values: object) -> None:
        self.args += [flag, *(_token(v) for v in values)]
        self.sources.append((flag, field))


def derive_model_args(config: Mapping[str, Any]) -> Derived:
    """Translate a Hugging Face config.json (parsed) into slime MODEL_ARGS; see ``Derived.unsupported`` before use."""
    out = _Builder()
    archs = config.get("architectures")
    arch = archs[0] if isinstance(archs, list | tuple) and len(archs) == 1 else None
    parameters = config.get("rope_parameters")
    rope: Mapping[str, Any] = parameters if isinstance(parameters, Mapping) else {}
    theta: Any
    theta, theta_field = ((config.get("rope_theta"), "rope_theta") if config.get("rope_theta") is not None
                          else (rope.get("rope_theta"), "rope_parameters.rope_theta"))
    missing = [f for f in _REQUIRED if f != "rms_norm_eps" and not (_is_int(config.get(f)) and config[f] > 0)]
    missing += [f for f, v in (("rms_norm_eps", config.get("rms_norm_eps")), ("rope_theta", theta))
                if not _is_int(v, (int, float))]
    if arch not in SUPPORTED_ARCHITECTURES:
        unknown = sorted(set(config) - _NOT_ARCHITECTURE - set(_REQUIRED) - {"rope_theta", "tie_word_embeddings",
                                                                               "hidden_act", "head_dim"})
        out.unsupported.append(
            f"architectures: {archs!r} is not one acrl translates ({', '.join(sorted(SUPPORTED_ARCHITECTURES))}); "
            "config.json does not say which of --add-qkv-bias, --qk-layernorm, --spec or other architecture flags "
            f"it needs, and acrl has no rule for these fields: {', '.join(unknown) or '(none)'}")
    if missing:
        out.unsupported.append(f"missing or non-numeric fields: {', '.join(missing)}")
    if arch not in SUPPORTED_ARCHITECTURES or missing:
        return Derived((), (), tuple(out.unsupported))
    layers, hidden, heads, kv = (config[f] for f in ("num_hidden_layers", "hidden_size", "num_attention_heads",
                                                     "num_key_value_heads"))
    if config.get("hidden_act", "silu") != "silu":
        out.unsupported.append(f"hidden_act: {config['hidden_act']!r}; --swiglu is a SiLU-gated MLP")
    if arch == _GLM4:
        out.add("--spec", "architectures", "slime_plugins.models.glm4", "get_glm_spec")
    out.add("--swiglu", "hidden_act")
    out.add("--num-layers", "num_hidden_layers", layers)
    out.add("--hidden-size", "hidden_size", hidden)
    out.add("--ffn-hidden-size", "intermediate_size", config["intermediate_size"])
    out.add("--num-attention-heads", "num_attention_heads", heads)
    if kv != heads:
        out.add("--group-query-attention", "num_key_value_heads")
        out.add("--num-query-groups", "num_key_value_heads", kv)
    head_dim = config.get("head_dim")
    if head_dim is not None and head_dim != hidden // heads:
        out.add("--kv-channels", "head_dim", head_dim)
    if arch in _MOE:  # the convention of slime's MoE scripts
        out.add("--position-embedding-type", "architectures (RoPE)", "rope")
    else:
        out.add("--use-rotary-position-embeddings", "architectures (RoPE)")
    out.add("--disable-bias-linear", "attention_bias / mlp_bias")
    if arch in _QWEN2 or config.get("attention_bias"):
        out.add("--add-qkv-bias", "architectures (qwen2 q/k/v bias)" if arch in _QWEN2 else "attention_bias")
    if config.get("attention_bias") and arch in _QWEN3 | {_LLAMA}:
        out.unsupported.append(f"attention_bias: true also puts a bias on o_proj in {arch}; --add-qkv-bias covers "
                               "only q/k/v and --disable-bias-linear removes the rest")
    if config.get("mlp_bias"):
        out.unsupported.append("mlp_bias: true; slime's MODEL_ARGS use --disable-bias-linear (no MLP bias)")
    out.add("--normalization", "rms_norm_eps", "RMSNorm")
    out.add("--norm-epsilon", "rms_norm_eps", config["rms_norm_eps"])
    if float(theta).is_integer():
        out.add("--rotary-base", theta_field, int(theta))
    else:
        out.unsupported.append(f"{theta_field}: {theta!r} is not an integer, and Megatron's --rotary-base is an int")
    partial = config.get("partial_rotary_factor", 0.5 if arch == _GLM4 else None)
    if partial is not None:
        out.add("--rotary-percent", "partial_rotary_factor", partial)
    out.add("--vocab-size", "vocab_size", config["vocab_size"])
    if arch in _QWEN3:
        out.add("--qk-layernorm", "architectures (q_norm, k_norm)")
    if arch == _GLM4:
        for flag in ("--post-self-attn-layernorm", "--post-mlp-layernorm", "--rotary-interleaved", "--no-rope-fusion"):
            out.add(flag, "architectures (GLM-4 sandwich norms, interleaved partial RoPE)")
    _rope_scaling(config, rope, arch, out)
    if not config.get("tie_word_embeddings", False):  # False is the default of all the supported config classes
        out.add("--untie-embeddings-and-output-weights", "tie_word_embeddings")
    if arch in _MOE:
        _moe(config, layers, out)
    if config.get("use_sliding_window"):
        out.unsupported.append("use_sliding_window: true; slime's Megatron models attend over the full context")
    if any(t != "full_attention" for t in config.get("layer_types") or ()):
        out.unsupported.append("layer_types: some layers are not full_attention (sliding-window or linear attention)")
    return Derived(tuple(out.args), tuple(out.sources), tuple(out.unsupported))


def _rope_scaling(config: Mapping[str, Any], rope: Mapping[str, Any], arch: str, out: _Builder) -> None:
    scaling, name = config.get("rope_scaling"), "rope_scaling"
    if not scaling and rope.get("rope_type", "default") != "default":
        scaling, name = rope, "rope_parameters"
    if not isinstance(scaling, Mapping):
        return
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    if kind == "default":
        return
    if kind != "llama3" or arch != _LLAMA:
        out.unsupported.append(f"{name}: rope_type {kind!r} on {arch} has no slime MODEL_ARGS equivalent")
        return
    out.add("--use-rope-scaling", f"{name}.rope_type")
    out.add("--rope-scaling-factor", f"{name}.factor", scaling.get("factor", 8.0))
    for key, fixed in _LLAMA3_FIXED:
        if scaling.get(key, fixed) != fixed:
            out.unsupported.append(f"{name}.{key}: {scaling[key]!r}; Megatron's llama3 scaling hard-codes {fixed}")


def _moe(config: Mapping[str, Any], layers: int, out: _Builder) -> None:
    fields = ("num_experts", "moe_intermediate_size", "num_experts_per_tok")
    if not all(_is_int(config.get(f)) for f in fields):
        out.unsupported.append(f"missing MoE fields: {', '.join(f for f in fields if not _is_int(config.get(f)))}")
        return
    step, dense = config.get("decoder_sparse_step", 1), set(config.get("mlp_only_layers") or ())
    pattern = [0 if i in dense or (i + 1) % step else 1 for i in range(layers)]
    out.add("--num-experts", "num_experts", config["num_experts"])
    out.add("--moe-ffn-hidden-size", "moe_intermediate_size", config["moe_intermediate_size"])
    out.add("--moe-router-topk", "num_experts_per_tok", config["num_experts_per_tok"])
    out.add("--moe-router-score-function", "architectures (softmax router)", "softmax")
    if not config.get("norm_topk_prob", False):  # softmax over all experts, top-k probabilities not renormalized
        out.add("--moe-router-pre-softmax", "norm_topk_prob")
    if config.get("shared_expert_intermediate_size"):
        out.add("--moe-shared-expert-intermediate-size", "shared_expert_intermediate_size",
                config["shared_expert_intermediate_size"])
        out.add("--moe-shared-expert-gate", "shared_expert_intermediate_size (qwen2_moe gates its shared expert)")
    out.add("--moe-layer-freq", "decoder_sparse_step / mlp_only_layers", _runs(pattern))
    out.add("--moe-router-dtype", "architectures (the router softmax runs in float32)", "fp32")


def _runs(pattern: Sequence[int]) -> str:
    """[1, 1, 0] -> "[1]*2+[0]*1", the form slime's scripts give Megatron's --moe-layer-freq."""
    runs: list[list[int]] = []
    for v in pattern:
        if runs and runs[-1][0] == v:
            runs[-1][1] += 1
        else:
            runs.append([v, 1])
    return "+".join(f"[{v}]*{n}" for v, n in runs)


def _token(value: object) -> str:
    return repr(value) if isinstance(value, float) else str(value)  # repr: 1e-06 as Python writes it, not 1e-6


def _is_int(value: object, kinds: type | tuple[type, ...] = int) -> bool:
    return isinstance(value, kinds) and not isinstance(value, bool)


# --- comparison -------------------------------------------------------------------------------------------------

@attrs.frozen
class _Value:
    shown: str  # for messages: "1e-5", "present", "absent (Megatron default 1e-5)"
    key: tuple[str, ...]  # canonical, compared; () = absent
    proposal: str = ""  # what to write to get this value; "" = leave the flag out


_ABSENT = _Value("absent", ())
_MAX_PATTERN = 1_000_000
_FREQ_TERM = re.compile(r"\[([0-9,]*)\](?:\*([0-9]{1,9}))?")


def compare(a: Sequence[str], a_source: str, b: Sequence[str], b_source: str) -> list[Mismatch]:
    """Every flag on which MODEL_ARGS ``a`` and ``b`` disagree in effect, ``b`` being the reference the fixes point
    to. Numbers compare by value, an absent flag as Megatron's default, --use-rotary-position-embeddings as
    --position-embedding-type rope, and --num-query-groups without --group-query-attention as multi-head attention.
    A flag in only one list is reported, as a warning when it is a performance or training setting (``SETTINGS``)."""
    va, vb = _effective(a), _effective(b)
    out: list[Mismatch] = []
    for flag in dict.fromkeys([*va, *vb]):
        x, y = va.get(flag, _ABSENT), vb.get(flag, _ABSENT)
        if x.key == y.key:
            continue
        if flag in SETTINGS:
            fix = f"{flag} is a performance or training setting, not architecture: keep the value you intend"
        elif y.proposal:
            fix = f"use {y.proposal}, as in {b_source}"
        elif flag == "--num-query-groups":
            fix = f"drop --group-query-attention and --num-query-groups (multi-head attention), as in {b_source}"
        else:
            fix = f"drop {flag}, as in {b_source}"
        out.append(Mismatch(flag, x.shown, y.shown, a_source, b_source, HF_FIELD.get(flag, ""), fix,
                            "warning" if flag in SETTINGS else "error", _override(flag, y)))
    return out


def _override(flag: str, value: _Value) -> tuple[tuple[str, str], ...]:
    """[model.overrides] entries that make MODEL_ARGS carry ``value`` for ``flag`` (false removes a flag)."""
    name = flag.removeprefix("--")
    tokens = value.proposal.split()
    if not tokens:  # absent: Megatron's default, hidden size / heads, or multi-head attention
        return (("group-query-attention", "false"), (name, "false")) if flag == "--num-query-groups" else \
            ((name, "false"),)
    if tokens[0] == "--group-query-attention":
        return ("group-query-attention", "true"), (name, _toml_value(tokens[2:]))
    return ((name, _toml_value(tokens[1:])),)


def _toml_value(values: Sequence[str]) -> str:
    if not values:
        return "true"
    quoted = [json.dumps(v) for v in values]  # a JSON string of ordinary characters is a TOML basic string
    return quoted[0] if len(quoted) == 1 else f"[{', '.join(quoted)}]"


def _effective(tokens: Sequence[str]) -> dict[str, _Value]:
    flags = parse_flags(tokens)
    if flags.pop("--use-rotary-position-embeddings", None) is not None:
        flags.setdefault("--position-embedding-type", ["rope"])
    gqa = flags.pop("--group-query-attention", None) is not None
    out = {flag: _Value(" ".join(v) or "present", tuple(map(_canon, v)) or ("present",), " ".join([flag, *v]))
           for flag, v in flags.items()}
    heads, hidden = flags.get("--num-attention-heads"), flags.get("--hidden-size")
    if gqa and "--num-query-groups" in out:
        groups = out["--num-query-groups"]
        out["--num-query-groups"] = attrs.evolve(groups, proposal=f"--group-query-attention {groups.proposal}")
    elif heads:
        ignored = f", --num-query-groups {' '.join(flags['--num-query-groups'])} ignored" if (
            "--num-query-groups" in flags) else ""
        out["--num-query-groups"] = _Value(f"{heads[0]} (no --group-query-attention: multi-head attention{ignored})",
                                           tuple(map(_canon, heads)))
    if "--kv-channels" not in flags and heads and hidden and heads[0].isdigit() and hidden[0].isdigit():
        dim = str(int(hidden[0]) // max(1, int(heads[0])))
        out["--kv-channels"] = _Value(f"absent (hidden size / heads = {dim})", (dim,))
    for flag, default in _DEFAULTS.items():
        out.setdefault(flag, _Value(f"absent (Megatron default {default})", (_canon(default),)))
    inert = [] if "--use-rope-scaling" in flags else ["--rope-scaling-factor"]
    if "--num-experts" not in flags:
        inert += [f for f in _DEFAULTS if f.startswith("--moe-") and f not in flags]
    if "--multi-latent-attention" not in flags and flags.get("--rope-type") != ["yarn"]:
        inert += ["--rotary-scaling-factor", "--mscale", "--mscale-all-dim"]  # read only by YaRN
    for flag in inert:
        out.pop(flag, None)
    if "--moe-layer-freq" in out:
        out["--moe-layer-freq"] = _layer_pattern(out["--moe-layer-freq"], flags.get("--num-layers", ["0"])[0])
    return out


def _canon(token: str) -> str:
    """Numbers by value: 1e-6, 1e-06 and 0.000001 are one number, 1000000 and 1e6 another."""
    try:
        number = Decimal(token)
    except InvalidOperation:
        return token
    return str(number.normalize()) if number.is_finite() else token


def moe_layer_pattern(freq: str, layers: int) -> str | None:
    """Megatron's --moe-layer-freq as one "0"/"1" per layer ("1": a MoE layer), or None when it cannot be read.
    An integer N makes every N-th layer (0, N, 2N, ...) a MoE layer; "[0]*3+[1]*58" and "[0,0,0,1,...]" list
    the layers."""
    text = freq.replace(" ", "")
    if re.fullmatch(r"[0-9]{1,9}", text):  # ASCII digits only ("²".isdigit() is true), and a sane size
        every = int(text)
        return "".join("1" if every and i % every == 0 else "0" for i in range(min(layers, _MAX_PATTERN)))
    terms = [m for m in (_FREQ_TERM.fullmatch(term) for term in text.split("+")) if m]
    if len(terms) != len(text.split("+")):
        return None
    runs = [("".join(m.group(1).split(",")), int(m.group(2) or 1)) for m in terms]
    if sum(len(run) * times for run, times in runs) > _MAX_PATTERN:  # "[1]*10**12" describes no model
        return None
    return "".join(run * times for run, times in runs)


def _layer_pattern(value: _Value, layers: str) -> _Value:
    """--moe-layer-freq as one 0/1 per layer: "1", "[1]*48" and "[1,1,...]" are the same pattern."""
    text = "".join(value.key).replace(" ", "")
    pattern = moe_layer_pattern(text, int(layers) if layers.isdigit() else 0)
    if pattern is None:
        return value
    return attrs.evolve(value, key=(pattern or text,))
