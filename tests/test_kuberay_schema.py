"""Every generated RayJob is valid for KubeRay's real RayJob CRD, and its ConfigMap and pod templates for Kubernetes'
own schemas: the CRD's openAPIV3Schema at KubeRay v1.7.0 as a JSON Schema with unknown fields refused
(tests/data/kuberay/rayjob.schema.json, made by tests/data/kuberay/regenerate.py), and kubernetes-validate's strict
schemas of Kubernetes 1.30 and 1.33 (bundled with the package: no network). The negative cases show both refuse what
they should: an unknown field, a bad quantity, a secret reference without its key, a misspelled pod field."""

from __future__ import annotations

import copy
import importlib.machinery
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from test_kuberay import KUBERAY
from test_kuberay_docs import DOC, example_spec

from acrl.compiler import compile_spec
from conftest import REPO, SpecWriter, merge

kubernetes_validate = pytest.importorskip("kubernetes_validate",
                                          reason="needs kubernetes-validate: pip install -e '.[test]'")

DATA = REPO / "tests" / "data" / "kuberay"
SCHEMA = json.loads((DATA / "rayjob.schema.json").read_text(encoding="utf-8"))
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
KUBERNETES = ("1.30", "1.33")

EVERY_KEY = {"kuberay": {
    "namespace": "rl", "service_account": "acrl-runner", "secret": "team-secrets",
    "secrets": {"MY_WANDB_KEY": "optional", "WANDB_ENTITY": "required"},
    "labels": {"team": "rl", "example.com/cost-center": "ml-42"},
    "annotations": {"karpenter.sh/do-not-disrupt": "true", "note": "multi\nline: text"},
    "volumes": [{"name": "models", "mount_path": "/models", "claim": "fsx-claim", "read_only": True},
                {"name": "data", "mount_path": "/data", "host_path": "/mnt/nvme/data"},
                {"name": "ckpt", "mount_path": "/ckpt", "claim": "efs-claim"}],
    "image_paths": ["/opt/extra"], "ray_version": "2.49.0", "ttl_seconds_after_finished": 600,
    "active_deadline_seconds": 86400, "pre_running_deadline_seconds": 1800, "backoff_limit": 1,
    "head": {"cpu": "8", "memory": "32Gi", "cpu_limit": "8", "memory_limit": "32Gi", "shm_size": "8Gi",
             "resources": {"ephemeral-storage": "50Gi"}, "node_selector": {"eks.amazonaws.com/nodegroup": "cpu"},
             "node_affinity": {"topology.kubernetes.io/zone": ["us-west-2a"]},
             "tolerations": [{"key": "dedicated", "value": "ray", "effect": "NoSchedule"}]},
    "worker": {"cpu": "96", "memory": "1Ti", "resources": {"vpc.amazonaws.com/efa": "32", "hugepages-2Mi": "4Gi"},
               "node_affinity": {"topology.kubernetes.io/zone": ["us-west-2a"]}, "shm_size": "512Gi",
               "instance_types": ["p5.48xlarge"],
               "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                               {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoExecute",
                                "toleration_seconds": 120}]},
    "submitter": {"cpu": "250m", "memory": "256Mi", "cpu_limit": "1", "memory_limit": "512Mi",
                  "node_selector": {"eks.amazonaws.com/nodegroup": "cpu"}, "tolerations": [{"operator": "Exists"}]}},
    "checkpoint": {"save": "/ckpt/run", "save_hf": "/ckpt/hf/iter_{rollout_id}"}, "cluster": {"gpu": "H100"}}
PD = {"experiment": {"integration": "slime"}, "cluster": {"colocate": False, "num_nodes": 2, "rollout_num_gpus": 8},
      "sglang": {"models": {"default": {"server_groups": [{"worker_type": "prefill", "num_gpus": 4},
                                                          {"worker_type": "decode", "num_gpus": 4}]}}},
      "slime": {"commit": "624b824a898ab0ec1fcb4d373004c7f3852bf515"}, "extra": None}
CASES = {"default": {}, "every-key": EVERY_KEY, "pd-slime": PD,
         "async-irsa": {"train": {"mode": "async"}, "cluster": {"colocate": False, "rollout_num_gpus": 8},
                        "kuberay": {"service_account": "irsa", "shutdown_after_job_finishes": False}}}


def generated(write_spec: SpecWriter, case: str) -> list[dict[str, Any]]:
    if case == "docs":
        path = write_spec(text=example_spec(DOC.read_text(encoding="utf-8")))
    else:
        data = merge(KUBERAY, CASES[case])
        if case == "pd-slime":
            data = {**data, "agentcore": None}
        path = write_spec(data)
    return list(yaml.safe_load_all(compile_spec(path, target="kuberay").files["rayjob.yaml"]))


def rayjob_errors(document: dict[str, Any]) -> list[str]:
    return [f"{e.json_path}: {e.message[:200]}" for e in VALIDATOR.iter_errors(document)]


