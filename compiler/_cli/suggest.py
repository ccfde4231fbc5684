"""Did-you-mean for the command lines: a mistyped command (`acrl comple`), choice (`--format mardown`) or option
(`acrl-compile spec.toml --stirct`) is answered with the closest real one, and exit status 2.

argparse says "invalid choice: 'comple' (choose from ...)" with every command listed, and "unrecognized
arguments: --stirct" with the top-level usage although the option belongs to a subcommand. The parser class here
rewrites those two messages in its ``error`` (the one place argparse reports a usage error) and prints the usage of
the subcommand the words name. Imports nothing up front: the class is made when a parser is built.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Sequence
    from typing import Any, NoReturn

_PARSER: type[argparse.ArgumentParser] | None = None


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice most like ``word`` (difflib's ratio of at least 0.6), or None."""
    import difflib  # lazy: only a mistake needs it

    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def parser_class() -> type[argparse.ArgumentParser]:
    """argparse.ArgumentParser with did-you-mean messages (see the module's docstring); its subparsers are of
    the same class (argparse makes them with the class of the parser that adds them)."""
    global _PARSER
    if _PARSER is None:
        import argparse  # lazy: only a parser being built needs it, never a kept --help

        class ArgumentParser(argparse.ArgumentParser):
            words: list[str] = []  # noqa: RUF012 (each instance sets its own: the words it parsed last)

            def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                                 namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
                self.words = list(sys.argv[1:] if args is None else args)
                return super().parse_known_args(args, namespace)

            def error(self, message: str) -> NoReturn:
                target, message = _rewrite(self, message)
                target.print_usage(sys.stderr)
                target.exit(2, f"{target.prog}: error: {message}\n")

        _PARSER = ArgumentParser
    return _PARSER


def _subparsers(parser: argparse.ArgumentParser) -> argparse._SubParsersAction[Any] | None:
    import argparse  # lazy: the parsers are built, so it is imported already

    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _named(parser: argparse.ArgumentParser, words: Sequence[str]) -> argparse.ArgumentParser:
    """The (sub)command the words name: `acrl compile spec.toml --stirct` -> the parser of `acrl compile`."""
    for word in words:
        commands = _subparsers(parser)
        if commands is None:
            break
        if word in commands.choices:
            parser = commands.choices[word]
    return parser


def _rewrite(parser: argparse.ArgumentParser, message: str) -> tuple[argparse.ArgumentParser, str]:
    """The parser whose usage goes with ``message``, and the message with a suggestion where there is one."""
    import re  # lazy: only a usage error needs it

    invalid = re.fullmatch(r"argument (?P<arg>.+?): invalid choice: (?P<value>.+?) \(choose from (?P<choices>.*)\)",
                           message, re.S)
    if invalid is not None:
        value = _unquoted(invalid["value"])
        commands = _subparsers(parser)
        if commands is not None and commands.metavar == invalid["arg"] and value not in commands.choices:
            best = closest(value, commands.choices)
            kind = "command" if commands.metavar == "COMMAND" else str(commands.metavar or "command").lower()
            listed = ", ".join(commands.choices)
            return parser, (f"unknown {kind} {value!r}; did you mean {best!r}?" if best else
                            f"unknown {kind} {value!r}; the {kind}s are: {listed}")
        choices = [_unquoted(c) for c in invalid["choices"].split(", ")]
        best = closest(value, choices)
        return parser, message + (f"; did you mean {best!r}?" if best else "")
    if message.startswith("unrecognized arguments: "):
        target = _named(parser, getattr(parser, "words", []))
        known = [o for action in target._actions for o in action.option_strings]
        unknown = message[len("unrecognized arguments: "):].split(" ")
        suggestions = []
        for word in unknown:
            if word.startswith("--") and len(word) > 2:
                best = closest(word.split("=", 1)[0], known)
                if best is not None:
                    suggestions.append(f"did you mean {best!r} for {word!r}?" if len(unknown) > 1
                                       else f"did you mean {best!r}?")
        return target, "; ".join([message, *suggestions])
    return parser, message


def _unquoted(text: str) -> str:
    """argparse's repr of a value ('comple') back to the value; one it did not quote as it is."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        import ast  # lazy: only a usage error needs it

        try:
            value = ast.literal_eval(text)
        except (ValueError, SyntaxError):
            return text
        return str(value)
    return text
