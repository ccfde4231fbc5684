"""ACRL-G*: [sglang.models], slime's --sglang-config. What slime asserts when it reads the file and starts the
groups (slime/backends/sglang_utils/sglang_config.py, slime/ray/rollout.py start_rollout_servers and
_resolve_sglang_config, slime/backends/sglang_utils/arguments.py; the same at 624b824 and fa3c990), and the
groups slime accepts but that cannot serve: a group too small for one engine, GPUs no engine uses, an
override of what slime sets for each engine itself. Each group's engines are the placement model's
(compiler/_pipeline/placement.py: ``engine_slots`` over the groups)."""

from __future__ import annotations

from collections.abc import Iterator

from ..._slime.sglang_stack import sglang_at
from ..._spec.server_groups import ServerGroup, SglangModel
from .engine import PLACEMENT, Context, Finding, KeyRef, rule

_MODELS = "sglang.models"

# What slime's _compute_server_args sets for each engine from the address allocation and the placement
# (slime/backends/sglang_utils/sglang_engine.py:523-542 at 624b824): an override gives every engine of the group the
# same value, and the later groups' engines bind the same ports or GPUs.
PER_ENGINE = ("host", "port", "nccl_port", "dist_init_addr", "base_gpu_id", "nnodes", "node_rank",
              "disaggregation_bootstrap_port")


def _key(name: str, index: int | None = None, *rest: str) -> KeyRef:
    """The spec key of a model (``index`` None), of its server group, or of a key inside it."""
    path: tuple[str | int, ...] = ("sglang", "models", name)
    if index is not None:
        path += ("server_groups", index, *rest)
    return path


def _groups(ctx: Context) -> Iterator[tuple[str, SglangModel, int, ServerGroup, int]]:
    """Each model's groups, with the GPUs per engine slime resolves for it (ModelConfig.resolve,
    sglang_config.py:69-75)."""
    for name, model in ctx.spec.sglang.models.items():
        for index, group in enumerate(model.server_groups):
            per = group.num_gpus_per_engine or model.num_gpus_per_engine or ctx.spec.rollout.gpus_per_engine
            yield name, model, index, group, per


@rule("ACRL-G001", "error", ["cluster.rollout_num_gpus", _MODELS], "the server groups add up to the rollout's GPUs",
      reads=(PLACEMENT,))
def _total(ctx: Context) -> Iterator[Finding]:
    """slime asserts that the GPUs of every model's server groups add up to --rollout-num-gpus
    (rollout.py _resolve_sglang_config, 624b824 L1133-1136: ``sglang_config total GPUs (N) != rollout_num_gpus``)."""
    models = ctx.spec.sglang.models
    if not models or ctx.placement.args.rollout_external:
        return
    total = sum(g.num_gpus for m in models.values() for g in m.server_groups)
    rollout = ctx.placement.args.rollout_num_gpus
    if total != rollout:
        how = "[cluster] rollout_num_gpus" if ctx.spec.cluster.rollout_num_gpus else "colocated: the actor's GPUs"
        yield Finding(f"the server groups of [sglang.models] hold {total} GPUs, but the rollout has {rollout} ({how}): "
                      f"slime stops with 'sglang_config total GPUs ({total}) != rollout_num_gpus ({rollout})'",
                      f"set [cluster] rollout_num_gpus = {total}, or give the groups {rollout} GPUs in all")


@rule("ACRL-G002", "error", [_MODELS, "rollout.external_engine_addrs", "extra.flags"],
      "--sglang-config without external engines or prefill servers", reads=("extra.args",))
