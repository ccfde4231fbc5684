"""How many nodes an imported launch needs: `acrl import train-sh` sets ``[cluster] num_nodes`` from slime's placement.

A multi-node script of slime's shape starts the Ray head on its node (``ray start --head --num-gpus 8``: the node's
GPUs, ``[cluster] gpus_per_node``) and the other nodes with an ssh loop (``for WORKER_IP in $(awk ... hostfile); do
ssh ... ray start --address=HEAD:6379 ...``), or expects them to be in the cluster already; its train.py flags
(``--actor-num-nodes 8 --actor-num-gpus-per-node 8 --rollout-num-gpus 64``) say how many GPUs slime's placement group
asks for. acrl's train.sh starts the head too and, when ``[cluster] num_nodes`` > 1, waits for the other nodes, which
join with the bundle's join.sh. Without ``num_nodes`` a local head is one node, and ACRL-C001 refuses a group larger
than it. So the importer sets ``num_nodes`` to the fewest nodes that hold the group, computed by acrl's placement model
(:func:`acrl.compiler._pipeline.placement.group_layout`, slime's ``_get_placement_group_layout``,
placement_group.py:100-117 at 624b824): actor nodes x GPUs + rollout GPUs, or the larger of the two when colocated.
"""

from __future__ import annotations

from typing import Any

from .._pipeline.placement import SLIME_GPUS_PER_NODE, LayoutArgs, group_layout
from .._shell.eval import Text
from .._spec.flags import parse_flags, table_tokens
from .train_sh_map import SpecBuilder


def _whole(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def group_gpus(spec: dict[str, Any]) -> int:
    """The GPUs of slime's placement group for the spec being built, read as slime reads its flags (the actor's
    defaults are slime's: one node of the node's GPUs; a colocated rollout without --rollout-num-gpus gets the
    actor's GPUs, slime/utils/arguments.py:1921-1923)."""
    cluster = spec.get("cluster", {})
    node = _whole(cluster.get("gpus_per_node"), SLIME_GPUS_PER_NODE)
    actor_nodes = _whole(cluster.get("actor_num_nodes"), 1)
    actor_per = _whole(cluster.get("actor_num_gpus_per_node"), node)
    colocate = cluster.get("colocate") is True
    rollout = cluster.get("rollout_num_gpus")
    extra = spec.get("extra", {})
    flags = parse_flags([*table_tokens(extra.get("flags", {})), *extra.get("args", [])])
    debug_rollout_only = "--debug-rollout-only" in flags
    args = LayoutArgs(actor_num_nodes=actor_nodes, actor_num_gpus_per_node=actor_per,
                      rollout_num_gpus=_whole(rollout, actor_nodes * actor_per if colocate else 0),
                      colocate=colocate and not debug_rollout_only,
                      debug_train_only="--debug-train-only" in flags or "--load-debug-rollout-data" in flags,
                      debug_rollout_only=debug_rollout_only,
                      rollout_external="--rollout-external-engine-addrs" in flags)
    return group_layout(args).num_gpus


def size_cluster(builder: SpecBuilder, ssh_loop: int | None) -> None:
    """Set ``[cluster] num_nodes`` when slime's group is larger than one node and the script's head is local (no
    ``[cluster] address``); note it, naming the ssh loop that started the workers (``ssh_loop``: its line)."""
    spec = builder.spec
    cluster = spec["cluster"]
    node = _whole(cluster.get("gpus_per_node"), SLIME_GPUS_PER_NODE)
    gpus = group_gpus(spec)
    need = -(-gpus // node)
    loop = f"the ssh loop at line {ssh_loop} starts the Ray workers" if ssh_loop else ""
    at = Text("", ssh_loop or 0)
    if need <= 1 or "num_nodes" in cluster or "address" in cluster:
        if ssh_loop:
            builder.note("difference", f"{loop}: the spec has no key for it; acrl's bundle has join.sh for the "
                                       "other nodes (run it on each, or let your scheduler do it)", at)
        return
    cluster["num_nodes"] = need
    how = (f"slime's placement group of {gpus} GPUs on nodes of {node} GPUs ([cluster] gpus_per_node): "
           f"[cluster] num_nodes = {need}")
    if ssh_loop:
        builder.note("difference", f"{loop}: {how}; the bundle's train.sh starts the head and waits for the other "
                                   f"{need - 1} node(s), which join it with the bundle's join.sh instead (train.sh "
                                   "prints the command to run on each)", at)
    else:
        builder.note("difference", f"{how}: the script starts no workers itself (they are expected in the cluster "
                                   f"already); the bundle's train.sh starts the head and waits for the other "
                                   f"{need - 1} node(s), which join it with the bundle's join.sh", at)
