"""kubectl for a --target kuberay bundle (issue 18): the bundle's RayJob as `acrl run`, `acrl status` and `acrl logs`
see it, and every kubectl call they make, bounded in time, its errors one line.

acrl talks to Kubernetes only through the kubectl on PATH, with the user's own kubeconfig (its context, credentials
and exec plugins such as `aws eks get-token`): no client library, no token of acrl's. Every call names the context and
namespace explicitly (``--context``, ``--namespace``), so that a `kubectl config use-context` in another terminal
never redirects a running `acrl run`. Each call is waited for ACRL_KUBECTL_TIMEOUT seconds at most (default 60).

A RayJob's state is its ``status`` as KubeRay v1.7.0 writes it (ray-operator/apis/ray/v1/rayjob_types.go):
``jobDeploymentStatus`` (KubeRay's lifecycle: "" New, Initializing, Running, Complete, Failed, ValidationFailed,
Suspending, Suspended, Retrying, Waiting), ``jobStatus`` (Ray's: "", PENDING, RUNNING, STOPPED, SUCCEEDED, FAILED),
``reason`` when it failed (AppFailed, DeadlineExceeded, PreRunningDeadlineExceeded, SubmissionFailed, ...),
``message``, ``jobId`` (the Ray submission id, NAME-xxxxx: util.go:374-376) and ``rayClusterName``. Complete and
Failed are final (IsJobDeploymentTerminal); so is ValidationFailed, which KubeRay leaves until the spec changes
(rayjob_controller.go:145-160). A failed attempt that backoffLimit retries is written as Retrying, never as Failed
(checkBackoffLimitAndUpdateStatusIfNeeded, rayjob_controller.go:520-556), so Failed is the RayJob's end.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from acrl.compiler import AcrlError, redact

from ._settings import env_seconds

DEFAULT_TIMEOUT_S = 60.0
TERMINAL = ("Complete", "Failed", "ValidationFailed")
EXIT_UNKNOWN = 75  # as train.sh: reserved for "the job's state is unknown"
# Ray's message of a failed entrypoint (job_manager.py: "Job entrypoint command failed with exit code N, ...")
EXIT_CODE = re.compile(r"failed with exit code (\d+)")
# A Secret's key names, never its values: kubectl renders the template, so no value reaches acrl's process.
SECRET_KEYS_TEMPLATE = '{{range $key, $value := .data}}{{$key}}{{"\\n"}}{{end}}'


class KubectlError(AcrlError):
    """A kubectl call that did not answer, or answered an error (exit 1): the message names the command, the fix the
    likely cause. ``kind``: "notfound", "forbidden", "unreachable", "noresource" (the server has no such resource
    type: the CRD is missing), "timeout", "missing" (no kubectl) or "other"."""

    def __init__(self, message: str, hint: str, kind: str) -> None:
        super().__init__(message, hint=hint)
        self.kind = kind


def kubectl_timeout() -> float:
    """ACRL_KUBECTL_TIMEOUT: how long one kubectl call may take, in seconds (default 60)."""
    return env_seconds("ACRL_KUBECTL_TIMEOUT", DEFAULT_TIMEOUT_S,
                       "set it to how long one kubectl call may take (e.g. 60), or unset it", zero=False)


def error_kind(stderr: str) -> str:
    """What kubectl's error output says went wrong (its own wording, k8s.io/kubectl and apimachinery's)."""
    if "(NotFound)" in stderr or re.search(r"\bnot found\b", stderr):
        return "notfound"
    if "(Forbidden)" in stderr or "forbidden" in stderr.lower():
        return "forbidden"
    if "doesn't have a resource type" in stderr or "no matches for kind" in stderr:
        return "noresource"
    if any(text in stderr for text in ("Unable to connect to the server", "connection refused",
                                       "i/o timeout", "no such host", "Unauthorized", "TLS handshake timeout")):
        return "unreachable"
    return "other"


@attrs.frozen
class Kubectl:
    """kubectl with a context: every call gets ``--context`` (and ``--namespace`` where it takes one)."""

    path: str
    context: str

    def argv(self, *args: str, namespace: str | None = None) -> list[str]:
        return [self.path, "--context", self.context, *(["--namespace", namespace] if namespace else []), *args]

    def shown(self, *args: str, namespace: str | None = None) -> str:
        """The command as messages show it: `kubectl --context C --namespace N ARGS`."""
        import shlex  # lazy: only for a message

        return shlex.join(["kubectl", *self.argv(*args, namespace=namespace)[1:]])

    def run(self, *args: str, namespace: str | None = None, stdin: bytes | None = None,
            timeout: float | None = None) -> str:
        """kubectl's stdout; KubectlError naming the command when it fails or does not answer in time."""
        return run_kubectl(self.argv(*args, namespace=namespace), self.shown(*args, namespace=namespace), stdin,
                           timeout)

    def get_json(self, *args: str, namespace: str | None = None) -> dict[str, Any]:
        """``kubectl get ARGS -o json`` as a JSON object."""
        text = self.run("get", *args, "-o", "json", namespace=namespace)
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if not isinstance(data, dict):
            raise KubectlError(f"{self.shown('get', *args, '-o', 'json', namespace=namespace)}: its answer is not a "
                               "JSON object", "check the kubectl on PATH (kubectl version)", "other")
        return data


def find_kubectl() -> str | None:
    return shutil.which("kubectl")