def _exclusive(ctx: Context) -> Iterator[Finding]:
    """slime refuses --sglang-config with --rollout-external-engine-addrs ([rollout] external_engine_addrs) and with
    --prefill-num-servers (slime/backends/sglang_utils/arguments.py:194-200 at 624b824)."""
    if not ctx.spec.sglang.models:
        return
    if ctx.spec.rollout.external_engine_addrs:
        yield Finding("[sglang.models] (--sglang-config) with [rollout] external_engine_addrs: slime refuses the two "
                      "together", "the engines are external: remove [sglang.models]",
                      keys=("rollout.external_engine_addrs",))
    for flag, fix in (("--rollout-external-engine-addrs", "the engines are external: remove [sglang.models]"),
                      ("--prefill-num-servers", "write the prefill and decode groups as [sglang.models] server "
                                                "groups and remove --prefill-num-servers")):
        if flag in ctx.extra:
            yield Finding(f"[sglang.models] (--sglang-config) with {flag}: slime refuses the two together", fix,
                          keys=(f"extra.flags.{flag}", f"extra.flags.{flag.removeprefix('--')}", "extra.args"))


@rule("ACRL-G003", "error", [_MODELS], "one checkpoint per model", reads=("model.dir",))
def _one_checkpoint(ctx: Context) -> Iterator[Finding]:
    """All server groups of a model serve one checkpoint: slime puts the model's model_path (else [model] dir)
    into each group's overrides unless the group overrides it, and asserts they are one (sglang_config.py:73-85)."""
    for name, model in ctx.spec.sglang.models.items():
        default = model.model_path or ctx.spec.model.dir
        paths = {str(g.overrides.get("model_path", default)) for g in model.server_groups}
        if len(paths) > 1:
            index = next(i for i, g in enumerate(model.server_groups) if "model_path" in g.overrides)
            shown = ", ".join(sorted(paths))
            yield Finding(f"the server groups of model {name!r} serve {len(paths)} checkpoints ({shown}): "
                          "slime asserts that all groups of a model use the same model_path",
                          "give a second checkpoint its own model ([sglang.models.NAME] with model_path), or remove "
                          "the model_path override", keys=(_key(name, index, "overrides", "model_path"),))


@rule("ACRL-G004", "error", [_MODELS, "rollout.gpus_per_engine", "cluster.gpus_per_node"],
      "each server group makes whole engines")
def _whole_engines(ctx: Context) -> Iterator[Finding]:
    """slime makes ``num_gpus // min(num_gpus_per_engine, num_gpus_per_node)`` engine actors per group
    (rollout.py:1032-1035 at 624b824): a group smaller than one engine starts none; an engine larger than a node is
    one actor per node, so its GPUs per engine must be whole nodes, and the group whole engines (or the last engine
    starts on fewer nodes than it needs)."""
    node = ctx.spec.cluster.gpus_per_node
    for name, _, index, group, per in _groups(ctx):
        if group.worker_type == "placeholder":
            continue
        where = f"server group {index} ({group.worker_type}) of model {name!r}"
        key = (_key(name, index, "num_gpus"),)
        if group.num_gpus < min(per, node):
            yield Finding(f"{where} has {group.num_gpus} GPUs, fewer than one engine of {per}: slime starts no "
                          "engine for it", f"give it at least {min(per, node)} GPUs, or lower its num_gpus_per_engine",
                          keys=key)
        elif per > node and per % node:
            yield Finding(f"{where}: engines of {per} GPUs span nodes of {node} GPUs but are not whole nodes: slime "
                          "builds the multi-node engine with a floored node count",
                          f"use a multiple of {node} or at most {node} GPUs per engine",
                          keys=(_key(name, index, "num_gpus_per_engine"),))
        elif per > node and group.num_gpus % per:
            yield Finding(f"{where}: {group.num_gpus} GPUs do not make whole engines of {per}: the last engine starts "
                          "on fewer nodes than it needs", f"make num_gpus a multiple of {per}", keys=key)


@rule("ACRL-G005", "warning", [_MODELS, "rollout.gpus_per_engine"], "no idle GPUs in a server group",
      reads=("cluster.gpus_per_node",))
