"""`acrl import slime-runner`: real YAML files, the real CLI, the spec compiled by acrl-compile, and the generated
train.sh executed by bash with the shims: the slime argv it submits is compared with what SlimeRunner would pass.

What SlimeRunner would pass comes from :func:`slime_runner_argv`, an oracle transcribed from SlimeRunner's source,
independent of acrl's own mapping, and itself checked against an argv written out by hand (MINIMAL_EXPECTED).
"""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_train_sh import CALLER_LD_LIBRARY_PATH, Toolbox, make_toolbox, run_train_sh

from acrl.compiler import compile_spec
from acrl.compiler._importers.base import ImportInputError, render_spec
from acrl.compiler._importers.slime_runner import import_slime_runner
from acrl.compiler.errors import UsageError

BIN = Path(sys.executable).parent
ARN = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-abc123"
TINY_MODEL_ARGS = ["--swiglu", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4",
                   "--vocab-size", "1000"]


# --- the oracle ----------------------------------------------------------------------------------

RUNNER_DEFAULTS: dict[str, Any] = {
    "num_gpus": 8, "tp_size": 2, "rollout_gpus_per_engine": 2, "slime_dir": "/root/slime",
    "megatron_dir": "/root/Megatron-LM", "cuda_home": None, "model_id": "default", "acr_timeout": 900,
    "acr_tps_limit": 25, "max_concurrent": 100, "max_pool_connections": 100, "gateway_port": 9090,
    "reward_postprocessing": "grpo", "sglang_tool_call_parser": "qwen", "sglang_reasoning_parser": None,
    "sglang_data_parallel_size": 1, "cumulative_token_mode": False, "renderer_family": "auto",
    "gateway_log_level": "warning", "rollout_batch_size": 32, "n_samples_per_prompt": 8,
    "rollout_max_response_len": 1024, "rollout_temperature": 1.0, "lr": 1e-6, "eps_clip": 0.2,
    "eps_clip_high": 0.28, "weight_decay": 0.1, "adam_beta2": 0.98, "sglang_mem_fraction_static": 0.7,
    "sglang_context_length": None, "max_tokens_per_gpu": 9216, "wandb_project": None, "wandb_group": None,
    "extra_flags": [],
}
TOOLKIT_CONFIG_KEYS = ("agent_runtime_arn", "s3_bucket", "exp_id", "gateway_port", "acr_timeout", "model_id",
                       "acr_tps_limit", "max_concurrent", "max_pool_connections", "reward_postprocessing",
                       "cumulative_token_mode", "renderer_family", "gateway_log_level")


def _runner(yaml_path: Path) -> dict[str, Any]:
    """SlimeRunner.from_yaml: yaml.safe_load(f) or {}, then the dataclass's defaults for what is not given."""
    data = yaml.safe_load(yaml_path.read_text(encoding="utf-8")) or {}
    return {**RUNNER_DEFAULTS, **data}


def _model_args(self: Mapping[str, Any]) -> list[str]:
    """SlimeRunner._source_model_script."""
    script = Path(self["slime_dir"]) / "scripts" / "models" / f"{self['model_type']}.sh"
    cmd = f'source "{script}"; printf "%s\\0" "${{MODEL_ARGS[@]}}"'
    out = subprocess.check_output(["bash", "-c", cmd])
    return [x.decode() for x in out.split(b"\0") if x]


def _cuda_ld_library_path(self: Mapping[str, Any], purelib: str, ambient: str) -> str:
    """SlimeRunner._cuda_ld_library_path, with the launching Python's purelib and LD_LIBRARY_PATH as arguments."""
    nvidia_libs = sorted(glob.glob(os.path.join(purelib, "nvidia", "*", "lib")))
    kept = [p for p in ambient.split(":") if p and not re.match(r"^/usr/local/cuda(-[0-9.]+)?/", p)]
    return ":".join([*nvidia_libs, f"{self['cuda_home']}/lib64", *kept])


