"""Where slime's two command-line parsers are and whether each expands abbreviations, read with ``ast`` from the
files (a tool's part, never imported by the compile path; :mod:`.flag_facts` writes the result into each commit's
facts as ``"parsers"``, which :mod:`.flag_verdict` cites).

slime parses its command line twice (slime/utils/arguments.py ``parse_args``, :1600-1640 at 624b824): phase 1 is
``sglang_parse_args`` of slime/backends/sglang_utils/arguments.py, an ``argparse.ArgumentParser`` read with
``parse_known_args`` that also registers sglang_router's ``--router-*`` flags where the commit calls
``RouterArgs.add_cli_args``; phase 2 is Megatron-LM's ``parse_args`` (megatron/training/arguments.py), whose parser
is made with ``allow_abbrev=False``. Read here: the line of ``def sglang_parse_args``, whether its parser keeps
argparse's default ``allow_abbrev=True``, the line of the ``RouterArgs.add_cli_args(`` call (None where there is
none), and the line and value of Megatron's ``allow_abbrev``.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from .model_facts import FactsError

SGLANG_FILE = "slime/backends/sglang_utils/arguments.py"
MEGATRON_FILE = "megatron/training/arguments.py"


def _function(tree: ast.Module, name: str, where: str) -> ast.FunctionDef:
    found = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(found) != 1:
        raise FactsError(f"{where} has no single top-level def {name}()")
    return found[0]


def _parsers_made(node: ast.AST) -> list[ast.Call]:
    """The ``argparse.ArgumentParser(...)`` / ``ArgumentParser(...)`` calls under ``node``, in file order."""
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and
             (getattr(n.func, "attr", None) or getattr(n.func, "id", None)) == "ArgumentParser"]
    return sorted(calls, key=lambda n: (n.lineno, n.col_offset))


def _allow_abbrev(call: ast.Call) -> tuple[bool, int]:
    """argparse's ``allow_abbrev`` of one parser (True unless written), and the line that decides it."""
    for keyword in call.keywords:
        if keyword.arg == "allow_abbrev":
            value = keyword.value
            if not isinstance(value, ast.Constant) or not isinstance(value.value, bool):
                raise FactsError(f"allow_abbrev at line {keyword.value.lineno} is not a literal")
            return value.value, keyword.value.lineno
    return True, call.lineno


def sglang_parser(text: str) -> dict[str, Any]:
    """slime's sglang parser (phase 1) in the text of slime/backends/sglang_utils/arguments.py."""
    tree = ast.parse(text)
    function = _function(tree, "sglang_parse_args", SGLANG_FILE)
    made = _parsers_made(function)
    if not made:
        raise FactsError(f"{SGLANG_FILE}: sglang_parse_args makes no ArgumentParser")
    main = made[-1]  # a pre-parser comes first where there is one; the parser whose flags are read comes last
    allow, _ = _allow_abbrev(main)
    routers = sorted(n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
                     and isinstance(n.func, ast.Attribute) and n.func.attr == "add_cli_args"
                     and isinstance(n.func.value, ast.Name) and n.func.value.id == "RouterArgs")
    return {"file": SGLANG_FILE, "line": function.lineno, "allow_abbrev": allow,
            "router_line": routers[0] if routers else None}


def megatron_parser(text: str) -> dict[str, Any]:
    """Megatron-LM's parser (phase 2) in the text of megatron/training/arguments.py."""
    function = _function(ast.parse(text), "parse_args", MEGATRON_FILE)
    made = _parsers_made(function)
    if len(made) != 1:
        raise FactsError(f"{MEGATRON_FILE}: parse_args makes {len(made)} ArgumentParsers, not one")
    allow, line = _allow_abbrev(made[0])
    return {"file": MEGATRON_FILE, "line": line, "allow_abbrev": allow}


def parsers(slime: Path, megatron: Path) -> dict[str, Any]:
    """Both parsers of an extracted slime tree and Megatron-LM tree (slime's patches applied)."""
    return {"sglang": sglang_parser((slime / SGLANG_FILE).read_text(encoding="utf-8")),
            "megatron": megatron_parser((megatron / MEGATRON_FILE).read_text(encoding="utf-8"))}
