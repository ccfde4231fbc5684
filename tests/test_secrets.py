"""Secrets never reach a bundle file, an argv, Ray job metadata, a log or an error message.

First the one notion of "looks secret" (compiler/_secrets.py), table-tested on both sides; then one
row per secret placement of issue 11, each checked end to end: the compile (or import, or run) is
refused or cleans the value, and the secret string appears in none of the bundle's files, the
command's output, the argv and environment the ray shim recorded, run.json or train.log.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_import_slime_runner import minimal
from test_run import NO_AWS, make_project, only_record, tool_env
from test_train_sh import Run, Toolbox, compile_into, make_toolbox, run_train_sh

import acrl.compiler._secrets as secrets
from acrl.compiler._importers.base import render_spec
from acrl.compiler._pipeline.model_args.resolve import ENV_NAME as BOUNDED_ENV_NAME
from acrl.compiler._secrets import (
    MASK,
    NEVER_FORWARDED,
    NEVER_FORWARDED_PREFIXES,
    NOT_SECRET_BEFORE,
    SECRET_LAST_WORDS,
    address_has_credentials,
    env_name,
    is_credential_flag,
    is_env_name,
    is_secret_name,
    looks_secret_value,
    redact,
    refuse_forward,
    without_credentials,
)
from conftest import SpecWriter

# Made-up secrets of each shape (none is real).
WANDB_KEY = "3f9a1c7e5b2d4f6a8c0e1b3d5f7a9c2e4b6d8f0a"
AWS_ACCESS_KEY_ID = "AKIAZ7Q2EXAMPLE4KJ3M"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE9K"
OPENAI_KEY = "sk-proj-Qm3vT8xZ1pL6nW4rY9sK2hB7cD5fG0aE"
HF_TOKEN = "hf_QmvTxZpLnWrYsKhBcDfGaEjUiOoPlMkNbVcX"
GH_TOKEN = "ghp_Qm3vT8xZ1pL6nW4rY9sK2hB7cD5fG0aEjU4i"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
RANDOM_TOKEN = "Xy7pQ2mN9vL4kR8sT1wZ5bC3dF6gH0jA2eK9"
PASSWORD = "hunter2-Zq9"

SECRET_NAMES = ["WANDB_API_KEY", "API_KEY", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID",
                "AWS_SESSION_TOKEN", "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "GITHUB_TOKEN", "DB_PASSWORD", "DB_PASS",
                "MY_SECRET", "PASSWORD", "TOKEN", "SECRET", "WANDB_KEY", "KEY", "wandb_api_key", "API_KEY_2",
                "SSL_KEYFILE_PASSWORD", "GOOGLE_APPLICATION_CREDENTIALS", "OPENAI_APIKEY"]
ORDINARY_NAMES = ["MAX_TOKENS_PER_GPU", "MAX_TOKENS", "KEY_PATH", "PYTHONHASHSEED", "TOKENIZER_PATH",
                  "TOKENIZERS_PARALLELISM", "NUM_TOKENS", "PAD_TOKEN", "EOS_TOKEN", "SSL_KEYFILE", "KEY_FILE",
                  "WANDB_API_KEY_FILE", "SECRET_NAME", "PASSWORD_FILE", "INPUT_KEY", "LABEL_KEY",
                  "CUDA_VISIBLE_DEVICES", "MONKEY", "BYPASS", "TOKEN_ID", "PWD", "MODEL_ARGS_ROTARY_BASE", "PASSES",
                  "NCCL_DEBUG", "HTTPS_PROXY", "KEYS_DIR", "MAX_TOKEN", "LOSS_PER_TOKEN", "NUM_PASS", "FORWARD_PASS",
                  "PUBLIC_KEY", "SORT_KEY"]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names(name: str) -> None:
    assert is_secret_name(name)
    assert refuse_forward(name) is not None


@pytest.mark.parametrize("name", ORDINARY_NAMES)
def test_ordinary_names_are_not_secret(name: str) -> None:
    assert not is_secret_name(name)
    assert refuse_forward(name) is None


@pytest.mark.parametrize("name", ["WANDB_API_KEY", "ACRL_RAY_ADDRESS", "RAY_ADDRESS", "RAY_API_SERVER_ADDRESS",
                                  "AWS_PROFILE", "AWS_REGION", "AWS_SHARED_CREDENTIALS_FILE", "MY_WB", "my_wb"])
def test_never_forwarded(name: str) -> None:
    assert refuse_forward(name, key_env="MY_WB") is not None


SECRET_VALUES = [WANDB_KEY, AWS_ACCESS_KEY_ID, AWS_SECRET, OPENAI_KEY, HF_TOKEN, GH_TOKEN, JWT, RANDOM_TOKEN,
                 WANDB_KEY.upper(), "http://user:pw@head:8265", "user:pw@head:8265", "https://u:p@proxy:3128",
                 f"https://{GH_TOKEN}@github.com/org/repo", "http://proxy:3128,http://u:pw@other:3128",
                 f"--wandb-key={WANDB_KEY}", "-----BEGIN RSA PRIVATE KEY-----"]
ORDINARY_VALUES = ["http://head:8265", "head:8265", "/models/Qwen3-4B", "Qwen/Qwen3-4B", "git@github.com:org/r.git",
                   "ssh://git@github.com/org/r", "me@example.com", "qwen3-4b-grpo-lr1e-6-bs256-20261121",
                   "s3://bucket/prefix/run-0001", "rayproject/ray@sha256:" + "ab" * 32, "Qwen3-30B-A3B-Instruct-2507",
                   "1000000", "deepseek-ai/DeepSeek-V3-0324", "MODEL_ARGS_ROTARY_BASE", "low_var_kl",
                   "/root/.cache/huggingface/hub/models--Qwen--Qwen3-4B/snapshots/0123456789abcdef0123456789abcdef",
                   "agentcore_rl_toolkit.backends.slime.integration.rollout.generate_rollout",
                   "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-abc123"]


@pytest.mark.parametrize("value", SECRET_VALUES)
def test_secret_values(value: str) -> None:
    assert looks_secret_value(value)
    assert MASK in redact(f"value = {value!r}")


@pytest.mark.parametrize("value", ORDINARY_VALUES)
def test_ordinary_values_are_not_secret(value: str) -> None:
    assert not looks_secret_value(value)
    assert redact(f"x = {value!r}") == f"x = {value!r}"


def test_a_commit_is_not_a_wandb_key_under_a_commit_name() -> None:
    commit = "fa3c990af6f18efd3fd9922698bf4bf4048d1263"
    assert looks_secret_value(commit)  # the shape alone is a W&B key's
    assert not looks_secret_value(commit, "commit") and not looks_secret_value(commit, "SLIME_COMMIT")
    assert redact(f'commit = "{commit}"') == f'commit = "{commit}"'


CREDENTIAL_FLAGS = ["--wandb-key", "--wandb-k", "--wandb-ke", "--WANDB-KEY", "--wandb_key", "--Wandb_Key",
                    f"--wandb-key={WANDB_KEY}", "--wandb-k=x", "--sglang-api-key", "--sglang-ap", "--sglang-admin-api",
                    "--router-oracle-password", "--router-oracle-pa", "--router-control-plane-api-keys",
                    "--sglang-ssl-keyfile-password", "--sglang-ssl-keyfile-p", "--my-api-key", "--hf-token",
                    "--Sglang_Api_Key=x", "--aws-secret-access-key"]
ORDINARY_FLAGS = ["--wandb-", "--wandb", "--wandb-keys", "--input-key", "--max-tokens-per-gpu", "--sglang-ssl-keyfile",
                  "--fim-pad-token", "--tls-key-path", "--router-tls-key-path", "--wandb-project", "--label-key",
                  "wandb-key", "--rollout-stop-token-ids", "--sglang-a", "--log-probs-max-tokens-per-gpu",
                  "--multimodal-keys", "--linear-num-key-heads", "--apply-query-key-layer-scaling"]


@pytest.mark.parametrize("token", CREDENTIAL_FLAGS)
def test_credential_flags(token: str) -> None:
    assert is_credential_flag(token)


@pytest.mark.parametrize("token", ORDINARY_FLAGS)
def test_ordinary_flags(token: str) -> None:
    assert not is_credential_flag(token)


@given(st.sampled_from(["--wandb-key", "--sglang-api-key", "--router-oracle-password", "--sglang-admin-api-key"]),
       st.data())
def test_every_spelling_of_a_credential_flag(flag: str, data: st.DataObject) -> None:
    """Any case, any '-' as '_', any abbreviation argparse expands to the flag alone, any =value."""
    from acrl.compiler._secrets import CREDENTIAL_FLAGS as KNOWN

    cut = data.draw(st.integers(len(KNOWN[flag]), len(flag)))
    body = "".join(data.draw(st.sampled_from([c, c.upper(), "_" if c == "-" else c])) for c in flag[2:cut])
    suffix = data.draw(st.sampled_from(["", "=x", f"={WANDB_KEY}"]))
    assert is_credential_flag(f"--{body}{suffix}")


@pytest.mark.parametrize(("address", "shown"), [
    ("http://user:pw@head:8265", "http://head:8265"), ("user:pw@head:8265", "head:8265"),
    ("https://tok@head", "https://head"), ("http://head:8265", "http://head:8265"), ("head:8265", "head:8265"),
])
def test_without_credentials(address: str, shown: str) -> None:
    assert without_credentials(address) == shown
    assert address_has_credentials(address) == (address != shown)


@pytest.mark.parametrize("name", ["WANDB_API_KEY", "MY_WANDB_KEY", "WB", "_KEY"])
def test_key_env_names(name: str) -> None:
    assert is_env_name(name)


@pytest.mark.parametrize("name", [WANDB_KEY, WANDB_KEY.upper(), AWS_ACCESS_KEY_ID, "wandb_api_key", OPENAI_KEY,
                                  "A" * 65, "Q7ZK2M9XRT4W8B3N5P1C6V0Y", "WANDB-API-KEY", "1KEY"])
def test_key_env_refuses_tokens(name: str) -> None:
    assert not is_env_name(name)


# The three environment-name patterns acrl had before issue 12, as they were written: any name ([env] vars and
# forward), at most 128 ([wandb] key_env for ACRL-S002, [model.script_env]), upper case and at most 64 (the shape
# of is_env_name). compiler/_secrets.env_name is now the one definition; these pin that nothing changed.
_BEFORE = {"any": re.compile(r"[A-Za-z_][A-Za-z0-9_]*"), "at_most_128": re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}"),
           "upper_64": re.compile(r"[A-Z_][A-Z0-9_]{0,63}")}


def _env_patterns() -> dict[str, re.Pattern[str]]:
    return {"any": secrets.ENV_NAME, "at_most_128": BOUNDED_ENV_NAME, "upper_64": secrets._KEY_ENV_NAME}


@pytest.mark.parametrize(("name", "any_", "at_most_128", "upper_64"), [
    ("WANDB_API_KEY", True, True, True), ("wandb_api_key", True, True, False), ("Mixed_1", True, True, False),
    ("_", True, True, True), ("A" * 64, True, True, True), ("A" * 65, True, True, False),
    ("A" * 128, True, True, False), ("A" * 129, True, False, False), ("a" * 129, True, False, False),
    ("1A", False, False, False), ("", False, False, False), ("A-B", False, False, False),
    ("A B", False, False, False), ("A\n", False, False, False), ("\u00c9T\u00c9", False, False, False),
    ("A=1", False, False, False), ("A\x00", False, False, False),
])
def test_one_env_name_pattern_keeps_each_old_answer(name: str, any_: bool, at_most_128: bool, upper_64: bool) -> None:
    patterns = _env_patterns()
    assert {k: bool(p.fullmatch(name)) for k, p in patterns.items()} == \
        {"any": any_, "at_most_128": at_most_128, "upper_64": upper_64}
    assert {k: bool(p.fullmatch(name)) for k, p in _BEFORE.items()} == \
        {"any": any_, "at_most_128": at_most_128, "upper_64": upper_64}  # the table is today's truth


@given(st.text(alphabet=st.sampled_from("aZ_09-\n\u00e9 "), max_size=140) | st.sampled_from(["A" * 64, "A" * 65,
                                                                                         "b" * 128, "b" * 129]))
def test_one_env_name_pattern_agrees_with_the_old_three(name: str) -> None:
    patterns = _env_patterns()
    assert {k: bool(p.fullmatch(name)) for k, p in patterns.items()} == \
        {k: bool(p.fullmatch(name)) for k, p in _BEFORE.items()}


def test_the_key_env_check_uses_the_shared_pattern(monkeypatch: pytest.MonkeyPatch) -> None:
    """is_env_name's shape is env_name(upper_case=True, at_most=64): narrowing the shared definition narrows it."""
    assert secrets._KEY_ENV_NAME.pattern == env_name(upper_case=True, at_most=64).pattern
    assert is_env_name("WANDB_API_KEY")
    monkeypatch.setattr(secrets, "_KEY_ENV_NAME", re.compile("NOTHING"))
    assert not is_env_name("WANDB_API_KEY")


