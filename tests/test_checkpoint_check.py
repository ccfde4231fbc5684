"""The ``checkpoint`` preflight check against temporary checkpoint directories and run records (no Ray): what
train.sh's checkpoint block would refuse, a zero-rollout resume, the data position, and the layout and schedule a
checkpoint was saved with (from the saving run's record) against the bundle's argv."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from acrl.runtime._preflight.bundle_info import BundleInfo
from acrl.runtime._preflight.checks import CHECKS, Result, run_check

SAVE_FLAGS = ["--tensor-model-parallel-size", "2", "--num-rollout", "10", "--lr", "1e-6"]


def save_checkpoint(directory: Path, iteration: int, *, tracker: str | None = None, complete: bool = True,
                    legacy: bool = False, data_state: bool = True) -> Path:
    """A checkpoint directory as Megatron and slime leave it (without the tensors)."""
    folder = directory / f"iter_{iteration:07d}"
    folder.mkdir(parents=True)
    if complete:
        if legacy:
            (folder / "mp_rank_00").mkdir()
        else:
            (folder / "metadata.json").write_text("{}")
    if data_state:
        (directory / "rollout").mkdir(exist_ok=True)
        (directory / "rollout" / f"global_dataset_state_dict_{iteration}.pt").write_bytes(b"x")
    (directory / "latest_checkpointed_iteration.txt").write_text(tracker if tracker is not None else f"{iteration}\n")
    return directory


def record_saver(runs: Path, run_id: str, save: Path, flags: list[str], started: str = "2026-01-01") -> None:
    folder = runs / "exp" / run_id
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({
        "exp_id": "exp", "run_id": run_id, "status": "cancelled", "started_at": started,
        "argv": ["python3", "/slime/train.py", "--save", str(save), *flags]}))


def check(tmp_path: Path, checkpoint: dict[str, Any], *, num_rollout: int | None = 20, argv: list[str] | None = None,
          resume: bool = False, address: str | None = None) -> Result:
    spec = {"experiment": {"num_rollout": num_rollout} if num_rollout is not None else {},
            "checkpoint": checkpoint}
    (tmp_path / "train.sh").write_text('echo "acrl-resume: {...}"\n')  # a train.sh with the checkpoint block
    info = BundleInfo(tmp_path, spec, None, (), address=address, resume=resume, runs_dir=tmp_path / "runs")
    info.memo["argv"] = ["python3", "/slime/train.py", *(argv if argv is not None else SAVE_FLAGS)]
    (found,) = [c for c in CHECKS if c.name == "checkpoint"]
    return run_check(found, info)


@pytest.fixture(autouse=True)
def _no_resume_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACRL_RESUME", raising=False)


def test_a_bundle_without_a_checkpoint_directory_is_skipped(tmp_path: Path) -> None:
    assert check(tmp_path, {}).status == "skipped"
    result = check(tmp_path, {}, resume=True)  # --resume asks never to start from the model
    assert (result.status, result.detail) == ("failed", "--resume: the bundle names no checkpoint directory "
                                                        "([checkpoint] save, load)")
    (tmp_path / "train.sh").write_text("echo compiled before issue 16\n")
    info = BundleInfo(tmp_path, {"checkpoint": {"save": str(tmp_path)}}, None, (), resume=True)
    (found,) = [c for c in CHECKS if c.name == "checkpoint"]
    result = run_check(found, info)
    assert result.status == "failed" and "compiled before [checkpoint] resume" in result.detail
    result = check(tmp_path, {"save": str(tmp_path / "ckpt")})
    assert (result.status, result.detail) == ("passed", f"starts from the model: no checkpoint in {tmp_path}/ckpt yet")


def test_nothing_to_resume_fails_only_when_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ckpt").mkdir()
    for required in ({"resume": "required"}, {}):
        result = check(tmp_path, {"save": str(tmp_path / "ckpt"), **required}, resume=not required)
        assert result.status == "failed" and str(tmp_path / "ckpt") in result.detail
        assert result.detail.startswith("nothing to resume: no checkpoint (latest_checkpointed_iteration.txt)")
        assert "[checkpoint] save" in result.hint and "without --resume" in result.hint
    monkeypatch.setenv("ACRL_RESUME", "sometimes")
    result = check(tmp_path, {"save": str(tmp_path / "ckpt")})
    assert result.status == "failed" and result.detail.startswith("ACRL_RESUME='sometimes'")


def test_resume_never_refuses_to_write_over_a_checkpoint(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "ckpt", 3)
    result = check(tmp_path, {"save": str(tmp_path / "ckpt"), "resume": "never"})
    assert result.status == "failed" and "[checkpoint] save" in result.detail and "never" in result.detail
    assert "new directory" in result.hint
    result = check(tmp_path, {"save": str(tmp_path / "other"), "resume": "never"})
    assert result.status == "passed"


@pytest.mark.parametrize(("setup", "words"), [
    ({"tracker": "release"}, "holds a release checkpoint"),
    ({"tracker": "ninety"}, "holds 'ninety', not an iteration number"),
    ({"tracker": "7"}, "iter_0000007 does not exist (the tracker says 7)"),
    ({"complete": False}, "iter_0000004 is incomplete"),
], ids=["release", "garbage", "missing-iteration", "incomplete"])
def test_a_checkpoint_megatron_would_stop_on_is_refused(tmp_path: Path, setup: dict[str, Any], words: str) -> None:
    save_checkpoint(tmp_path / "ckpt", 4, **setup)
    result = check(tmp_path, {"save": str(tmp_path / "ckpt")})
    assert result.status == "failed" and words in result.detail, result
    assert result.detail.startswith(f"[checkpoint] save {tmp_path}/ckpt") and result.hint


def test_a_resume_that_would_train_nothing_is_refused(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "ckpt", 9)
    result = check(tmp_path, {"save": str(tmp_path / "ckpt")}, num_rollout=10, argv=SAVE_FLAGS)
    assert result.status == "failed"
    assert "already finished rollout 9 of [experiment] num_rollout 10" in result.detail
    assert "raise [experiment] num_rollout above 10" in result.hint
    # ckpt_step: an earlier iteration, so rollouts are left
    save_checkpoint(tmp_path / "ckpt", 4)
    result = check(tmp_path, {"save": str(tmp_path / "ckpt"), "ckpt_step": 4}, num_rollout=10)
    assert result.status == "passed" and "at rollout 5 (iteration 4, torch_dist)" in result.detail


def test_resume_and_continuation_say_where_and_the_data_position(tmp_path: Path) -> None:
    save_checkpoint(tmp_path / "ckpt", 4)
    result = check(tmp_path, {"save": str(tmp_path / "ckpt")})
    assert result.status == "passed", result
    assert result.detail.startswith(f"resumes from {tmp_path}/ckpt at rollout 5 (iteration 4, torch_dist)")
    assert "data position: global_dataset_state_dict_4.pt" in result.detail
    assert "layout it was saved with: unknown (no run record under" in result.detail
    save_checkpoint(tmp_path / "other", 2, data_state=False)
    result = check(tmp_path, {"save": str(tmp_path / "empty"), "load": str(tmp_path / "other"),
                              "start_rollout_id": 6})
    assert result.detail.startswith(f"continues from {tmp_path}/other at rollout 6 (iteration 2, torch_dist)")
    assert "no global_dataset_state_dict_5.pt: slime starts from the first prompt" in result.detail
    result = check(tmp_path, {"save": str(tmp_path / "ckpt")}, address="http://admin:pw@10.0.0.1:8265")
    assert result.detail.endswith("; read on this machine, where train.sh reads it") and "pw" not in result.detail


def test_a_layout_change_is_checked_against_the_saving_runs_record(tmp_path: Path) -> None:
    save = save_checkpoint(tmp_path / "ckpt", 4)
    record_saver(tmp_path / "runs", "older", save, ["--tensor-model-parallel-size", "4"], "2025-12-01")
    record_saver(tmp_path / "runs", "saver", save, SAVE_FLAGS)
    same = check(tmp_path, {"save": str(save)})
    assert same.status == "passed" and "saved by run exp/saver with the same layout" in same.detail
    tp1 = ["--tensor-model-parallel-size", "1", *SAVE_FLAGS[2:]]
    result = check(tmp_path, {"save": str(save)}, argv=tp1)
    assert result.status == "failed", result
    assert "saved by run exp/saver with --tensor-model-parallel-size 2 -> 1" in result.detail
    assert "load_optimizer = false" in result.hint and "[parallel.tensor] = 2" in result.hint
    result = check(tmp_path, {"save": str(save), "load_optimizer": False}, argv=[*tp1, "--no-load-optim"])
    assert result.status == "passed" and "the weights reshard (torch_dist)" in result.detail
    ep = [*SAVE_FLAGS, "--expert-model-parallel-size", "2"]
    result = check(tmp_path, {"save": str(save)}, argv=ep)
    assert result.status == "warning" and "not verified" in result.detail


def test_a_fully_reshardable_optimizer_or_the_legacy_format(tmp_path: Path) -> None:
    save = save_checkpoint(tmp_path / "ckpt", 4)
    record_saver(tmp_path / "runs", "saver", save, [*SAVE_FLAGS, "--dist-ckpt-optim-fully-reshardable"])
    tp1 = ["--tensor-model-parallel-size", "1", *SAVE_FLAGS[2:]]
    assert check(tmp_path, {"save": str(save)}, argv=tp1).status == "passed"
    legacy = save_checkpoint(tmp_path / "legacy", 4, legacy=True)
    record_saver(tmp_path / "runs", "legacy-saver", legacy, [*SAVE_FLAGS, "--ckpt-format", "torch"])
    result = check(tmp_path, {"save": str(legacy), "load_optimizer": False}, argv=[*tp1, "--no-load-optim"])
    assert result.status == "failed" and "legacy torch format" in result.detail
    assert "[parallel.tensor] = 2" in result.hint


def test_a_continuation_that_changes_the_schedule_needs_the_scheduler_key(tmp_path: Path) -> None:
    save = save_checkpoint(tmp_path / "ckpt", 9)
    record_saver(tmp_path / "runs", "saver", save, SAVE_FLAGS)
    longer = [*SAVE_FLAGS[:2], "--num-rollout", "20", "--lr", "1e-6"]
    result = check(tmp_path, {"save": str(save)}, argv=longer)
    assert result.status == "failed", result
    assert "changes --num-rollout 10 -> 20 while loading the optimizer" in result.detail
    assert result.hint.startswith('set [checkpoint] scheduler = "override"')
    result = check(tmp_path, {"save": str(save), "scheduler": "override"},
                   argv=[*longer, "--override-opt-param-scheduler"])
    assert result.status == "passed" and "schedule changed (--num-rollout): --override-opt-param-scheduler" \
        in result.detail
    result = check(tmp_path, {"save": str(save), "load_optimizer": False}, argv=[*longer, "--no-load-optim"])
    assert result.status == "passed" and "the optimizer is not loaded" in result.detail
    # the saving run without --no-save-optim's optimizer state: nothing to assert against
    record_saver(tmp_path / "runs", "no-optim", save, [*SAVE_FLAGS, "--no-save-optim"], "2026-02-01")
    assert check(tmp_path, {"save": str(save)}, argv=longer).status == "passed"


def test_a_directory_this_user_cannot_read_is_refused_as_train_sh_refuses_it(tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """train.sh refuses a save or load directory it cannot list (`-r` and `-x`) rather than take it for an empty
    one; so does the check (os.access: root reads everything, so the permission is what os.access says)."""
    import os

    from acrl.runtime._preflight import checkpoint

    blind = str(tmp_path / "ckpt")
    os.mkdir(blind)
    real = os.access
    monkeypatch.setattr(checkpoint.os, "access", lambda path, mode: path != blind and real(path, mode))
    result = check(tmp_path, {"save": blind})
    assert result.status == "failed" and result.detail.startswith(f"[checkpoint] save {blind}: cannot be read here")
    assert "readable to this user" in result.hint
