"""`acrl-compile --check SPEC -o DIR`, `acrl check-bundles` and the pre-commit hook: a stale,
hand-edited or missing bundle fails with the differences, and nothing is ever written."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
import yaml

from acrl.compiler._cli.main import acrl_main, compile_main
from conftest import REPO, SpecWriter


def run(capsys: pytest.CaptureFixture[str], *argv: str, main=compile_main) -> tuple[int, str, str]:  # type: ignore[no-untyped-def]
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def snapshot(root: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file under ``root`` with its bytes, mode and mtime: what "writes nothing" compares."""
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"", p.stat().st_mode, p.stat().st_mtime_ns)
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def compiled(tmp_path: Path, write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    """(spec, bundle) with the bundle freshly compiled from the spec."""
    spec = write_spec()
    assert compile_main([str(spec), "-o", str(tmp_path / "bundle")]) == 0
    capsys.readouterr()
    return spec, tmp_path / "bundle"


def test_an_up_to_date_bundle_passes_and_nothing_is_written(compiled: tuple[Path, Path], tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    spec, bundle = compiled
    cache = Path(os.environ["XDG_CACHE_HOME"])
    before, cache_before = snapshot(tmp_path), snapshot(cache)
    code, out, err = run(capsys, "--check", str(spec), "-o", str(bundle))
    assert (code, out, err) == (0, f"{bundle} is up to date with {spec}\n", "")
    assert run(capsys, "compile", "--check", str(spec), "-o", str(bundle), main=acrl_main)[0] == 0
    assert snapshot(tmp_path) == before
    assert snapshot(cache) == cache_before  # the compile cache is neither read nor written


def test_a_stale_bundle_fails_with_the_semantic_diff_and_the_files(compiled: tuple[Path, Path], tmp_path: Path,
                                                                   write_spec: SpecWriter,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    spec, bundle = compiled
    write_spec({"rollout": {"batch_size": 64}})  # the spec changed; the bundle was not recompiled
    before = snapshot(tmp_path)
    code, out, err = run(capsys, "--check", str(spec), "-o", str(bundle))
    assert (code, err) == (1, "")
    assert f"--- {bundle}\n+++ {spec} (compiled)\n" in out
    assert "  [batch arithmetic]\n    ~ --global-batch-size: 256 -> 512\n    ~ --rollout-batch-size: 32 -> 64\n" in out
    assert "  ~ samples per rollout: 256 -> 512\n" in out
    assert "does not match its manifest" not in out  # stale, not hand-edited
    files = out[out.index("files that differ byte for byte:\n"):].split("\n\n")[0].splitlines()[1:]
    assert files == ["  manifest.json: differs (bundle_hash, derived.global_batch_size, "
                     "derived.samples_per_rollout, spec.sha256)",
                     "  spec.toml: differs", "  train.sh: differs"]
    assert out.rstrip().endswith(f"fix: acrl-compile {spec} -o {bundle} (and commit the result), "
                                 f"or undo the edit in {bundle}")  # no --force: the bundle of the spec, intact
    assert snapshot(tmp_path) == before


def test_a_hand_edited_bundle_fails_and_says_so(compiled: tuple[Path, Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    spec, bundle = compiled
    train = bundle / "train.sh"
    train.write_text(train.read_text().replace("  --lr 1e-06\n", "  --lr 1e-05\n"))
    code, out, _ = run(capsys, "--check", str(spec), "-o", str(bundle), "--json")
    result = json.loads(out)
    assert code == 1 and result["up_to_date"] is False and result["byte_differences"] == ["train.sh: differs"]
    # committed -> what the spec compiles to, in its review group
    assert result["diff"]["sections"]["flags"] == [
        {"key": "--lr", "group": "optimizer", "change": "changed", "before": ["1e-05"], "after": ["1e-06"]}]
    assert result["diff"]["equivalent"] is False and len(result["diff"]["unverified"]) == 1
    assert result["diff"]["unverified"][0].startswith(f"{bundle} does not match its manifest (modified train.sh)")


def test_only_a_mode_or_an_extra_file_is_still_a_failure(compiled: tuple[Path, Path],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    spec, bundle = compiled
    os.chmod(bundle / "train.sh", 0o644)
    code, out, _ = run(capsys, "--check", str(spec), "-o", str(bundle), "--json")
    assert code == 1 and json.loads(out)["byte_differences"] == ["train.sh: mode 0644, the compile writes 0755"]
    os.chmod(bundle / "train.sh", 0o755)
    (bundle / "notes.txt").write_text("hi")
    code, out, _ = run(capsys, "--check", str(spec), "-o", str(bundle), "--json")
    result = json.loads(out)
    assert code == 1 and result["byte_differences"] == [f"notes.txt: in {bundle}, not in the compiled bundle"]
    assert [c["key"] for c in result["diff"]["sections"]["files"]] == ["notes.txt"]


def test_a_missing_bundle_fails_and_is_not_created(tmp_path: Path, write_spec: SpecWriter,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec()
    code, out, err = run(capsys, "--check", str(spec), "-o", str(tmp_path / "nope"))
    assert (code, err) == (1, "")
    assert out == (f"{tmp_path / 'nope'} does not exist: it should hold the bundle {spec} compiles to\n"
                   f"fix: acrl-compile {spec} -o {tmp_path / 'nope'} (and commit the result)\n")
    assert not (tmp_path / "nope").exists()


def test_check_json(compiled: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    spec, bundle = compiled
    (bundle / "spec.toml").unlink()
    code, out, _ = run(capsys, "--check", str(spec), "-o", str(bundle), "--json")
    data = json.loads(out)
    assert code == 1
    assert (data["ok"], data["up_to_date"], data["spec"], data["bundle"]) == (False, False, str(spec), str(bundle))
    assert data["byte_differences"] == [f"spec.toml: missing from {bundle}"]
    assert {c["key"]: c["after"] for c in data["diff"]["sections"]["files"]} == {"spec.toml": "present"}


def test_check_with_force_is_a_usage_error(compiled: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    spec, bundle = compiled
    code, out, err = run(capsys, "--check", "--force", str(spec), "-o", str(bundle))
    assert (code, out) == (2, "") and err.endswith("\n  fix: drop --force\n")
    code, out, _ = run(capsys, "--check", "--force", str(spec), "-o", str(bundle), "--json")
    assert code == 2 and json.loads(out)["error"]["hint"] == "drop --force"


def test_an_invalid_spec_fails_the_check(compiled: tuple[Path, Path], write_spec: SpecWriter,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    spec, bundle = compiled
    write_spec({"rollout": {"batch_size": 0}})
    code, _, err = run(capsys, "--check", str(spec), "-o", str(bundle))
    assert code == 1 and re.search(rf"^{re.escape(str(spec))}:\d+:\d+: error: \[rollout\] batch_size: ", err, re.M)
    code, out, _ = run(capsys, "--check", str(spec), "-o", str(bundle), "--json")
    assert code == 1 and [d["key"] for d in json.loads(out)["error"]["diagnostics"]] == ["rollout.batch_size"]


def test_check_bundles_checks_every_spec_against_its_exp_id(tmp_path: Path, write_spec: SpecWriter,
                                                            capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "specs").mkdir()
    for name in ("one", "two"):
        (tmp_path / "specs" / f"{name}.toml").write_text(
            write_spec({"experiment": {"id": name}}, name=f"{name}.toml").read_text())
        assert compile_main([f"specs/{name}.toml"]) == 0  # bundles/<exp_id>
    capsys.readouterr()
    code, out, err = run(capsys, "check-bundles", main=acrl_main)
    assert (code, err) == (0, "")
    assert out.splitlines() == ["bundles/one is up to date with specs/one.toml",
                                "bundles/two is up to date with specs/two.toml"]
    shutil.rmtree(tmp_path / "bundles" / "two")
    code, out, err = run(capsys, "check-bundles", main=acrl_main)
    assert code == 1 and "bundles/two does not exist" in out
    assert err == "1 of 2 bundle(s) are not what their specs compile to\n"
    code, out, _ = run(capsys, "check-bundles", "specs/one.toml", "--json", main=acrl_main)
    assert code == 0 and [r["bundle"] for r in json.loads(out)["results"]] == ["bundles/one"]
    shutil.copytree(tmp_path / "bundles", tmp_path / "elsewhere")
    assert run(capsys, "check-bundles", "specs/one.toml", "--bundles-dir", "elsewhere", main=acrl_main)[0] == 0


def test_check_bundles_without_specs_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, err = run(capsys, "check-bundles", main=acrl_main)
    assert (code, out) == (2, "") and err.startswith("acrl check-bundles: ")
    code, out, _ = run(capsys, "check-bundles", "--json", main=acrl_main)
    error = json.loads(out)["error"]
    assert code == 2 and error["kind"] == "UsageError" and "acrl check-bundles" in error["hint"]
    assert err == f"{error['message']}\n"


def test_the_pre_commit_hook_runs_check_bundles() -> None:
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "acrl-check"
    assert (hook["entry"], hook["language"], hook["pass_filenames"]) == ("acrl check-bundles", "python", False)
    for path in ("specs/x.toml", "bundles/x/train.sh", "bundles/x/custom_config.yaml", "bundles/x/manifest.json"):
        assert re.search(hook["files"], path), path


def test_docs_show_commands_that_exist(capsys: pytest.CaptureFixture[str]) -> None:
    """Every `acrl ...` and `acrl-compile ...` command line in docs/review.md parses."""
    text = (REPO / "docs" / "review.md").read_text()
    commands = re.findall(r"^\s*(?:\$ |- run: |run: |entry: )?(acrl(?:-compile)? [^\n#|>]*)", text, re.M)
    assert any(c.startswith("acrl diff") for c in commands) and any("--check" in c for c in commands)
    for command in commands:
        words = command.split()
        main = compile_main if words[0] == "acrl-compile" else acrl_main
        words = [w.strip('"') for w in words[1:]]
        with pytest.raises(SystemExit) as info:
            main([w for w in words if not w.startswith("$")] + ["--help"])
        assert info.value.code == 0, command
    capsys.readouterr()


def test_a_symlink_in_the_bundle_is_never_followed(compiled: tuple[Path, Path], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """train.sh replaced by a link to an identical file: --check fails, and compiling again does
    not call the bundle unchanged; with --force the link is replaced, its target left alone."""
    spec, bundle = compiled
    elsewhere = tmp_path / "elsewhere.sh"
    elsewhere.write_bytes((bundle / "train.sh").read_bytes())
    (bundle / "train.sh").unlink()
    (bundle / "train.sh").symlink_to(elsewhere)
    code, out, _ = run(capsys, "--check", str(spec), "-o", str(bundle))
    assert code == 1
    assert "  train.sh/!: in" in out and "  train.sh: missing from" in out
    assert f"not equivalent: {bundle} does not match its manifest (not a regular file train.sh (symbolic link))" \
        in out
    assert "  ~ train.sh: present -> " not in out and "train.sh: not a regular file (symbolic link) -> present" in out
    code, _, err = run(capsys, str(spec), "-o", str(bundle))
    assert code == 3 and "was modified by hand since it was compiled (not a regular file: train.sh)" in err
    assert run(capsys, str(spec), "-o", str(bundle), "--force")[0] == 0
    assert not (bundle / "train.sh").is_symlink() and elsewhere.read_bytes() == (bundle / "train.sh").read_bytes()
    assert run(capsys, "--check", str(spec), "-o", str(bundle))[0] == 0
