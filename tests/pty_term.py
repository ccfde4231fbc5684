"""A real pseudo-terminal for the command-line tests: the program's stdin, stdout and stderr are the pty's slave
(so ``isatty()`` is true, as for a person at a terminal), and the test reads what it prints and types answers."""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


class Terminal:
    """``argv`` running on a new pseudo-terminal, in its own session (its controlling terminal is the pty)."""

    def __init__(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> None:
        self.master, slave = os.openpty()
        try:
            self.proc = subprocess.Popen(list(argv), stdin=slave, stdout=slave, stderr=slave, close_fds=True,
                                         start_new_session=True, env=dict(env) if env is not None else None, cwd=cwd)
        finally:
            os.close(slave)
        self.output = b""
        self.position = 0  # what expect() has matched up to

    def _read(self, timeout: float) -> str:
        """Read what is there within ``timeout``: "data", "idle" (nothing came) or "closed" (the program ended)."""
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return "idle"
        try:
            chunk = os.read(self.master, 65536)
        except OSError:  # EIO: every process holding the slave has ended
            return "closed"
        self.output += chunk
        return "data" if chunk else "closed"

    def expect(self, text: str, timeout: float = 60) -> None:
        """Wait until ``text`` is printed after what was matched last."""
        deadline = time.monotonic() + timeout
        while True:
            at = self.output.find(text.encode(), self.position)
            if at >= 0:
                self.position = at + len(text)
                return
            if time.monotonic() > deadline or self._read(0.1) == "closed":
                raise AssertionError(f"{text!r} never came; the terminal shows:\n{self.text}")

    def type(self, line: str) -> None:
        os.write(self.master, line.encode() + b"\n")

    def finish(self, timeout: float = 120) -> int:
        """The exit status, once the program ended (everything it printed read)."""
        deadline = time.monotonic() + timeout
        while self.proc.poll() is None and time.monotonic() < deadline:
            self._read(0.1)
        while self._read(0.2) == "data":
            pass
        os.close(self.master)
        return self.proc.wait(timeout=5)

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace").replace("\r\n", "\n")
