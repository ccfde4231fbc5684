"""`acrl run` of a --target kuberay bundle, and `acrl status` / `acrl logs` of its record (issue 18), against the
stand-in kubectl (tests/shims/kubectl): it records every call's argv (and what `apply` read on stdin) and answers with
RayJob documents as KubeRay v1.7.0 writes them (tests/data/kuberay/rayjob_status.json), scripted per test. No cluster.

Asserted: the preflight's Kubernetes rows (context and namespace, the CRD, the Secrets' key names, an existing RayJob)
and what they refuse; `kubectl apply -f -` of the verified rayjob.yaml; the watch to the RayJob's end and the exit
status and record it gives (succeeded, the entrypoint's exit code, KubeRay's failure reasons, unknown); Ctrl-C
deleting the RayJob; the job's log copied and its acrl-resume line kept; and that no Secret value reaches any
process's argv, the record, the run's log or acrl's output."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from test_kuberay import KUBERAY

from acrl.compiler import AcrlError, UsageError, compile_spec, write
from acrl.runtime import RunOptions, run_bundle
from acrl.runtime._kube import SECRET_KEYS_TEMPLATE
from conftest import REPO, SpecWriter, merge

SHIMS = REPO / "tests" / "shims"
AWS = ("aws-identity", "s3-bucket", "agent-runtime")  # this machine's AWS credentials: not what these tests are about
WANDB_VALUE = "wandb-5e3c2ret-0123456789abcdef"  # the Secret's values, and the same in this environment
AWS_VALUE = "aws/5ecret+key/EXAMPLEKEY0123456789"
SECRETS = {"team-secrets": {"MY_WANDB_KEY": WANDB_VALUE, "AWS_ACCESS_KEY_ID": "AKIAEXAMPLE0123456789",
                            "AWS_SECRET_ACCESS_KEY": AWS_VALUE, "WANDB_ENTITY": "team", "TEAM_NAME": "rl",
                            "AWS_SESSION_TOKEN": "token-5e3c2ret-value"}}
RESUMED = {"decision": "resumed", "mode": "auto", "checkpoint_dir": "/data/ckpt", "tracker": "9", "iteration": 9,
           "start_rollout_id": 10, "data_state": True, "message": "resuming from /data/ckpt at rollout 10"}
JOB_LOG = ("2026-11-21 16:12:50,123\tINFO cli.py:41 -- Job submitted\nacrl-resume: " + json.dumps(RESUMED)
           + "\nacrl: resuming from /data/ckpt at rollout 10 (iteration 9)\nstand-in train.py: rollout 10\n")
SUCCESS = ["new", "initializing", "running-pending", "running", "complete-succeeded"]


@dataclass
class Kube:
    """A compiled --target kuberay bundle and the stand-in kubectl's files."""

    root: Path
    bundle: Path
    name: str  # the RayJob's

    def scenario(self, **plan: Any) -> None:
        (self.root / "scenario.json").write_text(json.dumps({"secrets": SECRETS, **plan}), encoding="utf-8")
        (self.root / "state.json").unlink(missing_ok=True)
        (self.root / "calls.jsonl").unlink(missing_ok=True)

    def calls(self) -> list[dict[str, Any]]:
        log = self.root / "calls.jsonl"
        return [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []

    def commands(self) -> list[list[str]]:
        """Each call's argv after `kubectl` and its --context/--namespace."""
        out = []
        for call in self.calls():
            argv = call["argv"][1:]
            while argv[:1] in (["--context"], ["--namespace"]):
                argv = argv[2:]
            out.append(argv)
        return out

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(p.read_text(encoding="utf-8")) for p in sorted((self.root / "runs").glob("*/*/run.json"))]

    def run(self, *skip: str, out: StringIO | None = None, **options: Any) -> int:
        return run_bundle(RunOptions(str(self.bundle), skip=(*AWS, *skip), runs_dir=str(self.root / "runs"),
                                     **options), out=out or StringIO())


