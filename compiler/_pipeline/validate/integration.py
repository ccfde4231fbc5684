"""ACRL-I*: the integration profile ([experiment] integration, compiler/_spec/profiles.py) and the tables it needs:
[agentcore] with "agentcore" only, and the user's own function paths with "custom".
"""

from __future__ import annotations

from collections.abc import Iterator

from ..._spec.profiles import CUSTOM_FUNCTION_KEYS
from .engine import Context, Finding, rule


@rule("ACRL-I001", "error", ["agentcore", "experiment.integration"], "[agentcore] with integration \"agentcore\"",
      before_sourcing=True)
def _agentcore_missing(ctx: Context) -> Iterator[Finding]:
    """integration = "agentcore" (the default) runs the toolkit's rollout, which reads [agentcore] (structuring
    reports it with the other missing tables)."""
    if ctx.spec.experiment.integration == "agentcore" and ctx.spec.agentcore is None:
        yield Finding("missing required table [agentcore]",
                      'add an [agentcore] table, or set [experiment] integration = "slime" for slime\'s own rollout')


@rule("ACRL-I002", "error", ["agentcore", "experiment.integration"], "[agentcore] only with integration \"agentcore\"",
      before_sourcing=True)
def _agentcore_unused(ctx: Context) -> Iterator[Finding]:
    """[agentcore] configures the toolkit's rollout; with integration "slime" or "custom" nothing would read it
    (no custom_config.yaml is written)."""
    integration = ctx.spec.experiment.integration
    if integration != "agentcore" and ctx.spec.agentcore is not None:
        yield Finding(f'[agentcore] is not used with integration = "{integration}": no rollout reads it',
                      'remove the [agentcore] table, or set [experiment] integration = "agentcore" for the '
                      "toolkit's rollout")


@rule("ACRL-I003", "error", ["experiment.integration", *CUSTOM_FUNCTION_KEYS], "integration \"custom\" names its "
      "functions", before_sourcing=True)
def _custom_functions(ctx: Context) -> Iterator[Finding]:
    """integration = "custom" means the user's own functions: at least one of [rollout] function_path,
    custom_generate_function_path, custom_rm_path, reward_post_process_path (the others keep slime's defaults)."""
    if ctx.spec.experiment.integration != "custom":
        return
    r = ctx.spec.rollout
    if all(v is None for v in (r.function_path, r.custom_generate_function_path, r.custom_rm_path,
                               r.reward_post_process_path)):
        yield Finding('integration = "custom" names none of your functions',
                      "set [rollout] function_path, custom_generate_function_path, custom_rm_path or "
                      'reward_post_process_path (dotted paths), or use integration = "slime" for slime\'s own')
