"""The RayJob resumes as train.sh does (issue 18): both source the bundle's one checkpoint.sh, train.sh from beside
itself, the RayJob's entrypoint from the ConfigMap mounted at /acrl/config in the head pod. Here the entrypoint runs
as Ray runs it (`sh -c ENTRYPOINT`) with the ConfigMap's files where the pod mounts them (a temporary folder in the
command instead of /acrl/config), python3 for slime's train.py a stand-in that prints its arguments, against
checkpoint directories laid out as Megatron writes them (test_checkpoint.checkpoint): slime gets the same --load,
--ckpt-step and --start-rollout-id as from train.sh (ACRL_PRINT_ARGV), the same `acrl-resume:` line is written, and a
refusal (exit 2) starts nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_checkpoint import checkpoint
from test_kuberay import KUBERAY

from acrl.compiler import compile_spec, write
from acrl.compiler._pipeline.kuberay_pods import CONFIG_MOUNT
from conftest import SpecWriter, merge

STANDIN_PYTHON = f"""#!/bin/sh
# python3 -c CODE (checkpoint.sh's acrl-resume line): the real one; anything else is slime: print the argv
if [ "$1" = "-c" ]; then exec {sys.executable} "$@"; fi
printf '%s\\0' "$@"
"""


def kuberay_bundle(write_spec: SpecWriter, tmp_path: Path, checkpoint_table: dict[str, Any],
                   num_rollout: int = 10) -> Path:
    """KUBERAY with a volume mounting tmp_path/ckpt (where the checkpoints are) and [checkpoint] ``checkpoint_table``,
    compiled with --target kuberay into tmp_path/b."""
    volumes = [*KUBERAY["kuberay"]["volumes"], {"name": "ckpt", "mount_path": str(tmp_path / "ckpt"), "claim": "c"}]
    spec = write_spec(merge(KUBERAY, {"kuberay": {"volumes": volumes}, "experiment": {"num_rollout": num_rollout},
                                      "checkpoint": {"save_interval": 1, **checkpoint_table}}))
    write(compile_spec(spec, target="kuberay"), tmp_path / "b")
    return tmp_path / "b"


def run_rayjob(folder: Path, work: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The RayJob's entrypoint, run by sh as Ray's job supervisor runs it, with the ConfigMap mounted at work/config."""
    config_map, rayjob = yaml.safe_load_all((folder / "rayjob.yaml").read_text(encoding="utf-8"))
    mount = work / "config"
    mount.mkdir(parents=True)
    for name, text in config_map["data"].items():
        (mount / name).write_text(text, encoding="utf-8")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(STANDIN_PYTHON, encoding="utf-8")
    (bin_dir / "python3").chmod(0o755)
    command = rayjob["spec"]["entrypoint"]
    assert command.count(f"source {CONFIG_MOUNT}/checkpoint.sh") == 1
    command = command.replace(f"source {CONFIG_MOUNT}/checkpoint.sh", f"source {mount}/checkpoint.sh")
    return subprocess.run(["sh", "-c", command], cwd=work, capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(work), **(env or {})})


