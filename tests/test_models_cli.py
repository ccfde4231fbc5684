"""`acrl models` and `acrl models show NAME`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from acrl.compiler._cli.main import acrl_main
from acrl.compiler._pipeline.model_args.catalog import CATALOG


def test_models_lists_the_catalog(capsys: pytest.CaptureFixture[str]) -> None:
    assert acrl_main(["models"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["name", "architecture", "layers", "hidden", "heads", "experts", "source"]
    assert [line.split()[0] for line in out[1:]] == list(CATALOG)
    assert "qwen3-30B-A3B            Qwen3MoeForCausalLM        48   2048      32/4     128  Qwen/Qwen3-30B-A3B" in out


def test_models_show_prints_each_flag_with_its_config_field(capsys: pytest.CaptureFixture[str]) -> None:
    assert acrl_main(["models", "show", "qwen2.5-32B-Instruct"]) == 0
    out = capsys.readouterr().out
    assert "--norm-epsilon 1e-06" in out and "rms_norm_eps = 1e-06" in out
    assert "--num-query-groups 8" in out and "num_key_value_heads = 8" in out


def test_models_show_json_is_the_frozen_args(capsys: pytest.CaptureFixture[str]) -> None:
    assert acrl_main(["models", "show", "qwen3-4B", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["model_args"] == list(CATALOG["qwen3-4B"].model_args())
    assert {"flag": "--kv-channels", "values": ["128"], "hf_field": "head_dim", "hf_value": 128} in data["fields"]


def test_unknown_model_suggests_names(capsys: pytest.CaptureFixture[str]) -> None:
    assert acrl_main(["models", "show", "qwen3-5B"]) == 2  # a name the command line got wrong: a usage error
    assert "did you mean 'qwen3-8B'" in capsys.readouterr().err


def test_a_closed_pipe_is_not_an_error(tmp_path: Path) -> None:
    script = tmp_path / "models.py"
    script.write_text("import sys\nfrom acrl.compiler._cli.main import acrl_main\nsys.exit(acrl_main(['models']))\n")
    proc = subprocess.run(f"'{sys.executable}' '{script}' | head -1; exit ${{PIPESTATUS[0]}}", shell=True,
                          executable="/bin/bash", capture_output=True, text=True, check=False)
    assert proc.stdout.startswith("name") and proc.stderr == "" and proc.returncode == 0
