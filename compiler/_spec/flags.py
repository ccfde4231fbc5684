"""Flags: how spec values become argv tokens, which flags carry credentials, and which flags are
known to be absent at the slime commits acrl has facts about."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .. import _secrets
from .._slime.commit_facts import absent_flags
from .setting import FlagValue


def known_absent_flags(commit: str) -> Mapping[str, str] | None:
    """Flags that do not exist at ``commit`` (``flag in absent``, ``absent[flag]`` says since when), from the facts
    acrl generates from slime's and Megatron-LM's code per commit (compiler/_slime/commits, made by
    ``python -m acrl.compiler._slime.flag_facts``); None when acrl has no facts about the commit. slime would
    silently ignore such a flag (all its parsers use parse_known_args). Generated ``--sglang-*`` flags are never
    absent here."""
    return absent_flags(commit)


def did_you_mean(flag: str, commit: str) -> str | None:
    """The flag of ``commit`` closest to ``flag`` (a misspelling), or None (no facts, or nothing close)."""
    absent = absent_flags(commit)
    if absent is None:
        return None
    import difflib  # lazy: only for a flag the targeted commit lacks

    close = difflib.get_close_matches(flag, absent.facts.flags, n=1, cutoff=0.75)
    return close[0] if close else None


def is_credential_flag(flag: str) -> bool:
    """True for flags whose value is a credential (slime logs its whole namespace to W&B): see
    :func:`._secrets.is_credential_flag` (case, ``_``, ``=value`` and abbreviations included)."""
    return _secrets.is_credential_flag(flag)


def without_credentials(address: str) -> str:
    """``address`` without its user:password@ part (:func:`._secrets.without_credentials`)."""
    return _secrets.without_credentials(address)


def is_secret_env_name(name: str) -> bool:
    """True for environment variable names that look like they hold a secret
    (:func:`._secrets.is_secret_name`)."""
    return _secrets.is_secret_name(name)


def normalize_flag(name: str) -> str:
    """``num-layers`` and ``--num-layers`` both mean ``--num-layers``."""
    return name if name.startswith("-") else f"--{name}"


def format_value(value: object) -> str:
    """The argv token of a scalar, as Python's str() writes it (the way SlimeRunner did)."""
    if isinstance(value, bool):
        raise TypeError("booleans are flags, not values")
    return str(value)


def flag_tokens(flag: str, value: FlagValue | None) -> list[str]:
    """argv tokens for one flag: true -> [flag], false/None -> [], list -> [flag, *values]."""
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, list):
        return [flag, *(format_value(v) for v in value)]
    return [flag, format_value(value)]


def table_tokens(table: Mapping[str, FlagValue]) -> list[str]:
    """argv tokens of a flag table such as [model.args] or [extra.flags], in written order."""
    out: list[str] = []
    for name, value in table.items():
        out += flag_tokens(normalize_flag(name), value)
    return out


def flags_in(tokens: Iterable[str]) -> list[str]:
    """The option tokens (``--x``) of an argv list, values excluded."""
    return [t for t in tokens if t.startswith("--") and len(t) > 2 and not is_number(t)]


def is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def parse_flags(tokens: Sequence[str]) -> dict[str, list[str]]:
    """``--a 1 --b --c x y`` -> {--a: [1], --b: [], --c: [x, y]} (last occurrence wins)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for token in tokens:
        if token.startswith("--") and not is_number(token):
            current = out[token] = []
        elif current is not None:
            current.append(token)
    return out
