"""ACRL-N*: training features, on-policy distillation ([opd]) and weight sync ([weight_sync]): slime's parse-time
errors about them (slime_validate_args in slime/utils/arguments.py), at the targeted commit where slime's rules
changed between commits, and the settings slime accepts and never reads.

Line numbers are slime/utils/arguments.py's unless a file is named. The weight-sync rules come in three generations,
told apart by the targeted commit's flag facts (compiler/_slime/commits): v0.3.0 (no --update-weight-disk-dir),
fa3c990 (--update-weight-disk-dir, no --update-weight-local-checkpoint-dir) and v0.3.1 / 624b824 (both). For a commit
acrl has no facts about, only what holds at all three is checked. Whether a path exists on the cluster (slime checks
--opd-teacher-load at 624b824:1796-1804) or is shared by the trainer and the engines cannot be known at compile time.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

from ..._slime.commit_facts import commit_facts
from ..._spec.flags import normalize_flag
from .engine import Context, Finding, rule

Generation = Literal["v0.3.0", "fa3c990", "v0.3.1"]
OPD_REWARDS = "slime.rollout.on_policy_distillation.post_process_rewards"  # sets sample.teacher_log_probs
OPD_RM = "slime.rollout.on_policy_distillation.reward_func"  # posts to args.rm_url


def generation(commit: str) -> Generation | None:
    """Which of slime's weight-sync rule sets ``commit`` has, from its flag facts; None without facts."""
    facts = commit_facts(commit)
    if facts is None:
        return None
    if "--update-weight-local-checkpoint-dir" in facts.flags:
        return "v0.3.1"
    return "fa3c990" if "--update-weight-disk-dir" in facts.flags else "v0.3.0"


def _hatch_key(ctx: Context, flag: str) -> str:
    """The escape-hatch key that passes ``flag``."""
    for name in ctx.spec.extra.flags:
        if normalize_flag(name) == flag:
            return f"extra.flags.{name}"
    found = (i for i, token in enumerate(ctx.spec.extra.args) if token.split("=", 1)[0] == flag)
    return next((f"extra.args.{i}" for i in found), "extra.flags")


# --- on-policy distillation: slime_validate_args, 624b824:1785-1815 (fa3c990:1761-1791, v0.3.0:1681-1711) ----------

@rule("ACRL-N001", "error", ["opd.enabled", "opd.type"], "on-policy distillation names its type")
def _opd_type(ctx: Context) -> Iterator[Finding]:
    """[opd] enabled needs a type: slime stops with "--opd-type must be specified when --use-opd is enabled"
    (624b824:1786-1788, fa3c990:1762-1764)."""
    o = ctx.spec.opd
    if o.enabled and o.type is None:
        yield Finding("--use-opd without --opd-type: slime stops at launch",
                      'set [opd] type = "sglang" (a teacher SGLang server) or "megatron" (teacher_load)')


@rule("ACRL-N002", "error", ["opd.teacher_load", "opd.type"], "a Megatron teacher needs its checkpoint",
      reads=("opd.enabled",))
def _opd_megatron(ctx: Context) -> Iterator[Finding]:
    """[opd] type = "megatron" needs teacher_load (624b824:1790-1795, fa3c990:1766-1771). That the directory exists
    on the cluster slime checks there (1796-1804); acrl cannot."""
    o = ctx.spec.opd
    if o.enabled and o.type == "megatron" and o.teacher_load is None:
        yield Finding("--opd-type megatron without --opd-teacher-load: slime stops at launch",
                      "set [opd] teacher_load to the teacher's Megatron checkpoint on the cluster", keys=("opd.type",))


@rule("ACRL-N003", "error", ["opd.teacher_load", "opd.type"], "an SGLang teacher loads no checkpoint",
      reads=("opd.enabled",))
def _opd_sglang(ctx: Context) -> Iterator[Finding]:
    """[opd] type = "sglang" refuses teacher_load: the teacher's log-probs come from its server (624b824:1806-1811,
    fa3c990:1782-1787)."""
    o = ctx.spec.opd
    if o.enabled and o.type == "sglang" and o.teacher_load is not None:
        yield Finding("--opd-teacher-load with --opd-type sglang: slime stops at launch",
                      'remove [opd] teacher_load, or set type = "megatron"')


@rule("ACRL-N004", "error", ["opd.teacher_load", "opd.enabled"], "a teacher checkpoint needs OPD on")
def _opd_off_teacher(ctx: Context) -> Iterator[Finding]:
    """teacher_load without [opd] enabled: slime stops with "--opd-teacher-load is set but --use-opd is not enabled"
    (624b824:1812-1815, fa3c990:1788-1791)."""
    o = ctx.spec.opd
    if not o.enabled and o.teacher_load is not None:
        yield Finding("--opd-teacher-load without --use-opd: slime stops at launch",
                      "set [opd] enabled = true, or remove teacher_load")


