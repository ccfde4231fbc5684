"""The integration profile `acrl import train-sh` chooses for a script (compiler/_spec/profiles.py), and each key's
default under it, for the importer's "the script does not pass X: acrl passes ..." notes.

agentcore: the toolkit's rollout function, or a custom config naming an agent_runtime_arn; custom: any other
function path (--rollout-function-path, --custom-generate-function-path, --custom-rm-path,
--custom-reward-post-process-path); slime otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._spec import profiles
from .._spec.flag_index import FlagKey
from .._spec.profiles import TOOLKIT_ROLLOUT, Integration

_FUNCTIONS = tuple(key.split(".", 1)[1] for key in profiles.CUSTOM_FUNCTION_KEYS)


def choose(spec: Mapping[str, Mapping[str, Any]]) -> tuple[Integration, str]:
    """The profile of the spec the importer built, and why (for its note)."""
    rollout, agentcore = spec.get("rollout", {}), spec.get("agentcore", {})
    if rollout.get("function_path") == TOOLKIT_ROLLOUT:
        return "agentcore", "the script runs the toolkit's rollout function"
    if "runtime_arn" in agentcore:
        return "agentcore", "the script's custom config names an agent_runtime_arn"
    named = [f"[rollout] {name}" for name in _FUNCTIONS if rollout.get(name)]
    if named:
        return "custom", f"the script names its own functions ({', '.join(named)})"
    return "slime", "the script runs slime's own rollout (no toolkit function, no custom config with a runtime ARN)"


def default_of(key: FlagKey, integration: Integration) -> Any:
    """What acrl uses for ``key`` when the spec does not set it: the profile's value, else the field's default."""
    row = profiles.by_key().get(key.path)
    return row.value(integration) if row is not None else key.default


def faithful(key: FlagKey, integration: Integration) -> Any:
    """For a script of the agentcore profile that does not pass ``key``'s flag: the value slime uses then, where
    the agentcore profile would pass another one and the spec can state it (the row's slime value, else its
    ``native``: Megatron-LM's or sglang's documented default); None otherwise."""
    row = profiles.by_key().get(key.path)
    if integration != "agentcore" or row is None or key.kind == "switch":
        return None
    value = row.slime if row.slime is not None else row.native
    return value if value is not None and value != row.agentcore else None


def faithful_note(key: FlagKey, value: Any, default: Any) -> str:
    return (f"the script does not pass {key.flag}: [{key.table}] {key.key} = {value!r}, what slime uses "
            f"({profiles.by_key()[key.path].where}), not the agentcore profile's {default!r}")


def whose(key: FlagKey, integration: Integration) -> str:
    """Whose default that is, for a note: "the slime profile's default of [rollout] max_response_len"."""
    if key.path in profiles.by_key():
        return f"the {integration} profile's default of [{key.table}] {key.key}"
    return f"the default of [{key.table}] {key.key}"
