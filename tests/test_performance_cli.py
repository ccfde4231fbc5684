"""`acrl --help` stays light: it imports argparse and nothing it does not need, and the help
formatter that avoids importing shutil gives exactly argparse's own output (docs/performance.md)."""

from __future__ import annotations

import argparse
import ast
import fcntl
import os
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from acrl.compiler._cli import main as _cli
from acrl.compiler._cli.help import formatter_class
from conftest import REPO

# Modules `acrl --help` must not import: the compiler's dependencies, and the standard library
# modules it only needs to compile (json, pathlib, typing), or that argparse would import for the
# terminal width (shutil, with zlib, bz2 and lzma).
NOT_FOR_HELP = ("json", "pathlib", "typing", "shutil", "importlib", "jinja2", "attr", "attrs", "cattrs", "yaml",
                "tomllib", "tomli_w", "zlib", "bz2", "lzma")


@pytest.mark.parametrize("argv", [["--help"], ["compile", "--help"], ["run", "--help"], ["--version"], []])
def test_help_imports_nothing_it_does_not_need(argv: list[str], tmp_path: Path) -> None:
    # -S: without site-packages, so that an editable install's import hook (which imports pathlib
    # and importlib) does not hide what the command line itself imports; the source tree is on the path.
    # The `acrl` console script is acrl.runtime._cli:main, which adds the executor's commands.
    (tmp_path / "acrl").mkdir()
    (tmp_path / "acrl" / "compiler").symlink_to(REPO / "compiler")
    (tmp_path / "acrl" / "runtime").symlink_to(REPO / "runtime")
    code = ("import sys\nfrom acrl.runtime._cli import main\n"
            f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
            "print(repr(sorted(sys.modules)), file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True,
                          env={**os.environ, "PYTHONPATH": str(tmp_path)})
    loaded = ast.literal_eval(proc.stderr.splitlines()[-1])
    assert "acrl.compiler._cli.main" in loaded and "acrl.runtime._cli" in loaded
    assert [m for m in loaded if m.split(".")[0] in NOT_FOR_HELP] == []
    assert [m for m in loaded if m.startswith("acrl.runtime.") and m != "acrl.runtime._cli"] == []


def _help(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    with pytest.raises(SystemExit):
        _cli.acrl_main(argv)
    return capsys.readouterr().out


class _Terminal:
    """A stand-in for sys.__stdout__ whose file descriptor is a terminal of a given width."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def fileno(self) -> int:
        return self.fd


@pytest.mark.parametrize("columns", [None, "100", "30", "57", "0", "-4", "wide"])
@pytest.mark.parametrize("terminal", [None, 44])
def test_help_is_formatted_exactly_as_argparse_would(columns: str | None, terminal: int | None,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", os.devnull)  # no kept help: argparse formats every time
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    fds: tuple[int, ...] = ()
    if terminal is not None:
        fds = os.openpty()
        fcntl.ioctl(fds[1], termios.TIOCSWINSZ, struct.pack("HHHH", 24, terminal, 0, 0))
        monkeypatch.setattr(sys, "__stdout__", _Terminal(fds[1]))
    try:
        assert _cli._HelpFormatter("acrl")._width == argparse.HelpFormatter("acrl")._width
        ours = [_help(capsys, argv) for argv in (["--help"], ["compile", "--help"])]
        # The same formatter class (argparse's, keeping the lines of the examples epilog) with the width argparse
        # computes itself: the output must not change.
        monkeypatch.setattr(_cli, "_HelpFormatter", formatter_class())
        assert [_help(capsys, argv) for argv in (["--help"], ["compile", "--help"])] == ours
    finally:
        for fd in fds:
            os.close(fd)


def test_without_stdout_the_width_falls_back_to_80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys, "__stdout__", None)
    assert _cli._HelpFormatter("acrl")._width == argparse.HelpFormatter("acrl")._width == 78


def test_a_spec_with_errors_is_reported_without_loading_the_renderers(tmp_path: Path) -> None:
    spec = tmp_path / "spec.toml"
    spec.write_text((REPO / "specs" / "gsm8k-qwen2.5-3b-smoke.toml").read_text().replace(
        "[data]", "[data]\nbatch_sise = 3", 1))
    code = ("import sys\nfrom acrl.compiler._cli.main import compile_main\n"
            f"code = compile_main([{str(spec)!r}, '-o', {str(tmp_path / 'out')!r}])\n"
            "print(repr([code, sorted(sys.modules)]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    exit_code, loaded = ast.literal_eval(proc.stdout.splitlines()[-1])
    assert exit_code == 1 and "unknown key 'batch_sise'" in proc.stderr
    assert [m for m in loaded if m.split(".")[0] in ("jinja2", "yaml", "tomli_w")] == []
