"""rayjob.yaml for `acrl-compile --target kuberay`: a ConfigMap holding custom_config.yaml (and sglang_config.yaml, and
checkpoint.sh) and a KubeRay RayJob (ray.io/v1) whose entrypoint runs the same slime command train.sh submits, after
the same checkpoint decision (checkpoint.sh, sourced from the ConfigMap in the head pod).

The head runs no GPU work; one worker group holds the nodes of slime's placement group as acrl's placement model
lays it out (placement_spec.read: [cluster] num_nodes, or the fewest nodes of gpus_per_node GPUs that hold the
group), one pod per node with the node's GPUs, so that Ray has exactly the GPUs, nodes and GPUs per node slime asks
for. The pods are compiler/_pipeline/kuberay_pods.py. Serialized with PyYAML, never assembled by hand.

Names. KubeRay derives the RayCluster's name from the RayJob's (``NAME-xxxxx``, utils/util.go:369-371 at v1.7.0),
its head Service (``NAME-head-svc``, util.go:316-320) and the submitter Job (``NAME``, rayjob_controller.go:724),
and refuses a RayJob name over 47 characters or not a DNS-1035 label (utils/validation.go:533-541, constant.go:375-381:
53 for the cluster's ``-serve-svc`` suffix, less the 6 of ``-xxxxx``). The RayJob is named ``STEM-HASH``: STEM is the
experiment id as a DNS-1035 label cut to 38 characters, HASH the first 8 hex digits of the sha256 of the experiment id
and the documents themselves (drawn with a placeholder name): unique per bundle (two ids that share their first 38
characters, or two bundles of one id that run anything differently, get different names), the same for the same
bundle, so that `kubectl apply` of one bundle twice is one RayJob. The ConfigMap is ``NAME-config``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from typing import Any

from .._spec.server_groups import SGLANG_CONFIG
from .._spec.tables import Spec
from . import placement_spec
from .argv import CUSTOM_CONFIG, actor_gpus, runtime_args
from .kuberay_pods import CONFIG_MOUNT, ray_pod, submitter_pod
from .render import CHECKPOINT_SH, comment_text, yaml_dumper  # comment_text: spec values on a comment line, escaped

__all__ = ["CONFIG_MOUNT", "DOCUMENT_MAX", "MAX_NAME", "SUBMITTER_ARG_MAX", "documents_size", "entrypoint",
           "name_stem", "pythonpath", "rayjob_documents", "rayjob_yaml", "submitter_argument_bytes",
           "worker_replicas"]

MAX_NAME = 47  # KubeRay's MaxRayJobNameLength (constant.go:381 at v1.7.0)
HASH_DIGITS = 8
MANAGED_BY = {"app.kubernetes.io/managed-by": "acrl"}
EXPERIMENT_ANNOTATION = "acrl/experiment-id"
TTL_DEFAULT = 3600
# The most bytes one document may have: `kubectl apply` (client-side) stores the whole object in the
# kubectl.kubernetes.io/last-applied-configuration annotation, and an object's annotations may hold 256 KiB in all
# (apimachinery api/validation/objectmeta.go: TotalAnnotationSizeLimitB); a ConfigMap's data may hold 1 MiB
# (core/v1 validation: MaxSecretSize), and etcd takes 1.5 MiB per request. The smallest, less room for the object's
# own annotations, bounds every document.
DOCUMENT_MAX = 256 * 1024 - 4 * 1024
# KubeRay runs the submitter as `/bin/bash -ce ARG`, ARG the whole `ray job submit` command line: the runtime env as
# Go's strconv.Quote of its JSON and the entrypoint as written (rayjob_controller.go:646, common/job.go:177 and 202 at
# v1.7.0). Linux refuses one argument longer than MAX_ARG_STRLEN, 32 pages with its NUL (include/uapi/linux/binfmts.h):
# the submitter would fail to start. KubeRay's own words around them (the dashboard wait loop, the address, the job
# id, `ray job logs --follow`) are under 2 KiB.
SUBMITTER_ARG_MAX = 32 * 4096 - 1
SUBMITTER_OVERHEAD = 2 * 1024
_PLACEHOLDER = "acrl-name"


def name_stem(exp_id: str, room: int = MAX_NAME - HASH_DIGITS - 1) -> str:
    """The experiment id as the start of a DNS-1035 label (KubeRay names Services after the RayJob): lowercase
    letters, digits and '-', starting with a letter, at most ``room`` characters."""
    name = re.sub(r"[^a-z0-9-]+", "-", exp_id.lower()).strip("-")
    if not name[:1].isalpha():
        name = f"acrl-{name}".rstrip("-")
    return name[:room].rstrip("-")


def worker_replicas(spec: Spec) -> int:
    """Worker pods of gpus_per_node GPUs each (the head pod runs no GPU work): [cluster] num_nodes, or, when it is
    not given, the fewest that hold slime's placement group (the RayJob's cluster is made for the job)."""
    token = placement_spec.RAYJOB.set(True)
    try:
        return placement_spec.read(spec).placement.nodes
    finally:
        placement_spec.RAYJOB.reset(token)


def entrypoint(spec: Spec, argv: list[str], checkpoint: bool = False) -> str:
    """The job's command: train.py (train_async.py) with the bundle's argv, the custom config from the
    ConfigMap, W&B switched on, as in train.sh, only when the key's variable is set in the pod, and, with
    ``checkpoint``, the bundle's checkpoint.sh (in the ConfigMap) sourced first: it decides in the head pod, where
    the driver runs and [checkpoint] save is mounted, whether slime loads a checkpoint, as train.sh does, and its
    flags (--load, ...) come last, as in train.sh."""
    script = "train_async.py" if spec.train.mode == "async" else "train.py"
    run_time = runtime_args(spec)
    wandb = ["--use-wandb", *run_time.wandb_tokens]
    command = ["python3", f"{spec.slime.dir.rstrip('/')}/{script}", *argv]
    if run_time.custom_config is not None:  # integration "agentcore" only
        command += ["--custom-config-path", f"{CONFIG_MOUNT}/{run_time.custom_config}"]
    if run_time.sglang_config is not None:  # [sglang.models]
        command += ["--sglang-config", f"{CONFIG_MOUNT}/{run_time.sglang_config}"]
    key = run_time.key_env
    steps = [f"set -euo pipefail; SLIME_ARGS=(); source {CONFIG_MOUNT}/{CHECKPOINT_SH}"] if checkpoint else []
    if run_time.wandb_enabled:  # [wandb] enabled = false: no W&B flags, whatever the pod's environment holds
        export = "" if key == "WANDB_API_KEY" else f'export WANDB_API_KEY="${{{key}}}"; '
        steps.append(f'if [[ -n ${{{key}:-}} ]]; then {export}set -- "$@" {shlex.join(wandb)}; fi')
    if not steps:
        return shlex.join(command)
    # bash -c 'script' acrl ARGS...: every token stays one argument, whatever it holds
    body = "; ".join([*steps, 'exec "$@" "${SLIME_ARGS[@]}"' if checkpoint else 'exec "$@"'])
    return shlex.join(["bash", "-c", body, "acrl", *command])


def pythonpath(spec: Spec) -> str:
    """The Ray job's PYTHONPATH, as train.sh builds it: [env] pythonpath_before_megatron, Megatron-LM's dir, then
    [env] pythonpath."""
    return ":".join([*spec.env.pythonpath_before_megatron, spec.slime.megatron_dir, *spec.env.pythonpath])


def _metadata(spec: Spec, name: str) -> dict[str, Any]:
    k = spec.kuberay
    return {"name": name, **({"namespace": k.namespace} if k.namespace else {}),
            "labels": {**MANAGED_BY, **k.labels},
            "annotations": {EXPERIMENT_ANNOTATION: spec.experiment.id, **k.annotations}}


def _documents(spec: Spec, argv: list[str], files: dict[str, str], name: str) -> list[dict[str, Any]]:
    k = spec.kuberay
    config_map = f"{name}-config" if files else None
    env_vars = {"PYTHONPATH": pythonpath(spec), "CUDA_DEVICE_MAX_CONNECTIONS": "1", **spec.env.vars}
    gpus = spec.cluster.gpus_per_node
    replicas = worker_replicas(spec)
    ttl = k.ttl_seconds_after_finished if k.ttl_seconds_after_finished is not None else \
        TTL_DEFAULT if k.shutdown_after_job_finishes else None
    job: dict[str, Any] = {
        "entrypoint": entrypoint(spec, argv, CHECKPOINT_SH in files),
        "runtimeEnvYAML": json.dumps({"env_vars": env_vars}, sort_keys=True),  # JSON is YAML
        "shutdownAfterJobFinishes": k.shutdown_after_job_finishes,
        **({"ttlSecondsAfterFinished": ttl} if ttl is not None else {}),
        **({"activeDeadlineSeconds": k.active_deadline_seconds} if k.active_deadline_seconds is not None else {}),
        **({"preRunningDeadlineSeconds": k.pre_running_deadline_seconds}
           if k.pre_running_deadline_seconds is not None else {}),
        "backoffLimit": k.backoff_limit,
        "submitterPodTemplate": submitter_pod(spec),
        "rayClusterSpec": {
            **({"rayVersion": k.ray_version} if k.ray_version else {}),
            "headGroupSpec": {
                "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
                "template": ray_pod(spec, "head", config_map, 0),
            },
            "workerGroupSpecs": [{
                "groupName": "gpu",
                "replicas": replicas, "minReplicas": replicas, "maxReplicas": replicas,
                "rayStartParams": {"num-gpus": str(gpus)},
                "template": ray_pod(spec, "worker", config_map, gpus),
            }],
        },
    }
    config = [] if config_map is None else [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _metadata(spec, config_map), "data": files}]
    return [*config, {"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": _metadata(spec, name), "spec": job}]


def rayjob_documents(spec: Spec, argv: list[str], custom_config: bytes | None,
                     sglang_config: bytes | None = None, checkpoint: bytes | None = None) -> list[dict[str, Any]]:
    """The ConfigMap (the custom config with integration "agentcore", the sglang config with [sglang.models], the
    checkpoint decision with [checkpoint] save or load) and the RayJob, as data, named STEM-HASH (the module's
    docstring)."""
    files = {file: data.decode("utf-8") for file, data in ((CUSTOM_CONFIG, custom_config),
                                                           (SGLANG_CONFIG, sglang_config),
                                                           (CHECKPOINT_SH, checkpoint)) if data is not None}
    draft = _documents(spec, argv, files, _PLACEHOLDER)
    material = json.dumps([spec.experiment.id, draft], sort_keys=True, ensure_ascii=False)
    digest = hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_DIGITS]
    return _documents(spec, argv, files, f"{name_stem(spec.experiment.id)}-{digest}")


def document_bytes(document: Any) -> int:
    """The bytes of a document as the API server and `kubectl apply` hold it (compact JSON)."""
    return len(json.dumps(document, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass"))


def documents_size(documents: list[dict[str, Any]]) -> list[tuple[str, int, list[tuple[str, int]]]]:
    """Each document's kind, bytes and its largest parts, largest first: a ConfigMap's files, a RayJob's entrypoint,
    runtime environment and pod templates."""
    out = []
    for doc in documents:
        if doc["kind"] == "ConfigMap":
            parts = [(f"data {file}", len(text.encode("utf-8", "surrogatepass"))) for file, text in doc["data"].items()]
        else:
            job, cluster = doc["spec"], doc["spec"]["rayClusterSpec"]
            parts = [("entrypoint (the slime argv)", document_bytes(job["entrypoint"])),
                     ("runtimeEnvYAML ([env] vars)", document_bytes(job["runtimeEnvYAML"])),
                     ("head pod template", document_bytes(cluster["headGroupSpec"])),
                     ("worker pod template", document_bytes(cluster["workerGroupSpecs"])),
                     ("submitter pod template", document_bytes(job["submitterPodTemplate"]))]
        out.append((doc["kind"], document_bytes(doc), sorted(parts, key=lambda p: -p[1])))
    return out


def submitter_argument_bytes(job: dict[str, Any]) -> int:
    """About how many bytes the submitter's one bash argument has for the RayJob spec ``job`` (SUBMITTER_ARG_MAX):
    the runtime env's JSON, compact, quoted (Go's json.Marshal writes <, > and & as 6-byte escapes), the entrypoint,
    and KubeRay's own words."""
    import yaml  # lazy: as rayjob_yaml

    env = json.dumps(yaml.safe_load(job["runtimeEnvYAML"]) or {}, separators=(",", ":"), ensure_ascii=False)
    quoted = json.dumps(env, ensure_ascii=False)
    escaped = 5 * sum(quoted.count(c) for c in "<>&")
    return len(quoted.encode("utf-8", "surrogatepass")) + escaped + \
        len(job["entrypoint"].strip().encode("utf-8", "surrogatepass")) + SUBMITTER_OVERHEAD


def rayjob_yaml(spec: Spec, argv: list[str], custom_config: bytes | None, sglang_config: bytes | None = None,
                checkpoint: bytes | None = None) -> bytes:
    """rayjob.yaml: ``kubectl apply -f rayjob.yaml`` creates the ConfigMap and starts the RayJob."""
    import yaml  # lazy: PyYAML is needed only for --target kuberay, after a spec compiled without errors

    documents = rayjob_documents(spec, argv, custom_config, sglang_config, checkpoint)
    name = documents[-1]["metadata"]["name"]
    header = (f"# KubeRay RayJob {name} of {comment_text(spec.experiment.id)}: {worker_replicas(spec)} worker pod(s) "
              f"x {spec.cluster.gpus_per_node} GPU(s) ({actor_gpus(spec)} for the training actor).\n"
              f"# Secrets come from the Secret '{comment_text(spec.kuberay.secret)}' (keys named as the variables).\n")
    body = yaml.dump_all(documents, Dumper=yaml_dumper(block_multiline=True), sort_keys=False, allow_unicode=True,
                         default_flow_style=False, width=100)
    return (header + body).encode("utf-8")