@pytest.mark.parametrize(("line", "secret"), [
    (f'WANDB_API_KEY = "{PASSWORD}"', PASSWORD),
    (f'vars = {{ DB_PASSWORD = "{PASSWORD}", X = "1" }}', PASSWORD),
    (f"env.vars.DB_PASSWORD='{PASSWORD}'", PASSWORD),
    (f'address = "http://admin:{PASSWORD}@head:8265"', PASSWORD),
    (f'--set cluster.address="admin:{PASSWORD}@head:8265"', PASSWORD),
    (f'"--wandb-tags" = ["--wandb-key", "{PASSWORD}"]', PASSWORD),
    (f"--wandb-k {PASSWORD}", PASSWORD),
    (f"--WANDB_KEY={PASSWORD}", PASSWORD),
    (f'key_env = "{WANDB_KEY}"', WANDB_KEY),
    (f"HTTPS_PROXY = 'http://u:{PASSWORD}@proxy:3128'", PASSWORD),
    (f"the key {OPENAI_KEY} leaked", OPENAI_KEY),
])
def test_redact(line: str, secret: str) -> None:
    shown = redact(line)
    assert secret not in shown
    assert MASK in shown


def test_redact_known_strings() -> None:
    assert redact(f"{PASSWORD} is not a name", [PASSWORD]) == f"{MASK} is not a name"


