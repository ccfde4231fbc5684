"""What the sglang of each slime commit acrl has facts for says (compiler/_slime/sglang/<slime commit>.json), and the
rules that read it at each commit: ACRL-F002/F006/F007 on escape-hatch --sglang-* flags, ACRL-G008 on server-group
overrides, and the flag [sglang] cuda_graph_max_bs is passed as.

The four commits run three sglang wheels, patched by slime per commit (docker/Dockerfile): v0.3.0 0.5.12.post1
(Dockerfile:1, sglang.patch at 106-115), fa3c990 0.5.13, v0.3.1 and 624b824 both 0.5.15.post1, where v0.3.1 applies
sglang.patch, -top_p, -release_hicache and -pull_weights (Dockerfile:106) and 624b824 adds sglang-deterministic.patch
(Dockerfile:140), the only one of them that touches server_args.py besides -release_hicache and -pull_weights.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from acrl.compiler import SpecError
from acrl.compiler._slime import sglang_stack
from acrl.compiler._slime.commit_facts import known_commits
from conftest import REPO, SLIME_HEAD, SLIME_PIN

V030, V031 = "bf14dc21f9500746447f2572d0692e981c4d2a7e", "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc"  # the tags
SGLANG = {V030: "0.5.12.post1", SLIME_PIN: "0.5.13", V031: "0.5.15.post1", SLIME_HEAD: "0.5.15.post1"}
FACTS_DIR = REPO / "compiler" / "_slime" / "sglang"


def provenance(commit: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FACTS_DIR / f"{commit}.json").read_text(encoding="utf-8"))["provenance"]
    return data


def facts(commit: str) -> sglang_stack.SglangFacts:
    found = sglang_stack.sglang_at(commit)
    assert found is not None, commit
    return found


def test_the_data_says_which_sglang_every_commit_with_flag_facts_runs() -> None:
    """Every commit with flag facts (compiler/_slime/commits/) has sglang facts, made at that commit from the sglang
    its Dockerfile pins (the flag facts' sglang_version): a commit's flag facts added without its sglang facts, or
    sglang facts of a commit without flag facts, fail here."""
    with_flags = {f.commit: f.sglang_version for f in known_commits()}
    assert sglang_stack.commits_with_facts() == sorted(with_flags)
    for commit, version in with_flags.items():
        assert (facts(commit).commit, facts(commit).version) == (commit, version)
        assert (provenance(commit)["slime"]["commit"], provenance(commit)["sglang_version"]) == (commit, version)
    assert {c: with_flags.get(c) for c in SGLANG} == SGLANG


def test_each_commits_facts_apply_that_commits_patches() -> None:
    """The patches of server_args.py differ between two commits of the same sglang, so each has its own file."""
    patches = {c: [p["path"].removeprefix("docker/patch/latest/") for p in provenance(c)["slime"]["patches"]]
               for c in SGLANG}
    assert patches == {V030: ["sglang.patch"], SLIME_PIN: ["sglang.patch"],
                       V031: ["sglang-release_hicache.patch", "sglang-pull_weights.patch"],
                       SLIME_HEAD: ["sglang-release_hicache.patch", "sglang-pull_weights.patch",
                                    "sglang-deterministic.patch"]}
    assert provenance(V031)["wheel_sha256"] == provenance(SLIME_HEAD)["wheel_sha256"]  # one wheel, two files


def test_a_flag_deprecated_at_one_sglang_and_not_another() -> None:
    """sglang 0.5.15.post1 keeps --cuda-graph-max-bs only as a deprecated alias of --cuda-graph-max-bs-decode;
    0.5.12.post1 and 0.5.13 have only --cuda-graph-max-bs (an add_argument of type int: line 6430 of v0.3.0's patched
    server_args.py, as its facts record). --enable-piecewise-cuda-graph does nothing but warn in
    0.5.12.post1 and 0.5.13 (DeprecatedAction) and is gone from 0.5.15.post1."""
    alias = "--sglang-cuda-graph-max-bs"
    assert {c: facts(c).deprecation(alias) for c in SGLANG} == {
        V030: None, SLIME_PIN: None, V031: ("--sglang-cuda-graph-max-bs-decode", ""),
        SLIME_HEAD: ("--sglang-cuda-graph-max-bs-decode", "")}
    assert [c for c in SGLANG if facts(c).known("--sglang-cuda-graph-max-bs-decode")] == [V031, SLIME_HEAD]
    assert {k: facts(V030).flags[alias].get(k) for k in ("options", "line", "type", "action")} == {
        "options": ["--cuda-graph-max-bs"], "line": 6430, "type": "int", "action": None}
    piecewise = {c: facts(c).deprecation("--sglang-enable-piecewise-cuda-graph") for c in SGLANG}
    assert [c for c, d in piecewise.items() if d is not None and d[0] is None] == [V030, SLIME_PIN]
    assert not facts(V031).known("--sglang-enable-piecewise-cuda-graph")


def test_flags_and_fields_that_one_commits_patches_add() -> None:
    """v0.3.0's and fa3c990's sglang.patch add --update-weight-delta-chunk-bytes; v0.3.0's also
    --disable-indexer-rope-neox-style (only there); v0.3.1's sglang-pull_weights.patch adds
    --custom-pull-weights-pre-read-hook; only 624b824's sglang-deterministic.patch adds --enable-fp32-moe-router."""
    def having(flag: str) -> list[str]:
        return [c for c in SGLANG if facts(c).known(flag)]

    assert having("--sglang-disable-indexer-rope-neox-style") == [V030]
    assert having("--sglang-update-weight-delta-chunk-bytes") == [V030, SLIME_PIN]
    assert having("--sglang-custom-pull-weights-pre-read-hook") == [V031, SLIME_HEAD]
    assert having("--sglang-enable-fp32-moe-router") == [SLIME_HEAD]
    assert [c for c in SGLANG if "enable_fp32_moe_router" in facts(c).fields] == [SLIME_HEAD]
    assert [c for c in SGLANG if "release_hicache" in facts(c).fields] == [V031, SLIME_HEAD]
    # the flags v0.3.1's and 624b824's facts differ by, and nothing else
    assert set(facts(SLIME_HEAD).flags) - set(facts(V031).flags) == {"--sglang-enable-fp32-moe-router"}
    assert not set(facts(V031).flags) - set(facts(SLIME_HEAD).flags)


@pytest.mark.parametrize(("commit", "flag"), [
    (V030, "--sglang-cuda-graph-max-bs"), (SLIME_PIN, "--sglang-cuda-graph-max-bs"),
    (V031, "--sglang-cuda-graph-max-bs-decode"), (SLIME_HEAD, "--sglang-cuda-graph-max-bs-decode"),
])
def test_cuda_graph_max_bs_is_passed_as_each_commits_sglang_names_it(commit: str, flag: str,
                                                                     compile_overrides) -> None:  # type: ignore[no-untyped-def]
    train_sh = compile_overrides({"slime": {"commit": commit}}).files["train.sh"].decode()
    assert f"  {flag} 32\n" in train_sh and train_sh.count("--sglang-cuda-graph-max-bs") == 1
    assert facts(commit).known(flag) and facts(commit).deprecation(flag) is None


# escape-hatch flags, each meaning something different at some commit
HATCH = {"--sglang-cuda-graph-max-bs-decode": 8, "--sglang-cuda-graph-max-bs": 8, "--sglang-stream-output": True,
         "--sglang-enable-piecewise-cuda-graph": True, "--sglang-disable-indexer-rope-neox-style": True,
         "--sglang-enable-fp32-moe-router": True, "--sglang-tp-size": 2}


def findings(compile_overrides, commit: str, spec: dict[str, Any]) -> list[tuple[str, str, str, str]]:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError) as info:
        compile_overrides({"slime": {"commit": commit}, **spec})
    return sorted((d.rule, d.severity, d.key.rsplit(".", 1)[1] if d.key.startswith("extra.") else d.key, d.hint)
                  for d in info.value.diagnostics)


