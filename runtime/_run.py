"""`acrl run BUNDLE`: verify the manifest, run the preflight checks, run train.sh, keep a record.

The generated train.sh stays the single description of the launch: this runs it with bash, with
ACRL_RUN_ID (so the Ray submission id is known in advance) and, for --address, ACRL_RAY_ADDRESS
exported. train.sh runs in its own process group with default signal dispositions (a bash started
with SIGINT ignored could not trap it), so a Ctrl-C at the terminal reaches only acrl, which
forwards it once to train.sh (whose trap stops the Ray job). If train.sh has not ended
ACRL_STOP_GRACE seconds later (default 90), or on a second signal, its whole group gets SIGTERM,
then SIGKILL 5 s later. A final record is always written: cancelled / unknown / failed / succeeded,
with a note giving the `ray job stop` command when the job may still be running.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType
from typing import IO, Any

import attrs

from acrl.compiler import (
    AcrlError,
    UsageError,
    Verification,
    __version__,
    address_has_credentials,
    read_bundle,
    redact,
)

from . import _records
from ._preflight import bundle_info as _bundle_info
from ._preflight import checks as _preflight
from ._preflight.python import train_sh_env

EXIT_OK, EXIT_FAILED = 0, 1
EXIT_UNKNOWN = 75  # train.sh: the Ray job's state is unknown (it may still be running)
DEFAULT_STOP_GRACE_S = 90.0  # train.sh's own `ray job stop` is bounded by 60 s (ACRL_RAY_TIMEOUT)
KILL_AFTER_S = 5.0  # from SIGTERM to the group to SIGKILL


@attrs.frozen
class RunOptions:
    """The command line of `acrl run`."""

    bundle: str
    dry_run: bool = False
    skip: tuple[str, ...] = ()
    allow_modified: bool = False
    address: str | None = None
    runs_dir: str = "runs"
    expect_hash: str | None = None  # the bundle hash the runner reviewed: anything else is refused


class ModifiedBundleError(AcrlError):
    """The bundle's files differ from its manifest, and --allow-modified was not given (exit 1)."""

    def __init__(self, verification: Verification) -> None:
        if not verification.expected_hash_ok:  # --allow-modified never overrides the hash the runner pinned
            super().__init__(verification.report(), hint=verification.fix() + "\n  --expect-hash: the bundle is not "
                             "the one reviewed, so it is not run (not even with --allow-modified)")
        else:
            super().__init__(verification.report(), hint=verification.fix() +
                             "\n  or run it as it is with --allow-modified (recorded in run.json)")


class PreflightFailed(AcrlError):
    """At least one preflight check failed (exit 1); nothing was run."""


