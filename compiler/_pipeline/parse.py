"""Stage 1, parse: read a TOML spec and keep where every key was written.

``tomllib`` gives the data but no positions, so a small scanner walks the (already validated)
text once and records the line and column of every key, including keys of inline tables and
array-of-tables entries. Later stages attach these positions to their messages.
"""

from __future__ import annotations

import errno
import functools
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from ..errors import Diagnostic, SpecError
from .bundle import read_input
from .key_positions import KeyPath as KeyPath  # the types of a key and its place: every stage imports them from here
from .key_positions import Position as Position
from .key_positions import is_escaped, scan_positions

NO_LINE: Position = (0, 0)  # the placeholder position of a key no file wrote (who did: Written.by)


@attrs.frozen
class Written:
    """Who wrote a key of a merged spec: a spec file (the spec itself, or a base named in ``extends``;
    the key's position is in ``SpecSource.positions``), ``--set KEY=VALUE`` on the command line, or a
    ``[sweep]`` point (its experiment id). ``name`` is what messages show where a file name goes:
    the file's display name, ``--set KEY=VALUE`` or ``[sweep] point NAME``; the last two have no line."""

    name: str
    by: Literal["file", "set", "sweep"] = "file"


@attrs.frozen
class SpecSource:
    """A parsed spec: its display name, text, data and key positions.

    A spec that extends another, or has ``--set`` overrides applied, is one merged source: ``files``
    says who wrote each key when that is not the file ``name`` (a base spec, ``--set KEY=VALUE`` or a
    ``[sweep]`` point: see :class:`Written`), ``texts`` holds the text of each base spec for messages,
    and ``inputs`` lists the base specs as (path as written in ``extends``, sha256 of their bytes)
    (and the name ``files`` gives it), and the overrides as (key, value, where from) in the order they
    were applied."""

    name: str
    text: str
    data: Mapping[str, Any]
    positions: Mapping[KeyPath, Position]
    files: Mapping[KeyPath, Written] = attrs.field(factory=dict)
    texts: Mapping[str, str] = attrs.field(factory=dict)
    bases: tuple[tuple[str, str, str], ...] = ()  # (as written in extends, sha256, name in messages)
    overrides: tuple[tuple[str, Any, str], ...] = ()
    base_paths: tuple[str, ...] = ()  # every base spec read, as opened (for the compile cache)

    def locate(self, path: KeyPath) -> tuple[str, Position | None]:
        """The file (or ``--set ...``) that wrote ``path``, else the first key written under it (a table
        filled by a --set), else its nearest written ancestor; and where."""
        if path not in self.positions and self.files:
            inner = next((p for p in self.positions if p[:len(path)] == path), None)
            if inner is not None:
                return self._where(inner)
        for end in range(len(path), 0, -1):
            if path[:end] in self.positions:
                return self._where(path[:end])
        return self.name, None

    def written_by(self, path: KeyPath) -> Written:
        """Who wrote the key ``path`` (the spec file ``name`` unless ``files`` says otherwise)."""
        return self.files.get(path) or Written(self.name)

    def line_of(self, path: KeyPath) -> Position | None:
        """Where in its file the key ``path`` was written: None when it was not (``--set``, a sweep
        point's id) or its position is unknown."""
        at = self.positions.get(path)
        return at if at is not None and at != NO_LINE and self.written_by(path).by == "file" else None

    def _where(self, path: KeyPath) -> tuple[str, Position | None]:
        return self.written_by(path).name, self.line_of(path)

    def position(self, path: KeyPath) -> Position | None:
        """Where ``path`` was written, or its nearest written ancestor."""
        return self.locate(path)[1]

    def line(self, number: int, file: str | None = None) -> str:
        text = self.text if file is None or file == self.name else self.texts.get(file, "")
        lines = _lines(text)
        return lines[number - 1] if 0 < number <= len(lines) else ""

    def diagnostic(self, path: KeyPath, message: str, *, hint: str = "", severity: str = "error",
                   rule: str = "") -> Diagnostic:
        """A diagnostic pointing at ``path`` in the file (or --set) that wrote it."""
        file, pos = self.locate(path)
        return Diagnostic(
            severity=severity,
            message=message,
            file=file,
            key=".".join(str(p) for p in path),
            path=tuple(path),
            line=pos[0] if pos else None,
            column=pos[1] if pos else None,
            hint=hint,
            rule=rule,
            source_line=self.line(pos[0], file) if pos else "",
        )


def unreadable_hint(exc: OSError, default: str) -> str:
    """The fix for a file the bounded reader refused (see acrl.compiler._pipeline.bundle.read_input)."""
    if exc.errno == errno.EFBIG:
        return "give the right file: acrl reads no input this large (a spec can be split with extends)"
    if exc.errno == errno.EINVAL and (exc.strerror or "").startswith("not a regular file"):
        return "give the path of a file: a device, a directory or a FIFO is not read"
    return default


