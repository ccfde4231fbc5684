"""ACRL-L*: the launch. The Ray nodes acrl starts ([cluster] node_ip_address, ray_start_args, env) and the job's
PYTHONPATH ([env] pythonpath, pythonpath_before_megatron): options acrl computes itself are refused, addresses
and paths are checked for what Ray and Python accept, and a key that has no effect where the run is launched is a
warning. Secrets in [cluster] env are ACRL-S001 / ACRL-S003's.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..structure import shown_value
from .engine import PLACEMENT, Context, Finding, rule

# The options of `ray start` that train.sh computes (templates/train.sh.jinja: the head's GPUs from the
# placement model, the dashboard and GCS ports, the address, --disable-usage-stats) or that would break it
# (--block never returns; --address makes a worker node, not a head).
COMPUTED_OPTIONS = {
    "--head": "train.sh starts the head itself",
    "--num-gpus": "the head's GPUs come from [cluster] and the placement model",
    "--port": "set [cluster] head_port",
    "--node-ip-address": "set [cluster] node_ip_address (or MASTER_ADDR at run time)",
    "--address": "a head has no --address; to use an existing cluster, set [cluster] address",
    "--block": "train.sh must go on after `ray start` to submit the job",
    "--disable-usage-stats": "train.sh always passes it",
    "--include-dashboard": "train.sh submits the job through the dashboard",
}
# The head's address as train.sh checks MASTER_ADDR at run time: an IP address or a host name.
NODE_ADDRESS = re.compile(r"[A-Za-z0-9.:_-]+")
# Variables train.sh and join.sh read for the launch itself: the Ray nodes' environment must not hold them.
LAUNCH_VARIABLES = {
    "MASTER_ADDR": "set [cluster] node_ip_address (train.sh reads MASTER_ADDR from the launching shell)",
    "WORKER_IP": "join.sh reads WORKER_IP from each node's own shell",
    "RAY_ADDRESS": "set [cluster] address, or ACRL_RAY_ADDRESS at run time",
    "RAY_API_SERVER_ADDRESS": "set [cluster] address, or ACRL_RAY_ADDRESS at run time",
}


def _option(token: str) -> str:
    return token.partition("=")[0]


@rule("ACRL-L001", "error", ["cluster.ray_start_args", "cluster.node_ip_address", "cluster.env", "env.pythonpath",
                             "env.pythonpath_before_megatron"], "launch options acrl does not compute")
def _launch_keys(ctx: Context) -> Iterator[Finding]:
    """[cluster] ray_start_args must not give the options train.sh computes (--head, --num-gpus, --port,
    --dashboard-*, --node-ip-address, --address, --block, --disable-usage-stats, --include-dashboard) and must
    start with an option; [cluster] node_ip_address is an IP address or a host name; [cluster] env must not set the
    variables the launch reads (MASTER_ADDR, WORKER_IP, RAY_ADDRESS, RAY_API_SERVER_ADDRESS: the Ray processes
    would inherit them); [env]
    pythonpath entries are absolute paths without ':' (PYTHONPATH's separator). No value may hold a NUL byte."""
    c, e = ctx.spec.cluster, ctx.spec.env
    args = c.ray_start_args
    if args and not args[0].startswith("-"):
        yield Finding(f"{shown_value(args[0])} is not an option: `ray start` takes no positional argument",
                      'give options and their values, e.g. ["--num-cpus", "64"]', keys=("cluster.ray_start_args.0",))
    for i, token in enumerate(args):
        option = _option(token)
        why = COMPUTED_OPTIONS.get(option) or ("train.sh starts the head's dashboard from [cluster] dashboard_port "
                                               "and dashboard_host" if option.startswith("--dashboard") else None)
        if token.startswith("-") and why:
            yield Finding(f"{option} is an option acrl computes for `ray start --head`", f"remove it: {why}",
                          keys=(f"cluster.ray_start_args.{i}",))
        if "\0" in token:
            yield Finding("the value holds a NUL byte, which no argument can hold", "remove the \\u0000",
                          keys=(f"cluster.ray_start_args.{i}",))
    if c.node_ip_address is not None and not NODE_ADDRESS.fullmatch(c.node_ip_address):
        yield Finding(f"{shown_value(c.node_ip_address)} is not an IP address or a host name",
                      "give the head's address, e.g. 10.0.0.1 (letters, digits, '.', ':', '_' and '-')",
                      keys=("cluster.node_ip_address",))
    for name, value in c.env.items():
        why = LAUNCH_VARIABLES.get(name)
        if why:
            yield Finding(f"{name} is read by the launch itself; it cannot be part of the Ray nodes' environment",
                          f"remove it: {why}", keys=(f"cluster.env.{name}",))
        if "\0" in value:
            yield Finding(f"the value of {name} holds a NUL byte, which no environment variable can hold",
                          "remove the \\u0000", keys=(f"cluster.env.{name}",))
    for key, entries in (("pythonpath", e.pythonpath), ("pythonpath_before_megatron", e.pythonpath_before_megatron)):
        for i, entry in enumerate(entries):
            if not entry.startswith("/") or ":" in entry or "\0" in entry:
                yield Finding(f"{shown_value(entry)} is not one absolute path: each PYTHONPATH entry is a directory "
                              "on the cluster, without ':' (the separator); the job runs in the bundle's folder, so a "
                              "relative entry would name a folder there", "give an absolute path, one per item",
                              keys=(f"env.{key}.{i}",))


@rule("ACRL-L002", "warning", ["cluster.node_ip_address", "cluster.ray_start_args", "cluster.env",
                               "cluster.address", "cluster.start_ray_head", "wandb.enabled"],
      "launch keys that take effect", reads=(PLACEMENT, "wandb.project", "wandb.group", "wandb.key_env"))
def _launch_applies(ctx: Context) -> Iterator[Finding]:
    """[cluster] node_ip_address and ray_start_args are options of the local head train.sh starts: with [cluster]
    address, --target kuberay (the RayJob's pods start Ray) or start_ray_head = false they have no effect. [cluster]
    env reaches the nodes train.sh and join.sh start, and the pods of rayjob.yaml: with an existing cluster
    ([cluster] address) it has no effect. [wandb] project and group are passed only with W&B on: with
    [wandb] enabled = false they have no effect."""
    w = ctx.spec.wandb
    for key in ("project", "group"):
        if not w.enabled and getattr(w, key):
            yield Finding("it has no effect: [wandb] enabled = false passes no W&B flag",
                          f"remove [wandb] {key}, or set enabled = true (W&B on when ${w.key_env} is set)",
                          keys=(f"wandb.{key}",))
    c = ctx.spec.cluster
    local_head = ctx.placement.local_head
    where = ("[cluster] address names an existing Ray cluster" if c.address is not None else
             "--target kuberay: the RayJob's pods start Ray" if not local_head else
             "[cluster] start_ray_head = false: train.sh starts no head")
    for key, given in (("node_ip_address", c.node_ip_address is not None), ("ray_start_args", bool(c.ray_start_args))):
        if given and (not local_head or not c.start_ray_head):
            yield Finding(f"it has no effect: {where}", f"remove [cluster] {key}",
                          keys=(f"cluster.{key}",))
    if c.env and c.address is not None:
        yield Finding(f"it has no effect: {where}, whose nodes acrl does not start",
                      "export the variables on the cluster's nodes before their `ray start`, or, for the job's "
                      "processes only, use [env] vars", keys=("cluster.env",))
