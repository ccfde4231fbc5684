"""Flags: how spec values become argv tokens, which flags carry credentials, and which flags are
known to be absent at the slime commits acrl has facts about."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from .. import _secrets
from .setting import FlagValue

# Facts from slime's own parsers at the commits acrl knows. A flag listed for a commit does not
# exist there: slime would silently ignore it (all its parsers use parse_known_args).
_REMOVED_BEFORE_PIN = {"--use-dynamic-global-batch-size": "removed from slime on 2026-05-25"}
_ONLY_AT_PIN = {
    flag: "removed from slime after fa3c990 (--megatron-to-hf-mode on 2026-08-04)"
    for flag in ("--custom-delta-pre-push-path", "--megatron-to-hf-mode", "--train-memory-margin-bytes",
                 "--update-weight-delta-dir", "--update-weight-delta-keep-files", "--update-weight-encoding")
}
_ONLY_AT_HEAD = {
    flag: "added to slime after fa3c990"
    for flag in ("--ci-train-rollout-logprob-abs-diff-threshold", "--custom-update-weight-post-write-path",
                 "--freeze-indexer", "--megatron-deepgemm-forward-layers",
                 "--megatron-deepgemm-forward-modules", "--megatron-deepgemm-moe-forward-layers",
                 "--megatron-deepgemm-moe-forward-modules", "--release-train", "--rollout-sample-hook-path",
                 "--update-weight-delta-checksum", "--update-weight-delta-encoding",
                 "--update-weight-local-checkpoint-dir")
}
KNOWN_COMMITS: Mapping[str, Mapping[str, str]] = {
    "fa3c990af6f18efd3fd9922698bf4bf4048d1263": {**_REMOVED_BEFORE_PIN, **_ONLY_AT_HEAD},
    "624b824a8": {**_REMOVED_BEFORE_PIN, **_ONLY_AT_PIN},
}


def known_absent_flags(commit: str) -> Mapping[str, str] | None:
    """Flags known not to exist at ``commit`` (with why), or None when acrl has no facts about it."""
    commit = commit.lower()
    for known, absent in KNOWN_COMMITS.items():
        if len(commit) >= 7 and (known.startswith(commit) or commit.startswith(known)):
            return absent
    return None


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
