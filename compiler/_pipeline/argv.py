"""The slime argv: every flag train.sh passes to train.py, grouped for people and for `acrl diff`.

Each argument remembers the spec key that set it, so messages, `acrl explain` and `acrl diff` can
say where a flag came from. Arguments that depend on the run-time environment (the custom-config
path, wandb, --train-env-vars) are added by train.sh itself and documented there.
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Literal

import attrs

from .._slime.sglang_stack import slime_flag, slime_flag_names
from .._spec.checkpoint import LAUNCH_FLAGS
from .._spec.flags import flag_tokens, known_absent_flags, normalize_flag
from .._spec.rollout_features import APPEND_FLAGS
from .._spec.server_groups import SGLANG_CONFIG
from .._spec.setting import key_flags, switch_for
from .._spec.tables import Spec
from . import placement_spec
from .derived import Derived as Derived  # re-exported, with the five below: they lived here first
from .derived import actor_gpus as actor_gpus
from .derived import derived as derived
from .derived import global_batch_size as global_batch_size
from .derived import rollout_gpus as rollout_gpus
from .derived import samples_per_rollout as samples_per_rollout
from .model_args.resolve import ModelArgs


@attrs.frozen
class ArgOrigin:
    """Where a flag came from, as data: the spec key that set it (``key``: one key, or a table such as
    ``eval.datasets``), the integration profile's default for a key the spec does not set (``profile``,
    compiler/_spec/profiles.py; ``why`` names the profile), or a derivation (``derived``) from the spec keys
    ``keys``, said in ``why``. Rendered to text only where text is shown (:attr:`text`); no reader parses that text
    back."""

    kind: Literal["key", "profile", "derived"]
    keys: tuple[str, ...]
    why: str = ""

    @property
    def text(self) -> str:
        """"rollout.batch_size", "extra.flags.--x", "eval.datasets", or "derived: <why>"."""
        if self.kind == "profile":
            return f"{self.keys[0]} ({self.why})"
        return f"derived: {self.why}" if self.kind == "derived" else self.keys[0]


@functools.cache
def from_key(key: str) -> ArgOrigin:
    return ArgOrigin("key", (key,))


def derived_from(why: str, *keys: str) -> ArgOrigin:
    return ArgOrigin("derived", keys, why)


@attrs.frozen
class Arg:
    """One flag and its values, and the spec key (or rule) it came from."""

    flag: str
    values: tuple[str, ...]
    source: ArgOrigin

    @property
    def origin(self) -> str:
        """The origin as text: "rollout.batch_size", "derived: ...", "extra.flags.--x"."""
        return self.source.text

    @property
    def tokens(self) -> list[str]:
        return [self.flag, *self.values]


@attrs.frozen
class ArgGroup:
    title: str
    args: tuple[Arg, ...]


def _field(obj: Any, table: str, name: str, profile: Mapping[str, str], commit: str) -> Iterator[Arg]:
    field = attrs.fields_dict(type(obj))[name]
    value = getattr(obj, name)
    if field.metadata.get("switches"):  # the value picks a store-true flag, or none ([checkpoint] load_optimizer)
        switch = switch_for(field, value)
        if switch is not None:
            yield Arg(switch, (), from_key(f"{table}.{name}"))
        return
    if "omit_if" in field.metadata and field.metadata["omit_if"] is not attrs.NOTHING \
            and value == field.metadata["omit_if"]:
        return
    # a key's --sglang-* flag as the targeted sglang names it (--sglang-cuda-graph-max-bs: a deprecated alias of -decode
    # in sglang 0.5.15.post1, slime v0.3.1's and 624b824's; compiler/_slime/sglang/index.json via sglang_stack.py)
    flag, key = slime_flag(commit, field.metadata["flag"]), f"{table}.{name}"  # APPEND_FLAGS: once per value
    for tokens in [flag_tokens(flag, v) for v in value] if flag in APPEND_FLAGS else [flag_tokens(flag, value)]:
        if tokens:
            yield Arg(tokens[0], tuple(tokens[1:]), ArgOrigin("profile", (key,), profile[key]) if key in profile
                      else from_key(key))


def _fields(obj: Any, table: str, names: Sequence[str], profile: Mapping[str, str], commit: str) -> list[Arg]:
    return [arg for name in names for arg in _field(obj, table, name, profile, commit)]


def hf_mode(spec: Spec) -> Literal["bridge", "raw"] | None:
    """--megatron-to-hf-mode value, or None when the targeted slime has no such flag."""
    if spec.model.megatron_to_hf_mode != "auto":
        return spec.model.megatron_to_hf_mode
    absent = known_absent_flags(spec.slime.commit) or {}
    return None if "--megatron-to-hf-mode" in absent else "bridge"


def _ref_load(s: Spec) -> list[Arg]:
    return [Arg("--ref-load", (s.model.ref_load or s.model.dir,),
                from_key("model.ref_load") if s.model.ref_load else
                derived_from("model.ref_load defaults to model.dir", "model.ref_load", "model.dir"))]


def _hf_mode(s: Spec) -> list[Arg]:
    mode = hf_mode(s)
    if mode is None:
        return []
    origin = from_key("model.megatron_to_hf_mode") if s.model.megatron_to_hf_mode != "auto" else \
        derived_from("model.megatron_to_hf_mode 'auto' is 'bridge' where slime has the flag",
                     "model.megatron_to_hf_mode")
    return [Arg("--megatron-to-hf-mode", (mode,), origin)]


def _actor_layout(s: Spec) -> list[Arg]:
    actor = placement_spec.read(s).actor
    out = []
    for name, value in (("actor_num_nodes", actor.num_nodes), ("actor_num_gpus_per_node", actor.gpus_per_node)):
        flag = "--" + name.replace("_", "-")
        origin = from_key(f"cluster.{name}") if getattr(s.cluster, name) is not None else \
            derived_from(f"cluster.{name} defaults to {actor.how}", f"cluster.{name}", "cluster.num_nodes",
                         "cluster.gpus_per_node", "cluster.colocate", "cluster.rollout_num_gpus")
        out.append(Arg(flag, (str(value),), origin))
    return out


def _num_gpus_per_node(s: Spec) -> list[Arg]:
    """[cluster] gpus_per_node, where slime's default 8 would change what slime does (Placement.num_gpus_per_node_flag:
    not on one node of fewer GPUs with at most one engine)."""
    flag = placement_spec.read(s).placement.num_gpus_per_node_flag
    return [] if flag is None else [Arg("--num-gpus-per-node", (str(flag),), from_key("cluster.gpus_per_node"))]


def _global_batch(s: Spec) -> list[Arg]:
    return [Arg("--global-batch-size", (str(global_batch_size(s)),),
                derived_from("rollout.batch_size x rollout.n_samples_per_prompt / train.num_steps_per_rollout",
                             "rollout.batch_size", "rollout.n_samples_per_prompt", "train.num_steps_per_rollout"))]


def _eval_datasets(s: Spec) -> list[Arg]:
    if not s.eval.datasets:
        return []
    pairs = tuple(v for name, path in s.eval.datasets.items() for v in (name, path))
    return [Arg("--eval-prompt-data", pairs, from_key("eval.datasets"))]


def _extra_flags(s: Spec) -> list[Arg]:
    extra = []
    for name, value in s.extra.flags.items():
        tokens = flag_tokens(normalize_flag(name), value)
        if tokens:
            extra.append(Arg(tokens[0], tuple(tokens[1:]), from_key(f"extra.flags.{name}")))
    return extra


# The review groups `acrl diff` sorts slime flags into (docs/review.md), in the order it prints them.
CLUSTER, BATCH, ALGORITHM, OPTIMIZER = "cluster and parallelism", "batch arithmetic", "algorithm", "optimizer"
ROLLOUT, MODEL, INTEGRATION = "rollout and sglang", "model architecture", "integration"
ENVIRONMENT, OTHER = "environment", "other"
REVIEW_GROUPS = (CLUSTER, BATCH, ALGORITHM, OPTIMIZER, ROLLOUT, MODEL, INTEGRATION, ENVIRONMENT, OTHER)


@attrs.frozen
class _Keys:
    """The flags of spec keys ``names`` of ``table``, in that order; ``review``: their review group when
    it is not their argv group's."""

    table: str
    names: tuple[str, ...]
    review: str | None = None