@rule("ACRL-N005", "warning", ["opd.type", "opd.kl_coef", "opd.teacher_ckpt_step"], "OPD settings that do nothing",
      reads=("opd.enabled",))
def _opd_idle(ctx: Context) -> Iterator[Finding]:
    """[opd] keys slime accepts and never reads: type, kl_coef or teacher_ckpt_step without enabled (only use_opd
    turns the penalty on: slime/backends/megatron_utils/loss.py:810 at 624b824), teacher_ckpt_step without a Megatron
    teacher (read only when loading it: megatron_utils/actor.py:674), and a kl_coef of 0, which computes the teacher's
    log-probs for a zero penalty (loss.py:697)."""
    o = ctx.spec.opd
    if not o.enabled:
        for name in ("type", "kl_coef", "teacher_ckpt_step"):
            if getattr(o, name) is not None:
                yield Finding(f"[opd] {name} without enabled = true: slime ignores it",
                              "set [opd] enabled = true, or remove it", keys=(f"opd.{name}",))
        return
    if o.teacher_ckpt_step is not None and o.type != "megatron":
        yield Finding("[opd] teacher_ckpt_step is read only for a Megatron teacher (type = \"megatron\")",
                      "remove teacher_ckpt_step", keys=("opd.teacher_ckpt_step",))
    if o.kl_coef == 0:
        yield Finding("[opd] kl_coef = 0: the teacher's log-probs are computed for a zero penalty",
                      "set kl_coef > 0, or enabled = false", keys=("opd.kl_coef",))


@rule("ACRL-N006", "warning", ["opd.type", "rollout.reward_post_process_path", "rollout.custom_rm_path"],
      "an SGLang teacher's log-probs reach the samples", reads=("opd.enabled",))
def _opd_sglang_rollout(ctx: Context) -> Iterator[Finding]:
    """With [opd] type = "sglang" the rollout must put the teacher's log-probs on each sample
    (sample.teacher_log_probs); slime's own reward post-processing and the toolkit's do not, and the first train step
    stops with "OPD with opd_type='sglang' requires teacher_log_probs" (slime/backends/megatron_utils/loss.py:687-689
    at 624b824). slime's slime.rollout.on_policy_distillation.post_process_rewards does, from its reward_func's answer,
    which posts to --rm-url (the teacher server): reward_func without --rm-url is warned too. A custom function is
    trusted."""
    o, r = ctx.spec.opd, ctx.spec.rollout
    if not (o.enabled and o.type == "sglang"):
        return
    path = r.reward_post_process_path
    if path is None or path.startswith("agentcore_rl_toolkit."):
        which = "slime's default reward post-processing" if path is None else path
        yield Finding(f"[opd] type = \"sglang\" needs teacher log-probs on every sample; {which} sets none, so the "
                      "first train step stops", f"set [rollout] reward_post_process_path = \"{OPD_REWARDS}\" (with "
                      f"custom_rm_path = \"{OPD_RM}\" and --rm-url at the teacher server), or a function of yours "
                      "that sets sample.teacher_log_probs", keys=("rollout.reward_post_process_path", "opd.type"))
    if r.custom_rm_path == OPD_RM and not ctx.passes("--rm-url"):
        yield Finding(f"{OPD_RM} posts to --rm-url, which is not set", "add --rm-url http://TEACHER:PORT/generate to "
                      "[extra.flags]", keys=("rollout.custom_rm_path",))


# --- weight sync: 624b824:2040-2075 (v0.3.1:1976-2011), fa3c990:1697-1745, v0.3.0:1918-1930 -------------------------

def _disk_dir(ctx: Context) -> str | None:
    """The shared directory slime reads: [weight_sync] disk_dir, else the escape hatch's --update-weight-delta-dir
    (v0.3.0's flag, fa3c990's deprecated alias: fa3c990:1720)."""
    delta_dir = ctx.extra.get("--update-weight-delta-dir")
    return ctx.spec.weight_sync.disk_dir or (delta_dir[0] if delta_dir else None)


@rule("ACRL-N007", "error", ["weight_sync.transport", "weight_sync.disk_dir"], "disk transport has its directory",
      reads=("extra.flags", "extra.args", "slime.commit"))
