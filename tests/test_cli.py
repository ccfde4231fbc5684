"""The command line: exit codes, output, --json, --strict, --force and never losing a file."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from acrl.compiler._cli.main import acrl_main, compile_main
from conftest import SPECS, SpecWriter

SMOKE = SPECS / "gsm8k-qwen2.5-3b-smoke.toml"


def run(capsys: pytest.CaptureFixture[str], *argv: str, main=compile_main) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_compile_writes_the_bundle_and_prints_its_hash(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(SMOKE), "-o", str(tmp_path / "b"))
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    assert code == 0
    assert out == f"created {tmp_path / 'b'}{os.sep}  bundle sha256:{manifest['bundle_hash']}\n"
    assert err == ""  # the compile's notes only with --verbose
    code, out, err = run(capsys, str(SMOKE), "-o", str(tmp_path / "b"), "--verbose")
    assert out.startswith("unchanged ")
    assert err.startswith("note: flags checked against acrl's facts of slime fa3c990 (generated from its code and "
                          "Megatron-LM's, python -m acrl.compiler._slime.flag_facts)")  # a note's wording (golden)


def test_default_output_is_bundles_exp_id(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert run(capsys, str(SMOKE))[0] == 0
    assert (tmp_path / "bundles" / "gsm8k-qwen2.5-3b-smoke" / "train.sh").is_file()


def test_acrl_compile_subcommand_is_the_same_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "compile", str(SMOKE), "-o", str(tmp_path / "a"), main=acrl_main)[0] == 0
    assert run(capsys, str(SMOKE), "-o", str(tmp_path / "b"))[0] == 0
    for name in os.listdir(tmp_path / "a"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_invalid_spec_exits_1_and_writes_nothing(write_spec: SpecWriter, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec({"rollout": {"batch_size": 0}})
    code, out, err = run(capsys, str(path), "-o", str(tmp_path / "b"))
    assert (code, out) == (1, "")
    line = next(n for n, text in enumerate(path.read_text().splitlines(), 1) if text.startswith("batch_size"))
    assert err.startswith(f"{path}:{line}:1: error: [rollout] batch_size:")
    code, out, _ = run(capsys, str(path), "-o", str(tmp_path / "b"), "--json")
    (diag,) = json.loads(out)["error"]["diagnostics"]
    assert (code, diag["severity"], diag["key"], diag["line"]) == (1, "error", "rollout.batch_size", line)
    assert not (tmp_path / "b").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["spec.toml"]  # no temporary directory left


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        compile_main(["--no-such-option"])
    assert info.value.code == 2
    assert acrl_main([]) == 2


def test_json_output(write_spec: SpecWriter, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(SMOKE), "-o", str(tmp_path / "b"), "--json")
    data = json.loads(out)
    assert code == 0 and data["ok"] and data["status"] == "created" and len(data["bundle_hash"]) == 64
    code, out, _ = run(capsys, str(write_spec({"rollout": {"batch_sise": 1}})), "--json")
    data = json.loads(out)
    assert code == 1 and not data["ok"]
    (diag,) = data["error"]["diagnostics"]
    assert (diag["key"], diag["hint"]) == ("rollout.batch_sise", 'did you mean "batch_size"?')
    assert diag["line"] > 0


def test_strict_turns_warnings_into_errors(write_spec: SpecWriter, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec({"agentcore": {"max_concurrent": 200}})
    code, out, _ = run(capsys, str(path), "-o", str(tmp_path / "w"), "--json")
    (warning,) = json.loads(out)["warnings"]
    assert (code, warning["severity"], warning["rule"], warning["key"]) == \
        (0, "warning", "ACRL-T002", "agentcore.max_concurrent")
    code, out, _ = run(capsys, str(path), "-o", str(tmp_path / "s"), "--strict", "--json")
    (error,) = json.loads(out)["error"]["diagnostics"]
    assert (code, error["severity"], error["rule"], error["key"]) == \
        (1, "error", "ACRL-T002", "agentcore.max_concurrent")
    assert not (tmp_path / "s").exists()


def test_another_specs_bundle_is_kept_unless_forced(write_spec: SpecWriter, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    assert run(capsys, str(write_spec()), "-o", str(out))[0] == 0
    assert run(capsys, str(write_spec()), "-o", str(out))[1].startswith("unchanged ")
    changed = write_spec({"rollout": {"batch_size": 64}})  # the same spec, edited: the edit loop
    code, stdout, _ = run(capsys, str(changed), "-o", str(out))
    assert code == 0 and stdout.startswith("replaced ")
    before = (out / "train.sh").read_bytes()
    other = write_spec({"experiment": {"id": "another-exp"}})
    code, stdout, _ = run(capsys, str(other), "-o", str(out), "--json")
    error = json.loads(stdout)["error"]
    assert (code, error["kind"]) == (3, "BundleExistsError") and "--force" in error["hint"]
    assert (out / "train.sh").read_bytes() == before
    code, stdout, _ = run(capsys, str(other), "-o", str(out), "--force")
    assert code == 0 and stdout.startswith("replaced ")
    assert b"another-exp" in (out / "train.sh").read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b", "spec.toml"]


def test_hand_edited_bundle_is_not_overwritten(write_spec: SpecWriter, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "b"
    run(capsys, str(write_spec()), "-o", str(out))
    (out / "notes.txt").write_text("mine")
    assert run(capsys, str(write_spec({"rollout": {"batch_size": 64}})), "-o", str(out))[0] == 3
    assert (out / "notes.txt").read_text() == "mine"


def test_force_never_replaces_a_directory_that_is_not_a_bundle(write_spec: SpecWriter, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    code, out, _ = run(capsys, str(write_spec()), "-o", str(precious), "--force", "--json")
    error = json.loads(out)["error"]
    assert (code, error["kind"]) == (3, "BundleExistsError") and "--force" not in error["hint"]
    assert (precious / "thesis.tex").read_text() == "years of work"
    (tmp_path / "file").write_text("x")
    assert run(capsys, str(write_spec()), "-o", str(tmp_path / "file"), "--force")[0] == 3


def test_unwritable_output_is_a_clear_error(write_spec: SpecWriter, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    if os.geteuid() == 0:
        target = Path("/proc/acrl-cannot-write-here")
    else:
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        target = locked / "b"
    code, _, err = run(capsys, str(write_spec()), "-o", str(target))
    assert code == 1 and err.startswith(f"{target}: ") and "Traceback" not in err
    code, out, _ = run(capsys, str(write_spec()), "-o", str(target), "--json")
    assert (code, json.loads(out)["error"]["kind"]) == (1, "BundleWriteError")


def test_internal_errors_print_no_traceback(capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    import acrl.compiler._pipeline.compile as compile_module

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(compile_module, "compile_source", boom)
    code, _, err = run(capsys, str(SMOKE), "--no-cache")  # a cached compile would not call compile_source
    assert code == 70 and "internal error: RuntimeError: kaboom" in err and "Traceback" not in err


def test_an_internal_error_never_shows_a_secret(capsys: pytest.CaptureFixture[str],
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug's message may quote an input: its credentials are masked like every other message's."""
    import acrl.compiler._pipeline.compile as compile_module

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("cannot reach http://admin:hunter2-Zq9@head:8265 with sk-abcdefghijklmnopqrstuvwxyz0123")

    monkeypatch.setattr(compile_module, "compile_source", boom)
    code, out, err = run(capsys, str(SMOKE), "--no-cache")
    assert code == 70 and "internal error: RuntimeError: cannot reach http://***@head:8265" in err
    assert "hunter2" not in out + err and "abcdefghijklmnop" not in out + err


