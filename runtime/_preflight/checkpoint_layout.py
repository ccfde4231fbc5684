"""The checkpoint check's comparison of a checkpoint with this bundle: the parallel layout and the training schedule
it was saved with, read from the argv in the run record of the run that saved there (found by its --save), against
this bundle's argv (train.sh's, as preflight reads it). Never from the checkpoint's own files: the layout is only in
common.pt's args, a torch pickle (megatron/training/checkpointing.py), which acrl does not unpickle.

Megatron-LM at 1dcf0daf (the commit slime v0.3.0 through 624b824 run), megatron/training/checkpointing.py (MC):

- torch_dist (the default format) reshards the model weights across TP/PP/EP/DP. Its distributed optimizer state
  is saved ``dp_reshardable`` unless --dist-ckpt-optim-fully-reshardable (MC:421-426): loading it with the optimizer
  after a TP or PP change raises "(TP, PP) mismatch after resume" (MC:1581-1589). An EP or CP change is not caught
  there: not verified either way, so a warning.
- the legacy torch format (per-rank mp_rank_* files): TP and PP must be equal (``_compare``, MC:138-140).
- a continuation that changes the schedule while loading the optimizer: slime recomputes train_iters from
  num_rollout, the rollout batch and the global batch (slime/backends/megatron_utils/model.py:203-207 at 624b824,
  204-208 at fa3c990), and Megatron's OptimizerParamScheduler asserts every saved value (max and min lr, warmup and
  decay steps, decay style, weight-decay steps) unless --override-opt-param-scheduler or
  --use-checkpoint-opt-param-scheduler (megatron/core/optimizer_param_scheduler.py:288-309, 311-375). The scheduler is
  loaded only with the optimizer (MC:1579-1580: not with --no-load-optim, --finetune, or a save without it).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._records import list_records
from .outcome import CheckFailed, CheckSkipped
from .python import entrypoint_argv

if TYPE_CHECKING:
    from .bundle_info import BundleInfo

# flag -> (spec key, Megatron's default)
LAYOUT = {"--tensor-model-parallel-size": ("parallel.tensor", "1"),
          "--pipeline-model-parallel-size": ("parallel.pipeline", "1"),
          "--expert-model-parallel-size": ("parallel.expert", "1"),
          "--context-parallel-size": ("parallel.context", "1")}
# What the optimizer scheduler's saved values come from (absent: the default, the same on both sides)
SCHEDULE = ("--num-rollout", "--num-epoch", "--rollout-batch-size", "--n-samples-per-prompt", "--global-batch-size",
            "--num-steps-per-rollout", "--lr", "--min-lr", "--lr-warmup-iters", "--lr-warmup-fraction",
            "--lr-warmup-init", "--lr-decay-iters", "--lr-decay-style", "--lr-wsd-decay-iters", "--weight-decay",
            "--start-weight-decay", "--end-weight-decay", "--weight-decay-incr-style")
SCHEDULER_FLAGS = ("--override-opt-param-scheduler", "--use-checkpoint-opt-param-scheduler")


def flag_values(argv: Sequence[str]) -> dict[str, list[str]]:
    """The flags of an argv and their values (``--a 1 --b --c=x``: {--a: [1], --b: [], --c: [x]}); a flag given
    twice keeps its last values, as slime's argparse does. A negative number is a value."""
    flags: dict[str, list[str]] = {}
    current: list[str] | None = None
    for token in argv:
        if token.startswith("--") and len(token) > 2 and not token[2:3].isdigit():
            name, eq, value = token.partition("=")
            current = flags[name] = [value] if eq else []
        elif current is not None:
            current.append(token)
    return flags


def same_dir(a: str, b: str) -> bool:
    """Whether two checkpoint directories as written are the same one (normalised; symbolic links resolved where
    they exist here)."""
    return os.path.realpath(os.path.expanduser(a)) == os.path.realpath(os.path.expanduser(b))


def find_saver(runs_dir: str | os.PathLike[str] | None, checkpoint_dir: str,
               exclude: tuple[str, str] | None = None) -> dict[str, Any] | None:
    """The record of the run that last saved to ``checkpoint_dir``: the latest under ``runs_dir`` whose argv
    passes --save to it (``exclude``: the (exp_id, run_id) of the run asking). None when no record says so."""
    if runs_dir is None:
        return None
    found = None
    for record in list_records(runs_dir):  # oldest first: the last match is the latest
        if exclude and (record.get("exp_id"), record.get("run_id")) == exclude:
            continue
        argv = record.get("argv")
        if not isinstance(argv, list) or not all(isinstance(t, str) for t in argv):
            continue
        save = flag_values(argv).get("--save")
        if save and same_dir(save[-1], checkpoint_dir):
            found = record
    return found


