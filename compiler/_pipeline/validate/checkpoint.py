"""ACRL-H* ("history"): saving, resuming and continuing ([checkpoint], compiler/_spec/checkpoint.py). What slime and
Megatron-LM do with these flags that the compile can decide: the mistakes that make a run train nothing and report
success, load the wrong weights, or never save. What depends on the checkpoint itself (its tracker, its iteration,
num_rollout reached) is decided by train.sh at launch (templates/train.sh.jinja) and by `acrl run --resume`.

Citations are file:line at the slime commits acrl has facts for: v0.3.0 (bf14dc21), fa3c990, v0.3.1 (a6272da0) and
624b824; Megatron-LM at 1dcf0dafa, which all four run (slime's docker/Dockerfile:7). slime's train.py and
train_async.py are at the top of its repository, the others under slime/.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from ..._slime.commit_facts import commit_facts
from ..._spec.checkpoint import TRACKER, same_directory
from ..._spec.flags import normalize_flag
from .engine import Context, Finding, KeyRef, rule

_START, _STEP = "checkpoint.start_rollout_id", "checkpoint.ckpt_step"
_LOAD, _SAVE = "checkpoint.load", "checkpoint.save"
_V030, _FA, _V031, _HEAD = ("bf14dc21f9500746447f2572d0692e981c4d2a7e", "fa3c990af6f18efd3fd9922698bf4bf4048d1263",
                            "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc", "624b824a898ab0ec1fcb4d373004c7f3852bf515")
# Whether slime_validate_args keeps an explicit --start-rollout-id when it loads no Megatron checkpoint: it resets it
# to 0 at v0.3.0 (utils/arguments.py:1725 bridge, 1738 raw), fa3c990 (1805, 1818) and v0.3.1 (1779); 624b824 resets
# it only when unset (1837-1838, slime #2236).
_KEEPS_START = {_V030: False, _FA: False, _V031: False, _HEAD: True}
_ITERATION_FOLDER = re.compile(r"iter_\d{7}|release")


def _commit(ctx: Context) -> str | None:
    """The targeted commit's full hash, or None when acrl has no facts of it."""
    facts = commit_facts(ctx.spec.slime.commit)
    return facts.commit if facts is not None else None


def _loads(ctx: Context) -> bool:
    """Whether a launch can load a checkpoint: a directory to load from, and resume not "never"."""
    c = ctx.spec.checkpoint
    return c.resume != "never" and (c.save is not None or c.load is not None)


def _start(ctx: Context) -> tuple[int, KeyRef] | None:
    """The first rollout of the first launch when the spec says it (start_rollout_id, or ckpt_step + 1 when a
    checkpoint is loaded), with its key."""
    c = ctx.spec.checkpoint
    if c.start_rollout_id is not None:
        return c.start_rollout_id, _START
    if c.ckpt_step is not None and _loads(ctx):
        return c.ckpt_step + 1, _STEP
    return None


@rule("ACRL-H001", "error", [_START, _STEP, "experiment.num_rollout"], "the first rollout is below num_rollout",
      reads=("checkpoint.load", "checkpoint.resume", "checkpoint.save"))
def _zero_rollouts(ctx: Context) -> Iterator[Finding]:
    """start_rollout_id (or ckpt_step + 1, the rollout after the loaded iteration) must be below num_rollout: slime's
    loop is ``for rollout_id in range(args.start_rollout_id, args.num_rollout)`` (train.py v0.3.0:67, fa3c990:63,
    v0.3.1 and 624b824:49), so it would start the engines, load the model, train nothing, save nothing and exit 0
    (train_async.py still generates one rollout first: 624b824:32)."""
    start, num_rollout = _start(ctx), ctx.spec.experiment.num_rollout
    if start is None or num_rollout is None or start[0] < num_rollout:
        return
    what = f"start_rollout_id {start[0]}" if start[1] == _START else \
        f"ckpt_step {start[0] - 1} resumes at rollout {start[0]}, which"
    yield Finding(f"{what} is not below num_rollout {num_rollout}: slime would run no rollout at all and exit 0",
                  f"raise [experiment] num_rollout above {start[0]} (a continuation), or lower {start[1]}",
                  keys=(start[1], "experiment.num_rollout"))


