"""ACRL-K* (K001-K005, K007): the [kuberay] table's values, whatever the target: Kubernetes names, quantities, labels,
annotations, node selection, tolerations, the Secret's variables, volumes and the RayJob settings KubeRay refuses. The
API server (or KubeRay, or the kubelet) would otherwise refuse them only when rayjob.yaml is applied, or a pod is
started. The rules that depend on the job itself (the paths it reads, its CPUs, its nodes, its size) are
:mod:`.kuberay_job`'s, checked for --target kuberay.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator

from ..._secrets import is_secret_name
from ..._spec.kuberay import Head, Submitter, Toleration, Worker
from .. import placement_spec
from ..kuberay import EXPERIMENT_ANNOTATION
from ..kuberay_pods import CONFIG_MOUNT, GPU_RESOURCE, SHM_PATH, secret_refs
from .engine import Context, Finding, rule
from .k8s_syntax import (
    DNS_LABEL,
    DNS_SUBDOMAIN,
    label_value_problem,
    qualified_name_problem,
    quantity,
    resource_name_problem,
)

GROUPS = ("head", "worker", "submitter")
# Label keys KubeRay sets on the pods it makes (ray-operator/controllers/ray/utils/constant.go:17-32, :98-99 at
# v1.7.0) and the one acrl sets on the RayJob and the ConfigMap: a label of the spec's would be overwritten or
# break KubeRay's selectors.
OWNED_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/created-by", "app.kubernetes.io/managed-by")
OWNED_PREFIX = "ray.io/"


def _groups(ctx: Context) -> Iterator[tuple[str, Head | Worker | Submitter]]:
    k = ctx.spec.kuberay
    yield from (("head", k.head), ("worker", k.worker), ("submitter", k.submitter))


@rule("ACRL-K001", "error", ["kuberay.namespace", "kuberay.service_account", "kuberay.secret", "kuberay.volumes",
                             "kuberay.image"], "Kubernetes names are names")
def _kubernetes_names(ctx: Context) -> Iterator[Finding]:
    """[kuberay] namespace and each volume's name must be DNS-1123 labels, service_account, secret and each
    volume's claim DNS-1123 subdomains, and volume names unique: the API server rejects anything else, only when
    the RayJob is applied. The image is a reference without spaces or control characters (the API server refuses
    leading or trailing ones, the kubelet any: InvalidImageName)."""
    k = ctx.spec.kuberay
    if k.image is not None and (not k.image or any(c.isspace() or not c.isprintable() for c in k.image)):
        yield Finding("the image reference is empty or holds spaces or control characters",
                      "write it as REGISTRY/REPOSITORY:TAG, e.g. 123456789012.dkr.ecr.us-west-2.amazonaws.com/slime:v1",
                      keys=(("kuberay", "image"),))
    named: list[tuple[tuple[str | int, ...], str | None, re.Pattern[str]]] = [
        (("kuberay", "namespace"), k.namespace, DNS_LABEL), (("kuberay", "service_account"), k.service_account,
                                                             DNS_SUBDOMAIN), (("kuberay", "secret"), k.secret,
                                                                              DNS_SUBDOMAIN)]
    for i, v in enumerate(k.volumes):
        named += [(("kuberay", "volumes", i, "name"), v.name, DNS_LABEL),
                  (("kuberay", "volumes", i, "claim"), v.claim, DNS_SUBDOMAIN)]
    for key, value, pattern in named:
        if value is not None and not pattern.fullmatch(value):
            what = "a DNS-1123 label (at most 63" if pattern is DNS_LABEL else "a DNS-1123 subdomain (at most 253"
            yield Finding(f"{value!r} is not a Kubernetes name: it must be {what} lowercase letters, digits and "
                          f"'-'{', and dots' if pattern is DNS_SUBDOMAIN else ''}), starting and ending with a "
                          "letter or digit", f"rename it, e.g. {_k8s_example(value)!r}", keys=(key,))
    names = [v.name for v in k.volumes]
    for i, name in enumerate(names):
        if name in names[:i] or name in ("acrl-config", "dshm"):
            yield Finding(f"volume name {name!r} is used twice in the pods (acrl names the ConfigMap's volume "
                          "acrl-config and /dev/shm's dshm)", "give each volume its own name",
                          keys=(("kuberay", "volumes", i, "name"),))


def _k8s_example(value: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:63] or "acrl"


@rule("ACRL-K002", "error", ["kuberay.head", "kuberay.worker", "kuberay.submitter"],
      "resources are Kubernetes quantities, requests within limits")
def _quantities(ctx: Context) -> Iterator[Finding]:
    """cpu, memory, their limits, resources and shm_size of [kuberay.head], [kuberay.worker] and [kuberay.submitter]
    must be positive Kubernetes quantities ("8", "500m", "16Gi"), a request no more than its limit (the API server
    refuses the pod otherwise), and resources must name resources a container can ask for: not cpu or memory (their
    own keys) nor nvidia.com/gpu, which the placement decides."""
    for name, group in _groups(ctx):
        values = {key: getattr(group, key) for key in ("cpu", "memory", "cpu_limit", "memory_limit", "shm_size")
                  if getattr(group, key, None) is not None}
        values |= {("resources", key): value for key, value in getattr(group, "resources", {}).items()}
        parsed = {}
        for key, value in values.items():
            path = ("kuberay", name, *((key,) if isinstance(key, str) else key))
            amount = quantity(value)
            if amount is None or amount <= 0:
                yield Finding(f"{value!r} is not a positive Kubernetes quantity", "write a number with an optional "
                              "suffix: \"8\" or \"500m\" CPUs, \"16Gi\" or \"512Mi\" of memory", keys=(path,))
            else:
                parsed[key] = amount
        for request, limit in (("cpu", "cpu_limit"), ("memory", "memory_limit")):
            if request in parsed and limit in parsed and parsed[request] > parsed[limit]:
                yield Finding(f"the {request} request {values[request]} is more than its limit {values[limit]}",
                              f"raise {limit} or lower {request}", keys=(("kuberay", name, request),))
        for key in getattr(group, "resources", {}):
            problem = resource_name_problem(key)
            own = key in ("cpu", "memory") or key == GPU_RESOURCE
            if own or problem:
                hint = (f"set [kuberay.{name}] {key} (and {key}_limit)" if key in ("cpu", "memory") else
                        "leave it out: the GPUs per pod are [cluster] gpus_per_node, as the placement needs them"
                        if key == GPU_RESOURCE else "name the resource as the node advertises it")
                yield Finding(f"[kuberay.{name}] resources {key!r}: " +
                              ("has its own key" if own else f"is not a resource name: {problem}"), hint,
                              keys=(("kuberay", name, "resources", key),))


@rule("ACRL-K003", "error", ["kuberay.labels", "kuberay.annotations", "kuberay.head", "kuberay.worker",
                             "kuberay.submitter"], "labels, annotations and node selection follow Kubernetes' syntax")
def _labels(ctx: Context) -> Iterator[Finding]:
    """Label, annotation, node-selector, node-affinity and toleration keys must be Kubernetes qualified names
    ([prefix/]name); label and node-selection values label values (at most 63 characters of letters, digits, '-',
    '_', '.'); no label under ray.io/ or that KubeRay or acrl sets, nor acrl's acrl/experiment-id annotation; no
    label or annotation named as a secret (anyone who can list pods reads them). A toleration with operator
    "Exists" has no value, one without a key needs "Exists", and toleration_seconds needs effect "NoExecute"."""
    k = ctx.spec.kuberay
    for kind, table in (("labels", k.labels), ("annotations", k.annotations)):
        for key, value in table.items():
            path = ("kuberay", kind, key)
            # an annotation's key is checked lowercased (apimachinery api/validation/objectmeta.go ValidateAnnotations)
            problem = qualified_name_problem(key if kind == "labels" else key.lower())
            if problem:
                yield Finding(f"{kind[:-1]} key {key!r} is not a Kubernetes qualified name: {problem}",
                              "use a key like \"team\" or \"example.com/team\"", keys=(path,))
            elif (kind == "labels" and (key.startswith(OWNED_PREFIX) or key in OWNED_LABELS)) or \
                    (kind == "annotations" and key == EXPERIMENT_ANNOTATION):
                yield Finding(f"{kind[:-1]} {key!r} is set by KubeRay or acrl on the objects it makes",
                              "use a key of your own (e.g. under your domain)", keys=(path,))
            elif is_secret_name(key.rpartition("/")[2]):
                yield Finding(f"{kind[:-1]} {key!r} is named as a secret: labels and annotations are read by anyone "
                              "who can list the pods", "keep secrets in the Kubernetes Secret ([kuberay] secret)",
                              keys=(path,))
            if kind == "labels" and (problem := label_value_problem(value)):
                yield Finding(f"label {key!r}'s value is not a label value: {problem}",
                              "shorten it, or make it an annotation", keys=(path,))
    for name, group in _groups(ctx):
        yield from _node_selection(name, group)


def _node_selection(name: str, group: Head | Worker | Submitter) -> Iterator[Finding]:
    selection = [(("node_selector", key), key, [value]) for key, value in group.node_selector.items()]
    selection += [(("node_affinity", key), key, values) for key, values in getattr(group, "node_affinity", {}).items()]
    for where, key, values in selection:
        path = ("kuberay", name, *where)
        problem = qualified_name_problem(key)
        if problem:
            yield Finding(f"node label {key!r} is not a Kubernetes qualified name: {problem}",
                          "give the label's key as the nodes carry it (kubectl get nodes --show-labels)", keys=(path,))
        bad = [(v, p) for v in values if (p := label_value_problem(v))]
        if bad or not values:
            why = f"{bad[0][0]!r}: {bad[0][1]}" if bad else "no value is given"
            yield Finding(f"node label {key!r}: {why}", "give the label values the nodes carry", keys=(path,))
    for i, item in enumerate(getattr(group, "instance_types", None) or ()):
        if (problem := label_value_problem(item)) or not item:
            yield Finding(f"instance type {item!r} is not a label value: {problem or 'it is empty'}",
                          "write an EC2 instance type, e.g. \"p5.48xlarge\"",
                          keys=(("kuberay", name, "instance_types", i),))
    for i, t in enumerate(group.tolerations):
        yield from _toleration(name, i, t)


def _toleration(name: str, i: int, t: Toleration) -> Iterator[Finding]:
    path = ("kuberay", name, "tolerations", i)
    if t.key is not None and (problem := qualified_name_problem(t.key)):
        yield Finding(f"toleration key {t.key!r} is not a Kubernetes qualified name: {problem}",
                      "give the taint's key (kubectl describe node)", keys=((*path, "key"),))
    if t.operator == "Exists" and t.value:
        yield Finding("a toleration with operator \"Exists\" takes no value", "remove value, or use operator "
                      "\"Equal\"", keys=((*path, "value"),))
    if t.key is None and t.operator != "Exists":
        yield Finding("a toleration without a key must have operator \"Exists\" (it then tolerates every taint)",
                      "give the taint's key, or set operator = \"Exists\"", keys=((*path, "operator"), path))
    if t.value and (problem := label_value_problem(t.value)):
        yield Finding(f"toleration value {t.value!r}: {problem}", "give the taint's value", keys=((*path, "value"),))
    if t.toleration_seconds is not None and (t.effect != "NoExecute" or t.toleration_seconds < 0):
        yield Finding("toleration_seconds applies only to effect \"NoExecute\" and is at least 0",
                      "set effect = \"NoExecute\", or remove toleration_seconds", keys=((*path, "toleration_seconds"),))


@rule("ACRL-K004", "error", ["kuberay.secrets"], "[kuberay.secrets] names the variables the pods read",
      reads=("cluster.env", "env.forward", "experiment.integration", "kuberay.service_account", "wandb.enabled",
             "wandb.key_env", "wandb.project"))
def _secrets(ctx: Context) -> Iterator[Finding]:
    """Each key of [kuberay.secrets] must be a variable the Ray pods read from the Secret: the W&B key while W&B is
    enabled, [env] forward's names, and the AWS keys (unless the integration is slime's or a service account is
    set). Another name would be required or optional of nothing. And with --target kuberay, [cluster] env, the pods'
    own environment, may not set a variable they read from the Secret (the container would get it twice, the Secret's
    winning)."""
    read = secret_refs(ctx.spec)
    for name in ctx.spec.kuberay.secrets:
        if name not in read:
            listed = ", ".join(read) or "none"
            yield Finding(f"the pods read no {name!r} from the Secret (they read: {listed})",
                          "remove it, or add the variable to [env] forward", keys=(("kuberay", "secrets", name),))
    for name in ctx.spec.cluster.env if placement_spec.RAYJOB.get() else ():
        if name in read:
            yield Finding(f"{name} is also read from the Secret [kuberay] secret: the pods would get it twice",
                          f"remove {name} from [cluster] env or from [env] forward", keys=(("cluster", "env", name),))


@rule("ACRL-K005", "error", ["kuberay.volumes", "kuberay.image_paths"], "volumes are mountable")
def _volumes(ctx: Context) -> Iterator[Finding]:
    """Each [[kuberay.volumes]] has exactly one of claim and host_path, an absolute host_path and an absolute,
    normalized mount_path of its own, neither /dev/shm nor the ConfigMap's /acrl/config (acrl mounts them) nor over
    them; image_paths are absolute."""
    k = ctx.spec.kuberay
    mounts: list[str] = []
    for i, v in enumerate(k.volumes):
        path = ("kuberay", "volumes", i)
        if (v.claim is None) == (v.host_path is None):
            yield Finding(f"volume {v.name!r} needs exactly one source: claim (a PersistentVolumeClaim) or host_path",
                          "set claim = \"fsx-claim\" or host_path = \"/data\"", keys=((*path, "name"),))
        if v.host_path is not None and not _absolute(v.host_path):
            yield Finding(f"host_path {v.host_path!r} is not an absolute, normalized path", "write it from /",
                          keys=((*path, "host_path"),))
        mount = v.mount_path
        if not _absolute(mount) or mount == "/":
            yield Finding(f"mount_path {mount!r} is not an absolute, normalized path below /", "write it from /, "
                          "e.g. \"/fsx\"", keys=((*path, "mount_path"),))
        elif any(_under(mount, own) or _under(own, mount) for own in (SHM_PATH, CONFIG_MOUNT)):
            yield Finding(f"mount_path {mount!r} meets acrl's own mounts ({SHM_PATH}, {CONFIG_MOUNT})",
                          "mount it elsewhere; /dev/shm's size is [kuberay.head]/[kuberay.worker] shm_size",
                          keys=((*path, "mount_path"),))
        elif mount in mounts:
            yield Finding(f"two volumes are mounted at {mount!r}", "give each its own mount_path",
                          keys=((*path, "mount_path"),))
        mounts.append(mount)
    for i, item in enumerate(k.image_paths):
        if not _absolute(item):
            yield Finding(f"image path {item!r} is not an absolute, normalized path", "write it from /",
                          keys=(("kuberay", "image_paths", i),))


def _absolute(path: str) -> bool:
    return path.startswith("/") and (path == "/" or posixpath.normpath(path) == path)


def _under(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or inside it (both absolute and normalized)."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


INT32_MAX = 2 ** 31 - 1  # the RayJob's seconds and counts are int32 (ray-operator/apis/ray/v1/rayjob_types.go)
INT32_KEYS = ("ttl_seconds_after_finished", "active_deadline_seconds", "pre_running_deadline_seconds",
              "backoff_limit")


@rule("ACRL-K007", "error", ["kuberay.ttl_seconds_after_finished", "kuberay.shutdown_after_job_finishes",
                             "kuberay.ray_version"], "RayJob settings KubeRay accepts",
      reads=("kuberay.active_deadline_seconds", "kuberay.backoff_limit", "kuberay.pre_running_deadline_seconds"))
def _job_settings(ctx: Context) -> Iterator[Finding]:
    """KubeRay refuses ttl_seconds_after_finished > 0 without shutdown_after_job_finishes (the TTL is the
    RayCluster's after the job ends; ray-operator/controllers/ray/utils/validation.go:753-755 at v1.7.0); the
    RayJob's seconds and counts are 32-bit integers; ray_version is a Ray release number (MAJOR.MINOR.PATCH)."""
    k = ctx.spec.kuberay
    for key in INT32_KEYS:
        value = getattr(k, key)
        if value is not None and value > INT32_MAX:
            yield Finding(f"{key} = {value} does not fit the RayJob's 32-bit field (at most {INT32_MAX})",
                          f"set {key} to at most {INT32_MAX}", keys=(("kuberay", key),))
    if not k.shutdown_after_job_finishes and k.ttl_seconds_after_finished:
        yield Finding("ttl_seconds_after_finished is the RayCluster's lifetime after the job ends, and only applies "
                      "with shutdown_after_job_finishes; KubeRay refuses the RayJob", "remove "
                      "ttl_seconds_after_finished, or set shutdown_after_job_finishes = true",
                      keys=(("kuberay", "ttl_seconds_after_finished"),))
    if k.ray_version is not None and not re.fullmatch(r"[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}", k.ray_version):
        yield Finding(f"ray_version {k.ray_version!r} is not a Ray release number", "write it as \"2.49.0\", the "
                      "Ray version of the image (python -c 'import ray; print(ray.__version__)')",
                      keys=(("kuberay", "ray_version"),))
