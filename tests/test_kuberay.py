"""`acrl-compile --target kuberay`: rayjob.yaml holds a ConfigMap with the custom config and a KubeRay RayJob
(ray.io/v1) sized from the spec's placement, running the same slime command, with secrets only as references to a
Kubernetes Secret, named within KubeRay's limits, and pods as [kuberay] describes them. The documents are held to
KubeRay's CRD and Kubernetes' schemas by tests/test_kuberay_schema.py; the K rules by tests/test_kuberay_rules.py."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from acrl.compiler import compile_spec
from acrl.compiler._pipeline.compile import compile_source
from acrl.compiler._pipeline.kuberay import MAX_NAME, name_stem, rayjob_yaml
from acrl.compiler._pipeline.parse import read_spec
from acrl.compiler._pipeline.render import custom_config_yaml
from acrl.compiler.errors import SpecError
from conftest import KUBERAY_TABLE, NO_FACTS, SpecWriter, merge

KUBERAY = {"kuberay": {**KUBERAY_TABLE, "secret": "team-secrets"},
           "wandb": {"project": "my project", "key_env": "MY_WANDB_KEY"},
           "env": {"vars": {"NCCL_DEBUG": "WARN"}, "forward": ["WANDB_ENTITY", "TEAM_NAME"]},
           "extra": {"args": ["--x-flag", "a value; $(rm -rf /)"]}, "slime": {"commit": NO_FACTS}}


def documents(write_spec: SpecWriter, overrides: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    bundle = compile_spec(write_spec(overrides), target="kuberay")
    config_map, rayjob = yaml.safe_load_all(bundle.files["rayjob.yaml"])
    return bundle, config_map, rayjob


def pods(rayjob: dict[str, Any]) -> list[dict[str, Any]]:
    """The head's and the workers' pod specs."""
    cluster = rayjob["spec"]["rayClusterSpec"]
    return [g["template"]["spec"] for g in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]]


def test_rayjob_runs_the_image_with_the_runtime_env(write_spec: SpecWriter) -> None:
    _, _, rayjob = documents(write_spec, KUBERAY)
    assert rayjob["apiVersion"] == "ray.io/v1" and rayjob["kind"] == "RayJob"
    cluster = rayjob["spec"]["rayClusterSpec"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        # rayStartParams is map[string]string in KubeRay: a number is rejected by the API server
        assert all(isinstance(v, str) for v in group["rayStartParams"].values())
        assert group["template"]["spec"]["containers"][0]["image"] == "registry.example/slime:v1"
    assert rayjob["spec"]["submitterPodTemplate"]["spec"]["containers"][0]["image"] == "registry.example/slime:v1"
    assert yaml.safe_load(rayjob["spec"]["runtimeEnvYAML"])["env_vars"] == {
        "PYTHONPATH": "/root/Megatron-LM", "CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_DEBUG": "WARN"}


@pytest.mark.parametrize(("cluster", "replicas"), [
    ({"num_nodes": 2, "gpus_per_node": 4}, 2),
    ({"num_nodes": 3, "gpus_per_node": 8, "actor_num_nodes": 1, "colocate": False, "rollout_num_gpus": 16}, 3),
    # not given: the fewest nodes that hold slime's placement group (8 actor + 12 rollout GPUs)
    ({"gpus_per_node": 8, "colocate": False, "rollout_num_gpus": 12, "address": "http://head:8265"}, 3),
    # the RayJob's cluster is made for the job: no local head to be one node, the fewest nodes that hold 8 + 8
    ({"gpus_per_node": 8, "colocate": False, "rollout_num_gpus": 8}, 2),
    ({"gpus_per_node": 4, "actor_num_nodes": 2, "colocate": False, "rollout_num_gpus": 4}, 3),
    ({"gpus_per_node": 2, "colocate": True, "actor_num_nodes": 4}, 4),
])
def test_worker_group_is_sized_from_the_placement(write_spec: SpecWriter, cluster: dict[str, Any],
                                                  replicas: int) -> None:
    """One worker pod per node of acrl's placement model, each with the node's GPUs: the nodes and GPUs per node
    slime's placement group is laid on (placement_spec.read), never fewer GPUs than the group."""
    from acrl.compiler._pipeline import placement_spec

    bundle, _, rayjob = documents(write_spec, {**KUBERAY, "cluster": cluster, "parallel": {"tensor": 2}})
    assert json.loads(bundle.files["manifest.json"])["derived"]["nodes"] == replicas
    token = placement_spec.RAYJOB.set(True)
    try:
        placement = placement_spec.read(bundle.spec).placement
    finally:
        placement_spec.RAYJOB.reset(token)
    assert placement.nodes == replicas and replicas * cluster["gpus_per_node"] >= placement.group.num_gpus
    [workers] = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    gpus = cluster["gpus_per_node"]
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (replicas, replicas, replicas)
    assert workers["rayStartParams"]["num-gpus"] == str(gpus)
    resources = workers["template"]["spec"]["containers"][0]["resources"]
    assert resources == {"requests": {"nvidia.com/gpu": gpus}, "limits": {"nvidia.com/gpu": gpus}}
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]
    assert head["rayStartParams"]["num-gpus"] == "0"
    assert "nvidia.com/gpu" not in json.dumps(head)


