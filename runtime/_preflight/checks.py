"""Preflight: the checks `acrl run` makes before anything is launched.

Each check is a plain function of the bundle (:class:`BundleInfo`) that returns a one-line detail
when it passes and raises CheckFailed / CheckSkipped / CheckWarning otherwise (runtime/_preflight/outcome.py;
a warning is a row to read, not a failure: the run goes on). Checks are
registered in :data:`CHECKS`, by name, with the names of the checks they need: a check runs only
once those passed, and checks that need nothing of each other run in parallel. To add a check,
write the function and add one ``Check(...)`` line to CHECKS (or call :func:`register`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Literal

import attrs

from acrl.compiler import (
    UsageError,
    compare_model_args,
    derive_model_args,
    read_input,
    redact,
    without_credentials,
)

from . import aws as _aws
from .bundle_info import BundleInfo
from .bundle_info import read_bundle_info as read_bundle_info  # the preflight API: read the bundle, then run_preflight
from .checkpoint import check_checkpoint
from .engines import check_external_engines
from .fingerprint import open_regular, remember
from .opd_teacher import check_opd_teacher
from .outcome import CheckFailed, CheckSkipped, CheckWarning
from .python import check_rollout_modules, check_slime_parser_of_bundle
from .stack import check_megatron, check_sglang, check_slime
from .wandb_key import check_wandb

Status = Literal["passed", "failed", "skipped", "warning"]
PASSING = ("passed", "warning")  # what a check that needs another accepts of it
BAD_LINES_SHOWN = 5


# --- the checks ------------------------------------------------------------------------------------

def check_bash(info: BundleInfo) -> str:
    found = shutil.which("bash")
    if found is None:
        raise CheckFailed("bash is not on PATH", "install bash: train.sh is a bash script")
    return found


def check_ray_cli(info: BundleInfo) -> str:
    found = shutil.which("ray")
    if found is None:
        raise CheckFailed("the ray CLI is not on PATH (train.sh submits the job with `ray job submit`)",
                          "pip install 'ray[default]' in the environment you run acrl from, or put it on PATH")
    return found


def check_model(info: BundleInfo) -> str:
    model = Path(info.get("model.dir", ""))
    config = model / "config.json"
    if not config.is_file():
        what = "no such directory" if not model.is_dir() else "has no config.json"
        raise CheckFailed(f"[model] dir {model}: {what}", "point [model] dir at the Hugging Face checkpoint")
    try:
        data = json.loads(read_input(config).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else \
            "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise CheckFailed(f"{config}: cannot be read as JSON: {why}", "restore the checkpoint's config.json") from None
    if not isinstance(data, dict):
        raise CheckFailed(f"{config}: not a JSON object", "restore the checkpoint's config.json")
    derived = derive_model_args(data)
    errors = [m for m in compare_model_args(info.model_args, "model_args.sh", derived.args, str(config))
              if m.severity == "error"]
    if errors:
        raise CheckFailed(f"{len(errors)} MODEL_ARGS differ from {config}: " + "; ".join(m.message for m in errors),
                          "use the checkpoint the bundle was compiled for, or fix the spec and compile again")
    return f"{config} matches the {len(info.model_args)} MODEL_ARGS tokens"


def dataset_paths(info: BundleInfo) -> list[tuple[str, Path]]:
    """(label, path) of every dataset the bundle reads; a relative path is relative to the bundle,
    the Ray job's working directory."""
    named = [("data.path", info.get("data.path"))]
    named += [(f"eval.datasets.{k}", v) for k, v in sorted((info.get("eval.datasets") or {}).items())]
    return [(label, info.path / value) for label, value in named if isinstance(value, str) and value]