def _idle(ctx: Context) -> Iterator[Finding]:
    """slime floors a group's engine count (rollout.py:1035 at 624b824): GPUs beyond whole engines stay idle, and
    still count in --rollout-num-gpus."""
    node = ctx.spec.cluster.gpus_per_node
    for name, _, index, group, per in _groups(ctx):
        on_node = min(per, node)
        if group.worker_type != "placeholder" and per <= node and group.num_gpus >= on_node and \
                group.num_gpus % on_node:
            yield Finding(f"server group {index} ({group.worker_type}) of model {name!r}: {group.num_gpus} GPUs are "
                          f"not a multiple of {per} GPUs per engine: {group.num_gpus % on_node} stay idle",
                          f"make num_gpus a multiple of {per}, or add a placeholder group to reserve GPUs on purpose",
                          keys=(_key(name, index, "num_gpus"),))


@rule("ACRL-G006", "error", [_MODELS], "overrides leave slime's per-engine settings alone",
      reads=("rollout.gpus_per_engine",))
def _per_engine(ctx: Context) -> Iterator[Finding]:
    """slime sets each engine's addresses, ports, GPUs and node rank itself (sglang_engine.py:523-542 at 624b824);
    an override of one of them gives every engine of the group the same value, and they collide. A key with '-'
    is one slime renames ('-' -> '_') with a warning (sglang_engine.py:588-594): it is checked by its renamed
    name."""
    for name, _, index, group, _per in _groups(ctx):
        for key in group.overrides:
            if key.replace("-", "_") in PER_ENGINE:
                yield Finding(f"server group {index} of model {name!r} overrides {key}: slime gives each engine its "
                              "own, and the override gives all of them one", f"remove overrides.{key}",
                              keys=(_key(name, index, "overrides", key),))


@rule("ACRL-G007", "warning", [_MODELS], "PD disaggregation has prefill and decode groups")
def _pd_pairs(ctx: Context) -> Iterator[Finding]:
    """A model with "prefill" or "decode" groups runs its router in PD mode (rollout.py:1013-1014, _start_router
    with has_pd_disaggregation): every request goes through a prefill and a decode engine, so a model with one
    kind and not the other cannot serve. A model with no server group starts a router and no engine."""
    for name, model in ctx.spec.sglang.models.items():
        kinds = {g.worker_type for g in model.server_groups}
        if not model.server_groups:
            yield Finding(f"model {name!r} has no server groups: slime starts its router and no engine",
                          f"add [[sglang.models.{name}.server_groups]], or remove the model", keys=(_key(name),))
        elif len(kinds & {"prefill", "decode"}) == 1:
            (kind,) = kinds & {"prefill", "decode"}
            other = "decode" if kind == "prefill" else "prefill"
            yield Finding(f"model {name!r} has {kind} groups and no {other} group: its PD router cannot serve a "
                          "request", f"add a server group with worker_type = \"{other}\", or make the groups "
                          "\"regular\"", keys=(_key(name),))


@rule("ACRL-G008", "error", [_MODELS], "overrides are sglang ServerArgs fields",
      reads=("rollout.gpus_per_engine", "slime.commit"))
def _not_fields(ctx: Context) -> Iterator[Finding]:
    """slime keeps a server group's override only where it names a field of sglang's ServerArgs ('-' read as '_');
    any other key is dropped with one log line (sglang_engine.py:585-612 at 624b824: 'The following arguments is not
    supported in the current sglang'). Checked against the sglang of the targeted slime commit, where acrl has its
    facts (compiler/_slime/sglang_stack.py)."""
    if not ctx.spec.sglang.models:
        return
    facts = sglang_at(ctx.spec.slime.commit)
    if facts is None:
        return
    for name, _, index, group, _per in _groups(ctx):
        for key in group.overrides:
            if key.replace("-", "_") not in facts.fields:
                close = facts.field_suggestions(key.replace("-", "_"))
                yield Finding(f"server group {index} of model {name!r} overrides {key}, which is not a ServerArgs "
                              f"field of {facts.shown}: slime drops it with a log line",
                              f"did you mean {close[0]}?" if close else
                              f"remove overrides.{key}, or use a field of sglang {facts.version}'s ServerArgs "
                              "(Python names: dp_size, enable_dp_attention)",
                              keys=(_key(name, index, "overrides", key),))
