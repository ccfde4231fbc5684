"""The package type-checks with mypy --strict and passes ruff: part of the test suite so CI keeps it so."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.slow
def test_mypy_strict() -> None:
    proc = subprocess.run([sys.executable, "-m", "mypy", "compiler", "runtime", "templates"], cwd=REPO,
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff() -> None:
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "compiler", "runtime", "templates", "tests",
                           "bench"], cwd=REPO, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
