"""Property test (hypothesis) of cluster layouts (issue 13): every spec that compiles gives a bundle whose train.sh
(read back the way the review tools read it: compiler/_review/view.py) starts a head and passes an argv that
slime can place; every spec that does not compile is refused by a placement rule (ACRL-C*, ACRL-P*), never by
another exception."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st

from acrl.compiler import RULES, SpecError, compile_spec
from acrl.compiler._pipeline import placement_spec
from acrl.compiler._review.view import read_view
from conftest import MINIMAL, merge

CLUSTER = st.fixed_dictionaries({"colocate": st.sampled_from([True, False, False])}, optional={
    "num_nodes": st.integers(1, 4), "gpus_per_node": st.sampled_from([2, 4, 8, 8]),
    "actor_num_nodes": st.integers(1, 3), "actor_num_gpus_per_node": st.sampled_from([1, 2, 4, 8]),
    "rollout_num_gpus": st.sampled_from([1, 2, 4, 6, 8, 12, 16, 24]),
})
FLAGS = st.fixed_dictionaries({}, optional={
    "--debug-train-only": st.just(True), "--debug-rollout-only": st.just(True),
    "external": st.just(True), "--sglang-pp-size": st.sampled_from([2, 4]),
    "--sglang-ep-size": st.sampled_from([2, 4]),
})
LAYOUT = st.fixed_dictionaries({
    "cluster": CLUSTER, "flags": st.one_of(st.just({}), st.just({}), FLAGS),
    "gpus_per_engine": st.sampled_from([1, 2, 4, 8, 16]), "async": st.booleans(),
    "dp_attention": st.sampled_from([0, 0, 2, 4]),
})
# A spec the layout makes invalid is refused by a rule of the cluster and its parallelism, or by the batch
# rule that divides the global batch over the actor's data-parallel ranks (which the layout decides).
LAYOUT_RULES = {r.id for r in RULES if r.id.startswith(("ACRL-C", "ACRL-P"))} | {"ACRL-B002"}


def spec_of(layout: dict[str, Any]) -> dict[str, Any]:
    flags: dict[str, Any] = dict(layout["flags"])
    tables: dict[str, Any] = {"cluster": layout["cluster"], "rollout": {"gpus_per_engine": layout["gpus_per_engine"]},
                              "parallel": {"tensor": 1, "sequence_parallel": False}}
    if flags.pop("external", False):  # external engines: the key (its flag in [extra] is ACRL-F002's)
        tables["rollout"]["external_engine_addrs"] = ["10.0.0.9:30000"]
    if layout["dp_attention"]:
        flags["--sglang-enable-dp-attention"] = True
        tables["sglang"] = {"data_parallel_size": layout["dp_attention"]}
    if layout["async"]:
        tables["train"] = {"mode": "async"}
    return merge(MINIMAL, {**tables, "extra": {"flags": flags}})


def check_bundle(files: dict[str, bytes], spec: Any) -> None:
    view = read_view("bundle", files)
    p = placement_spec.read(spec).placement
    gpn, nodes = spec.cluster.gpus_per_node, p.nodes
    head = view.launch["ray start --head"].split()
    head_gpus = int(head[head.index("--num-gpus") + 1])
    # the head advertises the group's share of node 0, never more than the node has
    assert head_gpus == min(gpn, p.group.num_gpus) <= gpn
    assert p.group.num_gpus <= nodes * gpn
    assert view.derived["placement_gpus"] == p.group.num_gpus and view.derived["node_gpus"][0] == head_gpus
    # --num-gpus-per-node: passed exactly when the node is not slime's default 8 and slime would do something
    # differently without it (several nodes, a node over 8, more than one engine actor, distributed post), then
    # the node size
    flag = view.flags.get("--num-gpus-per-node")
    several = nodes > 1 or gpn > 8 or len(p.engine_actors) > 1 or p.args.rollout_num_gpus_per_engine > gpn \
        or "--use-distributed-post" in view.flags
    assert (flag is not None) == (gpn != 8 and several)
    assert flag is None or flag.values == (str(gpn),)
    actor = [int(view.flags[f].values[0]) for f in ("--actor-num-nodes", "--actor-num-gpus-per-node")]
    assert actor[0] * actor[1] == view.derived["actor_gpus"]
    for engine in p.engines:
        used = {n: sum(g.node == n for g in engine.gpus) for n in engine.nodes}
        assert len(used) == 1 or set(used.values()) == {gpn}, engine  # one node, or whole nodes
        assert engine.host_node == engine.gpus[0].node, engine  # addressed by its own node
    for actor_slots in p.engine_actors:
        assert actor_slots.gpu_index + actor_slots.num_gpus <= p.group.num_gpus  # inside slime's placement group


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(LAYOUT)
@example({"cluster": {"num_nodes": 2, "actor_num_gpus_per_node": 4, "colocate": False, "rollout_num_gpus": 12},
          "flags": {}, "gpus_per_engine": 2, "async": False, "dp_attention": 0})  # slime PR #2373
def test_every_layout_compiles_into_a_placeable_bundle_or_is_refused_by_a_placement_rule(layout: dict[str, Any]
                                                                                          ) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.toml"
        path.write_text(tomli_w.dumps(spec_of(layout)), encoding="utf-8")
        try:
            bundle = compile_spec(path, display_name="spec.toml")
        except SpecError as exc:
            rules = {d.rule for d in exc.diagnostics if d.severity == "error"}  # a warning refuses nothing (R007)
            event("refused")
            assert rules and rules <= LAYOUT_RULES, [d.format() for d in exc.diagnostics]
            return
    event("compiled")
    check_bundle(dict(bundle.files), bundle.spec)