def check_datasets(info: BundleInfo) -> str:
    prompt_key = info.get("data.input_key") or "prompt"
    metadata_key = info.get("data.metadata_key") or "metadata"
    paths = dataset_paths(info)
    if not paths:
        raise CheckSkipped("the spec names no dataset")
    problems, details = [], []
    for label, path in paths:
        try:
            count, bad, bad_count = scan_jsonl(path, prompt_key, metadata_key)
        except OSError as exc:
            problems.append(f"{label} {path}: {exc.strerror or exc}")
            continue
        if bad_count:
            shown = "; ".join(f"line {n}: {why}" for n, why in bad)
            more = f" (and {bad_count - len(bad)} more)" if bad_count > len(bad) else ""
            problems.append(f"{label} {path}: {bad_count} of {count} lines bad: {shown}{more}")
        elif count == 0:
            problems.append(f"{label} {path}: empty")
        else:
            details.append(f"{path.name}: {count} lines")
    if problems:
        raise CheckFailed(" | ".join(problems), f"check the paths ([data] path, [eval.datasets]); every line must be "
                          f"a JSON object with a string {prompt_key!r} and an object {metadata_key!r}")
    return ", ".join(details)


LINE_LIMIT = 64 << 20  # the longest dataset line read whole (/dev/zero, or a file of no newline, is not)


def scan_jsonl(path: Path, prompt_key: str = "prompt", metadata_key: str = "metadata",
               keep: int = BAD_LINES_SHOWN) -> tuple[int, list[tuple[int, str]], int]:
    """Stream ``path`` line by line: (lines, the first ``keep`` bad lines with why, bad lines). What it read is
    hashed on the way, for the run record's fingerprint of the file (fingerprint.py)."""
    count = bad_count = size = 0
    bad: list[tuple[int, str]] = []
    decode = json.JSONDecoder().decode
    digest = hashlib.sha256()
    fd, before = open_regular(path)
    with os.fdopen(fd, "rb") as lines:
        while raw := lines.readline(LINE_LIMIT + 1):
            count += 1
            digest.update(raw)
            size += len(raw)
            if len(raw) > LINE_LIMIT:
                while raw and not raw.endswith(b"\n"):  # the rest of the line, a chunk at a time
                    raw = lines.readline(LINE_LIMIT)
                    digest.update(raw)
                    size += len(raw)
                why: str | None = f"too large: a line over {LINE_LIMIT >> 20} MiB"
            else:
                why = _bad_line(raw, decode, prompt_key, metadata_key)
            if why is not None:
                bad_count += 1
                if len(bad) < keep:
                    bad.append((count, why))
        remember(path, before, os.fstat(lines.fileno()), size, digest.hexdigest())
    return count, bad, bad_count


