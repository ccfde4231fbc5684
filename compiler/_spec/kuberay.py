"""[kuberay]: the KubeRay RayJob that `acrl-compile --target kuberay` writes (rayjob.yaml), and its pods.

Same conventions as :mod:`.tables`, which re-exports :class:`KubeRay`. The values are Kubernetes' own (quantities
such as "16Gi" or "500m", label keys, taints), checked at compile time by compiler/_pipeline/validate/kuberay.py
(ACRL-K*) instead of when the API server or the kubelet refuses them; what they become in rayjob.yaml is
compiler/_pipeline/kuberay.py. The defaults are the ones that work on an EKS GPU node group (docs/kuberay.md): the
head on a CPU node with 4 CPUs and 16Gi, one worker pod per GPU node that tolerates the ``nvidia.com/gpu`` taint and
takes the node's CPUs and memory, the submitter as KubeRay sizes it.

Each pod kind is its own class with its own defaults, so that ``[kuberay.head]`` written with one key keeps the
head's other defaults (a factory on the [kuberay] field would apply only when the whole table is left out).
"""

from typing import Any, Literal

import attrs

from .setting import setting

Requirement = Literal["required", "optional"]
TaintEffect = Literal["NoSchedule", "PreferNoSchedule", "NoExecute"]
TolerationOperator = Literal["Exists", "Equal"]

# The taint EKS GPU node groups are commonly given (and that the NVIDIA device plugin's docs use): the worker pods
# tolerate it by default; tolerating a taint a node does not have changes nothing.
GPU_TAINT_KEY = "nvidia.com/gpu"

# KubeRay's own submitter container resources (ray-operator/controllers/ray/common/job.go:236-243 at v1.7.0), the
# defaults of [kuberay.submitter].
SUBMITTER_DEFAULTS = {"cpu": "500m", "memory": "200Mi", "cpu_limit": "1", "memory_limit": "1Gi"}


@attrs.frozen(kw_only=True)
class Toleration:
    """One toleration of a pod (Kubernetes' core/v1 Toleration): the pod may run on nodes with a matching taint."""

    key: str | None = setting(None, doc=(
        "The taint's key (e.g. \"nvidia.com/gpu\"). Left out with operator \"Exists\": every taint."))
    operator: TolerationOperator = setting("Equal", doc=(
        "\"Equal\": the taint's value must be `value`; \"Exists\": any value (then no `value`)."))
    value: str | None = setting(None, doc="The taint's value, with operator \"Equal\".")
    effect: TaintEffect | None = setting(None, doc="The taint effect tolerated; left out: every effect.")
    toleration_seconds: int | None = setting(None, doc=(
        "How long the pod stays on a node after a NoExecute taint appears (effect \"NoExecute\" only)."), ge=0)


@attrs.frozen(kw_only=True)
class Volume:
    """A volume mounted into the head and every worker pod at ``mount_path``: a PersistentVolumeClaim (FSx for
    Lustre, EFS, EBS) or a directory of the node (hostPath)."""

    name: str = setting(doc="The volume's name in the pods (a DNS-1123 label, e.g. \"models\").")
    mount_path: str = setting(doc="Where the pods see it (absolute, e.g. \"/fsx\").")
    claim: str | None = setting(None, doc=(
        "Name of a PersistentVolumeClaim in the RayJob's namespace (e.g. an FSx for Lustre or EFS claim); one of "
        "claim and host_path."))
    host_path: str | None = setting(None, doc=(
        "A directory of the node (absolute; type Directory: it must exist on every node a Ray pod runs on, or the "
        "pod does not start); one of claim and host_path."))
    read_only: bool = setting(False, doc="Mount it read-only (then nothing the job writes may be under it).")


def _cpu(default: str | None, what: str) -> Any:
    return setting(default, doc=(
        f"CPU request of the {what} (a Kubernetes quantity: \"8\", \"500m\"). KubeRay gives Ray the CPU limit, else "
        "this request, rounded up, as the node's CPUs (`ray start --num-cpus`)" +
        (". Left out: no request, and Ray counts the node's CPUs." if default is None else ".")))


def _memory(default: str | None, what: str) -> Any:
    return setting(default, doc=(
        f"Memory request of the {what} (a quantity: \"16Gi\")" +
        (". Left out: no request, and Ray counts the node's memory." if default is None else ".")))


def _cpu_limit(default: str | None = None) -> Any:
    return setting(default, doc=(
        "CPU limit (a quantity, at least cpu)." + (" Left out: none (Ray's processes are not throttled)."
                                                    if default is None else "")))


def _memory_limit(default: str | None = None) -> Any:
    return setting(default, doc=(
        "Memory limit (a quantity, at least memory)." + (" Left out: the memory request (KubeRay gives Ray the "
                                                         "limit as the node's memory)." if default is None else "")))


