"""`acrl completion bash|zsh|fish`: a completion script for `acrl` and `acrl-compile`, generated from their argparse
parsers when it is asked for, so that it cannot drift from the commands (tests/test_completion.py compares the
script's commands and options with the parsers, and drives the bash one in bash).

The parsers are read into a table (:func:`commands`): per command path ("acrl", "acrl models show") its subcommands,
its options (which take a value, and that value's choices) and its positionals' choices. bash gets the table as
case statements and one function that walks the words typed so far; zsh the same script through bashcompinit; fish
one `complete` line per subcommand and option. Model names (`acrl init --model`, `acrl models show`) come from the
catalog. Imports nothing up front: `acrl --help` builds this command's parser.
"""

from __future__ import annotations

import sys

from .help import HelpFormatter
from .output import EXIT_OK

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable
    from typing import Any

SHELLS = ("bash", "zsh", "fish")
PROGRAMS = ("acrl", "acrl-compile")


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    completion = commands.add_parser(
        "completion", help="print a shell completion script (bash, zsh or fish)", formatter_class=HelpFormatter,
        description="Print the completion script of acrl and acrl-compile for SHELL, generated from their command "
        "lines: subcommands, options, option values (choices, files) and catalog model names. Install it once "
        "(README: Shell completion); a newer acrl's commands need the script printed again.")
    completion.add_argument("shell", metavar="SHELL", choices=SHELLS, help="bash, zsh or fish")
    completion.set_defaults(run=run_completion)


class Option:
    """One option of a command: its strings, whether it takes a value, the value's choices (empty: a file)."""

    def __init__(self, strings: list[str], takes_value: bool, choices: list[str], help_text: str) -> None:
        self.strings, self.takes_value, self.choices, self.help = strings, takes_value, choices, help_text