def _bad_line(raw: bytes, decode: Callable[[str], Any], prompt_key: str, metadata_key: str) -> str | None:
    try:
        row = decode(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return f"not UTF-8 (byte {exc.start})"
    except ValueError as exc:
        return "empty line" if not raw.strip() else f"not JSON ({exc.args[0].split(':')[0]})"
    except RecursionError:
        return "not JSON (nested too deeply)"
    if not isinstance(row, dict):
        return f"a JSON {type(row).__name__}, not an object"
    if not isinstance(row.get(prompt_key), str):
        return f"no string {prompt_key!r}" if prompt_key not in row else f"{prompt_key!r} is not a string"
    if not isinstance(row.get(metadata_key), dict):
        return f"no object {metadata_key!r}" if metadata_key not in row else f"{metadata_key!r} is not an object"
    return None


def gpus_needed(info: BundleInfo) -> int:
    """GPUs the job takes on this machine: slime's placement group on the head node (the manifest's node_gpus,
    from acrl's placement model); for a manifest written before acrl modelled placement, the actor's plus the
    rollout's when not colocated."""
    if info.derived is None:
        return 0
    if info.derived.node_gpus:
        return info.derived.node_gpus[0]
    actor = info.derived.actor_gpus
    return actor if info.get("cluster.colocate", True) else actor + (info.derived.rollout_gpus or 0)


def check_gpus(info: BundleInfo) -> str:
    known = info.derived is not None
    if info.cluster_address:
        count = f"{gpus_needed(info)} " if known else ""
        raise CheckSkipped(f"the job runs on the cluster at {without_credentials(info.cluster_address)}; its {count}"
                           "GPUs are not visible from here")
    if not known:
        raise CheckSkipped("the GPUs the job needs are not known: spec.toml was modified and is not a spec "
                           "this acrl reads")
    need = gpus_needed(info)
    smi = shutil.which("nvidia-smi")
    if smi is not None:
        command, tool = [smi, "-L"], "nvidia-smi -L"
    else:
        if importlib.util.find_spec("torch") is None:
            raise CheckSkipped("neither nvidia-smi nor torch is here to count GPUs")
        command, tool = [sys.executable, "-c", "import torch; print(torch.cuda.device_count())"], "torch"
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckFailed(f"{tool} did not answer: {exc}", "check the NVIDIA driver (nvidia-smi)") from None
    if out.returncode != 0:
        raise CheckFailed(f"{tool} exited {out.returncode}: {(out.stderr.strip() or out.stdout.strip())[-300:]}",
                          "check the NVIDIA driver (nvidia-smi)")
    if smi is not None:
        found = sum(line.startswith("GPU ") for line in out.stdout.splitlines())
    else:
        last = out.stdout.strip().rsplit("\n", 1)[-1]
        found = int(last) if last.isdigit() else 0
    if found < need:
        raise CheckFailed(f"{found} GPUs here ({tool}), the bundle needs {need}{info.other_nodes}",
                          "run on a machine with enough GPUs, or lower [cluster] gpus_per_node / rollout_num_gpus")
    return f"{found} GPUs ({tool}), {need} needed{info.other_nodes}"


def check_cuda_home(info: BundleInfo) -> str:
    home = info.get("cuda.home")
    if not home:
        raise CheckSkipped("the spec does not pin CUDA_HOME ([cuda] home)")
    if not Path(home).is_dir():
        raise CheckFailed(f"[cuda] home {home}: no such directory", "install that toolkit or change [cuda] home")
    return str(home)


def check_aws_identity(info: BundleInfo) -> str:
    """AWS credentials resolve (STS GetCallerIdentity), in the region of the runtime ARN."""
    return _aws.check_credentials(_aws.bundle_runtime_arn(info)[1])


def check_s3_bucket(info: BundleInfo) -> str:
    """The rollout bucket exists and is writable."""
    return _aws.check_bucket(str(info.get("agentcore.s3_bucket", "")), _aws.bundle_runtime_arn(info)[1])


def check_agent_runtime(info: BundleInfo) -> str:
    """The AgentCore runtime exists and is READY."""
    return _aws.check_agent_runtime(_aws.bundle_runtime_arn(info)[0])


# --- registry and runner ---------------------------------------------------------------------------

@attrs.frozen
class Check:
    """A named preflight check and the names of the checks that must pass before it runs."""

    name: str
    function: Callable[[BundleInfo], str]
    needs: tuple[str, ...] = ()


# Local checks first, then AWS (boto3 honours AWS_ENDPOINT_URL_<SERVICE> for other endpoints); one line each.
CHECKS: list[Check] = [
    Check("bash", check_bash),
    Check("ray-cli", check_ray_cli),
    Check("slime", check_slime),
    Check("megatron", check_megatron),
    Check("sglang", check_sglang, ("slime",)),
    Check("slime-parser", check_slime_parser_of_bundle, ("bash", "slime", "megatron")),
    Check("rollout-module", check_rollout_modules, ("slime",)),
    Check("external-engines", check_external_engines, ("bash",)),
    Check("opd-teacher", check_opd_teacher, ("bash",)),
    Check("model", check_model),
    Check("datasets", check_datasets),
    Check("wandb", check_wandb),
    Check("checkpoint", check_checkpoint),
    Check("gpus", check_gpus),
    Check("cuda-home", check_cuda_home),
    Check("aws-identity", check_aws_identity),
    Check("s3-bucket", check_s3_bucket, ("aws-identity",)),
    Check("agent-runtime", check_agent_runtime, ("aws-identity",)),
]


def register(name: str, function: Callable[[BundleInfo], str], needs: Sequence[str] = ()) -> None:
    """Add a check to :data:`CHECKS` (replacing one of the same name)."""
    CHECKS[:] = [c for c in CHECKS if c.name != name]
    CHECKS.append(Check(name, function, tuple(needs)))


@attrs.frozen
class Result:
    """What one check found: passed (detail), failed (detail and hint) or skipped (the reason)."""

    name: str
    status: Status
    detail: str
    hint: str = ""
    seconds: float = 0.0

    def as_json(self) -> dict[str, object]:
        return {"name": self.name, "status": self.status, "detail": self.detail, "hint": self.hint,
                "seconds": round(self.seconds, 4)}


def run_check(check: Check, info: BundleInfo) -> Result:
    """Run one check, timed; any exception other than the two outcomes is a failure, not a crash."""
    started = time.perf_counter()
    try:
        detail = check.function(info)
        status: Status = "passed"
        hint = ""
    except CheckFailed as exc:
        status, detail, hint = "failed", exc.message, exc.hint
    except CheckSkipped as exc:
        status, detail, hint = "skipped", exc.reason, ""
    except CheckWarning as exc:
        status, detail, hint = "warning", exc.message, exc.hint
    except Exception as exc:
        status, detail, hint = "failed", f"{type(exc).__name__}: {exc}", "this is a bug in the check; report it"
    # whatever a check reports (an address, a tool's message), a user:password or a token in it is shown as ***
    return Result(check.name, status, redact(detail, code=False), redact(hint, code=False),
                  time.perf_counter() - started)


def run_preflight(info: BundleInfo, skip: Collection[str] = (), checks: Sequence[Check] | None = None,
                  workers: int = 8) -> list[Result]:
    """Run ``checks`` (default: CHECKS) but those named in ``skip``, independent ones in parallel; the
    results in the checks' order. A check whose needs did not all pass is skipped, saying why."""
    checks = list(CHECKS if checks is None else checks)
    names = {c.name for c in checks}
    unknown = sorted(set(skip) - names)
    if unknown:
        raise UsageError(f"--skip {', '.join(unknown)}: no such check", hint=f"use one of {', '.join(sorted(names))}")
    results: dict[str, Result] = {c.name: Result(c.name, "skipped", "--skip") for c in checks if c.name in skip}
    pending = [c for c in checks if c.name not in results]
    running: dict[Future[Result], Check] = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        while pending or running:
            for check in list(_ready(pending, results)):
                pending.remove(check)
                blocked = [n for n in check.needs if n in results and results[n].status not in PASSING]
                if blocked:
                    results[check.name] = Result(check.name, "skipped", f"needs {', '.join(blocked)}, which did "
                                                 "not pass")
                else:
                    running[pool.submit(run_check, check, info)] = check
            if not running:
                if pending:  # needs that never resolve (unknown or circular): say so instead of hanging
                    for check in pending:
                        results[check.name] = Result(check.name, "failed", f"needs {', '.join(check.needs)}, "
                                                     "which is not a check that can run first",
                                                     "fix the check's registration")
                    pending = []
                continue
            done, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in done:
                results[running.pop(future).name] = future.result()
    return [results[c.name] for c in checks]


def _ready(pending: Sequence[Check], results: Mapping[str, Result]) -> Iterator[Check]:
    for check in pending:
        if all(n in results for n in check.needs):
            yield check


def format_table(results: Sequence[Result]) -> str:
    """The preflight table: one row per check, its status, time and detail; a fix under a failure."""
    width = max([len(r.name) for r in results] + [5])
    lines = [f"{'check':<{width}}  {'status':<7}  {'time':>7}  detail"]
    for r in results:
        lines.append(f"{r.name:<{width}}  {r.status:<7}  {r.seconds * 1000:>5.0f}ms  {r.detail}")
        if r.hint:
            lines.append(f"{'':<{width}}  {'':<7}  {'':>7}  fix: {r.hint}")
    passed = sum(r.status == "passed" for r in results)
    failed = sum(r.status == "failed" for r in results)
    warned = sum(r.status == "warning" for r in results)
    skipped = len(results) - passed - failed - warned
    lines.append(f"preflight: {passed} passed, {failed} failed, {skipped} skipped"
                 + (f", {warned} warning{'s' if warned > 1 else ''}" if warned else ""))
    return "\n".join(lines)
