"""acrl's model of slime's rollout engines on --sglang-config server groups (compiler/_pipeline/placement.py:
server_groups_in_start_order, engine_slots, place) against slime's own start-up code, run by the project's facts
generator on 554 server-group layouts at each commit acrl targets (tests/data/slime/<commit>/
engine_groups_layout.json, made by compiler/_slime/group_facts.py: slime's start_rollout_servers, ServerGroup,
_allocate_rollout_engine_addr_and_ports_normal, validate_server_group_gpu_indices and sglang_config.py's classes):
the groups in the order slime makes them, each engine actor (rank, slot, base GPU, the node of its host and of its
dist_init_addr, its group), each engine of each group (its GPUs and host node) and slime's validation, row by row."""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any, cast

import pytest
from test_engine_layout import mutant

from acrl.compiler._pipeline import placement, placement_spec
from acrl.compiler._slime import group_facts
from acrl.compiler._spec.server_groups import ServerGroup, SglangModel
from acrl.compiler._spec.tables import Spec
from conftest import SLIME_DATA, SLIME_HEAD, SLIME_PIN

Row = dict[str, Any]


def rows(commit: str) -> list[Row]:
    data = json.loads((SLIME_DATA / commit / "engine_groups_layout.json").read_text(encoding="utf-8"))
    assert data["columns"] == {"engines": list(group_facts.ENGINE_COLUMNS), "groups": list(group_facts.GROUP_COLUMNS)}
    return [{**row, "engines": [dict(zip(group_facts.ENGINE_COLUMNS, e, strict=True)) for e in row["engines"]],
             "groups": [dict(zip(group_facts.GROUP_COLUMNS, g, strict=True)) for g in row["groups"]]}
            for row in data["layouts"]]


def spec_models(a: Row) -> dict[str, SglangModel]:
    """The row's --sglang-config models as [sglang.models] tables (the spec keeps the YAML list's order)."""
    return {m["name"]: SglangModel(num_gpus_per_engine=m.get("num_gpus_per_engine"), server_groups=[
        ServerGroup(worker_type=g["worker_type"], num_gpus=g["num_gpus"],
                    num_gpus_per_engine=g.get("num_gpus_per_engine")) for g in m["server_groups"]])
        for m in a["models"]}


def layout_args(model: types.ModuleType, a: Row) -> Any:
    """The row as slime's args: the actor takes the slots before the rollout (offset 0: none), disaggregated."""
    return model.LayoutArgs(
        actor_num_nodes=1, actor_num_gpus_per_node=a["rollout_offset"],
        rollout_num_gpus=sum(g["num_gpus"] for m in a["models"] for g in m["server_groups"]),
        rollout_num_gpus_per_engine=a["rollout_num_gpus_per_engine"],
        num_gpus_per_node=a["gpus_per_node"] if a["num_gpus_per_node_passed"] else 8,
        server_groups=model.server_groups_in_start_order(spec_models(a), a["rollout_num_gpus_per_engine"]))