def _disk_needs_dir(ctx: Context) -> Iterator[Finding]:
    """transport = "disk" needs disk_dir (624b824:2041-2045, fa3c990:1721-1726, which also takes the deprecated
    --update-weight-delta-dir); at v0.3.0 only in delta mode, and the directory is --update-weight-delta-dir
    (v0.3.0:1925-1929)."""
    w, gen = ctx.spec.weight_sync, generation(ctx.spec.slime.commit)
    if w.transport != "disk" or _disk_dir(ctx):
        return
    if gen in ("fa3c990", "v0.3.1"):
        yield Finding("--update-weight-transport disk without --update-weight-disk-dir: slime stops at launch",
                      "set [weight_sync] disk_dir to a directory the trainer and the rollout engines share")
    elif w.mode == "delta":
        yield Finding("--update-weight-transport disk in delta mode without a delta directory: slime stops at launch",
                      "add --update-weight-delta-dir (a directory the trainer and the engines share) to [extra.flags]"
                      if gen == "v0.3.0" else "set [weight_sync] disk_dir to a directory the trainer and the "
                      "rollout engines share")


@rule("ACRL-N008", "error", ["weight_sync.mode", "cluster.colocate"], "delta sync is not colocated")
def _delta_colocated(ctx: Context) -> Iterator[Finding]:
    """mode = "delta" refuses a colocated run, whose weights cross by CUDA IPC handle (624b824:2065-2070,
    fa3c990:1740-1745, v0.3.0:1919-1924)."""
    if ctx.spec.weight_sync.mode == "delta" and ctx.spec.cluster.colocate:
        yield Finding("--update-weight-mode delta with --colocate: slime stops at launch",
                      'set [cluster] colocate = false, or [weight_sync] mode = "full"')


@rule("ACRL-N009", "error", ["weight_sync.mode", "weight_sync.transport", "weight_sync.local_checkpoint_dir"],
      "delta sync's disk transport and local checkpoint (v0.3.1 and later)", reads=("slime.commit",))
def _delta_disk(ctx: Context) -> Iterator[Finding]:
    """From v0.3.1, mode = "delta" needs transport = "disk" (624b824:2059-2064; fa3c990 also broadcast deltas over
    NCCL: fa3c990:1735) and local_checkpoint_dir, the engine hosts' local copy the deltas patch (624b824:2071-2075)."""
    w = ctx.spec.weight_sync
    if w.mode != "delta" or generation(ctx.spec.slime.commit) != "v0.3.1":
        return
    if w.transport != "disk":
        yield Finding(f"--update-weight-mode delta with transport {w.transport or 'nccl'!r}: from v0.3.1 delta sync "
                      "is disk only; slime stops at launch", 'set [weight_sync] transport = "disk" (with disk_dir)',
                      keys=("weight_sync.transport", "weight_sync.mode"))
    if not w.local_checkpoint_dir:
        yield Finding("--update-weight-mode delta without --update-weight-local-checkpoint-dir: slime stops at launch",
                      "set [weight_sync] local_checkpoint_dir to a directory local to each rollout host (NVMe)",
                      keys=("weight_sync.local_checkpoint_dir", "weight_sync.mode"))


@rule("ACRL-N010", "error", ["weight_sync.disk_dir", "extra.flags"], "one disk directory",
      reads=("extra.args", "slime.commit"))
def _two_dirs(ctx: Context) -> Iterator[Finding]:
    """At fa3c990, --update-weight-delta-dir ([extra.flags]) is a deprecated alias of disk_dir: both set to
    different paths stop slime (fa3c990:1706-1710)."""
    delta_dir = ctx.extra.get("--update-weight-delta-dir")
    disk_dir = ctx.spec.weight_sync.disk_dir
    if generation(ctx.spec.slime.commit) == "fa3c990" and disk_dir and delta_dir and delta_dir[0] != disk_dir:
        yield Finding("--update-weight-delta-dir (a deprecated alias) differs from [weight_sync] disk_dir: slime stops "
                      "at launch", "remove --update-weight-delta-dir from [extra.flags]")


@rule("ACRL-N011", "error", ["weight_sync.release_train"], "releasing the training actors", reads=("slime.commit",))
def _release_train(ctx: Context) -> Iterator[Finding]:
    """release_train needs mode "full" with transport "disk" (624b824:2057-2058), [checkpoint] save to reload from
    (2052-2053), no critic (advantage_estimator "ppo": 2048-2049) and no --keep-old-actor (2050-2051). Its other check,
    the Megatron train backend (2047), cannot fail: --train-backend has no other choice (1592)."""
    s = ctx.spec
    if not s.weight_sync.release_train or generation(s.slime.commit) not in ("v0.3.1", None):
        return  # a commit without --release-train: ACRL-F003
    if s.weight_sync.mode not in (None, "full") or s.weight_sync.transport != "disk":
        yield Finding("--release-train needs --update-weight-mode full and --update-weight-transport disk: slime stops "
                      "at launch", 'set [weight_sync] transport = "disk" (with disk_dir) and leave mode "full"',
                      keys=("weight_sync.transport", "weight_sync.mode", "weight_sync.release_train"))
    if s.checkpoint.save is None:
        yield Finding("--release-train without --save: the recreated actors have nothing to reload; slime stops at "
                      "launch", "set [checkpoint] save", keys=("weight_sync.release_train", "checkpoint.save"))
    if s.algorithm.advantage_estimator == "ppo":
        yield Finding("--release-train does not support critic training (advantage_estimator \"ppo\"); slime stops "
                      "at launch", "set release_train = false, or another advantage_estimator",
                      keys=("algorithm.advantage_estimator", "weight_sync.release_train"))
    if ctx.passes("--keep-old-actor"):
        yield Finding("--release-train with --keep-old-actor: slime stops at launch",
                      "remove --keep-old-actor from [extra.flags]",
                      keys=(_hatch_key(ctx, "--keep-old-actor"), "weight_sync.release_train"))


