"""ACRL-P*: cluster and parallelism. The actor's and the rollout's GPUs against the tensor, pipeline,
context and SGLang parallel sizes: what Megatron, slime and SGLang reject at launch, and the setups that
silently leave GPUs idle.
"""

from __future__ import annotations

from collections.abc import Iterator

from .engine import PLACEMENT, Context, Finding, divisors, one_of, rule


@rule("ACRL-P001", "error", ["cluster.actor_num_gpus_per_node", "cluster.actor_num_nodes", "parallel.tensor",
                             "parallel.pipeline", "parallel.context"], "actor GPUs divisible by TP x PP x CP",
      reads=(PLACEMENT,))
def _actor_world(ctx: Context) -> Iterator[Finding]:
    """The actor's GPUs (actor_num_nodes x actor_num_gpus_per_node) must be divisible by tensor x pipeline x context
    parallel sizes; Megatron stops at launch otherwise."""
    p = ctx.spec.parallel
    size = p.tensor * p.pipeline * p.context
    if ctx.actor_gpus % size:
        sizes = {"tensor": p.tensor, "pipeline": p.pipeline, "context": p.context}
        fix, key = f"choose sizes whose product tensor x pipeline x context divides {ctx.actor_gpus}", None
        for name, value in sizes.items():  # the first size whose change alone fixes it (the one written wrong)
            rest = size // value
            if ctx.actor_gpus % rest == 0:
                others = " and ".join(f"{o} {v}" for o, v in sizes.items() if o != name)
                fix, key = f"with {others}, set {name} to one of {one_of(divisors(ctx.actor_gpus // rest))}", name
                break
        yield Finding(f"the actor's {ctx.actor_gpus} GPUs (actor_num_nodes x actor_num_gpus_per_node) are not "
                      f"divisible by tensor x pipeline x context = {size}; Megatron stops at launch", fix,
                      keys=(f"parallel.{key}",) if key else ())


@rule("ACRL-P002", "error", ["cluster.colocate", "cluster.rollout_num_gpus"],
      "disaggregated rollout needs rollout_num_gpus", reads=(PLACEMENT,))
def _disaggregated(ctx: Context) -> Iterator[Finding]:
    """Without colocate, rollout_num_gpus is required; slime otherwise crashes with a TypeError building the placement
    group. Not under --debug-train-only (slime sizes the group from the actor alone, placement_group.py:103-104) nor
    for an external rollout (slime reads the GPUs from the servers)."""
    c, a = ctx.spec.cluster, ctx.placement.args
    if not c.colocate and c.rollout_num_gpus is None and not a.debug_train_only and not a.rollout_external:
        per, total = ctx.spec.rollout.gpus_per_engine, (c.num_nodes or 1) * c.gpus_per_node
        fits = range(per, total, per)
        yield Finding("colocate = false without rollout_num_gpus: slime crashes with a TypeError when it "
                      "builds the placement group", "set [cluster] rollout_num_gpus to the rollout engines' GPUs" + (
                          f": a multiple of gpus_per_engine {per} below the cluster's {total}, one of {one_of(fits)} "
                          "(the actor takes the rest)" if fits else ""))


@rule("ACRL-P003", "error", ["train.mode", "cluster.colocate"], "async training cannot colocate")
def _async_colocate(ctx: Context) -> Iterator[Finding]:
    """train_async.py rejects --colocate."""
    if ctx.spec.train.mode == "async" and ctx.spec.cluster.colocate:
        yield Finding("train_async.py rejects --colocate ('Colocation is not supported for async training')",
                      "set [cluster] colocate = false and rollout_num_gpus")


@rule("ACRL-P004", "warning", ["cluster.rollout_num_gpus", "rollout.gpus_per_engine"],
      "rollout GPUs divisible by GPUs per engine", reads=(PLACEMENT,))
