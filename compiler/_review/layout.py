"""`acrl layout`: which GPU of which node does what, read from the one placement model.

The picture is :func:`acrl.compiler._pipeline.placement_spec.read` of a spec, cell by cell: each GPU of each
node with its actor rank (and the rank's Megatron coordinates), its rollout engine (and which of the engine's
GPUs it is), or why it is idle; each node's share of slime's placement group (what `ray start --num-gpus`
advertises there); the head; and the engines slime gives another node's address (ACRL-C003). A spec is
compiled in memory (nothing is written); a bundle is read from its resolved spec.toml, as `acrl explain`
reads it (:mod:`.layout_read`). An invalid spec whose tables still read as a spec is drawn too, with its
diagnostics beside it.

:mod:`.layout_format` draws it as text and markdown, :mod:`.layout_svg` as SVG, and :mod:`.layout_changes`
compares two pictures for `acrl diff`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import attrs

from .._pipeline.placement import SLIME_GPUS_PER_NODE, ActorRank, Engine, Placement
from .._pipeline.placement_spec import SpecPlacement
from .._pipeline.placement_spec import read as read_placement
from .._spec.tables import Spec

State = Literal["used", "idle-rollout", "reserved", "idle", "missing"]
STATES: dict[str, str] = {  # a GPU without a role, and why
    "idle-rollout": "a rollout GPU no engine uses (slime makes rollout_num_gpus // gpus_per_engine engines)",
    "reserved": "in slime's placement group, but nothing runs on it",
    "idle": "not in slime's placement group",
    "missing": "slime's placement group needs it, but the cluster has no such node (ACRL-C001)",
}


@attrs.frozen
class Cell:
    """One GPU: ``node`` and its local index ``gpu``, and what runs there."""

    node: int
    gpu: int
    slot: int  # its index in slime's sorted placement group (node-major), whether the group reaches it or not
    state: State
    actor: ActorRank | None = None
    engine: Engine | None = None
    engine_gpu: int = 0  # which of the engine's GPUs this is
    foreign_address: bool = False  # the engine is given another node's address (ACRL-C003)

    @property
    def roles(self) -> tuple[str, ...]:
        """The roles on this GPU ("actor", "engine" or both), or the state of a GPU without a role."""
        found = tuple(r for r, on in (("actor", self.actor), ("engine", self.engine)) if on is not None)
        return found or (self.state,)

    def describe(self) -> str:
        """What runs here, in words (the SVG's tooltip, markdown's last column)."""
        parts = []
        if self.actor is not None:
            parts.append(f"actor rank {self.actor.rank} ({coordinates(self.actor)})")
        if self.engine is not None:
            e = self.engine
            parts.append(f"rollout engine {e.index}, its GPU {self.engine_gpu} of {len(e.gpus)} ({sglang(e)})")
            if self.foreign_address:
                parts.append(f"slime gives it node {e.host_node}'s address (ACRL-C003)")
        return "; ".join(parts) or f"{'missing' if self.state == 'missing' else 'idle'}: {STATES[self.state]}"


@attrs.frozen
class Node:
    index: int
    head: bool  # node 0 of a local head (with [cluster] address, the head is the existing cluster's)
    in_cluster: bool  # False: a node slime's group needs beyond [cluster] num_nodes
    ray_gpus: int  # GPUs of slime's placement group on this node: what `ray start --num-gpus` must advertise
    cells: tuple[Cell, ...]


def joined(share: int, gpus_per_node: int) -> str:
    """How a node other than a local head joins it: join.sh advertises every GPU of the node (it checks that they
    are gpus_per_node), whatever share of slime's placement group the node gets."""
    return f"ray start --num-gpus {gpus_per_node}" + ("" if share == gpus_per_node else
                                                      f" (join.sh); slime's group takes {share} of them")


