"""The opd-teacher preflight check (runtime/_preflight/opd_teacher.py) through the real `acrl run` entry (--dry-run):
a Megatron OPD teacher ([opd] type = "megatron") is a checkpoint Megatron loads. Without
latest_checkpointed_iteration.txt slime only logs (slime/utils/arguments.py:1800-1804 at 624b824) and Megatron
loads nothing (megatron/training/checkpointing.py:1210-1221 at 1dcf0daf), leaving the actor's weights as the
teacher."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import tomli_w
from test_run import Project, acrl, make_project

from acrl.compiler import compile_spec, write
from conftest import merge


def compile_opd(project: Project, **opd: Any) -> None:
    spec = merge(project.spec, {"opd": {"enabled": True, "type": "megatron", **opd}})
    (project.root / "spec.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    write(compile_spec(project.root / "spec.toml"), project.bundle, force=True)


def row(project: Project, *extra: str) -> tuple[int, str, str, str]:
    """`acrl run BUNDLE --dry-run`: (exit status, the opd-teacher row's status, its detail, its fix)."""
    proc = acrl("run", str(project.bundle), "--dry-run", "--skip", "gpus", *extra)
    found = re.search(r"^opd-teacher +(\w+) +\d+ms +(.*)\n(?: +fix: (.*))?", proc.stdout, re.M)
    assert found is not None, proc.stdout + proc.stderr
    return proc.returncode, found.group(1), found.group(2), found.group(3) or ""


def test_the_teacher_is_a_checkpoint_megatron_loads(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    assert row(project)[1:3] == ("skipped", "the bundle loads no Megatron teacher ([opd] teacher_load)")
    teacher = tmp_path / "teacher"
    compile_opd(project, teacher_load=str(teacher))
    code, status, detail, fix = row(project)
    assert (code, status) == (1, "failed") and detail.startswith(f"[opd] teacher_load {teacher}: no such directory")
    assert fix.startswith("point [opd] teacher_load at the teacher's Megatron checkpoint")
    teacher.mkdir()
    code, status, detail, fix = row(project)  # slime's parser passes this one: it only logs it
    assert (code, status) == (1, "failed") and detail.startswith(
        f"[opd] teacher_load {teacher}: no latest_checkpointed_iteration.txt, so Megatron loads nothing into the "
        "teacher and it stays a copy of the actor")
    assert fix.endswith("or set [opd] teacher_ckpt_step")
    (teacher / "latest_checkpointed_iteration.txt").write_text("100\n")
    code, status, detail, _ = row(project)
    assert (code, status) == (1, "failed") and "names 100, but" in detail and "has no iter_0000100" in detail
    (teacher / "iter_0000100").mkdir()
    assert row(project)[:3] == (0, "passed", f"{teacher / 'iter_0000100'} (latest_checkpointed_iteration.txt: 100)")
    (teacher / "latest_checkpointed_iteration.txt").write_text("latest\n")
    code, status, detail, _ = row(project)
    assert (code, status) == (1, "failed") and "not an iteration nor 'release'" in detail


def test_a_step_names_its_folder_and_a_relative_teacher_is_the_bundles(tmp_path: Path) -> None:
    """--opd-teacher-ckpt-step makes Megatron load iter_<step> whatever the tracker says (checkpointing.py:1188-1189);
    a relative path is read in the job's working directory, the bundle, as slime's os.path.exists does."""
    project = make_project(tmp_path)
    compile_opd(project, teacher_load="teacher", teacher_ckpt_step=50)
    (project.bundle / "teacher").mkdir()  # in the bundle: run with --allow-modified (train.sh is not, so it is read)
    code, status, detail, _ = row(project, "--allow-modified")
    assert (code, status) == (1, "failed")
    assert detail.startswith(f"[opd] teacher_ckpt_step 50: {project.bundle / 'teacher'} has no iter_0000050")
    (project.bundle / "teacher" / "iter_0000050").mkdir()  # no tracker needed with a step
    assert row(project, "--allow-modified")[:3] == (0, "passed", f"{project.bundle / 'teacher' / 'iter_0000050'} "
                                                                  "([opd] teacher_ckpt_step 50)")