def _resources() -> Any:
    return setting(factory=dict, doc=(
        "Other resources of the container, request = limit, by their Kubernetes names (e.g. "
        "\"vpc.amazonaws.com/efa\" = \"32\" for EFA, \"ephemeral-storage\" = \"200Gi\"). Not cpu or memory (their "
        "keys above) nor nvidia.com/gpu (the placement decides the GPUs)."))


def _node_selector() -> Any:
    return setting(factory=dict, doc=(
        "Node labels the pods must have (nodeSelector), e.g. {\"eks.amazonaws.com/nodegroup\" = \"gpu\"} or "
        "{\"nvidia.com/gpu.product\" = \"NVIDIA-H100-80GB-HBM3\"}."))


def _node_affinity() -> Any:
    return setting(factory=dict, doc=(
        "Node labels and the values the pods accept for each (required node affinity, operator In), e.g. "
        "{\"topology.kubernetes.io/zone\" = [\"us-west-2a\"]}."))


def _tolerations(default: list[Toleration] | None, what: str) -> Any:
    doc = f"Taints the {what} tolerates ([[...tolerations]] tables)."
    if default:
        doc += (" Default: the nvidia.com/gpu taint (operator \"Exists\", effect \"NoSchedule\") that EKS GPU node "
                "groups are given; a table written replaces it.")
    return setting(factory=lambda: list(default or ()), doc=doc)


def _shm_size(what: str) -> Any:
    return setting(None, doc=(
        f"Size of the {what}'s /dev/shm (an emptyDir of medium Memory: sglang, NCCL and Ray's object store use it; "
        "a container's default is 64Mi). Its pages count against the pod's memory. Left out: the memory limit, as "
        "KubeRay sizes it, else the node's memory."))


@attrs.frozen(kw_only=True)
class Head:
    """[kuberay.head]: the Ray head pod. It runs no GPU work: the job's driver (train.py), Ray's GCS and dashboard,
    and the CPU actors Ray places on it (slime's RolloutManager, one CPU each)."""

    cpu: str | None = _cpu("4", "head")
    memory: str | None = _memory("16Gi", "head")
    cpu_limit: str | None = _cpu_limit()
    memory_limit: str | None = _memory_limit()
    resources: dict[str, str] = _resources()
    node_selector: dict[str, str] = _node_selector()
    node_affinity: dict[str, list[str]] = _node_affinity()
    tolerations: list[Toleration] = _tolerations(None, "head")
    shm_size: str | None = _shm_size("head")


@attrs.frozen(kw_only=True)
class Worker:
    """[kuberay.worker]: the worker pods, one per node of the placement ([cluster] num_nodes, or the fewest nodes that
    hold slime's placement group), each with [cluster] gpus_per_node GPUs (nvidia.com/gpu)."""

    cpu: str | None = _cpu(None, "worker")
    memory: str | None = _memory(None, "worker")
    cpu_limit: str | None = _cpu_limit()
    memory_limit: str | None = _memory_limit()
    resources: dict[str, str] = _resources()
    node_selector: dict[str, str] = _node_selector()
    node_affinity: dict[str, list[str]] = _node_affinity()
    instance_types: list[str] | None = setting(None, doc=(
        "EC2 instance types the worker pods may run on (required node affinity on node.kubernetes.io/instance-type, "
        "a label every EKS node has). Default: the instance types with [cluster] gpus_per_node GPUs of [cluster] gpu "
        "(docs/kuberay.md), none when gpu is not set; [] for no constraint."))
    tolerations: list[Toleration] = _tolerations(
        [Toleration(key=GPU_TAINT_KEY, operator="Exists", effect="NoSchedule")], "worker")
    shm_size: str | None = _shm_size("worker")


@attrs.frozen(kw_only=True)
class Submitter:
    """[kuberay.submitter]: the pod of the Kubernetes Job KubeRay starts to run `ray job submit` against the head and
    follow the job's logs (submitterPodTemplate). The defaults are KubeRay's own."""

    cpu: str | None = setting(SUBMITTER_DEFAULTS["cpu"], doc="CPU request of the submitter.")
    memory: str | None = setting(SUBMITTER_DEFAULTS["memory"], doc="Memory request of the submitter.")
    cpu_limit: str | None = setting(SUBMITTER_DEFAULTS["cpu_limit"], doc="CPU limit of the submitter.")
    memory_limit: str | None = setting(SUBMITTER_DEFAULTS["memory_limit"], doc="Memory limit of the submitter.")
    node_selector: dict[str, str] = _node_selector()
    tolerations: list[Toleration] = _tolerations(None, "submitter")


