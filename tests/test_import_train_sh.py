"""`acrl import train-sh`: hand-written launch scripts of slime's example shape become specs; what
cannot be resolved without running the script is reported, never guessed; a train.sh acrl
generated imports back into a spec whose train.sh passes slime exactly the same argv."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from shlex import quote as shlex_quote
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_train_sh import Toolbox, compile_into, make_toolbox, run_train_sh

from acrl.compiler import compile_spec
from acrl.compiler._importers.base import Imported, ImportInputError, Note, experiment_id, render_spec
from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler.errors import AcrlError, UsageError
from conftest import EXAMPLE_SPECS, REPO

FIXTURES = REPO / "tests" / "fixtures" / "train_sh"
UPSTREAM = FIXTURES / "upstream_math_agent" / "train.sh"
UPSTREAM_020 = FIXTURES / "upstream_math_agent_0.2.0" / "train.sh"
GOLDEN = sorted((REPO / "tests" / "golden").glob("*/train.sh"))


@pytest.fixture(scope="module")
def toolbox(tmp_path_factory: pytest.TempPathFactory) -> Toolbox:
    return make_toolbox(tmp_path_factory.mktemp("toolbox"))


def script(tmp_path: Path, body: str, name: str = "train.sh") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def notes(imported: Imported, kind: str | None = None) -> list[Note]:
    return [n for n in imported.notes if kind is None or n.kind == kind]


def subjects(imported: Imported, kind: str) -> dict[str, str]:
    """The notes of ``kind`` by their subject (the flag, variable or key before the first colon or
    blank) -> where: what a test asserts instead of the wording."""
    return {n.message.replace(":", " ").split()[0]: n.where for n in notes(imported, kind)}


def spec_text(imported: Imported) -> str:
    return render_spec(imported)


SUBMIT = 'ray job submit --address="http://127.0.0.1:8265" -- python3 /root/slime/train.py \\\n'


# --- the upstream example ----------------------------------------------------------------------

def test_upstream_example_maps_its_flags_and_custom_config() -> None:
    imported = import_train_sh(UPSTREAM)
    spec = imported.spec
    assert spec["model"] == {"type": "qwen2.5-3B", "megatron_to_hf_mode": "bridge"}
    assert spec["experiment"] == {"num_rollout": 1, "id": "gsm8k-grpo-train"}  # NUM_ROLLOUT's default, config exp_id
    assert spec["agentcore"]["runtime_arn"].endswith(":runtime/strands_math_agent-a1B2c3D4e5")
    assert spec["agentcore"]["max_pool_connections"] == 256
    assert spec["parallel"] == {"tensor": 2, "sequence_parallel": True}
    assert spec["cluster"] == {"actor_num_gpus_per_node": 8, "colocate": True}
    assert spec["rollout"]["batch_size"] == 32 and spec["rollout"]["n_samples_per_prompt"] == 8
    assert spec["sglang"]["tool_call_parser"] == "qwen25"
    assert spec["train"]["lr"] == 1e-6 and spec["train"]["max_tokens_per_gpu"] == 9216
    assert spec["wandb"] == {"project": "slime-art", "group": "gsm8k-grpo"}
    assert spec["cuda"] == {"fix_torch_memory_saver": False}
    assert "extra" not in spec  # every flag it passes has a key (or is acrl's to pass)


def test_upstream_example_reports_what_it_cannot_know() -> None:
    imported = import_train_sh(UPSTREAM)
    unresolved = {n.where: n.message for n in notes(imported, "unresolved")}
    where = str(UPSTREAM)
    # each names the variable it needs and the line that sets it (the golden wording is in
    # test_secrets_are_never_copied and test_unreadable_script_is_a_clear_error)
    assert "SLIME_DIR" in unresolved[f"{where}:76"]
    hf_checkpoint, prompt_data = unresolved[f"{where}:78"], unresolved[f"{where}:80"]
    assert hf_checkpoint.startswith("--hf-checkpoint: line 29: ") and "MODEL_DIR" in hf_checkpoint
    assert prompt_data.startswith("--prompt-data: line 30: ") and "DATA_PATH" in prompt_data
    assert "MEGATRON_DIR" in unresolved[f"{where}:28"]
    assert ".wandb.env" in unresolved[f"{where}:43"]
    assert "dir" not in imported.spec["model"] and "path" not in imported.spec["data"]  # nothing guessed
    defaults = {n.message.split()[0]: n for n in notes(imported, "default")}
    assert "'qwen2.5-3B'" in defaults["MODEL_TYPE"].message and "'8'" in defaults["NUM_GPUS"].message
    assert defaults["MODEL_TYPE"].where.startswith(f"{where}:") and defaults["NUM_GPUS"].where.startswith(f"{where}:")
    assert "--use-dynamic-global-batch-size" in subjects(imported, "difference")
    assert any("--num-steps-per-rollout" in n.message and "--global-batch-size" in n.message
               for n in notes(imported, "difference") if n.where == where)


def test_released_example_0_2_0() -> None:
    imported = import_train_sh(UPSTREAM_020)
    spec = imported.spec
    assert "model" not in spec  # MODEL_TYPE and MODEL_DIR are ${X:?...} there: nothing is guessed
    assert spec["rollout"]["custom_generate_function_path"].endswith("integration.rollout.generate")
    assert spec["checkpoint"] == {"save": "checkpoints/exp_agentcore_grpo", "save_interval": 100,
                                  "save_hf": "checkpoints/exp_agentcore_grpo/hf/{rollout_id}"}
    assert spec["cuda"]["home"] == "/usr/local/cuda-13.0"
    assert spec["eval"] == {"interval": 10, "temperature": 0.0}
    differences = subjects(imported, "difference")
    assert differences["--use-wandb"] == f"{UPSTREAM_020}:123"  # passed unconditionally there
    assert differences["--train-env-vars"] == f"{UPSTREAM_020}:113"


# --- round trip: a generated train.sh -> spec -> train.sh with the same slime argv --------------

def _argv(bundle_dir: Path, toolbox: Toolbox, work: Path) -> list[str]:
    run = run_train_sh(bundle_dir / "train.sh", toolbox, work)
    assert run.returncode == 0, run.stderr
    return run.slime_argv


def _round_trip(bundle_dir: Path, tmp_path: Path, toolbox: Toolbox) -> tuple[list[str], list[str], Imported]:
    imported = import_train_sh(bundle_dir / "train.sh")
    spec_path = tmp_path / "imported.toml"
    spec_path.write_text(render_spec(imported), encoding="utf-8")
    compile_into(spec_path, tmp_path / "reimported")
    return (_argv(bundle_dir, toolbox, tmp_path / "run-a"), _argv(tmp_path / "reimported", toolbox,
                                                                   tmp_path / "run-b"), imported)


@pytest.mark.parametrize("golden", GOLDEN, ids=[p.parent.name for p in GOLDEN])
def test_round_trip_golden(golden: Path, tmp_path: Path, toolbox: Toolbox) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(golden.parent, bundle)
    original, again, imported = _round_trip(bundle, tmp_path, toolbox)
    assert again == original
    assert not notes(imported, "unresolved"), imported.notes
    resolved = tomllib.loads((golden.parent / "spec.toml").read_text(encoding="utf-8"))
    for table in ("cluster", "cuda", "wandb", "slime"):  # what is not argv but train.sh does
        for key in ("address", "home", "project", "group", "dir", "megatron_dir"):
            assert imported.spec.get(table, {}).get(key) == resolved[table].get(key), (table, key)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=[p.stem for p in EXAMPLE_SPECS])
def test_round_trip_example_specs(spec: Path, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(spec, tmp_path / "bundle")
    original, again, imported = _round_trip(tmp_path / "bundle", tmp_path, toolbox)
    assert again == original
    integration = tomllib.loads(spec.read_text(encoding="utf-8"))["experiment"].get("integration", "agentcore")
    assert imported.spec["experiment"].get("integration", "agentcore") == integration  # the profile is recognized
    assert ("--custom-config-path" in original) == (integration == "agentcore") and len(original) > 60


def test_round_trip_keeps_extra_flags_and_wandb(tmp_path: Path, toolbox: Toolbox, write_spec: Any) -> None:
    spec = write_spec({"extra": {"flags": {"--sglang-enable-metrics": True, "--rollout-stop": ["1", "x y"]},
                                 "args": ["--eval-function-path", "a b"]},
                       "wandb": {"project": "p", "group": "g", "key_env": "MY_WANDB_KEY"}})
    compile_into(spec, tmp_path / "bundle")
    imported = import_train_sh(tmp_path / "bundle" / "train.sh")
    assert imported.spec["wandb"] == {"project": "p", "group": "g", "key_env": "MY_WANDB_KEY"}
    assert imported.spec["extra"]["flags"] == {"--sglang-enable-metrics": True, "--rollout-stop": [1, "x y"],
                                               "--eval-function-path": "a b"}
    original, again, _ = _round_trip(tmp_path / "bundle", tmp_path, toolbox)
    assert again == original


# --- unresolved things are reported, with lines, and nothing is guessed --------------------------

def test_unset_variable_and_command_substitution(tmp_path: Path) -> None:
    path = script(tmp_path, "#!/bin/bash\nSTAMP=$(date +%s)\nGPUS=$((4 * 2))\n" + SUBMIT +
                  "  --hf-checkpoint $MODEL \\\n  --save /ckpt/$STAMP \\\n  --actor-num-gpus-per-node $GPUS \\\n"
                  "  --lr `cat lr.txt`\n")
    imported = import_train_sh(path)
    unresolved = {n.where: n.message for n in notes(imported, "unresolved")}
    assert unresolved[f"{path}:5"].startswith("--hf-checkpoint: line 5: $MODEL is never set in the script")
    assert unresolved[f"{path}:6"].startswith("--save: line 2: $(date +%s) is a command substitution")
    assert unresolved[f"{path}:8"].split(": ")[0] == "--lr" and "`cat lr.txt`" in unresolved[f"{path}:8"]
    assert "dir" not in imported.spec.get("model", {}) and "save" not in imported.spec.get("checkpoint", {})
    assert "lr" not in imported.spec.get("train", {})
    assert imported.spec["cluster"]["actor_num_gpus_per_node"] == 8  # integer arithmetic of literals is evaluated


def test_ray_address_of_an_existing_cluster(tmp_path: Path) -> None:
    remote = script(tmp_path, "ray job submit --address=http://head:8265 -- python3 /s/train.py --lr 1\n", "a.sh")
    assert import_train_sh(remote).spec["cluster"]["address"] == "http://head:8265"
    local = script(tmp_path, "RAY_ADDRESS=http://127.0.0.1:8265 ray job submit -- python3 /s/train.py\n", "b.sh")
    assert "address" not in import_train_sh(local).spec.get("cluster", {})


@pytest.mark.parametrize("address", ["http://admin:s3cr3t-Q@head:8265", "admin:s3cr3t-Q@head:8265"])
def test_a_ray_address_with_a_password_is_copied_without_it(address: str, tmp_path: Path) -> None:
    path = script(tmp_path, f"ray job submit --address {address} -- python3 /s/train.py --lr 1\n")
    imported = import_train_sh(path)
    assert imported.spec["cluster"]["address"] == address.replace("admin:s3cr3t-Q@", "")
    assert "s3cr3t" not in repr(imported) and "s3cr3t" not in render_spec(imported)
    assert any("carries user:password" in n.message for n in notes(imported, "difference"))


def test_arithmetic_it_cannot_evaluate(tmp_path: Path) -> None:
    path = script(tmp_path, SUBMIT + "  --num-rollout $((N * 2)) \\\n  --seed $((1 << 4))\n")
    imported = import_train_sh(path)
    # neither --num-rollout nor --seed; the id from train.sh; no rollout function: slime's own (integration "slime")
    assert imported.spec["experiment"] == {"id": "train", "integration": "slime"}
    where = {n.where: n.message.split(": ")[:2] for n in notes(imported, "unresolved")}
    assert where[f"{path}:2"] == ["--num-rollout", "line 2"] and where[f"{path}:3"] == ["--seed", "line 3"]


def test_unknown_flags_go_to_extra_and_repeated_flags_take_the_last(tmp_path: Path) -> None:
    path = script(tmp_path, "ARGS=(\n  --lr 1e-5  # first\n  --log-interval 3\n  --log-passrate\n)\n" + SUBMIT +
                  '  "${ARGS[@]}" --lr 2e-6 --rollout-stop-token-ids a b\n')
    imported = import_train_sh(path)
    assert imported.spec["extra"]["flags"] == {"--log-interval": 3, "--log-passrate": True,
                                               "--rollout-stop-token-ids": ["a", "b"]}
    assert imported.spec["train"]["lr"] == 2e-6
    (twice,) = [n for n in imported.notes if "given 2 times" in n.message]
    assert twice.kind == "difference" and "lines 2, 7" in twice.message
    assert {n.message.split(":")[0] for n in notes(imported, "escape-hatch")} == {"--log-interval", "--log-passrate",
                                                                                    "--rollout-stop-token-ids"}


def test_secrets_are_never_copied(tmp_path: Path) -> None:
    path = script(tmp_path, "export WANDB_API_KEY=sk-live-987\nTOKEN=tok-555\nX=${AWS_SECRET_ACCESS_KEY:-xyz-42}\n"
                  + SUBMIT + "  --wandb-key $WANDB_API_KEY --my-api-key abc-123 --label $TOKEN --use-wandb \\\n"
                  "  --note $X\n")
    imported = import_train_sh(path)
    text = spec_text(imported) + json.dumps([n.as_json() for n in imported.notes])
    flags = {(n.where, n.message.split()[0]) for n in notes(imported, "difference")}
    assert {(f"{path}:5", "--label"), (f"{path}:5", "--my-api-key"), (f"{path}:6", "--note")} <= flags
    for secret in ("sk-live-987", "tok-555", "abc-123", "xyz-42"):
        assert secret not in text
    assert [n for n in notes(imported, "difference") if n.where == f"{path}:1" and "WANDB_API_KEY" in n.message]


def test_no_train_command_is_a_clear_error(tmp_path: Path) -> None:
    path = script(tmp_path, "#!/bin/bash\necho hello\nray start --head\n")
    with pytest.raises(ImportInputError) as info:
        import_train_sh(path)
    message = str(info.value)
    assert message.startswith(f"{path}: expected a `ray job submit ... -- python3 .../train.py FLAGS`")
    assert "fix: acrl import train-sh reads scripts of slime's example shape" in message
    hidden = script(tmp_path, "main() {\n  python3 /s/train.py --lr 1\n}\nmain\n", "hidden.sh")
    with pytest.raises(ImportInputError) as hidden_info:
        import_train_sh(hidden)
    assert hidden_info.value.path == str(hidden) and "line 2" in hidden_info.value.reason


def test_unreadable_script_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ImportInputError) as missing:
        import_train_sh(tmp_path / "missing.sh")
    assert missing.value.path == str(tmp_path / "missing.sh") and missing.value.hint
    path = script(tmp_path, "X=1\nY='open\n")
    with pytest.raises(ImportInputError) as info:  # the lexer's error, at its line (the golden wording)
        import_train_sh(path)
    assert (info.value.path, info.value.reason) == (f"{path}:2", "cannot read the script: unterminated single quote")
    assert info.value.hint and "bash -n" in info.value.hint


def test_async_entry_and_model_args_array(tmp_path: Path) -> None:
    path = script(tmp_path, "SLIME=/opt/slime\nMODEL_ARGS=(--num-layers 2 --swiglu)\n"
                  "python3 $SLIME/train_async.py \"${MODEL_ARGS[@]}\" --hf-checkpoint /m --prompt-data /d\n")
    imported = import_train_sh(path)
    assert imported.spec["train"]["mode"] == "async" and imported.spec["slime"]["dir"] == "/opt/slime"
    assert imported.spec["model"]["args"] == {"num-layers": 2, "swiglu": True}


# --- the command line ----------------------------------------------------------------------------

def _acrl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run([sys.executable, "-m", "acrl.compiler._cli.main", *args], cwd=cwd, capture_output=True,
                          text=True, env=env, timeout=60, check=False)


def test_cli_end_to_end(tmp_path: Path) -> None:
    bundle = tmp_path / "bundle"
    shutil.copytree(GOLDEN[0].parent, bundle)
    proc = _acrl("import", "train-sh", str(bundle / "train.sh"), "-o", "spec.toml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "wrote spec.toml: it compiles" in proc.stdout
    assert "Traceback" not in proc.stderr
    compile_spec(tmp_path / "spec.toml")
    again = _acrl("import", "train-sh", str(UPSTREAM), "-o", "spec.toml", "--json", cwd=tmp_path)
    error = json.loads(again.stdout)["error"]  # --json: the error as JSON
    assert again.returncode == 3 and error["message"].startswith("spec.toml: ") and "--force" in error["hint"]
    forced = _acrl("import", "train-sh", str(UPSTREAM), "-o", "spec.toml", "--json", "--force", cwd=tmp_path)
    result = json.loads(forced.stdout)
    assert forced.returncode == 1 and result["ok"] is False
    assert re.search(r"^spec\.toml:\d+:\d+: error: \[model\] dir: ", result["problems"], re.M), result["problems"]
    assert {"kind": "unresolved", "where": f"{UPSTREAM}:80"}.items() <= next(
        n for n in result["notes"] if n["where"].endswith(":80")).items()
    parsed = tomllib.loads((tmp_path / "spec.toml").read_text(encoding="utf-8"))
    assert parsed["model"]["type"] == "qwen2.5-3B"
    missing = _acrl("import", "train-sh", "nope.sh", "-o", "x.toml", cwd=tmp_path)
    assert missing.returncode == 2 and missing.stderr.startswith("nope.sh: ") and "\n  fix: " in missing.stderr
    assert "Traceback" not in missing.stderr and not (tmp_path / "x.toml").exists()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(alphabet=st.sampled_from(list("$(){}[]'\"`\\#;&|<> \n\t=-+:?@*!~aZ09_./")) | st.characters(),
               max_size=200))
def test_no_input_gives_a_traceback(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.sh"
    path.write_text(text + "\npython3 /s/train.py --lr 1 " + text, encoding="utf-8", errors="replace")
    try:
        imported = import_train_sh(path)
    except AcrlError:
        return
    render_spec(imported)


def test_flag_equals_value_is_read_as_argparse_reads_it(tmp_path: Path) -> None:
    path = script(tmp_path, "EXP_ID=e\nX=1\n" + SUBMIT + "  --wandb-key=sk-inline-1 --my-password=pw-inline-2 \\\n"
                  '  --lr=2e-6 --rollout-batch-size="$X" --log-interval=v\n')
    imported = import_train_sh(path)
    text = spec_text(imported) + json.dumps([n.as_json() for n in imported.notes])
    for secret in ("sk-inline-1", "pw-inline-2"):
        assert secret not in text
    assert {"--wandb-key", "--my-password"} <= set(subjects(imported, "difference"))
    assert imported.spec["train"]["lr"] == 2e-6 and imported.spec["rollout"]["batch_size"] == 1
    assert imported.spec["extra"]["flags"] == {"--log-interval": "v"}


def test_bare_credential_flags_are_not_copied(tmp_path: Path) -> None:
    path = script(tmp_path, "EXP_ID=e\n" + SUBMIT
                  + "  --password=pw-bare-1 --api-key key-bare-2 --hf-token tok-bare-3\n")
    imported = import_train_sh(path)
    text = spec_text(imported) + json.dumps([n.as_json() for n in imported.notes])
    for secret in ("pw-bare-1", "key-bare-2", "tok-bare-3"):
        assert secret not in text


def test_header_comment_cannot_inject_toml(tmp_path: Path) -> None:
    folder = tmp_path / 'evil\n[experiment]\nid = "pwn"\n#\x01'
    folder.mkdir()
    note = Note("difference", "a\x01b\x7f\rc\u2028d\x85e\n[wandb]\nkey_env = 'X'", "w\nhere")
    text = render_spec(Imported({"experiment": {"id": "ok"}}, (note,), str(folder / "train.sh")))
    data = tomllib.loads(text)
    assert data == {"experiment": {"id": "ok"}}
    assert all(line.startswith("#") for line in text.split("\n\n", 1)[0].split("\n"))


def test_custom_config_null_or_date_is_noted_not_a_crash(tmp_path: Path) -> None:
    (tmp_path / "cc.yaml").write_text("agent_runtime_arn: arn:x\ns3_bucket:\nmodel_id: 2026-01-01\n", encoding="utf-8")
    path = script(tmp_path, "EXP_ID=e\n" + SUBMIT + '  --custom-config-path "$(dirname "$0")/cc.yaml"\n')
    imported = import_train_sh(path)
    tomllib.loads(spec_text(imported))
    assert imported.spec["agentcore"] == {"runtime_arn": "arn:x"}
    unresolved = [n for n in notes(imported, "unresolved") if n.where == f"{path}:3"]  # the --custom-config-path line
    assert sorted(n.message.split("'")[1] for n in unresolved) == ["model_id", "s3_bucket"]
    assert any("agentcore.model_id" in n.message for n in unresolved)


def test_values_made_from_a_secret_are_never_copied(tmp_path: Path) -> None:
    path = script(tmp_path, "HF_TOKEN=hf-tok-AAA\nEXP_ID=${EXP_ID:-run-$HF_TOKEN}\nURL=${URL:-https://u:$HF_TOKEN@h}\n"
                  'python3 /root/slime/train.py "$HF_TOKEN" --wandb-project "$URL"\n')
    imported = import_train_sh(path)
    text = spec_text(imported) + json.dumps([n.as_json() for n in imported.notes])
    assert "hf-tok-AAA" not in text and "id" not in imported.spec.get("experiment", {})
    assert any("HF_TOKEN" in n.message for n in notes(imported, "difference") if n.where == f"{path}:4")
    assert subjects(imported, "difference")["--wandb-project"] == f"{path}:4"


def test_slime_example_shape_run_qwen3_4b(tmp_path: Path) -> None:
    """slime's own scripts/run-*.sh: SCRIPT_DIR via `cd ... &>/dev/null && pwd`, `source ${SCRIPT_DIR}/models/..`,
    unquoted ${X_ARGS[@]} arrays after `--colocate`."""
    imported = import_train_sh(FIXTURES / "slime_qwen3_4B" / "run-qwen3-4B.sh")
    spec = imported.spec
    assert spec["model"]["type"] == "qwen3-4B" and spec["model"]["dir"] == "/root/Qwen3-4B"
    assert spec["cluster"]["colocate"] is True and not [n for n in notes(imported, "unresolved") if "MODEL_ARGS" in
                                                      n.message or "--colocate" in n.message]
    assert spec["eval"]["datasets"] == {"aime": "/root/aime-2024/aime-2024.jsonl"}
    assert spec["algorithm"]["use_kl_loss"] is True and spec["train"]["num_steps_per_rollout"] == 1
    # slime's own rollout and reward: integration "slime", which compiles as imported (no [agentcore] needed)
    assert spec["experiment"]["id"] == "run-qwen3-4B" and spec["experiment"]["integration"] == "slime"
    assert "agentcore" not in spec
    bundle = compile_spec(tmp_path / "spec.toml", data=render_spec(imported).encode())
    assert "custom_config.yaml" not in bundle.files and "--custom-config-path" not in bundle.argv()
    assert "[experiment]" in subjects(imported, "default")  # the id made from the file name is noted


def test_unknown_array_is_not_the_value_of_the_flag_before_it(tmp_path: Path) -> None:
    path = script(tmp_path, "EXP_ID=e\n" + SUBMIT + "  --use-kl-loss ${MORE_ARGS[@]} --lr 2e-6\n")
    imported = import_train_sh(path)
    assert imported.spec["algorithm"]["use_kl_loss"] is True and imported.spec["train"]["lr"] == 2e-6
    assert [n for n in notes(imported, "unresolved") if n.where == f"{path}:3" and "MORE_ARGS" in n.message]


def test_notes_on_stderr_escape_terminal_control_characters(tmp_path: Path) -> None:
    path = script(tmp_path, "EXP_ID=e\n" + SUBMIT + "  --evil\x1b[2J 1\n")
    proc = subprocess.run([str(Path(sys.executable).parent / "acrl"), "import", "train-sh", str(path), "-o",
                           str(tmp_path / "spec.toml")], capture_output=True, text=True, timeout=60, check=False)
    assert "\x1b" not in proc.stderr and "Traceback" not in proc.stderr


def test_secrets_in_model_args_are_never_copied(tmp_path: Path) -> None:
    path = script(tmp_path, "EXP_ID=e\nHF_TOKEN=hf-mmm\n"
                  "MODEL_ARGS=(--num-layers 2 --hf-token=tok-mmm --foo $HF_TOKEN)\n"
                  "python3 /root/slime/train.py ${MODEL_ARGS[@]} --lr 1e-6\n")
    imported = import_train_sh(path)
    text = spec_text(imported) + json.dumps([n.as_json() for n in imported.notes])
    assert "hf-mmm" not in text and "tok-mmm" not in text
    assert imported.spec["model"]["args"] == {"num-layers": 2}


# --- issue 14: evaluating slime's own scripts faithfully -----------------------------------------

SHAPES = FIXTURES / "slime_shapes"
AGENTCORE = {"runtime_arn": "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-abc123",
             "s3_bucket": "acrl-test-bucket"}


def _compiled_argv(imported: Imported, tmp_path: Path, toolbox: Toolbox, name: str = "b") -> list[str]:
    """The imported spec compiled (with an [agentcore] table where the import chose integration "agentcore", which
    needs one), and the argv its train.sh would submit (ACRL_PRINT_ARGV=1)."""
    agentcore = imported.spec.get("experiment", {}).get("integration", "agentcore") == "agentcore"
    spec = {**imported.spec, "agentcore": AGENTCORE} if agentcore else imported.spec
    spec_path = tmp_path / f"{name}.toml"
    spec_path.write_text(render_spec(Imported(spec, imported.notes, imported.source)), encoding="utf-8")
    compile_into(spec_path, tmp_path / name)
    printed = run_train_sh(tmp_path / name / "train.sh", toolbox, tmp_path / f"{name}-run",
                           {"ACRL_PRINT_ARGV": "1", "WANDB_API_KEY": "k-1"})  # acrl passes W&B flags with a key
    assert printed.returncode == 0, printed.stderr
    return printed.stdout.split("\0")[:-1]


def _last(argv: list[str]) -> dict[str, list[str]]:
    """flag -> the words after its last occurrence, as argparse keeps them."""
    out: dict[str, list[str]] = {}
    for word in argv:
        if word.startswith("--"):
            out[word] = []
            current = out[word]
        elif out:
            current.append(word)
    return out


def test_env_values_are_what_the_script_reads_from_its_environment(tmp_path: Path) -> None:
    fixture = SHAPES / "run-qwen3-4B-shapes.sh"
    alone = import_train_sh(fixture)
    assert "save" not in alone.spec.get("checkpoint", {})  # ${SAVE_DIR:?...}: unresolved without --env
    assert "--save" in {n.message.split(":")[0] for n in notes(alone, "unresolved")}
    assert "BASE_DIR" in subjects(alone, "default")
    given = import_train_sh(fixture, env=["SAVE_DIR=/ckpt", "BASE_DIR=/data", "BASE_DIR=/models"])  # the last counts
    assert given.spec["checkpoint"]["save"] == "/ckpt/Qwen3-4B_slime/"
    assert given.spec["model"]["dir"] == "/models/Qwen3-4B" and given.spec["data"]["path"].startswith("/models/")
    assert "BASE_DIR" not in subjects(given, "default") and not notes(given, "unresolved")


def test_env_secrets_are_never_copied(tmp_path: Path) -> None:
    path = script(tmp_path, SUBMIT + "  --wandb-group $WANDB_API_KEY --wandb-project $PLAIN \\\n"
                  "  --hf-checkpoint $HF_TOKEN --save $URL --load ok-$HF_TOKEN\n")
    env = ["WANDB_API_KEY=0123456789abcdef0123456789abcdef01234567", "PLAIN=hf_aaaaBBBBccccDDDDeeeeFFFFgggg1234",
           "HF_TOKEN=tok-env-1", "URL=https://user:pw-env-2@host/x"]
    imported = import_train_sh(path, env=env)
    text = spec_text(imported) + json.dumps([n.as_json() for n in imported.notes])
    for secret in ("0123456789abcdef", "hf_aaaa", "tok-env-1", "pw-env-2"):
        assert secret not in text
    assert {"--wandb-group", "--wandb-project", "--hf-checkpoint", "--load"} <= set(subjects(imported, "difference"))


@pytest.mark.parametrize("bad", ["NOEQUALS", "1X=2", "=v", "A-B=1", "sk-live-1234567890abcdefghij"])
def test_env_usage_errors_exit_2(bad: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError):
        import_train_sh(UPSTREAM, env=[bad])
    proc = _acrl("import", "train-sh", str(UPSTREAM), "-o", "s.toml", "--env", bad, cwd=tmp_path)
    assert proc.returncode == 2 and "--env" in proc.stderr and "Traceback" not in proc.stderr
    assert "sk-live" not in proc.stderr and not (tmp_path / "s.toml").exists()


SUBSTITUTIONS = ["$(seq 3)", "$(seq 2 5)", "$(seq 16 8 256)", "1 2 4 8 $(seq 16 8 40)", "$(seq 5 -2 -3)", "$(seq 5 1)",
                 "$(seq -- -2 1)", '"$(seq 1 3)"', "x$(seq 1 2)y", "$(seq $N)", "$(basename /a/b/c.sh .sh)",
                 "$(basename /a/b/)", "$(basename -- .sh .sh)", "$(basename /)", "$(basename '')", "$(dirname /a/b/c)",
                 "$(dirname a)", "$(dirname /a)", "$(dirname /a//b//)", "$(dirname /)", "$(dirname '')",
                 '"$(basename "$(dirname "/x y/z/w")")"', "$((N * 3 + 1))", "$(( 4 * 512 * 1024 * 1024))",
                 "$((2 ** 70))", "$((9223372036854775807 + 1))", "$((-7 / 2)) $((-7 % 2))"]


@pytest.mark.parametrize("words", SUBSTITUTIONS)
def test_substitutions_evaluated_as_bash_does(words: str, tmp_path: Path) -> None:
    """seq, basename, dirname and $(( )) give the words bash gives (computed, never run)."""
    path = script(tmp_path, f"N=4\nEXP_ID=e\npython3 /s/train.py --rollout-stop-token-ids {words}\n")
    imported = import_train_sh(path)
    value = imported.spec["extra"]["flags"]["--rollout-stop-token-ids"]
    ours = [str(v) for v in value] if isinstance(value, list) else [] if value is True else [str(value)]
    bash = subprocess.run(["bash", "-c", f"N=4; printf '%s\\0' --rollout-stop-token-ids {words}"], capture_output=True,
                          text=True, check=True).stdout.split("\0")[1:-1]
    assert ours == bash


@pytest.mark.parametrize("words", ["$(seq 1 100000000)", "$(seq 1 0 5)", "$(seq 1.5 3)", "$(seq -w 1 3)",
                                   "$(basename -a x y)", "$(dirname a b)", "$(seq $UNSET)", "$(seq 1 2 | tac)",
                                   "$(seq 1 $(date +%s))"])
def test_substitutions_it_does_not_evaluate_are_noted(words: str, tmp_path: Path) -> None:
    path = script(tmp_path, f"EXP_ID=e\npython3 /s/train.py --lr 1 \\\n  --rollout-stop-token-ids {words}\n")
    started = time.monotonic()
    imported = import_train_sh(path)
    assert time.monotonic() - started < 5  # a huge seq is refused, not produced
    assert "--rollout-stop-token-ids" not in imported.spec.get("extra", {}).get("flags", {})
    (note,) = [n for n in notes(imported, "unresolved") if n.message.startswith("--rollout-stop-token-ids:")]
    assert note.where == f"{path}:3" and "line 3" in note.message


def test_repeated_model_args_flag_is_the_override_argparse_makes(tmp_path: Path, toolbox: Toolbox) -> None:
    fixture = SHAPES / "run-qwen3-4B-shapes.sh"
    imported = import_train_sh(fixture, env=["SAVE_DIR=/ckpt"])
    assert imported.spec["model"]["overrides"] == {"rotary-base": 5000000}
    assert "--rotary-base" not in imported.spec["extra"]["flags"]
    assert subjects(imported, "difference")["--rotary-base"] == f"{fixture}:53"
    (note,) = [n for n in notes(imported, "difference") if n.message.startswith("--rotary-base")]
    assert "line 14" in note.message and "line 53" in note.message  # the source line and the repeat
    argv = _last(_compiled_argv(imported, tmp_path, toolbox))  # compiles: no ACRL-F002
    assert argv["--rotary-base"] == ["5000000"]
    assert argv["--sglang-cuda-graph-bs"] == [str(n) for n in (1, 2, 4, 8, *range(16, 257, 8))]
    assert argv["--update-weight-buffer-size"] == [str(2 * 512 * 1024 * 1024)]
    assert argv["--wandb-group"] == ["run-qwen3-4B-shapes"] and argv["--save"] == ["/ckpt/Qwen3-4B_slime/"]


def test_the_round_trip_submits_what_the_script_submits(tmp_path: Path, toolbox: Toolbox) -> None:
    """The fixture run under the recording shims (its model script written from acrl's catalog), against the
    bundle of its import: every flag the script passes has the value argparse keeps from the script."""
    from acrl.compiler._pipeline.model_args.catalog import entry  # lazy: the catalog, for this test only

    folder = tmp_path / "scripts"
    (folder / "models").mkdir(parents=True)
    shutil.copy(SHAPES / "run-qwen3-4B-shapes.sh", folder)
    args = " ".join(shlex_quote(a) for a in entry("qwen3-4B").model_args())  # type: ignore[union-attr]
    (folder / "models" / "qwen3-4B.sh").write_text(f"MODEL_ARGS=({args})\n", encoding="utf-8")
    original = run_train_sh(folder / "run-qwen3-4B-shapes.sh", toolbox, tmp_path / "orig", {"SAVE_DIR": "/ckpt"})
    assert original.returncode == 0, original.stderr
    imported = import_train_sh(folder / "run-qwen3-4B-shapes.sh", env=["SAVE_DIR=/ckpt"])
    ours = _last(_compiled_argv(imported, tmp_path, toolbox))
    theirs = _last(original.slime_argv)
    assert {flag: _numbers(ours.get(flag)) for flag in theirs} == {flag: _numbers(v) for flag, v in theirs.items()}


def _numbers(words: list[str] | None) -> list[str | float] | None:
    """Words as argparse's type=float reads them ("1" and "1.0" alike)."""
    def read(word: str) -> str | float:
        try:
            return float(word)
        except ValueError:
            return word
    return None if words is None else [read(w) for w in words]


def test_model_script_beside_the_script_tells_which_flags_are_model_args(tmp_path: Path) -> None:
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "tiny-moe.sh").write_text(
        "N=2\nfor ((i=0; i<N; i++)); do arr+=(1); done\nMODEL_ARGS=(\n   --num-layers 2\n"
        "   --moe-token-dispatcher-type alltoall\n   --moe-router-topk=8\n)\n", encoding="utf-8")
    path = script(tmp_path, 'SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"\n'
                  'source "${SCRIPT_DIR}/models/tiny-moe.sh"\n' + SUBMIT +
                  "  --moe-router-topk 4 \\\n  ${MODEL_ARGS[@]} \\\n  --moe-token-dispatcher-type flex --lr 1e-6\n",
                  "run-tiny.sh")
    imported = import_train_sh(path)
    assert imported.spec["model"] == {"type": "tiny-moe", "overrides": {"moe-token-dispatcher-type": "flex"}}
    assert "extra" not in imported.spec
    differences = subjects(imported, "difference")
    assert differences["--moe-token-dispatcher-type"] == f"{path}:6"
    assert differences["--moe-router-topk"] == f"{path}:4"  # before MODEL_ARGS: MODEL_ARGS' value counts


