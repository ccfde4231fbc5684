"""`acrl init`'s parallel sizes: found by compiling the spec it would write, in memory, layout by layout, so that the
rules and the placement and memory models (compiler/_pipeline/validate/, placement.py, memory.py) decide, not a
second copy of them here.

First the rollout engine: the fewest GPUs per SGLang engine whose problems (its tensor size against the heads, its
weights and KV cache against the GPU's memory: ACRL-M001, ACRL-M007, ACRL-P005, ACRL-P006) are gone. Then the actor:
the smallest tensor parallel size, then the least pipeline x expert parallelism (expert before pipeline), with which
the spec compiles with no error and no warning of the layout and memory rules (ACRL-P*, ACRL-M*). When none does,
init refuses with the compiler's own words for the largest layout it tried.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import attrs

from .._pipeline.compile import compile_source
from .._pipeline.parse import parse_spec_text
from .._spec.flags import parse_flags
from ..errors import AcrlError, Diagnostic, SpecError
from .init_spec import Answers, Layout, batch_for, render

ROLLOUT_KEYS = ("rollout.gpus_per_engine", "sglang.mem_fraction_static")  # where the rules point an engine problem
LAYOUT_RULES = ("ACRL-P", "ACRL-M")  # a warning of these blocks a layout: it does not fit or cannot be placed
# Errors that depend on the layout (the batch against the data-parallel size too); any other error is an answer's.
DEPENDS_ON_LAYOUT = (*LAYOUT_RULES, "ACRL-B")
# The spec key each answer becomes -> the flag that gives it.
FLAGS = {"experiment.id": "--id", "model.type": "--model", "model.dir": "--model-dir", "data.path": "--data",
         "cluster.num_nodes": "--nodes", "cluster.gpus_per_node": "--gpus-per-node",
         "cluster.gpu_memory_gib": "--gpu-memory-gib", "agentcore.runtime_arn": "--runtime-arn",
         "agentcore.s3_bucket": "--s3-bucket", "extra.flags": "--rm-type", "eval": "--eval"}


@attrs.frozen
class AnswerProblem:
    """An answer the spec refuses whatever the layout: the flag that gave it, the compiler's message and its fix."""

    flag: str  # "" when no one answer is to blame
    message: str
    hint: str = ""

    def format(self) -> str:
        """For init's usage error: the flag and message, the fix indented below."""
        return (f"  {self.flag + ': ' if self.flag else ''}{self.message}" +
                (f"\n      {self.hint}" if self.hint else ""))


def flag_of(key: str) -> str:
    for prefix, flag in FLAGS.items():
        if key == prefix or key.startswith(prefix + "."):
            return flag
    return ""


def answer_problems(a: Answers) -> list[AnswerProblem]:
    """What the spec of ``a`` is refused for whatever its layout (an S3 bucket name, an experiment id, an empty
    path): the compile's errors of rules other than the layout's, with the flag of each."""
    try:
        compile_source(parse_spec_text(render(a, Layout(batch_size=batch_for(a.gpus))), str(Path(a.output))))
    except SpecError as exc:
        return [AnswerProblem(flag_of(d.key), d.message + (f" ({d.rule})" if d.rule else ""), d.hint)
                for d in exc.diagnostics if d.severity == "error" and not d.rule.startswith(DEPENDS_ON_LAYOUT)]
    return []


class InitRefused(AcrlError):
    """No layout of these GPUs runs the model (exit 1); nothing was written."""


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _problems(a: Answers, layout: Layout) -> list[Diagnostic]:
    """What compiling the spec of ``a`` with ``layout`` finds that blocks it: errors, and the layout and memory
    rules' warnings."""
    source = parse_spec_text(render(a, layout), str(Path(a.output)))
    try:
        bundle = compile_source(source)
    except SpecError as exc:
        return [d for d in exc.diagnostics if d.severity == "error" or d.rule.startswith(LAYOUT_RULES)]
    return [w for w in bundle.warnings if w.rule.startswith(LAYOUT_RULES)]


def _model_int(a: Answers, flag: str) -> int | None:
    values = parse_flags(a.model.model_args()).get(flag) or []
    return int(values[0]) if values and values[0].isdigit() else None


def _engine_sizes(a: Answers) -> Iterator[int]:
    """GPUs per engine: the divisors of a node's GPUs, then whole nodes (an engine larger than a node spans whole
    nodes: ACRL-P005) up to every GPU."""
    yield from _divisors(a.gpus_per_node)
    yield from (a.gpus_per_node * n for n in _divisors(a.nodes) if n > 1)


