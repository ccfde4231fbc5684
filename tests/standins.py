"""Stand-ins for a slime checkout, shared by the executor's tests and bench/run_overhead.py: a
train.py that records what it received, slime's argument parsing, and the default rollout
integration's functions."""

from __future__ import annotations

from pathlib import Path

STANDIN_TRAIN_PY = '''\
"""Stand-in for slime's train.py: parse the flags it gets, read the custom config, write it all down; then
train and save checkpoints as slime does (see the comment at the end)."""
import argparse, json, os, sys, time

import yaml

parser = argparse.ArgumentParser()
parser.add_argument("--custom-config-path")
parser.add_argument("--num-layers", type=int)
parser.add_argument("--rollout-batch-size", type=int)
parser.add_argument("--prompt-data")
for flag in ("--load", "--save", "--ref-load"):
    parser.add_argument(flag)
for flag in ("--save-interval", "--num-rollout", "--start-rollout-id", "--ckpt-step"):
    parser.add_argument(flag, type=int)
parser.add_argument("--disable-rollout-global-dataset", dest="rollout_global_dataset", action="store_false")
args, unknown = parser.parse_known_args()
with open(args.custom_config_path, encoding="utf-8") as f:
    config = yaml.safe_load(f)
out = os.environ["STANDIN_OUT"]
received = {"argv": sys.argv[1:], "known": vars(args), "unknown": unknown, "custom_config": config,
            "cwd": os.getcwd(), "pid": os.getpid(),
            "env": {k: os.environ.get(k) for k in ("PYTHONPATH", "CUDA_DEVICE_MAX_CONNECTIONS", "STANDIN_SLEEP")}}
if os.environ.get("STANDIN_PLACEMENT_GROUP"):  # as slime does: one PACK group of 1-GPU bundles, then a task on each
    import ray
    from ray.util.placement_group import placement_group, placement_group_table
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    ray.init(logging_level="ERROR")
    size = int(os.environ["STANDIN_PLACEMENT_GROUP"])
    group = placement_group([{"GPU": 1, "CPU": 1}] * size, strategy="PACK")
    ray.get(group.ready(), timeout=120)
    bundles = placement_group_table(group)["bundles_to_node_id"]

    @ray.remote(num_gpus=1, num_cpus=1)
    def node_of_task():
        return ray.get_runtime_context().get_node_id()

    ran_on = ray.get([node_of_task.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
        group, placement_group_bundle_index=i)).remote() for i in range(size)], timeout=120)
    received["placement"] = {"bundle_nodes": [bundles[i] for i in sorted(bundles)], "task_nodes": ran_on,
                             "nodes": {n["NodeID"]: n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]}}
with open(out + ".tmp", "w", encoding="utf-8") as f:
    json.dump(received, f)
os.replace(out + ".tmp", out)
print("stand-in train.py: received", len(sys.argv) - 1, "arguments", flush=True)

# slime's checkpoint behaviour, at every commit acrl targets (cited at fa3c990 unless said):
# - a --load without Megatron's tracker becomes --ref-load and the run starts at rollout 0 (raw mode, v0.3.1, 624b824:
#   slime/utils/arguments.py 1806-1818); with one, the start is the loaded iteration + 1 unless --start-rollout-id
#   (Megatron's load returns the iteration, slime sets start_rollout_id from it: arguments.py help at 646);
# - the data position is loaded from rollout/global_dataset_state_dict_{start - 1}.pt, from offset 0 when missing
#   (slime/ray/placement_group.py:214-215, slime/rollout/data_source.py:138-160);
# - the loop is range(start_rollout_id, num_rollout) (train.py:63), each rollout STANDIN_ROLLOUT_SLEEP seconds;
# - a save after rollout N when (N + 1) % save_interval == 0 or N == num_rollout - 1, never without an interval
#   (slime/utils/misc.py:105-126): iter_%07d with metadata.json (torch_dist's last file), the data position, then the
#   tracker (written last, as Megatron does).
load = args.load
if load and not os.path.isfile(os.path.join(load, "latest_checkpointed_iteration.txt")):
    load = args.ref_load
    loaded = None
elif load:
    with open(os.path.join(load, "latest_checkpointed_iteration.txt"), encoding="utf-8") as f:
        loaded = args.ckpt_step if args.ckpt_step is not None else int(f.read().strip())
else:
    loaded = None
start = args.start_rollout_id if args.start_rollout_id is not None else (loaded + 1 if loaded is not None else 0)
data_state = load and os.path.join(load, "rollout", f"global_dataset_state_dict_{start - 1}.pt")
print(f"stand-in train.py: loaded {loaded} from {load}; start {start};",
      "data position", "loaded" if data_state and os.path.isfile(data_state) else "from offset 0", flush=True)
for rollout_id in range(start, args.num_rollout or 0):
    time.sleep(float(os.environ.get("STANDIN_ROLLOUT_SLEEP", "0")))
    print(f"stand-in train.py: rollout {rollout_id}", flush=True)
    if args.save and args.save_interval and ((rollout_id + 1) % args.save_interval == 0
                                             or rollout_id == args.num_rollout - 1):
        folder = os.path.join(args.save, f"iter_{rollout_id:07d}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "metadata.json"), "w", encoding="utf-8") as f:
            json.dump({"sharded_backend": "torch_dist"}, f)
        if args.rollout_global_dataset:
            os.makedirs(os.path.join(args.save, "rollout"), exist_ok=True)
            with open(os.path.join(args.save, "rollout", f"global_dataset_state_dict_{rollout_id}.pt"), "wb") as f:
                f.write(b"stand-in")
        with open(os.path.join(args.save, "latest_checkpointed_iteration.txt"), "w", encoding="utf-8") as f:
            f.write(str(rollout_id))
        print(f"stand-in train.py: saved iteration {rollout_id}", flush=True)
time.sleep(float(os.environ.get("STANDIN_SLEEP", "0")))
sys.exit(int(os.environ.get("STANDIN_EXIT", "0")))
'''