def templates(rayjob: dict[str, Any]) -> dict[str, dict[str, Any]]:
    cluster = rayjob["spec"]["rayClusterSpec"]
    return {"head": cluster["headGroupSpec"]["template"],
            **{f"worker {g['groupName']}": g["template"] for g in cluster["workerGroupSpecs"]},
            "submitter": rayjob["spec"]["submitterPodTemplate"]}


def as_pod_template(template: dict[str, Any]) -> dict[str, Any]:
    """A pod template as Kubernetes' core/v1 PodTemplate, whose ``template`` is a PodTemplateSpec."""
    return {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "acrl-check"}, "template": template}


@pytest.mark.parametrize("case", ["docs", *CASES])
def test_every_generated_document_is_valid(case: str, write_spec: SpecWriter) -> None:
    documents = generated(write_spec, case)
    *config, rayjob = documents
    assert rayjob_errors(rayjob) == []
    assert (rayjob["apiVersion"], rayjob["kind"]) == ("ray.io/v1", "RayJob")
    for version in KUBERNETES:
        for document in config:
            assert kubernetes_validate.validate(document, version, strict=True) == version
        for name, template in templates(rayjob).items():
            assert kubernetes_validate.validate(as_pod_template(template), version, strict=True) == version, name
    assert [d["kind"] for d in config] == ["ConfigMap"]  # the custom config, or PD's sglang config


def test_acrl_writes_none_of_the_fields_the_crds_cel_rules_constrain(write_spec: SpecWriter) -> None:
    """jsonschema cannot run the CRD's x-kubernetes-validations (CEL): regenerate.py lists them, and acrl writes none
    of the fields they are on."""
    dropped = SCHEMA["x-acrl-dropped-validations"]
    assert {d["pointer"].split("/properties/")[-1] for d in dropped} == {
        "condition", "deletionStrategy", "managedBy", "backend"}
    for case in ["docs", *CASES]:
        text = json.dumps(generated(write_spec, case))
        assert not [field for field in ('"deletionStrategy"', '"managedBy"', '"gcsFaultToleranceOptions"')
                    if field in text]


@pytest.mark.parametrize(("where", "change", "expected"), [
    # an unknown field: the API server prunes or refuses it (here: refused)
    ("spec", lambda s: s.update(submitterConfigs={}), "Additional properties are not allowed"),
    ("head container", lambda c: c["resources"]["requests"].update(cpu="lots"), "does not match"),
    ("head container", lambda c: c["env"][0]["valueFrom"]["secretKeyRef"].pop("key"), "'key' is a required"),
    ("worker group", lambda g: g["rayStartParams"].update({"num-gpus": 8}), "is not of type 'string'"),
    ("worker group", lambda g: g.update(replicas=2 ** 31), "is greater than the maximum"),
])
def test_the_crd_schema_refuses_what_kuberay_refuses(where: str, change: Any, expected: str,
                                                      write_spec: SpecWriter) -> None:
    rayjob = copy.deepcopy(generated(write_spec, "default")[-1])
    cluster = rayjob["spec"]["rayClusterSpec"]
    target = {"spec": rayjob["spec"], "head container": cluster["headGroupSpec"]["template"]["spec"]["containers"][0],
              "worker group": cluster["workerGroupSpecs"][0]}[where]
    change(target)
    errors = rayjob_errors(rayjob)
    assert len(errors) == 1 and expected in errors[0], errors


@pytest.mark.parametrize("change", [
    lambda p: p["spec"].update(toleration=p["spec"].pop("tolerations")),  # misspelled
    lambda p: p["spec"]["containers"][0].pop("name"),
    lambda p: p["spec"]["containers"][0]["env"][0]["valueFrom"]["secretKeyRef"].pop("key"),
])
@pytest.mark.parametrize("version", KUBERNETES)
def test_kubernetes_schemas_refuse_a_bad_pod_template(change: Any, version: str, write_spec: SpecWriter) -> None:
    worker = copy.deepcopy(templates(generated(write_spec, "default")[-1])["worker gpu"])
    change(worker)
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(as_pod_template(worker), version, strict=True)


# --- the stand-in kubectl's answers (tests/shims/kubectl) -----------------------------------------------------------

# KubeRay v1.7.0's values for a RayJob's status fields (ray-operator/apis/ray/v1/rayjob_types.go at 59d663a): JobStatus
# :18-23, JobDeploymentStatus :49-58, JobFailedReason :71-77. The CRD's schema types them as plain strings.
JOB_STATUSES = {"", "PENDING", "RUNNING", "STOPPED", "SUCCEEDED", "FAILED"}
DEPLOYMENT_STATUSES = {"", "Initializing", "Running", "Complete", "Failed", "ValidationFailed", "Suspending",
                       "Suspended", "Retrying", "Waiting"}
FAILED_REASONS = {"SubmissionFailed", "DeadlineExceeded", "PreRunningDeadlineExceeded", "AppFailed",
                  "JobDeploymentStatusTransitionGracePeriodExceeded", "JobStatusCheckTimeoutExceeded",
                  "ValidationFailed"}
