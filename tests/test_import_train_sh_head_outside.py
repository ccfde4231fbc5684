"""`acrl import train-sh` for a script that submits to a Ray head started outside it (slime's run-glm5-744B-A40B.sh,
run-kimi-k2-Thinking.sh: `ray stop --force`, no `ray start --head`, `ray job submit --address=http://127.0.0.1:8265`)
and passes the launching shell's own variables in its runtime env (`"MASTER_ADDR": "${MASTER_ADDR}"`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from acrl.compiler import compile_spec
from acrl.compiler._importers.base import render_spec
from acrl.compiler._importers.train_sh import import_train_sh

HEAD = "ray start --head --node-ip-address {ip} --num-gpus 8 --disable-usage-stats\n"
ENV = ('RUNTIME_ENV_JSON="{\n  \\"env_vars\\": {\n    \\"PYTHONPATH\\": \\"/root/Megatron-LM/\\",\n'
       '    \\"no_proxy\\": \\"${no_proxy}\\",\n    \\"MASTER_ADDR\\": \\"${MASTER_ADDR}\\",\n'
       '    \\"NCCL_X\\": \\"${NCCL_X}\\"\n  }\n}"\n')
SUBMIT = ('ray job submit --address="{address}" --runtime-env-json="${{RUNTIME_ENV_JSON}}" \\\n'
          '  -- python3 /root/slime/train.py --hf-checkpoint /root/Qwen3-4B --prompt-data /root/d.jsonl \\\n'
          '  --rollout-batch-size 8 --n-samples-per-prompt 8 --global-batch-size 64 --colocate\n')


def script(tmp_path: Path, *, head: str = "", address: str = "http://127.0.0.1:8265") -> Path:
    path = tmp_path / "run-outside.sh"
    path.write_text("#!/bin/bash\nset -ex\nray stop --force\nsource /root/slime/scripts/models/qwen3-4B.sh\n" + head
                    + ENV + SUBMIT.format(address=address), encoding="utf-8")
    return path


def lines(path: Path, start: str) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.lstrip().startswith(start))


def test_a_local_submit_without_a_head_start_imports_start_ray_head_false(tmp_path: Path) -> None:
    path = script(tmp_path)
    imported = import_train_sh(path)
    assert imported.spec["cluster"]["start_ray_head"] is False
    submit = lines(path, "ray job submit")
    assert [n.kind for n in imported.notes if "start_ray_head" in n.message] == ["difference"]
    assert [n.where for n in imported.notes if "start_ray_head" in n.message] == [f"{path}:{submit}"]
    train = compile_spec(tmp_path / "spec.toml", data=render_spec(imported).encode()).files["train.sh"].decode()
    assert "ray start --head" not in train and "ray stop --force" in train  # stale processes still stopped


@pytest.mark.parametrize(("head", "address"), [
    (HEAD.format(ip="10.0.0.1"), "http://127.0.0.1:8265"),  # the script starts its head
    ('if [ -n "$X" ]; then\n  ray start --head --num-gpus 8\nfi\n', "http://127.0.0.1:8265"),  # in a body not read
    ("", "http://10.0.0.5:8265"),  # an existing cluster: [cluster] address
    ("", "$RAY_ADDR"),  # unresolved: the default stays
])
def test_start_ray_head_kept(tmp_path: Path, head: str, address: str) -> None:
    imported = import_train_sh(script(tmp_path, head=head, address=address))
    assert "start_ray_head" not in imported.spec["cluster"]


def test_the_launching_shells_own_variables_are_forwarded(tmp_path: Path) -> None:
    path = script(tmp_path)
    imported = import_train_sh(path)
    env = imported.spec["env"]
    assert env["forward"] == ["WANDB_ENTITY", "no_proxy", "NCCL_X", "MASTER_ADDR"]  # the default kept
    assert "MASTER_ADDR" not in env.get("vars", {}) and "no_proxy" not in env.get("vars", {})
    for name in ("no_proxy", "MASTER_ADDR"):
        line = lines(path, f'\\"{name}\\"')
        assert [n.kind for n in imported.notes if n.where == f"{path}:{line}"] == ["difference"]
    train = compile_spec(tmp_path / "spec.toml", data=render_spec(imported).encode()).files["train.sh"].decode()
    assert "ACRL_FORWARD='WANDB_ENTITY no_proxy NCCL_X MASTER_ADDR'" in train


def test_master_addr_with_node_ip_address_is_train_shs_own(tmp_path: Path) -> None:
    path = script(tmp_path, head=HEAD.format(ip="10.0.0.1"))
    imported = import_train_sh(path)
    assert imported.spec["cluster"]["node_ip_address"] == "10.0.0.1"
    assert imported.spec["env"]["forward"] == ["WANDB_ENTITY", "no_proxy", "NCCL_X"]
    line = lines(path, '\\"MASTER_ADDR\\"')
    assert [n.kind for n in imported.notes if n.where == f"{path}:{line}"] == ["default"]


def test_master_addr_the_script_sets_goes_to_env_vars(tmp_path: Path) -> None:
    path = script(tmp_path)
    path.write_text(path.read_text().replace("ray stop --force\n", "ray stop --force\nMASTER_ADDR=10.0.0.9\n"))
    imported = import_train_sh(path)
    assert imported.spec["env"]["vars"]["MASTER_ADDR"] == "10.0.0.9"
    assert "MASTER_ADDR" not in imported.spec["env"]["forward"]


def test_single_quoted_json_is_not_forwarded(tmp_path: Path) -> None:
    # run-deepseek-r1.sh's shape: '...' keeps `${NCCL_X}` as text; the importer does not treat it as a forward
    path = tmp_path / "run-q.sh"
    path.write_text(script(tmp_path).read_text().replace(ENV, "").replace(
        '"${RUNTIME_ENV_JSON}"', "'{\"env_vars\": {\"NCCL_X\": \"${NCCL_X}\"}}'"), encoding="utf-8")
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    imported = import_train_sh(path)
    assert "NCCL_X" not in imported.spec.get("env", {}).get("forward", [])
