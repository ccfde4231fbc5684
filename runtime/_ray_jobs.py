"""Asking Ray about a recorded run's job after the terminal that launched it is gone: its state, its logs, and
its logs as they come (`acrl status`, `acrl logs [--follow]`).

Ray's own client does the asking (ray.job_submission.JobSubmissionClient, imported here, lazily, the first time
a job is asked about: the compile path and `acrl --help` never import ray). Its HTTP calls have no timeout of
their own, so each is made in a daemon thread and waited for ACRL_RAY_TIMEOUT seconds at most (default 30):
an address that drops packets is one line, not a hang. Whatever goes wrong is one line naming the address
without its user:password (RayUnavailable), never Ray's traceback.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import IO, Any, TypeVar

import attrs

from acrl.compiler import AcrlError, UsageError, address_has_credentials, redact, without_credentials

from ._settings import env_seconds

DEFAULT_TIMEOUT_S = 30.0
TERMINAL = ("SUCCEEDED", "FAILED", "STOPPED")
# Ray's terminal job states as a run record's statuses (runtime/_records.py STATUSES)
AS_RECORD_STATUS = {"SUCCEEDED": "succeeded", "FAILED": "failed", "STOPPED": "cancelled"}
T = TypeVar("T")


@attrs.frozen
class RayJob:
    """What Ray says of one job (its JobDetails, the fields acrl shows)."""

    status: str  # PENDING, RUNNING, SUCCEEDED, FAILED, STOPPED
    message: str | None = None
    start_time: float | None = None  # seconds since the epoch (Ray keeps milliseconds)
    end_time: float | None = None
    driver_exit_code: int | None = None

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


class RayUnavailable(AcrlError):
    """Ray could not be asked (exit 1): nothing answers at the address, it answers something else, the answer
    did not come in time, or ray is not installed here."""

    def __init__(self, shown: str, reason: str, hint: str | None = None) -> None:
        super().__init__(f"Ray at {shown}: {reason}", hint=hint or (
            f"check that the Ray head is up and that this machine reaches {shown} (`ray status` on the head; a "
            "firewall or tunnel: give the address this machine reaches with --address); an authenticated dashboard: "
            "export ACRL_RAY_ADDRESS with its user:password (read -rs ACRL_RAY_ADDRESS; export ACRL_RAY_ADDRESS)"))
        self.shown = shown
        self.reason = reason


class JobNotFound(Exception):
    """Ray answers, but has no job of that submission id (the head was restarted, or it was never submitted)."""


def ray_timeout() -> float:
    """ACRL_RAY_TIMEOUT: how long one question to Ray may take, in seconds (default 30)."""
    return env_seconds("ACRL_RAY_TIMEOUT", DEFAULT_TIMEOUT_S,
                       "set it to how long one question to Ray may take (e.g. 30), or unset it", zero=False)


def job_address(recorded: str | None, option: str | None) -> str:
    """The address to ask: --address, else ACRL_RAY_ADDRESS when it is the recorded address with the
    user:password the record leaves out, else the recorded one. --address with user:password is a usage
    error (the command line is in the process list), as for `acrl run`."""
    if option:
        if address_has_credentials(option):
            raise UsageError(f"--address {redact(option)}: an address with user:password on the command line is "
                             "visible to every user of this machine (ps) and kept in the shell's history",
                             hint="export ACRL_RAY_ADDRESS with the authenticated address (read -rs ACRL_RAY_ADDRESS; "
                             "export ACRL_RAY_ADDRESS) and leave out --address")
        return option
    exported = os.environ.get("ACRL_RAY_ADDRESS") or ""
    if exported and (recorded is None or without_credentials(exported).rstrip("/") == recorded.rstrip("/")):
        return exported
    if recorded:
        return recorded
    raise AcrlError("the run record names no Ray address", hint="give the cluster's dashboard address: --address "
                    "http://HEAD:8265")


def shown(address: str) -> str:
    """``address`` as acrl shows it: without its user:password."""
    return without_credentials(address)


def job_info(address: str, submission_id: str, timeout: float | None = None) -> RayJob:
    """What Ray at ``address`` says of job ``submission_id``; JobNotFound, or RayUnavailable."""
    def ask(client: Any) -> RayJob:
        details = client.get_job_info(submission_id)
        status = getattr(details.status, "value", details.status)
        return RayJob(str(status), details.message, _seconds(details.start_time), _seconds(details.end_time),
                      getattr(details, "driver_exit_code", None))
    return _ask(address, ask, timeout)


def job_logs(address: str, submission_id: str, timeout: float | None = None) -> str:
    """Every log line of job ``submission_id`` Ray at ``address`` kept; JobNotFound, or RayUnavailable."""
    return _ask(address, lambda client: str(client.get_job_logs(submission_id)), timeout)


def open_follow(address: str, submission_id: str, timeout: float | None = None) -> Any:
    """A client of Ray at ``address`` that knows job ``submission_id``, for :func:`follow_logs`; JobNotFound,
    or RayUnavailable (bounded as each question is)."""
    return _ask(address, lambda client: (client.get_job_info(submission_id), client)[1], timeout)


def follow_logs(client: Any, address: str, submission_id: str, out: IO[str]) -> None:
    """Write job ``submission_id``'s logs to ``out`` as Ray sends them (Ray's tail_job_logs: what it has kept,
    then each new line), until the job ends; not bounded in time (Ctrl-C ends it, not the job)."""
    async def follow() -> None:
        async for chunk in client.tail_job_logs(submission_id):
            out.write(chunk)
            out.flush()

    try:
        asyncio.run(follow())
    except (OSError, RuntimeError, ValueError) as exc:  # aiohttp's errors are OSErrors; a lost socket: RuntimeError
        raise RayUnavailable(shown(address), f"stopped sending the logs: {_short(exc)}") from None


def _seconds(milliseconds: Any) -> float | None:
    return milliseconds / 1000 if isinstance(milliseconds, int | float) else None


def _short(exc: BaseException) -> str:
    """One line of ``exc``'s message, redacted (Ray's messages quote the address, password included)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[-1] if lines else type(exc).__name__
    return redact(text if len(text) <= 300 else text[:300] + "...")


