"""Stuck and lost runs: a ray command that hangs, a dashboard that goes away, signals that must stop a
run at once, and the records `acrl run` leaves whatever happens. train.sh runs with the recording
`ray` shim (tests/shims/ray, ACRL_SHIM_HANG / ACRL_SHIM_STATUS_FAILS); no test waits more than a few
seconds for an answer, and each one has a timeout."""

from __future__ import annotations

import io
import json
import os
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pytest
import tomli_w
from test_run import (
    NO_AWS,
    VENV_BIN,
    Project,
    _alive,
    acrl,
    end_processes,
    free_port,
    make_project,
    only_record,
    processes_mentioning,
    tool_env,
    with_descendants,
)
from test_train_sh import (
    EXIT_UNKNOWN,
    SHIM_NAMES,
    SHIMS,
    SMOKE,
    Toolbox,
    compile_into,
    make_env,
    pid_alive,
    read_calls,
    run_train_sh,
    submission_id,
    toolbox,
    wait_for,
)

from acrl.compiler import Bundle, compile_spec, write
from conftest import merge

__all__ = ["toolbox"]  # the fixture, shared with test_train_sh

@pytest.fixture(autouse=True)
def _reap(tmp_path: Path) -> Iterator[None]:
    """Whatever a test started under its tmp_path (train.sh runs in a session of its own) ends with it,
    even when the test fails."""
    yield
    end_processes(with_descendants(processes_mentioning(str(tmp_path))))


SIGNALS = [pytest.param(signal.SIGINT, 130, id="SIGINT"), pytest.param(signal.SIGTERM, 143, id="SIGTERM")]
# The call train.sh makes for each hanging command, as the shim records it.
HANGING = {"start": ("ray", "start"), "submit": ("ray", "job", "submit"), "status": ("ray", "job", "status")}


def start_train_sh(script: Path, toolbox: Toolbox, work: Path,
                   env: Mapping[str, str | None]) -> tuple[subprocess.Popen[str], Path]:
    work.mkdir(parents=True, exist_ok=True)
    log = work / "shim-calls.jsonl"
    proc = subprocess.Popen(["bash", str(script)], env=make_env(toolbox, log, work, env), cwd=work,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    return proc, log


def calls_of(log: Path, *prefix: str) -> list[dict[str, Any]]:
    return [c for c in read_calls(log) if c["argv"][:len(prefix)] == list(prefix)]


def finish(proc: subprocess.Popen[str], timeout: float) -> tuple[str, str, float]:
    """Wait at most ``timeout`` s; on time-out kill the whole group and fail."""
    started = time.monotonic()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"did not finish in {timeout} s:\n{out}\n{err}")
    return out, err, time.monotonic() - started


# --- train.sh: a ray command that hangs ---------------------------------------------------------

class Interrupted(NamedTuple):
    bundle: Bundle
    log: Path
    returncode: int | None
    err: str
    elapsed: float  # from the last signal to the end


