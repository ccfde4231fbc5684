"""What "looks secret" means to acrl: one notion, used by the compiler's rules, the importers, the
generated train.sh (at run time, through :func:`runtime_policy`) and the executor.

Four things look secret:

- a variable NAME whose last word says so (``WANDB_API_KEY``, ``AWS_SESSION_TOKEN``, ``DB_PASSWORD``,
  ``HF_TOKEN``); words are split on ``_`` and must be whole words at the end, so
  ``MAX_TOKENS_PER_GPU``, ``TOKENIZER_PATH``, ``KEY_PATH`` and ``PAD_TOKEN`` are not secrets;
- a VALUE shaped like a credential: a URL or address with ``user:password@`` (with or without a
  scheme), a provider token with a known prefix (``sk-``, ``hf_``, ``ghp_``, ``AKIA``/``ASIA``, a
  JWT, a PEM private key), or, as a whole value, a 40-hex W&B key, a 40-character AWS secret key or
  a long high-entropy token;
- a command-line FLAG that carries a credential (``--wandb-key``, ``--sglang-api-key``,
  ``--router-oracle-password``, ``--*-api-key``, ...), after normalising the way a careless hand
  or argparse would accept it: any case, ``_`` for ``-``, ``--flag=value``, and any argparse
  abbreviation that can only mean a credential flag (``--wandb-k``);
- a name a job must never be handed from the launching shell (:func:`refuse_forward`): the secret
  names above, the W&B key's variable, the Ray addresses (which may hold user:password) and AWS_*.

:func:`redact` is the one way a message is cleaned before it is shown: secret-shaped values and the
values of secret-named assignments become ``***``.

Pure: imports only ``re`` and ``math`` (the compile path stays light).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

MASK = "***"

# --- names -------------------------------------------------------------------------------------

# Last words that make a variable name secret (words are split on '_', compared in upper case).
SECRET_LAST_WORDS = frozenset({"TOKEN", "PASSWORD", "PASSWD", "PASS", "PASSPHRASE", "SECRET", "SECRETS",
                               "CREDENTIAL", "CREDENTIALS", "APIKEY", "KEY", "KEYS", "PAT"})
# The word before a last TOKEN / KEY that makes it a vocabulary or data-field name instead
# (PAD_TOKEN, EOS_TOKEN, INPUT_KEY, LABEL_KEY: slime's --input-key names a dataset column).
NOT_SECRET_BEFORE = {
    "TOKEN": frozenset({"PAD", "EOS", "BOS", "UNK", "SEP", "CLS", "MASK", "SPECIAL", "START", "END", "STOP",
                        "IMAGE", "VIDEO", "AUDIO", "FIM", "MIDDLE", "PREFIX", "SUFFIX", "MAX", "MIN", "NUM", "NEW",
                        "FIRST", "LAST", "NEXT", "PER"}),
    "PASS": frozenset({"NUM", "FIRST", "SECOND", "LAST", "MULTI", "SINGLE", "ONE", "TWO", "FORWARD", "BACKWARD"}),
    "KEY": frozenset({"INPUT", "LABEL", "REWARD", "METADATA", "PROMPT", "RESPONSE", "TOOL", "TOOLS", "SORT",
                      "PARTITION", "CACHE", "DATA", "FIELD", "TEXT", "MESSAGE", "MESSAGES", "MULTIMODAL", "PUBLIC",
                      "QUERY", "PRIMARY", "FOREIGN", "GROUP", "HOT"}),
}
NOT_SECRET_BEFORE["KEYS"] = NOT_SECRET_BEFORE["KEY"]
# Names that are secret although their last word is not one of the above.
SECRET_NAMES = frozenset({"AWS_ACCESS_KEY_ID", "ACCESS_KEY_ID", "WANDB_API_KEY", "NETRC"})
# Names whose value must never be copied from the launching shell into the Ray job's metadata,
# whatever they look like: the W&B key (also under the name [wandb] key_env gives), the Ray
# addresses (an authenticated one holds user:password) and every AWS_* (profiles, keys, tokens).
NEVER_FORWARDED = frozenset({"WANDB_API_KEY", "ACRL_RAY_ADDRESS", "RAY_ADDRESS", "RAY_API_SERVER_ADDRESS"})
NEVER_FORWARDED_PREFIXES = ("AWS_",)
# A variable the secret checks may treat as a commit or hash: a 40-hex value there is not a W&B key.
_HASH_NAME = re.compile(r"(^|_)(COMMIT|SHA|SHA1|HASH|REV|REVISION|VERSION|CHECKSUM|DIGEST|REF)(_|$)")


def env_name(*, upper_case: bool = False, at_most: int | None = None) -> re.Pattern[str]:
    """The one environment-variable-name pattern (match it with ``fullmatch``): a letter or ``_``, then letters,
    digits and ``_``. ``upper_case``: no lower-case letter; ``at_most``: the longest name accepted."""
    letters = "A-Z" if upper_case else "A-Za-z"
    repeat = "*" if at_most is None else f"{{0,{at_most - 1}}}"
    return re.compile(f"[{letters}_][{letters}0-9_]{repeat}")


ENV_NAME = env_name()  # any name a shell takes ([env] vars and forward; model_args.resolve bounds it at 128)
_KEY_ENV_NAME = env_name(upper_case=True, at_most=64)  # [wandb] key_env: WANDB_API_KEY-shaped


def _words(name: str) -> list[str]:
    words = [w for w in name.upper().replace("-", "_").split("_") if w]
    while words and words[-1].isdigit():  # API_KEY_2, TOKEN_1: the number does not change what it is
        words.pop()
    return words


def is_secret_name(name: str) -> bool:
    """True for a variable or key name that holds a secret: its last word says so (``HF_TOKEN``,
    ``AWS_SECRET_ACCESS_KEY``, ``DB_PASSWORD``), not a data field's (``INPUT_KEY``, ``PAD_TOKEN``),
    nor a plural count or a path (``MAX_TOKENS``, ``KEY_PATH``, ``TOKENIZER_PATH``)."""
    words = _words(name)
    if not words:
        return False
    if "_".join(words) in SECRET_NAMES or name.upper() in SECRET_NAMES:
        return True
    last = words[-1]
    if last not in SECRET_LAST_WORDS:
        return False
    if last in ("KEY", "KEYS") and len(words) >= 2 and words[-2] == "API":
        return True
    return not (len(words) >= 2 and words[-2] in NOT_SECRET_BEFORE.get(last, frozenset()))


def refuse_forward(name: str, key_env: str | None = None) -> str | None:
    """Why ``name`` may not be forwarded from the launching shell to the Ray job (its value would be
    written into ``--runtime-env-json``, Ray's job metadata), or None when it may: the name clauses of
    the check train.sh runs (RUNTIME_FORWARD_CHECK), with the W&B key's and AWS_*'s own reasons."""
    upper = name.upper()
    if key_env and upper == key_env.upper():
        return "it holds the W&B key ([wandb] key_env names it)"
    why = _forward_check()(name, "", _names_policy())
    if why == _FORWARD_RULES[0][1] and upper not in NEVER_FORWARDED:
        return "AWS_* variables hold or select AWS credentials"
    return why or None


@functools.cache
def _forward_check() -> Callable[[str, str, Mapping[str, object]], str]:
    """RUNTIME_FORWARD_CHECK's ``refused``, compiled once."""
    space: dict[str, Any] = {"re": re}
    exec(RUNTIME_FORWARD_CHECK, space)  # our own constant text: the one train.sh runs
    check: Callable[[str, str, Mapping[str, object]], str] = space["refused"]
    return check


@functools.cache
def _names_policy() -> Mapping[str, object]:
    """runtime_policy() without a [wandb] key_env name: what refuse_forward() checks a name against."""
    return {**runtime_policy(""), "names": sorted(NEVER_FORWARDED)}


def is_env_name(name: str) -> bool:
    """An environment-variable-shaped name that is not itself a token: upper case letters, digits and
    ``_``, starting with a letter or ``_``, at most 64 characters, and not secret-shaped
    (``WANDB_API_KEY`` yes; a pasted W&B key, ``sk-...`` or ``AKIA...`` no)."""
    return bool(_KEY_ENV_NAME.fullmatch(name)) and not looks_secret_value(name) \
        and not _looks_random(name, minimum=20)


# --- values ------------------------------------------------------------------------------------

# http://u:p@h, and https://TOKEN@h (a user part alone counts when it is token-shaped: not ssh://git@h)
_SCHEME_USERINFO = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://(?:[^\s/@?#:]*:[^\s/@?#]*|[^\s/@?#:]{20,})@")
_BARE_USERINFO = re.compile(r"(?:^|[\s,;=(\"'])[^\s/@:,;=(\"']+:[^\s/@]+@[A-Za-z0-9\[]")  # u:p@head:8265
_ADDRESS_USERINFO = re.compile(r"^([^/]*//)?[^/]*@")  # any userinfo at the start of an address
_TOKEN_PATTERNS = (
    r"\bsk-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{20,}",            # OpenAI / Anthropic style keys
    r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b",                        # AWS access key ids
    r"\bhf_[A-Za-z0-9]{30,}",                               # Hugging Face
    r"\bgh[pousr]_[A-Za-z0-9]{36,}",                        # GitHub
    r"\bgithub_pat_[A-Za-z0-9_]{22,}",
    r"\bglpat-[A-Za-z0-9_-]{20,}",                          # GitLab
    r"\bxox[abprs]-[A-Za-z0-9-]{10,}",                      # Slack
    r"\beyJ[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}\.[A-Za-z0-9_-]{10,}",  # JWT
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----",
)
TOKEN = re.compile("|".join(f"(?:{p})" for p in _TOKEN_PATTERNS))
_WANDB_KEY = re.compile(r"[0-9a-fA-F]{40}")
_AWS_SECRET = re.compile(r"[A-Za-z0-9/+]{40}")


def has_credentials_in_url(value: str) -> bool:
    """True when ``value`` holds a URL or address with a user:password@ (``http://u:p@h``,
    ``u:p@head:8265``) or a scheme URL with any userinfo (``https://TOKEN@host``)."""
    return bool(_SCHEME_USERINFO.search(value) or _BARE_USERINFO.search(value))


def address_has_credentials(address: str) -> bool:
    """For a Ray address: any userinfo counts (``user@head`` included), scheme or not."""
    return without_credentials(address) != address


def without_credentials(address: str) -> str:
    """``address`` without its user:password@ part: ``http://u:p@head:8265`` -> ``http://head:8265``,
    ``u:p@head:8265`` -> ``head:8265``. train.sh's log redacts with the same pattern, in bash."""
    return _ADDRESS_USERINFO.sub(r"\1", address)


def _entropy(text: str) -> float:
    counts = {c: text.count(c) for c in set(text)}
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def _looks_random(value: str, *, minimum: int = 32) -> bool:
    """A long run of letters and digits that reads like a random token, not a word or a name:
    upper, lower (or ``_``-free upper) and digits mixed, high entropy, few separators."""
    if len(value) < minimum or not re.fullmatch(r"[A-Za-z0-9_+/=.-]+", value) or "/" in value.strip("/+="):
        return False
    digits = sum(c.isdigit() for c in value)
    letters = sum(c.isalpha() for c in value)
    separators = sum(c in "_-." for c in value)
    if digits < len(value) * 0.1 or letters < len(value) * 0.2 or separators > len(value) // 8:
        return False
    return _entropy(value) >= 4.0


def looks_secret_value(value: str, name: str | None = None) -> bool:
    """True when ``value`` looks like a credential. ``name`` is the key or variable holding it, when
    known: a whole-value 40-hex string under a commit-like name (``SLIME_COMMIT``) is a commit."""
    if len(value) < 15 and "@" not in value:  # shorter than any token shape: most spec strings
        return False
    return _looks_secret_value(value, name)


@functools.lru_cache(maxsize=4096)  # a sweep's points and the two validation passes see the same strings
def _looks_secret_value(value: str, name: str | None) -> bool:
    if has_credentials_in_url(value) or TOKEN.search(value):
        return True
    bare = value.strip()
    hashy = name is not None and bool(_HASH_NAME.search(name.upper().replace("-", "_").replace(".", "_")))
    if _WANDB_KEY.fullmatch(bare):
        return not hashy
    if _AWS_SECRET.fullmatch(bare) and any(c.isupper() for c in bare) and any(c.islower() for c in bare) \
            and any(c.isdigit() for c in bare):
        return True
    return not hashy and _looks_random(bare)


# --- flags -------------------------------------------------------------------------------------

# A flag names a credential when its last words say so. Flags that merely name a data field
# (--input-key, --reward-key, --ssl-keyfile, --tls-key-path, --max-tokens-per-gpu) do not match.
_CREDENTIAL_FLAG = re.compile(
    r"^--(?:wandb-key|(?:.*-)?(?:api-keys?|apikey|password|passwd|passphrase|secret|secret-key|access-key|"
    r"secret-access-key|session-token|auth-token|access-token|api-token|hf-token|bearer-token))$"
)
# The credential flags of slime, Megatron and sglang (through slime's --sglang- and --router-
# prefixes), each with its shortest prefix that argparse expands to it alone among the 1430 flags
# of slime's parsers (slime 624b824a8 with its Megatron and sglang): an abbreviation at least this
# long means the credential flag.
CREDENTIAL_FLAGS: Mapping[str, str] = {
    "--wandb-key": "--wandb-k",
    "--router-api-key": "--router-ap",
    "--router-control-plane-api-keys": "--router-control-plane-ap",
    "--router-oracle-password": "--router-oracle-pa",
    "--sglang-admin-api-key": "--sglang-ad",
    "--sglang-api-key": "--sglang-ap",
    "--sglang-ssl-keyfile-password": "--sglang-ssl-keyfile-",
}


def normalize_flag_token(token: str) -> str:
    """``--WANDB_KEY=abc`` -> ``--wandb-key``: the flag part, lower case, ``_`` as ``-``."""
    return token.split("=", 1)[0].strip().lower().replace("_", "-")


def is_credential_flag(token: str) -> bool:
    """True for an argv token that passes a credential: ``--wandb-key``, ``--Wandb_Key``,
    ``--wandb-key=...``, the abbreviation ``--wandb-k``, ``--sglang-api-key``, ``--*-password``, ...
    A token that does not start with ``--`` is not a flag."""
    if not token.startswith("--"):
        return False
    flag = normalize_flag_token(token)
    if _CREDENTIAL_FLAG.match(flag):
        return True
    return any(full.startswith(flag) and len(flag) >= len(shortest) for full, shortest in CREDENTIAL_FLAGS.items())


def credential_tokens(tokens: Iterable[str]) -> list[int]:
    """Positions of the tokens of an argv list that are credential flags, or carry a secret-shaped
    value (``--x=sk-...``, a pasted key)."""
    return [i for i, t in enumerate(tokens) if is_credential_flag(t) or looks_secret_value(t)]


def without_secret_flags(tokens: list[str]) -> list[str]:
    """``tokens`` with every credential flag's value replaced by ``***`` (for messages)."""
    out, hide = [], False
    for token in tokens:
        if hide and not token.startswith("--"):
            out.append(MASK)
            continue
        hide = is_credential_flag(token) and "=" not in token
        out.append(f"{token.split('=', 1)[0]}={MASK}" if is_credential_flag(token) and "=" in token else
                   MASK if looks_secret_value(token) else token)
    return out


# --- redaction ---------------------------------------------------------------------------------

# A bare key starts where a word starts (the lookbehind): inside a long run of key characters the scan then fails at
# once instead of trying every length of the run (quadratic: a 100 KB value in an error's source line took a minute).
_ASSIGNMENT = re.compile(r"""(?P<key>"[^"\n]*"|'[^'\n]*'|(?<![A-Za-z0-9_.\-])[A-Za-z0-9_.\-]+)(?P<eq>\s*=\s*)"""
                         r"""(?P<value>"(?:[^"\\\n]|\\.)*"|'[^'\n]*'|[^\s,}\]]+)""")


def redact(text: str, secrets: Iterable[str] = (), *, code: bool = True) -> str:
    """``text`` with every secret in it shown as ``***``: the strings ``secrets`` (values known to
    be secret), the password of an address and provider tokens; and, where ``text`` is code (a
    source line, a ``--set KEY=VALUE``, a command line), the value of a secret-named ``KEY=VALUE``
    or ``KEY = "VALUE"`` and the value after a credential flag (``--wandb-key X``,
    ``--wandb-key=X``). Prose (``code=False``) keeps its ``TABLE.KEY=VALUE`` placeholders."""
    for secret in sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True):
        text = text.replace(secret, MASK)
    text = _SCHEME_USERINFO.sub(lambda m: m.group(0).split("://", 1)[0] + f"://{MASK}@", text)
    text = re.sub(r"(^|[\s,;=(\"'])[^\s/@:,;=(\"']+:[^\s/@]+@(?=[A-Za-z0-9\[])", lambda m: f"{m.group(1)}{MASK}@",
                  text)
    text = TOKEN.sub(MASK, text)
    if not code:
        return text

    def assignment(m: re.Match[str]) -> str:
        key = m.group("key").strip("\"'").rsplit(".", 1)[-1]
        value = m.group("value").strip("\"'")
        if is_secret_name(key) or is_credential_flag(key if key.startswith("--") else f"--{key}") \
                or looks_secret_value(value, key):
            return f"{m.group('key')}{m.group('eq')}{MASK}"
        return m.group(0)

    text = _ASSIGNMENT.sub(assignment, text)
    return re.sub(r"(?P<flag>--[A-Za-z0-9_-]+)(?P<sep>[\"']?(?:\s*,\s*|\s+|=)[\"']?)(?P<value>[^\s\"',\]]+)",
                  lambda m: f"{m.group('flag')}{m.group('sep')}{MASK}" if is_credential_flag(m.group("flag"))
                  and not m.group("value").startswith("--") else m.group(0), text)


