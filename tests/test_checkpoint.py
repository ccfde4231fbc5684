"""[checkpoint]: resuming and continuing (issue 16). train.sh's checkpoint block, executed by bash with the shims
(tests/shims) against temporary checkpoint directories laid out as Megatron writes them: what slime would receive
(--load or not, --ckpt-step, --start-rollout-id), what train.sh says, and its refusals (exit 2, nothing stopped,
started or submitted). Then the ACRL-H rules' keys and positions and where they stay quiet, the flags the keys pass,
and the importers' mapping of the flags."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from test_train_sh import Run, Toolbox, compile_into, make_toolbox, run_train_sh

from acrl.compiler import Bundle, SpecError, compile_spec
from acrl.compiler._importers.base import render_spec
from acrl.compiler._importers.slime_runner import import_slime_runner
from acrl.compiler._importers.train_sh import import_train_sh
from conftest import SpecWriter

HEAD = "624b824a898ab0ec1fcb4d373004c7f3852bf515"


@pytest.fixture(scope="module")
def toolbox(tmp_path_factory: pytest.TempPathFactory) -> Toolbox:
    return make_toolbox(tmp_path_factory.mktemp("toolbox"))


def checkpoint(folder: Path, tracker: str | None, *iterations: int, complete: bool = True,
               data: tuple[int, ...] = ()) -> Path:
    """A checkpoint directory as Megatron and slime write it: the tracker, iter_NNNNNNN folders (with metadata.json,
    which Megatron writes last, when ``complete``) and slime's data positions rollout/global_dataset_state_dict_N.pt."""
    folder.mkdir(parents=True, exist_ok=True)
    if tracker is not None:
        (folder / "latest_checkpointed_iteration.txt").write_text(tracker, encoding="utf-8")
    for n in iterations:
        (folder / f"iter_{n:07d}").mkdir()
        if complete:
            (folder / f"iter_{n:07d}" / "metadata.json").write_text('{"sharded_backend": "torch_dist"}')
    for n in data:
        (folder / "rollout").mkdir(exist_ok=True)
        (folder / "rollout" / f"global_dataset_state_dict_{n}.pt").write_bytes(b"")
    return folder


def bundle(write_spec: SpecWriter, tmp_path: Path, num_rollout: int = 10, **keys: Any) -> Path:
    """MINIMAL with [checkpoint] ``keys`` (save_interval 1 when save is set), compiled into tmp_path/b."""
    table = {**({"save_interval": 1} if "save" in keys else {}), **keys}
    compile_into(write_spec({"experiment": {"num_rollout": num_rollout}, "checkpoint": table}), tmp_path / "b")
    return tmp_path / "b"


def launch(folder: Path, toolbox: Toolbox, work: Path, **env: str) -> Run:
    return run_train_sh(folder / "train.sh", toolbox, work, env)


def decision(run: Run) -> dict[str, Any]:
    """train.sh's one machine-readable line about the checkpoint (the run record reads it)."""
    (line,) = [line for line in run.stderr.splitlines() if line.startswith("acrl-resume: ")]
    data: dict[str, Any] = json.loads(line.removeprefix("acrl-resume: "))
    return data


def load_flags(argv: list[str]) -> dict[str, list[str]]:
    """The checkpoint-loading flags of an argv and their values."""
    out: dict[str, list[str]] = {}
    for i, word in enumerate(argv):
        if word in ("--load", "--ckpt-step", "--start-rollout-id"):
            out[word] = [argv[i + 1]]
    return out


def refused(run: Run) -> dict[str, Any]:
    """A launch the checkpoint block refused: exit 2, no ray, pkill or pgrep call at all, one error line."""
    assert run.returncode == 2, run.stderr
    assert run.calls == [], run.argvs
    assert len([line for line in run.stderr.splitlines() if line.startswith("acrl: error: ")]) == 1, run.stderr
    assert run.stderr.splitlines()[-1].startswith("acrl: error: ")  # last: what a caller showing one line shows
    found = decision(run)
    assert found["decision"] == "refused"
    return found


