"""The few command substitutions whose output the importer can know without running anything:
``seq`` of integers, ``basename`` and ``dirname`` (coreutils' behaviour, computed here). Each takes
the already-expanded words after the command name and returns what bash would substitute (the
output without its trailing newlines), or raises :class:`Refused` saying why it is not evaluated
(an option it does not model, a ``seq`` of over :data:`SEQ_MAX` numbers, a non-integer ``seq``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

SEQ_MAX = 10_000  # the most numbers one $(seq ...) may produce (slime's scripts: 31)
_INTEGER = re.compile(r"[+-]?[0-9]{1,18}")  # what seq reads as an integer; longer numbers are not evaluated


class Refused(ValueError):
    """The substitution is not evaluated; the message says why."""


def _operands(name: str, words: Sequence[str], most: int) -> list[str]:
    """``words`` without a leading ``--``; an option (``-s``, ``-w``, ...) is refused."""
    words = list(words)
    if words and words[0] == "--":
        words = words[1:]
    elif words and words[0].startswith("-") and len(words[0]) > 1 and not _INTEGER.fullmatch(words[0]):
        raise Refused(f"{name} {words[0]}: options of {name} are not evaluated")
    if not 1 <= len(words) <= most:
        raise Refused(f"{name} takes 1 to {most} operands here, not {len(words)}")
    return words


def seq(words: Sequence[str]) -> str:
    """``seq LAST``, ``seq FIRST LAST``, ``seq FIRST STEP LAST`` of integers, one number a line."""
    operands = _operands("seq", words, 3)
    if not all(_INTEGER.fullmatch(w) for w in operands):
        raise Refused("seq of other than integers (at most 18 digits) is not evaluated")
    numbers = [int(w) for w in operands]
    first, step, last = (1, 1, numbers[0]) if len(numbers) == 1 else \
        (numbers[0], 1, numbers[1]) if len(numbers) == 2 else tuple(numbers)
    if step == 0:
        raise Refused("seq with a step of 0 never ends (seq itself refuses it)")
    count = max(0, (last - first) // step + 1)
    if count > SEQ_MAX:
        raise Refused(f"seq would produce {count:,} numbers, over {SEQ_MAX:,} (the limit)")
    return "\n".join(str(first + i * step) for i in range(count))


def basename(words: Sequence[str]) -> str:
    """``basename NAME [SUFFIX]``: NAME without its folders (and the SUFFIX, unless that is all of it)."""
    name, *suffix = _operands("basename", words, 2)
    stripped = name.rstrip("/")
    if not stripped:
        return "/" if name else ""
    base = stripped.rsplit("/", 1)[-1]
    if suffix and suffix[0] and base != suffix[0] and base.endswith(suffix[0]):
        base = base[:-len(suffix[0])]
    return base


def dirname(words: Sequence[str]) -> str:
    """``dirname NAME``: NAME without its last component ("." when it has no folder)."""
    (name,) = _operands("dirname", words, 1)
    stripped = name.rstrip("/")
    if not stripped:
        return "/" if name else "."
    if "/" not in stripped:
        return "."
    folder = stripped.rsplit("/", 1)[0].rstrip("/")
    return folder or "/"


COMMANDS: dict[str, Callable[[Sequence[str]], str]] = {"seq": seq, "basename": basename, "dirname": dirname}
