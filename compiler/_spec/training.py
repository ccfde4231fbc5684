"""The spec's tables for slime's newer training features: on-policy distillation ([opd]) and how the trained weights
reach the rollout engines ([weight_sync]). Same conventions as :mod:`.tables`, which re-exports them; each key maps to
one slime flag, and a key whose flag the targeted slime commit lacks is refused by ACRL-F003 (naming the commits that
have it). The cross-field rules slime applies to them at parse time are compiler/_pipeline/validate/training.py.

Which commits have which flag (slime/utils/arguments.py): --use-opd, --opd-type, --opd-kl-coef, --opd-teacher-load,
--opd-teacher-ckpt-step, --update-weight-mode, --update-weight-transport and --update-weight-buffer-size at every
commit acrl has facts for (v0.3.0, fa3c990, v0.3.1, 624b824). The delta sync's other flags were renamed within the
feature: v0.3.0 and fa3c990 have --update-weight-encoding (indices|deltas|deltas_zstd), --update-weight-delta-keep-files
and --custom-delta-pre-push-path; v0.3.1 and 624b824 replaced them with --update-weight-delta-encoding (xor|overwrite),
--update-weight-delta-checksum, --custom-update-weight-post-write-path and --update-weight-local-checkpoint-dir, and
added --release-train. --update-weight-disk-dir and --update-weight-disk-keep-files are fa3c990's and later (v0.3.0 has
only --update-weight-delta-dir, a deprecated alias at fa3c990 and gone at v0.3.1: no key, [extra.flags] only). The
renamed flags mean different things (other choices, another hook point), so each has its own key.
"""

from typing import Literal

import attrs

from .setting import setting

OpdType = Literal["sglang", "megatron"]
WeightSyncMode = Literal["full", "delta"]
WeightSyncTransport = Literal["nccl", "disk"]
DeltaEncoding = Literal["xor", "overwrite"]
DeltaChecksum = Literal["xxh3-128", "blake3", "adler32"]
PositionEncoding = Literal["indices", "deltas", "deltas_zstd"]


@attrs.frozen(kw_only=True)
class Opd:
    """[opd]: on-policy distillation, a KL penalty against a teacher's log-probs subtracted from the advantages, on
    top of any advantage estimator."""

    enabled: bool = setting(False, doc="Turn on-policy distillation on (type is then required).", flag="--use-opd")
    type: OpdType | None = setting(None, doc=(
        "Where the teacher's log-probs come from: 'sglang', an external SGLang server queried by the rollout's reward "
        "function (slime.rollout.on_policy_distillation, with --rm-url); 'megatron', a teacher of the policy's "
        "architecture loaded from teacher_load and run in the training forward pass."), flag="--opd-type")
    kl_coef: float | None = setting(None, doc="Weight of the reverse KL to the teacher (slime's default is 1.0).",
                                    flag="--opd-kl-coef", ge=0)
    teacher_load: str | None = setting(None, kind="path", doc=(
        "The teacher's Megatron checkpoint on the cluster (type 'megatron' only; required there)."),
        flag="--opd-teacher-load")
    teacher_ckpt_step: int | None = setting(None, doc="Checkpoint step of the Megatron teacher to load.",
                                            flag="--opd-teacher-ckpt-step", ge=0)


@attrs.frozen(kw_only=True)
class WeightSync:
    """[weight_sync]: how the trained weights reach the rollout engines after each step (slime's 'full' broadcast
    over NCCL unless set), and releasing the training actors during rollout."""

    mode: WeightSyncMode | None = setting(None, doc=(
        "'full' sends every parameter each sync (slime's default); 'delta' only the changed bytes (not colocated; "
        "at v0.3.1 and later disk transport only, with local_checkpoint_dir)."), flag="--update-weight-mode")
    transport: WeightSyncTransport | None = setting(None, doc=(
        "'nccl' broadcasts (slime's default); 'disk' writes to disk_dir, a filesystem the trainer and the engines "
        "share, and the engines reload from it."), flag="--update-weight-transport")
    disk_dir: str | None = setting(None, doc="Shared directory of disk transport (required with it).",
                                   flag="--update-weight-disk-dir", kind="path")
    disk_keep_files: bool = setting(False, doc="Keep the full checkpoints disk transport writes (mode 'full').",
                                    flag="--update-weight-disk-keep-files")
    local_checkpoint_dir: str | None = setting(None, kind="path", doc=(
        "Rollout-host-local directory (NVMe) each engine host pulls the published weights into and reloads from; "
        "required by delta mode (v0.3.1 and later)."), flag="--update-weight-local-checkpoint-dir")
    delta_encoding: DeltaEncoding | None = setting(None, doc=(
        "On-disk delta encoding (v0.3.1 and later): 'xor' (slime's default) or 'overwrite' (idempotent)."),
        flag="--update-weight-delta-encoding")
    delta_checksum: DeltaChecksum | None = setting(None, doc=(
        "Per-tensor checksum of disk deltas (v0.3.1 and later; slime's default xxh3-128)."),
        flag="--update-weight-delta-checksum")
    custom_post_write_path: str | None = setting(None, kind="function", doc=(
        "Function (dotted path) each trainer rank calls after a disk sync's files are written, before the engines "
        "read them (v0.3.1 and later)."), flag="--custom-update-weight-post-write-path")
    encoding: PositionEncoding | None = setting(None, doc=(
        "Position encoding of delta flushes (v0.3.0, fa3c990; slime's default 'indices')."),
        flag="--update-weight-encoding")
    delta_keep_files: bool = setting(False, doc="Keep the per-sync delta directories (delta disk sync; v0.3.0, "
                                                "fa3c990).", flag="--update-weight-delta-keep-files")
    custom_delta_pre_push_path: str | None = setting(None, kind="function", doc=(
        "Function (dotted path) each trainer rank calls before rank 0 pushes a delta disk sync (v0.3.0, fa3c990)."),
        flag="--custom-delta-pre-push-path")
    buffer_size: int | None = setting(None, doc="Bucket size of a weight update, in bytes (slime's default 512 MiB).",
                                      flag="--update-weight-buffer-size", ge=1)
    release_train: bool = setting(False, doc=(
        "Release the Megatron training actors during rollout and recreate them (reloading [checkpoint] save) before "
        "each train step (v0.3.1 and later): needs mode 'full', transport 'disk' and [checkpoint] save."),
        flag="--release-train")