def test_repeated_inline_model_args_flag_and_a_keyed_one(tmp_path: Path) -> None:
    path = script(tmp_path, "EXP_ID=e\nMODEL_ARGS=(--num-layers 2 --rotary-base 10 --attention-softmax-in-fp32)\n"
                  'python3 /s/train.py "${MODEL_ARGS[@]}" --lr 1e-6 \\\n'
                  "  --rotary-base 20 --attention-softmax-in-fp32\n")
    imported = import_train_sh(path)
    assert imported.spec["model"]["args"] == {"num-layers": 2, "rotary-base": 10,
                                              "attention-softmax-in-fp32": True}
    assert imported.spec["model"]["overrides"] == {"rotary-base": 20}
    assert imported.spec["train"]["attention_softmax_in_fp32"] is True
    differences = subjects(imported, "difference")
    assert differences["--rotary-base"] == differences["--attention-softmax-in-fp32"] == f"{path}:4"


def test_num_epoch_runs_keep_it(tmp_path: Path, toolbox: Toolbox) -> None:
    fixture = SHAPES / "run-qwen3-4B-sft-shapes.sh"
    imported = import_train_sh(fixture)
    # --rollout-function-path slime.rollout.sft_rollout.generate_rollout: not slime's default, so "custom"
    assert imported.spec["experiment"] == {"id": "run-qwen3-4B-sft-shapes", "integration": "custom", "num_epoch": 3}
    assert not [n for n in imported.notes if "--num-rollout" in n.message]
    argv = _compiled_argv(imported, tmp_path, toolbox)
    assert _last(argv)["--num-epoch"] == ["3"] and "--num-rollout" not in argv
    both = script(tmp_path, "EXP_ID=e\n" + SUBMIT + "  --num-epoch 3 \\\n  --num-rollout 5\n")
    imported = import_train_sh(both)
    assert imported.spec["experiment"] == {"id": "e", "integration": "slime", "num_rollout": 5}  # --num-epoch ignored
    assert subjects(imported, "difference")["--num-epoch"] == f"{both}:3"


