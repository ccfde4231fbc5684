"""The pod templates of rayjob.yaml: the Ray head, the GPU workers and KubeRay's submitter, from [kuberay.head],
[kuberay.worker] and [kuberay.submitter] (compiler/_spec/kuberay.py), as plain data for compiler/_pipeline/kuberay.py.

Secrets reach the Ray pods only as ``env[].valueFrom.secretKeyRef`` entries naming the Kubernetes Secret
[kuberay] secret: a required one (``optional: false``) keeps the pod from starting when the Secret or its key is
missing (the kubelet reports CreateContainerConfigError), an optional one is left out of the environment. No value
is ever written into the file.
"""

from __future__ import annotations

from typing import Any, Literal

from .._spec.kuberay import Head, Submitter, Toleration, Worker
from .._spec.tables import Spec
from .eks_gpus import INSTANCE_TYPE_LABEL, instance_types

CONFIG_MOUNT = "/acrl/config"
CONFIG_VOLUME = "acrl-config"
SHM_VOLUME = "dshm"
SHM_PATH = "/dev/shm"
GPU_RESOURCE = "nvidia.com/gpu"
# KubeRay's name of the submitter container (ray-operator/controllers/ray/utils/constant.go:356 at v1.7.0); KubeRay
# fills in its command and environment because the template gives none (rayjob_controller.go:641-656).
SUBMITTER_CONTAINER = "ray-job-submitter"
AWS_SECRET_NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
Role = Literal["head", "worker"]


def secret_refs(spec: Spec) -> dict[str, bool]:
    """The variables the Ray pods read from [kuberay] secret, each with whether it is required ([kuberay.secrets],
    else its default): the W&B key while W&B is enabled (required when [wandb] project is set), [env] forward's
    names (optional: train.sh copies them when set) and, unless the integration is slime's own or the pods have a
    service account (IRSA gives them a role; keys in the environment would win over it in boto3's credential chain),
    the AWS keys (required with the agentcore integration, AWS_SESSION_TOKEN optional)."""
    refs: dict[str, bool] = {}
    if spec.wandb.enabled:
        refs[spec.wandb.key_env] = spec.wandb.project is not None
    for name in spec.env.forward:
        refs.setdefault(name, False)
    if spec.experiment.integration != "slime" and not spec.kuberay.service_account:
        agentcore = spec.experiment.integration == "agentcore"
        for name in AWS_SECRET_NAMES:
            refs.setdefault(name, agentcore and name != "AWS_SESSION_TOKEN")
    given = spec.kuberay.secrets
    return {name: given[name] == "required" if name in given else default for name, default in refs.items()}


def _secret_env(spec: Spec) -> list[dict[str, Any]]:
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": spec.kuberay.secret, "key": name,
                                                          "optional": not required}}}
            for name, required in secret_refs(spec).items()]


def worker_instance_types(spec: Spec) -> list[str]:
    """The instance types the worker pods are confined to: [kuberay.worker] instance_types, else those with
    gpus_per_node GPUs of [cluster] gpu (eks_gpus.py), unless the worker's node_selector or node_affinity already
    names the instance-type label."""
    worker = spec.kuberay.worker
    if worker.instance_types is not None:
        return list(worker.instance_types)
    if INSTANCE_TYPE_LABEL in worker.node_selector or INSTANCE_TYPE_LABEL in worker.node_affinity:
        return []
    return instance_types(spec.cluster.gpu, spec.cluster.gpus_per_node)


def memory_limit(group: Head | Worker | Submitter) -> str | None:
    """The container's memory limit: memory_limit, else the memory request (Ray pods), as KubeRay advises."""
    return group.memory_limit or (group.memory if not isinstance(group, Submitter) else None)


def _resources(group: Head | Worker | Submitter, gpus: int) -> dict[str, Any]:
    extra = {} if isinstance(group, Submitter) else dict(group.resources)
    limit = memory_limit(group)
    requests: dict[str, Any] = {key: value for key, value in (("cpu", group.cpu), ("memory", group.memory)) if value}
    limits: dict[str, Any] = {key: value for key, value in (("cpu", group.cpu_limit), ("memory", limit)) if value}
    requests |= extra
    limits |= extra
    if gpus:
        requests[GPU_RESOURCE] = limits[GPU_RESOURCE] = gpus
    return {key: value for key, value in (("requests", requests), ("limits", limits)) if value}


