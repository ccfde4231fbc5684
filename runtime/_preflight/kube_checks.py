"""The preflight of a --target kuberay bundle (issue 18): the Kubernetes checks (runtime/_preflight/kube.py) first,
then every check of a Ray bundle (runtime/_preflight/checks.py CHECKS), each as it applies to a job that runs in
pods: the spec's files are checked here where this machine has them too (a volume mounted on it), the AWS checks with
this machine's credentials as for a Ray bundle, and the checks of this machine's own tools, checkouts and GPUs are
skipped, saying why (the pods have the image's slime, CUDA and Ray, and the scheduler places them on GPU nodes).
"""

from __future__ import annotations

import functools
import posixpath
from collections.abc import Callable
from pathlib import Path

from .bundle_info import BundleInfo
from .checkpoint import check_checkpoint
from .checks import CHECKS, Check, check_datasets, check_model, dataset_paths
from .kube import KubeTarget, check_context, check_crd, check_existing, check_kubectl, check_secrets
from .outcome import CheckSkipped

IMAGE = "the image's ([kuberay] image)"
# Ray checks that look at this machine, none of which the pods use: the reason each is skipped
NOT_HERE = {
    "bash": "the RayJob's entrypoint runs in the head pod, not train.sh here",
    "ray-cli": "KubeRay's submitter pod runs `ray job submit`, not this machine",
    "slime": f"the pods run {IMAGE} slime, at [slime] dir",
    "megatron": f"the pods run {IMAGE} Megatron-LM",
    "sglang": f"the pods run {IMAGE} sglang",
    "slime-parser": f"{IMAGE} slime parses the argv, in the head pod",
    "rollout-module": f"the rollout functions are imported in the pods, from {IMAGE} packages",
    "external-engines": "the engines are reached from the pods, not from here",
    "opd-teacher": "the teacher is read in the pods, not here",
    "wandb": "the pods read the W&B key from the Secret (the secrets check), not this environment",
    "gpus": "the worker pods ask for their GPUs (nvidia.com/gpu); the scheduler places them on GPU nodes",
    "cuda-home": "[cuda] home is train.sh's: the pods use the image's CUDA",
}


def kube_checks(target: KubeTarget) -> list[Check]:
    """The checks of ``target``'s launch, in the order the table shows them."""
    def on(function: Callable[[KubeTarget], str]) -> Callable[[BundleInfo], str]:
        return functools.partial(_with_target, function, target)

    checks = [Check("kubectl", on(check_kubectl)), Check("kube-context", on(check_context), ("kubectl",)),
              Check("rayjob-crd", on(check_crd), ("kube-context",)),
              Check("secrets", on(check_secrets), ("kube-context",)),
              Check("rayjob-exists", on(check_existing), ("kube-context", "rayjob-crd"))]
    local = {"model": _model, "datasets": _datasets, "checkpoint": _checkpoint}
    for check in CHECKS:
        if check.name in NOT_HERE:
            checks.append(Check(check.name, functools.partial(_skipped, NOT_HERE[check.name])))
        elif check.name in local:
            checks.append(Check(check.name, local[check.name]))
        else:  # the AWS checks, and any registered later: as for a Ray bundle
            checks.append(check)
    return checks


def _with_target(function: Callable[[KubeTarget], str], target: KubeTarget, info: BundleInfo) -> str:
    return function(target)


def _skipped(reason: str, info: BundleInfo) -> str:
    raise CheckSkipped(reason)


def _where(info: BundleInfo, path: str) -> str:
    """Which volume of [kuberay] holds ``path`` in the pods (or the image)."""
    volumes = info.get("kuberay.volumes") or []
    holding = [v for v in volumes if isinstance(v, dict) and isinstance(v.get("mount_path"), str)
               and (path + "/").startswith(v["mount_path"].rstrip("/") + "/")]
    if not holding:
        return "the image"
    volume = max(holding, key=lambda v: len(v["mount_path"]))
    return f"volume {volume.get('name')!r}"


def _not_here(info: BundleInfo, key: str, path: str) -> CheckSkipped:
    return CheckSkipped(f"{key} {path} is not found on this machine: the pods read it from "
                        f"{_where(info, posixpath.normpath(path))}")


def _model(info: BundleInfo) -> str:
    model = info.get("model.dir")
    if not isinstance(model, str) or not Path(model).is_dir():
        raise _not_here(info, "[model] dir", str(model))
    return check_model(info)


def _datasets(info: BundleInfo) -> str:
    for label, path in dataset_paths(info):
        if not path.exists():
            raise _not_here(info, label, str(path))
    return check_datasets(info)


def _checkpoint(info: BundleInfo) -> str:
    directories = [d for d in (info.get("checkpoint.save"), info.get("checkpoint.load")) if isinstance(d, str) and d]
    if not directories:
        return check_checkpoint(info)  # its own skip: no checkpoint directory
    for directory in directories:
        if not Path(directory).is_dir():
            raise CheckSkipped(f"{directory} is not found on this machine: the RayJob's checkpoint.sh decides in "
                               f"the head pod, where {_where(info, posixpath.normpath(directory))} holds it")
    return check_checkpoint(info) + " (read on this machine; the head pod reads the same volume)"
