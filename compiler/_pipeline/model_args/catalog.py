"""The built-in model catalog: published Hugging Face config.json fields under slime's model names.

Each entry keeps only the config.json fields that shape MODEL_ARGS, copied from the model's published config; its
MODEL_ARGS are ``derive_model_args(hf_fields)``, so the catalog and a checkpoint's own config.json go through one
translation. Where slime ships a scripts/models/*.sh for the same architecture, ``slime_script`` names it,
``settings`` carries the performance and training flags that script passes and config.json cannot say (MoE
dispatcher, grouped GEMM, permute fusion, context length), and ``slime_differences`` (from the one table
``CORRECTIONS``) explains, flag by flag, where the entry deliberately does not follow the script because the script
does not match the published config. tests/test_catalog_fidelity.py holds every entry to slime's scripts at the
commits acrl targets (tests/data/slime), and ``NOT_IN_CATALOG`` says why each other script has no entry.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import attrs

from .hf_config import Derived, derive_model_args


def _frozen(fields: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType({key: _deep_frozen(value) for key, value in fields.items()})


def _deep_frozen(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _frozen(value)
    return tuple(_deep_frozen(v) for v in value) if isinstance(value, list | tuple) else value


@attrs.frozen
class CatalogEntry:
    """One model: its published config.json fields, where they come from, and how slime's script differs."""

    name: str  # slime's model name, as in scripts/models/<name>.sh
    source: str  # the Hugging Face repository whose config.json the fields are copied from
    hf_fields: Mapping[str, Any] = attrs.field(converter=_frozen, hash=False)
    slime_script: str | None = None  # slime's scripts/models/<slime_script>.sh for this architecture, if any
    slime_differences: tuple[tuple[str, str], ...] = ()  # (flag, why slime's script differs from the config)
    # Flags of slime's script that config.json does not say (performance and training settings, hf_config.SETTINGS):
    # kept so that the catalog launches what slime's script launches (Megatron's MoE dispatcher default is
    # allgather; slime's MoE scripts choose alltoall with grouped GEMM and permute fusion).
    settings: tuple[str, ...] = ()
    # For an architecture derive_model_args cannot translate: slime's script's resolved MODEL_ARGS (flag values,
    # generated into slime_models.json), used as they are; hf_fields is then empty.
    script_args: tuple[str, ...] | None = None

    def derived(self) -> Derived:
        """The derivation, with the config.json field behind each flag."""
        return derive_model_args(self.hf_fields)

    def model_args(self) -> tuple[str, ...]:
        """MODEL_ARGS for this model: the config.json translation, then slime's settings (or slime's script's
        MODEL_ARGS, for an architecture acrl does not translate)."""
        if self.script_args is not None:
            return self.script_args
        return self.derived().args + self.settings

    def digest_source(self) -> str:
        """The canonical text the provenance sha256 is taken of: the config.json fields (and the settings, when the
        entry has any, so that an entry without settings keeps the digest it always had)."""
        if self.script_args is not None:
            return "\0".join(self.script_args)
        fields = json.dumps(dict(self.hf_fields), sort_keys=True, default=list)
        return fields if not self.settings else f"{fields}\0" + "\0".join(self.settings)


def _qwen25(layers: int, hidden: int, ffn: int, heads: int, kv: int, vocab: int, eps: float, tied: bool,
            theta: float = 1000000.0) -> dict[str, Any]:
    return {"architectures": ["Qwen2ForCausalLM"], "hidden_act": "silu", "num_hidden_layers": layers,
            "hidden_size": hidden, "intermediate_size": ffn, "num_attention_heads": heads, "num_key_value_heads": kv,
            "rms_norm_eps": eps, "rope_theta": theta, "vocab_size": vocab, "tie_word_embeddings": tied,
            "use_sliding_window": False}


def _qwen3(layers: int, hidden: int, ffn: int, heads: int, kv: int, tied: bool, theta: float = 1000000,
           **moe: Any) -> dict[str, Any]:
    arch = "Qwen3MoeForCausalLM" if moe else "Qwen3ForCausalLM"
    return {"architectures": [arch], "hidden_act": "silu", "num_hidden_layers": layers, "hidden_size": hidden,
            "intermediate_size": ffn, "num_attention_heads": heads, "num_key_value_heads": kv, "head_dim": 128,
            "attention_bias": False, "rms_norm_eps": 1e-06, "rope_theta": theta, "vocab_size": 151936,
            "tie_word_embeddings": tied, "use_sliding_window": False, **moe}


