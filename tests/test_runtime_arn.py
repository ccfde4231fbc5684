"""One AgentCore Runtime ARN pattern: what ACRL-T003 accepts at compile time is exactly what the
executor can take the region from (acrl.compiler.RUNTIME_ARN, used by both)."""

from __future__ import annotations

import pytest
import tomli_w

from acrl.compiler import compile_source, parse_spec_text
from acrl.compiler.errors import SpecError
from acrl.runtime._preflight.aws import region_from_arn
from conftest import MINIMAL, merge

GOOD = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/strands_math_agent-a1B2c3D4e5"
CASES = [
    (GOOD, "us-west-2"),
    ("arn:aws-us-gov:bedrock-agentcore:us-gov-west-1:123456789012:runtime/agent-x", "us-gov-west-1"),
    ("arn:aws-cn:bedrock-agentcore:cn-north-1:123456789012:runtime/a", "cn-north-1"),
    ("arn:aws:bedrock-agentcore:ap-southeast-12:123456789012:runtime/agent", "ap-southeast-12"),
    ("arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/" + "a" * 100, "us-west-2"),
    ("arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/" + "a" * 101, None),  # longer than AWS allows
    ("arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/1agent", None),  # a name starts with a letter
    ("arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/", None),
    (GOOD + "\n", None),
    ("arn:aws:bedrock-agentcore:us-west-2:12345678901:runtime/agent", None),
    ("arn:aws:bedrock:us-west-2:123456789012:agent/x", None),
    ("arn:awsx:bedrock-agentcore:us-west-2:123456789012:runtime/agent", None),
    ("arn:aws:bedrock-agentcore:uswest2:123456789012:runtime/agent", None),
    ("arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent x", None),
]


def t003(arn: str) -> bool:
    """Whether the compiler refuses ``arn`` at its key: ACRL-T003, or the name check before it (a line break)."""
    text = tomli_w.dumps(merge(MINIMAL, {"agentcore": {"runtime_arn": arn}}))
    try:
        compile_source(parse_spec_text(text, "spec.toml"))
    except SpecError as exc:
        return "agentcore.runtime_arn" in {d.key for d in exc.diagnostics if d.rule in ("ACRL-T003", "")}
    return False


@pytest.mark.parametrize(("arn", "region"), CASES, ids=range(len(CASES)))
def test_the_compiler_and_the_executor_agree_on_what_an_arn_is(arn: str, region: str | None) -> None:
    assert t003(arn) == (region is None)
    if region is None:
        with pytest.raises(ValueError):
            region_from_arn(arn)
    else:
        assert region_from_arn(arn) == region
