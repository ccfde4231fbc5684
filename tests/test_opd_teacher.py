"""The opd-teacher preflight check (runtime/_preflight/opd_teacher.py) through the real `acrl run` entry (--dry-run):
the teacher of Megatron OPD ([opd] type = "megatron") is one slime can load into the actor: a Megatron checkpoint
whose iteration has its folder, or a Hugging Face checkpoint of the student's architecture. slime's parser only
requires that the path exists (slime/utils/arguments.py:1796-1804 at 624b824)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import tomli_w
from test_run import HF_QWEN25_3B, Project, acrl, make_project

from acrl.compiler import compile_spec, write
from conftest import merge


def compile_opd(project: Project, more: dict[str, Any] | None = None, **opd: Any) -> None:
    """Compile the project's spec again with Megatron OPD on (``opd``: more [opd] keys; ``more``: other tables)."""
    spec = merge(project.spec, {"opd": {"enabled": True, "type": "megatron", **opd}, **(more or {})})
    (project.root / "spec.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    write(compile_spec(project.root / "spec.toml"), project.bundle, force=True)


def row(project: Project, *extra: str) -> tuple[int, str, str, str]:
    """`acrl run BUNDLE --dry-run`: (exit status, the opd-teacher row's status, its detail, its fix)."""
    proc = acrl("run", str(project.bundle), "--dry-run", "--skip", "gpus", *extra)
    found = re.search(r"^opd-teacher +(\w+) +\d+ms +(.*)\n(?: +fix: (.*))?", proc.stdout, re.M)
    assert found is not None, proc.stdout + proc.stderr
    return proc.returncode, found.group(1), found.group(2), found.group(3) or ""


def test_a_megatron_teacher_is_a_checkpoint_megatron_loads(tmp_path: Path) -> None:
    """slime's load_checkpoint (slime/backends/megatron_utils/checkpoint.py:95-124 at 624b824): a non-empty directory;
    with latest_checkpointed_iteration.txt a Megatron checkpoint, whose named iteration must have its folder."""
    project = make_project(tmp_path)
    assert row(project)[1:3] == ("skipped", "the bundle loads no Megatron teacher ([opd] teacher_load)")
    teacher = tmp_path / "teacher"
    compile_opd(project, teacher_load=str(teacher))
    code, status, detail, fix = row(project)
    assert (code, status) == (1, "failed") and detail.startswith(f"[opd] teacher_load {teacher}: no such directory")
    assert fix.startswith("point [opd] teacher_load at the teacher's Megatron checkpoint")
    teacher.mkdir()
    assert row(project)[2] == f"[opd] teacher_load {teacher}: an empty directory (slime's load_checkpoint asserts it " \
                              "is not, once the actors start)"
    (teacher / "notes.txt").write_text("converted later\n")  # slime would take it for a Hugging Face checkpoint
    assert row(project)[2].startswith(f"[opd] teacher_load {teacher}: neither a Megatron checkpoint (no "
                                      "latest_checkpointed_iteration.txt) nor a Hugging Face one (no config.json)")
    (teacher / "latest_checkpointed_iteration.txt").write_text("100\n")
    code, status, detail, _ = row(project)
    assert (code, status) == (1, "failed") and "names 100, but" in detail and "has no iter_0000100" in detail
    (teacher / "iter_0000100").mkdir()
    assert row(project)[:3] == (0, "passed", f"Megatron checkpoint {teacher / 'iter_0000100'} "
                                             "(latest_checkpointed_iteration.txt: 100)")
    (teacher / "latest_checkpointed_iteration.txt").write_text("latest\n")
    code, status, detail, _ = row(project)
    assert (code, status) == (1, "failed") and "not an iteration nor 'release'" in detail


def test_an_iteration_folder_itself_would_leave_the_actors_weights_as_the_teacher(tmp_path: Path) -> None:
    """slime takes a folder named iter_NNNNNNN for a Megatron checkpoint (checkpoint.py:121-124 at 624b824); Megatron
    finds no tracker in it and loads nothing (checkpointing.py:1210-1221, 1717-1720 at 1dcf0daf)."""
    project = make_project(tmp_path)
    folder = tmp_path / "teacher" / "iter_0000100"
    folder.mkdir(parents=True)
    (folder / "common.pt").write_bytes(b"")
    compile_opd(project, teacher_load=str(folder))
    code, status, detail, fix = row(project)
    assert (code, status) == (1, "failed")
    assert "Megatron loads nothing from it and the teacher stays a copy of the actor" in detail
    assert fix == (f"point [opd] teacher_load at {folder.parent} (the folder holding "
                   "latest_checkpointed_iteration.txt), or set [opd] teacher_ckpt_step to 100 with that parent")


def test_a_hugging_face_teacher_has_the_students_architecture(tmp_path: Path) -> None:
    """Without a tracker slime loads the teacher as a Hugging Face checkpoint into the actor's model (checkpoint.py:
    113-118, 127-142 at 624b824; Megatron-Bridge only at fa3c990 and v0.3.0, checkpoint.py:130)."""
    project = make_project(tmp_path)
    teacher = tmp_path / "teacher"
    teacher.mkdir()
    config = json.loads(HF_QWEN25_3B.read_text())
    (teacher / "config.json").write_text(json.dumps(config))
    compile_opd(project, teacher_load=str(teacher))  # MINIMAL targets fa3c990: 'auto' passes bridge there
    assert row(project)[:3] == (0, "passed", f"Hugging Face checkpoint {teacher}: config.json matches the 23 "
                                             "MODEL_ARGS tokens (the student's architecture)")
    compile_opd(project, {"model": {"megatron_to_hf_mode": "raw"}}, teacher_load=str(teacher))
    code, status, detail, _ = row(project)
    assert (code, status) == (1, "failed") and "slime fa3c990 loads only with --megatron-to-hf-mode bridge" in detail
    (teacher / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 28}))
    compile_opd(project, teacher_load=str(teacher))
    code, status, detail, fix = row(project)
    assert (code, status) == (1, "failed")
    assert detail.startswith(f"[opd] teacher_load {teacher}: the teacher's architecture is not the student's")
    assert "--num-layers: 36 in model_args.sh, but 28 in " in detail and fix.endswith('use [opd] type = "sglang" (a '
                                                                                     'teacher server)')
    assert "Fix:" not in detail  # the student's MODEL_ARGS are not what to change


def test_a_step_names_its_folder_and_a_relative_teacher_is_the_bundles(tmp_path: Path) -> None:
    """--opd-teacher-ckpt-step makes Megatron load iter_<step> whatever the tracker says (checkpointing.py:1188-1189);
    a relative path is read in the job's working directory, the bundle, as slime's os.path.exists does."""
    project = make_project(tmp_path)
    compile_opd(project, teacher_load="teacher", teacher_ckpt_step=50)
    (project.bundle / "teacher").mkdir()  # in the bundle: run with --allow-modified (train.sh is not, so it is read)
    (project.bundle / "teacher" / "latest_checkpointed_iteration.txt").write_text("100\n")
    code, status, detail, _ = row(project, "--allow-modified")
    assert (code, status) == (1, "failed")
    assert detail.startswith(f"[opd] teacher_ckpt_step 50: {project.bundle / 'teacher'} has no iter_0000050")
    (project.bundle / "teacher" / "iter_0000050").mkdir()
    folder = project.bundle / "teacher" / "iter_0000050"
    assert row(project, "--allow-modified")[:3] == (0, "passed", f"Megatron checkpoint {folder} ([opd] "
                                                                  "teacher_ckpt_step 50)")