def slime_runner_argv(yaml_path: Path, num_rollout: int, config_path: str, environ: Mapping[str, str],
                      purelib: str) -> list[str]:
    """What ``SlimeRunner.from_yaml(yaml_path).train(num_rollout)`` runs after ``ray job submit ... --``.

    Transcribed from awslabs/agentcore-rl-toolkit, src/agentcore_rl_toolkit/backends/slime/runner.py at commit
    45509ca1e1053a479181d5d3aa2cbef3671d76b5: ``_submit_ray_job`` (``python3 str(Path(slime_dir) / "train.py")``)
    and ``_build_slime_flags``, statement by statement. ``config_path`` is the temporary custom-config file,
    ``environ`` the launching environment (WANDB_API_KEY, LD_LIBRARY_PATH)."""
    self = _runner(yaml_path)
    flags: list[str] = [
        *_model_args(self),
        "--hf-checkpoint", self["model_dir"],
        "--ref-load", self["model_dir"],
        "--prompt-data", self["data_path"],
        "--num-rollout", str(num_rollout),
        "--tensor-model-parallel-size", str(self["tp_size"]),
        "--rollout-num-gpus-per-engine", str(self["rollout_gpus_per_engine"]),
        "--input-key", "prompt",
        "--rollout-batch-size", str(self["rollout_batch_size"]),
        "--n-samples-per-prompt", str(self["n_samples_per_prompt"]),
        "--rollout-max-response-len", str(self["rollout_max_response_len"]),
        "--rollout-temperature", str(self["rollout_temperature"]),
        "--advantage-estimator", "grpo",
        "--use-kl-loss",
        "--kl-loss-type", "low_var_kl",
        "--eps-clip", str(self["eps_clip"]),
        "--eps-clip-high", str(self["eps_clip_high"]),
        "--lr", str(self["lr"]),
        "--lr-decay-style", "constant",
        "--weight-decay", str(self["weight_decay"]),
        "--adam-beta2", str(self["adam_beta2"]),
        "--optimizer-cpu-offload",
        "--overlap-cpu-optimizer-d2h-h2d",
        "--use-precision-aware-optimizer",
        "--sequence-parallel",
        "--sglang-mem-fraction-static", str(self["sglang_mem_fraction_static"]),
        "--sglang-cuda-graph-max-bs", "32",
        "--sglang-tool-call-parser", self["sglang_tool_call_parser"],
        "--sglang-log-level", "warning",
        "--sglang-log-level-http", "warning",
        "--attention-dropout", "0.0",
        "--hidden-dropout", "0.0",
        "--accumulate-allreduce-grads-in-fp32",
        "--attention-softmax-in-fp32",
        "--attention-backend", "flash",
        "--actor-num-gpus-per-node", str(self["num_gpus"]),
        "--colocate",
        "--megatron-to-hf-mode", "bridge",
        "--rollout-function-path", "agentcore_rl_toolkit.backends.slime.integration.rollout.generate_rollout",
        "--custom-reward-post-process-path",
        "agentcore_rl_toolkit.backends.slime.integration.rewards.normalize_episode_rewards",
        "--custom-config-path", config_path,
        "--use-dynamic-global-batch-size",
        "--use-dynamic-batch-size",
        "--max-tokens-per-gpu", str(self["max_tokens_per_gpu"]),
    ]
    if self["sglang_reasoning_parser"]:
        flags.extend(["--sglang-reasoning-parser", self["sglang_reasoning_parser"]])
    if self["sglang_context_length"] is not None:
        flags.extend(["--sglang-context-length", str(self["sglang_context_length"])])
    flags.extend(["--sglang-data-parallel-size", str(self["sglang_data_parallel_size"])])
    if self["cuda_home"]:
        train_env = {"CUDA_HOME": self["cuda_home"],
                     "LD_LIBRARY_PATH": _cuda_ld_library_path(self, purelib, environ.get("LD_LIBRARY_PATH", ""))}
        flags.extend(["--train-env-vars", json.dumps(train_env)])
    if environ.get("WANDB_API_KEY"):
        flags.append("--use-wandb")
        if self["wandb_project"]:
            flags.extend(["--wandb-project", self["wandb_project"]])
        if self["wandb_group"]:
            flags.extend(["--wandb-group", self["wandb_group"]])
    flags.extend(self["extra_flags"])
    return ["python3", str(Path(self["slime_dir"]) / "train.py"), *flags]


def slime_runner_custom_config(yaml_path: Path) -> dict[str, Any]:
    """SlimeRunner._write_toolkit_config: {k: getattr(self, k) for k in _TOOLKIT_CONFIG_KEYS} (same commit)."""
    self = _runner(yaml_path)
    return {k: self[k] for k in TOOLKIT_CONFIG_KEYS}


# --- comparing argvs ---------------------------------------------------------------------------

def effective(argv: Sequence[str]) -> dict[str, tuple[Any, ...]]:
    """What slime's argparse makes of the flags: flag -> values, the last occurrence winning; numbers compared as
    numbers (YAML 1.1 reads 2e-6 as a string, which SlimeRunner passed as written), JSON values parsed."""
    out: dict[str, tuple[Any, ...]] = {}
    current: list[Any] | None = None
    for token in argv[2:]:
        if token.startswith("--") and not _is_number(token):
            flag, eq, inline = token.partition("=")
            current = []
            out[flag] = ()  # placeholder, replaced below
            if eq:
                current.append(_value(inline))
            out[flag] = current  # type: ignore[assignment]
        elif current is not None:
            current.append(_value(token))
    return {flag: tuple(values) for flag, values in out.items()}


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _value(token: str) -> Any:
    if _is_number(token):
        return float(token)
    if token.startswith("{"):
        return json.loads(token)
    return token


def differing(a: Mapping[str, Any], b: Mapping[str, Any]) -> set[str]:
    return {flag for flag in a.keys() | b.keys() if a.get(flag) != b.get(flag)}


def noted_flags(notes: Sequence[Mapping[str, str]]) -> set[str]:
    """Every flag that a note of kind "difference" names."""
    return {flag for n in notes if n["kind"] == "difference"
            for flag in re.findall(r"--[a-z0-9][a-z0-9-]*", n["message"] + " " + n["where"])}


# --- fixtures and helpers ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def toolbox(tmp_path_factory: pytest.TempPathFactory) -> Toolbox:
    return make_toolbox(tmp_path_factory.mktemp("toolbox"))


