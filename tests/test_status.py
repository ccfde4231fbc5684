"""`acrl status RUN` and `acrl logs RUN [--follow]` (runtime/_status.py, _logs.py, _ray_jobs.py, _run_ref.py):
against a real Ray head on 127.0.0.1 (test_run's, one per session) for a run `acrl run` recorded and for a job
still running; without Ray for what RUN may be, an unreachable or silent Ray (one line, the address without its
password), and how a record's status, its launcher and Ray's state make what is shown."""

from __future__ import annotations

import json
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_run import RayHead, acrl, assert_record_round_trips, free_port, make_project, only_record

from acrl.compiler import UsageError
from acrl.runtime._ray_jobs import RayJob
from acrl.runtime._records import Launcher, RunRecord
from acrl.runtime._run_ref import find_record
from acrl.runtime._status import resumed_text, verdict

RUN = "20260301T100000Z-a1a1a1"


def dead_launcher() -> dict[str, Any]:
    """This host's launcher fields of a process that has ended (as an `acrl run` that was killed)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return {"host": socket.gethostname(), "pid": proc.pid, "pid_started": None, "boot_id": None}


def write_record(runs: Path, run_id: str = RUN, **fields: Any) -> Path:
    record = RunRecord(acrl_version="0.1.0", exp_id="test-exp", run_id=run_id, bundle="/b", bundle_hash="ab" * 32,
                       submission_id=f"acrl-test-exp-abababababab-{run_id}", ray_address="http://127.0.0.1:8265",
                       host="h", launcher=Launcher("elsewhere", 1, None, None), command=[], allow_modified=False,
                       modified_files=[], expected_hash=None, preflight=[], started_at="2026-03-01T10:00:00.000Z")
    data = {**record.as_json(), **fields}
    folder = runs / "test-exp" / run_id
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    return folder / "run.json"


# --- against the real Ray head --------------------------------------------------------------------

@pytest.mark.slow
def test_status_and_logs_of_a_recorded_run(ray_head: RayHead, tmp_path: Path) -> None:
    project = make_project(tmp_path, address=ray_head.address)
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--runs-dir", str(project.runs))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = only_record(project.runs)
    runs, sid, run_id = str(project.runs), record["submission_id"], record["run_id"]
    proc = acrl("status", run_id[-6:], "--runs-dir", runs)  # the random end of the id is enough
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[1] == "status:       succeeded" and not any(line.startswith("record says:") for line in lines)
    assert f"Ray job:      SUCCEEDED at {ray_head.address} ({sid})" in proc.stdout
    status = json.loads(acrl("status", run_id, "--runs-dir", runs, "--json").stdout)
    assert status["state"] == "succeeded" and status["ray"]["job"]["status"] == "SUCCEEDED"
    assert status["ray"]["job"]["driver_exit_code"] == 0 and status["exit_status"] == 0
    assert status["preflight"]["passed"] >= 6 and "gpus" in status["preflight"]["skipped"]
    proc = acrl("logs", run_id, "--runs-dir", runs)
    assert proc.returncode == 0 and "stand-in train.py: received" in proc.stdout
    assert proc.stderr.strip() == f"acrl: the logs of Ray job {sid} at {ray_head.address}"

    # The launcher was killed before it wrote the final record: Ray's final state is shown, and written on request.
    path = project.runs / "test-exp" / run_id / "run.json"
    path.write_text(json.dumps({**record, "status": "running", "exit_status": None, "ended_at": None,
                                "duration_s": None, "launcher": dead_launcher()}))
    status = json.loads(acrl("status", run_id, "--runs-dir", runs, "--json").stdout)
    assert (status["state"], status["record_status"], status["launcher"]) == ("succeeded", "running", "gone")
    assert status["fixable"] is True and "the record was never finished" in status["notes"][0]
    proc = acrl("status", run_id, "--runs-dir", runs, "--fix-record")
    assert proc.returncode == 0, proc.stderr
    fixed = json.loads(path.read_text())
    assert (fixed["status"], fixed["exit_status"]) == ("succeeded", 0) and fixed["ended_at"]
    assert fixed["note"].startswith("finished by `acrl status --fix-record`")
    assert_record_round_trips(path)
    proc = acrl("status", run_id, "--runs-dir", runs, "--fix-record")
    assert proc.returncode == 1 and "the record is final already (succeeded)" in proc.stderr

    # A job Ray does not know (a restarted head): launcher-died, and train.log instead of Ray's logs.
    gone = project.runs / "test-exp" / "20260101T000000Z-0e0e0e"
    gone.mkdir()
    (gone / "run.json").write_text(json.dumps({**record, "run_id": gone.name, "submission_id": "acrl-never-submitted",
                                               "status": "running", "launcher": dead_launcher()}))
    (gone / "train.log").write_text("train.sh's own words\n")
    status = json.loads(acrl("status", "0e0e0e", "--runs-dir", runs, "--json").stdout)
    assert (status["state"], status["ray"]["job"], status["fixable"]) == ("launcher-died", None, False)
    assert "Ray has no job acrl-never-submitted" in status["notes"][0]
    proc = acrl("logs", "0e0e0e", "--runs-dir", runs)
    assert proc.returncode == 0 and proc.stdout == "train.sh's own words\n"
    assert proc.stderr.startswith(f"acrl: Ray at {ray_head.address} has no job acrl-never-submitted")
    assert f"showing {gone / 'train.log'} instead" in proc.stderr


@pytest.mark.slow
def test_a_running_job_is_followed_to_its_end(ray_head: RayHead, tmp_path: Path) -> None:
    from ray.job_submission import JobSubmissionClient

    go = tmp_path / "go"
    sid = f"acrl-test-follow-{time.time_ns()}"
    program = ("import os, time\nprint('line one', flush=True)\n"
               f"while not os.path.exists({str(go)!r}): time.sleep(0.1)\nprint('line two', flush=True)\n")
    JobSubmissionClient(ray_head.address).submit_job(entrypoint=f"python3 -c {shlex.quote(program)}",
                                                     submission_id=sid)
    runs = tmp_path / "runs"
    write_record(runs, submission_id=sid, ray_address=ray_head.address, launcher=dead_launcher())
    deadline = time.monotonic() + 60
    while True:  # until Ray runs it (PENDING while its runtime env is set up)
        status = json.loads(acrl("status", RUN, "--runs-dir", str(runs), "--json").stdout)
        if status["ray"]["job"]["status"] == "RUNNING" or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert (status["state"], status["fixable"]) == ("running", False), status
    assert "nothing will finish the record" in status["notes"][0]
    proc = acrl("status", RUN, "--runs-dir", str(runs), "--fix-record")
    assert proc.returncode == 1 and "Ray still runs the job (RUNNING)" in proc.stderr
    follow = subprocess.Popen([sys.executable, "-m", "acrl.runtime._cli", "logs", "--follow", RUN, "--runs-dir",
                               str(runs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert follow.stdout is not None
        seen = []
        while "line one\n" not in seen:  # shown while the job still runs
            line = follow.stdout.readline()
            assert line, follow.communicate()
            seen.append(line)
        go.touch()
        rest, err = follow.communicate(timeout=60)
    finally:
        follow.kill()
    assert follow.returncode == 0, err
    assert rest.splitlines()[-1] == "line two" and "WebSocket" not in err
    assert err.startswith(f"acrl: following the logs of Ray job {sid} at {ray_head.address}")


# --- without Ray -----------------------------------------------------------------------------------

def test_an_unreachable_ray_is_one_line_without_the_password(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    runs = tmp_path / "runs"
    write_record(runs, ray_address=f"http://127.0.0.1:{port}")
    (runs / "test-exp" / RUN / "train.log").write_text("kept here\n")
    env = {"ACRL_RAY_ADDRESS": f"http://alice:s3cret-pw@127.0.0.1:{port}"}  # the record's address, with credentials
    proc = acrl("status", RUN, "--runs-dir", str(runs), env=_env(env))
    assert proc.returncode == 1
    assert proc.stderr.splitlines()[0] == (f"acrl: error: Ray at http://127.0.0.1:{port}: nothing answers there "
                                           "(connection refused, no route, or a name that does not resolve)")
    assert proc.stderr.splitlines()[1].startswith("  fix: ") and len(proc.stderr.splitlines()) == 2
    assert "status:       running" in proc.stdout  # the record's part is still shown
    status = json.loads(acrl("status", RUN, "--runs-dir", str(runs), "--json", env=_env(env)).stdout)
    assert status["ray"]["error"].startswith(f"Ray at http://127.0.0.1:{port}: nothing answers")
    proc = acrl("logs", RUN, "--runs-dir", str(runs), env=_env(env))
    assert proc.returncode == 0 and proc.stdout == "kept here\n"
    assert proc.stderr.startswith(f"acrl: Ray at http://127.0.0.1:{port}: nothing answers there")
    proc = acrl("logs", RUN, "--follow", "--runs-dir", str(runs), env=_env(env))
    assert proc.returncode == 1 and proc.stdout == "kept here\n"  # shown, but it cannot be followed
    (runs / "test-exp" / RUN / "train.log").unlink()
    proc = acrl("logs", RUN, "--runs-dir", str(runs), env=_env(env))
    assert proc.returncode == 1 and proc.stdout == "" and "holds no train.log" in proc.stderr
    proc = acrl("status", RUN, "--runs-dir", str(runs), "--address", "http://bob:hunter22@10.0.0.1:8265")
    assert proc.returncode == 2 and "--address http://***@10.0.0.1:8265" in proc.stderr
    assert "hunter22" not in proc.stdout + proc.stderr


def test_no_password_in_any_output(tmp_path: Path) -> None:
    port = free_port()
    runs = tmp_path / "runs"
    write_record(runs, ray_address=f"http://127.0.0.1:{port}")
    env = _env({"ACRL_RAY_ADDRESS": f"http://alice:s3cret-pw@127.0.0.1:{port}"})
    for args in (("status",), ("status", "--json"), ("status", "--fix-record"), ("logs",), ("logs", "-f")):
        proc = acrl(*args, RUN, "--runs-dir", str(runs), env=env)
        assert proc.returncode == 1 and "s3cret" not in proc.stdout + proc.stderr, args
        assert "Traceback" not in proc.stderr and f"127.0.0.1:{port}" in proc.stdout + proc.stderr, args


def test_a_silent_ray_is_bounded(tmp_path: Path) -> None:
    with socket.socket() as server:  # accepts connections, never answers
        server.bind(("127.0.0.1", 0))
        server.listen(8)
        runs = tmp_path / "runs"
        write_record(runs, ray_address=f"http://127.0.0.1:{server.getsockname()[1]}")
        started = time.monotonic()
        proc = acrl("status", RUN, "--runs-dir", str(runs), env=_env({"ACRL_RAY_TIMEOUT": "0.5"}))
    assert proc.returncode == 1 and time.monotonic() - started < 30
    assert "no answer within 0.5 s (ACRL_RAY_TIMEOUT)" in proc.stderr.splitlines()[0]


def test_what_run_may_be(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    a = write_record(runs, "20260301T100000Z-a1a1a1")
    b = write_record(runs, "20260301T110000Z-b2b2b2")
    assert find_record("20260301T100000Z-a1a1a1", runs) == a
    assert find_record("20260301T11", runs) == b and find_record("b2b2b2", runs) == b  # its beginning, or its end
    assert find_record("test-exp/20260301T100000Z-a1a1a1", runs) == a
    assert find_record(str(a.parent), runs) == a and find_record(str(a), runs) == a
    with pytest.raises(UsageError, match=r"2 runs under .* match: test-exp/20260301T100000Z-a1a1a1, test-exp/2026"):
        find_record("20260301T1", runs)
    with pytest.raises(UsageError, match="did you mean 20260301T100000Z-a1a1a1"):
        find_record("20260301T100000Z-a1a1a9", runs)
    with pytest.raises(UsageError, match=r"not a run folder: it holds no run\.json"):
        find_record(str(runs), runs)
    with pytest.raises(UsageError, match="no run is recorded under"):
        find_record("a1a1a1", tmp_path / "elsewhere")
    proc = acrl("status", "nothing-like-it", "--runs-dir", str(runs))
    assert proc.returncode == 2 and proc.stdout == "" and "no run with this id under" in proc.stderr
    (a.parent / "run.json").write_text("{not json")
    proc = acrl("status", "a1a1a1", "--runs-dir", str(runs))
    assert proc.returncode == 2 and "not a run record: not JSON" in proc.stderr and "Traceback" not in proc.stderr


def _job(status: str) -> RayJob:
    return RayJob(status, driver_exit_code=0 if status == "SUCCEEDED" else None)


@pytest.mark.parametrize(("record", "launcher", "job", "state", "fixable"), [
    ("running", "alive", "RUNNING", "running", False),
    ("running", "gone", "RUNNING", "running", False),  # the job runs on; nothing will finish the record
    ("running", "gone", "SUCCEEDED", "succeeded", True),
    ("running", "gone", "STOPPED", "cancelled", True),
    ("running", "alive", "FAILED", "failed", False),  # its acrl run is finishing the record
    ("running", "elsewhere", "SUCCEEDED", "succeeded", False),  # another host: whether it died cannot be told
    ("running", "gone", None, "launcher-died", False),
    ("running", "elsewhere", None, "running", False),
    ("unknown", "gone", "SUCCEEDED", "succeeded", False),
    ("cancelled", "gone", "RUNNING", "running", False),  # the stop failed: Ray still runs it
    ("succeeded", "gone", "SUCCEEDED", "succeeded", False),
])
def test_what_a_record_and_ray_make(record: str, launcher: str, job: str | None, state: str, fixable: bool) -> None:
    shown, notes, can_fix = verdict({"status": record, "run_id": RUN, "submission_id": "s"}, launcher,
                                    _job(job) if job else None, asked=job is None)
    assert (shown, can_fix) == (state, fixable)
    assert bool(notes) == ((record, launcher, job) not in {("running", "alive", "RUNNING"),
                                                           ("succeeded", "gone", "SUCCEEDED")})


def test_resumed_from_in_words() -> None:
    assert resumed_text({"status": "succeeded"}) == "not recorded"  # a record written before issue 16
    assert resumed_text({"argv": ["python3"], "resumed_from": None}) == "nothing: started from the model"
    assert resumed_text({"argv": ["python3"], "resumed_from": None, "status": "running"}).startswith("not known yet")
    fixed = {"argv": ["python3"], "resumed_from": None, "status": "failed", "note": "finished by `acrl status "
             "--fix-record` at 2026-03-01T10:00:00.000Z from Ray's state of the job"}
    assert resumed_text(fixed).startswith("not known (its `acrl run` died before writing it")
    came = {"checkpoint_dir": "/ckpt/e", "iteration": 9, "run_id": RUN, "data_state": True, "exp_id": "e",
            "start_rollout_id": 10}
    assert resumed_text({"argv": [], "resumed_from": came}) == (
        f"/ckpt/e at iteration 9, from rollout 10 (saved by run e/{RUN}; with the data loader's state)")


def _env(extra: dict[str, str]) -> dict[str, str]:
    from test_run import tool_env

    return tool_env(**extra)