@pytest.fixture
def kube(write_spec: SpecWriter, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Kube:
    spec = write_spec(merge(KUBERAY, {"checkpoint": {"save": "/data/ckpt", "save_interval": 5},
                                      "experiment": {"num_rollout": 20}}))
    bundle = compile_spec(spec, target="kuberay")
    write(bundle, tmp_path / "b")
    monkeypatch.setenv("PATH", os.pathsep.join([str(SHIMS), str(Path(sys.executable).parent), "/usr/bin", "/bin"]))
    for name, value in {"ACRL_SHIM_LOG": tmp_path / "calls.jsonl", "ACRL_KUBE_SCENARIO": tmp_path / "scenario.json",
                        "ACRL_KUBE_STATE": tmp_path / "state.json"}.items():
        monkeypatch.setenv(name, str(value))
    monkeypatch.setenv("ACRL_KUBE_POLL", "0.01")
    monkeypatch.setenv("MY_WANDB_KEY", WANDB_VALUE)  # set here too: it must not travel anywhere from here either
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_VALUE)
    monkeypatch.delenv("ACRL_RAY_ADDRESS", raising=False)
    monkeypatch.chdir(tmp_path)
    rayjob = bundle.files["rayjob.yaml"].decode()
    name = rayjob.split("\nkind: RayJob\nmetadata:\n  name: ", 1)[1].split("\n", 1)[0]
    return Kube(tmp_path, tmp_path / "b", name)


def rows(output: str) -> dict[str, tuple[str, str]]:
    """The preflight table: check -> (status, detail)."""
    table = output.split("check ", 1)[1].split("\npreflight: ", 1)[0].splitlines()[1:]
    return {line.split()[0]: (line.split()[1], line.split(None, 3)[3] if len(line.split()) > 3 else "")
            for line in table if line and not line.startswith(" ")}


def test_a_run_that_succeeds(kube: Kube) -> None:
    kube.scenario(statuses=SUCCESS, logs=JOB_LOG)
    out = StringIO()
    assert kube.run(out=out) == 0
    text = out.getvalue()
    table = rows(text)
    assert table["kube-context"] == ("passed", "context test-cluster, namespace rl (the context's)")
    assert table["rayjob-crd"][0] == table["secrets"][0] == table["rayjob-exists"][0] == "passed"
    assert table["gpus"][0] == table["slime-parser"][0] == table["wandb"][0] == "skipped"
    # the calls, in order: the preflight's, then apply, the watch and the job's log
    commands = kube.commands()
    assert commands[:2] == [["config", "current-context"],
                            ["config", "view", "--minify", "-o", "jsonpath={.contexts[0].context.namespace}"]]
    assert ["get", "crd", "rayjobs.ray.io", "-o", "json"] in commands
    assert ["get", "rayjob", kube.name, "-o", "json"] in commands[:6]  # rayjob-exists
    applied = commands.index(["apply", "-f", "-"])
    assert [c[:2] for c in commands[applied + 1:]].count(["get", "rayjob"]) == len(SUCCESS)
    assert ["logs", "-f", f"job/{kube.name}"] in commands[applied:]
    calls = kube.calls()
    assert calls[applied]["stdin"] == (kube.bundle / "rayjob.yaml").read_text(encoding="utf-8")
    assert all(c["argv"][1:5] == ["--context", "test-cluster", "--namespace", "rl"] for c in calls[applied:])
    # progress lines, the job's log, the end
    for line in ("acrl: RayJob {}: Initializing, Ray job not submitted yet", "acrl: RayJob {}: Running, Ray job "
                 "PENDING", "acrl: RayJob {}: Complete, Ray job SUCCEEDED: Job finished successfully."):
        assert line.format(kube.name) in text
    assert "stand-in train.py: rollout 10" in text and " succeeded (exit status 0); record: " in text
    (record,) = kube.records()
    assert (record["status"], record["exit_status"], record["submission_id"]) == ("succeeded", 0,
                                                                                 f"{kube.name}-x7k2p")
    assert record["ray_address"] is None and record["log"] == "rayjob.log"
    assert record["kuberay"] == {
        "name": kube.name, "namespace": "rl", "context": "test-cluster", "config_map": f"{kube.name}-config",
        "created": True, "job_id": f"{kube.name}-x7k2p", "cluster": f"{kube.name}-4tq9c",
        "deployment_status": "Complete", "job_status": "SUCCEEDED", "reason": None,
        "message": "Job finished successfully.", "secrets": {"team-secrets": sorted(SECRETS["team-secrets"])}}
    assert record["command"][:8] == ["kubectl", "--context", "test-cluster", "--namespace", "rl", "apply", "-f", "-"]
    assert record["resumed_from"]["checkpoint_dir"] == "/data/ckpt" and record["resumed_from"]["iteration"] == 9
    assert record["argv"][:3] == ["python3", "/root/slime/train.py", "--swiglu"]
    assert record["argv"][-3:] == ["--use-wandb", "--wandb-project", "my project"]  # the Secret has the key
    assert record["runtime_env"]["env_vars"]["NCCL_DEBUG"] == "WARN"
    assert record["wandb"]["key_present"] is True and record["started_at"] and record["ended_at"]
    assert {p["name"]: p["status"] for p in record["preflight"]}["secrets"] == "passed"
    log = (kube.root / "runs" / "test-exp" / record["run_id"] / "rayjob.log").read_text(encoding="utf-8")
    assert "stand-in train.py: rollout 10" in log and f"acrl: RayJob {kube.name}: Complete" in log


