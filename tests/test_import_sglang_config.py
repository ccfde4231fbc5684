"""`acrl import train-sh` and slime's --sglang-config written by a here-document (the shape of slime 624b824's
scripts/run-glm5.2-744B-A40B.sh: ``F=$(mktemp ...)``, ``cat > "$F" <<CFG ... CFG``, ``--sglang-config "$F"``): the
YAML becomes [sglang.models] (slime's reading: slime/backends/sglang_utils/sglang_config.py:158-180), what the spec
cannot hold leaves the flag unmapped with a note naming the line, a file the script does not write is never read.
Also the lexer's redirections and here-document bodies it rests on, and the fidelity harness's comparison of the two
launches' --sglang-config files by their YAML. Every script here is written for these tests (none is slime's)."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import pytest
from launch_compare import ALLOWED, Launch, compare

from acrl.compiler import compile_spec
from acrl.compiler._importers.base import Imported, render_spec
from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler._importers.train_sh_files import as_double_quoted
from acrl.compiler._importers.train_sh_launch import HEREDOC_NOTE
from acrl.compiler._shell.lexer import lex, lex_loose

# 1 node of 8 GPUs, colocated: the rollout has 8 GPUs, which every config below adds up to.
SCRIPT = """#!/bin/bash
set -ex
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
source "${SCRIPT_DIR}/models/qwen3-4B.sh"
PREFILL_GPUS=4
MODEL_DIR=/root/Qwen3-4B

SGLANG_CONFIG_FILE=$(mktemp /tmp/sglang_fixture_XXXXXX.yaml)
# the PD split
WRITE
ARGS=(
   --hf-checkpoint /root/Qwen3-4B
   --ref-load /root/Qwen3-4B_torch_dist
   --prompt-data /root/dapo-math-17k.jsonl
   --input-key prompt
   --num-rollout 100
   --rollout-batch-size 32
   --n-samples-per-prompt 8
   --global-batch-size 256
   --rollout-num-gpus-per-engine 2
   --sglang-config FLAG_VALUE
)
ray start --head --node-ip-address 127.0.0.1 --num-gpus 8 --disable-usage-stats
ray job submit --address="http://127.0.0.1:8265" \\
   --runtime-env-json='{"env_vars": {"PYTHONPATH": "/root/Megatron-LM/"}}' \\
   -- python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate \\
   ${MODEL_ARGS[@]} ${ARGS[@]}
"""
PD = """sglang:
  - name: default
    server_groups:
      - worker_type: prefill
        num_gpus: ${PREFILL_GPUS}
        num_gpus_per_engine: 2
        overrides:
          dp_size: 2
          enable_dp_attention: true
          load_balance_method: follow_bootstrap_room
      - worker_type: decode
        num_gpus: 4
        overrides:
          cuda_graph_max_bs: 12
          mem_fraction_static: 0.7