def test_redact_golden_wording() -> None:
    assert redact('  3 | DB_PASSWORD = "hunter2"') == "  3 | DB_PASSWORD = ***"
    assert redact("http://admin:hunter2@head:8265") == "http://***@head:8265"


# --- the importer: an ordinary name is imported, not refused as a secret --------------------------

def test_import_max_tokens_per_gpu_from_a_variable(tmp_path: Path) -> None:
    """The toolkit's example passes --max-tokens-per-gpu ${MAX_TOKENS_PER_GPU}: its value is imported
    (the old heuristic took TOKENS for a secret word and fell back silently to 9216)."""
    from acrl.compiler._importers.train_sh import import_train_sh

    script = tmp_path / "train.sh"
    script.write_text('#!/bin/bash\nMAX_TOKENS_PER_GPU=12288\n'
                      'ray job submit --address="http://127.0.0.1:8265" -- python3 /root/slime/train.py \\\n'
                      '  --max-tokens-per-gpu ${MAX_TOKENS_PER_GPU} --use-dynamic-batch-size\n', encoding="utf-8")
    imported = import_train_sh(script)
    assert imported.spec["train"]["max_tokens_per_gpu"] == 12288
    assert not [n for n in imported.notes if "MAX_TOKENS_PER_GPU" in n.message]


# --- every secret placement of issue 11, at compile time ------------------------------------------
# Each row: spec overrides (or raw TOML lines appended to the minimal spec), --set arguments, the rule
# ids that must refuse it, and the secret string. The compile must fail naming those rules, write
# nothing, and show the secret nowhere: not in the text error, not in --json.

