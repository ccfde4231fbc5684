"""The ACRL-K rules: each fires, with --target kuberay, on the mistake it describes and points at the key that made
it; a valid [kuberay] table compiles without them; the rules about the job itself (paths, CPUs, nodes, size) stay
quiet with the default target, where [kuberay] is not used."""

from __future__ import annotations

import json
import re
import subprocess
from typing import Any

import pytest
import yaml
from test_kuberay import KUBERAY

from acrl.compiler import RULES, SpecError, compile_spec
from acrl.compiler._pipeline.kuberay import SUBMITTER_ARG_MAX, submitter_argument_bytes
from conftest import SpecWriter, merge

K = "kuberay"
NO_VOLUMES: dict[str, Any] = {K: {"volumes": []}}
VOLUMES: list[dict[str, Any]] = KUBERAY[K]["volumes"]  # claims holding the model and data
SCRATCH = {"name": "scratch", "mount_path": "/scratch", "host_path": "/mnt/scratch"}  # each node's own disk


def volumes(*tables: dict[str, Any]) -> dict[str, Any]:
    """[kuberay] with these volumes, the model and data held by the image (so that ACRL-K006 stays quiet)."""
    return {K: {"volumes": list(tables), "image_paths": ["/models", "/data"]}}


# rule id -> (overrides of test_kuberay.KUBERAY, the key the finding points at)
TRIGGERS: dict[str, list[tuple[dict[str, Any], str | list[str]]]] = {
    "ACRL-K001": [({K: {"namespace": "RL_Team"}}, "kuberay.namespace"),
                  ({K: {"image": "registry.example/slime :v1"}}, "kuberay.image"),  # a line break: every name's error
                  ({K: {"namespace": "a" * 64}}, "kuberay.namespace"),
                  ({K: {"service_account": "-irsa"}}, "kuberay.service_account"),
                  ({K: {"secret": "team secrets"}}, "kuberay.secret"),
                  (volumes({"name": "Models", "mount_path": "/m", "claim": "m"}),
                   "kuberay.volumes.0.name"),
                  (volumes({"name": "m", "mount_path": "/m", "claim": "M_1"}),
                   "kuberay.volumes.0.claim"),
                  (volumes({"name": "dshm", "mount_path": "/m", "claim": "m"}),
                   "kuberay.volumes.0.name")],
    "ACRL-K002": [({K: {"head": {"cpu": "lots"}}}, "kuberay.head.cpu"),
                  ({K: {"worker": {"memory": "-1Gi"}}}, "kuberay.worker.memory"),
                  ({K: {"worker": {"memory": "0"}}}, "kuberay.worker.memory"),
                  ({K: {"head": {"memory": "32Gi", "memory_limit": "16Gi"}}}, "kuberay.head.memory"),
                  ({K: {"head": {"cpu": "2", "cpu_limit": "1500m"}}}, "kuberay.head.cpu"),
                  ({K: {"submitter": {"cpu_limit": "1x"}}}, "kuberay.submitter.cpu_limit"),
                  ({K: {"worker": {"shm_size": "big"}}}, "kuberay.worker.shm_size"),
                  ({K: {"worker": {"resources": {"nvidia.com/gpu": "8"}}}}, "kuberay.worker.resources.nvidia.com/gpu"),
                  ({K: {"worker": {"resources": {"cpu": "8"}}}}, "kuberay.worker.resources.cpu"),
                  ({K: {"worker": {"resources": {"efa": "1"}}}}, "kuberay.worker.resources.efa"),
                  ({K: {"worker": {"resources": {"vpc.amazonaws.com/efa": "lots"}}}},
                   "kuberay.worker.resources.vpc.amazonaws.com/efa")],
    "ACRL-K003": [({K: {"labels": {"ray.io/cluster": "x"}}}, "kuberay.labels.ray.io/cluster"),
                  ({K: {"labels": {"app.kubernetes.io/managed-by": "me"}}},
                   "kuberay.labels.app.kubernetes.io/managed-by"),
                  ({K: {"labels": {"team": "rl team"}}}, "kuberay.labels.team"),
                  ({K: {"labels": {"team": "x" * 64}}}, "kuberay.labels.team"),
                  ({K: {"labels": {"Team_/x": "a"}}}, "kuberay.labels.Team_/x"),
                  ({K: {"annotations": {"example.com/api-token": "t"}}}, "kuberay.annotations.example.com/api-token"),
                  ({K: {"annotations": {"-x": "t"}}}, "kuberay.annotations.-x"),
                  ({K: {"annotations": {"acrl/experiment-id": "other"}}}, "kuberay.annotations.acrl/experiment-id"),
                  ({K: {"worker": {"node_selector": {"pool": "gpu nodes"}}}}, "kuberay.worker.node_selector.pool"),
                  ({K: {"head": {"node_affinity": {"zone": []}}}}, "kuberay.head.node_affinity.zone"),
                  ({K: {"worker": {"instance_types": ["p5 48xlarge"]}}}, "kuberay.worker.instance_types.0"),
                  ({K: {"worker": {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}}},
                   "kuberay.worker.tolerations.0.value"),
                  ({K: {"head": {"tolerations": [{"value": "v"}]}}}, "kuberay.head.tolerations.0"),
                  ({K: {"submitter": {"tolerations": [{"key": "k", "toleration_seconds": 60}]}}},
                   "kuberay.submitter.tolerations.0.toleration_seconds"),
                  ({K: {"worker": {"tolerations": [{"key": "bad key"}]}}}, "kuberay.worker.tolerations.0.key")],
    "ACRL-K004": [({K: {"secrets": {"HF_HOME": "required"}}}, "kuberay.secrets.HF_HOME"),
                  ({"cluster": {"env": {"TEAM_NAME": "rl"}}}, "cluster.env.TEAM_NAME"),
                  ({K: {"service_account": "irsa", "secrets": {"AWS_ACCESS_KEY_ID": "optional"}}},
                   "kuberay.secrets.AWS_ACCESS_KEY_ID")],
    "ACRL-K005": [(volumes({"name": "m", "mount_path": "/m"}), "kuberay.volumes.0.name"),
                  (volumes({"name": "m", "mount_path": "/m", "claim": "c", "host_path": "/m"}),
                   "kuberay.volumes.0.name"),
                  (volumes({"name": "m", "mount_path": "m", "claim": "c"}), "kuberay.volumes.0.mount_path"),
                  (volumes({"name": "m", "mount_path": "/a/../m", "claim": "c"}), "kuberay.volumes.0.mount_path"),
                  (volumes({"name": "m", "mount_path": "/dev/shm", "claim": "c"}), "kuberay.volumes.0.mount_path"),
                  (volumes({"name": "m", "mount_path": "/acrl", "claim": "c"}), "kuberay.volumes.0.mount_path"),
                  (volumes({"name": "m", "mount_path": "/m", "claim": "c"}, {"name": "n", "mount_path": "/m",
                                                                              "claim": "d"}),
                   "kuberay.volumes.1.mount_path"),
                  (volumes({"name": "m", "mount_path": "/m", "host_path": "mnt/m"}), "kuberay.volumes.0.host_path"),
                  ({K: {"image_paths": ["opt/models"]}}, "kuberay.image_paths.0")],
    "ACRL-K006": [(NO_VOLUMES, ["model.dir", "data.path"]),
                  ({"data": {"path": "train.jsonl"}}, "data.path"),
                  ({"eval": {"interval": 5, "datasets": {"aime": "/eval/aime.jsonl"}}}, "eval.datasets.aime"),
                  ({"checkpoint": {"save": "/models/ckpt"},
                    K: {"volumes": [{"name": "models", "mount_path": "/models", "claim": "m", "read_only": True},
                                    {"name": "data", "mount_path": "/data", "claim": "d"}]}}, "checkpoint.save"),
                  ({"checkpoint": {"save_hf": "/opt/hf/iter_{rollout_id}"}, K: {"image_paths": ["/opt"]}},
                   "checkpoint.save_hf"),
                  ({"checkpoint": {"save": "/data/ckpt", "load": "/base/iter"}}, "checkpoint.load")],
    "ACRL-K007": [({K: {"shutdown_after_job_finishes": False, "ttl_seconds_after_finished": 60}},
                   "kuberay.ttl_seconds_after_finished"),
                  ({K: {"ray_version": "latest"}}, "kuberay.ray_version"),
                  ({K: {"active_deadline_seconds": 2 ** 31}}, "kuberay.active_deadline_seconds")],
    "ACRL-K008": [({K: {"worker": {"cpu": "4"}}}, "kuberay.worker.cpu"),
                  ({K: {"worker": {"cpu": "4", "cpu_limit": "6500m"}}}, "kuberay.worker.cpu"),
                  ({K: {"head": {"cpu": "1"}, "worker": {"cpu": "8"}}}, "kuberay.worker.cpu")],
    "ACRL-K009": [({K: {"worker": {"instance_types": ["g5.xlarge"]}}}, "kuberay.worker.instance_types.0"),
                  ({"cluster": {"gpu": "H100"}, K: {"worker": {"node_selector": {
                      "node.kubernetes.io/instance-type": "p4de.24xlarge"}}}},
                   "kuberay.worker.node_selector.node.kubernetes.io/instance-type")],
    # 19 values of 16,000 characters: no string may be longer than 16,384 (compiler/_spec/setting.py: MAX_STRING)
    "ACRL-K010": [({"env": {"vars": {f"BIG{i}": "x" * 16_000 for i in range(19)}}}, ["kuberay", "kuberay"])],
    "ACRL-K011": [({"cluster": {"num_nodes": 2}, "checkpoint": {"save": "/data/ckpt"},
                    K: {"volumes": [{"name": "models", "mount_path": "/models", "claim": "m"},
                                    {"name": "data", "mount_path": "/data", "host_path": "/mnt/data"}]}},
                   "checkpoint.save"),
                  ({K: {"head": {"shm_size": "32Gi"}}}, "kuberay.head.shm_size"),
                  ({"checkpoint": {"save": "/data/ckpt", "resume": "never"}, K: {"backoff_limit": 2}},
                   "kuberay.backoff_limit"),
                  ({"checkpoint": {"save": "/scratch/ckpt"}, K: {"volumes": [*VOLUMES, SCRATCH]}}, "checkpoint.save")],
    "ACRL-K012": [({"checkpoint": {"save": "/data/ckpt", "load": "/scratch/base"}, K: {"volumes": [*VOLUMES, SCRATCH]}},
                   "checkpoint.load"),
                  ({"checkpoint": {"save": "/scratch/ckpt", "ckpt_step": 100}, "experiment": {"num_rollout": 200},
                    K: {"volumes": [*VOLUMES, SCRATCH]}}, ["checkpoint.ckpt_step"]),
                  ({"checkpoint": {"save": "/scratch/ckpt", "resume": "required"}, K: {"volumes": [*VOLUMES, SCRATCH]}},
                   "checkpoint.resume")],
}
JOB_RULES = ("ACRL-K006", "ACRL-K008", "ACRL-K009", "ACRL-K010", "ACRL-K011", "ACRL-K012")  # --target kuberay only


