"""`acrl run BUNDLE` for a --target kuberay bundle (issue 18): after the bundle is verified and the preflight passed
(runtime/_preflight/kube_checks.py), ``kubectl apply -f -`` with rayjob.yaml's verified bytes (the ConfigMap and the
RayJob; never the file as it is on disk a moment later), then the RayJob watched until it ends
(runtime/_kube_watch.py), and the run recorded like a Ray run (runtime/_records.py RunRecord): status and exit status
from the RayJob's end, the RayJob's name, namespace and context and KubeRay's state of it (``kuberay``), the Ray
submission id KubeRay reports (status.jobId) as ``submission_id``, start and end, the preflight, the bundle hash, and
what ran: slime's argv from the RayJob's entrypoint and the Ray job's environment (runtimeEnvYAML), secrets
redacted, the datasets' fingerprints where this machine reads them, and the checkpoint it resumed from (the job's
``acrl-resume:`` line). The run's log (rayjob.log beside run.json) holds the progress lines and the job's log.
"""

from __future__ import annotations

import json
import shlex
import socket
import time
from pathlib import Path
from typing import IO, Any

import attrs

from acrl.compiler import BundleDir, Verification, __version__, is_secret_name, looks_secret_value, without_secret_flags

from . import _provenance, _records
from ._kube import KubectlError, RayJobState
from ._kube_watch import Ending, Signals, watch
from ._preflight.bundle_info import BundleInfo
from ._preflight.checks import Result
from ._preflight.kube import RAYJOB_FILE, KubeTarget, check_context
from ._preflight.outcome import CheckFailed
from ._preflight.wandb_key import key_env
from ._stream import RESUME_MARKER, _Copy, _say, _say_to

LOG = "rayjob.log"
CONFIG_MOUNT = "/acrl/config"  # where the pods mount the ConfigMap (compiler/_pipeline/kuberay_pods.py)


def launch(target: KubeTarget, bundle: BundleDir, verification: Verification, info: BundleInfo, results: list[Result],
           *, runs_dir: str, dry_run: bool, allow_modified: bool, out: IO[str]) -> int:
    """Apply the RayJob, watch it, record the run; the exit status (0 succeeded, the entrypoint's when it failed with
    one, 1 failed, 130/143 cancelled, 75 unknown)."""
    if target.kubectl is None or target.namespace is None:  # --skip kube-context: it is still needed here
        try:
            check_context(target)
        except CheckFailed as exc:
            raise KubectlError(exc.message, exc.hint, "other") from None
    kubectl, namespace = target.ready()
    apply = ("apply", "-f", "-")
    command = ["kubectl", *kubectl.argv(*apply, namespace=namespace)[1:]]
    yaml_path = str(info.path / RAYJOB_FILE)
    exp_id = bundle.exp_id
    if dry_run:
        print(f"would run: {shlex.join(command)} < {yaml_path}  (rayjob.yaml as verified)", file=out)
        print(f"would watch: RayJob {target.name} in namespace {namespace} (context {kubectl.context})", file=out)
        print(f"would record: {Path(runs_dir) / exp_id / '<run_id>' / _records.RECORD} and {LOG}", file=out)
        return 0
    try:
        run_id, run_dir = _records.new_run_dir(Path(runs_dir) / exp_id)
    except OSError as exc:
        raise _records.runs_dir_error(runs_dir, exc) from None
    changed = sorted({*verification.modified, *verification.added, *verification.removed})
    refs = target.secret_refs()
    w = wandb(info, target)
    record = _records.RunRecord(
        acrl_version=__version__, exp_id=exp_id, run_id=run_id, bundle=str(info.path.resolve()),
        bundle_hash=verification.bundle_hash, submission_id="", ray_address=None, host=socket.gethostname(),
        launcher=_records.this_launcher(), command=[*command, "<", yaml_path], allow_modified=allow_modified,
        modified_files=changed, expected_hash=verification.expected_hash,
        preflight=[_records.PreflightEntry(**r.as_json()) for r in results],  # type: ignore[arg-type]
        log=LOG, inputs=_provenance.inputs(info), stack=None, target=_provenance.target(info),
        argv=rayjob_argv(target, w.enabled and w.key_present), runtime_env=runtime_env(target), wandb=w,
        kuberay=_records.KubeRayRun(name=target.name, namespace=namespace, context=kubectl.context,
                                    config_map=target.config_map,
                                    secrets={s: sorted(keys) for s, keys in sorted(refs.items())}))
    started = time.time()
    record = attrs.evolve(record, started_at=_records.utc(started))
    try:
        _records.write_record(run_dir, record)
        log = open(run_dir / LOG, "wb", buffering=0)  # noqa: SIM115 (closed below)
    except OSError as exc:
        raise _records.runs_dir_error(runs_dir, exc) from None
    _say_to(out, f"run {run_id}: {shlex.join(command)} < {yaml_path}  (log: {run_dir / LOG})")
    ending = Ending("failed", 1, error="acrl run ended before the RayJob did")
    copy = _Copy(log, out)
    box = {"record": record}

    def seen(state: RayJobState) -> None:  # a new state: the record says it at once (acrl status elsewhere)
        updated = _with_state(box["record"], state)
        if updated.submission_id != box["record"].submission_id:
            box["record"] = updated
            try:
                _records.write_record(run_dir, updated)
            except OSError as exc:
                _say(f"acrl: warning: cannot update {run_dir / _records.RECORD}: {exc.strerror or exc}")
        box["record"] = updated

    try:
        with log, Signals() as signals:
            try:
                applied = kubectl.run(*apply, namespace=namespace, stdin=target.data)
            except KubectlError as exc:
                copy.write(f"acrl: error: {exc.message}\n".encode())
                ending = Ending("failed", 1, error=exc.message)
                return ending.code
            copy.write(applied.encode())
            created = any(line.startswith("rayjob.ray.io/") and line.rstrip().endswith(" created")
                          for line in applied.splitlines())
            kube = box["record"].kuberay
            assert kube is not None
            box["record"] = attrs.evolve(box["record"], kuberay=attrs.evolve(kube, created=created))
            if not created:
                copy.write(f"acrl: warning: RayJob {target.name} existed (kubectl apply left it as it was): this run "
                           "watches it, it did not start a new one\n".encode())
            ending = watch(kubectl, namespace, target.name, copy, signals, seen)
    finally:
        marked = copy.finish()
        resumed = _provenance.resumed_from(marked.get(RESUME_MARKER), Path(runs_dir), exp_id, run_id)
        _finish(run_dir, attrs.evolve(box["record"], resumed_from=resumed), ending, copy.log_error, started, out)
    return ending.code


