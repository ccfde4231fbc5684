"""ACRL-A*: the algorithm. KL coefficients, advantage normalization and TIS: the combinations slime
rejects at launch or that load the reference model for nothing.
"""

from __future__ import annotations

from collections.abc import Iterator

from .engine import Context, Finding, rule


@rule("ACRL-A001", "error", ["algorithm.kl_coef", "algorithm.kl_loss_coef"], "only one KL coefficient")
def _two_kl(ctx: Context) -> Iterator[Finding]:
    """kl_coef and kl_loss_coef cannot both be non-zero (slime checks at launch)."""
    a = ctx.spec.algorithm
    if a.kl_coef and a.kl_loss_coef:
        yield Finding("slime rejects kl_coef and kl_loss_coef both non-zero", "keep one of them")


@rule("ACRL-A002", "error", ["algorithm.advantage_estimator", "algorithm.normalize_advantages"],
      "REINFORCE++ needs advantage normalization")
def _rpp_norm(ctx: Context) -> Iterator[Finding]:
    """reinforce_plus_plus and reinforce_plus_plus_baseline need normalize_advantages (slime checks at launch)."""
    a = ctx.spec.algorithm
    if a.advantage_estimator.startswith("reinforce_plus_plus") and not a.normalize_advantages:
        yield Finding(f"{a.advantage_estimator} requires advantage normalization; slime stops at launch",
                      "set [algorithm] normalize_advantages = true")


@rule("ACRL-A003", "error", ["algorithm.use_tis", "extra.flags"], "TIS excludes rollout log-probs",
      reads=("extra.args",))
def _tis(ctx: Context) -> Iterator[Finding]:
    """use_tis and --use-rollout-logprobs are mutually exclusive (slime checks at launch)."""
    if ctx.spec.algorithm.use_tis and ctx.passes("--use-rollout-logprobs"):
        yield Finding("use_tis and --use-rollout-logprobs cannot be set together",
                      "drop --use-rollout-logprobs or use_tis")


@rule("ACRL-A004", "warning", ["algorithm.use_kl_loss", "algorithm.kl_loss_coef"],
      "a KL loss with a zero coefficient")
def _kl_zero(ctx: Context) -> Iterator[Finding]:
    """use_kl_loss with an explicit kl_loss_coef of 0 loads the reference model for nothing."""
    a = ctx.spec.algorithm
    if a.use_kl_loss and not a.kl_loss_coef and ctx.spec.algorithm.kl_loss_coef is not None:
        yield Finding("use_kl_loss with kl_loss_coef = 0 loads the reference model for a zero-weight loss",
                      "set kl_loss_coef > 0, or use_kl_loss = false")
