"""[wandb] enabled = false (issue 14): W&B stays off even with the key's variable set -- train.sh passes no W&B
flag and logs so once, the RayJob's entrypoint has no W&B switch, `acrl explain` lists no W&B flag -- while the
default (on when the key is set) leaves the example bundles as they were (tests/test_golden.py)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest
import yaml
from test_train_sh import Toolbox, compile_into, run_train_sh, toolbox

from acrl.compiler import compile_spec
from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler._review.explain import explain_path
from conftest import KUBERAY_TABLE, SpecWriter

__all__ = ["toolbox"]  # the fixture, shared with test_train_sh

OFF = {"wandb": {"enabled": False, "project": "p", "group": "g", "key_env": "MY_WANDB_KEY"}}


def test_train_sh_keeps_wandb_off_with_the_key_set(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(write_spec(OFF), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"MY_WANDB_KEY": "k-123"})
    assert run.returncode == 0, run.stderr
    assert not [word for word in run.slime_argv if word.startswith("--wandb") or word == "--use-wandb"]
    assert run.stderr.count("W&B off") == 1 and "[wandb] enabled = false" in run.stderr
    assert "k-123" not in run.stderr + run.stdout
    assert run.find("ray", "job", "submit")[0]["env"]["WANDB_API_KEY"] is None  # key_env is not copied over


def test_default_turns_wandb_on_with_the_key(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(write_spec({"wandb": {"project": "p"}}), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"WANDB_API_KEY": "k-123"})
    assert run.returncode == 0, run.stderr
    assert run.slime_argv[-3:] == ["--use-wandb", "--wandb-project", "p"]
    assert "W&B off" not in run.stderr


def test_rayjob_entrypoint_has_no_wandb_switch(write_spec: SpecWriter) -> None:
    bundle = compile_spec(write_spec({**OFF, "kuberay": KUBERAY_TABLE}), target="kuberay")
    _, rayjob = yaml.safe_load_all(bundle.files["rayjob.yaml"])
    words = shlex.split(rayjob["spec"]["entrypoint"])
    assert words[:2] == ["python3", "/root/slime/train.py"]
    assert not [word for word in words if "wandb" in word]
    # the job still runs as written, whatever the pod's environment holds
    assert subprocess.run(["bash", "-c", rayjob["spec"]["entrypoint"].replace("python3", "true", 1)],
                          env={"MY_WANDB_KEY": "k"}, check=False).returncode == 0


def test_explain_lists_no_wandb_flag(write_spec: SpecWriter) -> None:
    flags = {item.name for item in explain_path(write_spec(OFF)).flags}
    assert not {"--use-wandb", "--wandb-project", "--wandb-group"} & flags
    assert "--use-wandb" in {item.name for item in explain_path(write_spec({})).flags}


SCRIPT = """#!/bin/bash
ray job submit --address="http://127.0.0.1:8265" -- python3 /root/slime/train.py \\
   --hf-checkpoint /root/Qwen3-4B --prompt-data /root/d.jsonl --rollout-batch-size 8 {flags}
{tail}
"""


@pytest.mark.parametrize(("flags", "tail", "enabled"), [
    ("", "", False),  # no W&B flag: off, as slime is
    ("", "# --use-wandb   (commented out, as in slime's scripts)", False),
    ("--use-wandb", "", None),  # on when the key is set: acrl's default, nothing written
    ("--wandb-group g", "", None),  # something about W&B: left as it is
    ("", 'if [ -n "$X" ]; then\n  ray job submit -- python3 /root/slime/train.py --use-wandb\nfi', None),
], ids=["none", "commented", "use-wandb", "wandb-group", "in-an-if"])
def test_import_writes_enabled_false_only_for_a_script_without_wandb(tmp_path: Path, flags: str, tail: str,
                                                                       enabled: bool | None) -> None:
    script = tmp_path / "run-x.sh"
    script.write_text(SCRIPT.format(flags=flags, tail=tail))
    imported = import_train_sh(script)
    assert imported.spec.get("wandb", {}).get("enabled") == enabled
    noted = [n for n in imported.notes if n.kind == "default" and "[wandb] enabled" in n.message]
    assert len(noted) == (enabled is False)