COMPILE_ROWS: list[tuple[str, dict[str, Any], list[str], set[str], str]] = [
    ("env-vars-ray-address-url", {"env": {"vars": {"RAY_ADDRESS": f"http://admin:{PASSWORD}@head:8265"}}}, [],
     {"ACRL-S003"}, PASSWORD),
    ("env-vars-https-proxy-url", {"env": {"vars": {"HTTPS_PROXY": f"http://u:{PASSWORD}@proxy:3128"}}}, [],
     {"ACRL-S003"}, PASSWORD),
    ("env-vars-bare-address", {"env": {"vars": {"HEAD": f"admin:{PASSWORD}@head:8265"}}}, [], {"ACRL-S003"},
     PASSWORD),
    ("env-vars-token-value", {"env": {"vars": {"WANDB_NOTES": OPENAI_KEY}}}, [], {"ACRL-S003"}, OPENAI_KEY),
    ("env-vars-wandb-key-value", {"env": {"vars": {"SOMETHING": WANDB_KEY}}}, [], {"ACRL-S003"}, WANDB_KEY),
    ("env-vars-secret-name", {"env": {"vars": {"DB_PASSWORD": PASSWORD}}}, [], {"ACRL-S001"}, PASSWORD),
    ("cluster-env-secret-name", {"cluster": {"env": {"DB_PASSWORD": PASSWORD}}}, [], {"ACRL-S001"}, PASSWORD),
    ("cluster-env-token-value", {"cluster": {"env": {"HIP_NOTES": OPENAI_KEY}}}, [], {"ACRL-S003"}, OPENAI_KEY),
    ("cluster-env-proxy-url", {"cluster": {"env": {"HTTPS_PROXY": f"http://u:{PASSWORD}@proxy:3128"}}}, [],
     {"ACRL-S003"}, PASSWORD),
    ("ray-start-args-token", {"cluster": {"ray_start_args": ["--labels", HF_TOKEN]}}, [], {"ACRL-S003"}, HF_TOKEN),
    ("pythonpath-token", {"env": {"pythonpath": [f"/opt/{HF_TOKEN}"]}}, [], {"ACRL-S003"}, HF_TOKEN),
    ("env-vars-key-env-name", {"wandb": {"key_env": "MY_WB"}, "env": {"vars": {"MY_WB": PASSWORD}}}, [],
     {"ACRL-S001"}, PASSWORD),
    ("forward-key-env", {"wandb": {"key_env": "MY_WB"}, "env": {"forward": ["MY_WB"]}}, [], {"ACRL-S001"}, ""),
    ("forward-wandb-api-key", {"env": {"forward": ["WANDB_API_KEY"]}}, [], {"ACRL-S001"}, ""),
    ("forward-acrl-ray-address", {"env": {"forward": ["ACRL_RAY_ADDRESS"]}}, [], {"ACRL-S001"}, ""),
    ("forward-ray-address", {"env": {"forward": ["RAY_ADDRESS"]}}, [], {"ACRL-S001"}, ""),
    ("forward-aws", {"env": {"forward": ["AWS_PROFILE"]}}, [], {"ACRL-S001"}, ""),
    ("key-env-wandb-key", {"wandb": {"key_env": "a" + WANDB_KEY[1:]}}, [], {"ACRL-S004"}, WANDB_KEY[1:]),
    ("key-env-lowercase", {"wandb": {"key_env": "wandb_key"}}, [], {"ACRL-S004"}, ""),
    ("key-env-not-a-name", {"wandb": {"key_env": WANDB_KEY}}, [], {"ACRL-S002"}, WANDB_KEY),
    ("key-env-token", {"wandb": {"key_env": OPENAI_KEY}}, [], {"ACRL-S002"}, OPENAI_KEY),
    ("key-env-aws-key-id", {"wandb": {"key_env": AWS_ACCESS_KEY_ID}}, [], {"ACRL-S004"}, AWS_ACCESS_KEY_ID),
    ("f001-abbreviation", {"extra": {"flags": {"--wandb-k": PASSWORD}}}, [], {"ACRL-F001"}, PASSWORD),
    ("f001-case", {"extra": {"flags": {"--WANDB-KEY": PASSWORD}}}, [], {"ACRL-F001"}, PASSWORD),
    ("f001-underscore", {"extra": {"flags": {"wandb_key": PASSWORD}}}, [], {"ACRL-F001"}, PASSWORD),
    ("f001-list-token", {"extra": {"flags": {"--wandb-tags": ["--wandb-key", PASSWORD]}}}, [], {"ACRL-F001"},
     PASSWORD),
    ("f001-args-equals", {"extra": {"args": [f"--wandb-key={PASSWORD}"]}}, [], {"ACRL-F001"}, PASSWORD),
    ("f001-args-abbreviation", {"extra": {"args": ["--sglang-ap", PASSWORD]}}, [], {"ACRL-F001"}, PASSWORD),
    ("f001-model-args", {"model": {"args": {"wandb-key": PASSWORD}}}, [], {"ACRL-F001"}, PASSWORD),
    ("f001-model-overrides", {"model": {"overrides": {"--Wandb_K": PASSWORD}}}, [], {"ACRL-F001"}, PASSWORD),
    ("f001-scalar-value", {"extra": {"flags": {"--wandb-tags": f"--wandb-key={PASSWORD}"}}}, [], {"ACRL-F001"},
     PASSWORD),
    ("f001-sglang-admin", {"extra": {"flags": {"--sglang-admin-api": PASSWORD}}}, [], {"ACRL-F001"}, PASSWORD),
    ("flag-value-token", {"extra": {"flags": {"--wandb-group": HF_TOKEN}}}, [], {"ACRL-S003"}, HF_TOKEN),
    ("script-env-secret-name", {"model": {"script_env": {"HF_TOKEN": PASSWORD}}}, [], {"ACRL-S001"}, PASSWORD),
    ("script-env-secret-value", {"model": {"script_env": {"MODEL_ARGS_X": f"http://u:{PASSWORD}@h"}}}, [],
     {"ACRL-S003"}, PASSWORD),
    ("cluster-address", {"cluster": {"address": f"http://admin:{PASSWORD}@head:8265"}}, [], {"ACRL-S003"},
     PASSWORD),
    ("set-secret-name", {}, [f'env.vars.DB_PASSWORD="{PASSWORD}"'], {"ACRL-S001"}, PASSWORD),
    ("set-address", {}, [f'cluster.address="admin:{PASSWORD}@head:8265"'], {"ACRL-S003"}, PASSWORD),
    ("set-not-toml", {}, [f"env.vars.DB_PASSWORD={PASSWORD}"], set(), PASSWORD),
    ("set-token-value", {}, [f'env.vars.NOTES="{OPENAI_KEY}"'], {"ACRL-S003"}, OPENAI_KEY),
]


@pytest.mark.parametrize(("overrides", "sets", "rules", "secret"), [row[1:] for row in COMPILE_ROWS],
                         ids=[row[0] for row in COMPILE_ROWS])
def test_compile_refuses_and_never_shows_the_secret(overrides: dict[str, Any], sets: list[str], rules: set[str],
                                                    secret: str, write_spec: SpecWriter, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from acrl.compiler._cli.main import compile_main

    spec = write_spec(overrides)
    out = tmp_path / "bundle"
    set_args = [a for s in sets for a in ("--set", s)]
    for json_flag in ([], ["--json"]):
        code = compile_main([str(spec), "-o", str(out), "--no-cache", *json_flag, *set_args])
        captured = capsys.readouterr()
        shown = captured.out + captured.err
        assert code == 1, shown
        found = set(re.findall(r"ACRL-[A-Z]\d{3}", shown))
        assert rules <= found, shown
        assert not out.exists()
        if secret:
            assert secret not in shown, shown


def test_the_source_line_under_the_caret_is_masked(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str],
                                                   tmp_path: Path) -> None:
    from acrl.compiler._cli.main import compile_main

    spec = write_spec()
    spec.write_text(spec.read_text() + f'\n[env.vars]\nDB_PASSWORD = "{PASSWORD}"\n')
    assert compile_main([str(spec), "-o", str(tmp_path / "b"), "--no-cache"]) == 1
    err = capsys.readouterr().err
    assert "ACRL-S001" in err and PASSWORD not in err
    assert f"| DB_PASSWORD = {MASK}" in err  # golden: the line is shown, its value masked