@rule("ACRL-N012", "warning", ["weight_sync.release_train", "checkpoint.save_interval", "extra.flags"],
      "what releasing the training actors changes", reads=("slime.commit",))
def _release_train_effects(ctx: Context) -> Iterator[Finding]:
    """release_train makes slime save a Megatron checkpoint every rollout when save_interval is not set
    (624b824:2054-2056), and, colocated, ignores --offload-train and --no-offload-rollout (624b824:1940-1946)."""
    s = ctx.spec
    if not s.weight_sync.release_train or generation(s.slime.commit) not in ("v0.3.1", None):
        return  # a commit without --release-train: ACRL-F003
    if s.checkpoint.save_interval is None:
        yield Finding("--release-train without --save-interval: slime saves a Megatron checkpoint after every rollout",
                      "set [checkpoint] save_interval = 1 to keep that, knowingly", keys=("checkpoint.save_interval",
                                                                                           "weight_sync.release_train"))
    for flag in ("--offload-train", "--offload", "--no-offload-rollout"):
        if s.cluster.colocate and ctx.passes(flag):
            yield Finding(f"{flag} is ignored with colocated --release-train (the actors are released, the rollout "
                          "offloaded)", f"remove {flag} from [extra.flags]", keys=(_hatch_key(ctx, flag),))


# Keys read only with disk transport / in delta mode / in full mode, by generation (the files that read them).
_DISK_ONLY = {  # 624b824: update_weight_from_disk*.py, ray/actor_group.py:168-267; fa3c990: the disk path of
    # update_weight_from_distributed_delta.py:523-533, 819 and update_weight_from_disk.py
    "v0.3.1": ("disk_dir", "disk_keep_files", "local_checkpoint_dir", "custom_post_write_path"),
    "fa3c990": ("disk_dir", "disk_keep_files", "delta_keep_files", "custom_delta_pre_push_path"),
}
_DELTA_ONLY = {"v0.3.1": ("delta_encoding", "delta_checksum"),
               "fa3c990": ("encoding", "delta_keep_files", "custom_delta_pre_push_path")}


@rule("ACRL-N013", "warning", ["weight_sync.transport", "weight_sync.mode"], "weight-sync settings that do nothing",
      reads=("weight_sync", "cluster.colocate", "slime.commit"))
def _sync_idle(ctx: Context) -> Iterator[Finding]:
    """[weight_sync] keys slime accepts and never reads at the targeted commit: the disk transport's without
    transport = "disk", the delta sync's without mode = "delta", disk_keep_files (the full disk sync's) in delta mode;
    and at fa3c990, transport = "disk" in a colocated run, whose weights always cross by CUDA IPC
    (megatron_utils/actor.py:139-143 there; 624b824 writes to disk then: actor.py:166)."""
    w, gen = ctx.spec.weight_sync, generation(ctx.spec.slime.commit)
    if gen not in _DISK_ONLY:
        return
    said = set()
    for names, wanted, setting in ((_DISK_ONLY[gen], w.transport == "disk", 'transport = "disk"'),
                                   (_DELTA_ONLY[gen], w.mode == "delta", 'mode = "delta"')):
        for name in names:
            if not wanted and getattr(w, name) not in (None, False) and name not in said:
                said.add(name)
                yield Finding(f"[weight_sync] {name} is read only with {setting}: slime ignores it",
                              f"remove {name}, or set {setting}", keys=(f"weight_sync.{name}",))
    if w.mode == "delta" and w.disk_keep_files:
        yield Finding("[weight_sync] disk_keep_files keeps the full disk sync's checkpoints; delta mode ignores it",
                      "remove disk_keep_files" + (", or set delta_keep_files" if gen == "fa3c990" else ""),
                      keys=("weight_sync.disk_keep_files",))
    if gen == "fa3c990" and ctx.spec.cluster.colocate and w.transport == "disk":
        yield Finding("at fa3c990 a colocated run syncs weights by CUDA IPC whatever the transport: nothing is written "
                      "to disk_dir", 'remove transport = "disk", or target v0.3.1 or later',
                      keys=("weight_sync.transport",))