def _ask(address: str, what: Callable[[Any], T], timeout: float | None) -> T:
    """``what(JobSubmissionClient(address))`` in a daemon thread, waited for ``timeout`` seconds."""
    where = shown(address)
    seconds = ray_timeout() if timeout is None else timeout
    found: dict[str, Any] = {}

    def call() -> None:
        try:
            from ray.job_submission import JobSubmissionClient  # lazy: ray (~1 s) only when Ray is asked

            # Ray's client says at INFO level how its log stream closed, on stderr: not ours to show
            logging.getLogger("ray.dashboard.modules.job.sdk").setLevel(logging.WARNING)
            found["value"] = what(JobSubmissionClient(address))
        except BaseException as exc:  # handed to the waiting thread
            found["error"] = exc

    thread = threading.Thread(target=call, name="acrl-ray-question", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise RayUnavailable(where, f"no answer within {seconds:g} s (ACRL_RAY_TIMEOUT)")
    error = found.get("error")
    if error is None:
        return found["value"]  # type: ignore[no-any-return]
    if isinstance(error, ImportError):
        raise RayUnavailable(where, f"ray cannot be imported here ({_short(error)})",
                             hint="install Ray's job client in this Python: pip install 'ray[default]'") from None
    text = str(error)
    if isinstance(error, RuntimeError) and "status code 404" in text:
        raise JobNotFound(text) from None
    if isinstance(error, RuntimeError) and "ray[default]" in text:
        raise RayUnavailable(where, "this Python has ray without its job client",
                             hint="pip install 'ray[default]'") from None
    if isinstance(error, ConnectionError | OSError):  # refused, no route, a name that does not resolve
        raise RayUnavailable(where, "nothing answers there (connection refused, no route, or a name that does "
                             "not resolve)") from None
    if isinstance(error, Exception):  # an HTTP error, an authentication error, an answer that is not Ray's
        raise RayUnavailable(where, f"{type(error).__name__}: {_short(error)}") from None
    raise error