def test_num_epoch_and_num_rollout_are_exclusive_in_a_spec(write_spec: Any) -> None:
    with pytest.raises(AcrlError) as info:
        compile_spec(write_spec({"experiment": {"num_epoch": 2, "num_rollout": 4}}))
    assert "ACRL-B006" in str(info.value)
    bundle = compile_spec(write_spec({"experiment": {"num_epoch": 2}}))
    flags = [a.flag for g in bundle.groups for a in g.args]
    assert "--num-epoch" in flags and "--num-rollout" not in flags


@pytest.mark.parametrize(("name", "expected"), [("run-qwen3-4B.sh", "run-qwen3-4B"), ("train.sh", "train"),
                                                ("my run (v2).sh", "my-run-v2-"), ("..x..y.sh", "x.y"),
                                                ("_.sh", ""), ("a" * 80 + ".sh", "a" * 64)])
def test_experiment_id_from_the_file_name(name: str, expected: str) -> None:
    assert experiment_id(name) == expected
    assert not expected or re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}", expected)


def test_broken_line_continuation_is_reported(tmp_path: Path) -> None:
    fixture = SHAPES / "run-broken-continuation.sh"
    imported = import_train_sh(fixture)
    (broken,) = [n for n in notes(imported, "difference") if n.message.startswith("broken line continuation")]
    assert broken.where == f"{fixture}:18" and "line 19" in broken.message
    # bash never passed MODEL_ARGS and ROLLOUT_ARGS, and slime cannot train without them (Megatron requires
    # --num-layers): the spec takes them as the script means them, so it compiles (run-kimi-k2-Instruct.sh)
    assert imported.spec["data"] == {"path": "/root/data.jsonl"} and imported.spec["experiment"]["num_rollout"] == 100
    assert imported.spec["model"]["type"] == "qwen3-4B"
    assert "extra" not in imported.spec and imported.spec["weight_sync"] == {"buffer_size": 4 * 512 * 1024 * 1024}
    twice = script(tmp_path, SUBMIT + "  --lr 1e-6\n  --num-rollout 7\n  --rollout-batch-size 16\n", "twice.sh")
    spec = import_train_sh(twice).spec  # two lines without their backslash: both joined, each noted
    assert spec["experiment"]["num_rollout"] == 7 and spec["rollout"]["batch_size"] == 16
    assert len([n for n in import_train_sh(twice).notes if n.message.startswith("broken line continuation")]) == 2
    whole = script(tmp_path, SUBMIT + "  --lr 1e-6\n\necho done\n--not-a-continuation\n")
    assert not [n for n in import_train_sh(whole).notes if "continuation" in n.message]


