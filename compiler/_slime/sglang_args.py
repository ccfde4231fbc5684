"""Read, with ``ast``, which command-line arguments sglang's ``ServerArgs`` defines and how slime prefixes them.

sglang is never imported. Two shapes of ``python/sglang/srt/server_args.py`` are read:

* every ``parser.add_argument(...)`` call of ``ServerArgs.add_cli_args`` (sglang 0.5.13: 406 of them);
* the fields ``add_cli_args_from_dataclass(parser, ServerArgs)`` turns into flags (sglang 0.5.15.post1:
  ``name: A[T, "help"]`` or ``A[T, Arg(...)]``), as sglang/srt/arg_groups/arg_utils.py does it: ``cli_name`` else
  ``--field-name``, then ``aliases``; ``dest`` only where the field name differs from the flag's; fields without
  ``A[...]`` or with ``no_cli=True`` give no flag; bools are ``store_true``, lists ``nargs="+"``, ``Literal``
  gives the choices.

Each argument keeps its option strings, ``dest`` where given, ``nargs``/``type``/``choices``/``action`` where
literal (``type`` and ``action`` as source text), and its deprecation: the ``new_flag`` of the ``Deprecated*Action``
classes (sglang/srt/arg_groups/argparse_actions.py), or the ``help`` of a ``DeprecatedAction`` (no replacement).

slime's side (slime/backends/sglang_utils/arguments.py, ``add_sglang_arguments``): ``skipped_args`` (arguments
slime sets itself and drops) and the ``--sglang-*`` flags slime adds on its own (``--sglang-router-ip``,
``--sglang-server-concurrency``, ``--sglang-config``...). How slime prefixes the rest is
:func:`slime_options` (the wrapper ``new_add_argument_wrapper``, lines 61-118 at 624b824).
"""

from __future__ import annotations

import ast
from typing import Any

__all__ = ["SlimeSglangError", "read_server_args", "read_slime_side", "skip_name", "slime_options"]

DEPRECATED_ACTIONS = ("DeprecatedAction", "DeprecatedAliasStoreAction", "DeprecatedStoreTrueAction",
                      "DeprecatedStoreConstAction")
_ANNOTATED = ("A", "Annotated", "typing.Annotated")
_NOT_FIELDS = ("ClassVar", "typing.ClassVar", "InitVar", "dataclasses.InitVar")


class SlimeSglangError(Exception):
    """The source is not in a shape this reader knows; the message names the file and what is missing."""


