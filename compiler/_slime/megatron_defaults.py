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
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .default_facts import parse_defaults
from .model_facts import FactsError, _git, _git_dir, facts_main
from .scan import Reader, _Source
from .scan_fields import Unreadable, dict_get

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


def _extracted(annotation: ast.expr) -> dict[str, Any]:
    """What ``_extract_type`` (Megatron 1dcf0daf megatron/training/argument_utils.py:90-127) makes of an annotation:
    ``{"type": int / float / str / bool}`` (else no "type": an Enum, read by the reader, or anything else), with
    ``"nargs": "+"`` for ``list[X]`` and ``"choices"`` for ``Literal[...]``; ``Optional[X]`` and ``X | None`` are
    X's."""
    if isinstance(annotation, ast.Name):
        return {"type": annotation.id} if annotation.id in _KINDS else {}
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            return _extracted(ast.parse(annotation.value, mode="eval").body)
        except SyntaxError:
            return {}
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):  # X | None
        sides = [s for s in (annotation.left, annotation.right)
                 if not (isinstance(s, ast.Constant) and s.value is None)]
        return _extracted(sides[0]) if len(sides) == 1 else {}
    if isinstance(annotation, ast.Subscript):
        outer = ast.unparse(annotation.value).rsplit(".", 1)[-1]
        inner = annotation.slice
        if outer == "Optional":
            return _extracted(inner)
        if outer in ("list", "List"):
            found = _extracted(inner)
            return {**found, "nargs": "+"} if found else {}
        if outer == "Literal":
            values = [e.value for e in (inner.elts if isinstance(inner, ast.Tuple) else [inner])
                      if isinstance(e, ast.Constant)]
            kinds = {type(v).__name__ for v in values}
            if len(kinds) == 1 and next(iter(kinds)) in _KINDS:
                return {"type": kinds.pop(), "choices": values}
    return {}


def _kind(annotation: ast.expr) -> str | None:
    """int / float / str / bool of an annotation as ``_extract_type`` reads it (Optional[X], list[X], Literal[...]),
    else None (an Enum or anything else)."""
    kind = _extracted(annotation).get("type")
    return kind if isinstance(kind, str) else None


def _enum_name(annotation: ast.expr) -> str | None:
    """The class name of an annotation that may be an Enum (``X``, ``Optional[X]``, ``X | None``), else None."""
    if isinstance(annotation, ast.Name):
        return None if annotation.id in _KINDS else annotation.id
    if isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value).rsplit(".", 1)[-1] == "Optional":
        return _enum_name(annotation.slice)
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [s for s in (annotation.left, annotation.right)
                 if not (isinstance(s, ast.Constant) and s.value is None)]
        return _enum_name(sides[0]) if len(sides) == 1 else None
    return None


def field_fact(stmt: ast.AnnAssign) -> dict[str, Any]:
    """What ``ArgumentGroupFactory`` gives one dataclass field: {"default" | "expression", "action"?, "type"?,
    "nargs"?, "choices"?}; ``argparse_meta``'s keys win (argument_utils.py:175-177)."""
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
    shape = _extracted(stmt.annotation)
    if default is _MISSING and isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
            and isinstance(stmt.annotation, ast.Name) and value.value.id == stmt.annotation.id:
        default, shape = value.attr, {"type": "str"}  # an Enum member: the flag takes its name
    fact: dict[str, Any] = {}
    if shape.get("type") == "bool" and "nargs" not in shape:
        fact["action"] = "store_true" if default is False else "store_false"
    else:
        fact.update(shape)
    if meta is not None and isinstance(meta, ast.Dict):
        for key, node in zip(meta.keys, meta.values, strict=True):
            name = key.value if isinstance(key, ast.Constant) else None
            if name == "default":
                default = _literal(node)
                value = node
            elif name == "action" and isinstance(_literal(node), str):
                fact["action"] = _literal(node)
            elif name == "type":
                fact["type"] = node.id if isinstance(node, ast.Name) else ast.unparse(node)
            elif name in ("nargs", "choices"):
                literal = _literal(node)
                fact[name] = ast.unparse(node) if literal is _MISSING else \
                    list(literal) if isinstance(literal, tuple) else literal
    if default is _MISSING:
        fact["expression"] = ast.unparse(value) if value is not None else "(no default)"
    else:
        fact["default"] = list(default) if isinstance(default, tuple) else default
    return fact


