"""[sglang.models] (issue 14): slime's --sglang-config in the spec. The bundle writes sglang_config.yaml in the layout
slime's SglangConfig.from_yaml reads and train.sh (and the RayJob) passes it; the ACRL-G rules refuse what slime
asserts; the placement model lays out each server group's engines (ranks and GPU offsets run on over the groups,
addresses by rank within a group: slime/ray/rollout.py start_rollout_servers at 624b824), so ACRL-C003 sees an
engine of a later group given another node's address. When ACRL_SLIME_DIR names slime's git directory, slime's own
sglang_config.py reads the bundle's file."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_train_sh import Toolbox, compile_into, run_train_sh, toolbox

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._pipeline import placement, placement_spec
from acrl.compiler._pipeline.key_positions import scan_positions
from acrl.compiler._review.explain import explain_path
from acrl.compiler._review.layout_format import format_text
from acrl.compiler._review.layout_read import layout_path
from conftest import SLIME_HEAD, SpecWriter

__all__ = ["toolbox"]  # the fixture, shared with test_train_sh

SLIME = {"experiment": {"integration": "slime"}, "agentcore": None}
PD = """
[cluster]
colocate = false
actor_num_gpus_per_node = 4
rollout_num_gpus = 4

[rollout]
gpus_per_engine = 2

[sglang.models.default]

[[sglang.models.default.server_groups]]
worker_type = "prefill"
num_gpus = 2

[[sglang.models.default.server_groups]]
worker_type = "decode"
num_gpus = 2
num_gpus_per_engine = 1

[sglang.models.default.server_groups.overrides]
max_running_requests = 128
enable_dp_attention = true
"""


def spec_text(tail: str, *, integration: str = "slime") -> str:
    return f"""[experiment]
id = "pd-run"
integration = "{integration}"

[model]
type = "qwen2.5-3B"
dir = "/models/Qwen2.5-3B-Instruct"