"""
PD_MODELS = {"default": {"server_groups": [
    {"worker_type": "prefill", "num_gpus": 4, "num_gpus_per_engine": 2,
     "overrides": {"dp_size": 2, "enable_dp_attention": True, "load_balance_method": "follow_bootstrap_room"}},
    {"worker_type": "decode", "num_gpus": 4, "overrides": {"cuda_graph_max_bs": 12, "mem_fraction_static": 0.7}}]}}


def script(tmp_path: Path, write: str, *, flag: str = '"${SGLANG_CONFIG_FILE}"', name: str = "run.sh") -> Path:
    path = tmp_path / name
    path.write_text(SCRIPT.replace("WRITE", write).replace("FLAG_VALUE", flag), encoding="utf-8")
    return path


def cat(body: str, opener: str = 'cat > "${SGLANG_CONFIG_FILE}" <<CFG', close: str = "CFG") -> str:
    return f"{opener}\n{body}{close}\n"


def line_of(path: Path, needle: str) -> int:
    return next(n for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if needle in line)


def notes_at(imported: Imported, path: Path, line: int) -> list[tuple[str, str]]:
    return [(n.kind, n.message) for n in imported.notes if n.where == f"{path}:{line}"]


def kinds_at(imported: Imported, path: Path, line: int) -> list[str]:
    return [kind for kind, _ in notes_at(imported, path, line)]


def models(imported: Imported) -> Any:
    return imported.spec.get("sglang", {}).get("models")


def compiles(tmp_path: Path, imported: Imported) -> dict[str, Any]:
    """The imported spec compiles as written; its data as the TOML file holds it."""
    text = render_spec(imported)
    compile_spec(tmp_path / "spec.toml", data=text.encode("utf-8"))
    return tomllib.loads(text)


def test_the_glm52_shape_maps_to_sglang_models_and_compiles(tmp_path: Path) -> None:
    path = script(tmp_path, cat(PD))
    imported = import_train_sh(path)
    assert models(imported) == PD_MODELS  # ${PREFILL_GPUS} expanded, as bash does in an unquoted here-document
    flag, heredoc = line_of(path, "--sglang-config"), line_of(path, "<<CFG")
    assert kinds_at(imported, path, flag) == ["difference"]  # now the bundle's sglang_config.yaml
    assert "sglang_config.yaml" in notes_at(imported, path, flag)[0][1]
    assert kinds_at(imported, path, heredoc) == []  # read: not the "importer does not read it" note
    assert "flags" not in imported.spec.get("extra", {}) or "--sglang-config" not in imported.spec["extra"]["flags"]
    written = compiles(tmp_path, imported)
    assert written["sglang"]["models"] == PD_MODELS  # the TOML writer's arrays of tables inside a named table
    assert "[[sglang.models.default.server_groups]]" in render_spec(imported)


@pytest.mark.parametrize("write", [
    cat(PD, "cat <<CFG > \"${SGLANG_CONFIG_FILE}\""),
    cat(PD, "tee \"${SGLANG_CONFIG_FILE}\" >/dev/null <<CFG"),
    cat(PD, "cat <<CFG | tee \"${SGLANG_CONFIG_FILE}\""),
    cat("".join(f"\t{line}\n" for line in PD.splitlines()), "cat <<-CFG >${SGLANG_CONFIG_FILE}", "\tCFG"),
])
def test_the_ways_of_writing_the_file(tmp_path: Path, write: str) -> None:
    imported = import_train_sh(script(tmp_path, write))
    assert models(imported) == PD_MODELS


def test_a_quoted_tag_keeps_the_body_as_written(tmp_path: Path) -> None:
    body = PD.replace("${PREFILL_GPUS}", "4").replace("  - name: default\n", "  - name: default\n    model_path: "
                                                                               "$MODEL_DIR\n")
    imported = import_train_sh(script(tmp_path, cat(body, "cat > \"${SGLANG_CONFIG_FILE}\" <<'CFG'")))
    assert models(imported)["default"]["model_path"] == "$MODEL_DIR"
    unquoted = import_train_sh(script(tmp_path, cat(body), name="unquoted.sh"))
    assert models(unquoted)["default"]["model_path"] == "/root/Qwen3-4B"


def test_legacy_engine_groups_become_server_groups_with_a_note(tmp_path: Path) -> None:
    path = script(tmp_path, cat(PD.replace("server_groups:", "engine_groups:")))
    imported = import_train_sh(path)
    assert models(imported) == PD_MODELS
    assert kinds_at(imported, path, line_of(path, "engine_groups:")) == ["difference"]
    compiles(tmp_path, imported)


def test_two_models_keep_their_order_and_compile(tmp_path: Path) -> None:
    body = PD.replace("num_gpus: 4\n", "num_gpus: 2\n") + """  - name: ref
    model_path: /root/Qwen3-4B-ref
    update_weights: false
    server_groups:
      - worker_type: regular
        num_gpus: 2
