"""ACRL-F009..F010 (compiler/_pipeline/validate/flag_values.py): an escape-hatch value slime's argparse would refuse
or drop at the targeted commit, and a flag slime or its Megatron-LM deprecates or no longer accepts, from the
argparse facts acrl ships per commit (compiler/_slime/commits/argparse, issue 15)."""

from __future__ import annotations

from typing import Any

import pytest

from acrl.compiler import Diagnostic, SpecError, compile_spec
from acrl.compiler._slime import commit_facts
from conftest import NO_FACTS, SLIME_HEAD, SLIME_PIN, SpecWriter

V030, V031 = "bf14dc21f9500746447f2572d0692e981c4d2a7e", "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc"
COMMITS = (SLIME_PIN, V030, V031, SLIME_HEAD)


def diagnostics(write_spec: SpecWriter, commit: str, extra: dict[str, Any]) -> tuple[list[Diagnostic], str]:
    """Every diagnostic (errors, else the warnings) of MINIMAL at ``commit`` with this [extra], and the spec's text."""
    path = write_spec({"slime": {"commit": commit}, "extra": extra})
    try:
        found = list(compile_spec(path, display_name="spec.toml").warnings)
    except SpecError as exc:
        found = list(exc.diagnostics)
    return found, path.read_text(encoding="utf-8")


def fired(write_spec: SpecWriter, commit: str, extra: dict[str, Any], rule: str) -> list[tuple[str, str]]:
    """(key, the spec line it points at) of each ``rule`` diagnostic."""
    found, text = diagnostics(write_spec, commit, extra)
    return [(d.key, text.splitlines()[d.line - 1] if d.line else "") for d in found if d.rule == rule]


# (extra, key of the ACRL-F009 diagnostic): one mistake each, at every commit acrl ships facts for
MISTAKES = [
    ({"flags": {"--ckpt-format": "torch_dst"}}, "extra.flags.--ckpt-format"),  # Literal field: choices
    ({"flags": {"--timing-log-level": 3}}, "extra.flags.--timing-log-level"),  # Literal[0, 1, 2]: int, choices
    ({"flags": {"--loss-type": "policy"}}, "extra.flags.--loss-type"),  # slime's choices
    ({"flags": {"--num-critic-only-steps": 2.5}}, "extra.flags.--num-critic-only-steps"),  # slime's type=int
    ({"flags": {"--clip-grad": "big"}}, "extra.flags.--clip-grad"),  # reset_arg(type=float), Megatron's float
    ({"flags": {"--apply-chat-template-kwargs": "{not json"}}, "extra.flags.--apply-chat-template-kwargs"),
    ({"flags": {"--rampup-batch-size": [1, 2]}}, "extra.flags.--rampup-batch-size"),  # argparse_meta nargs=3
    ({"flags": {"--hierarchical-context-parallel-sizes": True}}, "extra.flags.--hierarchical-context-parallel-sizes"),
    ({"flags": {"--profile-target": ["train_actor", "train_critic"]}}, "extra.flags.--profile-target.1"),
    ({"flags": {"--exit-interval": [5, 6]}}, "extra.flags.--exit-interval.1"),  # one value: the second is dropped
    ({"flags": {"--ci-test": "false"}}, "extra.flags.--ci-test"),  # store_true with a value: set, value dropped
    ({"args": ["--ci-test=1"]}, "extra.args.0"),  # argparse: ignored explicit argument
    ({"args": ["--memory-recorder", "memray", "--ci-test", "no"]}, "extra.args.3"),
    ({"args": ["--ci-test", "--memory-recorder=tourch"]}, "extra.args.1"),
    ({"args": ["--exit-interval", "5", "stray"]}, "extra.args.2"),
    ({"args": ["--persistent-save-interval", "often"]}, "extra.args.1"),  # an alias: --save-interval's int
]


