"""The fixed choices of `acrl init`'s answers, in a module of their own: its parser (built for every `acrl --help`)
and the spec writer (init_spec.py, which brings attrs and tomli-w) both read them. Imports nothing.
"""

from __future__ import annotations

INTEGRATIONS = ("agentcore", "slime")

# slime's rule-based rewards, the values of --rm-type its rollout knows (slime/rollout/rm_hub/__init__.py:63-96 at
# fa3c990, async_rm; a "boxed_" prefix first extracts the \boxed{} answer). Without --rm-type (or a custom reward)
# slime's own rollout raises "Rule-based RM type is not specified." at the first sample.
RM_TYPES = ("deepscaler", "dapo", "math", "f1", "gpqa", "ifbench", "remote_rm", "random")
DEFAULT_RM_TYPE = "deepscaler"  # what slime's scripts/run-qwen3-4B.sh passes
