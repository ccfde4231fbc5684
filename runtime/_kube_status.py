"""`acrl status RUN` and `acrl logs RUN` of a run `acrl run` launched as a KubeRay RayJob (its record's ``kuberay``;
issue 18): KubeRay is asked instead of Ray, with kubectl at the record's context and namespace (runtime/_kube.py).

The state: ``kubectl get rayjob NAME -o json``, read as the Ray job it ran (:func:`as_ray_job`) so that the record's
verdict (runtime/_status.py: a launcher that died, a record never finished, --fix-record) is the one Ray runs get. The
logs: the submitter Job's pod (``kubectl logs job/NAME``: `ray job submit` and the job's log, rayjob_controller.go:724
at v1.7.0), else the Ray head pod's (``kubectl logs -l ray.io/cluster=CLUSTER,ray.io/node-type=head``, the labels
KubeRay gives it, utils/constant.go:19-20), else the record's own log (rayjob.log, what `acrl run` showed); stderr
says which.
"""

from __future__ import annotations

import calendar
import contextlib
import os
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from acrl.compiler import AcrlError

from . import _ray_jobs as ray_jobs
from ._kube import EXIT_CODE, Kubectl, KubectlError, RayJobState, find_kubectl, rayjob_state
from ._records import RECORD, local_log


class KubeUnavailable(ray_jobs.RayUnavailable):
    """kubectl could not ask the API server about the RayJob (exit 1), as RayUnavailable is for Ray."""

    def __init__(self, error: KubectlError) -> None:
        AcrlError.__init__(self, error.message, hint=error.hint)
        self.shown = "kubectl"
        self.reason = error.message


def kubectl_of(record: Mapping[str, Any]) -> tuple[Kubectl, str, str]:
    """(kubectl at the record's context, the namespace, the RayJob's name)."""
    kube = record["kuberay"]
    return Kubectl(find_kubectl() or "kubectl", str(kube.get("context"))), str(kube.get("namespace")), \
        str(kube.get("name"))


def where(record: Mapping[str, Any]) -> str:
    """The RayJob as `acrl status` names it."""
    kube = record["kuberay"]
    return f"RayJob {kube.get('name')} in namespace {kube.get('namespace')} (context {kube.get('context')})"


def _seconds(text: str | None) -> float | None:
    """An RFC 3339 time of the API server (2026-11-21T16:10:00Z) as seconds since the epoch."""
    if not text:
        return None
    try:
        return float(calendar.timegm(time.strptime(text.replace("Z", "").split(".")[0], "%Y-%m-%dT%H:%M:%S")))
    except ValueError:
        return None


def as_ray_job(state: RayJobState) -> ray_jobs.RayJob:
    """The RayJob's state in Ray's job terms (what runtime/_status.py reads): SUCCEEDED, FAILED or STOPPED once
    KubeRay says it ended (a job KubeRay failed, a deadline say, is FAILED whatever Ray said), else Ray's PENDING or
    RUNNING (PENDING while the cluster starts)."""
    if state.terminal:
        record_status, code = state.outcome()
        status = {"succeeded": "SUCCEEDED", "cancelled": "STOPPED"}.get(record_status, "FAILED")
    else:
        status, code = (state.job_status if state.job_status in ("PENDING", "RUNNING") else "PENDING"), None
    found = EXIT_CODE.search(state.message or "")
    exit_code = int(found.group(1)) if found and state.job_status == "FAILED" else (code if status == "FAILED"
                                                                                       else None)
    return ray_jobs.RayJob(status, state.summary(), _seconds(state.ray_start or state.start_time),
                           _seconds(state.ray_end or state.end_time) if state.terminal else None, exit_code)


def ask(record: Mapping[str, Any]) -> tuple[ray_jobs.RayJob | None, KubeUnavailable | None, bool]:
    """(the Ray job of the record's RayJob or None, why kubectl could not ask, whether the RayJob was found)."""
    kubectl, namespace, name = kubectl_of(record)
    try:
        state = rayjob_state(kubectl.get_json("rayjob", name, namespace=namespace))
    except KubectlError as exc:
        if exc.kind == "notfound":
            return None, None, False
        return None, KubeUnavailable(exc), False
    return as_ray_job(state), None, True


def show_logs(path: Path, record: Mapping[str, Any], out: IO[str], err: IO[str], follow: bool) -> int:
    """Print the run's job log: the submitter's pod, else the head pod, else the record's log."""
    kubectl, namespace, name = kubectl_of(record)
    cluster = record["kuberay"].get("cluster")
    sources = [(f"the submitter Job {name}", ["logs", *(["-f"] if follow else []), f"job/{name}"])]
    if isinstance(cluster, str) and cluster:
        sources.append((f"the Ray head pod of {cluster}", ["logs", *(["-f"] if follow else []), "--tail=-1", "-l",
                                                           f"ray.io/cluster={cluster},ray.io/node-type=head"]))
    reasons = []
    for label, args in sources:
        argv = kubectl.argv(*args, namespace=namespace)
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            reasons.append(f"cannot run kubectl: {exc.strerror or exc}")
            break
        _say(err, f"acrl: the log of {label} ({kubectl.shown(*args, namespace=namespace)})"
             + (" (Ctrl-C stops following, not the job)" if follow else ""))
        assert proc.stdout is not None and proc.stderr is not None
        wrote = False
        try:
            while chunk := os.read(proc.stdout.fileno(), 1 << 16):
                wrote = True
                _write(out, chunk)
        except KeyboardInterrupt:
            proc.terminate()
            return 0
        finally:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=10)
            if proc.poll() is None:
                proc.kill()
        message = proc.stderr.read().decode("utf-8", "replace").strip()
        if proc.returncode == 0 and (wrote or not message):
            return 0
        reasons.append(f"{label}: {message.splitlines()[-1][:300] if message else f'exit {proc.returncode}'}")
    log = local_log(path, dict(record))
    if log is None:
        look = kubectl.shown("get", "rayjob", name, namespace=namespace)
        raise AcrlError(f"no log of the RayJob could be read ({'; '.join(reasons)}), and {path.parent} holds no "
                        "log of the run", hint=f"the pods may be gone: {look}")
    _say(err, f"acrl: {'; '.join(reasons)}: showing {log} instead (what `acrl run` showed, kept beside {RECORD})")
    with open(log, "rb") as f:
        while chunk := f.read(1 << 16):
            _write(out, chunk)
    return 0


def _write(out: IO[str], chunk: bytes) -> None:
    sink = getattr(out, "buffer", None)
    if sink is not None:
        out.flush()
        sink.write(chunk)
        sink.flush()
    else:
        out.write(chunk.decode("utf-8", "replace"))
        out.flush()


def _say(err: IO[str], message: str) -> None:
    with contextlib.suppress(OSError):
        print(message, file=err, flush=True)
