"""An import chosen as agentcore writes what slime uses for a flag the script leaves out where the agentcore profile
would pass another value (compiler/_spec/profiles.py: the slime value, else the cited Megatron-LM / sglang default,
``native``), each with a default note; the fidelity harness allows a one-sided --sglang-* flag restating sglang's
default only where the profile table cites it, and LD_LIBRARY_PATH differing only by empty entries."""

from __future__ import annotations

import json
from pathlib import Path

from launch_compare import ALLOWED, compare
from test_launch_fidelity import launch

from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler._spec.profiles import TOOLKIT_ROLLOUT

# the shape of agentcore-rl-toolkit 7bdd415's examples/math_agent/train.sh: the toolkit's rollout function, no
# --weight-decay, --adam-beta2, dropouts or --sglang-data-parallel-size (acrl's own text)
SCRIPT = f"""#!/bin/bash
ray job submit --address="http://127.0.0.1:8265" -- python3 /root/slime/train.py \\
   --hf-checkpoint /root/Qwen3-4B --prompt-data /root/d.jsonl --rollout-batch-size 8 --n-samples-per-prompt 8 \\
   --rollout-function-path {TOOLKIT_ROLLOUT} --lr 1e-6 --input-key prompt --sglang-log-level warning
"""


def test_agentcore_import_writes_slimes_values(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(SCRIPT)
    imported = import_train_sh(script)
    train = imported.spec["train"]
    assert "integration" not in imported.spec["experiment"]  # agentcore
    assert {k: train[k] for k in ("weight_decay", "adam_beta2", "attention_dropout", "hidden_dropout",
                                  "lr_decay_style", "attention_backend")} == {
        "weight_decay": 0.01, "adam_beta2": 0.999, "attention_dropout": 0.1, "hidden_dropout": 0.1,
        "lr_decay_style": "linear", "attention_backend": "auto"}  # Megatron-LM 1dcf0daf's defaults
    assert imported.spec["algorithm"]["kl_loss_type"] == "k1"
    assert imported.spec["rollout"]["gpus_per_engine"] == 1  # slime/utils/arguments.py:55
    assert "data_parallel_size" not in imported.spec.get("sglang", {})  # 1 is sglang's default and the profile's
    assert imported.spec["sglang"]["log_level"] == "warning" and imported.spec["data"]["input_key"] == "prompt"
    noted = {n.message.split(":")[0] for n in imported.notes if n.kind == "default" and "what slime uses" in
             n.message}
    assert {"the script does not pass --weight-decay", "the script does not pass --hidden-dropout",
            "the script does not pass --rollout-num-gpus-per-engine"} <= noted
    assert not [m for m in noted if "--sglang-log-level" in m or "--input-key" in m]  # given by the script


def test_a_slime_import_writes_none_of_them(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(SCRIPT.replace(f"--rollout-function-path {TOOLKIT_ROLLOUT} ", ""))
    imported = import_train_sh(script)
    assert imported.spec["experiment"]["integration"] == "slime"
    assert "weight_decay" not in imported.spec.get("train", {})


def test_harness_allows_sglangs_cited_default_only() -> None:
    original = launch("train.py", "--lr", "1")
    for words, allowed in ((["1"], True), (["2"], False)):
        ours = launch("train.py", "--lr", "1", "--sglang-data-parallel-size", *words)
        (found,) = compare(original, ours, {})
        assert (found.category == ALLOWED) is allowed and found.subject == "--sglang-data-parallel-size"
    # an sglang flag the profile table gives no stated default for: never allowed
    (found,) = compare(original, launch("train.py", "--lr", "1", "--sglang-mem-fraction-static", "0.7"), {})
    assert found.category == "flag-bundle-only"


def test_harness_allows_ld_library_path_without_empty_entries() -> None:
    theirs_value, ours_value = ":/usr/local/cuda-13.0/lib64:", "/usr/local/cuda-13.0/lib64"
    def side(value: str) -> object:
        return launch("train.py", "--train-env-vars", json.dumps({"LD_LIBRARY_PATH": value}),
                      env={"LD_LIBRARY_PATH": value}, exported={"LD_LIBRARY_PATH": value},
                      start_env={"LD_LIBRARY_PATH": value})
    found = compare(side(theirs_value), side(ours_value), {})  # type: ignore[arg-type]
    assert [(m.category, m.subject) for m in found] == [
        (ALLOWED, "--train-env-vars"), (ALLOWED, "runtime-env LD_LIBRARY_PATH"), (ALLOWED, "start-env LD_LIBRARY_PATH")]
    other = compare(side(theirs_value), side("/usr/local/cuda-12.9/lib64"), {})  # type: ignore[arg-type]
    assert {m.category for m in other} == {"flag-value", "runtime-env", "start-env"}
