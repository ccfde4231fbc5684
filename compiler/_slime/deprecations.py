"""Which flags slime's and Megatron-LM's code marks deprecated, read with ``ast`` from their source (generator only).

Three marks, as Megatron-LM 1dcf0daf megatron/training/arguments.py writes them:

* an ``add_argument`` whose help says so: ``--use-rotary-position-embeddings`` "Deprecated: use
  --position-embedding-type" (:1675-1677), ``--no-weight-decay-cond-type`` "DEPRECATED. Please use
  --apply-wd-to-qk-layernorm instead." (:1882-1887), slime fa3c990's ``--update-weight-delta-dir`` "Deprecated
  alias for --update-weight-disk-dir" (slime/utils/arguments.py:189-196);
* an ``add_argument`` whose ``dest`` says so (``dest='use_dist_ckpt_deprecated'``, :2196-2198);
* a message of the validation naming the flag: "--enable-cuda-graph is deprecated, use --cuda-graph-impl=local
  instead." (:444), "--use-slime-router is deprecated and ignored." (slime v0.3.0 slime/utils/arguments.py:1666),
  and "--batch-size argument is no longer valid, use --micro-batch-size instead" (:414-415, an ``assert``: such a
  flag is recorded as ``"refused"``, the launch stops on it).

Each is ``{"text", "at", "use"?, "refused"?}``: the sentence that says it and the next one (where the replacement is
usually named), the file:line, the flag the text says to use or see instead (with its ``=value`` when it gives one),
never guessed: a text naming no flag has no ``"use"``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from typing import Any

from .default_facts import _called

_MARK = re.compile(r"deprecat\w*|no longer valid", re.I)
_SENTENCE_END = re.compile(r"\.(?=\s|[A-Z]|$)")
_USE = re.compile(r"\b(?:use|see|alias for)\s+`?(--[A-Za-z0-9][\w-]*(?:=[\w-]+)?)", re.I)
# "--flag is deprecated", "--flag flag is deprecated", "WARNING: --flag argument is no longer valid"
_MESSAGE = re.compile(r"^\W*(?:WARNING:\s*)?(--[A-Za-z0-9][\w-]*)\s+(?:\w+\s+)?(?:is|are)\s+(?:deprecated|no longer "
                      r"valid)", re.I)
_TEXT_LIMIT = 240


def _text(node: ast.expr | None) -> str | None:
    """The value of a string expression: a literal (adjacent literals are one), ``"a" + "b"``, or the literal parts
    of an f-string; else None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _text(node.left), _text(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) if isinstance(v, ast.Constant) else "{}" for v in node.values)
    return None


def mark(text: str) -> dict[str, Any] | None:
    """``{"text", "use"?, "refused"?}`` of a text that marks a flag deprecated (or no longer valid), else None."""
    found = _MARK.search(text)
    if found is None:
        return None
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    start = max((e for e in ends if e <= found.start()), default=0)
    after = [e for e in ends if e > found.start()]
    end = after[1] if len(after) > 1 else len(text)
    window = " ".join(text[start:end].split())
    out: dict[str, Any] = {"text": window if len(window) <= _TEXT_LIMIT else window[:_TEXT_LIMIT - 1] + "…"}
    use = _USE.search(text, found.start(), end)
    if use is not None:
        out["use"] = use.group(1)
    if found.group().lower() == "no longer valid":
        out["refused"] = True
    return out


def read_deprecations(files: Iterable[tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """{flag: mark} of the ``(relative path, source text)`` files, in their order: a mark of an ``add_argument``'s
    help or dest, then the validation's messages; of several, the first that names a replacement wins, and any
    "no longer valid" makes it ``"refused"``."""
    found: dict[str, list[dict[str, Any]]] = {}
    for path, source in files:
        tree = ast.parse(source)
        in_calls: set[int] = set()
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and _called(node) == "add_argument"):
                continue
            names = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)
                     and a.value.startswith("--")]
            keywords = {k.arg: k.value for k in node.keywords if k.arg is not None}
            help_text, dest = _text(keywords.get("help")), _text(keywords.get("dest"))
            if "help" in keywords:  # not read again as a message below
                in_calls.update(id(n) for n in ast.walk(keywords["help"]))
            marked = mark(help_text) if help_text else None
            if marked is None and dest and "deprecated" in dest.lower():
                marked = {"text": f"dest={dest!r}"}
            if names and marked is not None:
                found.setdefault(names[0], []).append({**marked, "at": f"{path}:{node.lineno}"})
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant | ast.JoinedStr) or id(node) in in_calls:
                continue
            text = _text(node)
            message = _MESSAGE.match(text) if text else None
            if text and message is not None and (marked := mark(text)) is not None:
                found.setdefault(message.group(1), []).append({**marked, "at": f"{path}:{node.lineno}"})
    out: dict[str, dict[str, Any]] = {}
    for flag, marks in found.items():
        chosen = dict(next((m for m in marks if "use" in m), marks[0]))
        if any(m.get("refused") for m in marks):
            chosen["refused"] = True
        out[flag] = {k: chosen[k] for k in ("text", "at", "use", "refused") if k in chosen}
    return dict(sorted(out.items()))
