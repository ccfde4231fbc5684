"""The `acrl` console script lives in acrl.runtime (the compiler never imports the runtime): it has
the compiler's commands and the executor's `run` and `runs`, and its help stays light."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from acrl.runtime._cli import main
from conftest import REPO


def test_the_console_script_is_the_runtime_entry_point() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["acrl"] == "acrl.runtime._cli:main"
    assert scripts["acrl-compile"] == "acrl.compiler._cli.main:compile_main"


def test_help_lists_the_compiler_and_the_executor_commands(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", os.devnull)  # no kept help: the parser is built
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    out = capsys.readouterr().out
    assert exc.value.code == 0
    commands = [line.split()[0] for line in out.split("COMMAND\n", 2)[-1].splitlines() if line.startswith("    ")
                and not line.startswith("     ")]
    assert {"compile", "verify", "diff", "run", "runs"} <= set(commands)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    out = capsys.readouterr().out
    for option in ("--dry-run", "--skip CHECK", "--allow-modified", "--address ADDR", "--runs-dir DIR"):
        assert option in out


def test_run_help_imports_neither_the_executor_nor_ray(tmp_path: Path) -> None:
    (tmp_path / "acrl").mkdir()
    for part in ("compiler", "runtime"):
        (tmp_path / "acrl" / part).symlink_to(REPO / part)
    code = ("import sys\nfrom acrl.runtime._cli import main\n"
            "try:\n    main(['run', '--help'])\nexcept SystemExit:\n    pass\n"
            "print(repr(sorted(sys.modules)), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "c")})
    loaded = ast.literal_eval(proc.stderr.splitlines()[-1])
    assert proc.stdout.startswith("usage: acrl run")
    assert [m for m in loaded if m.startswith(("acrl.runtime._run", "acrl.runtime._preflight.checks", "ray", "boto3",
                                               "concurrent", "subprocess", "json"))] == []


def test_a_usage_error_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run"])
    assert exc.value.code == 2 and "BUNDLE" in capsys.readouterr().err


def test_the_public_api_resolves_lazily() -> None:
    code = ("import sys, acrl.runtime as r\n"
            "print('acrl.runtime._run' in sys.modules, 'acrl.runtime._preflight.checks' in sys.modules)\n"
            "print(sorted(n for n in r.__all__ if getattr(r, n) is None))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.splitlines() == ["False False", "[]"]
    import acrl.runtime

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        acrl.runtime.nope  # noqa: B018
