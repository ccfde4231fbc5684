"""Run records: ``runs/<exp_id>/<run_id>/run.json`` (and train.log beside it), written atomically.

A record is written when the run starts (status "running") and rewritten when it ends, so a run
whose executor died still leaves a trace; the record names its launcher (host, pid, the process's
start time and the boot), so that `acrl runs` shows a "running" record whose launcher is gone as
"launcher-died".

What ran (issue 16; runtime/_provenance.py gathers it): the checkpoint it resumed from (``resumed_from``),
the size and sha256 of each data and eval file (``inputs``), the stack found here and the one the bundle
targets (``stack``, ``target``), slime's argv and the Ray job's environment (``argv``, ``runtime_env``) and
W&B (``wandb``). Records written before these fields load with them None. It holds no secret: credential
flags' values and secret-looking words are ``***`` in ``argv``, secret variables ``<redacted>`` in
``runtime_env``; of the W&B key only whether it was set.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import socket
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from acrl.compiler import AcrlError, json_converter, read_input, structure_json, without_credentials

TYPE_CHECKING = False
if TYPE_CHECKING:
    import cattrs

RECORD, LOG = "run.json", "train.log"
RECORD_LIMIT = 16 << 20  # a record is a few kB; a bigger run.json is not one acrl wrote
# What run.json's "status" says; "launcher-died" is never written: `acrl runs` shows it for a
# "running" record whose `acrl run` is gone. "unknown": the Ray job's state could not be read (it
# may still be running; the record's "note" says how to look and stop it).
STATUSES = ("running", "succeeded", "failed", "cancelled", "unknown", "launcher-died")


@attrs.frozen
class Launcher:
    """The `acrl run` process that wrote a record: with the pid's start time and the boot, one process."""

    host: str
    pid: int
    pid_started: int | None
    boot_id: str | None


@attrs.frozen
class PreflightEntry:
    """One preflight check's result, as checks.Result.as_json writes it."""

    name: str
    status: str
    detail: str
    hint: str
    seconds: float


@attrs.frozen
class ResumedFrom:
    """The checkpoint a run started from, as train.sh decided at launch (its ``acrl-resume:`` line)."""

    checkpoint_dir: str
    iteration: int | None
    run_id: str | None  # the record of the run that saved there (found by its --save), None when there is none
    data_state: bool  # rollout/global_dataset_state_dict_<iteration>.pt was there (slime's data position)
    exp_id: str | None = None  # that record's experiment (a continuation may load another experiment's checkpoint)
    start_rollout_id: int | None = None  # the first rollout of this run (the iteration + 1, or [checkpoint]'s)


@attrs.frozen
class InputFile:
    """One file the run reads: its spec key (data.path, eval.datasets.NAME), path, size and sha256; or why not."""

    key: str
    path: str
    size: int | None = None
    sha256: str | None = None
    error: str | None = None  # not readable here, not a regular file, over the hashing limit


@attrs.frozen
class Stack:
    """The stack as found from the launching machine (None where it could not be seen): the slime and Megatron-LM
    checkouts' commits, and the versions installed in the python3 train.sh runs slime with."""

    slime_commit: str | None = None
    megatron_commit: str | None = None
    sglang: str | None = None
    torch: str | None = None
    python: str | None = None
    ray: str | None = None


@attrs.frozen
class Target:
    """What the bundle targets (its manifest): the slime commit and the Megatron-LM commit and SGLang version
    that commit runs (None where acrl had no facts of it)."""

    slime_commit: str | None = None
    megatron_commit: str | None = None
    sglang: str | None = None


@attrs.frozen
class RuntimeEnv:
    """The Ray job's runtime environment as train.sh builds it: env_vars (a secret's value "<redacted>") and the
    working_dir (the bundle)."""

    env_vars: dict[str, str]
    working_dir: str


@attrs.frozen
class WandbRecord:
    """W&B as the run had it: the spec's project and group, the key's variable and whether it was set."""

    enabled: bool
    project: str | None
    group: str | None
    key_env: str
    key_present: bool