# --- the job's environment and launch (issue 14) -----------------------------------------------

LAUNCH = FIXTURES / "launch_env"


def line_of(path: Path, needle: str) -> int:
    """The first line of ``path`` holding ``needle``."""
    return next(n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in line)


def kinds_at(imported: Imported, path: Path, line: int) -> list[str]:
    """The kinds of the notes naming ``path:line``."""
    return [n.kind for n in imported.notes if n.where == f"{path}:{line}"]


def test_runtime_env_json_maps_to_env_vars_and_megatron_dir(tmp_path: Path) -> None:
    path = LAUNCH / "run-launch.sh"
    imported = import_train_sh(path)
    spec = imported.spec
    # not HF_TOKEN, not what acrl sets itself; PYTHONPATH's entry after Megatron's, in its place
    assert spec["env"] == {"vars": {"NVSHMEM_DISABLE_NCCL": "1"}, "pythonpath": ["/root/extra"]}
    assert spec["slime"]["megatron_dir"] == "/root/Megatron-LM"
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in render_spec(imported)
    assert kinds_at(imported, path, line_of(path, 'HF_TOKEN')) == ["difference"]
    assert kinds_at(imported, path, line_of(path, 'PYTHONPATH')) == []  # every entry mapped
    assert kinds_at(imported, path, line_of(path, 'CUDA_DEVICE_MAX_CONNECTIONS')) == ["default"]  # acrl sets it
    assert kinds_at(imported, path, line_of(path, 'NCCL_NVLS_ENABLE')) == ["unresolved"]  # HAS_NVLINK: in an if
    assert kinds_at(imported, path, line_of(path, 'pip')) == ["difference"]
    problems = ""
    try:
        compile_spec(tmp_path / "spec.toml", data=render_spec(imported).encode())
    except AcrlError as exc:
        problems = str(exc)
    assert "[env]" not in problems and "[cluster]" not in problems


