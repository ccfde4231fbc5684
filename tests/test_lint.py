"""mypy and ruff, run exactly as pyproject.toml configures them (`mypy`, `ruff check`, no arguments):
part of the test suite so CI keeps the package type-checked and linted the way a developer checks it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.slow
def test_mypy_as_configured() -> None:
    """[tool.mypy] packages: acrl.compiler, acrl.runtime and acrl.templates as installed, each with
    its py.typed marker (without one, mypy exits 2 before checking anything)."""
    proc = subprocess.run([sys.executable, "-m", "mypy"], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_as_configured() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check"], cwd=REPO, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
