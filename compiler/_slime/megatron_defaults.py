"""Megatron-LM's own flag defaults, read from its source text (nothing of Megatron is imported or run).

slime parses Megatron-LM's arguments and its own together (slime's ``reset_arg`` changes a few Megatron defaults,
:mod:`.default_facts`), so "slime's default" of a flag such as ``--pipeline-model-parallel-size`` is Megatron's.
Megatron-LM (1dcf0daf, the one slime 624b824 uses) defines its flags two ways, and both are read here:

* ``add_argument`` calls of ``megatron/training/arguments.py`` (and of the ``add_*args`` modules it imports and
  calls, as :mod:`.source` follows them): read by :func:`.default_facts.parse_defaults`, the reader slime's own
  defaults go through;
* ``ArgumentGroupFactory(SomeConfig, exclude=[...])`` (megatron/training/argument_utils.py): each dataclass field
  is a flag whose default is the field's (``= value``, ``field(default=...)``, ``field(default_factory=list)``),
  unless ``metadata={"argparse_meta": {"default": ...}}`` overrides it (argument_utils.py
  ``_build_argparse_kwargs_from_field``: the metadata wins); a bool field is ``store_true`` when its default is
  False, else ``store_false`` under ``--no-x`` / ``--disable-x``; an Enum default ``AttnBackend.auto`` is what
  ``--attention-backend auto`` gives (``enum_type_handler``: ``config_type[cli_arg]``). The fields and flag names
  are found by :class:`.scan.Reader`, as :mod:`.source` finds the accepted flags.

A default that is not a literal is recorded as its source text under ``"expression"`` (never guessed).

``python -m acrl.compiler._slime.megatron_defaults MEGATRON_DIR [--commit REV] -o DIR`` writes
``DIR/megatron_defaults.json`` (a work tree, or with ``--commit`` a git directory read at that commit).
Never imported by the compile path; tests/data/megatron/README.md says how the project's copy is made.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .default_facts import parse_defaults
from .model_facts import FactsError, _git, _git_dir, facts_main
from .scan import Reader
from .scan_fields import dict_get

MEGATRON_URL = "https://github.com/NVIDIA/Megatron-LM"
ENTRY = "megatron/training/arguments.py"
GENERATOR = "python -m acrl.compiler._slime.megatron_defaults"
_MISSING = object()
_KINDS = frozenset({"int", "float", "str", "bool"})


def _literal(node: ast.expr | None) -> Any:
    if node is None:
        return _MISSING
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _MISSING


def _kind(annotation: ast.expr) -> str | None:
    """int / float / str / bool of an annotation as ``_extract_type`` reads it (Optional[X], list[X], Literal[...]),
    else None (an Enum or anything else)."""
    if isinstance(annotation, ast.Name):
        return annotation.id if annotation.id in _KINDS else None
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            return _kind(ast.parse(annotation.value, mode="eval").body)
        except SyntaxError:
            return None
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):  # X | None
        sides = [s for s in (annotation.left, annotation.right)
                 if not (isinstance(s, ast.Constant) and s.value is None)]
        return _kind(sides[0]) if len(sides) == 1 else None
    if isinstance(annotation, ast.Subscript):
        outer = ast.unparse(annotation.value).rsplit(".", 1)[-1]
        inner = annotation.slice
        if outer in ("Optional", "list", "List"):
            return _kind(inner)
        if outer == "Literal":
            values = [e.value for e in (inner.elts if isinstance(inner, ast.Tuple) else [inner])
                      if isinstance(e, ast.Constant)]
            kinds = {type(v).__name__ for v in values}
            return kinds.pop() if len(kinds) == 1 and next(iter(kinds)) in _KINDS else None
    return None


def field_fact(stmt: ast.AnnAssign) -> dict[str, Any]:
    """What ``ArgumentGroupFactory`` gives one dataclass field: {"default" | "expression", "action"?, "type"?}."""
    value = stmt.value
    default: Any = _literal(value)
    meta: ast.expr | None = None
    if isinstance(value, ast.Call) and ast.unparse(value.func).rsplit(".", 1)[-1] == "field":
        keywords = {k.arg: k.value for k in value.keywords if k.arg}
        default = _literal(keywords.get("default"))
        factory = keywords.get("default_factory")
        if isinstance(factory, ast.Name) and factory.id in ("list", "dict", "tuple", "set"):
            default = {"list": [], "dict": {}, "tuple": (), "set": []}[factory.id]
        elif "default" not in keywords:
            value = factory
        meta = dict_get(keywords.get("metadata"), "argparse_meta")
    kind = _kind(stmt.annotation)
    if default is _MISSING and isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
            and isinstance(stmt.annotation, ast.Name) and value.value.id == stmt.annotation.id:
        default, kind = value.attr, "str"  # an Enum member: the flag takes its name
    fact: dict[str, Any] = {}
    if kind == "bool":
        fact["action"] = "store_true" if default is False else "store_false"
    elif kind is not None:
        fact["type"] = kind
    if meta is not None and isinstance(meta, ast.Dict):
        for key, node in zip(meta.keys, meta.values, strict=True):
            name = key.value if isinstance(key, ast.Constant) else None
            if name == "default":
                default = _literal(node)
                value = node
            elif name == "action" and isinstance(_literal(node), str):
                fact["action"] = _literal(node)
            elif name == "type" and isinstance(node, ast.Name):
                fact["type"] = node.id
    if default is _MISSING:
        fact["expression"] = ast.unparse(value) if value is not None else "(no default)"
    else:
        fact["default"] = list(default) if isinstance(default, tuple) else default
    return fact


class _DefaultsReader(Reader):
    """:class:`.scan.Reader`, recording each factory-made flag's fact as it names the flags."""

    def __init__(self, roots: tuple[Path, ...]) -> None:
        super().__init__(roots)
        self.facts: dict[str, dict[str, Any]] = {}

    def field_flags(self, stmt: ast.AnnAssign, where: str) -> set[str]:
        names = super().field_flags(stmt, where)
        fact = {"where": where.split(": ", 1)[1] if ": " in where else where, **field_fact(stmt)}
        for name in sorted(names):
            self.facts.setdefault(name, fact)
        return names