@pytest.mark.parametrize("commit", COMMITS)
@pytest.mark.parametrize(("extra", "key"), MISTAKES)
def test_a_value_slimes_argparse_refuses_or_drops_is_an_error_at_its_key(write_spec: SpecWriter, commit: str,
                                                                         extra: dict[str, Any], key: str) -> None:
    found = fired(write_spec, commit, extra, "ACRL-F009")
    assert [k for k, _ in found] == [key]
    name = key.split(".", 2)[2]
    flag, _, item = name.partition(".")
    token = extra["args"][int(name)] if key.startswith("extra.args.") else \
        str(extra["flags"][flag][int(item)]) if item else flag
    assert token in found[0][1]  # the line the diagnostic points at: the flag, its list item, the argument


@pytest.mark.parametrize("commit", COMMITS)
@pytest.mark.parametrize("extra", [
    {"flags": {"--ckpt-format": "torch_dist", "--timing-log-level": 2, "--loss-type": "sft_loss",
               "--num-critic-only-steps": 2, "--clip-grad": 0.5, "--apply-chat-template-kwargs": '{"a": 1}',
               "--rampup-batch-size": [1, 2, 3], "--hierarchical-context-parallel-sizes": [2],
               "--profile-target": ["train_actor", "train_log_probs"], "--exit-interval": 5, "--ci-test": True}},
    {"args": ["--ci-test", "--memory-recorder=memray", "--exit-interval", "5", "--persistent-save-interval", "3",
              "--clip-grad", "-1", "--no-offload-train"]},
])
def test_the_same_flags_with_values_argparse_takes_pass(write_spec: SpecWriter, commit: str,
                                                        extra: dict[str, Any]) -> None:
    """The mutants' originals: one changed value is what makes each of MISTAKES fail."""
    assert fired(write_spec, commit, extra, "ACRL-F009") == []


def test_the_message_names_the_definition_and_the_fix(write_spec: SpecWriter) -> None:
    found, _ = diagnostics(write_spec, SLIME_HEAD, {"flags": {"--ckpt-format": "torch_dst", "--loss-type": "x",
                                                              "--ci-test": "false"}, "args": ["--ci-test=1"]})
    f008 = {d.key: d for d in found if d.rule == "ACRL-F009"}
    fmt = f008["extra.flags.--ckpt-format"]
    assert fmt.message == ("--ckpt-format 'torch_dst' is not one of its choices (torch, torch_dist, torch_dcp, "
                           "fsdp_dtensor): argparse stops the launch (defined at Megatron-LM 1dcf0daf (slime "
                           "624b824's) megatron/training/training_config.py:411)")
    assert fmt.hint == "did you mean 'torch_dist'?"
    assert f008["extra.flags.--loss-type"].hint == "write one of policy_loss, sft_loss, custom_loss"
    assert "defined at slime 624b824 slime/utils/arguments.py:" in f008["extra.flags.--loss-type"].message
    assert f008["extra.args.0"].hint == 'write --ci-test alone ([extra.flags] "--ci-test" = true)'
    dropped = f008["extra.flags.--ci-test"]  # the value is dropped and the flag set: what "false" did not mean
    assert dropped.message.startswith("--ci-test is followed by 'false', which slime's parser ignores silently "
                                      "(store_true: it takes no value)")
    assert dropped.hint == 'write "--ci-test" = true in [extra.flags] (false leaves it out)'


def test_a_flag_the_target_lacks_is_left_to_f003_and_a_commit_without_facts_is_not_checked(
        write_spec: SpecWriter) -> None:
    assert fired(write_spec, SLIME_HEAD, {"flags": {"--use-dynamic-global-batch-size": "x"}}, "ACRL-F009") == []
    assert fired(write_spec, NO_FACTS, {"flags": {"--ckpt-format": "torch_dst"}}, "ACRL-F009") == []