@rule("ACRL-H002", "error", [_LOAD], "load names a checkpoint directory, not an iteration in it", before_sourcing=True)
def _iteration_folder(ctx: Context) -> Iterator[Finding]:
    """[checkpoint] load must be the directory that holds latest_checkpointed_iteration.txt, not one of its
    iter_NNNNNNN or release folders: with no tracker inside, slime silently loads --ref-load instead
    (utils/arguments.py 624b824:1829-1834, v0.3.1:1771-1776, raw mode at fa3c990:1806-1816), and in bridge mode at
    v0.3.0 and fa3c990 keeps it (1713-1725, 1793-1805), takes it for a Megatron checkpoint by its name
    (backends/megatron_utils/checkpoint.py fa3c990:123-126), and Megatron, finding no tracker, starts from randomly
    initialized weights (megatron/training/checkpointing.py:1209-1221, 1717-1720)."""
    load = ctx.spec.checkpoint.load
    if load is None:
        return
    parent, name = posixpath.split(posixpath.normpath(load))
    if not _ITERATION_FOLDER.fullmatch(name):
        return
    if name == "release":
        yield Finding(f"load {load!r} is a release folder (a converted model, iteration 0), not a checkpoint "
                      "directory: slime would not load it as one", "name its parent in [model] ref_load: a converted "
                      "model is where training starts, not a checkpoint to resume", keys=(_LOAD,))
        return
    yield Finding(f"load {load!r} is an iteration folder inside a checkpoint directory: slime finds no {TRACKER} "
                  "there and silently loads other weights ([model] ref_load, or at v0.3.0 and fa3c990 in bridge mode, "
                  "random ones)", f"set load = {parent!r} and ckpt_step = {int(name[5:])}", keys=(_LOAD,))


@rule("ACRL-H003", "error", [_LOAD, _SAVE, "model.ref_load", "model.dir"], "checkpoints apart from the reference "
      "model", before_sourcing=True)
def _reference(ctx: Context) -> Iterator[Finding]:
    """[checkpoint] load must not be the reference model's directory ([model] ref_load, which defaults to [model]
    dir) nor the Hugging Face checkpoint, and save not the reference's (ACRL-E003 keeps it off [model] dir). The two
    flags mean different things: --ref-load is the reference model (built for the KL terms, loaded with
    load_other_checkpoint("ref", args.ref_load): backends/megatron_utils/actor.py 624b824:133, 659-690) and the weights
    training starts from when --load holds no checkpoint; --load is the run's own checkpoint to resume, with its
    optimizer and rollout id (utils/arguments.py 624b824:1817-1838; slime's docs, docs/en/get_started/usage.md:129-133).
    slime never sets ref_load from load, only load from ref_load. Saving into the reference's directory moves its
    tracker, so the reference would then load the trained actor."""
    s, c = ctx.spec, ctx.spec.checkpoint
    ref_key = "model.ref_load" if s.model.ref_load else "model.dir"
    ref = s.model.ref_load or s.model.dir
    if c.load is not None and same_directory(c.load, ref):
        yield Finding(f"load is the reference model's directory ({ref_key} {ref!r}): --ref-load is where training "
                      "starts and the reference the KL terms use; --load is a checkpoint this run resumes from, "
                      "optimizer and rollout id included", "leave load unset: a run starts from [model] ref_load "
                      "when no checkpoint is found", keys=(_LOAD, ref_key))
    elif c.load is not None and same_directory(c.load, s.model.dir):
        yield Finding(f"load is the Hugging Face checkpoint ([model] dir {s.model.dir!r}), not a Megatron checkpoint "
                      "to resume: train.sh would never find one there", "leave load unset: a run starts from the model "
                      "when no checkpoint is found", keys=(_LOAD, "model.dir"))
    if c.save is not None and s.model.ref_load and same_directory(c.save, s.model.ref_load) and \
            not same_directory(c.save, s.model.dir):
        yield Finding(f"save is the reference model's directory (model.ref_load {ref!r}): each save would move its "
                      f"{TRACKER}, so the reference model would then be the trained actor, and a relaunch would "
                      "resume from it", "save into a directory of its own", keys=(_SAVE, "model.ref_load"))


