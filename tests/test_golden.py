"""Golden bundles: every example spec compiles to exactly the files in tests/golden/<spec>/.

Regenerate after an intended change with `pytest tests/test_golden.py --update-golden` and review
the diff like any other code change.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from acrl.compiler import compile_spec, write
from conftest import EXAMPLE_SPECS, REPO

GOLDEN = REPO / "tests" / "golden"


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_bundle_matches_golden(spec: Path, request: pytest.FixtureRequest) -> None:
    bundle = compile_spec(spec)
    golden = GOLDEN / spec.stem
    if request.config.getoption("--update-golden"):
        shutil.rmtree(golden, ignore_errors=True)
        write(bundle, golden)
    expected = {p.name: p.read_bytes() for p in sorted(golden.iterdir())}
    assert sorted(bundle.files) == sorted(expected)
    for name, data in bundle.files.items():
        assert data == expected[name], f"{name} differs from tests/golden/{spec.stem}/{name}"
    assert os.access(golden / "train.sh", os.X_OK)


def test_every_golden_bundle_has_a_spec() -> None:
    assert sorted(p.name for p in GOLDEN.iterdir()) == sorted(p.stem for p in EXAMPLE_SPECS)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_same_bytes_from_another_directory_and_process(spec: Path, tmp_path: Path) -> None:
    """Deterministic: a fresh interpreter, another cwd and a relative spec path give the same bytes."""
    copy = tmp_path / "elsewhere" / spec.name
    copy.parent.mkdir()
    shutil.copy(spec, copy)
    env = {**os.environ, "HOME": str(tmp_path), "TZ": "Pacific/Kiritimati", "LC_ALL": "C"}
    subprocess.run([sys.executable, "-m", "acrl.compiler._cli.main", "compile", spec.name, "-o", str(tmp_path / "b")],
                   cwd=copy.parent, env=env, check=True, capture_output=True)
    for name, data in compile_spec(spec).files.items():
        assert (tmp_path / "b" / name).read_bytes() == data, name
