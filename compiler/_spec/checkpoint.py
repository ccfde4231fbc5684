"""The spec's [checkpoint] table: saving, and how a launch resumes or continues from a saved checkpoint. Same
conventions as :mod:`.tables`, which re-exports it. The rules slime and Megatron-LM apply to these flags are
compiler/_pipeline/validate/checkpoint.py (ACRL-H*); what train.sh does with them at launch is its "checkpoint"
block (templates/train.sh.jinja), described in docs/spec.md ("Resuming and continuing").

Why ``resume`` is decided at launch, not at compile time: the checkpoint lives on the cluster, and slime treats a
``--load`` without ``latest_checkpointed_iteration.txt`` differently per commit. At v0.3.0 and fa3c990 in raw mode,
and at v0.3.1 and 624b824, it silently loads ``--ref-load`` instead (slime/utils/arguments.py 1726-1738 at v0.3.0,
1806-1818 at fa3c990, 1761-1779 at v0.3.1, 1817-1838 at 624b824); in bridge mode at v0.3.0 and fa3c990 it keeps the
``--load`` (1713-1725, 1793-1805) and stops in its loader when the directory is missing or empty ("does not exist or
is an empty directory", slime/backends/megatron_utils/checkpoint.py:101-103 at fa3c990). So train.sh passes
``--load`` only when the directory holds the tracker.

Flags (every commit acrl has facts for has them): --load, --save, --save-interval, --save-hf and --start-rollout-id
are slime's (slime/utils/arguments.py 782-797 / 627 at v0.3.0, 819-834 / 646 at fa3c990, 842-857 / 669 at v0.3.1,
853-868 / 680 at 624b824); --no-load-optim and --no-load-rng (megatron/training/arguments.py:2192-2195), --ckpt-step,
--ckpt-format, --override-opt-param-scheduler and --use-checkpoint-opt-param-scheduler
(megatron/training/training_config.py:396, 411, 164, 169) are Megatron-LM's, at 1dcf0dafa, the commit all four run.
"""

import posixpath
from typing import Literal

import attrs

from .setting import setting

Resume = Literal["auto", "required", "never"]
Scheduler = Literal["override", "checkpoint"]
# Megatron's --ckpt-format choices (training_config.py:411); torch_dcp and fsdp_dtensor are refused by ACRL-H009.
CkptFormat = Literal["torch_dist", "torch", "torch_dcp", "fsdp_dtensor"]
TRACKER = "latest_checkpointed_iteration.txt"  # Megatron's tracker file (checkpointing.py:277-281)
SCHEDULER_FLAGS = {"override": "--override-opt-param-scheduler", "checkpoint": "--use-checkpoint-opt-param-scheduler"}
# The flags train.sh adds at launch, as its checkpoint block decides (the keys' at_launch metadata): never in the
# argv written at compile time (nor in the escape hatch: ACRL-F002 refuses any flag a key owns).
LAUNCH_FLAGS = ("--load", "--ckpt-step", "--start-rollout-id")


def same_directory(a: str, b: str) -> bool:
    """Whether two cluster paths name one directory as written ("/ckpt/run/" and "/ckpt/run"), links not followed."""
    return posixpath.normpath(a) == posixpath.normpath(b)


@attrs.frozen(kw_only=True)
class Checkpoint:
    """[checkpoint]: saving, resuming and continuing. acrl never deletes or moves existing checkpoints."""

    save: str | None = setting(None, doc="Megatron checkpoint directory slime saves to (on the cluster); also where "
                                         "a relaunch resumes from (resume).", flag="--save", kind="path")
    save_interval: int | None = setting(None, doc=(
        "Save every N rollouts, and always at the last one. Unset: slime never saves, not even at the end "
        "(ACRL-H005)."), flag="--save-interval", ge=1)
    save_hf: str | None = setting(None, doc="Hugging Face export path pattern, written at each save (e.g. "
                                            "/ckpt/hf/iter_{rollout_id}).", flag="--save-hf", kind="path")
    resume: Resume = setting("auto", doc=(
        "How train.sh decides --load when it runs: 'auto' loads the newest checkpoint of save, else of load, and "
        "starts from the model when neither holds one; 'required' refuses to start when neither holds one (`acrl "
        "run --resume` asks for it for one launch: ACRL_RESUME=required); 'never' never loads, and refuses to start "
        "when save already holds a checkpoint (slime would write over its iterations)."))
    load: str | None = setting(None, doc=(
        "Another run's checkpoint directory to start from when save holds none yet: a continuation. Not an "
        "iter_NNNNNNN folder (use ckpt_step) and not the reference model ([model] ref_load)."),
        flag="--load", at_launch=True, kind="path")
    load_optimizer: bool = setting(True, doc="Load the optimizer state (and the LR scheduler's) with the weights; "
                                             "false passes --no-load-optim.", switches={False: "--no-load-optim"})
    load_rng: bool = setting(True, doc="Load the RNG state; false passes --no-load-rng.",
                             switches={False: "--no-load-rng"})
    ckpt_step: int | None = setting(None, doc=(
        "Load this iteration (a rollout id) instead of the tracker's newest; passed with --load only."),
        flag="--ckpt-step", ge=1, at_launch=True)
    start_rollout_id: int | None = setting(None, doc=(
        "The first rollout id, instead of the loaded iteration + 1 (0 when nothing is loaded). Before slime "
        "624b824, slime resets it to 0 whenever nothing is loaded (ACRL-H004)."),
        flag="--start-rollout-id", ge=0, at_launch=True)
    scheduler: Scheduler | None = setting(None, doc=(
        "A continuation that changes num_rollout, the learning rate or the batch sizes while loading the optimizer "
        "needs one (Megatron's scheduler otherwise asserts its saved values): 'override' takes this spec's "
        "schedule (--override-opt-param-scheduler), 'checkpoint' the saved one "
        "(--use-checkpoint-opt-param-scheduler)."), switches=SCHEDULER_FLAGS)
    format: CkptFormat | None = setting(None, doc=(
        "Format slime saves in (Megatron detects it when loading): 'torch_dist' (Megatron's default, reshards "
        "across parallel layouts) or 'torch' (the legacy per-rank files: the layout must not change); 'torch_dcp' "
        "and 'fsdp_dtensor' need Megatron's FSDP, which slime does not train with (ACRL-H009)."),
        flag="--ckpt-format", omit_if="torch_dist")
