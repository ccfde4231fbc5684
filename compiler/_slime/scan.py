"""The scanner behind ``source``: the flags a slime or Megatron-LM source file defines, read from its text.

Whole files are not given to ``ast.parse``: on a 100k-character file it costs ~30 ms, and
Megatron's ``arguments.py`` alone is over 200k. A regex scanner that skips strings and comments
finds the call sites and class bodies instead, and ``ast`` reads only the small pieces (literals,
factory calls, dataclass fields). Being textual, the scan never fails on syntax the running Python
does not know (e.g. 3.12 f-strings); a piece ``ast`` cannot read is reported as a gap.

A gap is scoped to the flags it could hide where those are known: a dataclass field that cannot be read hides
only the option strings the factory would make of its name (:func:`.scan_fields.option_names`), unless its text
has metadata. Every other gap could hide any flag: a file that cannot be read or a module that is not found (any
``add_argument``), a factory call or dataclass that cannot be read or found, a base class that cannot be found
(the fields it adds could have any name), and flag names in metadata that are not literals (``arg_names`` can be
anything).
"""

from __future__ import annotations

import ast
import hashlib
import re
import warnings
from pathlib import Path

import attrs

from .._pipeline.bundle import read_input
from .scan_fields import Unreadable, dict_get, option_names, own_fields
from .scan_patterns import ADD_ARGS_FUNC, BOOL_ACTION, BRACKETS, CALLS, CLASS, IMPORT, PIECE, POSITIONAL

_PLAIN_BASES = frozenset({"object", "ABC", "Generic", "Protocol"})
_BOOL_TYPES = frozenset(
    {"bool", "Optional[bool]", "typing.Optional[bool]", "bool|None", "None|bool", "Union[bool,None]"}
)
_MISSING = object()
SOURCE_LIMIT = 16 << 20  # of one slime or Megatron source file read for its flags (arguments.py: ~100 KiB)


def _at_line_start(text: str, pos: int) -> bool:
    return not text[text.rfind("\n", 0, pos) + 1 : pos].strip()


@attrs.define(eq=False)
class _Source:
    """A file's text and hash, and what was derived from them (valid while its stat is unchanged)."""

    path: Path
    text: str
    sha256: str
    calls: tuple[frozenset[str], tuple[tuple[int, int, str], ...]] | None = None
    imports: dict[str, list[str]] | None = None
    own_fields: dict[int, dict[str, ast.AnnAssign | Unreadable]] = attrs.Factory(dict)

    def where(self, pos: int) -> str:
        line = self.text.count("\n", 0, pos) + 1
        return f"{self.path.name}:{line}"


_CACHE: dict[Path, tuple[tuple[int, int], _Source]] = {}


def _load(path: Path) -> _Source | None:
    try:
        stat = path.stat()
        key = (stat.st_mtime_ns, stat.st_size)
        if (hit := _CACHE.get(path)) is not None and hit[0] == key:
            return hit[1]
        data = read_input(path, limit=SOURCE_LIMIT)  # a regular file, not read whole past the limit
    except OSError:
        return None
    _CACHE[path] = (key, _Source(path, data.decode("utf-8", "replace"), hashlib.sha256(data).hexdigest()))
    return _CACHE[path][1]


def _call_end(text: str, open_pos: int) -> int:
    """The offset just past the bracket matching the one at ``open_pos``."""
    depth = 0
    for m in BRACKETS.finditer(text, open_pos):
        depth += 1 if m["open"] else -1 if m["close"] else 0
        if depth == 0:
            return m.end()
    return len(text)


def _literal(node: ast.expr | None, fallback: object) -> object:
    try:
        return fallback if node is None else ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return fallback


def _decode(lits: str) -> str | None:
    """The value of adjacent string literals, e.g. ``"--a" '-b'`` -> ``--a-b``."""
    parts = []
    for piece in PIECE.findall(lits):
        if "\\" not in piece:
            parts.append(piece[1:-1] if piece[0] in "'\"" else piece[2:-1])
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # invalid escapes warn
            try:
                parts.append(str(ast.literal_eval(piece)))
            except (ValueError, SyntaxError):
                return None
    return "".join(parts)


def _scan_calls(text: str) -> tuple[frozenset[str], tuple[tuple[int, int, str], ...]]:
    """Option strings of the ``add_argument``/``reset_arg`` calls; the ``ArgumentGroupFactory`` calls."""
    flags: set[str] = set()
    factories = []
    for m in CALLS.finditer(text):
        head, start = m["head"], m.start()
        if head is None or (head == "reset_arg" and re.match(r"\w", text[start - 1 : start])):
            continue
        if head == "ArgumentGroupFactory":
            before = text[max(0, start - 80) : start]
            if not re.search(r"\b(?:class|def)\s+\w*$", before):
                callee = re.search(r"[\w.]*$", before).group() + head  # type: ignore[union-attr]
                factories.append((start, _call_end(text, m.end() - 1), callee))
            continue
        names, pos = [], m.end()
        while (arg := POSITIONAL.match(text, pos)) is not None:
            pos = arg.end()
            if arg["lits"] and (value := _decode(arg["lits"])) and value.startswith("-"):
                names.append(value)
            if arg["end"] == ")":
                break
        flags.update(names)
        # The cheap test first: finding the end of every call would double the time.
        if (
            names
            and "BooleanOptionalAction" in text[pos : pos + 4000]
            and BOOL_ACTION.search(text, pos, _call_end(text, m.end() - 1))
        ):
            flags.update("--no-" + n[2:] for n in names if n.startswith("--"))
    return frozenset(flags), tuple(factories)


