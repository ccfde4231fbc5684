"""ACRL-F* (F008-F010): escape-hatch values as slime's argparse takes them, and the flags the targeted stack
deprecates (the other ACRL-F rules are in ``flags``).

slime parses its argv three times with ``parse_known_args`` (slime 624b824 slime/utils/arguments.py:1591-1621: the
pre-parse, SGLang's parser, then Megatron-LM's ``parse_args(ignore_unknown_args=True)`` with slime's flags added,
megatron/training/arguments.py:87-100), so a flag it does not know is skipped, but a known flag's value goes through
argparse: a value outside the flag's ``choices``, one its ``type`` cannot convert, a store_true flag written
``--flag=value`` or a flag short of its ``nargs`` stops the launch; a value after a flag that takes none (or after
the values it takes) is dropped silently. The facts of what each flag takes are generated per slime commit from slime's
and Megatron-LM's code (compiler/_slime/commits/argparse, :mod:`..._slime.argparse_facts`), and read only when the
escape hatch holds a flag.

The tokens checked are the ones acrl writes: ``[extra.flags]`` ``"--f" = true`` is the bare ``--f``, ``false`` leaves
it out, a list is ``--f v1 v2``, anything else ``--f value`` (``_spec.flags.flag_tokens``); ``[extra.args]`` is
verbatim, a token starting with ``-`` (a negative number aside) being an option as argparse reads it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import NamedTuple

from ..._slime.commit_facts import CommitFacts, FlagFact, commit_facts
from ..._spec.flags import flag_tokens, normalize_flag
from .engine import Context, Finding, rule

# argparse's _negative_number_matcher before Python 3.13: such a token is a value. A token starting with "-" that
# another Python reads as a number ("-1e-6") is ambiguous: that flag is not checked.
_NEGATIVE = re.compile(r"^-\d+$|^-\d*\.\d+$")
_NO_VALUE = frozenset({"store_true", "store_false", "store_const", "append_const", "count", "help", "version"})
_WHAT = {"int": "an integer", "float": "a number", "json.loads": "JSON"}
_FALSE = frozenset({"false", "0", "no", "off", "none"})  # bool("") is False: not a trap


class _Use(NamedTuple):  # a NamedTuple, not an attrs class: a third of the cost to import
    """One escape-hatch flag as argparse meets it: the values after it (each with its spec key)."""

    flag: str
    key: str
    explicit: str | None  # the value of --flag=value
    following: tuple[tuple[str, str], ...]
    ambiguous: bool = False


def _option(token: str) -> bool:
    return len(token) > 1 and token.startswith("-") and not _NEGATIVE.match(token) and " " not in token


def _ambiguous(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return token.startswith("-") and not _NEGATIVE.match(token)


def _walk(items: Sequence[tuple[str, str]]) -> Iterator[_Use]:
    """The option tokens of ``items`` ((token, spec key) pairs) with the tokens up to the next option."""
    for i, (token, key) in enumerate(items):
        if not token.startswith("--") or not _option(token):
            continue
        following: list[tuple[str, str]] = []
        for item in items[i + 1:]:
            if _option(item[0]) and not _ambiguous(item[0]):
                break
            following.append(item)
        flag, eq, explicit = token.partition("=")
        yield _Use(flag, key, explicit if eq else None, tuple(following),
                   any(_ambiguous(t) for t, _ in following))


def _uses(ctx: Context) -> Iterator[_Use]:
    for name, value in ctx.spec.extra.flags.items():
        tokens = flag_tokens(normalize_flag(name), value)
        keys = [f"extra.flags.{name}.{j}" for j in range(len(value))] if isinstance(value, list) else \
            [f"extra.flags.{name}"] * (len(tokens) - 1)
        yield from _walk([(tokens[0], f"extra.flags.{name}"), *zip(tokens[1:], keys, strict=True)] if tokens else [])
    yield from _walk([(t, f"extra.args.{i}") for i, t in enumerate(ctx.spec.extra.args)])


def _checked(ctx: Context) -> Iterator[tuple[_Use, FlagFact, CommitFacts]]:
    """Each escape-hatch use of a flag the targeted commit's facts define (ACRL-F003 names the others)."""
    if not ctx.spec.extra.flags and not ctx.spec.extra.args:
        return
    facts = commit_facts(ctx.spec.slime.commit)
    if facts is None:
        return
    for use in _uses(ctx):
        fact = facts.argparse(use.flag)
        if fact is not None:
            yield use, fact, facts


