"""The quantities derived from a spec (GPUs of the actor and the rollout, samples per rollout, the global batch, slime's
placement), computed once: the manifest's ``derived`` section records them (:class:`Derived`), the argv, the rules and
the review read them. Re-exported by :mod:`.argv`, where they lived first."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from .._spec.tables import Spec
from . import placement_spec


def actor_gpus(spec: Spec) -> int:
    """GPUs of the training actor (actor_num_nodes x actor_num_gpus_per_node, after their defaults)."""
    actor = placement_spec.read(spec).actor
    return actor.num_nodes * actor.gpus_per_node


def rollout_gpus(spec: Spec) -> int | None:
    """GPUs of the rollout engines as slime counts them (the actor's when colocated and not given, slime's
    default); None when not colocated and not given (ACRL-P002)."""
    c = spec.cluster
    return placement_spec.read(spec).placement.rollout_gpus if c.colocate or c.rollout_num_gpus is not None else None


def samples_per_rollout(spec: Spec) -> int:
    """Samples one rollout produces."""
    return spec.rollout.batch_size * spec.rollout.n_samples_per_prompt


def global_batch_size(spec: Spec) -> int:
    """Samples per optimizer step: the rollout's samples split into num_steps_per_rollout steps."""
    return samples_per_rollout(spec) // spec.train.num_steps_per_rollout


def _int_tuple(value: Sequence[int] | None) -> tuple[int, ...] | None:
    return None if value is None else tuple(value)


@attrs.frozen
class Derived:
    """The quantities derived from a spec, as the manifest's ``derived`` section records them; computed
    once by :func:`derived` for the compile (manifest.json) and the review (a bundle's spec.toml)."""

    actor_gpus: int
    rollout_gpus: int | None
    samples_per_rollout: int
    global_batch_size: int
    optimizer_steps_per_rollout: int
    # slime's placement (compiler/_pipeline/placement.py): the machines, the placement group's GPUs, the
    # rollout's first slot in it and the GPUs `ray start` advertises on each node. None in a manifest written
    # before acrl modelled placement.
    nodes: int | None = None
    gpus_per_node: int | None = None
    placement_gpus: int | None = None
    rollout_offset: int | None = None
    node_gpus: tuple[int, ...] | None = attrs.field(default=None, converter=_int_tuple)

    def as_json(self) -> dict[str, Any]:
        """The manifest's ``derived`` section, keys in field order (tuples as JSON arrays)."""
        return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.asdict(self).items()}


def derived(spec: Spec) -> Derived:
    """The one computation of the derived quantities (ZeroDivisionError when num_steps_per_rollout is 0,
    which validation rejects in a spec and only a hand-edited spec.toml can hold)."""
    p = placement_spec.read(spec).placement
    return Derived(actor_gpus=actor_gpus(spec), rollout_gpus=rollout_gpus(spec),
                   samples_per_rollout=samples_per_rollout(spec), global_batch_size=global_batch_size(spec),
                   optimizer_steps_per_rollout=spec.train.num_steps_per_rollout, nodes=p.nodes,
                   gpus_per_node=p.gpus_per_node, placement_gpus=p.group.num_gpus,
                   rollout_offset=p.group.rollout_offset, node_gpus=p.node_gpus)
