"""The run record of issue 16: what ran (data fingerprints, the stack found, the target, slime's argv, the Ray job's
environment, W&B), written by a real `acrl run` against a real Ray head on 127.0.0.1 with the stand-in slime; no
secret of the launching environment in run.json, train.log or the argv of any process acrl starts; records
written before issue 16 still listed and loaded; `acrl runs` shows chains of resumed runs."""

from __future__ import annotations

import hashlib
import json
import os
import platform
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from test_run import RayHead, acrl, make_project, only_record, tool_env
from test_secrets import AWS_ACCESS_KEY_ID, AWS_SECRET, WANDB_KEY

from acrl.compiler import compile_spec, write
from conftest import REPO, merge

OLD_RUNS = REPO / "tests" / "fixtures" / "runs_before_issue16"
SESSION_TOKEN = "FwoGZXIvYXdzEJr//////////wEaDOd3Ue9Qm3vT8xZ1pL6nW4rY9sK2hB7cD5fG0aEjU4iKq"


def recording_shims(folder: Path, log: Path) -> str:
    """A folder of bash, python3 and ray wrappers that append their argv (NUL-separated, one record per line) to
    ``log`` and run the real program: every process acrl starts by name goes through one."""
    folder.mkdir()
    for name in ("bash", "python3", "ray"):
        real = shutil.which(name, path=tool_env()["PATH"])
        assert real is not None, name
        wrapper = folder / name
        wrapper.write_text(f"#!/bin/sh\nprintf '%s\\0' {name} \"$@\" >> '{log}'\necho >> '{log}'\n"
                           f"exec '{real}' \"$@\"\n")
        wrapper.chmod(0o755)
    return str(folder)


