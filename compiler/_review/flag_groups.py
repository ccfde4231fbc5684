"""The review group of a slime flag, for `acrl diff` and `acrl-compile --check`.

One source: a flag acrl writes is in the group :data:`acrl.compiler._pipeline.argv.LAYOUT` gives it (and the
run-time flags in ``RUNTIME_REVIEW``); the table here holds only slime flags acrl never writes itself (MODEL_ARGS'
architecture flags and flags a spec can pass only through [extra.flags]), then prefixes and suffixes, then the
default of the train.sh group the flag was found under.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from .._pipeline.argv import (
    ALGORITHM,
    BATCH,
    CLUSTER,
    ENVIRONMENT,
    INTEGRATION,
    MODEL,
    OPTIMIZER,
    OTHER,
    REVIEW_GROUPS,
    ROLLOUT,
    argv_titles,
    flags_by_review_group,
)

GROUPS = REVIEW_GROUPS

# Slime flags acrl does not write (their spec home is [model.args] or [extra.flags]), by review group.
_NOT_WRITTEN = {
    CLUSTER: "--critic-num-nodes --critic-num-gpus-per-node --offload --offload-train "
             "--offload-rollout",
    BATCH: "--log-probs-max-tokens-per-gpu --balance-data",
    ALGORITHM: "--gamma --lambd --loss-type --calculate-per-token-loss --use-rollout-logprobs",
    OPTIMIZER: "--min-lr --clip-grad --optimizer --use-distributed-optimizer",
    ROLLOUT: "--tool-key --apply-chat-template --partial-rollout",
    MODEL: "--num-layers --hidden-size --ffn-hidden-size --num-attention-heads --group-query-attention "
           "--num-query-groups --kv-channels --swiglu --normalization --norm-epsilon --vocab-size "
           "--disable-bias-linear --add-qkv-bias --qk-layernorm --untie-embeddings-and-output-weights "
           "--use-rotary-position-embeddings --position-embedding-type --max-position-embeddings --seq-length "
           "--num-experts",
    INTEGRATION: "--rm-type --reward-key --eval-function-path",
}
_PREFIXES = (("--sglang-", ROLLOUT), ("--wandb-", ENVIRONMENT), ("--custom-", INTEGRATION), ("--actor-", CLUSTER),
             ("--critic-", CLUSTER), ("--rollout-", ROLLOUT), ("--eval-", ROLLOUT), ("--kl-", ALGORITHM),
             ("--eps-clip", ALGORITHM), ("--tis-", ALGORITHM), ("--lr-", OPTIMIZER), ("--adam-", OPTIMIZER),
             ("--optimizer-", OPTIMIZER), ("--overlap-", OPTIMIZER), ("--moe-", MODEL), ("--rotary-", MODEL))
_SUFFIXES = (("-parallel-size", CLUSTER), ("-function-path", INTEGRATION))


@functools.cache
def _flag_groups() -> Mapping[str, str]:
    # "other" is no group of its own: such a flag goes by the train.sh group it is found under
    written = {flag: group for flag, group in flags_by_review_group().items() if group != OTHER}
    others = {flag: group for group, flags in _NOT_WRITTEN.items() for flag in flags.split()}
    assert not set(written) & set(others), set(written) & set(others)  # one home per flag
    return {**written, **others}


@functools.cache
def _title_defaults() -> Mapping[str, str]:
    return {title: review for title, review in argv_titles().items() if review is not None}


def flag_group(flag: str, title: str | None) -> str:
    """The review group of ``flag`` given the array comment above it in train.sh (None: none): the title
    where it is a review group, else the flag's own group, else its title's default (else "other")."""
    if title in GROUPS and title != OTHER:
        return title
    found = _flag_groups().get(flag)
    found = found or next((g for p, g in _PREFIXES if flag.startswith(p)), None)
    found = found or next((g for s, g in _SUFFIXES if flag.endswith(s)), None)
    return found or _title_defaults().get(title or "", OTHER)
