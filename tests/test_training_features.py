"""[opd] and [weight_sync] (compiler/_spec/training.py, rules ACRL-N*): each key passes its slime flag only at the
commits that have it (ACRL-F003 at the key elsewhere), slime's parse-time rules follow the targeted commit, the escape
hatch hands the flags to their keys, the importers map them back, and a spec that sets none compiles as before."""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_train_sh import Toolbox, compile_into, run_train_sh, toolbox

from acrl.compiler import Bundle, SpecError, compile_spec
from acrl.compiler._importers.slime_runner import import_slime_runner
from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler._pipeline.argv import ALGORITHM, CLUSTER, ROLLOUT, flags_by_review_group
from acrl.compiler._slime.commit_facts import known_commits
from acrl.compiler._spec.training import Opd, WeightSync
from conftest import NO_FACTS, SLIME_HEAD, SLIME_PIN, SpecWriter

__all__ = ["toolbox"]  # the fixture, shared with test_train_sh

V030 = "bf14dc21f9500746447f2572d0692e981c4d2a7e"
V031 = "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc"
SPLIT = {"colocate": False, "actor_num_gpus_per_node": 4, "rollout_num_gpus": 4}  # 4 + 4 GPUs, not colocated

# A value for every key, and the commits (by name) whose slime has the key's flag (slime/utils/arguments.py there).
EVERY_COMMIT = {"v0.3.0", "fa3c990", "v0.3.1", "624b824"}
KEYS: dict[str, tuple[Any, set[str]]] = {
    "opd.enabled": (True, EVERY_COMMIT), "opd.type": ("megatron", EVERY_COMMIT), "opd.kl_coef": (0.5, EVERY_COMMIT),
    "opd.teacher_load": ("/t", EVERY_COMMIT), "opd.teacher_ckpt_step": (3, EVERY_COMMIT),
    "weight_sync.mode": ("full", EVERY_COMMIT), "weight_sync.transport": ("nccl", EVERY_COMMIT),
    "weight_sync.buffer_size": (1024, EVERY_COMMIT),
    "weight_sync.disk_dir": ("/w", {"fa3c990", "v0.3.1", "624b824"}),
    "weight_sync.disk_keep_files": (True, {"fa3c990", "v0.3.1", "624b824"}),
    "weight_sync.local_checkpoint_dir": ("/l", {"v0.3.1", "624b824"}),
    "weight_sync.delta_encoding": ("xor", {"v0.3.1", "624b824"}),
    "weight_sync.delta_checksum": ("blake3", {"v0.3.1", "624b824"}),
    "weight_sync.custom_post_write_path": ("a.b", {"v0.3.1", "624b824"}),
    "weight_sync.release_train": (True, {"v0.3.1", "624b824"}),
    "weight_sync.encoding": ("deltas", {"v0.3.0", "fa3c990"}),
    "weight_sync.delta_keep_files": (True, {"v0.3.0", "fa3c990"}),
    "weight_sync.custom_delta_pre_push_path": ("a.b", {"v0.3.0", "fa3c990"}),
}


def _set(key: str, value: Any) -> dict[str, Any]:
    table, name = key.split(".")
    return {table: {name: value}}


def diagnostics(compile_overrides: Callable[..., Bundle], overrides: dict[str, Any]) -> list[Any]:
    """Every diagnostic of the compile, errors and warnings alike."""
    try:
        return list(compile_overrides(overrides).warnings)
    except SpecError as exc:
        return list(exc.diagnostics)


def test_every_key_is_listed_with_the_commits_that_have_its_flag() -> None:
    import attrs

    fields = {f"opd.{f.name}": f for f in attrs.fields(Opd)} | {f"weight_sync.{f.name}": f for f in
                                                                   attrs.fields(WeightSync)}
    assert set(fields) == set(KEYS)
    for key, (_, having) in KEYS.items():
        flag = fields[key].metadata["flag"]
        assert {c.name for c in known_commits() if flag in c.flags} == having, key


@pytest.mark.parametrize(("key", "commit"), [(key, c.commit) for key, (_, having) in KEYS.items()
                                             for c in known_commits() if c.name not in having])
def test_a_key_whose_flag_the_target_lacks_is_refused_at_that_key(compile_overrides: Callable[..., Bundle],
                                                                  key: str, commit: str) -> None:
    value = KEYS[key][0]
    with pytest.raises(SpecError) as info:
        compile_overrides({"slime": {"commit": commit}, **_set(key, value)})
    (found,) = [d for d in info.value.diagnostics if d.rule == "ACRL-F003" and d.key == key]
    assert found.severity == "error" and found.line is not None
    assert ("added to slime after" in found.message) != ("removed from slime after" in found.message)


