"""What train.sh's checkpoint block needs to decide ``--load`` at launch ([checkpoint] resume, load, ckpt_step,
start_rollout_id; templates/train.sh.jinja): the directories, the start settings and num_rollout, as data. The
decision itself is made in bash on the cluster, where the checkpoint is (docs/spec.md, "Resuming and continuing").

Which directory train.sh loads (modes "auto" and "required"): ``save`` when it holds a checkpoint (the run's own
progress: a relaunch after a crash resumes it), else ``load`` when set and holding one (a continuation of another
run), else none (auto: from the model; required: refused). ``ckpt_step`` and ``start_rollout_id`` describe the first
launch, so they apply to the directory the run starts from (``load`` when set, else ``save``) and to a start from
the model (start_rollout_id only), not to a resume of the run's own saves after a continuation began.
"""

from __future__ import annotations

import attrs

from .._spec.checkpoint import same_directory
from .._spec.tables import Spec
from .placement_spec import extra_flags


@attrs.frozen
class ResumeBlock:
    """The template's ``resume``: None-valued settings are unset."""

    mode: str  # [checkpoint] resume; ACRL_RESUME overrides it for one launch
    save: str  # "" when unset
    load: str  # "" when unset or the same directory as save (then save is the one directory)
    ckpt_step: int | None
    start_rollout_id: int | None
    num_rollout: int | None  # None with num_epoch: slime computes it from the dataset, train.sh cannot check it
    data_state: bool  # slime saves its data position with each checkpoint (off: --disable-rollout-global-dataset)


def resume_block(spec: Spec) -> ResumeBlock | None:
    """The checkpoint block's data, or None when the spec names no checkpoint directory (then train.sh has no such
    block, and slime never loads one: its argv has no --load)."""
    c = spec.checkpoint
    if c.save is None and c.load is None:
        return None
    load = "" if c.load is None or (c.save is not None and same_directory(c.load, c.save)) else c.load
    return ResumeBlock(mode=c.resume, save=c.save or "", load=load, ckpt_step=c.ckpt_step,
                       start_rollout_id=c.start_rollout_id, num_rollout=spec.experiment.num_rollout,
                       data_state="--disable-rollout-global-dataset" not in extra_flags(spec))