def test_the_sglang_flag_rules_at_v030(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    """sglang 0.5.12.post1: --cuda-graph-max-bs is acrl's own flag there (F002), -decode does not exist (F007);
    --stream-output is deprecated for --incremental-streaming-output, --enable-piecewise-cuda-graph does nothing
    (F006); v0.3.0's patch flag is accepted, 624b824's is not (F007); 0.5.12.post1 lists --tensor-parallel-size
    before --tp-size, so slime's skip of tp_size misses it and --sglang-tp-size exists."""
    assert findings(compile_overrides, V030, {"extra": {"flags": HATCH}}) == [
        ("ACRL-F002", "error", "--sglang-cuda-graph-max-bs", "set [sglang] cuda_graph_max_bs = 8 instead"),
        ("ACRL-F006", "warning", "--sglang-enable-piecewise-cuda-graph", "remove it"),
        ("ACRL-F006", "warning", "--sglang-stream-output", "write --sglang-incremental-streaming-output instead"),
        ("ACRL-F007", "error", "--sglang-cuda-graph-max-bs-decode", "did you mean --sglang-cuda-graph-max-bs?"),
        ("ACRL-F007", "error", "--sglang-enable-fp32-moe-router", "did you mean --sglang-enable-fp32-lm-head?")]


def test_the_sglang_flag_rules_at_v031(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    """sglang 0.5.15.post1 with v0.3.1's patches: --cuda-graph-max-bs is a deprecated alias of the flag acrl passes
    (F002 and F006), --enable-piecewise-cuda-graph is gone, and so are v0.3.0's and 624b824's patch flags (F007);
    slime skips tp_size, now --tp-size's dest (F007, "remove it")."""
    assert findings(compile_overrides, V031, {"extra": {"flags": HATCH}}) == [
        ("ACRL-F002", "error", "--sglang-cuda-graph-max-bs", "set [sglang] cuda_graph_max_bs = 8 instead"),
        ("ACRL-F002", "error", "--sglang-cuda-graph-max-bs-decode", "set [sglang] cuda_graph_max_bs = 8 instead"),
        ("ACRL-F006", "warning", "--sglang-cuda-graph-max-bs", "write --sglang-cuda-graph-max-bs-decode instead"),
        ("ACRL-F006", "warning", "--sglang-stream-output", "write --sglang-incremental-streaming-output instead"),
        ("ACRL-F007", "error", "--sglang-disable-indexer-rope-neox-style",
         "check the flag against sglang 0.5.15.post1's server arguments (with the --sglang- prefix)"),
        ("ACRL-F007", "error", "--sglang-enable-fp32-moe-router", "did you mean --sglang-enable-fp32-lm-head?"),
        ("ACRL-F007", "error", "--sglang-enable-piecewise-cuda-graph",
         "did you mean --sglang-disable-piecewise-cuda-graph?"),
        ("ACRL-F007", "error", "--sglang-tp-size", "remove it")]
    # the one flag 624b824's patch adds is accepted there
    head = findings(compile_overrides, SLIME_HEAD, {"extra": {"flags": HATCH}})
    assert [f for f in head if f[2] == "--sglang-enable-fp32-moe-router"] == []


OVERRIDES = {"cuda_graph_max_bs": 16, "cuda_graph_max_bs_decode": 16, "release_hicache": True,
             "update_weight_delta_chunk_bytes": 1024, "enable_fp32_moe_router": True, "mem-fraction-static": 0.7}


@pytest.mark.parametrize(("commit", "not_fields"), [
    (V030, ["cuda_graph_max_bs_decode", "enable_fp32_moe_router", "release_hicache"]),
    (SLIME_PIN, ["cuda_graph_max_bs_decode", "enable_fp32_moe_router", "release_hicache"]),
    (V031, ["cuda_graph_max_bs", "enable_fp32_moe_router", "update_weight_delta_chunk_bytes"]),
    (SLIME_HEAD, ["cuda_graph_max_bs", "update_weight_delta_chunk_bytes"]),
])
def test_overrides_are_held_to_each_commits_server_args(commit: str, not_fields: list[str],
                                                        compile_overrides) -> None:  # type: ignore[no-untyped-def]
    group = {"worker_type": "regular", "num_gpus": 8, "overrides": OVERRIDES}
    got = findings(compile_overrides, commit, {"sglang": {"models": {"default": {"server_groups": [group]}}}})
    prefix = "sglang.models.default.server_groups.0.overrides."
    assert [(rule, key) for rule, _, key, _ in got] == [("ACRL-G008", prefix + k) for k in not_fields]
    hints = {key.removeprefix(prefix): hint for _, _, key, hint in got}
    if "cuda_graph_max_bs" in hints:
        assert hints["cuda_graph_max_bs"] == "did you mean cuda_graph_max_bs_decode?"
    else:
        assert hints["cuda_graph_max_bs_decode"] == "did you mean cuda_graph_max_bs?"