def compile_kuberay(write_spec: SpecWriter, overrides: dict[str, Any], target: str = "kuberay") -> Any:
    return compile_spec(write_spec(merge(KUBERAY, overrides)), target=target)  # type: ignore[arg-type]


def test_every_k_rule_has_a_trigger() -> None:
    assert sorted(TRIGGERS) == sorted(r.id for r in RULES if r.id.startswith("ACRL-K"))


@pytest.mark.parametrize(("rule_id", "overrides", "key"), [(r, o, k) for r, cases in TRIGGERS.items()
                                                            for o, k in cases])
def test_rule_fires_at_its_key(rule_id: str, overrides: dict[str, Any], key: str | list[str],
                               write_spec: SpecWriter) -> None:
    rule = next(r for r in RULES if r.id == rule_id)
    if rule.severity == "error":
        with pytest.raises(SpecError) as info:
            compile_kuberay(write_spec, overrides)
        diagnostics = info.value.diagnostics
    else:
        diagnostics = compile_kuberay(write_spec, overrides).warnings
    fired = [d for d in diagnostics if d.rule == rule_id]
    assert fired, [d.format() for d in diagnostics]
    assert [d.key for d in fired] == (key if isinstance(key, list) else [key])
    assert all(d.severity == rule.severity and d.hint and d.line for d in fired)
    assert not [d for d in diagnostics if d.rule and d.rule.startswith("ACRL-K") and d.rule != rule_id]