@attrs.frozen
class KubeRayRun:
    """A --target kuberay run (issue 18): the RayJob `acrl run` applied, where, and how KubeRay last reported it
    (runtime/_kube.py RayJobState); the Secrets its pods read, by key name only."""

    name: str
    namespace: str
    context: str
    config_map: str | None = None
    created: bool | None = None  # `kubectl apply` created the RayJob (False: it existed, and was left as it was)
    job_id: str | None = None  # status.jobId: the Ray submission id KubeRay gave the job (also the record's)
    cluster: str | None = None  # status.rayClusterName
    deployment_status: str | None = None  # status.jobDeploymentStatus, last seen
    job_status: str | None = None  # status.jobStatus, last seen
    reason: str | None = None  # status.reason: why it failed (AppFailed, DeadlineExceeded, ...)
    message: str | None = None  # status.message, its first 2,000 characters
    secrets: dict[str, list[str]] = attrs.Factory(dict)  # Secret -> the keys the pods read from it


@attrs.frozen
class RunRecord:
    """run.json. Written when the run starts (status "running") and again, with how it ended, when it
    ends; through the compiler's one converter (acrl.compiler.json_converter), keys sorted."""

    acrl_version: str
    exp_id: str
    run_id: str
    bundle: str  # the bundle directory, absolute
    bundle_hash: str
    submission_id: str
    ray_address: str | None  # without a user:password part
    host: str
    launcher: Launcher
    command: list[str]  # ACRL_RUN_ID=... [ACRL_RAY_ADDRESS=...] bash .../train.sh
    allow_modified: bool
    modified_files: list[str]
    expected_hash: str | None
    preflight: list[PreflightEntry]
    status: str = "running"  # see STATUSES
    exit_status: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    duration_s: float | None = None
    log: str = LOG
    note: str | None = None  # written only when there is one: how to look at (or stop) a job that may still run
    log_error: str | None = None  # only when train.log stopped being written
    error: str | None = None  # only when acrl itself failed while train.sh ran
    # issue 16: what ran (None in records written before; runtime/_provenance.py gathers them)
    resumed_from: ResumedFrom | None = None  # None: started from the model, or not known
    inputs: list[InputFile] | None = None
    stack: Stack | None = None
    target: Target | None = None
    argv: list[str] | None = None  # slime's command after `ray job submit --`: python3 ENTRYPOINT FLAGS (redacted)
    runtime_env: RuntimeEnv | None = None
    wandb: WandbRecord | None = None
    kuberay: KubeRayRun | None = None  # only for a --target kuberay run (then ray_address is None)

    def as_json(self) -> dict[str, Any]:
        value = _converter().unstructure(self)
        assert isinstance(value, dict)
        return value

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RunRecord:
        """``data`` (a parsed run.json) as a RunRecord; ManifestShapeError naming the key of a value
        of another shape."""
        _converter()  # RunRecord's hooks registered
        return structure_json(data, cls)


_OPTIONAL = ("note", "log_error", "error", "kuberay")


@functools.cache
def _converter() -> cattrs.Converter:
    conv = json_converter()
    for cls in (Launcher, PreflightEntry, ResumedFrom, InputFile, Stack, Target, RuntimeEnv, WandbRecord, KubeRayRun,
                RunRecord):
        attrs.resolve_types(cls)

    def unstructure(record: RunRecord) -> dict[str, Any]:
        out: dict[str, Any] = conv.unstructure_attrs_asdict(record)
        for key in _OPTIONAL:
            if out[key] is None:
                del out[key]
        return out

    def unstructure_input(item: InputFile) -> dict[str, Any]:  # {key, path, size, sha256} or {key, path, error}
        return {k: v for k, v in attrs.asdict(item).items() if v is not None or k in ("key", "path")}

    conv.register_unstructure_hook(RunRecord, unstructure)
    conv.register_unstructure_hook(InputFile, unstructure_input)
    return conv