def _keys(table: str, *names: str, review: str | None = None) -> _Keys:
    return _Keys(table, names, review)


@attrs.frozen
class _Computed:
    """A flag computed from the spec (``None``: from the spec's [extra.flags], any flag)."""

    flag: str | None
    make: Callable[[Spec], list[Arg]]
    review: str | None = None


@attrs.frozen
class _Group:
    title: str  # the comment above the group's flags in train.sh
    review: str | None  # the review group of its flags (None: each flag's own, else the default)
    entries: tuple[_Keys | _Computed, ...]


# The one layout of the slime argv: train.sh's groups, in order, and the review group of every flag acrl
# writes; `acrl diff` classifies flags by it (flags_by_review_group).
LAYOUT = (
    _Group(CLUSTER, CLUSTER, (_Computed("--actor-num-nodes", _actor_layout),
                              _Computed("--actor-num-gpus-per-node", lambda s: []),
                              _Computed("--num-gpus-per-node", _num_gpus_per_node),
                              _keys("cluster", "colocate", "rollout_num_gpus"),
                              _keys("rollout", "gpus_per_engine", "external_engine_addrs", "external"),
                              _keys("parallel", "tensor", "pipeline", "context", "expert", "sequence_parallel"))),
    _Group("model and data", MODEL, (_keys("model", "dir"), _Computed("--ref-load", _ref_load),
                                     _Computed("--megatron-to-hf-mode", _hf_mode),
                                     _keys("data", "path", "input_key", "label_key", "metadata_key",
                                           review=ROLLOUT))),
    _Group(BATCH, BATCH, (_keys("experiment", "num_rollout", "num_epoch"),
                          _keys("rollout", "batch_size", "n_samples_per_prompt", "over_sampling_batch_size"),
                          _keys("train", "num_steps_per_rollout"), _Computed("--global-batch-size", _global_batch),
                          _keys("train", "micro_batch_size", "use_dynamic_batch_size", "max_tokens_per_gpu",
                                "balance_by_flops"))),
    _Group(ROLLOUT, ROLLOUT, (
        _keys("rollout", "max_response_len", "max_prompt_len", "max_context_len", "temperature", "top_p"),
        _keys("sglang", "mem_fraction_static", "context_length", "tool_call_parser", "reasoning_parser",
              "data_parallel_size", "cuda_graph_max_bs", "log_level", "log_level_http"))),
    _Group(ALGORITHM, ALGORITHM, (_keys("algorithm", "advantage_estimator", "use_kl_loss", "kl_loss_type",
                                        "kl_loss_coef", "kl_coef", "entropy_coef", "eps_clip", "eps_clip_high",
                                        "normalize_advantages", "use_tis"),)),
    _Group(OPTIMIZER, OPTIMIZER, (_keys("train", "lr", "lr_decay_style", "weight_decay", "adam_beta1", "adam_beta2",
                                        "optimizer_cpu_offload", "overlap_cpu_optimizer_d2h_h2d",
                                        "precision_aware_optimizer"),)),
    _Group("training kernels", OTHER, (_keys("train", "attention_backend", "attention_dropout", "hidden_dropout",
                                             review=MODEL),
                                       _keys("train", "accumulate_allreduce_grads_in_fp32", review=OPTIMIZER),
                                       _keys("train", "attention_softmax_in_fp32", review=MODEL),
                                       _keys("experiment", "seed"))),
    _Group(INTEGRATION, INTEGRATION, (_keys("rollout", "function_path", "reward_post_process_path",
                                            "custom_generate_function_path", "custom_rm_path", "sample_hook_paths"),)),
    _Group("evaluation", ROLLOUT, (_keys("eval", "interval"), _Computed("--eval-prompt-data", _eval_datasets),
                                   _keys("eval", "n_samples_per_prompt", "temperature", "max_response_len"))),
    # [checkpoint] load, ckpt_step and start_rollout_id: train.sh adds their flags at launch (RUNTIME_REVIEW)
    _Group("checkpoints", OTHER, (_keys("checkpoint", "save", "save_interval", "save_hf", "load_optimizer", "load_rng",
                                        "scheduler", "format"),)),
    _Group("on-policy distillation", ALGORITHM, (_keys("opd", "enabled", "type", "kl_coef", "teacher_load",
                                                       "teacher_ckpt_step"),)),
    _Group("weight sync", ROLLOUT, (_keys("weight_sync", "mode", "transport", "disk_dir", "disk_keep_files",
                                          "local_checkpoint_dir", "delta_encoding", "delta_checksum",
                                          "custom_post_write_path", "encoding", "delta_keep_files",
                                          "custom_delta_pre_push_path", "buffer_size"),
                                    _keys("weight_sync", "release_train", review=CLUSTER))),
    _Group("escape hatch: [extra.flags]", None, (_Computed(None, _extra_flags),)),
)