def test_set_is_shown_masked(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from acrl.compiler._cli.main import compile_main

    code = compile_main([str(write_spec()), "-o", str(tmp_path / "b"), "--no-cache",
                         "--set", f'cluster.address="http://admin:{PASSWORD}@head:8265"'])
    err = capsys.readouterr().err
    assert code == 1 and PASSWORD not in err
    assert err.startswith(f'--set cluster.address="http://{MASK}@head:8265": error:')


# --- train.sh at run time: what it forwards, what it prints ----------------------------------------

@pytest.fixture(scope="module")
def toolbox(tmp_path_factory: pytest.TempPathFactory) -> Toolbox:
    return make_toolbox(tmp_path_factory.mktemp("toolbox"))


def _everything_shown(run: Run) -> str:
    """What a run exposes: its output, every argv the shims recorded (--runtime-env-json included)."""
    return "\n".join([run.stdout, run.stderr, *("\0".join(argv) for argv in run.argvs)])


@pytest.mark.parametrize(("name", "value"), [
    ("HTTPS_PROXY", f"http://u:{PASSWORD}@proxy:3128"),
    ("NO_SECRET_NAME", f"admin:{PASSWORD}@head:8265"),
    ("NOTES", f"{OPENAI_KEY}"),
])
def test_train_sh_refuses_to_forward_a_credential_value(name: str, value: str, write_spec: SpecWriter,
                                                        tmp_path: Path, toolbox: Toolbox) -> None:
    """A forwarded variable's value is known only at run time: one holding credentials stops train.sh
    before `ray job submit`, naming the variable and not showing the value."""
    compile_into(write_spec({"env": {"forward": ["WANDB_ENTITY", name]}}), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {name: value})
    assert run.returncode != 0
    assert not run.find("ray", "job", "submit")
    assert f"[env] forward: {name} is not copied" in run.stderr
    secret = OPENAI_KEY if value == OPENAI_KEY else PASSWORD
    assert secret not in _everything_shown(run)


@pytest.mark.parametrize("name", ["HF_TOKEN", "WANDB_API_KEY", "ACRL_RAY_ADDRESS", "RAY_ADDRESS", "AWS_PROFILE",
                                  "MY_WB"])
def test_train_sh_refuses_a_secret_name_in_an_edited_forward_list(name: str, write_spec: SpecWriter,
                                                                  tmp_path: Path, toolbox: Toolbox) -> None:
    """The compiler refuses these names (ACRL-S001); train.sh refuses them too, from the same list, if a
    bundle was edited (acrl run --allow-modified) to forward one."""
    compile_into(write_spec({"wandb": {"key_env": "MY_WB"}}), tmp_path / "b")
    script = tmp_path / "b" / "train.sh"
    text = script.read_text(encoding="utf-8")
    assert "ACRL_FORWARD=WANDB_ENTITY " in text
    script.write_text(text.replace("ACRL_FORWARD=WANDB_ENTITY ", f"ACRL_FORWARD={name} "), encoding="utf-8")
    run = run_train_sh(script, toolbox, tmp_path / "w", {name: f"http://admin:{PASSWORD}@head:8265"})
    assert PASSWORD not in _everything_shown(run)
    if name == "RAY_ADDRESS":  # train.sh unsets it before anything (the ray CLI would read it): nothing to copy
        assert run.returncode == 0 and "RAY_ADDRESS" not in run.runtime_env["env_vars"]
        return
    assert run.returncode != 0 and not run.find("ray", "job", "submit")
    assert f"[env] forward: {name} is not copied" in run.stderr


def test_train_sh_forwards_ordinary_variables(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    compile_into(write_spec({"env": {"forward": ["HTTPS_PROXY", "MAX_TOKENS_PER_GPU"]}}), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w",
                       {"HTTPS_PROXY": "http://proxy:3128", "MAX_TOKENS_PER_GPU": "9216"})
    assert run.returncode == 0, run.stderr
    assert run.runtime_env["env_vars"]["HTTPS_PROXY"] == "http://proxy:3128"
    assert run.runtime_env["env_vars"]["MAX_TOKENS_PER_GPU"] == "9216"


def test_train_sh_never_shows_the_wandb_key(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    """With the key set, W&B is on and the key is in no argv, no runtime env and no output; without it,
    train.sh names the variable (never a value)."""
    compile_into(write_spec({"wandb": {"key_env": "TEAM_WANDB_KEY"}}), tmp_path / "b")
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {"TEAM_WANDB_KEY": WANDB_KEY})
    assert run.returncode == 0, run.stderr
    assert "--use-wandb" in run.slime_argv
    assert WANDB_KEY not in _everything_shown(run)
    assert "WANDB_API_KEY" not in run.runtime_env["env_vars"] and "TEAM_WANDB_KEY" not in run.runtime_env["env_vars"]
    off = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w2", {})
    assert "W&B off: TEAM_WANDB_KEY is not set" in off.stderr


def forward_refused_by_definition(name: str, key_env: str) -> bool:
    """What may not be forwarded, as the module docstring of compiler/_secrets.py defines it."""
    upper = name.upper()
    return upper in {key_env.upper(), *NEVER_FORWARDED} or upper.startswith(NEVER_FORWARDED_PREFIXES) \
        or is_secret_name(name)


def runtime_check() -> Callable[[str, str, Mapping[str, object]], str]:
    import re as re_module

    from acrl.compiler._secrets import RUNTIME_FORWARD_CHECK

    space: dict[str, Any] = {"re": re_module}
    exec(RUNTIME_FORWARD_CHECK, space)  # the exact text train.sh runs
    check: Callable[[str, str, Mapping[str, object]], str] = space["refused"]
    return check


def test_runtime_check_agrees_with_the_compiler() -> None:
    """train.sh's Python check (generated from compiler/_secrets.py's table) and refuse_forward() refuse exactly the
    names the secret notion says, and the check refuses exactly the values has_credentials_in_url() / TOKEN find."""
    from acrl.compiler._secrets import TOKEN, has_credentials_in_url, runtime_policy

    refused, policy = runtime_check(), runtime_policy("MY_WB")
    for name in [*SECRET_NAMES, *ORDINARY_NAMES, "MY_WB", "AWS_REGION", "RAY_ADDRESS", "ACRL_RAY_ADDRESS", ""]:
        expected = forward_refused_by_definition(name, "MY_WB") if name else False
        assert bool(refused(name, "plain", policy)) == expected == (refuse_forward(name, "MY_WB") is not None), name
    for value in [*SECRET_VALUES, *ORDINARY_VALUES]:
        expected = has_credentials_in_url(value) or bool(TOKEN.search(value))
        assert bool(refused("HTTPS_PROXY", value, policy)) == expected, value


# Names made of the words the secret notion looks at (its tables, a number, other words), in any case.
_WORDS = sorted({*SECRET_LAST_WORDS, *NOT_SECRET_BEFORE, *(w for ws in NOT_SECRET_BEFORE.values() for w in ws),
                 "API", "AWS", "RAY", "ADDRESS", "WANDB", "ACCESS", "ID", "DB", "2", "10", "PATH"})
NAMES = st.one_of(
    st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,30}", fullmatch=True),
    st.builds(lambda words, lower: "_".join(words).lower() if lower else "_".join(words),
              st.lists(st.sampled_from(_WORDS), min_size=1, max_size=4), st.booleans()),
)


@given(NAMES)
def test_runtime_check_agrees_on_any_name(name: str) -> None:
    from acrl.compiler._secrets import runtime_policy

    expected = forward_refused_by_definition(name, "MY_WB")
    assert bool(runtime_check()(name, "plain", runtime_policy("MY_WB"))) == expected
    assert (refuse_forward(name, "MY_WB") is not None) == expected
    assert (refuse_forward(name) is not None) == forward_refused_by_definition(name, "")


@pytest.mark.parametrize(("name", "key_env", "reason"), [
    ("MY_WB", "my_wb", "it holds the W&B key ([wandb] key_env names it)"),
    ("RAY_ADDRESS", None, "it holds a secret or an address that may carry user:password"),
    ("AWS_PROFILE", None, "AWS_* variables hold or select AWS credentials"),
    ("HF_TOKEN", None, "its name says it holds a secret"),
])
def test_refuse_forward_reasons(name: str, key_env: str | None, reason: str) -> None:
    """Golden wording: the reason the compiler gives for each family of refused names."""
    assert refuse_forward(name, key_env) == reason


# --- acrl run: an authenticated address comes from the environment only ----------------------------

def _acrl_run(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "run", *args, *NO_AWS],
                          capture_output=True, text=True, env=env, timeout=180)