def _takes(fact: FlagFact) -> tuple[int, float] | None:
    """How many values argparse gives the flag (min, max), None when not read (a custom action, REMAINDER)."""
    if fact.action in _NO_VALUE or fact.action.endswith("BooleanOptionalAction"):
        return 0, 0
    if fact.action not in ("store", "append", "extend"):
        return None
    if isinstance(fact.nargs, int):
        return fact.nargs, fact.nargs
    return {None: (1, 1.0), "?": (0, 1.0), "*": (0, float("inf")), "+": (1, float("inf"))}.get(fact.nargs)


def _wants(low: int, high: float) -> str:
    if low == high:
        return {0: "no value", 1: "one value"}.get(low, f"{low} values")
    return "at least one value" if low == 1 else "at most one value" if high == 1 else "any number of values"


def _value_problem(value: str, fact: FlagFact) -> tuple[str, str] | None:
    """(what argparse does with ``value``, the fix) when its type or choices refuse it."""
    converted: object = value
    kind = fact.type
    try:
        if kind == "int":
            converted = int(value)
        elif kind == "float":
            converted = float(value)
        elif kind == "json.loads":
            converted = json.loads(value)
    except ValueError:
        what = _WHAT[str(kind)]
        return f"{value!r} is not {what} (type={kind}): argparse stops the launch", f"write {what}"
    if kind == "bool" and value.strip().lower() in _FALSE:
        return (f"{value!r} reads as True (type=bool: any non-empty value is True)",
                "leave the flag out for False")
    if fact.choices is not None and kind in ("int", "float", "str", "json.loads") and converted not in fact.choices:
        import difflib  # lazy: only for a value outside the choices

        shown = ", ".join(str(c) for c in fact.choices)
        close = difflib.get_close_matches(value, [str(c) for c in fact.choices], n=1, cutoff=0.6)
        return (f"{value!r} is not one of its choices ({shown}): argparse stops the launch",
                f"did you mean {close[0]!r}?" if close else f"write one of {shown}")
    return None


def _problems(use: _Use, fact: FlagFact) -> Iterator[tuple[str, str, str]]:
    """(message, fix, spec key) when the values after the flag are not what argparse takes: their number, then
    each value's type and choices."""
    takes = _takes(fact)
    if takes is None or use.ambiguous:
        return
    low, high = takes
    given = [(use.explicit, use.key)] if use.explicit is not None else list(use.following)
    ignored = list(use.following) if use.explicit is not None else []
    if use.explicit is not None and high == 0:
        yield (f"{use.flag}={use.explicit}: {fact.action} takes no value, and argparse stops the launch on an "
               "explicit one", f"write {use.flag} alone ([extra.flags] \"{use.flag}\" = true)", use.key)
        return
    if use.explicit is not None and low > 1:
        yield (f"{use.flag}={use.explicit}: it takes {_wants(low, high)}, and argparse stops the launch on one "
               "value", f"write {use.flag} and its {low} values as separate arguments", use.key)
        return
    if len(given) < low:
        yield (f"{use.flag} is given {len(given)} value(s) but takes {_wants(low, high)}: argparse stops the launch",
               f"give {use.flag} {_wants(low, high)}", use.key)
        return
    if len(given) > high:
        ignored, given = given[int(high):], given[:int(high)]
    if ignored:
        dropped = " ".join(repr(v) for v, _ in ignored)
        what = f"{fact.action}: it takes no value" if high == 0 else f"it takes {_wants(low, high)}"
        fix = f"write \"{use.flag}\" = true in [extra.flags] (false leaves it out)" if high == 0 and \
            use.key.startswith("extra.flags.") else f"remove {dropped}"
        yield (f"{use.flag} is followed by {dropped}, which slime's parser ignores silently ({what})", fix,
               ignored[0][1])
    for value, key in given:
        problem = _value_problem(value, fact) if value is not None else None
        if problem is not None:
            yield f"{use.flag} {problem[0]}", problem[1], key