[data]
path = "/data/train.jsonl"
{tail}"""


# The lines of PD's keys in spec_text(PD): the text before it is 10 lines.
def refused(write_spec: SpecWriter, text: str) -> dict[str, Any]:
    """rule id -> (line, key path) of each error and warning of compiling ``text``."""
    try:
        bundle = compile_spec(write_spec(text=text), display_name="spec.toml")
    except SpecError as exc:
        diagnostics = exc.diagnostics
    else:
        diagnostics = list(bundle.warnings)
    return {d.rule: d.line for d in diagnostics if d.rule}


def test_the_bundle_writes_slimes_layout_and_passes_it(write_spec: SpecWriter, tmp_path: Path,
                                                       toolbox: Toolbox) -> None:
    compile_into(write_spec(text=spec_text(PD)), tmp_path / "b")
    data = yaml.safe_load((tmp_path / "b" / "sglang_config.yaml").read_text(encoding="utf-8"))
    assert data == {"sglang": [{"name": "default", "server_groups": [
        {"worker_type": "prefill", "num_gpus": 2},
        {"worker_type": "decode", "num_gpus": 2, "num_gpus_per_engine": 1,
         "overrides": {"max_running_requests": 128, "enable_dp_attention": True}}]}]}
    run = run_train_sh(tmp_path / "b" / "train.sh", toolbox, tmp_path / "w", {})
    assert run.returncode == 0, run.stderr
    at = run.slime_argv.index("--sglang-config")
    assert run.slime_argv[at + 1] == "sglang_config.yaml"  # relative: the job's working_dir is the bundle
    # the manifest holds the file's hash: a modified sglang_config.yaml is detected
    verify = [sys.executable, "-m", "acrl.runtime._cli", "verify", str(tmp_path / "b")]
    assert subprocess.run(verify, capture_output=True, check=False).returncode == 0
    (tmp_path / "b" / "sglang_config.yaml").write_text("sglang: []\n", encoding="utf-8")
    assert subprocess.run(verify, capture_output=True, check=False).returncode != 0


def test_no_models_no_file_no_flag(write_spec: SpecWriter) -> None:
    bundle = compile_spec(write_spec(text=spec_text("\n[cluster]\ncolocate = true\n")), display_name="spec.toml")
    assert "sglang_config.yaml" not in bundle.files
    assert b"--sglang-config" not in bundle.files["train.sh"]
    assert b"sglang.models" not in bundle.files["spec.toml"]  # the key is written to spec.toml only when set


def test_the_rayjob_mounts_and_passes_it(write_spec: SpecWriter) -> None:
    text = spec_text(PD) + ('\n[kuberay]\nimage = "registry.example/slime:v1"\nimage_paths = ["/models", "/data"]\n')
    bundle = compile_spec(write_spec(text=text), target="kuberay", display_name="spec.toml")
    config_map, rayjob = yaml.safe_load_all(bundle.files["rayjob.yaml"])
    assert set(config_map["data"]) == {"sglang_config.yaml"}  # integration "slime": no custom config
    assert yaml.safe_load(config_map["data"]["sglang_config.yaml"]) == \
        yaml.safe_load(bundle.files["sglang_config.yaml"])
    words = shlex.split(rayjob["spec"]["entrypoint"])
    assert words[words.index("--sglang-config") + 1] == "/acrl/config/sglang_config.yaml"


def test_explain_says_where_the_flag_comes_from(write_spec: SpecWriter) -> None:
    items = {item.name: item for item in explain_path(write_spec(text=spec_text(PD))).flags}
    assert items["--sglang-config"].value == ("sglang_config.yaml",)
    assert "sglang.models" in items["--sglang-config"].related


@pytest.mark.parametrize(("tail", "rule", "line"), [
    # the groups hold 4 GPUs, the rollout 6 (rollout.py:1136)
    (PD.replace("rollout_num_gpus = 4", "rollout_num_gpus = 6"), "ACRL-G001", 15),
    (PD + '\n[extra.flags]\n"--prefill-num-servers" = 1\n', "ACRL-G002", 36),
    (PD + 'model_path = "/models/other"\n', "ACRL-G003", 34),
    (PD.replace("num_gpus = 2\n\n[[", "num_gpus = 1\nnum_gpus_per_engine = 2\n\n[[", 1)
     .replace("rollout_num_gpus = 4", "rollout_num_gpus = 3"), "ACRL-G004", 24),
    (PD.replace("num_gpus = 2\n\n[[", "num_gpus = 3\n\n[[", 1).replace("rollout_num_gpus = 4", "rollout_num_gpus = 5")
     .replace("actor_num_gpus_per_node = 4", "actor_num_gpus_per_node = 3"), "ACRL-G005", 24),
    (PD + "port = 30000\n", "ACRL-G006", 34),
    (PD.replace('worker_type = "decode"', 'worker_type = "regular"'), "ACRL-G007", 20),
    # the decode group's dp_size 2 with DP attention does not divide its engines' tensor size 1
    (PD + "dp_size = 2\n", "ACRL-C005", None),
])
def test_each_rule_fires_where_the_spec_says_it(write_spec: SpecWriter, tail: str, rule: str, line: int | None) -> None:
    found = refused(write_spec, spec_text(tail))
    assert rule in found, found
    if line is not None:
        assert found[rule] == line


def test_a_valid_pd_spec_has_no_group_findings(write_spec: SpecWriter) -> None:
    assert not {r for r in refused(write_spec, spec_text(PD)) if r.startswith(("ACRL-G", "ACRL-C", "ACRL-P"))}


def test_a_later_group_mid_node_gets_another_nodes_address(write_spec: SpecWriter) -> None:
    """prefill 4 GPUs then decode 12 GPUs, engines of 4, on two nodes of 8: the decode group's ranks count from its
    own first engine (rollout.py:848-850), so its second engine, on node 1, is given node 0's address."""
    tail = """
[cluster]
colocate = true
num_nodes = 2

[rollout]
gpus_per_engine = 4

[sglang.models.default]

[[sglang.models.default.server_groups]]
worker_type = "prefill"
num_gpus = 4

[[sglang.models.default.server_groups]]
worker_type = "decode"
num_gpus = 12
"""
    assert "ACRL-C003" in refused(write_spec, spec_text(tail))
    assert "ACRL-C003" not in refused(write_spec, spec_text(tail.replace("num_gpus = 4\n", "num_gpus = 8\n")
                                                         .replace("num_gpus = 12", "num_gpus = 8")))


def test_placeholders_advance_ranks_and_gpus_without_engines() -> None:
    groups = (placement.GroupShape("placeholder", 2, 2), placement.GroupShape("regular", 4, 2))
    args = placement.LayoutArgs(actor_num_nodes=1, actor_num_gpus_per_node=2, rollout_num_gpus=6,
                                rollout_num_gpus_per_engine=2, server_groups=groups)
    slots = placement.engine_slots(args, rollout_offset=2)
    assert [(s.rank, s.gpu_index, s.group) for s in slots] == [(1, 4, 1), (2, 6, 1)]
    p = placement.place(args, nodes=1, local_head=True)
    assert [(e.index, e.group, e.gpus[0].gpu) for e in p.engines] == [(0, 1, 4), (1, 1, 6)]