def _with_state(record: _records.RunRecord, state: RayJobState) -> _records.RunRecord:
    kube = record.kuberay
    assert kube is not None
    updated = attrs.evolve(kube, job_id=state.job_id or kube.job_id, cluster=state.cluster or kube.cluster,
                           deployment_status=state.deployment or None, job_status=state.job_status or None,
                           reason=state.reason, message=state.message[:2000] if state.message else None)
    return attrs.evolve(record, kuberay=updated, submission_id=updated.job_id or record.submission_id)


def _finish(run_dir: Path, record: _records.RunRecord, ending: Ending, log_error: str | None, started: float,
            out: IO[str]) -> None:
    if ending.state is not None:
        record = _with_state(record, ending.state)
    ended = time.time()
    record = attrs.evolve(record, status=ending.status, exit_status=ending.code, ended_at=_records.utc(ended),
                          duration_s=round(ended - started, 3), note=ending.note, error=ending.error,
                          log_error=log_error or None)
    path = _records.write_final_record(run_dir, record, _say)
    _say_to(out, f"run {record.run_id} {ending.status} (exit status {ending.code}); record: {path}")
    if ending.note:
        _say_to(out, f"run {record.run_id}: {ending.note}")


def rayjob_argv(target: KubeTarget, wandb_on: bool = False) -> list[str] | None:
    """slime's command in the RayJob's entrypoint, after acrl's `bash -c '...' acrl` wrapper, with the W&B flags the
    wrapper adds in the pod when the key's variable is set there (``wandb_on``: the Secret has the key); not what
    checkpoint.sh adds (the record's resumed_from says it). Credential values and secret-looking words as ***."""
    entrypoint = (target.rayjob.get("spec") or {}).get("entrypoint")
    if not isinstance(entrypoint, str):
        return None
    try:
        words = shlex.split(entrypoint)
        added: list[str] = []
        if words[:2] == ["bash", "-c"] and len(words) > 3:
            body, words = words[2], words[4:]
            if wandb_on and 'set -- "$@" ' in body:  # if [[ -n ${KEY:-} ]]; then ... set -- "$@" FLAGS; fi
                added = shlex.split(body.split('set -- "$@" ', 1)[1].split("; fi", 1)[0])
    except ValueError:
        return None
    return without_secret_flags([*words, *added])


def runtime_env(target: KubeTarget) -> _records.RuntimeEnv | None:
    """The Ray job's runtime environment (runtimeEnvYAML's env_vars, secret-looking values <redacted>); its working
    directory: none, the pods mount the ConfigMap at /acrl/config."""
    text = (target.rayjob.get("spec") or {}).get("runtimeEnvYAML")
    try:
        data: Any = json.loads(text) if isinstance(text, str) else None  # acrl writes it as JSON, which is YAML
    except ValueError:
        data = None
    env = data.get("env_vars") if isinstance(data, dict) else None
    if not isinstance(env, dict):
        return None
    shown = {str(k): _provenance.REDACTED if is_secret_name(str(k)) or looks_secret_value(str(v), str(k)) else str(v)
             for k, v in sorted(env.items())}
    where = f"{CONFIG_MOUNT} (ConfigMap {target.config_map})" if target.config_map else ""
    return _records.RuntimeEnv(env_vars=shown, working_dir=where)


def wandb(info: BundleInfo, target: KubeTarget) -> _records.WandbRecord:
    """W&B as the pods have it: the key's variable read from a Secret, present when the secrets check found its key."""
    found = _provenance.wandb(info)
    name = key_env(info)
    present = any(name in keys for secret, keys in target.secret_keys.items()
                  if name in target.secret_refs().get(secret, {}))
    return attrs.evolve(found, key_present=present)
