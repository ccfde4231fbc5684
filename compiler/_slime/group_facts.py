"""slime's own rollout start-up on server-group layouts (--sglang-config): the facts behind engine_groups_layout.json.

:mod:`.engine_facts` runs slime's engine code on slime's default server group; this runs, on a table of
``--sglang-config`` layouts (1-2 models of 1-3 server groups), the whole of slime's ``start_rollout_servers``
(slime/ray/rollout.py, 624b824 L983-1127, fa3c990 L1089-1229), taken out of the file with ``ast`` as the
engine harness does, with slime's own

* ``_resolve_sglang_config`` (624b824 L1129-1153), ``_compute_rollout_offset`` and ``_compute_megatron_num_gpus``;
* ``ServerGroup`` (the dataclass, its ``start_engines``: 624b824 L90-199) and ``RolloutServer``;
* ``_allocate_rollout_engine_addr_and_ports_normal`` (624b824 L827-913), ``validate_server_group_gpu_indices``
  (slime/ray/rollout_validation.py);
* ``SglangConfig``, ``ModelConfig`` (its ``resolve``: a group's num_gpus_per_engine falls back to the model's, then
  to --rollout-num-gpus-per-engine) and ``ServerGroupConfig`` (slime/backends/sglang_utils/sglang_config.py),
  ``SglangConfig.from_yaml`` reading the layout's models as its ``yaml.safe_load`` would.

So nothing of the loop over models and groups is restated here: the order groups are made in (a model's encoder
groups first under EPD), ``_make_group``'s ``gpu_offset`` / ``engine_offset`` (shared by all models, advanced by
placeholders too), the port cursors passed from group to group and a prefill group's bootstrap port are slime's.
Stand-ins: ``ray`` and the engine actor (:mod:`.engine_facts`: an actor lands on the node of its bundle, PACK on
empty nodes of the real size, and names that node's IP), ``_start_router`` (no router is started), ``logger``,
and ``ServerGroup`` wrapped to record each group slime makes. Never imported by the compile path
(compiler/_slime/model_facts.py calls it).
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import itertools
import random
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from .engine_facts import (
    _BUILTINS,
    COLUMNS,
    ROLLOUT_PY,
    SLIME_GPUS_PER_NODE,
    VALIDATION_PY,
    EngineFactsError,
    _Args,
    _function,
    _Ray,
    _run,
    engine_row,
)

SGLANG_CONFIG_PY = "slime/backends/sglang_utils/sglang_config.py"
ENGINE_COLUMNS = (*COLUMNS, "group")
# each server group slime made, in the order it made them (the index an engine's "group" column names); "model"
# is the index of its model in the layout's models, "engines" the ranks of its engines' first actors (.engines)
GROUP_COLUMNS = ("model", "worker_type", "gpu_offset", "rank_offset", "num_gpus_per_engine", "actors", "engines")
WORKER_TYPES = ("regular", "prefill", "decode", "placeholder", "encoder")  # sglang_config.py:37-40 (valid_types)
POLICY = "/ckpt/policy"  # args.hf_checkpoint: the first model serves it (ModelConfig.resolve's model_path default)
_CLASS_BUILTINS = {**_BUILTINS, **{n: getattr(builtins, n) for n in ("__build_class__", "property", "staticmethod",
                                                                      "getattr", "hasattr")}}


def _class(tree: ast.Module, name: str, shown: str) -> ast.ClassDef:
    found = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    if not found:
        raise EngineFactsError(f"{shown}: no class {name}")
    return found[0]


class _Yaml:
    """``yaml`` as SglangConfig.from_yaml uses it: ``safe_load`` of the open file gives the layout's config."""

    def __init__(self) -> None:
        self.data: dict[str, Any] = {}

    def safe_load(self, _file: object) -> dict[str, Any]:
        return self.data


