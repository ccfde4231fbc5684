"""Usage errors exit 2 in every command, through the real console scripts: a missing input file, an unknown
option (with the subcommand's own usage), an unknown catalog name; `acrl diff --set`, `acrl run --skip a,b`
and the --help texts that name the toolkit's method and the exit statuses."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SPECS

BIN = Path(sys.executable).parent
SMOKE = SPECS / "gsm8k-qwen2.5-3b-smoke.toml"


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script, *rest = args
    return subprocess.run([str(BIN / script), *rest], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(("argv", "message"), [
    (["acrl-compile", "nope.toml"], "nope.toml: no such spec file\n"),
    (["acrl", "compile", "nope.toml"], "nope.toml: no such spec file\n"),
    (["acrl-compile", "--check", "nope.toml", "-o", "b"], "nope.toml: no such spec file\n"),
    (["acrl-compile", "."], ".: is a directory, not a spec file\n"),
    (["acrl", "check-bundles", "nope.toml"], "nope.toml: no such spec file\n"),
    (["acrl", "explain", "nope.toml"], "nope.toml: no such spec file or bundle directory\n"),
    (["acrl", "layout", "nope.toml"], "nope.toml: no such spec file or bundle directory\n"),
    (["acrl", "import", "slime-runner", "nope.yaml", "-o", "s.toml"], "nope.yaml: no such SlimeRunner YAML file\n"),
    (["acrl", "import", "train-sh", "nope.sh", "-o", "s.toml"], "nope.sh: no such launch script file\n"),
    (["acrl", "diff", "nope.toml", "b"], "nope.toml: no such file or directory\n"),
    (["acrl", "verify", "nope"], "nope: no such directory"),
    (["acrl", "run", "nope", "--dry-run"], "nope: no such directory"),
    (["acrl", "models", "show", "qwen9-1B"], "'qwen9-1B' is not in acrl's model catalog"),
])
def test_a_missing_input_is_a_usage_error(argv: list[str], message: str, tmp_path: Path) -> None:
    proc = cli(*argv, cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (2, ""), proc.stderr
    assert proc.stderr.startswith(message) and "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # nothing written


def test_check_bundles_counts_a_missing_spec_as_a_usage_error_not_a_stale_bundle(tmp_path: Path) -> None:
    proc = cli("acrl", "check-bundles", "nope.toml", cwd=tmp_path)
    assert proc.returncode == 2 and "not what their specs compile to" not in proc.stderr, proc.stderr
    shutil.copy(SMOKE, tmp_path / "spec.toml")  # with a spec whose bundle is missing too: only that one is stale
    proc = cli("acrl", "check-bundles", "nope.toml", "spec.toml", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.endswith("1 of 2 bundle(s) are not what their specs compile to\n")


@pytest.mark.parametrize(("argv", "usage"), [
    (["acrl", "run", "b", "--bogus"], "usage: acrl run "),
    (["acrl", "compile", "s.toml", "--bogus"], "usage: acrl compile "),
    (["acrl", "models", "show", "qwen3-4B", "--bogus"], "usage: acrl models show "),
    (["acrl", "import", "slime-runner", "r.yaml", "-o", "s.toml", "--bogus"], "usage: acrl import slime-runner "),
    (["acrl", "diff", "a", "b", "c"], "usage: acrl diff "),
    (["acrl-compile", "s.toml", "--bogus"], "usage: acrl-compile "),
])
def test_a_subcommands_argument_error_prints_its_own_usage(argv: list[str], usage: str, tmp_path: Path) -> None:
    proc = cli(*argv, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith(usage), proc.stderr
    assert "unrecognized arguments: " in proc.stderr


def test_a_command_without_its_subcommand_prints_its_own_help(tmp_path: Path) -> None:
    proc = cli("acrl", "import", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: acrl import ") and "slime-runner" in proc.stderr


def test_malformed_values_and_outputs_are_usage_errors(tmp_path: Path) -> None:
    assert cli("acrl-compile", str(SMOKE), "-o", "b", cwd=tmp_path).returncode == 0
    for argv in (["acrl", "verify", "b", "--expect-hash", "zz"], ["acrl", "run", "b", "--dry-run", "--expect-hash",
                                                                  "sha256:12"]):
        proc = cli(*argv, cwd=tmp_path)
        assert proc.returncode == 2 and "--expect-hash" in proc.stderr and "not a bundle hash" in proc.stderr
    proc = cli("acrl", "schema", "-o", "b", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("b: is a directory")


def test_diff_set_applies_to_the_spec_side(tmp_path: Path) -> None:
    shutil.copy(SMOKE, tmp_path / "spec.toml")
    assert cli("acrl-compile", "spec.toml", "-o", "b", cwd=tmp_path).returncode == 0
    assert cli("acrl", "diff", "b", "spec.toml", cwd=tmp_path).returncode == 0
    proc = cli("acrl", "diff", "b", "spec.toml", "--set", "train.lr=2e-6", "--set", "rollout.batch_size=64",
               cwd=tmp_path)
    assert proc.returncode == 1
    assert "    ~ --lr: 1e-06 -> 2e-06" in proc.stdout and "  ~ train.lr: 1e-06 -> 2e-06" in proc.stdout
    assert "  ~ rollout.batch_size: 32 -> 64" in proc.stdout
    both = cli("acrl", "diff", "spec.toml", "spec.toml", "--set", "train.lr=2e-6", cwd=tmp_path)
    assert both.returncode == 0  # every spec side gets the overrides: the same spec is equivalent to itself
    proc = cli("acrl", "diff", "b", "b", "--set", "train.lr=2e-6", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith(
        "acrl diff: --set applies to a spec (.toml), and neither A nor B is one\n")
    bad = cli("acrl", "diff", "b", "spec.toml", "--set", "train.lr=", cwd=tmp_path)
    assert bad.returncode == 2 and "train.lr" in bad.stderr  # a bad --set: trouble, as diff(1) says it


def test_run_skip_takes_a_comma_separated_list(tmp_path: Path) -> None:
    assert cli("acrl-compile", str(SMOKE), "-o", "b", cwd=tmp_path).returncode == 0
    proc = cli("acrl", "run", "b", "--dry-run", "--skip", "nope-a,gpus", "--skip", "nope-b", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("--skip nope-a, nope-b: no such check"), proc.stderr


def test_help_texts(tmp_path: Path) -> None:
    runner = cli("acrl", "import", "slime-runner", "--help", cwd=tmp_path)
    # agentcore-rl-toolkit 7bdd415: src/agentcore_rl_toolkit/backends/slime/runner.py:129 `def train(self, ...)`
    assert "SlimeRunner.train()" in " ".join(runner.stdout.split()) and "SlimeRunner.run()" not in runner.stdout
    for argv in (["acrl-compile", "--help"], ["acrl", "compile", "--help"]):
        text = " ".join(cli(*argv, cwd=tmp_path).stdout.split())
        assert "Exit status: 0 written" in text and "; 3 nothing was written because the output directory" in text
        assert "--print FILE" in text and "-q, --quiet" in text and "--color {auto,always,never}" in text


@pytest.mark.parametrize("argv", [["acrl-compile", str(SMOKE), "--set", "foo"],
                                  ["acrl", "layout", str(SMOKE), "--set", "rollout.batch_size"],
                                  ["acrl", "diff", str(SMOKE), str(SMOKE), "--set", "x"]])
def test_a_set_without_an_equals_sign_is_a_usage_error(argv: list[str], tmp_path: Path) -> None:
    proc = cli(*argv, cwd=tmp_path)
    assert proc.returncode == 2 and "argument --set: " in proc.stderr and "is not KEY=VALUE" in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == []
