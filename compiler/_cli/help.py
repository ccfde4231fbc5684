"""`--help`: argparse's formatter at the width argparse would choose, and the help text kept from last
time (compiler/_fast/cache.py), so that `acrl --help` need build no parser to print it again.

Imports nothing but os and sys up front: argparse when a formatter is made, the help cache when it is
read (`acrl --help` stays as fast as the interpreter allows; docs/performance.md).
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence


def HelpFormatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter, given the width argparse would compute itself: argparse finds it with
    shutil.get_terminal_size, and importing shutil (with zlib, bz2 and lzma) is ~3 ms of `acrl --help`."""
    return formatter_class()(prog, width=terminal_columns() - 2)


_FORMATTER: type[argparse.HelpFormatter] | None = None
EXAMPLES_HEADING = "examples:"  # an epilog that starts so is printed as written (examples.py writes them)


def formatter_class() -> type[argparse.HelpFormatter]:
    """argparse.HelpFormatter, except that an epilog of examples (EXAMPLES_HEADING, then one command a line) keeps
    its lines: argparse would fill them into one paragraph. Descriptions and help are wrapped as argparse does."""
    global _FORMATTER
    if _FORMATTER is None:
        import argparse  # lazy: only a parser being built needs it, never a kept --help

        class Formatter(argparse.HelpFormatter):
            def _fill_text(self, text: str, width: int, indent: str) -> str:
                if text.startswith(EXAMPLES_HEADING):
                    return "\n".join(indent + line if line else line for line in text.splitlines())
                return super()._fill_text(text, width, indent)

        _FORMATTER = Formatter
    return _FORMATTER


def terminal_columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0
        except (AttributeError, ValueError, OSError):  # closed, detached or not a terminal
            columns = 0
    return columns or 80


def help_words(argv: Sequence[str] | None) -> list[str] | None:
    """The command line if all it asks for is help (command names, then -h or --help), else None."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[-1] in ("-h", "--help") and all(w.replace("-", "").isalnum() and not w.startswith("-")
                                                        for w in words[:-1]):
        return words
    return None


def print_kept_help(prog: str, argv: Sequence[str] | None) -> bool:
    """Print the help argparse printed last time for this command line, if it is kept and current
    (compiler/_fast/cache.py); then no parser need be built."""
    words = help_words(argv)
    if words is None:
        return False
    from .._fast.cache import help_text  # lazy: only a request for help reads the kept text

    text = help_text(prog, words, terminal_columns())
    if text is None:
        return False
    sys.stdout.write(text)
    return True


def print_help_and_keep_it(parser: argparse.ArgumentParser, words: list[str], key: str) -> None:
    """argparse's help for ``words`` on stdout, as parse_args prints it, kept for next time. Returns
    (having printed nothing) when argparse does not take the words as a request for help, e.g.
    ``acrl explain BUNDLE --help``, where --help is the KEY argument."""
    # lazy: only a request for help that was not kept builds and keeps it
    import io

    # lazy: as above
    from .._fast.cache import keep_help

    buffer = io.StringIO()
    real, sys.stdout = sys.stdout, buffer
    try:
        parser.parse_args(words)
        return
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.stdout = real
    text = buffer.getvalue()
    sys.stdout.write(text)
    if code == 0 and text:
        keep_help(key, words, terminal_columns(), text)
    raise SystemExit(code)
