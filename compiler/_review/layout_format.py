"""`acrl layout` as text (a terminal: a few lines per node, a column per GPU) and as markdown (a table per
node, for a pull request). Every spec value is shown, never obeyed: control characters are escaped in text,
markdown's own characters in markdown."""

from __future__ import annotations

from collections.abc import Callable

from .diff_format import _code as code
from .layout import STATES, Cell, Layout, Node, joined
from .text import printable as printable  # re-exported: explain and layout read it here

SHORT = {"idle-rollout": "spare", "reserved": "held", "idle": "idle", "missing": "absent"}
_COLOURS = {"actor": "32", "engine": "36", "warn": "31;1", "dim": "2"}


def node_title(layout: Layout, node: Node) -> str:
    if not node.in_cluster:
        nodes = layout.placement.nodes
        return f"node {node.index}: not in the cluster, which has {nodes} node{'s' if nodes != 1 else ''} (ACRL-C001)"
    if node.head:
        return f"node {node.index} (head, local): ray start --head --num-gpus {node.ray_gpus}"
    if layout.address is None:
        return f"node {node.index}: {joined(node.ray_gpus, layout.placement.gpus_per_node)}"
    return f"node {node.index} (existing cluster): slime's group takes {node.ray_gpus} GPUs"


def _rows(node: Node, any_actor: bool, any_engine: bool) -> list[tuple[str, list[tuple[str, str]]]]:
    """(label, [(value, colour)] per GPU) of one node's grid: a row of GPU numbers, then a row per role the
    layout has (``any_actor``, ``any_engine``: over all its nodes); a GPU without a role says why in the first."""
    out: list[tuple[str, list[tuple[str, str]]]] = [("GPU", [(str(c.gpu), "") for c in node.cells])]

    def row(label: str, kind: str, value: Callable[[Cell], str]) -> None:
        cells = []
        for c in node.cells:
            if c.state != "used":
                cells.append((SHORT[c.state] if len(out) == 1 else "", "warn" if c.state == "missing" else "dim"))
                continue
            text = value(c)
            colour = "dim" if not text else "warn" if kind == "engine" and c.foreign_address else kind
            cells.append((text or "-", colour))
        out.append((label, cells))

    if any_actor:
        row("actor", "actor", lambda c: str(c.actor.rank) if c.actor else "")
        row("TP/PP/CP/DP", "actor", lambda c: f"{c.actor.tp}/{c.actor.pp}/{c.actor.cp}/{c.actor.dp}" if c.actor else "")
    if any_engine:
        row("engine:GPU", "engine",
            lambda c: f"{c.engine.index}:{c.engine_gpu}{'!' if c.foreign_address else ''}" if c.engine else "")
    if not any_actor and not any_engine:
        row("GPU use", "dim", lambda c: "")
    return out


def format_text(layout: Layout, *, colour: bool = False) -> str:
    """The picture for a terminal; ``colour``: ANSI colours (the caller decides: a terminal, NO_COLOR unset)."""
    def paint(text: str, kind: str) -> str:
        return f"\033[{_COLOURS[kind]}m{text}\033[0m" if colour and kind and text.strip() else text

    out = [f"acrl layout {printable(layout.subject)} (experiment {printable(layout.exp_id)})"]
    out += [printable(line) for line in layout.summary()]
    every = layout.cells  # every node's: read once, not once per node
    roles = any(c.actor for c in every), any(c.engine for c in every)
    grids = [_rows(node, *roles) for node in layout.nodes]
    width = max(3, *(len(v) for rows in grids for _, cells in rows for v, _ in cells)) + 2
    for node, rows in zip(layout.nodes, grids, strict=True):
        out += ["", paint(printable(node_title(layout, node)), "warn" if not node.in_cluster else "")]
        for label, cells in rows:
            line = f"  {label:<12}" + "".join(paint(f"{v:>{width}}", kind) for v, kind in cells)
            out.append(line.rstrip())
    out += ["", *legend(layout)]
    out += [f"note: {printable(n)}" for n in layout.notes]
    return "\n".join(out) + "\n"


def legend(layout: Layout) -> list[str]:
    cells = layout.cells
    out = []
    if any(c.actor for c in cells):
        out.append("actor: the training rank; TP/PP/CP/DP: its index in each Megatron group")
    if any(c.engine for c in cells):
        out.append("engine:GPU: the SGLang rollout engine and which of its GPUs"
                   + ("; !: slime gives the engine another node's address (ACRL-C003)"
                      if any(c.foreign_address for c in cells) else ""))
    states = sorted({c.state for c in cells} - {"used"}, key=list(SHORT).index)
    out += [f"{SHORT[s]}: {STATES[s]}" for s in states]
    return out


def _md(text: str) -> str:
    """Plain text in markdown: its own characters escaped, on one line."""
    text = printable(" ".join(text.split()))
    return "".join(f"\\{c}" if c in "\\`*_[]<>|&~#!" else c for c in text)


def format_markdown(layout: Layout) -> str:
    """The picture as GitHub-flavoured markdown: a summary, then a table per node."""
    out = [f"### `acrl layout` {code(printable(layout.subject))}: experiment {code(printable(layout.exp_id))}", ""]
    out += [f"- {_md(line)}" for line in layout.summary()]
    any_actor = any(c.actor for c in layout.cells)
    any_engine = any(c.engine for c in layout.cells)
    head = ["GPU", *(["actor rank", "TP", "PP", "CP", "DP"] if any_actor else []),
            *(["rollout engine", "engine's GPU"] if any_engine else []), "note"]
    for node in layout.nodes:
        out += ["", f"#### {_md(node_title(layout, node))}", "", "| " + " | ".join(head) + " |",
                "|" + "---|" * len(head)]
        for c in node.cells:
            cells = [str(c.gpu)]
            if any_actor:
                a = c.actor
                cells += [str(a.rank), str(a.tp), str(a.pp), str(a.cp), str(a.dp)] if a else [""] * 5
            if any_engine:
                e = c.engine
                cells += [str(e.index), f"{c.engine_gpu} of {len(e.gpus)}"] if e else ["", ""]
            note = f"address of node {c.engine.host_node} (ACRL-C003)" if c.engine and c.foreign_address else \
                "" if c.state == "used" else f"{SHORT[c.state]}: {STATES[c.state]}"
            out.append("| " + " | ".join([*cells, _md(note)]) + " |")
    if layout.notes:
        out += ["", *(f"> **Note:** {_md(n)}  " for n in layout.notes)]
    return "\n".join(out).rstrip() + "\n"
