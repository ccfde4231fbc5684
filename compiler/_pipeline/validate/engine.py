"""Stage 4, validate: the rule engine. ``rule`` registers a check under a stable id in ``RULES``,
kept in the order of ``ORDER`` (docs/rules.md and the diagnostics come out in that order);
``validate`` runs them and points each finding at the spec; ``spec_secrets`` masks what looks
secret in every message. The rules themselves live one module per id prefix: parallel (P),
batch (B), algorithm (A), eval (E), integration (I), toolkit (T), flags (F), secrets (S), kuberay (K), model (M),
launch (L), server groups (G), training features (N), rollout features (R), checkpoints and resuming (H).

Each rule has a stable id, a severity, the spec keys it concerns (the message points at the first
one the spec wrote), and a check that yields findings with a fix hint. Sources: what slime,
Megatron and sglang reject at launch, the mistakes nothing rejects until the GPUs fail, and the
toolkit's own pitfalls.
"""

from __future__ import annotations

import bisect
import functools
import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import attrs

from ..._secrets import is_credential_flag, is_env_name, is_secret_name, looks_secret_value, redact
from ..._slime.flag_verdict import FlagCheck
from ..._spec.flags import flags_in, normalize_flag, parse_flags
from ..._spec.tables import Spec, table_class, table_types
from ...errors import Diagnostic
from .. import placement_spec
from ..argv import ArgGroup, actor_gpus, rollout_gpus
from ..model_args.resolve import ModelArgs, Resolution
from ..parse import SpecSource
from ..placement import Placement
from ..placement_spec import SpecPlacement, extra_flags

# The order of RULES, hence of docs/rules.md within a section and of the diagnostics of a compile. It is
# not by family (M009, checked before anything is sourced, sits between T005 and F001). A rule whose id
# is not here cannot be registered; tests/test_rule_registry.py checks that each id here is registered once.
ORDER = (
    "ACRL-P001", "ACRL-P002", "ACRL-P003", "ACRL-P004", "ACRL-P005", "ACRL-P006", "ACRL-P007", "ACRL-P008",
    "ACRL-P009",
    "ACRL-C001", "ACRL-C002", "ACRL-C003", "ACRL-C004", "ACRL-C005", "ACRL-C006", "ACRL-C007", "ACRL-C008",
    "ACRL-G001", "ACRL-G002", "ACRL-G003", "ACRL-G004", "ACRL-G005", "ACRL-G006", "ACRL-G007", "ACRL-G008",
    "ACRL-R001", "ACRL-R002", "ACRL-R003", "ACRL-R004", "ACRL-R005", "ACRL-R006", "ACRL-R007",
    "ACRL-L001", "ACRL-L002",
    "ACRL-B001", "ACRL-B002", "ACRL-B003", "ACRL-B004", "ACRL-B005", "ACRL-B006",
    "ACRL-A001", "ACRL-A002", "ACRL-A003", "ACRL-A004",
    "ACRL-E001", "ACRL-E002", "ACRL-E003", "ACRL-E004",
    "ACRL-I001", "ACRL-I002", "ACRL-I003",
    "ACRL-T001", "ACRL-T002", "ACRL-T003", "ACRL-T004", "ACRL-T005",
    "ACRL-N001", "ACRL-N002", "ACRL-N003", "ACRL-N004", "ACRL-N005", "ACRL-N006", "ACRL-N007", "ACRL-N008",
    "ACRL-N009", "ACRL-N010", "ACRL-N011", "ACRL-N012", "ACRL-N013",
    "ACRL-H001", "ACRL-H002", "ACRL-H003", "ACRL-H004", "ACRL-H005", "ACRL-H006", "ACRL-H007", "ACRL-H008",
    "ACRL-H009", "ACRL-H010", "ACRL-H011", "ACRL-H012", "ACRL-H013",
    "ACRL-M009",
    "ACRL-F001", "ACRL-F002", "ACRL-F003", "ACRL-F004", "ACRL-F005", "ACRL-F006", "ACRL-F007", "ACRL-F008",
    "ACRL-F009", "ACRL-F010", "ACRL-F011",
    "ACRL-S001", "ACRL-S002", "ACRL-S003", "ACRL-S004",
    "ACRL-K001", "ACRL-K002", "ACRL-K003", "ACRL-K004", "ACRL-K005", "ACRL-K006", "ACRL-K007", "ACRL-K008",
    "ACRL-K009", "ACRL-K010", "ACRL-K011", "ACRL-K012",
    "ACRL-M001", "ACRL-M002", "ACRL-M003", "ACRL-M004", "ACRL-M005", "ACRL-M006", "ACRL-M007", "ACRL-M008",
)
_POSITION = {rule_id: i for i, rule_id in enumerate(ORDER)}


