"""`acrl run BUNDLE`: verify the manifest, run the preflight checks, run train.sh, keep a record. A bundle compiled
with --target kuberay is applied with kubectl instead, its RayJob watched and recorded (runtime/_kube_run.py; --target
ray runs its train.sh).

The generated train.sh stays the single description of the launch: this runs it with bash, with
ACRL_RUN_ID (so the Ray submission id is known in advance), for --address ACRL_RAY_ADDRESS and for
--resume ACRL_RESUME=required exported (train.sh then resumes from its checkpoint or refuses to start;
its ``acrl-resume:`` line says what it did, kept in the record as ``resumed_from``). train.sh
runs in its own process group (runtime/_stream.py) with default signal dispositions (a bash started
with SIGINT ignored could not trap it), so a Ctrl-C at the terminal reaches only acrl, which
forwards it once to train.sh (whose trap stops the Ray job). If train.sh has not ended
ACRL_STOP_GRACE seconds later (default 90), or on a second signal, its whole group gets SIGTERM,
then SIGKILL 5 s later. A final record is always written: cancelled / unknown / failed / succeeded,
with a note giving the `ray job stop` command when the job may still be running; with what ran
(runtime/_provenance.py: data fingerprints, stack, argv, runtime env, W&B).
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO

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

from . import _kube_run, _provenance, _records
from ._preflight import bundle_info as _bundle_info
from ._preflight import checks as _preflight
from ._preflight.kube import RAYJOB_FILE, KubeTarget, read_target
from ._preflight.kube_checks import kube_checks
from ._preflight.python import train_sh_env
from ._settings import env_seconds
from ._stream import DEFAULT_STOP_GRACE_S, RESUME_MARKER, Outcome, _say, _say_to
from ._stream import run_streamed as _run_streamed  # a module global: tests replace it

EXIT_OK, EXIT_FAILED = 0, 1
EXIT_UNKNOWN = 75  # train.sh: the Ray job's state is unknown (it may still be running)


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
    resume: bool = False  # ACRL_RESUME=required for train.sh: resume from the checkpoint, or refuse to start
    # issue 18: "ray" runs train.sh, "kuberay" applies rayjob.yaml with kubectl; None: kuberay when the bundle has one
    target: str | None = None
    context: str | None = None  # kubectl's context (default: its current one)
    namespace: str | None = None  # the RayJob's namespace when rayjob.yaml names none


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
    kube = _kube_target(options, bundle.files)
    if kube is not None:
        address = None  # the RayJob makes its own Ray cluster
    verification = bundle.verification
    if not verification.expected_hash_ok or (not verification.intact and not options.allow_modified):
        raise ModifiedBundleError(verification)
    print(verification.format() if verification.intact else
          verification.report() + "\n  --allow-modified: running it as it is", file=out)
    changed = {*verification.modified, *verification.added, *verification.removed}
    info = _bundle_info.read_bundle_info(options.bundle, address=address, modified=changed,
                                       files=bundle.files, manifest=bundle.manifest if bundle.intact else None,
                                       resume=options.resume, runs_dir=options.runs_dir)
    results = _preflight.run_preflight(info, options.skip, None if kube is None else kube_checks(kube))
    print(_preflight.format_table(results), file=out)
    failed = [r.name for r in results if r.status == "failed"]
    if failed:
        # Every failed check is named: skipping one leaves the others failing (train.sh's own refusal, its
        # checkpoint block, fails slime-parser too, so a failed checkpoint check comes first).
        named = sorted(failed, key=lambda name: name != "checkpoint")
        raise PreflightFailed(f"preflight failed ({', '.join(failed)}): nothing was run",
                              hint="fix what the table says, or skip " + ("them" if len(named) > 1 else "it") + ": " +
                              " ".join(f"--skip {name}" for name in named))
    if kube is not None:  # apply rayjob.yaml, watch the RayJob, record (runtime/_kube_run.py)
        return _kube_run.launch(kube, bundle, verification, info, results, runs_dir=options.runs_dir,
                                dry_run=options.dry_run, allow_modified=options.allow_modified, out=out)
    exp_id = bundle.exp_id  # one safe path component: read_manifest checked it
    run_id = _records.new_run_id()  # --dry-run's; a run takes the first free one (_records.new_run_dir)
    train_sh = str(Path(options.bundle) / "train.sh")
    # What is shown and recorded; a user:password in the address is left out (the run itself gets it).
    shown_address = _records.public_address(address)
    env_shown = [f"ACRL_RUN_ID={run_id}"] + ([f"ACRL_RAY_ADDRESS={shown_address}"] if shown_address else [])
    env = train_sh_env(info)  # what preflight ran train.sh with (its argv, slime-parser), and ACRL_RUN_ID
    if env.get("ACRL_RESUME"):  # --resume's, or the user's own: how train.sh decides to load a checkpoint
        value = env["ACRL_RESUME"]
        env_shown.append(f"ACRL_RESUME={value if value.isalpha() and len(value) < 20 else '(other)'}")
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
        preflight=[_records.PreflightEntry(**r.as_json()) for r in results],  # type: ignore[arg-type]
        **_provenance.gather(info))
    env["ACRL_RUN_ID"] = run_id
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
        resumed = _provenance.resumed_from(outcome.marked.get(RESUME_MARKER), Path(options.runs_dir), exp_id,
                                           run_id)
        _finish_record(run_dir, attrs.evolve(record, resumed_from=resumed), outcome, started, out)
    return outcome.code


def _kube_target(options: RunOptions, files: Mapping[str, bytes]) -> KubeTarget | None:
    """The kubectl launch of a bundle with rayjob.yaml (--target kuberay, its default), or None for train.sh; a
    usage error for the options that belong to the other launch."""
    kuberay = options.target == "kuberay" or (options.target is None and RAYJOB_FILE in files)
    if not kuberay:
        given = [f"--{name}" for name in ("context", "namespace") if getattr(options, name)]
        if given:
            raise UsageError(f"{', '.join(given)}: only for a KubeRay launch (--target kuberay)",
                             hint="leave it out: train.sh runs on a Ray cluster (--address)")
        return None
    if RAYJOB_FILE not in files:
        raise UsageError(f"--target kuberay: {options.bundle} has no {RAYJOB_FILE}",
                         hint="compile the spec with acrl-compile --target kuberay")
    given = [f"--{name}" for name in ("address", "resume") if getattr(options, name)]
    if given:
        raise UsageError(f"{', '.join(given)}: not for a KubeRay launch (kubectl applies {RAYJOB_FILE}, which runs "
                         "no train.sh)", hint="for --resume set [checkpoint] resume = \"required\" and compile again "
                         "(the RayJob's checkpoint.sh honours it); to run train.sh on a Ray cluster: --target ray")
    return read_target(files, options.context, options.namespace)


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
    path = _records.write_final_record(run_dir, record, _say)
    _say_to(out, f"run {record.run_id} {status} (exit status {code}); record: {path}")
    if outcome.details:  # Ray's whole output of a failed ray command, kept off the terminal (runtime/_stream.py)
        _say_to(out, f"run {record.run_id}: Ray's whole output is in {run_dir / _records.LOG}")
    if may_run:
        _say_to(out, f"run {record.run_id}: {record.note}")


def _stop_grace() -> float:
    """ACRL_STOP_GRACE: seconds train.sh gets to stop the Ray job after the first signal."""
    return env_seconds("ACRL_STOP_GRACE", DEFAULT_STOP_GRACE_S,
                       "set it to how long train.sh may take to stop the Ray job (default 90), or unset it")


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
