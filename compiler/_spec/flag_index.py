"""The reverse of the spec's flag metadata: slime flag -> spec key, and how the flag's words become
the key's value. Importers (`acrl import train-sh`) read a command line back into a spec with it, and ACRL-F002
(_pipeline/validate/flags.py) refuses a key's flag in the escape hatch, naming the key and its line.

The index is built from :mod:`acrl.compiler._spec.tables`'s ``setting(..., flag=...)`` metadata, so a key added there
is found here without any change. A few flags acrl sets from a key without a ``flag`` entry (or
derives) are added by hand in :data:`_BY_HAND`.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from .._slime.sglang_stack import sglang_at, slime_flag
from .tables import table_types

Kind = Literal["switch", "scalar", "pairs", "list"]


@attrs.frozen
class FlagKey:
    """Where a flag lands in a spec: ``table.key``, its kind, its Python type and its default.

    ``switch``: a store-true flag (a bool key); ``scalar``: one value (int, float or str);
    ``pairs``: ``name value name value ...`` into a table (``[eval] datasets``); ``list``: one or more values into
    a list key (``[rollout] external_engine_addrs``, nargs="+")."""

    flag: str
    table: str
    key: str
    kind: Kind
    type: type
    default: Any  # attrs.NOTHING when the key is required
    omit_if: Any  # attrs.NOTHING when the flag is always passed
    sets: Any = True  # a switch: the value it gives its key (--no-load-optim: [checkpoint] load_optimizer = false)

    @property
    def path(self) -> str:
        return f"{self.table}.{self.key}"

    @property
    def optional(self) -> bool:
        """True when leaving the key out means leaving the flag out."""
        if self.kind == "switch" and self.sets is not True:  # one of a key's switches: unset passes none
            return True
        if self.default is None or self.default is False or self.default == {} or self.default == []:
            return True
        return self.omit_if is not attrs.NOTHING and self.omit_if == self.default


class CoerceError(ValueError):
    """The flag's words cannot be the key's value; the message says why."""


# Keys whose flag is not in the metadata: (flag, table, key, type).
_BY_HAND: tuple[tuple[str, str, str, type], ...] = (
    ("--megatron-to-hf-mode", "model", "megatron_to_hf_mode", str),
    # [sglang] cuda_graph_max_bs's name where the targeted sglang deprecates --cuda-graph-max-bs (0.5.15.post1:
    # compiler/_slime/sglang_stack.py), as slime's own scripts at 624b824 may write it
    ("--sglang-cuda-graph-max-bs-decode", "sglang", "cuda_graph_max_bs", int),
)


def _base_type(annotation: Any) -> type:
    """``int | None`` -> int; ``Literal["a", "b"]`` -> str; ``dict[str, str]`` -> dict."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _base_type(inner)
    if origin is Literal:
        return type(typing.get_args(annotation)[0])
    if origin is not None:
        return typing.cast(type, origin)
    return typing.cast(type, annotation)


@functools.cache
def flag_index() -> Mapping[str, FlagKey]:
    """Every slime flag a spec key sets, with the key."""
    out: dict[str, FlagKey] = {}
    for name, table in table_types().items():
        for field in attrs.fields(table):
            flag = field.metadata.get("flag")
            if not flag:
                continue
            base = _base_type(field.type)
            kind: Kind = "switch" if base is bool else "pairs" if base is dict else "list" if base is list else "scalar"
            default = field.default
            if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
                default = default.factory(None) if default.takes_self else default.factory()
            out[flag] = FlagKey(flag, name, field.name, kind, base, default, field.metadata["omit_if"])
        for field in attrs.fields(table):  # a key whose values pick switches ([checkpoint] scheduler)
            default = field.default
            for value, switch in (field.metadata.get("switches") or {}).items():
                out[switch] = FlagKey(switch, name, field.name, "switch", _base_type(field.type), default,
                                      attrs.NOTHING, value)
    for flag, table_name, key, base in _BY_HAND:
        field = attrs.fields_dict(table_types()[table_name])[key]
        out[flag] = FlagKey(flag, table_name, key, "scalar", base, field.default, attrs.NOTHING)
    return out


def key_of(flag: str, commit: str) -> tuple[FlagKey, str] | None:
    """The spec key that sets ``flag`` at slime ``commit``, and the key's own flag: by the flag's name, by the name
    it is a deprecated alias of (--sglang-cuda-graph-max-bs at 624b824, whose sglang stores it as
    --sglang-cuda-graph-max-bs-decode), or, for an --sglang-* flag, by another option of the same sglang argument
    there (--sglang-dp-size is --sglang-data-parallel-size: one argparse argument, one dest); None when no key
    sets it."""
    index = flag_index()
    renamed = slime_flag(commit, flag)
    for name in dict.fromkeys((flag, renamed)):
        if name in index:
            return index[name], renamed if renamed in index else name
    facts = sglang_at(commit) if flag.startswith("--sglang-") else None
    argument = facts.flags.get(flag) if facts is not None else None
    if facts is None or argument is None:
        return None
    same = next((f for f in index if facts.flags.get(f) is argument), None)
    return (index[same], same) if same is not None else None


def canonical_int(token: str) -> int | str:
    """``"36"`` -> 36; any token an int would not write back the same stays a string."""
    try:
        number = int(token)
    except ValueError:
        return token
    return number if str(number) == token else token


def coerce(key: FlagKey, words: Sequence[str]) -> Any:
    """The key's value for the flag's ``words`` (what followed the flag on the command line)."""
    if key.kind == "switch":
        if words:
            raise CoerceError(f"{key.flag} is a switch, but it is followed by {len(words)} value(s)")
        return key.sets
    if key.kind == "pairs":
        if not words or len(words) % 2:
            raise CoerceError(f"{key.flag} needs name/path pairs, got {len(words)} word(s)")
        return {words[i]: words[i + 1] for i in range(0, len(words), 2)}
    if key.kind == "list":
        if not words:
            raise CoerceError(f"{key.flag} needs at least one value")
        return list(words)
    if len(words) != 1:
        raise CoerceError(f"{key.flag} takes one value, got {len(words)}")
    (word,) = words
    if key.type is int:
        try:
            return int(word)
        except ValueError:
            raise CoerceError(f"{key.flag} takes an integer, got {word!r}") from None
    if key.type is float:
        try:
            return float(word)
        except ValueError:
            raise CoerceError(f"{key.flag} takes a number, got {word!r}") from None
    return word


def extra_value(words: Sequence[str]) -> bool | int | str | list[int | str]:
    """An [extra.flags] value that makes train.sh pass exactly ``words`` again: true for none, a
    scalar for one, a list for several (ints only where they write back identically)."""
    if not words:
        return True
    if len(words) == 1:
        return canonical_int(words[0])
    return [canonical_int(w) for w in words]
