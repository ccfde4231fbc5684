"""The import-fidelity harness (tests/launch_fidelity.py, tests/launch_compare.py; issue 14 "Result"): the comparison's
own rules, then acrl's own fixtures with the shapes of slime's scripts run end to end (original and imported bundle
under the recording stand-ins), then, where ACRL_SLIME_DIR names a slime checkout, slime's real scripts.

No fixture reproduces its launch yet: each end-to-end test asserts the exact mismatch set of today (so it fails when
the importer, the spec or the templates change what is launched; update the set then, with the reason). Slime-shaped
fixtures are imported as `[experiment] integration = "slime"` (or "custom" for a rollout function of their own) and
compile with no spec edit; --patch-agentcore would add an [agentcore] table only to an "agentcore" import."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from shlex import quote

import pytest
from launch_compare import Default, Launch, Mismatch, compare, layer_pattern, options, slime_defaults
from launch_fidelity import COMMON_ENV, HEAD_IP, Result, check_script, make_bin, run_under_standins

from acrl.compiler._pipeline.model_args.catalog import entry
from conftest import REPO, SLIME_HEAD

FIXTURES = REPO / "tests" / "fixtures" / "train_sh"
SUBMIT = ("job", "submit", "--address=http://127.0.0.1:8265")


def launch(*program: str, env: dict[str, str] | None = None, start: tuple[str, ...] | None = None,
           exported: dict[str, str] | None = None, start_env: dict[str, str] | None = None) -> Launch:
    runtime = ("--runtime-env-json", json.dumps({"env_vars": env})) if env is not None else ()
    return Launch(start, (*SUBMIT, *runtime, "--", "python3", *program), tuple((exported or {}).items()),
                  tuple((start_env or {}).items()))


def found(mismatches: list[Mismatch]) -> set[tuple[str, str]]:
    return {(m.category, m.subject) for m in mismatches}


# --- the comparison ------------------------------------------------------------------------------------------

def test_options_are_read_as_argparse_reads_them() -> None:
    got = options(["--lr", "1", "--x=a=b", "--bs", "1", "2", "--neg", "-1", "-.5", "--lr", "2", "--flag"])
    assert got == {"--x": ["a=b"], "--bs": ["1", "2"], "--neg": ["-1", "-.5"], "--lr": ["2"], "--flag": []}
    assert list(got) == ["--x", "--bs", "--neg", "--lr", "--flag"]  # a repeated flag sits where it was last given


def test_a_repeated_flag_keeps_its_last_value_on_either_side() -> None:
    original = launch("train.py", "--num-layers", "36", "--rotary-base", "10", "--rotary-base", "20")
    assert not compare(original, launch("train.py", "--rotary-base", "20", "--num-layers", "36"), {})
    mismatches = compare(original, launch("train.py", "--num-layers", "36", "--rotary-base", "10"), {})
    assert [(m.category, m.subject, m.original, m.bundle) for m in mismatches] == [
        ("flag-value", "--rotary-base", ["20"], ["10"])]


def test_numbers_compare_as_argparse_converts_them_unless_the_flag_is_a_string() -> None:
    defaults = {"--name": Default(None, kind="str")}
    assert not compare(launch("train.py", "--t", "1", "--e", "1e-6"), launch("train.py", "--t", "1.0", "--e",
                                                                            "0.000001"), defaults)
    assert found(compare(launch("train.py", "--name", "1"), launch("train.py", "--name", "1.0"), defaults)) == {
        ("flag-value", "--name")}


def test_layer_patterns_compare_as_the_list_megatron_makes() -> None:
    assert layer_pattern("[1]*4") == [1, 1, 1, 1] and layer_pattern("([0]*2+[1]*2)") == [0, 0, 1, 1]
    assert layer_pattern("__import__('os')") is None and layer_pattern("[1]*10**9") is None
    assert not compare(launch("train.py", "--moe-layer-freq", "[1,1,1]"), launch("train.py", "--moe-layer-freq",
                                                                                "[1]*3"), {})
    assert found(compare(launch("train.py", "--moe-layer-freq", "[1,1]"), launch("train.py", "--moe-layer-freq",
                                                                                "[1]*3"), {}))


def test_a_one_sided_flag_is_allowed_only_where_it_restates_slimes_default() -> None:
    defaults = {"--lr": Default(1e-6, kind="float"), "--colocate": Default(False, bare=True),
                "--seed": Default(1234, kind="int"), "--eps-clip-high": Default(None, kind="float"),
                "--disable-x": Default(True, bare=True)}
    ours = launch("train.py", "--lr", "1e-06", "--seed", "1234", "--megatron-to-hf-mode", "bridge")
    assert not compare(launch("train.py"), ours, defaults)
    mismatches = compare(launch("train.py", "--lr", "2e-6", "--disable-x"),
                         launch("train.py", "--seed", "1", "--colocate", "--eps-clip-high", "0.28"), defaults)
    assert found(mismatches) == {("flag-original-only", "--lr"), ("flag-original-only", "--disable-x"),
                                 ("flag-bundle-only", "--seed"), ("flag-bundle-only", "--colocate"),
                                 ("flag-bundle-only", "--eps-clip-high")}


def test_the_global_batch_may_be_said_either_way() -> None:
    batch = ("--rollout-batch-size", "32", "--n-samples-per-prompt", "8")
    assert not compare(launch("train.py", *batch, "--global-batch-size", "64"),
                       launch("train.py", *batch, "--num-steps-per-rollout", "4"), {})
    assert not compare(launch("train.py", *batch, "--num-steps-per-rollout", "4"),
                       launch("train.py", *batch, "--num-steps-per-rollout", "4", "--global-batch-size", "64"), {})
    assert found(compare(launch("train.py", *batch, "--global-batch-size", "256"),
                         launch("train.py", *batch, "--num-steps-per-rollout", "4"), {})) == {
        ("flag-original-only", "--global-batch-size"), ("flag-bundle-only", "--num-steps-per-rollout")}


def test_runtime_env_every_variable_of_the_original_and_its_pythonpath_entries() -> None:
    original = launch("train.py", env={"PYTHONPATH": "/root/Megatron-LM/:/opt/extra", "NCCL_ALGO": "Ring",
                                       "CUDA_DEVICE_MAX_CONNECTIONS": "1"})
    same = launch("train.py", env={"PYTHONPATH": "/opt/first:/root/Megatron-LM:/opt/extra/", "NCCL_ALGO": "Ring",
                                   "CUDA_DEVICE_MAX_CONNECTIONS": "1", "MORE": "x"})
    assert not compare(original, same, {})
    other = launch("train.py", env={"PYTHONPATH": "/root/Megatron-LM", "NCCL_ALGO": "Tree"})
    assert found(compare(original, other, {})) == {("pythonpath", "/opt/extra"), ("runtime-env", "NCCL_ALGO"),
                                                  ("runtime-env", "CUDA_DEVICE_MAX_CONNECTIONS")}
    with_dir = Launch(None, (*SUBMIT, "--runtime-env-json", '{"working_dir": "/b"}', "--", "python3", "train.py"))
    assert found(compare(launch("train.py"), with_dir, {})) == {("runtime-env-key", "working_dir")}


def test_entrypoint_its_name_and_its_folder_where_the_original_gives_one() -> None:
    assert not compare(launch("train.py"), launch("/root/slime/train.py"), {})
    assert found(compare(launch("train.py"), launch("/root/slime/train_async.py"), {})) == {("entrypoint", "script")}
    assert found(compare(launch("/opt/slime/train.py"), launch("/root/slime/train.py"), {})) == {
        ("entrypoint", "script")}
    assert found(compare(Launch(None, (*SUBMIT, "--", "python", "train.py")), launch("train.py"), {})) == {
        ("entrypoint", "interpreter")}
    assert found(compare(Launch(), launch("train.py"), {})) == {("run", "ray job submit")}


def test_ray_start_gpus_and_address_options() -> None:
    head = ("start", "--head", "--node-ip-address", "10.0.0.1", "--num-gpus", "8", "--dashboard-host=0.0.0.0",
            "--disable-usage-stats")
    ours = ("start", "--head", "--num-gpus=8", "--node-ip-address", "10.0.0.1", "--dashboard-host", "0.0.0.0",
            "--port", "6379", "--dashboard-port", "8265")
    assert not compare(launch("train.py", start=head), launch("train.py", start=ours), {})
    worse = ("start", "--head", "--num-gpus", "4", "--port", "6380")
    assert found(compare(launch("train.py", start=head), launch("train.py", start=worse), {})) == {
        ("ray-start", "--num-gpus"), ("ray-start", "--node-ip-address"), ("ray-start", "--dashboard-host"),
        ("ray-start", "--port")}
    assert found(compare(launch("train.py"), launch("train.py", start=ours), {})) == {
        ("ray-start", "ray start --head")}


def test_exports_before_ray_start_reach_the_bundles_head() -> None:
    original = launch("train.py", exported={"HIP_VISIBLE_DEVICES": "0,1", "PYTHONUNBUFFERED": "1"})
    assert not compare(original, launch("train.py", start_env={"HIP_VISIBLE_DEVICES": "0,1",
                                                               "PYTHONUNBUFFERED": "1", "X": "y"}), {})
    assert found(compare(original, launch("train.py", start_env={"PYTHONUNBUFFERED": "0"}), {})) == {
        ("start-env", "HIP_VISIBLE_DEVICES"), ("start-env", "PYTHONUNBUFFERED")}


def test_the_custom_config_is_compared_by_content() -> None:
    original = Launch(None, (*SUBMIT, "--", "python3", "t/train.py", "--custom-config-path", "/a/config.yaml"),
                      custom_config={"exp_id": "e", "acr_timeout": 900})
    ours = Launch(None, (*SUBMIT, "--", "python3", "t/train.py", "--custom-config-path", "custom_config.yaml"),
                  custom_config={"exp_id": "e", "acr_timeout": 900, "more": 1})
    assert not compare(original, ours, {})
    assert found(compare(original, Launch(None, ours.submit, custom_config={"exp_id": "f"}), {})) == {
        ("custom-config", "exp_id"), ("custom-config", "acr_timeout")}


def test_slime_defaults_are_read_from_the_parser_source(tmp_path: Path) -> None:
    """An arguments.py of the shape of slime's (624b824 slime/utils/arguments.py: add_argument, reset_arg)."""
    source = tmp_path / "slime" / "utils" / "arguments.py"
    source.parent.mkdir(parents=True)
    source.write_text(
        "import os\n"
        "def add(parser):\n"
        "    parser.add_argument('--actor-num-nodes', type=int, default=1)\n"
        "    parser.add_argument('--colocate', action='store_true')\n"
        "    parser.add_argument('--keep-x', action='store_false', dest='x')\n"
        "    parser.add_argument('--eval-prompt-data', type=str, nargs='+', default=None)\n"
        "    parser.add_argument('--from-env', type=int, default=int(os.environ.get('X', 1)))\n"
        "    parser.add_argument('--cuda-graph-bs', type=int, nargs='+', default=[1, 2])\n"
        "    reset_arg(parser, '--lr', type=float, default=1e-6)\n", encoding="utf-8")
    defaults = slime_defaults(tmp_path)
    assert defaults == {"--actor-num-nodes": Default(1, kind="int"), "--colocate": Default(False, bare=True),
                        "--keep-x": Default(True, bare=True), "--eval-prompt-data": Default(None, kind="str"),
                        "--cuda-graph-bs": Default([1, 2], kind="int"), "--lr": Default(1e-6, kind="float")}
    assert not compare(launch("train.py"), launch("train.py", "--cuda-graph-bs", "1", "2", "--lr", "0.000001",
                                                  "--actor-num-nodes", "1"), defaults)