def _value(flags: Mapping[str, list[str]], flag: str, default: str | None = None) -> str | None:
    if flag not in flags:
        return default
    return " ".join(flags[flag]) if flags[flag] else "(set)"


def _loads_optimizer(flags: Mapping[str, list[str]], saver: Mapping[str, list[str]]) -> bool:
    """Whether Megatron loads the optimizer (and its scheduler): MC:1579-1580."""
    return "--no-load-optim" not in flags and "--finetune" not in flags and "--no-save-optim" not in saver


def compare_with_saver(info: BundleInfo, directory: str, notes: list[str], warnings: list[str],
                       hints: list[str]) -> None:
    """Compare the checkpoint in ``directory`` with this bundle (see the module); CheckFailed where Megatron would
    stop; notes and warnings appended."""
    saver = find_saver(info.runs_dir, directory)
    argv = saver.get("argv") if saver else None
    if not saver or not isinstance(argv, list) or not all(isinstance(t, str) for t in argv):
        where = f"under {info.runs_dir}" if info.runs_dir is not None else "(no runs directory)"
        why = "no run record " + where + " saved there" if not saver else \
            f"the record of {saver.get('run_id')} has no argv (written before acrl kept it)"
        notes.append(f"layout it was saved with: unknown ({why})")
        return
    try:
        flags = flag_values(entrypoint_argv(info))
    except (CheckFailed, CheckSkipped) as exc:
        notes.append(f"layout not compared: this bundle's argv cannot be read ({exc})")
        return
    saved = flag_values(argv)
    run = f"{saver.get('exp_id')}/{saver.get('run_id')}"
    fmt = "torch" if _value(saved, "--ckpt-format") == "torch" else "torch_dist"
    changed = {flag: (_value(saved, flag, default), _value(flags, flag, default))
               for flag, (_, default) in LAYOUT.items() if _value(saved, flag, default) != _value(flags, flag, default)}
    shown = ", ".join(f"{flag} {was} -> {now}" for flag, (was, now) in changed.items())
    tp_pp = [f for f in changed if f in ("--tensor-model-parallel-size", "--pipeline-model-parallel-size")]
    optimizer = _loads_optimizer(flags, saved)
    keep = ", ".join(f"[{LAYOUT[f][0]}] = {changed[f][0]}" for f in changed)
    if tp_pp and fmt == "torch":
        raise CheckFailed(f"{directory} was saved by run {run} in the legacy torch format, one file per rank: {shown}; "
                          "Megatron asserts the tensor and pipeline sizes are equal "
                          "(megatron/training/checkpointing.py:138-140)",
                          f"keep {keep} for this checkpoint")
    if tp_pp and optimizer and "--dist-ckpt-optim-fully-reshardable" not in saved:
        raise CheckFailed(f"{directory} was saved by run {run} with {shown}: torch_dist reshards the weights, but the "
                          "distributed optimizer's state was saved dp_reshardable and Megatron refuses a (TP, PP) "
                          "change when loading it (megatron/training/checkpointing.py:1581-1589)",
                          f"set [checkpoint] load_optimizer = false (loads the weights, starts the Adam state anew), "
                          f"or keep {keep}")
    if changed and optimizer and fmt == "torch_dist" and "--dist-ckpt-optim-fully-reshardable" not in saved \
            and not tp_pp:
        warnings.append(f"saved by run {run} with {shown}: loading the optimizer across an expert or context "
                        "parallel change is not verified")
        hints.append(f"[checkpoint] load_optimizer = false is safe; or keep {keep}")
    elif changed:
        notes.append(f"saved by run {run} with {shown}: the weights reshard ({fmt})")
    else:
        notes.append(f"saved by run {run} with the same layout")
    schedule = [(flag, _value(saved, flag), _value(flags, flag)) for flag in SCHEDULE
                if _value(saved, flag) != _value(flags, flag)]
    if schedule and optimizer and not any(f in flags for f in SCHEDULER_FLAGS):
        shown = ", ".join(f"{flag} {was or '(unset)'} -> {now or '(unset)'}" for flag, was, now in schedule)
        raise CheckFailed(f"a continuation of {directory} (saved by run {run}) that changes {shown} while loading the "
                          "optimizer: Megatron's OptimizerParamScheduler asserts the values it saved "
                          "(megatron/core/optimizer_param_scheduler.py:288-309), slime recomputing train_iters from "
                          "them (slime/backends/megatron_utils/model.py:203-207 at 624b824)",
                          "set [checkpoint] scheduler = \"override\" (this spec's schedule, the steps taken kept) or "
                          "\"checkpoint\" (the saved one), or [checkpoint] load_optimizer = false")
    if schedule:
        notes.append(f"schedule changed ({', '.join(f for f, _, _ in schedule)}): "
                     + ("the optimizer is not loaded" if not optimizer else
                        f"{next(f for f in SCHEDULER_FLAGS if f in flags)}"))


