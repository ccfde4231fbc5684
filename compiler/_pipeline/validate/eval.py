"""ACRL-E*: evaluation and checkpoints. Eval intervals need datasets (and datasets an interval, or they are
never used), save intervals a save directory,
and no checkpoint overwrites the model being trained.
"""

from __future__ import annotations

from collections.abc import Iterator

from .engine import Context, Finding, rule


@rule("ACRL-E001", "error", ["eval.interval", "eval.datasets"], "eval interval needs datasets")
def _eval_datasets(ctx: Context) -> Iterator[Finding]:
    """eval.interval needs eval datasets: slime asserts it at launch (slime/utils/arguments.py:1840-1841 at
    624b824: ``if args.eval_interval is not None: assert args.eval_datasets``)."""
    e = ctx.spec.eval
    if e.interval is not None and not e.datasets:
        yield Finding("eval.interval is set but no eval datasets are configured; slime stops at launch",
                      f'add an [eval.datasets] table of name = "/path/to/eval.jsonl", or remove interval = '
                      f"{e.interval}")


@rule("ACRL-E004", "warning", ["eval.datasets", "eval.interval"], "eval datasets without an interval are never used")
def _eval_interval(ctx: Context) -> Iterator[Finding]:
    """Eval datasets without eval.interval: slime accepts them (it asserts only the other way, arguments.py:1840-1841
    at 624b824) and never evaluates them: train.py and train_async.py evaluate only when
    ``should_run_periodic_action(rollout_id, args.eval_interval, ...)`` is true (train.py:50 and :90,
    train_async.py:72), and it is false for an interval of None (slime/utils/misc.py:121-122)."""
    e = ctx.spec.eval
    if e.datasets and e.interval is None:
        yield Finding("eval datasets are configured but eval.interval is not: slime accepts them and never evaluates "
                      "them", "set [eval] interval to evaluate them, or remove [eval.datasets]")


@rule("ACRL-E002", "error", ["checkpoint.save_interval", "checkpoint.save"], "save interval needs a save dir")
def _save_interval(ctx: Context) -> Iterator[Finding]:
    """checkpoint.save_interval needs checkpoint.save (slime checks at launch)."""
    c = ctx.spec.checkpoint
    if c.save_interval is not None and not c.save:
        yield Finding(f"save_interval = {c.save_interval} saves to no directory: slime requires --save with "
                      "--save-interval", 'set [checkpoint] save = "/path/to/checkpoints" (a directory on the cluster), '
                      "or remove save_interval")


@rule("ACRL-E003", "error", ["checkpoint.save_hf", "checkpoint.save", "model.dir"],
      "checkpoints never overwrite the source model")
def _save_paths(ctx: Context) -> Iterator[Finding]:
    """Checkpoints (save, save_hf) must not be written into the Hugging Face checkpoint being trained."""
    c, model = ctx.spec.checkpoint, ctx.spec.model.dir.rstrip("/")
    for key, path in (("checkpoint.save_hf", c.save_hf), ("checkpoint.save", c.save)):
        if path is not None and path.rstrip("/") == model:
            yield Finding(f"{key} is the Hugging Face checkpoint ({model}): saving would overwrite the model "
                          "being trained", "save to another directory", keys=(key,))
