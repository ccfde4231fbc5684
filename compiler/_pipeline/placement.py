"""Where slime puts things on the GPUs: a pure model written after slime's own code (issue 13, first
piece: the placement group's size and the rollout's offset in it).

slime makes ONE placement group of 1-GPU bundles (`{"GPU": 1, "CPU": 1}`, strategy PACK), sorts its
bundles by (node IP, GPU id), gives the actor (and the critic: the same slots) the first
``actor_num_nodes x actor_num_gpus_per_node`` of them and the rollout engines the slots from
``rollout_offset`` on (slime/ray/placement_group.py:create_placement_groups). How big that group is and
where the rollout starts is ``_get_placement_group_layout``, placement_group.py:100-117 at both
commits acrl targets, mirrored here. The two differ in one case: an external rollout under
``--debug-rollout-only`` asks for the actor's GPUs at 624b824 (L107-108) and for none at fa3c990.
tests/test_placement.py compares this function with slime's own, run by the project's facts generator
(compiler/_slime/model_facts.py) on a table of layouts at each commit (tests/data/slime/<commit>/).

Not yet used by the rules, the template or the preflight: that is the rest of issue 13.
"""

from __future__ import annotations

import attrs

from .._spec.tables import TOOLKIT_SLIME_COMMIT as SLIME_PIN  # agentcore-rl-toolkit's pin

SLIME_HEAD = "624b824a898ab0ec1fcb4d373004c7f3852bf515"  # the slime commit acrl targets


@attrs.frozen(kw_only=True)
class LayoutArgs:
    """The slime arguments the placement group's layout reads (their slime names)."""

    actor_num_nodes: int
    actor_num_gpus_per_node: int
    rollout_num_gpus: int
    colocate: bool = False
    debug_train_only: bool = False
    debug_rollout_only: bool = False
    rollout_external: bool = False


@attrs.frozen
class GroupLayout:
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