def _qwen3_moe(experts: int, expert_ffn: int, topk: int) -> dict[str, Any]:
    return {"num_experts": experts, "moe_intermediate_size": expert_ffn, "num_experts_per_tok": topk,
            "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": []}


def _llama3(layers: int, hidden: int, ffn: int, heads: int, tied: bool, factor: float) -> dict[str, Any]:
    return {"architectures": ["LlamaForCausalLM"], "hidden_act": "silu", "num_hidden_layers": layers,
            "hidden_size": hidden, "intermediate_size": ffn, "num_attention_heads": heads, "num_key_value_heads": 8,
            "attention_bias": False, "mlp_bias": False, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
            "rope_scaling": {"factor": factor, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                             "original_max_position_embeddings": 8192, "rope_type": "llama3"},
            "vocab_size": 128256, "tie_word_embeddings": tied}


def _glm4(layers: int, hidden: int, ffn: int, heads: int, qkv_bias: bool) -> dict[str, Any]:
    return {"architectures": ["Glm4ForCausalLM"], "hidden_act": "silu", "num_hidden_layers": layers,
            "hidden_size": hidden, "intermediate_size": ffn, "num_attention_heads": heads, "num_key_value_heads": 2,
            "head_dim": 128, "attention_bias": qkv_bias, "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05,
            "rope_theta": 10000.0, "vocab_size": 151552, "tie_word_embeddings": False}


# The one table of documented corrections: (flag, why) for each catalog entry whose args deliberately differ from
# slime's script of the same architecture (``slime_script``), because the script does not match the published
# config.json. Every other flag of every entry equals the script's in effect (tests/test_catalog_fidelity.py).
_EPS_32B = ("--norm-epsilon", "slime's qwen2.5-32B.sh has 1e-5, the base model's value; the Instruct model was "
            "published with rms_norm_eps 1e-06")
_ROPE_15B = ("--rotary-base", "slime's qwen2.5-1.5B.sh has 10000, the rope_theta of Qwen2.5-Math-1.5B; "
             "Qwen2.5-1.5B(-Instruct) use 1000000")
_LLAMA32_SCALING = ("--rope-scaling-factor", "slime's llama3.2-3B-Instruct.sh passes --rotary-scaling-factor 32.0, "
                    "which Megatron reads only for YaRN; its llama3 scaling reads --rope-scaling-factor, which stays "
                    "at its default 8.0")
CORRECTIONS: Mapping[str, tuple[tuple[str, str], ...]] = MappingProxyType({
    "qwen2.5-1.5B": (_ROPE_15B,),
    "qwen2.5-32B-Instruct": (_EPS_32B,),
    "llama3.2-3B-Instruct": (_LLAMA32_SCALING,),
    "llama3.2-3B-Instruct-amd": (_LLAMA32_SCALING,),
    "glm4-32B": (("--num-layers", "slime's glm4-32B.sh has 64 layers; GLM-4-32B-0414 was published with 61"),
                 ("--num-query-groups", "slime's glm4-32B.sh has 8 query groups; GLM-4-32B-0414 was published "
                                        "with num_key_value_heads 2")),
})
# slime's MoE scripts (qwen3-30B-A3B.sh, qwen3-235B-A22B.sh): the all-to-all dispatcher (Megatron's default is
# allgather), grouped GEMM and permute fusion. Not in config.json; a different choice runs the same model slower.
_QWEN3_MOE_SETTINGS = ("--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm", "--moe-permute-fusion")
_LLAMA3_SETTINGS = ("--max-position-embeddings", "131072")  # max_position_embeddings of the published config.json


def _entry(name: str, source: str, fields: dict[str, Any], script: str | None = None,
           settings: tuple[str, ...] = ()) -> CatalogEntry:
    return CatalogEntry(name, source, fields, script, CORRECTIONS.get(name, ()), settings)


