"""The run lifecycle of issue 16 end to end, against a real Ray head on 127.0.0.1 with the stand-in slime (which
trains, saves and resumes as slime does: tests/standins.py): a run that saves and is interrupted; `acrl run --resume`
resuming at the right rollout id, its record naming the run that saved the checkpoint; a resume refused because
num_rollout is reached; a continuation refused until [checkpoint] scheduler is set; the chain in `acrl runs`; `acrl
diff` over the records."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from test_run import NO_AWS, RayHead, acrl, make_project, only_record, tool_env
from test_run_record import recompile


def records(runs: Path) -> list[dict[str, Any]]:
    found = [json.loads(p.read_text()) for p in runs.glob("*/*/run.json")]
    return sorted(found, key=lambda r: str(r["started_at"]))


def tracker(ckpt: Path) -> int | None:
    path = ckpt / "latest_checkpointed_iteration.txt"
    return int(path.read_text()) if path.exists() else None


@pytest.mark.slow
def test_save_interrupt_resume_refuse_continue(ray_head: RayHead, tmp_path: Path) -> None:
    project = make_project(tmp_path, address=ray_head.address, env_vars={"STANDIN_ROLLOUT_SLEEP": "1.5"})
    ckpt = tmp_path / "ckpt"
    recompile(project, {"experiment": {"num_rollout": 8}, "checkpoint": {"save": str(ckpt), "save_interval": 2}})
    run = ["run", str(project.bundle), "--skip", "gpus", "--runs-dir", str(project.runs)]

    # 1. a run that saves (after rollouts 1, 3, ...) and is interrupted once it has saved iteration 3
    proc = subprocess.Popen([sys.executable, "-m", "acrl.runtime._cli", *run, *NO_AWS], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=tool_env())
    try:
        deadline = time.monotonic() + 180
        while (tracker(ckpt) or 0) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, out + err
    first = only_record(project.runs)
    assert first["status"] == "cancelled" and first["resumed_from"] is None
    assert "starting from the model" in out + err
    saved = tracker(ckpt)  # 3, or 5 when the job saved again before it was stopped
    assert saved in (3, 5)

    # 2. --resume: the check reads the checkpoint, train.sh loads it, slime starts at the next rollout
    proc = acrl(*run, "--resume")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(rf"^checkpoint +passed .*resumes from {ckpt} at rollout {saved + 1} \(iteration {saved}, "
                     rf"torch_dist\); data position: global_dataset_state_dict_{saved}\.pt; saved by run "
                     rf"test-exp/{first['run_id']} with the same layout", proc.stdout, re.M), proc.stdout
    log = proc.stdout
    assert f"stand-in train.py: loaded {saved} from {ckpt}; start {saved + 1}; data position loaded" in log
    assert f"stand-in train.py: rollout {saved}\n" not in log and "stand-in train.py: rollout 7" in log
    second = records(project.runs)[-1]
    assert second["command"][:2] == [f"ACRL_RUN_ID={second['run_id']}", "ACRL_RESUME=required"]
    assert second["resumed_from"] == {"checkpoint_dir": str(ckpt), "iteration": saved, "start_rollout_id": saved + 1,
                                      "data_state": True, "run_id": first["run_id"], "exp_id": "test-exp"}
    assert second["argv"][second["argv"].index("--load") + 1] == str(ckpt)
    assert tracker(ckpt) == 7

    # 3. num_rollout reached: refused before anything runs (and train.sh would refuse too)
    proc = acrl(*run, "--resume")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(rf"^checkpoint +failed .*the checkpoint at {ckpt} \(\[checkpoint\] save\) already finished "
                     r"rollout 7 of \[experiment\] num_rollout 8", proc.stdout, re.M), proc.stdout
    assert re.search(r"^slime-parser +failed .*train.sh refuses to start \(exit 2\): the checkpoint at ", proc.stdout,
                     re.M), proc.stdout  # its ACRL_PRINT_ARGV run goes through the same checkpoint block
    assert proc.stderr.splitlines()[-1] == ("  fix: fix what the table says, or skip them: --skip checkpoint "
                                            "--skip slime-parser")  # every failed check, the checkpoint's first
    assert len(records(project.runs)) == 2

    # 4. a continuation: num_rollout raised, the optimizer loaded, no [checkpoint] scheduler: refused with the fix
    recompile(project, {"experiment": {"num_rollout": 10}, "checkpoint": {"save": str(ckpt), "save_interval": 2}})
    proc = acrl(*run)
    assert proc.returncode == 1
    assert re.search(r"^checkpoint +failed .*changes --num-rollout 8 -> 10 while loading the optimizer", proc.stdout,
                     re.M), proc.stdout
    assert re.search(r'^ +fix: set \[checkpoint\] scheduler = "override"', proc.stdout, re.M)
    recompile(project, {"experiment": {"num_rollout": 10},
                        "checkpoint": {"save": str(ckpt), "save_interval": 2, "scheduler": "override"}})
    proc = acrl(*run)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "stand-in train.py: loaded 7" in proc.stdout and "stand-in train.py: rollout 9" in proc.stdout
    third = records(project.runs)[-1]
    assert third["resumed_from"]["run_id"] == second["run_id"] and "--override-opt-param-scheduler" in third["argv"]

    # 5. the chain
    listed = json.loads(acrl("runs", "--runs-dir", str(project.runs), "--json").stdout)
    assert [r["chain"] for r in listed] == [[first["run_id"]], [first["run_id"], second["run_id"]],
                                            [first["run_id"], second["run_id"], third["run_id"]]]
    table = acrl("runs", "--runs-dir", str(project.runs)).stdout.splitlines()
    assert table[3].rstrip().endswith(f"<- {second['run_id']} @ iteration 7")

    # 6. what ran, compared: the continuation against the resumed run, and the last run against its own bundle
    proc = acrl("diff", second["run_id"], third["run_id"], "--runs-dir", str(project.runs))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert re.search(r"--num-rollout\b.*\b8\b.*\b10\b", proc.stdout), proc.stdout
    assert "--override-opt-param-scheduler" in proc.stdout and "resumed" in proc.stdout.lower(), proc.stdout
    same = acrl("diff", third["run_id"], str(project.bundle), "--runs-dir", str(project.runs))
    assert same.returncode == 0, same.stdout + same.stderr