@pytest.fixture
def slime_dir(tmp_path: Path) -> Path:
    """A slime checkout holding only scripts/models/tiny.sh, sourced by SlimeRunner and by acrl alike."""
    models = tmp_path / "slime" / "scripts" / "models"
    models.mkdir(parents=True)
    (models / "tiny.sh").write_text("MODEL_ARGS=(\n  --swiglu\n  --num-layers 2\n  --hidden-size 64\n"
                                    "  --num-attention-heads 4\n  --vocab-size 1000\n)\n", encoding="utf-8")
    return tmp_path / "slime"


def minimal(slime: Path) -> dict[str, Any]:
    return {"exp_id": "smoke-1", "agent_runtime_arn": ARN, "s3_bucket": "my-bucket",
            "model_dir": "/models/Qwen2.5-3B-Instruct", "data_path": "/data/train.jsonl", "model_type": "tiny",
            "slime_dir": str(slime)}


def full(slime: Path) -> dict[str, Any]:
    """Every SlimeRunner field, none at its default (slime_dir with a trailing slash, which Path() dropped)."""
    return {
        # engines of 4 GPUs: SGLang's DP attention of 2 (below) needs an engine tensor size it divides (ACRL-C005)
        **minimal(slime), "slime_dir": f"{slime}/", "num_gpus": 4, "tp_size": 2, "rollout_gpus_per_engine": 4,
        "megatron_dir": "/opt/Megatron-LM", "cuda_home": "/usr/local/cuda-12.9", "model_id": "my-model",
        "acr_timeout": 600, "acr_tps_limit": 10, "max_concurrent": 50, "max_pool_connections": 256,
        "gateway_port": 9191, "reward_postprocessing": "identity", "sglang_tool_call_parser": "qwen25",
        "sglang_reasoning_parser": "qwen3", "sglang_data_parallel_size": 2, "cumulative_token_mode": True,
        "renderer_family": "qwen3", "gateway_log_level": "info", "rollout_batch_size": 16,
        "n_samples_per_prompt": 4, "rollout_max_response_len": 2048, "rollout_temperature": 0.8, "lr": 2e-6,
        "eps_clip": 0.1, "eps_clip_high": 0.3, "weight_decay": 0.01, "adam_beta2": 0.95,
        "sglang_mem_fraction_static": 0.6, "sglang_context_length": 8192, "max_tokens_per_gpu": 4096,
        "wandb_project": "proj", "wandb_group": "grp",
        "extra_flags": ["--sglang-enable-dp-attention", "--num-epoch", "3", "--lr", "3e-6", "--seed=7"],
    }


def write_yaml(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def acrl(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "acrl"), *args], cwd=cwd, capture_output=True, text=True, timeout=60,
                          check=False)


def import_and_run(tmp_path: Path, toolbox: Toolbox, config: Path, env: Mapping[str, str],
                   *options: str) -> tuple[list[str], dict[str, Any], list[dict[str, str]], Path]:
    """`acrl import` (JSON), `acrl-compile`, then `bash train.sh` with the shims: the slime argv, the custom config
    and the notes."""
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", "--json", *options, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    compiled = subprocess.run([str(BIN / "acrl-compile"), "spec.toml", "-o", "bundle"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, check=False)
    assert compiled.returncode == 0, compiled.stderr
    run = run_train_sh(tmp_path / "bundle" / "train.sh", toolbox, tmp_path / "run", env)
    assert run.returncode == 0, run.stderr
    custom = yaml.safe_load((tmp_path / "bundle" / "custom_config.yaml").read_text(encoding="utf-8"))
    return run.slime_argv, custom, report["notes"], tmp_path / "spec.toml"


def purelib(toolbox: Toolbox) -> str:
    return str(Path(toolbox.nvidia_libs[0]).parent.parent.parent)


# What acrl passes differently, on purpose, for a YAML whose extra_flags do not set the step count.
def acrl_differences(runner: dict[str, tuple[Any, ...]], num_steps: int = 1) -> dict[str, tuple[Any, ...]]:
    samples = runner["--rollout-batch-size"][0] * runner["--n-samples-per-prompt"][0]
    out = {k: v for k, v in runner.items() if k not in ("--use-dynamic-global-batch-size", "--num-epoch")}
    out["--custom-config-path"] = ("custom_config.yaml",)
    out["--actor-num-nodes"] = (1.0,)
    node, per_engine = runner["--actor-num-gpus-per-node"][0], runner["--rollout-num-gpus-per-engine"][0]
    if node != 8.0 and node // min(per_engine, node) > 1:  # the node size, which slime assumes is 8 (PR #2012),
        out["--num-gpus-per-node"] = (node,)  # where it changes what slime does: more than one engine on the node
    out["--num-steps-per-rollout"] = (float(num_steps),)
    out["--global-batch-size"] = (samples / num_steps,)
    return out


# --- end to end -------------------------------------------------------------------------------------

