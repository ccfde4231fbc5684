"""Where slime puts things on the GPUs: a pure model written after slime's own code (issue 13).

slime makes ONE placement group of 1-GPU bundles (``{"GPU": 1, "CPU": 1}``, strategy PACK), sorts its
bundles by (node IP, GPU id), gives the actor (and the critic: the same slots, slime/utils/arguments.py:
1911-1912) the first ``actor_num_nodes x actor_num_gpus_per_node`` of them and the rollout engines the
slots from ``rollout_offset`` on (slime/ray/placement_group.py: create_placement_groups). How big that
group is and where the rollout starts is ``_get_placement_group_layout``, placement_group.py:100-117 at
both commits acrl targets, mirrored by :func:`group_layout`. The two commits differ in one case: an
external rollout under ``--debug-rollout-only`` asks for the actor's GPUs at 624b824 (L107-108) and for
none at fa3c990. tests/test_placement.py compares :func:`group_layout`, and tests/test_engine_layout.py
:func:`engine_slots` and :func:`place`'s engines, with slime's own code, run by the project's facts generator
(compiler/_slime/model_facts.py, engine_facts.py) on tables of layouts at each commit (tests/data/slime/<commit>/).

The rest of the model (:func:`place`) lays the sorted slots on nodes the way PACK fills an empty cluster
of equal nodes (slot ``s`` is GPU ``s % gpus_per_node`` of node ``s // gpus_per_node``), numbers the
actor's ranks into Megatron's groups and maps each SGLang engine to its GPUs and to the node whose
address slime gives it (slime/ray/rollout.py, ``_allocate_rollout_engine_addr_and_ports_normal``).
What slime cannot place is said by :mod:`.placement_rules`; :mod:`.placement_spec` reads a spec.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import attrs

from .._spec.server_groups import SglangModel
from .._spec.tables import TOOLKIT_SLIME_COMMIT as SLIME_PIN  # agentcore-rl-toolkit's pin

SLIME_HEAD = "624b824a898ab0ec1fcb4d373004c7f3852bf515"  # the slime commit acrl targets
# slime's --num-gpus-per-node default (slime/utils/arguments.py:61-69 at 624b824): the node size slime
# assumes when it maps rollout engines to nodes; never checked against the real nodes.
SLIME_GPUS_PER_NODE = 8


class GroupShape(NamedTuple):
    """One server group of --sglang-config as the placement reads it (slime/backends/sglang_utils/sglang_config.py:
    ServerGroupConfig after ModelConfig.resolve): its worker type, GPUs and GPUs per engine (resolved)."""

    worker_type: str
    num_gpus: int
    num_gpus_per_engine: int
    model: str = "default"
    overrides: tuple[tuple[str, object], ...] = ()  # ServerArgs fields, keys as slime normalizes them ('-' -> '_')


class LayoutArgs(NamedTuple):
    """The slime arguments the placement reads (their slime names, after slime_validate_args)."""

    actor_num_nodes: int
    actor_num_gpus_per_node: int
    rollout_num_gpus: int
    colocate: bool = False
    debug_train_only: bool = False
    debug_rollout_only: bool = False
    rollout_external: bool = False
    num_gpus_per_node: int = SLIME_GPUS_PER_NODE
    rollout_num_gpus_per_engine: int = 1
    distributed_post: bool = False  # --use-distributed-post: HTTP actors per node = num_gpus_per_node
    # --sglang-config's server groups in the order slime makes them (server_groups_in_start_order); () is slime's
    # default: one regular group of rollout_num_gpus (rollout.py _resolve_sglang_config, 624b824 L1129-1153)
    server_groups: tuple[GroupShape, ...] = ()


class GroupLayout(NamedTuple):
    """slime's placement group: ``num_gpus`` 1-GPU bundles; the rollout's slots start at ``rollout_offset``."""

    num_gpus: int
    rollout_offset: int


def group_layout(args: LayoutArgs, *, slime_commit: str = SLIME_HEAD) -> GroupLayout:
    """``_get_placement_group_layout(args)`` of slime at ``slime_commit`` (placement_group.py:100-117)."""
    actor = args.actor_num_nodes * args.actor_num_gpus_per_node
    if args.debug_train_only:
        return GroupLayout(actor, 0)
    if args.rollout_external:
        if args.debug_rollout_only:
            # 624b824 L107-108 keeps the actor's GPUs; fa3c990 L107-108 asks for none
            return GroupLayout(0 if slime_commit == SLIME_PIN else actor, 0)
        return GroupLayout(actor, actor)
    if args.debug_rollout_only:
        return GroupLayout(args.rollout_num_gpus, 0)
    if args.colocate:
        return GroupLayout(max(actor, args.rollout_num_gpus), 0)
    return GroupLayout(actor + args.rollout_num_gpus, actor)


class EngineSlots(NamedTuple):
    """One Ray actor of a rollout engine, as slime makes it: ``rank`` (rollout.py:129), its first slot in
    the sorted placement group (``gpu_index``, rollout.py:134) and how many slots from there it uses; and
    ``addressed_by``: the rank whose node slime takes this actor's host and ports from (rollout.py:858-868:
    one address per "virtual node" of ``num_gpus_per_node // gpus_per_engine`` actors)."""

    rank: int
    gpu_index: int
    num_gpus: int
    addressed_by: int
    group: int = 0  # the index of its server group in LayoutArgs.server_groups (0: the default group)