def _tolerations(tolerations: list[Toleration]) -> list[dict[str, Any]]:
    out = []
    for t in tolerations:
        entry: dict[str, Any] = {"key": t.key, "operator": t.operator, "value": t.value, "effect": t.effect,
                                 "tolerationSeconds": t.toleration_seconds}
        out.append({key: value for key, value in entry.items() if value is not None})
    return out


def _placement(node_selector: dict[str, str], affinity: dict[str, list[str]], tolerations: list[Toleration]
               ) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if node_selector:
        out["nodeSelector"] = dict(node_selector)
    if affinity:
        terms = [{"key": key, "operator": "In", "values": list(values)} for key, values in affinity.items()]
        out["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": terms}]}}}
    if tolerations:
        out["tolerations"] = _tolerations(tolerations)
    return out


def template_metadata(spec: Spec) -> dict[str, Any]:
    """A pod template's metadata: [kuberay] labels and annotations."""
    k = spec.kuberay
    return {"metadata": {**({"labels": dict(k.labels)} if k.labels else {}),
                         **({"annotations": dict(k.annotations)} if k.annotations else {})}} \
        if k.labels or k.annotations else {}


def ray_pod(spec: Spec, role: Role, config_map: str | None, gpus: int) -> dict[str, Any]:
    """The head's or a worker's pod template: the image, [cluster] env and the Secret's references, the ConfigMap at
    CONFIG_MOUNT, /dev/shm, [[kuberay.volumes]], its resources (and ``gpus`` nvidia.com/gpu), node selection."""
    k = spec.kuberay
    group: Head | Worker = k.head if role == "head" else k.worker
    config = [{"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT, "readOnly": True}] if config_map else []
    mounts = [{"name": v.name, "mountPath": v.mount_path, **({"readOnly": True} if v.read_only else {})}
              for v in k.volumes]
    container: dict[str, Any] = {
        "name": f"ray-{role}",
        "image": k.image,
        # [cluster] env first: the environment of the pod's Ray processes, as train.sh gives its head's
        "env": [*({"name": name, "value": value} for name, value in spec.cluster.env.items()), *_secret_env(spec)],
        "volumeMounts": [*config, {"name": SHM_VOLUME, "mountPath": SHM_PATH}, *mounts],
    }
    resources = _resources(group, gpus)
    if resources:
        container["resources"] = resources
    # sglang and NCCL need far more shared memory than a container's default 64 MiB; KubeRay would add the same
    # volume, sized to the memory limit, had the template none (common/pod.go:1548-1590 at v1.7.0)
    shm_size = group.shm_size or memory_limit(group)
    volumes = [*([{"name": CONFIG_VOLUME, "configMap": {"name": config_map}}] if config_map else []),
               {"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", **({"sizeLimit": shm_size} if shm_size else {})}},
               *(_volume(v.name, v.claim, v.host_path, v.read_only) for v in k.volumes)]
    affinity = dict(group.node_affinity)
    if isinstance(group, Worker) and (types := worker_instance_types(spec)):
        affinity[INSTANCE_TYPE_LABEL] = types
    return {**template_metadata(spec), "spec": {
        **({"serviceAccountName": k.service_account} if k.service_account else {}),
        **_placement(group.node_selector, affinity, group.tolerations),
        "containers": [container],
        "volumes": volumes,
    }}


def _volume(name: str, claim: str | None, host_path: str | None, read_only: bool) -> dict[str, Any]:
    if claim is not None:
        return {"name": name, "persistentVolumeClaim": {"claimName": claim, **({"readOnly": True} if read_only
                                                                                else {})}}
    # type Directory: a directory missing on the node stops the pod instead of Kubernetes creating an empty one
    return {"name": name, "hostPath": {"path": host_path, "type": "Directory"}}


def submitter_pod(spec: Spec) -> dict[str, Any]:
    """KubeRay's submitter pod (submitterPodTemplate): the head's image, [kuberay.submitter]'s resources and node
    selection, restartPolicy Never as KubeRay's own template (common/job.go:215-228 at v1.7.0)."""
    k = spec.kuberay
    s = k.submitter
    container: dict[str, Any] = {"name": SUBMITTER_CONTAINER, "image": k.image}
    resources = _resources(s, 0)
    if resources:
        container["resources"] = resources
    return {**template_metadata(spec), "spec": {
        "restartPolicy": "Never",
        **({"serviceAccountName": k.service_account} if k.service_account else {}),
        **_placement(s.node_selector, {}, s.tolerations),
        "containers": [container],
    }}