"""
    imported = import_train_sh(script(tmp_path, cat(body)))
    found = models(imported)
    assert list(found) == ["default", "ref"]
    assert found["ref"] == {"model_path": "/root/Qwen3-4B-ref", "update_weights": False,
                            "server_groups": [{"worker_type": "regular", "num_gpus": 2}]}
    assert list(compiles(tmp_path, imported)["sglang"]["models"]) == ["default", "ref"]


@pytest.mark.parametrize(("body", "needle"), [
    (PD.replace("dp_size: 2", "dp_size: 2: 3"), "dp_size: 2: 3"),  # not YAML: the line of PyYAML's mark
    (PD.replace("dp_size: 2", "dp_size: {attn: 2}"), "dp_size:"),  # a non-scalar override
    (PD.replace("cuda_graph_max_bs: 12", "cuda_graph_max_bs: null"), "cuda_graph_max_bs"),  # null: no spec value
    (PD.replace("  - name: default", "  - name: 7"), "name: 7"),  # a name that is not a string
    (PD.replace("        num_gpus: 4", "        gpus: 4"), "gpus: 4"),  # ServerGroupConfig has no such field
    (PD.replace("  - name: default\n", "  - name: default\n    router: x\n"), "router: x"),  # ModelConfig has none
    (PD.replace("worker_type: decode", "worker_type: decoder"), "decoder"),
    (PD.replace("num_gpus: 4", "num_gpus: 0"), "num_gpus: 0"),
    (PD + "  - server_groups: []\n    name: default\n", "    name: default"),  # two models of one name
    ("prefill:\n  moe_a2a_backend: deepep\n", "<<CFG"),  # no `sglang:`: the here-document's line
])
def test_what_the_spec_cannot_hold_leaves_the_flag_unmapped(tmp_path: Path, body: str, needle: str) -> None:
    path = script(tmp_path, cat(body))
    imported = import_train_sh(path)
    assert models(imported) is None
    line = line_of(path, needle)
    found = notes_at(imported, path, line)
    assert [kind for kind, _ in found] == ["difference"], imported.notes
    assert "--sglang-config" in found[0][1] and f"line {line_of(path, '--sglang-config')}" in found[0][1]
    assert kinds_at(imported, path, line_of(path, "--sglang-config")) == []  # one note, at the cause
    assert HEREDOC_NOTE not in [m for _, m in notes_at(imported, path, line_of(path, "<<CFG"))]
    compiles(tmp_path, imported)  # the rest of the spec still compiles


def test_a_file_the_script_does_not_write_is_not_read(tmp_path: Path) -> None:
    cluster_file = tmp_path / "on-the-cluster.yaml"
    cluster_file.write_text(PD.replace("${PREFILL_GPUS}", "4"), encoding="utf-8")
    path = script(tmp_path, cat(PD), flag=str(cluster_file))
    imported = import_train_sh(path)
    assert models(imported) is None
    assert kinds_at(imported, path, line_of(path, "--sglang-config")) == ["unresolved"]
    assert kinds_at(imported, path, line_of(path, "<<CFG")) == ["difference"]  # another here-document: as before
    assert HEREDOC_NOTE in notes_at(imported, path, line_of(path, "<<CFG"))[0][1]


def test_an_unresolved_body_or_a_secret_in_it_is_not_imported(tmp_path: Path) -> None:
    path = script(tmp_path, cat(PD.replace("dp_size: 2", "dp_size: ${UNSET_DP}")))
    imported = import_train_sh(path)
    assert models(imported) is None
    assert kinds_at(imported, path, line_of(path, "<<CFG") + 1) == ["difference"]
    secret = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
    path = script(tmp_path, cat(PD.replace("load_balance_method: follow_bootstrap_room", "api_key: ${OPENAI_API_KEY}")),
                  name="secret.sh")
    imported = import_train_sh(path, env=[f"OPENAI_API_KEY={secret}"])
    assert models(imported) is None and secret not in render_spec(imported)


def test_an_appended_file_is_not_imported(tmp_path: Path) -> None:
    path = script(tmp_path, cat(PD) + cat("", 'cat >> "${SGLANG_CONFIG_FILE}" <<EXTRA', "EXTRA"))
    imported = import_train_sh(path)
    assert models(imported) is None
    assert kinds_at(imported, path, line_of(path, "<<EXTRA")) == ["difference"]


def test_the_lexer_keeps_redirections_and_here_document_bodies() -> None:
    first, second, third = lex("cat > \"$F\" <<CFG 2>&1\na: $X\nCFG\ncat <<-'T' | tee -a out\n\tb\n\tT\n")
    assert [(r.op, r.target.raw, r.body, r.body_line) for r in first.redirects] == [
        (">", '"$F"', "", 0), ("<<", "CFG", "a: $X\n", 2)]
    assert [(r.op, r.body, r.body_line) for r in second.redirects] == [("<<-", "b\n", 5)]  # tabs removed
    assert (second.piped, third.piped, [w.text for w in third.words]) == (False, True, ["tee", "-a", "out"])
    (only,) = lex("a &>all >|clob; b")[:1]
    assert [(r.op, r.target.text) for r in only.redirects] == [("&>", "all"), (">", "clob")]


@pytest.mark.parametrize(("body", "expected"), [
    ('say "hi" \\"q\\" \\$x $y\n', 'say "hi" \\"q\\" $x Y\n'),  # a quote is literal; \" keeps its backslash
])
def test_a_body_reads_as_bash_expands_it(body: str, expected: str) -> None:
    word = lex_loose(as_double_quoted(body), 1)
    parts = "".join(p[1] if p[0] == "lit" else "Y" for p in word.parts)
    assert parts == expected


# --- the fidelity harness: the two --sglang-config files compared by their YAML --------------------------------

def launch(path: str, data: Any) -> Launch:
    submit = ("job", "submit", "--", "python3", "train.py", "--sglang-config", path)
    return Launch(submit=submit, sglang_config=None if data is None else (data,))


def test_the_harness_compares_the_files_yaml_not_their_paths() -> None:
    data = {"sglang": [{"name": "default", "server_groups": [{"worker_type": "regular", "num_gpus": 8}]}]}
    assert compare(launch("/tmp/x_AbC123.yaml", data), launch("sglang_config.yaml", data), {}) == []
    legacy = {"sglang": [{"name": "default", "engine_groups": [{"worker_type": "regular", "num_gpus": 8}]}]}
    (allowed,) = compare(launch("/tmp/x.yaml", legacy), launch("sglang_config.yaml", data), {})
    assert (allowed.category, allowed.subject) == (ALLOWED, "--sglang-config")
    other = {"sglang": [{"name": "default", "server_groups": [{"worker_type": "regular", "num_gpus": 8,
                                                               "overrides": {"dp_size": 2}}]}]}
    (mismatch,) = compare(launch("/tmp/x.yaml", data), launch("sglang_config.yaml", other), {})
    assert (mismatch.category, mismatch.subject, mismatch.original, mismatch.bundle) == (
        "sglang-config", "sglang[0].server_groups[0].overrides", None, {"dp_size": 2})
    (unread,) = compare(launch("/tmp/x.yaml", None), launch("sglang_config.yaml", data), {})
    assert (unread.category, unread.subject) == ("flag-value", "--sglang-config")  # a file not read: the paths
