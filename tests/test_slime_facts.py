"""The slime facts in tests/data/slime are what acrl.compiler._slime.model_facts generates from slime's code.

Without a slime checkout: each folder's files carry their provenance, name the commit of their folder, and the
generator's two readers (sourcing scripts/models/*.sh, reading _hf_validate_args) work on small inputs. With one
(ACRL_SLIME_DIR: a slime work tree or git directory holding both commits), regenerating gives the same bytes.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from acrl.compiler._slime import model_facts
from conftest import SLIME_DATA, SLIME_HEAD, SLIME_PIN

FOLDERS = sorted(p.name for p in SLIME_DATA.iterdir() if p.is_dir())
FILES = ("model_args.json", "hf_checks.json", "placement_layout.json", "engine_layout.json")
FACTS = {"model_args.json": "scripts", "hf_checks.json": "pairs", "placement_layout.json": "layouts",
         "engine_layout.json": "layouts"}
GENERATOR = "python -m acrl.compiler._slime.model_facts"


def recorded_argv(provenance: dict[str, str]) -> list[str]:
    words = shlex.split(provenance["generator"])
    assert " ".join(words[:3]) == GENERATOR
    return words[3:]


def test_the_folders_are_the_commits_acrl_targets() -> None:
    assert sorted([SLIME_HEAD, SLIME_PIN]) == FOLDERS


@pytest.mark.parametrize("commit", FOLDERS)
@pytest.mark.parametrize("name", FILES)
def test_provenance_names_the_folders_commit(commit: str, name: str) -> None:
    data = json.loads((SLIME_DATA / commit / name).read_text(encoding="utf-8"))
    provenance = data["provenance"]
    assert provenance["commit"] == commit
    assert provenance["repository"] == model_facts.SLIME_URL
    assert provenance["commit_date"][:4].isdigit() and "T" in provenance["commit_date"]
    argv = recorded_argv(provenance)
    assert argv[0] == "SLIME_DIR"  # no path of the machine that generated it
    assert argv[argv.index("--commit") + 1] == commit and argv[argv.index("-o") + 1] == f"tests/data/slime/{commit}"
    assert data[FACTS[name]]


def test_model_args_sources_each_script_the_way_the_compiler_does(tmp_path: Path) -> None:
    models = tmp_path / "scripts" / "models"
    models.mkdir(parents=True)
    # A knob read from the environment (unset: the default) and an unquoted glob (not expanded: empty cwd).
    (models / "tiny.sh").write_text('MODEL_ARGS=(--num-layers "${NL:-4}" --moe-layer-freq [0]*1+[1]*3)\n')
    (models / "a-b.sh").write_text("MODEL_ARGS=(--swiglu)\n")
    (models / "notes.txt").write_text("MODEL_ARGS=(--ignored)\n")
    assert model_facts.model_args(models) == {
        "a-b": ["--swiglu"], "tiny": ["--num-layers", "4", "--moe-layer-freq", "[0]*1+[1]*3"]}
    (models / "broken.sh").write_text("exit 3\n")
    with pytest.raises(model_facts.FactsError, match=r"broken\.sh"):
        model_facts.model_args(models)


VALIDATOR = '''
def _hf_validate_args(args, hf_config):
    rope_params = getattr(hf_config, "rope_parameters", None)
    if isinstance(rope_params, dict) and "rope_theta" in rope_params:
        _theta = rope_params["rope_theta"]
    else:
        _theta = getattr(hf_config, "rope_theta", None)
    for hf_name, megatron_name, compare_fn in [
        ("hidden_size", "hidden_size", equal),
        ("num_hidden_layers", "num_layers", equal),
    ]:
        pass
    if _theta is not None:
        check(_theta, getattr(args, "rotary_base", None))
'''


def test_hf_checks_reads_the_loop_and_the_separate_check() -> None:
    pairs = [(p["hf"], p["megatron"], p["line"]) for p in model_facts.hf_checks(VALIDATOR)]
    assert pairs == [("hidden_size", "hidden_size", 9), ("num_hidden_layers", "num_layers", 10),
                     ("rope_theta", "rotary_base", 13)]


def test_placement_layouts_runs_the_one_function_alone() -> None:
    source = ("import ray\n\ndef _get_placement_group_layout(args) -> tuple[int, int]:\n"
              "    return args.actor_num_nodes * args.actor_num_gpus_per_node, 1 if args.colocate else 0\n")
    rows = model_facts.placement_layouts(source)
    assert len(rows) == 2 * 2 * 4 * 2**4  # nodes x GPUs a node x rollout GPUs x the four flags
    assert {(r["args"]["actor_num_nodes"] * r["args"]["actor_num_gpus_per_node"], r["args"]["colocate"])
            for r in rows} == {(n, c) for n in (4, 8, 16) for c in (False, True)}
    assert all(r["num_gpus"] == r["args"]["actor_num_nodes"] * r["args"]["actor_num_gpus_per_node"]
               and r["rollout_offset"] == int(r["args"]["colocate"]) for r in rows)
    with pytest.raises(model_facts.FactsError, match="_get_placement_group_layout"):
        model_facts.placement_layouts("def other(args):\n    pass\n")


ROLLOUT = """
import ray

