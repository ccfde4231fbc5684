"""`acrl import train-sh` on multi-node launches: ``[cluster] num_nodes`` from slime's placement group (acrl's
placement model, slime's placement_group.py:100-117 at 624b824) and the head's ``ray start --num-gpus``; the ssh loop
that started the workers is a note naming its line; the bundle then submits the script's argv (issue 14)."""

from __future__ import annotations

import shutil
from pathlib import Path
from shlex import quote

import pytest
from launch_fidelity import COMMON_ENV, HEAD_IP, check_script
from test_launch_fidelity import FACTS

from acrl.compiler import compile_spec
from acrl.compiler._importers.base import Imported, render_spec
from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler._pipeline.model_args.catalog import entry
from conftest import REPO

FIXTURES = REPO / "tests" / "fixtures" / "train_sh"
MULTINODE = FIXTURES / "fidelity" / "run-multinode-shapes.sh"
HEAD = 'ray start --head --node-ip-address 127.0.0.1 --num-gpus {gpus} --disable-usage-stats\n'
LOOP = ('for WORKER_IP in $(awk \'{print $1}\' /root/mpi_rack_hostfile); do\n'
        '  ssh root@"${WORKER_IP}" "ray start --address=127.0.0.1:6379 --num-gpus 8" &\n'
        'done\nwait\n')
SUBMIT = ('ray job submit --address="{address}" -- python3 /root/slime/train.py \\\n'
          '  --hf-checkpoint /root/Qwen3-4B --prompt-data /root/d.jsonl \\\n'
          '  --rollout-batch-size 96 --n-samples-per-prompt 8 --global-batch-size 768 {flags}\n')


def script(tmp_path: Path, flags: str, *, gpus: int = 8, loop: bool = True,
           address: str = "http://127.0.0.1:8265") -> Path:
    path = tmp_path / "run-multi.sh"
    head = "#!/bin/bash\nset -ex\nsource /root/slime/scripts/models/qwen3-4B.sh\n" + HEAD.format(gpus=gpus)
    path.write_text(head + (LOOP if loop else "") + SUBMIT.format(address=address, flags=flags), encoding="utf-8")
    return path


def loop_notes(imported: Imported, path: Path) -> list[str]:
    line = next((n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("for WORKER_IP")), 0)
    return [n.kind for n in imported.notes if n.where == f"{path}:{line}"]


@pytest.mark.parametrize(("flags", "gpus", "nodes"), [
    ("--actor-num-nodes 8 --actor-num-gpus-per-node 8 --rollout-num-gpus 64", 8, 16),  # 64 + 64 (qwen3-235B)
    ("--actor-num-nodes 32 --actor-num-gpus-per-node 8 --colocate", 8, 32),  # max(256, 256) (glm5, kimi-k2)
    ("--actor-num-nodes 4 --actor-num-gpus-per-node 8 --debug-train-only", 8, 4),  # no rollout (qwen3-235B-sft)
    ("--actor-num-nodes 1 --actor-num-gpus-per-node 8 --rollout-num-gpus 12", 8, 3),  # 8 + 12 on nodes of 8
    ("--actor-num-nodes 2 --actor-num-gpus-per-node 4 --colocate", 4, 2),  # the head's --num-gpus 4: nodes of 4
    ("--actor-num-nodes 3 --actor-num-gpus-per-node 8 --colocate --rollout-num-gpus 8", 8, 3),  # the larger side
])
def test_num_nodes_holds_slimes_placement_group(tmp_path: Path, flags: str, gpus: int, nodes: int) -> None:
    path = script(tmp_path, flags, gpus=gpus)
    imported = import_train_sh(path)
    cluster = imported.spec["cluster"]
    assert cluster["num_nodes"] == nodes and cluster.get("gpus_per_node", 8) == gpus
    assert loop_notes(imported, path) == ["difference"]  # the ssh loop, now with the nodes joining via join.sh
    (note,) = [n for n in imported.notes if "num_nodes" in n.message]
    assert f"num_nodes = {nodes}" in note.message and "join.sh" in note.message
    bundle = compile_spec(tmp_path / "spec.toml", data=render_spec(imported).encode())  # no ACRL-C001
    assert "ACRL-C001" not in {w.rule for w in bundle.warnings}