def test_ray_start_head_options_map_to_cluster_keys() -> None:
    path = LAUNCH / "run-launch.sh"
    imported = import_train_sh(path)
    cluster = imported.spec["cluster"]
    assert (cluster["gpus_per_node"], cluster["head_port"], cluster["dashboard_host"], cluster["dashboard_port"]) \
        == (4, 6380, "0.0.0.0", 8266)
    # --node-ip-address ${MASTER_ADDR} (MASTER_ADDR defaulting to 127.0.0.1), the other option as written
    assert (cluster["node_ip_address"], cluster["ray_start_args"]) == ("127.0.0.1", ["--temp-dir", "/tmp/ray"])
    start = line_of(path, "ray start --head")
    assert kinds_at(imported, path, start) == ["default"]  # node_ip_address: MASTER_ADDR at run time overrides it


def test_what_the_launch_cannot_map_is_a_note_naming_the_line() -> None:
    path = LAUNCH / "run-launch.sh"
    imported = import_train_sh(path)
    assert kinds_at(imported, path, line_of(path, "for WORKER_IP")) == ["difference"]  # the ssh loop
    assert kinds_at(imported, path, line_of(path, "<<EOF_CONFIG")) == ["difference"]  # the here-document
    assert kinds_at(imported, path, line_of(path, 'if [ -n "${DEBUG')) == ["difference"]  # flags in an if
    assert kinds_at(imported, path, line_of(path, "export RAY_EXPERIMENTAL")) == []  # [cluster] env
    assert imported.spec["cluster"]["env"] == {"RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1"}
    # read at run time; its default, 127.0.0.1, became [cluster] node_ip_address
    assert kinds_at(imported, path, line_of(path, "export MASTER_ADDR")) == ["default", "default"]
    assert kinds_at(imported, path, line_of(path, "export PYTHONUNBUFFERED")) == ["default"]  # acrl's train.sh sets it
    assert kinds_at(imported, path, line_of(path, "HAS_NVLINK=1")) == []  # the if holds no flag or ray command