def _all_files_text(*roots: Path) -> str:
    return "\n".join(p.read_text(encoding="utf-8", errors="replace") for root in roots for p in root.rglob("*")
                     if p.is_file())


@pytest.mark.parametrize("address", [f"http://admin:{PASSWORD}@head:8265", f"admin:{PASSWORD}@10.1.2.3:8265",
                                     f"https://{GH_TOKEN}@ray.example"])
def test_acrl_run_refuses_an_address_with_credentials_on_the_command_line(address: str, tmp_path: Path) -> None:
    """--address is in the process list and the shell's history: with user:password it is a usage error (exit 2),
    before anything is read, run or recorded, and the message never shows the password."""
    runs = tmp_path / "runs"
    proc = _acrl_run(str(tmp_path / "no-bundle"), "--address", address, "--runs-dir", str(runs),
                     env=tool_env())
    assert proc.returncode == 2, proc.stderr
    secret = GH_TOKEN if GH_TOKEN in address else PASSWORD
    assert secret not in proc.stdout + proc.stderr
    assert "ACRL_RAY_ADDRESS" in proc.stderr and "Traceback" not in proc.stderr
    assert not runs.exists()


def test_acrl_run_takes_an_authenticated_address_from_the_environment(tmp_path: Path, toolbox: Toolbox) -> None:
    """ACRL_RAY_ADDRESS=http://admin:PASSWORD@head: the run goes to that cluster (the ray job commands get the
    address in their environment), and the password is in no bundle file, no output, no argv the ray stand-in
    recorded, not run.json, not train.log, not the preflight table (the gpus check names the cluster)."""
    project = make_project(tmp_path)
    address = f"http://admin:{PASSWORD}@127.0.0.1:9"
    log = tmp_path / "shim-calls.jsonl"
    env = tool_env(PATH=toolbox.path, ACRL_SHIM_LOG=str(log), ACRL_RAY_ADDRESS=address)
    proc = _acrl_run(str(project.bundle), "--runs-dir", str(project.runs), env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    calls = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    jobs = [c for c in calls if c["argv"][:2] == ["ray", "job"]]
    assert jobs and {c["env"]["RAY_API_SERVER_ADDRESS"] for c in jobs} == {address}
    assert not [c for c in calls if any(PASSWORD in word for word in c["argv"])]
    assert PASSWORD not in proc.stdout + proc.stderr
    assert PASSWORD not in _all_files_text(project.bundle, project.runs)  # run.json and train.log included
    record = only_record(project.runs)
    assert record["ray_address"] == "http://127.0.0.1:9"
    gpus = next(r for r in record["preflight"] if r["name"] == "gpus")
    assert gpus["status"] == "skipped" and "http://127.0.0.1:9" in gpus["detail"]
    assert re.search(r"gpus\s+skipped.*http://127\.0\.0\.1:9", proc.stdout)


@pytest.mark.parametrize("address", [f"http://admin:{PASSWORD}@head:8265", f"admin:{PASSWORD}@head:8265"])
def test_preflight_never_shows_the_password_of_the_address(address: str, tmp_path: Path) -> None:
    """The gpus check's detail names the cluster (a library caller may pass any address): without user:password."""
    from acrl.runtime._preflight import checks as _preflight

    info = _preflight.BundleInfo(tmp_path, {}, None, (), address)
    result = _preflight.run_check(next(c for c in _preflight.CHECKS if c.name == "gpus"), info)
    assert result.status == "skipped" and "head:8265" in result.detail
    assert PASSWORD not in _preflight.format_table([result]) + json.dumps(result.as_json())


# --- the importers never copy a credential -----------------------------------------------------

def test_import_train_sh_never_copies_a_credential(tmp_path: Path) -> None:
    from acrl.compiler._importers.base import render_spec
    from acrl.compiler._importers.train_sh import import_train_sh

    script = tmp_path / "train.sh"
    script.write_text('#!/bin/bash\n'
                      'ray job submit --address="http://127.0.0.1:8265" -- python3 /root/slime/train.py \\\n'
                      f'  --wandb-k {WANDB_KEY} --Sglang_Api_Key={OPENAI_KEY} --wandb-group {HF_TOKEN} \\\n'
                      f'  --router-oracle-pa {PASSWORD} --num-epoch 2\n', encoding="utf-8")
    imported = import_train_sh(script)
    shown = render_spec(imported) + "\n".join(n.message for n in imported.notes)
    for secret in (WANDB_KEY, OPENAI_KEY, HF_TOKEN, PASSWORD):
        assert secret not in shown
    refused = {n.message.split(" ", 1)[0] for n in imported.notes if "carries a secret" in n.message}
    assert {"--wandb-k", "--wandb-group", "--router-oracle-pa"} <= refused
    assert any("--Sglang_Api_Key" in n.message for n in imported.notes)


def test_import_slime_runner_never_copies_a_credential(tmp_path: Path) -> None:
    import yaml

    from acrl.compiler._importers.base import render_spec
    from acrl.compiler._importers.slime_runner import import_slime_runner

    slime_dir = tmp_path / "slime"
    (slime_dir / "scripts" / "models").mkdir(parents=True)
    (slime_dir / "scripts" / "models" / "tiny.sh").write_text("MODEL_ARGS=(--num-layers 2)\n", encoding="utf-8")
    fields = {**minimal(slime_dir), "extra_flags": ["--wandb-k", WANDB_KEY, f"--WANDB_KEY={OPENAI_KEY}",
                                                    "--wandb-group", HF_TOKEN, "--rollout-shuffle"]}
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(fields), encoding="utf-8")
    imported = import_slime_runner(config)
    shown = render_spec(imported) + "\n".join(n.message for n in imported.notes)
    for secret in (WANDB_KEY, OPENAI_KEY, HF_TOKEN):
        assert secret not in shown
    assert imported.spec["extra"]["args"] == ["--rollout-shuffle"]  # the flag beside them is kept


