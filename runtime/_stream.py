"""How `acrl run` runs train.sh: in its own process group, its output copied as it comes to the terminal and
to train.log, signals forwarded once and escalated (runtime/_run.py says the policy), and the machine-readable
lines train.sh writes for the record (``acrl-resume: {json}``: how the launch decided to load a checkpoint)
picked out of the output on the way. What train.sh puts between ``acrl-detail: begin`` and ``acrl-detail: end``
lines (Ray's whole output of a failed ray command, a traceback of a hundred lines, before train.sh's one-line
summary of it) goes to train.log only.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType
from typing import IO, Any

import attrs

from ._records import LOG

DEFAULT_STOP_GRACE_S = 90.0  # train.sh's own `ray job stop` is bounded by 60 s (ACRL_RAY_TIMEOUT)
KILL_AFTER_S = 5.0  # from SIGTERM to the group to SIGKILL
RESUME_MARKER = "acrl-resume: "  # train.sh's decision about loading a checkpoint, as JSON after it
MARKERS = (RESUME_MARKER,)  # train.sh's lines for the record: the first of each is kept (Outcome.marked)
MARKED_LINE_LIMIT = 64 << 10  # a longer line is not one of train.sh's marked lines
DETAIL_BEGIN, DETAIL_END = b"acrl-detail: begin", b"acrl-detail: end"  # train.sh's ray_failed: for train.log only


@attrs.define
class Outcome:
    """How train.sh ended, as _run_streamed saw it."""

    code: int  # its exit status, 128+N when a signal N ended it (as a shell says)
    cancelled: bool = False  # a signal to acrl was forwarded to it
    escalated: bool = False  # its process group was sent SIGTERM / SIGKILL
    log_error: str | None = None  # why train.log stopped being written (the terminal still got all)
    error: str | None = None  # acrl's own failure while running it
    marked: dict[str, str] = attrs.Factory(dict)  # MARKERS -> the rest of the first line that holds it
    details: int = 0  # blocks of detail kept in train.log and not shown on the terminal


def child_signals() -> None:
    """In the child, before exec: default dispositions and no blocked signals. A process started
    with SIGINT ignored (`acrl run B &` from a script) passes that on, and a non-interactive bash
    cannot trap a signal that was ignored when it started."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def run_streamed(command: Sequence[str], env: dict[str, str], log: IO[bytes], out: IO[str],
                  stop_grace: float = DEFAULT_STOP_GRACE_S) -> Outcome:
    """Run ``command`` in its own process group, its stdout and stderr copied to ``out`` and ``log``
    as they come (partial lines included: progress output is not held back). The first SIGINT or
    SIGTERM to this process is forwarded to it, SIGHUP as SIGTERM (train.sh traps INT and TERM); if
    it has not ended ``stop_grace`` seconds later, or on a second signal, its group gets SIGTERM, and
    SIGKILL KILL_AFTER_S later (at once on a third signal). A terminal that goes away stops the copy
    to it, not the run; a log that cannot be written (a full disk) stops the copy to the log."""
    state = _Stopping()
    state.grace = stop_grace
    previous: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread (a library caller): signals stay as they are
        for caught in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[caught] = signal.signal(caught, state.on_signal)
    try:
        try:
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                    preexec_fn=child_signals)  # no other thread runs by now
        except OSError as exc:
            with contextlib.suppress(OSError):
                log.write(f"acrl: cannot start {command[0]}: {exc}\n".encode())
            _say(f"acrl: cannot start {command[0]}: {exc.strerror or exc}")
            return Outcome(127)
        state.proc = proc
        state.act()  # a signal that came before the child started
        copy = _Copy(log, out)
        assert proc.stdout is not None
        source = proc.stdout.fileno()
        exited_at: float | None = None
        while True:
            state.act()
            if exited_at is None and proc.poll() is not None:
                exited_at = time.monotonic()
            # After train.sh has ended, what its leftovers (a process that kept the pipe) write is read
            # for a moment, not until they end.
            if exited_at is not None and time.monotonic() - exited_at > 0.5:
                break
            try:
                ready, _, _ = select.select([source], [], [], 0.1)
            except InterruptedError:  # pragma: no cover (PEP 475 retries)
                continue
            if not ready:
                continue
            chunk = os.read(source, 65536)
            if not chunk:
                break
            copy.write(chunk)
        while proc.poll() is None:  # it closed its output but runs on
            state.act()
            time.sleep(0.1)
        code = proc.wait()
        return Outcome(128 - code if code < 0 else code, cancelled=bool(state.signals), escalated=state.level > 0,
                       log_error=copy.log_error, marked=copy.finish(), details=copy.details.blocks)
    finally:
        if state.proc is not None:
            if state.proc.poll() is None:  # acrl's own failure: train.sh's trap stops the job
                with contextlib.suppress(ProcessLookupError):
                    state.proc.send_signal(signal.SIGTERM)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    state.proc.wait(timeout=stop_grace)
            if state.proc.stdout is not None:
                state.proc.stdout.close()
        for restored, handler in previous.items():
            signal.signal(restored, handler)