@pytest.mark.parametrize(("status", "code", "reason"), [
    ("failed-app", 3, "AppFailed"),  # Ray's message says the entrypoint's exit code: train.sh would exit it too
    ("failed-deadline", 1, "DeadlineExceeded"),
    ("failed-pre-running-deadline", 1, "PreRunningDeadlineExceeded"),
    ("failed-submission", 1, "SubmissionFailed"),
    ("validation-failed", 1, "ValidationFailed"),
])
def test_a_run_that_fails_says_why(status: str, code: int, reason: str, kube: Kube) -> None:
    kube.scenario(statuses=["initializing", "running", status], logs="stand-in: failing\n")
    out = StringIO()
    assert kube.run(out=out) == code
    (record,) = kube.records()
    assert (record["status"], record["exit_status"], record["kuberay"]["reason"]) == ("failed", code, reason)
    last = [line for line in out.getvalue().splitlines() if line.startswith(f"acrl: RayJob {kube.name}: ")][-1]
    assert reason in last and record["kuberay"]["message"].splitlines()[0] in last  # why, as KubeRay says


def test_a_stopped_ray_job_is_cancelled(kube: Kube) -> None:
    kube.scenario(statuses=["running", "complete-stopped"])
    assert kube.run() == 1
    (record,) = kube.records()
    assert (record["status"], record["kuberay"]["job_status"]) == ("cancelled", "STOPPED")


def test_retrying_is_not_the_end(kube: Kube) -> None:
    """A failed attempt that backoffLimit retries is Retrying: the watch goes on to the retry's end."""
    kube.scenario(statuses=["running", "retrying", "initializing", "running", "complete-succeeded"])
    out = StringIO()
    assert kube.run(out=out) == 0
    assert f"acrl: RayJob {kube.name}: Retrying, Ray job FAILED, AppFailed" in out.getvalue()


def test_a_missing_secret_is_refused_before_anything_is_applied(kube: Kube) -> None:
    kube.scenario(statuses=SUCCESS)
    (kube.root / "scenario.json").write_text(json.dumps({"secrets": {}, "statuses": SUCCESS}), encoding="utf-8")
    out = StringIO()
    with pytest.raises(AcrlError) as info:
        kube.run(out=out)
    assert "preflight failed (secrets)" in info.value.message
    status, detail = rows(out.getvalue())["secrets"]
    assert status == "failed" and detail.startswith("no Secret team-secrets in namespace rl: the pods would not "
                                                    "start without AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
                                                    "MY_WANDB_KEY (CreateContainerConfigError)")
    assert ["apply", "-f", "-"] not in kube.commands() and kube.records() == []


