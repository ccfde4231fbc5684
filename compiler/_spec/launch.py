"""The spec's tables about where and how the run is launched: the cluster and its roles, the slime checkout,
the job's environment, CUDA pinning and W&B (the KubeRay RayJob's table is :mod:`.kuberay`). Same conventions as
:mod:`.tables`, which re-exports them."""

from typing import Literal

import attrs

from .setting import setting

# agentcore-rl-toolkit's scripts/install_slime.sh pins this slime commit.
TOOLKIT_SLIME_COMMIT = "fa3c990af6f18efd3fd9922698bf4bf4048d1263"

# GPU models [cluster] gpu names, and the compute capability (major, minor) torch.cuda reports for each (NVIDIA's
# CUDA GPUs table, developer.nvidia.com/cuda-gpus): what `acrl run`'s slime-parser preflight answers slime's and
# Megatron-LM's GPU queries with (torch.cuda.get_device_capability / get_device_properties: Megatron 1dcf0daf
# megatron/training/arguments.py:852, :927 through megatron/training/utils.py:447-449) on a machine without one.
GPU_CAPABILITY: dict[str, tuple[int, int]] = {
    "A100": (8, 0), "A10G": (8, 6), "L4": (8, 9), "L40S": (8, 9), "H100": (9, 0), "H200": (9, 0), "H20": (9, 0),
    "B200": (10, 0), "GB200": (10, 0), "B300": (10, 3), "GB300": (10, 3),
}
GpuModel = Literal["A100", "A10G", "L4", "L40S", "H100", "H200", "H20", "B200", "GB200", "B300", "GB300"]

# Bounds of the cluster's sizes: acrl's placement model and `acrl layout` go GPU by GPU, so a size no cluster has
# (num_nodes = 10**8) would take minutes and gigabytes where the spec deserves an error.
MAX_NODES = 4096
MAX_NODE_GPUS = 64


@attrs.frozen(kw_only=True)
class Cluster:
    """[cluster]: the machines (nodes x GPUs per node), the roles on them and the Ray cluster."""

    num_nodes: int | None = setting(
        None, doc="Nodes of the Ray cluster (the machines). A local head is one node; more nodes join it with the "
                  "bundle's join.sh. Default: 1 with a local head; with `address` or --target kuberay, the fewest "
                  "nodes that hold the placement.", ge=1, le=MAX_NODES)
    gpus_per_node: int = setting(8, doc="GPUs on each node of the cluster. Passed to slime as --num-gpus-per-node "
                                        "when it is not slime's default 8 and can change what slime does (slime maps "
                                        "rollout engines to nodes and seeds them with it): not on one node of fewer "
                                        "GPUs with at most one rollout engine.", flag="--num-gpus-per-node", ge=1,
                                        le=MAX_NODE_GPUS, omit_if=8)
    actor_num_nodes: int | None = setting(
        None, doc="Nodes of the training actor. Default: every node when colocated or when no rollout GPUs are local "
                  "(--debug-train-only, external engines); else the nodes the rollout leaves (1 when num_nodes is "
                  "not given with `address` or --target kuberay).", flag="--actor-num-nodes", ge=1, le=MAX_NODES)
    actor_num_gpus_per_node: int | None = setting(
        None, doc="GPUs per node of the training actor. Default: gpus_per_node (disaggregated on one node: the GPUs "
                  "the rollout leaves).", flag="--actor-num-gpus-per-node", ge=1, le=MAX_NODE_GPUS)
    colocate: bool = setting(True, doc="Share GPUs between training and rollout.", flag="--colocate")
    rollout_num_gpus: int | None = setting(None, doc="GPUs for rollout engines (required when not colocated; "
                                                     "colocated: the actor's).",
                                           flag="--rollout-num-gpus", ge=1, le=MAX_NODES * MAX_NODE_GPUS)
    gpu: GpuModel | None = setting(None, doc=(
        "The cluster's GPU model. Not passed to slime: `acrl run`'s slime-parser preflight answers the GPU queries "
        "of slime's and Megatron-LM's argument validation with its compute capability on a machine without a GPU "
        "(or whose GPU is not the cluster's), and says so."))
    gpu_memory_gib: float = setting(80.0, doc="Memory of one GPU in GiB, for acrl's static memory estimate "
                                              "(ACRL-M007, docs/memory.md); e.g. 80 for an 80 GB A100/H100, 141 "
                                              "for an H200. Not passed to slime.", gt=0, le=4096)
    address: str | None = setting(None, kind="name", doc="Dashboard address of an existing Ray cluster "
                                            "(e.g. http://head:8265); then no local head is started.")
    stop_stale_processes: bool = setting(True, doc="Kill stale sglang processes and stop Ray first "
                                                   "(local head only).")
    start_ray_head: bool = setting(True, doc="Start a local Ray head (local head only).")
    dashboard_port: int = setting(8265, doc="Dashboard port of the local Ray head.", ge=1, le=65535)
    dashboard_host: Literal["127.0.0.1", "0.0.0.0"] = setting("127.0.0.1", doc=(
        "Where the local head's dashboard (and job API) listens: 127.0.0.1, this machine (train.sh submits from the "
        "head; other nodes join through head_port), or 0.0.0.0, every interface, as slime's scripts do (anyone who "
        "reaches it can run code on the cluster)."))
    head_port: int = setting(6379, ge=1, le=65535, doc="GCS port of the local Ray head, where other nodes join "
                                                       "(join.sh); passed as --port when num_nodes > 1 or not 6379.")
    ray_stop_timeout: int = setting(60, doc="Seconds to wait for stale Ray processes to exit.", ge=1)
    node_ip_address: str | None = setting(None, kind="name", doc=(
        "Address of the local head (`ray start --head --node-ip-address`, as slime's scripts pass "
        "${MASTER_ADDR:-127.0.0.1}); MASTER_ADDR at run time overrides it. Set, train.sh exports MASTER_ADDR (that "
        "value) before `ray start --head`, adds it to no_proxy and puts it in the job's runtime env, as slime's "
        "scripts do. Unset: MASTER_ADDR when set and other nodes join, else the address Ray chooses."))
    ray_start_args: list[str] = setting(factory=list, doc=(
        "Further options of the local head's `ray start --head`, verbatim and shell-quoted (e.g. [\"--num-cpus\", "
        "\"64\"]); not those acrl computes (--head, --num-gpus, --port, --dashboard-*, --node-ip-address, "
        "--address, --block, --disable-usage-stats). join.sh's nodes do not get them."))
    env: dict[str, str] = setting(factory=dict, doc=(
        "Environment of the Ray nodes acrl starts (values must not be secrets): exported before the local head's "
        "`ray start --head` (train.sh) and each other node's `ray start --address` (join.sh), so that Ray's "
        "daemons and every worker process on the node inherit it (e.g. AMD's HIP_VISIBLE_DEVICES and "
        "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES); the pods' env with --target kuberay."))

