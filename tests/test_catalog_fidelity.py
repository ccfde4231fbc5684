"""Catalog fidelity (issue 14): the catalog launches what slime's scripts launch, at every commit acrl targets.

For every catalog entry whose architecture slime ships a scripts/models/*.sh for, the entry's MODEL_ARGS equal the
script's resolved MODEL_ARGS (tests/data/slime/<commit>/model_args.json, generated from slime itself) in effect,
flag by flag, performance settings included (hf_config.compare: an absent flag equals Megatron's default, numbers
compare by value), except the flags named in catalog.CORRECTIONS, each with why. Every script of every targeted
commit has an entry.
"""

from __future__ import annotations

import json

import pytest

from acrl.compiler._pipeline.model_args.catalog import CATALOG, CORRECTIONS
from acrl.compiler._pipeline.model_args.hf_config import compare
from acrl.compiler._slime.catalog_facts import catalog_data, dumps
from conftest import REPO, SLIME_DATA, SLIME_HEAD, SLIME_PIN, slime_facts, slime_model_args

COMMITS = (SLIME_HEAD, SLIME_PIN)
DATA = REPO / "compiler" / "_pipeline" / "model_args" / "slime_models.json"


@pytest.mark.parametrize("commit", COMMITS)
def test_every_entry_equals_slimes_script_or_names_the_correction(commit: str) -> None:
    scripts = slime_model_args(commit)
    checked, found = set(), {}
    for name, e in CATALOG.items():
        if e.slime_script not in scripts:
            continue
        checked.add(name)
        mismatches = compare(e.model_args(), f"acrl catalog: {name}", scripts[e.slime_script],
                             f"slime {commit[:7]} scripts/models/{e.slime_script}.sh")
        flags = {m.flag for m in mismatches}
        if flags != {flag for flag, _ in CORRECTIONS.get(name, ())}:
            found[name] = [m.message for m in mismatches]
    assert found == {}
    assert {"qwen3-30B-A3B", "qwen3-235B-A22B", "glm4-32B", "llama3.1-8B-Instruct"} <= checked


def test_the_corrections_table_is_documented_and_used() -> None:
    for name, corrections in CORRECTIONS.items():
        assert name in CATALOG and CATALOG[name].slime_differences == corrections
        assert all(flag.startswith("--") and len(why) > 30 for flag, why in corrections)
    # the norm-epsilon case: slime's qwen2.5-32B.sh has the base model's 1e-5, the Instruct model 1e-06
    assert [flag for flag, _ in CORRECTIONS["qwen2.5-32B-Instruct"]] == ["--norm-epsilon"]


@pytest.mark.parametrize("commit", COMMITS)
def test_every_slime_model_script_has_a_catalog_entry(commit: str) -> None:
    scripts = slime_model_args(commit)
    covered = {e.slime_script for e in CATALOG.values()}
    assert sorted(set(scripts) - covered) == []
    assert all(name in CATALOG and CATALOG[name].slime_script == name for name in scripts)


def test_qwen3_moe_entries_keep_slimes_performance_flags() -> None:
    for name in ("qwen3-30B-A3B", "qwen3-235B-A22B"):
        args = CATALOG[name].model_args()
        assert args[args.index("--moe-token-dispatcher-type") + 1] == "alltoall"  # Megatron's default: allgather
        assert "--moe-grouped-gemm" in args and "--moe-permute-fusion" in args


def test_derived_entries_are_cross_checked_with_the_published_config_json() -> None:
    """Where the repository holds a model's published config.json (tests/fixtures/hf), the entry's fields are its."""
    fixtures = {"qwen3-4B": "Qwen3-4B", "qwen3-30B-A3B": "Qwen3-30B-A3B", "glm4-9B": "GLM-4-9B-0414",
                "llama3.1-8B-Instruct": "Llama-3.1-8B-Instruct", "llama3.2-3B-Instruct": "Llama-3.2-3B-Instruct",
                "qwen2.5-32B-Instruct": "Qwen2.5-32B-Instruct"}
    for name, folder in fixtures.items():
        published = json.loads((REPO / "tests" / "fixtures" / "hf" / folder / "config.json").read_text())
        e = CATALOG[name]
        assert {k: v for k, v in published.items() if k in e.hf_fields} == {
            k: list(v) if isinstance(v, tuple) else dict(v) if hasattr(v, "keys") else v
            for k, v in e.hf_fields.items() if k in published}, name
        if "--max-position-embeddings" in e.settings:
            i = e.settings.index("--max-position-embeddings")
            assert int(e.settings[i + 1]) == published["max_position_embeddings"]


def test_script_entries_come_from_the_generated_data() -> None:
    """slime_models.json is what catalog_facts makes of the facts files (HEAD first); the entries it gives take
    slime's MODEL_ARGS as they are, with the script and commit as their source."""
    argv = [f"tests/data/slime/{SLIME_HEAD}", f"tests/data/slime/{SLIME_PIN}", "-o",
            "compiler/_pipeline/model_args/slime_models.json"]
    facts = [slime_facts("model_args.json", c) for c in COMMITS]
    assert DATA.read_text(encoding="utf-8") == dumps(catalog_data(facts, argv))
    assert (SLIME_DATA / SLIME_HEAD).is_dir()
    models = json.loads(DATA.read_text(encoding="utf-8"))["models"]
    literal = {n: e for n, e in CATALOG.items() if e.script_args is not None}
    assert {"deepseek-v3", "kimi-k2", "glm4.5-355B-A32B", "qwen3-next-80B-A3B", "gpt-oss-20B"} <= set(literal)
    for name, e in literal.items():
        assert e.script_args == tuple(models[name]["args"]) and e.hf_fields == {}
        assert e.source == f"slime scripts/models/{name}.sh at {models[name]['commit'][:7]}"
        assert name not in {d.slime_script for d in CATALOG.values() if d.script_args is None}