MINIMAL_EXPECTED = [  # SlimeRunner's argv for minimal() with num_rollout 1, written out by reading runner.py
    "python3", "SLIME/train.py",
    "--swiglu", "--num-layers", "2", "--hidden-size", "64", "--num-attention-heads", "4", "--vocab-size", "1000",
    "--hf-checkpoint", "/models/Qwen2.5-3B-Instruct", "--ref-load", "/models/Qwen2.5-3B-Instruct",
    "--prompt-data", "/data/train.jsonl", "--num-rollout", "1", "--tensor-model-parallel-size", "2",
    "--rollout-num-gpus-per-engine", "2", "--input-key", "prompt", "--rollout-batch-size", "32",
    "--n-samples-per-prompt", "8", "--rollout-max-response-len", "1024", "--rollout-temperature", "1.0",
    "--advantage-estimator", "grpo", "--use-kl-loss", "--kl-loss-type", "low_var_kl", "--eps-clip", "0.2",
    "--eps-clip-high", "0.28", "--lr", "1e-06", "--lr-decay-style", "constant", "--weight-decay", "0.1",
    "--adam-beta2", "0.98", "--optimizer-cpu-offload", "--overlap-cpu-optimizer-d2h-h2d",
    "--use-precision-aware-optimizer", "--sequence-parallel", "--sglang-mem-fraction-static", "0.7",
    "--sglang-cuda-graph-max-bs", "32", "--sglang-tool-call-parser", "qwen", "--sglang-log-level", "warning",
    "--sglang-log-level-http", "warning", "--attention-dropout", "0.0", "--hidden-dropout", "0.0",
    "--accumulate-allreduce-grads-in-fp32", "--attention-softmax-in-fp32", "--attention-backend", "flash",
    "--actor-num-gpus-per-node", "8", "--colocate", "--megatron-to-hf-mode", "bridge",
    "--rollout-function-path", "agentcore_rl_toolkit.backends.slime.integration.rollout.generate_rollout",
    "--custom-reward-post-process-path",
    "agentcore_rl_toolkit.backends.slime.integration.rewards.normalize_episode_rewards",
    "--custom-config-path", "/tmp/slime-runner-x.yaml", "--use-dynamic-global-batch-size",
    "--use-dynamic-batch-size", "--max-tokens-per-gpu", "9216", "--sglang-data-parallel-size", "1",
]


def test_the_oracle_matches_the_hand_written_argv(tmp_path: Path, slime_dir: Path) -> None:
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(minimal(slime_dir)))
    got = slime_runner_argv(config, 1, "/tmp/slime-runner-x.yaml", {}, str(tmp_path / "none"))
    assert got == [str(slime_dir / "train.py") if t == "SLIME/train.py" else t for t in MINIMAL_EXPECTED]


def test_minimal_yaml_end_to_end(tmp_path: Path, toolbox: Toolbox, slime_dir: Path) -> None:
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(minimal(slime_dir)))
    argv, custom, notes, _ = import_and_run(tmp_path, toolbox, config, {})
    hand = [str(slime_dir / "train.py") if t == "SLIME/train.py" else t for t in MINIMAL_EXPECTED]
    assert argv[:2] == hand[:2] and argv[2:2 + len(TINY_MODEL_ARGS)] == TINY_MODEL_ARGS
    assert effective(argv) == acrl_differences(effective(hand))
    assert len(set(argv[2:]) & {"--use-dynamic-global-batch-size"}) == 0
    assert differing(effective(argv), effective(hand)) <= noted_flags(notes)
    assert custom == slime_runner_custom_config(config)
    assert {n["kind"] for n in notes} == {"difference", "default"}  # num_rollout: SlimeRunner.train's default


def test_every_field_end_to_end(tmp_path: Path, toolbox: Toolbox, slime_dir: Path) -> None:
    """Every SlimeRunner field, W&B on: only the noted flags differ, and every noted flag does differ."""
    fields = full(slime_dir)
    assert set(fields) == set(RUNNER_DEFAULTS) | {"exp_id", "agent_runtime_arn", "s3_bucket", "model_dir",
                                                  "data_path", "model_type"}
    text = yaml.safe_dump(fields).replace("lr: 2.0e-06", "lr: 2e-6")  # as people write it: a string to YAML 1.1
    config = write_yaml(tmp_path / "run.yaml", text)
    assert yaml.safe_load(text)["lr"] == "2e-6"
    env = {"WANDB_API_KEY": "sk-secret-123"}
    argv, custom, notes, spec_path = import_and_run(tmp_path, toolbox, config, env, "--num-rollout", "7")
    runner = slime_runner_argv(config, 7, "/tmp/slime-runner-x.yaml",
                               {**env, "LD_LIBRARY_PATH": CALLER_LD_LIBRARY_PATH}, purelib(toolbox))
    assert argv[:2] == runner[:2] and argv[2:2 + len(TINY_MODEL_ARGS)] == TINY_MODEL_ARGS
    got, expected = effective(argv), acrl_differences(effective(runner))
    assert got == expected
    assert expected["--lr"] == (3e-6,) and expected["--train-env-vars"][0]["CUDA_HOME"] == "/usr/local/cuda-12.9"
    assert {"--use-wandb", "--wandb-project", "--sglang-enable-dp-attention"} <= got.keys()
    changed = differing(got, effective(runner))
    # one engine of the node's 4 GPUs: --num-gpus-per-node changes nothing slime does, so it is not passed
    # --num-epoch: slime ignored it beside SlimeRunner's --num-rollout; [experiment] num_epoch would be ACRL-B006's
    assert changed == {"--use-dynamic-global-batch-size", "--custom-config-path", "--actor-num-nodes",
                       "--num-steps-per-rollout", "--global-batch-size", "--num-epoch"}
    assert changed == noted_flags(notes)
    assert custom == slime_runner_custom_config(config)
    assert "sk-secret-123" not in spec_path.read_text(encoding="utf-8")