@attrs.frozen(kw_only=True)
class Cuda:
    """[cuda]: pin one CUDA toolkit on the cluster (optional)."""

    home: str | None = setting(None, kind="path", doc=(
        "CUDA toolkit to pin (e.g. /usr/local/cuda-12.9); sets CUDA_HOME, PATH and LD_LIBRARY_PATH and forwards them "
        "to the train actors."))
    fix_torch_memory_saver: bool = setting(
        True, doc="Link torch_memory_saver's _cu13 preload library under the name slime looks for.")

@attrs.frozen(kw_only=True)
class Wandb:
    """[wandb]: logging; on only when the key's environment variable is set at run time (and enabled)."""

    enabled: bool = setting(True, doc=(
        "false: W&B stays off even when the key's variable is set at run time: train.sh (and the RayJob) pass no "
        "W&B flags and the log says so once. true: on whenever the key's variable is set. `acrl import "
        "train-sh` writes false for a script that never passes --use-wandb."))
    project: str | None = setting(None, doc="W&B project.", flag="--wandb-project", kind="name")
    group: str | None = setting(None, doc="W&B group.", flag="--wandb-group", kind="name")
    key_env: str = setting("WANDB_API_KEY", kind="name", doc=(
        "Name of the environment variable holding the API key. The key itself never appears in a spec or bundle."))

@attrs.frozen(kw_only=True)
class Env:
    """[env]: environment of the Ray job (values must not be secrets)."""

    vars: dict[str, str] = setting(factory=dict, doc="Extra environment variables for every Ray worker.")
    forward: list[str] = setting(factory=lambda: ["WANDB_ENTITY"],
                                 doc="Variables copied from the launching shell when set.")
    pythonpath: list[str] = setting(factory=list, kind="path", doc=(
        "Further PYTHONPATH entries of the Ray job, in order, after Megatron-LM's ([slime] megatron_dir), e.g. "
        "[\"/root/slime\"]."))
    pythonpath_before_megatron: list[str] = setting(factory=list, kind="path", doc=(
        "PYTHONPATH entries of the Ray job that come before Megatron-LM's, in order (a script's "
        "\"PYTHONPATH\": \"/root/slime:/root/Megatron-LM/\" is [\"/root/slime\"] here)."))

@attrs.frozen(kw_only=True)
class Slime:
    """[slime]: the slime checkout the bundle targets."""

    dir: str = setting("/root/slime", doc="slime checkout on the cluster.", kind="path")
    megatron_dir: str = setting("/root/Megatron-LM", doc="Megatron-LM checkout on the cluster.", kind="path")
    commit: str = setting(TOOLKIT_SLIME_COMMIT, kind="name", doc=(
        "slime commit the bundle targets (flags differ between commits); defaults to agentcore-rl-toolkit's pin."))