def test_a_missing_required_key_fails_an_optional_one_warns(kube: Kube) -> None:
    keys = dict(SECRETS["team-secrets"])
    del keys["MY_WANDB_KEY"], keys["TEAM_NAME"]
    (kube.root / "scenario.json").write_text(json.dumps({"secrets": {"team-secrets": keys}}), encoding="utf-8")
    out = StringIO()
    with pytest.raises(AcrlError):
        kube.run(out=out)
    detail = rows(out.getvalue())["secrets"][1]
    assert "Secret team-secrets has no key MY_WANDB_KEY: the pods would not start" in detail
    assert "Secret team-secrets has no key TEAM_NAME: optional, the pods run without" in detail


@pytest.mark.parametrize(("crd", "status", "detail"), [
    ("missing", "failed", "the cluster of context test-cluster has no RayJob CRD (rayjobs.ray.io): KubeRay is not "
                          "installed"),
    ("forbidden", "warning", "cannot read the CRD rayjobs.ray.io (forbidden)"),
])
def test_the_crd(crd: str, status: str, detail: str, kube: Kube) -> None:
    kube.scenario(crd=crd, statuses=SUCCESS)
    out = StringIO()
    if status == "failed":
        with pytest.raises(AcrlError):
            kube.run(out=out)
        assert rows(out.getvalue())["rayjob-exists"] == ("skipped", "needs rayjob-crd, which did not pass")
        assert ["apply", "-f", "-"] not in kube.commands()
    else:
        assert kube.run(out=out) == 0
    found = rows(out.getvalue())["rayjob-crd"]
    assert found[0] == status and found[1].startswith(detail)


def test_an_older_kuberay_without_a_field_the_rayjob_uses(write_spec: SpecWriter, kube: Kube) -> None:
    """preRunningDeadlineSeconds is KubeRay v1.6.0's: v1.5.1's CRD does not know it (tests/data/kuberay/
    crd_versions.json, from the CRDs of both releases)."""
    write(compile_spec(write_spec(merge(KUBERAY, {"kuberay": {"pre_running_deadline_seconds": 600}})),
                       target="kuberay"), kube.bundle, force=True)
    kube.scenario(crd="v1.5.1")
    out = StringIO()
    with pytest.raises(AcrlError):
        kube.run(out=out)
    status, detail = rows(out.getvalue())["rayjob-crd"]
    assert status == "failed" and "does not know preRunningDeadlineSeconds" in detail


@pytest.mark.parametrize("existing", ["complete-succeeded", "running"])
def test_an_existing_rayjob_is_refused(existing: str, kube: Kube) -> None:
    kube.scenario(existing=existing)
    out = StringIO()
    with pytest.raises(AcrlError) as info:
        kube.run(out=out)
    assert "--skip rayjob-exists" in (info.value.hint or "")
    text = out.getvalue()
    assert f"RayJob {kube.name} already exists in namespace rl" in text
    assert "would leave it as it is and start no new run" in text
    assert f"kubectl --context test-cluster --namespace rl delete rayjob {kube.name}" in text
    assert ("it is running now" in text) is (existing == "running")
    assert ["apply", "-f", "-"] not in kube.commands()


def test_an_existing_rayjob_applied_anyway_is_said(kube: Kube) -> None:
    """--skip rayjob-exists: `kubectl apply` says unchanged, and the run says it watched the old RayJob."""
    kube.scenario(existing="complete-succeeded", statuses=["complete-succeeded"])
    out = StringIO()
    assert kube.run("rayjob-exists", out=out) == 0
    assert "existed (kubectl apply left it as it was): this run watches it" in out.getvalue()
    assert kube.records()[0]["kuberay"]["created"] is False


def test_no_context(kube: Kube) -> None:
    kube.scenario(current_context=None)
    out = StringIO()
    with pytest.raises(AcrlError):
        kube.run(out=out)
    status, detail = rows(out.getvalue())["kube-context"]
    assert status == "failed" and detail.startswith("kubectl has no current context")
    assert rows(out.getvalue())["secrets"][0] == "skipped"


def test_context_and_namespace_options(kube: Kube) -> None:
    kube.scenario(contexts={"test-cluster": "rl", "other": ""}, statuses=SUCCESS)
    assert kube.run(context="other", namespace="team-a") == 0
    calls = kube.calls()
    assert calls[0]["argv"][1:] == ["config", "get-contexts", "other", "-o", "name"]
    assert all(c["argv"][1:5] == ["--context", "other", "--namespace", "team-a"] for c in calls if
               c["argv"][1] != "config" and "crd" not in c["argv"])
    assert kube.records()[0]["kuberay"]["namespace"] == "team-a"
    with pytest.raises(AcrlError):
        kube.run(context="missing")