@rule("ACRL-H004", "warning", [_START, "checkpoint.resume"], "a start rollout slime keeps",
      reads=("checkpoint.load", "checkpoint.save", "slime.commit"))
def _dropped_start(ctx: Context) -> Iterator[Finding]:
    """An explicit start_rollout_id is reset to 0 by slime_validate_args whenever it loads no Megatron checkpoint, at
    every commit before 624b824 (utils/arguments.py v0.3.0:1725 and 1738, fa3c990:1805 and 1818, v0.3.1:1779);
    624b824 keeps it (1837-1838, slime #2236). It is honoured with a checkpoint (ray/placement_group.py
    624b824:218-219): resume = "required" guarantees one."""
    c = ctx.spec.checkpoint
    commit = _commit(ctx)
    if c.start_rollout_id is None or c.start_rollout_id == 0 or commit is None or _KEEPS_START.get(commit, True) \
            or c.resume == "required":
        return
    name = commit_facts(commit).name  # type: ignore[union-attr]
    if not _loads(ctx):
        why = "resume is \"never\"" if c.resume == "never" else "no save or load directory"
        yield Finding(f"start_rollout_id {c.start_rollout_id} is dropped: nothing is ever loaded ({why}), and slime "
                      f"{name} then starts at rollout 0", "target slime 624b824 or later, or load a checkpoint",
                      keys=(_START,))
    else:
        yield Finding(f"start_rollout_id {c.start_rollout_id} holds only when train.sh finds a checkpoint to load: "
                      f"on a launch that finds none, slime {name} starts at rollout 0",
                      'set resume = "required" to refuse such a launch, or target slime 624b824 or later',
                      keys=(_START, "checkpoint.resume"))


def _saves_every(ctx: Context) -> bool:
    """Whether slime gets a save interval: [checkpoint] save_interval, the escape hatch, or --release-train (which
    sets 1 when unset: utils/arguments.py 624b824:2055-2056, v0.3.1:1991-1992)."""
    return ctx.spec.checkpoint.save_interval is not None or "--save-interval" in ctx.extra or \
        ctx.spec.weight_sync.release_train or "--release-train" in ctx.extra


@rule("ACRL-H005", "warning", ["checkpoint.save_interval", _SAVE, "checkpoint.save_hf"], "a save directory is "
      "saved to", reads=("extra.flags", "extra.args", "weight_sync.release_train"))
def _never_saves(ctx: Context) -> Iterator[Finding]:
    """save (or save_hf) without save_interval: slime's should_run_periodic_action returns False when the interval is
    None (utils/misc.py v0.3.0:89, fa3c990:119, v0.3.1 and 624b824:121), so slime never saves, not even after the
    last rollout, and nothing can be resumed."""
    c = ctx.spec.checkpoint
    if (c.save is not None or c.save_hf is not None) and not _saves_every(ctx):
        what = "save" if c.save is not None else "save_hf"
        yield Finding(f"{what} is set without save_interval: slime never saves (nor exports), not even at the end of "
                      "the run", "set [checkpoint] save_interval (slime also saves after the last rollout)"
                      + ("" if c.save is not None else ", and save"),
                      keys=("checkpoint.save_interval", f"checkpoint.{what}"))


def _formatted(template: str) -> str | None:
    """Why slime's ``save_hf.format(rollout_id=...)`` fails on ``template``, or None when it works."""
    try:
        template.format(rollout_id=0)
    except (KeyError, IndexError) as exc:
        return f"it names {{{exc.args[0]}}}, and slime fills in rollout_id only"
    except (ValueError, AttributeError, TypeError) as exc:
        return str(exc)
    return None