def test_import_train_sh_notes_never_echo_a_secret_shaped_word(tmp_path: Path) -> None:
    """A stray word the importer reports (left out, not a flag) is named only when it does not look secret."""
    from acrl.compiler._importers.train_sh import import_train_sh

    script = tmp_path / "train.sh"
    script.write_text('#!/bin/bash\n'
                      'ray job submit --address="http://127.0.0.1:8265" -- python3 /root/slime/train.py \\\n'
                      f'  {OPENAI_KEY} --num-epoch 2 --wandb-project "${{PROJ:-http://u:{PASSWORD}@proxy:3128}}"\n',
                      encoding="utf-8")
    imported = import_train_sh(script)
    notes = "\n".join(n.message for n in imported.notes)
    assert "looks secret (not shown) before any flag" in notes
    assert "--wandb-project carries a secret" in notes
    assert PASSWORD not in notes + render_spec(imported) and OPENAI_KEY not in notes


def test_script_env_values_reach_no_argument_list(write_spec: SpecWriter, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """[model] script_env goes to slime's model script in its environment at compile time, never as `env K=V`
    words of a process's argv; a value holding credentials is then refused (ACRL-S003)."""
    from acrl.compiler import compile_spec
    from acrl.compiler.errors import SpecError

    models = tmp_path / "slime" / "scripts" / "models"
    models.mkdir(parents=True)
    (models / "toy.sh").write_text('MODEL_ARGS=(--num-layers 2 --rotary-base "${MODEL_ARGS_ROTARY_BASE:-10000}")\n')
    argvs: list[list[str]] = []
    real_run = subprocess.run

    def recording_run(args: Any, *rest: Any, **kwargs: Any) -> Any:
        argvs.append([str(a) for a in args])
        return real_run(args, *rest, **kwargs)

    monkeypatch.setattr(subprocess, "run", recording_run)
    spec = write_spec({"slime": {"dir": str(tmp_path / "slime")},
                       "model": {"type": "toy", "args": None, "args_source": "script",
                                 "script_env": {"MODEL_ARGS_ROTARY_BASE": f"http://u:{PASSWORD}@h"}}})
    with pytest.raises(SpecError) as refused:
        compile_spec(spec)
    assert "ACRL-S003" in {d.rule for d in refused.value.diagnostics}
    assert PASSWORD not in str(refused.value)
    assert argvs and not [argv for argv in argvs if any(PASSWORD in word for word in argv)]


# --- the class: a credential in ANY string of the spec is refused and never shown ---------------------

def _string_settings() -> list[tuple[str, Any]]:
    """(dotted key, type) of every setting of the spec that holds strings, tables and arrays included."""
    import typing

    import attrs

    from acrl.compiler._spec.tables import Spec

    def walk(cls: Any, prefix: str) -> list[tuple[str, Any]]:
        hints = typing.get_type_hints(cls)
        out: list[tuple[str, Any]] = []
        for field in attrs.fields(cls):
            hint = hints[field.name]
            # a table that may be absent ([agentcore]: AgentCore | None) is walked as the table
            table = hint if attrs.has(hint) else next((a for a in typing.get_args(hint) if attrs.has(a)), None)
            # a choice of strings (experiment.integration: a Literal) is a string setting too
            args = typing.get_args(hint)
            choice = typing.get_origin(hint) is typing.Literal and all(isinstance(a, str) for a in args)
            out += walk(table, f"{prefix}{field.name}.") if table is not None else \
                [(f"{prefix}{field.name}", hint)] if "str" in repr(hint) or choice else []
        return out
    return walk(Spec, "")


def _placed(key: str, hint: Any, secret: str) -> dict[str, Any]:
    """Spec overrides that put ``secret`` at ``key``: as the value, a table's value or an array's item."""
    shape = repr(hint)
    value: Any = secret
    if shape.startswith(("dict", "typing.Dict")):
        value = {"some-flag" if key.startswith(("model.", "extra.")) and key != "model.script_env" else "SOME_VAR":
                 secret}
    elif shape.startswith(("list", "typing.List")):
        value = [{"name": "eval", "path": secret}] if key == "eval.datasets" else [secret]
    if key.startswith("sglang.models."):  # a key of [sglang.models.NAME] or of one of its server groups
        group: dict[str, Any] = {"worker_type": "regular", "num_gpus": 8}
        model: dict[str, Any] = {"server_groups": [group]}
        (model if key.count(".") == 2 else group)[key.rsplit(".", 1)[1]] = value
        return {"sglang": {"models": {"default": model}}}
    *tables, leaf = key.split(".")
    node: Any = {leaf: value}
    for i in range(len(tables) - 1, 0, -1):  # a key of a table inside [kuberay], or of an array of tables there
        within = ".".join(tables[:i + 1])
        node = {tables[i]: [{**ARRAY_ITEMS[within], **node}] if within in ARRAY_ITEMS else node}
    return {tables[0]: node}


# The arrays of tables of [kuberay], and the keys an item needs besides the one tested.
ARRAY_ITEMS: dict[str, dict[str, Any]] = {"kuberay.volumes": {"name": "v", "mount_path": "/v", "claim": "c"},
                                          **{f"kuberay.{pod}.tolerations": {} for pod in ("head", "worker",
                                                                                          "submitter")}}
STRING_SETTINGS = _string_settings()


def test_every_string_setting_is_covered() -> None:
    keys = {key for key, _ in STRING_SETTINGS}
    assert {"cluster.address", "env.vars", "model.script_env", "extra.flags", "extra.args", "wandb.group",
            "data.path", "kuberay.image", "agentcore.runtime_arn", "experiment.integration"} <= keys and len(keys) >= 40


@pytest.mark.parametrize("secret", [f"http://admin:{PASSWORD}@host:8265", OPENAI_KEY], ids=["url", "token"])
@pytest.mark.parametrize(("key", "hint"), STRING_SETTINGS, ids=[key for key, _ in STRING_SETTINGS])
def test_a_credential_anywhere_in_the_spec_is_refused_and_not_shown(key: str, hint: Any, secret: str,
                                                                    write_spec: SpecWriter, tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    from acrl.compiler._cli.main import compile_main

    shown_secret = PASSWORD if PASSWORD in secret else secret
    spec = write_spec(_placed(key, hint, secret))
    for target in ("ray", "kuberay"):
        out = tmp_path / f"bundle-{target}"
        for json_flag in ([], ["--json"]):
            code = compile_main([str(spec), "-o", str(out), "--no-cache", "--target", target, *json_flag])
            captured = capsys.readouterr()
            assert code == 1, captured.out + captured.err
            assert shown_secret not in captured.out + captured.err
            assert not out.exists()


def test_redaction_keeps_the_wording_of_messages() -> None:
    """Prose that names the pattern (user:password@) is not a credential."""
    for text in ("the Ray address carries credentials (user:password@), which would be written",
                 "the value holds a URL with user:password@, which", "give u:p@ nothing"):
        assert redact(text, code=False) == text and not looks_secret_value(text)


@pytest.mark.parametrize(("grid", "secret"), [
    ('"env.vars.HTTPS_PROXY" = ["http://u:hunter2-Zq9@p:1", "http://p:2"]', PASSWORD),
    ('"env.vars.DB_PASSWORD" = ["hunter2-Zq9", "x"], "env.vars.N" = ["1"]', PASSWORD),
    (f'"wandb.group" = ["{OPENAI_KEY}", "g"]', OPENAI_KEY),
])
def test_a_sweep_point_with_a_secret_is_refused_and_not_shown(grid: str, secret: str, write_spec: SpecWriter,
                                                              tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A point's name is made of its values: the error, --json and sweep.json (--keep-going) show it masked."""
    from acrl.compiler._cli.main import compile_main

    spec = write_spec()
    spec.write_text(spec.read_text() + f"\n[sweep]\ngrid = {{ {grid} }}\n", encoding="utf-8")
    for extra in ([], ["--json"], ["--keep-going"], ["--keep-going", "--json"]):
        out = tmp_path / f"out{len(extra)}{extra[-1] if extra else ''}"
        code = compile_main([str(spec), "-o", str(out), "--no-cache", *extra])
        captured = capsys.readouterr()
        assert code == 1, captured.out + captured.err
        assert secret not in captured.out + captured.err
        assert not out.exists() or secret not in _all_files_text(out)
        if "--keep-going" in extra:
            assert (out / "sweep.json").is_file()


def test_import_slime_runner_leaves_out_any_secret_shaped_field(tmp_path: Path) -> None:
    """Whatever field a secret sits in (wandb_group, a data path with user:password), the imported spec
    leaves it out, with a note naming the key (never the value)."""
    import yaml

    from acrl.compiler._importers.slime_runner import import_slime_runner

    slime_dir = tmp_path / "slime"
    (slime_dir / "scripts" / "models").mkdir(parents=True)
    (slime_dir / "scripts" / "models" / "tiny.sh").write_text("MODEL_ARGS=(--num-layers 2)\n", encoding="utf-8")
    fields = {**minimal(slime_dir), "wandb_group": OPENAI_KEY, "wandb_project": "ok-project",
              "data_path": f"https://u:{PASSWORD}@data.example/train.jsonl"}
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(fields), encoding="utf-8")
    imported = import_slime_runner(config)
    shown = render_spec(imported) + "\n".join(n.message for n in imported.notes)
    assert OPENAI_KEY not in shown and PASSWORD not in shown
    assert "group" not in imported.spec["wandb"] and imported.spec["wandb"]["project"] == "ok-project"
    assert "path" not in imported.spec["data"]
    assert {n.where for n in imported.notes if "looks like a secret" in n.message} == {"wandb.group", "data.path"}


@pytest.mark.parametrize(("data", "found"), [
    ({"wandb": {"group": OPENAI_KEY, "project": "p"}}, ["wandb.group"]),
    ({"env": {"vars": {"DB_PASSWORD": "x", "N": "1"}}}, ["env.vars.DB_PASSWORD"]),
    ({"extra": {"flags": {"--wandb-k": "x"}, "args": ["--a", "--wandb-key=x"]}}, ["extra.flags.--wandb-k",
                                                                                  "extra.args"]),
    ({"kuberay": {"secret": "acrl-secrets"}, "slime": {"commit": "fa3c990af6f18efd3fd9922698bf4bf4048d1263"}}, []),
    ({"eval": {"datasets": [{"name": "a", "path": f"http://u:{PASSWORD}@h/x"}]}}, ["eval.datasets.0.path"]),
])
def test_drop_secret_values(data: dict[str, Any], found: list[str]) -> None:
    import copy

    from acrl.compiler._secrets import drop_secret_values

    kept = copy.deepcopy(data)
    assert drop_secret_values(kept) == found
    assert not [k for k in found if PASSWORD in json.dumps(kept) or OPENAI_KEY in json.dumps(kept)]
