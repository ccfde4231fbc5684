"""Several nodes without KubeRay (issue 13): a bundle whose [cluster] has num_nodes > 1 and no address starts
its head with train.sh, prints the command each other node runs (`bash join.sh HEAD_IP:PORT`), waits, bounded,
until the nodes and the GPUs of slime's placement group are there, then submits the job. join.sh checks a node
against the spec and starts a Ray worker node. The shim tests run both scripts against tests/shims/; the last
test runs them with real Ray: two nodes on 127.0.0.1, and the job's placement group spans both."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from test_interrupts import finish
from test_run import (
    VENV_BIN,
    _alive,
    end_processes,
    free_port,
    make_project,
    processes_mentioning,
    tool_env,
    with_descendants,
)
from test_train_sh import Run, Toolbox, compile_into, make_env, read_calls, run_train_sh, shellcheck, toolbox

from acrl.compiler import compile_spec, verify_bundle, write
from conftest import SpecWriter, merge

__all__ = ["toolbox"]  # the fixture, shared with test_train_sh

# Two nodes of 2 GPUs; the actor takes one node, the rollout the other: slime's placement group (4 GPUs) spans both.
MULTI: dict[str, Any] = {
    "cluster": {"num_nodes": 2, "gpus_per_node": 2, "colocate": False, "actor_num_nodes": 1,
                "actor_num_gpus_per_node": 2, "rollout_num_gpus": 2},
    "rollout": {"gpus_per_engine": 1},
}


def multi_bundle(write_spec: SpecWriter, tmp_path: Path, **cluster: Any) -> Path:
    compile_into(write_spec(merge(MULTI, {"cluster": cluster})), tmp_path / "b")
    return tmp_path / "b"


def run_join_sh(bundle: Path, toolbox: Toolbox, work: Path, args: list[str],
                env: Mapping[str, str | None] | None = None, timeout: float = 30) -> Run:
    work.mkdir(parents=True, exist_ok=True)
    log = work / "shim-calls.jsonl"
    log.unlink(missing_ok=True)
    proc = subprocess.run(["bash", str(bundle / "join.sh"), *args], env=make_env(toolbox, log, work, env or {}),
                          cwd=work, capture_output=True, text=True, timeout=timeout)
    return Run(proc.returncode, proc.stdout, proc.stderr, read_calls(log))


# --- which bundles have join.sh ------------------------------------------------------------------------------------

def test_only_a_bundle_whose_nodes_join_its_local_head_has_join_sh(write_spec: SpecWriter, tmp_path: Path) -> None:
    assert "join.sh" not in compile_spec(write_spec()).files  # one node
    assert "join.sh" not in compile_spec(write_spec(merge(MULTI, {"cluster": {"address": "http://h:8265"}}))).files
    bundle = multi_bundle(write_spec, tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert set(manifest["files"]) == {"train.sh", "join.sh", "model_args.sh", "custom_config.yaml", "spec.toml"}
    assert manifest["derived"]["node_gpus"] == [2, 2]
    assert (bundle / "join.sh").stat().st_mode & stat.S_IXUSR
    assert verify_bundle(bundle).intact
    # an edited join.sh, or one that lost its execute bit, is caught like an edited train.sh
    (bundle / "join.sh").write_text((bundle / "join.sh").read_text() + "echo edited\n")
    check = verify_bundle(bundle)
    assert not check.intact and "join.sh" in check.modified
    compile_into(write_spec(MULTI), tmp_path / "c")
    (tmp_path / "c" / "join.sh").chmod(0o644)
    assert "join.sh is not executable (run it with `bash join.sh`, or chmod +x it)" in \
        verify_bundle(tmp_path / "c").notes


# --- train.sh: the head, the join command, the wait ----------------------------------------------------------------

def test_train_sh_starts_the_head_prints_the_join_command_and_waits_for_the_nodes(
        write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path)
    run = run_train_sh(bundle / "train.sh", toolbox, tmp_path / "w",
                       {"MASTER_ADDR": "10.1.2.3", "ACRL_SHIM_NODES": "2/2,2"})
    assert run.returncode == 0, run.stderr
    (start,) = run.find("ray", "start")
    assert start["argv"] == ["ray", "start", "--head", "--num-gpus", "2", "--dashboard-port", "8265", "--port", "6379",
                             "--disable-usage-stats", "--node-ip-address", "10.1.2.3"]
    assert f"acrl:   bash {bundle.resolve()}/join.sh 10.1.2.3:6379\n" in run.stderr
    assert "acrl: the cluster has 1 of 2 nodes, 2 of 4 GPUs\n" in run.stderr
    assert "acrl: the cluster has 2 of 2 nodes, 4 of 4 GPUs\n" in run.stderr
    lists = run.find("ray", "list", "nodes")
    assert len(lists) == 2 and {c["env"]["RAY_API_SERVER_ADDRESS"] for c in lists} == {"http://127.0.0.1:8265"}
    order = [c["argv"][:3] for c in run.calls if c["argv"][0] == "ray"]
    assert order.index(["ray", "start", "--head"]) < order.index(["ray", "list", "nodes"]) \
        < order.index(["ray", "job", "submit"])


def test_without_master_addr_the_join_command_names_the_address_ray_chose(write_spec: SpecWriter, tmp_path: Path,
                                                                        toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path, head_port=6390, dashboard_host="0.0.0.0")
    run = run_train_sh(bundle / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_SHIM_NODE_IP": "10.9.8.7", "ACRL_SHIM_NODES": "2,2"})
    assert run.returncode == 0, run.stderr
    assert run.find("ray", "start")[0]["argv"] == [
        "ray", "start", "--head", "--num-gpus", "2", "--dashboard-port", "8265", "--port", "6390",
        "--dashboard-host", "0.0.0.0", "--disable-usage-stats"]
    assert f"bash {bundle.resolve()}/join.sh 10.9.8.7:6390\n" in run.stderr
    assert len(run.find("ray", "list", "nodes")) == 1


def test_an_ipv6_head_prints_a_join_command_join_sh_accepts(write_spec: SpecWriter, tmp_path: Path,
                                                           toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path)
    run = run_train_sh(bundle / "train.sh", toolbox, tmp_path / "w",
                       {"MASTER_ADDR": "fd00::1", "ACRL_SHIM_NODES": "2,2"})
    assert run.returncode == 0, run.stderr
    assert f"bash {bundle.resolve()}/join.sh [fd00::1]:6379\n" in run.stderr
    joined = run_join_sh(bundle, toolbox, tmp_path / "j", ["[fd00::1]:6379"], {"ACRL_NODE_GPUS": "2"})
    assert joined.returncode == 0, joined.stderr
    assert ["ray", "start", "--address=[fd00::1]:6379", "--num-gpus", "2", "--disable-usage-stats"] in joined.argvs


def test_one_node_keeps_its_head_options(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(write_spec({"cluster": {"head_port": 6390, "dashboard_host": "0.0.0.0"}}), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"MASTER_ADDR": "10.1.2.3"})
    assert run.returncode == 0, run.stderr
    assert run.find("ray", "start")[0]["argv"] == [
        "ray", "start", "--head", "--num-gpus", "8", "--dashboard-port", "8265", "--port", "6390",
        "--dashboard-host", "0.0.0.0", "--disable-usage-stats"]
    assert not run.find("ray", "list") and "join.sh" not in run.stderr


def test_the_wait_for_the_nodes_is_bounded(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path)
    started = time.monotonic()
    run = run_train_sh(bundle / "train.sh", toolbox, tmp_path / "w",
                       {"ACRL_JOIN_TIMEOUT": "1", "ACRL_SHIM_NODES": "2", "MASTER_ADDR": "10.1.2.3"})
    assert time.monotonic() - started < 10
    assert run.returncode == 1
    error = run.stderr.splitlines()[-1]
    assert error == (f"acrl: error: only 1 of 2 nodes and 2 of 4 GPUs joined in 1 s; run on each other node: "
                     f"bash {bundle.resolve()}/join.sh 10.1.2.3:6379 (or raise ACRL_JOIN_TIMEOUT)")
    assert not run.find("ray", "job")

    unreachable = run_train_sh(bundle / "train.sh", toolbox, tmp_path / "w2",
                               {"ACRL_JOIN_TIMEOUT": "1", "ACRL_SHIM_NODES": "unreachable"})
    assert unreachable.returncode == 1
    assert unreachable.stderr.splitlines()[-1].startswith(
        "acrl: error: cannot read the cluster's nodes ('ray list nodes'): ConnectionError: Failed to connect")
    assert not unreachable.find("ray", "job")


@pytest.mark.parametrize(("name", "value"), [("ACRL_JOIN_TIMEOUT", "0"), ("ACRL_JOIN_TIMEOUT", "$(touch pwned)"),
                                             ("MASTER_ADDR", "$(touch pwned)"), ("MASTER_ADDR", "a b")])
def test_bad_join_settings_stop_train_sh_before_anything_runs(name: str, value: str, write_spec: SpecWriter,
                                                             tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path)
    run = run_train_sh(bundle / "train.sh", toolbox, tmp_path / "w", {name: value})
    assert run.returncode == 1 and name in run.stderr.splitlines()[-1]
    assert run.calls == [] and not (tmp_path / "w" / "pwned").exists()


def test_an_existing_cluster_given_at_run_time_is_not_waited_for(write_spec: SpecWriter, tmp_path: Path,
                                                                 toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path)
    run = run_train_sh(bundle / "train.sh", toolbox, tmp_path / "w", {"ACRL_RAY_ADDRESS": "http://10.1.2.3:8265"})
    assert run.returncode == 0, run.stderr
    assert not run.find("ray", "start") and not run.find("ray", "list")


# --- join.sh -------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("args", "env", "address"), [
    (["10.1.2.3:6379"], {}, "10.1.2.3:6379"),
    (["head.internal"], {}, "head.internal:6379"),  # the spec's head_port
    ([], {"MASTER_ADDR": "10.1.2.5"}, "10.1.2.5:6379"),  # as slime's scripts: the workers know MASTER_ADDR
    ([], {"MASTER_ADDR": "fd00::5"}, "[fd00::5]:6379"),  # a bare IPv6 address is bracketed
    (["[fd00::5]:6380"], {}, "[fd00::5]:6380"),  # as train.sh prints it for an IPv6 head
])
def test_join_sh_starts_a_worker_node(args: list[str], env: dict[str, str], address: str, write_spec: SpecWriter,
                                      tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path)
    run = run_join_sh(bundle, toolbox, tmp_path / "w", args, {"ACRL_NODE_GPUS": "2", "WORKER_IP": "10.1.2.4", **env})
    assert run.returncode == 0, run.stderr
    without_pgrep = [a for a in run.argvs if a[0] != "pgrep"]
    assert without_pgrep == [["pkill", "-9", "sglang"], ["ray", "stop", "--force"],
                             ["ray", "start", f"--address={address}", "--num-gpus", "2", "--disable-usage-stats",
                              "--node-ip-address", "10.1.2.4"]]
    assert run.stderr.splitlines()[-1] == f"acrl: this node joined the Ray cluster at {address}"


def test_join_sh_counts_gpus_with_nvidia_smi_and_keeps_stale_processes_when_told(
        write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(write_spec(merge(MULTI, {"cluster": {"gpus_per_node": 8, "stop_stale_processes": False,
                                                      "rollout_num_gpus": 8, "actor_num_gpus_per_node": 8}})),
                 tmp_path / "b")
    run = run_join_sh(tmp_path / "b", toolbox, tmp_path / "w", ["10.1.2.3"])
    assert run.returncode == 0, run.stderr
    assert run.argvs == [["nvidia-smi", "-L"], ["ray", "start", "--address=10.1.2.3:6379", "--num-gpus", "8",
                                                "--disable-usage-stats"]]


@pytest.mark.parametrize(("env", "counted"), [({"ACRL_NODE_GPUS": "3"}, "3 GPUs (ACRL_NODE_GPUS)"),
                                              ({}, "8 GPUs (nvidia-smi -L)")])
def test_join_sh_refuses_a_node_whose_gpus_differ_from_the_spec(env: dict[str, str], counted: str,
                                                                write_spec: SpecWriter, tmp_path: Path,
                                                                toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path)
    run = run_join_sh(bundle, toolbox, tmp_path / "w", ["10.1.2.3:6379"], env)
    assert run.returncode == 1
    error = run.stderr.splitlines()[-1]
    assert error.startswith(f"acrl: error: this node has {counted}, the spec's [cluster] gpus_per_node is 2")
    assert not [a for a in run.argvs if a[0] != "nvidia-smi"]  # nothing stopped, nothing started


@pytest.mark.parametrize(("args", "env", "says"), [
    ([], {}, "usage: bash join.sh HEAD_IP[:PORT]"), (["a:1", "b:2"], {}, "usage:"),
    (["$(touch pwned)"], {}, "the head address must be HOST or HOST:PORT"),
    (["10.1.2.3;touch pwned"], {}, "the head address must be"),
    (["10.1.2.3"], {"WORKER_IP": "$(touch pwned)"}, "WORKER_IP must be"),
    (["10.1.2.3"], {"ACRL_NODE_GPUS": "2x"}, "ACRL_NODE_GPUS must be a whole number"),
    (["10.1.2.3"], {"ACRL_RAY_START_TIMEOUT": "1.5"}, "must be whole numbers of seconds"),
])
def test_join_sh_refuses_bad_arguments_before_anything_runs(args: list[str], env: dict[str, str], says: str,
                                                            write_spec: SpecWriter, tmp_path: Path,
                                                            toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path)
    run = run_join_sh(bundle, toolbox, tmp_path / "w", args, {"ACRL_NODE_GPUS": "2", **env})
    assert run.returncode == 1 and says in run.stderr.splitlines()[-1], run.stderr
    assert run.calls == [] and not list((tmp_path / "w").glob("pwned*"))


def test_join_sh_is_bounded_and_stops_at_once_on_a_signal(write_spec: SpecWriter, tmp_path: Path,
                                                         toolbox: Toolbox) -> None:
    bundle = multi_bundle(write_spec, tmp_path, stop_stale_processes=False)
    started = time.monotonic()
    run = run_join_sh(bundle, toolbox, tmp_path / "w", ["10.1.2.3"],
                      {"ACRL_NODE_GPUS": "2", "ACRL_SHIM_HANG": "start", "ACRL_RAY_START_TIMEOUT": "1"})
    assert time.monotonic() - started < 15
    assert run.returncode == 1 and "'ray start --address=10.1.2.3:6379' failed or took over 1 s" in run.stderr

    log = tmp_path / "w2" / "calls.jsonl"
    (tmp_path / "w2").mkdir()
    env = make_env(toolbox, log, tmp_path / "w2", {"ACRL_NODE_GPUS": "2", "ACRL_SHIM_HANG": "start"})
    proc = subprocess.Popen(["bash", str(bundle / "join.sh"), "10.1.2.3"], env=env, cwd=tmp_path / "w2",
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 15
        while not read_calls(log) and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        _, err, elapsed = finish(proc, 10)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 143 and elapsed < 5 and "interrupted: this node has not joined" in err
    (start,) = read_calls(log)
    deadline = time.monotonic() + 5
    while _alive(start["pid"]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(start["pid"]), "the hanging ray start was left running"


@pytest.mark.parametrize("cluster", [{}, {"stop_stale_processes": False, "start_ray_head": False,
                                          "dashboard_host": "0.0.0.0", "head_port": 7000}])
def test_shellcheck_train_sh_and_join_sh(cluster: dict[str, Any], write_spec: SpecWriter, tmp_path: Path) -> None:
    bundle = multi_bundle(write_spec, tmp_path, **cluster)
    proc = subprocess.run([shellcheck(), "-x", "train.sh", "join.sh"], cwd=bundle, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# --- the preflight -------------------------------------------------------------------------------------------------

def test_acrl_run_counts_the_heads_gpus_and_says_the_others_join(write_spec: SpecWriter, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    from acrl.runtime._preflight import checks as _preflight
    from acrl.runtime._preflight.outcome import CheckFailed

    bundle = multi_bundle(write_spec, tmp_path)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: H100'\necho 'GPU 1: H100'\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    info = _preflight.read_bundle_info(bundle)
    monkeypatch.setenv("PATH", str(bin_dir))
    others = ("on this node (the head); the other 1 node(s) join it with join.sh, each checked against [cluster] "
              "gpus_per_node when it joins")
    assert _preflight.check_gpus(info) == f"2 GPUs (nvidia-smi -L), 2 needed {others}"
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: H100'\n")
    with pytest.raises(CheckFailed) as failed:
        _preflight.check_gpus(info)
    assert failed.value.args[0] == f"1 GPUs here (nvidia-smi -L), the bundle needs 2 {others}"


# --- real Ray: two nodes on 127.0.0.1 ------------------------------------------------------------------------------

# `ray` for both scripts: the real CLI, held to 127.0.0.1 (tool_env's RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 makes
# every Ray process take 127.0.0.1 as this machine's address), free ports and one temp dir (this machine may run
# other Ray clusters). The head is `ray start --head` as train.sh runs it; the worker node is join.sh's `ray start
# --address`, through worker_start.py, which lets that one process start a worker node (Ray refuses to with
# RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0) and keep 127.0.0.1 (Ray replaces a loopback address by the routable one).
TWO_NODE_RAY = """#!/usr/bin/env bash
if [[ $1 == start && $2 == --head ]]; then
  shift
  exec {real} start "$@" --node-ip-address=127.0.0.1 --dashboard-host=127.0.0.1 {head_ports} --num-cpus=2 \\
    --temp-dir={temp_dir}
