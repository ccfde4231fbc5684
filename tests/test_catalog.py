"""The built-in model catalog: published config.json fields, cross-checked against slime's model scripts.

slime's 39 scripts resolved to MODEL_ARGS are generated from slime's code into tests/data/slime (README.md there).
Where a catalog entry and slime's script disagree on the architecture, the entry must say why.
"""

from __future__ import annotations

import pytest

from acrl.compiler._pipeline.model_args.catalog import CATALOG, CatalogEntry, close_names, entry, lookup_error
from acrl.compiler._pipeline.model_args.hf_config import SETTINGS, compare, derive_model_args
from conftest import slime_model_args

REQUIRED = [
    "qwen2.5-0.5B", "qwen2.5-1.5B", "qwen2.5-3B", "qwen2.5-7B", "qwen2.5-14B", "qwen2.5-32B", "qwen2.5-32B-Instruct",
    "qwen2.5-72B", "qwen3-0.6B", "qwen3-1.7B", "qwen3-4B", "qwen3-8B", "qwen3-14B", "qwen3-32B", "qwen3-30B-A3B",
    "qwen3-235B-A22B", "qwen3-4B-Instruct-2507", "llama3.1-8B-Instruct", "llama3.2-3B-Instruct", "glm4-9B",
    "glm4-32B",
]
# What slime's script of the same architecture gets wrong against the published config (see the entries' notes).
KNOWN_DIFFERENCES = {
    "qwen2.5-1.5B": {"--rotary-base"}, "qwen2.5-32B-Instruct": {"--norm-epsilon"},
    "llama3.2-3B-Instruct": {"--rope-scaling-factor"}, "llama3.2-3B-Instruct-amd": {"--rope-scaling-factor"},
    "glm4-32B": {"--num-layers", "--num-query-groups"},
}


@pytest.fixture(scope="module")
def slime_args() -> dict[str, list[str]]:
    return slime_model_args()


def test_catalog_has_the_required_models() -> None:
    assert set(REQUIRED) <= set(CATALOG)


DERIVED = sorted(n for n, e in CATALOG.items() if e.script_args is None)


@pytest.mark.parametrize("name", DERIVED)
def test_entry_derives_cleanly(name: str) -> None:
    e = CATALOG[name]
    derived = e.derived()
    assert derived.unsupported == ()
    assert e.model_args() == derive_model_args(dict(e.hf_fields)).args + e.settings
    assert {t for t in e.settings if t.startswith("--")} <= SETTINGS  # never architecture
    assert {"--num-layers", "--hidden-size", "--norm-epsilon", "--rotary-base", "--vocab-size"} <= set(derived.args)
    org, _, repo = e.source.partition("/")
    assert org in {"Qwen", "meta-llama", "THUDM"} and repo, e.source


@pytest.mark.parametrize("name", sorted(n for n in DERIVED if CATALOG[n].slime_script))
def test_entry_agrees_with_slimes_script(name: str, slime_args: dict[str, list[str]]) -> None:
    e = CATALOG[name]
    assert e.slime_script is not None
    mismatches = compare(slime_args[e.slime_script], f"slime scripts/models/{e.slime_script}.sh", e.model_args(),
                         e.source)
    errors = {m.flag for m in mismatches if m.severity == "error"}
    assert errors == {flag for flag, _ in e.slime_differences} == KNOWN_DIFFERENCES.get(name, set())
    assert all(why for _, why in e.slime_differences)
    assert {m.flag for m in mismatches if m.severity == "warning"} == set()  # settings included


def test_every_slime_script_of_a_catalog_name_is_cross_checked(slime_args: dict[str, list[str]]) -> None:
    in_both = set(CATALOG) & set(slime_args)
    assert in_both >= {"qwen2.5-32B", "qwen3-30B-A3B", "llama3.1-8B-Instruct", "glm4-9B"}
    assert all(CATALOG[name].slime_script == name for name in in_both)