_LLAMA32_3B = {**_llama3(28, 3072, 8192, 24, True, 32.0), "head_dim": 128}
_ENTRIES: tuple[CatalogEntry, ...] = (
    _entry("qwen2.5-0.5B", "Qwen/Qwen2.5-0.5B", _qwen25(24, 896, 4864, 14, 2, 151936, 1e-06, True),
           "qwen2.5-0.5B"),
    _entry("qwen2.5-1.5B", "Qwen/Qwen2.5-1.5B", _qwen25(28, 1536, 8960, 12, 2, 151936, 1e-06, True),
           "qwen2.5-1.5B"),
    _entry("qwen2.5-math-1.5B", "Qwen/Qwen2.5-Math-1.5B",
           _qwen25(28, 1536, 8960, 12, 2, 151936, 1e-06, True, theta=10000.0), "qwen2.5-1.5B"),
    _entry("qwen2.5-3B", "Qwen/Qwen2.5-3B", _qwen25(36, 2048, 11008, 16, 2, 151936, 1e-06, True), "qwen2.5-3B"),
    _entry("qwen2.5-7B", "Qwen/Qwen2.5-7B", _qwen25(28, 3584, 18944, 28, 4, 152064, 1e-06, False),
           "qwen2.5-7B"),
    # The base 14B/32B/72B were published with rms_norm_eps 1e-05, their Instruct models with 1e-06.
    _entry("qwen2.5-14B", "Qwen/Qwen2.5-14B", _qwen25(48, 5120, 13824, 40, 8, 152064, 1e-05, False)),
    _entry("qwen2.5-14B-Instruct", "Qwen/Qwen2.5-14B-Instruct",
           _qwen25(48, 5120, 13824, 40, 8, 152064, 1e-06, False)),
    _entry("qwen2.5-32B", "Qwen/Qwen2.5-32B", _qwen25(64, 5120, 27648, 40, 8, 152064, 1e-05, False),
           "qwen2.5-32B"),
    _entry("qwen2.5-32B-Instruct", "Qwen/Qwen2.5-32B-Instruct",
           _qwen25(64, 5120, 27648, 40, 8, 152064, 1e-06, False), "qwen2.5-32B"),
    _entry("qwen2.5-72B", "Qwen/Qwen2.5-72B", _qwen25(80, 8192, 29568, 64, 8, 152064, 1e-05, False)),
    _entry("qwen2.5-72B-Instruct", "Qwen/Qwen2.5-72B-Instruct",
           _qwen25(80, 8192, 29568, 64, 8, 152064, 1e-06, False)),
    _entry("qwen3-0.6B", "Qwen/Qwen3-0.6B", _qwen3(28, 1024, 3072, 16, 8, True), "qwen3-0.6B"),
    _entry("qwen3-1.7B", "Qwen/Qwen3-1.7B", _qwen3(28, 2048, 6144, 16, 8, True), "qwen3-1.7B"),
    _entry("qwen3-4B", "Qwen/Qwen3-4B", _qwen3(36, 2560, 9728, 32, 8, True), "qwen3-4B"),
    _entry("qwen3-4B-Instruct-2507", "Qwen/Qwen3-4B-Instruct-2507",
           _qwen3(36, 2560, 9728, 32, 8, True, theta=5000000), "qwen3-4B-Instruct-2507"),
    _entry("qwen3-8B", "Qwen/Qwen3-8B", _qwen3(36, 4096, 12288, 32, 8, False), "qwen3-8B"),
    _entry("qwen3-14B", "Qwen/Qwen3-14B", _qwen3(40, 5120, 17408, 40, 8, False), "qwen3-14B"),
    _entry("qwen3-32B", "Qwen/Qwen3-32B", _qwen3(64, 5120, 25600, 64, 8, False), "qwen3-32B"),
    _entry("qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B",
           _qwen3(48, 2048, 6144, 32, 4, False, 1000000.0, **_qwen3_moe(128, 768, 8)), "qwen3-30B-A3B",
           _QWEN3_MOE_SETTINGS),
    _entry("qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B",
           _qwen3(94, 4096, 12288, 64, 4, False, 1000000.0, **_qwen3_moe(128, 1536, 8)), "qwen3-235B-A22B",
           _QWEN3_MOE_SETTINGS),
    _entry("llama3.1-8B-Instruct", "meta-llama/Llama-3.1-8B-Instruct", _llama3(32, 4096, 14336, 32, False, 8.0),
           "llama3.1-8B-Instruct", _LLAMA3_SETTINGS),
    _entry("llama3.2-3B-Instruct", "meta-llama/Llama-3.2-3B-Instruct",
           _LLAMA32_3B, "llama3.2-3B-Instruct", _LLAMA3_SETTINGS),
    # slime's AMD variant of the same model: the same MODEL_ARGS (its run script differs, not the model)
    _entry("llama3.2-3B-Instruct-amd", "meta-llama/Llama-3.2-3B-Instruct", _LLAMA32_3B, "llama3.2-3B-Instruct-amd",
           _LLAMA3_SETTINGS),
    _entry("glm4-9B", "THUDM/GLM-4-9B-0414", _glm4(40, 4096, 13696, 32, True), "glm4-9B"),
    # GLM-4-32B-0414's config.json: 61 layers, 2 KV heads (also in its GGUF conversions: glm4.block_count 61,
    # n_head_kv 2, 32.57B parameters, which is what these fields count; slime's 64 layers / 8 groups would be 34.7B).
    _entry("glm4-32B", "THUDM/GLM-4-32B-0414", _glm4(61, 6144, 23040, 48, False), "glm4-32B",
           # max_position_embeddings 32768 in the published config.json; slime's script also sets that as seq-length
           ("--max-position-embeddings", "32768", "--seq-length", "32768")),
)


