"""The runtime env's PYTHONPATH in `acrl import train-sh` (``--runtime-env-json``'s ``env_vars``): Megatron-LM's
entry -> ``[slime] megatron_dir``, the others -> ``[env] pythonpath`` / ``pythonpath_before_megatron``."""

from __future__ import annotations

from .._shell.eval import Text
from .train_sh_map import SpecBuilder


def pythonpath(builder: SpecBuilder, value: str, line: int) -> None:
    """Megatron's entry -> [slime] megatron_dir; the others, in the script's order, -> [env]
    pythonpath_before_megatron (before it) and pythonpath (after it, or all of them without it)."""
    at = Text("", line)
    before: list[str] = []
    after: list[str] = []
    seen_megatron = False
    for entry in filter(None, value.split(":")):
        if "megatron" in entry.lower() and not seen_megatron:
            seen_megatron = True
            megatron = entry.rstrip("/") or entry
            known = builder.spec["slime"].get("megatron_dir")
            if known is not None and known.rstrip("/") != megatron:
                builder.note("difference", f"env_vars PYTHONPATH: {entry} is not MEGATRON_DIR ({known}); "
                                           "[slime] megatron_dir keeps MEGATRON_DIR", at)
            else:
                builder.spec["slime"]["megatron_dir"] = megatron
        elif not entry.startswith("/"):
            builder.note("difference", f"env_vars PYTHONPATH: {entry} is not an absolute path (the job runs in the "
                                       "bundle's folder); not imported: add its absolute path to [env] pythonpath",
                         at)
        else:
            (after if seen_megatron else before).append(entry)
    if not seen_megatron:
        after, before = before, []
        builder.note("difference", "env_vars PYTHONPATH: no Megatron-LM entry; acrl's train.sh puts [slime] "
                                   "megatron_dir first", at)
    env = builder.spec.setdefault("env", {})
    for key, entries in (("pythonpath_before_megatron", before), ("pythonpath", after)):
        if entries:
            env[key] = entries

