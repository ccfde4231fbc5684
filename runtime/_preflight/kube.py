"""The preflight checks of a --target kuberay bundle that ask Kubernetes (issue 18), through kubectl
(runtime/_kube.py):

- ``kubectl``: kubectl is on PATH;
- ``kube-context``: the context (--context, else kubectl's current one) is in the kubeconfig, and the namespace the
  RayJob goes to: rayjob.yaml's ([kuberay] namespace), else --namespace, else the context's, else "default";
- ``rayjob-crd``: the API server has KubeRay's RayJob CRD (``kubectl get crd rayjobs.ray.io``) serving ray.io/v1,
  whose schema knows every field of the RayJob's spec (preRunningDeadlineSeconds needs KubeRay v1.6.0 or later: an
  older operator's API server would refuse or drop it);
- ``secrets``: every Secret the pods read (their ``secretKeyRef``s) exists and has the keys they read, a required
  one (``optional: false``) failing the check: the kubelet would not start the pod (CreateContainerConfigError) and
  the RayJob would wait in Initializing. Only key names are asked for: kubectl renders a Go template of the key names
  (SECRET_KEYS_TEMPLATE), so no value ever reaches acrl's process, its output or the record;
- ``rayjob-exists``: no RayJob of the bundle's name is in the namespace: `kubectl apply` of the same documents
  leaves an existing RayJob as it is (a finished one is not run again), so a second run must delete it first.

The state they find (the kubectl with its context, the namespace, the Secrets' key names, an existing RayJob) is kept
on the :class:`KubeTarget` the launch then uses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from acrl.compiler import AcrlError

from .._kube import SECRET_KEYS_TEMPLATE, Kubectl, KubectlError, RayJobState, find_kubectl, rayjob_state, run_kubectl
from .outcome import CheckFailed, CheckWarning

CRD = "rayjobs.ray.io"
RAYJOB_FILE = "rayjob.yaml"
INSTALL = "install the KubeRay operator: helm install kuberay-operator kuberay/kuberay-operator --version 1.7.0"


@attrs.define
class KubeTarget:
    """A --target kuberay launch: rayjob.yaml's documents (as verified), the context and namespace asked for, and
    what the checks found."""

    documents: list[dict[str, Any]]
    data: bytes  # rayjob.yaml's bytes as verified: what `kubectl apply -f -` gets
    context_option: str | None = None
    namespace_option: str | None = None
    kubectl: Kubectl | None = None  # set by the kube-context check
    namespace: str | None = None
    namespace_from: str = ""
    secret_keys: dict[str, frozenset[str]] = attrs.Factory(dict)  # Secret -> the key names it has (found ones)
    existing: RayJobState | None = None

    @property
    def rayjob(self) -> dict[str, Any]:
        return self.documents[-1]

    @property
    def name(self) -> str:
        return str(self.rayjob["metadata"]["name"])

    @property
    def config_map(self) -> str | None:
        maps = [d["metadata"]["name"] for d in self.documents if d.get("kind") == "ConfigMap"]
        return str(maps[0]) if maps else None

    def secret_refs(self) -> dict[str, dict[str, bool]]:
        """Secret -> {key: required} over every container of the RayJob's pod templates."""
        refs: dict[str, dict[str, bool]] = {}
        for container in _containers(self.rayjob.get("spec") or {}):
            for entry in container.get("env") or ():
                ref = ((entry.get("valueFrom") or {}).get("secretKeyRef") or {}) if isinstance(entry, dict) else {}
                if isinstance(ref.get("name"), str) and isinstance(ref.get("key"), str):
                    keys = refs.setdefault(ref["name"], {})
                    keys[ref["key"]] = keys.get(ref["key"], False) or ref.get("optional") is not True
        return refs

    def ready(self) -> tuple[Kubectl, str]:
        """The kubectl and namespace the kube-context check resolved."""
        if self.kubectl is None or self.namespace is None:
            raise CheckFailed("the context is not known: the kube-context check did not pass", "")
        return self.kubectl, self.namespace