def recompile(project: Any, overrides: dict[str, Any]) -> dict[str, Any]:
    spec = merge(project.spec, overrides)
    (project.root / "spec.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    write(compile_spec(project.root / "spec.toml"), project.bundle, force=True)
    return spec


@pytest.mark.slow
def test_the_record_says_what_ran_and_holds_no_secret(ray_head: RayHead, tmp_path: Path) -> None:
    project = make_project(tmp_path, address=ray_head.address)
    evals = tmp_path / "eval.jsonl"
    evals.write_text('{"prompt": "e", "metadata": {}}\n')
    recompile(project, {"eval": {"datasets": {"held_out": str(evals), "gone": str(tmp_path / "nowhere.jsonl")}},
                        "wandb": {"project": "proj", "group": "grp"},
                        "env": {"forward": ["WANDB_ENTITY", "MY_SETTING"]}})
    # `gone` is not readable here: the datasets check would fail on it, so it is skipped (and the record says so)
    log = tmp_path / "argv.log"
    secrets = {"WANDB_API_KEY": WANDB_KEY, "AWS_ACCESS_KEY_ID": AWS_ACCESS_KEY_ID,
               "AWS_SECRET_ACCESS_KEY": AWS_SECRET, "AWS_SESSION_TOKEN": SESSION_TOKEN}
    env = tool_env(**secrets, MY_SETTING="plain-value", WANDB_ENTITY="team")
    env["PATH"] = os.pathsep.join([recording_shims(tmp_path / "shims", log), env["PATH"]])
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--skip", "datasets", "--runs-dir", str(project.runs),
                env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = only_record(project.runs)
    run_dir = project.runs / "test-exp" / record["run_id"]
    # inputs: size and sha256 of each file readable here, hashed here (the datasets check was skipped)
    data = Path(project.spec["data"]["path"])
    assert record["inputs"] == [
        {"key": "data.path", "path": str(data), "size": data.stat().st_size,
         "sha256": hashlib.sha256(data.read_bytes()).hexdigest()},
        {"key": "eval.datasets.gone", "path": str(tmp_path / "nowhere.jsonl"),
         "error": "not readable on the launching machine (the job runs on " + ray_head.address +
                  "): No such file or directory"},
        {"key": "eval.datasets.held_out", "path": str(evals), "size": evals.stat().st_size,
         "sha256": hashlib.sha256(evals.read_bytes()).hexdigest()}]
    # stack: the stand-in slime is no git checkout; versions from the python3 train.sh runs (torch, sglang absent)
    import ray

    assert record["stack"] == {"slime_commit": None, "megatron_commit": None, "sglang": None, "torch": None,
                               "python": platform.python_version(), "ray": ray.__version__}
    manifest = json.loads((project.bundle / "manifest.json").read_text())
    assert record["target"] == {"slime_commit": manifest["slime"]["commit"],
                                "megatron_commit": manifest["slime"]["megatron_commit"],
                                "sglang": manifest["slime"]["sglang_version"]}
    # argv: what the job received, after `ray job submit --` (the W&B flags decided at launch included)
    received = json.loads(project.received.read_text())
    assert record["argv"][2:] == received["argv"] and record["argv"][0] == "python3"
    assert record["argv"][-5:] == ["--use-wandb", "--wandb-project", "proj", "--wandb-group", "grp"]
    env_vars = record["runtime_env"]["env_vars"]
    assert env_vars["MY_SETTING"] == "plain-value" and env_vars["WANDB_ENTITY"] == "team"
    assert env_vars["STANDIN_OUT"] == str(project.received) and env_vars["CUDA_DEVICE_MAX_CONNECTIONS"] == "1"
    assert record["runtime_env"]["working_dir"] == os.path.realpath(project.bundle)
    assert record["wandb"] == {"enabled": True, "project": "proj", "group": "grp", "key_env": "WANDB_API_KEY",
                               "key_present": True}
    assert record["resumed_from"] is None
    rows = {r["name"]: r for r in record["preflight"]}
    assert rows["datasets"]["status"] == "skipped"
    # the spec's [cluster] address is an existing cluster: the key set here does not reach the job, said before
    assert rows["wandb"]["status"] == "warning" and "does not reach the job" in rows["wandb"]["detail"]
    # no secret anywhere: the record, the log, the terminal, the argv of every process started through PATH
    texts = {"run.json": (run_dir / "run.json").read_text(), "train.log": (run_dir / "train.log").read_text(),
             "output": proc.stdout + proc.stderr, "argv": log.read_text(errors="replace"),
             "job argv": json.dumps(received)}
    assert "ray\0job\0submit" in texts["argv"] and "bash\0" in texts["argv"]
    for name, value in secrets.items():
        for where, text in texts.items():
            assert value not in text, f"{name} in {where}"


def test_records_written_before_issue_16_are_listed_and_load(tmp_path: Path) -> None:
    """tests/fixtures/runs_before_issue16: a record as acrl wrote it before the issue-16 fields; listed, loaded
    (the new fields None), and a new run resuming from it is listed under it."""
    from acrl.runtime._records import RunRecord

    (old,) = OLD_RUNS.glob("*/*/run.json")
    data = json.loads(old.read_text())
    assert not {"inputs", "stack", "argv", "runtime_env", "wandb", "resumed_from", "target"} & set(data)
    record = RunRecord.from_json(data)
    assert record.inputs is None and record.resumed_from is None and record.status == "succeeded"
    runs = tmp_path / "runs"
    shutil.copytree(OLD_RUNS, runs)
    child = dict(data, run_id="20261201T000000Z-bbbbbb", started_at="2026-12-01T00:00:00.000Z",
                 resumed_from={"checkpoint_dir": "/ckpt", "iteration": 4, "run_id": data["run_id"],
                               "data_state": True})
    (runs / data["exp_id"] / child["run_id"]).mkdir()
    (runs / data["exp_id"] / child["run_id"] / "run.json").write_text(json.dumps(child))
    proc = acrl("runs", "--runs-dir", str(runs), "--json")
    assert proc.returncode == 0, proc.stderr
    listed = json.loads(proc.stdout)
    assert [(r["run_id"], r["chain"], r["resumed_by"]) for r in listed] == [
        (data["run_id"], [data["run_id"]], [child["run_id"]]),
        (child["run_id"], [data["run_id"], child["run_id"]], [])]
    table = acrl("runs", "--runs-dir", str(runs)).stdout.splitlines()
    assert table[1].split()[2] == data["run_id"] and table[2].split()[2] == child["run_id"]
    assert table[2].rstrip().endswith(f"<- {data['run_id']} @ iteration 4")


def _record(runs: Path, exp: str, run: str, started: str, parent: tuple[str | None, str | None] | None = None,
            **extra: Any) -> None:
    data: dict[str, Any] = {"exp_id": exp, "run_id": run, "status": "succeeded", "started_at": started, **extra}
    if parent is not None:
        data["resumed_from"] = {"checkpoint_dir": "/ckpt", "iteration": 9, "run_id": parent[1],
                                "data_state": True, **({"exp_id": parent[0]} if parent[0] else {})}
    (runs / exp / run).mkdir(parents=True)
    (runs / exp / run / "run.json").write_text(json.dumps(data))


def test_runs_shows_chains_per_experiment(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    _record(runs, "e", "a", "2026-01-01")
    _record(runs, "e", "d", "2026-01-02")  # a second chain of e, started between a and a's resume
    _record(runs, "e", "b", "2026-01-03", ("e", "a"))
    _record(runs, "f", "x", "2026-01-04", ("e", "a"))  # a continuation of e's checkpoint in another experiment
    _record(runs, "e", "c", "2026-01-05", (None, "b"))  # a record without the saver's exp_id: the same experiment
    _record(runs, "e", "z", "2026-01-06", ("e", "z"))  # names itself (a hand-edited record): no loop
    proc = acrl("runs", "--runs-dir", str(runs), "--json")
    listed = json.loads(proc.stdout)
    assert [(r["exp_id"], r["run_id"], r["chain"], r["resumed_by"]) for r in listed] == [
        ("e", "a", ["a"], ["b"]), ("e", "b", ["a", "b"], ["c"]), ("e", "c", ["a", "b", "c"], []),
        ("e", "d", ["d"], []), ("e", "z", ["z"], []), ("f", "x", ["e/a", "x"], [])]
    rows = [line.split() for line in acrl("runs", "--runs-dir", str(runs)).stdout.splitlines()]
    assert rows[0][-2:] == ["resumed", "from"]
    lines = acrl("runs", "--runs-dir", str(runs)).stdout.splitlines()
    run_id, status = lines[0].index("run_id"), lines[0].index("status")
    assert [line[run_id:status].rstrip() for line in lines[1:]] == ["a", "  b", "    c", "d", "z", "x"]
    assert lines[2].endswith("<- a @ iteration 9") and lines[3].endswith("<- b @ iteration 9")
    assert lines[6].endswith("<- e/a @ iteration 9")


def test_a_resumed_run_names_the_run_that_saved_its_checkpoint(tmp_path: Path) -> None:
    """resumed_from.run_id: the latest record whose argv saved to that directory (not the run asking)."""
    from acrl.runtime._provenance import resumed_from

    runs = tmp_path / "runs"
    ckpt = tmp_path / "ckpt"
    _record(runs, "e", "first", "2026-01-01", argv=["python3", "train.py", "--save", str(ckpt)])
    _record(runs, "e", "other", "2026-01-02", argv=["python3", "train.py", "--save", str(tmp_path / "elsewhere")])
    _record(runs, "e", "second", "2026-01-03", argv=["python3", "train.py", f"--save={tmp_path}/./ckpt"])
    _record(runs, "e", "now", "2026-01-04", argv=["python3", "train.py", "--save", str(ckpt)])
    line = json.dumps({"decision": "resumed", "checkpoint_dir": str(ckpt), "iteration": 7, "data_state": False,
                       "start_rollout_id": 8, "mode": "auto", "tracker": "7"})
    found = resumed_from(line, runs, "e", "now")
    assert found is not None and (found.run_id, found.exp_id, found.iteration) == ("second", "e", 7)
    assert found.data_state is False and found.checkpoint_dir == str(ckpt) and found.start_rollout_id == 8
    other = {"decision": "resumed", "checkpoint_dir": str(tmp_path / "unknown"), "iteration": 1, "data_state": True}
    assert resumed_from(json.dumps(other), runs, "e", "now") == type(found)(str(tmp_path / "unknown"), 1, None, True)
    started = {"decision": "started", "checkpoint_dir": None, "iteration": None, "start_rollout_id": 0}
    for said in (None, "not json", "[]", json.dumps(started), json.dumps(dict(other, decision="refused"))):
        assert resumed_from(said, runs, "e", "now") is None


def test_fingerprints_reuse_the_datasets_checks_read_and_refuse_what_is_not_a_file(tmp_path: Path) -> None:
    from acrl.runtime._preflight import fingerprint as fp
    from acrl.runtime._preflight.checks import scan_jsonl

    data = tmp_path / "d.jsonl"
    data.write_bytes(b'{"prompt": "p", "metadata": {}}\n' * 3)
    scan_jsonl(data)
    assert fp.fingerprint(data, limit=0) == (data.stat().st_size, hashlib.sha256(data.read_bytes()).hexdigest(),
                                             None)  # the scan's: over a limit of 0, yet hashed
    data.write_bytes(b"changed\n")  # another size and mtime: another file to the cache
    assert fp.fingerprint(data, limit=0) == (8, None, "not hashed: 8 bytes, over the 0 GiB limit "
                                                      "(ACRL_HASH_LIMIT_GIB)")
    assert fp.fingerprint(data)[1] == hashlib.sha256(b"changed\n").hexdigest()
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(OSError, match="not a regular file"):
        fp.fingerprint(tmp_path / "fifo")


@pytest.mark.parametrize(("spec", "env", "status", "words"), [
    ({"wandb": {"project": "p"}}, {}, "warning", "WANDB_API_KEY is not set here"),
    ({"wandb": {"project": "p", "key_env": "MY_KEY"}}, {"WANDB_API_KEY": WANDB_KEY}, "warning", "MY_KEY is not set"),
    ({}, {}, "skipped", "W&B off: WANDB_API_KEY is not set"),
    ({"wandb": {"project": "p", "enabled": False}}, {"WANDB_API_KEY": WANDB_KEY}, "skipped", "enabled = false"),
    ({"wandb": {"project": "p"}}, {"WANDB_API_KEY": WANDB_KEY}, "warning", "without a group"),
    ({"wandb": {"project": "p", "group": "g"}}, {"WANDB_API_KEY": WANDB_KEY}, "passed", "W&B on"),
    ({"wandb": {"project": "p"}, "extra": {"flags": {"--disable-wandb-random-suffix": True}}},
     {"WANDB_API_KEY": WANDB_KEY}, "passed", "W&B on"),
    ({"wandb": {"project": "p", "group": "g"}, "cluster": {"address": "http://10.0.0.1:8265"}},
     {"WANDB_API_KEY": WANDB_KEY}, "warning", "does not reach the job"),
], ids=["no-key", "other-key-env", "off", "disabled", "no-group", "on", "no-suffix", "existing-cluster"])
def test_the_wandb_check_warns_before_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              spec: dict[str, Any], env: dict[str, str], status: str,
                                              words: str) -> None:
    from acrl.runtime._preflight.checks import CHECKS, read_bundle_info, run_check

    project = make_project(tmp_path)
    recompile(project, spec)
    for name in ("WANDB_API_KEY", "MY_KEY"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", tool_env()["PATH"])
    (check,) = [c for c in CHECKS if c.name == "wandb"]
    result = run_check(check, read_bundle_info(project.bundle))
    assert (result.status, words in result.detail) == (status, True), result
    assert WANDB_KEY not in result.detail + result.hint
    if status == "warning":
        assert result.hint


def test_a_warning_row_runs_and_is_counted(tmp_path: Path) -> None:
    project = make_project(tmp_path)
    recompile(project, {"wandb": {"project": "p"}})
    env = {k: v for k, v in tool_env().items() if k != "WANDB_API_KEY"}
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--dry-run", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert any(line.startswith("wandb ") and " warning " in line for line in proc.stdout.splitlines())
    assert re.search(r"^preflight: \d+ passed, 0 failed, \d+ skipped, 1 warning$", proc.stdout, re.M), proc.stdout
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--skip", "wandb", "--dry-run", env=env)
    assert proc.returncode == 0 and re.search(r"^\S+ +warning ", proc.stdout, re.M) is None
    assert re.search(r"^wandb +skipped +\d+ms +--skip$", proc.stdout, re.M), proc.stdout


def test_the_recorded_runtime_env_redacts_secret_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from acrl.runtime._preflight.checks import read_bundle_info
    from acrl.runtime._provenance import REDACTED, runtime_env

    project = make_project(tmp_path)
    recompile(project, {"env": {"forward": ["MY_SETTING", "OTHER"]}})
    monkeypatch.setenv("MY_SETTING", "https://user:" + "pw-Zq9x@proxy.example")
    monkeypatch.setenv("OTHER", "fine")
    found = runtime_env(read_bundle_info(project.bundle))
    assert found is not None
    assert found.env_vars["MY_SETTING"] == REDACTED and found.env_vars["OTHER"] == "fine"


def test_train_shs_resume_line_is_picked_out_of_the_output_as_it_streams() -> None:
    """The first `acrl-resume: {json}` line, whatever chunks it comes in; a line too long to be train.sh's is
    skipped to its end; the copy to the log and the terminal is unchanged."""
    import io

    from acrl.runtime._stream import MARKED_LINE_LIMIT, RESUME_MARKER, _Copy

    log, out = io.BytesIO(), io.StringIO()
    copy = _Copy(log, out)
    text = (b"x" * (MARKED_LINE_LIMIT + 10) + b" acrl-resume: {\"fake\": 1}\nacrl: starting\nacrl: acrl-resume: "
            b"{\"decision\": \"resumed\"}\nacrl-resume: {\"second\": 1}\n")
    for i in range(0, len(text), 7):
        copy.write(text[i:i + 7])
    assert copy.finish() == {RESUME_MARKER: '{"decision": "resumed"}'}
    assert log.getvalue() == text and out.getvalue() == text.decode()
    last = _Copy(io.BytesIO(), io.StringIO())
    last.write(b"acrl-resume: {\"at\": \"the end\"}")  # no newline: read when the stream ends
    assert last.finish() == {RESUME_MARKER: '{"at": "the end"}'}