class _Stopping:
    """The signals this process got while train.sh runs, and what was done about them."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[bytes] | None = None
        self.signals: list[int] = []
        self.level = 0  # 0: nothing or forwarded; 1: SIGTERM to the group; 2: SIGKILL to the group
        self.forwarded = False
        self.deadline: float | None = None
        self.grace = DEFAULT_STOP_GRACE_S

    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.signals.append(signum)
        if len(self.signals) == 1:
            _say(f"acrl: {signal.Signals(signum).name}: asking train.sh to stop the Ray job "
                 "(again to end it at once)")
        elif len(self.signals) == 2:
            _say("acrl: second signal: ending train.sh and everything it started (SIGTERM)")
            self._escalate(1)
        else:
            _say("acrl: ending train.sh and everything it started (SIGKILL)")
            self._escalate(2)
        self.act()

    def act(self) -> None:
        """Forward the first signal once train.sh runs; escalate when a deadline has passed."""
        proc = self.proc
        if proc is None or not self.signals:
            return
        if not self.forwarded:
            self.forwarded = True
            first = self.signals[0]
            with contextlib.suppress(ProcessLookupError):  # it has just exited
                proc.send_signal(signal.SIGTERM if first == signal.SIGHUP else first)
            if self.level == 0:
                self.deadline = time.monotonic() + self.grace
        if self.deadline is not None and time.monotonic() >= self.deadline and proc.returncode is None:
            if self.level == 0:
                _say(f"acrl: train.sh did not end within {self.grace:g} s: ending it and everything it started "
                     "(SIGTERM)")
            self._escalate(self.level + 1)

    def _escalate(self, level: int) -> None:
        self.level = max(self.level, min(level, 2))
        self.deadline = time.monotonic() + KILL_AFTER_S if self.level == 1 else None
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGTERM if self.level == 1 else signal.SIGKILL)


class _Copy:
    """Copies train.sh's output to the log and the terminal; a failing one is dropped, the other kept."""

    def __init__(self, log: IO[bytes], out: IO[str]) -> None:
        self.log: IO[bytes] | None = log
        self.out: IO[str] | None = out
        self.sink = getattr(out, "buffer", None)
        self.log_error: str | None = None
        self.marked: dict[str, str] = {}
        self.partial = b""  # the line being written, for the marked lines (bounded: MARKED_LINE_LIMIT)
        self.skipping = False  # within a line longer than that
        self.details = DetailFilter()

    def finish(self) -> dict[str, str]:
        """The marked lines seen (a last line without its newline included)."""
        self._mark(self.partial)
        self.partial = b""
        return self.marked

    def _mark(self, line: bytes) -> None:
        for marker in MARKERS:
            at = line.find(marker.encode())
            if at >= 0 and marker not in self.marked:
                self.marked[marker] = line[at + len(marker):].decode("utf-8", "replace").strip()

    def _watch(self, chunk: bytes) -> None:
        *lines, rest = (self.partial + chunk).split(b"\n")
        if self.skipping and lines:  # the end of a line too long to be one of train.sh's
            lines, self.skipping = lines[1:], False
        for line in lines:
            self._mark(line)
        if self.skipping or len(rest) > MARKED_LINE_LIMIT:
            self.partial, self.skipping = b"", True
        else:
            self.partial = rest

    def write(self, chunk: bytes) -> None:
        if len(self.marked) < len(MARKERS):
            self._watch(chunk)
        if self.log is not None:
            try:
                self.log.write(chunk)
            except OSError as exc:  # ENOSPC, EFBIG, EIO: the run goes on, shown on the terminal
                self.log = None
                self.log_error = f"cannot write {LOG}: {exc.strerror or exc}"
                _say(f"acrl: warning: {self.log_error}; the output goes on to the terminal only")
        chunk = self.details.feed(chunk)
        if self.out is not None and chunk:
            try:
                if self.sink is not None:
                    self.out.flush()
                    self.sink.write(chunk)
                    self.sink.flush()
                else:
                    self.out.write(chunk.decode("utf-8", "replace"))
                    self.out.flush()
            except OSError:  # BrokenPipeError, or EIO from a closed terminal
                self.out = None


class DetailFilter:
    """What of train.sh's output the terminal gets: all of it as it comes, except the lines from one starting with
    DETAIL_BEGIN to one starting with DETAIL_END, both included. Only the start of a line that may still become the
    awaited marker is held back, until its next bytes say."""

    def __init__(self) -> None:
        self.held = b""  # the start of a line, not yet known to be a marker or not
        self.inside = False  # within a detail block
        self.line_start = True  # the next byte starts a line
        self.dropping = False  # the rest of the current line is not shown (a marker line's, or one in a block)
        self.blocks = 0

    def feed(self, chunk: bytes) -> bytes:
        shown = bytearray()
        data, self.held = self.held + chunk, b""
        while data:
            if self.line_start:
                marker = DETAIL_END if self.inside else DETAIL_BEGIN
                if len(data) < len(marker) and marker.startswith(data):
                    self.held = data
                    break
                is_marker = data.startswith(marker)
                if is_marker:
                    self.inside = not self.inside
                    self.blocks += self.inside
                self.dropping = self.inside or is_marker
            end = data.find(b"\n")
            line, data = (data, b"") if end < 0 else (data[:end + 1], data[end + 1:])
            if not self.dropping:
                shown += line
            self.line_start = end >= 0
        return bytes(shown)


def _say_to(out: IO[str], message: str) -> None:
    with contextlib.suppress(OSError):
        print(message, file=out, flush=True)


def _say(message: str) -> None:
    with contextlib.suppress(OSError):
        print(message, file=sys.stderr, flush=True)
