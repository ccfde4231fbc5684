"""The upstream checks (tests marked upstream): deselected by a plain run, so a fresh clone has no skips, and run by
`pytest --upstream`, which names each missing variable instead of skipping."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def pytest_run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACRL_")}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q", *args],
                          cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=120)


def test_a_plain_run_deselects_them_and_upstream_names_what_is_missing() -> None:
    plain = pytest_run("tests/test_kuberay_schema.py", "tests/test_commit_facts.py")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert "2 deselected" in plain.stdout  # one upstream check in each file
    assert "test_the_committed_schema_is_what_regenerate_makes" not in plain.stdout
    upstream = pytest_run("--upstream", "tests/test_kuberay_schema.py", "tests/test_commit_facts.py")
    assert upstream.returncode == 4  # pytest's usage error
    assert "ACRL_KUBERAY_DIR" in upstream.stderr and "ACRL_MEGATRON_DIR" in upstream.stderr
    assert "ACRL_SGLANG_WHEELS" not in upstream.stderr  # only what the selected checks need