def _actor_layouts(a: Answers, engine: int) -> list[Layout]:
    """Every (TP, PP, EP) worth compiling, in the order of preference: TP within a node, PP dividing the layers,
    EP dividing the experts, TP x PP x EP dividing the GPUs (ACRL-P001, M002, M003)."""
    layers, experts = _model_int(a, "--num-layers"), _model_int(a, "--num-experts")
    found = []
    for tp in _divisors(a.gpus_per_node):
        for pp in _divisors(a.gpus // tp):
            if layers is not None and layers % pp:
                continue
            for ep in _divisors(a.gpus // (tp * pp)) if experts else [1]:
                if experts and experts % ep:
                    continue
                found.append(Layout(tp, pp, ep, engine, batch_for(a.gpus // (tp * pp))))
    return sorted(found, key=lambda c: (c.tensor, c.pipeline * c.expert, c.pipeline))


def choose_layout(a: Answers, *, search_nodes: bool = True) -> Layout:
    """The layout init writes for ``a`` (see the module's docstring); InitRefused when there is none, whose fix names
    the fewest nodes (doubling, up to MAX_NODES_TRIED) that hold the model where ``search_nodes``."""
    engine, engine_problems = None, []
    for size in _engine_sizes(a):
        problems = [d for d in _problems(a, Layout(gpus_per_engine=size, batch_size=batch_for(a.gpus)))
                    if d.key in ROLLOUT_KEYS]
        if not problems:
            engine = size
            break
        engine_problems = problems
    if engine is None:
        raise _refusal(a, "no SGLang engine of these GPUs holds it; with the largest engine tried", engine_problems,
                       search_nodes)
    last: list[Diagnostic] = []
    short_of_memory: list[Diagnostic] = []  # the last layout slime could place, refused only by the memory estimate
    for layout in _actor_layouts(a, engine):
        problems = _problems(a, layout)
        if not problems:
            return layout
        last = problems
        if all(d.rule == "ACRL-M007" for d in problems):
            short_of_memory = problems
    raise _refusal(a, "no tensor, pipeline and expert parallel sizes of these GPUs train it; with the largest layout "
                   "tried" + (" that slime can place" if short_of_memory else ""), short_of_memory or last,
                   search_nodes)


MAX_NODES_TRIED = 64


def _fewest_nodes(a: Answers) -> int | None:
    """The fewest nodes, doubling from ``a``'s, on which a layout fits (None: none up to MAX_NODES_TRIED)."""
    nodes = a.nodes * 2
    while nodes <= MAX_NODES_TRIED:
        try:
            choose_layout(attrs.evolve(a, nodes=nodes), search_nodes=False)
            return nodes
        except InitRefused:
            nodes *= 2
    return None


def _refusal(a: Answers, what: str, problems: list[Diagnostic], search_nodes: bool = False) -> InitRefused:
    gpus = f"{a.nodes} node{'s' if a.nodes > 1 else ''} x {a.gpus_per_node} GPUs of {a.gpu_memory_gib:g} GiB"
    why = "\n".join(f"  {d.message}" + (f" ({d.rule})" if d.rule else "") for d in problems[:3])
    more = [] if a.gpu_memory_gib >= 141 else ["GPUs with more memory (--gpu-memory-gib 141 for an H200)"]
    nodes = _fewest_nodes(a) if search_nodes else None
    first = f"more GPUs (--nodes {nodes} fits)" if nodes else f"more GPUs per node (no --nodes up to " \
        f"{MAX_NODES_TRIED} of {a.gpus_per_node} GPU(s) fits)" if search_nodes else f"more GPUs (--nodes {a.nodes * 2})"
    hint = ", or ".join([first, *more, "a smaller model (`acrl models`)"])
    return InitRefused(f"acrl init: {a.model.name} does not fit {gpus}: {what}:\n"
                       f"{why}\nnothing was written", hint=hint)


@attrs.frozen
class Fitted:
    """The answers, the layout chosen, the spec's text and the warnings its compile gives."""

    answers: Answers
    layout: Layout
    text: str
    warnings: tuple[Diagnostic, ...]


def fit(a: Answers) -> Fitted:
    """The spec of ``a`` with the layout chosen for it (run answer_problems first: an answer's error looks to the
    search like a layout that does not fit)."""
    layout = choose_layout(a)
    text = render(a, layout)
    bundle = compile_source(parse_spec_text(text, str(Path(a.output))))
    return Fitted(a, layout, text, bundle.warnings)
