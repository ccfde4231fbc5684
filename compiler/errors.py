"""Exceptions. One base class; each subclass builds its message from keyword arguments.

Spec errors carry the file, the key path, the line and the column, and print like Jinja's
TemplateSyntaxError: a ``file:line:col:`` prefix, the offending source line, and a fix hint.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import attrs

from ._secrets import redact


class AcrlError(Exception):
    """Base class of every error acrl reports to a user.

    The fix is a field, not text: ``message`` says what is wrong, ``hint`` how to fix it (it may run
    over several lines), ``exit_code`` is the CLI's exit status (the class's unless given). They are
    formatted in one place: ``str()`` (what the CLI prints) is the message, then ``"\n  fix: "`` and
    the hint; ``as_json()`` carries the same text as ``message`` and the hint in its own field. No
    code builds the fix into a message, parses a formatted error, or changes an error once raised:
    :meth:`evolve` makes a copy with fields replaced.
    """

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None, exit_code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint or None
        if exit_code is not None:
            self.exit_code = exit_code

    def __str__(self) -> str:
        return self.message if self.hint is None else f"{self.message}\n  fix: {self.hint}"

    def evolve(self, *, message: str | None = None, hint: str | None = None,
               exit_code: int | None = None) -> AcrlError:
        """A copy of this error (same class, same other attributes) with the given fields replaced,
        as ``attrs.evolve`` does: for a caller that adds to or re-grades an error it caught."""
        new = type(self).__new__(type(self))  # not copy.copy: it calls __init__ with args
        new.__dict__.update(self.__dict__)
        Exception.__init__(new, self.message if message is None else message)
        new.message = self.message if message is None else message
        new.hint = self.hint if hint is None else (hint or None)
        if exit_code is not None:
            new.exit_code = exit_code
        new.__traceback__ = None
        return new

    def as_json(self) -> dict[str, object]:
        """The error as data, for ``--json``: ``message`` is the text the CLI prints (as before),
        ``hint`` the fix alone (null when there is none)."""
        return {"kind": type(self).__name__, "message": str(self), "hint": self.hint}


class UsageError(AcrlError):
    """The command line itself is wrong (exit status 2)."""

    exit_code = 2


SHOWN_LINE = 160  # the most characters of a spec's line an error shows
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")  # a TOML bare key, written without quotes


def dotted(path: Sequence[str | int]) -> str:
    """A key path as a TOML dotted key: ``rollout.batch_size``, ``eval.datasets."a.b"``."""
    def part(p: str) -> str:
        return p if _BARE_KEY.fullmatch(p) else '"' + p.replace("\\", "\\\\").replace('"', '\\"') + '"'

    return ".".join(part(str(p)) for p in path)


@attrs.frozen
class Diagnostic:
    """One problem found in a spec: an error or a warning, with where it is and how to fix it."""

    severity: str  # "error" | "warning"
    message: str
    file: str = ""
    key: str = ""  # dotted key path, e.g. "rollout.batch_size"
    line: int | None = None
    column: int | None = None
    hint: str = ""
    rule: str = ""  # stable rule id for cross-field rules, e.g. "ACRL-P001"
    source_line: str = ""
    # the key's parts, where known: a part holding a dot ([kuberay.head] resources' "nvidia.com/gpu") is shown whole
    path: tuple[str | int, ...] = attrs.field(default=(), eq=False)

    @property
    def location(self) -> str:
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.column or 1}"

    @property
    def table_and_key(self) -> str:
        if not self.key:
            return ""
        if self.path and ".".join(map(str, self.path)) == self.key:
            table, leaf = dotted(self.path[:-1]), str(self.path[-1])
        else:
            table, _, leaf = self.key.rpartition(".")
        return f"[{table}] {leaf}" if table else leaf

    def format(self) -> str:
        """Render as ``file:line:col: severity: [table] key: message`` plus the line and a hint. A
        secret in the source line, the ``--set KEY=VALUE`` or the message is shown as ``***``."""
        head = ": ".join(p for p in (redact(self.location), self.severity, self.table_and_key) if p)
        rule = f" ({self.rule})" if self.rule else ""
        out = [f"{head}: {redact(self.message, code=False)}{rule}"]
        if self.source_line and self.line is not None:
            line = self.source_line  # a line of 100 KB is shown cut: the message stays readable
            shown = line if len(line) <= SHOWN_LINE else line[:SHOWN_LINE - 3] + "..."
            out.append(f"  {self.line:>4} | {redact(shown)}")
            if self.column and self.column <= len(shown):
                out.append("       | " + " " * (self.column - 1) + "^")
        if self.hint:
            out.append(f"  fix: {redact(self.hint, code=False)}")
        return "\n".join(out)

    def as_json(self) -> dict[str, object]:
        return {
            "severity": self.severity,
            "rule": self.rule or None,
            "file": redact(self.file),
            "key": self.key,
            "line": self.line,
            "column": self.column,
            "message": redact(self.message, code=False),
            "hint": redact(self.hint, code=False) or None,
        }


class SpecError(AcrlError):
    """A spec is invalid. Holds every problem found, not only the first. ``unchecked``: what was not checked because
    of these errors (the checks that read a key with an error, or everything after a syntax error), said on the
    closing line; empty when everything was checked."""

    def __init__(self, diagnostics: Sequence[Diagnostic], *, unchecked: str = "") -> None:
        self.diagnostics = tuple(diagnostics)
        self.unchecked = unchecked
        errors = [d for d in self.diagnostics if d.severity == "error"]
        body = "\n".join(d.format() for d in self.diagnostics)
        noun = "error" if len(errors) == 1 else "errors"
        closing = f"\n{unchecked}: fixing {'it' if len(errors) == 1 else 'these'} may reveal more." if unchecked else ""
        super().__init__(f"{body}\n{len(errors)} {noun}; nothing was written.{closing}")

    def as_json(self) -> dict[str, object]:
        return {**super().as_json(), "kind": "SpecError", "diagnostics": [d.as_json() for d in self.diagnostics],
                "unchecked": self.unchecked or None}


class BundleExistsError(AcrlError):
    """The output directory holds something a compile will not replace: a bundle modified by hand or
    another spec's (``forceable``: --force replaces it), or what is no bundle at all. Exit status 3,
    apart from an invalid spec's 1: nothing was written, and the spec may well be valid."""

    exit_code = 3

    def __init__(self, *, path: str, reason: str, forceable: bool = True) -> None:
        super().__init__(f"{path}: {reason}; not overwritten.",
                         hint="pass --force to replace it, or choose another directory with -o." if forceable else
                         "choose another directory with -o.")


class BundleWriteError(AcrlError):
    """The bundle could not be written (permissions, disk full, ...)."""

    def __init__(self, *, path: str, reason: str) -> None:
        super().__init__(f"{path}: cannot write the bundle: {reason}; nothing was changed.")


class BundleReadError(AcrlError):
    """A bundle or spec given to diff, verify or --check cannot be read (missing, not a bundle,
    an unparsable manifest, a bundle format this acrl cannot read). Exit status 2, as diff(1) has
    for trouble: 1 means differences found."""

    exit_code = 2

    def __init__(self, *, path: str, reason: str, fix: str) -> None:
        super().__init__(f"{path}: {reason}", hint=fix)
