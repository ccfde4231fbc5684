"""Fixes that lead somewhere: a name of a flag the compiler derives points at the key that sets it (not at the escape
hatch ACRL-F002 refuses), short names of the cluster's keys, and a train.sh's argument list written under [extra]
flags gets the table it means, whole, which compiles to the same arguments."""

from __future__ import annotations

from pathlib import Path

import pytest

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._pipeline.suggest import table_example
from conftest import SpecWriter


def errors(write_spec: SpecWriter, overrides: dict[str, object]) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec(overrides))
    return [(d.key, d.hint) for d in info.value.diagnostics if d.severity == "error"]


def test_global_batch_size_points_at_num_steps_per_rollout(write_spec: SpecWriter) -> None:
    [(key, hint)] = errors(write_spec, {"train": {"global_batch_size": 256}})
    assert key == "train.global_batch_size"
    assert "[train] num_steps_per_rollout" in hint and "256" in hint and "[extra.flags]" not in hint


@pytest.mark.parametrize(("name", "meant"), [("actor_num_gpus", "actor_num_gpus_per_node"),
                                             ("rollout_gpus", "rollout_num_gpus")])
def test_short_names_of_cluster_keys(name: str, meant: str, write_spec: SpecWriter) -> None:
    [(key, hint)] = errors(write_spec, {"cluster": {name: 8}})
    assert key == f"cluster.{name}" and f"write {meant} = 8" in hint


def test_an_argument_list_under_extra_flags_gets_its_table(write_spec: SpecWriter, tmp_path: Path) -> None:
    argv = ["--apply-chat-template", "--rm-type", "deepscaler", "--eval-prompt-data", "a", "/b.jsonl"]
    assert table_example(argv) == ('{ apply-chat-template = true, rm-type = "deepscaler", '
                                   'eval-prompt-data = ["a", "/b.jsonl"] }')
    [(key, hint)] = errors(write_spec, {"extra": {"flags": argv[:3]}})
    assert key == "extra.flags" and hint == 'write it as flags = { apply-chat-template = true, rm-type = "deepscaler" }'
    bundle = compile_spec(write_spec({"slime": {"commit": "1234567890abcdef1234567890abcdef12345678"},
                                      "extra": {"flags": {"apply-chat-template": True, "rm-type": "deepscaler"}}}))
    program = bundle.argv()
    assert program.count("--apply-chat-template") == 1
    assert program[program.index("--rm-type") + 1] == "deepscaler"