@attrs.frozen(kw_only=True)
class KubeRay:
    """[kuberay]: the KubeRay RayJob that `acrl-compile --target kuberay` writes (rayjob.yaml)."""

    image: str | None = setting(None, kind="name", doc=(
        "Container image of the Ray head and workers, with slime (at slime.dir), Megatron-LM (at slime.megatron_dir), "
        "sglang and the rollout integration installed. Required for --target kuberay."))
    secret: str = setting("acrl-secrets", kind="name", doc=(
        "Kubernetes Secret the job's secrets are read from, one key per variable (wandb.key_env, env.forward, "
        "AWS_*); never inlined."))
    secrets: dict[str, Requirement] = setting(factory=dict, doc=(
        "Whether each variable read from the Secret is \"required\" (a missing Secret or key keeps the pods from "
        "starting: CreateContainerConfigError) or \"optional\" (the pod starts without it). Default: required for "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (the rollout integration calls AgentCore and S3 with them) and "
        "for the W&B key when [wandb] project is set; optional for AWS_SESSION_TOKEN, for the W&B key without a "
        "project and for [env] forward."))
    namespace: str | None = setting(None, kind="name", doc=(
        "Namespace of the ConfigMap and the RayJob (default: the one `kubectl apply` uses)."))
    service_account: str | None = setting(None, kind="name", doc=(
        "Service account of the Ray pods. On EKS, one annotated with an IAM role (IRSA) gives the job its AWS "
        "credentials: the pods then read no AWS_* keys from the Secret."))
    labels: dict[str, str] = setting(factory=dict, doc=(
        "Labels of the RayJob, the ConfigMap and every pod (Kubernetes label syntax; not ray.io/*, which KubeRay "
        "sets). Never a secret: anyone who can list pods reads them."))
    annotations: dict[str, str] = setting(factory=dict, doc=(
        "Annotations of the RayJob, the ConfigMap and every pod (e.g. \"karpenter.sh/do-not-disrupt\" = \"true\"). "
        "Never a secret."))
    volumes: list[Volume] = setting(factory=list, doc=(
        "Volumes of the head and worker pods ([[kuberay.volumes]] tables): every path the job reads or writes "
        "([model] dir, [data] path, [checkpoint] save, ...) must be under one of them or under image_paths "
        "(ACRL-K006)."))
    image_paths: list[str] = setting(factory=list, kind="path", doc=(
        "Directories the image itself holds (e.g. a model baked into it): paths under them need no volume. Nothing "
        "may be written there (it is lost with the pod)."))
    ray_version: str | None = setting(None, doc=(
        "The image's Ray version (rayClusterSpec.rayVersion, e.g. \"2.49.0\"); KubeRay picks version-dependent "
        "behaviour with it. Left out: KubeRay's assumption."))
    shutdown_after_job_finishes: bool = setting(True, doc=(
        "Delete the RayCluster when the job ends (after ttl_seconds_after_finished)."))
    ttl_seconds_after_finished: int | None = setting(None, doc=(
        "Seconds the RayCluster is kept after the job ends, for its logs. Default: 3600 with "
        "shutdown_after_job_finishes; not allowed without it (KubeRay refuses it)."), ge=0)
    active_deadline_seconds: int | None = setting(None, doc=(
        "Seconds the RayJob may run before KubeRay stops it and marks it failed (activeDeadlineSeconds). Left out: "
        "no deadline."), ge=1)
    pre_running_deadline_seconds: int | None = setting(None, doc=(
        "Seconds the RayJob may take to reach Running (its pods scheduled and started) before KubeRay marks it "
        "failed: a missing required Secret or an unschedulable pod then ends the job. KubeRay v1.6.0 and later."),
        ge=1)
    backoff_limit: int = setting(0, doc=(
        "Retries of the whole job, each on a new RayCluster, before the RayJob is failed (backoffLimit)."),
        ge=0)
    head: Head = setting(factory=Head, doc="The head pod.")
    worker: Worker = setting(factory=Worker, doc="The worker pods.")
    submitter: Submitter = setting(factory=Submitter, doc="The submitter pod.")


# [kuberay]'s keys before the table grew its pods (issue 18): spec.toml writes them as before; every other key only
# when it differs from its default (compiler/_pipeline/compile.py WRITTEN_WHEN_SET), so a bundle compiled before
# they existed is the same, byte for byte.
FIRST_KEYS = ("image", "secret", "namespace", "service_account")


def written_when_set() -> dict[str, Any]:
    """[kuberay]'s later keys as dotted leaf keys ("head.cpu") -> their default as spec.toml data (a table in a list
    as its keys, None left out); keys whose default is None are never written anyway."""
    out: dict[str, Any] = {}

    def data(value: Any) -> Any:
        if attrs.has(type(value)):
            return {f.name: data(getattr(value, f.name)) for f in attrs.fields(type(value))
                    if getattr(value, f.name) is not None}
        return [data(v) for v in value] if isinstance(value, list) else value

    def walk(table: Any, prefix: str) -> None:
        for field in attrs.fields(type(table)):
            value = getattr(table, field.name)
            if attrs.has(type(value)):
                walk(value, f"{prefix}{field.name}.")
            elif value is not None and f"{prefix}{field.name}" not in FIRST_KEYS:
                out[f"{prefix}{field.name}"] = data(value)
    walk(KubeRay(), "")
    return out
