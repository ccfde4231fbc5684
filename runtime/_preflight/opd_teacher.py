"""The ``opd-teacher`` preflight check: the Megatron teacher of on-policy distillation (``--opd-type megatron``,
``[opd] teacher_load``) is a checkpoint Megatron will load, on this machine (the head), before any cluster starts.

slime loads the teacher into the actor's own model and backs it up to host memory (slime/backends/megatron_utils/
actor.py:136-137 and 659-690 at 624b824), through Megatron's load_checkpoint. slime's parser only requires that the
directory exists (FileNotFoundError, slime/utils/arguments.py:1796-1799 at 624b824), which the slime-parser check
already reports; a directory without latest_checkpointed_iteration.txt it only logs (1800-1804). Megatron then loads
nothing (without --opd-teacher-ckpt-step): "could not find the metadata file ... will not load any checkpoints"
returns no state (megatron/training/checkpointing.py:1180-1221 at 1dcf0daf, the Megatron-LM slime 624b824 runs; with
--exit-on-missing-checkpoint it exits instead, 1215-1219), and
load_checkpoint returns with the model as it was (1717-1720): the actor's weights, loaded just before. The teacher is
then a copy of the student and the distillation pulls the policy toward itself, without an error. This check says so
before the run, and that the iteration the tracker (or ``--opd-teacher-ckpt-step``) names has its folder
(iter_0000100 / release: checkpointing.py:162-171, read_metadata 291-306). Whether the checkpoint has the actor's
architecture is only known when Megatron loads it (a strict load into the actor's model).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acrl.compiler import read_input

from .engines import flag_values, remote_cluster
from .outcome import CheckFailed, CheckSkipped
from .python import entrypoint_argv

if TYPE_CHECKING:
    from .bundle_info import BundleInfo

TEACHER_FLAG = "--opd-teacher-load"
STEP_FLAG = "--opd-teacher-ckpt-step"
TRACKER = "latest_checkpointed_iteration.txt"  # Megatron's get_checkpoint_tracker_filename (checkpointing.py:277-281)
KEY = "[opd] teacher_load"
_CHECKPOINT = ("point [opd] teacher_load at the teacher's Megatron checkpoint on this machine: the folder that holds "
               f"{TRACKER} and its iter_* folders (convert a Hugging Face teacher with slime's "
               "tools/convert_hf_to_torch_dist.py)")


def check_opd_teacher(info: BundleInfo) -> str:
    try:
        script = (info.path / "train.sh").read_bytes()
    except OSError as exc:
        raise CheckFailed(f"cannot read train.sh: {exc.strerror or exc}", "compile the bundle again") from None
    if TEACHER_FLAG.encode() not in script:
        raise CheckSkipped("the bundle loads no Megatron teacher ([opd] teacher_load)")
    flags = entrypoint_argv(info)[2:]
    load = flag_values(flags, TEACHER_FLAG)
    opd_type = flag_values(flags, "--opd-type")
    # the actor loads a teacher only with both (slime/ray/placement_group.py:179 at 624b824)
    if not load or "--use-opd" not in flags or not opd_type or opd_type[0] != "megatron":
        raise CheckSkipped("slime loads the teacher only with --use-opd and --opd-type megatron")
    remote = remote_cluster(info)
    if remote:
        raise CheckSkipped(f"the job runs on the cluster at {remote}: the teacher is read there, not here")
    teacher = info.path / load[0]  # a relative path: the job's working directory, the bundle
    if not teacher.is_dir():
        what = "not a directory" if teacher.exists() else "no such directory"
        raise CheckFailed(f"{KEY} {load[0]}: {what} (slime's parser stops with FileNotFoundError)", _CHECKPOINT)
    step_values = flag_values(flags, STEP_FLAG)
    step = int(step_values[0]) if step_values and step_values[0].isdigit() else 0
    if step:  # Megatron's `if getattr(args, "ckpt_step", None)`: step 0 reads the tracker (checkpointing.py:1188)
        folder = teacher / f"iter_{step:07d}"
        if not folder.is_dir():
            raise CheckFailed(f"[opd] teacher_ckpt_step {step}: {teacher} has no {folder.name} (Megatron's load of "
                              "the teacher fails once the actors start)",
                              "give a step the checkpoint has (one of its iter_* folders), or unset [opd] "
                              "teacher_ckpt_step to load the one its tracker names")
        return f"{folder} ([opd] teacher_ckpt_step {step})"
    tracker = teacher / TRACKER
    if not tracker.exists():
        raise CheckFailed(f"{KEY} {load[0]}: no {TRACKER}, so Megatron loads nothing into the teacher and it stays "
                          "a copy of the actor: the distillation would pull the policy toward itself, without an error "
                          "(slime only logs it)", _CHECKPOINT + ", or set [opd] teacher_ckpt_step")
    try:
        text = read_input(tracker, limit=4096).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8"
        raise CheckFailed(f"{tracker}: cannot be read: {why}", _CHECKPOINT) from None
    if text != "release" and not text.isdigit():
        raise CheckFailed(f"{tracker} holds {text[:40]!r}, not an iteration nor 'release' (Megatron exits: "
                          "checkpointing.py:298-306)", _CHECKPOINT)
    folder = teacher / ("release" if text == "release" else f"iter_{int(text):07d}")
    if not folder.is_dir():
        raise CheckFailed(f"{tracker} names {text}, but {teacher} has no {folder.name} (Megatron's load of the "
                          "teacher fails once the actors start)", _CHECKPOINT)
    return f"{folder} ({TRACKER}: {text})"

