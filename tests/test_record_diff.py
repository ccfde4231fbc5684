"""`acrl diff` over run records (runtime/_record_diff.py): RUN_A RUN_B, and RUN against the bundle or spec it
ran, in acrl diff's formats and exit statuses. Records are written here, in tmp_path, in the shape `acrl run`
writes them (with the fields issue 16 adds, and without them: a record written before, "not recorded"); the
record's argv is the one the bundle's own train.sh prints (ACRL_PRINT_ARGV), as the job gets it."""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from acrl.compiler import compile_spec, job_env_vars, write
from acrl.runtime._cli import main
from acrl.runtime._records import Launcher, RunRecord
from conftest import MINIMAL, merge

RUN_A, RUN_B = "20260301T100000Z-a1a1a1", "20260302T100000Z-b2b2b2"


def compile_bundle(root: Path, **overrides: Any) -> tuple[Path, Path]:
    spec = root / "spec.toml"
    spec.write_text(tomli_w.dumps(merge(MINIMAL, overrides)), encoding="utf-8")
    bundle = root / "bundle"
    write(compile_spec(spec), bundle)
    return spec, bundle


def printed_argv(bundle: Path, **env: str) -> list[str]:
    """The entrypoint's argv as the bundle's train.sh gives it to the job (what `acrl run` records)."""
    out = subprocess.run(["bash", str(bundle / "train.sh")], capture_output=True, check=True,
                         env={**{k: v for k, v in os.environ.items() if k != "WANDB_API_KEY"}, "ACRL_PRINT_ARGV": "1",
                              **env}).stdout
    return [w.decode() for w in out.split(b"\0")[:-1]]


def old_record(bundle: Path, run_id: str) -> dict[str, Any]:
    """A record as `acrl run` wrote it before issue 16: none of argv, runtime_env, stack, target, inputs, ..."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    record = RunRecord(acrl_version="0.1.0", exp_id="test-exp", run_id=run_id, bundle=str(bundle),
                       bundle_hash=manifest["bundle_hash"],
                       submission_id=f"acrl-test-exp-{manifest['bundle_hash'][:12]}-{run_id}",
                       ray_address="http://127.0.0.1:8265", host="h", launcher=Launcher("h", 1, None, None),
                       command=["bash", str(bundle / "train.sh")], allow_modified=False, modified_files=[],
                       expected_hash=None, preflight=[], status="succeeded", exit_status=0)
    return record.as_json()


def new_record(bundle: Path, run_id: str, data: Path) -> dict[str, Any]:
    """A record with what issue 16 adds, for a run of ``bundle`` on ``data``."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    content = data.read_bytes()
    return {**old_record(bundle, run_id), "argv": printed_argv(bundle),
            "runtime_env": {"env_vars": job_env_vars((bundle / "train.sh").read_text()), "working_dir": str(bundle)},
            "stack": {"slime_commit": manifest["slime"]["commit"], "megatron_commit": None, "sglang": "0.5.13",
                      "torch": "2.9.1", "python": "3.12.3", "ray": "2.60.0"},
            "target": {"slime": manifest["slime"]["commit"], "megatron": manifest["slime"]["megatron_commit"],
                       "sglang": manifest["slime"]["sglang_version"]},
            "inputs": [{"key": "data.path", "path": str(data), "size": len(content),
                        "sha256": hashlib.sha256(content).hexdigest()}],
            "resumed_from": None, "wandb": {"project": None, "group": None, "key_env": "WANDB_API_KEY",
                                            "key_present": False}}


def save(runs: Path, record: dict[str, Any]) -> Path:
    folder = runs / record["exp_id"] / record["run_id"]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    return folder / "run.json"