def test_entrypoint_runs_the_same_slime_command(write_spec: SpecWriter) -> None:
    bundle, config_map, rayjob = documents(write_spec, KUBERAY)
    words = shlex.split(rayjob["spec"]["entrypoint"])
    assert words[:2] == ["bash", "-c"] and words[3] == "acrl"
    command = words[4:]
    assert command[:2] == ["python3", "/root/slime/train.py"]
    assert command[2:-2] == bundle.argv()  # every token, the hostile one included, intact
    assert command[-2:] == ["--custom-config-path", "/acrl/config/custom_config.yaml"]
    assert config_map["data"]["custom_config.yaml"] == bundle.files["custom_config.yaml"].decode()


def test_entrypoint_turns_wandb_on_only_when_the_key_is_set(write_spec: SpecWriter) -> None:
    _, _, rayjob = documents(write_spec, KUBERAY)
    words = shlex.split(rayjob["spec"]["entrypoint"])
    script, command = words[2], ["printf", "%s\\n"]  # run the wrapper with printf in place of python
    for key, expected in [("", []), ("k", ["--use-wandb", "--wandb-project", "my project"])]:
        out = subprocess.run(["bash", "-c", script, "acrl", *command, "first"], env={"MY_WANDB_KEY": key},
                             capture_output=True, text=True, check=True).stdout.splitlines()
        assert out == ["first", *expected]