# Stand-in for slime/utils/arguments.py, shaped like slime's: parse_known_args over the whole command
# line, then a validation that raises. It knows every flag it is given but those in STANDIN_UNKNOWN,
# writes the argv it parsed to STANDIN_PARSED, and raises STANDIN_REJECT's message when set; with
# STANDIN_REQUIRE_ENV (NAME=VALUE,...), its validation asserts those variables as Megatron's asserts
# CUDA_DEVICE_MAX_CONNECTIONS=1 (megatron/training/arguments.py:950 at 1dcf0daf).
STANDIN_ARGUMENTS_PY = '''\
import argparse, json, os, sys


def parse_args(add_custom_arguments=None):
    unknown = set(filter(None, os.environ.get("STANDIN_UNKNOWN", "").split(",")))
    parser = argparse.ArgumentParser(allow_abbrev=False)
    for token in sorted({t for t in sys.argv[1:] if t.startswith("--")} - unknown):
        parser.add_argument(token, nargs="*")
    args, _ = parser.parse_known_args()
    if os.environ.get("STANDIN_PARSED"):
        with open(os.environ["STANDIN_PARSED"], "w", encoding="utf-8") as f:
            json.dump(sys.argv[1:], f)
    if os.environ.get("STANDIN_REJECT"):
        raise AssertionError(os.environ["STANDIN_REJECT"])
    for pair in filter(None, os.environ.get("STANDIN_REQUIRE_ENV", "").split(",")):
        name, _, value = pair.partition("=")
        assert os.environ.get(name) == value, f"the environment variable {name} must be {value}"
    return args
'''

# The default rollout integration's modules, as the stand-in slime checkout provides them.
STANDIN_INTEGRATION = {
    "agentcore_rl_toolkit/backends/slime/integration/rollout.py": "def generate_rollout(*args, **kwargs):\n    pass\n",
    "agentcore_rl_toolkit/backends/slime/integration/rewards.py":
        "def normalize_episode_rewards(*args, **kwargs):\n    pass\n",
}


def write_standin_slime(slime: Path) -> None:
    """A stand-in slime checkout in ``slime``: train.py, slime/utils/arguments.py and the default
    rollout integration (slime's dir is on the job's import path, as train.py's folder)."""
    for name, text in {"train.py": STANDIN_TRAIN_PY, "slime/utils/arguments.py": STANDIN_ARGUMENTS_PY,
                       **STANDIN_INTEGRATION}.items():
        module = slime / name
        module.parent.mkdir(parents=True, exist_ok=True)
        for package in [module.parent, *module.parent.parents][:-len(slime.parents) - 1]:
            (package / "__init__.py").touch()
        module.write_text(text, encoding="utf-8")