def build_argv(spec: Spec, supplied: Collection[str] = ()) -> tuple[ArgGroup, ...]:
    """The flags train.sh passes after MODEL_ARGS, grouped as :data:`LAYOUT` says; the raw [extra] args come
    last. ``supplied``: the keys whose value the integration profile supplied (their flags' origin says so)."""
    why = f"default of the {spec.experiment.integration} integration profile"
    profile = {key: why for key in supplied}
    groups = []
    for group in LAYOUT:
        args: list[Arg] = []
        for entry in group.entries:
            if isinstance(entry, _Keys):
                args += _fields(getattr(spec, entry.table), entry.table, entry.names, profile, spec.slime.commit)
            else:
                args += entry.make(spec)
        if args:
            groups.append(ArgGroup(group.title, tuple(args)))
    return tuple(groups)


@functools.cache
def flags_by_review_group() -> Mapping[str, str]:
    """Every flag :func:`build_argv` can write (but [extra.flags]) or train.sh adds at run time, and its
    review group."""
    tables = typing.get_type_hints(Spec)
    out = {}
    for group in LAYOUT:
        for entry in group.entries:
            review = entry.review or group.review
            if review is None:
                continue
            if isinstance(entry, _Keys):
                fields = attrs.fields_dict(tables[entry.table])
                out.update({flag: review for name in entry.names for key_flag in key_flags(fields[name])
                            for flag in slime_flag_names(key_flag)})
            elif entry.flag is not None:
                out[entry.flag] = review
    return {**out, **RUNTIME_REVIEW}


