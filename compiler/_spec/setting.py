"""The vocabulary of the spec's tables (compiler/_spec/tables.py): the ``setting`` field constructor whose
metadata is the one description of a key, the flag-value types and the enumerations of string keys."""

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
) -> Any:
    """An attrs field with acrl's metadata. Required when neither default nor factory is given."""
    metadata = {"doc": doc, "flag": flag, "ge": ge, "gt": gt, "le": le, "lt": lt, "omit_if": omit_if}
    if factory is not None:
        return attrs.field(factory=factory, metadata=metadata)
    return attrs.field(default=default, metadata=metadata)