class _DefaultsReader(Reader):
    """:class:`.scan.Reader`, recording each factory-made flag's fact as it names the flags: with the file and line
    of its field and, for an Enum field, the member names it takes (``enum_type_handler``: ``config_type[cli_arg]``,
    ``choices=list(config_type)``)."""

    def __init__(self, roots: tuple[Path, ...]) -> None:
        super().__init__(roots)
        self.facts: dict[str, dict[str, Any]] = {}
        self._origin: dict[int, tuple[_Source, int]] = {}  # id(field statement) -> the class that declares it

    def fields(self, source: _Source, pos: int,
               seen: set[tuple[Path, int]]) -> dict[str, ast.AnnAssign | Unreadable]:
        found = super().fields(source, pos, seen)
        for stmt in found.values():  # the bases' fields were recorded by the calls for the bases
            self._origin.setdefault(id(stmt), (source, pos))
        return found

    def field_flags(self, stmt: ast.AnnAssign, where: str) -> set[str]:
        names = super().field_flags(stmt, where)
        fact = {"where": where.split(": ", 1)[1] if ": " in where else where, **field_fact(stmt)}
        origin = self._origin.get(id(stmt))
        if origin is not None and isinstance(stmt.target, ast.Name):
            source, pos = origin
            found = re.compile(rf"^[ \t]+{stmt.target.id}[ \t]*:", re.M).search(source.text, pos)
            line = source.text.count("\n", 0, found.start() if found else pos) + 1
            root = next((r for r in self.roots if source.path.is_relative_to(r)), source.path.parent)
            fact["at"] = f"{source.path.relative_to(root).as_posix()}:{line}"
            enum = _enum_name(stmt.annotation)
            members = self.enum_members(source, enum) if enum and "choices" not in fact else None
            if members is not None:
                fact.update(type="str", choices=members)
        if "type" not in fact and "action" not in fact:  # neither a kind nor an Enum read: the annotation, not guessed
            fact["type"] = ast.unparse(stmt.annotation)
        fact["names"] = sorted(names)
        for name in sorted(names):
            self.facts.setdefault(name, fact)
        return names

    def enum_members(self, source: _Source, name: str) -> list[str] | None:
        """The member names of ``class name(...Enum)`` found from ``source``'s imports, else None."""
        found = self.find_class(source, name)
        if found is None:
            return None
        try:
            tree = ast.parse(found[0].text)
        except SyntaxError:
            return None
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and node.name == name:
                if not any(ast.unparse(b).rsplit(".", 1)[-1].endswith("Enum") for b in node.bases):
                    return None
                return [t.id for stmt in node.body if isinstance(stmt, ast.Assign) for t in stmt.targets
                        if isinstance(t, ast.Name) and not t.id.startswith("_")]
        return None


def megatron_defaults(megatron_dir: Path | str, *, detail: bool = False) -> dict[str, dict[str, Any]]:
    """Megatron-LM's flag defaults of the tree ``megatron_dir``: {flag: {"default" | "expression", "via", ...}},
    sorted by flag; with ``detail``, a factory-made flag's fact also says where its field is (``"at"``: file:line)
    and all the option strings the factory gives it (``"names"``). Raises FactsError when
    megatron/training/arguments.py is not there."""
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
    hidden = {"where"} if detail else {"where", "at", "names"}
    for flag, fact in reader.facts.items():
        out.setdefault(flag, {"via": f"ArgumentGroupFactory {fact['where']}",
                              **{k: v for k, v in fact.items() if k not in hidden}})
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