def secret_refs(rayjob: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The head's secretKeyRefs by variable (asserting the workers' are the same and no value is inline)."""
    found = []
    for pod in pods(rayjob):
        env = pod["containers"][0]["env"]
        found.append({e["name"]: e["valueFrom"]["secretKeyRef"] for e in env if "valueFrom" in e})
    assert all(f == found[0] for f in found)
    return found[0]


def test_secrets_are_references_to_the_secret_never_values(write_spec: SpecWriter,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_WANDB_KEY", "wandb-secret-value")
    monkeypatch.setenv("TEAM_NAME", "team-secret-value")
    bundle, _, rayjob = documents(write_spec, KUBERAY)
    assert "secret-value" not in bundle.files["rayjob.yaml"].decode()
    for pod in pods(rayjob):
        assert all(set(entry) == {"name", "valueFrom"} for entry in pod["containers"][0]["env"])  # no "value"
    refs = secret_refs(rayjob)
    assert {ref["name"] for ref in refs.values()} == {"team-secrets"}
    assert all(ref["key"] == name for name, ref in refs.items())
    # required: the run cannot work without them, and a missing Secret or key keeps the pod from starting
    assert {name: ref["optional"] for name, ref in refs.items()} == {
        "MY_WANDB_KEY": False,  # [wandb] project is set: the run is meant to log
        "WANDB_ENTITY": True, "TEAM_NAME": True,  # [env] forward: copied when set, as train.sh does
        "AWS_ACCESS_KEY_ID": False, "AWS_SECRET_ACCESS_KEY": False,  # the toolkit's rollout calls AgentCore and S3
        "AWS_SESSION_TOKEN": True}  # only temporary credentials have one


@pytest.mark.parametrize(("overrides", "expected"), [
    # [kuberay.secrets] says otherwise, key by key
    ({"kuberay": {"secrets": {"AWS_SESSION_TOKEN": "required", "MY_WANDB_KEY": "optional", "TEAM_NAME": "required"}}},
     {"MY_WANDB_KEY": True, "WANDB_ENTITY": True, "TEAM_NAME": False, "AWS_ACCESS_KEY_ID": False,
      "AWS_SECRET_ACCESS_KEY": False, "AWS_SESSION_TOKEN": False}),
    # no project: W&B is used when the key is there
    ({"wandb": {"project": None}, "env": {"forward": []}},
     {"MY_WANDB_KEY": True, "AWS_ACCESS_KEY_ID": False, "AWS_SECRET_ACCESS_KEY": False, "AWS_SESSION_TOKEN": True}),
    # W&B off: its key is not read at all; IRSA: no AWS keys (they would win over the role in boto3's chain)
    ({"wandb": {"enabled": False}, "env": {"forward": []}, "kuberay": {"service_account": "slime-irsa"}}, {}),
    # slime's own rollout reads no AWS credentials
    ({"experiment": {"integration": "slime"}, "agentcore": None, "cluster": {"colocate": True}, "env": {"forward": []}},
     {"MY_WANDB_KEY": False}),
])
def test_which_secrets_are_required(write_spec: SpecWriter, overrides: dict[str, Any],
                                    expected: dict[str, bool]) -> None:
    data = merge(KUBERAY, overrides)
    if "agentcore" in overrides:  # deleted from MINIMAL, not from KUBERAY
        data["agentcore"] = None
    bundle = compile_spec(write_spec(data), target="kuberay")
    rayjob = list(yaml.safe_load_all(bundle.files["rayjob.yaml"]))[-1]
    assert {name: ref["optional"] for name, ref in secret_refs(rayjob).items()} == expected


def test_namespace_and_irsa_service_account(write_spec: SpecWriter) -> None:
    """A namespace goes on both documents; a service account (IRSA) on every pod, the submitter's too."""
    _, config_map, rayjob = documents(write_spec, merge(KUBERAY, {"kuberay": {
        "namespace": "rl-team", "service_account": "slime-irsa"}}))
    assert config_map["metadata"]["namespace"] == rayjob["metadata"]["namespace"] == "rl-team"
    for pod in [*pods(rayjob), rayjob["spec"]["submitterPodTemplate"]["spec"]]:
        assert pod["serviceAccountName"] == "slime-irsa"
    _, config_map, rayjob = documents(write_spec, KUBERAY)
    assert "namespace" not in config_map["metadata"] and "namespace" not in rayjob["metadata"]
    assert not [pod for pod in pods(rayjob) if "serviceAccountName" in pod]


def test_kuberay_target_needs_an_image(write_spec: SpecWriter) -> None:
    path = write_spec()
    with pytest.raises(SpecError) as failed:
        compile_source(read_spec(path), target="kuberay")
    assert [(d.key, d.file, d.severity) for d in failed.value.diagnostics if d.key == "kuberay.image"] == \
        [("kuberay.image", str(path), "error")]
    assert "rayjob.yaml" not in compile_spec(path).files  # the default target is unchanged


def test_cli_writes_rayjob_yaml(write_spec: SpecWriter, tmp_path: Path) -> None:
    from acrl.compiler._cli.main import compile_main

    path = write_spec(KUBERAY)
    assert compile_main([str(path), "-o", str(tmp_path / "b"), "--target", "kuberay", "--no-cache"]) == 0
    assert (tmp_path / "b" / "rayjob.yaml").is_file()
    assert compile_main([str(path), "-o", str(tmp_path / "b"), "--target", "kuberay", "--check"]) == 0
    assert compile_main([str(path), "-o", str(tmp_path / "c")]) == 0  # cached or not: the default target
    assert not (tmp_path / "c" / "rayjob.yaml").exists()


# --- names ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("exp_id", "stem"), [
    ("test-exp", "test-exp"), ("My_Exp.v2", "my-exp-v2"), ("7b-run", "acrl-7b-run"), ("_x_", "x"),
    ("a" * 80, "a" * 38), ("-", "acrl"),
])
def test_name_stems_are_dns_1035_labels_with_room_for_the_hash(exp_id: str, stem: str) -> None:
    assert name_stem(exp_id) == stem


def name_of(write_spec: SpecWriter, overrides: dict[str, Any]) -> tuple[str, str]:
    _, config_map, rayjob = documents(write_spec, merge(KUBERAY, overrides))
    return rayjob["metadata"]["name"], config_map["metadata"]["name"]


