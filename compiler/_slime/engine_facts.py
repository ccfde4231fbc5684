"""slime's own rollout-engine code, run on a table of layouts: the facts behind engine_layout.json.

For each layout (the physical nodes and their GPUs, where the rollout starts in slime's sorted placement
group, the rollout's GPUs, GPUs per engine, and whether ``--num-gpus-per-node`` is passed) this runs, at a
slime commit, the very code slime runs when it starts the rollout (slime/ray/rollout.py), taken out of
the file with ``ast`` (the module imports ray, torch and sglang):

* the statements of ``start_rollout_servers._make_group`` up to ``num_engines = ...`` (624b824 L1032-1035,
  fa3c990 L1134-1137): how many engine actors the default server group (``num_gpus = rollout_num_gpus``,
  rollout.py ``_resolve_sglang_config``) gets;
* ``ServerGroup.start_engines`` (624b824 L90-199, fa3c990 L137-247), which calls slime's own
  ``validate_server_group_gpu_indices`` (slime/ray/rollout_validation.py) and
  ``_allocate_rollout_engine_addr_and_ports_normal`` (624b824 L827-913, fa3c990 L930-1016).

Only ``ray`` and a few names the method reads are stand-ins (:class:`_Ray`): an engine actor is placed on
the bundle slime asks for, the placement group's sorted slots are laid on the nodes the way PACK fills
empty nodes of equal size (slot ``s`` is GPU ``s % gpus_per_node`` of node ``s // gpus_per_node``), and
``ray.get(engine._get_current_node_ip_and_free_port.remote())`` answers with the IP of the node the
engine was placed on. What each engine actor is then told (its host and its dist_init_addr) is recorded
as the node it names. Never imported by the compile path (compiler/_slime/model_facts.py calls it).
"""

from __future__ import annotations

import ast
import builtins
import itertools
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

ROLLOUT_PY = "slime/ray/rollout.py"
VALIDATION_PY = "slime/ray/rollout_validation.py"
SLIME_GPUS_PER_NODE = 8  # slime's --num-gpus-per-node default (slime/utils/arguments.py:61-69 at 624b824)
COLUMNS = ("rank", "gpu_index", "bundle", "base_gpu_id", "host", "dist_init_host")
_BUILTINS = {name: getattr(builtins, name) for name in ("int", "min", "max", "len", "range", "set", "dict", "list",
                                                        "str", "ValueError", "AssertionError", "isinstance", "any",
                                                        "all", "sum", "enumerate", "zip")}


class EngineFactsError(Exception):
    """slime's code is not where the harness looks for it; the message says what is missing."""


def _node_ip(node: int) -> str:
    return f"10.0.{node}.1"  # numeric order = node order: slime sorts the bundles by IP (placement_group.py)


class _Engine:
    """A stand-in for one engine actor's handle: where it was placed and what ``init`` was called with."""

    def __init__(self, bundle: int, node: int, kwargs: dict[str, Any]) -> None:
        self.bundle, self.node, self.kwargs = bundle, node, kwargs
        self.init_kwargs: dict[str, Any] | None = None
        self._get_current_node_ip_and_free_port = SimpleNamespace(remote=self._ip_and_port)
        self.init = SimpleNamespace(remote=self._init)
        self.get_url = SimpleNamespace(remote=self._url)  # an encoder's URL, read by start_rollout_servers (EPD)

    def _ip_and_port(self, start_port: int = 15000, consecutive: int = 1) -> tuple[str, int]:
        return _node_ip(self.node), start_port

    def _init(self, **kwargs: Any) -> None:
        self.init_kwargs = kwargs

    def _url(self) -> str:
        told = self.init_kwargs or {}
        return f"http://{told.get('host')}:{told.get('port')}"


