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
# What a string key holds, checked on every value (compiler/_pipeline/values.py): "path", a file or directory; "name",
# a name or an id (no spaces around it, no line break); "function", a Python function as module.function (slime's
# load_function, slime/utils/misc.py:39-47 at 624b824: rpartition(".") then import_module). Each refuses an empty
# value, control characters and absurd lengths. For a table or an array key, the kind of each value (item).
Kind = Literal["path", "name", "function"]
MAX_STRING = 16_384  # characters of any string: no key needs more (a path has at most 4,095 bytes)
# The most of a kind: a path's bytes (Linux's PATH_MAX, 4096 with the terminating NUL; the schema can only bound its
# characters), a name's or a function's characters (no id, bucket, parser, W&B project or Kubernetes name comes near).
LONGEST: dict[Kind, int] = {"path": 4095, "name": 256, "function": 512}
# What every value of a kind matches: visible characters (no control character, Unicode line separator or
# reordering mark), the first and the last not blank; a function is module.function (ASCII identifiers). Both end in
# (?![\s\S]), the end of the text in every regex dialect ("$" lets a final line break through in Python's).
_HIDDEN = r"\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069"
VISIBLE = rf"^[^\s{_HIDDEN}](?:[^{_HIDDEN}]*[^\s{_HIDDEN}])?(?![\s\S])"
FUNCTION = r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?![\s\S])"


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
    kind: Kind | None = None,
    key_kind: Kind | None = None,
) -> Any:
    """An attrs field with acrl's metadata. Required when neither default nor factory is given.

    ``switches``: for a key whose values pick store-true flags instead of being a flag's value (``flag`` is then
    None): value -> the flag that value passes; any other value passes none ([checkpoint] load_optimizer = false
    passes --no-load-optim). ``at_launch``: train.sh, not the argv written at compile time, decides whether ``flag``
    is passed ([checkpoint] load: only when the directory holds a checkpoint when train.sh runs). ``kind``: what a
    string value (each value of a table, each item of an array) holds; ``key_kind``: what a table key's names hold."""
    metadata = {"doc": doc, "flag": flag, "ge": ge, "gt": gt, "le": le, "lt": lt, "omit_if": omit_if,
                "switches": dict(switches or {}), "at_launch": at_launch, "kind": kind, "key_kind": key_kind}
    if factory is not None:
        return attrs.field(factory=factory, metadata=metadata)
    return attrs.field(default=default, metadata=metadata)