# [env] forward: whether a variable may be copied from the launching shell into the Ray job's metadata, in one table
# of clauses. train.sh runs them as Python text (RUNTIME_FORWARD_CHECK, generated below; python3 reads it inside a
# single-quoted bash string: no single quote here) on the policy runtime_policy() writes beside it, and
# refuse_forward() runs the very same text at compile time. Each row: (condition on name, value and policy; why).
_FORWARD_PRELUDE = """\
def refused(name, value, policy):
    upper = name.upper()
    words = [w for w in upper.replace("-", "_").split("_") if w]
    while words and words[-1].isdigit():
        words.pop()
    last, before = (words[-1] if words else ""), (words[-2] if len(words) > 1 else "")
"""
_FORWARD_RULES = (
    ('upper in policy["names"] or upper.startswith(tuple(policy["prefixes"]))',
     "it holds a secret or an address that may carry user:password"),
    ('"_".join(words) in policy["secret_names"] or upper in policy["secret_names"] or (\n'
     '            last in policy["last_words"] and ((before == "API" and last in ("KEY", "KEYS"))\n'
     '                                              or before not in policy["not_before"].get(last, [])))',
     "its name says it holds a secret"),
    ('any(re.search(p, value) for p in policy["url"]) or re.search(policy["token"], value)',
     "its value holds credentials"),
)
RUNTIME_FORWARD_CHECK = _FORWARD_PRELUDE + "".join(
    f'    if {condition}:\n        return "{why}"\n' for condition, why in _FORWARD_RULES) + '    return ""\n'


