"""MODEL_ARGS from slime's model script: sourced in a clean environment, frozen with provenance."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
import tomli_w

from acrl.compiler import SpecError, compile_spec
from conftest import MINIMAL, SpecWriter, merge

SCRIPT = r"""#!/bin/bash
# like slime's glm4.5 scripts: an env knob, arithmetic, a loop and an unquoted glob
NLAYERS="${MODEL_ARGS_NUM_LAYERS:-46}"
FIRST_K_DENSE_REPLACE=1
arr=()
for ((i=0; i<NLAYERS; i++)); do arr+=(1); done
MODEL_ARGS=(
   --num-layers $NLAYERS
   --num-attention-heads 16
   --rotary-base "${MODEL_ARGS_ROTARY_BASE:-1000000}"
   --moe-layer-freq [0]*$FIRST_K_DENSE_REPLACE+[1]*$((NLAYERS - FIRST_K_DENSE_REPLACE))
   --ffn-hidden-size $((1024 * 4))
   --swiglu
)
"""


@pytest.fixture
def slime_dir(tmp_path: Path) -> Path:
    models = tmp_path / "slime" / "scripts" / "models"
    models.mkdir(parents=True)
    (models / "toy-moe.sh").write_text(SCRIPT)
    (models / "broken.sh").write_text("MODEL_ARGS=(--a 1)\nexit 3\n")
    (models / "empty.sh").write_text("X=1\n")
    return tmp_path / "slime"


def spec_for(write_spec: SpecWriter, slime_dir: Path, model_type: str = "toy-moe", **model: object) -> Path:
    return write_spec({"slime": {"dir": str(slime_dir)},
                       "model": {"type": model_type, "args": None, **model}})


EXPECTED = ["--num-layers", "46", "--num-attention-heads", "16", "--rotary-base", "1000000",
            "--moe-layer-freq", "[0]*1+[1]*45", "--ffn-hidden-size", "4096", "--swiglu"]


def test_script_is_resolved_and_frozen(write_spec: SpecWriter, slime_dir: Path) -> None:
    bundle = compile_spec(spec_for(write_spec, slime_dir))
    assert list(bundle.model_args.args) == EXPECTED
    text = bundle.files["model_args.sh"].decode()
    assert "  --moe-layer-freq '[0]*1+[1]*45'\n" in text
    assert "# environment knob read by the source: MODEL_ARGS_NUM_LAYERS=(unset)\n" in text
    assert "# environment knob read by the source: MODEL_ARGS_ROTARY_BASE=(unset)\n" in text
    assert bundle.model_args.provenance()["source"] == "script"


def test_caller_environment_and_working_directory_do_not_leak_in(
        write_spec: SpecWriter, slime_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MODEL_ARGS_ROTARY_BASE", "5")
    monkeypatch.setenv("MODEL_ARGS_NUM_LAYERS", "2")
    trap = tmp_path / "cwd"
    trap.mkdir()
    (trap / "0x1+1y45").write_text("")  # would match the glob [0]*1+[1]*45 if expanded here
    monkeypatch.chdir(trap)
    assert list(compile_spec(spec_for(write_spec, slime_dir)).model_args.args) == EXPECTED
    assert os.environ["MODEL_ARGS_ROTARY_BASE"] == "5"


def test_knobs_named_in_the_spec_are_used_and_recorded(write_spec: SpecWriter, slime_dir: Path) -> None:
    bundle = compile_spec(spec_for(write_spec, slime_dir, script_env={"MODEL_ARGS_ROTARY_BASE": "500000"}))
    assert bundle.model_args.args[5] == "500000"
    assert "MODEL_ARGS_ROTARY_BASE=500000" in bundle.files["model_args.sh"].decode()
    assert b'"MODEL_ARGS_ROTARY_BASE": "500000"' in bundle.files["manifest.json"]


@pytest.mark.parametrize(("model_type", "message"), [
    ("missing", "neither in acrl.s model catalog nor a script of the slime checkout"),
    ("broken", r"failed \(exit 3\)$"),
    ("empty", "does not define MODEL_ARGS"),
])
def test_script_problems_are_spec_errors(write_spec: SpecWriter, slime_dir: Path, model_type: str,
                                         message: str) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(spec_for(write_spec, slime_dir, model_type))
    (diag,) = info.value.diagnostics
    assert re.search(message, diag.message) and diag.hint and diag.key == "model.type"


def test_args_source_args_needs_a_table(write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec({"model": {"args": None, "args_source": "args"}}))
    assert [(d.key, bool(d.hint)) for d in info.value.diagnostics] == [("model.args_source", True)]


def test_literal_args_keep_written_order_and_values(write_spec: SpecWriter) -> None:
    spec = merge(MINIMAL, {"model": {"args": None}})
    spec["model"]["args"] = {"moe-layer-freq": "[0]*1+[1]*45", "rotary-percent": 0.5, "swiglu": True,
                             "no-such": False, "--list": [1, "a"]}
    bundle = compile_spec(write_spec(text=tomli_w.dumps(spec)))
    assert list(bundle.model_args.args) == ["--moe-layer-freq", "[0]*1+[1]*45", "--rotary-percent", "0.5",
                                            "--swiglu", "--list", "1", "a"]
