"""Every rule reads only the keys it declares (its ``keys`` and ``reads``): the compile of a spec with errors runs a
rule only when none of those keys failed (compiler/_pipeline/partial.py), so a rule that read an undeclared key could
report what a default says instead of what the user wrote.

What a rule reads is recorded, not guessed: every field of the spec's tables is read through a recording descriptor
while the rule runs, on the example specs and a few hundred specs made from them by changing a dozen keys each (fixed
seed). The Context's derived values count as what they are made of: the placement as placement_spec.READS (itself
held to what placement_spec.read is seen reading), the argv as every key with a flag (held to what build_argv reads),
MODEL_ARGS as MODEL_ARGS, ``passes(flag)`` as the keys that can pass the flag.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
import random
import tomllib
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli_w

from acrl.compiler._pipeline import placement_spec
from acrl.compiler._pipeline.argv import build_argv
from acrl.compiler._pipeline.compile import _NO_MODEL_ARGS, supplied_keys
from acrl.compiler._pipeline.model_args.resolve import ModelArgsError, resolve_model_args
from acrl.compiler._pipeline.parse import parse_spec_text
from acrl.compiler._pipeline.structure import structure
from acrl.compiler._pipeline.validate import RULES, Context, engine
from acrl.compiler._pipeline.validate.engine import ARGV, EACH_VALUE, MODEL_ARGS, PLACEMENT, Rule, reads_of
from acrl.compiler._slime.verify_flags import verify_flags
from acrl.compiler._spec import tables
from acrl.compiler._spec.flag_index import flag_index
from acrl.compiler._spec.flags import flags_in
from acrl.compiler._spec.server_groups import ServerGroup, SglangModel
from conftest import EXAMPLE_SPECS, MINIMAL

_READS: set[str] = set()
_ON = [False]


class _Recording:
    """A slot descriptor that records ``table.key`` when read while recording."""

    def __init__(self, original: Any, key: str) -> None:
        self.original, self.key = original, key

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        if obj is None:
            return self.original
        if _ON[0]:
            _READS.add(self.key)
        return self.original.__get__(obj, owner)

    def __set__(self, obj: Any, value: Any) -> None:
        self.original.__set__(obj, value)


# What the Context's own values are made of.
_CONTEXT = {"placed": PLACEMENT, "groups": ARGV, "model": MODEL_ARGS, "model_args": MODEL_ARGS,
            "resolution": MODEL_ARGS, "extra": "extra.flags extra.args",
            "accepted": "slime.dir slime.megatron_dir", "checked_at": "slime.dir slime.megatron_dir"}  # " ": and


@contextlib.contextmanager
def _recorded() -> Iterator[None]:
    classes = [(cls, name) for name, cls in tables.table_types().items()]
    classes += [(SglangModel, "sglang.models"), (ServerGroup, "sglang.models")]
    saved: list[tuple[type, str, Any]] = []
    for cls, table in classes:
        for field in attrs.fields(cls):
            saved.append((cls, field.name, cls.__dict__[field.name]))
            setattr(cls, field.name, _Recording(cls.__dict__[field.name], f"{table}.{field.name}"))
    for name, what in _CONTEXT.items():
        saved.append((Context, name, Context.__dict__[name]))
        setattr(Context, name, _Recording(Context.__dict__[name], what))
    passes, read = Context.passes, placement_spec.read

    def recorded_passes(self: Context, flag: str) -> bool:
        on = _ON[0]
        if on:
            _READS.add(f"passes {flag}")
        _ON[0] = False  # the flag's own keys, not the whole argv it looks at
        try:
            return passes(self, flag)
        finally:
            _ON[0] = on

    def recorded_read(spec: tables.Spec) -> placement_spec.SpecPlacement:
        if _ON[0]:
            _READS.add(PLACEMENT)
        return read(spec)

    try:
        Context.passes = recorded_passes  # type: ignore[method-assign]
        placement_spec.read = recorded_read  # type: ignore[assignment]
        yield
    finally:
        Context.passes = passes  # type: ignore[method-assign]
        placement_spec.read = read
        for cls, name, original in saved:
            setattr(cls, name, original)


def _reading(run: Any) -> set[str]:
    _READS.clear()
    _ON[0] = True
    try:
        run()
    finally:
        _ON[0] = False
    return {part for key in _READS for part in key.split(" ") if not key.startswith("passes ")} | \
        {key for key in _READS if key.startswith("passes ")}


def _values(field: Any) -> list[Any]:
    """A few values of a key's type that a spec may hold."""
    tp, text = field.type, str(field.type)
    if typing.get_origin(tp) in (dict, list) or text.startswith(("dict", "list")):
        return []
    if "Literal" in text:
        found: list[Any] = []
        stack = [tp]
        while stack:
            t = stack.pop()
            found += typing.get_args(t) if typing.get_origin(t) is typing.Literal else []
            stack += [a for a in typing.get_args(t) if typing.get_origin(t) is not typing.Literal]
        return found
    if "bool" in text:
        return [True, False]
    if "int" in text and "float" not in text:
        return [1, 2, 3, 4, 8, 16, 64]
    if "float" in text:
        return [0.0, 0.5, 1.0, 0.01]
    return ["/x", "a.b", "/models/Qwen2.5-3B-Instruct"] if "str" in text else []


_FLAGS = ["--use-rollout-logprobs", "--sglang-enable-dp-attention", "--rm-url", "--keep-old-actor",
          "--debug-train-only", "--debug-rollout-only", "--colocate", "--sglang-pp-size", "--use-dynamic-batch-size",
          "--balance-by-flops", "--rollout-external-engine-addrs", "--decoder-first-pipeline-num-layers"]
