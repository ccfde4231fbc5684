"""slime's own flag defaults, read from its argument parser with ``ast`` (nothing of slime is imported or run).

``python -m acrl.compiler._slime.default_facts SLIME_DIR --commit REV -o DIR`` writes ``DIR/slime_defaults.json``:
every ``add_argument`` call of slime/utils/arguments.py at that commit, and every ``reset_arg(parser, "--flag",
...)`` call (slime 624b824 slime/utils/arguments.py:19-32: it sets the default of a flag Megatron-LM already
defines, such as ``--lr``'s 1e-6 at line 880, or adds the flag when none does; recorded with ``"via":
"reset_arg"``), by flag, with its other option strings,
its default (a literal; a non-literal default is recorded as its source text under ``"expression"``), its
``action`` (store_true / store_false defaults are False / True when not written; a non-literal action such as
``argparse.BooleanOptionalAction`` as its source text), ``type`` and ``choices`` where they are literal, and the line
of the call. The integration profiles' slime values (compiler/_spec/profiles.py)
are checked against these files by tests/test_profiles.py.

:func:`slime_defaults` is the one reader, for any tool: ``slime_defaults(slime_dir, commit)`` -> {flag: fact}.
Never imported by the compile path; tests/data/slime/README.md says how the project's copies are made.
"""

from __future__ import annotations

import ast
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .model_facts import _git, _git_dir, _provenance, facts_main

SLIME_ARGUMENTS_PY = "slime/utils/arguments.py"
GENERATOR = "python -m acrl.compiler._slime.default_facts"
_STORE_BOOL = {"store_true": False, "store_false": True}


def _literal(node: ast.AST | None) -> tuple[bool, Any]:
    if node is None:
        return True, None
    try:
        return True, ast.literal_eval(node)
    except (ValueError, SyntaxError, TypeError):
        return False, None


def _called(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def parse_defaults(source: str) -> dict[str, dict[str, Any]]:
    """Every ``*.add_argument("--flag", ...)`` and ``reset_arg(parser, "--flag", ...)`` call of ``source``: {flag:
    fact}, in the order of the file. A flag added twice (slime adds some in branches) keeps its first call, and the
    later lines are listed in ``"also"``. A reset_arg call's default is the flag's default (slime resets it on
    Megatron's flag, or adds the flag with it); without ``default=`` it reads as add_argument's would."""
    calls = [node for node in ast.walk(ast.parse(source))
             if isinstance(node, ast.Call) and _called(node) in ("add_argument", "reset_arg")]
    out: dict[str, dict[str, Any]] = {}
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):  # the file's order, not ast.walk's
        reset = _called(node) == "reset_arg"
        names = [a.value for a in node.args[1 if reset else 0:]
                 if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        flags = [n for n in names if n.startswith("--")]
        if not flags:
            continue
        keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
        action_ok, action = _literal(keywords.get("action"))
        fact: dict[str, Any] = {"line": node.lineno, "aliases": [n for n in names if n != flags[0]]}
        if reset:
            fact["via"] = "reset_arg"
        if action_ok and isinstance(action, str):
            fact["action"] = action
        elif not action_ok:  # argparse.BooleanOptionalAction: its source text, as a non-literal type is recorded
            fact["action"] = ast.unparse(keywords["action"])
        if "default" in keywords:
            ok, value = _literal(keywords["default"])
            if ok:
                fact["default"] = value
            else:
                fact["expression"] = ast.unparse(keywords["default"])
        elif action in _STORE_BOOL:
            fact["default"] = _STORE_BOOL[action]
        else:
            fact["default"] = None  # argparse's default for an option without one
        for name in ("type", "choices", "nargs"):
            if name in keywords:
                ok, value = _literal(keywords[name])
                fact[name] = value if ok else ast.unparse(keywords[name])
        if flags[0] in out:
            out[flags[0]].setdefault("also", []).append(node.lineno)
        else:
            out[flags[0]] = fact
    return dict(sorted(out.items(), key=lambda item: item[1]["line"]))


def slime_defaults(slime_dir: Path | str, commit: str | None = None) -> dict[str, dict[str, Any]]:
    """slime's flag defaults at ``commit`` (default: the checkout's HEAD) of ``slime_dir`` (a work tree or a git
    directory such as a bare mirror): {flag: {"default", "line", "action"?, "aliases", ...}}. Raises FactsError
    naming what is missing."""
    git_dir = _git_dir(Path(slime_dir))
    rev = _git(git_dir, "rev-parse", "--verify", f"{commit or 'HEAD'}^{{commit}}").decode().strip()
    return parse_defaults(_git(git_dir, "show", f"{rev}:{SLIME_ARGUMENTS_PY}").decode())


def generate(slime_dir: Path, rev: str | None, out_dir: Path, argv: Sequence[str]) -> Path:
    git_dir = _git_dir(slime_dir)
    commit = _git(git_dir, "rev-parse", "--verify", f"{rev or 'HEAD'}^{{commit}}").decode().strip()
    provenance = {**_provenance(git_dir, commit, argv), "generator": " ".join([GENERATOR, *argv]),
                  "from": f"{SLIME_ARGUMENTS_PY}: every add_argument and reset_arg call, read with ast"}
    data = {"provenance": provenance, "flags": slime_defaults(slime_dir, commit)}
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "slime_defaults.json"
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    return facts_main(argv, prog=GENERATOR, doc=__doc__, checkout="SLIME_DIR",
                      checkout_help="slime work tree or git directory",
                      commit_help="the commit to read (default: HEAD)",
                      out_help="directory to write slime_defaults.json into", generate=generate)


if __name__ == "__main__":
    sys.exit(main())