def _script_entries(covered: set[str]) -> tuple[CatalogEntry, ...]:
    """An entry for each of slime's scripts (at the commits acrl targets) that no entry above derives: its MODEL_ARGS
    as slime's script resolves them, generated into slime_models.json by compiler/_slime/catalog_facts.py."""
    data = json.loads(Path(__file__).with_name("slime_models.json").read_text(encoding="utf-8"))
    return tuple(CatalogEntry(name, f"slime scripts/models/{name}.sh at {model['commit'][:7]}", {}, name,
                              CORRECTIONS.get(name, ()), script_args=tuple(model["args"]))
                 for name, model in data["models"].items() if name not in covered)


_ENTRIES += _script_entries({e.slime_script for e in _ENTRIES if e.slime_script})
CATALOG: Mapping[str, CatalogEntry] = MappingProxyType({e.name: e for e in _ENTRIES})
_FOLDED = {name.lower(): e for name, e in CATALOG.items()}


def entry(name: str) -> CatalogEntry | None:
    """The catalog entry named ``name`` (exactly, else ignoring case), or None."""
    return CATALOG.get(name) or _FOLDED.get(name.lower())


def close_names(name: str, others: Iterable[str] = ()) -> list[str]:
    """The catalog's names (and ``others``: a checkout's model scripts) closest to ``name``, closest first: a name a
    letter or two off with the same numbers, a name the written one extends by a suffix (qwen3-8B for
    "qwen3-8b-instruct", the longest first), then difflib's closest."""
    names = {n.lower(): n for n in (*others, *CATALOG)}
    folded = name.lower()
    stems = sorted((n for n in names if folded.startswith(n) and folded[len(n):len(n) + 1] in ("-", "_", ".")),
                   key=len, reverse=True)
    close = difflib.get_close_matches(folded, list(names), n=3, cutoff=0.6)
    numbers = re.findall(r"\d+", folded)  # a letter or two off, the sizes and versions as written
    typos = [n for n in close if difflib.SequenceMatcher(None, folded, n).ratio() >= 0.9 and
             re.findall(r"\d+", n) == numbers]
    return [names[n] for n in dict.fromkeys([*typos, *stems, *close])][:3]


def lookup_error(name: str, *, listing: bool = True) -> str:
    """Why ``name`` is not in the catalog, with the closest names (``listing``: and that `acrl models` lists them all,
    where no fix of lookup_hint's says so)."""
    close = close_names(name)
    hint = f"; did you mean {' or '.join(repr(n) for n in close)}?" if close else ""
    return f"{name!r} is not in acrl's model catalog{hint}" + (" (`acrl models` lists it)" if listing else "")


def lookup_hint(name: str, others: Iterable[str] = (), *, checkout: bool = False) -> str:
    """The fix of a [model] type the catalog lacks: the closest name written out, `acrl models`, the other sources
    (``checkout``: a slime checkout was read, and lacks the script too)."""
    close = close_names(name, others)
    first = f'write type = "{close[0]}"' if close else "name a model of the catalog"
    script = "name one of the checkout's scripts/models" if checkout else \
        "read slime's scripts/models/<type>.sh with --slime-checkout DIR"
    return f"{first} (`acrl models` lists the catalog); for a model it lacks, give the architecture in [model.args], " \
        f"or {script}"
