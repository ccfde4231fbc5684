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
FILES = ("model_args.json", "hf_checks.json", "placement_layout.json", "engine_layout.json",
         "engine_groups_layout.json")
FACTS = {"model_args.json": "scripts", "hf_checks.json": "pairs", "placement_layout.json": "layouts",
         "engine_layout.json": "layouts", "engine_groups_layout.json": "layouts"}
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


GROUPS_ROLLOUT = """
import ray

@dataclasses.dataclass
class ServerGroup:
    args: Any
    pg: Any
    all_engines: list
    worker_type: str = "regular"
    rank_offset: int = 0
    gpu_offset: int = 0
    num_gpus_per_engine: int = 1
    router_port: int | None = None

    @property
    def engines(self):
        return self.all_engines

    def start_engines(self):
        _, bundles, gpu_ids = self.pg
        for i in range(len(self.all_engines)):
            strategy = PlacementGroupSchedulingStrategy(placement_group_bundle_index=bundles[self.gpu_offset + i])
            self.all_engines[i] = ray.remote(SGLangEngine).options(scheduling_strategy=strategy).remote(
                rank=self.rank_offset + i, base_gpu_id=gpu_ids[self.gpu_offset + i])

@dataclasses.dataclass
class RolloutServer:
    server_groups: list

def _allocate_rollout_engine_addr_and_ports_normal():
    pass

def _compute_rollout_offset(args):
    return 0

def _compute_megatron_num_gpus(args):
    return 0

def _resolve_sglang_config(args):
    return SglangConfig.from_yaml(args.sglang_config)

def start_rollout_servers(args, pg):
    offset = 0
    for model in _resolve_sglang_config(args).models:
        _, port = _start_router(args)
        for g in model.server_groups[::-1]:  # this toy slime makes a model's groups backwards
            group = ServerGroup(args=args, pg=pg, all_engines=[None] * g.num_gpus, worker_type=g.worker_type,
                                rank_offset=offset, gpu_offset=offset, router_port=port)
            group.start_engines()
            offset += g.num_gpus
    return args.debug_train_only
"""
GROUPS_CONFIG = """
@dataclasses.dataclass
class ServerGroupConfig:
    worker_type: str
    num_gpus: int

@dataclasses.dataclass
class ModelConfig:
    name: str
    server_groups: list

@dataclasses.dataclass
class SglangConfig:
    models: list

    @staticmethod
    def from_yaml(path):
        with open(path) as f:
            data = yaml.safe_load(f)
        return SglangConfig(models=[ModelConfig(m["name"], [ServerGroupConfig(**g) for g in m["server_groups"]])
                                    for m in data["sglang"]])
"""


def test_group_layouts_run_slimes_start_up_with_its_own_config_classes() -> None:
    from acrl.compiler._slime import engine_facts, group_facts  # lazy: only this test reads the group harness

    models = [{"name": "default", "server_groups": [{"worker_type": "prefill", "num_gpus": 2},
                                                    {"worker_type": "decode", "num_gpus": 1}]},
              {"name": "ref", "server_groups": [{"worker_type": "regular", "num_gpus": 1}]}]
    code = group_facts.SlimeGroupCode(GROUPS_ROLLOUT, None, GROUPS_CONFIG)
    out = code.run(gpus_per_node=4, rollout_offset=2, num_gpus_per_node=4, rollout_num_gpus_per_engine=1,
                   models=models)
    # the order, offsets and models of the groups are what the toy's own loop did, not the config's order
    assert out["groups"] == [[0, "decode", 0, 0, 1, 1, [0]], [0, "prefill", 1, 1, 1, 2, [1, 2]],
                             [1, "regular", 3, 3, 1, 1, [3]]]
    assert [(e[0], e[2], e[3], e[6]) for e in out["engines"]] == [(0, 2, 2, 0), (1, 3, 3, 1), (2, 4, 0, 1),
                                                                   (3, 5, 1, 2)]
    with pytest.raises(engine_facts.EngineFactsError, match="RolloutServer"):
        group_facts.SlimeGroupCode(GROUPS_ROLLOUT.replace("class RolloutServer", "class Other"), None, GROUPS_CONFIG)
    with pytest.raises(engine_facts.EngineFactsError, match=r"args\.sglang_pp_size"):
        group_facts.SlimeGroupCode(GROUPS_ROLLOUT.replace("args.debug_train_only", "args.sglang_pp_size"), None,
                                   GROUPS_CONFIG).run(gpus_per_node=4, rollout_offset=0, num_gpus_per_node=4,
                                                      rollout_num_gpus_per_engine=1, models=models)


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


@pytest.mark.upstream("ACRL_SLIME_DIR")
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
