"""`acrl run` end to end against a real Ray head on 127.0.0.1 (one per test session), with a
bundle compiled against a stand-in slime checkout whose train.py records what it received; and
the paths that run nothing: a modified bundle refused, a failed check, --dry-run, `acrl runs`."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli_w
from standins import write_standin_slime

from acrl.compiler import compile_spec, write
from conftest import MINIMAL, REPO, merge

VENV_BIN = str(Path(sys.executable).parent)
HF_QWEN25_3B = REPO / "tests" / "fixtures" / "hf" / "Qwen2.5-3B-Instruct" / "config.json"

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def tool_env(**extra: str) -> dict[str, str]:
    """This environment, with the venv's ray and python3 first on PATH and no Ray address override."""
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "RAY_API_SERVER_ADDRESS")}
    env["PATH"] = os.pathsep.join([VENV_BIN, env.get("PATH", "")])
    env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    env.update(extra)
    return env


def processes_mentioning(text: str) -> list[int]:
    """Pids of this user's processes whose command line contains ``text``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                if text.encode() in f.read():
                    found.append(int(entry))
        except OSError:
            continue
    return found


def with_descendants(pids: list[int]) -> list[int]:
    """``pids`` and every process below them (Ray's agents rename themselves, ray::DashboardAgent, so
    only their parentage says they belong to this head)."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
    found = set(pids)
    grew = True
    while grew:
        below = {pid for pid, parent in parents.items() if parent in found} - found
        found |= below
        grew = bool(below)
    return sorted(found)


def end_processes(pids: list[int]) -> None:
    """SIGTERM, then SIGKILL after 5 s, to exactly these processes; then wait (5 s at most) until they
    are gone: a killed process is not gone at once on a loaded machine, and a caller that checks
    right away saw a process "left running" that was only still dying."""
    for sig, grace in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + grace
        while grace and time.monotonic() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.1)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purposes
        with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
    return True


@attrs.frozen
class RayHead:
    address: str  # the dashboard URL, as `ray job` and the spec take it
    temp_dir: str


def start_ray_head() -> Iterator[RayHead]:
    """A Ray head on 127.0.0.1 only, in its own temp dir; its processes (found by that dir) are ended
    by id afterwards, never with `ray stop` (which would stop every Ray of this user). The session's
    one is conftest.py's ``ray_head`` fixture, shared by every test module that runs jobs."""
    if shutil.which("ray", path=VENV_BIN) is None:
        pytest.skip("the ray CLI is not installed: pip install 'ray[default]' (the test extra has it)")
    temp_dir = tempfile.mkdtemp(prefix="acrl-ray-", dir="/tmp")  # short: Ray's socket paths have a length limit
    port, dashboard = free_port(), free_port()
    # Every port Ray would otherwise take at a fixed default (10001, 52365, ...) is a free one: another
    # Ray on this machine must not make this one fail, nor this one another.
    ports = [f"--{name}={free_port()}" for name in ("ray-client-server-port", "dashboard-agent-listen-port",
                                                     "dashboard-agent-grpc-port", "runtime-env-agent-port",
                                                     "metrics-export-port")]
    proc = subprocess.run(["ray", "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                           "--dashboard-host=127.0.0.1", f"--dashboard-port={dashboard}", *ports, "--num-cpus=1",
                           "--disable-usage-stats", f"--temp-dir={temp_dir}"],
                          env=tool_env(), capture_output=True, text=True, timeout=120)
    try:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        head = RayHead(f"http://127.0.0.1:{dashboard}", temp_dir)
        wait_until_jobs_are_accepted(head)
        yield head
    finally:
        end_processes(with_descendants(processes_mentioning(temp_dir) + processes_mentioning(f"127.0.0.1:{port}")))
        shutil.rmtree(temp_dir, ignore_errors=True)