def test_extra_flags_setting_the_step_count_a_model_arg_and_a_removed_flag(tmp_path: Path, toolbox: Toolbox,
                                                               slime_dir: Path) -> None:
    fields = {**minimal(slime_dir), "extra_flags": ["--global-batch-size", "64", "--use-dynamic-global-batch-size",
                                                    "--num-layers", "3"]}
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(fields))
    argv, _, notes, spec_path = import_and_run(tmp_path, toolbox, config, {}, "--num-rollout", "2")
    runner = effective(slime_runner_argv(config, 2, "/tmp/x.yaml", {}, purelib(toolbox)))
    assert effective(argv) == acrl_differences(runner, num_steps=4)
    spec = tomllib.loads(spec_path.read_text(encoding="utf-8"))
    assert spec["train"]["num_steps_per_rollout"] == 4 and spec["model"]["overrides"] == {"num-layers": "3"}
    assert runner["--num-layers"] == (3.0,) and argv.count("--num-layers") == 1
    assert differing(effective(argv), runner) <= noted_flags(notes)


# --- notes, options and the CLI --------------------------------------------------------------------

def test_num_rollout_option_yaml_and_default(tmp_path: Path, slime_dir: Path) -> None:
    config = write_yaml(tmp_path / "a.yaml", yaml.safe_dump(minimal(slime_dir)))
    default = import_slime_runner(config)
    assert default.spec["experiment"]["num_rollout"] == 1
    assert [n for n in default.notes if n.kind == "default" and "num_rollout" in n.message]
    given = import_slime_runner(config, num_rollout=40)
    assert given.spec["experiment"]["num_rollout"] == 40 and not [n for n in given.notes if n.kind == "default"]
    in_yaml = write_yaml(tmp_path / "b.yaml", yaml.safe_dump({**minimal(slime_dir), "num_rollout": 12}))
    assert import_slime_runner(in_yaml).spec["experiment"]["num_rollout"] == 12
    assert import_slime_runner(in_yaml, num_rollout=3).spec["experiment"]["num_rollout"] == 3
    with pytest.raises(UsageError) as usage:
        import_slime_runner(config, num_rollout=0)
    assert usage.value.message.startswith("--num-rollout 0: ") and "--num-rollout" in (usage.value.hint or "")
    proc = acrl("import", "slime-runner", str(config), "--num-rollout", "-3", "-o", "spec.toml", cwd=tmp_path)
    message, fix = proc.stderr.splitlines()
    assert proc.returncode == 2 and message.startswith("--num-rollout -3: "), proc.stderr
    assert fix.startswith("  fix: ") and "--num-rollout" in fix


def test_unknown_key_is_an_error_with_did_you_mean(tmp_path: Path, slime_dir: Path) -> None:
    text = yaml.safe_dump(minimal(slime_dir), sort_keys=False) + "rollout_batch_sise: 16\n"
    config = write_yaml(tmp_path / "run.yaml", text)
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", cwd=tmp_path)
    line = len(text.splitlines())
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"{config}:{line}: rollout_batch_sise: not a SlimeRunner field" in proc.stderr
    lines = proc.stderr.splitlines()
    at = [n for n, text in enumerate(lines) if text.startswith(f"{config}:{line}: rollout_batch_sise: ")]
    assert at and lines[at[0] + 1].startswith("  fix: ") and '"rollout_batch_size"' in lines[at[0] + 1]
    assert not (tmp_path / "spec.toml").exists()


@pytest.mark.parametrize(("line", "fix"), [
    ("tp_size: 2.0", "write an integer"),
    ("num_gpus: true", "write an integer"),
    ("lr: fast", "write a number"),
    ("exp_id: 2024", "quote it"),
    ("cumulative_token_mode: 'yes'", "write true or false"),
    ("extra_flags: ['--save-interval', 3]", "quote it"),
    ("model_dir:", "give it a value, or delete the line to use SlimeRunner's default"),
])
def test_wrong_type_names_file_line_key_and_fix(tmp_path: Path, slime_dir: Path, line: str, fix: str) -> None:
    key = line.split(":")[0]
    base = {k: v for k, v in minimal(slime_dir).items() if k != key}
    text = yaml.safe_dump(base, sort_keys=False) + line + "\n"
    config = write_yaml(tmp_path / "run.yaml", text)
    with pytest.raises(ImportInputError) as caught:
        import_slime_runner(config)
    error = caught.value
    assert (error.path, error.reason.split(": ")[0], error.hint) == (f"{config}:{len(text.splitlines())}", key, fix)
    assert str(error) == f"{error.path}: {error.reason}\n  fix: {fix}"
    assert "--save-interval" not in str(error)  # extra_flags may hold a credential: never echoed
    if key == "tp_size":  # golden wording of the family
        assert error.reason == "tp_size: must be an integer, got float 2.0"