def test_the_escape_hatch_does_not_pass_a_keys_flag(compile_overrides: Callable[..., Bundle]) -> None:
    """ACRL-F002 refuses an escape-hatch flag that a key owns, set (it passes the flag too) or not (the N rules would
    never see it), naming the key's line with the escape hatch's value."""
    hatch = {"--use-opd": True, "--update-weight-mode": "full", "--update-weight-buffer-size": 1024}
    lines = {"extra.flags.--use-opd": "set [opd] enabled = true instead",
             "extra.flags.--update-weight-mode": 'set [weight_sync] mode = "full" instead',
             "extra.flags.--update-weight-buffer-size": "set [weight_sync] buffer_size = 1024 instead"}
    for keys in ({"opd": {"enabled": True, "type": "megatron", "teacher_load": "/t"},
                  "weight_sync": {"mode": "full", "buffer_size": 1}}, {}):
        with pytest.raises(SpecError) as info:
            compile_overrides({**keys, "extra": {"flags": hatch}})
        assert {d.key: d.hint for d in info.value.diagnostics if d.rule == "ACRL-F002"} == lines
        assert {d.message.endswith("slime would see it twice") for d in info.value.diagnostics} == {bool(keys)}


def test_review_groups() -> None:
    groups = flags_by_review_group()
    assert groups["--use-opd"] == groups["--opd-teacher-load"] == ALGORITHM
    assert groups["--update-weight-mode"] == groups["--custom-delta-pre-push-path"] == ROLLOUT
    assert groups["--release-train"] == CLUSTER


# --- slime's rules follow the targeted commit ---------------------------------------------------------------------

def _rules(compile_overrides: Callable[..., Bundle], overrides: dict[str, Any]) -> list[tuple[str, str]]:
    return [(d.rule, d.key) for d in diagnostics(compile_overrides, overrides) if d.rule.startswith("ACRL-N")]


def test_delta_over_nccl_is_fa3c990s_and_refused_from_v031(compile_overrides: Callable[..., Bundle]) -> None:
    delta = {"cluster": SPLIT, "weight_sync": {"mode": "delta"}}
    assert _rules(compile_overrides, {**delta, "slime": {"commit": SLIME_PIN}}) == []
    for commit in (V031, SLIME_HEAD):
        assert _rules(compile_overrides, {**delta, "slime": {"commit": commit}}) == [
            ("ACRL-N009", "weight_sync.mode"), ("ACRL-N009", "weight_sync.mode")]  # transport, local dir: unwritten
    disk = {"cluster": SPLIT, "slime": {"commit": SLIME_HEAD},
            "weight_sync": {"mode": "delta", "transport": "disk", "disk_dir": "/w", "local_checkpoint_dir": "/l"}}
    assert _rules(compile_overrides, disk) == []
    bundle = compile_overrides(disk)
    (group,) = [g for g in bundle.groups if g.title == "weight sync"]
    assert [a.flag for a in group.args] == ["--update-weight-mode", "--update-weight-transport",
                                            "--update-weight-disk-dir", "--update-weight-local-checkpoint-dir"]
    assert {a.origin for a in group.args} == {"weight_sync.mode", "weight_sync.transport", "weight_sync.disk_dir",
                                              "weight_sync.local_checkpoint_dir"}


def test_disk_transport_needs_its_directory_by_commit(compile_overrides: Callable[..., Bundle]) -> None:
    disk = {"cluster": SPLIT, "weight_sync": {"transport": "disk"}}
    assert _rules(compile_overrides, {**disk, "slime": {"commit": SLIME_PIN}}) == [
        ("ACRL-N007", "weight_sync.transport")]
    # v0.3.0 asks for a directory only in delta mode, and it is --update-weight-delta-dir (v0.3.0:1925-1929)
    assert _rules(compile_overrides, {**disk, "slime": {"commit": V030}}) == []
    delta = {"cluster": SPLIT, "slime": {"commit": V030}, "weight_sync": {"transport": "disk", "mode": "delta"}}
    (n007,) = [d for d in diagnostics(compile_overrides, delta) if d.rule == "ACRL-N007"]
    assert "--update-weight-delta-dir" in n007.hint
    assert _rules(compile_overrides, {**delta, "extra": {"flags": {"--update-weight-delta-dir": "/w"}}}) == []
    # fa3c990 reads the deprecated alias too (fa3c990:1720); two different directories stop it (1706-1710)
    alias = {**disk, "slime": {"commit": SLIME_PIN}, "extra": {"flags": {"--update-weight-delta-dir": "/w"}}}
    assert _rules(compile_overrides, alias) == []
    both = {"cluster": SPLIT, "weight_sync": {"transport": "disk", "disk_dir": "/v"},
            "extra": {"flags": {"--update-weight-delta-dir": "/w"}}}
    assert _rules(compile_overrides, both) == [("ACRL-N010", "weight_sync.disk_dir")]
    assert _rules(compile_overrides, {**both, "weight_sync": {"transport": "disk", "disk_dir": "/w"}}) == []


