"""`acrl-compile --target kuberay`: rayjob.yaml holds a ConfigMap with the custom config and a
KubeRay RayJob (ray.io/v1) whose fields are KubeRay's (ray-operator/apis/ray/v1 rayjob_types.go,
raycluster_types.go), sized from the spec, running the same slime command, with secrets only as
references to a Kubernetes Secret."""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path
from typing import Any

import attrs
import pytest
import yaml

from acrl.compiler import compile_spec
from acrl.compiler._pipeline.compile import compile_source
from acrl.compiler._pipeline.kuberay import k8s_name, rayjob_yaml
from acrl.compiler._pipeline.parse import read_spec
from acrl.compiler._pipeline.render import custom_config_yaml
from acrl.compiler.errors import SpecError
from conftest import NO_FACTS, SpecWriter, merge

# json tags of KubeRay's v1 Go types (the subset a RayJob may carry that acrl could write)
RAYJOB_SPEC_FIELDS = {"entrypoint", "runtimeEnvYAML", "jobId", "submissionMode", "shutdownAfterJobFinishes",
                      "ttlSecondsAfterFinished", "activeDeadlineSeconds", "rayClusterSpec", "clusterSelector",
                      "metadata", "entrypointNumCpus", "entrypointNumGpus", "entrypointResources", "suspend",
                      "backoffLimit", "submitterPodTemplate", "submitterConfig", "managedBy", "deletionStrategy"}
RAYCLUSTER_SPEC_FIELDS = {"headGroupSpec", "workerGroupSpecs", "rayVersion", "enableInTreeAutoscaling",
                          "autoscalerOptions", "headServiceAnnotations", "suspend", "managedBy",
                          "gcsFaultToleranceOptions"}
HEAD_GROUP_FIELDS = {"rayStartParams", "template", "serviceType", "headService", "enableIngress", "suspend"}
WORKER_GROUP_FIELDS = {"groupName", "replicas", "minReplicas", "maxReplicas", "rayStartParams", "template",
                       "numOfHosts", "scaleStrategy", "idleTimeoutSeconds", "suspend"}

KUBERAY = {"kuberay": {"image": "registry.example/slime:v1", "secret": "team-secrets"},
           "wandb": {"project": "my project", "key_env": "MY_WANDB_KEY"},
           "env": {"vars": {"NCCL_DEBUG": "WARN"}, "forward": ["WANDB_ENTITY", "TEAM_NAME"]},
           "extra": {"args": ["--x-flag", "a value; $(rm -rf /)"]}, "slime": {"commit": NO_FACTS}}


def documents(write_spec: SpecWriter, overrides: dict[str, Any]) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    bundle = compile_spec(write_spec(overrides), target="kuberay")
    config_map, rayjob = yaml.safe_load_all(bundle.files["rayjob.yaml"])
    return bundle, config_map, rayjob


def test_rayjob_fields_are_kuberays(write_spec: SpecWriter) -> None:
    _, _, rayjob = documents(write_spec, KUBERAY)
    assert rayjob["apiVersion"] == "ray.io/v1" and rayjob["kind"] == "RayJob"
    spec = rayjob["spec"]
    assert set(spec) <= RAYJOB_SPEC_FIELDS
    cluster = spec["rayClusterSpec"]
    assert set(cluster) <= RAYCLUSTER_SPEC_FIELDS
    assert set(cluster["headGroupSpec"]) <= HEAD_GROUP_FIELDS
    for group in cluster["workerGroupSpecs"]:
        assert set(group) <= WORKER_GROUP_FIELDS
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        # rayStartParams is map[string]string in KubeRay: a number is rejected by the API server
        assert all(isinstance(v, str) for v in group["rayStartParams"].values())
        assert group["template"]["spec"]["containers"][0]["image"] == "registry.example/slime:v1"
    assert yaml.safe_load(spec["runtimeEnvYAML"])["env_vars"] == {
        "PYTHONPATH": "/root/Megatron-LM", "CUDA_DEVICE_MAX_CONNECTIONS": "1", "NCCL_DEBUG": "WARN"}
    assert rayjob["metadata"]["name"] == "test-exp"


@pytest.mark.parametrize(("cluster", "replicas"), [
    ({"num_nodes": 2, "gpus_per_node": 4}, 2),
    ({"num_nodes": 3, "gpus_per_node": 8, "actor_num_nodes": 1, "colocate": False, "rollout_num_gpus": 16}, 3),
    # not given: the fewest nodes that hold slime's placement group (8 actor + 12 rollout GPUs)
    ({"gpus_per_node": 8, "colocate": False, "rollout_num_gpus": 12, "address": "http://head:8265"}, 3),
    # the RayJob's cluster is made for the job: no local head to be one node, the fewest nodes that hold 8 + 8
    ({"gpus_per_node": 8, "colocate": False, "rollout_num_gpus": 8}, 2),
])
def test_worker_group_is_sized_from_nodes_and_gpus(write_spec: SpecWriter, cluster: dict[str, Any],
                                                  replicas: int) -> None:
    bundle, _, rayjob = documents(write_spec, {**KUBERAY, "cluster": cluster})
    assert json.loads(bundle.files["manifest.json"])["derived"]["nodes"] == replicas
    [workers] = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"]
    gpus = cluster["gpus_per_node"]
    assert (workers["replicas"], workers["minReplicas"], workers["maxReplicas"]) == (replicas, replicas, replicas)
    assert workers["rayStartParams"]["num-gpus"] == str(gpus)
    assert workers["template"]["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": gpus}
    head = rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]
    assert head["rayStartParams"]["num-gpus"] == "0"


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


