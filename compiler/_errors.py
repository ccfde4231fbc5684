"""Exceptions. One base class; each subclass builds its message from keyword arguments.

Spec errors carry the file, the key path, the line and the column, and print like Jinja's
TemplateSyntaxError: a ``file:line:col:`` prefix, the offending source line, and a fix hint.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ._secrets import redact


class AcrlError(Exception):
    """Base class of every error acrl reports to a user. ``exit_code`` is the CLI's exit status."""

    exit_code = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message

    def as_json(self) -> dict[str, object]:
        """The error as data, for ``--json``."""
        return {"kind": type(self).__name__, "message": self.message}


class UsageError(AcrlError):
    """The command line itself is wrong (exit status 2)."""

    exit_code = 2


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

    @property
    def location(self) -> str:
        if self.line is None:
            return self.file
        return f"{self.file}:{self.line}:{self.column or 1}"

    @property
    def table_and_key(self) -> str:
        if not self.key:
            return ""
        table, _, leaf = self.key.rpartition(".")
        return f"[{table}] {leaf}" if table else leaf

    def format(self) -> str:
        """Render as ``file:line:col: severity: [table] key: message`` plus the line and a hint. A
        secret in the source line, the ``--set KEY=VALUE`` or the message is shown as ``***``."""
        head = ": ".join(p for p in (redact(self.location), self.severity, self.table_and_key) if p)
        rule = f" ({self.rule})" if self.rule else ""
        out = [f"{head}: {redact(self.message, code=False)}{rule}"]
        if self.source_line and self.line is not None:
            out.append(f"  {self.line:>4} | {redact(self.source_line)}")
            if self.column:
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
    """A spec is invalid. Holds every problem found, not only the first."""

    def __init__(self, diagnostics: Sequence[Diagnostic]) -> None:
        self.diagnostics = tuple(diagnostics)
        errors = [d for d in self.diagnostics if d.severity == "error"]
        body = "\n".join(d.format() for d in self.diagnostics)
        noun = "error" if len(errors) == 1 else "errors"
        super().__init__(f"{body}\n{len(errors)} {noun}; nothing was written.")

    def as_json(self) -> dict[str, object]:
        return {
            "kind": "SpecError",
            "message": self.message,
            "diagnostics": [d.as_json() for d in self.diagnostics],
        }


class BundleExistsError(AcrlError):
    """The output directory holds something that differs from what the spec compiles to."""

    def __init__(self, *, path: str, reason: str) -> None:
        super().__init__(
            f"{path}: {reason}; not overwritten.\n"
            "  fix: pass --force to replace it, or choose another directory with -o."
        )


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
        super().__init__(f"{path}: {reason}\n  fix: {fix}")