def _literal(node: ast.AST | None) -> tuple[bool, Any]:
    try:
        return True, ast.literal_eval(node) if node is not None else None
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _str(node: ast.AST | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _is_help_text(node: ast.AST) -> bool:
    """A bare string in ``A[T, ...]`` (constant, f-string or a concatenation of them): the help text."""
    if isinstance(node, ast.Constant | ast.JoinedStr):
        return isinstance(node, ast.JoinedStr) or isinstance(node.value, str)
    return isinstance(node, ast.BinOp) and _is_help_text(node.left) and _is_help_text(node.right)


def _server_args(tree: ast.Module, shown: str) -> ast.ClassDef:
    classes = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ServerArgs"]
    if len(classes) != 1:
        raise SlimeSglangError(f"{shown}: expected one class ServerArgs, found {len(classes)}")
    return classes[0]


def _fields(cls: ast.ClassDef) -> dict[str, ast.AnnAssign]:
    """The dataclass fields in declaration order (a field annotated twice keeps its first place, its last
    annotation, as a class's ``__annotations__`` does); ClassVar and InitVar are not fields."""
    out: dict[str, ast.AnnAssign] = {}
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            head = node.annotation.value if isinstance(node.annotation, ast.Subscript) else node.annotation
            if ast.unparse(head) not in _NOT_FIELDS:
                out[node.target.id] = node
    return out


def _keywords(call: ast.Call) -> dict[str, ast.expr]:
    return {k.arg: k.value for k in call.keywords if k.arg is not None}


def _put(entry: dict[str, Any], name: str, node: ast.AST | None, *, source: bool = False) -> None:
    """``entry[name]``: the literal value of ``node``, or (``source``) its source text where it is not literal."""
    if node is None:
        return
    ok, value = _literal(node)
    if ok:
        entry[name] = value
    elif source:
        entry[name] = ast.unparse(node)


def _deprecation(entry: dict[str, Any], kwargs: dict[str, ast.expr]) -> None:
    action = entry.get("action")
    if action not in DEPRECATED_ACTIONS:
        return
    new_flag = _str(kwargs.get("new_flag"))
    if new_flag is not None:
        entry["deprecated"] = {"new_flag": new_flag}
    else:
        ok, text = _literal(kwargs.get("help"))
        entry["deprecated"] = {"help": text if ok and isinstance(text, str) else ""}


def _from_add_argument(call: ast.Call, shown: str) -> dict[str, Any]:
    options = [_str(a) for a in call.args]
    if not options or any(o is None for o in options):
        raise SlimeSglangError(f"{shown}:{call.lineno}: an add_argument whose option strings are not all string "
                               "literals")
    kwargs = _keywords(call)
    if any(k.arg is None for k in call.keywords):
        raise SlimeSglangError(f"{shown}:{call.lineno}: an add_argument with **kwargs")
    entry: dict[str, Any] = {"options": options, "line": call.lineno, "via": "add_argument"}
    _put(entry, "dest", kwargs.get("dest"))
    _put(entry, "action", kwargs.get("action"), source=True)
    _put(entry, "nargs", kwargs.get("nargs"))
    _put(entry, "type", kwargs.get("type"), source=True)
    if "choices" in kwargs and _literal(kwargs["choices"])[0]:
        _put(entry, "choices", kwargs["choices"])
    _deprecation(entry, kwargs)
    return entry


def _unwrap_optional(node: ast.expr) -> ast.expr:
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("Optional", "typing.Optional"):
        return node.slice
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        for side, other in ((node.left, node.right), (node.right, node.left)):
            if isinstance(other, ast.Constant) and other.value is None:
                return side
    if isinstance(node, ast.Subscript) and ast.unparse(node.value) in ("Union", "typing.Union") and \
            isinstance(node.slice, ast.Tuple):
        rest = [e for e in node.slice.elts if not (isinstance(e, ast.Constant) and e.value is None)]
        if len(rest) == 1:
            return rest[0]
    return node


def _type_name(node: ast.expr) -> str:
    """argparse's ``type=`` for an annotation, as arg_utils._infer_type_func maps it (str unless int or float)."""
    name = ast.unparse(node)
    return name if name in ("int", "float", "str") else "str"


def _from_field(name: str, node: ast.AnnAssign) -> dict[str, Any] | None:
    """The argument ``add_cli_args_from_dataclass`` makes of one field, or None (no ``A[...]`` metadata,
    ``no_cli``)."""
    ann = node.annotation
    if not (isinstance(ann, ast.Subscript) and ast.unparse(ann.value) in _ANNOTATED and
            isinstance(ann.slice, ast.Tuple) and ann.slice.elts):
        return None
    raw, *metadata = ann.slice.elts
    meta: dict[str, ast.expr] | None = None
    for item in metadata:  # the first Arg(...) or bare string wins (arg_utils._unwrap_annotated)
        if isinstance(item, ast.Call) and ast.unparse(item.func) in ("Arg", "arg_utils.Arg"):
            meta = _keywords(item)
            break
        if _is_help_text(item):
            meta = {}
            break
    if meta is None or _literal(meta.get("no_cli"))[1] is True:
        return None
    cli_name = _str(meta.get("cli_name")) or "--" + name.replace("_", "-")
    aliases = _literal(meta.get("aliases"))[1]
    entry: dict[str, Any] = {"options": [cli_name, *(aliases or [])], "line": node.lineno, "via": "field"}
    if cli_name.lstrip("-").replace("-", "_") != name:
        entry["dest"] = name
    inner = _unwrap_optional(raw)
    if "action" in meta:
        _put(entry, "action", meta["action"], source=True)
        _deprecation(entry, meta)
        if "action_kwargs" in meta and isinstance(meta["action_kwargs"], ast.Dict):
            extra = {_str(k): v for k, v in zip(meta["action_kwargs"].keys, meta["action_kwargs"].values, strict=True)}
            _put(entry, "nargs", extra.get("nargs"))
            _put(entry, "type", extra.get("type"), source=True)
        return entry
    sub = inner if isinstance(inner, ast.Subscript) else None
    head = ast.unparse(sub.value) if sub is not None else ""
    if sub is not None and head in ("Literal", "typing.Literal"):
        values = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
        if "choices" not in meta:
            entry["choices"] = [_literal(v)[1] for v in values]
        elif _literal(meta["choices"])[0]:
            _put(entry, "choices", meta["choices"])
        entry["type"] = _put_type(meta) or type(_literal(values[0])[1]).__name__
    elif sub is not None and head in ("List", "list", "typing.List") and "type_parser" not in meta:
        entry["nargs"] = _literal(meta["nargs"])[1] if "nargs" in meta else "+"
        entry["type"] = _type_name(sub.slice)
        if "choices" in meta and _literal(meta["choices"])[0]:
            _put(entry, "choices", meta["choices"])
    elif ast.unparse(inner) == "bool":
        entry["action"] = "store_true"
    else:
        entry["type"] = _put_type(meta) or _type_name(inner)
        if "choices" in meta and _literal(meta["choices"])[0]:
            _put(entry, "choices", meta["choices"])
        _put(entry, "nargs", meta.get("nargs"))
    return entry


def _put_type(meta: dict[str, ast.expr]) -> str | None:
    return ast.unparse(meta["type_parser"]) if "type_parser" in meta else None


def read_server_args(source: str, shown: str = "sglang/srt/server_args.py") -> tuple[list[str], list[dict[str, Any]]]:
    """(the ServerArgs dataclass's field names in order, every argument ``ServerArgs.add_cli_args`` registers in
    order). Raises SlimeSglangError where the file is not in a shape read here."""
    try:
        tree = ast.parse(source, filename=shown)
    except SyntaxError as exc:
        raise SlimeSglangError(f"{shown}: not Python ({exc.msg}, line {exc.lineno})") from None
    cls = _server_args(tree, shown)
    fields = _fields(cls)
    adders = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "add_cli_args"]
    if len(adders) != 1:
        raise SlimeSglangError(f"{shown}: expected one ServerArgs.add_cli_args, found {len(adders)}")
    calls = sorted((n for n in ast.walk(adders[0]) if isinstance(n, ast.Call)), key=lambda c: (c.lineno, c.col_offset))
    arguments: list[dict[str, Any]] = []
    for call in calls:
        callee = ast.unparse(call.func)
        if callee.endswith("add_cli_args_from_dataclass"):
            if len(call.args) < 2 or ast.unparse(call.args[1]) != "ServerArgs" or call.keywords:
                raise SlimeSglangError(f"{shown}:{call.lineno}: add_cli_args_from_dataclass of something other than "
                                       "all of ServerArgs")
            arguments += [e for name, node in fields.items() if (e := _from_field(name, node)) is not None]
        elif callee == "parser.add_argument":
            arguments.append(_from_add_argument(call, shown))
        elif callee.startswith("parser."):
            raise SlimeSglangError(f"{shown}:{call.lineno}: {callee} is not read (argument groups are not wrapped "
                                   "by slime's prefixing)")
    return list(fields), arguments