def megatron_defaults(megatron_dir: Path | str) -> dict[str, dict[str, Any]]:
    """Megatron-LM's flag defaults of the tree ``megatron_dir``: {flag: {"default" | "expression", "via", ...}},
    sorted by flag. Raises FactsError when megatron/training/arguments.py is not there."""
    root = Path(megatron_dir)
    entry = root / ENTRY
    if not entry.is_file():
        raise FactsError(f"{root}: no {ENTRY} (a Megatron-LM checkout)")
    reader = _DefaultsReader((root,))
    reader.scan(entry, follow=True)
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(reader.scanned):
        relative = path.relative_to(root).as_posix()
        try:
            facts = parse_defaults(path.read_text(encoding="utf-8"))
        except SyntaxError as exc:
            raise FactsError(f"{relative}: cannot be parsed ({exc.msg}, line {exc.lineno})") from None
        for flag, fact in facts.items():
            out.setdefault(flag, {"via": f"{relative}:{fact.pop('line')}", **fact})
            for alias in fact.get("aliases", ()):
                if alias.startswith("--"):
                    out.setdefault(alias, out[flag])
    for flag, fact in reader.facts.items():
        out.setdefault(flag, {"via": f"ArgumentGroupFactory {fact['where']}",
                              **{k: v for k, v in fact.items() if k != "where"}})
    return dict(sorted(out.items()))


def generate(megatron_dir: Path, rev: str | None, out_dir: Path, argv: Sequence[str]) -> Path:
    """Write ``megatron_defaults.json``; with ``rev``, ``megatron_dir`` is a git directory read at that commit."""
    provenance: dict[str, Any] = {"repository": MEGATRON_URL}
    with tempfile.TemporaryDirectory(prefix="acrl-megatron-") as tmp:
        tree = megatron_dir
        if rev is not None:
            git_dir = _git_dir(megatron_dir)
            commit = _git(git_dir, "rev-parse", "--verify", f"{rev}^{{commit}}").decode().strip()
            archive = _git(git_dir, "archive", commit, "megatron")
            subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
            tree = Path(tmp)
            provenance.update(commit=commit, commit_date=_git(git_dir, "show", "-s", "--format=%cI", commit)
                              .decode().strip())
        provenance.update(generator=" ".join([GENERATOR, *argv]),
                          read=f"{ENTRY} (and the add_*args modules it calls): add_argument calls, and the "
                               "dataclass fields of its ArgumentGroupFactory calls")
        flags = megatron_defaults(tree)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "megatron_defaults.json"
    path.write_text(json.dumps({"provenance": provenance, "flags": flags}, indent=1, ensure_ascii=False) + "\n",
                    encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    return facts_main(argv, prog=GENERATOR, doc=__doc__, checkout="MEGATRON_DIR",
                      checkout_help="a Megatron-LM work tree, or with --commit a git directory",
                      commit_help="read this commit of the git directory MEGATRON_DIR",
                      out_help="directory to write megatron_defaults.json", generate=generate)


if __name__ == "__main__":
    sys.exit(main())
