"""ACRL-K* (K006, K008-K012): what the RayJob of --target kuberay needs of the job itself: every path it reads or writes
mounted, enough CPUs for slime's placement group, worker nodes with the GPUs the placement asks for, documents small
enough to be applied, and checkpoints its launch-time decision (checkpoint.sh, in the head pod) can see. They run only
while a --target kuberay compile runs (placement_spec.RAYJOB): with the default target the spec's [kuberay] table is
not used, and its volumes need not hold the paths.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from ..._spec.kuberay import Volume
from .. import placement_spec
from ..argv import flat_argv
from ..eks_gpus import INSTANCE_GPUS, INSTANCE_TYPE_LABEL
from ..kuberay import (
    DOCUMENT_MAX,
    SUBMITTER_ARG_MAX,
    documents_size,
    rayjob_documents,
    submitter_argument_bytes,
    worker_replicas,
)
from ..kuberay_pods import memory_limit
from ..render import checkpoint_sh, custom_config_yaml, sglang_config_yaml
from .engine import ARGV, MODEL_ARGS, PLACEMENT, Context, Finding, KeyRef, rule
from .k8s_syntax import quantity, ray_count

PathKey = tuple[str | int, ...]
ROLLOUT_CPU_ACTORS = 2  # slime's RolloutManager and its Lock, one CPU each, outside the placement group


def _job_paths(ctx: Context) -> Iterator[tuple[PathKey, str, bool]]:
    """(key, path, written) of every path of the cluster the job reads or writes (not slime's and Megatron-LM's
    checkouts, which the image holds)."""
    s = ctx.spec
    reads: list[tuple[PathKey, str | None]] = [
        (("model", "dir"), s.model.dir), (("model", "ref_load"), s.model.ref_load), (("data", "path"), s.data.path),
        (("opd", "teacher_load"), s.opd.teacher_load), (("checkpoint", "load"), s.checkpoint.load)]
    reads += [(("eval", "datasets", name), path) for name, path in s.eval.datasets.items()]
    reads += [(("sglang", "models", name, "model_path"), m.model_path) for name, m in s.sglang.models.items()]
    writes: list[tuple[PathKey, str | None]] = [
        (("checkpoint", "save"), s.checkpoint.save), (("checkpoint", "save_hf"), _static_prefix(s.checkpoint.save_hf)),
        (("weight_sync", "disk_dir"), s.weight_sync.disk_dir),
        (("weight_sync", "local_checkpoint_dir"), s.weight_sync.local_checkpoint_dir)]
    for written, paths in ((False, reads), (True, writes)):
        yield from ((key, path, written) for key, path in paths if path)


def _static_prefix(pattern: str | None) -> str | None:
    """The folder of a path pattern up to its first {placeholder} (save_hf's /ckpt/hf/iter_{rollout_id}: /ckpt/hf)."""
    if pattern is None or "{" not in pattern:
        return pattern
    return posixpath.dirname(pattern[:pattern.index("{")]) or None


def _under(path: str, folder: str) -> bool:
    folder = folder.rstrip("/")
    return path == folder or path.startswith(f"{folder}/") or folder == ""


def _volume_of(path: str, volumes: list[Volume]) -> Volume | None:
    """The volume ``path`` is on: the one with the longest mount_path above it (mounts nest)."""
    holding = [v for v in volumes if _under(path, v.mount_path)]
    return max(holding, key=lambda v: len(v.mount_path)) if holding else None


# The keys whose paths the job reads or writes (K006, K011 read them).
_JOB_PATHS = ("model.dir", "model.ref_load", "data.path", "eval.datasets", "checkpoint.save", "checkpoint.save_hf",
              "checkpoint.load", "opd.teacher_load", "sglang.models", "weight_sync.disk_dir",
              "weight_sync.local_checkpoint_dir")


@rule("ACRL-K006", "error", ["kuberay.volumes", "kuberay.image_paths"], "every path the job uses is mounted",
      reads=_JOB_PATHS)
def _paths_mounted(ctx: Context) -> Iterator[Finding]:
    """--target kuberay: every path the job reads ([model] dir and ref_load, [data] path, [eval] datasets, [sglang.
    models] model_path, [opd] teacher_load, [checkpoint] load) or writes ([checkpoint] save and save_hf, [weight_sync]
    disk_dir and local_checkpoint_dir) must be absolute and under a [[kuberay.volumes]] mount_path or one of [kuberay]
    image_paths; nothing written may be under a read-only volume or an image path (it would be lost with the pod)."""
    if not placement_spec.RAYJOB.get():
        return
    k = ctx.spec.kuberay
    for key, path, written in _job_paths(ctx):
        normal = posixpath.normpath(path)
        volume = _volume_of(normal, k.volumes) if path.startswith("/") else None
        image = path.startswith("/") and any(_under(normal, folder) for folder in k.image_paths)
        if not path.startswith("/"):
            yield Finding(f"{path!r} is relative: the pods of the RayJob resolve it against Ray's working "
                          "directory, not a path of the cluster", "give the absolute path where a volume mounts it",
                          keys=(key,))
        elif volume is None and not image:
            mounts = ", ".join(v.mount_path for v in k.volumes) or "none"
            yield Finding(f"{path!r} is on no volume of the pods (mounted: "
                          f"{mounts}) nor in the image's paths", "add a [[kuberay.volumes]] table (a PVC such as an "
                          "FSx for Lustre claim, or a host_path) whose mount_path holds it, or list its folder in "
                          "[kuberay] image_paths if the image has it", keys=(key,))
        elif written and volume is not None and volume.read_only:
            yield Finding(f"{path!r} is written by the job, on the read-only volume {volume.name!r}",
                          f"set read_only = false on volume {volume.name!r}, or write elsewhere", keys=(key,))
        elif written and volume is None:
            yield Finding(f"{path!r} is written by the job into the image's filesystem, lost when the "
                          "pod ends", "write it to a volume ([[kuberay.volumes]])", keys=(key,))


@rule("ACRL-K008", "error", ["kuberay.worker", "kuberay.head"], "Ray has the CPUs slime asks for", reads=(PLACEMENT,))
def _cpus(ctx: Context) -> Iterator[Finding]:
    """--target kuberay: slime's placement group asks for one CPU with every GPU (bundles {"GPU": 1, "CPU": 1},
    slime/ray/placement_group.py:47 at fa3c990 and 624b824), so a worker pod must give Ray at least its GPUs' count of
    CPUs; and the RolloutManager and its lock take one CPU each besides (placement_group.py:224 / :231, rollout.py:459
    / :404). KubeRay gives Ray the CPU limit, else the request, rounded up (common/pod.go:1394-1404 at v1.7.0); a pod
    without either has the node's CPUs."""
    if not placement_spec.RAYJOB.get():
        return
    k = ctx.spec.kuberay
    gpus = ctx.spec.cluster.gpus_per_node
    worker = _ray_cpus(k.worker.cpu_limit or k.worker.cpu)
    if worker is not None and worker < gpus:
        yield Finding(f"each worker pod gives Ray {worker} CPU(s) for its {gpus} GPUs: slime's placement group needs "
                      "one CPU with every GPU and waits for them without end", f"set [kuberay.worker] cpu to at least "
                      f"{gpus} (more for the rollout's CPU actors and data loading), or leave it out (the node's)",
                      keys=(("kuberay", "worker", "cpu"), ("kuberay", "worker", "cpu_limit")))
        return
    head = _ray_cpus(k.head.cpu_limit or k.head.cpu)
    bundles, replicas = ctx.placement.group.num_gpus, ctx.placement.nodes
    if worker is not None and head is not None and head + worker * replicas < bundles + ROLLOUT_CPU_ACTORS:
        yield Finding(f"Ray has {head + worker * replicas} CPUs (head {head}, workers {replicas} x {worker}); slime "
                      f"asks for {bundles} with its GPUs and "
                      f"{ROLLOUT_CPU_ACTORS} more for the RolloutManager and its lock", "raise [kuberay.worker] cpu or "
                      "[kuberay.head] cpu", keys=(("kuberay", "worker", "cpu"), ("kuberay", "head", "cpu")))


def _ray_cpus(text: str | None) -> int | None:
    value = quantity(text) if text is not None else None
    return ray_count(value) if value is not None and value > 0 else None


@rule("ACRL-K009", "error", ["kuberay.worker", "cluster.gpu", "cluster.gpus_per_node"],
      "worker nodes have the GPUs the placement asks for")
def _instance_types(ctx: Context) -> Iterator[Finding]:
    """--target kuberay: an EC2 instance type the worker pods are confined to ([kuberay.worker] instance_types, or
    node.kubernetes.io/instance-type in its node_selector or node_affinity) must have [cluster] gpus_per_node GPUs
    (each worker pod asks for that many nvidia.com/gpu: a node with fewer never holds it, one with more leaves GPUs
    idle) of [cluster] gpu's model when it is set (compiler/_pipeline/eks_gpus.py; a type not there is not checked)."""
    if not placement_spec.RAYJOB.get():
        return
    w, c = ctx.spec.kuberay.worker, ctx.spec.cluster
    given: list[tuple[KeyRef, str]] = [(("kuberay", "worker", "instance_types", i), t)
                                       for i, t in enumerate(w.instance_types or ())]
    if INSTANCE_TYPE_LABEL in w.node_selector:
        given.append((("kuberay", "worker", "node_selector", INSTANCE_TYPE_LABEL),
                      w.node_selector[INSTANCE_TYPE_LABEL]))
    given += [(("kuberay", "worker", "node_affinity", INSTANCE_TYPE_LABEL), t)
              for t in w.node_affinity.get(INSTANCE_TYPE_LABEL, ())]
    for key, name in given:
        facts = INSTANCE_GPUS.get(name)
        if facts is None:
            continue
        if facts.gpus != c.gpus_per_node or (c.gpu is not None and facts.gpu != c.gpu):
            yield Finding(f"{name} has {facts.gpus} {facts.gpu} GPU(s); the worker pods ask for [cluster] "
                          f"gpus_per_node = {c.gpus_per_node}" + (f" of [cluster] gpu = {c.gpu}" if c.gpu else ""),
                          "give instance types with those GPUs, or set [cluster] gpus_per_node and gpu to the "
                          "nodes'", keys=(key,))


@rule("ACRL-K010", "error", ["kuberay"], "rayjob.yaml's documents fit what the API server stores",
      reads=(PLACEMENT, ARGV, MODEL_ARGS, "agentcore", "checkpoint", "cluster", "cuda", "env", "experiment.id", "slime",
             "train.mode", "wandb"))
def _size(ctx: Context) -> Iterator[Finding]:
    """--target kuberay: the ConfigMap (the custom config, the sglang config) and the RayJob (the argv in its
    entrypoint, [env] vars) must each be at most 252 KiB as JSON: `kubectl apply` keeps a copy of the object in an
    annotation, and an object's annotations hold 256 KiB (a ConfigMap's data 1 MiB, etcd 1.5 MiB a request). The
    submitter's command line (the runtime env, quoted, and the entrypoint in one bash argument: KubeRay v1.7.0's
    rayjob_controller.go:646) must be under Linux's 128 KiB for one argument. A larger bundle is refused, not cut;
    nothing larger is delivered another way."""
    if not placement_spec.RAYJOB.get():
        return
    spec = ctx.spec
    documents = rayjob_documents(spec, flat_argv(ctx.model_args, ctx.groups, spec), custom_config_yaml(spec),
                                 sglang_config_yaml(spec), checkpoint_sh(spec))
    for kind, size, parts in documents_size(documents):
        if size > DOCUMENT_MAX:
            largest = ", ".join(f"{part} {n:,} bytes" for part, n in parts[:3])
            yield Finding(f"the {kind} of rayjob.yaml is {size:,} bytes, over the {DOCUMENT_MAX:,} that `kubectl "
                          f"apply` can store; the largest parts: {largest}", "shorten what the largest parts hold "
                          "(the spec's [extra] args, [env] vars, [sglang.models]), or run with train.sh on a Ray "
                          "cluster", keys=(("kuberay",),))
    job = documents[-1]["spec"]
    submitter = submitter_argument_bytes(job)
    if submitter > SUBMITTER_ARG_MAX:
        parts = [("[env] vars (the runtime env)", submitter_argument_bytes({**job, "entrypoint": ""})),
                 ("the entrypoint (the slime argv)", len(job["entrypoint"].encode("utf-8", "surrogatepass")))]
        largest = ", ".join(f"{part} about {n:,} bytes" for part, n in sorted(parts, key=lambda p: -p[1]))
        yield Finding(f"the submitter's command line would be about {submitter:,} bytes, over the "
                      f"{SUBMITTER_ARG_MAX:,} Linux allows one argument: KubeRay runs it as one bash argument, and "
                      f"the submitter would not start; {largest}", "shorten [env] vars and [extra] args (or move "
                      "large values into files on a volume), or run with train.sh on a Ray cluster",
                      keys=(("kuberay",),))


@rule("ACRL-K011", "warning", ["kuberay.volumes", "kuberay.head", "kuberay.worker", "kuberay.backoff_limit"],
      "what the pods write is kept whole, and /dev/shm fits them",
      reads=(PLACEMENT, *_JOB_PATHS, "checkpoint.resume", "checkpoint.ckpt_step"))
def _sharing(ctx: Context) -> Iterator[Finding]:
    """--target kuberay: a checkpoint (or weight-sync folder) written under a host_path volume by several worker pods
    lands in parts on each node's own disk; [checkpoint] save on a host_path volume is read, when the RayJob decides
    whether to resume (checkpoint.sh in the head pod, ACRL-K012), from the head's node's disk, not the GPU node's
    slime saved to, so a relaunch may start from the model and save over it; with [checkpoint] resume = "never", a
    retry of the RayJob (backoff_limit) finds the failed attempt's checkpoint in save and refuses to start (with
    "auto" it resumes from it); a /dev/shm larger than the pod's memory limit is cut by it (its pages count against
    the limit: the pod is killed first)."""
    if not placement_spec.RAYJOB.get():
        return
    k, c = ctx.spec.kuberay, ctx.spec.checkpoint
    if k.backoff_limit and c.save and c.resume == "never":
        yield Finding(f"backoff_limit = {k.backoff_limit} with [checkpoint] resume = \"never\": a retry finds the "
                      f"checkpoint the failed attempt saved in {c.save!r} and refuses to start (exit 2)",
                      "set [checkpoint] resume = \"auto\" (a retry resumes from the failed attempt's checkpoint), or "
                      "backoff_limit = 0", keys=(("kuberay", "backoff_limit"),))
    save = _host_path(c.save, k.volumes)
    # (one worker: with several, the host_path warning below says it; ckpt_step there is ACRL-K012's error)
    if save is not None and c.resume == "auto" and c.load is None and c.ckpt_step is None and \
            worker_replicas(ctx.spec) == 1:
        yield Finding(f"[checkpoint] save {c.save!r} is on the host_path volume {save.name!r}: the RayJob's head "
                      "pod decides whether to resume from its own node's disk, not from the GPU node's slime saved to, "
                      "so a relaunch may start from the model and save over the checkpoint",
                      "save to a shared volume (an FSx for Lustre or EFS claim)", keys=(("checkpoint", "save"),))
    if worker_replicas(ctx.spec) > 1:
        for key, path, written in _job_paths(ctx):
            volume = _volume_of(posixpath.normpath(path), k.volumes) if written and path.startswith("/") else None
            if volume is not None and volume.host_path is not None:
                yield Finding(f"{path!r} is written on the host_path volume "
                              f"{volume.name!r} by {worker_replicas(ctx.spec)} worker pods: each node keeps its own "
                              "part", "write it to a shared volume (an FSx for Lustre or EFS claim)", keys=(key,))
    for name, group in (("head", k.head), ("worker", k.worker)):
        limit, shm = memory_limit(group), group.shm_size
        amounts = (quantity(shm) if shm else None, quantity(limit) if limit else None)
        # both positive: anything else is ACRL-K002's error, not something to compare
        if amounts[0] is not None and amounts[1] is not None and 0 < amounts[1] < amounts[0]:
            yield Finding(f"[kuberay.{name}] shm_size {shm} is more than the pod's memory limit {limit}, which its "
                          "pages count against", f"lower shm_size, or raise [kuberay.{name}] memory",
                          keys=(("kuberay", name, "shm_size"),))


@rule("ACRL-K012", "error", ["checkpoint.load", "checkpoint.resume", "checkpoint.ckpt_step", "kuberay.volumes"],
      "the RayJob's checkpoint decision can see the checkpoint", reads=("checkpoint.save",))
def _resume(ctx: Context) -> Iterator[Finding]:
    """--target kuberay: the RayJob decides at launch whether slime loads a checkpoint as train.sh does, with the
    bundle's checkpoint.sh, sourced by its entrypoint, which Ray runs in the head pod. A directory on a host_path
    volume is, there, the head's node's own disk, not the GPU node's disk slime's rank 0 saved to, so what the
    decision must find cannot be relied on: a continuation from [checkpoint] load, resume = "required" (the run must
    find its checkpoint or refuse) and ckpt_step (the iteration of that directory) on such a directory are refused.
    The directory must be on a volume every pod shares (a PersistentVolumeClaim)."""
    if not placement_spec.RAYJOB.get():
        return
    c, volumes = ctx.spec.checkpoint, ctx.spec.kuberay.volumes
    if c.resume == "never":  # checkpoint.sh loads nothing
        return
    start = c.load or c.save  # the directory the first launch starts from (ckpt_step is its iteration)
    for key, directory, needed in (("load", c.load, c.load is not None),
                                   ("resume", c.save, c.resume == "required" and c.load is None),
                                   ("ckpt_step", start, c.ckpt_step is not None)):
        volume = _host_path(directory, volumes) if needed else None
        if volume is not None:
            yield Finding(f"[checkpoint] {key}: {directory!r} is on the host_path volume {volume.name!r}; the RayJob "
                          "decides whether to load it in its head pod, where a host_path is the head's node's own "
                          "disk, not the one slime saved to", "put the checkpoint on a volume every pod shares (an FSx "
                          "for Lustre or EFS claim), or run the bundle with train.sh on a Ray cluster (acrl run "
                          "--target ray)", keys=(("checkpoint", key),))


def _host_path(path: str | None, volumes: list[Volume]) -> Volume | None:
    """The host_path volume ``path`` is on, or None (no path, a claim, the image)."""
    volume = _volume_of(posixpath.normpath(path), volumes) if path and path.startswith("/") else None
    return volume if volume is not None and volume.host_path is not None else None