def test_names_are_unique_per_bundle_and_within_kuberays_limits(write_spec: SpecWriter) -> None:
    """KubeRay refuses a RayJob name over 47 characters (utils/validation.go:533-541 at v1.7.0) and derives
    NAME-xxxxx (the RayCluster, at most 53), NAME-head-svc and the submitter Job NAME from it."""
    long_a, long_b = "x" * 50 + "-alpha", "x" * 50 + "-beta"
    names = {exp_id: name_of(write_spec, {"experiment": {"id": exp_id}}) for exp_id in (long_a, long_b, "run.1")}
    for name, config_map in names.values():
        assert len(name) <= MAX_NAME and re.fullmatch(r"[a-z]([-a-z0-9]*[a-z0-9])?", name), name
        assert config_map == f"{name}-config"
        assert len(f"{name}-abcde") <= 53 and len(f"{name}-head-svc") <= 63
    assert names[long_a][0] != names[long_b][0]  # ids sharing their first 50 characters
    assert names["run.1"][0].startswith("run-1-")
    # the same bundle, the same name: `kubectl apply` of it twice is one RayJob; anything the job runs differently,
    # another name
    assert name_of(write_spec, {"experiment": {"id": "run.1"}}) == names["run.1"]
    assert name_of(write_spec, {"experiment": {"id": "run.1"}, "rollout": {"batch_size": 16}}) != names["run.1"]
    assert name_of(write_spec, {"experiment": {"id": "run.1"}, "kuberay": {"labels": {"a": "b"}}}) != names["run.1"]


def test_the_experiment_id_and_labels_are_on_every_object(write_spec: SpecWriter) -> None:
    _, config_map, rayjob = documents(write_spec, merge(KUBERAY, {"kuberay": {
        "labels": {"team": "rl"}, "annotations": {"karpenter.sh/do-not-disrupt": "true"}}}))
    for meta in (config_map["metadata"], rayjob["metadata"]):
        assert meta["labels"] == {"app.kubernetes.io/managed-by": "acrl", "team": "rl"}
        assert meta["annotations"] == {"acrl/experiment-id": "test-exp", "karpenter.sh/do-not-disrupt": "true"}
    cluster = rayjob["spec"]["rayClusterSpec"]
    for template in (cluster["headGroupSpec"]["template"], cluster["workerGroupSpecs"][0]["template"],
                     rayjob["spec"]["submitterPodTemplate"]):
        assert template["metadata"] == {"labels": {"team": "rl"},
                                        "annotations": {"karpenter.sh/do-not-disrupt": "true"}}


# --- pods -------------------------------------------------------------------------------------------------------------