def disagreements(model: types.ModuleType, row: Row) -> list[str]:
    """Where ``model`` (the placement module, or a mutant of it) says otherwise than slime did on ``row``."""
    a, out = row["args"], []
    args = layout_args(model, a)
    names = [m["name"] for m in a["models"]]
    mine_groups = [(names.index(g.model), g.worker_type, g.num_gpus_per_engine) for g in args.server_groups]
    slime_groups = [(g["model"], g["worker_type"], g["num_gpus_per_engine"]) for g in row["groups"]]
    if mine_groups != slime_groups:
        return [f"groups {mine_groups}, slime made {slime_groups}"]
    try:
        p = model.place(args, nodes=a["nodes"], local_head=False, gpus_per_node=a["gpus_per_node"])
    except Exception as exc:  # a mutant's model may fail where slime made the engines
        return [f"place() raised {exc!r}"]
    assert p.fits
    actors, slime = p.engine_actors, row["engines"]
    node, slime_node = a["gpus_per_node"], args.num_gpus_per_node
    by_rank = {actor.rank: actor for actor in actors}

    def slot(index: int) -> Any:  # PACK on empty nodes of the real size, as the generator's stand-in places them
        return model.Gpu(index // node, index % node)

    if len(actors) != len(slime):
        return [f"{len(actors)} engine actors, slime {len(slime)}"]
    for actor, s in zip(actors, slime, strict=True):
        mine = {"rank": actor.rank, "gpu_index": actor.gpu_index - a["rollout_offset"], "bundle": actor.gpu_index,
                "base_gpu_id": slot(actor.gpu_index).gpu, "group": actor.group,
                "host": slot(by_rank[actor.addressed_by].gpu_index).node if actor.addressed_by in by_rank else None}
        out += [f"actor {actor.rank} {k}: {v} != slime's {s[k]}" for k, v in mine.items() if s[k] != v]
        # slime's validation passes exactly when every actor's slots lie in the rollout's part of the group
        inside = all(i in p.rollout_slots for i in range(actor.gpu_index, actor.gpu_index + actor.num_gpus))
        if inside != (row["error"] is None):
            out.append(f"actor {actor.rank}: slots inside the rollout {inside}, slime's validation {row['error']}")
    slime_by_rank = {s["rank"]: s for s in slime}
    for index, group in enumerate(row["groups"]):
        # a slime engine is nodes_per_engine actors from one of the group's .engines (rollout.py:69-75 at 624b824);
        # one that the group's GPUs do not fill (fewer actors than nodes) is started but never whole: acrl has none
        per_engine = max(1, group["num_gpus_per_engine"] // slime_node)
        whole = [[slime_by_rank[r + k] for k in range(per_engine)] for r in group["engines"]
                 if all(r + k in slime_by_rank and slime_by_rank[r + k]["group"] == index for k in range(per_engine))]
        engines = [e for e in p.engines if e.group == index]
        if len(engines) != len(whole):
            out.append(f"group {index}: {len(engines)} engines, slime {len(whole)} whole ones")
            continue
        for engine, members in zip(engines, whole, strict=True):
            told = {m["dist_init_host"] for m in members}
            if told != {engine.host_node}:
                out.append(f"engine {engine.index} host node {engine.host_node}, slime's dist_init_addr {sorted(told)}")
            gpus = tuple(slot(m["bundle"] + k) for m in members for k in range(min(group["num_gpus_per_engine"],
                                                                                   slime_node)))
            if engine.gpus != gpus:
                out.append(f"engine {engine.index} on {engine.gpus}, slime's actors on {gpus}")
    return out


@pytest.mark.parametrize("commit", [SLIME_HEAD, SLIME_PIN])
def test_the_engines_are_slimes_on_every_row(commit: str) -> None:
    table = rows(commit)
    assert len(table) == 554
    wrong = {json.dumps(r["args"]): d for r in table if (d := disagreements(placement, r))}
    assert wrong == {}


def test_the_commits_agree_on_every_row() -> None:
    assert rows(SLIME_HEAD) == rows(SLIME_PIN)


def test_the_table_covers_what_the_issue_asks() -> None:
    table = rows(SLIME_HEAD)
    models = [m for r in table for m in r["args"]["models"]]
    groups = [g for m in models for g in m["server_groups"]]
    assert {len(r["args"]["models"]) for r in table} == {1, 2}
    assert {len(m["server_groups"]) for m in models} == {1, 2, 3}
    assert {g["worker_type"] for g in groups} == set(group_facts.WORKER_TYPES)
    assert {g["num_gpus"] for g in groups} == set(range(1, 17))
    assert {r["args"]["gpus_per_node"] for r in table} == {4, 8}
    assert {r["args"]["num_gpus_per_node_passed"] for r in table} == {True, False}
    assert {r["args"]["rollout_offset"] for r in table} == {0, 4, 8}
    # a group's GPUs per engine given, else the model's, else --rollout-num-gpus-per-engine (ModelConfig.resolve)
    assert any("num_gpus_per_engine" in g for g in groups)
    assert any("num_gpus_per_engine" in m and "num_gpus_per_engine" not in g
               for m in models for g in m["server_groups"])
    assert any("num_gpus_per_engine" not in m and "num_gpus_per_engine" not in g
               for m in models for g in m["server_groups"])
    # slime made a model's encoder groups before the groups listed before them (EPD), and placeholders made no actors
    assert any([g["worker_type"] for g in r["groups"]] != [g["worker_type"] for m in r["args"]["models"]
                                                          for g in m["server_groups"]] for r in table)
    assert any(g["worker_type"] == "placeholder" and g["actors"] == 0
               and g["rank_offset"] < r["groups"][-1]["rank_offset"] for r in table for g in r["groups"])
    # a group starting mid-node whose engine slime gives another node's address; an engine of several nodes
    assert any(e["host"] != e["bundle"] // r["args"]["gpus_per_node"] and r["groups"][e["group"]]["gpu_offset"] > 0
               for r in table for e in r["engines"])
    assert any(e["dist_init_host"] != e["host"] for r in table for e in r["engines"])
    # and a group whose GPUs do not fill its last multi-node engine: slime starts its first actors, acrl counts no
    # engine (disagreements compares acrl's engines with slime's whole ones)
    assert any(g["actors"] % max(1, g["num_gpus_per_engine"] // (r["args"]["gpus_per_node"] if r["args"][
        "num_gpus_per_node_passed"] else 8)) for r in table for g in r["groups"])