def test_qwen25_instruct_epsilon_differs_from_base() -> None:
    for size in ("14B", "32B", "72B"):
        base, instruct = CATALOG[f"qwen2.5-{size}"], CATALOG[f"qwen2.5-{size}-Instruct"]
        [m] = compare(base.model_args(), base.source, instruct.model_args(), instruct.source)
        assert (m.flag, m.a_value, m.b_value) == ("--norm-epsilon", "1e-05", "1e-06")


def test_math_model_explains_slimes_qwen25_15b_script(slime_args: dict[str, list[str]]) -> None:
    math = CATALOG["qwen2.5-math-1.5B"]
    assert compare(slime_args["qwen2.5-1.5B"], "slime", math.model_args(), math.source) == []


def test_qwen3_moe_args() -> None:
    args = CATALOG["qwen3-235B-A22B"].model_args()
    assert "--moe-layer-freq" in args and args[args.index("--moe-layer-freq") + 1] == "[1]*94"
    assert args[args.index("--kv-channels") + 1] == "128"


def test_entry_lookup() -> None:
    assert entry("qwen3-4B") is CATALOG["qwen3-4B"]
    assert entry("QWEN3-4b") is CATALOG["qwen3-4B"]
    assert entry("qwen9-1T") is None


def test_lookup_error_suggests_close_names() -> None:
    message = lookup_error("qwen2.5-32B-Instrct")
    assert message.startswith("'qwen2.5-32B-Instrct' is not in acrl's model catalog; did you mean "
                              "'qwen2.5-32B-Instruct'")
    assert "'qwen3-4B-Instruct-2507'" in lookup_error("qwen3-4b-instruct")
    assert "did you mean" not in lookup_error("zzzzzz") and "`acrl models`" in lookup_error("zzzzzz")
    assert "glm4-32B" not in lookup_error("zzzzzz")  # the catalog is `acrl models`' to list, not every error's


def test_close_names_put_typos_then_the_stem_a_suffix_was_added_to_first() -> None:
    assert close_names("qwen3-8b-instruct")[0] == "qwen3-8B"  # issue 17: it was qwen3-4B-Instruct-2507
    assert close_names("qwen2.5-3b-instruct")[0] == "qwen2.5-3B"  # not 32B, a letter away but another size
    assert close_names("qwen2.5-32B-Instrct")[0] == "qwen2.5-32B-Instruct"  # a typo beats the stem qwen2.5-32B
    assert len(close_names("qwen3")) <= 3


def test_entries_are_immutable() -> None:
    e = CATALOG["qwen3-4B"]
    with pytest.raises(TypeError):
        e.hf_fields["hidden_size"] = 1  # type: ignore[index]
    llama = CATALOG["llama3.1-8B-Instruct"]
    with pytest.raises(TypeError):
        llama.hf_fields["rope_scaling"]["factor"] = 1.0
    with pytest.raises(TypeError):
        CATALOG["x"] = e  # type: ignore[index]
    assert e.hf_fields["architectures"] == ("Qwen3ForCausalLM",)
    assert hash(e) == hash(CatalogEntry(e.name, e.source, dict(e.hf_fields), e.slime_script, e.slime_differences,
                                        e.settings))


def test_glm4_32b_follows_the_published_config_not_slimes_script(slime_args: dict[str, list[str]]) -> None:
    """THUDM/GLM-4-32B-0414 was published with 61 layers and 2 KV heads (32.57B parameters); slime's glm4-32B.sh
    has 64 and 8. The entry keeps the published values and names the difference."""
    glm = CATALOG["glm4-32B"]
    assert (glm.hf_fields["num_hidden_layers"], glm.hf_fields["num_key_value_heads"]) == (61, 2)
    script = slime_args["glm4-32B"]
    assert script[script.index("--num-layers") + 1] == "64" and script[script.index("--num-query-groups") + 1] == "8"
    why = dict(glm.slime_differences)
    assert "64" in why["--num-layers"] and "61" in why["--num-layers"]
    assert "8" in why["--num-query-groups"] and "2" in why["--num-query-groups"]