def _rollout_engines(ctx: Context) -> Iterator[Finding]:
    """Rollout GPUs should be a multiple of GPUs per engine; slime floors the engine count and leaves GPUs idle.
    With [sglang.models] each server group is checked instead (ACRL-G004, ACRL-G005)."""
    gpus, per = ctx.rollout_gpus, ctx.spec.rollout.gpus_per_engine
    if gpus is not None and not ctx.spec.sglang.models and ctx.placement.engine_actors and \
            ctx.placement.idle_rollout_gpus:
        below = gpus - gpus % per
        near = f"{below} or {below + per}" if below else str(below + per)
        yield Finding(f"{gpus} rollout GPUs are not divisible by {per} GPUs per engine: slime floors the "
                      "engine count and leaves GPUs idle", f"set rollout_num_gpus to a multiple of {per} ({near}), "
                      f"or gpus_per_engine to one of {one_of(divisors(gpus))}")


@rule("ACRL-P005", "error", ["rollout.gpus_per_engine", "cluster.gpus_per_node"],
      "multi-node engines span whole nodes")
def _engine_nodes(ctx: Context) -> Iterator[Finding]:
    """An engine larger than a node must span whole nodes; otherwise the multi-node SGLang engine gets a floored node
    count. With [sglang.models], each server group's engines are checked instead (ACRL-G004)."""
    per, node = ctx.spec.rollout.gpus_per_engine, ctx.spec.cluster.gpus_per_node
    if per > node and per % node and not ctx.spec.sglang.models:
        yield Finding(f"an engine of {per} GPUs spans nodes of {node} GPUs but is not a multiple of it: the "
                      "multi-node SGLang engine is built with a floored node count",
                      f"use a multiple of {node} or at most {node}")


@rule("ACRL-P006", "error", ["rollout.gpus_per_engine", "cluster.rollout_num_gpus"],
      "rollout GPUs hold at least one engine", reads=(PLACEMENT,))
def _engine_fits(ctx: Context) -> Iterator[Finding]:
    """The rollout GPUs must hold at least one engine (with [sglang.models]: each server group, ACRL-G004)."""
    gpus = ctx.rollout_gpus
    a = ctx.placement.args
    if gpus is not None and gpus < ctx.spec.rollout.gpus_per_engine and not a.debug_train_only and \
            not a.rollout_external and not ctx.spec.sglang.models:
        yield Finding(f"one engine needs {ctx.spec.rollout.gpus_per_engine} GPUs but rollout has {gpus}",
                      f"set gpus_per_engine to one of {one_of(divisors(gpus))}, or give the rollout at least "
                      f"{ctx.spec.rollout.gpus_per_engine} GPUs")


@rule("ACRL-P007", "error", ["sglang.data_parallel_size", "extra.flags"],
      "SGLang data parallelism needs DP attention", reads=("extra.args",))
def _sglang_dp(ctx: Context) -> Iterator[Finding]:
    """SGLang data parallelism > 1 needs --sglang-enable-dp-attention (slime asserts without a message)."""
    if (ctx.spec.sglang.data_parallel_size or 1) > 1 and not ctx.passes("--sglang-enable-dp-attention"):
        yield Finding("sglang data_parallel_size > 1 without --sglang-enable-dp-attention fails slime's "
                      "sglang validation with a bare AssertionError",
                      'add "--sglang-enable-dp-attention" = true to [extra.flags]')


@rule("ACRL-P008", "warning", ["parallel.sequence_parallel", "parallel.tensor"],
      "sequence parallelism needs tensor parallelism")
def _sp_without_tp(ctx: Context) -> Iterator[Finding]:
    """Sequence parallelism with tensor = 1 is silently turned off by Megatron."""
    if ctx.spec.parallel.sequence_parallel and ctx.spec.parallel.tensor == 1:
        yield Finding("Megatron silently turns sequence parallelism off when tensor = 1",
                      "set sequence_parallel = false to say what runs")


@rule("ACRL-P009", "error", ["parallel.context"], "context parallelism divides the sequence length")
def _cp_seq_length(ctx: Context) -> Iterator[Finding]:
    """slime sets Megatron's seq_length to a 4096 placeholder, which must be a multiple of 2 x context parallel
    size; Megatron stops at launch otherwise."""
    cp = ctx.spec.parallel.context
    if cp > 1 and 4096 % (2 * cp):
        yield Finding(f"context parallel size {cp}: Megatron needs seq-length (slime's placeholder 4096) to be "
                      f"a multiple of 2 x {cp}", f"set context to a power of two: one of {one_of(divisors(2048), 8)}")
