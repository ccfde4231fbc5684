"""`acrl status RUN`: a recorded run, with what Ray says of its job now, after the terminal that launched it
is gone.

The record says how the launch went (runtime/_records.py); Ray says how the job is. A record still
"running" is read with its launcher: one whose `acrl run` is gone from this machine (the check `acrl runs`
makes) and whose job Ray does not run is shown as launcher-died, or as Ray's final state with a note that
the record was never finished, never as "running" forever. ``--fix-record`` writes Ray's final state into
such a record, and only into such a one: its launcher is known gone (so nothing else writes the file) and
Ray says the job has ended.
"""

from __future__ import annotations

import calendar
import socket
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import attrs

from acrl.compiler import AcrlError, ManifestShapeError

from . import _ray_jobs as ray_jobs
from ._records import RECORD, RunRecord, launcher_gone, public_address, utc, write_record
from ._run_ref import FIXED, find_record, read_record, recorded_what_ran, resume_known

FINAL = ("succeeded", "failed", "cancelled")


@attrs.frozen
class RunStatus:
    """One run as `acrl status` shows it."""

    path: Path
    record: Mapping[str, Any]
    state: str  # what the run is now, all told: a record status (STATUSES)
    launcher: str  # "alive", "gone" (on this machine), "elsewhere" (another host: cannot be told) or "unknown"
    address: str | None  # the Ray address asked, without user:password
    job: ray_jobs.RayJob | None  # None: Ray has no such job, or was not asked
    ray_error: ray_jobs.RayUnavailable | None  # why Ray could not be asked (naming the address, redacted)
    notes: tuple[str, ...]
    fixable: bool  # --fix-record may write Ray's final state into the record

    def as_json(self) -> dict[str, Any]:
        r = self.record
        ray: dict[str, Any] = {"address": self.address, "submission_id": r.get("submission_id")}
        if self.ray_error is not None:
            ray["error"], ray["fix"] = self.ray_error.message, self.ray_error.hint
        else:
            ray["job"] = self.job.as_json() if self.job is not None else None
        return {"record": str(self.path), "exp_id": r.get("exp_id"), "run_id": r.get("run_id"), "state": self.state,
                "record_status": r.get("status"), "launcher": self.launcher, "ray": ray,
                "started_at": r.get("started_at"), "ended_at": r.get("ended_at") or _ray_time(self.job, "end_time"),
                "duration_s": self.duration(), "exit_status": r.get("exit_status"),
                "bundle": r.get("bundle"), "bundle_hash": r.get("bundle_hash"),
                "preflight": preflight_counts(r.get("preflight")),
                "resumed_from": r.get("resumed_from") if recorded_what_ran(r) else "not recorded",
                "notes": list(self.notes), "fixable": self.fixable}

    def duration(self) -> float | None:
        if isinstance(self.record.get("duration_s"), int | float):
            return float(self.record["duration_s"])
        start = parse_utc(self.record.get("started_at"))
        end = parse_utc(self.record.get("ended_at"))
        if end is None and self.job is not None:
            end = self.job.end_time if self.job.terminal else (time.time() if self.state == "running" else None)
        return round(end - start, 3) if start is not None and end is not None else None


def run_status(ref: str, runs_dir: str = "runs", address: str | None = None) -> RunStatus:
    """The status of the run ``ref`` names (see _run_ref), asking Ray at the record's address (or ``address``)."""
    path = find_record(ref, runs_dir)
    record = read_record(path)
    launcher = _launcher(record)
    job: ray_jobs.RayJob | None = None
    error: ray_jobs.RayUnavailable | None = None
    if isinstance(record.get("kuberay"), Mapping):  # a RayJob: KubeRay is asked, with kubectl (issue 18)
        from . import _kube_status  # lazy: only records of --target kuberay runs

        job, error, found = _kube_status.ask(record)
        asked: str | None = _kube_status.where(record)
    else:
        asked = ray_jobs.job_address(record.get("ray_address"), address)
        try:
            job = ray_jobs.job_info(asked, record["submission_id"])
            found = True
        except ray_jobs.JobNotFound:
            found = False
        except ray_jobs.RayUnavailable as exc:
            found, error = False, exc
    state, notes, fixable = verdict(record, launcher, job, asked=error is None and not found)
    if error is not None:
        notes = [*notes, ("kubectl" if record.get("kuberay") else "Ray") + " could not be asked: the state above is "
                 "the record's"]
    return RunStatus(path, record, state, launcher, public_address(asked), job, error, tuple(notes),
                     fixable and path.name == RECORD)


def _launcher(record: Mapping[str, Any]) -> str:
    who = record.get("launcher")
    if not isinstance(who, Mapping) or not isinstance(who.get("host"), str):
        return "unknown"
    if launcher_gone(record):
        return "gone"
    return "alive" if who["host"] == socket.gethostname() else "elsewhere"


