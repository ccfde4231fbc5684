"""The dataclass fields of a class body, read from its text for :class:`.scan.Reader` (``ArgumentGroupFactory``).

A field that ``ast`` cannot read is kept as :class:`Unreadable`, under its name (the text before its ``:``), so
that what it hides is known: the option strings the factory would make of that name, unless its text carries
``metadata``, whose ``argparse_meta`` ``arg_names`` can name the flag anything (Megatron-LM 1dcf0daf
megatron/training/argument_utils.py:136-188, ``_build_argparse_kwargs_from_field``: ``--x``, or ``--no-x`` and
``--disable-x`` for a bool that defaults to True; the metadata wins).
"""

from __future__ import annotations

import ast
import keyword
from collections.abc import Callable

import attrs

from .scan_patterns import LINES

__all__ = ["Unreadable", "dict_get", "option_names", "own_fields"]


@attrs.frozen
class Unreadable:
    """A field whose statement ``ast`` cannot read: why (file:line), and whether its text has metadata."""

    why: str
    metadata: bool


def option_names(field: str) -> frozenset[str]:
    """Every option string ``ArgumentGroupFactory`` can make of the field ``field`` without metadata: ``--x``,
    and for a bool defaulting to True ``--no-x`` and ``--disable-x``."""
    flag = field.replace("_", "-")
    return frozenset({f"--{flag}", f"--no-{flag}", f"--disable-{flag}"})


def dict_get(node: ast.expr | None, key: str) -> ast.expr | None:
    """The value under a string key of a dict display, else None."""
    if isinstance(node, ast.Dict):
        for k, v in zip(node.keys, node.values, strict=True):
            if isinstance(k, ast.Constant) and k.value == key:
                return v
    return None


def own_fields(text: str, body_start: int, where: Callable[[int], str]) -> dict[str, ast.AnnAssign | Unreadable]:
    """The annotated assignments a class body declares itself; the ones ``ast`` cannot read as :class:`Unreadable`.

    The statements at the body's indentation split it; only the ``name: ...`` ones (each with the
    docstring after it) are parsed, so methods, however long, are skipped.
    """
    indent: str | None = None
    start: tuple[int, str] | None = None
    segments: list[tuple[int, int, str]] = []
    for m in LINES.finditer(text, body_start):
        if m["ind"] is None:
            continue
        indent = m["ind"] if indent is None else indent
        if len(m["ind"]) > len(indent):
            continue
        if start is not None:
            segments.append((start[0], m.start() + 1, start[1]))
            start = None
        if not indent or len(m["ind"]) < len(indent):
            break
        if m["field"] and not keyword.iskeyword(m["field"]):
            start = (m.start() + 1, m["field"])
    if start is not None:
        segments.append((start[0], len(text), start[1]))
    fields: dict[str, ast.AnnAssign | Unreadable] = {}
    try:
        trees = [ast.parse("class _C:\n" + "".join(text[a:b] for a, b, _ in segments))]
    except SyntaxError:
        trees = []
        for a, b, name in segments:
            try:
                trees.append(ast.parse("class _C:\n" + text[a:b]))
            except SyntaxError:
                fields[name] = Unreadable(f"{where(a)}: cannot read this dataclass field", "metadata" in text[a:b])
    for tree in trees:
        for stmt in tree.body[0].body if isinstance(tree.body[0], ast.ClassDef) else ():
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                fields[stmt.target.id] = stmt
    return fields