def argv_titles() -> Mapping[str, str | None]:
    """Each argv group title (the comment train.sh writes above its flags) and its review group."""
    return {group.title: group.review for group in LAYOUT}


# The review groups of the flags train.sh (and the RayJob's entrypoint) add at run time (RuntimeArgs).
RUNTIME_REVIEW = {"--custom-config-path": INTEGRATION, "--sglang-config": ROLLOUT, "--use-wandb": ENVIRONMENT,
                  "--wandb-project": ENVIRONMENT, "--wandb-group": ENVIRONMENT, "--train-env-vars": ENVIRONMENT,
                  **dict.fromkeys(LAUNCH_FLAGS, MODEL)}  # [checkpoint]: which weights, decided at launch


def flat_argv(model_args: ModelArgs, groups: tuple[ArgGroup, ...], spec: Spec) -> list[str]:
    """MODEL_ARGS, the grouped flags and the raw [extra] args, as slime receives them (without the
    run-time arguments train.sh adds)."""
    out = list(model_args.args)
    for group in groups:
        for arg in group.args:
            out += arg.tokens
    return out + list(spec.extra.args)


CUSTOM_CONFIG = "custom_config.yaml"


@attrs.frozen
class RuntimeArgs:
    """The arguments added at run time, by train.sh or the RayJob's entrypoint, not written into the argv:
    ``--custom-config-path`` (the bundle's :data:`CUSTOM_CONFIG`), ``--sglang-config`` (its :data:`SGLANG_CONFIG`),
    ``--use-wandb`` and the ``wandb`` flags
    only when ``$key_env`` is set, and ``--train-env-vars`` (CUDA_HOME, LD_LIBRARY_PATH) when ``train_env_vars``."""

    key_env: str
    wandb: tuple[Arg, ...]  # --wandb-project, --wandb-group: each from its spec key
    custom_config: str | None  # None: no custom config (integration "slime" or "custom")
    train_env_vars: bool
    wandb_enabled: bool = True  # [wandb] enabled: false, no W&B flags whatever the key's variable holds
    sglang_config: str | None = None  # the bundle's SGLANG_CONFIG, with [sglang.models]

    @property
    def wandb_tokens(self) -> list[str]:
        """The W&B flags that follow --use-wandb."""
        return [token for arg in self.wandb for token in arg.tokens]


def runtime_args(spec: Spec) -> RuntimeArgs:
    """The one computation of the run-time arguments, for train.sh, rayjob.yaml and `acrl explain`."""
    wandb = tuple(Arg(f"--wandb-{name}", (value,), from_key(f"wandb.{name}"))
                  for name in ("project", "group") if (value := getattr(spec.wandb, name)))
    return RuntimeArgs(spec.wandb.key_env, wandb if spec.wandb.enabled else (),
                       CUSTOM_CONFIG if spec.agentcore is not None else None, spec.cuda.home is not None,
                       spec.wandb.enabled, SGLANG_CONFIG if spec.sglang.models else None)