class _Ray:
    """``ray`` as start_engines and the address allocation use it: ``remote(cls).options(...).remote(...)``
    places an actor on its bundle's node; ``get`` returns what a stand-in call returned."""

    def __init__(self, gpus_per_node: int) -> None:
        self.gpus_per_node = gpus_per_node
        self.engines: list[_Engine] = []

    def remote(self, cls: object) -> SimpleNamespace:
        def options(**options: Any) -> SimpleNamespace:
            bundle = options["scheduling_strategy"].placement_group_bundle_index

            def remote(*args: Any, **kwargs: Any) -> _Engine:
                engine = _Engine(bundle, bundle // self.gpus_per_node, kwargs)
                self.engines.append(engine)
                return engine
            return SimpleNamespace(remote=remote)
        return SimpleNamespace(options=options)

    @staticmethod
    def get(value: Any) -> Any:
        return value


class _Args(SimpleNamespace):
    """slime's args: an attribute the code reads that the harness did not set is an error, not a guess."""

    def __getattr__(self, name: str) -> Any:
        raise EngineFactsError(f"slime's engine code reads args.{name}, which the harness does not set")


def _function(tree: ast.Module, name: str, shown: str, *, within: str | None = None) -> ast.FunctionDef:
    scope: list[ast.stmt] = tree.body
    if within is not None:
        outer = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == within]
        if not outer:
            raise EngineFactsError(f"{shown}: no {within}")
        scope = [n for n in ast.walk(outer[0]) if isinstance(n, ast.stmt)]
    found = [n for n in scope if isinstance(n, ast.FunctionDef) and n.name == name]
    if not found:
        raise EngineFactsError(f"{shown}: no function {name}" + (f" in {within}" if within else ""))
    func = found[0]
    func.returns = None  # annotations name nothing the code needs
    for arg in (*func.args.args, *func.args.kwonlyargs):
        arg.annotation = None
    return func


def _run(funcs: list[ast.stmt], namespace: dict[str, Any], shown: str) -> None:
    exec(compile(ast.Module(body=funcs, type_ignores=[]), shown, "exec"), namespace)


def _engine_count_function(tree: ast.Module, shown: str) -> Callable[[Any, Any], int]:
    """``_make_group``'s statements up to ``num_engines = ...``, as ``count(group_cfg, args) -> num_engines``."""
    make_group = _function(tree, "_make_group", shown, within="start_rollout_servers")
    body: list[ast.stmt] = []
    for statement in make_group.body:
        if isinstance(statement, ast.Nonlocal):
            continue
        if not isinstance(statement, ast.Assign):
            raise EngineFactsError(f"{shown}:{statement.lineno}: _make_group computes something else before "
                                   "num_engines")
        body.append(statement)
        if any(isinstance(t, ast.Name) and t.id == "num_engines" for t in statement.targets):
            break
    else:
        raise EngineFactsError(f"{shown}: _make_group assigns no num_engines")
    count = _function(ast.parse("def _count(group_cfg, args):\n    return num_engines\n"), "_count", shown)
    count.body[:0] = body  # slime's statements, then the return of what they computed
    namespace: dict[str, Any] = {"__builtins__": _BUILTINS}
    _run([ast.fix_missing_locations(count)], namespace, shown)
    result: Callable[[Any, Any], int] = namespace["_count"]
    return result


