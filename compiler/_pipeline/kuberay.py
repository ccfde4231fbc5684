"""rayjob.yaml for `acrl-compile --target kuberay`: a ConfigMap holding custom_config.yaml and a
KubeRay RayJob (ray.io/v1) whose entrypoint runs the same slime command train.sh submits.

The head runs no GPU work; one worker group holds the training actor's nodes (plus the rollout
engines' nodes when they are not colocated), each with the spec's GPUs per node. Secrets reach the
pods only as ``env[].valueFrom.secretKeyRef`` entries naming a Kubernetes Secret: no value is ever
written into the file. Serialized with PyYAML, never assembled by hand.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from .._spec.server_groups import SGLANG_CONFIG
from .._spec.tables import Spec
from . import placement_spec
from .argv import CUSTOM_CONFIG, actor_gpus, runtime_args
from .render import comment_text, yaml_dumper  # comment_text: spec values on a comment line, escaped

CONFIG_MOUNT = "/acrl/config"
# Secrets the toolkit and slime read from the environment: AWS for the rollout integration's boto3
# (unless the pods get a role another way, hence optional), W&B's key, and the spec's forwarded names.
AWS_SECRET_NAMES = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")


def k8s_name(exp_id: str) -> str:
    """A DNS-1035 label from the experiment id (KubeRay names the head Service after it): lowercase
    letters, digits and '-', starting with a letter, at most 50 characters so KubeRay's suffixes fit."""
    name = re.sub(r"[^a-z0-9-]+", "-", exp_id.lower()).strip("-")
    if not name[:1].isalpha():
        name = f"acrl-{name}"
    return name[:50].rstrip("-")


def worker_replicas(spec: Spec) -> int:
    """Worker pods of gpus_per_node GPUs each (the head pod runs no GPU work): [cluster] num_nodes, or, when it is
    not given, the fewest that hold slime's placement group (the RayJob's cluster is made for the job)."""
    token = placement_spec.RAYJOB.set(True)
    try:
        return placement_spec.read(spec).placement.nodes
    finally:
        placement_spec.RAYJOB.reset(token)


def entrypoint(spec: Spec, argv: list[str]) -> str:
    """The job's command: train.py (train_async.py) with the bundle's argv, the custom config from the
    ConfigMap, and W&B switched on, as in train.sh, only when the key's variable is set in the pod."""
    script = "train_async.py" if spec.train.mode == "async" else "train.py"
    run_time = runtime_args(spec)
    wandb = ["--use-wandb", *run_time.wandb_tokens]
    command = ["python3", f"{spec.slime.dir.rstrip('/')}/{script}", *argv]
    if run_time.custom_config is not None:  # integration "agentcore" only
        command += ["--custom-config-path", f"{CONFIG_MOUNT}/{run_time.custom_config}"]
    if run_time.sglang_config is not None:  # [sglang.models]
        command += ["--sglang-config", f"{CONFIG_MOUNT}/{run_time.sglang_config}"]
    key = run_time.key_env
    if not run_time.wandb_enabled:  # [wandb] enabled = false: no W&B flags, whatever the pod's environment holds
        return shlex.join(command)
    # bash -c 'script' acrl ARGS...: every token stays one argument, whatever it holds
    export = "" if key == "WANDB_API_KEY" else f'export WANDB_API_KEY="${{{key}}}"; '
    body = f'if [[ -n ${{{key}:-}} ]]; then {export}set -- "$@" {shlex.join(wandb)}; fi; exec "$@"'
    return shlex.join(["bash", "-c", body, "acrl", *command])


def pythonpath(spec: Spec) -> str:
    """The Ray job's PYTHONPATH, as train.sh builds it: [env] pythonpath_before_megatron, Megatron-LM's dir, then
    [env] pythonpath."""
    return ":".join([*spec.env.pythonpath_before_megatron, spec.slime.megatron_dir, *spec.env.pythonpath])


def _secret_env(spec: Spec) -> list[dict[str, Any]]:
    # With a service account (IRSA on EKS) AWS credentials come from its role: keys from the Secret would
    # take precedence over it in boto3's credential chain, so none are referenced.
    aws = () if spec.kuberay.service_account else AWS_SECRET_NAMES
    names = [spec.wandb.key_env, *spec.env.forward, *aws]
    unique = list(dict.fromkeys(names))
    return [{"name": name, "valueFrom": {"secretKeyRef": {"name": spec.kuberay.secret, "key": name,
                                                          "optional": True}}}
            for name in unique]