def groups_of(args: LayoutArgs) -> tuple[GroupShape, ...]:
    """The server groups slime makes: --sglang-config's, else its one regular group of the rollout's GPUs."""
    return args.server_groups or (GroupShape("regular", args.rollout_num_gpus, args.rollout_num_gpus_per_engine),)


def server_groups_in_start_order(models: Mapping[str, SglangModel], rollout_num_gpus_per_engine: int
                                 ) -> tuple[GroupShape, ...]:
    """[sglang.models]' server groups in the order slime's ``start_rollout_servers`` makes them (slime/ray/rollout.py
    624b824 L1015-1115, fa3c990 L1117-1217): model by model in the config's order; a model with an encoder group
    (EPD: ModelConfig.has_encoder_disaggregation) makes its encoder groups first (phase 1, 624b824 L1069-1085), then
    its other groups in order (phase 2, L1087-1103); any other model its groups in order (L1105-1111). Each group's
    num_gpus_per_engine as ``ModelConfig.resolve`` gives it (sglang_config.py:68-74 at both commits): its own, else
    the model's, else --rollout-num-gpus-per-engine. tests/test_engine_groups_layout.py holds it to slime's code."""
    out: list[GroupShape] = []
    for name, model in models.items():
        default = model.num_gpus_per_engine or rollout_num_gpus_per_engine
        in_order = sorted(model.server_groups, key=lambda g: g.worker_type != "encoder")  # stable: encoders first
        out += (GroupShape(g.worker_type, g.num_gpus, g.num_gpus_per_engine or default, name,
                           tuple((k.replace("-", "_"), v) for k, v in g.overrides.items())) for g in in_order)
    return tuple(out)


