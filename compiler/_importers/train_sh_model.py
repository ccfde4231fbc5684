"""What `acrl import train-sh` knows of MODEL_ARGS without running anything, so that a MODEL_ARGS flag the script
repeats later on its command line becomes the override argparse makes of it (the last value counts) instead of a
second copy in ``[extra.flags]``: the flags of acrl's catalog entry for the model type, and of slime's
``scripts/models/<type>.sh`` where the script's ``source`` names a file on this machine, else in this machine's slime
checkout (``--slime-checkout`` / ``ACRL_SLIME_CHECKOUT``, else ``[slime] dir`` where it exists here:
compiler/_slime/checkout.py); read by the lexer (its ``MODEL_ARGS=( ... )`` words), never sourced.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from .._pipeline.bundle import read_input
from .._pipeline.model_args.catalog import entry
from .._pipeline.model_args.resolve import model_type_problem
from .._shell.lexer import ShellSyntaxError, lex
from .._slime.checkout import CheckoutError, locate

_MODEL_ARGS = re.compile(r"MODEL_ARGS\+?=")


def catalog_flags(model_type: str) -> tuple[str, ...]:
    """The flags of acrl's catalog entry ``model_type`` (none when it is not in the catalog)."""
    found = entry(model_type)
    return tuple(t for t in found.model_args() if t.startswith("--")) if found is not None else ()


def script_flags(file: Path) -> tuple[str, ...]:
    """The flags the model script ``file`` puts in MODEL_ARGS (its ``MODEL_ARGS=( ... )`` and ``MODEL_ARGS+=( ... )``
    arrays, wherever they are), read and never run; none when it cannot be read."""
    try:
        commands = lex(read_input(file).decode("utf-8"))
    except (OSError, UnicodeDecodeError, ShellSyntaxError):
        return ()
    flags: list[str] = []
    for command in commands:
        for word in command.words:
            head = word.parts[0] if word.parts else ("", "", True)
            if word.array is not None and head[0] == "lit" and _MODEL_ARGS.fullmatch(head[1]):
                flags += [w.text.split("=", 1)[0] for w in word.array if w.text.startswith("--")]
    return tuple(dict.fromkeys(flags))


def checkout_script(model_type: str, slime_dir: str, megatron_dir: str) -> Path | None:
    """``scripts/models/<model_type>.sh`` of this machine's slime checkout, where there is one holding it (a
    checkout given but missing is the compile's error to report, not the importer's)."""
    if model_type_problem(model_type) is not None:
        return None  # not a file name: never looked up (ACRL-M009 says why when the spec is compiled)
    try:
        checkout, _ = locate(slime_dir, megatron_dir)
    except CheckoutError:
        return None
    script = Path(checkout.path) / "scripts" / "models" / f"{model_type}.sh" if checkout is not None else None
    return script if script is not None and script.is_file() else None


def known_model_flags(model_type: str | None, script: Path | None, line: int, inline: Mapping[str, int],
                      slime_dir: str = "/root/slime", megatron_dir: str = "/root/Megatron-LM") -> dict[str, int]:
    """Every flag MODEL_ARGS is known to hold -> the line that put it there: the MODEL_ARGS array written in the
    script (``inline``), else the ``source`` line (``line``) of the catalog entry's and the model script's flags
    (``script`` where it is a file here, else the slime checkout's, see :func:`checkout_script`)."""
    if (script is None or not script.is_file()) and model_type:
        script = checkout_script(model_type, slime_dir, megatron_dir)
    out = dict.fromkeys((*(catalog_flags(model_type) if model_type else ()),
                         *(script_flags(script) if script is not None and script.is_file() else ())), line)
    out.update(inline)
    return out