@rule("ACRL-H006", "error", ["checkpoint.save_hf"], "save_hf is a path slime can fill in", before_sourcing=True)
def _save_hf_format(ctx: Context) -> Iterator[Finding]:
    """slime writes the HF export to ``Path(args.save_hf.format(rollout_id=rollout_id))`` at each save
    (backends/megatron_utils/actor.py fa3c990:575, v0.3.1:565, 624b824:590; v0.3.0 model.py:906 and
    hf_checkpoint_saver.py:29): any other {field}, a positional {} or an unbalanced brace raises there, after the
    first save's rollouts (at v0.3.0 the error is logged and no export is written: model.py:884-894)."""
    save_hf = ctx.spec.checkpoint.save_hf
    why = None if save_hf is None else _formatted(save_hf)
    if why is not None:
        yield Finding(f"save_hf {save_hf!r} is not a path slime can fill in: {why}",
                      "write {rollout_id} where the rollout goes, and a literal brace as {{ or }}",
                      keys=("checkpoint.save_hf",))


@rule("ACRL-H007", "warning", ["checkpoint.save_hf"], "each HF export has its own path", before_sourcing=True)
def _save_hf_once(ctx: Context) -> Iterator[Finding]:
    """save_hf without {rollout_id}: slime formats the path with the rollout id (ACRL-H006's citations), so without
    the placeholder every save writes the same directory, over the previous export."""
    save_hf = ctx.spec.checkpoint.save_hf
    if save_hf is not None and _formatted(save_hf) is None and save_hf.format(rollout_id=0) == \
            save_hf.format(rollout_id=1):
        yield Finding("save_hf has no {rollout_id}: each save writes its HF export over the previous one",
                      f"e.g. save_hf = {posixpath.join(save_hf, 'iter_{rollout_id}')!r}",
                      keys=("checkpoint.save_hf",))


@rule("ACRL-H008", "warning", ["checkpoint.scheduler", "checkpoint.load_optimizer"], "scheduler settings apply")
def _scheduler_without_optimizer(ctx: Context) -> Iterator[Finding]:
    """Megatron loads the LR scheduler's state only with the optimizer's (megatron/training/checkpointing.py:1785,
    1812-1817: inside ``if not release and not args.finetune and not args.no_load_optim``), so with load_optimizer =
    false the scheduler setting does nothing: the schedule is this spec's, from step 0."""
    c = ctx.spec.checkpoint
    if c.scheduler is not None and not c.load_optimizer and _loads(ctx):
        yield Finding(f"scheduler = {c.scheduler!r} does nothing with load_optimizer = false: Megatron loads the "
                      "scheduler's state only with the optimizer's", "remove scheduler, or load the optimizer",
                      keys=("checkpoint.scheduler", "checkpoint.load_optimizer"))


_FSDP = {"torch_dcp": "--use-torch-fsdp2", "fsdp_dtensor": "--use-megatron-fsdp"}


@rule("ACRL-H009", "error", ["checkpoint.format"], "a checkpoint format slime can use", before_sourcing=True,
      reads=("extra.flags", "extra.args"))
def _format(ctx: Context) -> Iterator[Finding]:
    """Megatron asserts --use-torch-fsdp2 (and TP and PP of 1) for --ckpt-format torch_dcp, and --use-megatron-fsdp
    for fsdp_dtensor (megatron/training/arguments.py:1040-1049); slime trains with Megatron's DDP and distributed
    optimizer (backends/megatron_utils/arguments.py 624b824:153), so only torch_dist and torch load and save. (An
    escape-hatch --ckpt-format is ACRL-F002's: [checkpoint] format owns it.)"""
    written = ctx.spec.checkpoint.format
    fsdp = _FSDP.get(written or "")
    if fsdp is not None and fsdp not in ctx.extra:
        yield Finding(f"checkpoint format {written!r} needs {fsdp}: Megatron stops at launch, and slime trains without "
                      "FSDP", "use \"torch_dist\" (the default: it reshards across layouts) or \"torch\"",
                      keys=("checkpoint.format",))


def _hatch_key(ctx: Context, flag: str) -> str:
    """The escape-hatch key that passes ``flag``."""
    for name in ctx.spec.extra.flags:
        if normalize_flag(name) == flag:
            return f"extra.flags.{name}"
    found = (i for i, token in enumerate(ctx.spec.extra.args) if token.split("=", 1)[0] == flag)
    return next((f"extra.args.{i}" for i in found), "extra.flags")


