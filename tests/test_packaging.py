"""Packaging and the compile path's weight: the wheel holds every module the source tree has,
and importing the compiler never imports the runtime's heavy dependencies."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import jinja2
import jinja2.meta
import pytest

from acrl.compiler._pipeline.render import TEMPLATE_VARIABLES, environment
from conftest import REPO

HEAVY = ("ray", "boto3", "botocore", "torch", "sglang", "acrl.runtime")


def test_importing_the_compiler_and_compiling_stay_light(tmp_path: Path) -> None:
    code = (
        "import sys, json, pathlib\n"
        "import acrl.compiler as c\n"
        f"b = c.compile_spec(pathlib.Path({str(REPO / 'specs' / 'gsm8k-qwen2.5-3b-smoke.toml')!r}))\n"
        f"c.write(b, pathlib.Path({str(tmp_path / 'b')!r}))\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    loaded = json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                       check=True).stdout)
    assert [m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY)] == []


def test_help_imports_neither_jinja_nor_cattrs() -> None:
    code = ("import sys, json\nfrom acrl.runtime._cli import main\n"  # the `acrl` console script
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = json.loads(proc.stderr)
    assert not [m for m in loaded if m.split(".")[0] in ("jinja2", "cattrs", "attrs", "attr", "yaml")]
    assert "acrl-compile" in proc.stdout or "compile" in proc.stdout


@pytest.mark.parametrize("name", sorted(TEMPLATE_VARIABLES))
def test_template_variables_are_exactly_those_the_renderer_passes(name: str) -> None:
    env = environment()
    assert env.loader is not None
    source = env.loader.get_source(env, name)[0]
    assert jinja2.meta.find_undeclared_variables(env.parse(source)) == TEMPLATE_VARIABLES[name]


def test_every_template_file_is_rendered() -> None:
    assert {p.name for p in (REPO / "templates").glob("*.jinja")} == set(TEMPLATE_VARIABLES)


@pytest.mark.slow
def test_wheel_contains_every_module_of_the_source_tree(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                    "-w", str(tmp_path), str(REPO)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("acrl-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for folder, package in (("compiler", "acrl/compiler"), ("runtime", "acrl/runtime"),
                            ("templates", "acrl/templates")):
        for path in (REPO / folder).rglob("*"):  # sub-packages included
            name = path.relative_to(REPO / folder).as_posix()
            if path.suffix in (".py", ".jinja", ".typed"):
                assert f"{package}/{name}" in names, f"{folder}/{name} is missing from the wheel"
    assert any(n.endswith("entry_points.txt") for n in names)