class Reader:
    """Collects flags, the files read and the gaps while walking from the entry files."""

    def __init__(self, roots: tuple[Path, ...]) -> None:
        self.roots = roots
        self.flags: set[str] = set()
        self.files: dict[str, str] = {}
        self.gaps: list[str] = []
        self.scopes: dict[str, frozenset[str]] = {}  # a gap -> the only flags it could hide; absent: any flag
        self.scanned: set[Path] = set()
        self.defined: dict[Path, frozenset[str]] = {}  # a file -> the flags its add_argument calls define

    def gap(self, message: str, flags: frozenset[str] | None = None) -> None:
        """Record what could not be read: ``flags`` are the only flags it could hide, None when any flag."""
        if message not in self.gaps:
            self.gaps.append(message)
            if flags is not None:
                self.scopes[message] = flags

    def load(self, path: Path) -> _Source | None:
        source = _load(path)
        if source is not None:
            root = next((r for r in self.roots if path.is_relative_to(r)), path.parent)
            self.files[path.relative_to(root).as_posix()] = source.sha256
        return source

    def scan(self, path: Path, follow: bool) -> None:
        """Add the flags defined in ``path``; with ``follow``, also those of imported ``add_*args``."""
        if path in self.scanned:
            return
        self.scanned.add(path)
        source = self.load(path)
        if source is None:
            self.gap(f"cannot read {path}")
            return
        if source.calls is None:
            source.calls = _scan_calls(source.text)
        self.flags |= source.calls[0]
        self.defined[path] = source.calls[0]
        for start, end, callee in source.calls[1]:
            self.factory(source, start, end, callee)
        for local, specs in self.imports(source).items() if follow else ():
            if ADD_ARGS_FUNC.match(local) and re.search(rf"\b{local}\s*\(", source.text):
                for spec in specs:
                    if (target := self.module_file(source, spec)) is None:
                        self.gap(f"{source.path.name} calls {local} from {spec}, which was not found")
                    else:
                        self.scan(target, follow=False)

    def imports(self, source: _Source) -> dict[str, list[str]]:
        """Local name -> ``module:name`` for every ``from module import ...`` in the file."""
        if source.imports is None:
            source.imports = {}
            for m in IMPORT.finditer(source.text):
                if not _at_line_start(source.text, m.start()):
                    continue
                for part in re.sub(r"#[^\n]*", "", m["names"]).strip("()").split(","):
                    if bits := part.split():
                        local = bits[2] if len(bits) == 3 and bits[1] == "as" else bits[0]
                        source.imports.setdefault(local, []).append(f"{m['mod']}:{bits[0]}")
        return source.imports

    def module_file(self, source: _Source, spec: str) -> Path | None:
        """The file of the module in ``spec`` (``module:name``), absolute or relative to ``source``."""
        module = spec.partition(":")[0]
        dotted = module.lstrip(".")
        level = len(module) - len(dotted)
        parents = source.path.parents
        for base in list(self.roots) if not level else parents[level - 1 : level]:
            stem = base.joinpath(*dotted.split(".")) if dotted else base
            for candidate in (stem.parent / f"{stem.name}.py", stem / "__init__.py"):
                if dotted and candidate.is_file():
                    return candidate
        return None

    def find_class(self, source: _Source, name: str, depth: int = 0) -> tuple[_Source, int] | None:
        """The file and offset of the top-level ``class name``, following imports (``*`` too)."""
        for m in re.finditer(CLASS.format(re.escape(name)), source.text):
            if not m.start() or source.text[m.start() - 1] == "\n":
                return source, m.start()
        imports = self.imports(source)
        for spec in [*imports.get(name, ()), *imports.get("*", ())] if depth < 6 else ():
            original = spec.partition(":")[2]
            path = self.module_file(source, spec)
            target = self.load(path) if path is not None else None
            if target and (
                found := self.find_class(target, name if original == "*" else original, depth + 1)
            ):
                return found
        return None

    def factory(self, source: _Source, start: int, end: int, callee: str) -> None:
        """Add the flags ``ArgumentGroupFactory(Config, exclude=...)`` generates, or a gap."""
        try:
            call = ast.parse(source.text[start:end], mode="eval").body
        except SyntaxError:
            call = None
        if (
            callee.rsplit(".", 1)[-1] != "ArgumentGroupFactory"
            or not isinstance(call, ast.Call)
            or not call.args
        ):
            self.gap(f"{source.where(start)}: cannot tell which flags {callee}(...) generates")
            return
        config = call.args[0]
        found = self.find_class(source, config.id) if isinstance(config, ast.Name) else None
        if found is None:
            self.gap(
                f"{source.where(start)}: cannot find the dataclass {ast.unparse(config)} that generates flags"
            )
            return
        exclude = next((k.value for k in call.keywords if k.arg == "exclude"), None)
        if isinstance(exclude, ast.Name):  # the list last assigned to that name before the call
            assigned = [m.end() for m in re.finditer(rf"\b{exclude.id}[ \t]*=[ \t]*(?=[\[({{])", source.text)]
            at = max((a for a in assigned if a < start), default=None)
            try:
                exclude = (
                    None
                    if at is None
                    else ast.parse(source.text[at : _call_end(source.text, at)], mode="eval").body
                )
            except SyntaxError:
                exclude = None
        excluded = _literal(exclude, ())
        skip = set(excluded) if isinstance(excluded, list | tuple | set) else set()  # unreadable: keep all
        label = f"{source.where(start)}: {ast.unparse(config)}"
        for name, stmt in self.fields(*found, seen=set()).items():
            if name in skip:
                continue
            if isinstance(stmt, Unreadable):  # it hides its own option strings, or any with metadata (arg_names)
                self.gap(stmt.why, None if stmt.metadata else option_names(name))
            else:
                self.flags |= self.field_flags(stmt, f"{label}.{name}")

    def fields(self, source: _Source, pos: int,
               seen: set[tuple[Path, int]]) -> dict[str, ast.AnnAssign | Unreadable]:
        """The dataclass fields of the class at ``pos``, bases first, like ``dataclasses.fields``. A base class
        that cannot be read or found is a gap of any flag: the fields it adds could have any name."""
        if (source.path, pos) in seen:
            return {}
        seen.add((source.path, pos))
        header = re.compile(CLASS.format(r"\w+")).match(source.text, pos)
        assert header is not None  # find_class matched the same pattern here
        fields: dict[str, ast.AnnAssign | Unreadable] = {}
        try:
            stub = ast.parse(f"class _C({header['bases'] or ''}): pass").body[0]
        except SyntaxError:
            stub = None
            self.gap(f"{source.where(pos)}: cannot read the base classes")
        for base in stub.bases if isinstance(stub, ast.ClassDef) else ():
            base = base.value if isinstance(base, ast.Subscript) else base
            if isinstance(base, ast.Name) and base.id in _PLAIN_BASES:
                continue
            found = self.find_class(source, base.id) if isinstance(base, ast.Name) else None
            if found is None:
                self.gap(f"{source.where(pos)}: cannot find the base class {ast.unparse(base)}")
            else:
                fields.update(self.fields(*found, seen=seen))
        if header.end() not in source.own_fields:
            source.own_fields[header.end()] = own_fields(source.text, header.end(), source.where)
        return fields | source.own_fields[header.end()]

    def field_flags(self, stmt: ast.AnnAssign, where: str) -> set[str]:
        """The option strings ``ArgumentGroupFactory`` makes of one dataclass field."""
        assert isinstance(stmt.target, ast.Name)
        ann = stmt.annotation
        kind = (
            ann.id
            if isinstance(ann, ast.Name)
            else ann.value
            if isinstance(ann, ast.Constant)
            else ast.unparse(ann)
        )
        kind = str(kind).replace(" ", "")
        if kind.split("[")[0].rsplit(".", 1)[-1] in ("ClassVar", "InitVar", "KW_ONLY"):
            return set()
        value, default = stmt.value, _literal(stmt.value, _MISSING)
        func = value.func if isinstance(value, ast.Call) else None
        if (
            isinstance(func, ast.Name | ast.Attribute)
            and getattr(func, "id", getattr(func, "attr", "")) == "field"
        ):
            assert isinstance(value, ast.Call)
            keywords = {k.arg: k.value for k in value.keywords if k.arg}
            if _literal(keywords.get("init"), True) is False:
                return set()
            default = _literal(keywords.get("default"), _MISSING)
            if "metadata" in keywords:
                # ArgumentGroupFactory names the flag after the field, then applies argparse_meta: only "arg_names"
                # renames it (Megatron 1dcf0daf argument_utils.py:136-188); {"default": None} keeps the names.
                meta = dict_get(keywords["metadata"], "argparse_meta")
                names = _literal(names_node := dict_get(meta, "arg_names"), None)
                if isinstance(names, list | tuple) and names and all(isinstance(n, str) for n in names):
                    return set(names)
                readable = isinstance(keywords["metadata"], ast.Dict) and (
                    meta is None or (isinstance(meta, ast.Dict) and names_node is None
                                     and all(k is not None for k in meta.keys)))
                if not readable:  # the field's own name is still taken: the likeliest, but not sure
                    self.gap(f"{where}: cannot read the flag names in the field's metadata")
        flag = "--" + stmt.target.id.replace("_", "-")
        if kind not in _BOOL_TYPES:
            return {flag}
        negative = {"--no-" + flag[2:], "--disable-" + flag[2:]}  # the factory's store_false names
        if default is _MISSING:
            return {flag} | negative
        return {flag} if isinstance(default, bool | int | float) and not default else negative
