"""ACRL-R*: slime's newer rollout features (compiler/_spec/rollout_features.py): external rollout engines ([rollout]
external_engine_addrs), the fully-async rollout function, rollout sample hooks ([rollout] sample_hook_paths) and
balance-by-flops ([train] balance_by_flops). What slime refuses at parse time or at the first rollout, read from its
code at each commit acrl has facts for; a key whose flag the targeted commit lacks is ACRL-F003's. Each rule reads
the slime argv (the keys and the escape hatch alike), so a flag written in [extra] is checked the same way.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..._spec.flags import is_number
from ..._spec.profiles import TOOLKIT_ROLLOUT
from ..._spec.rollout_features import (
    EXTERNAL_ADDRS,
    EXTERNAL_SWITCH,
    FULLY_ASYNC_ROLLOUT,
    SLIME_ROLLOUT,
    address_problem,
    needs_external_switch,
)
from .engine import ARGV, Context, Finding, KeyRef, rule

_ADDRS = "rollout.external_engine_addrs"
_HOOKS, _HOOK = "rollout.sample_hook_paths", "--rollout-sample-hook-path"


def occurrences(ctx: Context, flag: str) -> list[list[str]]:
    """The values of each occurrence of ``flag`` in the slime argv (spec keys, [extra.flags], [extra] args; a
    ``--flag=value`` too), in argv order: argparse keeps the last, or appends them all for action="append"."""
    found: list[list[str]] = []
    current: list[str] | None = None
    for token in [t for g in ctx.groups for a in g.args for t in a.tokens] + list(ctx.spec.extra.args):
        name, eq, inline = token.partition("=")
        if token.startswith("--") and len(token) > 2 and not is_number(token):
            current = [inline] if eq else []
            if name == flag:
                found.append(current)
            else:
                current = None
        elif current is not None:
            current.append(token)
    return found


def _last(ctx: Context, flag: str) -> str | None:
    values = occurrences(ctx, flag)
    return values[-1][0] if values and values[-1] else None


def _hatch(flag: str) -> tuple[KeyRef, ...]:
    """The escape-hatch keys a flag can be written at."""
    return (f"extra.flags.{flag}", f"extra.flags.{flag.removeprefix('--')}", "extra.args")


def _addrs_at(ctx: Context) -> tuple[KeyRef, ...]:
    """[rollout] external_engine_addrs where the spec sets it, else the escape hatch."""
    return (_ADDRS,) if ctx.spec.rollout.external_engine_addrs else _hatch(EXTERNAL_ADDRS)


@rule("ACRL-R001", "error", [_ADDRS, "extra.flags", "extra.args"], "external engine addresses slime accepts",
      reads=(ARGV, "slime.commit"))
def _addresses(ctx: Context) -> Iterator[Finding]:
    """Each --rollout-external-engine-addrs address is one slime can read: host:port or http://host:port (IPv6 in
    brackets) from fa3c990 on, checked at parse time by normalize_external_engine_addr
    (slime/backends/sglang_utils/external.py:48-59 at 624b824, called from slime_validate_args, arguments.py:1904-1907:
    a ValueError before anything starts); host:port only at v0.3.0 (slime/ray/rollout.py:848-856 at v0.3.0 splits it
    at ':')."""
    commit = ctx.spec.slime.commit
    for addr in [a for values in occurrences(ctx, EXTERNAL_ADDRS) for a in values]:
        problem = address_problem(addr, commit)
        if problem is not None:
            yield Finding(f"external engine address {addr!r}: {problem}; slime stops with a ValueError",
                          "write each address as host:port (e.g. 10.0.0.9:30000)",
                          keys=_addrs_at(ctx))


@rule("ACRL-R002", "error", [_ADDRS, "rollout.external", "cluster.rollout_num_gpus", "extra.flags"],
      "v0.3.0: one external address per engine", reads=("slime.commit",))
def _v030_addresses(ctx: Context) -> Iterator[Finding]:
    """At v0.3.0 slime still makes its rollout engine actors on the rollout GPUs (placement_group.py:80-96 has no
    external case) and connects engine rank i to the i-th address (slime/ray/rollout.py:848-851 at v0.3.0): fewer
    addresses than engine actors is an IndexError at launch. The addresses are used only with --rollout-external
    (arguments.py:509-520: [rollout] external); without it slime launches its own engines."""
    if not needs_external_switch(ctx.spec.slime.commit):
        return
    addrs = [a for values in occurrences(ctx, EXTERNAL_ADDRS) for a in values]
    if not addrs:
        return
    if not occurrences(ctx, EXTERNAL_SWITCH):
        yield Finding(f"{EXTERNAL_ADDRS} without {EXTERNAL_SWITCH}: slime v0.3.0 ignores the addresses and "
                      "launches its own engines", "set [rollout] external = true", keys=_addrs_at(ctx))
        return
    engines = len(ctx.placement.engine_actors)
    if len(addrs) < engines:
        yield Finding(f"{len(addrs)} external engine addresses for the {engines} engine actors slime v0.3.0 makes on "
                      "the rollout GPUs: engine rank i takes the i-th address (an IndexError at launch)",
                      f"give {engines} addresses, or fewer rollout GPUs ([cluster] rollout_num_gpus / [rollout] "
                      "gpus_per_engine)", keys=_addrs_at(ctx))


@rule("ACRL-R003", "error", ["eval.interval", "rollout.function_path", "extra.flags"],
      "no evaluation with the fully-async rollout", reads=(ARGV, "extra.args"))
def _fully_async_eval(ctx: Context) -> Iterator[Finding]:
    """slime's fully-async rollout function raises ValueError("fully-async rollout doesn't support evaluation mode")
    when called for evaluation (slime/rollout/fully_async_rollout.py:269-273 at 624b824, 251-255 at fa3c990, v0.3.0
    and v0.3.1; slime issue #2339 asks for it), and --eval-function-path defaults to --rollout-function-path
    (arguments.py:1968-1969 at 624b824): with eval.interval the run stops at its first evaluation, before the first
    rollout under train.py (train.py:50 at 624b824, unless --skip-eval-before-train), at the first interval under
    train_async.py (train_async.py:72-73)."""
    rollout = _last(ctx, "--rollout-function-path") or SLIME_ROLLOUT
    evaluation = _last(ctx, "--eval-function-path") or rollout
    if evaluation == FULLY_ASYNC_ROLLOUT and occurrences(ctx, "--eval-interval"):
        yield Finding("evaluation with slime's fully-async rollout function: it raises 'fully-async rollout doesn't "
                      "support evaluation mode' at the first evaluation", "remove [eval] interval, or evaluate with "
                      f"another function ([extra.flags] --eval-function-path, e.g. {SLIME_ROLLOUT})",
                      keys=("eval.interval",))


@rule("ACRL-R004", "warning", ["train.mode", "rollout.function_path"], "the fully-async rollout runs train_async.py",
      reads=(ARGV, "extra.args"))
def _fully_async_sync(ctx: Context) -> Iterator[Finding]:
    """slime's fully-async rollout keeps a pool of generations running in the background across rollouts; slime runs
    it with the async training driver (examples/fully_async/README.md at 624b824: "Use the async training driver:
    python3 train_async.py (not train.py)"). train.py offloads the engines after each rollout when colocated and
    updates their weights (train.py:53-56, 84-89 at 624b824) under the generations the worker keeps running."""
    if ctx.spec.train.mode == "sync" and _last(ctx, "--rollout-function-path") == FULLY_ASYNC_ROLLOUT:
        yield Finding("slime's fully-async rollout function with [train] mode = \"sync\" (train.py): slime runs it "
                      "with train_async.py", "set [train] mode = \"async\" (and [cluster] colocate = false)")


@rule("ACRL-R005", "warning", [_HOOKS, "rollout.function_path"], "sample hooks run in slime's own rollout",
      reads=(ARGV, "extra.args"))
def _hooks_unused(ctx: Context) -> Iterator[Finding]:
    """Rollout sample hooks are applied by slime's generate_and_rm (slime/rollout/sglang_rollout.py:264 at 624b824,
    262 at v0.3.1), which slime's own rollout functions call (sglang_rollout.generate_rollout, the fully-async one);
    the toolkit's rollout function does not call it, so with it slime never runs a hook."""
    if occurrences(ctx, _HOOK) and _last(ctx, "--rollout-function-path") == TOOLKIT_ROLLOUT:
        yield Finding("rollout sample hooks with the toolkit's rollout function: it does not call slime's "
                      "generate_and_rm, so no hook runs", "remove the hooks, or use a rollout function built on "
                      "slime's generate_and_rm (integration \"slime\" or \"custom\")",
                      keys=(_HOOKS,) if ctx.spec.rollout.sample_hook_paths else _hatch(_HOOK))


@rule("ACRL-R006", "error", ["train.balance_by_flops", "train.use_dynamic_batch_size"],
      "balance-by-flops needs dynamic batch size", reads=("extra.args", "extra.flags"))
def _balance_by_flops(ctx: Context) -> Iterator[Finding]:
    """slime asserts "--balance-by-flops requires --use-dynamic-batch-size" at parse time
    (slime/utils/arguments.py:1872-1873 at 624b824, 1852-1853 at fa3c990, 1813-1814 at v0.3.1; no such flag at
    v0.3.0)."""
    if ctx.passes("--balance-by-flops") and not ctx.passes("--use-dynamic-batch-size"):
        yield Finding("balance_by_flops without use_dynamic_batch_size: slime asserts '--balance-by-flops requires "
                      "--use-dynamic-batch-size'", "set [train] use_dynamic_batch_size = true, or remove "
                      "balance_by_flops")


@rule("ACRL-R007", "warning", ["cluster.colocate", _ADDRS, "extra.flags", "extra.args"],
      "external engines are not colocated", reads=(ARGV,))
def _external_colocated(ctx: Context) -> Iterator[Finding]:
    """With --colocate slime syncs weights to the engines through CUDA IPC handles of the actor's GPU tensors
    (UpdateWeightFromTensor: slime/backends/megatron_utils/actor.py:168-169 at 624b824, 161-162 at v0.3.1, 139-143 at
    fa3c990, 137-138 at v0.3.0), which only a process on the same GPU can open, and offloads the engines between
    rollouts (offload_rollout, slime/utils/arguments.py:1939-1950 at 624b824), so each external engine must run with
    --enable-memory-saver (sglang_engine.py:532, compared with the engine's /server_info at 157-169). External engines
    started elsewhere (the usual case) break at the first weight update; colocated ones must be on the actor's GPUs."""
    if ctx.passes("--colocate") and occurrences(ctx, EXTERNAL_ADDRS):
        yield Finding("[cluster] colocate with external rollout engines: slime updates their weights through CUDA IPC "
                      "handles, which only an engine on the actor's own GPUs can open, and expects each to run with "
                      "--enable-memory-saver", "set [cluster] colocate = false, unless every external engine runs on "
                      "the actor's GPUs with --enable-memory-saver", keys=(*_addrs_at(ctx), "cluster.colocate"))
