"""The slime commit an import targets (compiler/_importers/target.py): `--target-commit REV` (a commit acrl has facts
for, by hash, prefix or tag; anything else a usage error listing them), else the commit of the slime checkout the
script is read from (or of --slime-checkout), where acrl has facts for it, else agentcore-rl-toolkit's pin. The
spec writes it as [slime] commit where it is not the default, and the flags are mapped against that commit's facts:
flags only 624b824 has (--release-train, --update-weight-local-checkpoint-dir, --rollout-sample-hook-path) map onto
their keys there and are left out, noted, at the pin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from acrl.compiler._importers.base import Imported
from acrl.compiler._importers.slime_runner import import_slime_runner
from acrl.compiler._importers.target import for_script, resolve
from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler._slime.commit_facts import known_commits
from acrl.compiler._spec.tables import TOOLKIT_SLIME_COMMIT
from acrl.compiler.errors import UsageError
from conftest import SLIME_HEAD

V031 = "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc"  # slime v0.3.1 (compiler/_slime/commits' provenance tags it)
V030 = "bf14dc21f9500746447f2572d0692e981c4d2a7e"
# Flags slime 624b824 defines and the toolkit's pin fa3c990 does not (compiler/_slime/commits), each with its key.
HEAD_ONLY = {"--release-train": ("weight_sync", "release_train", True),
             "--update-weight-local-checkpoint-dir": ("weight_sync", "local_checkpoint_dir", "/local/ckpt"),
             "--rollout-sample-hook-path": ("rollout", "sample_hook_paths", ["my_hooks.on_sample"])}
SCRIPT = """#!/bin/bash
source "${SCRIPT_DIR}/models/qwen3-4B.sh"
ray job submit --address="http://127.0.0.1:8265" -- python3 /root/slime/train.py \\
   --hf-checkpoint /root/Qwen3-4B --prompt-data /root/data.jsonl --rollout-batch-size 8 \\
   --release-train --update-weight-local-checkpoint-dir /local/ckpt \\
   --rollout-sample-hook-path my_hooks.on_sample --lr 2e-6
