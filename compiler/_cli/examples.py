"""The examples every `--help` ends with: one table, keyed by the parser's prog ("acrl compile", "acrl models show"),
and the walk that gives each parser of a command line its epilog. tests/test_cli_examples.py walks every parser of
`acrl` and `acrl-compile` and fails when one has none, so a new command cannot forget them.

The executor's commands (`acrl run`, `runs`, `status`, `logs`, and `acrl diff` with run records) set their own
epilogs with :func:`epilog` (acrl.runtime._cli): the compiler knows nothing of them. Imports nothing up front:
`acrl --help` builds every parser.
"""

from __future__ import annotations

from .help import EXAMPLES_HEADING

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator, Mapping

_SPEC = "specs/gsm8k-qwen2.5-3b-smoke.toml"

EXAMPLES: dict[str, tuple[str, ...]] = {
    "acrl": (
        "acrl init --model qwen3-4B --data /data/train.jsonl --integration slime -o spec.toml",
        f"acrl compile {_SPEC}",
    ),
    "acrl-compile": (
        f"acrl-compile {_SPEC}                    # writes bundles/<exp_id>/",
        f"acrl-compile {_SPEC} --set rollout.batch_size=64 -o bundles/b64/",
    ),
    "acrl compile": (
        f"acrl compile {_SPEC}                    # writes bundles/<exp_id>/",
        f"acrl compile --check {_SPEC} -o bundles/gsm8k-qwen2.5-3b-smoke/   # CI: is it stale?",
    ),
    "acrl init": (
        "acrl init                                 # asks, on a terminal",
        "acrl init --model qwen3-8B --gpus-per-node 8 --data /data/train.jsonl --eval gsm8k=/data/test.jsonl \\",
        "          --runtime-arn arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-a1B2c3D4e5 \\",
        "          --s3-bucket my-rollouts -o spec.toml",
    ),
    "acrl completion": (
        "acrl completion bash > ~/.local/share/bash-completion/completions/acrl",
        "acrl completion fish > ~/.config/fish/completions/acrl.fish",
    ),
    "acrl models": (
        "acrl models",
        "acrl models --json",
    ),
    "acrl models show": (
        "acrl models show qwen3-8B",
    ),
    "acrl schema": (
        "acrl schema -o acrl-spec.schema.json",
    ),
    "acrl explain": (
        f"acrl explain {_SPEC} rollout.batch_size",
        "acrl explain bundles/gsm8k-qwen2.5-3b-smoke/ --global-batch-size",
    ),
    "acrl layout": (
        f"acrl layout {_SPEC}",
        f"acrl layout {_SPEC} --format svg -o layout.svg",
    ),
    "acrl diff": (
        "acrl diff bundles/old/ spec.toml",
        "acrl diff bundles/a/ bundles/b/ --format markdown",
    ),
    "acrl verify": (
        "acrl verify bundles/gsm8k-qwen2.5-3b-smoke/",
        "acrl verify bundles/gsm8k-qwen2.5-3b-smoke/ --expect-hash sha256:HASH",
    ),
    "acrl check-bundles": (
        "acrl check-bundles                        # specs/*.toml against bundles/<exp_id>/",
        "acrl check-bundles experiments/*.toml --bundles-dir out",
    ),
    "acrl import": (
        "acrl import slime-runner runner.yaml -o spec.toml",
        "acrl import train-sh scripts/run-qwen3-4B.sh -o spec.toml",
    ),
    "acrl import slime-runner": (
        "acrl import slime-runner runner.yaml -o spec.toml --num-rollout 100",
    ),
    "acrl import train-sh": (
        "acrl import train-sh scripts/run-qwen3-4B.sh -o spec.toml",
        "acrl import train-sh run.sh --env MODEL_DIR=/data/models -o spec.toml",
    ),
}


def epilog(*lines: str) -> str:
    """The examples as an epilog: the heading, then one command a line (continuation lines as written)."""
    return "\n".join([EXAMPLES_HEADING, *(f"  {line}" for line in lines)])


def parsers(root: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    """``root`` and every parser below it, each once (aliases would repeat one), in the order they were added."""
    import argparse  # lazy: the caller has imported it already (it built the parsers)

    seen: set[int] = set()
    stack = [root]
    while stack:
        parser = stack.pop(0)
        if id(parser) in seen:
            continue
        seen.add(id(parser))
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                stack.extend(action.choices.values())


def apply_examples(root: argparse.ArgumentParser, table: Mapping[str, tuple[str, ...]] = EXAMPLES) -> None:
    """Give every parser below ``root`` without an epilog its examples from ``table`` (by prog)."""
    for parser in parsers(root):
        if parser.epilog is None and parser.prog in table:
            parser.epilog = epilog(*table[parser.prog])