def test_a_commit_without_facts_gets_only_what_every_commit_checks(compile_overrides: Callable[..., Bundle]) -> None:
    other = {"slime": {"commit": NO_FACTS}}
    assert _rules(compile_overrides, {**other, "cluster": SPLIT, "weight_sync": {"mode": "delta"}}) == []
    assert _rules(compile_overrides, {**other, "weight_sync": {"mode": "delta"}}) == [("ACRL-N008", "weight_sync.mode")]
    assert _rules(compile_overrides, {**other, "cluster": SPLIT, "weight_sync": {"mode": "delta",
                                                                                 "transport": "disk"}}) == [
        ("ACRL-N007", "weight_sync.transport")]


def test_release_train_lists_what_it_lacks(compile_overrides: Callable[..., Bundle]) -> None:
    head = {"slime": {"commit": SLIME_HEAD}}
    found = _rules(compile_overrides, {**head, "weight_sync": {"release_train": True, "mode": "delta"},
                                       "algorithm": {"advantage_estimator": "ppo"},
                                       "extra": {"flags": {"--keep-old-actor": True}}})
    assert [r for r in found if r[0] == "ACRL-N011"] == [
        ("ACRL-N011", "weight_sync.mode"), ("ACRL-N011", "weight_sync.release_train"),
        ("ACRL-N011", "algorithm.advantage_estimator"), ("ACRL-N011", "extra.flags.--keep-old-actor")]
    ready = {**head, "checkpoint": {"save": "/ckpt", "save_interval": 1},
             "weight_sync": {"release_train": True, "transport": "disk", "disk_dir": "/w"}}
    assert _rules(compile_overrides, ready) == []
    ignored = {**ready, "extra": {"flags": {"--no-offload-rollout": True}}}  # colocated: slime forces it on
    assert _rules(compile_overrides, ignored) == [("ACRL-N012", "extra.flags.--no-offload-rollout")]
    # at the pin the flag itself is missing: ACRL-F003 says so, and the N rules stay quiet
    pin = {**ready, "slime": {"commit": SLIME_PIN}, "cluster": SPLIT}  # (colocated, fa3c990 writes no disk: N013)
    assert [(d.rule, d.key) for d in diagnostics(compile_overrides, pin) if d.rule.startswith(("ACRL-N", "ACRL-F003"))
            ] == [("ACRL-F003", "weight_sync.release_train")]


def test_settings_slime_never_reads_are_warned_by_commit(compile_overrides: Callable[..., Bundle]) -> None:
    head = {"slime": {"commit": SLIME_HEAD}, "cluster": SPLIT}
    assert _rules(compile_overrides, {**head, "weight_sync": {"disk_dir": "/w", "delta_encoding": "xor"}}) == [
        ("ACRL-N013", "weight_sync.disk_dir"), ("ACRL-N013", "weight_sync.delta_encoding")]
    pin = {"cluster": SPLIT, "weight_sync": {"mode": "delta", "transport": "disk", "disk_dir": "/w",
                                             "disk_keep_files": True, "encoding": "deltas"}}
    assert _rules(compile_overrides, pin) == [("ACRL-N013", "weight_sync.disk_keep_files")]
    # fa3c990's colocated runs sync by CUDA IPC whatever the transport (actor.py:139-143); 624b824's write to disk
    colocated = {"weight_sync": {"transport": "disk", "disk_dir": "/w"}}
    assert _rules(compile_overrides, colocated) == [("ACRL-N013", "weight_sync.transport")]
    assert _rules(compile_overrides, {**colocated, "slime": {"commit": SLIME_HEAD}}) == []


def test_opd_rules(compile_overrides: Callable[..., Bundle]) -> None:
    assert _rules(compile_overrides, {"opd": {"enabled": True, "type": "megatron", "teacher_load": "/t"}}) == []
    assert _rules(compile_overrides, {"opd": {"type": "megatron", "teacher_load": "/t"}}) == [
        ("ACRL-N004", "opd.teacher_load"), ("ACRL-N005", "opd.type")]
    # the toolkit's reward post-processing sets no teacher log-probs; slime's OPD functions do, with --rm-url
    sglang = {"opd": {"enabled": True, "type": "sglang"}}
    assert _rules(compile_overrides, sglang) == [("ACRL-N006", "opd.type")]  # the path is the profile's default
    opd_rollout = {"reward_post_process_path": "slime.rollout.on_policy_distillation.post_process_rewards",
                   "custom_rm_path": "slime.rollout.on_policy_distillation.reward_func"}
    assert _rules(compile_overrides, {**sglang, "rollout": opd_rollout}) == [("ACRL-N006", "rollout.custom_rm_path")]
    assert _rules(compile_overrides, {**sglang, "rollout": opd_rollout,
                                      "extra": {"flags": {"--rm-url": "http://teacher:30000/generate"}}}) == []
    assert _rules(compile_overrides, {**sglang, "rollout": {"reward_post_process_path": "my.rewards"}}) == []