@rule("ACRL-H010", "error", ["checkpoint.resume", _LOAD], "resume has a checkpoint directory", before_sourcing=True,
      reads=("checkpoint.save",))
def _resume_without_directory(ctx: Context) -> Iterator[Finding]:
    """resume = "required" needs save or load (else train.sh refuses every launch); resume = "never" never reads
    load. (save_interval without save, which slime refuses at launch, is ACRL-E002.)"""
    c = ctx.spec.checkpoint
    if c.resume == "required" and c.save is None and c.load is None:
        yield Finding("resume = \"required\" without save or load: there is nothing to resume from, so train.sh would "
                      "refuse every launch", "set [checkpoint] save (or load), or leave resume \"auto\"",
                      keys=("checkpoint.resume",))
    if c.resume == "never" and c.load is not None:
        yield Finding("load is never read with resume = \"never\"", "remove load, or set resume = \"auto\"",
                      keys=(_LOAD, "checkpoint.resume"))


@rule("ACRL-H011", "warning", ["checkpoint.ckpt_step", "checkpoint.load_optimizer", "checkpoint.load_rng",
                               "checkpoint.scheduler"], "load settings have something to load",
      reads=("checkpoint.load", "checkpoint.resume", "checkpoint.save"))
def _nothing_loaded(ctx: Context) -> Iterator[Finding]:
    """ckpt_step, load_optimizer = false, load_rng = false and scheduler apply to a loaded checkpoint only; without
    save or load, or with resume = "never", nothing is ever loaded (slime itself sets --no-load-optim and
    --no-load-rng when it starts from --ref-load: utils/arguments.py 624b824:1829-1831)."""
    c = ctx.spec.checkpoint
    if _loads(ctx):
        return
    why = "resume is \"never\"" if c.resume == "never" else "there is no save or load directory"
    for name, unused in (("ckpt_step", c.ckpt_step is not None), ("load_optimizer", not c.load_optimizer),
                         ("load_rng", not c.load_rng), ("scheduler", c.scheduler is not None)):
        if unused:
            yield Finding(f"{name} does nothing: no checkpoint is ever loaded ({why})", f"remove {name}",
                          keys=(f"checkpoint.{name}",))


@rule("ACRL-H012", "warning", ["extra.flags", "extra.args"], "--async-save saves asynchronously")
def _async_save(ctx: Context) -> Iterator[Finding]:
    """--async-save needs Megatron's persistent checkpoint worker, or Megatron turns it off with a warning
    (megatron/training/arguments.py:1137-1143); slime sets use_persistent_ckpt_worker from fa3c990 on
    (backends/megatron_utils/arguments.py fa3c990:154, 624b824:160), not at v0.3.0, where every save is synchronous."""
    if "--async-save" in ctx.extra and _commit(ctx) == _V030 and "--use-persistent-ckpt-worker" not in ctx.extra:
        yield Finding("--async-save is off at slime v0.3.0: Megatron disables it without --use-persistent-ckpt-worker, "
                      "which slime sets only from fa3c990 on", "add --use-persistent-ckpt-worker to [extra.flags], "
                      "or remove --async-save", keys=(_hatch_key(ctx, "--async-save"),))


@rule("ACRL-H013", "error", [_SAVE, _LOAD, "checkpoint.save_hf"], "checkpoint paths are absolute", before_sourcing=True)
def _relative(ctx: Context) -> Iterator[Finding]:
    """save, load and save_hf are directories on the cluster: slime runs in the Ray job's working_dir (a copy of the
    bundle that Ray unpacks under its session folder), so a relative path would put checkpoints there, and train.sh,
    which runs elsewhere, would not find them; '~' is not expanded (os.path.exists in utils/arguments.py)."""
    c = ctx.spec.checkpoint
    for name, path in (("save", c.save), ("load", c.load), ("save_hf", c.save_hf)):
        if path is not None and not path.startswith("/"):
            yield Finding(f"{name} {path!r} is not an absolute path: slime would resolve it inside the Ray job's "
                          "working directory, a temporary copy of the bundle", f"give {name} as an absolute path on "
                          "the cluster's storage", keys=(f"checkpoint.{name}",))
