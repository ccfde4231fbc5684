"""[cluster]'s sizes are bounded: acrl's placement model, the manifest's node_gpus and `acrl layout` go node by node
and GPU by GPU, so a size no cluster has (num_nodes = 10**8) took minutes and gigabytes instead of an error."""

from __future__ import annotations

import pytest

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._spec.tables import MAX_NODE_GPUS, MAX_NODES
from conftest import SpecWriter


@pytest.mark.parametrize(("key", "value"), [
    ("num_nodes", MAX_NODES + 1), ("actor_num_nodes", MAX_NODES + 1), ("gpus_per_node", MAX_NODE_GPUS + 1),
    ("actor_num_gpus_per_node", MAX_NODE_GPUS + 1), ("rollout_num_gpus", MAX_NODES * MAX_NODE_GPUS + 1),
])
def test_a_cluster_size_past_its_bound_is_a_located_error(key: str, value: int, write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as caught:
        compile_spec(write_spec({"cluster": {key: value}}))
    located = [d for d in caught.value.diagnostics if d.key == f"cluster.{key}"]
    assert located and "at most" in located[0].message, caught.value.message


def test_the_bounds_hold_any_real_cluster() -> None:
    assert MAX_NODES >= 1024 and MAX_NODE_GPUS >= 16
