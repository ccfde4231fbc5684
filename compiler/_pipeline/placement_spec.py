"""A spec's placement: the [cluster] keys, the parallel sizes and the escape-hatch flags slime's placement
reads, resolved into :class:`.placement.LayoutArgs` the way slime_validate_args resolves them
(slime/utils/arguments.py:1897-1966 at 624b824), then :func:`.placement.place`.

The spec separates the machines (``num_nodes`` x ``gpus_per_node``) from the roles on them
(``actor_num_nodes`` x ``actor_num_gpus_per_node``, ``rollout_num_gpus``, ``colocate``); the roles'
defaults are computed here, once, and said by :attr:`SpecPlacement.defaults` (the bundle's notes)."""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import NamedTuple

from .._spec.flags import parse_flags, table_tokens
from .._spec.rollout_features import EXTERNAL_ADDRS, needs_external_switch
from .._spec.tables import Spec
from .placement import (
    SLIME_HEAD,
    GroupShape,
    LayoutArgs,
    Parallel,
    Placement,
    group_layout,
    place,
    server_groups_in_start_order,
)


class Actor(NamedTuple):
    """The actor's nodes x GPUs per node, and why (``how``: "given", or the default's reason)."""

    num_nodes: int
    gpus_per_node: int
    how: str


class SpecPlacement(NamedTuple):
    """The placement of a spec and what acrl supplied to get it."""

    placement: Placement
    actor: Actor
    nodes_given: bool  # [cluster] num_nodes written (else 1 with a local head, or derived with an address)
    defaults: tuple[str, ...]  # what acrl supplied, as sentences for the bundle's notes
    extra: Mapping[str, list[str]]  # the escape hatch's flags, parsed


def extra_flags(spec: Spec) -> dict[str, list[str]]:
    """[extra.flags] and [extra] args as flag -> values (the last occurrence wins, as in argparse)."""
    return parse_flags([*table_tokens(spec.extra.flags), *spec.extra.args])


def _int(extra: Mapping[str, list[str]], *flags: str) -> int | None:
    for flag in flags:
        values = extra.get(flag)
        if values:
            try:
                return int(values[0])
            except ValueError:
                return None
    return None


def _on(extra: Mapping[str, list[str]], flag: str) -> bool:
    return flag in extra


def sglang_parallel(spec: Spec, extra: Mapping[str, list[str]]) -> Parallel:
    """Megatron's sizes and SGLang's (the [sglang] table, then the escape hatch's --sglang-* flags, which win)."""
    p = spec.parallel
    dp = _int(extra, "--sglang-dp-size", "--sglang-data-parallel-size") or spec.sglang.data_parallel_size or 1
    pp = _int(extra, "--sglang-pp-size", "--sglang-pipeline-parallel-size")  # 0 kept: slime divides by it
    return Parallel(tensor=p.tensor, pipeline=p.pipeline, context=p.context,
                    sglang_pp=1 if pp is None else pp,
                    sglang_dp=dp,
                    sglang_ep=_int(extra, "--sglang-ep-size", "--sglang-expert-parallel-size") or 1,
                    sglang_dp_attention=_on(extra, "--sglang-enable-dp-attention"))


def server_groups(spec: Spec) -> tuple[GroupShape, ...]:
    """[sglang.models]' server groups in the order slime makes them (placement.server_groups_in_start_order);
    () without [sglang.models]."""
    return server_groups_in_start_order(spec.sglang.models, spec.rollout.gpus_per_engine)