def test_unknown_when_the_rayjob_cannot_be_read(kube: Kube, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ACRL_STATUS_GRACE", "0")
    kube.scenario(statuses=["running"], get_fails=list(range(1, 50)))
    out = StringIO()
    assert kube.run(out=out) == 75
    (record,) = kube.records()
    assert record["status"] == "unknown" and "i/o timeout" in record["error"]
    assert f"kubectl --context test-cluster --namespace rl delete rayjob {kube.name}" in record["note"]


def test_a_rayjob_deleted_by_someone_else(kube: Kube) -> None:
    """`kubectl delete rayjob` from another terminal while it runs: KubeRay stopped the job; the run is cancelled."""
    kube.scenario(statuses=["running"], vanishes_after=3)
    assert kube.run() == 1
    (record,) = kube.records()
    assert record["status"] == "cancelled" and "was deleted while it ran, not by this acrl run" in record["note"]


def test_dry_run_applies_nothing(kube: Kube) -> None:
    kube.scenario()
    out = StringIO()
    assert kube.run(out=out, dry_run=True) == 0
    assert "would run: kubectl --context test-cluster --namespace rl apply -f - < " in out.getvalue()
    assert ["apply", "-f", "-"] not in kube.commands() and kube.records() == []


def test_options_of_the_other_launch_are_usage_errors(kube: Kube) -> None:
    kube.scenario()
    for options in ({"address": "http://head:8265"}, {"resume": True}):
        with pytest.raises(UsageError):
            kube.run(**options)
    with pytest.raises(UsageError):  # train.sh's launch takes no kubectl options
        kube.run(target="ray", context="test-cluster")
    assert kube.calls() == []


def test_target_ray_runs_train_sh(kube: Kube) -> None:
    """--target ray: the same bundle's train.sh (here only as far as --dry-run), no kubectl."""
    kube.scenario()
    out = StringIO()
    assert kube.run("bash", "ray-cli", "slime", "megatron", "sglang", "slime-parser", "rollout-module", "model",
                    "datasets", "gpus", "checkpoint", "wandb", out=out, dry_run=True, target="ray") == 0
    assert "would run: ACRL_RUN_ID=" in out.getvalue() and kube.calls() == []


def test_the_command_line_skips_kube_checks_and_refuses_misuse_with_exit_2(kube: Kube) -> None:
    """Through the console script: --skip a,b names the Kubernetes checks as well (comma-separated or repeated), an
    unknown name, a Ray-only option on a kuberay bundle and a kubectl option with --target ray are usage errors
    (exit 2) before any kubectl call."""
    kube.scenario(statuses=SUCCESS)
    acrl_bin = str(Path(sys.executable).parent / "acrl")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([acrl_bin, "run", str(kube.bundle), *args, "--runs-dir", str(kube.root / "runs")],
                              cwd=kube.root, capture_output=True, text=True, timeout=120, env=dict(os.environ))

    done = cli("--dry-run", "--skip", "rayjob-exists,secrets", "--skip", ",".join(AWS))
    assert done.returncode == 0, done.stderr
    table = rows(done.stdout)
    assert table["rayjob-exists"] == table["secrets"] == table["s3-bucket"] == ("skipped", "--skip")
    assert table["rayjob-crd"][0] == "passed"
    assert not any(c[:2] in (["get", "secret"], ["get", "rayjob"]) for c in kube.commands())
    kube.scenario(statuses=SUCCESS)
    for args, message in ((["--skip", "secrets,nope"], "--skip nope: no such check"),
                          (["--address", "http://head:8265"], ""), (["--resume"], ""),
                          (["--target", "ray", "--context", "test-cluster"], "")):
        proc = cli("--dry-run", *args)
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, (args, proc.stderr)
        assert proc.stderr.startswith(message), proc.stderr
    assert kube.calls() == []


# --- Ctrl-C, in a real process ----------------------------------------------------------------------------------

def acrl(kube: Kube, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "acrl.runtime._cli", *args, "--runs-dir", str(kube.root / "runs")],
                            cwd=kube.root, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ))