STATUSES = json.loads((DATA / "rayjob_status.json").read_text(encoding="utf-8"))


def shim_module() -> Any:
    """tests/shims/kubectl (a script without .py) as a module, for the documents it answers with."""
    loader = importlib.machinery.SourceFileLoader("kubectl_shim", str(REPO / "tests" / "shims" / "kubectl"))
    spec = importlib.util.spec_from_loader("kubectl_shim", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


@pytest.mark.parametrize("state", [k for k in STATUSES if not k.startswith("_")])
def test_the_stand_in_answers_with_rayjobs_the_crd_accepts(state: str, write_spec: SpecWriter) -> None:
    """What the stand-in kubectl answers to `get rayjob NAME -o json`, the applied RayJob with a status from
    tests/data/kuberay/rayjob_status.json, is valid for KubeRay's CRD, status included (unknown fields refused), and
    its enum-like fields hold values KubeRay defines: the tests of acrl run read documents KubeRay could write."""
    shim = shim_module()
    applied = generated(write_spec, "default")[-1]
    name = applied["metadata"]["name"]
    document = shim.rayjob_document(applied, shim.status_named(state, name, "rl"), "rl")
    assert rayjob_errors(document) == []
    status = document["status"]
    assert status.get("jobStatus", "") in JOB_STATUSES
    assert status.get("jobDeploymentStatus", "") in DEPLOYMENT_STATUSES
    assert status.get("reason", "SubmissionFailed") in FAILED_REASONS
    assert "$NAME" not in json.dumps(document)
    # GenerateRayJobId: NAME-5 random characters (ray-operator/controllers/ray/utils/util.go:374-376)
    if status.get("jobId"):
        assert status["jobId"].startswith(f"{name}-") and len(status["jobId"]) == len(name) + 6


def test_a_status_with_a_field_kuberay_does_not_write_is_refused(write_spec: SpecWriter) -> None:
    """The check above can fail: a misspelled status field is refused by the CRD's schema."""
    shim = shim_module()
    applied = generated(write_spec, "default")[-1]
    status = {**shim.status_named("running", applied["metadata"]["name"], "rl"), "jobDeploymentState": "Running"}
    assert any("jobDeploymentState" in e for e in rayjob_errors(shim.rayjob_document(applied, status, "rl")))


# --- the schema file and its generator -----------------------------------------------------------------------------

def regenerate_module() -> Any:
    spec = importlib.util.spec_from_file_location("kuberay_regenerate", DATA / "regenerate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_schema_records_its_kuberay_release() -> None:
    assert SCHEMA["x-kuberay-version"] == "v1.7.0"
    assert SCHEMA["x-kuberay-commit"] == "59d663aeec13760646da3db9c1cf8cfe883e30b7"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_regenerate_converts_an_openapi_schema_faithfully() -> None:
    crd = {"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {
            "count": {"type": "integer", "format": "int32"},
            "size": {"anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^[0-9]+$",
                     "x-kubernetes-int-or-string": True},
            "note": {"type": "string", "nullable": True},
            "free": {"type": "object", "properties": {"a": {"type": "string"}},
                     "x-kubernetes-preserve-unknown-fields": True},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "mode": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "m"}]},
        }, "required": ["count"]}}}}}]}}
    module = regenerate_module()
    out = module.schema(yaml.safe_dump(crd), "v0.0.0", "0" * 40)
    spec = out["properties"]["spec"]
    assert out["additionalProperties"] is False and spec["additionalProperties"] is False
    assert spec["properties"]["count"]["maximum"] == 2 ** 31 - 1 and spec["required"] == ["count"]
    assert spec["properties"]["note"]["type"] == ["string", "null"]
    assert "additionalProperties" not in spec["properties"]["free"]  # it keeps unknown fields
    assert spec["properties"]["labels"]["additionalProperties"] == {"type": "string"}
    assert out["x-acrl-dropped-validations"] == [{"pointer": "/properties/spec/properties/mode",
                                                  "rule": "self == oldSelf", "message": "m"}]
    validator = jsonschema.Draft202012Validator(out)
    assert not list(validator.iter_errors({"spec": {"count": 1, "size": "12", "note": None, "free": {"x": 1}}}))
    assert len(list(validator.iter_errors({"spec": {"count": 2 ** 31, "size": "1x", "extra": 1}}))) == 3


@pytest.mark.upstream("ACRL_KUBERAY_DIR")
def test_the_committed_schema_is_what_regenerate_makes() -> None:
    module = regenerate_module()
    text, commit = module.read_crd(Path(os.environ["ACRL_KUBERAY_DIR"]), SCHEMA["x-kuberay-version"])
    assert commit == SCHEMA["x-kuberay-commit"]
    assert module.schema(text, SCHEMA["x-kuberay-version"], commit) == SCHEMA
