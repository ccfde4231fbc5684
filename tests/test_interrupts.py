"""Stuck and lost runs: a ray command that hangs, a dashboard that goes away, signals that must stop a
run at once, and the records `acrl run` leaves whatever happens. train.sh runs with the recording
`ray` shim (tests/shims/ray, ACRL_SHIM_HANG / ACRL_SHIM_STATUS_FAILS); no test waits more than a few
seconds for an answer, and each one has a timeout."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from test_train_sh import (
    EXIT_UNKNOWN,
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

__all__ = ["toolbox"]  # the fixture, shared with test_train_sh

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

@pytest.mark.parametrize("hang", list(HANGING))
@pytest.mark.parametrize(("signum", "expected"), SIGNALS)
def test_a_signal_stops_train_sh_while_a_ray_command_hangs(hang: str, signum: int, expected: int, tmp_path: Path,
                                                           toolbox: Toolbox) -> None:
    """bash runs a trap only when the foreground command ends: each ray call is waited for in the
    background instead, so the trap fires at once, the hanging call is ended and the job stopped."""
    bundle = compile_into(SMOKE, tmp_path / "b")
    proc, log = start_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"ACRL_SHIM_HANG": hang})
    try:
        assert wait_for(lambda: calls_of(log, *HANGING[hang]), 15), "the hanging call was never made"
        time.sleep(0.2)  # into its sleep
        proc.send_signal(signum)
        _, err, elapsed = finish(proc, 10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == expected, err
    assert elapsed < 5
    (hung,) = calls_of(log, *HANGING[hang])
    assert wait_for(lambda: not pid_alive(hung["pid"]), 5), "the hanging ray command was left running"
    stops = calls_of(log, "ray", "job", "stop")
    if hang == "start":  # nothing submitted: nothing to stop
        assert stops == [] and "interrupted before the job was submitted" in err
    else:
        assert [c["argv"] for c in stops] == [["ray", "job", "stop", submission_id(bundle)]]


@pytest.mark.parametrize(("signum", "expected"), SIGNALS)
def test_a_job_stop_that_hangs_is_bounded_and_says_the_job_may_still_run(signum: int, expected: int, tmp_path: Path,
                                                                       toolbox: Toolbox) -> None:
    bundle = compile_into(SMOKE, tmp_path / "b")
    proc, log = start_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                               {"ACRL_SHIM_LOGS": "block", "ACRL_SHIM_HANG": "job-stop", "ACRL_RAY_TIMEOUT": "1"})
    try:
        assert wait_for(lambda: calls_of(log, "ray", "job", "logs"), 15)
        time.sleep(0.2)
        proc.send_signal(signum)
        _, err, elapsed = finish(proc, 15)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == EXIT_UNKNOWN, err
    assert elapsed < 8
    sid = submission_id(bundle)
    assert f"ray job stop --address http://127.0.0.1:8265 {sid}" in err
    (stop,) = calls_of(log, "ray", "job", "stop")
    assert wait_for(lambda: not pid_alive(stop["pid"]), 8)


def test_a_second_signal_ends_train_sh_at_once(tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(SMOKE, tmp_path / "b")
    proc, log = start_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                               {"ACRL_SHIM_LOGS": "block", "ACRL_SHIM_HANG": "job-stop"})
    try:
        assert wait_for(lambda: calls_of(log, "ray", "job", "logs"), 15)
        time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        assert wait_for(lambda: calls_of(log, "ray", "job", "stop"), 5)
        proc.send_signal(signal.SIGINT)
        _, err, elapsed = finish(proc, 10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == -signal.SIGINT, err
    assert elapsed < 3


def test_a_submission_that_hangs_is_bounded_and_its_state_unknown(tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = compile_into(SMOKE, tmp_path / "b")
    started = time.monotonic()
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_HANG": "submit", "ACRL_RAY_START_TIMEOUT": "1"}, timeout=15)
    assert time.monotonic() - started < 8
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
    assert time.monotonic() - started < 8
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


@pytest.mark.slow
def test_a_dashboard_lost_for_longer_leaves_the_state_unknown(tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = compile_into(SMOKE, tmp_path / "b")
    started = time.monotonic()
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_STATUS_FAILS": "always", "ACRL_STATUS_GRACE": "2"}, timeout=20)
    assert time.monotonic() - started < 10
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


def test_a_status_call_that_hangs_is_bounded(tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(SMOKE, tmp_path / "b")
    started = time.monotonic()
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_HANG": "status", "ACRL_RAY_TIMEOUT": "1", "ACRL_STATUS_GRACE": "1"}, timeout=20)
    assert time.monotonic() - started < 12
    assert run.returncode == EXIT_UNKNOWN, run.stderr
    assert "no answer in 1 s" in run.stderr


def test_a_job_failing_with_the_unknown_status_is_a_plain_failure(tmp_path: Path, toolbox: Toolbox) -> None:
    """75 means "state unknown" only: a job that itself exits 75 makes train.sh exit 1."""
    compile_into(SMOKE, tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_STATUS": "FAILED", "ACRL_SHIM_EXIT_CODE": str(EXIT_UNKNOWN)})
    assert run.returncode == 1, run.stderr