def wait_for(proc: subprocess.Popen[str], text: str, timeout: float = 60) -> str:
    """What ``proc`` printed, up to the line holding ``text``."""
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + timeout
    while text not in seen and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        seen += line
    assert text in seen, seen
    return seen


@pytest.mark.parametrize(("delete", "status", "code"), [("ok", "cancelled", 130), ("error", "unknown", 75)])
def test_ctrl_c_deletes_the_rayjob(delete: str, status: str, code: int, kube: Kube) -> None:
    kube.scenario(statuses=["initializing", "running"], delete=delete)
    proc = acrl(kube, "run", str(kube.bundle), *(f"--skip={s}" for s in AWS))
    try:
        seen = wait_for(proc, "Running, Ray job RUNNING")
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, seen + rest
    deletes = [c for c in kube.commands() if c[:2] == ["delete", "rayjob"]]
    assert deletes == [["delete", "rayjob", kube.name, "--wait=true", "--timeout=90s"]]
    assert f"acrl: SIGINT: deleting RayJob {kube.name}" in rest
    (record,) = kube.records()
    assert (record["status"], record["exit_status"]) == (status, code)
    if delete == "ok":
        assert "deleted by this acrl run" in record["note"]
    else:
        assert f"stop it with kubectl --context test-cluster --namespace rl delete rayjob {kube.name}" in record["note"]


def test_ctrl_c_after_the_rayjob_ended_keeps_its_outcome(kube: Kube) -> None:
    """A signal while acrl waits for the ended job's last log lines deletes nothing: the run is what KubeRay said."""
    kube.scenario(statuses=["running", "complete-succeeded"], logs=JOB_LOG, logs_follow_s=60)
    proc = acrl(kube, "run", str(kube.bundle), f"--skip={','.join(AWS)}")
    try:
        wait_for(proc, "Complete, Ray job SUCCEEDED")
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, rest
    assert not [c for c in kube.commands() if c[:1] == ["delete"]]
    (record,) = kube.records()
    assert (record["status"], record["exit_status"]) == ("succeeded", 0)


# --- acrl status / acrl logs of the record -----------------------------------------------------------------------

def test_status_and_logs_ask_kubectl(kube: Kube) -> None:
    kube.scenario(statuses=SUCCESS, logs=JOB_LOG)
    assert kube.run() == 0
    run_id = kube.records()[0]["run_id"]
    status = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "status", run_id, "--runs-dir", "runs"],
                            cwd=kube.root, capture_output=True, text=True, timeout=60)
    assert status.returncode == 0, status.stderr
    shown = {line.split(":", 1)[0]: line.split(":", 1)[1].strip() for line in status.stdout.splitlines()}
    assert shown["RayJob"] == (f"Complete, Ray job SUCCEEDED: Job finished successfully. (RayJob {kube.name} in "
                               f"namespace rl (context test-cluster), Ray job {kube.name}-x7k2p)")
    assert shown["status"] == "succeeded" and shown["exit status"] == "0"
    logs = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "logs", run_id, "--runs-dir", "runs"],
                          cwd=kube.root, capture_output=True, text=True, timeout=60)
    assert logs.returncode == 0 and logs.stdout == JOB_LOG
    assert f"acrl: the log of the submitter Job {kube.name}" in logs.stderr
    assert kube.commands()[-1] == ["logs", f"job/{kube.name}"]


def test_logs_fall_back_to_the_head_then_the_record(kube: Kube) -> None:
    kube.scenario(statuses=SUCCESS, logs=JOB_LOG)
    assert kube.run() == 0
    run_id = kube.records()[0]["run_id"]
    scenario = json.loads((kube.root / "scenario.json").read_text())
    (kube.root / "scenario.json").write_text(json.dumps({**scenario, "logs": "fail"}))
    logs = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "logs", run_id, "--runs-dir", "runs"],
                          cwd=kube.root, capture_output=True, text=True, timeout=60)
    assert logs.returncode == 0, logs.stderr
    assert ["logs", "--tail=-1", "-l", f"ray.io/cluster={kube.name}-4tq9c,ray.io/node-type=head"] in kube.commands()
    assert "showing " in logs.stderr and "rayjob.log instead" in logs.stderr
    assert "stand-in train.py: rollout 10" in logs.stdout  # the record's own log