@pytest.mark.parametrize(("text", "where", "names"), [
    ("exp_id: [unclosed\n", ":2:1", []),
    ("- exp_id: a\n- s3_bucket: b\n", "", []),
    ("", "", ["exp_id", "agent_runtime_arn", "s3_bucket", "model_dir", "data_path", "model_type"]),
])
def test_bad_files(tmp_path: Path, text: str, where: str, names: list[str]) -> None:
    config = write_yaml(tmp_path / "run.yaml", text)
    with pytest.raises(ImportInputError) as caught:
        import_slime_runner(config)
    assert caught.value.path == f"{config}{where}" and caught.value.hint
    if names:  # the missing keys, in SlimeRunner's order
        assert caught.value.reason.split(": ")[0].split(", ") == names
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", cwd=tmp_path)
    assert proc.returncode == 1 and proc.stderr.startswith(f"{config}{where}: "), proc.stderr
    assert f"  fix: {caught.value.hint}" in proc.stderr and "Traceback" not in proc.stderr


def test_missing_and_unreadable_file(tmp_path: Path) -> None:
    proc = acrl("import", "slime-runner", "nope.yaml", "-o", "spec.toml", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("nope.yaml: no such "), proc.stderr  # a usage error
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(ImportInputError) as caught:
        import_slime_runner(binary)
    assert caught.value.path == str(binary) and caught.value.hint == "check that it is a UTF-8 text file"


def test_secrets_are_never_copied(tmp_path: Path, slime_dir: Path) -> None:
    fields = {**minimal(slime_dir), "wandb_api_key": "sk-live-abc",
              "extra_flags": ["--wandb-key", "sk-live-def", "--num-epoch", "2"]}
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(fields))
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (tmp_path / "spec.toml").read_text(encoding="utf-8")
    assert "sk-live" not in text + proc.stdout + proc.stderr
    spec = tomllib.loads(text)
    assert spec["wandb"]["key_env"] == "WANDB_API_KEY" and "extra" not in spec  # --num-epoch: left out, noted
    where = {ln.split(":")[0]: f"{config}:{n}" for n, ln in enumerate(config.read_text().splitlines(), 1)}
    notes = [ln for ln in proc.stderr.splitlines() if ln.startswith("note: ")]
    assert [n for n in notes if n.startswith(f"note: {where['wandb_api_key']}: difference: ")]
    assert [n for n in notes if n.startswith(f"note: {where['extra_flags']}: difference: extra_flags: --wandb-key ")]


def test_existing_output_is_refused_without_force(tmp_path: Path, slime_dir: Path) -> None:
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(minimal(slime_dir)))
    (tmp_path / "spec.toml").write_text("# mine\n", encoding="utf-8")
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", "--json", cwd=tmp_path)
    error = json.loads(proc.stdout)["error"]
    assert proc.returncode == 3 and error["kind"] == "AcrlError" and error["message"].startswith("spec.toml: ")
    assert "--force" in error["hint"]
    assert (tmp_path / "spec.toml").read_text(encoding="utf-8") == "# mine\n"
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", "--force", cwd=tmp_path)
    assert proc.returncode == 0 and tomllib.loads((tmp_path / "spec.toml").read_text())["experiment"]["id"] == "smoke-1"


def test_json_output_shape(tmp_path: Path, slime_dir: Path) -> None:
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(minimal(slime_dir)))
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", "--json", "--num-rollout", "3",
                cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and set(report) == {"ok", "spec", "notes", "problems"}
    assert report["ok"] is True and report["spec"] == "spec.toml" and report["problems"] is None
    assert all(set(n) == {"kind", "message", "where"} for n in report["notes"])
    assert {n["where"] for n in report["notes"] if n["kind"] == "difference"} == {
        "--use-dynamic-global-batch-size", "--actor-num-nodes", "train.num_steps_per_rollout",
        "--custom-config-path"}


def test_model_script_not_here_is_reported(tmp_path: Path) -> None:
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump({**minimal(tmp_path / "no-slime")}))
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", "--json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 1 and report["ok"] is False
    assert re.search(r"^spec\.toml:\d+:1: error: \[model\] args_source: .*no slime checkout is on this machine .*"
                     r"scripts/models/tiny\.sh", report["problems"], re.M)
    assert "--slime-checkout DIR" in report["problems"]
    assert [n for n in report["notes"] if n["kind"] == "unresolved" and n["where"] == "model.args_source"]