@pytest.mark.parametrize(("rule_id", "overrides", "key"), [(r, o, k) for r in JOB_RULES for o, k in TRIGGERS[r]])
def test_the_jobs_rules_are_only_kuberays(rule_id: str, overrides: dict[str, Any], key: str | list[str],
                                          write_spec: SpecWriter) -> None:
    bundle = compile_kuberay(write_spec, overrides, target="ray")
    assert "rayjob.yaml" not in bundle.files and not [w for w in bundle.warnings if w.rule == rule_id]


@pytest.mark.parametrize("overrides", [
    {},
    {K: {"image_paths": ["/models", "/data"], "volumes": []}},  # the image holds model and data
    {"checkpoint": {"save": "/data/ckpt", "save_hf": "/data/hf/iter_{rollout_id}"}, "cluster": {"num_nodes": 2},
     K: {"head": {"cpu": "2", "cpu_limit": "2", "memory": "8Gi", "shm_size": "8Gi"},
         "worker": {"cpu": "8", "memory": "64Gi", "resources": {"vpc.amazonaws.com/efa": "4",
                                                                 "hugepages-2Mi": "1Gi"}},
         "labels": {"example.com/team": "rl", "cost-center": ""}, "annotations": {"note": "any text: at all"},
         "secrets": {"AWS_SESSION_TOKEN": "required"}, "ray_version": "2.49.0",
         "shutdown_after_job_finishes": False}},
    {"cluster": {"gpu": "H100"}, K: {"worker": {"instance_types": ["p5.48xlarge", "my-own-type"]}}},
])
def test_valid_tables_compile_without_k_findings(overrides: dict[str, Any], write_spec: SpecWriter) -> None:
    bundle = compile_kuberay(write_spec, overrides)
    assert not [w for w in bundle.warnings if w.rule.startswith("ACRL-K")]


