"""ACRL-F002: the escape hatch ([extra.flags], [extra] args) may not pass a flag a spec key owns, set or not
(compiler/_spec/flag_index.py), so acrl's rules for the key always see its value. The fix names the key and, where
the flag's words are its value, the line to write; a flag acrl derives is to be removed. Two keyed flags stay
allowed where their key does not pass them (slime needs them in modes the key does not cover), and a flag the
targeted commit lacks is ACRL-F003's alone."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from acrl.compiler import Bundle, SpecError, compile_spec
from acrl.compiler._pipeline.argv import RUNTIME_REVIEW, flags_by_review_group
from acrl.compiler._slime.commit_facts import known_commits
from acrl.compiler._spec.flag_index import flag_index, key_of
from acrl.compiler._spec.tables import TOOLKIT_SLIME_COMMIT
from conftest import SLIME_HEAD

Compile = Callable[..., Bundle]


def diagnostics(compile_overrides: Compile, overrides: dict[str, Any]) -> list[tuple[str, str, str]]:
    with pytest.raises(SpecError) as info:
        compile_overrides(overrides)
    return [(d.rule, d.key, d.hint or "") for d in info.value.diagnostics]


def f002(compile_overrides: Compile, overrides: dict[str, Any]) -> dict[str, str]:
    """The ACRL-F002 findings: their key -> their fix."""
    try:
        compile_overrides(overrides)
    except SpecError as exc:
        return {d.key: d.hint or "" for d in exc.diagnostics if d.rule == "ACRL-F002"}
    return {}


# Unset keys of several tables, each flag's escape-hatch value and the key's line F002 names (the value as the key
# holds it: a switch true, a number, a string, a list, a table of pairs).
UNSET = {
    "--use-opd": (True, "[opd] enabled = true"),
    "--opd-kl-coef": (0.5, "[opd] kl_coef = 0.5"),
    "--update-weight-buffer-size": (1024, "[weight_sync] buffer_size = 1024"),
    "--eval-interval": (5, "[eval] interval = 5"),
    "--eval-prompt-data": (["aime", "/data/aime.jsonl"], '[eval] datasets = { aime = "/data/aime.jsonl" }'),
    "--save": ("/ckpt", '[checkpoint] save = "/ckpt"'),
    "--rollout-max-prompt-len": (2048, "[rollout] max_prompt_len = 2048"),
    "--micro-batch-size": (2, "[train] micro_batch_size = 2"),
    "--normalize-advantages": (True, "[algorithm] normalize_advantages = true"),
    "--pipeline-model-parallel-size": (2, "[parallel] pipeline = 2"),  # omitted at its default 1: unset as a flag
    "--sglang-context-length": (8192, "[sglang] context_length = 8192"),
}


def test_a_flag_of_an_unset_key_is_refused_at_its_own_entry_with_the_keys_line(compile_overrides: Compile) -> None:
    found = f002(compile_overrides, {"extra": {"flags": {flag: value for flag, (value, _) in UNSET.items()}}})
    assert found == {f"extra.flags.{flag}": f"set {line} instead" for flag, (_, line) in UNSET.items()}


def test_extra_args_are_read_as_argparse_reads_them(compile_overrides: Compile) -> None:
    args = ["--foo-unknown-to-acrl", "--seed=7", "--rollout-sample-hook-path", "a.one", "--rollout-top-p", "0.9",
            "--use-tis"]
    found = f002(compile_overrides, {"slime": {"commit": SLIME_HEAD}, "extra": {"args": args}})
    assert found == {"extra.args.1": "set [experiment] seed = 7 instead",
                     "extra.args.2": 'set [rollout] sample_hook_paths = ["a.one"] instead',
                     "extra.args.4": "set [rollout] top_p = 0.9 instead",
                     "extra.args.6": "set [algorithm] use_tis = true instead"}


def test_positions_point_at_the_escape_hatch_entry(write_spec: Callable[..., Path]) -> None:
    path = write_spec(text='[experiment]\nid = "e"\n[agentcore]\nruntime_arn = '
                           '"arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/a-b"\ns3_bucket = "bucket"\n'
                           '[model]\ntype = "qwen2.5-3B"\ndir = "/m"\n[data]\npath = "/d.jsonl"\n'
                           '[extra.flags]\n"--apply-chat-template" = true\n"--use-opd" = true\n'
                           '"--opd-type" = "sglang"\n')
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    assert [(d.rule, d.key, d.line, d.column) for d in info.value.diagnostics if d.rule == "ACRL-F002"] == [
        ("ACRL-F002", "extra.flags.--use-opd", 13, 1), ("ACRL-F002", "extra.flags.--opd-type", 14, 1)]


def test_golden_wording(compile_overrides: Compile) -> None:
    """The one test of F002's words: an unset key's flag, and a set key's."""
    with pytest.raises(SpecError) as info:
        compile_overrides({"extra": {"flags": {"--use-opd": True}}})
    (d,) = info.value.diagnostics
    assert d.format().splitlines()[0].endswith(
        "error: [extra.flags] --use-opd: --use-opd is the flag of [opd] enabled: in the escape hatch it bypasses "
        "acrl's checks of that key (its rules and the targeted commit's flags) (ACRL-F002)")
    assert d.hint == "set [opd] enabled = true instead"
    with pytest.raises(SpecError) as info:
        compile_overrides({"train": {"lr": 1e-6}, "extra": {"flags": {"--lr": 2e-6}}})
    (d,) = info.value.diagnostics
    assert (d.message, d.hint) == ("--lr is already set by [train] lr; slime would see it twice",
                                   "set [train] lr = 2e-06 instead")