def new_run_id(now: float | None = None) -> str:
    """A run id train.sh accepts in ACRL_RUN_ID: the UTC start time and 6 random hex digits."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(3)}"


def new_run_dir(exp_dir: Path, attempts: int = 20) -> tuple[str, Path]:
    """A fresh run id and its folder ``exp_dir/<run_id>``, created here (never an existing one: two
    launches at the same instant that drew the same id get different ones). Raises OSError."""
    exp_dir.mkdir(parents=True, exist_ok=True)
    for _ in range(attempts):
        run_id = new_run_id()
        try:
            (exp_dir / run_id).mkdir()
        except FileExistsError:
            continue
        return run_id, exp_dir / run_id
    raise FileExistsError(f"no free run id under {exp_dir} after {attempts} attempts")


def _boot_id() -> str | None:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip() or None
    except OSError:
        return None


def process_start(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks after boot (/proc/PID/stat field 22); None where
    there is no /proc or no such process. With the pid and the boot it names one process."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            return int(f.read().rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def this_launcher() -> Launcher:
    """This process, as a record names its launcher."""
    return Launcher(host=socket.gethostname(), pid=os.getpid(), pid_started=process_start(os.getpid()),
                    boot_id=_boot_id())


def launcher() -> dict[str, Any]:
    """:func:`this_launcher` as run.json holds it (what :func:`launcher_gone` reads)."""
    return attrs.asdict(this_launcher())


def launcher_gone(record: Mapping[str, Any]) -> bool:
    """Whether the launcher a record names is known to be gone: on this host (and this boot), no
    process with its pid and start time. A launcher on another host cannot be told: False."""
    who = record.get("launcher")
    if not isinstance(who, Mapping) or who.get("host") != socket.gethostname():
        return False
    pid = who.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    boot = _boot_id()
    if who.get("boot_id") and boot and who["boot_id"] != boot:
        return True  # rebooted since
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's process with that pid
        pass
    started = who.get("pid_started")
    now = process_start(pid)
    return started is not None and now is not None and now != started


def local_log(path: Path, record: Mapping[str, Any]) -> Path | None:
    """The record's train.log beside its run.json, when it is a regular file (a name only: never a path)."""
    name = record.get("log", LOG)
    if not isinstance(name, str) or not name or "/" in name or name in (".", ".."):
        name = LOG
    log = path.parent / name
    return log if log.is_file() else None


def utc(seconds: float) -> str:
    """ISO 8601 UTC with milliseconds: 2026-11-21T16:10:00.123Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}Z"


def public_address(address: str | None) -> str | None:
    """``address`` without a user:password part, which never goes into a record."""
    return without_credentials(address) if address else address


def write_final_record(run_dir: Path, record: RunRecord, say: Callable[[str], None]) -> Path | str:
    """Write a run's last record; where it went, or "not written (why)" after ``say`` told why (the run's outcome is
    still reported: a full disk must not hide it)."""
    try:
        return write_record(run_dir, record)
    except OSError as exc:
        say(f"acrl: error: cannot write the final record {run_dir / RECORD}: {exc.strerror or exc}")
        return f"not written ({exc.strerror or exc})"


def write_record(run_dir: Path, record: RunRecord) -> Path:
    """Write ``run_dir/run.json`` atomically (a temporary file in the same folder, then a rename)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / RECORD
    fd, temporary = tempfile.mkstemp(prefix=".run.", suffix=".json", dir=run_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(record.as_json(), out, indent=2, sort_keys=True)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def list_records(runs_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every readable ``<exp_id>/<run_id>/run.json`` under ``runs_dir``, oldest first; an unreadable
    record is listed with status "unreadable" and the reason."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    records = []
    for path in sorted(root.glob(f"*/*/{RECORD}")):
        try:
            data = json.loads(read_input(path, limit=RECORD_LIMIT).decode("utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except OSError as exc:  # a FIFO or device in place of the record, one over the limit
            data = {"exp_id": path.parent.parent.name, "run_id": path.parent.name, "status": "unreadable",
                    "error": exc.strerror or str(exc)}
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            data = {"exp_id": path.parent.parent.name, "run_id": path.parent.name, "status": "unreadable",
                    "error": str(exc)[:200]}
        data["record"] = str(path)
        if data.get("status") == "running" and launcher_gone(data):
            data["status"] = "launcher-died"
            data["note"] = ("its `acrl run` is gone (killed, or the machine restarted) without a final record; "
                            "the Ray job may still be running" + (f": ray job status --address {data['ray_address']} "
                                                                  f"{data['submission_id']}"
                                                                  if data.get("ray_address") and
                                                                  data.get("submission_id") else
                                                                  f": acrl status {data.get('run_id')}"
                                                                  if isinstance(data.get("kuberay"), dict) else ""))
        records.append(data)
    records.sort(key=lambda r: (str(r.get("started_at", "")), str(r.get("run_id", ""))))
    return records


def runs_dir_error(runs_dir: str, exc: OSError) -> AcrlError:
    return AcrlError(f"{runs_dir}: cannot write the run record: {exc.strerror or exc}",
                     hint="choose a writable folder with --runs-dir")