def _containers(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    cluster = spec.get("rayClusterSpec") or {}
    templates = [(cluster.get("headGroupSpec") or {}).get("template"), spec.get("submitterPodTemplate"),
                 *((group or {}).get("template") for group in cluster.get("workerGroupSpecs") or ())]
    return [c for t in templates if isinstance(t, dict) for c in (t.get("spec") or {}).get("containers") or ()
            if isinstance(c, dict)]


def read_target(files: Mapping[str, bytes], context: str | None = None, namespace: str | None = None) -> KubeTarget:
    """The bundle's rayjob.yaml (``files`` as verified) as a KubeTarget; AcrlError when it is not a RayJob file."""
    import yaml  # lazy: only a --target kuberay launch reads YAML

    data = files.get(RAYJOB_FILE)
    try:
        documents = [d for d in yaml.safe_load_all(data.decode("utf-8"))] if data is not None else []
    except (UnicodeDecodeError, yaml.YAMLError) as problem:
        raise AcrlError(f"{RAYJOB_FILE}: cannot be read as YAML ({' '.join(str(problem).split())[:300]})",
                        hint="compile the spec again: acrl-compile SPEC --target kuberay -o DIR --force") from None
    last = documents[-1] if documents else None
    if not isinstance(last, dict) or last.get("kind") != "RayJob" or last.get("apiVersion") != "ray.io/v1" or \
            not isinstance((last.get("metadata") or {}).get("name"), str) or \
            not all(isinstance(d, dict) and isinstance(d.get("metadata"), dict) for d in documents):
        raise AcrlError(f"{RAYJOB_FILE}: not the documents acrl-compile --target kuberay writes (a ray.io/v1 RayJob "
                        "last)", hint="compile the spec again: acrl-compile SPEC --target kuberay -o DIR --force")
    assert data is not None
    return KubeTarget(documents, data, context, namespace)


def check_kubectl(target: KubeTarget) -> str:
    found = find_kubectl()
    if found is None:
        raise CheckFailed("kubectl is not on PATH: the RayJob is applied and watched with kubectl",
                          "install kubectl, or run the bundle's train.sh on a Ray cluster: acrl run --target ray")
    return found


def check_context(target: KubeTarget) -> str:
    path = check_kubectl(target)
    context = target.context_option
    try:
        if context is None:
            context = run_kubectl([path, "config", "current-context"], "kubectl config current-context").strip()
        else:
            run_kubectl([path, "config", "get-contexts", context, "-o", "name"],
                        f"kubectl config get-contexts {context}")
    except KubectlError as exc:
        if target.context_option is None:
            raise CheckFailed(f"kubectl has no current context ({exc.message})", "choose one: kubectl config "
                              "use-context NAME, or acrl run --context NAME") from None
        raise CheckFailed(f"--context {context}: not a context of the kubeconfig ({exc.message})",
                          "kubectl config get-contexts lists them") from None
    if not context:
        raise CheckFailed("kubectl has no current context", "choose one: kubectl config use-context NAME, or acrl run "
                          "--context NAME")
    kubectl = Kubectl(path, context)
    written = (target.rayjob.get("metadata") or {}).get("namespace")
    option = target.namespace_option
    if isinstance(written, str) and written:
        if option and option != written:
            raise CheckFailed(f"--namespace {option}: rayjob.yaml puts the RayJob in namespace {written} "
                              "([kuberay] namespace)", f"leave out --namespace, or set [kuberay] namespace = "
                              f"\"{option}\" and compile again")
        namespace, origin = written, "[kuberay] namespace"
    elif option:
        namespace, origin = option, "--namespace"
    else:
        try:
            namespace = kubectl.run("config", "view", "--minify", "-o",
                                    "jsonpath={.contexts[0].context.namespace}").strip()
        except KubectlError as exc:
            raise CheckFailed(exc.message, exc.hint or "") from None
        namespace, origin = (namespace, "the context's") if namespace else ("default", "kubectl's default")
    target.kubectl, target.namespace, target.namespace_from = kubectl, namespace, origin
    return f"context {context}, namespace {namespace} ({origin})"


def check_crd(target: KubeTarget) -> str:
    kubectl, _ = target.ready()
    try:
        crd = kubectl.get_json("crd", CRD)
    except KubectlError as exc:
        if exc.kind == "notfound":
            raise CheckFailed(f"the cluster of context {kubectl.context} has no RayJob CRD ({CRD}): KubeRay is not "
                              "installed", INSTALL) from None
        if exc.kind == "forbidden":
            raise CheckWarning(f"cannot read the CRD {CRD} (forbidden): whether KubeRay is installed is not checked "
                               "here (kubectl apply will say)", "ask for get on customresourcedefinitions, or skip "
                               "this check (--skip rayjob-crd)") from None
        raise CheckFailed(exc.message, exc.hint or "") from None
    versions = [v for v in (crd.get("spec") or {}).get("versions") or () if isinstance(v, dict)]
    v1 = next((v for v in versions if v.get("name") == "v1" and v.get("served")), None)
    if v1 is None:
        served = ", ".join(str(v.get("name")) for v in versions if v.get("served")) or "none"
        raise CheckFailed(f"the RayJob CRD serves no ray.io/v1 (served: {served}): KubeRay is older than v1.0",
                          INSTALL)
    known = (((v1.get("schema") or {}).get("openAPIV3Schema") or {}).get("properties") or {}).get("spec") or {}
    fields = known.get("properties") if isinstance(known, dict) else None
    if isinstance(fields, dict):
        missing = sorted(set(target.rayjob.get("spec") or {}) - set(fields))
        if missing:
            raise CheckFailed(f"the installed RayJob CRD does not know {', '.join(missing)} (KubeRay older than the "
                              "v1.7.0 acrl writes for; preRunningDeadlineSeconds needs v1.6.0)",
                              f"upgrade KubeRay ({INSTALL}), or leave the [kuberay] keys out")
    return f"{CRD} serves ray.io/v1"


def check_secrets(target: KubeTarget) -> str:
    kubectl, namespace = target.ready()
    refs = target.secret_refs()
    if not refs:
        return "the pods read no Secret"
    failures: list[str] = []
    warnings: list[str] = []
    found: list[str] = []
    for secret, keys in sorted(refs.items()):
        required = sorted(k for k, needed in keys.items() if needed)
        optional = sorted(k for k, needed in keys.items() if not needed)
        try:
            have = frozenset(kubectl.run("get", "secret", secret, "-o", f"go-template={SECRET_KEYS_TEMPLATE}",
                                         namespace=namespace).split())
        except KubectlError as exc:
            if exc.kind == "notfound":
                (failures if required else warnings).append(
                    f"no Secret {secret} in namespace {namespace}" + (
                        f": the pods would not start without {', '.join(required)} (CreateContainerConfigError)"
                        if required else f": the pods run without {', '.join(optional)}"))
                continue
            if exc.kind == "forbidden":
                warnings.append(f"cannot read Secret {secret} (forbidden): its keys are not checked")
                continue
            raise CheckFailed(exc.message, exc.hint or "") from None
        target.secret_keys[secret] = have
        absent_required = [k for k in required if k not in have]
        absent_optional = [k for k in optional if k not in have]
        if absent_required:
            failures.append(f"Secret {secret} has no key {', '.join(absent_required)}: the pods would not start "
                            "(CreateContainerConfigError)")
        if absent_optional:
            warnings.append(f"Secret {secret} has no key {', '.join(absent_optional)}: optional, the pods run "
                            "without")
        found.append(f"{secret}: {len([k for k in keys if k in have])} of {len(keys)} keys")
    create = (f"create or complete it: kubectl --context {kubectl.context} --namespace {namespace} create secret "
              "generic NAME --from-literal=KEY=... (or --from-file); never on a shared shell history")
    if failures:
        raise CheckFailed("; ".join(failures + warnings), create)
    if warnings:
        raise CheckWarning("; ".join(warnings + found), create)
    return "; ".join(found)


def check_existing(target: KubeTarget) -> str:
    kubectl, namespace = target.ready()
    try:
        document = kubectl.get_json("rayjob", target.name, namespace=namespace)
    except KubectlError as exc:
        if exc.kind == "notfound":
            return f"no RayJob {target.name} in namespace {namespace} yet"
        raise CheckFailed(exc.message, exc.hint or "") from None
    target.existing = state = rayjob_state(document)
    running = not state.terminal
    delete = kubectl.shown("delete", "rayjob", target.name, namespace=namespace)
    follow = kubectl.shown("get", "rayjob", target.name, "-w", namespace=namespace)
    raise CheckFailed(f"RayJob {target.name} already exists in namespace {namespace} ({state.summary()}"
                      f"{', started ' + state.start_time if state.start_time else ''}): `kubectl apply` of the same "
                      "bundle would leave it as it is and start no new run"
                      + ("; it is running now" if running else ""),
                      f"delete it first ({delete}; then applying the bundle again starts a new RayJob, which resumes "
                      "from [checkpoint] save when it holds a checkpoint)"
                      + (f", or follow the running one ({follow})" if running else ""))