# --- end to end on acrl's own fixtures ----------------------------------------------------------------------

def run_fixture(tmp_path: Path, relative: str, env: dict[str, str] | None = None, *, at_root: bool = False,
                patch_agentcore: bool = False) -> Result:
    """The fixture run from a slime-like tree (its models/qwen3-4B.sh written from acrl's catalog), then imported
    with --env values only, compiled (PATCHED with an [agentcore] table where ``patch_agentcore`` and the import chose
    integration "agentcore") and run."""
    tree = tmp_path / "slime"
    models = tree / "scripts" / "models"
    models.mkdir(parents=True)
    args = entry("qwen3-4B").model_args()  # type: ignore[union-attr]
    (models / "qwen3-4B.sh").write_text(f"MODEL_ARGS=({' '.join(quote(a) for a in args)})\n", encoding="utf-8")
    source = FIXTURES / relative
    script = Path(shutil.copy(source, tree / source.name if at_root else tree / "scripts" / source.name))
    return check_script(script, tree, slime_dir=None, defaults={}, env={**COMMON_ENV, **(env or {})},
                        patch_agentcore=patch_agentcore, work=tmp_path / "work")


# What every bundle of a slime-shaped script launches today and the script does not: the bundle folder as the job's
# working_dir. (With the agentcore profile forced by a hand-written [agentcore] table, before integration profiles,
# the toolkit's --rollout-function-path, --custom-reward-post-process-path, --custom-config-path, tool-call parser,
# sglang DP size, CUDA-graph max bs and log levels were here too: the slime profile leaves them all out.)
BUNDLE_EXTRAS = {("runtime-env-key", "working_dir")}
# Flags acrl always passes whose values restate slime's own defaults (slime 624b824 slime/utils/arguments.py:940
# grpo, :899 0.2, :880 reset_arg --lr 1e-6, :342 1.0): these fixtures are compared with no defaults table, so they
# count. (The agentcore profile's --max-tokens-per-gpu, --rollout-max-response-len, --sglang-mem-fraction-static,
# --kl-loss-type, --eps-clip-high, --lr-decay-style, --weight-decay, --adam-beta2, --attention-backend,
# --attention-dropout and --hidden-dropout were here too: the slime profile leaves them out.)
RESTATED_DEFAULTS = {("flag-bundle-only", f) for f in (
    "--rollout-temperature", "--advantage-estimator", "--eps-clip", "--lr")}


