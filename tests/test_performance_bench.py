"""The benches behind docs/performance.md still run against the code they measure, and each reports
the rows the document quotes. They import compiler internals by name (acrl.compiler._pipeline.sweep, _compile,
...): a module moved or renamed must fail here, not the next time someone re-measures."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

SWEEP_ROWS = ["acrl-compile (whole command)", "imports (acrl and its libraries)", "read the spec, expand the points",
              "compile every point (nothing written)", "write the bundles and sweep.json (write_sweep)",
              "files alone: the same bytes, plain mkdir/open/write/rename",
              "compile every point again, same process (warm)"]


def bench(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    # The benches run acrl-compile from the interpreter's own bin directory, as in a regular install.
    proc = subprocess.run([sys.executable, *argv], cwd=REPO, capture_output=True, text=True, timeout=300,
                          check=False, env={**os.environ, "TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    return proc


def test_sweep_bench_times_the_whole_command_then_its_stages(tmp_path: Path) -> None:
    out = tmp_path / "bundles"
    out.mkdir()
    report = json.loads(bench(tmp_path, "bench/sweep_bench.py", "--points", "8", "--runs", "1", "--dir", str(out),
                              "--json").stdout)
    assert report["points"] == 8
    assert list(report["per_bundle"]) == SWEEP_ROWS
    for row in report["per_bundle"].values():
        assert row["wall_ms"] > 0 and row["cpu_ms"] >= 0 and row["x_bare_start"] > 0
    assert report["bare_start_ms"] > 0 and report["bare_start_cpu_ms"] > 0
    assert not list(out.iterdir())  # what it wrote is removed


@pytest.mark.parametrize("clock", [[], ["--cpu"]])
def test_breakdown_times_a_first_and_a_second_compile(tmp_path: Path, clock: list[str]) -> None:
    lines = bench(tmp_path, "bench/breakdown.py", "--runs", "1", *clock).stdout.splitlines()
    stages = [line.split("|")[1].strip() for line in lines if line.startswith("| ") and "ms (" in line]
    assert stages[0] == "re + argparse (console script, command line)"
    assert "structure (cattrs generates code)" in stages
    assert stages.index("total after the interpreter started") < stages.index("again: parse")
    assert stages[-1] == "again: total (a second compile in the same process)"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("acrl-breakdown-")]  # its scratch is removed


@pytest.mark.slow
def test_compile_bench_times_every_cache_on_and_off(tmp_path: Path) -> None:
    # The bench itself fails when a command exits otherwise than expected (an invalid spec: 1).
    rows = json.loads(bench(tmp_path, "bench/compile_bench.py", "--runs", "1", "--json").stdout)
    for name in ("bare interpreter (python -c pass)", "import the compiler's dependencies", "acrl --help",
                 "acrl --help, nothing kept (argparse formats it)",
                 "acrl-compile smoke spec, compiled before (new bundle)", "acrl-compile edited smoke spec (new bundle)",
                 "acrl-compile --no-cache smoke spec (compile cache off, templates kept)",
                 "acrl-compile smoke spec, both caches empty", "acrl-compile invalid spec (exit 1)"):
        assert rows[name]["median_ms"] > 0 and rows[name]["cpu_ratio"] > 0, name
    assert rows["import the compiler's dependencies"]["ratio_to_dependency_import"] == 1.0
    assert rows["bare interpreter (python -c pass)"]["ratio"] == 1.0