def _pod(spec: Spec, config_map: str | None, role: str, gpus: int) -> dict[str, Any]:
    config = [{"name": "acrl-config", "mountPath": CONFIG_MOUNT, "readOnly": True}] if config_map else []
    container: dict[str, Any] = {
        "name": f"ray-{role}",
        "image": spec.kuberay.image,
        # [cluster] env first: the environment of the pod's Ray processes, as train.sh gives its head's
        "env": [*({"name": name, "value": value} for name, value in spec.cluster.env.items()), *_secret_env(spec)],
        "volumeMounts": [*config, {"name": "dshm", "mountPath": "/dev/shm"}],
    }
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}, "requests": {"nvidia.com/gpu": gpus}}
    account = {"serviceAccountName": spec.kuberay.service_account} if spec.kuberay.service_account else {}
    return {"spec": {
        **account,
        "containers": [container],
        "volumes": [*([{"name": "acrl-config", "configMap": {"name": config_map}}] if config_map else []),
                    # sglang and NCCL need far more shared memory than a container's default 64 MiB
                    {"name": "dshm", "emptyDir": {"medium": "Memory"}}],
    }}


def rayjob_documents(spec: Spec, argv: list[str], custom_config: bytes | None,
                     sglang_config: bytes | None = None) -> list[dict[str, Any]]:
    """The ConfigMap (the custom config with integration "agentcore", the sglang config with [sglang.models]) and
    the RayJob, as data."""
    name = k8s_name(spec.experiment.id)
    files = {file: data.decode("utf-8") for file, data in ((CUSTOM_CONFIG, custom_config),
                                                           (SGLANG_CONFIG, sglang_config)) if data is not None}
    config_map = f"{name}-config" if files else None
    labels = {"app.kubernetes.io/managed-by": "acrl"}
    namespace = {"namespace": spec.kuberay.namespace} if spec.kuberay.namespace else {}
    env_vars = {"PYTHONPATH": pythonpath(spec), "CUDA_DEVICE_MAX_CONNECTIONS": "1", **spec.env.vars}
    gpus = spec.cluster.gpus_per_node
    replicas = worker_replicas(spec)
    config = [] if not files else [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": config_map, **namespace, "labels": labels},
         "data": files}]
    return [
        *config,
        {"apiVersion": "ray.io/v1", "kind": "RayJob",
         "metadata": {"name": name, **namespace, "labels": labels},
         "spec": {
             "entrypoint": entrypoint(spec, argv),
             "runtimeEnvYAML": json.dumps({"env_vars": env_vars}, sort_keys=True),  # JSON is YAML
             "shutdownAfterJobFinishes": True,
             "ttlSecondsAfterFinished": 3600,
             "rayClusterSpec": {
                 "headGroupSpec": {
                     "rayStartParams": {"dashboard-host": "0.0.0.0", "num-gpus": "0"},
                     "template": _pod(spec, config_map, "head", 0),
                 },
                 "workerGroupSpecs": [{
                     "groupName": "gpu",
                     "replicas": replicas, "minReplicas": replicas, "maxReplicas": replicas,
                     "rayStartParams": {"num-gpus": str(gpus)},
                     "template": _pod(spec, config_map, "worker", gpus),
                 }],
             },
         }},
    ]


def rayjob_yaml(spec: Spec, argv: list[str], custom_config: bytes | None, sglang_config: bytes | None = None) -> bytes:
    """rayjob.yaml: ``kubectl apply -f rayjob.yaml`` creates the ConfigMap and starts the RayJob."""
    import yaml  # lazy: PyYAML is needed only for --target kuberay, after a spec compiled without errors

    header = (f"# KubeRay RayJob of {comment_text(spec.experiment.id)}: {worker_replicas(spec)} worker pod(s) x "
              f"{spec.cluster.gpus_per_node} GPU(s) ({actor_gpus(spec)} for the training actor).\n"
              f"# Secrets come from the Secret '{comment_text(spec.kuberay.secret)}' (keys named as the variables).\n")
    body = yaml.dump_all(rayjob_documents(spec, argv, custom_config, sglang_config),
                         Dumper=yaml_dumper(block_multiline=True), sort_keys=False, allow_unicode=True,
                         default_flow_style=False, width=100)
    return (header + body).encode("utf-8")