"""


def git(*args: str, cwd: Path) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


def checkout(root: Path, *, slime: bool = True) -> tuple[Path, str]:
    """A real git checkout (git init, one commit) holding scripts/run-test.sh and, for slime, slime's
    slime/utils/arguments.py (what tells a slime checkout from any other repository); its script and commit."""
    (root / "scripts").mkdir(parents=True)
    script = root / "scripts" / "run-test.sh"
    script.write_text(SCRIPT, encoding="utf-8")
    if slime:
        (root / "slime" / "utils").mkdir(parents=True)
        (root / "slime" / "utils" / "arguments.py").write_text("# slime's parser\n", encoding="utf-8")
    git("init", "--quiet", cwd=root)
    git("add", ".", cwd=root)
    git("commit", "--quiet", "-m", "scripts", cwd=root)
    return script, git("rev-parse", "HEAD", cwd=root)


def at_commit(root: Path, commit: str) -> None:
    """Detach the checkout's HEAD at ``commit``, as `git checkout --detach COMMIT` leaves .git/HEAD (the commit's
    objects are not in this small repository: acrl reads only which commit HEAD names, never its objects)."""
    (root / ".git" / "HEAD").write_text(commit + "\n", encoding="utf-8")


def left_out(imported: Imported) -> set[str]:
    """The flags the import left out as absent at the targeted commit."""
    return {n.message.split()[0] for n in imported.notes if n.kind == "difference" and " is left out: " in n.message}


def test_a_revision_is_a_hash_a_prefix_or_a_tag_of_the_facts() -> None:
    assert resolve(SLIME_HEAD).commit == SLIME_HEAD
    assert resolve("624B824").commit == SLIME_HEAD  # 7 hex digits, any case
    assert resolve("v0.3.1").commit == V031 and resolve("v0.3.0").commit == V030
    assert {resolve(f.commit[:9]).commit for f in known_commits()} == {f.commit for f in known_commits()}


@pytest.mark.parametrize("rev", ["624b82", "0123456789", "v0.3.9", "HEAD", "main", "624b824 ", "-x"])
def test_any_other_revision_is_a_usage_error_listing_the_known_ones(rev: str) -> None:
    with pytest.raises(UsageError) as caught:
        resolve(rev)
    assert repr(rev) in caught.value.message
    for facts in known_commits():  # each named by its tag and hash, or by its hash
        assert facts.name in str(caught.value.hint) and facts.commit[:7] in str(caught.value.hint)


def test_the_option_maps_the_flags_against_the_targeted_commit(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT, encoding="utf-8")
    pinned = import_train_sh(script)  # not in a checkout: the toolkit's pin, and the spec writes no commit
    assert "commit" not in pinned.spec.get("slime", {})
    assert left_out(pinned) == set(HEAD_ONLY)
    assert "release_train" not in pinned.spec.get("weight_sync", {})
    for rev in ("624b824", "v0.3.1"):
        imported = import_train_sh(script, target_commit=rev)
        assert imported.spec["slime"]["commit"] == resolve(rev).commit
        assert left_out(imported) == set()
        for table, key, value in HEAD_ONLY.values():
            assert imported.spec[table][key] == value
        assert imported.spec["train"]["lr"] == 2e-6
    assert "commit" not in import_train_sh(script, target_commit="fa3c990").spec.get("slime", {})  # the default
    with pytest.raises(UsageError):
        import_train_sh(script, target_commit="v9")


def test_a_script_in_a_slime_checkout_at_a_known_commit_targets_it(tmp_path: Path) -> None:
    script, _ = checkout(tmp_path / "slime")
    at_commit(tmp_path / "slime", SLIME_HEAD)
    imported = import_train_sh(script)
    assert imported.spec["slime"]["commit"] == SLIME_HEAD
    assert {table: imported.spec[table][key] for table, key, _ in HEAD_ONLY.values()} == {
        "weight_sync": "/local/ckpt", "rollout": ["my_hooks.on_sample"]} and \
        imported.spec["weight_sync"]["release_train"] is True
    assert left_out(imported) == set()
    (note,) = [n for n in imported.notes if n.message.startswith("[slime] commit")]
    assert (note.kind, note.where) == ("default", str((tmp_path / "slime").resolve()))
    assert "624b824" in note.message and "--target-commit" in note.message
    # the option wins over the checkout
    assert "commit" not in import_train_sh(script, target_commit=TOOLKIT_SLIME_COMMIT).spec.get("slime", {})
    at_commit(tmp_path / "slime", TOOLKIT_SLIME_COMMIT)  # at the pin: said, and nothing written
    pinned = import_train_sh(script)
    assert "commit" not in pinned.spec.get("slime", {}) and left_out(pinned) == set(HEAD_ONLY)
    assert [n.kind for n in pinned.notes if n.message.startswith("[slime] commit")] == ["default"]


def test_a_checkout_at_a_commit_without_facts_keeps_the_pin_and_says_why(tmp_path: Path) -> None:
    script, commit = checkout(tmp_path / "slime")
    imported = import_train_sh(script)
    assert "commit" not in imported.spec.get("slime", {}) and left_out(imported) == set(HEAD_ONLY)
    (note,) = [n for n in imported.notes if n.message.startswith("[slime] commit")]
    assert (note.kind, note.where) == ("unresolved", str((tmp_path / "slime").resolve()))
    assert commit[:12] in note.message and "--target-commit" in note.message


def test_a_script_in_another_repository_is_not_a_slime_checkout(tmp_path: Path) -> None:
    script, _ = checkout(tmp_path / "project", slime=False)
    at_commit(tmp_path / "project", SLIME_HEAD)  # even at a hash acrl knows: no slime/utils/arguments.py there
    imported = import_train_sh(script)
    assert "commit" not in imported.spec.get("slime", {})
    assert not [n for n in imported.notes if n.message.startswith("[slime] commit")]


def test_the_slime_checkout_option_or_variable_is_the_fallback(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    checkout(tmp_path / "slime")
    at_commit(tmp_path / "slime", V031)
    script = tmp_path / "run.sh"  # outside the checkout
    script.write_text(SCRIPT, encoding="utf-8")
    monkeypatch.setenv("ACRL_SLIME_CHECKOUT", str(tmp_path / "slime"))
    target = for_script(script, None)
    assert target.commit == V031 and "ACRL_SLIME_CHECKOUT" in target.notes[0].message
    monkeypatch.setenv("ACRL_SLIME_CHECKOUT", str(tmp_path))  # not a git checkout: the pin, nothing said
    assert for_script(script, None).commit == TOOLKIT_SLIME_COMMIT and not for_script(script, None).notes
    monkeypatch.delenv("ACRL_SLIME_CHECKOUT")
    spec = tmp_path / "spec.toml"
    proc = subprocess.run([sys.executable, "-m", "acrl.compiler._cli.main", "import", "train-sh", str(script), "-o",
                           str(spec), "--json", "--slime-checkout", str(tmp_path / "slime")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120, check=False)
    report = json.loads(proc.stdout)
    assert tomllib.loads(spec.read_text(encoding="utf-8"))["slime"]["commit"] == V031
    assert any(n["where"] == str(tmp_path / "slime") and "--slime-checkout" in n["message"] for n in report["notes"])


def test_cli_refuses_an_unknown_target_with_exit_2(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT, encoding="utf-8")
    (tmp_path / "c.yaml").write_text("{}\n", encoding="utf-8")  # there: a missing input is its own usage error
    for kind, source in (("train-sh", script), ("slime-runner", tmp_path / "c.yaml")):
        proc = subprocess.run([sys.executable, "-m", "acrl.compiler._cli.main", "import", kind, str(source), "-o",
                               str(tmp_path / "s.toml"), "--target-commit", "v0.2", "--json"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120, check=False)
        assert proc.returncode == 2, proc.stdout + proc.stderr
        error = json.loads(proc.stdout)["error"]
        assert "'v0.2'" in error["message"] and "v0.3.1" in error["hint"] and "fa3c990" in error["hint"]
        assert not (tmp_path / "s.toml").exists()


def test_slime_runner_targets_the_pin_unless_told(tmp_path: Path) -> None:
    """SlimeRunner ran the slime the toolkit's installer pins (install_slime.sh:97 at 7bdd415: fa3c990);
    --target-commit maps its extra_flags against another commit."""
    config = tmp_path / "config.yaml"
    config.write_text("exp_id: e\nagent_runtime_arn: arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/a-b\n"
                      "s3_bucket: b\nmodel_dir: /m\ndata_path: /d.jsonl\nmodel_type: qwen3-4B\n"
                      "extra_flags: [--release-train, --rollout-sample-hook-path, h.on_sample]\n", encoding="utf-8")
    pinned = import_slime_runner(config)
    assert "slime" not in pinned.spec and "weight_sync" not in pinned.spec
    assert {n.message.split()[1] for n in pinned.notes if "is left out" in n.message} == {
        "--release-train", "--rollout-sample-hook-path"}
    head = import_slime_runner(config, target_commit="624b824")
    assert head.spec["slime"]["commit"] == SLIME_HEAD
    assert head.spec["weight_sync"]["release_train"] is True
    assert head.spec["rollout"]["sample_hook_paths"] == ["h.on_sample"]
    assert not [n for n in head.notes if "is left out" in n.message]
    # SlimeRunner's hard-coded --megatron-to-hf-mode: 624b824 has no such flag, the pin does
    assert any(n.where == "--megatron-to-hf-mode" for n in head.notes)
    assert not any(n.where == "--megatron-to-hf-mode" for n in pinned.notes)


def test_a_keys_flag_by_sglangs_other_name_maps_onto_the_key(tmp_path: Path) -> None:
    """slime's multi-node scripts pass --sglang-dp-size, sglang's other option of --data-parallel-size (one argument,
    one dest): it is [sglang] data_parallel_size, not an escape-hatch flag (which ACRL-F002 would refuse)."""
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.replace("--lr 2e-6", "--lr 2e-6 --sglang-dp-size 4 --sglang-enable-dp-attention"),
                      encoding="utf-8")
    for rev in (None, "624b824"):
        imported = import_train_sh(script, target_commit=rev)
        assert imported.spec["sglang"]["data_parallel_size"] == 4
        assert imported.spec["extra"]["flags"] == {"--sglang-enable-dp-attention": True}
        assert not [n for n in imported.notes if "--sglang-data-parallel-size" in n.message]  # not "not passed"
    config = tmp_path / "config.yaml"
    config.write_text("exp_id: e\nagent_runtime_arn: arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/a-b\n"
                      "s3_bucket: b\nmodel_dir: /m\ndata_path: /d.jsonl\nmodel_type: qwen3-4B\n"
                      "extra_flags: [--sglang-dp-size, '2', --sglang-enable-dp-attention]\n", encoding="utf-8")
    runner = import_slime_runner(config)
    assert runner.spec["sglang"]["data_parallel_size"] == 2
    assert runner.spec["extra"]["args"] == ["--sglang-enable-dp-attention"]


@pytest.mark.upstream("ACRL_SLIME_DIR")
def test_slimes_own_example_from_a_checkout_at_624b824(tmp_path: Path) -> None:
    """examples/delta_weight_sync/run-glm4.7-30B-A3B-delta.sh at 624b824 passes three flags the pin lacks
    (lines 48-50): read from a checkout of 624b824 they map onto their [weight_sync] keys; at the pin they are left
    out, each with its note."""
    git_dir = Path(os.environ["ACRL_SLIME_DIR"])
    if not (git_dir / "objects").is_dir() and (git_dir / ".git").exists():
        git_dir = git_dir / ".git"  # a checkout given: its git directory
    slime = tmp_path / "slime"
    git("clone", "--quiet", "--shared", "--no-checkout", str(git_dir), str(slime), cwd=tmp_path)
    git("-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", SLIME_HEAD, cwd=slime)
    script = slime / "examples" / "delta_weight_sync" / "run-glm4.7-30B-A3B-delta.sh"
    flags = {"--update-weight-local-checkpoint-dir", "--update-weight-delta-encoding", "--update-weight-delta-checksum"}
    head = import_train_sh(script, env=["BASE_DIR=/root"])
    assert head.spec["slime"]["commit"] == SLIME_HEAD and left_out(head) == set()
    assert {k: head.spec["weight_sync"][k] for k in ("local_checkpoint_dir", "delta_encoding", "delta_checksum")} == {
        "local_checkpoint_dir": "/local/nvme/glm47-rollout-ckpt", "delta_encoding": "xor",
        "delta_checksum": "xxh3-128"}
    pinned = import_train_sh(script, env=["BASE_DIR=/root"], target_commit=TOOLKIT_SLIME_COMMIT)
    assert left_out(pinned) == flags and "commit" not in pinned.spec["slime"]
