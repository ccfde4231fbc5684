"""The ``checkpoint`` preflight check: the checkpoint train.sh will load, read before the launch.

train.sh decides ``--load`` itself when it runs ([checkpoint] resume; ACRL_RESUME=required with `acrl run
--resume`), on the machine it runs on, which is this one: its "checkpoint" block reads the directories [checkpoint]
save, then load, for Megatron's tracker. This check reads them the same way first, so that what would stop
train.sh (or Megatron, minutes later, on the cluster) stops the run here, in a table row that names the directory,
the spec key and the fix; it fails only where the launch would:

- the tracker (``latest_checkpointed_iteration.txt``): an iteration number; "release" or anything else is refused
  (Megatron stops on garbage: megatron/training/checkpointing.py:302-306 at 1dcf0daf); the iteration directory
  ``iter_%07d`` must exist (checkpointing.py:1142) and be complete (torch_dist's metadata.json, written last, or the
  legacy format's mp_rank_* folders);
- nothing to resume with resume "required"; a checkpoint in save with resume "never" (slime would write over it);
- the loaded iteration + 1 reaching [experiment] num_rollout: slime's loop ``range(start_rollout_id, num_rollout)``
  (train.py:63 at fa3c990, 49 at 624b824) would train nothing and exit 0;
- the layout and the schedule it was saved with against this bundle's, from the run record of the run that saved
  there (checkpoint_layout.py): never from the checkpoint files, which only torch can read (pickles).

The data position (slime's rollout/global_dataset_state_dict_N.pt) is a note: slime starts from the first prompt
without it, and says so only in its own log (slime/rollout/data_source.py:146-148, the same at all four commits).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from .checkpoint_layout import compare_with_saver
from .outcome import CheckFailed, CheckSkipped, CheckWarning
from .python import train_sh_env

if TYPE_CHECKING:
    from .bundle_info import BundleInfo

TRACKER = "latest_checkpointed_iteration.txt"  # Megatron's tracker (checkpointing.py:277-281 at 1dcf0daf)
MODES = ("auto", "required", "never")


@attrs.frozen
class Found:
    """A checkpoint train.sh would load: its directory (as the spec writes it), the key that names it, the
    tracker's text, the iteration loaded and the format its iteration directory is in."""

    directory: str
    key: str
    tracker: str
    iteration: int
    format: str  # "torch_dist" (metadata.json) or "torch" (mp_rank_* folders)


def read_checkpoint(directory: str, key: str, step: int | None) -> Found | None:
    """The checkpoint in ``directory`` as train.sh reads it: None without a tracker (train.sh then looks at the next
    directory, or starts from the model); CheckFailed where train.sh, or Megatron, would stop."""
    if os.path.isdir(directory) and not os.access(directory, os.R_OK | os.X_OK):
        raise CheckFailed(f"{_shown(key)} {directory}: cannot be read here (its permissions): train.sh refuses to "
                          "start rather than take it for an empty directory",
                          f"make {directory} readable to this user (train.sh reads it here before the launch)")
    tracker_path = Path(directory) / TRACKER
    if not tracker_path.is_file():
        return None
    try:
        with open(tracker_path, "rb") as f:
            tracker = f.read(4096).decode("utf-8", "replace").strip()
    except OSError as exc:
        raise CheckFailed(f"{_shown(key)} {directory}: cannot read {TRACKER}: {exc.strerror or exc}",
                          f"make {tracker_path} readable to this user (train.sh reads it here before the launch)"
                          ) from None
    if tracker == "release":
        raise CheckFailed(f"{_shown(key)} {directory} holds a release checkpoint (a converted model): as --load, slime "
                          "would skip rollout 0 and load no training state",
                          f"name it in [model] ref_load instead, and point {_shown(key)} elsewhere")
    if not re.fullmatch(r"[0-9]{1,9}", tracker):
        raise CheckFailed(f"{_shown(key)} {directory}: {TRACKER} holds {tracker[:40]!r}, not an iteration number: "
                          "Megatron would stop on it (checkpointing.py:302-306, perhaps with exit status 0)",
                          f"fix or remove {tracker_path}")
    iteration = step if step is not None else int(tracker)
    iter_dir = Path(directory) / f"iter_{iteration:07d}"
    at = f"the tracker says {tracker}" + (f", [checkpoint] ckpt_step {step}" if step is not None else "")
    if not iter_dir.is_dir():
        raise CheckFailed(f"{_shown(key)} {directory}: {iter_dir.name} does not exist ({at}): Megatron would stop "
                          "on it",
                          "restore that iteration, or load an earlier one with [checkpoint] ckpt_step")
    if (iter_dir / "metadata.json").is_file():
        fmt = "torch_dist"
    elif any(iter_dir.glob("mp_rank_*")):
        fmt = "torch"
    else:
        raise CheckFailed(f"{_shown(key)} {directory}: {iter_dir.name} is incomplete (no metadata.json, which Megatron "
                          "writes last, nor mp_rank_* folders): the save was interrupted",
                          f"resume from an earlier iteration with [checkpoint] ckpt_step, or remove {iter_dir}")
    return Found(directory, key, tracker, iteration, fmt)


