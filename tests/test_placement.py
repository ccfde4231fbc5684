"""acrl's model of slime's placement group (compiler/_pipeline/placement.py) against slime's own
``_get_placement_group_layout``, run by the project's facts generator on a table of 256 layouts at each
commit acrl targets (tests/data/slime/<commit>/placement_layout.json)."""

from __future__ import annotations

import json

import pytest

from acrl.compiler._pipeline.placement import SLIME_HEAD, SLIME_PIN, GroupLayout, LayoutArgs, group_layout
from conftest import SLIME_DATA


@pytest.mark.parametrize("commit", [SLIME_HEAD, SLIME_PIN])
def test_the_layout_is_slimes_on_every_row(commit: str) -> None:
    rows = json.loads((SLIME_DATA / commit / "placement_layout.json").read_text(encoding="utf-8"))["layouts"]
    assert len(rows) == 256
    wrong = [row for row in rows
             if group_layout(LayoutArgs(**row["args"]), slime_commit=commit)
             != GroupLayout(row["num_gpus"], row["rollout_offset"])]
    assert wrong == []


def test_the_commits_differ_only_for_an_external_rollout_under_debug_rollout_only() -> None:
    def by_args(commit: str) -> dict[str, tuple[int, int]]:
        rows = json.loads((SLIME_DATA / commit / "placement_layout.json").read_text(encoding="utf-8"))["layouts"]
        return {json.dumps(r["args"], sort_keys=True): (r["num_gpus"], r["rollout_offset"]) for r in rows}

    head, pin = by_args(SLIME_HEAD), by_args(SLIME_PIN)
    differ = {json.loads(k)["rollout_external"] and json.loads(k)["debug_rollout_only"]
              and not json.loads(k)["debug_train_only"] for k in head if head[k] != pin[k]}
    assert differ == {True}


@pytest.mark.parametrize(("args", "expected"), [
    (LayoutArgs(actor_num_nodes=1, actor_num_gpus_per_node=4, rollout_num_gpus=4), GroupLayout(8, 4)),
    (LayoutArgs(actor_num_nodes=1, actor_num_gpus_per_node=8, rollout_num_gpus=8, colocate=True), GroupLayout(8, 0)),
    (LayoutArgs(actor_num_nodes=2, actor_num_gpus_per_node=8, rollout_num_gpus=4, colocate=True), GroupLayout(16, 0)),
    (LayoutArgs(actor_num_nodes=1, actor_num_gpus_per_node=8, rollout_num_gpus=16, debug_train_only=True),
     GroupLayout(8, 0)),
])
def test_the_shapes_of_slimes_own_scripts(args: LayoutArgs, expected: GroupLayout) -> None:
    # run-glm4-9B.sh's shape (4 actor + 4 rollout GPUs, disaggregated) asks for 8, the rollout from slot 4
    assert group_layout(args) == expected