# --- train.sh: auto -------------------------------------------------------------------------------

def test_a_first_run_starts_from_the_model(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    save = tmp_path / "ckpt"
    run = launch(bundle(write_spec, tmp_path, save=str(save)), toolbox, tmp_path / "w")
    assert run.returncode == 0, run.stderr
    assert load_flags(run.slime_argv) == {}
    assert "--save" in run.slime_argv  # it still saves there
    assert decision(run) == {"decision": "started", "mode": "auto", "checkpoint_dir": None, "tracker": None,
                             "iteration": None, "start_rollout_id": 0, "data_state": None,
                             "message": f"starting from the model: no checkpoint in {save}"}


def test_a_relaunch_resumes_at_the_rollout_after_the_saved_one(write_spec: SpecWriter, tmp_path: Path,
                                                                toolbox: Toolbox) -> None:
    save = checkpoint(tmp_path / "ckpt", "3\n", 1, 3, data=(1, 3))
    run = launch(bundle(write_spec, tmp_path, save=str(save)), toolbox, tmp_path / "w")
    assert run.returncode == 0, run.stderr
    assert load_flags(run.slime_argv) == {"--load": [str(save)]}
    found = decision(run)
    assert (found["decision"], found["checkpoint_dir"], found["tracker"], found["iteration"],
            found["start_rollout_id"], found["data_state"]) == ("resumed", str(save), "3", 3, 4, True)
    assert f"acrl: resuming from {save} at rollout 4 (iteration 3)\n" in run.stderr


def test_a_missing_data_position_is_said(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    """slime reads rollout/global_dataset_state_dict_{start-1}.pt from --load and, without it, starts from the first
    prompt (slime/rollout/data_source.py:145-148 at 624b824: it logs "does not exist" and returns)."""
    save = checkpoint(tmp_path / "ckpt", "3", 3)
    run = launch(bundle(write_spec, tmp_path, save=str(save)), toolbox, tmp_path / "w")
    assert run.returncode == 0 and decision(run)["data_state"] is False
    assert f"no {save}/rollout/global_dataset_state_dict_3.pt" in run.stderr


@pytest.mark.parametrize("tracker", ["7", "  7 \n", "0007\n"])
def test_the_tracker_is_read_as_megatron_reads_it(tracker: str, write_spec: SpecWriter, tmp_path: Path,
                                                   toolbox: Toolbox) -> None:
    """int(text.strip()) (megatron/training/checkpointing.py:298-300 at 1dcf0dafa)."""
    save = checkpoint(tmp_path / "ckpt", tracker, 7)
    run = launch(bundle(write_spec, tmp_path, save=str(save)), toolbox, tmp_path / "w")
    assert run.returncode == 0, run.stderr
    assert decision(run)["iteration"] == 7 and decision(run)["start_rollout_id"] == 8


def test_a_legacy_torch_iteration_is_complete_with_its_rank_folders(write_spec: SpecWriter, tmp_path: Path,
                                                                     toolbox: Toolbox) -> None:
    save = checkpoint(tmp_path / "ckpt", "2", 2, complete=False)
    (save / "iter_0000002" / "mp_rank_00").mkdir()
    run = launch(bundle(write_spec, tmp_path, save=str(save), format="torch"), toolbox, tmp_path / "w")
    assert run.returncode == 0, run.stderr
    assert load_flags(run.slime_argv) == {"--load": [str(save)]}
    assert run.slime_argv[run.slime_argv.index("--ckpt-format") + 1] == "torch"


@pytest.mark.parametrize(("tracker", "iterations", "complete", "said"), [
    ("release", (), True, "holds a release checkpoint"),
    ("garbage\n", (), True, "not an iteration number"),
    ("-1", (), True, "not an iteration number"),
    ("5", (), True, "iter_0000005 does not exist"),
    ("5", (5,), False, "iter_0000005 is incomplete"),
    ("9", (9,), True, "already finished rollout 9 of num_rollout 10"),
])
def test_a_checkpoint_slime_cannot_use_is_refused(tracker: str, iterations: tuple[int, ...], complete: bool,
                                                   said: str, write_spec: SpecWriter, tmp_path: Path,
                                                   toolbox: Toolbox) -> None:
    save = checkpoint(tmp_path / "ckpt", tracker, *iterations, complete=complete)
    run = launch(bundle(write_spec, tmp_path, save=str(save)), toolbox, tmp_path / "w")
    found = refused(run)
    assert said in run.stderr and found["checkpoint_dir"] == str(save)
    assert found["iteration"] == (int(tracker) if tracker.strip().isdigit() else None)  # what the tracker says


def test_print_argv_shows_the_load_it_decided(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    """ACRL_PRINT_ARGV (acrl run's preflight) prints the argv with the decision, and touches nothing."""
    save = checkpoint(tmp_path / "ckpt", "4", 4)
    run = launch(bundle(write_spec, tmp_path, save=str(save)), toolbox, tmp_path / "w", ACRL_PRINT_ARGV="1")
    assert run.returncode == 0 and run.calls == []
    assert load_flags(run.stdout.split("\0")[:-1]) == {"--load": [str(save)]}


# --- train.sh: required, never ---------------------------------------------------------------------

def test_resume_required_refuses_a_launch_with_nothing_to_resume(write_spec: SpecWriter, tmp_path: Path,
                                                                  toolbox: Toolbox) -> None:
    save = tmp_path / "ckpt"
    folder = bundle(write_spec, tmp_path, save=str(save))
    found = refused(launch(folder, toolbox, tmp_path / "w1", ACRL_RESUME="required"))
    assert found["mode"] == "required" and found["checkpoint_dir"] is None
    checkpoint(save, "2", 2)
    run = launch(folder, toolbox, tmp_path / "w2", ACRL_RESUME="required")
    assert run.returncode == 0 and load_flags(run.slime_argv) == {"--load": [str(save)]}
    assert decision(run)["mode"] == "required"
    spec_required = bundle(write_spec, tmp_path / "r", save=str(tmp_path / "none"), resume="required")
    refused(launch(spec_required, toolbox, tmp_path / "w3"))


def test_resume_never_loads_nothing_and_refuses_to_write_over_a_checkpoint(write_spec: SpecWriter, tmp_path: Path,
                                                                           toolbox: Toolbox) -> None:
    save = tmp_path / "ckpt"
    folder = bundle(write_spec, tmp_path, save=str(save), resume="never")
    run = launch(folder, toolbox, tmp_path / "w1")
    assert run.returncode == 0 and load_flags(run.slime_argv) == {}
    assert decision(run)["decision"] == "started" and "resume is \"never\"" in run.stderr
    checkpoint(save, "2", 2)
    assert "already holds a checkpoint" in launch(folder, toolbox, tmp_path / "w2").stderr
    refused(launch(folder, toolbox, tmp_path / "w3"))
    run = launch(folder, toolbox, tmp_path / "w4", ACRL_RESUME="auto")  # for one launch
    assert run.returncode == 0 and load_flags(run.slime_argv) == {"--load": [str(save)]}


def test_an_unknown_acrl_resume_is_an_error(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    run = launch(bundle(write_spec, tmp_path, save=str(tmp_path / "c")), toolbox, tmp_path / "w", ACRL_RESUME="yes")
    assert run.returncode == 1 and run.calls == [] and "ACRL_RESUME must be" in run.stderr


# --- train.sh: continuations, ckpt_step, start_rollout_id ------------------------------------------

def test_a_continuation_loads_the_other_run_until_it_has_saved_its_own(write_spec: SpecWriter, tmp_path: Path,
                                                                       toolbox: Toolbox) -> None:
    """load = the other run's directory, with the first launch's ckpt_step and start_rollout_id; once save holds a
    checkpoint, a relaunch resumes that, without them."""
    other, save = checkpoint(tmp_path / "a", "4", 2, 4), tmp_path / "b-ckpt"
    folder = bundle(write_spec, tmp_path, num_rollout=20, save=str(save), load=str(other), ckpt_step=2,
                    start_rollout_id=3, scheduler="override")
    run = launch(folder, toolbox, tmp_path / "w1")
    assert run.returncode == 0, run.stderr
    assert load_flags(run.slime_argv) == {"--load": [str(other)], "--ckpt-step": ["2"], "--start-rollout-id": ["3"]}
    assert "--override-opt-param-scheduler" in run.slime_argv
    found = decision(run)
    assert (found["checkpoint_dir"], found["iteration"], found["start_rollout_id"]) == (str(other), 2, 3)
    assert f"continuing from {other} at rollout 3" in run.stderr
    checkpoint(save, "9", 9)
    run = launch(folder, toolbox, tmp_path / "w2")
    assert load_flags(run.slime_argv) == {"--load": [str(save)]}
    assert decision(run)["start_rollout_id"] == 10 and f"resuming from {save} at rollout 10" in run.stderr


def test_ckpt_step_picks_an_iteration_of_the_save_directory(write_spec: SpecWriter, tmp_path: Path,
                                                            toolbox: Toolbox) -> None:
    save = checkpoint(tmp_path / "ckpt", "5", 2, 5)
    folder = bundle(write_spec, tmp_path, save=str(save), ckpt_step=2)
    run = launch(folder, toolbox, tmp_path / "w")
    assert load_flags(run.slime_argv) == {"--load": [str(save)], "--ckpt-step": ["2"]}
    assert decision(run)["iteration"] == 2 and decision(run)["start_rollout_id"] == 3
    (save / "iter_0000002" / "metadata.json").unlink()
    assert "iter_0000002 is incomplete" in launch(folder, toolbox, tmp_path / "w2").stderr


def test_start_rollout_id_without_a_checkpoint_is_passed(write_spec: SpecWriter, tmp_path: Path,
                                                         toolbox: Toolbox) -> None:
    """slime 624b824 keeps it when nothing is loaded (#2236); earlier commits drop it (ACRL-H004 says so)."""
    folder = bundle(write_spec, tmp_path, save=str(tmp_path / "c"), start_rollout_id=3)
    run = launch(folder, toolbox, tmp_path / "w")
    assert load_flags(run.slime_argv) == {"--start-rollout-id": ["3"]} and decision(run)["start_rollout_id"] == 3


def test_no_checkpoint_directory_no_checkpoint_block(write_spec: SpecWriter, tmp_path: Path,
                                                     toolbox: Toolbox) -> None:
    compile_into(write_spec(), tmp_path / "b")
    text = (tmp_path / "b" / "train.sh").read_text(encoding="utf-8")
    assert "ACRL_RESUME" not in text and "--load" not in text
    run = launch(tmp_path / "b", toolbox, tmp_path / "w")
    assert run.returncode == 0 and "acrl-resume:" not in run.stderr


def test_a_hostile_checkpoint_path_is_one_word(write_spec: SpecWriter, tmp_path: Path, toolbox: Toolbox) -> None:
    marker = tmp_path / "MARKER"
    name = f"c $(touch {marker}) `touch {marker}` ';touch {marker};' \"x\" * {{rollout_id}}"
    with pytest.raises(SpecError) as refused:  # a line break: no path has one (compiler/_pipeline/values.py)
        compile_spec(write_spec({"checkpoint": {"save": f"{tmp_path}/c\n{{rollout_id}}", "save_interval": 1}}))
    assert [d.key for d in refused.value.diagnostics] == ["checkpoint.save"]
    save = checkpoint(tmp_path / name, "1", 1)
    run = launch(bundle(write_spec, tmp_path, save=str(save)), toolbox, tmp_path / "w")
    assert run.returncode == 0, run.stderr
    assert load_flags(run.slime_argv) == {"--load": [str(save)]}
    assert decision(run)["checkpoint_dir"] == str(save) and not marker.exists()


# --- the keys' flags -------------------------------------------------------------------------------

def test_keys_pass_their_flags(compile_overrides: Any) -> None:
    argv = compile_overrides({"experiment": {"num_rollout": 10}, "checkpoint": {
        "save": "/ckpt/b", "save_interval": 2, "load_optimizer": False, "load_rng": False, "scheduler": "checkpoint",
        "format": "torch"}}).argv()
    assert {"--no-load-optim", "--no-load-rng", "--use-checkpoint-opt-param-scheduler"} <= set(argv)
    assert argv[argv.index("--ckpt-format") + 1] == "torch" and "--override-opt-param-scheduler" not in argv
    assert not {"--load", "--ckpt-step", "--start-rollout-id"} & set(argv)  # train.sh's, at launch
    default = compile_overrides({"checkpoint": {"save": "/ckpt/b", "save_interval": 2, "format": "torch_dist"}})
    assert not {"--no-load-optim", "--no-load-rng", "--ckpt-format"} & set(default.argv())


def test_spec_toml_writes_the_new_keys_only_when_set(compile_overrides: Any) -> None:
    """A spec without them compiles to the bundle it compiled to before they existed (compile.WRITTEN_WHEN_SET)."""
    plain = compile_overrides({"checkpoint": {"save": "/ckpt/b", "save_interval": 2}}).files["spec.toml"].decode()
    assert "resume" not in plain and "load_optimizer" not in plain
    set_ = compile_overrides({"checkpoint": {"save": "/ckpt/b", "save_interval": 2, "resume": "required",
                                             "load_rng": False}}).files["spec.toml"].decode()
    assert 'resume = "required"' in set_ and "load_rng = false" in set_


# --- the rules: ids, keys, positions, and where they stay quiet -----------------------------------

def diagnostics(write_spec: SpecWriter, overrides: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    """(rule, key, line) of every ACRL-H finding, errors or warnings."""
    try:
        found = list(compile_spec(write_spec(overrides), display_name="spec.toml").warnings)
    except SpecError as exc:
        found = list(exc.diagnostics)
    return [(d.rule, d.key, d.line) for d in found if d.rule.startswith("ACRL-H")]


def line_of(path: Path, start: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if line.startswith(start))


@pytest.mark.parametrize(("overrides", "rule", "key", "written"), [
    ({"experiment": {"num_rollout": 5}, "checkpoint": {"save": "/c", "save_interval": 1, "start_rollout_id": 7}},
     "ACRL-H001", "checkpoint.start_rollout_id", "start_rollout_id = "),
    ({"experiment": {"num_rollout": 5}, "checkpoint": {"save": "/c", "save_interval": 1, "ckpt_step": 4}},
     "ACRL-H001", "checkpoint.ckpt_step", "ckpt_step = "),
    ({"checkpoint": {"load": "/c/run/iter_0000012/"}}, "ACRL-H002", "checkpoint.load", "load = "),
    ({"model": {"ref_load": "/m/ref_torch_dist"}, "checkpoint": {"load": "/m/ref_torch_dist/"}}, "ACRL-H003",
     "checkpoint.load", "load = "),
    ({"model": {"ref_load": "/m/ref"}, "checkpoint": {"save": "/m/ref", "save_interval": 1}}, "ACRL-H003",
     "checkpoint.save", "save = "),
    ({"experiment": {"num_rollout": 9}, "checkpoint": {"start_rollout_id": 4, "save": "/c", "save_interval": 1}},
     "ACRL-H004", "checkpoint.start_rollout_id", "start_rollout_id = "),
    ({"checkpoint": {"save": "/c"}}, "ACRL-H005", "checkpoint.save", "save = "),
    ({"checkpoint": {"save": "/c", "save_interval": 1, "save_hf": "/hf/{step}"}}, "ACRL-H006", "checkpoint.save_hf",
     "save_hf = "),
    ({"checkpoint": {"save": "/c", "save_interval": 1, "save_hf": "/hf"}}, "ACRL-H007", "checkpoint.save_hf",
     "save_hf = "),
    ({"checkpoint": {"save": "/c", "save_interval": 1, "load_optimizer": False, "scheduler": "override"}},
     "ACRL-H008", "checkpoint.scheduler", "scheduler = "),
    ({"checkpoint": {"format": "fsdp_dtensor"}}, "ACRL-H009", "checkpoint.format", "format = "),
    ({"checkpoint": {"resume": "required"}}, "ACRL-H010", "checkpoint.resume", "resume = "),
    ({"checkpoint": {"load_rng": False}}, "ACRL-H011", "checkpoint.load_rng", "load_rng = "),
    ({"checkpoint": {"save": "c", "save_interval": 1}}, "ACRL-H013", "checkpoint.save", "save = "),
])
def test_a_rule_points_at_its_key(overrides: dict[str, Any], rule: str, key: str, written: str,
                                  write_spec: SpecWriter) -> None:
    found = diagnostics(write_spec, overrides)
    path = write_spec(overrides)
    assert (rule, key, line_of(path, written)) in found, found


def test_a_continuation_written_right_is_quiet(write_spec: SpecWriter) -> None:
    """At 624b824: every key set, none wrong."""
    assert diagnostics(write_spec, {"slime": {"commit": HEAD}, "experiment": {"num_rollout": 40}, "checkpoint": {
        "save": "/ckpt/b", "save_interval": 5, "save_hf": "/ckpt/b/hf/{rollout_id:04d}-{{x}}", "load": "/ckpt/a",
        "ckpt_step": 19, "start_rollout_id": 20, "scheduler": "override", "format": "torch"}}) == []


@pytest.mark.parametrize("overrides", [
    {"slime": {"commit": HEAD}},  # slime #2236 keeps it
    {"checkpoint": {"resume": "required", "save": "/c", "save_interval": 1}},  # a checkpoint is always loaded
    {"checkpoint": {"start_rollout_id": 0, "save": "/c", "save_interval": 1}},  # 0 is what slime resets it to
])
def test_h004_is_quiet_where_slime_keeps_the_start(overrides: dict[str, Any], write_spec: SpecWriter) -> None:
    spec = {"experiment": {"num_rollout": 9}, "checkpoint": {"start_rollout_id": 4, "save": "/c", "save_interval": 1}}
    for table, keys in overrides.items():
        spec[table] = {**spec.get(table, {}), **keys}
    assert [f for f in diagnostics(write_spec, spec) if f[0] == "ACRL-H004"] == []


def test_h005_an_hf_export_alone_is_never_written_either(write_spec: SpecWriter) -> None:
    """slime exports save_hf inside its save, which runs only with an interval (ACRL-H005's citations)."""
    path = write_spec({"checkpoint": {"save_hf": "/hf/{rollout_id}"}})
    assert diagnostics(write_spec, {"checkpoint": {"save_hf": "/hf/{rollout_id}"}}) == [
        ("ACRL-H005", "checkpoint.save_hf", line_of(path, "save_hf = "))]


def test_h012_is_v030_only(write_spec: SpecWriter) -> None:
    spec = {"checkpoint": {"save": "/c", "save_interval": 1}, "extra": {"flags": {"--async-save": True}}}
    assert diagnostics(write_spec, spec) == []  # fa3c990: slime sets the persistent checkpoint worker
    assert [f[0] for f in diagnostics(write_spec, {**spec, "slime": {"commit": "bf14dc21f"}})] == ["ACRL-H012"]


@pytest.mark.parametrize(("flags", "hint"), [
    ({"--load": "/c/run"}, "set [checkpoint] load = \"/c/run\" instead"),  # train.sh decides it: never the hatch
    ({"--start-rollout-id": 3}, "set [checkpoint] start_rollout_id = 3 instead"),
    ({"--no-load-optim": True}, "set [checkpoint] load_optimizer = false instead"),  # the switch's value
    ({"--no-load-optim": False}, "set [checkpoint] load_optimizer instead"),  # passes nothing: no value to name
])
def test_the_escape_hatch_does_not_pass_a_checkpoint_keys_flag(flags: dict[str, Any], hint: str,
                                                                write_spec: SpecWriter) -> None:
    """ACRL-F002: a flag a key owns belongs in the key; --load there would also bypass train.sh's check."""
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec({"checkpoint": {"save": "/c/run", "save_interval": 1}, "extra": {"flags": flags}}))
    assert [d.hint for d in info.value.diagnostics if d.rule == "ACRL-F002"] == [hint]


# --- the importers --------------------------------------------------------------------------------

FLAGS = ["--save", "/ckpt/b", "--save-interval", "5", "--load", "/ckpt/a", "--no-load-optim", "--no-load-rng",
         "--ckpt-step", "2", "--start-rollout-id", "3", "--override-opt-param-scheduler", "--ckpt-format", "torch"]
KEYS = {"save": "/ckpt/b", "save_interval": 5, "load": "/ckpt/a", "load_optimizer": False, "load_rng": False,
        "ckpt_step": 2, "start_rollout_id": 3, "scheduler": "override", "format": "torch"}


def test_import_train_sh_maps_the_checkpoint_flags(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text("ray job submit --address=http://127.0.0.1:8265 -- python3 /root/slime/train.py \\\n  "
                      + " ".join(FLAGS) + " --hf-checkpoint /m --prompt-data /d.jsonl\n", encoding="utf-8")
    spec = import_train_sh(script).spec
    assert spec["checkpoint"] == KEYS
    without = tmp_path / "plain.sh"
    without.write_text("python3 /root/slime/train.py --hf-checkpoint /m --prompt-data /d.jsonl --save /c\n")
    assert import_train_sh(without).spec["checkpoint"] == {"save": "/c"}  # no switch imported as false


def test_import_slime_runner_maps_extra_flags_onto_the_keys(tmp_path: Path) -> None:
    config = tmp_path / "runner.yaml"
    config.write_text(json.dumps({
        "exp_id": "e", "agent_runtime_arn": "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-abc123",
        "s3_bucket": "b", "model_dir": "/models/Qwen2.5-3B-Instruct", "data_path": "/d.jsonl",
        "model_type": "qwen2.5-3B", "slime_dir": "/root/slime", "extra_flags": FLAGS}), encoding="utf-8")
    imported = import_slime_runner(config)
    assert imported.spec["checkpoint"] == KEYS and "extra" not in imported.spec


def test_an_imported_continuation_compiles_and_launches(tmp_path: Path, toolbox: Toolbox) -> None:
    other = checkpoint(tmp_path / "a", "2", 2)
    script = tmp_path / "run.sh"
    script.write_text(f"python3 /root/slime/train.py --hf-checkpoint /m --prompt-data /d.jsonl --num-rollout 9 "
                      f"--save {tmp_path / 'b'} --save-interval 1 --load {other} --colocate --rollout-num-gpus 8\n",
                      encoding="utf-8")
    imported = import_train_sh(script)
    assert imported.spec["checkpoint"]["load"] == str(other)
    imported.spec["model"]["type"] = "qwen2.5-3B"  # the script sources no model script: set by hand, as noted
    spec = tmp_path / "spec.toml"
    spec.write_text(render_spec(imported), encoding="utf-8")
    built: Bundle = compile_into(spec, tmp_path / "bundle")
    assert built.spec.checkpoint.load == str(other)
    run = launch(tmp_path / "bundle", toolbox, tmp_path / "w")
    assert run.returncode == 0, run.stderr
    assert load_flags(run.slime_argv) == {"--load": [str(other)]}