@rule("ACRL-F009", "error", ["extra.flags", "extra.args"], "escape-hatch values are what slime's argparse takes",
      reads=("slime.commit",))
def _values(ctx: Context) -> Iterator[Finding]:
    """An escape-hatch value must be one the flag's definition at the targeted slime commit (slime's, or its
    Megatron-LM's with slime's patches and reset_arg defaults) accepts: one of its choices (did-you-mean), convertible
    by its type (int, float, JSON), as many values as its nargs takes, none for a store_true / store_false flag; a
    value after a flag that takes no more is dropped silently by slime's parse_known_args, and "false" given to a
    type=bool flag reads as True. The message names the definition's file:line."""
    for use, fact, facts in _checked(ctx):
        for message, fix, key in _problems(use, fact):
            yield Finding(f"{message} (defined at {facts.defined(fact)})", fix, keys=(key, use.key))


def _deprecations(ctx: Context, refused: bool) -> Iterator[tuple[_Use, FlagFact, CommitFacts]]:
    for use, fact, facts in _checked(ctx):
        if fact.deprecated is not None and bool(fact.deprecated.get("refused")) == refused:
            yield use, fact, facts


def _stack(fact: FlagFact, facts: CommitFacts) -> str:
    return f"slime {facts.name}" if fact.owner == "slime" else \
        f"Megatron-LM {facts.megatron_commit[:8]} (slime {facts.name}'s)"


@rule("ACRL-F010", "warning", ["extra.flags", "extra.args"],
      "no slime or Megatron-LM flags deprecated at the targeted commit", reads=("slime.commit",))
def _deprecated(ctx: Context) -> Iterator[Finding]:
    """An escape-hatch flag that slime or the Megatron-LM of the targeted commit marks deprecated (its help, its dest
    or its validation's message: --enable-cuda-graph "is deprecated, use --cuda-graph-impl=local instead" in
    Megatron-LM 1dcf0daf megatron/training/arguments.py:444) is a warning naming the replacement the source names (the
    sglang counterpart is ACRL-F006)."""
    for use, fact, facts in _deprecations(ctx, refused=False):
        assert fact.deprecated is not None
        new = fact.deprecated.get("use")
        yield Finding(f"{use.flag} is deprecated in {_stack(fact, facts)}" + (f" for {new}" if new else "") +
                      f" ({fact.deprecated['at']}: \"{fact.deprecated['text']}\")",
                      f"write {new} instead" if new else "remove it", keys=(use.key,))


@rule("ACRL-F011", "error", ["extra.flags", "extra.args"], "no flags the targeted Megatron-LM refuses at launch",
      reads=("slime.commit",))
def _refused(ctx: Context) -> Iterator[Finding]:
    """An escape-hatch flag that the Megatron-LM (or slime) of the targeted commit still defines but says is no longer
    valid (--batch-size: an assert of validate_args, Megatron-LM 1dcf0daf megatron/training/arguments.py:414) stops
    the launch after the cluster has started."""
    for use, fact, facts in _deprecations(ctx, refused=True):
        assert fact.deprecated is not None
        new = fact.deprecated.get("use")
        yield Finding(f"{use.flag} is no longer valid in {_stack(fact, facts)}: the launch stops on it "
                      f"({fact.deprecated['at']}: \"{fact.deprecated['text']}\")",
                      f"write {new} instead" if new else "remove it", keys=(use.key,))
