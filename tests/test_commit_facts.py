"""The flags each slime commit accepts, as acrl ships them (compiler/_slime/commits, generated from slime's and
Megatron-LM's code by compiler/_slime/flag_facts.py; issue 15): an [extra] flag the targeted commit lacks is
ACRL-F003 with a did-you-mean or since when, on a machine with no slime checkout; a checkout at another commit is
compared with the target's facts."""

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
    assert " and lacks " in note and " of its flag(s) (" in note


@pytest.mark.skipif(not (os.environ.get("ACRL_SLIME_DIR") and os.environ.get("ACRL_MEGATRON_DIR")),
                    reason="set ACRL_SLIME_DIR and ACRL_MEGATRON_DIR to the slime and Megatron-LM git directories")
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
        assert (tmp_path / "compiler/_slime/commits" / f"{commit}.json").read_bytes() == \
            (COMMITS_DIR / f"{commit}.json").read_bytes()


def test_the_sglang_versions_of_the_two_fact_sets_agree() -> None:
    """The flag facts read each commit's sglang from its Dockerfile; sglang_stack.SGLANG_OF says the same."""
    from acrl.compiler._slime.sglang_stack import SGLANG_OF

    for commit, version in SGLANG_OF.items():
        facts = commit_facts(commit)
        assert facts is not None and facts.sglang_version == version


def test_the_catalog_names_every_model_script_of_every_commit_with_facts() -> None:
    """Every scripts/models/*.sh of each commit acrl ships facts for is a catalog entry (issue 15); how each entry's
    args compare with the script is tests/test_catalog_fidelity.py's (at 624b824 and fa3c990)."""
    from acrl.compiler._pipeline.model_args.catalog import CATALOG

    for facts in known_commits():
        assert facts.model_scripts and not [s for s in facts.model_scripts if s not in CATALOG], facts.name
