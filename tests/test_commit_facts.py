"""The flags each slime commit accepts, as acrl ships them (compiler/_slime/commits, generated from slime's and
Megatron-LM's code by compiler/_slime/flag_facts.py; issue 15): an [extra] flag the targeted commit lacks is
ACRL-F003 with a did-you-mean or since when, on a machine with no slime checkout; a checkout at another commit is
compared with the target's facts. What slime's parse does with each flag (commits/argparse/<commit>.json): its
owner, definition, type, choices, default (slime's reset_arg winning), nargs, aliases and deprecation."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._slime.commit_facts import COMMITS_DIR, commit_facts, known_commits
from acrl.compiler._spec.flags import known_absent_flags
from conftest import REPO, SLIME_HEAD, SLIME_PIN, SpecWriter

SHIPPED = {SLIME_PIN: (), SLIME_HEAD: (), "bf14dc21f9500746447f2572d0692e981c4d2a7e": ("v0.3.0",),
           "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc": ("v0.3.1",)}


def test_facts_ship_for_the_toolkits_pin_the_two_tags_and_the_targeted_commit() -> None:
    assert {f.commit: f.tags for f in known_commits()} == SHIPPED
    assert [f.name for f in known_commits()] == ["v0.3.0", "fa3c990", "v0.3.1", "624b824"]  # oldest first
    head = commit_facts(SLIME_HEAD[:9])
    assert head is not None and head.sglang_version == "0.5.15.post1" and "qwen3-4B" in head.model_scripts
    assert {"--use-tis", "--rollout-batch-size"} <= head.slime_flags and "--num-layers" in head.megatron_flags
    assert "--use-gated-attention" in head.megatron_flags  # added by slime's docker/patch/latest/megatron.patch
    assert commit_facts("abc") is None and commit_facts("1234567890abcdef") is None


def test_the_facts_say_what_the_hand_written_tables_said() -> None:
    """The flags that differ between the toolkit's pin and slime HEAD (issue 13's hand-written tables, now gone)."""
    pin, head = known_absent_flags(SLIME_PIN), known_absent_flags(SLIME_HEAD)
    assert pin is not None and head is not None
    head_only = {f for f in head.facts.flags if f in pin}
    pin_only = {f for f in pin.facts.flags if f in head}
    assert pin_only == {"--custom-delta-pre-push-path", "--megatron-to-hf-mode", "--train-memory-margin-bytes",
                        "--update-weight-delta-dir", "--update-weight-delta-keep-files", "--update-weight-encoding"}
    assert head_only == {
        "--ci-train-rollout-logprob-abs-diff-threshold", "--custom-update-weight-post-write-path", "--freeze-indexer",
        "--megatron-deepgemm-forward-layers", "--megatron-deepgemm-forward-modules",
        "--megatron-deepgemm-moe-forward-layers", "--megatron-deepgemm-moe-forward-modules", "--release-train",
        "--rollout-sample-hook-path", "--update-weight-delta-checksum", "--update-weight-delta-encoding",
        "--update-weight-local-checkpoint-dir"}
    assert "--megatron-to-hf-mode" in head and head["--megatron-to-hf-mode"] == "removed from slime after fa3c990"
    assert pin["--release-train"] == "added to slime after fa3c990 (present at v0.3.1, 624b824)"
    assert "--use-dynamic-global-batch-size" in pin  # removed before the pin: at none of the commits
    assert "--sglang-anything" not in pin  # generated from SGLang at run time


@pytest.mark.parametrize(("commit", "flag", "hint", "why"), [
    (SLIME_HEAD, "--use-tiss", "did you mean --use-tis?", "defined at none of the slime commits"),
    (SLIME_PIN, "--release-train", "remove it, or target a slime commit that has it", "added to slime after fa3c990"),
    (SLIME_HEAD, "--megatron-to-hf-mode", "remove it, or target a slime commit that has it", "removed from slime"),
])
def test_an_extra_flag_the_target_lacks_is_an_error_without_a_checkout(write_spec: SpecWriter, commit: str, flag: str,
                                                                       hint: str, why: str) -> None:
    spec = write_spec({"slime": {"commit": commit}, "model": {"megatron_to_hf_mode": "auto"},
                       "extra": {"flags": {flag: True}}})
    with pytest.raises(SpecError) as info:
        compile_spec(spec, display_name="spec.toml")
    (diag,) = [d for d in info.value.diagnostics if d.rule == "ACRL-F003"]
    assert diag.key == f"extra.flags.{flag}" and diag.hint == hint and why in diag.message


def test_known_flags_compile_and_the_note_says_what_checked_them(write_spec: SpecWriter) -> None:
    flags = {"--apply-chat-template": True, "--sglang-enable-metrics": True}  # no key owns them (ACRL-F002)
    bundle = compile_spec(write_spec({"slime": {"commit": SLIME_HEAD}, "extra": {"flags": flags}}))
    assert any(n.startswith("flags checked against acrl's facts of slime 624b824") for n in bundle.notes)


def test_a_checkout_at_another_commit_is_compared_with_the_targets_facts(write_spec: SpecWriter,
                                                                        tmp_path: Path) -> None:
    slime = tmp_path / "slime"
    shutil.copytree(REPO / "tests" / "fixtures" / "slime_checkout", slime)
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(slime), *args], check=True, capture_output=True)
    spec = write_spec({"slime": {"dir": str(slime), "megatron_dir": str(REPO / "tests/fixtures/megatron_checkout"),
                                 "commit": SLIME_HEAD}})
    bundle = compile_spec(spec)
    (note,) = [n for n in bundle.notes if "but the spec targets 624b824" in n]
    assert "; compared with acrl's facts of slime 624b824, the checkout has " in note
    # the flags this spec passes that differ (the fixture lacks most of them) are named, every one
    listed = note.split("; of the flags this spec passes, the checkout lacks ", 1)[1].removesuffix(
        ", which slime 624b824 has").split(", ")
    passed = {a.flag for g in bundle.groups for a in g.args} | {t for t in bundle.model_args.args if t[:2] == "--"}
    assert "--advantage-estimator" in listed  # a slime flag the fixture lacks
    assert "--rollout-batch-size" in passed and "--rollout-batch-size" not in listed  # one it has
    assert set(listed) <= passed and len(listed) == len(set(listed)) > 8


@pytest.mark.upstream("ACRL_SLIME_DIR", "ACRL_MEGATRON_DIR")
def test_the_shipped_facts_are_what_the_generator_writes(tmp_path: Path) -> None:
    """Each file's recorded command line, run again on the two repositories, writes the same bytes."""
    import json
    import shlex

    generator = json.loads((COMMITS_DIR / f"{SLIME_HEAD}.json").read_text())["provenance"]["generator"]
    argv = [os.environ["ACRL_SLIME_DIR"] if a == "SLIME_GIT" else os.environ["ACRL_MEGATRON_DIR"]
            if a == "MEGATRON_GIT" else a for a in shlex.split(generator)[3:]]
    proc = subprocess.run([sys.executable, "-m", "acrl.compiler._slime.flag_facts", *argv], capture_output=True,
                          text=True, check=False, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stderr
    for commit in SHIPPED:
        for name in (f"{commit}.json", f"argparse/{commit}.json"):  # the flags, and what the parse does with each
            assert (tmp_path / "compiler/_slime/commits" / name).read_bytes() == (COMMITS_DIR / name).read_bytes()


def test_the_catalog_names_every_model_script_of_every_commit_with_facts() -> None:
    """Every scripts/models/*.sh of each commit acrl ships facts for is a catalog entry (issue 15); how each entry's
    args compare with the script is tests/test_catalog_fidelity.py's (at 624b824 and fa3c990)."""
    from acrl.compiler._pipeline.model_args.catalog import CATALOG

    for facts in known_commits():
        assert facts.model_scripts and not [s for s in facts.model_scripts if s not in CATALOG], facts.name


# slime/utils/arguments.py line of `reset_arg(parser, "--lr", type=float, default=1e-6)` at each commit
LR_RESET = {SLIME_PIN: 847, "bf14dc21f9500746447f2572d0692e981c4d2a7e": 810,
            "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc": 869, SLIME_HEAD: 880}
# slime/utils/arguments.py line of the add_argument of "--opd-type" (choices=["sglang", "megatron"])
OPD_TYPE = {SLIME_PIN: 1096, "bf14dc21f9500746447f2572d0692e981c4d2a7e": 1049,
            "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc": 1118, SLIME_HEAD: 1129}


@pytest.mark.parametrize("commit", sorted(SHIPPED))
def test_what_the_parse_does_with_known_flags_at_each_commit(commit: str) -> None:
    facts = commit_facts(commit)
    assert facts is not None
    opd = facts.argparse("--opd-type")
    assert opd is not None and (opd.owner, opd.at, opd.type, opd.choices, opd.default) == (
        "slime", f"slime/utils/arguments.py:{OPD_TYPE[commit]}", "str", ("sglang", "megatron"), None)
    lr = facts.argparse("--lr")  # Megatron's flag, slime's default: reset_arg only sets action.default
    assert lr is not None and (lr.owner, lr.type, lr.default, lr.reset) == (
        "megatron", "float", 1e-6, f"slime/utils/arguments.py:{LR_RESET[commit]}")
    # Megatron-LM 1dcf0daf: dataclass fields ArgumentGroupFactory makes flags of (argument_utils.py _extract_type)
    layers = facts.argparse("--num-layers")  # int field, argparse_meta {"default": None}
    assert layers is not None and (layers.type, layers.default, layers.field) == ("int", None,
                                                                                  "TransformerConfig.num_layers")
    backend = facts.argparse("--attention-backend")  # an Enum: the member names
    assert backend is not None and backend.choices == ("flash", "fused", "unfused", "local", "auto")
    assert backend.default == "auto" and backend.at.startswith("megatron/core/transformer/transformer_config.py:")
    ramp = facts.argparse("--rampup-batch-size")  # list[int] | None with argparse_meta nargs=3
    assert ramp is not None and (ramp.type, ramp.nargs) == ("int", 3)
    sizes = facts.argparse("--hierarchical-context-parallel-sizes")
    assert sizes is not None and (sizes.type, sizes.nargs) == ("int", "+")
    level = facts.argparse("--timing-log-level")  # Literal[0, 1, 2]
    assert level is not None and (level.type, level.choices) == ("int", (0, 1, 2))
    grad = facts.argparse("--no-gradient-accumulation-fusion")
    assert grad is not None and (grad.action, grad.default) == ("store_false", True)
    alias = facts.argparse("--persistent-save-interval")  # arg_names of CheckpointConfig.save_interval
    assert alias is not None and alias.flag == "--save-interval" and alias.type == "int"
    offload = facts.argparse("--no-offload-train")  # slime's BooleanOptionalAction
    assert offload is not None and offload.flag == "--offload-train" and offload.action.endswith(
        "BooleanOptionalAction")
    cuda = facts.argparse("--enable-cuda-graph")  # megatron/training/arguments.py validate_args message
    assert cuda is not None and cuda.deprecated is not None and cuda.deprecated["use"] == "--cuda-graph-impl=local"
    assert facts.argparse("--no-such-flag") is None and facts.argparse("--sglang-anything") is None


def test_slimes_own_deprecations_are_read_at_the_commits_that_have_them() -> None:
    pin = commit_facts(SLIME_PIN)
    v030 = commit_facts("bf14dc21f9500746447f2572d0692e981c4d2a7e")
    assert pin is not None and v030 is not None
    delta = pin.argparse("--update-weight-delta-dir")  # "Deprecated alias for --update-weight-disk-dir" (:194)
    assert delta is not None and delta.deprecated is not None
    assert delta.deprecated["use"] == "--update-weight-disk-dir" and delta.deprecated["at"].startswith("slime/")
    router = v030.argparse("--use-slime-router")  # "is deprecated and ignored" (slime_validate_args, :1666)
    assert router is not None and router.deprecated is not None and "use" not in router.deprecated
    batch = pin.argparse("--batch-size")  # assert args.batch_size is None, '--batch-size argument is no longer ...'
    assert batch is not None and batch.deprecated is not None and batch.deprecated.get("refused") is True


@pytest.mark.parametrize("commit", sorted(SHIPPED))
def test_every_flag_has_its_argparse_record_and_the_owners_agree(commit: str) -> None:
    """The names file and the argparse file come from one run: every flag of one is in the other; a flag read from
    Megatron-LM's code is Megatron's; one read from slime's but defined by Megatron is a reset_arg of slime's."""
    import json

    names = json.loads((COMMITS_DIR / f"{commit}.json").read_text())["flags"]
    records = json.loads((COMMITS_DIR / "argparse" / f"{commit}.json").read_text())["flags"]
    assert set(records) == set(names["slime"]) | set(names["megatron"])
    facts = commit_facts(commit)
    assert facts is not None
    owner = {flag: fact.owner for flag in records if (fact := facts.argparse(flag)) is not None}
    assert len(owner) == len(records)
    assert {f for f in names["megatron"] if owner[f] != "megatron"} == set()
    reset = {f for f in names["slime"] if owner[f] == "megatron"}
    assert "--lr" in reset and "--clip-grad" in reset and "--opd-type" not in reset
    if commit in (SLIME_HEAD, SLIME_PIN):  # the commits tests/data/slime holds slime_defaults.json of
        from conftest import slime_facts

        slime_resets = {f for f, fact in slime_facts("slime_defaults.json", commit)["flags"].items()
                        if fact.get("via") == "reset_arg"}
        assert reset <= slime_resets