fi
if [[ $1 == start ]]; then
  shift
  exec {python} {worker_start} start "$@" --node-ip-address=127.0.0.1 {worker_ports} --num-cpus=2 \\
    --temp-dir={temp_dir}
fi
exec {real} "$@"
"""
WORKER_START = """import sys
import ray._private.ray_constants as constants
import ray._private.services as services
constants.ENABLE_RAY_CLUSTER = True
services.resolve_ip_for_localhost = lambda host: host
from ray.scripts.scripts import main
sys.argv = ["ray", *sys.argv[1:]]
main()
"""


def read_until_match(proc: subprocess.Popen[str], pattern: re.Pattern[str], timeout: float) -> str:
    """What ``proc`` printed (read from its fd, unbuffered) until ``pattern`` matches; fails after ``timeout`` s."""
    assert proc.stdout is not None
    fd, seen, deadline = proc.stdout.fileno(), b"", time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.1)
        chunk = os.read(fd, 65536) if ready else b""
        seen += chunk
        if pattern.search(seen.decode("utf-8", "replace")):
            return seen.decode("utf-8", "replace")
        if ready and not chunk:
            break
    pytest.fail(f"never saw {pattern.pattern!r}: {seen.decode('utf-8', 'replace')}")


def ports(*names: str) -> str:
    return " ".join(f"--{name}={free_port()}" for name in names)


AGENT_PORTS = ("dashboard-agent-listen-port", "dashboard-agent-grpc-port", "runtime-env-agent-port",
               "metrics-export-port")


@pytest.mark.slow
def test_two_ray_nodes_on_127_0_0_1_run_a_placement_group_over_both(tmp_path: Path) -> None:
    """train.sh starts the head and waits; join.sh (ACRL_NODE_GPUS=2) starts a second node; the stand-in train.py
    makes slime's PACK placement group of 4 one-GPU bundles and runs a task on each: they land on both nodes."""
    import shutil

    ray = shutil.which("ray", path=VENV_BIN)
    if ray is None:
        pytest.skip("the ray CLI is not installed: pip install 'ray[default]' (the test extra has it)")
    project = make_project(tmp_path / "p", env_vars={"STANDIN_PLACEMENT_GROUP": "4"})
    head_port, dashboard = free_port(), free_port()
    spec = merge(project.spec, merge(MULTI, {"cluster": {"stop_stale_processes": False, "head_port": head_port,
                                                         "dashboard_port": dashboard}}))
    (project.root / "spec.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    write(compile_spec(project.root / "spec.toml"), project.bundle, force=True)
    assert json.loads((project.bundle / "manifest.json").read_text())["derived"]["node_gpus"] == [2, 2]
    temp_dir = tempfile.mkdtemp(prefix="acrl-ray-", dir="/tmp")  # short: Ray's socket paths have a length limit
    wrappers = tmp_path / "bin"
    wrappers.mkdir()
    (wrappers / "worker_start.py").write_text(WORKER_START)
    (wrappers / "ray").write_text(TWO_NODE_RAY.format(
        real=ray, python=sys.executable, worker_start=wrappers / "worker_start.py", temp_dir=temp_dir,
        head_ports=ports("ray-client-server-port", *AGENT_PORTS),
        worker_ports=ports("node-manager-port", "object-manager-port", *AGENT_PORTS)))
    (wrappers / "ray").chmod(0o755)
    env = tool_env(MASTER_ADDR="127.0.0.1")
    env["PATH"] = os.pathsep.join([str(wrappers), env["PATH"]])
    proc = subprocess.Popen(["bash", str(project.bundle / "train.sh")], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        seen = read_until_match(proc, re.compile(r"^acrl:   (bash \S+/join\.sh 127\.0\.0\.1:(\d+))$", re.M), 120)
        match = re.search(r"^acrl:   (bash \S+/join\.sh 127\.0\.0\.1:(\d+))$", seen, re.M)
        assert match and match.group(2) == str(head_port), seen
        joined = subprocess.run(match.group(1).split(), env={**env, "ACRL_NODE_GPUS": "2", "WORKER_IP": "127.0.0.1"},
                                cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert joined.returncode == 0, joined.stderr
        out, _, _ = finish(proc, 180)
        assert proc.returncode == 0, seen + out
        assert "the cluster has 2 of 2 nodes, 4 of 4 GPUs" in out
        placement = json.loads(project.received.read_text())["placement"]
        nodes = placement["nodes"]
        assert len(nodes) == 2 and set(nodes.values()) == {"127.0.0.1"}
        assert set(placement["bundle_nodes"]) == set(nodes)  # the group spans both nodes
        assert placement["bundle_nodes"][:2] != placement["bundle_nodes"][2:]
        assert set(placement["task_nodes"]) == set(nodes)  # and the job's code ran on the joined node
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        ray_processes = with_descendants(processes_mentioning(temp_dir)
                                         + processes_mentioning(f"127.0.0.1:{head_port}"))
        end_processes(ray_processes)
        shutil.rmtree(temp_dir, ignore_errors=True)
    assert ray_processes and not [pid for pid in ray_processes if _alive(pid)], "Ray processes were left running"