def test_no_secret_value_travels(kube: Kube) -> None:
    """The Secret's values (in the stand-in's Secret and in this environment) reach no kubectl argv or stdin, no
    record, no log, no output: the secrets check reads key names only (the stand-in fails any other read)."""
    kube.scenario(statuses=SUCCESS, logs=JOB_LOG)
    out = StringIO()
    assert kube.run(out=out) == 0
    run_id = kube.records()[0]["run_id"]
    status = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "status", run_id, "--json", "--runs-dir",
                             "runs"], cwd=kube.root, capture_output=True, text=True, timeout=60)
    texts = [out.getvalue(), status.stdout, status.stderr, (kube.root / "calls.jsonl").read_text(encoding="utf-8"),
             *(p.read_text(encoding="utf-8") for p in (kube.root / "runs").rglob("*") if p.is_file())]
    for value in [v for keys in SECRETS.values() for v in keys.values() if len(v) > 8]:
        assert all(value not in text for text in texts), value
    asked = [c for c in kube.commands() if c[:2] == ["get", "secret"]]
    assert asked == [["get", "secret", "team-secrets", "-o", f"go-template={SECRET_KEYS_TEMPLATE}"]]


def test_a_second_ctrl_c_stops_waiting_for_the_delete(kube: Kube) -> None:
    kube.scenario(statuses=["running"], delete="hang")
    proc = acrl(kube, "run", str(kube.bundle), *(f"--skip={s}" for s in AWS))
    try:
        wait_for(proc, "Running, Ray job RUNNING")
        proc.send_signal(signal.SIGINT)
        wait_for(proc, f"deleting RayJob {kube.name}")
        proc.send_signal(signal.SIGINT)
        rest, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, rest
    assert "acrl: stopped waiting for the RayJob to be deleted" in rest
    (record,) = kube.records()
    assert record["status"] == "cancelled" and "was being deleted when acrl stopped waiting" in record["note"]


def test_a_record_left_running_is_fixed_from_kuberays_state(kube: Kube) -> None:
    """An `acrl run` killed before it finished the record: `acrl status` shows KubeRay's end of the RayJob and
    --fix-record writes it; `acrl runs` and `acrl diff RUN BUNDLE` read the record too."""
    kube.scenario(statuses=["running", "failed-app"])
    assert kube.run() == 3
    (record,) = kube.records()
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has any more
    path = kube.root / "runs" / "test-exp" / record["run_id"] / "run.json"
    left = {k: v for k, v in record.items() if k not in ("ended_at", "duration_s", "exit_status")}
    path.write_text(json.dumps({**left, "status": "running", "launcher": {**record["launcher"], "pid": gone.pid}}),
                    encoding="utf-8")

    def acrl_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "acrl.runtime._cli", *args], cwd=kube.root, capture_output=True,
                              text=True, timeout=60)

    status = acrl_cli("status", record["run_id"], "--runs-dir", "runs", "--json")
    shown = json.loads(status.stdout)
    assert (shown["state"], shown["fixable"], shown["ray"]["job"]["status"]) == ("failed", True, "FAILED")
    fixed = acrl_cli("status", record["run_id"], "--runs-dir", "runs", "--fix-record")
    assert fixed.returncode == 0, fixed.stderr
    after = json.loads(path.read_text(encoding="utf-8"))
    assert (after["status"], after["exit_status"]) == ("failed", 3)
    runs = acrl_cli("runs", "--runs-dir", "runs")
    assert record["run_id"] in runs.stdout and f"{kube.name}-x7k2p" in runs.stdout
    diff = acrl_cli("diff", record["run_id"], str(kube.bundle), "--runs-dir", "runs")
    assert diff.returncode in (0, 1), diff.stderr
