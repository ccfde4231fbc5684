"""What the command lines' handlers (compiler/_cli/main.py, compile_cmd.py, commands.py) share: the
exit statuses and the JSON they print. Below all of them; imports nothing up front, so that
`acrl --help` does not pay for json."""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    from typing import Any

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERNAL = 0, 1, 2, 70


def print_json(data: Any) -> None:
    import json  # lazy: only the commands that print JSON need it, `acrl --help` never does

    print(json.dumps(data, indent=2, sort_keys=True))