def test_default_pods_fit_an_eks_gpu_node_group(write_spec: SpecWriter) -> None:
    """The head: 4 CPUs and 16Gi (memory limit = request, /dev/shm sized to it as KubeRay would), no toleration.
    The workers: the node's CPUs and memory, the nvidia.com/gpu taint tolerated, no instance type without [cluster]
    gpu. The submitter: KubeRay's own resources."""
    _, _, rayjob = documents(write_spec, KUBERAY)
    head, worker = pods(rayjob)
    assert head["containers"][0]["resources"] == {"requests": {"cpu": "4", "memory": "16Gi"},
                                                  "limits": {"memory": "16Gi"}}
    assert {v["name"]: v for v in head["volumes"]}["dshm"] == {"name": "dshm",
                                                               "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}}
    assert "tolerations" not in head and "affinity" not in head and "nodeSelector" not in head
    assert worker["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert "affinity" not in worker
    assert {v["name"]: v for v in worker["volumes"]}["dshm"] == {"name": "dshm", "emptyDir": {"medium": "Memory"}}
    submitter = rayjob["spec"]["submitterPodTemplate"]["spec"]
    assert submitter["restartPolicy"] == "Never"
    assert submitter["containers"] == [{"name": "ray-job-submitter", "image": "registry.example/slime:v1",
                                        "resources": {"requests": {"cpu": "500m", "memory": "200Mi"},
                                                      "limits": {"cpu": "1", "memory": "1Gi"}}}]


@pytest.mark.parametrize(("gpu", "gpus", "worker", "expected"), [
    ("H100", 8, {}, ["p5.48xlarge"]),
    ("H200", 8, {}, ["p5e.48xlarge", "p5en.48xlarge"]),
    ("A10G", 4, {}, ["g5.12xlarge", "g5.24xlarge"]),
    ("H20", 8, {}, None),  # no EC2 type has it: no constraint
    ("H100", 8, {"instance_types": []}, None),
    ("H100", 8, {"instance_types": ["p5.48xlarge", "my-type"]}, ["p5.48xlarge", "my-type"]),
    ("H100", 8, {"node_selector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}, None),
])
def test_worker_instance_types(write_spec: SpecWriter, gpu: str, gpus: int, worker: dict[str, Any],
                               expected: list[str] | None) -> None:
    _, _, rayjob = documents(write_spec, merge(KUBERAY, {"cluster": {"gpu": gpu, "gpus_per_node": gpus},
                                                         "parallel": {"tensor": 1},
                                                         "kuberay": {"worker": worker}}))
    _, pod = pods(rayjob)
    terms = pod.get("affinity", {}).get("nodeAffinity", {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    if expected is None:
        assert terms is None
    else:
        assert terms == {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": expected}]}]}


def test_pods_as_the_spec_describes_them(write_spec: SpecWriter) -> None:
    _, _, rayjob = documents(write_spec, merge(KUBERAY, {"kuberay": {
        "head": {"cpu": "8", "memory": "32Gi", "memory_limit": "48Gi", "cpu_limit": "8", "shm_size": "4Gi",
                 "node_selector": {"eks.amazonaws.com/nodegroup": "cpu"},
                 "tolerations": [{"key": "dedicated", "value": "ray", "effect": "NoSchedule"}]},
        "worker": {"cpu": "96", "memory": "1000Gi", "resources": {"vpc.amazonaws.com/efa": "32"},
                   "node_affinity": {"topology.kubernetes.io/zone": ["us-west-2a", "us-west-2b"]},
                   "tolerations": [], "shm_size": "256Gi"},
        "submitter": {"cpu": "1", "memory_limit": "2Gi", "tolerations": [{"operator": "Exists"}]}}}))
    head, worker = pods(rayjob)
    assert head["containers"][0]["resources"] == {"requests": {"cpu": "8", "memory": "32Gi"},
                                                  "limits": {"cpu": "8", "memory": "48Gi"}}
    assert head["nodeSelector"] == {"eks.amazonaws.com/nodegroup": "cpu"}
    assert head["tolerations"] == [{"key": "dedicated", "operator": "Equal", "value": "ray", "effect": "NoSchedule"}]
    assert {v["name"]: v for v in head["volumes"]}["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "4Gi"}
    assert worker["containers"][0]["resources"] == {
        "requests": {"cpu": "96", "memory": "1000Gi", "vpc.amazonaws.com/efa": "32", "nvidia.com/gpu": 8},
        "limits": {"memory": "1000Gi", "vpc.amazonaws.com/efa": "32", "nvidia.com/gpu": 8}}
    assert worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In",
                                                     "values": ["us-west-2a", "us-west-2b"]}]}]}
    assert "tolerations" not in worker  # written empty: the default GPU toleration is replaced
    assert {v["name"]: v for v in worker["volumes"]}["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": "256Gi"}
    submitter = rayjob["spec"]["submitterPodTemplate"]["spec"]
    assert submitter["containers"][0]["resources"] == {"requests": {"cpu": "1", "memory": "200Mi"},
                                                       "limits": {"cpu": "1", "memory": "2Gi"}}
    assert submitter["tolerations"] == [{"operator": "Exists"}]


def test_volumes_are_mounted_on_the_ray_pods(write_spec: SpecWriter) -> None:
    _, _, rayjob = documents(write_spec, merge(KUBERAY, {"kuberay": {"volumes": [
        {"name": "fsx", "mount_path": "/models", "claim": "fsx-lustre", "read_only": True},
        {"name": "scratch", "mount_path": "/data", "host_path": "/mnt/nvme/data"}]}}))
    for pod in pods(rayjob):
        assert pod["containers"][0]["volumeMounts"] == [
            {"name": "acrl-config", "mountPath": "/acrl/config", "readOnly": True},
            {"name": "dshm", "mountPath": "/dev/shm"},
            {"name": "fsx", "mountPath": "/models", "readOnly": True},
            {"name": "scratch", "mountPath": "/data"}]
        assert pod["volumes"][2:] == [
            {"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-lustre", "readOnly": True}},
            {"name": "scratch", "hostPath": {"path": "/mnt/nvme/data", "type": "Directory"}}]
    assert "volumes" not in rayjob["spec"]["submitterPodTemplate"]["spec"]


@pytest.mark.parametrize(("kuberay", "expected"), [
    ({}, {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 3600, "backoffLimit": 0}),
    ({"shutdown_after_job_finishes": False}, {"shutdownAfterJobFinishes": False, "backoffLimit": 0}),
    ({"ttl_seconds_after_finished": 0, "active_deadline_seconds": 86400, "pre_running_deadline_seconds": 900,
      "backoff_limit": 2},
     {"shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 0, "activeDeadlineSeconds": 86400,
      "preRunningDeadlineSeconds": 900, "backoffLimit": 2}),
])
def test_job_settings(write_spec: SpecWriter, kuberay: dict[str, Any], expected: dict[str, Any]) -> None:
    _, _, rayjob = documents(write_spec, merge(KUBERAY, {"kuberay": kuberay}))
    keys = {"shutdownAfterJobFinishes", "ttlSecondsAfterFinished", "activeDeadlineSeconds",
            "preRunningDeadlineSeconds", "backoffLimit"}
    assert {k: v for k, v in rayjob["spec"].items() if k in keys} == expected
    assert "rayVersion" not in rayjob["spec"]["rayClusterSpec"]
    _, _, rayjob = documents(write_spec, merge(KUBERAY, {"kuberay": {"ray_version": "2.49.0"}}))
    assert rayjob["spec"]["rayClusterSpec"]["rayVersion"] == "2.49.0"


def test_cuda_pinning_is_noted_as_train_sh_only(write_spec: SpecWriter) -> None:
    bundle = compile_spec(write_spec({**KUBERAY, "cuda": {"home": "/usr/local/cuda-12.9"}}), target="kuberay")
    assert any(note.startswith("[cuda] home is applied by train.sh only") for note in bundle.notes)
    assert "cuda-12.9" not in bundle.files["rayjob.yaml"].decode()


@pytest.mark.parametrize("text", ["a\x85b", "a\u2028b", "a\rb"])
def test_a_line_break_yaml_folds_reads_back_as_written(text: str, write_spec: SpecWriter) -> None:
    """YAML 1.1's other line breaks (U+0085, U+2028, \\r) in a spec value survive custom_config.yaml and rayjob.yaml
    (PyYAML wrote them raw and read U+0085 back as a space; found by tests/test_hostile_values.py). A name or a path
    refuses them now (compiler/_pipeline/values.py); [extra] args may hold them, and the writers keep them for any
    value of a spec built otherwise."""
    with pytest.raises(SpecError):
        documents(write_spec, {**KUBERAY, "agentcore": {"model_id": text}})
    bundle, _, rayjob = documents(write_spec, {**KUBERAY, "extra": {"args": ["--x-flag", f"/models/{text}"]}})
    assert f"/models/{text}" in rayjob["spec"]["entrypoint"]
    assert bundle.spec.agentcore is not None
    spec = attrs.evolve(bundle.spec, agentcore=attrs.evolve(bundle.spec.agentcore, model_id=text))
    config = custom_config_yaml(spec)
    assert config is not None and yaml.safe_load(config)["model_id"] == text
    config_map, _ = yaml.safe_load_all(rayjob_yaml(spec, bundle.argv(), config))
    assert yaml.safe_load(next(iter(config_map["data"].values())))["model_id"] == text


def test_hostile_strings_in_the_kuberay_tables_read_back_verbatim(write_spec: SpecWriter) -> None:
    """The strings of [kuberay] no rule restricts to a syntax (annotation values, a host path) may hold
    anything: PyYAML quotes them, rayjob.yaml keeps two documents, and each reads back as written (the property test
    of tests/test_hostile_values.py covers [kuberay]'s own keys; this one the tables inside it)."""
    text = "x\n---\napiVersion: v1\nkind: Secret\n# $(touch MARKER) `id` '\" \u2028\x85 {{a}}"
    _, _, rayjob = documents(write_spec, merge(KUBERAY, {"kuberay": {
        "annotations": {"note": text},
        "volumes": [{"name": "models", "mount_path": "/models", "host_path": f"/mnt/{text}"},
                    {"name": "data", "mount_path": "/data", "claim": "d"}]}}))
    head, worker = pods(rayjob)
    for pod in (head, worker):
        assert pod["volumes"][2] == {"name": "models", "hostPath": {"path": f"/mnt/{text}", "type": "Directory"}}
    assert rayjob["metadata"]["annotations"]["note"] == text
    assert rayjob["spec"]["submitterPodTemplate"]["metadata"]["annotations"]["note"] == text
