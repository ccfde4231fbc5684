"""Integration profiles: the defaults that differ between an AgentCore run and a plain slime run.

``[experiment] integration`` picks one: ``"agentcore"`` (the default) is the toolkit's recipe (SlimeRunner's
defaults, the field defaults of :mod:`.tables`); ``"slime"`` is slime's own rollout and reward with slime's
defaults; ``"custom"`` is the user's own function paths, otherwise like ``"slime"``.

:data:`PROFILE` is the one table of those defaults: each spec key whose AgentCore default differs from what slime
(or Megatron-LM / sglang, as slime configures them) does when the flag is not passed. A slime value of None (a
store-true flag: False) leaves the flag out of the argv, so slime's own default applies; a number is the value
slime would use where acrl always passes the flag. Each row cites where that default is defined: slime at the
targeted commit 624b824 (``slime/...``), Megatron-LM 1dcf0daf (slime HEAD's; ``megatron/...``), or sglang's
ServerArgs, whose defaults slime's parser keeps (slime/backends/sglang_utils/arguments.py:71 re-prefixes
ServerArgs' own arguments with ``--sglang-``). tests/test_profiles.py checks the slime rows against
tests/data/slime/<commit>/slime_defaults.json, and that every other flag key agrees with slime or is listed in
:data:`KEPT`.

A key the spec sets (directly, through ``extends``, a sweep point or ``--set``) is never replaced by the profile.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Literal, get_args

import attrs

Integration = Literal["agentcore", "slime", "custom"]
INTEGRATIONS: tuple[Integration, ...] = get_args(Integration)
DEFAULT_INTEGRATION: Integration = "agentcore"
Owner = Literal["slime", "megatron", "sglang"]

# The user's own function paths of integration = "custom": at least one must be set by the spec (ACRL-I003).
CUSTOM_FUNCTION_KEYS = ("rollout.function_path", "rollout.custom_generate_function_path", "rollout.custom_rm_path",
                        "rollout.reward_post_process_path")


@attrs.frozen
class ProfileValue:
    """One spec key's default per profile: ``agentcore`` (the field default of tables.py) and ``slime`` (also the
    custom profile's); ``owner`` and ``where``: who defines the slime default, and where. ``native``: where
    ``slime`` is None (the flag left out), the value slime then ends up with when the spec can state it (the
    documented default ``where`` cites); None where that value is computed or unset. `acrl import train-sh` writes
    it for a script of the agentcore profile that does not pass the flag (train_sh_profile.faithful)."""

    key: str
    agentcore: Any
    slime: Any
    owner: Owner
    where: str
    native: Any = None

    def value(self, integration: Integration) -> Any:
        return self.agentcore if integration == "agentcore" else self.slime


def _row(key: str, agentcore: Any, slime: Any, owner: Owner, where: str, native: Any = None) -> ProfileValue:
    return ProfileValue(key, agentcore, slime, owner, where, native)


TOOLKIT_ROLLOUT = "agentcore_rl_toolkit.backends.slime.integration.rollout.generate_rollout"
TOOLKIT_REWARDS = "agentcore_rl_toolkit.backends.slime.integration.rewards.normalize_episode_rewards"
_SGLANG = "sglang ServerArgs (kept by slime/backends/sglang_utils/arguments.py:71)"

PROFILE: tuple[ProfileValue, ...] = (
    # slime/utils/arguments.py at 624b824 (line of the add_argument call)
    _row("cluster.colocate", True, False, "slime", "slime/utils/arguments.py:70 (store_true)"),
    _row("rollout.gpus_per_engine", 2, 1, "slime", "slime/utils/arguments.py:55 (default 1)"),
    _row("rollout.n_samples_per_prompt", 8, 1, "slime", "slime/utils/arguments.py:699 (default 1)"),
    _row("rollout.max_response_len", 1024, None, "slime", "slime/utils/arguments.py:373 (default None)"),
    _row("rollout.function_path", TOOLKIT_ROLLOUT, None, "slime",
         "slime/utils/arguments.py:328 (default slime.rollout.sglang_rollout.generate_rollout)"),
    _row("rollout.reward_post_process_path", TOOLKIT_REWARDS, None, "slime",
         "slime/utils/arguments.py:1370 (default None)"),
    _row("data.input_key", "prompt", None, "slime", "slime/utils/arguments.py:659 (default 'input')", "input"),
    _row("algorithm.use_kl_loss", True, False, "slime", "slime/utils/arguments.py:980 (store_true)"),
    _row("algorithm.kl_loss_type", "low_var_kl", None, "slime", "slime/utils/arguments.py:933 (default 'k1')", "k1"),
    _row("algorithm.eps_clip_high", 0.28, None, "slime", "slime/utils/arguments.py:900 (default None: eps_clip)"),
    _row("train.use_dynamic_batch_size", True, False, "slime", "slime/utils/arguments.py:746 (store_true)"),
    _row("train.max_tokens_per_gpu", 9216, None, "slime", "slime/utils/arguments.py:757 (default None)"),
    # --megatron-to-hf-mode exists only at the toolkit's pin: slime fa3c990 slime/utils/arguments.py:129
    # (default 'raw'); acrl's "auto" passes 'bridge' there. None: not passed, slime's 'raw' applies.
    _row("model.megatron_to_hf_mode", "auto", None, "slime", "slime fa3c990 slime/utils/arguments.py:129 "
         "(default 'raw'; no such flag at 624b824)"),
    # Megatron-LM 1dcf0daf: megatron/core/model_parallel_config.py, transformer_config.py (dataclass fields
    # made into flags by megatron/training/arguments.py:1644), megatron/training/arguments.py, training_config.py
    _row("parallel.tensor", 2, 1, "megatron", "megatron/core/model_parallel_config.py:23 (default 1)"),
    _row("parallel.sequence_parallel", True, False, "megatron",
         "megatron/core/model_parallel_config.py:42 (default False)"),
    _row("train.lr_decay_style", "constant", None, "megatron",
         "megatron/training/training_config.py:124 (default 'linear')", "linear"),
    _row("train.weight_decay", 0.1, None, "megatron", "megatron/training/arguments.py:1844 (default 0.01)", 0.01),
    _row("train.adam_beta2", 0.98, None, "megatron", "megatron/training/arguments.py:1853 (default 0.999)",
         0.999),
    _row("train.optimizer_cpu_offload", True, False, "megatron",
         "megatron/training/arguments.py:2084 (store_true)"),
    _row("train.overlap_cpu_optimizer_d2h_h2d", True, False, "megatron",
         "megatron/training/arguments.py:2090 (store_true)"),
    _row("train.precision_aware_optimizer", True, False, "megatron",
         "megatron/training/arguments.py:2873 (store_true)"),
    _row("train.attention_backend", "flash", None, "megatron",
         "megatron/core/transformer/transformer_config.py:112 (default auto)", "auto"),
    _row("train.attention_dropout", 0.0, None, "megatron",
         "megatron/core/transformer/transformer_config.py:142 (default 0.1)", 0.1),
    _row("train.hidden_dropout", 0.0, None, "megatron",
         "megatron/core/transformer/transformer_config.py:139 (default 0.1)", 0.1),
    _row("train.accumulate_allreduce_grads_in_fp32", True, False, "megatron",
         "megatron/training/arguments.py:2227 (store_true)"),
    _row("train.attention_softmax_in_fp32", True, False, "megatron",
         "megatron/training/arguments.py:2225 (store_true)"),
    # sglang: not passed, sglang's own default (computed from the GPU for the memory fraction and the graph sizes)
    _row("sglang.mem_fraction_static", 0.7, None, "sglang", f"{_SGLANG}: mem_fraction_static None (auto)"),
    _row("sglang.tool_call_parser", "qwen", None, "sglang", f"{_SGLANG}: tool_call_parser None"),
    _row("sglang.data_parallel_size", 1, None, "sglang", f"{_SGLANG}: dp_size 1 (--sglang-data-parallel-size is "
         "its alias)", 1),
    _row("sglang.cuda_graph_max_bs", 32, None, "sglang", f"{_SGLANG}: cuda_graph_max_bs None (auto)"),
    _row("sglang.log_level", "warning", None, "sglang", f"{_SGLANG}: log_level 'info'", "info"),
    _row("sglang.log_level_http", "warning", None, "sglang", f"{_SGLANG}: log_level_http None (log_level's)"),
)

# Flag keys whose acrl default differs from slime's but that no profile changes, and why (tests/test_profiles.py
# holds every other flag key to slime's default).
KEPT = {
    "rollout.batch_size": "slime has no default (None, slime/utils/arguments.py:690): a run must give one",
    "train.num_steps_per_rollout": "acrl always passes --global-batch-size, computed from it (slime's None lets "
                                   "Megatron fall back to micro batch x data parallel)",
    "experiment.num_rollout": "slime's None needs --num-epoch; acrl's 1 (none with num_epoch) is explicit",
    "cluster.actor_num_nodes": "acrl passes the placement it models",
    "cluster.actor_num_gpus_per_node": "acrl passes the placement it models",
}


def by_key() -> dict[str, ProfileValue]:
    return {row.key: row for row in PROFILE}


def supplied(integration: Integration, is_set: Callable[[tuple[str, ...]], bool]) -> Iterator[tuple[str, Any]]:
    """The (key, value) pairs ``integration`` supplies: every row whose key the spec does not set."""
    for row in PROFILE:
        if not is_set(tuple(row.key.split("."))):
            yield row.key, row.value(integration)


def apply(spec: Any, integration: Integration, is_set: Callable[[tuple[str, ...]], bool]) -> Any:
    """``spec`` (a tables.Spec) with ``integration``'s values for the keys it does not set."""
    changes: dict[str, dict[str, Any]] = {}
    for key, value in supplied(integration, is_set):
        table, name = key.split(".")
        if getattr(getattr(spec, table), name) != value:
            changes.setdefault(table, {})[name] = value
    return attrs.evolve(spec, **{table: attrs.evolve(getattr(spec, table), **values)
                                 for table, values in changes.items()})


def shown(value: Any) -> str:
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value).replace("'", '"')


def notes(integration: Integration, is_set: Callable[[tuple[str, ...]], bool]) -> tuple[str, ...]:
    """The compile output's notes of the values ``integration`` supplied, one per value for slime and custom; none
    for agentcore, the baseline: its values are the keys' documented defaults (the field defaults of tables.py)."""
    if integration == DEFAULT_INTEGRATION:
        return ()
    return tuple(f"{key} = {shown(value)}: the {integration} integration profile's default ({by_key()[key].where})"
                 for key, value in supplied(integration, is_set))
