"""ACRL-T*: the toolkit (AgentCore Runtime, gateway, naming; [agentcore] is there with integration "agentcore"
only). The renderer family, the connection pool,
the Runtime ARN, the S3 bucket name and the experiment id (a directory name and a Ray submission id).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ..._spec.tables import RUNTIME_ARN
from .engine import Context, Finding, rule

_LOCAL_PATH = re.compile(r"^(/|\.|~)")


@rule("ACRL-T001", "error", ["agentcore.renderer_family", "agentcore.cumulative_token_mode", "model.dir"],
      "cumulative token mode needs an explicit renderer family")
def _renderer(ctx: Context) -> Iterator[Finding]:
    """Cumulative token mode with renderer_family 'auto' and a local checkpoint path fails at gateway start: 'auto'
    only matches Hugging Face model ids."""
    a = ctx.spec.agentcore
    if a is not None and a.cumulative_token_mode and a.renderer_family == "auto" and \
            _LOCAL_PATH.match(ctx.spec.model.dir):
        yield Finding("renderer_family 'auto' matches the served model name exactly, and a local checkpoint "
                      "path never matches: the gateway fails at startup in cumulative token mode",
                      'set [agentcore] renderer_family to the model family, e.g. "qwen3"')


@rule("ACRL-T002", "warning", ["agentcore.max_pool_connections", "agentcore.max_concurrent"],
      "connection pool at least the concurrency")
def _pool(ctx: Context) -> Iterator[Finding]:
    """max_pool_connections below max_concurrent makes boto3 discard connections and flood the log."""
    a = ctx.spec.agentcore
    if a is not None and a.max_pool_connections < a.max_concurrent:
        yield Finding(f"max_pool_connections {a.max_pool_connections} < max_concurrent {a.max_concurrent}: "
                      "boto3 discards connections and floods the log with pool warnings",
                      f"set max_pool_connections to at least {a.max_concurrent}")




@rule("ACRL-T003", "error", ["agentcore.runtime_arn"], "AgentCore Runtime ARN format")
def _arn(ctx: Context) -> Iterator[Finding]:
    """agentcore.runtime_arn must be an AgentCore Runtime ARN."""
    a = ctx.spec.agentcore  # integration "agentcore" only (ACRL-I001, I002)
    if a is not None and not RUNTIME_ARN.fullmatch(a.runtime_arn):
        yield Finding(f"{a.runtime_arn!r} is not an AgentCore Runtime ARN",
                      "copy it from `bedrock-agentcore-starter-toolkit launch`: "
                      "arn:aws:bedrock-agentcore:REGION:ACCOUNT_ID:runtime/NAME-ID")


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@rule("ACRL-T004", "error", ["agentcore.s3_bucket"], "S3 bucket name format")
def _bucket(ctx: Context) -> Iterator[Finding]:
    """agentcore.s3_bucket must be a valid S3 bucket name (not a URL)."""
    if ctx.spec.agentcore is None:
        return
    b = ctx.spec.agentcore.s3_bucket
    bad = (not _BUCKET.fullmatch(b) or ".." in b or ".-" in b or "-." in b
           or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", b) or b.startswith(("xn--", "sthree-"))
           or b.endswith(("-s3alias", "--ol-s3")))
    if bad:
        name = re.sub(r"^(s3a?://|arn:aws:s3:::)", "", b).split("/")[0].lower()
        fix = f'write s3_bucket = "{name}": the bucket\'s name, not a URL' if name != b and _BUCKET.fullmatch(name) \
            else "3-63 characters: lowercase letters, digits, '.' and '-', starting and ending with a letter or " \
            "digit (a name, not an s3:// URL)"
        yield Finding(f"{b!r} is not a valid S3 bucket name", fix)


_EXP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@rule("ACRL-T005", "error", ["experiment.id"], "experiment id safe for paths and Ray ids")
def _exp_id(ctx: Context) -> Iterator[Finding]:
    """experiment.id must be safe as a directory name and a Ray submission id."""
    if not _EXP_ID.fullmatch(ctx.spec.experiment.id) or ".." in ctx.spec.experiment.id:
        yield Finding(f"{ctx.spec.experiment.id!r} cannot name a directory and a Ray submission id",
                      "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
