"""Generated documentation: docs/rules.md from the rule catalog, docs/reference.md and
docs/acrl-spec.schema.json from the spec's JSON Schema.

Regenerate them all with ``python -m acrl.compiler._cli.docs`` run from the repository root (tests fail
when one is stale); ``python -m acrl.compiler._cli.docs docs/rules.md`` regenerates only the files named.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .._pipeline.validate import RULES
from .._spec.schema import (
    AT_LAUNCH_KEYWORD,
    CUSTOM_CONFIG_KEYWORD,
    FLAG_KEYWORD,
    OMIT_IF_KEYWORD,
    SWITCHES_KEYWORD,
    schema_json,
    spec_schema,
    toml_literal,
)

REGENERATE = "python -m acrl.compiler._cli.docs"
_SECTIONS = {
    "P": "Cluster and parallelism", "C": "Placement on the cluster (docs/cluster.md)", "B": "Batch arithmetic",
    "A": "Algorithm", "E": "Evaluation and checkpoints", "I": "Integration profiles ([experiment] integration)",
    "T": "The toolkit (AgentCore Runtime, gateway, naming)", "F": "Flags", "S": "Security", "M": "Model architecture",
    "K": "KubeRay (--target kuberay)", "L": "Launch: the Ray nodes acrl starts and the job's PYTHONPATH",
    "G": "SGLang server groups ([sglang.models], slime's --sglang-config)",
    "N": "Training features: on-policy distillation, weight sync ([opd], [weight_sync])",
    "R": "Rollout features: external engines, fully-async, sample hooks, balance-by-flops",
    "H": "History: saving, resuming and continuing ([checkpoint]; docs/spec.md, Resuming and continuing)",
}


def rules_markdown() -> str:
    """docs/rules.md."""
    out = [
        "# Validation rules",
        "",
        f"Generated from `compiler/_pipeline/validate/` by `{REGENERATE}`; do not edit.",
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


def reference_markdown(schema: Mapping[str, Any] | None = None) -> str:
    """docs/reference.md: every spec key with its type, default, slime flag and description, from the schema."""
    schema = spec_schema() if schema is None else schema
    tables = {name: prop for name, prop in schema["properties"].items() if prop.get("type") == "object"}
    required = set(schema.get("required", ())) | set(schema.get("then", {}).get("required", ()))
    out = [
        "# Spec reference",
        "",
        f"Generated from the spec's JSON Schema (`acrl schema`, `compiler/_spec/tables.py`) by `{REGENERATE}`; do not edit.",  # noqa: E501
        "",
        "Every key of a spec, table by table. *required* keys have no default; *unset* keys are optional",
        "and have none: leave them out and acrl passes no flag, so slime's own default applies. A flag",
        "marked *left out when* is not passed at that value, which is slime's default. Flags no single key",
        "sets (`--global-batch-size`, the MODEL_ARGS of `[model.args]`, what train.sh adds at run time)",
        "are explained, with where every value came from, by `acrl explain SPEC|BUNDLE [KEY]`.",
        "Cross-field rules are in [rules.md](rules.md); editor set-up is in [editor.md](editor.md).",
        "",
        *(f"Top-level `{name} = ...` ({_type(prop)}): {_cell(prop.get('description', ''))} The required tables "
          "are required only of a spec without `extends` ([spec.md](spec.md#extends-set-and-sweeps))."
          for name, prop in schema["properties"].items() if prop.get("type") != "object"),
        "",
        " ".join(f"[`[{name}]`](#{name})" for name in tables),
    ]
    for name, table in tables.items():
        need = "required table" if name in required else "optional table"
        out += ["", f"## [{name}]", "", f"{_cell(table.get('description', ''))} ({need})", "",
                "| key | type | default | slime flag (or file) | description |", "|---|---|---|---|---|"]
        out += _rows(table)
        out += _nested(name, table)
    return "\n".join(out) + "\n"


def _rows(table: Mapping[str, Any]) -> list[str]:
    keys = set(table.get("required", ()))
    return [f"| `{key}` | {_type(prop)} | {_default(prop, key in keys)} | {_flag(prop)} | "
            f"{_cell(prop.get('description', ''))} |" for key, prop in table["properties"].items()]


def _nested(path: str, table: Mapping[str, Any]) -> list[str]:
    """A subsection for each table inside a table: a table (``[kuberay.head]``), a table of tables
    (``[sglang.models.NAME]``) or an array of tables (``[[sglang.models.NAME.server_groups]]``), with its keys,
    recursively."""
    out: list[str] = []
    for key, prop in table["properties"].items():
        inner, header = prop.get("additionalProperties"), f"[{path}.{key}.NAME]"
        if "properties" in prop:
            inner, header = prop, f"[{path}.{key}]"
        elif prop.get("type") == "array":
            inner, header = prop.get("items"), f"[[{path}.{key}]]"
        if not isinstance(inner, Mapping) or "properties" not in inner:
            continue
        out += ["", f"### {header}", "", _cell(inner.get("description", "")), "",
                "| key | type | default | slime flag (or file) | description |", "|---|---|---|---|---|",
                *_rows(inner), *_nested(header.strip("[]"), inner)]
    return out


def _type(prop: Mapping[str, Any]) -> str:
    if "enum" in prop:
        return "one of " + ", ".join(f"`{toml_literal(v)}`" for v in prop["enum"])
    kind = prop.get("type")
    if kind == "object":
        value = prop.get("additionalProperties")
        if isinstance(value, Mapping) and "properties" in value:
            return "table of tables"
        return f"table of {_type(value)}" if isinstance(value, Mapping) else "table"
    if kind == "array":
        items = prop.get("items", {})
        return "array of tables" if "properties" in items else f"array of {_type(items)}"
    if isinstance(kind, list):  # a flag value: a scalar, or an array of them
        items = prop.get("items", {}).get("type", [])
        kinds = [k if k != "array" else "array of " + " and ".join(f"{i}s" for i in items) for k in kind]
        return ", ".join(kinds[:-1]) + " or " + kinds[-1]
    bounds = [f"{sign} {prop[word]:g}" for word, sign in (("minimum", "≥"), ("exclusiveMinimum", ">"),
                                                          ("maximum", "≤"), ("exclusiveMaximum", "<"))
              if word in prop]
    return f"{kind}{', ' if bounds else ''}{', '.join(bounds)}"


def _default(prop: Mapping[str, Any], required: bool) -> str:
    if required:
        return "*required*"
    if "default" not in prop:
        return "*unset*"
    return f"`{_cell(toml_literal(prop['default']))}`"


def _flag(prop: Mapping[str, Any]) -> str:
    flag = prop.get(FLAG_KEYWORD)
    if prop.get(SWITCHES_KEYWORD):
        return "; ".join(f"`{switch}` when `{toml_literal(value)}`" for value, switch in prop[SWITCHES_KEYWORD])
    if flag and prop.get(AT_LAUNCH_KEYWORD):
        return f"`{flag}` (train.sh decides at launch)"
    if not flag:
        written_to = prop.get(CUSTOM_CONFIG_KEYWORD)
        return f"custom_config.yaml: `{written_to}`" if written_to else ""
    if OMIT_IF_KEYWORD in prop:
        return f"`{flag}` (left out when `{toml_literal(prop[OMIT_IF_KEYWORD])}`)"
    return f"`{flag}`"


def _cell(text: str) -> str:
    """Text for a table cell: one line, with the characters Markdown would take for table or HTML syntax escaped."""
    return " ".join(text.split()).replace("|", "\\|").replace("<", "\\<")


# File name -> generator; the names are also the files under docs/ that the tests keep current.
GENERATED: Mapping[str, Callable[[], str]] = {
    "rules.md": rules_markdown,
    "reference.md": reference_markdown,
    "acrl-spec.schema.json": schema_json,
}


def main(argv: list[str]) -> int:
    """Write every generated file into docs/ (or only the paths named), from the repository root."""
    targets = [Path(a) for a in argv] or [Path("docs") / name for name in GENERATED]
    for target in targets:
        if target.name not in GENERATED:
            print(f"{target}: not a generated file; these are: {', '.join(GENERATED)}", file=sys.stderr)
            return 2
        if not target.parent.is_dir():
            print(f"{target.parent}: no such directory; run `{REGENERATE}` from the repository root",
                  file=sys.stderr)
            return 2
        target.write_text(GENERATED[target.name](), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