def test_output_that_is_the_input_or_a_directory(tmp_path: Path, slime_dir: Path) -> None:
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(minimal(slime_dir)))
    before = config.read_text(encoding="utf-8")
    (tmp_path / "link.yaml").symlink_to(config)
    for target in ("run.yaml", "./run.yaml", "link.yaml"):
        proc = acrl("import", "slime-runner", "run.yaml", "-o", target, "--force", cwd=tmp_path)
        assert proc.returncode == 2 and proc.stderr.startswith(f"{target}: "), proc.stderr
        assert config.read_text(encoding="utf-8") == before
    (tmp_path / "out").mkdir()
    proc = acrl("import", "slime-runner", "run.yaml", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.startswith("out: ") and "--force" not in proc.stderr


def test_each_problem_is_followed_by_its_own_fix(tmp_path: Path, slime_dir: Path) -> None:
    base = {k: v for k, v in minimal(slime_dir).items() if k != "exp_id"}
    text = yaml.safe_dump(base, sort_keys=False) + "tp_size: 2.5\nrollout_batch_sise: 16\ncumulative_token_mode: 1\n"
    config = write_yaml(tmp_path / "run.yaml", text)
    with pytest.raises(ImportInputError) as caught:
        import_slime_runner(config)
    lines = str(caught.value).splitlines()
    assert len(lines) == 8 and all(line.startswith(str(config)) for line in lines[0::2]), lines
    assert all(line.startswith("  fix: ") for line in lines[1::2]), lines
    assert "tp_size" in lines[0] and lines[1] == "  fix: write an integer"
    assert "rollout_batch_sise" in lines[2] and '"rollout_batch_size"' in lines[3]
    assert "exp_id" in lines[6] and "exp_id" in lines[7]


def test_quoted_integers_are_read_as_slime_reads_them(tmp_path: Path, slime_dir: Path) -> None:
    text = yaml.safe_dump(minimal(slime_dir), sort_keys=False) + 'tp_size: "2"\nrollout_batch_size: " 16"\n'
    imported = import_slime_runner(write_yaml(tmp_path / "run.yaml", text + 'num_rollout: "5"\n'))
    assert imported.spec["experiment"]["num_rollout"] == 5
    assert imported.spec["parallel"]["tensor"] == 2 and imported.spec["rollout"]["batch_size"] == 16
    assert [n for n in imported.notes if n.message.startswith("tp_size: the YAML gives the string '2'")]
    with pytest.raises(ImportInputError) as bad:
        import_slime_runner(write_yaml(tmp_path / "bad.yaml", text.replace('"2"', '"2x"')))
    assert bad.value.reason.startswith("tp_size: ") and "'2x'" in bad.value.reason and bad.value.hint


def test_unwritable_output_says_the_fix(tmp_path: Path, slime_dir: Path) -> None:
    write_yaml(tmp_path / "run.yaml", yaml.safe_dump(minimal(slime_dir)))
    proc = acrl("import", "slime-runner", "run.yaml", "-o", "nodir/spec.toml", "--json", cwd=tmp_path)
    error = json.loads(proc.stdout)["error"]
    assert proc.returncode == 1 and error["message"].startswith("nodir/spec.toml: ") and "nodir" in error["hint"]
    assert not (tmp_path / "nodir").exists()


def test_model_script_is_sourced_as_the_compile_sources_it(tmp_path: Path, slime_dir: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """In a clean environment: a flag the script sets only when this shell has a variable is not a MODEL_ARGS flag."""
    (slime_dir / "scripts" / "models" / "tiny.sh").write_text(
        'MODEL_ARGS=(--num-layers 2)\nif [ -n "$ACRL_TEST_MOE" ]; then MODEL_ARGS+=(--num-experts 8); fi\n'
        'if [ -e extra.flag ]; then MODEL_ARGS+=(--rotary-base 10); fi\n', encoding="utf-8")
    monkeypatch.setenv("ACRL_TEST_MOE", "1")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "extra.flag").write_text("", encoding="utf-8")
    fields = {**minimal(slime_dir), "extra_flags": ["--num-experts", "4", "--rotary-base", "5", "--num-layers", "3"]}
    imported = import_slime_runner(write_yaml(tmp_path / "run.yaml", yaml.safe_dump(fields)))
    assert imported.spec["model"]["overrides"] == {"num-layers": "3"}
    assert imported.spec["extra"]["args"] == ["--num-experts", "4", "--rotary-base", "5"]


def test_repeated_key_is_reported_at_the_line_that_counts(tmp_path: Path, slime_dir: Path) -> None:
    text = "tp_size: 2\n" + yaml.safe_dump(minimal(slime_dir), sort_keys=False) + "tp_size: 2.5\n"
    config = write_yaml(tmp_path / "run.yaml", text)
    with pytest.raises(ImportInputError) as error:
        import_slime_runner(config)
    assert error.value.path == f"{config}:{len(text.splitlines())}" and error.value.reason.startswith("tp_size: ")


def test_every_problem_of_the_file_is_reported_with_its_own_fix(tmp_path: Path, slime_dir: Path) -> None:
    text = yaml.safe_dump(minimal(slime_dir), sort_keys=False) + "rollout_batch_sise: 16\ntp_sise: 2\n"
    config = write_yaml(tmp_path / "run.yaml", text)
    with pytest.raises(ImportInputError) as error:
        import_slime_runner(config)
    lines = len(text.splitlines())
    first, second = f"{config}:{lines - 1}", f"{config}:{lines}"
    assert (error.value.path, error.value.reason.split(":")[0]) == (second, "tp_sise")  # the last problem
    text_lines = str(error.value).splitlines()
    assert [line.split(": ")[0] for line in text_lines] == [first, "  fix", second, "  fix"]
    assert text_lines[3] == f"  fix: {error.value.hint}" and "rollout_batch_size" in text_lines[1]


# --- issue 14: a catalog model imports without a checkout; eval flags map to [eval] -------------------------------

QWEN25_3B_SH = """MODEL_ARGS=(
   --swiglu --num-layers 36 --hidden-size 2048 --ffn-hidden-size 11008 --num-attention-heads 16
   --use-rotary-position-embeddings --disable-bias-linear --add-qkv-bias --normalization RMSNorm
   --norm-epsilon 1e-6 --rotary-base 1000000 --group-query-attention --num-query-groups 2 --vocab-size 151936
)
"""


def test_a_catalog_model_without_a_checkout_imports_with_the_catalog_and_compiles(tmp_path: Path) -> None:
    fields = {**minimal(tmp_path / "cluster-slime"), "model_type": "qwen2.5-3B"}
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(fields))
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", "--json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"] is True, report
    spec = tomllib.loads((tmp_path / "spec.toml").read_text(encoding="utf-8"))
    assert spec["model"]["args_source"] == "catalog" and spec["slime"]["dir"] == str(tmp_path / "cluster-slime")
    (note,) = [n for n in report["notes"] if n["where"] == "model.args_source"]
    assert note["kind"] == "difference" and "catalog" in note["message"]
    assert "scripts/models/qwen2.5-3B.sh" in note["message"] and "--slime-checkout" in note["message"]
    compiled = subprocess.run([str(BIN / "acrl-compile"), "spec.toml", "-o", "bundle"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=60, check=False)
    assert compiled.returncode == 0, compiled.stderr


def test_a_checkout_given_keeps_slime_script_and_the_cluster_path(tmp_path: Path) -> None:
    checkout = tmp_path / "laptop-slime"
    (checkout / "scripts" / "models").mkdir(parents=True)
    (checkout / "scripts" / "models" / "qwen2.5-3B.sh").write_text(QWEN25_3B_SH, encoding="utf-8")
    fields = {**minimal(Path("/cluster/slime")), "model_type": "qwen2.5-3B"}
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(fields))
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", "--json", "--slime-checkout",
                str(checkout), cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"] is True, report
    spec = tomllib.loads((tmp_path / "spec.toml").read_text(encoding="utf-8"))
    assert spec["model"]["args_source"] == "script" and spec["slime"]["dir"] == "/cluster/slime"
    assert not [n for n in report["notes"] if n["where"] == "model.args_source"]


