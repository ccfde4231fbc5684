"""The job's environment and launch as spec keys (issue 14): [cluster] env reaches the Ray processes of the head
train.sh starts and of each node join.sh starts; [cluster] node_ip_address and ray_start_args are the head's
`ray start` options; [env] pythonpath entries surround Megatron's in the job's PYTHONPATH. Run with the recording
shims (tests/shims/ray records the environment `ray start` got); rayjob.yaml, acrl diff and acrl explain show the
same; an AMD launch of slime's script shape, imported and compiled, starts its head as the script does."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_join import MULTI, run_join_sh
from test_train_sh import Toolbox, compile_into, make_env, read_calls, run_train_sh, toolbox

from acrl.compiler import compile_spec
from acrl.compiler._cli.main import acrl_main
from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler._review.explain import explain_path
from conftest import KUBERAY_TABLE, REPO, SpecWriter, merge

__all__ = ["toolbox"]  # the fixture, shared with test_train_sh

AMD = REPO / "tests" / "fixtures" / "train_sh" / "launch_env" / "run-amd-launch.sh"
LAUNCH: dict[str, Any] = {
    "cluster": {"node_ip_address": "10.0.0.5", "ray_start_args": ["--num-cpus", "64", "--temp-dir=/tmp/r a"],
                "env": {"HIP_VISIBLE_DEVICES": "0,1", "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1"}},
    "env": {"pythonpath": ["/opt/extra"], "pythonpath_before_megatron": ["/root/slime"]},
}
HEAD = ["ray", "start", "--head", "--num-gpus", "8", "--dashboard-port", "8265", "--disable-usage-stats"]


def node_env(call: dict[str, Any]) -> dict[str, str | None]:
    return {name: call["env"][name] for name in ("HIP_VISIBLE_DEVICES", "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES")}


# --- train.sh ------------------------------------------------------------------------------------------------------

def test_the_head_gets_the_spec_launch(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(write_spec(LAUNCH), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w")
    assert run.returncode == 0, run.stderr
    (start,) = run.find("ray", "start")
    assert start["argv"] == [*HEAD, "--node-ip-address", "10.0.0.5", "--num-cpus", "64", "--temp-dir=/tmp/r a"]
    assert node_env(start) == {"HIP_VISIBLE_DEVICES": "0,1", "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1"}
    # the head's daemons get it; train.sh's own environment (and so `ray job submit`) does not
    assert node_env(run.find("ray", "job", "submit")[0]) == dict.fromkeys(node_env(start))
    assert run.runtime_env["env_vars"]["PYTHONPATH"] == "/root/slime:/root/Megatron-LM:/opt/extra"


def test_master_addr_at_run_time_overrides_node_ip_address(write_spec: SpecWriter, tmp_path: Path,
                                                           toolbox: Toolbox) -> None:
    compile_into(write_spec({"cluster": {"node_ip_address": "127.0.0.1"}}), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"MASTER_ADDR": "10.9.9.9"})
    assert run.returncode == 0, run.stderr
    assert run.find("ray", "start")[0]["argv"] == [*HEAD, "--node-ip-address", "10.9.9.9"]
    bad = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w2", {"MASTER_ADDR": "x;y"})
    assert bad.returncode == 1 and not bad.find("ray", "start") and "MASTER_ADDR" in bad.stderr


def test_without_the_keys_the_head_is_started_as_before(write_spec: SpecWriter, tmp_path: Path,
                                                         toolbox: Toolbox) -> None:
    compile_into(write_spec({}), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"MASTER_ADDR": "10.9.9.9"})
    assert run.returncode == 0, run.stderr
    assert run.find("ray", "start")[0]["argv"] == HEAD
    assert run.runtime_env["env_vars"]["PYTHONPATH"] == "/root/Megatron-LM"
    assert "NODE_ENV" not in (tmp_path / "b" / "train.sh").read_text(encoding="utf-8")


# --- join.sh -------------------------------------------------------------------------------------------------------

def test_join_sh_gives_each_node_the_spec_env(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(write_spec(merge(MULTI, {"cluster": LAUNCH["cluster"]})), tmp_path / "b")
    run = run_join_sh(tmp_path / "b", toolbox, tmp_path / "w", ["10.0.0.5"], {"ACRL_NODE_GPUS": "2"})
    assert run.returncode == 0, run.stderr
    (start,) = run.find("ray", "start")
    # the head's options are the head's: a worker node gets the environment only
    assert start["argv"] == ["ray", "start", "--address=10.0.0.5:6379", "--num-gpus", "2", "--disable-usage-stats"]
    assert node_env(start) == {"HIP_VISIBLE_DEVICES": "0,1", "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1"}
    head = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "h", {"ACRL_SHIM_NODES": "2,2"})
    assert head.returncode == 0, head.stderr
    assert head.find("ray", "start")[0]["argv"][-5:] == ["--node-ip-address", "10.0.0.5", "--num-cpus", "64",
                                                         "--temp-dir=/tmp/r a"]


# --- rayjob.yaml, acrl diff, acrl explain --------------------------------------------------------------------------

def test_kuberay_puts_the_env_in_the_pods_and_the_pythonpath_in_the_runtime_env(write_spec: SpecWriter) -> None:
    spec = write_spec(merge({"kuberay": KUBERAY_TABLE}, {"env": LAUNCH["env"],
                                                             "cluster": {"env": LAUNCH["cluster"]["env"]}}))
    bundle = compile_spec(spec, target="kuberay")
    _, rayjob = yaml.safe_load_all(bundle.files["rayjob.yaml"])
    runtime_env = json.loads(rayjob["spec"]["runtimeEnvYAML"])
    assert runtime_env["env_vars"]["PYTHONPATH"] == "/root/slime:/root/Megatron-LM:/opt/extra"
    cluster = rayjob["spec"]["rayClusterSpec"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        env = group["template"]["spec"]["containers"][0]["env"]
        assert env[:2] == [{"name": "HIP_VISIBLE_DEVICES", "value": "0,1"},
                           {"name": "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES", "value": "1"}]
    assert not bundle.warnings  # [cluster] env applies to the pods; the head's options were not given


def test_kuberay_says_the_head_options_do_not_apply(write_spec: SpecWriter) -> None:
    spec = write_spec(merge({"kuberay": KUBERAY_TABLE}, {"cluster": {"node_ip_address": "10.0.0.5",
                                                                          "ray_start_args": ["--num-cpus", "4"]}}))
    bundle = compile_spec(spec, target="kuberay")
    assert [(w.rule, w.key) for w in bundle.warnings] == [("ACRL-L002", "cluster.node_ip_address"),
                                                         ("ACRL-L002", "cluster.ray_start_args")]


def test_diff_shows_the_launch_as_settings(write_spec: SpecWriter, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    compile_into(write_spec({}), tmp_path / "a")
    compile_into(write_spec(LAUNCH), tmp_path / "b")
    assert acrl_main(["diff", str(tmp_path / "a"), str(tmp_path / "b"), "--format", "json"]) == 1
    data = json.loads(capsys.readouterr().out)
    launch = {c["key"]: (c["before"], c["after"]) for c in data["sections"]["launch"]}
    assert launch["Ray nodes' env HIP_VISIBLE_DEVICES"] == (None, "0,1")
    assert launch["head address (unless MASTER_ADDR is set)"] == (None, "10.0.0.5")
    runtime = {c["key"]: (c["before"], c["after"]) for c in data["sections"]["runtime_env"]}
    assert runtime["PYTHONPATH"] == ("/root/Megatron-LM", "/root/slime:/root/Megatron-LM:/opt/extra")
    script = data["sections"].get("script", [])
    assert not [c for c in script if "HIP_VISIBLE_DEVICES" in json.dumps(c)]  # read as settings, not script lines


def test_explain_lists_the_keys(write_spec: SpecWriter) -> None:
    keys = {item.name: item for item in explain_path(write_spec(LAUNCH)).keys}
    assert keys["cluster.env.HIP_VISIBLE_DEVICES"].value == "0,1"
    assert keys["cluster.ray_start_args"].value == ["--num-cpus", "64", "--temp-dir=/tmp/r a"]
    assert keys["env.pythonpath_before_megatron"].origin.kind == "spec"


# --- an imported AMD launch starts its head as the script does -----------------------------------------------------

def test_imported_amd_launch_starts_the_head_as_the_script_does(write_spec: SpecWriter, tmp_path: Path,
                                                                 toolbox: Toolbox) -> None:
    work = tmp_path / "original"
    work.mkdir()
    log = work / "calls.jsonl"
    ran = subprocess.run(["bash", str(AMD)], env=make_env(toolbox, log, work, {}), cwd=work, capture_output=True,
                         text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    original = [c for c in read_calls(log) if c["argv"][:2] == ["ray", "start"]]
    (submitted,) = [c for c in read_calls(log) if c["argv"][:3] == ["ray", "job", "submit"]]
    runtime_env = json.loads(next(a.split("=", 1)[1] for a in submitted["argv"] if a.startswith("--runtime-env")))

    imported = import_train_sh(AMD).spec
    launch = {"cluster": {k: imported["cluster"][k] for k in ("env", "node_ip_address", "ray_start_args",
                                                              "dashboard_host")},
              "env": imported["env"], "slime": {"megatron_dir": imported["slime"]["megatron_dir"]}}
    compile_into(write_spec(launch), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w")
    assert run.returncode == 0, run.stderr
    (start,) = run.find("ray", "start")

    def options(argv: list[str]) -> dict[str, str]:
        out, words = {}, argv[2:]
        for i, word in enumerate(words):
            if word.startswith("--"):
                name, eq, value = word.partition("=")
                out[name] = value if eq else (words[i + 1] if i + 1 < len(words)
                                              and not words[i + 1].startswith("--") else "")
        return out

    assert options(start["argv"]) == options(original[0]["argv"])  # GPUs, address, dashboard, the others
    assert node_env(start) == node_env(original[0]) == {"HIP_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
                                                        "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1"}
    entries = [e.rstrip("/") for e in runtime_env["env_vars"]["PYTHONPATH"].split(":")]
    assert run.runtime_env["env_vars"]["PYTHONPATH"].split(":") == entries
    assert run.runtime_env["env_vars"]["NCCL_DEBUG"] == "WARN"


def test_import_env_values_reach_cluster_env() -> None:
    imported = import_train_sh(AMD, env=["HIP_VISIBLE_DEVICES=0,1", "MASTER_ADDR=10.1.1.1"])
    assert imported.spec["cluster"]["env"]["HIP_VISIBLE_DEVICES"] == "0,1"
    assert imported.spec["cluster"]["node_ip_address"] == "10.1.1.1"


def test_export_by_name_before_the_head_maps_to_cluster_env() -> None:
    """`export NAME` of a variable set earlier exports it like `export NAME=value` (run-qwen3-4B-amd.sh's
    `export SLIME_DIR`): before `ray start --head` it is [cluster] env; after it, or never set, it is not."""
    script = REPO / "tests" / "fixtures" / "train_sh" / "launch_env" / "run-export-names.sh"
    imported = import_train_sh(script, env=["MODEL_DIR=/mnt/m"])
    assert imported.spec["cluster"]["env"] == {"SLIME_DIR": "/root", "MODEL_DIR": "/mnt/m", "DATA_DIR": "/data"}
    late = [n for n in imported.notes if "export LATE_DIR" in n.message]
    assert [(n.kind, n.where.rsplit(":", 1)[1]) for n in late] == [("difference", "16")]
    assert not [n for n in imported.notes if "NEVER_SET" in n.message]


@pytest.mark.parametrize(("master_addr", "expected"), [(None, "10.0.0.5"), ("10.9.9.9", "10.9.9.9")])
def test_node_ip_address_exports_master_addr_to_the_head_and_the_job(write_spec: SpecWriter, tmp_path: Path,
                                                                     toolbox: Toolbox, master_addr: str | None,
                                                                     expected: str) -> None:
    """slime's scripts `export MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}` before `ray start`, build no_proxy from it,
    and (run-qwen3.5-35B-A3B-sft.sh) pass it in the runtime env: with [cluster] node_ip_address train.sh does too."""
    compile_into(write_spec({"cluster": {"node_ip_address": "10.0.0.5"}}), tmp_path / "b")
    env = {"MASTER_ADDR": master_addr, "no_proxy": None, "ACRL_SHIM_RECORD_ENV": "all"}
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", env)
    assert run.returncode == 0, run.stderr
    (start,) = run.find("ray", "start")
    assert start["env"]["MASTER_ADDR"] == expected
    assert start["env"]["no_proxy"] == f"127.0.0.1,{expected}"
    assert run.runtime_env["env_vars"]["MASTER_ADDR"] == expected


def test_without_node_ip_address_master_addr_is_not_exported(write_spec: SpecWriter, tmp_path: Path,
                                                             toolbox: Toolbox) -> None:
    compile_into(write_spec({}), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"MASTER_ADDR": None, "no_proxy": None, "ACRL_SHIM_RECORD_ENV": "all"})
    assert run.returncode == 0, run.stderr
    (start,) = run.find("ray", "start")
    assert "MASTER_ADDR" not in start["env"] and start["env"]["no_proxy"] == "127.0.0.1"
    assert "MASTER_ADDR" not in run.runtime_env["env_vars"]