def test_runtime_env_written_as_a_here_document() -> None:
    path = LAUNCH / "run-heredoc-env.sh"
    imported = import_train_sh(path)
    spec = imported.spec
    # CUDA_DEVICE_MAX_CONNECTIONS=2 is not what acrl sets, so it is kept; "${MASTER_ADDR}" -> [env] forward (i14-r4)
    assert spec["env"] == {"vars": {"GLOO_SOCKET_IFNAME": "eth0", "CUDA_DEVICE_MAX_CONNECTIONS": "2"},
                           "forward": ["WANDB_ENTITY", "MASTER_ADDR"]}
    assert spec["slime"]["megatron_dir"] == "/opt/Megatron-LM"
    assert "dashboard_host" not in spec.get("cluster", {}) and "gpus_per_node" not in spec.get("cluster", {})
    assert kinds_at(imported, path, line_of(path, "ray start")) == ["difference"]  # dashboard_host 10.0.0.1: no key
    assert kinds_at(imported, path, line_of(path, '"working_dir"')) == ["difference"]
    assert kinds_at(imported, path, line_of(path, '"MASTER_ADDR"')) == ["difference"]  # forwarded (i14-r4)
    assert kinds_at(imported, path, line_of(path, "<<EOF_JSON")) == []  # read: not noted as a here-document