def _actor(spec: Spec, no_local_rollout: bool, local_head: bool) -> Actor:
    """actor_num_nodes x actor_num_gpus_per_node: as given; a key not given takes the whole nodes (colocated, or
    no local rollout GPUs to leave room for: --debug-train-only, external engines) or what the rollout leaves on
    the cluster's num_nodes (one node by default with a local head; one node when the size of an existing cluster,
    or of the RayJob's, is not given)."""
    c = spec.cluster
    node, nodes_given, per_given = c.gpus_per_node, c.actor_num_nodes, c.actor_num_gpus_per_node
    if nodes_given is not None and per_given is not None:
        return Actor(nodes_given, per_given, "given")
    if nodes_given is not None:
        return Actor(nodes_given, node, "every GPU of a node")
    per = node if per_given is None else per_given
    if c.colocate or no_local_rollout:
        return Actor(c.num_nodes or 1, per, "every node" if c.colocate else "every node (no local rollout GPUs)")
    if c.rollout_num_gpus is None or (c.num_nodes is None and not local_head):
        return Actor(1, per, "slime's default: one node" if c.rollout_num_gpus is None else
                     "one node (num_nodes not given)")
    assert c.rollout_num_gpus is not None
    free = (c.num_nodes or 1) * node - c.rollout_num_gpus
    if per_given is not None:
        return Actor(max(1, free // per_given), per_given, "as many nodes as the rollout leaves room for")
    if free >= node:
        return Actor(free // node, node, "the nodes the rollout leaves")
    if free > 0:
        return Actor(1, free, "the GPUs the rollout leaves")
    return Actor(1, node, "one node (the rollout leaves none)")


# Set while a compile for --target kuberay runs (compile.py): the Ray cluster is the RayJob's, made for the job,
# so there is no local head, and num_nodes, when not given, is the fewest nodes that hold slime's group.
RAYJOB: ContextVar[bool] = ContextVar("acrl_rayjob", default=False)
_last: list[tuple[Spec, bool, SpecPlacement]] = []  # the last spec read and its placement (a compile reads it ~7 times)


# The keys read(spec) reads (the [cluster] roles and sizes, the parallel sizes the engines are cut by, the escape
# hatch's debug and SGLang flags, the server groups, the targeted commit): a rule that reads the placement reads them
# (validate/engine.py: PLACEMENT); tests/test_rule_reads.py records what read() reads and holds it to this list.
READS = ("cluster.num_nodes", "cluster.gpus_per_node", "cluster.actor_num_nodes", "cluster.actor_num_gpus_per_node",
         "cluster.colocate", "cluster.rollout_num_gpus", "cluster.address", "parallel.tensor", "parallel.pipeline",
         "parallel.context", "rollout.gpus_per_engine", "rollout.external_engine_addrs", "sglang.data_parallel_size",
         "sglang.models", "slime.commit", "extra.flags", "extra.args")


def read(spec: Spec) -> SpecPlacement:
    """The spec's placement. A spec is frozen, so the last one read is kept by identity: argv, derived, render
    and validation of one compile share one computation (~50 us)."""
    rayjob = RAYJOB.get()
    if _last and _last[0][0] is spec and _last[0][1] == rayjob:
        return _last[0][2]
    placed = _read(spec)
    _last[:] = [(spec, rayjob, placed)]
    return placed


def _read(spec: Spec) -> SpecPlacement:
    extra = extra_flags(spec)
    c = spec.cluster
    debug_train_only = _on(extra, "--debug-train-only") or _on(extra, "--load-debug-rollout-data")
    debug_rollout_only = _on(extra, "--debug-rollout-only")
    # [rollout] external_engine_addrs, or the flag in the escape hatch: no local engines, but at v0.3.0, whose
    # placement group has no external case (placement_group.py:80-96 at v0.3.0): one engine actor per address there
    external = (bool(spec.rollout.external_engine_addrs) or _on(extra, EXTERNAL_ADDRS)) and \
        not needs_external_switch(spec.slime.commit)
    local_head = c.address is None and not RAYJOB.get()
    actor = _actor(spec, debug_train_only or external, local_head)
    actor_total = actor.num_nodes * actor.gpus_per_node
    rollout = c.rollout_num_gpus
    if rollout is None:
        # slime: colocated (or debug-rollout-only colocated) rollout defaults to the actor's GPUs
        # (arguments.py:1921-1923, 1951-1952); disaggregated without it, slime crashes (ACRL-P002)
        rollout = actor_total if c.colocate else 0
    args = LayoutArgs(actor_num_nodes=actor.num_nodes, actor_num_gpus_per_node=actor.gpus_per_node,
                      rollout_num_gpus=rollout, colocate=c.colocate and not debug_rollout_only,
                      debug_train_only=debug_train_only, debug_rollout_only=debug_rollout_only,
                      rollout_external=external, num_gpus_per_node=c.gpus_per_node,
                      rollout_num_gpus_per_engine=spec.rollout.gpus_per_engine,
                      distributed_post=_on(extra, "--use-distributed-post"), server_groups=server_groups(spec))
    if debug_rollout_only and not external:
        # arguments.py:1919-1929: the actor is resized to the rollout (min(8, rollout) per node)
        per = min(8, rollout) if rollout else 0
        args = args._replace(actor_num_gpus_per_node=per, actor_num_nodes=rollout // per if per else 0)
    group = group_layout(args, slime_commit=spec.slime.commit)
    if c.num_nodes is not None:
        nodes = c.num_nodes
    elif local_head:
        nodes = 1
    else:
        nodes = max(1, -(-group.num_gpus // c.gpus_per_node))
    placement = place(args, nodes=nodes, local_head=local_head, parallel=sglang_parallel(spec, extra),
                      slime_commit=spec.slime.commit if spec.slime.commit else SLIME_HEAD)
    defaults = []
    if actor.how not in ("given", "every node", "every GPU of a node", "every node (no local rollout GPUs)"):
        keys = [f"{key} = {value}" for key, value, given in (
            ("actor_num_nodes", actor.num_nodes, c.actor_num_nodes), ("actor_num_gpus_per_node", actor.gpus_per_node,
                                                                        c.actor_num_gpus_per_node)) if given is None]
        defaults.append(f"[cluster] {', '.join(keys)}: {actor.how}")
    if c.num_nodes is None and not local_head:
        defaults.append(f"[cluster] num_nodes = {nodes}: the fewest nodes of {c.gpus_per_node} GPUs that hold "
                        f"slime's placement group of {group.num_gpus}")
    return SpecPlacement(placement, actor, c.num_nodes is not None, tuple(defaults), extra)