@attrs.frozen
class Layout:
    """The picture of one spec or bundle."""

    subject: str
    exp_id: str
    address: str | None  # [cluster] address: an existing cluster
    placed: SpecPlacement
    nodes: tuple[Node, ...]
    notes: tuple[str, ...] = ()  # compile warnings, a bundle that does not match its manifest

    @property
    def placement(self) -> Placement:
        return self.placed.placement

    @property
    def cells(self) -> tuple[Cell, ...]:
        return tuple(c for n in self.nodes for c in n.cells)

    @property
    def foreign_engines(self) -> tuple[Engine, ...]:
        return tuple(e for e in self.placement.engines if e.host_node != e.gpus[0].node)

    def mode(self) -> str:
        a = self.placement.args
        if a.debug_train_only:
            return "--debug-train-only: the actor alone, no rollout engines"
        if a.rollout_external:
            return "external rollout (--rollout-external-engine-addrs): no local engines"
        if a.debug_rollout_only:
            return "--debug-rollout-only: the rollout alone, no training"
        return "colocated: the actor and the rollout share GPUs" if a.colocate else \
            "disaggregated: the actor and the rollout on their own GPUs"

    def summary(self) -> list[str]:
        """The facts around the picture, one sentence each (plain text; the formats escape them)."""
        p, a = self.placement, self.placement.args
        actor = len(p.actor)
        out = [f"cluster: {p.nodes} node{'s' if p.nodes != 1 else ''} x {p.gpus_per_node} GPUs; {self.mode()}"]
        rollout = "" if not p.rollout_slots else f", rollout slots {_span(p.rollout_slots)}"
        actor_slots = f", actor slots {_span(range(actor))}" if actor else ""
        out.append(f"slime's placement group: {p.group.num_gpus} GPUs sorted by node IP and GPU id{actor_slots}"
                   f"{rollout} (rollout offset {p.group.rollout_offset})")
        if self.address is None:
            out.append(f"head: node 0, a local Ray head: ray start --head --num-gpus {self.nodes[0].ray_gpus}")
            out += [f"node {n.index}: joins the head with {joined(n.ray_gpus, p.gpus_per_node)}"
                    for n in self.nodes[1:] if n.in_cluster]
        else:
            out.append(f"head: an existing Ray cluster at {self.address} (train.sh starts no Ray); slime needs "
                       + ", ".join(f"{n.ray_gpus} GPUs on node {n.index}" for n in self.nodes if n.in_cluster))
        flag = p.num_gpus_per_node_flag
        out.append(f"--num-gpus-per-node {flag}: passed (nodes of {flag} GPUs)" if flag is not None else
                   f"--num-gpus-per-node: not passed ({SLIME_GPUS_PER_NODE}, slime's default, is the node size)")
        if actor:
            dp = max(r.dp for r in p.actor) + 1
            out.append(f"actor: {actor} ranks, Megatron TP {p.parallel.tensor} x CP {p.parallel.context} x "
                       f"PP {p.parallel.pipeline} x DP {dp} (order tp-cp-ep-dp-pp)")
        if p.engines and a.server_groups:  # [sglang.models]: a line per server group that starts engines
            for index, group in enumerate(a.server_groups):
                mine = [e for e in p.engines if e.group == index]
                if mine:
                    out.append(f"rollout: model {group.model!r} {group.worker_type} group: {_engines(mine, True)}")
        elif p.engines:
            out.append(f"rollout: {_engines(p.engines)}")
        elif a.rollout_external:
            out.append("rollout: external engines (their addresses are --rollout-external-engine-addrs)")
        if p.idle_rollout_gpus:
            out.append(f"idle: {p.idle_rollout_gpus} rollout GPU(s) make no whole engine")
        for e in self.foreign_engines:
            out.append(f"address: rollout engine {e.index} runs on node {e.gpus[0].node} but slime gives it node "
                       f"{e.host_node}'s address (ACRL-C003: it cannot bind and the job hangs)")
        if not p.fits:
            out.append(f"does not fit: the group needs {p.group.num_gpus} GPUs, the cluster has {p.cluster_gpus} "
                       "(ACRL-C001)")
        out += [f"default: {d}" for d in self.placed.defaults]
        return out


def _engines(engines: Sequence[Engine], numbered: bool = False) -> str:
    """``N engines of G GPUs (sizes)``, and which engines they are (``numbered``: one server group's)."""
    e, n, g = engines[0], len(engines), len(engines[0].gpus)
    which = f", engine {e.index}" if n == 1 else f", engines {e.index}-{engines[-1].index}"
    return f"{n} engine{'s' if n != 1 else ''} of {g} GPU{'s' if g != 1 else ''} ({sglang(e)})" + \
        (which if numbered else "")


def coordinates(rank: ActorRank) -> str:
    return f"TP {rank.tp}, PP {rank.pp}, CP {rank.cp}, DP {rank.dp}"


def sglang(engine: Engine) -> str:
    e = engine.sizes
    extra = (f", ep {e.ep}" if e.ep > 1 else "") + (f", dp-attention (attention tp {e.attention_tp})"
                                                      if e.attention_dp > 1 else "")
    return f"SGLang tp {e.tp}, pp {e.pp}, dp {e.dp}{extra}"


def _span(r: Sequence[int]) -> str:
    return f"{r[0]}" if len(r) == 1 else f"{r[0]}-{r[-1]}" if r else "none"


def layout_of(subject: str, spec: Spec, notes: Sequence[str] = ()) -> Layout:
    """The picture of ``spec``'s placement."""
    placed = read_placement(spec)
    p = placed.placement
    actors = {r.gpu: r for r in p.actor}
    engines = {g: (e, k) for e in p.engines for k, g in enumerate(e.gpus)}
    rollout = set(p.rollout_slots)
    node_gpus = p.node_gpus  # a property of one entry per node: computed once, not once per node
    needed = max(p.nodes, -(-p.group.num_gpus // p.gpus_per_node), *(g.node + 1 for g in [*actors, *engines]))
    nodes = []
    for n in range(needed):
        cells = []
        for g in range(p.gpus_per_node):
            slot = n * p.gpus_per_node + g
            gpu = p.slot(slot)
            engine, k = engines.get(gpu, (None, 0))
            state: State = "used" if gpu in actors or engine is not None else "idle-rollout" if slot in rollout \
                else "reserved" if slot < p.group.num_gpus else "idle"
            if n >= p.nodes and state != "used":
                state = "missing"  # a used GPU of a node the cluster lacks: its node is drawn as missing
            cells.append(Cell(n, g, slot, state, actors.get(gpu), engine, k,
                              engine is not None and engine.host_node != engine.gpus[0].node))
        ray = node_gpus[n] if n < len(node_gpus) else 0
        nodes.append(Node(n, n == 0 and p.local_head, n < p.nodes, ray, tuple(cells)))
    return Layout(subject, spec.experiment.id, spec.cluster.address, placed, tuple(nodes), tuple(notes))
