"""The ``opd-teacher`` preflight check: the teacher of Megatron on-policy distillation (``--opd-type megatron``,
``[opd] teacher_load``) is one slime can load into the actor, read on this machine (the head) before any cluster
starts.

slime loads the teacher into the actor's own model, then backs it up to host memory (slime/backends/megatron_utils/
actor.py:136-137 and 659-690 at 624b824), with its own load_checkpoint (slime/backends/megatron_utils/checkpoint.py:
95-124 at 624b824; 97-125 at fa3c990 and v0.3.0, 95-123 at v0.3.1):

- the path must be a non-empty directory (an assertion, once the actors start);
- with latest_checkpointed_iteration.txt in it, or a name like iter_0000100, it is a Megatron checkpoint, loaded by
  Megatron's load_checkpoint: the iteration the tracker names, or ``--opd-teacher-ckpt-step`` when not 0
  (megatron/training/checkpointing.py:1180-1221 at 1dcf0daf, the Megatron-LM slime runs; folders iter_0000100 /
  release, 162-171; the tracker holds a number or 'release', else Megatron exits, 291-306). An iter_* folder given
  itself has no tracker inside: Megatron then loads nothing ("will not load any checkpoints", 1210-1221) and returns
  with the model as it was (1717-1720), the actor's weights: the teacher is a copy of the student and the
  distillation pulls the policy toward itself, without an error;
- anything else is loaded as a Hugging Face checkpoint (its config.json's model type; at fa3c990 and v0.3.0 only with
  --megatron-to-hf-mode bridge, an assertion at checkpoint.py:130), into the actor's model: the student's
  architecture, which this check compares with the bundle's MODEL_ARGS as the model check does.

slime's parser itself only requires that the path exists (FileNotFoundError, slime/utils/arguments.py:1796-1799 at
624b824), which the slime-parser check reports, and logs a missing latest_checkpointed_iteration.txt (1800-1804).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from acrl.compiler import compare_model_args, derive_model_args, read_input

from .engines import flag_values, remote_cluster
from .outcome import CheckFailed, CheckSkipped
from .python import entrypoint_argv

if TYPE_CHECKING:
    from .bundle_info import BundleInfo

TEACHER_FLAG = "--opd-teacher-load"
STEP_FLAG = "--opd-teacher-ckpt-step"
TRACKER = "latest_checkpointed_iteration.txt"  # Megatron's get_checkpoint_tracker_filename (checkpointing.py:277-281)
KEY = "[opd] teacher_load"
_ITERATION = re.compile(r"iter_\d{7}")  # slime's _is_megatron_checkpoint (checkpoint.py:121-124 at 624b824)
# slime commits whose Hugging Face loading is Megatron-Bridge only (checkpoint.py:129-130 at fa3c990 and v0.3.0)
BRIDGE_ONLY = ("fa3c990af6f18efd3fd9922698bf4bf4048d1263", "bf14dc21f9500746447f2572d0692e981c4d2a7e")
_FIX = (f"point {KEY} at the teacher's Megatron checkpoint on this machine (the folder that holds {TRACKER} and its "
        "iter_* folders) or at a Hugging Face checkpoint of the student's architecture")


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
        what = "not a directory" if teacher.exists() else "no such directory (slime's parser stops with " \
            "FileNotFoundError)"
        raise CheckFailed(f"{KEY} {load[0]}: {what}", _FIX)
    if not any(teacher.iterdir()):
        raise CheckFailed(f"{KEY} {load[0]}: an empty directory (slime's load_checkpoint asserts it is not, once the "
                          "actors start)", _FIX)
    values = flag_values(flags, STEP_FLAG)
    step = int(values[0]) if values and values[0].isdigit() else 0
    if (teacher / TRACKER).exists() or _ITERATION.fullmatch(teacher.name):
        return _megatron(teacher, load[0], step)
    return _hugging_face(info, teacher, load[0], flags, step)


def _megatron(teacher: Path, load: str, step: int) -> str:
    """A Megatron checkpoint: the iteration Megatron will load has its folder."""
    tracker = teacher / TRACKER
    if step:  # Megatron's `if getattr(args, "ckpt_step", None)`: a step of 0 reads the tracker (checkpointing.py:1188)
        folder = teacher / f"iter_{step:07d}"
        if not folder.is_dir():
            raise CheckFailed(f"[opd] teacher_ckpt_step {step}: {teacher} has no {folder.name} (Megatron's load of "
                              "the teacher fails once the actors start)",
                              "give a step the checkpoint has (one of its iter_* folders), or unset [opd] "
                              f"teacher_ckpt_step to load the one its {TRACKER} names")
        return f"Megatron checkpoint {folder} ([opd] teacher_ckpt_step {step})"
    if not tracker.exists():  # an iter_* folder given itself
        raise CheckFailed(f"{KEY} {load}: an iteration folder without {TRACKER}: Megatron loads nothing from it and "
                          "the teacher stays a copy of the actor, so the distillation pulls the policy toward itself, "
                          "without an error", f"point {KEY} at {teacher.parent} (the folder holding {TRACKER}), or "
                          f"set [opd] teacher_ckpt_step to {int(teacher.name[5:])} with that parent")
    try:
        text = read_input(tracker, limit=4096).decode("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8"
        raise CheckFailed(f"{tracker}: cannot be read: {why}", _FIX) from None
    if text != "release" and not text.isdigit():
        raise CheckFailed(f"{tracker} holds {text[:40]!r}, not an iteration nor 'release' (Megatron exits: "
                          "checkpointing.py:298-306)", _FIX)
    folder = teacher / ("release" if text == "release" else f"iter_{int(text):07d}")
    if not folder.is_dir():
        raise CheckFailed(f"{tracker} names {text}, but {teacher} has no {folder.name} (Megatron's load of the "
                          "teacher fails once the actors start)", _FIX)
    return f"Megatron checkpoint {folder} ({TRACKER}: {text})"


def _hugging_face(info: BundleInfo, teacher: Path, load: str, flags: list[str], step: int) -> str:
    """A Hugging Face checkpoint: its config.json gives the student's MODEL_ARGS, and this slime can load it."""
    config = teacher / "config.json"
    where = f"{KEY} {load}: neither a Megatron checkpoint (no {TRACKER}) nor a Hugging Face one"
    try:
        data = json.loads(read_input(config).decode("utf-8"))
    except FileNotFoundError:
        raise CheckFailed(f"{where} (no config.json): slime's load of the teacher fails once the actors start",
                          _FIX) from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not JSON"
        raise CheckFailed(f"{config}: cannot be read: {why}", _FIX) from None
    if not isinstance(data, dict):
        raise CheckFailed(f"{config}: not a JSON object", _FIX)
    commit = str(info.get("slime.commit") or "")
    mode = flag_values(flags, "--megatron-to-hf-mode")
    if commit in BRIDGE_ONLY and (not mode or mode[0] != "bridge"):
        raise CheckFailed(f"{KEY} {load}: a Hugging Face checkpoint, which slime {commit[:7]} loads only with "
                          "--megatron-to-hf-mode bridge (an assertion once the actors start)",
                          "[extra.flags] \"--megatron-to-hf-mode\" = \"bridge\", or convert the teacher to a Megatron "
                          "checkpoint (slime's tools/convert_hf_to_torch_dist.py)")
    unused = f"; [opd] teacher_ckpt_step {step} is not used for it" if step else ""
    derived = derive_model_args(data)
    if not derived.args:  # an architecture acrl does not translate: nothing to compare with
        return (f"Hugging Face checkpoint {teacher} (model type {str(data.get('model_type'))[:40]}): its architecture "
                f"is not compared with the student's, acrl does not translate it{unused}")
    errors = [m for m in compare_model_args(info.model_args, "model_args.sh", derived.args, str(config))
              if m.severity == "error"]
    if errors:
        raise CheckFailed(f"{KEY} {load}: the teacher's architecture is not the student's, and slime loads it into "
                          f"the actor's model: {len(errors)} MODEL_ARGS differ from {config}: "
                          + "; ".join(m.problem for m in errors),
                          "OPD with --opd-type megatron needs a teacher of the student's architecture; for another, "
                          "use [opd] type = \"sglang\" (a teacher server)")
    return (f"Hugging Face checkpoint {teacher}: {config.name} matches the {len(info.model_args)} MODEL_ARGS tokens "
            f"(the student's architecture){unused}")