class ServerGroup:
    def start_engines(self, port_cursors=None):
        if self.args.debug_train_only:
            return [], port_cursors
        per = min(self.num_gpus_per_engine, self.args.num_gpus_per_node)
        _, bundles, gpu_ids = self.pg
        validate_server_group_gpu_indices(n=len(self.all_engines) * per, available=len(gpu_ids))
        engines = []
        for i in range(len(self.all_engines)):
            strategy = PlacementGroupSchedulingStrategy(placement_group_bundle_index=bundles[i * per])
            engine = ray.remote(SGLangEngine).options(scheduling_strategy=strategy).remote(
                self.args, rank=i, base_gpu_id=gpu_ids[i * per])
            engines.append((i, engine))
        if not engines:
            return [], port_cursors
        ports, cursors = _allocate_rollout_engine_addr_and_ports_normal(args=self.args, rollout_engines=engines)
        return [engine.init.remote(**ports[rank]) for rank, engine in engines], cursors

def _allocate_rollout_engine_addr_and_ports_normal(*, args, rollout_engines):
    host = ray.get(rollout_engines[0][1]._get_current_node_ip_and_free_port.remote())[0]
    return {rank: {"host": host, "dist_init_addr": host + ":1"} for rank, _ in rollout_engines}, {}

def start_rollout_servers(args, pg):
    def _make_group(group_cfg):
        nonlocal pg
        per = min(group_cfg.num_gpus_per_engine, args.num_gpus_per_node)
        num_engines = group_cfg.num_gpus // per
        return num_engines
"""
VALIDATION = """
def validate_server_group_gpu_indices(*, n: int, available: int) -> None:
    if n > available:
        raise ValueError("Invalid placement: too many")
"""


def test_engine_layouts_run_slimes_engine_code_with_a_stand_in_for_ray() -> None:
    from acrl.compiler._slime import engine_facts  # lazy: only this test reads the engine harness directly

    rows = engine_facts.engine_layouts(ROLLOUT, VALIDATION)
    assert len(rows) == 708
    row = next(r for r in rows if r["args"] == {"nodes": 2, "gpus_per_node": 4, "rollout_offset": 4,
                                                "rollout_num_gpus": 4, "gpus_per_engine": 2,
                                                "num_gpus_per_node_passed": True})
    # two engines from slot 4 (node 1); this toy allocation gives every engine the first one's node
    assert row == {"args": row["args"], "num_engines": 2, "error": None,
                   "engines": [[0, 0, 4, 0, 1, 1], [1, 2, 6, 2, 1, 1]]}
    with pytest.raises(engine_facts.EngineFactsError, match="_make_group"):
        engine_facts.engine_layouts(ROLLOUT.replace("_make_group", "_other"), VALIDATION)
    with pytest.raises(engine_facts.EngineFactsError, match=r"args\.sglang_pp_size"):
        engine_facts.engine_layouts(ROLLOUT.replace("args.debug_train_only", "args.sglang_pp_size"), None)


@pytest.mark.parametrize("source", ["def other(args, hf_config):\n    pass\n",
                                    "def _hf_validate_args(args, hf_config):\n    pass\n"])
def test_hf_checks_refuses_a_validator_it_cannot_read(source: str) -> None:
    with pytest.raises(model_facts.FactsError, match="_hf_validate_args"):
        model_facts.hf_checks(source)


def test_generator_refuses_a_directory_that_is_not_a_checkout(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    assert model_facts.main([str(tmp_path), "-o", str(tmp_path / "out")]) == 1
    assert str(tmp_path) in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


SLIME_DIR = os.environ.get("ACRL_SLIME_DIR")


@pytest.mark.skipif(not SLIME_DIR, reason="set ACRL_SLIME_DIR to a slime checkout or git directory to regenerate")
@pytest.mark.parametrize("commit", FOLDERS)
def test_regenerating_gives_the_same_bytes(commit: str, tmp_path: Path) -> None:
    assert SLIME_DIR
    argv = recorded_argv(json.loads((SLIME_DATA / commit / "model_args.json").read_text())["provenance"])
    written = model_facts.generate(Path(SLIME_DIR), commit, tmp_path, argv)
    assert [p.name for p in written] == list(FILES)
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (SLIME_DATA / commit / name).read_bytes(), name


def test_the_generator_runs_as_a_module() -> None:
    proc = subprocess.run([sys.executable, "-m", "acrl.compiler._slime.model_facts", "--help"], capture_output=True,
                          text=True, check=False)
    assert proc.returncode == 0 and "SLIME_DIR" in proc.stdout