def secret_values(data: Mapping[str, object], prefix: str = "") -> list[str]:
    """Dotted keys of the strings of plain spec ``data`` (tables, arrays, values) that look secret:
    a user:password URL or a token anywhere, or any value of a secret-named key."""
    found: list[str] = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        items = value if isinstance(value, list) else [value]
        if isinstance(value, Mapping):
            found += secret_values(value, f"{dotted}.")
        elif dotted == "kuberay.secret":  # the name of a Kubernetes Secret, not one
            continue
        elif any(isinstance(v, str) and (looks_secret_value(v, str(key)) or is_secret_name(str(key))
                                         or (str(key).startswith("--") and is_credential_flag(str(key))))
                 for v in items) or any(isinstance(v, str) and is_credential_flag(v) for v in items):
            found.append(dotted)
        elif any(isinstance(v, Mapping) for v in items):
            for i, v in enumerate(items):
                if isinstance(v, Mapping):
                    found += secret_values(v, f"{dotted}.{i}.")
    return found


def drop_secret_values(data: dict[str, object]) -> list[str]:
    """Remove from plain spec ``data`` (in place) every value :func:`secret_values` finds; return
    their dotted keys."""
    found = secret_values(data)
    for key in found:
        node: object = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node[int(part)] if isinstance(node, list) else node[part]  # type: ignore[index]
        if isinstance(node, dict):
            node.pop(parts[-1], None)
    return found


