"""What a run record says ran (issue 16), gathered from the bundle as the preflight read it (:class:`BundleInfo`)
and from this machine, just before train.sh starts:

- ``inputs``: size and sha256 of the [data] path and each [eval.datasets] file readable here (the datasets
  check's own read, or streamed here: _preflight/fingerprint.py);
- ``stack``: the slime and Megatron-LM checkouts' commits ([slime] dir, megatron_dir) and the versions of sglang,
  torch and ray installed in the python3 train.sh runs slime with, and that python's version: asked of that
  python3 through importlib.metadata, so nothing is imported (acrl itself never imports torch or sglang);
- ``target``: the slime commit of the spec and the Megatron-LM commit and SGLang version the verified manifest
  says it runs;
- ``argv``: the command train.sh submits after `ray job submit --` (train.sh prints it with ACRL_PRINT_ARGV=1:
  python.entrypoint_argv, the very words slime-parser checked), every credential flag's value and secret-looking
  word as ``***`` (compiler/_secrets.py without_secret_flags);
- ``runtime_env``: the Ray job's env_vars as train.sh builds them (the spec's, read from train.sh; the forwarded
  ones from this environment; the pinned CUDA ones) and its working_dir, secret values ``<redacted>``;
- ``wandb``: [wandb] project, group, key_env, and whether the key's variable is set (never its value);
- ``resumed_from``: from train.sh's ``acrl-resume: {json}`` line (how it decided to load a checkpoint), with
  the record of the run that saved that checkpoint (found by its --save).

What cannot be seen is None (or an entry with an ``error``), never a guess.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from acrl.compiler import is_secret_name, job_env_vars, looks_secret_value, read_git_commit, without_secret_flags

from . import _records
from ._preflight.bundle_info import BundleInfo
from ._preflight.checkpoint_layout import find_saver
from ._preflight.checks import dataset_paths
from ._preflight.fingerprint import fingerprint
from ._preflight.outcome import CheckFailed, CheckSkipped
from ._preflight.python import entrypoint_argv, target_python, train_sh_env
from ._preflight.wandb_key import key_env, key_present

REDACTED = "<redacted>"
PINNED = "(pinned by train.sh at launch)"
STACK_TIMEOUT_S = 60.0

# Runs in the target Python: versions from the installed distributions' metadata, nothing imported.
_VERSIONS = r'''
import importlib.metadata as m, json, platform
def version(name):
    try:
        return m.version(name)
    except Exception:
        return None
print(json.dumps({"python": platform.python_version(), "sglang": version("sglang"), "torch": version("torch"),
                  "ray": version("ray")}))
'''


def inputs(info: BundleInfo) -> list[_records.InputFile]:
    """Size and sha256 of each dataset file the bundle names; an entry with ``error`` for one not readable here."""
    found = []
    for key, path in dataset_paths(info):
        try:
            size, digest, why = fingerprint(path)
        except OSError as exc:
            # the address as every record shows it: without a user:password (ACRL_RAY_ADDRESS may hold one)
            shown = _records.public_address(info.cluster_address)
            where = f" (the job runs on {shown})" if shown else ""
            found.append(_records.InputFile(key, str(path), error=f"not readable on the launching machine{where}: "
                                            f"{exc.strerror or exc}"))
            continue
        found.append(_records.InputFile(key, str(path), size=size, sha256=digest, error=why))
    return found


def stack(info: BundleInfo) -> _records.Stack:
    """The stack as found from here (None where it cannot be seen)."""
    commits = [read_git_commit(Path(d)) if isinstance(d, str) and d and Path(d).is_dir() else None
               for d in (info.get("slime.dir"), info.get("slime.megatron_dir"))]
    versions: dict[str, Any] = {}
    try:
        python = target_python("python3")
        out = subprocess.run([python, "-c", _VERSIONS], env=train_sh_env(info), capture_output=True, text=True,
                             errors="replace", stdin=subprocess.DEVNULL, timeout=STACK_TIMEOUT_S)
        if out.returncode == 0 and out.stdout.strip():
            answer = json.loads(out.stdout.strip().splitlines()[-1])
            versions = answer if isinstance(answer, dict) else {}
    except (CheckFailed, OSError, subprocess.TimeoutExpired, ValueError):
        versions = {}

    def text(name: str) -> str | None:
        value = versions.get(name)
        return value if isinstance(value, str) else None
    return _records.Stack(slime_commit=commits[0], megatron_commit=commits[1], sglang=text("sglang"),
                          torch=text("torch"), python=text("python"), ray=text("ray"))


def target(info: BundleInfo) -> _records.Target:
    commit = info.get("slime.commit")
    return _records.Target(slime_commit=commit if isinstance(commit, str) else None,
                           megatron_commit=info.megatron_commit, sglang=info.sglang_version)


def argv(info: BundleInfo) -> list[str] | None:
    """The redacted command train.sh submits; None when train.sh cannot be asked (edited: --allow-modified)."""
    try:
        return without_secret_flags(entrypoint_argv(info))
    except (CheckFailed, CheckSkipped):
        return None


def is_secret(name: str, value: str) -> bool:
    """A variable whose name or value says it holds a secret (compiler/_secrets.py's one notion)."""
    return is_secret_name(name) or looks_secret_value(value, name)


def runtime_env(info: BundleInfo) -> _records.RuntimeEnv | None:
    """The Ray job's runtime environment as train.sh builds it from the spec and this environment; None when
    train.sh cannot be read."""
    try:
        env_vars = job_env_vars((info.path / "train.sh").read_text(encoding="utf-8", errors="surrogateescape"))
    except (OSError, ValueError):
        return None
    here = train_sh_env(info)
    forward = info.get("env.forward") or []
    for name in forward if isinstance(forward, list) else []:
        if isinstance(name, str) and here.get(name):
            env_vars[name] = here[name]  # train.sh refuses to start when one of these is a secret
    if info.get("cuda.home"):
        env_vars["CUDA_HOME"] = str(info.get("cuda.home"))
        env_vars["LD_LIBRARY_PATH"] = PINNED
    shown = {name: REDACTED if is_secret(name, value) else value for name, value in sorted(env_vars.items())}
    return _records.RuntimeEnv(env_vars=shown, working_dir=os.path.realpath(info.path))


def wandb(info: BundleInfo) -> _records.WandbRecord:
    project, group = info.get("wandb.project"), info.get("wandb.group")
    return _records.WandbRecord(enabled=info.get("wandb.enabled", True) is not False,
                                project=project if isinstance(project, str) else None,
                                group=group if isinstance(group, str) else None, key_env=key_env(info),
                                key_present=key_present(info))


def gather(info: BundleInfo) -> dict[str, Any]:
    """The record's fields of what runs (all but resumed_from, known only once train.sh has decided)."""
    return {"inputs": inputs(info), "stack": stack(info), "target": target(info), "argv": argv(info),
            "runtime_env": runtime_env(info), "wandb": wandb(info)}


def resumed_from(line: str | None, runs_dir: Path, exp_id: str, run_id: str) -> _records.ResumedFrom | None:
    """train.sh's ``acrl-resume: {json}`` decision as the record keeps it: None when it started from the model,
    refused, or said nothing (a bundle compiled before issue 16). Its fields: decision (resumed / started /
    refused), mode, checkpoint_dir, tracker, iteration, start_rollout_id, data_state (templates/train.sh.jinja)."""
    if not line:
        return None
    try:
        decision = json.loads(line)
    except ValueError:
        return None
    if not isinstance(decision, dict) or decision.get("decision") != "resumed":
        return None
    directory = decision.get("checkpoint_dir")
    if not isinstance(directory, str) or not directory:
        return None

    def number(name: str) -> int | None:
        value = decision.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    saver = find_saver(runs_dir, directory, exclude=(exp_id, run_id))
    return _records.ResumedFrom(
        checkpoint_dir=directory, iteration=number("iteration"), run_id=saver.get("run_id") if saver else None,
        data_state=decision.get("data_state") is True, exp_id=saver.get("exp_id") if saver else None,
        start_rollout_id=number("start_rollout_id"))