def wait_until_jobs_are_accepted(head: RayHead, timeout: float = 90) -> None:
    """`ray start` returns before the node's dashboard agent takes jobs ("No available agent to submit
    job"): submit a no-op job until one is accepted and has finished."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    client = JobSubmissionClient(head.address)
    deadline = time.monotonic() + timeout
    while True:
        try:
            job = client.submit_job(entrypoint="true")
            break
        except RuntimeError as exc:
            if "No available agent" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    while client.get_job_status(job) not in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
        assert time.monotonic() < deadline, "the warm-up job did not finish"
        time.sleep(0.2)


@attrs.frozen
class Project:
    """A compiled bundle and everything it points at, in one temporary folder."""

    root: Path
    bundle: Path
    received: Path  # where the stand-in train.py writes what it got
    runs: Path
    spec: Mapping[str, Any]


def make_project(root: Path, address: str | None = None, env_vars: Mapping[str, str] | None = None,
                 lines: int = 3) -> Project:
    """A stand-in slime checkout, a Megatron dir, a model dir, a dataset and a bundle compiled from them."""
    slime = root / "slime"
    slime.mkdir(parents=True)
    write_standin_slime(slime)
    (root / "megatron").mkdir()
    (root / "model").mkdir()
    shutil.copyfile(HF_QWEN25_3B, root / "model" / "config.json")
    data = root / "train.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"q{i}", "metadata": {"i": i}}) + "\n" for i in range(lines)))
    received = root / "received.json"
    overrides: dict[str, Any] = {
        "model": {"dir": str(root / "model")}, "data": {"path": str(data)},
        "slime": {"dir": str(slime), "megatron_dir": str(root / "megatron")},
        "cluster": {"num_nodes": 1, "gpus_per_node": 1, **({"address": address} if address else {})},
        "parallel": {"tensor": 1}, "rollout": {"gpus_per_engine": 1},
        "env": {"vars": {"STANDIN_OUT": str(received), **(env_vars or {})}},
    }
    spec = merge(MINIMAL, overrides)
    spec_path = root / "spec.toml"
    spec_path.write_text(tomli_w.dumps(spec), encoding="utf-8")
    bundle = root / "bundle"
    write(compile_spec(spec_path), bundle)
    return Project(root, bundle, received, root / "runs", spec)


# This machine has no AWS account: the AWS checks are tested against moto and a stand-in in test_aws_checks.py.
NO_AWS = ("--skip", "aws-identity", "--skip", "s3-bucket", "--skip", "agent-runtime")


def acrl(*args: str, env: Mapping[str, str] | None = None, timeout: float = 180,
         cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    argv = [*args, *NO_AWS] if args[:1] == ("run",) else list(args)
    return subprocess.run([sys.executable, "-m", "acrl.runtime._cli", *argv], capture_output=True, text=True,
                          env=dict(env or tool_env()), timeout=timeout, cwd=cwd)


def only_record(runs: Path) -> dict[str, Any]:
    (path,) = runs.glob("*/*/run.json")
    data: dict[str, Any] = json.loads(path.read_text())
    assert path.parent.name == data["run_id"] and path.parent.parent.name == data["exp_id"]
    assert_record_round_trips(path)
    return data


def assert_record_round_trips(path: Path) -> None:
    """run.json as acrl run wrote it goes through the typed RunRecord and back to the same bytes."""
    from acrl.runtime._records import RunRecord

    text = path.read_text()
    record = RunRecord.from_json(json.loads(text))
    assert json.dumps(record.as_json(), indent=2, sort_keys=True) + "\n" == text


def job_status(head: RayHead, submission_id: str) -> str:
    from ray.job_submission import JobSubmissionClient

    return str(JobSubmissionClient(head.address).get_job_status(submission_id).value)


# --- against the real Ray head --------------------------------------------------------------------

@pytest.mark.slow
def test_a_run_end_to_end(ray_head: RayHead, tmp_path: Path) -> None:
    project = make_project(tmp_path, address=ray_head.address)
    parsed = tmp_path / "parsed.json"  # what slime's parser (the stand-in's) got in preflight
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--runs-dir", str(project.runs),
                env=tool_env(STANDIN_PARSED=str(parsed)))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = only_record(project.runs)
    manifest = json.loads((project.bundle / "manifest.json").read_text())
    assert record["status"] == "succeeded" and record["exit_status"] == 0
    assert record["bundle_hash"] == manifest["bundle_hash"] and record["exp_id"] == "test-exp"
    assert record["submission_id"] == f"acrl-test-exp-{manifest['bundle_hash'][:12]}-{record['run_id']}"
    assert record["ray_address"] == ray_head.address and record["allow_modified"] is False
    assert record["host"] == socket.gethostname() and record["started_at"] <= record["ended_at"]
    statuses = {r["name"]: r["status"] for r in record["preflight"]}
    assert statuses["gpus"] == "skipped" and statuses["datasets"] == statuses["model"] == "passed"
    assert statuses["slime-parser"] == statuses["rollout-module"] == "passed"
    assert job_status(ray_head, record["submission_id"]) == "SUCCEEDED"
    log = (project.runs / "test-exp" / record["run_id"] / "train.log").read_text()
    assert "stand-in train.py: received" in log and f"job {record['submission_id']} succeeded" in log
    assert "stand-in train.py: received" in proc.stdout  # streamed to the terminal too
    received = json.loads(project.received.read_text())
    argv = received["argv"]
    assert json.loads(parsed.read_text()) == argv  # preflight parsed exactly what the job received
    assert argv[argv.index("--custom-config-path") + 1] == "custom_config.yaml"
    assert received["known"]["num_layers"] == 36 and received["known"]["prompt_data"] == project.spec["data"]["path"]
    assert received["custom_config"]["exp_id"] == "test-exp"
    assert received["custom_config"]["agent_runtime_arn"] == MINIMAL["agentcore"]["runtime_arn"]
    # Ray puts the job's working_dir (this bundle, unpacked on the cluster) before the spec's PYTHONPATH
    # (and the head's own PYTHONPATH, if it was started with one, after it).
    assert received["env"]["PYTHONPATH"].split(os.pathsep)[:2] == [received["cwd"], str(tmp_path / "megatron")]
    assert "working_dir_files" in received["cwd"] and received["env"]["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert record["command"] == [f"ACRL_RUN_ID={record['run_id']}", "bash", str(project.bundle / "train.sh")]


@pytest.mark.slow
@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)], ids=["INT", "TERM"])
def test_ctrl_c_stops_the_ray_job_and_records_a_cancelled_run(ray_head: RayHead, tmp_path: Path, signum: int,
                                                              code: int) -> None:
    project = make_project(tmp_path, address=None, env_vars={"STANDIN_SLEEP": "600"})
    # The spec names no cluster: --address is how it reaches the test's head (train.sh: ACRL_RAY_ADDRESS).
    proc = subprocess.Popen([sys.executable, "-m", "acrl.runtime._cli", "run", str(project.bundle), *NO_AWS,
                             "--skip", "gpus", "--address", ray_head.address, "--runs-dir", str(project.runs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=tool_env())
    try:
        deadline = time.monotonic() + 120
        while not project.received.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.2)
        pid = json.loads(project.received.read_text())["pid"]
        assert _alive(pid)
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, out + err
    record = only_record(project.runs)
    assert record["status"] == "cancelled" and record["exit_status"] == code
    assert record["ray_address"] == ray_head.address
    assert "ACRL_RAY_ADDRESS=" + ray_head.address in record["command"]
    assert job_status(ray_head, record["submission_id"]) == "STOPPED"
    deadline = time.monotonic() + 30
    while _alive(pid) and time.monotonic() < deadline:  # the stand-in goes with its job: no orphan
        time.sleep(0.2)
    assert not _alive(pid)
    assert processes_mentioning(str(project.bundle / "train.sh")) == []
    assert "stopping Ray job" in (project.runs / "test-exp" / record["run_id"] / "train.log").read_text()


# --- paths that run nothing -------------------------------------------------------------------------

def test_a_modified_bundle_is_refused(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    with open(project.bundle / "custom_config.yaml", "a", encoding="utf-8") as f:
        f.write("extra: 1\n")
    proc = acrl("run", str(project.bundle), "--runs-dir", str(project.runs))
    assert proc.returncode == 1
    assert "modified: custom_config.yaml" in proc.stderr and "--allow-modified" in proc.stderr
    assert "preflight" not in proc.stdout and not project.runs.exists()
    proc = acrl("run", str(project.bundle), "--allow-modified", "--dry-run", "--skip", "gpus",
                "--runs-dir", str(project.runs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "--allow-modified: running it as it is" in proc.stdout and not project.runs.exists()


def test_allow_modified_is_recorded(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    train = project.bundle / "train.sh"
    train.write_text("#!/usr/bin/env bash\necho \"edited by hand $ACRL_RUN_ID\"\nexit 3\n")
    proc = acrl("run", str(project.bundle), "--allow-modified", "--skip", "gpus", "--runs-dir", str(project.runs))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    record = only_record(project.runs)
    assert record["allow_modified"] is True and record["modified_files"] == ["train.sh"]
    assert record["status"] == "failed" and record["exit_status"] == 3
    assert f"edited by hand {record['run_id']}" in proc.stdout
    log = project.runs / "test-exp" / record["run_id"] / "train.log"
    assert log.read_text() == f"edited by hand {record['run_id']}\n"


def test_a_failed_check_runs_nothing(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    (tmp_path / "train.jsonl").write_text('{"prompt": "ok", "metadata": {}}\nnot json\n')
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--runs-dir", str(project.runs))
    assert proc.returncode == 1
    assert re.search(r"^datasets +failed .*\bline 2: ", proc.stdout, re.M), proc.stdout
    assert re.search(r"^(?!datasets ).* failed ", proc.stdout, re.M) is None  # only the check that failed
    assert "(datasets)" in proc.stderr.splitlines()[0] and not project.runs.exists()
    assert not project.runs.exists()


def test_dry_run_prints_what_it_would_run_and_records_nothing(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    proc = acrl("run", str(project.bundle), "--dry-run", "--address", "http://10.0.0.1:8265", "--skip", "gpus",
                "--runs-dir", str(project.runs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"{project.bundle}: intact, bundle sha256:")
    assert re.search(r"^sglang +skipped .*sglang is not installed in ", proc.stdout, re.M), proc.stdout
    assert any(line.startswith("preflight: 8 passed, 0 failed, 10 skipped") for line in lines)
    (would,) = [line for line in lines if line.startswith("would run: ")]
    assert would.endswith(f"ACRL_RAY_ADDRESS=http://10.0.0.1:8265 bash {project.bundle / 'train.sh'}")
    assert "ACRL_RUN_ID=" in would and not project.runs.exists()


def test_slimes_parser_rejecting_the_argv_stops_the_run(tmp_path: Path) -> None:
    """A flag slime's parsers do not know, and a validation error of slime's, fail preflight with
    slime's own words; nothing is run. The argv is train.sh's own, W&B flags included."""
    project = make_project(tmp_path)
    parsed = tmp_path / "parsed.json"
    env = tool_env(STANDIN_UNKNOWN="--rollout-batch-size", STANDIN_PARSED=str(parsed), WANDB_API_KEY="k-123")
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--runs-dir", str(project.runs), env=env)
    assert proc.returncode == 1
    assert re.search(r"^slime-parser +failed .*no parser of this slime knows --rollout-batch-size", proc.stdout, re.M)
    assert "(slime-parser)" in proc.stderr and not project.runs.exists()  # the failed check, by name
    argv = json.loads(parsed.read_text())
    assert argv[-3:] == ["--custom-config-path", "custom_config.yaml", "--use-wandb"] and "k-123" not in argv
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--dry-run",
                env=tool_env(STANDIN_REJECT="rollout_batch_size must be positive"))
    assert proc.returncode == 1
    assert re.search(r"^slime-parser +failed .*slime/utils/arguments.py.*rejected the arguments: "
                     r"AssertionError: rollout_batch_size must be positive", proc.stdout, re.M), proc.stdout


def test_slimes_parser_runs_with_the_jobs_environment(tmp_path: Path) -> None:
    """The parse runs with the environment the Ray job gives slime (train.sh's runtime env: CUDA_DEVICE_MAX_CONNECTIONS
    = 1 and [env] vars), not only the launching shell's, which has neither (issue 15: Megatron asserts it on
    Hopper)."""
    project = make_project(tmp_path)
    require = f"CUDA_DEVICE_MAX_CONNECTIONS=1,STANDIN_OUT={project.received}"
    env = {k: v for k, v in tool_env(STANDIN_REQUIRE_ENV=require).items() if k != "CUDA_DEVICE_MAX_CONNECTIONS"}
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--dry-run", env=env)
    assert re.search(r"^slime-parser +passed", proc.stdout, re.M), proc.stdout
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--dry-run",
                env={**env, "STANDIN_REQUIRE_ENV": "CUDA_DEVICE_MAX_CONNECTIONS=8"})
    assert re.search(r"^slime-parser +failed .*CUDA_DEVICE_MAX_CONNECTIONS must be 8", proc.stdout, re.M), proc.stdout


def test_a_rollout_function_that_does_not_import_stops_the_run(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    spec = merge(project.spec, {"rollout": {"custom_rm_path": "my_rewards.score"}})
    (tmp_path / "spec.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    write(compile_spec(tmp_path / "spec.toml"), project.bundle, force=True)
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--dry-run")
    assert proc.returncode == 1
    assert re.search(r"^rollout-module +failed +\d+ms +rollout.custom_rm_path \(--custom-rm-path\) = "
                     r"my_rewards.score: cannot import my_rewards: ModuleNotFoundError", proc.stdout, re.M), proc.stdout
    (project.bundle / "my_rewards.py").write_text("score = 3\n")  # in the bundle: the job's working_dir
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--dry-run", "--allow-modified")
    assert proc.returncode == 1 and "my_rewards has no function 'score'" in proc.stdout  # golden wording: the reason
    assert re.search(r"^slime-parser +skipped", proc.stdout, re.M) is None  # only train.sh edits skip it
    (project.bundle / "my_rewards.py").write_text("def score(*args):\n    return 1.0\n")
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--dry-run", "--allow-modified")
    assert proc.returncode == 0, proc.stdout
    assert re.search(r"^rollout-module +passed +\d+ms +3 functions import in ", proc.stdout, re.M), proc.stdout


def test_unknown_skip_and_missing_bundle_are_errors_without_traceback(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    proc = acrl("run", str(project.bundle), "--skip", "gpu", "--dry-run")
    message, fix = proc.stderr.splitlines()
    assert proc.returncode == 2 and message.startswith("--skip gpu: ") and fix.startswith("  fix: ")
    assert {"gpus", "cuda-home", "datasets"} <= set(fix.replace(",", " ").split())
    proc = acrl("run", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and proc.stderr.startswith(f"{tmp_path / 'nowhere'}: ")
    assert "Traceback" not in proc.stderr


def test_a_run_record_round_trips_and_one_of_another_shape_is_refused_naming_the_key(tmp_path: Path) -> None:
    from acrl.compiler import ManifestShapeError
    from acrl.runtime._records import Launcher, PreflightEntry, RunRecord, write_record

    record = RunRecord(acrl_version="0.1.0", exp_id="exp", run_id="r1", bundle="/b", bundle_hash="0" * 64,
                       submission_id="acrl-exp-000000000000-r1", ray_address=None, host="h",
                       launcher=Launcher("h", 12, None, None), command=["ACRL_RUN_ID=r1", "bash", "/b/train.sh"],
                       allow_modified=False, modified_files=[], expected_hash=None,
                       preflight=[PreflightEntry("gpus", "skipped", "why", "", 0.25)], status="unknown",
                       exit_status=75, duration_s=2.0, note="the job may still be running", error="boom")
    path = write_record(tmp_path, record)
    data = json.loads(path.read_text())
    assert data["note"] == record.note and "log_error" not in data  # an optional key only when it has a value
    assert RunRecord.from_json(data) == record
    assert_record_round_trips(path)
    for key, value in (("exit_status", "75"), ("launcher", {"host": "h"}), ("preflight", [{"name": 1}])):
        with pytest.raises(ManifestShapeError) as caught:
            RunRecord.from_json(dict(data, **{key: value}))
        assert caught.value.key.split(".")[0] == key


def test_runs_lists_the_records(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    proc = acrl("runs", "--runs-dir", str(runs))
    assert proc.returncode == 0 and proc.stdout.strip() == "no runs recorded"
    for run_id, status, started in (("r2", "failed", "2026-01-02T00:00:00.000Z"),
                                    ("r1", "succeeded", "2026-01-01T00:00:00.000Z")):
        (runs / "exp" / run_id).mkdir(parents=True)  # records of any shape (another acrl's) are listed
        (runs / "exp" / run_id / "run.json").write_text(json.dumps(
            {"exp_id": "exp", "run_id": run_id, "status": status, "started_at": started, "exit_status": 0,
             "duration_s": 1.5, "submission_id": f"acrl-exp-{run_id}"}))
    (runs / "exp" / "broken").mkdir()
    (runs / "exp" / "broken" / "run.json").write_text("{")
    proc = acrl("runs", "--runs-dir", str(runs), "--json")
    assert proc.returncode == 0
    assert [(r["run_id"], r["status"]) for r in json.loads(proc.stdout)] == [
        ("broken", "unreadable"), ("r1", "succeeded"), ("r2", "failed")]
    table = acrl("runs", "--runs-dir", str(runs)).stdout.splitlines()
    assert table[0].split()[:3] == ["started", "(UTC)", "exp_id"] and "acrl-exp-r2" in table[-1]


@pytest.mark.parametrize(("signum", "received"), [(signal.SIGHUP, "TERM"), (signal.SIGINT, "INT")])
def test_signals_reach_train_sh_once_and_hangup_becomes_term(tmp_path: Path, signum: int, received: str) -> None:
    project = make_project(tmp_path)
    (project.bundle / "train.sh").write_text(
        "#!/usr/bin/env bash\n"
        "trap 'echo \"got INT\"; exit 130' INT\n"
        "trap 'echo \"got TERM\"; exit 143' TERM\n"
        "echo ready\n"
        "while :; do sleep 0.1; done\n")
    proc = subprocess.Popen([sys.executable, "-m", "acrl.runtime._cli", "run", str(project.bundle), *NO_AWS,
                             "--allow-modified", "--skip", "gpus", "--runs-dir", str(project.runs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=tool_env())
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if line == "ready\n":
                break
        proc.send_signal(signum)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    code = 143 if received == "TERM" else 130
    assert proc.returncode == code, out + err
    assert f"got {received}" in out and f"{signal.Signals(signum).name}: asking train.sh" in err
    record = only_record(project.runs)
    assert record["status"] == "cancelled" and record["exit_status"] == code
    log = (project.runs / "test-exp" / record["run_id"] / "train.log").read_text()
    assert log == f"ready\ngot {received}\n"


def test_without_bash_the_run_is_recorded_as_failed(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    env = tool_env(PATH=str(tmp_path / "empty"))
    # python3 is gone too
    skips = [f"--skip={name}" for name in ("gpus", "bash", "ray-cli", "rollout-module", "sglang")]
    proc = acrl("run", str(project.bundle), *skips, "--runs-dir", str(project.runs), env=env)
    assert proc.returncode == 127 and "acrl: cannot start bash" in proc.stderr and "Traceback" not in proc.stderr
    record = only_record(project.runs)
    assert record["status"] == "failed" and record["exit_status"] == 127


def test_credentials_in_the_address_reach_train_sh_but_not_the_record(tmp_path: Path) -> None:
    """An authenticated address comes from the environment (--address with one is refused: test_secrets.py)."""
    project = make_project(tmp_path)
    (project.bundle / "train.sh").write_text('#!/usr/bin/env bash\necho "address=$ACRL_RAY_ADDRESS"\n')
    proc = acrl("run", str(project.bundle), "--allow-modified", "--skip", "gpus", "--runs-dir", str(project.runs),
                env=tool_env(ACRL_RAY_ADDRESS="https://admin:hunter2@ray.example:8265"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "address=https://admin:hunter2@ray.example:8265" in proc.stdout  # train.sh's own output
    (path,) = project.runs.glob("*/*/run.json")
    text = path.read_text()
    assert "hunter2" not in text and "admin" not in text
    assert json.loads(text)["ray_address"] == "https://ray.example:8265"
    assert "ACRL_RAY_ADDRESS=https://ray.example:8265" in json.loads(text)["command"]


@pytest.mark.parametrize(("address", "recorded"), [
    ("https://admin:hunter2@ray.example:8265", "https://ray.example:8265"),
    ("admin:hunter2@10.1.2.3:8265", "10.1.2.3:8265"),  # no scheme: urlsplit saw no host and kept it whole
    ("http://10.1.2.3:8265", "http://10.1.2.3:8265"),
])
def test_a_recorded_address_never_holds_a_password(address: str, recorded: str) -> None:
    from acrl.runtime._records import public_address

    assert public_address(address) == recorded


# --- tampering (issue 11): acrl run takes nothing from unverified manifest fields ---------------------

def test_an_edited_exp_id_is_refused_and_no_record_is_written_outside_the_runs_dir(tmp_path: Path) -> None:
    """exp_id names the record's directory: one edited to ../x (bundle hash left as it was, or
    recomputed by a forger) never makes `acrl run` write outside --runs-dir."""
    project = make_project(tmp_path)
    manifest = json.loads((project.bundle / "manifest.json").read_text())
    (project.bundle / "manifest.json").write_text(json.dumps(dict(manifest, exp_id="../x")))
    before = sorted(p.name for p in tmp_path.iterdir())
    for extra in [(), ("--allow-modified",)]:
        proc = acrl("run", str(project.bundle), *extra, "--skip", "gpus", "--runs-dir", str(project.runs))
        assert proc.returncode == 2, proc.stdout + proc.stderr
        assert proc.stderr.startswith(f"{project.bundle / 'manifest.json'}: is not an acrl manifest: exp_id \"../x\"")
        assert "Traceback" not in proc.stderr and "preflight" not in proc.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == before and not project.runs.exists()


def test_an_edited_derived_section_is_refused_before_the_gpu_check(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    manifest = json.loads((project.bundle / "manifest.json").read_text())
    forged = dict(manifest, derived=dict(manifest["derived"], actor_gpus=0, rollout_gpus=0))
    (project.bundle / "manifest.json").write_text(json.dumps(forged))
    proc = acrl("run", str(project.bundle), "--dry-run", "--runs-dir", str(project.runs))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "preflight" not in proc.stdout
    from acrl.compiler import read_bundle

    assert read_bundle(project.bundle).verification.recomputed_hash is not None  # why it was refused
    # run anyway: the GPUs needed come from spec.toml, not from the manifest's unverified copy
    from acrl.runtime._preflight.checks import read_bundle_info

    info = read_bundle_info(project.bundle)
    assert info.derived is not None and info.derived.actor_gpus == 1 == manifest["derived"]["actor_gpus"]


def test_expect_hash_pins_the_reviewed_bundle(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    reviewed = json.loads((project.bundle / "manifest.json").read_text())["bundle_hash"]
    proc = acrl("run", str(project.bundle), "--dry-run", "--skip", "gpus", "--expect-hash", f"sha256:{reviewed}",
                "--runs-dir", str(project.runs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines()[0] == f"{project.bundle}: intact, bundle sha256:{reviewed} (the expected hash)"
    # train.sh edited and the manifest rewritten to match it: intact for verify, but not the reviewed bundle
    train = project.bundle / "train.sh"
    train.write_text("#!/usr/bin/env bash\necho \"edited by hand $ACRL_RUN_ID\"\nexit 3\n")
    from acrl.compiler._review.verify import verify_bundle
    from conftest import forge_manifest

    forged = forge_manifest(project.bundle)
    assert verify_bundle(project.bundle).intact
    for extra in [(), ("--allow-modified",)]:
        proc = acrl("run", str(project.bundle), *extra, "--skip", "gpus", "--expect-hash", reviewed,
                    "--runs-dir", str(project.runs))
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert (f"  bundle hash: the files hash to sha256:{forged['bundle_hash']}, not the expected "
                f"sha256:{reviewed}") in proc.stderr.splitlines()
        assert "preflight" not in proc.stdout and not project.runs.exists()
    # the hash of what is there now, pinned: it runs, and the record says which hash was pinned
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--skip", "slime-parser",  # train.sh is ours now
                "--expect-hash", forged["bundle_hash"].upper(), "--runs-dir", str(project.runs))
    assert proc.returncode == 3, proc.stdout + proc.stderr
    record = only_record(project.runs)
    assert record["expected_hash"] == forged["bundle_hash"] == record["bundle_hash"]
    assert record["allow_modified"] is False
