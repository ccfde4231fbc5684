"""The EC2 GPU instance types an EKS GPU node group is made of, by GPU model and GPUs per instance: the default
``[kuberay.worker] instance_types`` (a required node affinity on ``node.kubernetes.io/instance-type``, the well-known
label the kubelet sets on every node from the cloud provider's instance type) and what ACRL-K009 checks an explicit
list against.

From AWS's accelerated-computing instance pages (EC2 instance types: P4, P5, P6, G5, G6, G6e): the NVIDIA GPUs of
each type and how many. Only types whose GPU is one of [cluster] gpu's models are listed; a type missing here is
accepted as written (it is not checked), and a GPU model with no type here (H20, GB200, B300, GB300) gets no default.
"""

from __future__ import annotations

from typing import NamedTuple

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"


class InstanceGpus(NamedTuple):
    gpu: str  # a [cluster] gpu model
    gpus: int


_SIZES_1_4_8 = (("xlarge", 1), ("2xlarge", 1), ("4xlarge", 1), ("8xlarge", 1), ("16xlarge", 1), ("12xlarge", 4),
                ("24xlarge", 4), ("48xlarge", 8))
INSTANCE_GPUS: dict[str, InstanceGpus] = {
    "p4d.24xlarge": InstanceGpus("A100", 8),  # A100 40 GB
    "p4de.24xlarge": InstanceGpus("A100", 8),  # A100 80 GB
    "p5.4xlarge": InstanceGpus("H100", 1),
    "p5.48xlarge": InstanceGpus("H100", 8),
    "p5e.48xlarge": InstanceGpus("H200", 8),
    "p5en.48xlarge": InstanceGpus("H200", 8),
    "p6-b200.48xlarge": InstanceGpus("B200", 8),
    **{f"g5.{size}": InstanceGpus("A10G", n) for size, n in _SIZES_1_4_8},
    **{f"g6.{size}": InstanceGpus("L4", n) for size, n in _SIZES_1_4_8},
    **{f"g6e.{size}": InstanceGpus("L40S", n) for size, n in _SIZES_1_4_8},
}


def instance_types(gpu: str | None, gpus_per_node: int) -> list[str]:
    """The instance types with ``gpus_per_node`` GPUs of model ``gpu``, in the table's order ([] without a gpu)."""
    return [name for name, facts in INSTANCE_GPUS.items() if facts == (gpu, gpus_per_node)]