def test_the_start_order_puts_a_models_encoders_first_and_resolves_gpus_per_engine() -> None:
    models = {"default": SglangModel(num_gpus_per_engine=2, server_groups=[
        ServerGroup(worker_type="prefill", num_gpus=4), ServerGroup(worker_type="encoder", num_gpus=2,
                                                                    num_gpus_per_engine=1),
        ServerGroup(worker_type="decode", num_gpus=4, overrides={"dp-size": 2})]),
        "ref": SglangModel(server_groups=[ServerGroup(worker_type="regular", num_gpus=2),
                                          ServerGroup(worker_type="encoder", num_gpus=1)])}
    G = placement.GroupShape
    assert placement.server_groups_in_start_order(models, 4) == (
        G("encoder", 2, 1, "default"), G("prefill", 4, 2, "default"), G("decode", 4, 2, "default", (("dp_size", 2),)),
        G("encoder", 1, 4, "ref"), G("regular", 2, 4, "ref"))


def test_the_compile_path_reads_the_groups_in_slimes_order() -> None:
    """placement_spec.server_groups, which gives the compile path's LayoutArgs its groups, makes on every row the
    groups server_groups_in_start_order makes (which disagreements holds to the groups slime made)."""
    for row in rows(SLIME_HEAD):
        a = row["args"]
        per_engine = a["rollout_num_gpus_per_engine"]
        spec = SimpleNamespace(sglang=SimpleNamespace(models=spec_models(a)),
                               rollout=SimpleNamespace(gpus_per_engine=per_engine))
        assert placement_spec.server_groups(cast(Spec, spec)) == \
            placement.server_groups_in_start_order(spec_models(a), per_engine), a


MUTATIONS = [
    # a placeholder's engines count in engine_offset (rollout.py 624b824 L1065), and its GPUs in gpu_offset (L1066)
    ("        engine_offset += count", "        engine_offset += 0 if group.worker_type == 'placeholder' else count"),
    ("        gpu_offset += group.num_gpus", "        gpu_offset += 0 if group.worker_type == 'placeholder' else "
     "group.num_gpus"),
    # the "virtual nodes" are counted within the group (L848-850: local_rank = rank - rank_offset)
    ("engine_offset + i - i % engines_per_node, index)", "engine_offset + i - (engine_offset + i) % engines_per_node, "
     "index)"),
    # a model's encoder groups are made first (L1069-1103)
    ('key=lambda g: g.worker_type != "encoder")', "key=lambda g: 0)"),
    # a group's GPUs per engine falls back to its model's (sglang_config.py:70)
    ("default = model.num_gpus_per_engine or rollout_num_gpus_per_engine", "default = rollout_num_gpus_per_engine"),
    # each group's engines span its own nodes_per_engine, of its own actors
    ("actors_per_engine = max(1, shape.num_gpus_per_engine // args.num_gpus_per_node)",
     "actors_per_engine = max(1, args.rollout_num_gpus_per_engine // args.num_gpus_per_node)"),
    ("members_of_group = [a for a in actors if a.group == index]", "members_of_group = list(actors)"),
    ("engines.append(Engine(len(engines), gpus, host, sizes, index))",
     "engines.append(Engine(len(engines), gpus, host, sizes, 0))"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("old", "new"), MUTATIONS)
def test_a_one_line_change_to_the_group_logic_is_caught(old: str, new: str) -> None:
    model = mutant(old, new)
    check: Callable[[Row], list[str]] = lambda row: disagreements(model, row)  # noqa: E731
    assert sum(1 for row in rows(SLIME_HEAD) if check(row)) >= 3