def run_bundle(options: RunOptions, out: IO[str] | None = None) -> int:
    """Verify, preflight, then (unless dry-run) run train.sh and record it. Returns the exit status:
    train.sh's, or 1 when the bundle is refused or a check fails (raised as an AcrlError)."""
    out = out or sys.stdout
    address = cluster_address(options.address)
    # Everything below is taken from what was verified: the files as read here, and manifest fields
    # (exp_id, derived, ...) only when the bundle hash covering them checked out.
    bundle = read_bundle(options.bundle, expect_hash=options.expect_hash)
    verification = bundle.verification
    if not verification.expected_hash_ok or (not verification.intact and not options.allow_modified):
        raise ModifiedBundleError(verification)
    print(verification.format() if verification.intact else
          verification.report() + "\n  --allow-modified: running it as it is", file=out)
    changed = {*verification.modified, *verification.added, *verification.removed}
    info = _bundle_info.read_bundle_info(options.bundle, address=address, modified=changed,
                                       files=bundle.files, manifest=bundle.manifest if bundle.intact else None)
    results = _preflight.run_preflight(info, options.skip)
    print(_preflight.format_table(results), file=out)
    failed = [r.name for r in results if r.status == "failed"]
    if failed:
        raise PreflightFailed(f"preflight failed ({', '.join(failed)}): nothing was run",
                              hint=f"fix what the table says, or skip a check with --skip {failed[0]}")
    exp_id = bundle.exp_id  # one safe path component: read_manifest checked it
    run_id = _records.new_run_id()  # --dry-run's; a run takes the first free one (_records.new_run_dir)
    train_sh = str(Path(options.bundle) / "train.sh")
    # What is shown and recorded; a user:password in the address is left out (the run itself gets it).
    shown_address = _records.public_address(address)
    env_shown = [f"ACRL_RUN_ID={run_id}"] + ([f"ACRL_RAY_ADDRESS={shown_address}"] if shown_address else [])
    command = ["bash", train_sh]
    run_dir = Path(options.runs_dir) / exp_id / run_id
    if options.dry_run:
        print(f"would run: {shlex.join(env_shown)} {shlex.join(command)}", file=out)
        print(f"would record: {run_dir / _records.RECORD} and {run_dir / _records.LOG}", file=out)
        return EXIT_OK
    stop_grace = _stop_grace()
    try:
        run_id, run_dir = _records.new_run_dir(Path(options.runs_dir) / exp_id)
    except OSError as exc:
        raise _records.runs_dir_error(options.runs_dir, exc) from None
    env_shown[0] = f"ACRL_RUN_ID={run_id}"
    bundle_hash = verification.bundle_hash
    record = _records.RunRecord(
        acrl_version=__version__, exp_id=exp_id, run_id=run_id, bundle=str(Path(options.bundle).resolve()),
        bundle_hash=bundle_hash, submission_id=f"acrl-{exp_id}-{bundle_hash[:12]}-{run_id}",
        ray_address=_records.public_address(_ray_address(info)), host=socket.gethostname(),
        launcher=_records.this_launcher(),
        command=[*env_shown, *command], allow_modified=options.allow_modified,
        modified_files=sorted(changed), expected_hash=verification.expected_hash,
        preflight=[_records.PreflightEntry(**r.as_json()) for r in results])  # type: ignore[arg-type]
    env = {**train_sh_env(info), "ACRL_RUN_ID": run_id}  # what preflight's slime-parser ran train.sh with
    try:
        started = time.time()
        record = attrs.evolve(record, started_at=_records.utc(started))
        _records.write_record(run_dir, record)
        log = open(run_dir / _records.LOG, "wb", buffering=0)  # noqa: SIM115 (closed below, after the child)
    except OSError as exc:
        raise _records.runs_dir_error(options.runs_dir, exc) from None
    _say_to(out, f"run {run_id}: {shlex.join(env_shown)} {shlex.join(command)}  (log: {run_dir / _records.LOG})")
    outcome = Outcome(code=EXIT_FAILED, error="acrl run ended before train.sh did")
    try:
        with log:
            outcome = _run_streamed(command, env, log, out, stop_grace=stop_grace)
    except KeyboardInterrupt:  # a Ctrl-C just before acrl's own handlers were in place: nothing started
        outcome = Outcome(128 + signal.SIGINT, cancelled=True)
        raise
    except BaseException as exc:
        outcome.error = f"acrl run failed while train.sh ran: {type(exc).__name__}: {exc}"
        raise
    finally:  # whatever happened, the record does not stay "running"
        _finish_record(run_dir, record, outcome, started, out)
    return outcome.code


@attrs.define
class Outcome:
    """How train.sh ended, as _run_streamed saw it."""

    code: int  # its exit status, 128+N when a signal N ended it (as a shell says)
    cancelled: bool = False  # a signal to acrl was forwarded to it
    escalated: bool = False  # its process group was sent SIGTERM / SIGKILL
    log_error: str | None = None  # why train.log stopped being written (the terminal still got all)
    error: str | None = None  # acrl's own failure while running it