@functools.lru_cache(maxsize=16)
def _lines(text: str) -> list[str]:
    """The lines of a spec's text, split once however many diagnostics show one (50,000 unknown keys
    each splitting a megabyte took minutes)."""
    return text.splitlines()


def read_spec(path: Path, *, display_name: str | None = None) -> SpecSource:
    """Read and parse a spec file. Raises SpecError for unreadable files and TOML syntax errors."""
    name = display_name or str(path)

    try:
        raw = read_input(path, pipe=True)  # the spec may be a pipe (/dev/stdin, <(...))
    except OSError as exc:
        raise SpecError([Diagnostic("error", f"cannot read the spec: {exc.strerror or exc}", file=name,
                                    hint=unreadable_hint(exc, "check the path and its permissions"))]) from None
    return decode_spec(raw, name)


def decode_spec(raw: bytes, name: str) -> SpecSource:
    """Parse a spec's bytes, already read (from a file named ``name`` in messages)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError([Diagnostic("error", f"not UTF-8 text (byte {exc.start})", file=name,
                                    hint="TOML files must be UTF-8 encoded")]) from None
    return parse_spec_text(text, name)


MAX_NESTING = 64  # arrays and inline tables inside each other, at most (tomllib recurses, so must a limit)
MAX_DIGITS = 4300  # Python's own limit on converting an integer's digits (sys.get_int_max_str_digits)
_LONG_INTEGER = re.compile(rf"[0-9][0-9_]{{{MAX_DIGITS},}}")


def toml_bounds(text: str) -> tuple[str, str, int] | None:
    """(message, fix, offset) when ``text`` holds what tomllib cannot parse within Python's limits:
    arrays or inline tables nested over MAX_NESTING deep (a RecursionError in tomllib and in every
    stage after it), or an integer of over MAX_DIGITS digits (a ValueError in tomllib). Strings
    and comments are skipped, so a long digit string or a "[[[" in a string is never refused."""
    depth = 0
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "#":
            end = text.find("\n", i)
            i = n if end == -1 else end
        elif c in "\"'":
            i = _string_end(text, i)
        elif c in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return (f"nested too deeply: over {MAX_NESTING} arrays or inline tables inside each other (the limit)",
                        "flatten the value", i)
            i += 1
        elif c in "]}":
            depth = max(0, depth - 1)
            i += 1
        elif c.isdigit():
            match = _LONG_INTEGER.match(text, i)
            if match is not None and sum(ch.isdigit() for ch in match.group()) > MAX_DIGITS:
                return (f"integer too large: over {MAX_DIGITS:,} digits (the limit)",
                        "no key takes such a number; check the value", i)
            while i < n and (text[i].isalnum() or text[i] in "_.+-:"):
                i += 1
        else:
            i += 1
    return None


def _string_end(s: str, i: int) -> int:
    """The offset after the TOML string starting at ``i`` (basic, literal or multi-line), or the
    end of the text when it is unterminated (tomllib reports that)."""
    q = s[i]
    if s.startswith(q * 3, i):
        j = i + 3
        while True:
            end = s.find(q * 3, j)
            if end == -1:
                return len(s)
            if q == "'" or not is_escaped(s, end):
                end += 3
                while end < len(s) and s[end] == q:
                    end += 1
                return end
            j = end + 1
    j = i + 1
    while j < len(s) and s[j] != q and s[j] != "\n":
        j += 2 if (q == '"' and s[j] == "\\") else 1
    return min(j + 1, len(s))


def _bounds_diagnostic(text: str, name: str, message: str, hint: str, offset: int) -> Diagnostic:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    src = text[start:] if end == -1 else text[start:end]
    return Diagnostic("error", message, file=name, line=text.count("\n", 0, offset) + 1, column=offset - start + 1,
                      source_line=src if len(src) <= 200 else "", hint=hint)  # no line of 5,000 digits


def parse_spec_text(text: str, name: str) -> SpecSource:
    """Parse TOML text; syntax errors become a SpecError with line and column."""
    bounds = toml_bounds(text)
    if bounds is not None:
        raise SpecError([_bounds_diagnostic(text, name, *bounds)])
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        from .toml_errors import plain  # lazy: only a syntax error pays for the rewriting

        said = plain(text, str(exc))  # tomllib's words, plain
        lines = text.splitlines()
        src = lines[said.line - 1] if said.line and 0 < said.line <= len(lines) else ""
        raise SpecError([Diagnostic("error", said.message, file=name, key=".".join(said.key), line=said.line,
                                    column=said.column, source_line=src if len(src) <= 200 else "", hint=said.hint)],
                        unchecked="Nothing after a syntax error is read") from None
    return SpecSource(name=name, text=text, data=data, positions=scan_positions(text))