def run_kubectl(argv: Sequence[str], shown: str, stdin: bytes | None = None, timeout: float | None = None) -> str:
    """Run ``argv`` (kubectl ...) bounded in time; its stdout, or KubectlError naming ``shown``."""
    limit = kubectl_timeout() if timeout is None else timeout
    try:
        # its own session: a Ctrl-C at the terminal is acrl's to handle (runtime/_kube_watch.py), not kubectl's
        out = subprocess.run(list(argv), input=stdin, capture_output=True, timeout=limit, start_new_session=True,
                             stdin=None if stdin is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise KubectlError(f"{shown}: kubectl is not on PATH", "install kubectl (the cluster's minor version, give "
                           "or take one)", "missing") from None
    except subprocess.TimeoutExpired:
        raise KubectlError(f"{shown}: no answer in {limit:g} s", "check that this machine reaches the API server "
                           "(kubectl cluster-info); ACRL_KUBECTL_TIMEOUT sets the limit", "timeout") from None
    except OSError as exc:
        raise KubectlError(f"{shown}: cannot run kubectl: {exc.strerror or exc}", "check the kubectl on PATH",
                           "missing") from None
    stderr = out.stderr.decode("utf-8", "replace")
    if out.returncode != 0:
        lines = [line.strip() for line in stderr.splitlines() if line.strip()]
        last = redact(lines[-1], code=False)[:400] if lines else f"exit status {out.returncode}"
        kind = error_kind(stderr)
        hint = {"unreachable": "check the context's cluster and credentials (kubectl cluster-info; on EKS: aws eks "
                               "update-kubeconfig)",
                "forbidden": "ask for the RBAC permission it names, or skip the check that needs it (--skip)",
                "noresource": "install the KubeRay operator (helm install kuberay-operator "
                              "kuberay/kuberay-operator --version 1.7.0)"}.get(kind, "run the command by hand to "
                                                                                     "see why")
        raise KubectlError(f"{shown}: {last}", hint, kind)
    return out.stdout.decode("utf-8", "replace")


@attrs.frozen
class RayJobState:
    """One RayJob as KubeRay reports it (the fields acrl shows and records)."""

    name: str
    namespace: str
    deployment: str  # status.jobDeploymentStatus ("" before KubeRay saw it)
    job_status: str  # status.jobStatus ("" before the Ray job was submitted)
    job_id: str | None = None
    cluster: str | None = None
    reason: str | None = None
    message: str | None = None
    start_time: str | None = None  # status.startTime (RFC 3339): KubeRay's, when it became Initializing
    end_time: str | None = None
    ray_start: str | None = None  # status.rayJobInfo: Ray's own times of the job
    ray_end: str | None = None
    failed: int | None = None  # status.failed: attempts that failed (backoffLimit retries)
    uid: str | None = None
    deleting: bool = False  # metadata.deletionTimestamp: KubeRay's finalizer is stopping the job

    @property
    def terminal(self) -> bool:
        return self.deployment in TERMINAL

    def outcome(self) -> tuple[str, int]:
        """(record status, exit status) of a terminal RayJob, as train.sh would exit for the same end: 0 succeeded;
        the entrypoint's exit code when Ray says it failed with one (else 1); a stopped Ray job is cancelled (1)."""
        if self.deployment == "Complete" and self.job_status == "SUCCEEDED":
            return "succeeded", 0
        if self.deployment == "Complete" and self.job_status == "STOPPED":
            return "cancelled", 1
        found = EXIT_CODE.search(self.message or "") if self.job_status == "FAILED" else None
        code = int(found.group(1)) if found else 1
        return "failed", code if 0 < code < 256 and code != EXIT_UNKNOWN else 1

    def summary(self) -> str:
        """One progress line: KubeRay's state, Ray's, and why it failed."""
        state = self.deployment or "New (not yet seen by KubeRay)"
        parts = [state, f"Ray job {self.job_status}" if self.job_status else "Ray job not submitted yet"]
        if self.reason and self.reason != self.deployment:
            parts.append(self.reason)
        text = ", ".join(parts)
        if self.message and (self.terminal or self.reason):
            first = self.message.strip().splitlines()[0] if self.message.strip() else ""
            text += f": {first[:300]}"
        return text

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


def rayjob_state(document: Mapping[str, Any]) -> RayJobState:
    """A RayJob document (``kubectl get rayjob NAME -o json``) as a RayJobState; fields of another shape are left
    out, never trusted."""
    meta, status = _mapping(document, "metadata"), _mapping(document, "status")
    info = _mapping(status, "rayJobInfo")

    def text(source: Mapping[str, Any], key: str) -> str | None:
        value = source.get(key)
        return value if isinstance(value, str) and value else None

    failed = status.get("failed")
    return RayJobState(
        name=text(meta, "name") or "", namespace=text(meta, "namespace") or "",
        deployment=text(status, "jobDeploymentStatus") or "", job_status=text(status, "jobStatus") or "",
        job_id=text(status, "jobId"), cluster=text(status, "rayClusterName"), reason=text(status, "reason"),
        message=text(status, "message"), start_time=text(status, "startTime"), end_time=text(status, "endTime"),
        ray_start=text(info, "startTime"), ray_end=text(info, "endTime"),
        failed=failed if isinstance(failed, int) and not isinstance(failed, bool) else None, uid=text(meta, "uid"),
        deleting=bool(text(meta, "deletionTimestamp")))


def _mapping(source: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = source.get(key)
    return value if isinstance(value, Mapping) else {}