def engine_slots(args: LayoutArgs, rollout_offset: int) -> tuple[EngineSlots, ...]:
    """The rollout's engine actors, as slime makes them for its default server group (``num_gpus =
    rollout_num_gpus``, rollout.py:1129-1153 at 624b824, 1231-1255 at fa3c990): ``num_engines = num_gpus //
    min(gpus_per_engine, num_gpus_per_node)`` (floored: rollout.py:1034-1035 at 624b824, 1136-1137 at fa3c990),
    actor ``i`` from slot ``rollout_offset + gpu_offset + i * min(...)`` (``gpu_index``: 624b824 L107, L133;
    fa3c990 L154, L180; ``gpu_offset`` is 0 for the one group), addressed by the first actor of its "virtual
    node" of ``max(1, num_gpus_per_node // gpus_per_engine)`` actors (``_allocate_rollout_engine_addr_and_ports_
    normal``, 624b824 L843-911, fa3c990 L946-1014). slime's own ``validate_server_group_gpu_indices``
    (rollout_validation.py at both commits) accepts every such layout: the actors never need more slots than the
    rollout has. Empty under --debug-train-only (624b824 L103, fa3c990 L150) and for an external rollout (no
    local engines: 624b824 L1001-1002, fa3c990 L1103-1104). tests/test_engine_layout.py holds this and
    :func:`place`'s engines to slime's own code run on 708 layouts at both commits."""
    if args.debug_train_only or args.rollout_external:
        return ()
    out: list[EngineSlots] = []
    gpu_offset = engine_offset = 0
    # several server groups (--sglang-config): _make_group's gpu_offset and engine_offset run on over the groups of
    # every model (rollout.py 624b824 L1007-1008, L1061-1062; a placeholder's count too, with no actors), and each
    # group's addresses are allocated apart, by rank within the group (L848-850: local_rank = rank - rank_offset)
    for index, group in enumerate(groups_of(args)):
        per_engine, per_node = group.num_gpus_per_engine, args.num_gpus_per_node
        on_node = min(per_engine, per_node)
        engines_per_node = max(1, per_node // per_engine)
        count = group.num_gpus // on_node
        if group.worker_type != "placeholder":
            out += (EngineSlots(engine_offset + i, rollout_offset + gpu_offset + i * on_node, on_node,
                                engine_offset + i - i % engines_per_node, index) for i in range(count))
        gpu_offset += group.num_gpus
        engine_offset += count
    return tuple(out)


class Gpu(NamedTuple):
    """One GPU: node ``node`` (nodes in slime's sort order: by IP) and its local index ``gpu``."""

    node: int
    gpu: int


class ActorRank(NamedTuple):
    """A training rank, its GPU and its place in Megatron's groups (order tp-cp-ep-dp-pp, Megatron's default:
    megatron/core/parallel_state.py, initialize_model_parallel(order="tp-cp-ep-dp-pp"))."""

    rank: int
    gpu: Gpu
    tp: int
    cp: int
    dp: int
    pp: int


class EngineParallel(NamedTuple):
    """One SGLang engine's sizes as slime starts it: ``tp = gpus_per_engine // pp`` (slime/backends/sglang_utils/
    sglang_engine.py:521-522 and 543-546 at 624b824, 580-581 at fa3c990), SGLang's dp and ep as given. With
    --sglang-enable-dp-attention and dp > 1 the attention runs data-parallel inside the engine: SGLang asserts
    ``tp_size % dp_size == 0`` (sglang python/sglang/srt/server_args.py, ``_handle_data_parallelism``, which also
    turns DP attention off when dp is 1) and splits the engine's TP ranks into dp attention groups of
    ``attn_tp_size = tp_size // dp_size`` (python/sglang/srt/layers/dp_attention.py,
    ``compute_dp_attention_world_info``): the attention heads are sharded over ``attention_tp``, not ``tp``."""

    gpus: int
    tp: int
    pp: int
    dp: int
    ep: int
    dp_attention: bool

    @property
    def attention_dp(self) -> int:
        return self.dp if self.dp_attention and self.dp > 1 else 1

    @property
    def attention_tp(self) -> int:
        return max(1, self.tp // self.attention_dp)


@attrs.frozen
class Engine:
    """One SGLang engine: its GPUs (over several nodes when it is bigger than a node), the node whose
    address slime gives it, and its SGLang sizes."""

    index: int
    gpus: tuple[Gpu, ...]
    host_node: int
    sizes: EngineParallel
    group: int = 0  # its server group (LayoutArgs.server_groups; 0: slime's default group)

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(sorted({g.node for g in self.gpus}))


class Parallel(NamedTuple):
    """Megatron's sizes for the actor and SGLang's for each engine."""

    tensor: int = 1
    pipeline: int = 1
    context: int = 1
    sglang_pp: int = 1
    sglang_dp: int = 1
    sglang_ep: int = 1
    sglang_dp_attention: bool = False

    def engine(self, gpus_per_engine: int, overrides: tuple[tuple[str, object], ...] = ()) -> EngineParallel:
        """The sizes of one SGLang engine of ``gpus_per_engine`` GPUs; a server group's ``overrides`` win over the
        --sglang-* flags as slime applies them (sglang_engine.py:520-522 for pp_size and tp_size, :585-599 for the
        rest, at 624b824)."""
        given = dict(overrides)

        def size(key: str, default: int) -> int:
            value = given.get(key, default)
            return value if isinstance(value, int) and not isinstance(value, bool) else default

        pp = max(1, size("pp_size", self.sglang_pp))
        tp = max(1, size("tp_size", gpus_per_engine // pp))
        dp_attention = given.get("enable_dp_attention", self.sglang_dp_attention)
        return EngineParallel(gpus_per_engine, tp, pp, max(1, size("dp_size", self.sglang_dp)),
                              max(1, size("ep_size", self.sglang_ep)), dp_attention is True)


class Placement(NamedTuple):
    """Which GPU of which node does what, for one slime run.

    ``nodes`` x ``gpus_per_node`` is the physical cluster (a local head is one node unless workers join);
    ``group`` is slime's placement group; ``actor`` the training ranks (slots ``[0, actor)``); ``engines``
    the local SGLang engines; ``rollout_gpus`` the rollout's GPUs as slime counts them (``--rollout-num-gpus``
    after its defaults), ``external`` when the engines run elsewhere."""

    args: LayoutArgs
    nodes: int
    gpus_per_node: int
    local_head: bool
    group: GroupLayout
    actor: tuple[ActorRank, ...]
    engines: tuple[Engine, ...]
    engine_actors: tuple[EngineSlots, ...]
    external: bool
    parallel: Parallel

    @property
    def cluster_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def actor_gpus(self) -> int:
        return len(self.actor)

    @property
    def rollout_gpus(self) -> int:
        return self.args.rollout_num_gpus

    @property
    def fits(self) -> bool:
        """Whether the placement group fits on the cluster (PACK on empty nodes)."""
        return self.group.num_gpus <= self.cluster_gpus

    def slot(self, index: int) -> Gpu:
        """The GPU of sorted slot ``index``: PACK fills empty nodes of equal size in order."""
        return Gpu(index // self.gpus_per_node, index % self.gpus_per_node)

    @property
    def node_gpus(self) -> tuple[int, ...]:
        """GPUs of the placement group on each node (what `ray start --num-gpus` must advertise there)."""
        total = self.group.num_gpus
        return tuple(max(0, min(self.gpus_per_node, total - n * self.gpus_per_node)) for n in range(self.nodes))

    @property
    def rollout_slots(self) -> range:
        if self.external or self.args.debug_train_only:
            return range(0)
        start = self.group.rollout_offset
        return range(start, start + self.args.rollout_num_gpus)

    @property
    def engine_parallel(self) -> EngineParallel:
        """The sizes of the engines of slime's default server group (gpus_per_engine and the --sglang-* flags)."""
        return self.parallel.engine(self.args.rollout_num_gpus_per_engine)

    @property
    def groups(self) -> tuple[GroupShape, ...]:
        """The rollout's server groups: --sglang-config's, else slime's one regular group."""
        return groups_of(self.args)

    def group_parallel(self) -> tuple[tuple[GroupShape, EngineParallel], ...]:
        """Each server group that starts engines and the sizes of its engines (placeholders start none)."""
        return tuple((g, self.parallel.engine(g.num_gpus_per_engine, g.overrides)) for g in self.groups
                     if g.worker_type != "placeholder" and self.engine_actors)

    @property
    def engine_gpus(self) -> int:
        return sum(len(e.gpus) for e in self.engines)

    @property
    def idle_rollout_gpus(self) -> int:
        """Rollout GPUs no engine uses: slime floors the engine count (rollout.py:1034)."""
        return len(self.rollout_slots) - sum(a.num_gpus for a in self.engine_actors)

    @property
    def num_gpus_per_node_flag(self) -> int | None:
        """The --num-gpus-per-node train.sh passes: the real node size where slime's default (8) would change what
        slime does; None where it is 8, or where omitting it changes nothing. Every use of args.num_gpus_per_node at
        624b824 gives the same values with 8 as with the real size G when G < 8, the run is one node, at most one
        engine actor no larger than the node, and no --use-distributed-post: the engines (rollout.py:71, :107, :843,
        :896, :1034 and sglang_engine.py:22-27, :523) lie on node 0 with the same slots (tests/test_engine_layout.py
        compares the rows of slime's own engine code with and without the flag), engine rank 0's seed is ``seed + 0 *
        num_gpus_per_node`` (sglang_engine.py:530), the training ranks are below G so ``RANK % 8 == RANK % G``
        (train_actor.py:83; actor.py:88-89 loads the config once per rank either way), and http_utils.py:270-276
        makes num_gpus_per_node HTTP actors per node only under --use-distributed-post (http_utils.py:229)."""
        node = self.gpus_per_node
        matters = node_size_matters(node, nodes=self.nodes if self.fits else 2,
                                    gpus_per_engine=self.args.rollout_num_gpus_per_engine,
                                    engine_actors=len(self.engine_actors), distributed_post=self.args.distributed_post)
        return node if matters else None

    def roles(self) -> dict[Gpu, list[str]]:
        """Each GPU of the cluster and what runs on it ("actor 3", "engine 1"), in node order."""
        out: dict[Gpu, list[str]] = {Gpu(n, g): [] for n in range(self.nodes) for g in range(self.gpus_per_node)}
        for r in self.actor:
            out.setdefault(r.gpu, []).append(f"actor {r.rank}")
        for e in self.engines:
            for g in e.gpus:
                out.setdefault(g, []).append(f"engine {e.index}")
        return out


def node_size_matters(gpus_per_node: int, *, nodes: int, gpus_per_engine: int, engine_actors: int,
                      distributed_post: bool) -> bool:
    """Whether slime does anything differently told ``gpus_per_node`` than with its default 8
    (:attr:`Placement.num_gpus_per_node_flag` says why): not for 8, nor for one node of fewer GPUs with at most one
    engine actor, no engine larger than the node, and no --use-distributed-post."""
    if gpus_per_node == SLIME_GPUS_PER_NODE:
        return False
    return (gpus_per_node > SLIME_GPUS_PER_NODE or nodes > 1 or gpus_per_engine > gpus_per_node or engine_actors > 1
            or distributed_post)


def place(args: LayoutArgs, *, nodes: int, local_head: bool, parallel: Parallel | None = None,
          slime_commit: str = SLIME_HEAD, gpus_per_node: int | None = None) -> Placement:
    """The whole placement of a run on ``nodes`` nodes of ``gpus_per_node`` GPUs (default: the node size slime
    is told, ``args.num_gpus_per_node``; they differ when --num-gpus-per-node is not the real node size)."""
    group = group_layout(args, slime_commit=slime_commit)
    node_size = gpus_per_node or args.num_gpus_per_node

    def slot(index: int) -> Gpu:
        return Gpu(index // node_size, index % node_size)

    actor_count = 0 if args.debug_rollout_only else args.actor_num_nodes * args.actor_num_gpus_per_node
    parallel = parallel or Parallel()
    tp, cp, pp = parallel.tensor, parallel.context, parallel.pipeline
    dp = max(1, actor_count // max(1, tp * cp * pp))
    actor = tuple(ActorRank(rank, slot(rank), rank % tp, rank // tp % cp, rank // (tp * cp) % dp,
                            rank // (tp * cp * dp)) for rank in range(actor_count))

    actors = engine_slots(args, group.rollout_offset)
    by_rank = {a.rank: a for a in actors}
    engines: list[Engine] = []
    for index, shape in enumerate(groups_of(args)):
        members_of_group = [a for a in actors if a.group == index]
        # an engine larger than slime's node is one actor per (slime's) node: ServerGroup.nodes_per_engine
        # (624b824 L69-71)
        actors_per_engine = max(1, shape.num_gpus_per_engine // args.num_gpus_per_node)
        sizes = parallel.engine(shape.num_gpus_per_engine, shape.overrides)
        for k in range(len(members_of_group) // actors_per_engine):
            members = members_of_group[k * actors_per_engine:(k + 1) * actors_per_engine]
            gpus = tuple(slot(a.gpu_index + i) for a in members for i in range(a.num_gpus))
            host = slot(by_rank[members[0].addressed_by].gpu_index).node
            engines.append(Engine(len(engines), gpus, host, sizes, index))
    return Placement(args, nodes, node_size, local_head, group, actor, tuple(engines), actors,
                     args.rollout_external, parallel)