def test_secrets_are_references_to_the_secret_never_values(write_spec: SpecWriter,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_WANDB_KEY", "wandb-secret-value")
    monkeypatch.setenv("TEAM_NAME", "team-secret-value")
    bundle, _, rayjob = documents(write_spec, KUBERAY)
    text = bundle.files["rayjob.yaml"].decode()
    assert "secret-value" not in text
    cluster = rayjob["spec"]["rayClusterSpec"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        env = group["template"]["spec"]["containers"][0]["env"]
        assert all(set(entry) == {"name", "valueFrom"} for entry in env)  # no inline "value"
        refs = {entry["name"]: entry["valueFrom"]["secretKeyRef"] for entry in env}
        assert set(refs) >= {"MY_WANDB_KEY", "WANDB_ENTITY", "TEAM_NAME", "AWS_ACCESS_KEY_ID",
                             "AWS_SECRET_ACCESS_KEY"}
        assert {ref["name"] for ref in refs.values()} == {"team-secrets"}
        assert all(ref["key"] == name for name, ref in refs.items())


def test_namespace_and_irsa_service_account(write_spec: SpecWriter) -> None:
    """A namespace goes on both documents; a service account (IRSA) on every pod, and then no AWS keys are
    referenced from the Secret: they would win over the role in boto3's credential chain."""
    _, config_map, rayjob = documents(write_spec, merge(KUBERAY, {"kuberay": {
        "namespace": "rl-team", "service_account": "slime-irsa"}}))
    assert config_map["metadata"]["namespace"] == rayjob["metadata"]["namespace"] == "rl-team"
    cluster = rayjob["spec"]["rayClusterSpec"]
    for group in [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]:
        pod = group["template"]["spec"]
        assert pod["serviceAccountName"] == "slime-irsa"
        names = {entry["name"] for entry in pod["containers"][0]["env"]}
        assert "MY_WANDB_KEY" in names and not {n for n in names if n.startswith("AWS_")}
    _, config_map, rayjob = documents(write_spec, KUBERAY)
    assert "namespace" not in config_map["metadata"] and "namespace" not in rayjob["metadata"]
    assert "serviceAccountName" not in rayjob["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]


@pytest.mark.parametrize(("key", "value"), [("namespace", "RL_Team"), ("namespace", "a" * 64),
                                            ("service_account", "-irsa"), ("secret", "my secrets")])
def test_kubernetes_names_are_checked_at_compile_time(write_spec: SpecWriter, key: str, value: str) -> None:
    with pytest.raises(SpecError) as failed:
        compile_spec(write_spec(merge(KUBERAY, {"kuberay": {key: value}})), target="kuberay")
    (diagnostic,) = [d for d in failed.value.diagnostics if d.severity == "error"]  # KUBERAY's flag: ACRL-F008's
    assert diagnostic.rule == "ACRL-K001" and diagnostic.key == f"kuberay.{key}" and diagnostic.line is not None
    assert "is not a Kubernetes name" in diagnostic.message


def test_kuberay_target_needs_an_image(write_spec: SpecWriter) -> None:
    path = write_spec()
    with pytest.raises(SpecError) as failed:
        compile_source(read_spec(path), target="kuberay")
    (diagnostic,) = failed.value.diagnostics
    assert (diagnostic.key, diagnostic.file, diagnostic.severity) == ("kuberay.image", str(path), "error")
    assert diagnostic.hint
    assert "rayjob.yaml" not in compile_spec(path).files  # the default target is unchanged


def test_cli_writes_rayjob_yaml(write_spec: SpecWriter, tmp_path: Path) -> None:
    from acrl.compiler._cli.main import compile_main

    path = write_spec(KUBERAY)
    assert compile_main([str(path), "-o", str(tmp_path / "b"), "--target", "kuberay", "--no-cache"]) == 0
    assert (tmp_path / "b" / "rayjob.yaml").is_file()
    assert compile_main([str(path), "-o", str(tmp_path / "b"), "--target", "kuberay", "--check"]) == 0
    assert compile_main([str(path), "-o", str(tmp_path / "c")]) == 0  # cached or not: the default target
    assert not (tmp_path / "c" / "rayjob.yaml").exists()


@pytest.mark.parametrize(("exp_id", "name"), [
    ("test-exp", "test-exp"), ("My_Exp.v2", "my-exp-v2"), ("7b-run", "acrl-7b-run"), ("_x_", "x"),
    ("a" * 80, "a" * 50),
])
def test_names_are_dns_labels(exp_id: str, name: str) -> None:
    assert k8s_name(exp_id) == name


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
