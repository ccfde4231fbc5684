"""`acrl run BUNDLE`: verify the manifest, run the preflight checks, run train.sh, keep a record.

The generated train.sh stays the single description of the launch: this runs it with bash, with
ACRL_RUN_ID (so the Ray submission id is known in advance) and, for --address, ACRL_RAY_ADDRESS
exported. train.sh runs in its own process group, so a Ctrl-C at the terminal reaches only acrl,
which forwards it once to train.sh (whose trap stops the Ray job), waits for it and records the
run as cancelled.
"""

from __future__ import annotations

import contextlib
import os
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

from acrl.compiler._errors import AcrlError, UsageError
from acrl.compiler._secrets import address_has_credentials, redact
from acrl.compiler._verify import Verification, verify_bundle
from acrl.compiler._version import __version__

from . import _preflight, _records
from ._python_checks import train_sh_env

EXIT_OK, EXIT_FAILED = 0, 1


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
            super().__init__(verification.format() + "\n  --expect-hash: the bundle is not the one reviewed, "
                             "so it is not run (not even with --allow-modified)")
        else:
            super().__init__(verification.format() +
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
    verification = verify_bundle(options.bundle, expect_hash=options.expect_hash)
    if not verification.expected_hash_ok or (not verification.intact and not options.allow_modified):
        raise ModifiedBundleError(verification)
    print(verification.format() if verification.intact else
          verification.format().rsplit("\n  fix:", 1)[0] + "\n  --allow-modified: running it as it is", file=out)
    changed = {*verification.modified, *verification.added, *verification.removed}
    info = _preflight.read_bundle_info(options.bundle, address=address, modified=changed,
                                       files=verification.files,
                                       manifest=verification.manifest if verification.intact else None)
    results = _preflight.run_preflight(info, options.skip)
    print(_preflight.format_table(results), file=out)
    failed = [r.name for r in results if r.status == "failed"]
    if failed:
        raise PreflightFailed(f"preflight failed ({', '.join(failed)}): nothing was run\n"
                              f"  fix: fix what the table says, or skip a check with --skip {failed[0]}")
    exp_id = verification.manifest["exp_id"]  # one safe path component: read_manifest checked it
    run_id = _records.new_run_id()
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
    bundle_hash = verification.bundle_hash
    record: dict[str, Any] = {
        "acrl_version": __version__, "exp_id": exp_id, "run_id": run_id, "bundle": str(Path(options.bundle).resolve()),
        "bundle_hash": bundle_hash, "submission_id": f"acrl-{exp_id}-{bundle_hash[:12]}-{run_id}",
        "ray_address": _records.public_address(_ray_address(info)), "host": socket.gethostname(),
        "command": [*env_shown, *command], "allow_modified": options.allow_modified,
        "modified_files": sorted(changed), "expected_hash": verification.expected_hash,
        "preflight": [r.as_json() for r in results], "status": "running", "exit_status": None,
        "started_at": None, "ended_at": None, "duration_s": None, "log": _records.LOG,
    }
    env = {**train_sh_env(info), "ACRL_RUN_ID": run_id}  # what preflight's slime-parser ran train.sh with
    try:
        run_dir.mkdir(parents=True, exist_ok=False)
        started = time.time()
        record["started_at"] = _records.utc(started)
        _records.write_record(run_dir, record)
        log = open(run_dir / _records.LOG, "wb")  # noqa: SIM115 (closed below, after the child)
    except OSError as exc:
        raise _records.runs_dir_error(options.runs_dir, exc) from None
    print(f"run {run_id}: {shlex.join(env_shown)} {shlex.join(command)}  (log: {run_dir / _records.LOG})",
          file=out, flush=True)
    with log:
        code, cancelled = _run_streamed(command, env, log, out)
    ended = time.time()
    status = "cancelled" if cancelled else "succeeded" if code == 0 else "failed"
    record.update(status=status, exit_status=code, ended_at=_records.utc(ended),
                  duration_s=round(ended - started, 3))
    _records.write_record(run_dir, record)
    print(f"run {run_id} {status} (exit status {code}); record: {run_dir / _records.RECORD}", file=out)
    return code


def cluster_address(option: str | None) -> str | None:
    """The existing cluster `acrl run` targets: --address, else ACRL_RAY_ADDRESS from the environment
    (train.sh reads it too), else None (the spec's, or a local head). An address with user:password
    is taken from the environment only: on the command line it is in the process list (ps) and the
    shell's history, so --address with one is a usage error (exit 2), its password never shown."""
    if option and address_has_credentials(option):
        raise UsageError(f"--address {redact(option)}: an address with user:password on the command line is "
                         "visible to every user of this machine (ps) and kept in the shell's history; nothing was "
                         "run\n  fix: export ACRL_RAY_ADDRESS with the authenticated address (read -rs "
                         "ACRL_RAY_ADDRESS; export ACRL_RAY_ADDRESS) and run acrl run without --address")
    return option or os.environ.get("ACRL_RAY_ADDRESS") or None


def _ray_address(info: _preflight.BundleInfo) -> str:
    """The address train.sh submits to: --address, the spec's, or the local head's dashboard."""
    return info.cluster_address or f"http://127.0.0.1:{info.get('cluster.dashboard_port', 8265)}"


def _run_streamed(command: Sequence[str], env: dict[str, str], log: IO[bytes], out: IO[str]) -> tuple[int, bool]:
    """Run ``command`` in its own process group, its stdout and stderr copied to ``out`` and ``log``
    as they come (partial lines included: progress output is not held back). SIGINT and SIGTERM to
    this process are forwarded once, SIGHUP as SIGTERM (train.sh traps INT and TERM); later ones only
    say that the job is being stopped. A terminal that goes away stops the copy to it, not the run.
    Returns (exit status, whether a signal was forwarded)."""
    try:
        proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)
    except OSError as exc:
        log.write(f"acrl: cannot start {command[0]}: {exc}\n".encode())
        _say(f"acrl: cannot start {command[0]}: {exc.strerror or exc}")
        return 127, False
    forwarded: list[int] = []

    def forward(signum: int, frame: FrameType | None) -> None:
        if forwarded:
            _say("acrl: still stopping the Ray job; waiting for train.sh")
            return
        forwarded.append(signum)
        _say(f"acrl: {signal.Signals(signum).name}: asking train.sh to stop the Ray job")
        with contextlib.suppress(ProcessLookupError):  # it has just exited
            proc.send_signal(signal.SIGTERM if signum == signal.SIGHUP else signum)

    previous: dict[int, Any] = {}
    with contextlib.suppress(ValueError):  # not the main thread (a library caller): signals stay as they are
        for caught in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            previous[caught] = signal.signal(caught, forward)
    try:
        assert proc.stdout is not None
        source, sink = proc.stdout.fileno(), getattr(out, "buffer", None)
        terminal = True
        while chunk := os.read(source, 65536):
            log.write(chunk)
            log.flush()
            if terminal:
                try:
                    if sink is not None:
                        out.flush()
                        sink.write(chunk)
                        sink.flush()
                    else:
                        out.write(chunk.decode("utf-8", "replace"))
                        out.flush()
                except OSError:  # BrokenPipeError, or EIO from a closed terminal
                    terminal = False
        code = proc.wait()
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
        for restored, handler in previous.items():
            signal.signal(restored, handler)
    return code, bool(forwarded)


def _say(message: str) -> None:
    with contextlib.suppress(OSError):
        print(message, file=sys.stderr, flush=True)