def verdict(record: Mapping[str, Any], launcher: str, job: ray_jobs.RayJob | None,
            asked: bool = False) -> tuple[str, list[str], bool]:
    """(what the run is now, notes, whether --fix-record may write Ray's final state) from the record's status,
    whether its launcher is alive, and Ray's job (None: not known to Ray, ``asked``, or Ray not asked)."""
    status = str(record.get("status", "unknown"))
    sid, run = record.get("submission_id", "?"), record.get("run_id", "RUN")
    who = record.get("launcher")
    who = who if isinstance(who, Mapping) else {}
    gone = ("its `acrl run` (pid {pid} on {host}) is gone (killed, or the machine restarted)"
            .format(pid=who.get("pid", "?"), host=who.get("host", "?")))
    if status == "running":
        if job is not None and not job.terminal:
            return "running", [f"{gone}: the job runs on, but nothing will finish the record; follow it with "
                               f"`acrl logs --follow {run}`, and once it has ended `acrl status --fix-record {run}` "
                               "writes Ray's final state into the record"] if launcher == "gone" else [], False
        if job is not None:
            final = ray_jobs.AS_RECORD_STATUS[job.status]
            if launcher == "gone":
                return final, [f"the record was never finished: {gone}; Ray says the job {job.status}; `acrl status "
                               f"--fix-record {run}` writes that into the record"], True
            if launcher == "alive":
                return final, [f"its `acrl run` (pid {who.get('pid')}) is still finishing the record"], False
            return final, [f"the record, written by `acrl run` on {who.get('host', 'another host')}, was not finished: "
                           "that acrl run may still be finishing, or have died (which cannot be told from here)"], False
        if launcher == "gone":
            return "launcher-died", [f"{gone} without finishing the record" + (
                f", and Ray has no job {sid}: the head was restarted since, or the job was never submitted"
                if asked else "")], False
        if asked:
            return "running", [f"Ray has no job {sid} (yet): train.sh may still be starting the head or submitting "
                               "the job" + ("" if launcher == "alive" else ", or its `acrl run` died before it had "
                                            "submitted it")], False
        return "running", [], False
    if job is None:
        return status, [], False
    if status == "unknown":
        now = ray_jobs.AS_RECORD_STATUS.get(job.status, "running")
        return now, [f"the record says unknown (train.sh could not read the job's state when it ended); Ray says "
                     f"{job.status} now"], False
    if not job.terminal:
        kube = record.get("kuberay")
        stop = (f"kubectl --context {kube.get('context')} --namespace {kube.get('namespace')} delete rayjob "
                f"{kube.get('name')}" if isinstance(kube, Mapping) else
                f"ray job stop --address {public_address(record.get('ray_address'))} {sid}")
        return "running", [f"the record says {status}, but Ray still runs the job: stop it with `{stop}`"], False
    if ray_jobs.AS_RECORD_STATUS[job.status] != status:
        return status, [f"the record says {status} (train.sh's exit status), Ray says the job {job.status}"], False
    return status, [], False


def fix_record(found: RunStatus) -> RunRecord:
    """Write Ray's final state of the job into a record left "running" by a launcher that died; AcrlError,
    writing nothing, for any other record."""
    if not found.fixable or found.job is None:
        raise AcrlError(f"{found.path}: not fixed: {_unfixable(found)}", hint="--fix-record finishes only a record "
                        "left running by an `acrl run` that died while Ray ran the job to its end, on the machine "
                        "that launched it")
    job = found.job
    try:
        record = RunRecord.from_json(found.record)
    except ManifestShapeError as exc:
        raise AcrlError(f"{found.path}: not fixed: this acrl does not write records of its shape ({exc})",
                        hint="fix it with the acrl that launched the run") from None
    end = job.end_time if job.end_time is not None else time.time()
    start = parse_utc(record.started_at)
    code = {"SUCCEEDED": 0, "FAILED": job.driver_exit_code or 1}.get(job.status)
    fixed = attrs.evolve(record, status=ray_jobs.AS_RECORD_STATUS[job.status], exit_status=code, ended_at=utc(end),
                         duration_s=round(end - start, 3) if start is not None else None,
                         note=f"{FIXED} at {utc(time.time())} from Ray's state of the job: its `acrl run` died "
                         "before it could; exit_status is the job's (Ray's), not train.sh's")
    write_record(found.path.parent, fixed)
    return fixed


def _unfixable(found: RunStatus) -> str:
    """Why --fix-record leaves this record as it is."""
    status, who, job = found.record.get("status"), found.record.get("launcher"), found.job
    if found.ray_error is not None:
        return found.ray_error.message
    if status != "running":
        return f"the record is final already ({status})"
    if found.launcher == "alive":
        return f"its `acrl run` (pid {who.get('pid') if isinstance(who, Mapping) else '?'}) still runs: it finishes " \
            "the record itself"
    if found.launcher != "gone":
        host = who.get("host") if isinstance(who, Mapping) else None
        return f"its `acrl run` ran on {host or 'an unknown host'}: whether it is gone cannot be told from here"
    if job is None:
        return f"Ray has no job {found.record.get('submission_id')}: there is no final state to write"
    if not job.terminal:
        return f"Ray still runs the job ({job.status}): fix the record once it has ended"
    return f"{found.path.name} is not a run folder's run.json: only that file is rewritten"


