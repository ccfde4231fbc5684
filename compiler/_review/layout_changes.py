"""`acrl diff`'s placement section: two pictures of :mod:`.layout` compared in `acrl layout`'s terms.

First the facts around the picture (the cluster, the mode, slime's placement group, the actor's and the rollout's
shapes, the head, --num-gpus-per-node, engines given another node's address), then the GPUs whose role changed,
in runs of one node: ``node 1 GPU 0-3: rollout engine 0 -> actor ranks 8-11``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from .._pipeline.placement import Engine
from .layout import Cell, Layout, sglang

ABSENT_GPU = "no such GPU"
_STATE_WORDS = {"idle-rollout": "spare rollout GPU (no whole engine)", "reserved": "held in slime's group, unused",
                "idle": "idle", "missing": "absent: the cluster has no such node"}


def facts(layout: Layout) -> dict[str, str]:
    """The placement's shape, as the values a diff compares (key -> a phrase)."""
    p = layout.placement
    out = {"cluster": f"{p.nodes} node{'s' if p.nodes != 1 else ''} x {p.gpus_per_node} GPUs, "
                      + ("a local head" if layout.address is None else "an existing cluster"),
           "mode": layout.mode().split(":")[0],
           "placement group": f"{p.group.num_gpus} GPUs, rollout offset {p.group.rollout_offset}"}
    if p.actor:
        dp = max(r.dp for r in p.actor) + 1
        out["actor"] = (f"{len(p.actor)} ranks: TP {p.parallel.tensor} x CP {p.parallel.context} x "
                        f"PP {p.parallel.pipeline} x DP {dp}")
    else:
        out["actor"] = "none"
    groups = [[e for e in p.engines if e.group == i] for i in range(len(p.args.server_groups))]
    if p.engines and p.args.server_groups:  # [sglang.models]: each server group that starts engines
        out["rollout"] = "; ".join(f"{g.model} {g.worker_type}: {_engines(mine)}"
                                   for g, mine in zip(p.args.server_groups, groups, strict=True) if mine)
    elif p.engines:
        out["rollout"] = _engines(p.engines)
    else:
        out["rollout"] = "external engines" if p.external else "none"
    # each node's share of the group (a local head advertises its share; join.sh advertises the whole node)
    out["slime's group per node"] = ", ".join(f"node {n.index}: {n.ray_gpus}" for n in layout.nodes if n.in_cluster)
    flag = p.num_gpus_per_node_flag
    out["--num-gpus-per-node"] = "not passed" if flag is None else str(flag)
    foreign = layout.foreign_engines
    out["engine addresses"] = "each engine's own node" if not foreign else "; ".join(
        f"engine {e.index} on node {e.gpus[0].node} gets node {e.host_node}'s (ACRL-C003)" for e in foreign)
    return out


def _engines(engines: Sequence[Engine]) -> str:
    e, count = engines[0], len(engines)
    return f"{count} engine{'s' if count != 1 else ''} x {len(e.gpus)} GPUs ({sglang(e)})"


def _kinds(cell: Cell | None) -> tuple[object, ...]:
    if cell is None:
        return (ABSENT_GPU,)
    return ("actor" if cell.actor else "", "engine" if cell.engine else "", cell.state)


def _continues(prev: Cell | None, cell: Cell | None) -> bool:
    """Whether ``cell`` extends a run that ends at ``prev`` on one side: the same kinds, the next actor rank,
    the same or the next engine."""
    if _kinds(prev) != _kinds(cell):
        return False
    if prev is None or cell is None:
        return True
    if prev.actor and cell.actor and cell.actor.rank != prev.actor.rank + 1:
        return False
    return not (prev.engine and cell.engine and cell.engine.index - prev.engine.index not in (0, 1))


def describe(cells: list[Cell | None]) -> str:
    """A run of GPUs on one side, in words: "actor ranks 8-11", "rollout engines 0-1", "idle"."""
    first, last = cells[0], cells[-1]
    if first is None or last is None:
        return ABSENT_GPU
    parts = []
    if first.actor and last.actor:
        a, b = first.actor.rank, last.actor.rank
        parts.append(f"actor rank {a}" if a == b else f"actor ranks {a}-{b}")
    if first.engine and last.engine:
        a, b = first.engine.index, last.engine.index
        parts.append(f"rollout engine {a}" if a == b else f"rollout engines {a}-{b}")
    return " + ".join(parts) if parts else _STATE_WORDS[first.state]


def _gpus(a: int, b: int) -> str:
    return f"GPU {a}" if a == b else f"GPU {a}-{b}"


def gpu_changes(a: Layout, b: Layout) -> Iterator[tuple[str, str, str]]:
    """(``node N GPU i-j``, before, after) for each run of GPUs of one node whose role changed."""
    before = {(c.node, c.gpu): c for c in a.cells}
    after = {(c.node, c.gpu): c for c in b.cells}
    for node in sorted({n for n, _ in [*before, *after]}):
        width = max(g + 1 for n, g in [*before, *after] if n == node)
        run: list[tuple[int, Cell | None, Cell | None]] = []
        for gpu in range(width + 1):  # one past the end closes the last run
            old, new = before.get((node, gpu)), after.get((node, gpu))
            changed = gpu < width and describe([old]) + _detail(old) != describe([new]) + _detail(new)
            if run and (not changed or not (_continues(run[-1][1], old) and _continues(run[-1][2], new))):
                yield (f"node {node} {_gpus(run[0][0], run[-1][0])}", describe([c for _, c, _ in run]),
                       describe([c for _, _, c in run]))
                run = []
            if changed:
                run.append((gpu, old, new))


def _detail(cell: Cell | None) -> str:
    """What else makes a GPU's role differ: the actor's rank coordinates are said by "actor", not per GPU; the
    engine's GPU index within the engine follows from the engine."""
    return "" if cell is None or cell.engine is None else f"/{cell.engine_gpu}"


def placement_changes(a: Layout | None, b: Layout | None) -> list[tuple[str, object, object]]:
    """(key, before, after) of every difference between two placements; None is a side whose spec.toml cannot
    be read as a spec (its placement is unknown)."""
    unknown = "unknown: spec.toml cannot be read as a spec"
    if a is None:
        return [] if b is None else [("placement", unknown, facts(b)["cluster"])]
    if b is None:
        return [("placement", facts(a)["cluster"], unknown)]
    fa, fb = facts(a), facts(b)
    out: list[tuple[str, object, object]] = [(k, fa[k], fb[k]) for k in fa if fa[k] != fb[k]]
    return out + list(gpu_changes(a, b))
