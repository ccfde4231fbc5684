"""ACRL-C*: the cluster and slime's placement on it. Each rule reads the one placement model
(compiler/_pipeline/placement.py, written after slime's placement_group.py and rollout.py) and refuses a
layout slime cannot place: a placement group the machines cannot hold (the job waits forever), a rollout
engine over two nodes, an engine given another node's address (slime PR #2373), a node size slime does
not know (slime PR #2012 is why --num-gpus-per-node is passed).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..._spec.tables import TOOLKIT_SLIME_COMMIT
from ..placement import SLIME_GPUS_PER_NODE, Placement
from .engine import PLACEMENT, Context, Finding, rule

_CLUSTER = ["cluster.num_nodes", "cluster.gpus_per_node", "cluster.actor_num_nodes",
            "cluster.actor_num_gpus_per_node", "cluster.rollout_num_gpus", "cluster.colocate"]


def _group_sum(p: Placement) -> str:
    """How slime's placement group size comes about, as arithmetic."""
    a = p.args
    actor = a.actor_num_nodes * a.actor_num_gpus_per_node
    if a.debug_train_only:
        return f"{actor} actor GPUs (--debug-train-only: no rollout)"
    if a.rollout_external:
        return f"{p.group.num_gpus} actor GPUs (the rollout is external)"
    if a.debug_rollout_only:
        return f"{a.rollout_num_gpus} rollout GPUs (--debug-rollout-only)"
    if a.colocate:
        return f"max({actor} actor, {a.rollout_num_gpus} rollout GPUs) = {p.group.num_gpus} (colocated)"
    return f"{actor} actor + {a.rollout_num_gpus} rollout GPUs = {p.group.num_gpus}"


@rule("ACRL-C001", "error", ["cluster.num_nodes", "cluster.address", *_CLUSTER[1:]],
      "slime's placement group fits the cluster", reads=(PLACEMENT,))
