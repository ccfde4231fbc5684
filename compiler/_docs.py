"""Generated documentation: docs/rules.md from the rule catalog.

Regenerate with ``python -m acrl.compiler._docs`` (a test fails when the file is stale).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ._rules import RULES

_SECTIONS = {
    "P": "Cluster and parallelism", "B": "Batch arithmetic", "A": "Algorithm", "E": "Evaluation and checkpoints",
    "T": "The toolkit (AgentCore Runtime, gateway, naming)", "F": "Flags", "S": "Security", "M": "Model architecture",
}


def rules_markdown() -> str:
    """docs/rules.md."""
    out = [
        "# Validation rules",
        "",
        "Generated from `compiler/_rules.py` by `python -m acrl.compiler._docs`; do not edit.",
        "",
        "Every rule has a stable id. Errors stop the compile; warnings are printed, recorded in the",
        "manifest, and become errors with `--strict`. A message points at the first of the rule's keys",
        "that the spec wrote.",
    ]
    for letter, title in _SECTIONS.items():
        out += ["", f"## {title}", "", "| id | severity | rule | keys |", "|---|---|---|---|"]
        for rule in RULES:
            if rule.id.split("-")[1][0] == letter:
                keys = ", ".join(f"`{k}`" for k in rule.keys)
                out.append(f"| {rule.id} | {rule.severity} | {_doc(rule.check.__doc__) or rule.title} | {keys} |")
    return "\n".join(out) + "\n"


def _doc(doc: str | None) -> str:
    return " ".join((doc or "").split())


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/rules.md")
    target.write_text(rules_markdown(), encoding="utf-8")