def test_the_stand_ins_run_nothing_real(tmp_path: Path) -> None:
    """pkill, ray, ssh, python with a script file: recorded, never run; sleep returns at once."""
    bin_dir = make_bin(tmp_path)
    script = tmp_path / "s.sh"
    script.write_text("pkill -9 python\nray stop --force\nssh root@h 'ray start'\npython3 /x/train.py --lr 1\n"
                      "sleep 600\npython3 -c 'print(6 * 7)'\necho \"$(hostname -I)\" \"$(command -v pip3)\"\n",
                      encoding="utf-8")
    side = run_under_standins(["bash", str(script)], bin_dir=bin_dir, cwd=tmp_path, work=tmp_path / "w", env={},
                              timeout=20)
    assert side.returncode == 0
    assert [c["argv"][0] for c in side.calls] == ["pkill", "ray", "ssh", "python3"]
    assert side.calls[3]["argv"] == ["python3", "/x/train.py", "--lr", "1"]


def test_amd_shape_exports_before_ray_start(tmp_path: Path) -> None:
    result = run_fixture(tmp_path, "fidelity/run-amd-shapes.sh")
    # imported as integration "slime": it compiles as imported (before profiles: import_rc 1, and a PATCHED spec)
    assert (result.original.returncode, result.import_rc, result.compile_rc, result.patched) == (0, 0, 0, False)
    assert result.original.launch.start is not None and "8" in result.original.launch.start  # from HIP_VISIBLE_...
    # NOT REPRODUCED YET: MASTER_ADDR and MODEL_DIR are not in the head's environment (the ROCm exports are:
    # [cluster] env; the head's --node-ip-address: [cluster] node_ip_address)
    assert found(list(result.mismatches)) == BUNDLE_EXTRAS | RESTATED_DEFAULTS | {
        ("start-env", "MASTER_ADDR"), ("start-env", "MODEL_DIR")}
    assert not result.reproduces


