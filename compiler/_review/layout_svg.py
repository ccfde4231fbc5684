"""`acrl layout --format svg`: a self-contained SVG of the placement: a group per node, one rect per GPU
filled by its role, its labels and a tooltip, and a legend. Every text is escaped for XML (and stripped of
the characters XML cannot hold), so that a spec value never becomes markup."""

from __future__ import annotations

import re

from .layout import STATES, Cell, Layout
from .layout_format import SHORT, node_title

FILL = {"actor": "#4c9f70", "engine": "#4a7fc1", "actor+engine": "#8a6bbf", "idle-rollout": "#d9d9d9",
        "reserved": "#efe6c8", "idle": "#f2f2f2", "missing": "#f4c7c3"}
LEGEND = {"actor": "actor (training rank)", "engine": "rollout engine (SGLang)",
          "actor+engine": "actor and rollout engine (colocated)", **{s: f"{SHORT[s]}: {t}" for s, t in STATES.items()}}
FOREIGN = "red border: slime gives the engine another node's address (ACRL-C003)"
CELL_W, CELL_H, GAP, PAD, NODE_HEAD = 112, 64, 6, 14, 26
CHAR_W = 6.6  # an average character of 12px sans-serif, for the width of the longest line
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff\ufffe\uffff]")


def escape(text: str) -> str:
    """``text`` as XML character data or an attribute value (either quote)."""
    text = _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")
            .replace("'", "&#39;"))


def role(cell: Cell) -> str:
    return "+".join(cell.roles)


def _labels(cell: Cell) -> list[str]:
    out = [f"GPU {cell.gpu}"]
    if cell.actor is not None:
        a = cell.actor
        out += [f"actor {a.rank}", f"tp{a.tp} pp{a.pp} cp{a.cp} dp{a.dp}"]
    if cell.engine is not None:
        out.append(f"engine {cell.engine.index} gpu {cell.engine_gpu}" + (" !" if cell.foreign_address else ""))
    if cell.state != "used":
        out.append(SHORT[cell.state])
    return out


def format_svg(layout: Layout) -> str:
    """The picture as one SVG document."""
    per_node = layout.placement.gpus_per_node
    columns = min(per_node, 8)
    rows = -(-per_node // columns)
    node_w = 2 * PAD + columns * CELL_W + (columns - 1) * GAP
    node_h = NODE_HEAD + PAD + rows * CELL_H + (rows - 1) * GAP
    summary = layout.summary()
    top = 30 + 16 * len(summary) + 10
    used = [r for r in FILL if any(role(c) == r for c in layout.cells)]
    longest = max(len(line) for line in [*summary, *(node_title(layout, n) for n in layout.nodes), *LEGEND.values()])
    width = max(node_w + 2 * PAD, round(CHAR_W * longest) + 4 * PAD)
    legend_y = top + len(layout.nodes) * (node_h + PAD)
    height = legend_y + 20 * (len(used) + any(c.foreign_address for c in layout.cells)) + PAD
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
           f"<title>acrl layout {escape(layout.subject)}: experiment {escape(layout.exp_id)}</title>",
           f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
           f'<text x="{PAD}" y="20" font-size="15" font-weight="bold">acrl layout: experiment '
           f"{escape(layout.exp_id)}</text>"]
    out += [f'<text x="{PAD}" y="{38 + 16 * i}" fill="#333333">{escape(line)}</text>' for i, line in enumerate(summary)]
    for n, node in enumerate(layout.nodes):
        y = top + n * (node_h + PAD)
        border = "#c0392b" if not node.in_cluster else "#555555"
        out.append(f'<g class="node" data-node="{node.index}" data-in-cluster="{str(node.in_cluster).lower()}" '
                   f'data-ray-gpus="{node.ray_gpus}">')
        out.append(f'<rect x="{PAD}" y="{y}" width="{node_w}" height="{node_h}" rx="6" fill="#fafafa" '
                   f'stroke="{border}"/>')
        out.append(f'<text x="{2 * PAD}" y="{y + 18}" font-weight="bold">{escape(node_title(layout, node))}</text>')
        for cell in node.cells:
            col, row = cell.gpu % columns, cell.gpu // columns
            x = 2 * PAD + col * (CELL_W + GAP)
            cy = y + NODE_HEAD + row * (CELL_H + GAP)
            kind = role(cell)
            stroke = ' stroke="#c0392b" stroke-width="3"' if cell.foreign_address else ' stroke="#888888"'
            out.append(f'<g class="gpu" data-node="{cell.node}" data-gpu="{cell.gpu}" data-role="{kind}">')
            out.append(f"<title>node {cell.node} GPU {cell.gpu}: {escape(cell.describe())}</title>")
            out.append(f'<rect class="gpu-cell" x="{x}" y="{cy}" width="{CELL_W}" height="{CELL_H}" rx="4" '
                       f'fill="{FILL[kind]}"{stroke}/>')
            dark = kind in ("actor", "engine", "actor+engine")
            for i, label in enumerate(_labels(cell)):
                weight = ' font-weight="bold"' if i == 0 else ""
                out.append(f'<text x="{x + 6}" y="{cy + 15 + 14 * i}" fill="{"#ffffff" if dark else "#333333"}"'
                           f'{weight}>{escape(label)}</text>')
            out.append("</g>")
        out.append("</g>")
    out.append(f'<g class="legend" transform="translate({PAD},{legend_y})">')
    for i, kind in enumerate(used):
        out.append(f'<rect x="0" y="{20 * i}" width="14" height="14" fill="{FILL[kind]}" stroke="#888888"/>')
        out.append(f'<text x="20" y="{20 * i + 11}">{escape(LEGEND[kind])}</text>')
    if any(c.foreign_address for c in layout.cells):
        y = 20 * len(used)
        out.append(f'<rect x="0" y="{y}" width="14" height="14" fill="#ffffff" stroke="#c0392b" stroke-width="3"/>')
        out.append(f'<text x="20" y="{y + 11}">{escape(FOREIGN)}</text>')
    out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