class Command:
    """One command path ("acrl models show"): subcommands (name -> help), options, its positionals' choices."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.subcommands: dict[str, str] = {}
        self.options: list[Option] = []
        self.positional: list[str] = []


def commands(roots: Iterable[argparse.ArgumentParser], models: list[str] | None = None) -> list[Command]:
    """The table of every command below ``roots`` (each named by its parser's prog). ``models``: the names
    `acrl init --model` and `acrl models show NAME` complete to."""
    import argparse  # lazy: the parsers are built, so it is imported already

    found: list[Command] = []
    stack = list(roots)
    while stack:
        parser = stack.pop(0)
        command = Command(parser.prog)
        found.append(command)
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                helps = {a.dest: a.help or "" for a in action._choices_actions}
                for name, sub in action.choices.items():
                    command.subcommands[name] = helps.get(name, "")
                    stack.append(sub)
            elif action.option_strings:
                choices = [str(c) for c in action.choices] if action.choices else \
                    list(getattr(action, "completions", ()))  # a value that is not a choice: acrl run --skip
                if command.path == "acrl init" and "--model" in action.option_strings:
                    choices = list(models or [])
                command.options.append(Option(list(action.option_strings), action.nargs != 0, choices,
                                              _first_sentence(action.help)))
            elif action.choices:
                command.positional += [str(c) for c in action.choices]
        if command.path == "acrl models show":
            command.positional += list(models or [])
    return found


def _first_sentence(text: str | None) -> str:
    """The help text up to its first semicolon, without parentheses, at most 80 characters (argparse.SUPPRESS:
    nothing): a description beside the completion."""
    import re  # lazy: only a completion script needs it

    if text is None or text == "==SUPPRESS==":
        return ""
    short = re.sub(r"\s*\([^()]*\)", "", text.split(";")[0]).strip()
    return short if len(short) <= 80 else short[:77].rstrip() + "..."


def _words(items: Iterable[str]) -> str:
    """Words for a bash case branch: shell-quoted, space-separated."""
    import shlex  # lazy: only a completion script needs it

    return shlex.quote(" ".join(items))


def bash_script(table: list[Command]) -> str:
    """The bash completion script: the table as case statements, and _acrl, which walks COMP_WORDS."""
    import shlex  # lazy: only a completion script needs it

    out = ["# acrl and acrl-compile completion for bash, generated by `acrl completion bash`.",
           "# Install: acrl completion bash > ~/.local/share/bash-completion/completions/acrl",
           "#   (and the same file as .../completions/acrl-compile), or: source <(acrl completion bash)",
           "", "_acrl_commands() {", "  case $1 in"]
    out += [f"    {shlex.quote(c.path)}) echo {_words(c.subcommands)} ;;" for c in table if c.subcommands]
    out += ["  esac", "}", "_acrl_options() {", "  case $1 in"]
    out += [f"    {shlex.quote(c.path)}) echo {_words(s for o in c.options for s in o.strings)} ;;" for c in table]
    out += ["  esac", "}", "# 0 when option $2 of command $1 takes a value", "_acrl_takes_value() {",
            "  case \"$1|$2\" in"]
    valued = [shlex.quote(f"{c.path}|{s}") for c in table for o in c.options if o.takes_value for s in o.strings]
    out += [f"    {' | '.join(valued)}) return 0 ;;" if valued else "", "  esac", "  return 1", "}",
            "_acrl_choices() {", "  case \"$1|$2\" in"]
    out += [f"    {shlex.quote(f'{c.path}|{s}')}) echo {_words(o.choices)} ;;"
            for c in table for o in c.options if o.choices for s in o.strings]
    out += [f"    {shlex.quote(c.path + '|')}) echo {_words(c.positional)} ;;" for c in table if c.positional]
    out += ["  esac", "}", _BASH_MAIN]
    return "\n".join(line for line in out if line) + "\n"


_BASH_MAIN = r"""_acrl() {
  local cur=${COMP_WORDS[COMP_CWORD]} prev="" path=${COMP_WORDS[0]##*/} i=1 word words
  while ((i < COMP_CWORD)); do
    word=${COMP_WORDS[i]}
    if [[ $word == -* ]]; then
      if [[ $word != *=* ]] && _acrl_takes_value "$path" "$word"; then ((i++)); fi
    elif [[ " $(_acrl_commands "$path") " == *" $word "* ]]; then
      path="$path $word"
    fi
    ((i++))
  done
  ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD-1]}
  COMPREPLY=()
  if [[ $prev == -* ]] && _acrl_takes_value "$path" "$prev"; then
    words=$(_acrl_choices "$path" "$prev")
  elif [[ $cur == -* ]]; then
    words=$(_acrl_options "$path")
  else
    words=$(_acrl_commands "$path")
    [[ -n $words ]] || words=$(_acrl_choices "$path" "")
  fi
  if [[ -n $words ]]; then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
  else
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F _acrl acrl acrl-compile"""


def zsh_script(table: list[Command]) -> str:
    """zsh's: the bash script through zsh's bashcompinit (one table, one walk)."""
    return ("# acrl and acrl-compile completion for zsh, generated by `acrl completion zsh`.\n# Install: acrl "
            "completion zsh > ~/.acrl-completion.zsh, and in ~/.zshrc, after compinit: source ~/.acrl-completion.zsh\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash_script(table).split("\n", 3)[3])


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _fish_option(o: Option) -> str:
    flags = " ".join(f"-l {s[2:]}" if s.startswith("--") else f"-s {s[1:]}" for s in o.strings)
    value = (f" -x -a {_fish_quote(' '.join(o.choices))}" if o.choices else " -r -F") if o.takes_value else ""
    return f"{flags}{value} -d {_fish_quote(o.help)}"


def fish_script(table: list[Command]) -> str:
    """fish's: a `complete` line per subcommand and option, conditioned on the subcommands typed (every command
    path's last word is unique among its siblings; nested ones also need their parent's)."""
    out = ["# acrl and acrl-compile completion for fish, generated by `acrl completion fish`.",
           "# Install: acrl completion fish > ~/.config/fish/completions/acrl.fish"]
    for c in table:
        program, *words = c.path.split(" ")
        if words:
            base = "; and ".join(f"__fish_seen_subcommand_from {w}" for w in words)
        else:
            base = "__fish_use_subcommand" if c.subcommands else ""
        listing = f"{base}; and not __fish_seen_subcommand_from {' '.join(c.subcommands)}" if words else base
        for condition, lines in ((listing, [f"-f -a {_fish_quote(name)} -d {_fish_quote(_first_sentence(text))}"
                                            for name, text in c.subcommands.items()]),
                                 (base, [f"-f -a {_fish_quote(' '.join(c.positional))}"] if c.positional else []),
                                 (base, [_fish_option(o) for o in c.options])):
            head = f"complete -c {program}" + (f" -n {_fish_quote(condition)}" if condition else "")
            out += [f"{head} {line}" for line in lines]
    return "\n".join(out) + "\n"


def run_completion(args: argparse.Namespace) -> int:
    from .._pipeline.model_args.catalog import CATALOG  # lazy: the catalog's names, for this command only

    roots = [args.root, *(make() for make in args.more_roots)]
    table = commands(roots, list(CATALOG))
    script = {"bash": bash_script, "zsh": zsh_script, "fish": fish_script}[args.shell](table)
    sys.stdout.write(script)
    return EXIT_OK
