"""The ``wandb`` preflight check: whether W&B will log, said before the run instead of as one line in train.log.

train.sh turns W&B on only when the key's variable ([wandb] key_env, default WANDB_API_KEY) is set where it
runs, and never copies the key into the Ray job's metadata (compiler/_secrets.py NEVER_FORWARDED): the job's
processes read it from the cluster's own environment. So the check warns (a row to read, never a failure):

- [wandb] project is set but the key's variable is not: the run goes on without W&B;
- the key is set here but the job runs on an existing cluster: it turns W&B on (--use-wandb) but does not
  reach the job unless the cluster's Ray processes have it in their environment (the safe way);
- W&B on without a group, with slime's random group suffix on: slime's init_wandb_primary computes
  ``args.wandb_group + "_" + ...`` (slime/utils/wandb_utils.py:45-46 at bf14dc21, fa3c990, a6272da0;
  slime/observability/wandb_utils.py:45-46 at 624b824), a TypeError on None (--wandb-group's default,
  slime/utils/arguments.py:1180 at 624b824).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from acrl.compiler import without_credentials

from .outcome import CheckFailed, CheckSkipped, CheckWarning
from .python import entrypoint_argv, train_sh_env

if TYPE_CHECKING:
    from .bundle_info import BundleInfo


def key_env(info: BundleInfo) -> str:
    """The name of the variable holding the W&B key ([wandb] key_env)."""
    name = info.get("wandb.key_env")
    return name if isinstance(name, str) and name else "WANDB_API_KEY"


def key_present(info: BundleInfo) -> bool:
    """Whether the W&B key's variable is set (not empty) in the environment train.sh gets."""
    return bool(train_sh_env(info).get(key_env(info)))


def _has_group(info: BundleInfo) -> bool:
    """Whether slime gets a W&B group, or no random suffix: from train.sh's argv as it would run now (the key is
    set, so with its W&B flags and [extra] ones), else from the spec's [wandb] group."""
    try:
        flags = {token.split("=", 1)[0] for token in entrypoint_argv(info)}
    except (CheckFailed, CheckSkipped):  # the slime-parser row says why; the spec decides here
        return bool(info.get("wandb.group"))
    return bool(flags & {"--wandb-group", "--disable-wandb-random-suffix"})


def check_wandb(info: BundleInfo) -> str:
    if info.get("wandb.enabled", True) is False:
        raise CheckSkipped("W&B off: [wandb] enabled = false")
    name, project = key_env(info), info.get("wandb.project")
    if not key_present(info):
        if project:
            raise CheckWarning(f"[wandb] project {project!r} is set, but {name} is not set here: train.sh runs the "
                               f"job without W&B (it passes --use-wandb only when {name} is set)",
                               f"export {name} before acrl run, without putting it on a command line (read -rs "
                               f"{name}; export {name}), or set [wandb] enabled = false if W&B is meant to be off")
        raise CheckSkipped(f"W&B off: {name} is not set (and the spec sets no [wandb] project)")
    warnings, hints = [], []
    if info.cluster_address:
        warnings.append(f"{name} is set here, so train.sh turns W&B on (--use-wandb), but the key does not reach the "
                        f"job on the cluster at {without_credentials(info.cluster_address)}: it is never copied into "
                        "the Ray job's metadata, so the job has it only if that cluster's Ray processes do")
        hints.append("export WANDB_API_KEY on each node of the cluster before `ray start` (with KubeRay: in the "
                     "Secret [kuberay] secret names); never through [env] vars or forward, which would write it "
                     "into the job's metadata")
    if not _has_group(info):
        warnings.append("W&B is on without a group: slime's W&B setup adds a random suffix to --wandb-group and "
                        "fails on None (TypeError in init_wandb_primary)")
        hints.append("set [wandb] group")
    if warnings:
        raise CheckWarning("; ".join(warnings), "; ".join(hints))
    shown = f"project {project!r}" if project else "no project (W&B's default)"
    return f"W&B on: {name} is set; {shown}, group {info.get('wandb.group')!r}"
