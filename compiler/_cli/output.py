"""What the command lines' handlers (compiler/_cli/main.py, compile_cmd.py, commands.py) share: the
exit statuses, the JSON they print, and the check that an input file named on the command line exists.
Below all of them; imports nothing but os up front, so that `acrl --help` does not pay for json."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_EXISTS, EXIT_INTERNAL = 0, 1, 2, 3, 70

# What `acrl-compile --help` (and `acrl compile --help`) says after what it does; README's "Exit status" says the same.
COMPILE_EXIT_STATUS = (
    "Exit status: 0 written (or unchanged, or printed); 1 the spec is invalid (with --check: the bundle is not "
    "what the spec compiles to); 2 usage error (a missing spec file, an unknown option or --print FILE); 3 "
    "nothing was written because the output directory holds a bundle modified by hand or compiled from another "
    "spec (--force replaces it), or files that are not a bundle; 70 a bug in acrl.")


def require_input(path: str, what: str, *, directory_ok: bool = False) -> None:
    """A UsageError (exit 2) when the input file ``path`` a command was given is missing (or a directory,
    unless ``directory_ok``: a bundle): the command line is wrong, not the spec (which the compile's own
    errors are about)."""
    if os.path.isdir(path) and not directory_ok:
        raise _usage_error(f"{path}: is a directory, not a {what} file", f"give the {what} file itself")
    if not os.path.lexists(path):
        raise _usage_error(f"{path}: no such {what}{'' if directory_ok else ' file'}",
                           "check the path (a relative path starts where you run the command)")


def _usage_error(message: str, hint: str) -> Exception:
    from ..errors import UsageError  # lazy: errors brings attrs; only a wrong command line needs it

    return UsageError(message, hint=hint)


def print_json(data: Any) -> None:
    import json  # lazy: only the commands that print JSON need it, `acrl --help` never does

    print(json.dumps(data, indent=2, sort_keys=True))
