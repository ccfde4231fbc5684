"""Colour on a terminal: errors red, warnings yellow, the caret under the column in its diagnostic's
colour, rule ids and notes cyan, the fix green.

Whether to colour is decided per stream: ``--color=always`` colours, ``never`` does not, and ``auto``
(the default) colours only a terminal (``isatty``), and not when ``NO_COLOR`` is set to anything but
"" (no-color.org; an explicit ``--color=always`` still wins over it) or ``TERM=dumb``. Output captured by
a test, a pipe or a file is never coloured unless asked for.

The text is coloured after it is formatted, line by line, by its shape (errors.Diagnostic.format's
``file:line:col: error: ...``, the caret line, ``  fix: ``, ``(ACRL-X000)``, ``note: ``): the formats stay
plain and testable, and a spec value in a message cannot be mistaken for markup, since the escapes
that spec values could hold are shown as text before this runs (printable, redact).
"""

from __future__ import annotations

import os
import re

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    from typing import TextIO

CHOICES = ("auto", "always", "never")
RESET = "\033[0m"
STYLES = {"error": "\033[1;31m", "warning": "\033[1;33m", "rule": "\033[36m", "note": "\033[36m",
          "fix": "\033[32m", "bold": "\033[1m"}
_HEAD = re.compile(r"^(?P<where>(?:.*?: )?)(?P<severity>error|warning)(?=: )")  # Diagnostic.format's head
_CARET = re.compile(r"^(?P<bar> {7}\| *)\^$")
_RULE = re.compile(r"\((ACRL-[A-Z]\d{3})\)")
_CLOSING = re.compile(r"^\d+ (?:errors?|warnings?)\b.*")


def enabled(stream: TextIO, choice: str = "auto") -> bool:
    """Whether to colour what is written to ``stream`` under ``--color=choice``."""
    if choice == "always":
        return True
    if choice == "never" or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # not a file, or closed
        return False


def paint(text: str, *, default: str | None = None) -> str:
    """``text`` (diagnostics, warnings, notes) with colour. ``default``: the style of the first line when
    no line of ``text`` is a diagnostic's head (an error that is not about a spec key, "error")."""
    fix_line = re.compile(r"^(?P<indent> *)fix:")  # AcrlError.__str__'s and Diagnostic.format's hint line
    lines = text.split("\n")
    severity = "error"
    found = False
    for i, line in enumerate(lines):
        head = _HEAD.match(line)
        if head:
            severity, found = head["severity"], True
            line = f"{head['where']}{_style(severity, severity)}{line[head.end():]}"
        elif caret := _CARET.match(line):
            line = f"{caret['bar']}{_style('^', severity)}"
        elif fix := fix_line.match(line):
            line = f"{fix['indent']}{_style('fix:', 'fix')}{line[fix.end():]}"
        elif line.startswith("note: "):
            line = f"{_style('note', 'note')}{line[4:]}"
        elif _CLOSING.match(line):
            line = _style(line, "bold")
        lines[i] = _RULE.sub(lambda m: f"({_style(m[1], 'rule')})", line)
    if not found and default is not None and lines and not lines[0].startswith("\033"):
        lines[0] = _style(lines[0], default)
    return "\n".join(lines)


def _style(text: str, style: str) -> str:
    return f"{STYLES[style]}{text}{RESET}"