class _File:
    def __enter__(self) -> _File:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class SlimeGroupCode:
    """slime's rollout start-up of one commit, compiled once and run on many server-group layouts."""

    def __init__(self, rollout_source: str, validation_source: str | None, config_source: str) -> None:
        tree = ast.parse(rollout_source, filename=ROLLOUT_PY)
        funcs: list[ast.stmt] = [_function(tree, name, ROLLOUT_PY) for name in (
            "_allocate_rollout_engine_addr_and_ports_normal", "_compute_rollout_offset", "_compute_megatron_num_gpus",
            "_resolve_sglang_config", "start_rollout_servers")]
        if validation_source is not None:
            funcs.insert(0, _function(ast.parse(validation_source), "validate_server_group_gpu_indices",
                                      VALIDATION_PY))
        self.rollout = [_class(tree, "ServerGroup", ROLLOUT_PY), _class(tree, "RolloutServer", ROLLOUT_PY), *funcs]
        config_tree = ast.parse(config_source, filename=SGLANG_CONFIG_PY)
        self.config: list[ast.stmt] = [_class(config_tree, name, SGLANG_CONFIG_PY)
                       for name in ("ServerGroupConfig", "ModelConfig", "SglangConfig")]

    def run(self, *, gpus_per_node: int, rollout_offset: int, num_gpus_per_node: int, rollout_num_gpus_per_engine: int,
            models: list[dict[str, Any]]) -> dict[str, Any]:
        """What slime does with one layout: the groups it makes, each engine actor's slot and the nodes it is told."""
        ray, yaml = _Ray(gpus_per_node), _Yaml()
        yaml.data = {"sglang": [{**m, "server_groups": [dict(g) for g in m["server_groups"]]} for m in models]}
        quiet = SimpleNamespace(info=lambda *a, **k: None, warning=lambda *a, **k: None)
        config_ns: dict[str, Any] = {"__builtins__": {**_CLASS_BUILTINS, "open": lambda *a, **k: _File()},
                                     "__name__": __name__, "dataclasses": dataclasses, "yaml": yaml,
                                     "logger": quiet}
        _run(self.config, config_ns, SGLANG_CONFIG_PY)
        made: list[Any] = []
        routers = itertools.count()  # one router a model, in order: a group's router_port is its model's index
        namespace: dict[str, Any] = {
            "__builtins__": _CLASS_BUILTINS, "__name__": __name__, "dataclasses": dataclasses, "Any": Any,
            "ray": ray, "logger": quiet, "SGLangEngine": object, "NOSET_VISIBLE_DEVICES_ENV_VARS_LIST": [],
            "PlacementGroupSchedulingStrategy": SimpleNamespace, "add_default_ray_env_vars": lambda env: env,
            "os": SimpleNamespace(environ={}), "_start_router": lambda args, **kw: ("10.0.255.1", next(routers)),
            **{name: config_ns[name] for name in ("ServerGroupConfig", "ModelConfig", "SglangConfig")},
        }
        _run(self.rollout, namespace, ROLLOUT_PY)
        server_group = namespace["ServerGroup"]

        def record(**kwargs: Any) -> Any:  # slime's ServerGroup, each one slime makes recorded in order
            made.append(server_group(**kwargs))
            return made[-1]
        namespace["ServerGroup"] = record
        rollout_num_gpus = sum(g["num_gpus"] for m in models for g in m["server_groups"])
        args = _Args(num_gpus_per_node=num_gpus_per_node, rollout_num_gpus=rollout_num_gpus,
                     rollout_num_gpus_per_engine=rollout_num_gpus_per_engine, debug_train_only=False,
                     debug_rollout_only=False, colocate=False, rollout_external=False, offload_rollout=False,
                     actor_num_nodes=1, actor_num_gpus_per_node=rollout_offset, sglang_dp_size=1,
                     sglang_config="sglang_config.yaml", hf_checkpoint=POLICY, sglang_router_ip=None,
                     sglang_router_port=None)
        # the rollout's part of the placement group: the sorted slots from rollout_offset (placement_group.py)
        slots = list(range(rollout_offset, rollout_offset + rollout_num_gpus))
        error = None
        try:
            namespace["start_rollout_servers"](args, (None, slots, [s % gpus_per_node for s in slots]))
        except ValueError as exc:  # validate_server_group_gpu_indices refused a group
            error = str(exc).split(":")[0]
        group_of = {id(e): index for index, g in enumerate(made) for e in g.all_engines if e is not None}
        rank_of = {id(e): e.kwargs["rank"] for e in ray.engines}
        groups = [[g.router_port, g.worker_type, g.gpu_offset, g.rank_offset, g.num_gpus_per_engine,
                   len(g.all_engines), [rank_of[id(e)] for e in g.engines if e is not None]] for g in made]
        engines = [[*engine_row(engine, rollout_offset), group_of[id(engine)]] for engine in ray.engines]
        return {"error": error, "groups": groups, "engines": engines}


