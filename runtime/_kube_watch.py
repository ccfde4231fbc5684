"""Watching an applied RayJob until it ends (issue 18): its status polled with ``kubectl get rayjob NAME -o json``
every ACRL_KUBE_POLL seconds (default 5), a progress line whenever KubeRay's or Ray's state of it changes, and the
job's log (the submitter Job's pod, which runs `ray job submit` and follows the job: ``kubectl logs -f job/NAME``,
rayjob_controller.go:724 at v1.7.0 names the Job after the RayJob) copied to the terminal and the run's log as it
comes, once KubeRay says Running (the submitter exists from then on). The job's ``acrl-resume:`` line (checkpoint.sh,
in the head pod) is picked out of it on the way, for the record.

Ctrl-C (SIGINT, SIGTERM, SIGHUP) deletes the RayJob (``kubectl delete rayjob NAME``, waited for ACRL_STOP_GRACE
seconds, default 90; a second signal stops waiting). Deleting, not suspending, by KubeRay v1.7.0's semantics: its
finalizer stops the Ray job through the dashboard before the RayJob goes (rayjob_controller.go:112-138), and the
RayCluster and the submitter Job, which it owns, go with it; `spec.suspend` deletes the cluster without stopping the
job first (rayjob_controller.go:366-373), is refused when shutdownAfterJobFinishes is false (validation.go:547-548),
and leaves a Suspended RayJob that `kubectl apply` of the same bundle would not start again. Deleted, the name is
free: applying the bundle again starts a new RayJob, which resumes from the checkpoint (checkpoint.sh).

kubectl runs in its own session, so that a Ctrl-C at the terminal reaches acrl alone, which then decides.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable
from types import FrameType
from typing import IO, Any

import attrs

from ._kube import EXIT_UNKNOWN, Kubectl, KubectlError, RayJobState, rayjob_state
from ._settings import env_seconds
from ._stream import DEFAULT_STOP_GRACE_S, _Copy

DEFAULT_POLL_S = 5.0
DEFAULT_STATUS_GRACE_S = 300.0  # as train.sh's ACRL_STATUS_GRACE: how long an unanswered status is retried
LOG_ATTEMPTS = 5  # `kubectl logs -f` started again after a failure (the submitter pod not running yet) this often
LOG_RETRY_S = 5.0
LOG_DRAIN_S = 10.0  # after the RayJob ended: how long the log's last lines are waited for


@attrs.define
class Ending:
    """How the watch ended: the record's status and exit status, the RayJob's last state, a note."""

    status: str
    code: int
    state: RayJobState | None = None
    note: str | None = None
    error: str | None = None


class Signals:
    """The signals acrl got while it watches; installed in the main thread only (a library caller keeps its own)."""

    def __init__(self) -> None:
        self.caught: list[int] = []
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> Signals:
        with contextlib.suppress(ValueError):
            for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                self.previous[signum] = signal.signal(signum, self._on)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def _on(self, signum: int, frame: FrameType | None) -> None:
        self.caught.append(signum)


class _Logs:
    """`kubectl logs -f job/NAME`, started once the submitter exists, again after a failure (a pod not yet
    running), copied as it comes."""

    def __init__(self, kubectl: Kubectl, namespace: str, name: str, say: Callable[[str], None]) -> None:
        self.argv = kubectl.argv("logs", "-f", f"job/{name}", namespace=namespace)
        self.say = say
        self.proc: subprocess.Popen[bytes] | None = None
        self.errors: IO[bytes] | None = None
        self.attempts = 0
        self.done = False
        self.retry_at = 0.0

    def start(self, now: float) -> None:
        if self.done or self.proc is not None or self.attempts >= LOG_ATTEMPTS or now < self.retry_at:
            return
        self.attempts += 1
        self.errors = tempfile.TemporaryFile()  # noqa: SIM115 (closed in reap/stop)
        try:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=self.errors,
                                         stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            self.done = True
            self.say(f"acrl: warning: cannot follow the job's log: {exc.strerror or exc}")

    def fileno(self) -> int | None:
        return self.proc.stdout.fileno() if self.proc is not None and self.proc.stdout is not None else None

    def read(self, copy: _Copy) -> None:
        source = self.fileno()
        if source is None:
            return
        chunk = os.read(source, 65536)
        if chunk:
            copy.write(chunk)
        elif self.proc is not None:
            self.reap(copy, wait=True)

    def drain(self, copy: _Copy) -> None:
        """Copy what the log has written so far, without waiting for more."""
        while (source := self.fileno()) is not None and select.select([source], [], [], 0)[0]:
            self.read(copy)

    def reap(self, copy: _Copy, wait: bool = False) -> None:
        """Once `kubectl logs` has ended: what it had left, and whether to try again."""
        proc = self.proc
        if proc is None or (proc.poll() is None and not wait):
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=5)
        if proc.poll() is None:
            return
        assert proc.stdout is not None
        rest = proc.stdout.read()
        if rest:
            copy.write(rest)
        proc.stdout.close()
        why = self._error()
        self.proc = None
        if proc.returncode == 0:
            self.done = True
        elif self.attempts >= LOG_ATTEMPTS:
            self.done = True
            self.say(f"acrl: warning: stopped following the job's log ({why}); `acrl logs RUN` shows it later")
        else:
            self.retry_at = time.monotonic() + LOG_RETRY_S

    def _error(self) -> str:
        if self.errors is None:
            return ""
        self.errors.seek(0)
        lines = self.errors.read(65536).decode("utf-8", "replace").strip().splitlines()
        self.errors.close()
        self.errors = None
        return lines[-1][:300] if lines else "no message"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
        if self.errors is not None:
            self.errors.close()
        self.proc, self.errors = None, None


def watch(kubectl: Kubectl, namespace: str, name: str, copy: _Copy, signals: Signals,
          seen: Callable[[RayJobState], None]) -> Ending:
    """Follow RayJob ``name`` until it ends, is deleted, cannot be read for ACRL_STATUS_GRACE seconds, or a signal
    comes (then it is deleted); ``seen`` gets each new state (the caller updates the record)."""
    poll = max(env_seconds("ACRL_KUBE_POLL", DEFAULT_POLL_S), 0.01)
    grace = env_seconds("ACRL_STATUS_GRACE", DEFAULT_STATUS_GRACE_S)

    def say(line: str) -> None:
        copy.write((line + "\n").encode("utf-8", "replace"))

    logs = _Logs(kubectl, namespace, name, say)
    state: RayJobState | None = None
    shown = None
    next_poll = 0.0
    failing_since: float | None = None
    ended_at: float | None = None
    try:
        while True:
            if signals.caught:
                logs.stop()
                if ended_at is not None and state is not None:  # it has ended: only its last log lines are cut
                    status, code = state.outcome()
                    return Ending(status, code, state)
                return _delete(kubectl, namespace, name, signals, say, state)
            now = time.monotonic()
            if ended_at is None and now >= next_poll:
                next_poll = now + poll
                try:
                    state = rayjob_state(kubectl.get_json("rayjob", name, namespace=namespace))
                except KubectlError as exc:
                    if exc.kind == "notfound":
                        return Ending("cancelled", 1, state, note=f"the RayJob {name} was deleted while it ran, not "
                                      "by this acrl run (KubeRay stopped its Ray job)")
                    if failing_since is None:
                        failing_since = now
                        say(f"acrl: warning: cannot read RayJob {name} ({exc.message}); retrying for up to {grace:g} "
                            "s (ACRL_STATUS_GRACE)")
                    if now - failing_since >= grace:
                        look = kubectl.shown("get", "rayjob", name, namespace=namespace)
                        stop = kubectl.shown("delete", "rayjob", name, namespace=namespace)
                        return Ending("unknown", EXIT_UNKNOWN, state, error=exc.message,
                                      note=f"the RayJob may still be running: {look}; stop it with {stop}")
                else:
                    if failing_since is not None:
                        say(f"acrl: RayJob {name} can be read again")
                    failing_since = None
                    logs.drain(copy)  # the job's lines written before this state, before its line
                    summary = state.summary()
                    if summary != shown:
                        shown = summary
                        say(f"acrl: RayJob {name}: {summary}")
                        seen(state)
                    if state.deployment in ("Running", "Complete", "Failed"):
                        logs.start(now)
                    if state.terminal:
                        ended_at = now
            if ended_at is not None and (logs.proc is None or now - ended_at >= LOG_DRAIN_S):
                if logs.proc is None and logs.attempts == 0 and state is not None and state.job_status:
                    logs.start(now)  # it ended between two polls: its log once, for the record's lines
                    if logs.proc is not None:
                        ended_at = now
                        continue
                assert state is not None
                status, code = state.outcome()
                return Ending(status, code, state)
            source = logs.fileno()
            wait = max(0.0, min(0.2, next_poll - now)) if ended_at is None else 0.2
            if source is None:
                time.sleep(wait)
                logs.reap(copy)
                continue
            try:
                ready, _, _ = select.select([source], [], [], wait)
            except InterruptedError:  # pragma: no cover (PEP 475 retries)
                continue
            if ready:
                logs.read(copy)
            else:
                logs.reap(copy)
    finally:
        logs.stop()


def _delete(kubectl: Kubectl, namespace: str, name: str, signals: Signals, say: Callable[[str], None],
            state: RayJobState | None) -> Ending:
    """Delete the RayJob after a signal; a second signal stops waiting for it."""
    first = signals.caught[0]
    code = 130 if first == signal.SIGINT else 143
    grace = env_seconds("ACRL_STOP_GRACE", DEFAULT_STOP_GRACE_S)
    look = kubectl.shown("get", "rayjob", name, namespace=namespace)
    delete = kubectl.shown("delete", "rayjob", name, namespace=namespace)
    say(f"acrl: {signal.Signals(first).name}: deleting RayJob {name} (KubeRay stops its Ray job, then deletes its "
        "cluster; again to stop waiting)")
    argv = kubectl.argv("delete", "rayjob", name, "--wait=true", f"--timeout={max(1, int(grace))}s",
                        namespace=namespace)
    with tempfile.TemporaryFile() as output:
        try:
            proc = subprocess.Popen(argv, stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        except OSError as exc:
            return Ending("unknown", EXIT_UNKNOWN, state, error=f"cannot run kubectl: {exc.strerror or exc}",
                          note=f"the RayJob may still be running: stop it with {delete}")
        deadline = time.monotonic() + grace + 10
        while proc.poll() is None and len(signals.caught) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            say("acrl: stopped waiting for the RayJob to be deleted")
            return Ending("cancelled", code, state, note=f"the RayJob was being deleted when acrl stopped waiting: "
                          f"see it with {look}")
        output.seek(0)
        text = output.read(65536).decode("utf-8", "replace").strip()
    if proc.returncode == 0 or "(NotFound)" in text:
        say(f"acrl: RayJob {name} deleted")
        return Ending("cancelled", code, state, note=f"RayJob {name} deleted by this acrl run (KubeRay stopped its "
                      "Ray job); applying the bundle again starts a new one")
    last = text.splitlines()[-1][:300] if text else f"exit status {proc.returncode}"
    say(f"acrl: error: could not delete RayJob {name}: {last}")
    return Ending("unknown", EXIT_UNKNOWN, state, error=f"kubectl delete rayjob {name}: {last}",
                  note=f"interrupted, and the RayJob could not be deleted: it may still be running; stop it with "
                  f"{delete}")