def _finish_record(run_dir: Path, record: _records.RunRecord, outcome: Outcome, started: float, out: IO[str]) -> None:
    code = outcome.code
    if outcome.cancelled and code != 0:  # a job that succeeded as the signal came: succeeded
        status = "cancelled"
    elif code == EXIT_UNKNOWN:
        status = "unknown"
    else:
        status = "succeeded" if code == 0 else "failed"
    # The job may still run unless train.sh said how it ended: stopped by its trap (130/143), or final.
    may_run = (code == EXIT_UNKNOWN or outcome.escalated or (code > 128 and code not in (130, 143))
               or outcome.error is not None)
    ended = time.time()
    note = f"the job may still be running: ray job stop --address {record.ray_address} {record.submission_id}"
    record = attrs.evolve(record, status=status, exit_status=code, ended_at=_records.utc(ended),
                          duration_s=round(ended - started, 3), note=note if may_run else None,
                          log_error=outcome.log_error or None, error=outcome.error or None)
    try:
        path: Path | str = _records.write_record(run_dir, record)
    except OSError as exc:
        path = f"not written ({exc.strerror or exc})"
        _say(f"acrl: error: cannot write the final record {run_dir / _records.RECORD}: {exc.strerror or exc}")
    _say_to(out, f"run {record.run_id} {status} (exit status {code}); record: {path}")
    if may_run:
        _say_to(out, f"run {record.run_id}: {record.note}")


def _stop_grace() -> float:
    """ACRL_STOP_GRACE: seconds train.sh gets to stop the Ray job after the first signal."""
    value = os.environ.get("ACRL_STOP_GRACE", "")
    if not value:
        return DEFAULT_STOP_GRACE_S
    try:
        grace = float(value)
        if not 0 <= grace <= 86400:
            raise ValueError
    except ValueError:
        raise AcrlError(f"ACRL_STOP_GRACE={value!r}: not a number of seconds",
                        hint="set it to how long train.sh may take to stop the Ray job (default 90), "
                        "or unset it") from None
    return grace


def cluster_address(option: str | None) -> str | None:
    """The existing cluster `acrl run` targets: --address, else ACRL_RAY_ADDRESS from the environment
    (train.sh reads it too), else None (the spec's, or a local head). An address with user:password
    is taken from the environment only: on the command line it is in the process list (ps) and the
    shell's history, so --address with one is a usage error (exit 2), its password never shown."""
    if option and address_has_credentials(option):
        raise UsageError(f"--address {redact(option)}: an address with user:password on the command line is "
                         "visible to every user of this machine (ps) and kept in the shell's history; nothing was "
                         "run", hint="export ACRL_RAY_ADDRESS with the authenticated address (read -rs "
                         "ACRL_RAY_ADDRESS; export ACRL_RAY_ADDRESS) and run acrl run without --address")
    return option or os.environ.get("ACRL_RAY_ADDRESS") or None


def _ray_address(info: _bundle_info.BundleInfo) -> str:
    """The address train.sh submits to: --address, the spec's, or the local head's dashboard."""
    return info.cluster_address or f"http://127.0.0.1:{info.get('cluster.dashboard_port', 8265)}"


def _child_signals() -> None:
    """In the child, before exec: default dispositions and no blocked signals. A process started
    with SIGINT ignored (`acrl run B &` from a script) passes that on, and a non-interactive bash
    cannot trap a signal that was ignored when it started."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(signum, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def _run_streamed(command: Sequence[str], env: dict[str, str], log: IO[bytes], out: IO[str],
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
                                    preexec_fn=_child_signals)  # no other thread runs by now
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
                       log_error=copy.log_error)
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

    def write(self, chunk: bytes) -> None:
        if self.log is not None:
            try:
                self.log.write(chunk)
            except OSError as exc:  # ENOSPC, EFBIG, EIO: the run goes on, shown on the terminal
                self.log = None
                self.log_error = f"cannot write {_records.LOG}: {exc.strerror or exc}"
                _say(f"acrl: warning: {self.log_error}; the output goes on to the terminal only")
        if self.out is not None:
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


def _say_to(out: IO[str], message: str) -> None:
    with contextlib.suppress(OSError):
        print(message, file=out, flush=True)


def _say(message: str) -> None:
    with contextlib.suppress(OSError):
        print(message, file=sys.stderr, flush=True)