def _models(rng: random.Random, rollout_per_engine: int) -> list[dict[str, Any]]:
    """1-2 models of 1-3 server groups of any worker type; a group's num_gpus_per_engine given or not (and the
    model's), its GPUs mostly whole engines (of the GPUs per engine it resolves to), sometimes any 1-16."""
    models = []
    for index in range(rng.choice((1, 1, 2))):
        model: dict[str, Any] = {"name": ("default", "ref")[index]}
        if index:
            model["model_path"] = "/ckpt/ref"
        model_pe = rng.choice((None, None, 1, 2, 4, 8))
        if model_pe is not None:
            model["num_gpus_per_engine"] = model_pe
        groups = []
        for _ in range(rng.choice((1, 2, 3))):
            group: dict[str, Any] = {"worker_type": rng.choice(WORKER_TYPES)}
            per_engine = rng.choice((None, None, 1, 2, 3, 4, 8, 16))
            resolved = per_engine or model_pe or rollout_per_engine
            whole = [resolved * k for k in (1, 2, 3) if resolved * k <= 16]
            group["num_gpus"] = rng.choice(whole) if whole and rng.random() < 0.7 else rng.randint(1, 16)
            if per_engine is not None:
                group["num_gpus_per_engine"] = per_engine
            groups.append(group)
        models.append({**model, "server_groups": groups})
    return models


def _layout(per_node: int, passed: bool, offset: int, per_engine: int, models: list[dict[str, Any]]
            ) -> dict[str, Any]:
    total = offset + sum(g["num_gpus"] for m in models for g in m["server_groups"])
    return {"nodes": -(-total // per_node), "gpus_per_node": per_node, "rollout_offset": offset,
            "num_gpus_per_node_passed": passed, "rollout_num_gpus_per_engine": per_engine, "models": models}


def group_layouts(sampled: int = 320) -> Iterator[dict[str, Any]]:
    """The table. First, groups that start mid-node: a regular group of 1 to G-1 one-GPU engines, then a group of
    2G GPUs (regular, prefill or decode) of 1, 2 or 4 GPUs per engine, on nodes of G = 4 or 8 GPUs, the rollout from
    slot 0 or 4: the later group's "virtual nodes" (slime counts them from the group's first engine) straddle the
    physical ones. Then ``sampled`` layouts drawn with a fixed seed: nodes of 4 or 8 GPUs, --num-gpus-per-node passed
    (the real size) or not (slime's 8; passing 8 is not passing it), the rollout from slot 0, 4 or 8,
    --rollout-num-gpus-per-engine 1, 2, 4 or 8, and :func:`_models`. The cluster is the nodes the layout needs."""
    for per_node, passed, offset, kind, per_engine in itertools.product(
            (4, 8), (True, False), (0, 4), ("regular", "prefill", "decode"), (1, 2, 4)):
        if passed and per_node == SLIME_GPUS_PER_NODE:
            continue
        for first in range(1, per_node):
            yield _layout(per_node, passed, offset, 1, [{"name": "default", "server_groups": [
                {"worker_type": "regular", "num_gpus": first},
                {"worker_type": kind, "num_gpus": 2 * per_node, "num_gpus_per_engine": per_engine}]}])
    rng = random.Random(14)  # acrl issue 14; random.Random's draws from an int seed are stable across Pythons
    seen: set[str] = set()
    while len(seen) < sampled:
        per_node = rng.choice((4, 8))
        passed = per_node != SLIME_GPUS_PER_NODE and rng.random() < 0.5
        offset, per_engine = rng.choice((0, 4, 8)), rng.choice((1, 2, 4, 8))
        layout = _layout(per_node, passed, offset, per_engine, _models(rng, per_engine))
        key = repr(layout)
        if key not in seen:
            seen.add(key)
            yield layout


def engine_group_layouts(rollout_source: str, validation_source: str | None, config_source: str
                         ) -> list[dict[str, Any]]:
    """slime's rollout start-up of one commit run on every layout of :func:`group_layouts`."""
    code = SlimeGroupCode(rollout_source, validation_source, config_source)
    rows = []
    for layout in group_layouts():
        per_node = int(layout["gpus_per_node"])
        rows.append({"args": layout, **code.run(
            gpus_per_node=per_node, rollout_offset=int(layout["rollout_offset"]),
            num_gpus_per_node=per_node if layout["num_gpus_per_node_passed"] else SLIME_GPUS_PER_NODE,
            rollout_num_gpus_per_engine=int(layout["rollout_num_gpus_per_engine"]), models=layout["models"])})
    return rows