@pytest.mark.parametrize("body", ['--runtime-env-json "$ENVJ"', "--runtime-env-json='[1, 2]'",
                                  "--runtime-env-json='{\"env_vars\": [1]}'", "--runtime-env-json '{\"env_vars\": "
                                  "{\"A\": 1}}'", "--runtime-env-json='{'", "--runtime-env env.yaml"])
def test_a_runtime_env_it_cannot_read_is_a_note_not_a_crash(body: str, tmp_path: Path) -> None:
    path = script(tmp_path, f"ENVJ=$(make_env)\nray job submit {body} \\\n -- python3 /root/slime/train.py --lr 1\n")
    imported = import_train_sh(path)
    assert "env" not in imported.spec
    assert {"unresolved", "difference"} & set(kinds_at(imported, path, 2 if "ENVJ" not in body else 1) +
                                              kinds_at(imported, path, 2))


def test_acrl_own_train_sh_keeps_env_vars(tmp_path: Path, write_spec: Any) -> None:
    spec = write_spec({"env": {"vars": {"NCCL_DEBUG": "INFO", "NVSHMEM_DISABLE_NCCL": "1"}}})
    compile_into(spec, tmp_path / "bundle")
    imported = import_train_sh(tmp_path / "bundle" / "train.sh")
    assert imported.spec["env"] == {"vars": {"NCCL_DEBUG": "INFO", "NVSHMEM_DISABLE_NCCL": "1"}}
    assert not notes(imported, "unresolved"), imported.notes


@pytest.mark.parametrize("options", ["--num-gpus --port", "--port=99999999999999999999 --num-gpus 65",
                                     "--dashboard-host=${UNSET_HOST}", "--dashboard-host 10.1.1.1", "--num-gpus 0"])
def test_ray_start_values_the_spec_cannot_take_are_notes(options: str, tmp_path: Path) -> None:
    path = script(tmp_path, f"ray start --head {options}\n" + SUBMIT + " --lr 1\n")
    imported = import_train_sh(path)
    assert not {"gpus_per_node", "head_port", "dashboard_host"} & set(imported.spec.get("cluster", {}))
    assert kinds_at(imported, path, 1) and set(kinds_at(imported, path, 1)) <= {"difference", "unresolved"}


def test_runtime_env_variable_names_it_cannot_set_are_notes(tmp_path: Path) -> None:
    path = script(tmp_path, 'E="{\\"env_vars\\": {\\"A\\": {\\"x\\": 1}, \\"\\": \\"v\\", \\"B=C\\": \\"1\\", '
                            '\\"OK\\": \\"1\\"}}"\nray job submit --runtime-env-json "$E" -- python3 /s/train.py\n')
    imported = import_train_sh(path)
    assert imported.spec["env"] == {"vars": {"OK": "1"}}
    assert kinds_at(imported, path, 1) == ["difference"] * 3


