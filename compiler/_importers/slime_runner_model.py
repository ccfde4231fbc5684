"""MODEL_ARGS of a SlimeRunner import (``acrl import slime-runner``): slime's model script from this machine's slime
checkout when one holds it, else acrl's catalog entry of the same name (noted), else the script, unresolved (noted).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .._pipeline.model_args.catalog import entry
from .._pipeline.model_args.resolve import is_file_here, model_type_problem
from .._slime.checkout import SLIME_ENV, SLIME_OPTION, CheckoutError, locate
from ..errors import UsageError
from .base import Note


def model_args(spec: dict[str, dict[str, Any]], data: Mapping[str, Any]) -> tuple[list[Note], set[str]]:
    """SlimeRunner sourced slime's scripts/models/<model_type>.sh on the cluster at every run; acrl reads MODEL_ARGS at
    compile time, from this machine's slime checkout (--slime-checkout, ACRL_SLIME_CHECKOUT, else [slime] dir where
    it exists here: _slime/checkout.py). With no checkout holding the script, a model of acrl's catalog takes the
    catalog's args (noted: they may differ from the script's), so that the spec compiles anywhere. Also the flags
    MODEL_ARGS will hold, for extra_flags that repeat one."""
    slime = spec.get("slime", {})
    model_type = data["model_type"]
    spec["model"]["args_source"] = "script"
    if not isinstance(model_type, str) or model_type_problem(model_type) is not None:
        return [], set()  # never sourced: the compile that follows says why (ACRL-M009)
    try:
        checkout, _ = locate(slime.get("dir", "/root/slime"), slime.get("megatron_dir", "/root/Megatron-LM"))
    except CheckoutError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None
    relative = f"scripts/models/{model_type}.sh"
    script = Path(checkout.path) / relative if checkout is not None else None
    if script is not None and is_file_here(script):
        return [], _script_flags(script)
    where = (f"the slime checkout {checkout.shown()} has no {relative}" if checkout is not None else
             f"no slime checkout is on this machine ([slime] dir {slime.get('dir', '/root/slime')} is the cluster's "
             f"path and does not exist here; give one with {SLIME_OPTION} DIR or {SLIME_ENV}=DIR)")
    published = entry(model_type)
    if published is None:
        return [Note("unresolved", f"MODEL_ARGS: {where}. SlimeRunner sourced slime's {relative} on the cluster at "
                     "every run; acrl reads it at compile time and freezes the result into model_args.sh, and "
                     f"{model_type} is not in acrl's catalog (`acrl models`). Import or compile with "
                     f"{SLIME_OPTION} DIR (this machine's slime checkout), or give the architecture in [model.args]",
                     "model.args_source")], set()
    spec["model"]["args_source"] = "catalog"
    return [Note("difference", f"MODEL_ARGS: {where}, so [model] args_source = \"catalog\": acrl's catalog entry "
                 f"{published.name} (written from {published.source}'s config.json; `acrl models show "
                 f"{published.name}`), where SlimeRunner sourced slime's {relative} on the cluster. The two can "
                 "differ (performance flags the script adds, a corrected norm epsilon); to keep slime's script, set "
                 f"args_source = \"script\" and compile with {SLIME_OPTION} DIR", "model.args_source")], \
        {t for t in published.model_args() if t.startswith("--")}


def _script_flags(script: Path) -> set[str]:
    """The flags ``script`` puts in MODEL_ARGS, sourced as the compile sources it (_model_args): a clean environment
    and an empty folder, so the flags found here are the ones the bundle's MODEL_ARGS will hold, and the script sees
    none of this shell's secrets."""
    try:
        with tempfile.TemporaryDirectory(prefix="acrl-import-") as empty:
            out = subprocess.run(["bash", "--noprofile", "--norc", "-c", 'source "$1" >/dev/null 2>&1; '
                                  'printf "%s\\0" "${MODEL_ARGS[@]}"', "acrl", str(script)],
                                 env={"PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": empty},
                                 cwd=empty, capture_output=True, timeout=10, check=False).stdout
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return set()  # the compile that follows says why
    return {t for t in out.decode("utf-8", "replace").split("\0") if t.startswith("--")}
