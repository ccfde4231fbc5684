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

A script that submits to a local head (``ray job submit --address="http://127.0.0.1:8265"``) yet never runs ``ray
start --head`` submits to a head started outside it: ``[cluster] start_ray_head = false`` (:func:`head_outside`).
"""

from __future__ import annotations

import re
from typing import Any

from .._pipeline.placement import SLIME_GPUS_PER_NODE, LayoutArgs, group_layout
from .._shell.eval import Text
from .._shell.lexer import Word
from .._spec.flags import parse_flags, table_tokens
from .._spec.rollout_features import EXTERNAL_ADDRS, needs_external_switch
from .train_sh_map import SpecBuilder


def _whole(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default


def group_gpus(spec: dict[str, Any], commit: str) -> int:
    """The GPUs of slime's placement group for the spec being built, read as slime at the targeted ``commit`` reads
    its flags (the actor's defaults are slime's: one node of the node's GPUs; a colocated rollout without
    --rollout-num-gpus gets the actor's GPUs, slime/utils/arguments.py:1921-1923; external engines, from the key or
    the escape hatch, count where the commit needs no --rollout-external switch, as placement_spec.py reads them)."""
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
                      rollout_external=(bool(spec.get("rollout", {}).get("external_engine_addrs")) or EXTERNAL_ADDRS
                                        in flags) and not needs_external_switch(commit))
    return group_layout(args, slime_commit=commit).num_gpus


def size_cluster(builder: SpecBuilder, ssh_loop: int | None) -> None:
    """Set ``[cluster] num_nodes`` when slime's group is larger than one node and the script's head is local (no
    ``[cluster] address``); note it, naming the ssh loop that started the workers (``ssh_loop``: its line)."""
    spec = builder.spec
    cluster = spec["cluster"]
    node = _whole(cluster.get("gpus_per_node"), SLIME_GPUS_PER_NODE)
    gpus = group_gpus(spec, builder.commit)
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


_HEAD_START = re.compile(r"^[^#\n]*\bray\s+start\b(?:[^\n]|\\\n)*?--head\b", re.MULTILINE)


def writes_head(text: str) -> bool:
    """Whether the script runs `ray start --head` anywhere (at top level or in a body the importer does not
    evaluate), comments left out."""
    return _HEAD_START.search(text) is not None


def head_outside(builder: SpecBuilder, launcher: list[Word], address: Text | None, head_written: bool) -> None:
    """`ray job submit` to a local address (127.0.0.1 or localhost, or none: Ray's default is the local dashboard)
    in a script without any `ray start --head`: the head is started outside the script -> ``[cluster]
    start_ray_head = false`` (train.sh then submits to the local dashboard without starting a head), noted."""
    words = [w.literal for w in launcher]
    submit = next((i for i in range(len(words) - 2) if words[i:i + 3] == ["ray", "job", "submit"]), None)
    if submit is None or head_written or "address" in builder.spec["cluster"] or \
            (address is not None and address.problem):
        return
    line = launcher[submit].line
    to = f" at {address.text}" if address is not None and address.text else ""
    builder.set("cluster.start_ray_head", False)
    builder.note("difference", f"`ray job submit` (line {line}) submits to a Ray head{to} that the script does not "
                               "start (it has no `ray start --head`): [cluster] start_ray_head = false; start the head "
                               "before running train.sh", Text("", line))
