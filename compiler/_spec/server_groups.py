"""[sglang.models]: slime's --sglang-config, the rollout's SGLang deployment as server groups.

slime reads ``--sglang-config FILE`` (slime/backends/sglang_utils/sglang_config.py at 624b824,
``SglangConfig.from_yaml``): a YAML list ``sglang:`` of models, each with a ``name``, an optional
``model_path``, ``update_weights`` and ``num_gpus_per_engine``, and its ``server_groups`` (``worker_type``,
``num_gpus``, ``num_gpus_per_engine``, ``overrides`` of SGLang ServerArgs fields). The spec holds the same
keys, one table per model named by its key (TOML keeps their order, as the YAML list does); the bundle
writes them to ``sglang_config.yaml`` (compiler/_pipeline/render.py) and train.sh passes it. What slime
refuses or does not do with them is said by compiler/_pipeline/validate/server_groups.py.
"""

from typing import Literal

import attrs

from .launch import MAX_NODE_GPUS, MAX_NODES
from .setting import FlagValue, setting

# ServerGroupConfig.__post_init__'s valid_types (sglang_config.py:37-40 at 624b824)
WorkerType = Literal["regular", "prefill", "decode", "placeholder", "encoder"]
SGLANG_CONFIG = "sglang_config.yaml"  # the bundle's file, passed as --sglang-config


@attrs.frozen(kw_only=True)
class ServerGroup:
    """One of a model's server groups: engines of one kind and size (sglang_config.py: ServerGroupConfig)."""

    worker_type: WorkerType = setting(doc=(
        'What the group\'s engines do: "regular", "prefill" / "decode" (PD disaggregation), "encoder" (started first; '
        'their URLs are given to the prefill and regular groups) or "placeholder" (reserves GPUs, starts nothing).'))
    num_gpus: int = setting(doc="GPUs of the group; the groups of all models add up to --rollout-num-gpus.", ge=1,
                            le=MAX_NODES * MAX_NODE_GPUS)
    num_gpus_per_engine: int | None = setting(None, doc=(
        "GPUs per engine of this group. Default: the model's num_gpus_per_engine, else [rollout] gpus_per_engine."),
        ge=1, le=MAX_NODES * MAX_NODE_GPUS)
    overrides: dict[str, FlagValue] = setting(factory=dict, doc=(
        "SGLang ServerArgs fields for this group's engines, by their Python names (dp_size, enable_dp_attention), "
        "applied over the --sglang-* flags."))


@attrs.frozen(kw_only=True)
class SglangModel:
    """One model of --sglang-config, named by its table key ("default" for the policy): its own router and
    server groups (sglang_config.py: ModelConfig)."""

    model_path: str | None = setting(None, kind="path", doc=(
        "Hugging Face checkpoint the engines serve. Default: [model] dir (--hf-checkpoint)."))
    update_weights: bool | None = setting(None, doc=(
        "Whether training updates the engines' weights. Default: true where the model_path is the policy's "
        "checkpoint, else false (a frozen reference or reward model)."))
    num_gpus_per_engine: int | None = setting(None, doc=(
        "GPUs per engine of the model's groups. Default: [rollout] gpus_per_engine."), ge=1,
        le=MAX_NODES * MAX_NODE_GPUS)
    server_groups: list[ServerGroup] = setting(factory=list, doc="The model's server groups, in start order.")
