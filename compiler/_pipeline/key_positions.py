"""Where every key of a TOML text was written: the scanner behind stage 1 (parse).

``tomllib`` gives the data but no positions, so this scanner walks the (already validated) text once
and records the line and column of every key, including keys of inline tables and array-of-tables
entries. ``layers`` also uses it to find a key of an ``--set`` assignment.
"""

from __future__ import annotations

import re
import tomllib

KeyPath = tuple[str | int, ...]
Position = tuple[int, int]  # 1-based line and column

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class Scanner:
    """Walks valid TOML text and records the position of every key."""

    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0
        self.positions: dict[KeyPath, Position] = {}
        self._array_counts: dict[KeyPath, int] = {}
        self._line_starts = [0] + [m.end() for m in re.finditer("\n", text)]

    def pos(self, i: int) -> Position:
        lo, hi = 0, len(self._line_starts) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._line_starts[mid] <= i:
                lo = mid
            else:
                hi = mid - 1
        return lo + 1, i - self._line_starts[lo] + 1

    def peek(self, n: int = 1) -> str:
        return self.s[self.i:self.i + n]

    def skip_ws(self, newlines: bool) -> None:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r" or (newlines and c == "\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(s) and s[self.i] != "\n":
                    self.i += 1
            else:
                return

    def key(self) -> list[tuple[str, int]]:
        """A dotted key: its parts and the offset of each."""
        parts: list[tuple[str, int]] = []
        while True:
            self.skip_ws(False)
            start = self.i
            c = self.peek()
            if c in "\"'":
                end = self._string_end(self.i)
                raw = self.s[self.i:end]
                self.i = end
                parts.append((str(tomllib.loads(f"k = {raw}")["k"]), start))
            else:
                m = _BARE_KEY.match(self.s, self.i)
                if not m:
                    return parts
                parts.append((m.group(0), start))
                self.i = m.end()
            self.skip_ws(False)
            if self.peek() != ".":
                return parts
            self.i += 1

    def _string_end(self, i: int) -> int:
        s = self.s
        q = s[i]
        if s.startswith(q * 3, i):
            end = s.find(q * 3, i + 3)
            while end != -1 and q == '"' and is_escaped(s, end):
                end = s.find(q * 3, end + 1)
            end += 3
            while end < len(s) and s[end] == q:  # up to two quotes may close the content
                end += 1
            return end
        j = i + 1
        while j < len(s) and s[j] != q:
            j += 2 if (q == '"' and s[j] == "\\") else 1
        return j + 1

    def value(self, path: KeyPath) -> None:
        self.skip_ws(False)
        c = self.peek()
        if c in "\"'":
            self.i = self._string_end(self.i)
        elif c == "[":
            self.i += 1
            index = 0
            while True:
                self.skip_ws(True)
                if self.peek() == "]":
                    self.i += 1
                    return
                self.positions.setdefault((*path, index), self.pos(self.i))
                self.value((*path, index))
                index += 1
                self.skip_ws(True)
                if self.peek() == ",":
                    self.i += 1
        elif c == "{":
            self.i += 1
            while True:
                self.skip_ws(False)
                if self.peek() == "}":
                    self.i += 1
                    return
                sub = self.key_and_value(path)
                if not sub:
                    return
                self.skip_ws(False)
                if self.peek() == ",":
                    self.i += 1
        else:
            while self.i < len(self.s) and self.s[self.i] not in ",]}\n#":
                self.i += 1

    def key_and_value(self, table: KeyPath) -> bool:
        parts = self.key()
        if not parts:
            return False
        path = table
        for name, offset in parts:
            path = (*path, name)
            self.positions.setdefault(path, self.pos(offset))
        self.skip_ws(False)
        if self.peek() == "=":
            self.i += 1
        self.value(path)
        return True

    def _resolve(self, names: tuple[str, ...]) -> KeyPath:
        """A header's key path: a name that is an array of tables so far ([[...]]) stands for its last table, so
        ``[a.b]`` after ``[[a]]`` is a table inside a's last element (TOML's rule)."""
        out: KeyPath = ()
        for i, name in enumerate(names):
            out = (*out, name)
            count = self._array_counts.get(out)
            if count and i < len(names) - 1:
                out = (*out, count - 1)
        return out

    def run(self) -> dict[KeyPath, Position]:
        table: KeyPath = ()
        while True:
            self.skip_ws(True)
            if self.i >= len(self.s):
                return self.positions
            if self.peek(2) == "[[":
                self.i += 2
                base = self._resolve(tuple(name for name, _ in self.key()))
                offset = self.i
                index = self._array_counts.get(base, 0)
                self._array_counts[base] = index + 1
                table = (*base, index)
                self.positions.setdefault(base, self.pos(offset))
                self.positions.setdefault(table, self.pos(offset))
                self.i = self.s.index("]]", self.i) + 2
            elif self.peek() == "[":
                start = self.i
                self.i += 1
                parts = self.key()
                table = self._resolve(tuple(name for name, _ in parts))
                for end in range(1, len(table) + 1):
                    self.positions.setdefault(table[:end], self.pos(start))
                self.i = self.s.index("]", self.i) + 1
            elif not self.key_and_value(table):
                self.i += 1  # unreachable for valid TOML; never loop forever


def is_escaped(s: str, i: int) -> bool:
    n = 0
    while i - n - 1 >= 0 and s[i - n - 1] == "\\":
        n += 1
    return n % 2 == 1


def scan_positions(text: str) -> dict[KeyPath, Position]:
    return Scanner(text).run()