@pytest.mark.parametrize(("target", "nodes"), [(None, 2), ("624b824", 2), ("v0.3.0", 3)])
def test_external_engines_take_no_gpus_of_the_group_where_the_commit_needs_no_switch(
        tmp_path: Path, target: str | None, nodes: int) -> None:
    """[rollout] external_engine_addrs (the flag maps onto its key): slime's group holds only the actor's 16 GPUs
    (placement_group.py:100-117 at 624b824), but at v0.3.0 the addresses count only with --rollout-external, which the
    script does not pass: 16 + 8 rollout GPUs there (the importer maps against the targeted commit's placement)."""
    flags = "--actor-num-nodes 2 --actor-num-gpus-per-node 8 --rollout-num-gpus 8 --rollout-external-engine-addrs " \
            "10.0.0.9:30000"
    imported = import_train_sh(script(tmp_path, flags), target_commit=target)
    assert imported.spec["rollout"]["external_engine_addrs"] == ["10.0.0.9:30000"]
    assert imported.spec["cluster"]["num_nodes"] == nodes


@pytest.mark.parametrize(("flags", "loop", "address"), [
    ("--actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate", True, "http://127.0.0.1:8265"),  # one node
    ("--actor-num-nodes 1 --actor-num-gpus-per-node 4 --rollout-num-gpus 4", False, "http://127.0.0.1:8265"),
    ("--actor-num-nodes 4 --actor-num-gpus-per-node 8 --colocate", False, "http://10.0.0.5:8265"),  # a cluster
])
def test_num_nodes_left_unset(tmp_path: Path, flags: str, loop: bool, address: str) -> None:
    path = script(tmp_path, flags, loop=loop, address=address)
    imported = import_train_sh(path)
    assert "num_nodes" not in imported.spec["cluster"]
    assert loop_notes(imported, path) == (["difference"] if loop else [])  # the ssh loop is still noted


def test_workers_not_started_by_the_script_are_noted_at_no_line(tmp_path: Path) -> None:
    # run-glm5-744B-A40B.sh, run-kimi-k2-*.sh: no ray start, no ssh loop; the cluster is expected to be up
    path = tmp_path / "run-up.sh"
    flags = "--actor-num-nodes 2 --actor-num-gpus-per-node 8 --colocate"
    text = "#!/bin/bash\nsource /root/slime/scripts/models/qwen3-4B.sh\n"
    path.write_text(text + SUBMIT.format(address="http://127.0.0.1:8265", flags=flags), encoding="utf-8")
    imported = import_train_sh(path)
    assert imported.spec["cluster"]["num_nodes"] == 2
    assert [n.kind for n in imported.notes if "num_nodes" in n.message and n.where == str(path)] == ["difference"]


def test_multi_node_shape_submits_the_same_argv(tmp_path: Path) -> None:
    """The fixture with slime's multi-node shape (2 actor nodes, colocated, an ssh loop): imported with --env values
    only, compiled, and run under the stand-ins with the ray stand-in reporting the 2 nodes (the head and the one that
    ran join.sh): the bundle submits the original's argv, flag by flag, and starts the head with the same GPUs."""
    tree = tmp_path / "slime"
    models = tree / "scripts" / "models"
    models.mkdir(parents=True)
    args = entry("qwen3-4B").model_args()  # type: ignore[union-attr]
    (models / "qwen3-4B.sh").write_text(f"MODEL_ARGS=({' '.join(quote(a) for a in args)})\n", encoding="utf-8")
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{HEAD_IP} slots=8\n10.11.12.14 slots=8\n", encoding="utf-8")
    copied = Path(shutil.copy(MULTINODE, tree / "scripts" / MULTINODE.name))
    result = check_script(copied, tree, slime_dir=None, defaults=FACTS, work=tmp_path / "work", env={
        **COMMON_ENV, "MASTER_ADDR": HEAD_IP, "HOSTFILE": str(hosts), "ACRL_SHIM_NODES": "8,8"})
    assert (result.import_rc, result.compile_rc) == (0, 0) and result.bundle is not None
    spec = (tmp_path / "work" / "spec.toml").read_text(encoding="utf-8")
    assert "num_nodes = 2" in spec
    categories = {m.category for m in result.mismatches}
    assert "run" not in categories and "ray-start" not in categories  # submitted; the head's --num-gpus 8
    # flag by flag (restated defaults are the harness's allowed differences), but for --use-wandb: the harness runs
    # both sides with a dummy W&B key and the spec cannot say "W&B off" (test_launch_fidelity.py, WANDB_ON)
    assert {(m.category, m.subject) for m in result.mismatches if m.category.startswith("flag")} <= {
        ("flag-bundle-only", "--use-wandb")}
    assert not {m.subject for m in result.allowed} & {"--num-gpus-per-node", "--actor-num-nodes", "--colocate"}