# --- the bundle ------------------------------------------------------------------------------------------------------

READY = {"slime": {"commit": SLIME_HEAD}, "checkpoint": {"save": "/ckpt", "save_interval": 1},
         "opd": {"enabled": True, "type": "megatron", "teacher_load": "/ckpt/teacher", "kl_coef": 0.5},
         "weight_sync": {"transport": "disk", "disk_dir": "/shared/w", "release_train": True, "buffer_size": 1024}}


def test_train_sh_passes_the_keys_flags(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(write_spec(READY), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {})
    assert run.returncode == 0, run.stderr
    argv = run.slime_argv
    at = argv.index("--use-opd")
    assert argv[at:at + 14] == ["--use-opd", "--opd-type", "megatron", "--opd-kl-coef", "0.5", "--opd-teacher-load",
                                "/ckpt/teacher", "--update-weight-transport", "disk", "--update-weight-disk-dir",
                                "/shared/w", "--update-weight-buffer-size", "1024", "--release-train"]


def test_spec_toml_leaves_the_tables_out_until_set(write_spec: SpecWriter, tmp_path: Path) -> None:
    plain = compile_spec(write_spec({}))
    data = tomllib.loads(plain.files["spec.toml"].decode())
    assert "opd" not in data and "weight_sync" not in data
    bundle = compile_spec(write_spec(READY))
    data = tomllib.loads(bundle.files["spec.toml"].decode())
    assert data["opd"] == READY["opd"] | {"enabled": True}
    assert data["weight_sync"] == READY["weight_sync"]
    # the bundle's spec.toml compiles to the same train.sh
    again = tmp_path / "again.toml"
    again.write_bytes(bundle.files["spec.toml"])
    assert compile_spec(again).files["train.sh"] == bundle.files["train.sh"]


# --- the importers ---------------------------------------------------------------------------------------------------

SUBMIT = 'ray job submit --address="http://127.0.0.1:8265" -- python3 /root/slime/train.py \\\n'


def test_import_train_sh_maps_the_flags_to_their_keys(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(SUBMIT + "  --use-opd --opd-type megatron --opd-teacher-load /t --opd-kl-coef 0.5 \\\n"
                    "  --update-weight-mode delta --update-weight-transport disk --update-weight-disk-dir /w \\\n"
                    "  --update-weight-encoding deltas_zstd --update-weight-delta-keep-files --release-train\n",
                    encoding="utf-8")
    imported = import_train_sh(path)
    spec = imported.spec
    assert spec["opd"] == {"enabled": True, "type": "megatron", "teacher_load": "/t", "kl_coef": 0.5}
    assert spec["weight_sync"] == {"mode": "delta", "transport": "disk", "disk_dir": "/w", "encoding": "deltas_zstd",
                                   "delta_keep_files": True}
    assert not spec.get("extra", {}).get("flags")
    # the importer targets the toolkit's pin, which has no --release-train: left out, with a note
    assert [n for n in imported.notes if n.message.startswith("--release-train is left out")]


def test_import_slime_runner_maps_extra_flags_to_their_keys(tmp_path: Path) -> None:
    models = tmp_path / "slime" / "scripts" / "models"
    models.mkdir(parents=True)
    (models / "tiny.sh").write_text("MODEL_ARGS=(\n  --swiglu\n  --num-layers 2\n  --hidden-size 64\n"
                                    "  --num-attention-heads 4\n  --vocab-size 1000\n)\n", encoding="utf-8")
    config = tmp_path / "runner.yaml"
    config.write_text(
        "exp_id: opd-1\nagent_runtime_arn: arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-abc123\n"
        "s3_bucket: my-bucket\nmodel_dir: /models/m\ndata_path: /d.jsonl\nmodel_type: tiny\n"
        f"slime_dir: {tmp_path}/slime\n"
        "extra_flags: [--use-opd, --opd-type, megatron, --opd-teacher-load, /t, --update-weight-buffer-size, '1024',"
        " --release-train]\n", encoding="utf-8")
    imported = import_slime_runner(config)
    assert imported.spec["opd"] == {"enabled": True, "type": "megatron", "teacher_load": "/t"}
    assert imported.spec["weight_sync"] == {"buffer_size": 1024}
    # SlimeRunner targets the toolkit's pin, which has no --release-train: slime ignored it, the import leaves it out
    assert [n for n in imported.notes if "--release-train" in n.message and n.kind == "difference"]
    assert "--release-train" not in imported.spec.get("extra", {}).get("args", [])