def masked_overrides(overrides: list[dict[str, object]]) -> list[dict[str, object]]:
    """``[{"key": ..., "value": ...}]`` (a sweep point's values) with each value that looks secret, or
    sits under a secret-named key, shown as ``***``."""
    import json  # lazy: only a sweep's index needs it, and every acrl command (--help too) imports this module

    def secret(key: str, value: object) -> bool:
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        return redact(f"{key}={text}") != f"{key}={text}" or looks_secret_value(text, key.rsplit(".", 1)[-1])
    return [{**o, "value": MASK} if secret(str(o.get("key", "")), o.get("value")) else o for o in overrides]


def runtime_policy(key_env: str) -> dict[str, object]:
    """What train.sh checks at run time, before it builds the Ray job's environment: names it never
    forwards, and the patterns of a secret-shaped value. Generated into train.sh from this module."""
    return {
        "names": sorted(NEVER_FORWARDED | {key_env.upper()}),
        "prefixes": list(NEVER_FORWARDED_PREFIXES),
        "last_words": sorted(SECRET_LAST_WORDS),
        "not_before": {k: sorted(v) for k, v in NOT_SECRET_BEFORE.items()},
        "secret_names": sorted(SECRET_NAMES),
        "url": [_SCHEME_USERINFO.pattern, _BARE_USERINFO.pattern],
        "token": TOKEN.pattern,
    }