def skip_name(argument: dict[str, Any]) -> str | None:
    """The name slime's wrapper checks against ``skipped_args``: ``dest`` when given, else the first ``--`` option
    with '-' as '_' (arguments.py:72-84 at 624b824)."""
    if "dest" in argument:
        return str(argument["dest"])
    return next((o[2:].replace("-", "_") for o in argument["options"] if o.startswith("--")), None)


def slime_options(argument: dict[str, Any], skipped: frozenset[str] | set[str]) -> list[str]:
    """The option strings slime registers for one sglang argument: none when skipped, else each ``-x``/``--x`` as
    ``--sglang-x`` (arguments.py:86-99 at 624b824); ``BooleanOptionalAction`` also makes ``--no-sglang-x``."""
    if skip_name(argument) in skipped:
        return []
    out = ["--sglang-" + o.lstrip("-") for o in argument["options"] if o.startswith("-")]
    if str(argument.get("action", "")).endswith("BooleanOptionalAction"):
        out += ["--no-" + o[2:] for o in out]
    return out


def read_slime_side(source: str, shown: str = "slime/backends/sglang_utils/arguments.py"
                    ) -> tuple[list[str], dict[str, int]]:
    """(``skipped_args`` of ``add_sglang_arguments``, slime's own ``--sglang-*`` flags of it and of
    ``add_sglang_router_arguments`` with their lines)."""
    tree = ast.parse(source, filename=shown)
    funcs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if "add_sglang_arguments" not in funcs:
        raise SlimeSglangError(f"{shown}: no add_sglang_arguments function")
    skipped: list[str] | None = None
    for node in ast.walk(funcs["add_sglang_arguments"]):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "skipped_args"
                                                for t in node.targets):
            ok, value = _literal(node.value)
            if ok and isinstance(value, list) and all(isinstance(v, str) for v in value):
                skipped = value
    if skipped is None:
        raise SlimeSglangError(f"{shown}: add_sglang_arguments has no literal skipped_args list")
    own: dict[str, int] = {}
    for name in ("add_sglang_router_arguments", "add_sglang_arguments"):
        for node in ast.walk(funcs.get(name, ast.Module(body=[], type_ignores=[]))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "parser.add_argument":
                for arg in node.args:
                    flag = _str(arg)
                    if flag is not None and flag.startswith("--sglang-"):
                        own[flag] = node.lineno
    return skipped, dict(sorted(own.items()))