def interrupt_train_sh(tmp_path: Path, toolbox: Toolbox, env: Mapping[str, str],
                       signals: Sequence[tuple[tuple[str, ...], int]], timeout: float) -> Interrupted:
    """Compile SMOKE and start its train.sh with ``env``; for each (call, signal), wait until the shim records
    ``call`` (the first one within 15 s, then 0.2 s more, into the hang; the others within 5 s) and send the
    signal; then wait at most ``timeout`` s for train.sh to end. Its process group is killed whatever happens."""
    bundle = compile_into(SMOKE, tmp_path / "b")
    proc, log = start_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", env)
    try:
        for n, (call, signum) in enumerate(signals):
            assert wait_for(lambda call=call: calls_of(log, *call), 5 if n else 15), f"{call} was never made"
            if not n:
                time.sleep(0.2)  # into its sleep
            proc.send_signal(signum)
        _, err, elapsed = finish(proc, timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return Interrupted(bundle, log, proc.returncode, err, elapsed)


@pytest.mark.parametrize("hang", list(HANGING))
@pytest.mark.parametrize(("signum", "expected"), SIGNALS)
def test_a_signal_stops_train_sh_while_a_ray_command_hangs(hang: str, signum: int, expected: int, tmp_path: Path,
                                                           toolbox: Toolbox) -> None:
    """bash runs a trap only when the foreground command ends: each ray call is waited for in the
    background instead, so the trap fires at once, the hanging call is ended and the job stopped."""
    run = interrupt_train_sh(tmp_path, toolbox, {"ACRL_SHIM_HANG": hang}, [(HANGING[hang], signum)], 10)
    assert run.returncode == expected, run.err
    assert run.elapsed < 8
    (hung,) = calls_of(run.log, *HANGING[hang])
    assert wait_for(lambda: not pid_alive(hung["pid"]), 5), "the hanging ray command was left running"
    stops = calls_of(run.log, "ray", "job", "stop")
    if hang == "start":  # nothing submitted: nothing to stop
        assert stops == [] and "interrupted before the job was submitted" in run.err
    else:
        assert [c["argv"] for c in stops] == [["ray", "job", "stop", submission_id(run.bundle)]]


@pytest.mark.parametrize(("signum", "expected"), SIGNALS)
def test_a_job_stop_that_hangs_is_bounded_and_says_the_job_may_still_run(signum: int, expected: int, tmp_path: Path,
                                                                       toolbox: Toolbox) -> None:
    run = interrupt_train_sh(tmp_path, toolbox, {"ACRL_SHIM_LOGS": "block", "ACRL_SHIM_HANG": "job-stop",
                                                 "ACRL_RAY_TIMEOUT": "1"}, [(("ray", "job", "logs"), signum)], 15)
    assert run.returncode == EXIT_UNKNOWN, run.err
    assert run.elapsed < 8
    assert f"ray job stop --address http://127.0.0.1:8265 {submission_id(run.bundle)}" in run.err
    (stop,) = calls_of(run.log, "ray", "job", "stop")
    assert wait_for(lambda: not pid_alive(stop["pid"]), 8)


def test_a_second_signal_ends_train_sh_at_once(tmp_path: Path, toolbox: Toolbox) -> None:
    run = interrupt_train_sh(tmp_path, toolbox, {"ACRL_SHIM_LOGS": "block", "ACRL_SHIM_HANG": "job-stop"},
                             [(("ray", "job", "logs"), signal.SIGINT), (("ray", "job", "stop"), signal.SIGINT)], 10)
    assert run.returncode == -signal.SIGINT, run.err
    assert run.elapsed < 5


def test_a_submission_that_hangs_is_bounded_and_its_state_unknown(tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = compile_into(SMOKE, tmp_path / "b")
    started = time.monotonic()
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_HANG": "submit", "ACRL_RAY_START_TIMEOUT": "1"}, timeout=15)
    assert time.monotonic() - started < 15
    assert run.returncode == EXIT_UNKNOWN, run.stderr
    sid = submission_id(bundle)
    assert "may have been submitted" in run.stderr
    assert f"ray job status --address http://127.0.0.1:8265 {sid}" in run.stderr
    assert f"ray job stop --address http://127.0.0.1:8265 {sid}" in run.stderr


def test_a_ray_start_that_hangs_is_bounded(tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(SMOKE, tmp_path / "b")
    started = time.monotonic()
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_HANG": "start", "ACRL_RAY_START_TIMEOUT": "1"}, timeout=15)
    assert time.monotonic() - started < 15
    assert run.returncode == 1 and "error: 'ray start' failed or took over 1 s" in run.stderr
    assert not run.find("ray", "job")


@pytest.mark.parametrize("name", ["ACRL_RAY_TIMEOUT", "ACRL_RAY_START_TIMEOUT", "ACRL_STATUS_GRACE"])
@pytest.mark.parametrize("value", ["abc", "1.5", "-1", "$(touch pwned)", ""])
def test_bounds_must_be_whole_seconds(name: str, value: str, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {name: value})
    if value == "":  # unset or empty: the default
        assert run.returncode == 0, run.stderr
        return
    assert run.returncode == 1 and "must be whole numbers of seconds" in run.stderr
    assert run.calls == [] and not (tmp_path / "w" / "pwned").exists()


# --- train.sh: the dashboard goes away ---------------------------------------------------------

@pytest.mark.slow
def test_a_dashboard_lost_for_a_few_seconds_does_not_end_the_run(tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_STATUS_FAILS": "2", "ACRL_SHIM_STATUS": "SUCCEEDED"}, timeout=20)
    assert run.returncode == 0, run.stderr
    assert len(run.find("ray", "job", "status")) == 3
    assert run.stderr.count(f"warning: cannot read the status of {submission_id(bundle)}") == 1
    assert "Traceback" not in run.stderr and "File \"" not in run.stderr
    assert f"acrl: job {submission_id(bundle)} succeeded\n" in run.stderr


def test_a_log_follower_that_loses_the_dashboard_is_one_warning(tmp_path: Path, toolbox: Toolbox) -> None:
    """`ray job logs --follow` ends with a traceback when the dashboard goes away: train.sh shows
    Ray's last line and goes on to ask for the job's state."""
    bundle = compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"ACRL_SHIM_LOGS": "lost"})
    assert run.returncode == 0, run.stderr
    assert "acrl: warning: following the job's logs stopped (exit status 1): ConnectionError: Failed to connect" \
        in run.stderr
    assert "Traceback" not in run.stderr and f"acrl: job {submission_id(bundle)} succeeded\n" in run.stderr


@pytest.mark.slow
def test_a_dashboard_lost_for_longer_leaves_the_state_unknown(tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = compile_into(SMOKE, tmp_path / "b")
    started = time.monotonic()
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_STATUS_FAILS": "always", "ACRL_STATUS_GRACE": "2"}, timeout=20)
    assert time.monotonic() - started < 30  # bounded: the default grace is 300 s
    assert run.returncode == EXIT_UNKNOWN, run.stderr
    assert len(run.find("ray", "job", "status")) >= 2
    sid = submission_id(bundle)
    lines = run.stderr.splitlines()
    assert any(line.startswith(f"acrl: error: the state of {sid} is unknown") for line in lines)
    assert f"ray job status --address http://127.0.0.1:8265 {sid}" in run.stderr
    assert f"ray job stop --address http://127.0.0.1:8265 {sid}" in run.stderr
    # Ray's message, not its traceback
    assert "Failed to connect to Ray at address" in run.stderr and "Traceback" not in run.stderr
    assert not run.find("ray", "job", "stop")


@pytest.mark.parametrize("address", ["http://admin:s3cr3t-pw@10.1.2.3:8265", "admin:s3cr3t-pw@10.1.2.3:8265"])
def test_rays_messages_never_show_the_password(address: str, tmp_path: Path, toolbox: Toolbox) -> None:
    """Ray's error repeats the address it was given: what train.sh shows of it has no password."""
    bundle = compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_RAY_ADDRESS": address, "ACRL_SHIM_STATUS_FAILS": "always", "ACRL_STATUS_GRACE": "0"})
    assert run.returncode == EXIT_UNKNOWN, run.stderr
    assert "Failed to connect to Ray at address" in run.stderr
    assert "s3cr3t-pw" not in run.stdout + run.stderr
    assert f"ray job stop --address {address.replace('admin:s3cr3t-pw', '***')} {submission_id(bundle)}" in run.stderr


@pytest.mark.slow
def test_a_status_call_that_hangs_is_bounded(tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(SMOKE, tmp_path / "b")
    started = time.monotonic()
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_HANG": "status", "ACRL_RAY_TIMEOUT": "1", "ACRL_STATUS_GRACE": "1"}, timeout=20)
    assert time.monotonic() - started < 30
    assert run.returncode == EXIT_UNKNOWN, run.stderr
    assert "no answer in 1 s" in run.stderr


def test_a_job_failing_with_the_unknown_status_is_a_plain_failure(tmp_path: Path, toolbox: Toolbox) -> None:
    """75 means "state unknown" only: a job that itself exits 75 makes train.sh exit 1."""
    compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_STATUS": "FAILED", "ACRL_SHIM_EXIT_CODE": str(EXIT_UNKNOWN)})
    assert run.returncode == 1, run.stderr


# --- acrl run --------------------------------------------------------------------------------------

def shimmed_env(tmp_path: Path, **extra: str) -> tuple[dict[str, str], Path]:
    """tool_env with the ray/pkill/pgrep/nvidia-smi shims first on PATH, and the shim log's path."""
    shims = tmp_path / "shims"
    if not shims.exists():
        shims.mkdir()
        for name in SHIM_NAMES:
            shutil.copyfile(SHIMS / name, shims / name)
            (shims / name).chmod(0o755)
    log = tmp_path / "shim-calls.jsonl"
    env = tool_env(ACRL_SHIM_LOG=str(log), **extra)
    env["PATH"] = os.pathsep.join([str(shims), env["PATH"]])
    return env, log


def start_acrl_run(project: Project, env: Mapping[str, str], *more: str,
                   shell_prefix: str | None = None) -> subprocess.Popen[str]:
    argv = [sys.executable, "-m", "acrl.runtime._cli", "run", str(project.bundle), *NO_AWS, "--skip", "gpus",
            "--runs-dir", str(project.runs), *more]
    if shell_prefix is not None:  # e.g. `trap "" INT`: acrl starts as a script's `acrl run B &` would
        argv = ["bash", "-c", f'{shell_prefix}; exec "$@"', "bash", *argv]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(env),
                            start_new_session=True)


def hand_made_train_sh(project: Project, body: str) -> None:
    (project.bundle / "train.sh").write_text("#!/usr/bin/env bash\n" + body)


def read_until(proc: subprocess.Popen[str], line: str, timeout: float = 60) -> None:
    """Read acrl's stdout (unbuffered, from its fd) until ``line``, or fail after ``timeout`` s."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        chunk = os.read(fd, 65536) if ready else b""
        seen += chunk
        if line.encode() in seen.splitlines():
            return
        if ready and not chunk:
            break
    os.killpg(proc.pid, signal.SIGKILL)
    pytest.fail(f"never saw {line!r}: {seen!r}")


def run_record(project: Project) -> dict[str, Any]:
    return only_record(project.runs)


@pytest.mark.slow
@pytest.mark.parametrize("hang", list(HANGING))
@pytest.mark.parametrize(("signum", "expected"), SIGNALS)
def test_acrl_run_stops_at_once_while_a_ray_command_hangs(hang: str, signum: int, expected: int,
                                                         tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    env, log = shimmed_env(tmp_path, ACRL_SHIM_HANG=hang)
    proc = start_acrl_run(project, env)
    try:
        assert wait_for(lambda: calls_of(log, *HANGING[hang]), 60), proc.communicate(timeout=5)
        time.sleep(0.2)
        proc.send_signal(signum)
        out, err, elapsed = finish(proc, 15)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == expected, out + err
    assert elapsed < 8 and "Traceback" not in err
    record = run_record(project)
    assert record["status"] == "cancelled" and record["exit_status"] == expected and "note" not in record
    assert bool(calls_of(log, "ray", "job", "stop")) is (hang != "start")


def test_acrl_run_records_an_unknown_state(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    env, _ = shimmed_env(tmp_path, ACRL_SHIM_STATUS_FAILS="always", ACRL_STATUS_GRACE="0")
    proc = start_acrl_run(project, env)
    out, err, _ = finish(proc, 60)
    assert proc.returncode == EXIT_UNKNOWN, out + err
    record = run_record(project)
    assert record["status"] == "unknown" and record["exit_status"] == EXIT_UNKNOWN
    assert record["note"] == ("the job may still be running: ray job stop --address http://127.0.0.1:8265 "
                              f"{record['submission_id']}")
    assert f"run {record['run_id']} unknown (exit status 75)" in out and record["note"] in out
    assert "Traceback" not in out + err


def test_acrl_run_started_with_sigint_ignored_still_stops_on_sigint(tmp_path: Path) -> None:
    """`acrl run B &` in a script starts with SIGINT ignored; train.sh gets default dispositions."""
    project = make_project(tmp_path / "p")
    hand_made_train_sh(project, "trap 'echo got INT; exit 130' INT\necho ready\nwhile :; do sleep 0.1; done\n")
    proc = start_acrl_run(project, tool_env(), "--allow-modified", shell_prefix='trap "" INT')
    try:
        read_until(proc, "ready")
        proc.send_signal(signal.SIGINT)
        out, err, elapsed = finish(proc, 10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, out + err
    assert "got INT" in out and elapsed < 8
    assert run_record(project)["status"] == "cancelled"


# A train.sh that takes a signal and goes on (as one stuck in a command it cannot leave would), with
# a child of its own that must not outlive it.
STUBBORN = ("sleep 300 &\necho \"child $!\"\n"
            "trap 'echo got INT' INT\ntrap 'echo got TERM' TERM\necho ready\nwhile :; do sleep 0.1; done\n")


def stubborn_child(project: Project) -> int:
    (record,) = project.runs.glob("*/*/train.log")
    (line,) = [line for line in record.read_text().splitlines() if line.startswith("child ")]
    return int(line.split()[1])


@pytest.mark.slow
def test_acrl_run_escalates_after_the_grace_period(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    hand_made_train_sh(project, STUBBORN)
    proc = start_acrl_run(project, tool_env(ACRL_STOP_GRACE="1"), "--allow-modified")
    try:
        read_until(proc, "ready")
        proc.send_signal(signal.SIGINT)
        out, err, elapsed = finish(proc, 20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 128 + signal.SIGKILL, out + err
    assert 1 + 5 - 0.5 < elapsed < 15  # the grace period, SIGTERM, KILL_AFTER_S, SIGKILL
    assert "got INT" in out and "got TERM" in out
    record = run_record(project)
    assert record["status"] == "cancelled" and record["exit_status"] == 137
    assert record["note"].startswith("the job may still be running: ray job stop --address")
    assert wait_for(lambda: not pid_alive(stubborn_child(project)), 5), "train.sh's child outlived it"


def test_acrl_run_escalates_on_a_second_and_third_signal(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    hand_made_train_sh(project, STUBBORN)
    proc = start_acrl_run(project, tool_env(), "--allow-modified")  # the default grace: 90 s
    try:
        read_until(proc, "ready")
        for _ in range(3):
            proc.send_signal(signal.SIGINT)
            time.sleep(0.3)
        out, err, elapsed = finish(proc, 10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 137, out + err
    assert elapsed < 5 and "got INT" in out and "got TERM" in out
    assert run_record(project)["status"] == "cancelled"
    assert wait_for(lambda: not pid_alive(stubborn_child(project)), 5)


def test_a_bad_stop_grace_is_an_error(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--runs-dir", str(project.runs),
                env=tool_env(ACRL_STOP_GRACE="soon"))
    assert proc.returncode == 1 and "ACRL_STOP_GRACE='soon'" in proc.stderr and "fix:" in proc.stderr
    assert "Traceback" not in proc.stderr and not project.runs.exists()


def test_a_full_disk_keeps_the_run_going_and_the_record_final(tmp_path: Path) -> None:
    """train.log cannot grow past 64 KiB (RLIMIT_FSIZE: EFBIG, as ENOSPC would be): the output still
    reaches the terminal, the run ends as train.sh does, and run.json says what happened to the log."""
    project = make_project(tmp_path / "p")
    hand_made_train_sh(project, "head -c 300000 /dev/zero | tr '\\0' x\necho\necho done\n")
    limit = 64 * 1024

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    proc = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "run", str(project.bundle), *NO_AWS,
                           "--allow-modified", "--skip", "gpus", "--runs-dir", str(project.runs)],
                          capture_output=True, text=True, env=tool_env(), timeout=60, preexec_fn=small_files)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("x") >= 300000 and "done\n" in proc.stdout
    assert "Traceback" not in proc.stderr and "cannot write train.log" in proc.stderr
    record = run_record(project)
    assert record["status"] == "succeeded" and record["exit_status"] == 0
    assert record["log_error"] == "cannot write train.log: File too large"
    assert (project.runs / "test-exp" / record["run_id"] / "train.log").stat().st_size <= limit


def test_a_killed_launcher_is_shown_as_dead(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    hand_made_train_sh(project, "echo ready\nsleep 300\n")
    proc = start_acrl_run(project, tool_env(), "--allow-modified")
    try:
        read_until(proc, "ready")
        running = json.loads(acrl("runs", "--runs-dir", str(project.runs), "--json").stdout)
        assert [r["status"] for r in running] == ["running"]
        assert running[0]["launcher"]["pid"] == proc.pid
        proc.kill()  # acrl run only: no final record
        proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        # train.sh, in its own session, and its sleep
        end_processes(with_descendants(processes_mentioning(str(project.bundle / "train.sh"))))
    (record,) = json.loads(acrl("runs", "--runs-dir", str(project.runs), "--json").stdout)
    assert record["status"] == "launcher-died" and record["submission_id"] in record["note"]
    assert run_record(project)["status"] == "running"  # the file itself is left as it was
    table = acrl("runs", "--runs-dir", str(project.runs)).stdout.splitlines()
    assert table[1].split()[3] == "launcher-died" and table[-1] == f"{record['run_id']}: {record['note']}"


def test_launcher_gone_tells_only_what_it_can_know(tmp_path: Path) -> None:
    from acrl.runtime._records import launcher, launcher_gone

    me = launcher()
    assert me["pid"] == os.getpid() and me["host"] == socket.gethostname()
    assert launcher_gone({"launcher": me}) is False
    dead = subprocess.Popen(["true"])
    dead.wait()
    assert launcher_gone({"launcher": {**me, "pid": dead.pid}}) is True
    assert launcher_gone({"launcher": {**me, "pid_started": (me["pid_started"] or 0) + 1}}) is True  # pid reused
    assert launcher_gone({"launcher": {**me, "pid": dead.pid, "host": "elsewhere"}}) is False
    assert launcher_gone({}) is False and launcher_gone({"launcher": "x"}) is False


def test_run_dirs_are_never_shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two launches that draw the same run id in the same second: the second takes another."""
    from acrl.runtime import _records

    drawn = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(_records.secrets, "token_hex", lambda n: next(drawn))
    monkeypatch.setattr(_records.time, "time", lambda: 1_800_000_000.0)
    first, first_dir = _records.new_run_dir(tmp_path / "exp")
    second, second_dir = _records.new_run_dir(tmp_path / "exp")
    assert first == "20270115T080000Z-aaaaaa" and second == "20270115T080000Z-bbbbbb"
    assert first_dir.is_dir() and second_dir.is_dir()


def test_two_runs_of_one_bundle_at_once_get_distinct_ids(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p")
    hand_made_train_sh(project, 'echo "run $ACRL_RUN_ID"\n')
    procs = [start_acrl_run(project, tool_env(), "--allow-modified") for _ in range(2)]
    for proc in procs:
        out, err, _ = finish(proc, 60)
        assert proc.returncode == 0, out + err
    records = [json.loads(p.read_text()) for p in project.runs.glob("*/*/run.json")]
    assert len({r["run_id"] for r in records}) == len({r["submission_id"] for r in records}) == 2


# --- Ctrl-C on `bash train.sh` with a real local head --------------------------------------------

# `ray` for train.sh's `ray start --head`: the real CLI, held to 127.0.0.1, free ports and its own temp
# dir (this machine may run other Ray heads); every other command goes to the real CLI unchanged.
LOCAL_RAY = """#!/usr/bin/env bash
if [[ $1 == start ]]; then
  shift
  exec {real} start "$@" --node-ip-address=127.0.0.1 --dashboard-host=127.0.0.1 {ports} --num-cpus=1 \\
    --temp-dir={temp_dir}
fi
exec {real} "$@"
"""


def group_members(pgid: int) -> list[int]:
    """Live processes in process group ``pgid``."""
    found = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(int(entry))
    return found


@pytest.mark.slow
def test_ctrl_c_on_train_sh_with_a_real_local_head(tmp_path: Path) -> None:
    """A terminal's Ctrl-C is a SIGINT to the whole foreground process group. The head train.sh starts
    lives in a session of its own: the SIGINT reaches train.sh only, whose `ray job stop` then finds
    a working head, and nothing of train.sh's group is left behind."""
    ray = shutil.which("ray", path=VENV_BIN)
    if ray is None:
        pytest.skip("the ray CLI is not installed: pip install 'ray[default]' (the test extra has it)")
    project = make_project(tmp_path / "p", env_vars={"STANDIN_SLEEP": "600"})
    dashboard = free_port()
    spec = merge(project.spec, {"cluster": {"stop_stale_processes": False, "start_ray_head": True,
                                            "dashboard_port": dashboard}})
    (project.root / "spec.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    write(compile_spec(project.root / "spec.toml"), project.bundle, force=True)
    temp_dir = tempfile.mkdtemp(prefix="acrl-ray-", dir="/tmp")  # short: Ray's socket paths have a length limit
    ports = " ".join([f"--port={free_port()}"] + [
        f"--{name}={free_port()}" for name in ("ray-client-server-port", "dashboard-agent-listen-port",
                                               "dashboard-agent-grpc-port", "runtime-env-agent-port",
                                               "metrics-export-port")])
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    (wrappers / "ray").write_text(LOCAL_RAY.format(real=ray, ports=ports, temp_dir=temp_dir))
    (wrappers / "ray").chmod(0o755)
    env = tool_env()
    env["PATH"] = os.pathsep.join([str(wrappers), env["PATH"]])
    proc = subprocess.Popen(["bash", str(project.bundle / "train.sh")], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while not project.received.exists():
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[0]
            time.sleep(0.2)
        job_pid = json.loads(project.received.read_text())["pid"]
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
        out, _, elapsed = finish(proc, 60)
        assert proc.returncode == 130, out
        assert elapsed < 30 and "interrupted: stopping Ray job" in out
        assert wait_for(lambda: not pid_alive(job_pid), 30), "the job's process outlived its stop"
        assert wait_for(lambda: group_members(proc.pid) == [], 10), "train.sh left processes in its group"
        from ray.job_submission import JobSubmissionClient

        (job,) = JobSubmissionClient(f"http://127.0.0.1:{dashboard}").list_jobs()
        assert str(job.status.value) == "STOPPED"  # the head lived on: the stop reached it
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        head = with_descendants(processes_mentioning(temp_dir))
        end_processes(head)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert head and not [pid for pid in head if _alive(pid)], "Ray processes were left running"


@pytest.mark.parametrize(("raised", "status", "code"), [(RuntimeError("boom"), "failed", 1),
                                                        (KeyboardInterrupt(), "cancelled", 130)])
def test_the_record_is_final_even_when_acrl_itself_fails(raised: BaseException, status: str, code: int,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acrl.runtime import _run

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise raised

    project = make_project(tmp_path / "p")
    monkeypatch.setattr(_run, "_run_streamed", fail)
    monkeypatch.setenv("PATH", tool_env()["PATH"])
    options = _run.RunOptions(str(project.bundle), skip=(*NO_AWS[1::2], "gpus"), runs_dir=str(project.runs))
    with pytest.raises(type(raised)):
        _run.run_bundle(options, out=io.StringIO())
    record = run_record(project)
    assert record["status"] == status and record["exit_status"] == code
    assert ("note" in record) is (status == "failed")
    if status == "failed":
        assert record["error"] == "acrl run failed while train.sh ran: RuntimeError: boom"