def _fits(ctx: Context) -> Iterator[Finding]:
    """slime asks Ray for one placement group of actor + rollout GPUs (the larger of the two when colocated;
    placement_group.py:100-117) and waits for it without end: a group larger than the cluster's nodes x GPUs
    hangs the job. A local head is one node unless workers join it with the bundle's join.sh."""
    p = ctx.placement
    if p.fits:
        return
    need = -(-p.group.num_gpus // p.gpus_per_node)
    where = (f"a local head is one node of {p.gpus_per_node} GPUs" if p.local_head and p.nodes == 1 else
             f"the cluster is {p.nodes} node(s) x {p.gpus_per_node} GPUs = {p.cluster_gpus}")
    fix = (f"set [cluster] num_nodes = {need} (workers join the head with the bundle's join.sh) or give [cluster] "
           f"address of a {need}-node cluster" if p.local_head else
           f"set [cluster] num_nodes = {need} if the cluster has them")
    yield Finding(f"{_group_sum(p)}, but {where}: slime's placement group of {p.group.num_gpus} GPUs never "
                  "schedules and the job waits forever",
                  f"{fix}, or give the actor or the rollout fewer GPUs"
                  + ("; if the node has more GPUs, set gpus_per_node to them (the actor's share is "
                     "actor_num_gpus_per_node)" if p.nodes == 1 and ctx.spec.cluster.num_nodes is None else ""))


@rule("ACRL-C002", "error", ["rollout.gpus_per_engine", "cluster.gpus_per_node", *_CLUSTER[2:]],
      "each rollout engine sits on one node", reads=(PLACEMENT,))
def _engine_on_one_node(ctx: Context) -> Iterator[Finding]:
    """An engine no larger than a node must sit on one node: slime starts it at a base GPU and SGLang takes the next
    GPUs of that node (rollout.py:133-135), so an engine over a node boundary asks for GPUs its node has not."""
    p = ctx.placement
    for actor in p.engine_actors:
        if p.groups[actor.group].num_gpus_per_engine > p.gpus_per_node:
            continue  # an engine of whole nodes: ACRL-C004 (ACRL-G004 for a server group)
        if actor.num_gpus > 1 and p.slot(actor.gpu_index).node != p.slot(actor.gpu_index + actor.num_gpus - 1).node:
            first, last = p.slot(actor.gpu_index), p.slot(actor.gpu_index + actor.num_gpus - 1)
            yield Finding(f"rollout engine {actor.rank} ({actor.num_gpus} GPUs from placement slot {actor.gpu_index}) "
                          f"runs from node {first.node} GPU {first.gpu} to node {last.node} GPU {last.gpu}: SGLang "
                          f"cannot span nodes with an engine smaller than a node",
                          f"make gpus_per_engine divide gpus_per_node ({p.gpus_per_node}) and the GPUs before the "
                          "rollout (the actor's, when not colocated) a multiple of gpus_per_engine")
            return


@rule("ACRL-C003", "error", ["cluster.actor_num_gpus_per_node", "cluster.gpus_per_node", "rollout.gpus_per_engine",
                             *_CLUSTER[2:]], "every engine gets its own node's address", reads=(PLACEMENT,))
def _engine_address(ctx: Context) -> Iterator[Finding]:
    """slime gives each group of num_gpus_per_node / gpus_per_engine engines the address and ports of the first
    engine's node (rollout.py:843-868). A rollout that starts mid-node and spans nodes puts an engine on one node
    with another node's address: it cannot bind and the job hangs (slime PR #2373, open)."""
    p = ctx.placement
    for engine in p.engines:
        if engine.host_node != engine.gpus[0].node:
            offset = p.group.rollout_offset
            yield Finding(f"rollout engine {engine.index} runs on node {engine.gpus[0].node} but slime gives it node "
                          f"{engine.host_node}'s address: the rollout starts at placement slot {offset}, in the "
                          f"middle of a node of {p.gpus_per_node} GPUs, and spans nodes (slime PR #2373)",
                          "start the rollout on a node boundary: make the actor's GPUs a multiple of "
                          f"gpus_per_node ({p.gpus_per_node}), or keep the rollout within the node it starts on")
            return


@rule("ACRL-C004", "error", ["rollout.gpus_per_engine", "cluster.gpus_per_node", *_CLUSTER[2:]],
      "a multi-node engine owns whole nodes", reads=(PLACEMENT,))
def _multi_node_engine(ctx: Context) -> Iterator[Finding]:
    """An engine larger than a node is one Ray actor per node, each taking a whole node from its base GPU
    (rollout.py:71, :107, :896-906): it must start on a node boundary, and the rollout GPUs must make whole
    engines."""
    p, per = ctx.placement, ctx.spec.rollout.gpus_per_engine
    if per <= p.gpus_per_node or per % p.gpus_per_node or not p.engine_actors or ctx.spec.sglang.models:
        return  # with server groups: ACRL-G004, and ACRL-C003 for an engine given another node's address
    if p.group.rollout_offset % p.gpus_per_node:
        yield Finding(f"engines of {per} GPUs take whole nodes of {p.gpus_per_node} GPUs, but the rollout starts at "
                      f"placement slot {p.group.rollout_offset}, in the middle of node "
                      f"{p.slot(p.group.rollout_offset).node}",
                      f"make the actor's GPUs a multiple of gpus_per_node ({p.gpus_per_node})")
    elif p.rollout_gpus % per:
        yield Finding(f"{p.rollout_gpus} rollout GPUs do not make whole engines of {per} GPUs: the last engine "
                      "is started on fewer nodes than it needs", f"make rollout_num_gpus a multiple of {per}")


@rule("ACRL-C005", "error", ["rollout.gpus_per_engine", "sglang.data_parallel_size", "extra.flags"],
      "SGLang's pipeline and DP-attention sizes divide an engine", reads=(PLACEMENT,))
def _sglang_sizes(ctx: Context) -> Iterator[Finding]:
    """slime asserts that --sglang-pp-size divides the GPUs per engine (the engine's tensor size is their quotient;
    slime/backends/sglang_utils/arguments.py:174-181 at 624b824, 147-154 at fa3c990); a size below 1 passes that
    assertion and is then divided by (sglang_engine.py:521-522 at 624b824, arguments.py:194-195 at fa3c990). With
    DP attention, SGLang asserts that its data-parallel size divides the engine's tensor size (server_args.py,
    _handle_data_parallelism: ``tp_size % dp_size == 0``) when the engine starts."""
    p, per = ctx.placement, ctx.spec.rollout.gpus_per_engine
    if p.parallel.sglang_pp < 1 and (p.engine_actors or ctx.spec.slime.commit == TOOLKIT_SLIME_COMMIT):
        yield Finding(f"--sglang-pp-size {p.parallel.sglang_pp}: slime divides the {per} GPUs per engine by it (the "
                      "engine's tensor size; at fa3c990 as it parses its arguments) and stops with a "
                      "ZeroDivisionError or a negative size", "give --sglang-pp-size 1 or more, or leave it out")
    elif p.parallel.sglang_pp > 1 and per % p.parallel.sglang_pp:
        yield Finding(f"--sglang-pp-size {p.parallel.sglang_pp} does not divide the {per} GPUs per engine: slime "
                      "stops with an AssertionError", f"use an SGLang pipeline size that divides {per}")
    else:
        for group, e in p.group_parallel():  # a server group's overrides (dp_size, tp_size) win over the flags
            if e.attention_dp > 1 and e.tp % e.attention_dp:
                which = f" of the {group.worker_type} group of model {group.model!r}" if p.args.server_groups else ""
                yield Finding(f"SGLang's data-parallel size {e.attention_dp} with DP attention does not divide the "
                              f"engine's tensor parallel size {e.tp}{which}: SGLang stops at start-up "
                              "(tp_size % dp_size == 0)", f"use an sglang data_parallel_size that divides {e.tp}")
                return


@rule("ACRL-C006", "error", ["extra.flags", "cluster.gpus_per_node"], "--num-gpus-per-node is the node size",
      reads=("extra.args",))
def _node_size_flag(ctx: Context) -> Iterator[Finding]:
    """[cluster] gpus_per_node is passed as --num-gpus-per-node (when not 8); a different value in the escape hatch
    makes slime map engines to nodes of the wrong size (slime PR #2012: engines get another node's address)."""
    values = ctx.extra.get("--num-gpus-per-node")
    gpus = ctx.spec.cluster.gpus_per_node
    if values and values[0] != str(gpus):
        yield Finding(f"--num-gpus-per-node {values[0]} in the escape hatch, but [cluster] gpus_per_node is {gpus}",
                      "remove it from [extra]: [cluster] gpus_per_node is passed as --num-gpus-per-node"
                      + (f" (slime's default is {SLIME_GPUS_PER_NODE})" if gpus == SLIME_GPUS_PER_NODE else ""))


@rule("ACRL-C007", "warning", ["cluster.num_nodes", *_CLUSTER[1:]], "every GPU of the cluster has a role",
      reads=(PLACEMENT,))
def _idle(ctx: Context) -> Iterator[Finding]:
    """A cluster of num_nodes x gpus_per_node larger than slime's placement group leaves GPUs idle."""
    p = ctx.placement
    if ctx.spec.cluster.num_nodes is not None and p.fits and p.group.num_gpus < p.cluster_gpus:
        yield Finding(f"{_group_sum(p)} of the cluster's {p.cluster_gpus} GPUs ({p.nodes} x {p.gpus_per_node}): "
                      f"{p.cluster_gpus - p.group.num_gpus} stay idle",
                      "give the actor (actor_num_nodes) or the rollout (rollout_num_gpus) the idle GPUs, or lower "
                      "num_nodes")


@rule("ACRL-C008", "error", ["extra.flags"], "one debug mode at a time", reads=(PLACEMENT,))
def _debug_modes(ctx: Context) -> Iterator[Finding]:
    """slime asserts that --debug-rollout-only and --debug-train-only (or --load-debug-rollout-data, which implies
    it) are not both set (slime/utils/arguments.py:1933-1935)."""
    a = ctx.placement.args
    if a.debug_rollout_only and a.debug_train_only:
        yield Finding("--debug-rollout-only with --debug-train-only (or --load-debug-rollout-data): slime stops "
                      "with an AssertionError", "keep one of the two debug modes")