def test_multi_node_shape_with_its_ssh_loop(tmp_path: Path) -> None:
    hosts = tmp_path / "hosts"
    hosts.write_text(f"{HEAD_IP} slots=8\n10.11.12.14 slots=8\n", encoding="utf-8")
    result = run_fixture(tmp_path, "fidelity/run-multinode-shapes.sh", {"MASTER_ADDR": HEAD_IP,
                                                                         "HOSTFILE": str(hosts)})
    assert result.original.returncode == 0
    (ssh,) = [c for c in result.original.calls if c["argv"][0] == "ssh"]  # the worker only, and not run
    assert ssh["argv"][1] == "root@10.11.12.14"
    assert dict(result.original.launch.runtime_env["env_vars"])["NCCL_NVLS_ENABLE"] == "1"  # the topo stand-in
    # NOT REPRODUCED YET: 2 actor nodes on a one-node head do not compile (ACRL-C001); the ssh loop is a note
    assert (result.import_rc, result.compile_rc, result.bundle) == (1, 1, None)
    assert result.problem == "ACRL-C001"


def test_determinism_shape_run_from_slimes_root(tmp_path: Path) -> None:
    result = run_fixture(tmp_path, "fidelity/run-determinism-shapes.sh", at_root=True)
    assert (result.original.returncode, result.compile_rc, result.patched) == (0, 0, False)
    env_vars = result.bundle.launch.runtime_env["env_vars"]  # type: ignore[union-attr]
    assert {k: env_vars[k] for k in ("NCCL_ALGO", "NVTE_ALLOW_NONDETERMINISTIC_ALGO", "CUBLAS_WORKSPACE_CONFIG")} == {
        "NCCL_ALGO": "Ring", "NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}
    # NOT REPRODUCED YET: W&B flags without a key are dropped
    assert found(list(result.mismatches)) == BUNDLE_EXTRAS | RESTATED_DEFAULTS | {
        ("flag-original-only", "--use-wandb"), ("flag-original-only", "--wandb-project")}


def test_sglang_config_here_document_shape(tmp_path: Path) -> None:
    result = run_fixture(tmp_path, "fidelity/run-sglang-config-shapes.sh")
    assert (result.compile_rc, result.patched) == (0, False)
    flags = options(result.original.launch.program)
    assert flags["--sglang-cuda-graph-bs"] == ["1", "2", "4", "8", "16", "24", "32", "40", "48", "56", "64"]
    # NOT REPRODUCED YET: the here-document's file (--sglang-config) is a note, not in the bundle
    assert found(list(result.mismatches)) == BUNDLE_EXTRAS | RESTATED_DEFAULTS | {
        ("flag-original-only", "--sglang-config")}


def test_sft_shape_keeps_num_epoch(tmp_path: Path) -> None:
    result = run_fixture(tmp_path, "slime_shapes/run-qwen3-4B-sft-shapes.sh")
    assert result.compile_rc == 0 and options(result.bundle.launch.program)["--num-epoch"] == ["3"]  # type: ignore
    assert not result.patched  # its own --rollout-function-path: integration "custom"
    # NOT REPRODUCED YET: the values acrl always passes (the custom profile's n-samples, engine size and TP restate
    # slime's and Megatron's 1); a head the script never starts
    assert found(list(result.mismatches)) == BUNDLE_EXTRAS | RESTATED_DEFAULTS | {
        ("flag-bundle-only", f) for f in ("--rollout-num-gpus-per-engine", "--tensor-model-parallel-size",
                                          "--n-samples-per-prompt")} | {("ray-start", "ray start --head")}


def test_seq_and_repeated_flag_shape(tmp_path: Path) -> None:
    result = run_fixture(tmp_path, "slime_shapes/run-qwen3-4B-shapes.sh", {"SAVE_DIR": "/ckpt"})
    assert (result.compile_rc, result.patched) == (0, False)
    # NOT REPRODUCED YET: --wandb-group without a key is dropped; restated defaults; MASTER_ADDR
    assert found(list(result.mismatches)) == BUNDLE_EXTRAS | (RESTATED_DEFAULTS - {
        ("flag-bundle-only", "--rollout-temperature")}) | {
        ("flag-original-only", "--wandb-group"), ("start-env", "MASTER_ADDR")}


def test_the_patch_is_never_applied_to_a_slime_import(tmp_path: Path) -> None:
    """The Result criterion's own measurement (no spec edit): a slime-shaped script imports as integration "slime"
    and compiles as imported; --patch-agentcore leaves it alone (an [agentcore] table would be ACRL-I002). Before
    integration profiles this compiled only with the patch ("missing required table [agentcore]")."""
    for patch in (False, True):
        result = run_fixture(tmp_path / str(patch), "fidelity/run-sglang-config-shapes.sh", patch_agentcore=patch)
        assert (result.import_rc, result.compile_rc, result.patched, result.problem) == (0, 0, False, "")
        assert result.bundle is not None and "--custom-config-path" not in result.bundle.launch.program


# --- slime's own scripts, where a checkout is here ------------------------------------------------------------

SLIME_DIR = os.environ.get("ACRL_SLIME_DIR")


@pytest.mark.skipif(not SLIME_DIR, reason="set ACRL_SLIME_DIR to a slime tree (scripts/, slime/) to run slime's "
                    "own run-*.sh through the harness")
def test_slimes_scripts_through_the_harness(tmp_path: Path) -> None:
    """Every run-*.sh launches under the stand-ins (the harness's own correctness) and gets a row; the table is
    printed (`pytest -s`). Whether they reproduce is the harness's verdict, not asserted here."""
    slime = Path(str(SLIME_DIR))
    if not (slime / "scripts").is_dir():  # a git directory (as tests/test_slime_facts.py takes): the targeted commit
        slime = tmp_path / "slime"
        slime.mkdir()
        archive = subprocess.run(["git", "--git-dir", str(SLIME_DIR), "archive", SLIME_HEAD, "scripts", "slime"],
                                 capture_output=True, check=True, timeout=300).stdout
        subprocess.run(["tar", "-x", "-C", str(slime)], input=archive, check=True, timeout=300)
    out = tmp_path / "fidelity.json"
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "launch_fidelity.py"), "--slime-dir", str(slime),
                           "--json", str(out)], capture_output=True, text=True, timeout=1800, check=False)
    print(proc.stdout)
    results = json.loads(out.read_text(encoding="utf-8"))["results"]
    assert len(results) == len(list((slime / "scripts").glob("run-*.sh")))
    assert [r["script"] for r in results if not r["original_launched"]] == []
    assert proc.returncode == (0 if all(r["reproduces"] for r in results) else 1)
