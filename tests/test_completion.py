"""`acrl completion bash|zsh|fish`: each script names exactly the subcommands and options of the parsers (read back
from the script and compared with a walk of the parsers, so that neither can drift), and the bash one completes for
real: sourced in bash, driven through COMP_WORDS / COMP_CWORD as bash's programmable completion calls it."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from acrl.compiler._cli.examples import parsers
from acrl.compiler._cli.main import compile_parser
from acrl.compiler._pipeline.model_args.catalog import CATALOG
from acrl.runtime._cli import main as acrl_console_main

BIN = Path(sys.executable).parent


def script(shell: str) -> str:
    proc = subprocess.run([str(BIN / "acrl"), "completion", shell], capture_output=True, text=True, timeout=60,
                          check=True)
    return proc.stdout


def all_parsers() -> list[argparse.ArgumentParser]:
    """Every parser of `acrl` (the executor's commands included) and of `acrl-compile`."""
    found: list[argparse.ArgumentParser] = []

    def capture(parser: argparse.ArgumentParser, argv: object, *rest: object) -> int:
        found.extend(parsers(parser))
        return 0

    from acrl.compiler._cli import main as _main

    original = _main._main
    _main._main = capture  # type: ignore[assignment]
    try:
        acrl_console_main([])
    finally:
        _main._main = original
    return [*found, *parsers(compile_parser())]


def expected() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(command path -> subcommands, command path -> option strings), from the parsers."""
    subcommands, options = {}, {}
    for p in all_parsers():
        options[p.prog] = {o for a in p._actions for o in a.option_strings}
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                subcommands[p.prog] = set(a.choices)
    return subcommands, options


def test_all_parsers_cover_the_executors_commands() -> None:
    progs = {p.prog for p in all_parsers()}
    assert {"acrl", "acrl-compile", "acrl run", "acrl status", "acrl init", "acrl completion",
            "acrl import train-sh", "acrl models show"} <= progs


def _bash_tables(text: str) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    def table(function: str) -> dict[str, set[str]]:
        body = text.split(f"{function}() {{", 1)[1].split("\n}", 1)[0]
        return {shlex.split(m[1])[0]: set(shlex.split(m[2])[0].split())
                for m in re.finditer(r"^ +(.+?)\) echo (.*) ;;$", body, re.M)}
    return table("_acrl_commands"), table("_acrl_options")


@pytest.mark.parametrize("shell", ["bash", "zsh"])
def test_the_bash_and_zsh_scripts_name_exactly_the_parsers_commands_and_options(shell: str) -> None:
    text = script(shell)
    subcommands, options = expected()
    assert _bash_tables(text) == (subcommands, options)
    if shell == "zsh":
        assert "\nautoload -U +X bashcompinit && bashcompinit\n" in text
    assert "complete -o filenames -F _acrl acrl acrl-compile" in text


def test_the_fish_script_names_exactly_the_parsers_commands_and_options() -> None:
    text = script("fish")
    subcommands: dict[str, set[str]] = {}
    options: dict[str, set[str]] = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        words = shlex.split(line.replace("\\'", "'\"'\"'"))
        assert words[:2] == ["complete", "-c"], line
        program = words[2]
        condition = words[words.index("-n") + 1] if "-n" in words else ""
        seen = re.findall(r"(?<!not )__fish_seen_subcommand_from ([^;\s]+)", condition)
        path = " ".join([program, *seen])
        if "-a" in words and "-l" not in words and "-s" not in words:
            value = words[words.index("-a") + 1]
            if "-d" in words:  # a subcommand (a positional's values have no description)
                subcommands.setdefault(path, set()).add(value)
            continue
        flags = {("--" if w == "-l" else "-") + words[i + 1] for i, w in enumerate(words) if w in ("-l", "-s")}
        options.setdefault(path, set()).update(flags)
    assert (subcommands, options) == expected()


def test_option_values_are_the_parsers_choices_and_model_names_come_from_the_catalog() -> None:
    text = script("bash")
    assert "'acrl compile|--target') echo 'ray kuberay' ;;" in text
    assert "'acrl completion|') echo 'bash zsh fish' ;;" in text
    models = re.search(r"^ +'acrl init\|--model'\) echo (.*) ;;$", text, re.M)
    assert models is not None and shlex.split(models[1])[0].split() == list(CATALOG)
    fish = script("fish")
    assert "-l target -x -a 'ray kuberay'" in fish and "-s o -l output -r -F" in fish


# --- the bash script, for real ------------------------------------------------------------------------------------

def complete(bash_script: Path, words: list[str], cwd: Path) -> list[str]:
    """What bash's completion offers for ``words`` (the last one being completed), from the sourced script."""
    program = f'source {shlex.quote(str(bash_script))}\nCOMP_WORDS=({" ".join(shlex.quote(w) for w in words)})\n' \
              f'COMP_CWORD={len(words) - 1}\nCOMP_LINE={shlex.quote(" ".join(words))}\n' \
              'complete -p acrl >/dev/null && complete -p acrl-compile >/dev/null || exit 3\n' \
              '_acrl\nprintf "%s\\n" "${COMPREPLY[@]}"\n'
    proc = subprocess.run(["bash", "--norc", "--noprofile", "-c", program], capture_output=True, text=True, cwd=cwd,
                          timeout=60, env={**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 0, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


@pytest.fixture(scope="module")
def bash_completion(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("completion") / "acrl.bash"
    path.write_text(script("bash"))
    return path


def test_bash_completes_subcommands(bash_completion: Path, tmp_path: Path) -> None:
    assert complete(bash_completion, ["acrl", "comp"], tmp_path) == ["compile", "completion"]
    assert complete(bash_completion, ["acrl", "models", ""], tmp_path) == ["show"]
    assert complete(bash_completion, ["acrl", "import", "t"], tmp_path) == ["train-sh"]
    assert set(complete(bash_completion, ["acrl", ""], tmp_path)) == expected()[0]["acrl"]


def test_bash_completes_the_options_of_acrl_compile(bash_completion: Path, tmp_path: Path) -> None:
    compile_options = {o for o in expected()[1]["acrl compile"] if o.startswith("--")}
    assert set(complete(bash_completion, ["acrl", "compile", "--"], tmp_path)) == compile_options
    # after the spec and an option with its value, still acrl compile's
    assert complete(bash_completion, ["acrl", "compile", "spec.toml", "-o", "out", "--str"], tmp_path) == ["--strict"]
    assert complete(bash_completion, ["acrl-compile", "--no"], tmp_path) == ["--no-cache"]
    assert complete(bash_completion, ["acrl", "run", "b/", "--dry"], tmp_path) == ["--dry-run"]


def test_bash_completes_option_values_and_files(bash_completion: Path, tmp_path: Path) -> None:
    assert complete(bash_completion, ["acrl", "compile", "s.toml", "--target", ""], tmp_path) == ["ray", "kuberay"]
    assert complete(bash_completion, ["acrl", "init", "--model", "qwen3-8"], tmp_path) == ["qwen3-8B"]
    assert complete(bash_completion, ["acrl", "models", "show", "glm4-3"], tmp_path) == ["glm4-32B"]
    assert complete(bash_completion, ["acrl", "completion", "f"], tmp_path) == ["fish"]
    (tmp_path / "spec.toml").write_text("")
    (tmp_path / "specs").mkdir()
    assert complete(bash_completion, ["acrl", "compile", "sp"], tmp_path) == ["spec.toml", "specs"]
    assert complete(bash_completion, ["acrl", "layout", "x", "-o", "sp"], tmp_path) == ["spec.toml", "specs"]


def test_bash_completes_the_preflight_checks_after_skip(bash_completion: Path, tmp_path: Path) -> None:
    """acrl run --skip takes check names (not a choices list: comma-separated): runtime/_cli.py's CHECK_NAMES, which
    must be every check acrl run can run, Ray's and Kubernetes' alike."""
    from acrl.runtime._cli import CHECK_NAMES
    from acrl.runtime._preflight.checks import CHECKS
    from acrl.runtime._preflight.kube_checks import kube_checks

    kube = [c.name for c in kube_checks(None)]  # type: ignore[arg-type]  # names only: no check runs
    assert sorted(CHECK_NAMES) == sorted({c.name for c in CHECKS} | set(kube))
    assert complete(bash_completion, ["acrl", "run", "b/", "--skip", "aws"], tmp_path) == ["aws-identity"]
    assert complete(bash_completion, ["acrl", "run", "b/", "--skip", "rayj"], tmp_path) == ["rayjob-crd",
                                                                                              "rayjob-exists"]
