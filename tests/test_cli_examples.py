"""Every `--help` ends with one or two examples, for every parser of `acrl` (the executor's commands included) and
`acrl-compile`, so that a new command cannot forget them; each example is a command line its own parser accepts. A
mistyped command, choice or option gets the closest real one and exit status 2, through the console scripts."""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_completion import all_parsers

from acrl.compiler._cli.help import EXAMPLES_HEADING

BIN = Path(sys.executable).parent
PARSERS = {p.prog: p for p in all_parsers()}


def examples(parser: argparse.ArgumentParser) -> list[str]:
    """The example command lines of a parser's epilog (continued lines joined)."""
    assert parser.epilog is not None and parser.epilog.startswith(EXAMPLES_HEADING + "\n"), parser.prog
    text = parser.epilog[len(EXAMPLES_HEADING) + 1:].replace("\\\n", " ")
    return [line.strip() for line in text.splitlines()]


def command_words(line: str) -> list[str]:
    """The words of the command a shell line runs: comments dropped, cut at a redirection or a pipe."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    words = list(lexer)
    cut = [i for i, w in enumerate(words) if w in (">", ">>", "<", "|", "&&", ";")]
    return words[:cut[0]] if cut else words


def test_every_parser_is_checked() -> None:
    assert len(PARSERS) >= 20 and {"acrl", "acrl-compile", "acrl run", "acrl init"} <= set(PARSERS)


@pytest.mark.parametrize("prog", sorted(PARSERS))
def test_every_help_ends_with_examples_its_parser_accepts(prog: str) -> None:
    parser = PARSERS[prog]
    lines = examples(parser)
    assert 1 <= len(lines) <= 3, lines  # one or two commands (one may be continued over lines)
    for line in lines:
        words = command_words(line)
        while words and "=" in words[0] and not words[0].startswith("-"):  # NAME=VALUE before the command
            words = words[1:]
        assert words[0] == prog.split(" ")[0], line
        command = prog.split(" ")[1:]
        if command:
            assert words[1:1 + len(command)] == command, f"{line!r} is not an example of {prog}"
        root = PARSERS[prog.split(" ")[0]]
        try:
            root.parse_args(words[1:])
        except SystemExit as exc:  # argparse refused it: print it for the failure message
            raise AssertionError(f"{prog}: the example {line!r} does not parse") from exc
    assert parser.format_help().rstrip().endswith("\n" + parser.epilog.splitlines()[-1])  # last, as written


def test_help_through_the_console_scripts_ends_with_examples(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "COLUMNS": "100"}
    for argv in (["acrl", "--help"], ["acrl", "run", "--help"], ["acrl-compile", "--help"], ["acrl", "init", "-h"]):
        proc = subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, env=env, timeout=60)
        assert proc.returncode == 0
        tail = proc.stdout.rstrip().split("\n\n")[-1]
        assert tail.startswith("examples:\n  "), argv
        assert all(line.startswith("  ") for line in tail.splitlines()[1:])  # as written, not refilled


# --- did you mean -------------------------------------------------------------------------------------------------

def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / argv[0]), *argv[1:]], capture_output=True, text=True, timeout=60)


def test_a_mistyped_command_gets_the_closest_one() -> None:
    proc = run("acrl", "comple")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1] == "acrl: error: unknown command 'comple'; did you mean 'compile'?"
    proc = run("acrl", "models", "shw")
    assert proc.returncode == 2 and proc.stderr.startswith("usage: acrl models ")
    assert proc.stderr.splitlines()[-1] == "acrl models: error: unknown command 'shw'; did you mean 'show'?"
    proc = run("acrl", "import", "slime-runer", "x.yaml")
    assert proc.stderr.splitlines()[-1] == ("acrl import: error: unknown source 'slime-runer'; did you mean "
                                            "'slime-runner'?")


def test_a_command_like_nothing_lists_the_commands() -> None:
    proc = run("acrl", "xyzzy")
    assert proc.returncode == 2
    last = proc.stderr.splitlines()[-1]
    assert last.startswith("acrl: error: unknown command 'xyzzy'; the commands are: init, compile, models")
    assert "run" in last and "completion" in last


def test_a_mistyped_option_gets_the_closest_one_and_its_commands_usage() -> None:
    proc = run("acrl-compile", "spec.toml", "--stirct")
    assert proc.returncode == 2 and proc.stderr.startswith("usage: acrl-compile ")
    assert proc.stderr.splitlines()[-1] == ("acrl-compile: error: unrecognized arguments: --stirct; did you mean "
                                            "'--strict'?")
    proc = run("acrl", "compile", "spec.toml", "--stirct")
    assert proc.returncode == 2 and proc.stderr.startswith("usage: acrl compile ")  # not the top-level usage
    assert proc.stderr.splitlines()[-1].endswith("did you mean '--strict'?")
    proc = run("acrl", "run", "b/", "--dryrun", "--skp", "gpus")
    assert proc.stderr.startswith("usage: acrl run ")
    assert proc.stderr.splitlines()[-1] == ("acrl run: error: unrecognized arguments: --dryrun --skp gpus; did you "
                                            "mean '--dry-run' for '--dryrun'?; did you mean '--skip' for '--skp'?")


def test_a_mistyped_choice_gets_the_closest_one() -> None:
    proc = run("acrl", "layout", "spec.toml", "--format", "mardown")
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[-1].endswith("(choose from 'text', 'markdown', 'svg'); did you mean 'markdown'?")