def test_eval_flags_map_to_the_eval_table_end_to_end(tmp_path: Path, toolbox: Toolbox, slime_dir: Path) -> None:
    fields = {**minimal(slime_dir), "extra_flags": [
        "--eval-prompt-data", "aime", "/data/aime.jsonl", "gsm8k", "/data/gsm8k.jsonl", "--eval-interval", "5",
        "--n-samples-per-eval-prompt", "4", "--eval-max-response-len", "2048"]}
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(fields))
    argv, _, notes, spec_path = import_and_run(tmp_path, toolbox, config, {})
    spec = tomllib.loads(spec_path.read_text(encoding="utf-8"))
    assert spec["eval"] == {"interval": 5, "datasets": {"aime": "/data/aime.jsonl", "gsm8k": "/data/gsm8k.jsonl"},
                            "n_samples_per_prompt": 4, "max_response_len": 2048}
    assert "extra" not in spec
    runner = effective(slime_runner_argv(config, 1, "/tmp/x.yaml", {}, purelib(toolbox)))
    assert effective(argv) == acrl_differences(runner)
    assert differing(effective(argv), runner) <= noted_flags(notes)


def test_eval_datasets_without_an_interval_are_kept_and_noted(tmp_path: Path, slime_dir: Path) -> None:
    # slime accepts datasets without --eval-interval (arguments.py:1840-1841 asserts only the other way): the spec
    # keeps them, so the bundle passes the same --eval-prompt-data, and ACRL-E004 warns they are never evaluated
    fields = {**minimal(slime_dir), "extra_flags": ["--eval-prompt-data", "aime", "/data/aime.jsonl"]}
    config = write_yaml(tmp_path / "run.yaml", yaml.safe_dump(fields))
    proc = acrl("import", "slime-runner", str(config), "-o", "spec.toml", "--json", cwd=tmp_path)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"] is True, report
    spec = tomllib.loads((tmp_path / "spec.toml").read_text(encoding="utf-8"))
    assert spec["eval"] == {"datasets": {"aime": "/data/aime.jsonl"}} and "extra" not in spec
    assert [n for n in report["notes"] if n["where"] == "--eval-prompt-data"]
    assert [w.rule for w in compile_spec(tmp_path / "spec.toml").warnings if w.rule == "ACRL-E004"]


@pytest.mark.parametrize(("gpus", "per_engine", "noted"), [(4, 2, True), (4, 4, False), (2, 1, True), (1, 1, False),
                                                           (8, 2, False)])
def test_num_gpus_per_node_is_noted_where_it_is_passed(tmp_path: Path, slime_dir: Path, gpus: int, per_engine: int,
                                                       noted: bool) -> None:
    # passed (and noted) only where slime's default 8 would change what slime does: more than one engine on the
    # node (placement.node_size_matters); one engine of a smaller node runs the same with or without it
    fields = {**minimal(slime_dir), "num_gpus": gpus, "tp_size": 1, "rollout_gpus_per_engine": per_engine}
    imported = import_slime_runner(write_yaml(tmp_path / "run.yaml", yaml.safe_dump(fields)))
    assert bool([n for n in imported.notes if n.where == "--num-gpus-per-node"]) == noted
    bundle = compile_spec(tmp_path / "spec.toml", data=render_spec(imported).encode())
    flags = [a.flag for g in bundle.groups for a in g.args]
    assert ("--num-gpus-per-node" in flags) == noted