def test_messages_name_the_value_and_the_fix(write_spec: SpecWriter) -> None:
    """The wording of two findings (the rest are asserted by rule id and key)."""
    with pytest.raises(SpecError) as info:
        compile_kuberay(write_spec, merge(NO_VOLUMES, {K: {"head": {"memory": "16GB"}}}))
    by_rule = {d.rule: d for d in reversed(info.value.diagnostics)}  # each rule's first
    assert by_rule["ACRL-K002"].message == "'16GB' is not a positive Kubernetes quantity"
    assert by_rule["ACRL-K006"].message == ("'/models/Qwen2.5-3B-Instruct' is on no volume of the pods (mounted: "
                                            "none) nor in the image's paths")
    assert "[[kuberay.volumes]]" in (by_rule["ACRL-K006"].hint or "")


def test_the_size_error_names_the_largest_parts(write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as info:
        compile_kuberay(write_spec, {"extra": {"args": ["--x", *["y" * 16_000] * 19]}})
    (finding, submitter) = [d for d in info.value.diagnostics if d.rule == "ACRL-K010"]
    assert "the RayJob of rayjob.yaml is 30" in finding.message
    assert re.search(r"the largest parts: entrypoint \(the slime argv\) 30\d,\d{3} bytes, ", finding.message)
    assert submitter.message.startswith("the submitter's command line would be about 30")


def test_a_runtime_env_too_long_for_the_submitters_one_argument_is_refused(write_spec: SpecWriter) -> None:
    """KubeRay v1.7.0 gives the submitter the whole `ray job submit` line as one bash argument
    (rayjob_controller.go:646), which Linux refuses over 128 KiB: 9 values of 16,000 characters fit the API
    server's 252 KiB, not the argument. The estimate is checked against the real thing: bash -c with the argument
    built as KubeRay builds it."""
    big = {"env": {"vars": {f"BIG{i}": "x" * 16_000 for i in range(9)}}}
    with pytest.raises(SpecError) as info:
        compile_kuberay(write_spec, big)
    [finding] = [d for d in info.value.diagnostics if d.rule == "ACRL-K010"]
    assert "the submitter's command line would be about 14" in finding.message
    assert "[env] vars (the runtime env) about 14" in finding.message
    fits = {"env": {"vars": {f"BIG{i}": "x" * 16_000 for i in range(7)}}}
    bundle = compile_kuberay(write_spec, fits)
    job = next(d for d in yaml.safe_load_all(bundle.files["rayjob.yaml"]) if d["kind"] == "RayJob")["spec"]
    env = json.dumps(yaml.safe_load(job["runtimeEnvYAML"]), separators=(",", ":"))
    argument = f"ray job submit --runtime-env-json {json.dumps(env)} -- {job['entrypoint'].strip()} ;"
    assert submitter_argument_bytes(job) >= len(argument.encode())
    assert subprocess.run(["bash", "-c", "true", argument], check=False).returncode == 0  # it fits: bash starts
    with pytest.raises(OSError, match="Argument list too long"):
        subprocess.run(["bash", "-c", "true", argument + " " + "x" * SUBMITTER_ARG_MAX], check=False)


@pytest.mark.parametrize(("text", "value"), [
    ("16Gi", 16 * 2 ** 30), ("500m", 0.5), ("1e3", 1000), ("1E", 10 ** 18), ("1Ei", 2 ** 60), (".5", 0.5),
    ("8", 8), ("1.5G", 1.5e9), ("16GB", None), ("1e", None), ("Gi", None), (" 8", None), ("8 ", None), ("", None),
])
def test_kubernetes_quantities(text: str, value: float | None) -> None:
    """apimachinery's Quantity grammar (the pattern KubeRay's CRD gives every resource) and its values."""
    from acrl.compiler._pipeline.validate.k8s_syntax import quantity

    parsed = quantity(text)
    assert (parsed is None) == (value is None) and (value is None or float(parsed) == value)  # type: ignore[arg-type]


@pytest.mark.parametrize(("key", "ok"), [
    ("team", True), ("example.com/team", True), ("a.b-c_d", True), ("A/x", False), ("/x", False), ("x/", False),
    ("-x", False), ("x" * 63, True), ("x" * 64, False), ("example.com/" + "x" * 63, True), ("a b", False),
])
def test_qualified_names(key: str, ok: bool) -> None:
    """apimachinery's IsQualifiedName: the keys of labels, annotations, node selectors and taints."""
    from acrl.compiler._pipeline.validate.k8s_syntax import qualified_name_problem

    assert (qualified_name_problem(key) is None) is ok


def test_annotation_keys_may_have_capitals_label_keys_not_in_their_prefix(write_spec: SpecWriter) -> None:
    """Kubernetes checks an annotation's key lowercased (ValidateAnnotations), a label's as written."""
    compile_kuberay(write_spec, {K: {"annotations": {"Example.com/Note": "x"}, "labels": {"example.com/Team": "x"}}})
    with pytest.raises(SpecError) as info:
        compile_kuberay(write_spec, {K: {"labels": {"Example.com/team": "x"}}})
    assert [d.key for d in info.value.diagnostics if d.rule == "ACRL-K003"] == ["kuberay.labels.Example.com/team"]


def test_no_shm_comparison_with_a_quantity_k002_refuses(write_spec: SpecWriter) -> None:
    """A memory of -1Gi is ACRL-K002's error; ACRL-K011 does not also compare /dev/shm with it (the review saw
    "shm_size 0 is more than the pod's memory limit -1Gi")."""
    with pytest.raises(SpecError) as info:
        compile_kuberay(write_spec, {K: {"head": {"shm_size": "0", "memory": "-1Gi"}}})
    rules = [d.rule for d in info.value.diagnostics]
    assert "ACRL-K002" in rules and "ACRL-K011" not in rules
    warned = compile_kuberay(write_spec, {K: {"head": {"shm_size": "32Gi", "memory": "16Gi"}}}).warnings
    assert [w.key for w in warned if w.rule == "ACRL-K011"] == ["kuberay.head.shm_size"]


def test_a_key_holding_a_dot_is_shown_whole(write_spec: SpecWriter) -> None:
    """The review saw `[kuberay.head.resources.nvidia] com/gpu`: the key's parts are kept, so the table and the key
    are shown as written (the JSON key stays the dotted path)."""
    from acrl.compiler.errors import Diagnostic

    with pytest.raises(SpecError) as info:
        compile_kuberay(write_spec, {K: {"head": {"resources": {"nvidia.com/gpu": "1"}}, "labels": {"ray.io/x": "a"}}})
    heads = {d.rule: d.format().splitlines()[0] for d in info.value.diagnostics if d.rule in ("ACRL-K002", "ACRL-K003")}
    assert ": error: [kuberay.head.resources] nvidia.com/gpu: " in heads["ACRL-K002"]
    assert ": error: [kuberay.labels] ray.io/x: " in heads["ACRL-K003"]
    assert Diagnostic("error", "m", key="a.b.c", path=("a.b", "c")).table_and_key == '["a.b"] c'
    assert Diagnostic("error", "m", key="x.y").table_and_key == "[x] y"  # no parts: as before