@pytest.mark.parametrize("how", ["option", "variable"])
def test_model_script_from_the_slime_checkout_tells_which_flags_are_model_args(how: str, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The script sources scripts/models/<x>.sh beside itself on the cluster, absent here: this machine's slime
    checkout (--slime-checkout / ACRL_SLIME_CHECKOUT, compiler/_slime/checkout.py) has it."""
    from acrl.compiler._slime.checkout import set_from_options  # lazy: the option, as acrl's command line sets it

    checkout = tmp_path / "slime"
    (checkout / "scripts" / "models").mkdir(parents=True)
    (checkout / "scripts" / "models" / "tiny-moe.sh").write_text(
        "MODEL_ARGS=(\n   --num-layers 2\n   --moe-token-dispatcher-type alltoall\n)\n", encoding="utf-8")
    (tmp_path / "run").mkdir()
    path = script(tmp_path / "run", 'SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"\n'
                  'source "${SCRIPT_DIR}/models/tiny-moe.sh"\n' + SUBMIT +
                  "  ${MODEL_ARGS[@]} \\\n  --moe-token-dispatcher-type flex --lr 1e-6\n", "run-tiny.sh")
    monkeypatch.delenv("ACRL_SLIME_CHECKOUT", raising=False)
    without = import_train_sh(path)  # no checkout: the repeated flag is not known to be MODEL_ARGS'
    assert without.spec["extra"]["flags"] == {"--moe-token-dispatcher-type": "flex"}
    if how == "option":
        set_from_options(str(checkout), None)
    else:
        monkeypatch.setenv("ACRL_SLIME_CHECKOUT", str(checkout))
    try:
        imported = import_train_sh(path)
    finally:
        set_from_options(None, None)
    assert imported.spec["model"] == {"type": "tiny-moe", "overrides": {"moe-token-dispatcher-type": "flex"}}
    assert "extra" not in imported.spec
    assert subjects(imported, "difference")["--moe-token-dispatcher-type"] == f"{path}:5"


@pytest.mark.parametrize(("pythonpath", "before", "after", "megatron"), [
    ("/root/slime:/root/Megatron-LM/", ["/root/slime"], None, "/root/Megatron-LM"),  # the SFT scripts' order
    ("/a:/opt/Megatron-LM:/b:/c", ["/a"], ["/b", "/c"], "/opt/Megatron-LM"),
    ("/root/Megatron-LM/:/root/extra", None, ["/root/extra"], "/root/Megatron-LM"),
])
def test_pythonpath_entries_keep_their_place_around_megatron(pythonpath: str, before: list[str] | None,
                                                            after: list[str] | None, megatron: str,
                                                            tmp_path: Path) -> None:
    path = script(tmp_path, f"E='{{\"env_vars\": {{\"PYTHONPATH\": \"{pythonpath}\"}}}}'\n"
                            'ray job submit --runtime-env-json "$E" -- python3 /root/slime/train.py --lr 1\n')
    imported = import_train_sh(path)
    env = imported.spec.get("env", {})
    assert (env.get("pythonpath_before_megatron"), env.get("pythonpath")) == (before, after)
    assert imported.spec["slime"]["megatron_dir"] == megatron
    assert kinds_at(imported, path, 1) == []


@pytest.mark.parametrize(("pythonpath", "kinds"), [("/x:/y", ["difference"]), ("rel/dir:/root/Megatron-LM",
                                                                                ["difference"])])
def test_pythonpath_the_spec_cannot_hold_as_written_is_a_note(pythonpath: str, kinds: list[str],
                                                              tmp_path: Path) -> None:
    path = script(tmp_path, f"E='{{\"env_vars\": {{\"PYTHONPATH\": \"{pythonpath}\"}}}}'\n"
                            'ray job submit --runtime-env-json "$E" -- python3 /root/slime/train.py --lr 1\n')
    imported = import_train_sh(path)
    assert kinds_at(imported, path, 1) == kinds
    assert "rel/dir" not in json.dumps(imported.spec)


def test_exports_before_the_head_become_cluster_env_and_the_rest_are_notes() -> None:
    path = LAUNCH / "run-amd-launch.sh"
    imported = import_train_sh(path)
    assert imported.spec["cluster"]["env"] == {"RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1",
                                               "HIP_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"}
    assert imported.spec["env"] == {"pythonpath_before_megatron": ["/root/slime"], "vars": {"NCCL_DEBUG": "WARN"}}
    assert kinds_at(imported, path, line_of(path, "export NODE_RANK_FILE")) == ["unresolved"]  # $(hostname)
    assert kinds_at(imported, path, line_of(path, "export LATE_SETTING")) == ["difference"]  # after the head
    assert kinds_at(imported, path, line_of(path, "export PYTHONUNBUFFERED")) == ["default"]  # acrl does it
    start = line_of(path, "ray start --head")
    assert kinds_at(imported, path, start) == ["default"]  # node_ip_address, overridden by MASTER_ADDR
    assert imported.spec["cluster"]["ray_start_args"] == ["--num-cpus", "64", "--temp-dir=/tmp/ray_amd"]


@pytest.mark.parametrize(("exports", "kind"), [("export WORKER_IP=10.0.0.2", "difference"),
                                               ("export RAY_ADDRESS=http://h:8265", "difference"),
                                               ("export HF_NOTES=hf_abcdefghijklmnopqrstuvwxyz0123456789",
                                                "difference"),
                                               ("export NODE_X=\"$(hostname)\"", "unresolved")])
def test_exports_before_the_head_the_spec_cannot_take_are_notes(exports: str, kind: str, tmp_path: Path) -> None:
    path = script(tmp_path, f"{exports}\nray start --head --num-gpus 8\n" + SUBMIT + " --lr 1\n")
    imported = import_train_sh(path)
    assert "env" not in imported.spec.get("cluster", {})
    assert kinds_at(imported, path, 1) == [kind]
    assert "hf_abcdefghijklmnopqrstuvwxyz" not in render_spec(imported)


@pytest.mark.parametrize(("options", "args", "kinds"), [
    ("--block --num-cpus=4", ["--num-cpus=4"], ["difference"]),  # --block: acrl's train.sh must go on
    ("--dashboard-agent-grpc-port 1 --resources '{\"x\": 1}'", ["--resources", '{"x": 1}'], ["difference"]),
    ("--object-store-memory ${UNSET_MEMORY} --num-cpus 8", ["--num-cpus", "8"], ["unresolved"]),
    ("--node-ip-address ${UNSET_IP}", None, ["unresolved"]),
])
def test_other_head_options_become_ray_start_args(options: str, args: list[str] | None, kinds: list[str],
                                                  tmp_path: Path) -> None:
    path = script(tmp_path, f"ray start --head --num-gpus 8 {options}\n" + SUBMIT + " --lr 1\n")
    imported = import_train_sh(path)
    assert imported.spec.get("cluster", {}).get("ray_start_args") == args
    assert "node_ip_address" not in imported.spec.get("cluster", {})
    assert kinds_at(imported, path, 1) == kinds


def test_a_flag_the_targeted_slime_lacks_is_left_out_with_its_did_you_mean(tmp_path: Path) -> None:
    """slime ignores a flag no parser knows; the targeted commit's facts (compiler/_slime/commits) say which those
    are, so the import leaves it out (its spec would not compile: ACRL-F003) and names the likely flag."""
    path = script(tmp_path, "EXP_ID=e\npython3 /s/train.py --lr 1 --use-tiss --log-interval 5\n")
    imported = import_train_sh(path)
    assert imported.spec["extra"]["flags"] == {"--log-interval": 5}
    (note,) = [n for n in notes(imported, "difference") if n.message.startswith("--use-tiss is left out")]
    assert note.message.endswith("; it did nothing; did you mean --use-tis?")


def test_the_new_name_of_cuda_graph_max_bs_sets_its_key(tmp_path: Path) -> None:
    """sglang 0.5.15.post1 renames --cuda-graph-max-bs to --cuda-graph-max-bs-decode (the old one a deprecated alias):
    either spelling is [sglang] cuda_graph_max_bs, which the bundle passes as the target's sglang names it."""
    path = script(tmp_path, "EXP_ID=e\npython3 /s/train.py --lr 1 --sglang-cuda-graph-max-bs-decode 48\n")
    imported = import_train_sh(path)
    assert imported.spec["sglang"]["cuda_graph_max_bs"] == 48
    assert "--sglang-cuda-graph-max-bs-decode" not in imported.spec.get("extra", {}).get("flags", {})