def test_the_unset_keys_rules_see_the_key_but_not_the_escape_hatch(compile_overrides: Compile) -> None:
    """Why F002 refuses an unset key's flag: [opd] enabled without teacher_load is ACRL-N*'s error; the same flag in
    the escape hatch was compiled without it before F002 refused it."""
    key = {rule for rule, _, _ in diagnostics(compile_overrides, {"opd": {"enabled": True}})}
    hatch = {rule for rule, _, _ in diagnostics(compile_overrides, {"extra": {"flags": {"--use-opd": True}}})}
    assert any(rule.startswith("ACRL-N") for rule in key)
    assert hatch == {"ACRL-F002"}


@pytest.mark.parametrize(("flags", "found"), [
    ({"--ref-load": "/ref"}, 'remove it: acrl derives this flag (to choose it, set [model] ref_load = "/ref")'),
    ({"--global-batch-size": 64}, "remove it: acrl derives this flag"),
    ({"--actor-num-gpus-per-node": 4},
     "remove it: acrl derives this flag (to choose it, set [cluster] actor_num_gpus_per_node = 4)"),
])
def test_a_derived_flag_is_to_be_removed(compile_overrides: Compile, flags: dict[str, Any], found: str) -> None:
    (flag,) = flags
    assert f002(compile_overrides, {"extra": {"flags": flags}}) == {f"extra.flags.{flag}": found}


def test_every_flag_acrl_passes_is_a_keys_or_derived_at_every_commit() -> None:
    """F002 finds the owner of an escape-hatch flag in the index: every flag the argv's layout can pass (the run-time
    ones aside) must be there, under the name each commit passes it by, but the one acrl derives from other keys."""
    for facts in known_commits():
        assert [f for f in flags_by_review_group() if f not in RUNTIME_REVIEW and key_of(f, facts.commit) is None] \
            == ["--global-batch-size"]


def test_a_value_that_is_not_the_keys_names_the_key_alone(compile_overrides: Compile) -> None:
    assert f002(compile_overrides, {"extra": {"flags": {"--update-weight-buffer-size": "big", "--use-opd": False,
                                                        "--eval-interval": [1, 2]}}}) == {
        "extra.flags.--update-weight-buffer-size": "set [weight_sync] buffer_size instead",
        "extra.flags.--use-opd": "set [opd] enabled = false instead",  # false passes nothing: the key says so
        "extra.flags.--eval-interval": "set [eval] interval instead"}


def test_a_keys_flag_by_another_name_is_the_keys(compile_overrides: Compile) -> None:
    """sglang's other option of the same argument (--dp-size, at both commits) and a deprecated alias (at 624b824)."""
    assert f002(compile_overrides, {"sglang": {"data_parallel_size": 2}, "extra": {"flags": {"--sglang-dp-size": 4}}}) \
        == {"extra.flags.--sglang-dp-size": "set [sglang] data_parallel_size = 4 instead"}
    assert key_of("--sglang-dp-size", TOOLKIT_SLIME_COMMIT) == (flag_index()["--sglang-data-parallel-size"],
                                                                 "--sglang-data-parallel-size")
    assert key_of("--sglang-cuda-graph-max-bs", SLIME_HEAD) == (flag_index()["--sglang-cuda-graph-max-bs"],
                                                                "--sglang-cuda-graph-max-bs-decode")
    assert key_of("--sglang-enable-dp-attention", SLIME_HEAD) is None
    assert key_of("--rollout-shuffle", SLIME_HEAD) is None
    assert key_of("--load", SLIME_HEAD) == (flag_index()["--load"], "--load")  # [checkpoint] load (issue 16)


@pytest.mark.parametrize("overrides", [
    # acrl leaves --num-gpus-per-node out on one node of 8 GPUs: restating it is allowed (slime seeds its engines
    # with it); another value is ACRL-C006's
    {"extra": {"flags": {"--num-gpus-per-node": 8}}},
    # [wandb] project unset: offline W&B (no key at run time) needs the escape hatch
    {"extra": {"flags": {"--use-wandb": True, "--wandb-mode": "offline", "--wandb-project": "p",
                         "--wandb-group": "g"}}},
])
def test_keyed_flags_the_escape_hatch_may_pass_where_their_key_does_not(compile_overrides: Compile,
                                                                         overrides: dict[str, Any]) -> None:
    compile_overrides(overrides)


def test_the_exceptions_end_where_the_key_passes_the_flag(compile_overrides: Compile) -> None:
    assert f002(compile_overrides, {"wandb": {"project": "q"}, "extra": {"flags": {"--wandb-project": "p"}}}) == {
        "extra.flags.--wandb-project": 'set [wandb] project = "p" instead'}
    two_nodes = {"cluster": {"num_nodes": 2, "gpus_per_node": 4}, "extra": {"flags": {"--num-gpus-per-node": 4}}}
    assert f002(compile_overrides, two_nodes) == {"extra.flags.--num-gpus-per-node": "set [cluster] gpus_per_node = 4 "
                                                                                      "instead"}
    assert [r for r, _, _ in diagnostics(compile_overrides, {"extra": {"flags": {"--num-gpus-per-node": 4}}})] == [
        "ACRL-C006"]


def test_a_flag_the_targeted_commit_lacks_is_f003s(compile_overrides: Compile) -> None:
    hatch = {"extra": {"flags": {"--release-train": True}}}
    assert [(r, k) for r, k, _ in diagnostics(compile_overrides, hatch)] == [
        ("ACRL-F003", "extra.flags.--release-train")]
    assert f002(compile_overrides, {"slime": {"commit": SLIME_HEAD}, **hatch}) == {
        "extra.flags.--release-train": "set [weight_sync] release_train = true instead"}
