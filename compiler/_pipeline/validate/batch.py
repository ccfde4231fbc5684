"""ACRL-B*: batch arithmetic. The rollout's samples, optimizer steps, global and micro batches and the
per-GPU token budget: what slime and Megatron reject, and the samples that would be dropped or run out of
memory.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..argv import global_batch_size, samples_per_rollout
from .engine import PLACEMENT, Context, Finding, divisors, one_of, rule


@rule("ACRL-B001", "error", ["train.num_steps_per_rollout", "rollout.batch_size", "rollout.n_samples_per_prompt"],
      "rollout samples split evenly into optimizer steps")
def _steps_divide(ctx: Context) -> Iterator[Finding]:
    """The rollout's samples (batch_size x n_samples_per_prompt) must split evenly into num_steps_per_rollout optimizer
    steps; leftovers are dropped silently."""
    steps = ctx.spec.train.num_steps_per_rollout
    samples = samples_per_rollout(ctx.spec)
    if samples < steps:
        yield Finding(f"{samples} samples per rollout cannot make {steps} optimizer steps",
                      f"set num_steps_per_rollout to one of {one_of(divisors(samples))}")
    elif samples % steps:
        yield Finding(f"{samples} samples per rollout (batch_size x n_samples_per_prompt) are not divisible "
                      f"by num_steps_per_rollout = {steps}: trailing samples would be dropped silently",
                      f"set num_steps_per_rollout to a divisor of {samples}: one of {one_of(divisors(samples))}")


@rule("ACRL-B002", "error", ["train.num_steps_per_rollout", "train.micro_batch_size", "parallel.tensor"],
      "global batch divisible by micro-batch x data-parallel size",
      reads=(PLACEMENT, "rollout.batch_size", "rollout.n_samples_per_prompt"))
def _gbs_microbatch(ctx: Context) -> Iterator[Finding]:
    """The global batch must be divisible by micro_batch_size x data-parallel size; Megatron's micro-batch calculator
    fails in the actors otherwise."""
    mbs = ctx.spec.train.micro_batch_size or 1
    gbs = global_batch_size(ctx.spec)
    if gbs and gbs % (mbs * ctx.data_parallel):
        dp, samples = ctx.data_parallel, samples_per_rollout(ctx.spec)
        steps = [s for s in divisors(samples) if (samples // s) % (mbs * dp) == 0]
        micro = [m for m in divisors(gbs // dp) if gbs % dp == 0]
        fixes = ([f"num_steps_per_rollout to one of {one_of(steps)}"] if steps else []) + \
            ([f"micro_batch_size to one of {one_of(micro)}"] if micro else [])
        yield Finding(f"global batch {gbs} is not divisible by micro_batch_size x data-parallel size = "
                      f"{mbs} x {dp}: Megatron's micro-batch calculator fails in the actors",
                      "set " + " or ".join(fixes) if fixes else
                      f"change the rollout's {samples} samples, micro_batch_size or the parallel sizes so that "
                      f"samples / num_steps_per_rollout is a multiple of micro_batch_size x {dp}")


@rule("ACRL-B003", "warning", ["train.max_tokens_per_gpu", "rollout.max_response_len",
                               "rollout.max_context_len"], "a sample fits in max_tokens_per_gpu",
      reads=("parallel.context", "rollout.max_prompt_len", "train.use_dynamic_batch_size"))
def _tokens_per_gpu(ctx: Context) -> Iterator[Finding]:
    """With dynamic batching, the longest sample should fit in max_tokens_per_gpu x context; an oversize sample gets
    its own micro-batch and risks OOM."""
    r, t = ctx.spec.rollout, ctx.spec.train
    longest = r.max_context_len or ((r.max_prompt_len + r.max_response_len)
                                    if r.max_prompt_len and r.max_response_len else None)
    known = longest if longest is not None else r.max_response_len
    if t.max_tokens_per_gpu is None or known is None:  # no budget (slime's default) or no bound on a sample
        return
    budget = t.max_tokens_per_gpu * ctx.spec.parallel.context
    if t.use_dynamic_batch_size and known > budget:
        what = "the longest sample" if longest is not None else "max_response_len alone"
        yield Finding(f"{what} ({known} tokens) exceeds max_tokens_per_gpu x context = {budget}: such a "
                      "sample gets a micro-batch of its own and risks running out of memory",
                      f"raise max_tokens_per_gpu to at least {known}")


@rule("ACRL-B004", "error", ["rollout.over_sampling_batch_size", "rollout.batch_size"],
      "over-sampling batch at least the rollout batch")
def _oversampling(ctx: Context) -> Iterator[Finding]:
    """over_sampling_batch_size must be at least batch_size (slime checks at launch)."""
    r = ctx.spec.rollout
    if r.over_sampling_batch_size is not None and r.over_sampling_batch_size < r.batch_size:
        yield Finding(f"over_sampling_batch_size {r.over_sampling_batch_size} < batch_size {r.batch_size}",
                      f"set over_sampling_batch_size to at least {r.batch_size}, or remove it")


@rule("ACRL-B005", "error", ["rollout.max_prompt_len", "rollout.max_context_len"],
      "prompt shorter than the context")
def _prompt_context(ctx: Context) -> Iterator[Finding]:
    """max_prompt_len must be smaller than max_context_len (slime checks at launch)."""
    r = ctx.spec.rollout
    if r.max_prompt_len is not None and r.max_context_len is not None and r.max_prompt_len >= r.max_context_len:
        yield Finding(f"max_prompt_len {r.max_prompt_len} must be smaller than max_context_len "
                      f"{r.max_context_len}", f"set max_prompt_len below {r.max_context_len}, or max_context_len "
                      f"above {r.max_prompt_len}")


@rule("ACRL-B006", "error", ["experiment.num_epoch", "experiment.num_rollout"], "num_epoch or num_rollout, not both")
def _epochs_or_rollouts(ctx: Context) -> Iterator[Finding]:
    """num_epoch and num_rollout are exclusive: slime ignores --num-epoch when --num-rollout is given (and derives the
    rollouts from the dataset size when only --num-epoch is)."""
    e = ctx.spec.experiment
    if e.num_epoch is not None and e.num_rollout is not None:
        yield Finding(f"num_epoch = {e.num_epoch} and num_rollout = {e.num_rollout}: slime would ignore num_epoch",
                      "remove num_rollout to train num_epoch epochs, or num_epoch to train num_rollout rollouts")