def test_console_scripts_are_installed(tmp_path: Path) -> None:
    bindir = Path(sys.executable).parent
    for script in ("acrl-compile", "acrl"):
        assert (bindir / script).exists(), f"{script} is not installed next to {sys.executable}"
    proc = subprocess.run([str(bindir / "acrl"), "compile", str(SMOKE), "-o", str(tmp_path / "b")],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert (bindir / "acrl-compile").exists()
    proc = subprocess.run([str(bindir / "acrl-compile"), "--version"], capture_output=True, text=True, check=False)
    assert proc.stdout.strip().startswith("acrl ")


def test_json_errors_into_a_closed_pipe_print_no_traceback(tmp_path: Path) -> None:
    """`acrl-compile bad.toml --json | head -c 1`: the reader goes away while the error is printed."""
    bad = tmp_path / "bad.toml"
    bad.write_text(SMOKE.read_text(encoding="utf-8") + "\n[rollout]\n" + "".join(
        f"unknown_key_{i} = 1\n" for i in range(3000)), encoding="utf-8")  # a report larger than a pipe's buffer
    script = f'"$1" {shlex.quote(str(bad))} --json | head -c 1 >/dev/null; echo "status=${{PIPESTATUS[0]}}" >&2'
    compile_script = str(Path(sys.executable).parent / "acrl-compile")
    proc = subprocess.run(["bash", "-c", script, "bash", compile_script], capture_output=True, text=True, timeout=60)
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr, proc.stderr[-2000:]
    assert proc.stderr.strip().endswith("status=1")
