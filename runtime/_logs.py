"""`acrl logs RUN [--follow]`: a recorded run's job logs, from Ray, after the terminal that launched it is gone.

Ray keeps a job's logs as long as its head runs: they are asked for with the record's address and submission
id (runtime/_ray_jobs.py). When Ray no longer has the job (a restarted head) or cannot be reached, the record's
train.log beside run.json is shown instead: train.sh's output as `acrl run` kept it on the launching machine.
Which of the two is shown is said on stderr, so that stdout holds the logs alone.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import IO

from acrl.compiler import AcrlError

from . import _ray_jobs as ray_jobs
from ._records import LOG, local_log
from ._run_ref import find_record, read_record

CHUNK = 1 << 16


def show_logs(ref: str, out: IO[str], err: IO[str], runs_dir: str = "runs", address: str | None = None,
              follow: bool = False) -> int:
    """Print the logs of the run ``ref`` names; the exit status (0 shown, 1 when Ray could not be asked and
    there was nothing else to show, or --follow could not follow)."""
    path = find_record(ref, runs_dir)
    record = read_record(path)
    if isinstance(record.get("kuberay"), dict):  # a RayJob's run: its pods' logs, with kubectl (issue 18)
        from ._kube_status import show_logs as show_kube_logs  # lazy: only records of --target kuberay runs

        return show_kube_logs(path, record, out, err, follow)
    asked = ray_jobs.job_address(record.get("ray_address"), address)
    sid, where = record["submission_id"], ray_jobs.shown(asked)
    try:
        if follow:
            client = ray_jobs.open_follow(asked, sid)
            _say(err, f"acrl: following the logs of Ray job {sid} at {where} (Ctrl-C stops following, not the job)")
            ray_jobs.follow_logs(client, asked, sid, out)
        else:
            text = ray_jobs.job_logs(asked, sid)
            _say(err, f"acrl: the logs of Ray job {sid} at {where}")
            out.write(text)
            out.flush()
        return 0
    except ray_jobs.JobNotFound:
        reason, unavailable = (f"Ray at {where} has no job {sid} (its head was restarted since, or the job was never "
                               "submitted)"), None
    except ray_jobs.RayUnavailable as exc:
        reason, unavailable = exc.message, exc
    log = local_log(path, record)
    if log is None:
        if unavailable is not None:
            raise unavailable.evolve(message=f"{unavailable.message}; and {path.parent} holds no {LOG}")
        raise AcrlError(f"{reason}, and {path.parent} holds no {LOG}: there are no logs to show",
                        hint="the logs are where the job ran: the head's /tmp/ray/session_*/logs/job-driver-*.log")
    _say(err, f"acrl: {reason}: showing {log} instead (train.sh's output, as `acrl run` kept it on the launching "
              "machine)")
    _copy(log, out)
    if follow:
        _say(err, "acrl: not following: Ray " + ("could not be asked" if unavailable else "no longer has the job"))
        return 1 if unavailable is not None else 0
    return 0


def _copy(log: Path, out: IO[str]) -> None:
    sink = getattr(out, "buffer", None)
    with open(log, "rb") as f:
        while chunk := f.read(CHUNK):
            if sink is not None:
                out.flush()
                sink.write(chunk)
            else:
                out.write(chunk.decode("utf-8", "replace"))
    (sink or out).flush()


def _say(err: IO[str], message: str) -> None:
    with contextlib.suppress(OSError):
        print(message, file=err, flush=True)
