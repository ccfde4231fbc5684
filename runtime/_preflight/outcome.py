"""How a preflight check reports: return a one-line detail when it passes; raise CheckFailed
(with a fix hint) when it fails, CheckSkipped when it cannot apply here.

Shared by the checks in every runtime module, so that each check is a plain function that the
executor can name, time, skip and run in parallel.
"""

from __future__ import annotations


class CheckFailed(Exception):
    """A preflight check failed: ``message`` says what is wrong, ``hint`` how to fix it."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class CheckSkipped(Exception):
    """A preflight check does not apply (e.g. no GPU tooling on this machine): ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class CheckWarning(Exception):
    """A preflight check passed with a warning: the run goes on, but ``message`` is worth reading before it does
    (the table shows a "warning" row, with ``hint``); not a failure, so nothing is stopped."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