def test_a_token_another_python_reads_as_a_number_is_not_judged(write_spec: SpecWriter) -> None:
    """argparse before 3.13 takes -1e-6 for an option, 3.13 for a negative number: not guessed either way."""
    assert fired(write_spec, SLIME_HEAD, {"args": ["--clip-grad", "-1e-6"]}, "ACRL-F009") == []
    assert fired(write_spec, SLIME_HEAD, {"args": ["--clip-grad", "--ci-test"]}, "ACRL-F009")[0][0] == "extra.args.0"


@pytest.mark.parametrize("commit", COMMITS)
def test_a_megatron_flag_deprecated_at_the_target_warns_with_its_replacement(write_spec: SpecWriter,
                                                                            commit: str) -> None:
    found, _ = diagnostics(write_spec, commit, {"flags": {"--enable-cuda-graph": True},
                                                "args": ["--use-dist-ckpt", "--use-mcore-models"]})
    f009 = {d.key: d for d in found if d.rule == "ACRL-F010"}
    assert set(f009) == {"extra.flags.--enable-cuda-graph", "extra.args.0", "extra.args.1"}
    assert all(d.severity == "warning" for d in f009.values())
    assert f009["extra.flags.--enable-cuda-graph"].hint == "write --cuda-graph-impl=local instead"
    assert f009["extra.args.0"].hint == "write --ckpt-format instead"
    assert f009["extra.args.1"].hint == "remove it"  # "DEPRECATED. Use the implementation from megatron core."


def test_the_deprecation_message(write_spec: SpecWriter) -> None:
    found, _ = diagnostics(write_spec, SLIME_HEAD, {"flags": {"--enable-cuda-graph": True}})
    (d,) = [d for d in found if d.rule == "ACRL-F010"]
    assert d.message == ("--enable-cuda-graph is deprecated in Megatron-LM 1dcf0daf (slime 624b824's) for "
                         "--cuda-graph-impl=local (megatron/training/arguments.py:444: \"--enable-cuda-graph is "
                         "deprecated, use --cuda-graph-impl=local instead.\")")


@pytest.mark.parametrize(("commit", "flag", "hint"), [
    (SLIME_PIN, "--update-weight-delta-dir", "write --update-weight-disk-dir instead"),  # slime's own, fa3c990
    (V030, "--use-slime-router", "remove it"),  # "deprecated and ignored" (v0.3.0 slime/utils/arguments.py:1666)
])
def test_a_slime_flag_deprecated_at_the_target_warns(write_spec: SpecWriter, commit: str, flag: str,
                                                     hint: str) -> None:
    found, _ = diagnostics(write_spec, commit, {"args": [flag, "/x"] if "dir" in flag else [flag]})
    (d,) = [d for d in found if d.rule == "ACRL-F010"]
    facts = commit_facts.commit_facts(commit)
    assert facts is not None and d.key == "extra.args.0" and d.hint == hint
    assert f"{flag} is deprecated in slime {facts.name}" in d.message
    assert fired(write_spec, SLIME_HEAD, {"args": ["--update-weight-disk-dir", "/x"]}, "ACRL-F010") == []


@pytest.mark.parametrize("commit", COMMITS)
def test_a_flag_megatron_no_longer_accepts_is_an_error(write_spec: SpecWriter, commit: str) -> None:
    found = fired(write_spec, commit, {"flags": {"--batch-size": 4, "--warmup": False},
                                       "args": ["--checkpoint-activations"]}, "ACRL-F011")
    assert [k for k, _ in found] == ["extra.flags.--batch-size", "extra.args.0"]  # false leaves --warmup out


def test_per_flag_facts_are_read_only_for_an_escape_hatch_flag(write_spec: SpecWriter) -> None:
    """The compile of a spec without [extra] never reads commits/argparse (issue 15: the compile stays fast)."""
    commit_facts._argparse.cache_clear()
    compile_spec(write_spec({"slime": {"commit": SLIME_HEAD}}))
    assert commit_facts._argparse.cache_info().currsize == 0
    compile_spec(write_spec({"slime": {"commit": SLIME_HEAD}, "extra": {"flags": {"--ci-test": True}}}))
    assert commit_facts._argparse.cache_info().currsize == 1