@pytest.fixture
def setup(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """(spec, bundle, runs dir, data file)."""
    data = tmp_path / "train.jsonl"
    data.write_text('{"prompt": "q", "metadata": {}}\n')
    spec, bundle = compile_bundle(tmp_path, data={"path": str(data)})
    return spec, bundle, tmp_path / "runs", data


def acrl_diff(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["diff", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


def sections(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = acrl_diff(capsys, *args, "--format", "json")
    return code, json.loads(out)


def changed(doc: dict[str, Any], section: str) -> dict[str, tuple[Any, Any]]:
    return {c["key"]: (c["before"], c["after"]) for c in doc["sections"][section]}


def test_a_run_against_the_bundle_it_ran_is_the_same(setup: tuple[Path, Path, Path, Path],
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    spec, bundle, runs, data = setup
    save(runs, new_record(bundle, RUN_A, data))
    for other in (bundle, spec):  # the bundle, and its spec compiled in memory
        code, doc = sections(capsys, RUN_A, str(other), "--runs-dir", str(runs))
        assert code == 0 and doc["equivalent"] is True, doc
        # the W&B flags train.sh adds only with the key, which the record says was not set, are said, not counted
        assert any(n.startswith("not compared: --use-wandb") for n in doc["notes"]), doc["notes"]
    code, out, _ = acrl_diff(capsys, RUN_A, str(bundle), "--runs-dir", str(runs))
    assert code == 0 and out.startswith(f"run test-exp/{RUN_A} and {bundle} are equivalent")


def test_a_run_that_got_other_flags_than_the_bundle_gives(setup: tuple[Path, Path, Path, Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    _, bundle, runs, data = setup
    record = new_record(bundle, RUN_A, data)
    argv = record["argv"]
    argv[argv.index("--lr") + 1] = "2e-06"
    argv += ["--use-wandb", "--seed", "7"]  # W&B on although the record says no key: counted
    record["target"]["slime"] = record["target"]["slime"][:7]  # a short hash of the same commit: no difference
    record["runtime_env"]["env_vars"]["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    path = save(runs, record)
    code, doc = sections(capsys, str(path), str(bundle))
    assert code == 1 and doc["equivalent"] is False
    flags = {c["key"]: (c["group"], c["change"], c["before"], c["after"]) for c in doc["sections"]["flags"]}
    assert flags == {"--lr": ("optimizer", "changed", ["2e-06"], ["1e-06"]),
                     "--seed": ("other", "removed", ["7"], None)}
    assert changed(doc, "runtime_env") == {"CUDA_DEVICE_MAX_CONNECTIONS": ("8", "1")}
    assert doc["sections"]["target"] == [] and doc["sections"]["bundle"] == []
    code, out, _ = acrl_diff(capsys, str(path), str(bundle), "--format", "markdown")
    assert code == 1 and out.startswith(f"### `acrl diff` `run test-exp/{RUN_A}` → `{bundle}`")
    assert "| optimizer | `--lr` | `2e-06` | `1e-06` |" in out.splitlines()


def test_two_runs_of_one_bundle_on_another_dataset_and_slime(setup: tuple[Path, Path, Path, Path],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    _, bundle, runs, data = setup
    first = new_record(bundle, RUN_A, data)
    save(runs, first)
    second = copy.deepcopy(first)
    second["run_id"] = RUN_B
    data.write_text('{"prompt": "another q", "metadata": {}}\n')  # the same path, other contents
    second["inputs"] = new_record(bundle, RUN_B, data)["inputs"]
    second["stack"]["slime_commit"] = "0123456789abcdef0123456789abcdef01234567"
    second["resumed_from"] = {"checkpoint_dir": "/ckpt/test-exp", "iteration": 9, "run_id": RUN_A, "data_state": True}
    save(runs, second)
    code, doc = sections(capsys, "a1a1a1", "b2b2b2", "--runs-dir", str(runs))
    assert code == 1 and doc["sections"]["flags"] == [] and doc["sections"]["bundle"] == []
    assert set(changed(doc, "inputs")) == {"data.path.size", "data.path.sha256"}
    assert changed(doc, "stack") == {"slime_commit": (first["stack"]["slime_commit"],
                                                      "0123456789abcdef0123456789abcdef01234567")}
    assert changed(doc, "resumed_from")["resumed"] == (False, True)
    assert changed(doc, "resumed_from")["iteration"] == (None, 9)
    code, out, _ = acrl_diff(capsys, "a1a1a1", "b2b2b2", "--runs-dir", str(runs))
    assert code == 1
    assert f"  ~ data.path.sha256: {first['inputs'][0]['sha256']} -> {second['inputs'][0]['sha256']}" in out
    code, out, _ = acrl_diff(capsys, "a1a1a1", f"test-exp/{RUN_A}", "--runs-dir", str(runs))
    assert code == 0 and "equivalent" in out.splitlines()[0]


def test_an_old_record_says_not_recorded(setup: tuple[Path, Path, Path, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    _, bundle, runs, data = setup
    save(runs, old_record(bundle, RUN_A))
    save(runs, new_record(bundle, RUN_B, data))
    for other in (RUN_B, str(bundle)):
        code, doc = sections(capsys, RUN_A, other, "--runs-dir", str(runs))
        assert code == 1 and doc["differences"] == 0  # nothing compared differs, but what ran cannot be compared
        (line,) = doc["unverified"]
        assert line.startswith(f"run test-exp/{RUN_A}: argv, runtime_env, ") and "not recorded" in line
    code, out, err = acrl_diff(capsys, RUN_A, RUN_B, "--runs-dir", str(runs))
    assert code == 1 and err == "" and "Traceback" not in out
    unseen = new_record(bundle, "20260303T100000Z-c3c3c3", data)
    unseen["stack"] = None  # a record that keeps what ran, whose launching machine could not see the stack
    save(runs, unseen)
    code, doc = sections(capsys, RUN_B, "c3c3c3", "--runs-dir", str(runs))
    assert code == 1 and doc["unverified"] == [
        "run test-exp/20260303T100000Z-c3c3c3: stack not known (the launching machine could not see it): what ran "
        "there cannot be compared"]
    assert doc["sections"]["resumed_from"] == []  # null there: started from the model, as RUN_B did
    running = {**new_record(bundle, "20260303T110000Z-d4d4d4", data), "status": "running"}
    save(runs, running)  # acrl run writes resumed_from when the run ends: null here is not "from the model"
    code, doc = sections(capsys, RUN_B, "d4d4d4", "--runs-dir", str(runs))
    assert code == 1 and doc["unverified"] == [
        "run test-exp/20260303T110000Z-d4d4d4: resumed_from not known (its `acrl run` writes it when the run ends, "
        "and had not): what ran there cannot be compared"]
    assert out.splitlines()[-1].startswith(f"not equivalent: run test-exp/{RUN_A}: argv, runtime_env, stack, target, "
                                           "inputs, resumed_from, wandb not recorded")


def test_what_is_no_run_is_a_usage_error(setup: tuple[Path, Path, Path, Path],
                                         capsys: pytest.CaptureFixture[str]) -> None:
    _, bundle, runs, data = setup
    save(runs, new_record(bundle, RUN_A, data))
    code, out, err = acrl_diff(capsys, "20260301T100000Z-a1a1a2", str(bundle), "--runs-dir", str(runs))
    assert code == 2 and out == "" and f"did you mean {RUN_A}?" in err
    broken = runs / "test-exp" / "20260303T000000Z-c3c3c3"
    broken.mkdir()
    (broken / "run.json").write_text("[1, 2]")
    code, out, err = acrl_diff(capsys, "c3c3c3", str(bundle), "--runs-dir", str(runs))
    assert code == 2 and "not a run record" in err and "Traceback" not in err
    code, out, err = acrl_diff(capsys, RUN_A, str(bundle), "--runs-dir", str(runs / "nowhere"))
    assert code == 2 and "no run is recorded under" in err


def test_bundles_alone_are_still_the_compilers_diff(setup: tuple[Path, Path, Path, Path],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    spec, bundle, _, _ = setup
    code, out, _ = acrl_diff(capsys, str(bundle), str(spec))
    assert code == 0 and out.startswith(f"{bundle} and {spec} are equivalent")
    code, _, err = acrl_diff(capsys, str(bundle / "nope"), str(spec))  # a path: no run id, the compiler's error
    assert code == 2 and "no such file or directory" in err


def test_diffing_records_imports_no_ray(setup: tuple[Path, Path, Path, Path]) -> None:
    _, bundle, runs, data = setup
    save(runs, new_record(bundle, RUN_A, data))
    code = ("import sys\nfrom acrl.runtime._cli import main\n"
            f"code = main(['diff', {RUN_A!r}, {str(bundle)!r}, '--runs-dir', {str(runs)!r}])\n"
            "print(code, sorted(m for m in sys.modules if m.split('.')[0] in ('ray', 'boto3', 'torch')))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.splitlines()[-1] == "0 []"