def _shown(key: str) -> str:
    """A spec key as messages write it: checkpoint.save -> [checkpoint] save."""
    table, _, name = key.partition(".")
    return f"[{table}] {name}"


def _decides_load(info: BundleInfo) -> bool:
    """Whether the bundle has the checkpoint block (it says its decision on an ``acrl-resume:`` line): checkpoint.sh,
    which train.sh sources, or, compiled before issue 18, train.sh itself; one compiled before issue 16 passes no
    --load."""
    for name in ("checkpoint.sh", "train.sh"):
        try:
            if "acrl-resume: " in (info.path / name).read_text(encoding="utf-8", errors="replace"):
                return True
        except OSError:
            continue
    return False


def resume_mode(info: BundleInfo) -> str:
    """How train.sh decides: ACRL_RESUME as it gets it (--resume: required), else [checkpoint] resume."""
    mode = train_sh_env(info).get("ACRL_RESUME") or info.get("checkpoint.resume") or "auto"
    if mode not in MODES:
        raise CheckFailed(f"ACRL_RESUME={mode[:40]!r}: train.sh takes auto, required or never",
                          "unset ACRL_RESUME (the spec's [checkpoint] resume applies), or use acrl run --resume")
    return str(mode)


def check_checkpoint(info: BundleInfo) -> str:
    save, load = info.get("checkpoint.save"), info.get("checkpoint.load")
    why = "the bundle names no checkpoint directory ([checkpoint] save, load)" if not save and not load else \
        "the bundle was compiled before [checkpoint] resume: its train.sh loads no checkpoint" \
        if not _decides_load(info) else None
    if why and info.resume:  # --resume asks never to start from the model: it would, silently
        raise CheckFailed(f"--resume: {why}", "set [checkpoint] save (and save_interval) and compile again, or run "
                          "without --resume")
    if why:
        raise CheckSkipped(why)
    mode = resume_mode(info)
    step, start_id = info.get("checkpoint.ckpt_step"), info.get("checkpoint.start_rollout_id")
    here = " (read on this machine, where train.sh reads it)" if info.cluster_address else ""
    if mode == "never":
        if save and (Path(save) / TRACKER).is_file():
            raise CheckFailed(f"[checkpoint] save {save} already holds a checkpoint and [checkpoint] resume is "
                              "\"never\": slime would write over its iterations",
                              "point [checkpoint] save at a new directory, or resume from it (resume = \"auto\", or "
                              "acrl run --resume)")
        return f"resume = never: starts from the model{here}"
    found = None
    if save:
        found = read_checkpoint(save, "checkpoint.save", None if load else step)
    if found is None and load:
        found = read_checkpoint(load, "checkpoint.load", step)
    checked = " and ".join(str(d) for d in (save, load) if d)
    if found is None:
        if mode == "required":
            key = "checkpoint.save" if save else "checkpoint.load"
            raise CheckFailed(f"nothing to resume: no checkpoint ({TRACKER}) in {checked}{here}",
                              f"run without --resume to start from the model, or point {_shown(key)} at the checkpoint "
                              "directory (the one holding the tracker, not an iter_* folder)")
        return f"starts from the model: no checkpoint in {checked} yet{here}"
    start = found.iteration + 1
    if found.directory == (load or save) and start_id is not None:
        start = start_id
    num_rollout = info.get("experiment.num_rollout")
    if isinstance(num_rollout, int) and start >= num_rollout:
        raise CheckFailed(f"the checkpoint at {found.directory} ({_shown(found.key)}) already finished rollout "
                          f"{start - 1} of [experiment] num_rollout {num_rollout}: slime would train nothing and "
                          "exit 0",
                          f"raise [experiment] num_rollout above {start} to continue training")
    how = "resumes" if found.key == "checkpoint.save" else "continues"
    notes = [f"{how} from {found.directory} at rollout {start} (iteration {found.iteration}, {found.format})"]
    warnings: list[str] = []
    hints: list[str] = []
    data = Path(found.directory) / "rollout" / f"global_dataset_state_dict_{start - 1}.pt"
    if start > 0:
        notes.append("data position: " + (data.name if data.is_file() else
                                          f"no {data.name}: slime starts from the first prompt"))
    compare_with_saver(info, found.directory, notes, warnings, hints)
    if here:
        notes.append(here.strip(" ()"))
    if warnings:
        raise CheckWarning("; ".join(notes + warnings), "; ".join(hints))
    return "; ".join(notes)
