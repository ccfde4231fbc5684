"""validate: stage 4, the cross-field rules. ``engine``: the ``rule`` decorator, the registry ``RULES`` (in
the order of ``engine.ORDER``), ``validate`` and the helpers the rules share; one module per rule-id
prefix (parallel P, cluster C, batch B, algorithm A, eval E, integration I, toolkit T, flags F (``flags``, and
``flag_values``: the escape hatch's values and deprecations), secrets S, kuberay K (``kuberay``: the table's
values; ``kuberay_job``: what --target kuberay's job needs), model M, launch L, server groups G, training features
N, rollout features R, checkpoints and resuming H: ``checkpoint``);
``memory``: the GPU-memory estimate the ACRL-M rules use. Importing the package registers every rule.
Imports ``_spec``, ``_pipeline`` stages before it (parse, argv, model_args), ``errors`` and ``_secrets``.
"""

from . import (
    algorithm,
    batch,
    checkpoint,
    cluster,
    engine,
    eval,
    flag_values,
    flags,
    integration,
    kuberay,
    kuberay_job,
    launch,
    model,
    parallel,
    rollout_features,
    secrets,
    server_groups,
    toolkit,
    training,
)
from .engine import RULES, Context, Rule, recorded, validate

__all__ = ["RULES", "Context", "Rule", "algorithm", "batch", "checkpoint", "cluster", "engine", "eval", "flag_values",
           "flags", "integration", "kuberay", "kuberay_job", "launch", "model", "parallel", "recorded",
           "rollout_features", "secrets", "server_groups", "toolkit", "training", "validate"]