def parse_utc(text: Any) -> float | None:
    """A record's time (2026-11-21T16:10:00.123Z) as seconds since the epoch; None when it is not one."""
    if not isinstance(text, str):
        return None
    try:
        whole, _, fraction = text.removesuffix("Z").partition(".")
        return calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) + float(f"0.{fraction or 0}")
    except ValueError:
        return None


def preflight_counts(entries: Any) -> dict[str, Any] | None:
    if not isinstance(entries, Sequence) or isinstance(entries, str):
        return None
    rows = [e for e in entries if isinstance(e, Mapping)]
    by = {s: [str(e.get("name")) for e in rows if e.get("status") == s] for s in ("passed", "failed", "skipped")}
    return {"passed": len(by["passed"]), "failed": by["failed"], "skipped": by["skipped"]}


def _ray_time(job: ray_jobs.RayJob | None, field: str) -> str | None:
    value = getattr(job, field) if job is not None else None
    return utc(value) if isinstance(value, float) else None


def format_status(found: RunStatus) -> str:
    """`acrl status`: one line per fact."""
    r, job = found.record, found.job
    rows = [("run", f"{r.get('exp_id')}/{r.get('run_id')}  ({found.path})"), ("status", found.state)]
    if found.state != r.get("status"):
        rows.append(("record says", str(r.get("status"))))
    kube = r.get("kuberay") if isinstance(r.get("kuberay"), Mapping) else None
    where = f"({found.address}, Ray job {r.get('submission_id') or '-'})" if kube else \
        f"at {found.address} ({r.get('submission_id')})"
    label = "RayJob" if kube else "Ray job"
    if found.ray_error is not None:
        rows.append((label, f"not asked {where}: {found.ray_error.reason}"))
    elif job is None:
        rows.append((label, f"none {where}"))
    elif kube:
        rows.append((label, f"{job.message} {where}"))
    else:
        rows.append((label, f"{job.status} {where}" + (f": {job.message}" if job.message else "")))
    rows.append(("started", str(r.get("started_at") or _ray_time(job, "start_time") or "-")))
    ended = r.get("ended_at")
    if not ended and job is not None and job.terminal:
        ended = f"{_ray_time(job, 'end_time') or '-'} (Ray's: the record has none)"
    rows.append(("ended", str(ended or "-")))
    seconds = found.duration()
    so_far = " so far" if found.state == "running" and not isinstance(r.get("duration_s"), int | float) else ""
    rows.append(("duration", f"{seconds:.1f} s{so_far}" if seconds is not None else "-"))
    code = r.get("exit_status")
    if code is None and job is not None and job.driver_exit_code is not None:
        rows.append(("exit status", f"- (the job's driver exited {job.driver_exit_code}, says Ray)"))
    else:
        rows.append(("exit status", "-" if code is None else str(code)))
    rows.append(("bundle", f"{r.get('bundle', '-')} (sha256 {str(r.get('bundle_hash', '-'))[:12]})"))
    counts = preflight_counts(r.get("preflight"))
    if counts is not None:
        rows.append(("preflight", f"{counts['passed']} passed, {len(counts['failed'])} failed"
                     + (f" ({', '.join(counts['failed'])})" if counts["failed"] else "")
                     + f", {len(counts['skipped'])} skipped" + (f" ({', '.join(counts['skipped'])})"
                                                              if counts["skipped"] else "")))
    rows.append(("resumed from", resumed_text(r)))
    width = max(len(k) for k, _ in rows) + 1
    lines = [f"{k + ':':<{width}} {v}" for k, v in rows]
    return "\n".join(lines + [f"note: {n}" for n in found.notes])


def resumed_text(record: Mapping[str, Any]) -> str:
    """run.json's resumed_from, in words; "not recorded" for a record written before acrl recorded it."""
    came = record.get("resumed_from")
    if not isinstance(came, Mapping):
        if not recorded_what_ran(record):
            return "not recorded"
        if record.get("status") == "running":  # acrl run writes what train.sh decided when the run ends
            return "not known yet (the record says it when the run ends)"
        if not resume_known(record):
            return "not known (its `acrl run` died before writing it; train.log's acrl-resume line says it)"
        return "nothing: started from the model"
    where = f"{came['exp_id']}/" if isinstance(came.get("exp_id"), str) else ""
    saver = f"saved by run {where}{came['run_id']}" if came.get("run_id") else "saved by a run with no record here"
    data = came.get("data_state")
    state = "" if not isinstance(data, bool) else f"; {'with' if data else 'without'} the data loader's state"
    start = f", from rollout {came['start_rollout_id']}" if isinstance(came.get("start_rollout_id"), int) else ""
    return f"{came.get('checkpoint_dir')} at iteration {came.get('iteration')}{start} ({saver}{state})"


def print_status(found: RunStatus, out: IO[str], as_json: bool) -> None:
    if as_json:
        import json  # lazy: only --json prints JSON

        print(json.dumps(found.as_json(), indent=2, sort_keys=True), file=out)
    else:
        print(format_status(found), file=out)