KeyRef = str | tuple[str | int, ...]  # "table.key", or the key's path (a key inside an array of tables)

# What a rule reads besides spec keys, for ``rule(..., reads=...)``. A rule runs on a spec with errors (a partial spec,
# compiler/_pipeline/partial.py) only when none of the keys it reads failed: those hold defaults, not what was written.
PLACEMENT = "(placement)"  # ctx.placement, ctx.placed, the actor's and rollout's GPUs: placement_spec.READS
ARGV = "(argv)"  # ctx.groups: the slime argv, made from every key with a flag (and the placement)
MODEL_ARGS = "(MODEL_ARGS)"  # ctx.model, ctx.model_args, ctx.resolution: failed when MODEL_ARGS were not resolved
EACH_VALUE = "(each-value)"  # the rule checks each value on its own (secrets): a value left out cannot mislead it
Failed = frozenset[tuple[str | int, ...]]  # the keys whose values the spec does not hold as written


@attrs.frozen
class Finding:
    message: str
    hint: str
    keys: tuple[KeyRef, ...] = ()  # overrides the rule's keys for pointing at the spec


@attrs.frozen
class Context:
    spec: Spec
    model_args: ModelArgs
    groups: tuple[ArgGroup, ...]
    accepted: Callable[[str], FlagCheck] | None = None  # flag -> the checkout's verdict (_slime/flag_verdict.py)
    resolution: Resolution | None = None  # how MODEL_ARGS were resolved, with the config.json check
    checked_at: str = ""  # the checkouts ``accepted`` read (_slime/checkout.py), as messages name them
    model: Mapping[str, list[str]] = attrs.field(init=False)  # MODEL_ARGS as flag -> values, parsed once
    extra: Mapping[str, list[str]] = attrs.field(init=False)  # [extra.flags] and [extra] args as flag -> values
    placed: SpecPlacement = attrs.field(init=False)  # where slime puts things (the one placement model)

    @model.default
    def _parse_model_args(self) -> Mapping[str, list[str]]:
        return parse_flags(self.model_args.args)

    @extra.default
    def _parse_extra(self) -> Mapping[str, list[str]]:
        return extra_flags(self.spec)

    @placed.default
    def _place(self) -> SpecPlacement:
        return placement_spec.read(self.spec)

    @property
    def placement(self) -> Placement:
        return self.placed.placement

    def model_int(self, flag: str) -> int | None:
        values = self.model.get(flag)
        try:
            return int(values[0]) if values else None
        except ValueError:
            return None

    @property
    def actor_gpus(self) -> int:
        return actor_gpus(self.spec)

    @property
    def rollout_gpus(self) -> int | None:
        return rollout_gpus(self.spec)

    @property
    def data_parallel(self) -> int:
        p = self.spec.parallel
        return max(1, self.actor_gpus // (p.tensor * p.pipeline * p.context))

    def passes(self, flag: str) -> bool:
        """Whether the slime argv (escape hatch included) carries ``flag``."""
        return flag in set(flags_in([t for g in self.groups for a in g.args for t in a.tokens] +
                                    list(self.spec.extra.args)))


Check = Callable[[Context], Iterator[Finding]]


def one_of(values: Iterable[int], shown: int = 10) -> str:
    """The valid choices a fix lists, as ``{1, 2, 4, 8}`` (at most ``shown`` of them, then ``...``)."""
    found = sorted(set(values))
    return "{" + ", ".join(map(str, found[:shown])) + (", ..." if len(found) > shown else "") + "}"


def divisors(n: int, at_most: int | None = None) -> list[int]:
    """The divisors of ``n`` (up to ``at_most``)."""
    top = n if at_most is None else min(n, at_most)
    return [d for d in range(1, top + 1) if n % d == 0] if n > 0 else []


@attrs.frozen
class Rule:
    id: str
    severity: str
    keys: tuple[str, ...]
    title: str
    check: Check
    # Checked on the spec alone, before MODEL_ARGS are resolved (a model script sourced): the compile stops on its
    # errors, so no value these rules refuse reaches a shell, a file name or a template.
    before_sourcing: bool = False
    # Its warnings depend on this machine (the slime checkout here): shown and given with --json, never written into
    # the bundle, whose bytes must not depend on where it was compiled.
    local: bool = False
    reads: tuple[str, ...] = ()  # what the check reads besides ``keys`` (keys, PLACEMENT, ARGV, MODEL_ARGS, EACH_VALUE)


RULES: list[Rule] = []
_LOCAL: set[str] = set()


def rule(rule_id: str, severity: str, keys: Sequence[str], title: str, *, before_sourcing: bool = False,
         local: bool = False, reads: Sequence[str] = ()) -> Callable[[Check], Check]:
    """Register a check. ``keys``: the keys it concerns (a finding points at the first the spec wrote); ``reads``:
    what else it reads (tests/test_rule_reads.py holds every rule to what it is seen reading)."""
    if rule_id not in _POSITION:
        raise ValueError(f"rule {rule_id} is not in validate.engine.ORDER: add it where it belongs")

    def register(check: Check) -> Check:
        bisect.insort(RULES, Rule(rule_id, severity, tuple(keys), title, check, before_sourcing, local, tuple(reads)),
                      key=lambda r: _POSITION[r.id])
        if local:
            _LOCAL.add(rule_id)
        return check
    return register


def recorded(diagnostics: Sequence[Diagnostic]) -> tuple[Diagnostic, ...]:
    """The diagnostics a bundle records: all but those of the rules whose findings depend on this machine."""
    return tuple(d for d in diagnostics if d.rule not in _LOCAL)


_SCANNED: list[Any] = [None, ()]  # the last spec scanned and its strings: three rules read them per compile


def spec_strings(spec: Spec) -> tuple[tuple[str, str, str], ...]:
    """(dotted key, key name, string) of every string the spec holds: values, list items, and the
    names of the free-form tables ([extra.flags], [model.args], [env] vars, ...)."""
    if _SCANNED[0] is not spec:
        _SCANNED[:] = [spec, tuple(_walk_strings(spec))]
    strings: tuple[tuple[str, str, str], ...] = _SCANNED[1]
    return strings


def _walk_strings(spec: Spec) -> Iterator[tuple[str, str, str]]:
    def walk(node: object, key: str, name: str) -> Iterator[tuple[str, str, str]]:
        if isinstance(node, str):
            yield key, name, node
        elif isinstance(node, list | tuple):
            for i, item in enumerate(node):
                yield from walk(item, f"{key}.{i}", name)
        elif isinstance(node, dict):
            for k, v in node.items():
                yield f"{key}.{k}", str(k), str(k)  # a table's own key can be a flag: "--wandb-key" = ...
                yield from walk(v, f"{key}.{k}", str(k))
        elif attrs.has(type(node)):
            for field in attrs.fields(cast(Any, type(node))):
                yield from walk(getattr(node, field.name), f"{key}.{field.name}".lstrip("."), field.name)
    return walk(spec, "", "")


FLAG_TABLES = ("extra.flags.", "extra.args.", "model.args.", "model.overrides.")



def validate(source: SpecSource, ctx: Context, *, before_sourcing: bool | None = None,
             failed: Failed = frozenset()) -> list[Diagnostic]:
    """Run every rule (``before_sourcing``: only the rules that are, or are not, checked before MODEL_ARGS are
    resolved) but those that read a key in ``failed`` (:func:`blocked`). A diagnostic points at the first of its keys
    the spec wrote, else at the nearest written table of one of them."""
    out: list[Diagnostic] = []
    unread = _Unread(failed)
    for r in RULES:
        if (before_sourcing is not None and r.before_sourcing != before_sourcing) or unread.blocks(r):
            continue
        for finding in r.check(ctx):
            keys = [_path(k) if isinstance(k, str) else k for k in (*finding.keys, *r.keys)]
            path = next((k for k in keys if k in source.positions), None) or \
                next((k for k in keys if source.position(k) is not None), keys[0])
            out.append(source.diagnostic(path, finding.message, hint=finding.hint, severity=r.severity,
                                         rule=r.id))
    secrets = spec_secrets(ctx.spec) if out else set()
    if secrets:  # whatever a rule says, a value the spec holds that looks secret is shown as ***
        out = [attrs.evolve(d, message=redact(d.message, secrets, code=False), hint=redact(d.hint, secrets, code=False),
                            source_line=redact(d.source_line, secrets)) for d in out]
    return out


def blocked(failed: Failed, *, before_sourcing: bool | None = None) -> list[str]:
    """The ids of the rules :func:`validate` does not run because they read a key in ``failed``."""
    unread = _Unread(failed)
    return [r.id for r in RULES if (before_sourcing is None or r.before_sourcing == before_sourcing) and
            unread.blocks(r)]


class _Unread:
    """Whether a rule reads a failed key: one of its keys is a failed key, lies under one (a failed table) or holds
    one (a failed value of a table it reads)."""

    def __init__(self, failed: Failed) -> None:
        self.failed = failed
        self.under = {path[:i] for path in failed for i in range(1, len(path) + 1)}

    def blocks(self, r: Rule) -> bool:
        if not self.failed or EACH_VALUE in r.reads:
            return False
        return any(path in self.under or any(path[:i] in self.failed for i in range(1, len(path)))
                   for path in reads_of(r))


@functools.cache
def _expanded(name: str) -> tuple[tuple[str | int, ...], ...]:
    if name == PLACEMENT:
        return tuple(_path(k) for k in placement_spec.READS)
    if name == ARGV:
        flags = {f"{t}.{f.name}" for t, cls in table_types().items() for f in attrs.fields(cls)
                 if f.metadata.get("flag") or f.metadata.get("switches")}
        return tuple(_path(k) for k in sorted(flags | set(placement_spec.READS) | set(_ARGV_READS)))
    return ((name,),) if name.startswith("(") else (_path(name),)


# What the argv reads besides the keys with a flag and the placement (argv.py: _ref_load, _hf_mode, the profile's
# origin, the escape hatch).
_ARGV_READS = ("model.ref_load", "model.dir", "model.megatron_to_hf_mode", "slime.commit", "extra.flags", "extra.args",
               "experiment.integration")


def reads_of(r: Rule) -> tuple[tuple[str | int, ...], ...]:
    """The key paths ``r`` reads: its keys and its reads, PLACEMENT and ARGV expanded; MODEL_ARGS as itself."""
    return tuple(dict.fromkeys(p for name in (*r.keys, *r.reads) if name != EACH_VALUE for p in _expanded(name)))


def _tables() -> tuple[str, ...]:
    """"table.key." of every free-form table of the spec ([model.overrides], [env.vars], ...): a name after it is
    one key, whatever dots it holds."""
    tables = [(table.name, cls) for table in attrs.fields(Spec) if (cls := table_class(table.type)) is not None]
    return tuple(f"{name}.{field.name}." for name, cls in tables
                 for field in attrs.fields(cls) if typing.get_origin(field.type) is dict)


_TABLES = _tables()


def spec_secrets(spec: Spec) -> set[str]:
    """The strings of ``spec`` that look secret (ACRL-S003's, and a [wandb] key_env that is not a name), for
    redacting every message about the spec."""
    found = {text for key, name, text in spec_strings(spec) if looks_secret_value(text, name)}
    if not is_env_name(spec.wandb.key_env):
        found.add(spec.wandb.key_env)
    for names in (spec.env.vars, spec.cluster.env, spec.model.script_env):  # the value of a secret-named variable
        found |= {v for k, v in names.items() if is_secret_name(k) or k.upper() == spec.wandb.key_env.upper()}
    tokens: list[str] = [*spec.extra.args]
    for table in (spec.extra.flags, spec.model.args, spec.model.overrides):
        for flag, value in table.items():
            tokens += [normalize_flag(flag), *(map(str, value) if isinstance(value, list) else [str(value)])]
    for i, token in enumerate(tokens):  # what follows a credential flag, or its =value
        if is_credential_flag(token):
            found.add(token.split("=", 1)[1] if "=" in token else tokens[i + 1] if i + 1 < len(tokens) else "")
    return {f for f in found if f}


def key_path(key: str) -> tuple[str | int, ...]:
    """A dotted key as its path (a name in a free-form table is one step, whatever dots it holds)."""
    return _path(key)


def _path(key: str) -> tuple[str | int, ...]:
    parts: list[str | int] = []
    if key.startswith(_TABLES):
        head, table, name = key.split(".", 2)
        if item := re.fullmatch(r"(.+)\.(\d+)", name):  # a list item of a table key
            return (head, table, item.group(1), int(item.group(2)))
        return (head, table, name)  # a table's key is a string, even one made of digits
    for p in key.split("."):
        parts.append(int(p) if p.isdigit() else p)
    return tuple(parts)

