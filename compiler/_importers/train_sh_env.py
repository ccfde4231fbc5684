"""The environment in `acrl import train-sh`: the ``--env NAME=VALUE`` values the script reads from its own; the
runtime env's PYTHONPATH (``--runtime-env-json``'s ``env_vars``): Megatron-LM's entry -> ``[slime] megatron_dir``,
the others -> ``[env] pythonpath`` / ``pythonpath_before_megatron``; and the ``no_proxy`` the script exports before
``ray start --head`` where it holds more than acrl's train.sh puts there."""

from __future__ import annotations

from collections.abc import Sequence

from .._secrets import ENV_NAME, looks_secret_value
from .._shell.eval import MARK, MAX_CHARS, Text
from ..errors import UsageError
from .train_sh_map import SpecBuilder


def environment(assignments: Sequence[str]) -> dict[str, str]:
    """``--env NAME=VALUE`` options as the variables the script reads from its environment (the last of a name
    counts, as with env(1)). Raises UsageError for one that is not NAME=VALUE."""
    out: dict[str, str] = {}
    for item in assignments:
        name, equals, value = item.partition("=")
        if not equals or not ENV_NAME.fullmatch(name):
            shown = "(not shown: it looks secret)" if looks_secret_value(item) else repr(item)
            raise UsageError(f"--env {shown}: not NAME=VALUE with NAME a variable name (letters, digits and _, "
                             "not starting with a digit)", hint="write --env MODEL_DIR=/data/models/Qwen3-4B, one "
                             "--env per variable")
        if len(value) > MAX_CHARS:
            raise UsageError(f"--env {name}=...: the value is over {MAX_CHARS >> 20} MiB (the limit)",
                             hint="give a shorter value")
        out[name] = value
    return out


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



def more_no_proxy(builder: SpecBuilder, name: str, value: Text | None, line: int) -> bool:
    """Whether ``export no_proxy=VALUE`` before the script's `ray start --head` holds entries acrl's train.sh does not
    export itself (127.0.0.1, and MASTER_ADDR with [cluster] node_ip_address: templates/train.sh.jinja), such as
    slime's run-glm5.2-744B-A40B.sh's CIDR ranges: then (with a note) the whole value goes to [cluster] env, which the
    head's Ray processes get. A value that cannot be resolved is left to acrl's train.sh (noted by the caller)."""
    if name != "no_proxy" or value is None or value.problem or MARK in value.text:
        return False
    address = builder.spec["cluster"].get("node_ip_address")
    extra = [e for e in value.text.split(",") if e.strip() and e.strip() not in ("127.0.0.1", address)]
    if extra:
        builder.note("difference", f"export no_proxy before `ray start`: {','.join(extra)} is more than acrl's "
                                   "train.sh exports (127.0.0.1 and MASTER_ADDR): [cluster] env no_proxy holds the "
                                   "script's whole value for the head's Ray processes, MASTER_ADDR as given to the "
                                   "import", Text("", line))
    return bool(extra)
