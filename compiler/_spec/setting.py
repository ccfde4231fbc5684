"""The vocabulary of the spec's tables (compiler/_spec/tables.py): the ``setting`` field constructor whose
metadata is the one description of a key, the flag-value types and the enumerations of string keys."""

from collections.abc import Mapping
from typing import Any, Literal

import attrs

FlagScalar = bool | int | float | str
FlagValue = FlagScalar | list[int | float | str]

AdvantageEstimator = Literal[
    "grpo", "gspo", "cispo", "reinforce_plus_plus", "reinforce_plus_plus_baseline", "ppo"
]
KlLossType = Literal["k1", "k2", "k3", "low_var_kl"]
LogLevel = Literal["debug", "info", "warning", "error", "critical"]
LrDecayStyle = Literal["constant", "linear", "cosine", "inverse-square-root", "WSD"]
AttentionBackend = Literal["flash", "fused", "unfused", "local", "auto"]
TrainMode = Literal["sync", "async"]
ModelArgsSource = Literal["auto", "args", "catalog", "hf", "script"]
HfMode = Literal["auto", "bridge", "raw"]


def key_flags(field: "attrs.Attribute[Any]") -> tuple[str, ...]:
    """Every flag a key can pass: its ``flag``, or the flags of its ``switches``."""
    flag = field.metadata.get("flag")
    return (flag,) if flag else tuple(dict.fromkeys((field.metadata.get("switches") or {}).values()))


def switch_for(field: "attrs.Attribute[Any]", value: Any) -> str | None:
    """The store-true flag a key of ``switches`` passes at ``value`` (None: no flag), the value's type included (a
    0 is not false)."""
    switches = field.metadata.get("switches") or {}
    return next((flag for v, flag in switches.items() if v == value and type(v) is type(value)), None)


def setting(
    default: Any = attrs.NOTHING,
    *,
    doc: str,
    flag: str | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    omit_if: Any = attrs.NOTHING,
    factory: Any = None,
    switches: Mapping[Any, str] | None = None,
    at_launch: bool = False,
) -> Any:
    """An attrs field with acrl's metadata. Required when neither default nor factory is given.

    ``switches``: for a key whose values pick store-true flags instead of being a flag's value (``flag`` is then
    None): value -> the flag that value passes; any other value passes none ([checkpoint] load_optimizer = false
    passes --no-load-optim). ``at_launch``: train.sh, not the argv written at compile time, decides whether ``flag``
    is passed ([checkpoint] load: only when the directory holds a checkpoint when train.sh runs)."""
    metadata = {"doc": doc, "flag": flag, "ge": ge, "gt": gt, "le": le, "lt": lt, "omit_if": omit_if,
                "switches": dict(switches or {}), "at_launch": at_launch}
    if factory is not None:
        return attrs.field(factory=factory, metadata=metadata)
    return attrs.field(default=default, metadata=metadata)