class SlimeEngineCode:
    """slime's engine code of one commit, compiled once and run on many layouts."""

    def __init__(self, rollout_source: str, validation_source: str | None) -> None:
        tree = ast.parse(rollout_source, filename=ROLLOUT_PY)
        self.count = _engine_count_function(tree, ROLLOUT_PY)
        self.start_engines = _function(tree, "start_engines", ROLLOUT_PY, within="ServerGroup")
        self.allocate = _function(tree, "_allocate_rollout_engine_addr_and_ports_normal", ROLLOUT_PY)
        self.validation: list[ast.stmt] = []
        if validation_source is not None:
            self.validation = [_function(ast.parse(validation_source), "validate_server_group_gpu_indices",
                                         VALIDATION_PY)]

    def run(self, *, gpus_per_node: int, rollout_offset: int, rollout_num_gpus: int, gpus_per_engine: int,
            num_gpus_per_node: int) -> dict[str, Any]:
        """What slime does with one layout: the engine count, each engine actor's slot and the nodes it is told."""
        ray = _Ray(gpus_per_node)
        namespace: dict[str, Any] = {
            "__builtins__": _BUILTINS, "ray": ray, "logger": SimpleNamespace(info=lambda *a, **k: None),
            "SGLangEngine": object, "NOSET_VISIBLE_DEVICES_ENV_VARS_LIST": [],
            "PlacementGroupSchedulingStrategy": SimpleNamespace, "add_default_ray_env_vars": lambda env: env,
            "os": SimpleNamespace(environ={}),
        }
        _run([*self.validation, self.allocate, self.start_engines], namespace, ROLLOUT_PY)
        args = _Args(num_gpus_per_node=num_gpus_per_node, rollout_num_gpus=rollout_num_gpus,
                     rollout_num_gpus_per_engine=gpus_per_engine, debug_train_only=False, sglang_dp_size=1)
        num_engines = self.count(SimpleNamespace(num_gpus=rollout_num_gpus, num_gpus_per_engine=gpus_per_engine),
                                 args)
        # the rollout's part of the placement group: the sorted slots from rollout_offset (placement_group.py)
        slots = list(range(rollout_offset, rollout_offset + rollout_num_gpus))
        group = SimpleNamespace(args=args, pg=(None, slots, [s % gpus_per_node for s in slots]),
                                all_engines=[None] * num_engines, num_gpus_per_engine=gpus_per_engine,
                                num_new_engines=0, worker_type="regular", rank_offset=0, gpu_offset=0,
                                sglang_overrides={}, router_ip=None, router_port=None)
        error = None
        try:
            namespace["start_engines"](group)
        except ValueError as exc:  # validate_server_group_gpu_indices refused the layout
            error = str(exc).split(":")[0]
        engines = [engine_row(engine, rollout_offset) for engine in ray.engines]
        return {"num_engines": num_engines, "error": error, "engines": engines}


def engine_row(engine: _Engine, rollout_offset: int) -> list[Any]:
    """One engine actor as a row of :data:`COLUMNS`: its rank, slot in the rollout and in the group, base GPU, and
    the nodes its host and its dist_init_addr name."""
    told = engine.init_kwargs or {}
    dist = told.get("dist_init_addr")
    return [engine.kwargs["rank"], engine.bundle - rollout_offset, engine.bundle, engine.kwargs["base_gpu_id"],
            _node_of(told.get("host")), _node_of(dist.rsplit(":", 1)[0] if dist else None)]


def _node_of(ip: str | None) -> int | None:
    return None if ip is None else int(ip.split(".")[2])


def layouts() -> Iterator[dict[str, int | bool]]:
    """The table: 1, 2 or 4 nodes of 4 or 8 GPUs; the rollout from slot 0, 4, 8, ... with 2-32 GPUs that fit;
    1, 2, 3, 4, 8 or 16 GPUs per engine; --num-gpus-per-node passed (the real node size) or not (slime's 8)."""
    for per_node, nodes in itertools.product((4, 8), (1, 2, 4)):
        cluster = per_node * nodes
        for offset, rollout in itertools.product(range(0, cluster, 4), (2, 4, 6, 8, 12, 16, 24, 32)):
            if offset + rollout > cluster:
                continue
            for per_engine, passed in itertools.product((1, 2, 3, 4, 8, 16), (True, False)):
                if passed and per_node == SLIME_GPUS_PER_NODE:
                    continue  # passing slime's default is not passing it
                yield {"nodes": nodes, "gpus_per_node": per_node, "rollout_offset": offset, "rollout_num_gpus": rollout,
                       "gpus_per_engine": per_engine, "num_gpus_per_node_passed": passed}


def engine_layouts(rollout_source: str, validation_source: str | None) -> list[dict[str, Any]]:
    """slime's engine code of one commit run on every layout of :func:`layouts`."""
    code = SlimeEngineCode(rollout_source, validation_source)
    rows = []
    for layout in layouts():
        slime_gpn = int(layout["gpus_per_node"]) if layout["num_gpus_per_node_passed"] else SLIME_GPUS_PER_NODE
        rows.append({"args": layout, **code.run(gpus_per_node=int(layout["gpus_per_node"]),
                                                 rollout_offset=int(layout["rollout_offset"]),
                                                 rollout_num_gpus=int(layout["rollout_num_gpus"]),
                                                 gpus_per_engine=int(layout["gpus_per_engine"]),
                                                 num_gpus_per_node=slime_gpn)})
    return rows