def print_argv(folder: Path, work: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """train.sh with ACRL_PRINT_ARGV=1: the argv it would submit, after the same checkpoint decision."""
    work.mkdir(parents=True, exist_ok=True)
    return subprocess.run(["bash", str(folder / "train.sh")], cwd=work, capture_output=True, text=True, timeout=60,
                          env={"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(work),
                               "ACRL_PRINT_ARGV": "1", **(env or {})})


def resume_line(stderr: str) -> dict[str, Any]:
    (line,) = [line for line in stderr.splitlines() if line.startswith("acrl-resume: ")]
    data: dict[str, Any] = json.loads(line.removeprefix("acrl-resume: "))
    return data


def launch_flags(argv: list[str]) -> list[str]:
    """What the checkpoint decision adds to slime's argv: --load, --ckpt-step, --start-rollout-id and their values."""
    return [w for i, w in enumerate(argv) if w in ("--load", "--ckpt-step", "--start-rollout-id")
            or (i and argv[i - 1] in ("--load", "--ckpt-step", "--start-rollout-id"))]


CASES = {
    "resumes its own save": ({"save": "SAVE"}, {"save": ("3", 3)},
                             {"decision": "resumed", "iteration": 3, "start_rollout_id": 4}, ["--load", "SAVE"]),
    "starts from the model": ({"save": "SAVE"}, {}, {"decision": "started", "start_rollout_id": 0}, []),
    "continues from load with the first launch's flags": (
        {"save": "SAVE", "load": "LOAD", "ckpt_step": 2, "start_rollout_id": 5}, {"load": ("4", 2, 4)},
        {"decision": "resumed", "iteration": 2, "start_rollout_id": 5},
        ["--load", "LOAD", "--ckpt-step", "2", "--start-rollout-id", "5"]),
    "resumes its save after a continuation began": (
        {"save": "SAVE", "load": "LOAD", "ckpt_step": 2, "start_rollout_id": 5},
        {"load": ("4", 2, 4), "save": ("6", 6)}, {"decision": "resumed", "iteration": 6, "start_rollout_id": 7},
        ["--load", "SAVE"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_rayjob_loads_what_train_sh_loads(case: str, write_spec: SpecWriter, tmp_path: Path) -> None:
    table, layout, expected, flags = CASES[case]
    dirs = {"SAVE": str(tmp_path / "ckpt" / "run"), "LOAD": str(tmp_path / "ckpt" / "base")}
    folder = kuberay_bundle(write_spec, tmp_path, {k: dirs.get(v, v) if isinstance(v, str) else v
                                                   for k, v in table.items()})
    for key, (tracker, *iterations) in layout.items():
        checkpoint(Path(dirs[key.upper()]), tracker, *iterations)
    job = run_rayjob(folder, tmp_path / "pod")
    assert job.returncode == 0, job.stderr
    argv = job.stdout.split("\0")[:-1]
    assert launch_flags(argv) == [dirs.get(w, w) for w in flags]
    assert argv[:2] == ["/root/slime/train.py", "--swiglu"]  # slime's own argv, then what the decision adds
    assert {k: resume_line(job.stderr)[k] for k in expected} == expected
    # train.sh, from the same bundle and the same directories, decides the same
    printed = print_argv(folder, tmp_path / "host")
    assert printed.returncode == 0, printed.stderr
    assert launch_flags(printed.stdout.split("\0")[:-1]) == launch_flags(argv)
    assert resume_line(printed.stderr) == resume_line(job.stderr)


def test_a_refusal_starts_nothing(write_spec: SpecWriter, tmp_path: Path) -> None:
    """resume = "required" and nothing to resume: the entrypoint exits 2 (the RayJob fails: AppFailed) before slime
    starts, with checkpoint.sh's message, as train.sh refuses."""
    folder = kuberay_bundle(write_spec, tmp_path, {"save": str(tmp_path / "ckpt" / "run"), "resume": "required"})
    job = run_rayjob(folder, tmp_path / "pod")
    assert job.returncode == 2 and job.stdout == ""
    assert resume_line(job.stderr)["decision"] == "refused"
    assert f"acrl: error: nothing to resume: no checkpoint (latest_checkpointed_iteration.txt) in {tmp_path}" \
        in job.stderr
    printed = print_argv(folder, tmp_path / "host")
    assert printed.returncode == 2 and resume_line(printed.stderr) == resume_line(job.stderr)


def test_acrl_resume_reaches_the_pod_decision(write_spec: SpecWriter, tmp_path: Path) -> None:
    """ACRL_RESUME in the pod's environment ([cluster] env would put it there) overrides [checkpoint] resume, as for
    train.sh; a bad value stops the entrypoint (exit 1)."""
    folder = kuberay_bundle(write_spec, tmp_path, {"save": str(tmp_path / "ckpt" / "run")})
    checkpoint(tmp_path / "ckpt" / "run", "3", 3)
    never = run_rayjob(folder, tmp_path / "pod1", {"ACRL_RESUME": "never"})
    assert never.returncode == 2 and "resume is \"never\"" in never.stderr
    bad = run_rayjob(folder, tmp_path / "pod2", {"ACRL_RESUME": "sometimes"})
    assert bad.returncode == 1 and bad.stderr.strip().endswith("acrl: error: ACRL_RESUME must be auto, required or "
                                                               "never")


def test_without_a_checkpoint_directory_the_entrypoint_is_unchanged(write_spec: SpecWriter, tmp_path: Path) -> None:
    """No [checkpoint] save or load: no checkpoint.sh in the bundle or the ConfigMap, nothing sourced."""
    write(compile_spec(write_spec(KUBERAY), target="kuberay"), tmp_path / "b")
    config_map, rayjob = yaml.safe_load_all((tmp_path / "b" / "rayjob.yaml").read_text(encoding="utf-8"))
    assert not (tmp_path / "b" / "checkpoint.sh").exists() and "checkpoint.sh" not in config_map["data"]
    assert "checkpoint.sh" not in rayjob["spec"]["entrypoint"] and "SLIME_ARGS" not in rayjob["spec"]["entrypoint"]


def test_the_configmap_holds_the_bundles_checkpoint_sh(write_spec: SpecWriter, tmp_path: Path) -> None:
    """The same bytes in both places: one implementation, hashed in the manifest."""
    folder = kuberay_bundle(write_spec, tmp_path, {"save": str(tmp_path / "ckpt" / "run")})
    config_map, _ = yaml.safe_load_all((folder / "rayjob.yaml").read_text(encoding="utf-8"))
    assert config_map["data"]["checkpoint.sh"] == (folder / "checkpoint.sh").read_text(encoding="utf-8")
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    assert "checkpoint.sh" in manifest["files"]
