"""ACRL-M008 whatever the source (issue 14): the catalog entry is compared with slime's script of its architecture
whenever that script is readable on the compiling machine. A documented correction (catalog.CORRECTIONS) is a note;
any other difference names its flags, as an error when MODEL_ARGS come from the catalog, else as a note.

The slime checkout is tests/fixtures/slime_checkout copied with a scripts/models/*.sh written from the generated
facts (tests/data/slime/<HEAD>/model_args.json: the script's resolved flag values, not slime's script text).
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
import tomli_w

from acrl.compiler import SpecError, compile_spec
from conftest import MINIMAL, REPO, SpecWriter, merge, slime_model_args

MOE = {"tensor": 4, "expert": 2}  # qwen3-30B-A3B: 32 heads / 4 query groups, 128 experts, on 8 GPUs


def checkout(tmp_path: Path, scripts: dict[str, list[str]]) -> Path:
    slime = tmp_path / "slime"
    shutil.copytree(REPO / "tests" / "fixtures" / "slime_checkout", slime)
    models = slime / "scripts" / "models"
    models.mkdir(parents=True, exist_ok=True)  # the fixture has a script of its own
    for name, args in scripts.items():
        (models / f"{name}.sh").write_text("MODEL_ARGS=(\n  " + " ".join(map(shlex.quote, args)) + "\n)\n")
    return slime


def spec(write_spec: SpecWriter, slime: Path, model_type: str, parallel: dict[str, int] | None = None,
         **model: object) -> Path:
    doc = merge(MINIMAL, {"model": {"args": None, "type": model_type, "dir": f"/models/{model_type}"},
                          "slime": {"dir": str(slime)}, "parallel": parallel or {"tensor": 2}})
    doc["model"].update(model)
    return write_spec(text=tomli_w.dumps(doc))


def with_value(args: list[str], flag: str, value: str | None) -> list[str]:
    """``args`` with ``flag`` given ``value`` (None: without the flag)."""
    out = list(args)
    i = out.index(flag)
    del out[i:i + (2 if i + 1 < len(out) and not out[i + 1].startswith("--") else 1)]
    return out if value is None else [*out, flag, *([value] if value else [])]


def test_the_catalog_equals_slimes_qwen3_moe_script(write_spec: SpecWriter, tmp_path: Path) -> None:
    slime = checkout(tmp_path, {"qwen3-30B-A3B": slime_model_args()["qwen3-30B-A3B"]})
    bundle = compile_spec(spec(write_spec, slime, "qwen3-30B-A3B", MOE))
    assert bundle.model_args.source == "catalog"
    args = list(bundle.model_args.args)
    assert args[args.index("--moe-token-dispatcher-type") + 1] == "alltoall"
    assert {"--moe-grouped-gemm", "--moe-permute-fusion"} <= set(args)
    assert f"acrl catalog: qwen3-30B-A3B compared with {slime}/scripts/models/qwen3-30B-A3B.sh" in bundle.notes
    assert not any("differs" in n for n in bundle.notes)


def test_a_script_the_catalog_does_not_match_is_an_error_naming_the_flags(write_spec: SpecWriter,
                                                                          tmp_path: Path) -> None:
    script = with_value(with_value(slime_model_args()["qwen3-30B-A3B"], "--moe-permute-fusion", None),
                        "--moe-token-dispatcher-type", "flex")
    slime = checkout(tmp_path, {"qwen3-30B-A3B": script})
    with pytest.raises(SpecError) as exc:
        compile_spec(spec(write_spec, slime, "qwen3-30B-A3B", MOE))
    found = {d.message.split(":")[0]: d for d in exc.value.diagnostics}
    assert sorted(found) == ["--moe-permute-fusion", "--moe-token-dispatcher-type"]
    d = found["--moe-token-dispatcher-type"]
    assert d.rule == "ACRL-M008" and d.severity == "error"
    assert d.message.startswith("--moe-token-dispatcher-type: alltoall in acrl catalog: qwen3-30B-A3B "
                                f"(Qwen/Qwen3-30B-A3B), but flex in {slime}/scripts/models/qwen3-30B-A3B.sh")
    assert '[model.overrides] "moe-token-dispatcher-type" = "flex"' in d.hint and 'args_source = "script"' in d.hint
    assert '"moe-permute-fusion" = false' in found["--moe-permute-fusion"].hint
    # the overrides the hints name settle it
    settled = compile_spec(spec(write_spec, slime, "qwen3-30B-A3B", MOE, overrides={
        "moe-token-dispatcher-type": "flex", "moe-permute-fusion": False}))
    assert "--moe-permute-fusion" not in settled.model_args.args


def test_a_documented_correction_is_a_note(write_spec: SpecWriter, tmp_path: Path) -> None:
    """The norm-epsilon case: slime's qwen2.5-32B.sh (the script of the Instruct model's architecture) has 1e-5."""
    slime = checkout(tmp_path, {"qwen2.5-32B": slime_model_args()["qwen2.5-32B"]})
    bundle = compile_spec(spec(write_spec, slime, "qwen2.5-32B-Instruct", {"tensor": 8}))
    assert bundle.model_args.source == "catalog"
    [note] = [n for n in bundle.notes if "documented correction" in n]
    assert note.startswith("--norm-epsilon: 1e-06 in acrl catalog: qwen2.5-32B-Instruct (Qwen/Qwen2.5-32B-Instruct), "
                           f"but 1e-5 in {slime}/scripts/models/qwen2.5-32B.sh")


def test_with_literal_args_a_difference_is_a_note(write_spec: SpecWriter, tmp_path: Path) -> None:
    script = with_value(slime_model_args()["qwen3-4B"], "--rotary-base", "10000")
    slime = checkout(tmp_path, {"qwen3-4B": script})
    doc = merge(MINIMAL, {"model": {"type": "qwen3-4B"}, "slime": {"dir": str(slime)}})
    bundle = compile_spec(write_spec(text=tomli_w.dumps(doc)))
    assert bundle.model_args.source == "args"
    assert any(n.startswith("acrl's catalog differs from slime's script (not this spec's MODEL_ARGS): --rotary-base: "
                            "1000000 in acrl catalog: qwen3-4B") for n in bundle.notes)


def test_no_script_here_no_comparison(write_spec: SpecWriter, tmp_path: Path) -> None:
    slime = checkout(tmp_path, {})
    bundle = compile_spec(spec(write_spec, slime, "qwen3-4B"))
    assert bundle.model_args.source == "catalog" and not any("compared with" in n for n in bundle.notes)