_KUBERAY = {"image": "registry.example/slime:v1", "image_paths": ["/data/models"], "service_account": "rl",
            "volumes": [{"name": "data", "mount_path": "/data", "claim": "data"}]}
_MODELS = {"default": {"server_groups": [{"worker_type": "prefill", "num_gpus": 2}, {"worker_type": "decode",
                                                                                     "num_gpus": 2}]},
           "ref": {"model_path": "/ref", "server_groups": [{"worker_type": "regular", "num_gpus": 4}]}}


def _corpus(count: int, seed: int = 17) -> Iterator[str]:
    bases = [tomllib.loads(p.read_text(encoding="utf-8")) for p in EXAMPLE_SPECS] + [MINIMAL]
    leaves = [(t, f) for t, cls in tables.table_types().items() for f in attrs.fields(cls)]
    rng = random.Random(seed)
    yield from (p.read_text(encoding="utf-8") for p in EXAMPLE_SPECS)
    for _ in range(count):
        data = copy.deepcopy(rng.choice(bases))
        for table, field in rng.sample(leaves, 12):
            values = _values(field)
            if values and (table != "agentcore" or "agentcore" in data):
                data.setdefault(table, {})[field.name] = rng.choice(values)
        if rng.random() < 0.4:
            data.setdefault("extra", {}).setdefault("flags", {})[rng.choice(_FLAGS)] = rng.choice([True, 2])
        if rng.random() < 0.15:
            data.setdefault("sglang", {})["models"] = copy.deepcopy(_MODELS)
        if rng.random() < 0.3:
            data["kuberay"] = {**data.get("kuberay", {}), **copy.deepcopy(_KUBERAY)}
        with contextlib.suppress(TypeError, ValueError):
            yield tomli_w.dumps(data)


@attrs.define
class _Seen:
    placement: set[str] = attrs.Factory(set)
    argv: set[str] = attrs.Factory(set)
    rules: dict[str, set[str]] = attrs.Factory(lambda: {r.id: set() for r in RULES})
    specs: int = 0


@pytest.fixture(scope="module")
def seen() -> _Seen:
    out = _Seen()
    with _recorded():
        for text, rayjob in itertools.product(_corpus(250), (False, True)):  # the default target, --target kuberay
            spec, _ = structure(parse_spec_text(text, "spec.toml"))
            if spec is None:
                continue
            out.specs += 1
            token = placement_spec.RAYJOB.set(rayjob)
            try:
                _record(out, text, spec)
            finally:
                placement_spec.RAYJOB.reset(token)
    return out


def _record(out: _Seen, text: str, spec: tables.Spec) -> None:
    placement_spec._last.clear()
    out.placement |= _reading(lambda: placement_spec.read(spec))
    source = parse_spec_text(text, "spec.toml")
    out.argv |= _reading(lambda: build_argv(spec, supplied_keys(source, spec)))
    try:
        resolution = resolve_model_args(spec, Path(), None)
    except ModelArgsError:
        resolution = None
    model_args = resolution.model_args if resolution is not None else _NO_MODEL_ARGS
    groups = build_argv(spec, supplied_keys(source, spec))
    checked = verify_flags(spec, None, None, {a.flag for g in groups for a in g.args} | set(flags_in(model_args.args)))
    ctx = Context(spec, model_args, groups, checked.check, resolution, checked.where)
    for r in RULES:
        engine._SCANNED[:] = [None, ()]  # the strings of the spec, scanned afresh for each rule
        out.rules[r.id] |= _reading(lambda r=r: list(r.check(ctx)))


def _covered(key: str, declared: set[tuple[str | int, ...]]) -> bool:
    path = tuple(key.split("."))
    return any(path[:len(d)] == d for d in declared)


def _flag_keys(flag: str) -> set[str]:
    """The keys that can put ``flag`` on the argv: its key, and the escape hatch."""
    owner = flag_index().get(flag)
    return {"extra.flags", "extra.args", *([owner.path] if owner is not None else [])}


def test_the_corpus_structures(seen: _Seen) -> None:
    assert seen.specs > 240  # each at both targets


def test_the_placement_reads_what_it_declares(seen: _Seen) -> None:
    declared = {tuple(k.split(".")) for k in placement_spec.READS}
    assert {k for k in seen.placement - {PLACEMENT} if not _covered(k, declared)} == set()


def test_the_argv_reads_what_it_declares(seen: _Seen) -> None:
    argv = {p for p in reads_of(Rule("x", "error", (), "", lambda _: iter(()), reads=(ARGV,)))}
    assert {k for k in seen.argv if k != PLACEMENT and not _covered(k, argv)} == set()


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_a_rule_reads_only_what_it_declares(rule: Rule, seen: _Seen) -> None:
    if EACH_VALUE in rule.reads:
        return  # a check of each value on its own: a value left out cannot mislead it
    declared = set(reads_of(rule))
    read = set()
    for key in seen.rules[rule.id]:
        if key.startswith("passes "):
            read |= _flag_keys(key.removeprefix("passes "))
        elif key == PLACEMENT:
            read |= set(placement_spec.READS)
        elif key == ARGV:
            read |= {".".join(map(str, p)) for p in reads_of(Rule("x", "e", (), "", lambda _: iter(()),
                                                                  reads=(ARGV,)))}
        else:
            read.add(key)
    undeclared = {k for k in read if not (k == MODEL_ARGS and (MODEL_ARGS,) in declared) and not _covered(k, declared)}
    assert undeclared == set(), f"{rule.id} reads {sorted(undeclared)}: add them to its keys or reads"