def test_encoder_groups_start_first(write_spec: SpecWriter) -> None:
    """A model with an encoder group starts its encoder groups first (EPD phase 1, rollout.py 624b824 L1075-1086),
    so they take the first GPUs and engine ranks; its other groups follow in their order (L1092-1105)."""
    tail = PD.replace("rollout_num_gpus = 4", "rollout_num_gpus = 6").replace(
        "actor_num_gpus_per_node = 4", "actor_num_gpus_per_node = 2") + \
        '\n[[sglang.models.default.server_groups]]\nworker_type = "encoder"\nnum_gpus = 2\n'
    bundle = compile_spec(write_spec(text=spec_text(tail)), display_name="spec.toml")
    groups = placement_spec.server_groups(bundle.spec)
    assert [(g.worker_type, g.num_gpus_per_engine) for g in groups] == [("encoder", 2), ("prefill", 2), ("decode", 1)]
    p = placement_spec.read(bundle.spec).placement
    assert [(e.group, e.gpus[0].gpu) for e in p.engines] == [(0, 2), (1, 4), (2, 6), (2, 7)]


def test_a_header_after_an_array_of_tables_is_inside_its_last_table() -> None:
    positions = scan_positions(PD)
    assert positions[("sglang", "models", "default", "server_groups", 1, "overrides")][0] == 21
    assert positions[("sglang", "models", "default", "server_groups", 1, "overrides", "max_running_requests")][0] == 22


@pytest.mark.upstream("ACRL_SLIME_DIR")
def test_slimes_own_reader_takes_the_bundles_file(write_spec: SpecWriter, tmp_path: Path) -> None:
    source = subprocess.run(["git", "-C", os.environ["ACRL_SLIME_DIR"], "show",
                             f"{SLIME_HEAD}:slime/backends/sglang_utils/sglang_config.py"],
                            capture_output=True, text=True, check=True).stdout
    module = types.ModuleType("sglang_config")
    sys.modules["sglang_config"] = module  # dataclasses looks the module up
    try:
        exec(compile(source, "sglang_config.py", "exec"), module.__dict__)
        compile_into(write_spec(text=spec_text(PD)), tmp_path / "b")
        config = module.SglangConfig.from_yaml(str(tmp_path / "b" / "sglang_config.yaml"))
        args = types.SimpleNamespace(rollout_num_gpus_per_engine=2, hf_checkpoint="/models/Qwen2.5-3B-Instruct")
        for model in config.models:
            model.resolve(args)
    finally:
        del sys.modules["sglang_config"]
    assert config.total_num_gpus == 4 and config.has_pd_disaggregation
    (model,) = config.models
    assert model.update_weights is True
    assert [(g.worker_type, g.num_gpus, g.num_gpus_per_engine) for g in model.server_groups] == \
        [("prefill", 2, 2), ("decode", 2, 1)]


def test_layout_has_a_line_per_server_group(write_spec: SpecWriter) -> None:
    text = format_text(layout_path(write_spec(text=spec_text(PD)))[0])
    lines = [line for line in text.splitlines() if line.startswith("rollout:")]
    assert lines == ["rollout: model 'default' prefill group: 1 engine of 2 GPUs (SGLang tp 2, pp 1, dp 1), engine 0",
                     "rollout: model 'default' decode group: 2 engines of 1 GPU (SGLang tp 1, pp 1, dp 1), "
                     "engines 1-2"]


def test_diff_names_the_rollout_of_each_group(write_spec: SpecWriter, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    from acrl.compiler._cli.main import acrl_main

    compile_into(write_spec(text=spec_text(PD), name="a.toml"), tmp_path / "a")
    compile_into(write_spec(text=spec_text(PD.replace("num_gpus_per_engine = 1", "num_gpus_per_engine = 2")),
                            name="b.toml"), tmp_path / "b")
    acrl_main(["diff", str(tmp_path / "a"), str(tmp_path / "b")])
    out = capsys.readouterr().out
    assert ("~ rollout: default prefill: 1 engine x 2 GPUs (SGLang tp 2, pp 1, dp 1); default decode: 2 engines x "
            "1 GPUs (SGLang tp 1, pp 1, dp 1) -> default prefill: 1 engine x 2 GPUs (SGLang tp 2, pp 1, dp 1); "
            "default decode: 1 engine x 2 GPUs (SGLang tp 2, pp 1, dp 1)") in out
    assert "  ~ sglang_config.yaml: sha256:" in out  # the file, in the bundle files
