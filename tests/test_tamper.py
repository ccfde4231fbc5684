"""Tampering with a bundle (issue 11): every manifest field is covered by the bundle hash, an
exp_id is one safe path component, unsafe file modes are flagged, and odd paths or manifests give
located errors, never an internal error. Bundles are copied from tests/golden/, then edited; `acrl
run` is refused in-process here (before any check runs) and end to end in tests/test_run.py."""

from __future__ import annotations

import io
import json
import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acrl.compiler._cli.main import acrl_main, compile_main
from acrl.compiler._pipeline import reading as _bundle
from acrl.compiler._pipeline.bundle import manifest_hash, sha256
from acrl.compiler._pipeline.compile import BUNDLE_FORMAT
from acrl.compiler._review.verify import is_safe_exp_id, verify_bundle
from acrl.compiler.errors import BundleReadError
from acrl.runtime._run import ModifiedBundleError, RunOptions, run_bundle
from conftest import REPO, SpecWriter, forge_manifest

GOLDEN = REPO / "tests" / "golden"
GOLDENS = sorted(p.name for p in GOLDEN.iterdir())


def copy_golden(tmp_path: Path, name: str = "gsm8k-qwen2.5-3b-smoke") -> Path:
    target = tmp_path / "bundle"
    shutil.copytree(GOLDEN / name, target)
    for path in [target, *target.iterdir()]:  # the modes acrl-compile writes, whatever the checkout's umask
        os.chmod(path, 0o755 if path.is_dir() or path.name == "train.sh" else 0o644)
    return target


def verify_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = acrl_main(["verify", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def leaves(node: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """The path of every value in a JSON document (a list's items by index), containers included."""
    if path:
        yield path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from leaves(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from leaves(value, (*path, str(i)))


def set_at(node: Any, path: tuple[str, ...], value: Any) -> None:
    for step in path[:-1]:
        node = node[int(step)] if isinstance(node, list) else node[step]
    if isinstance(node, list):
        node[int(path[-1])] = value
    else:
        node[path[-1]] = value


def changed(value: Any) -> Any:
    """A value of the same kind that differs from ``value``."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "x" if value else "x"
    if isinstance(value, list):
        return [*value, "x"]
    if isinstance(value, dict):
        return {**value, "forged": 1}
    return "x"


FIELDS = [(name, path) for name in GOLDENS
          for path in leaves(json.loads((GOLDEN / name / "manifest.json").read_text()))
          if path[0] != "bundle_hash"]


def test_the_table_covers_every_top_level_field_of_every_golden() -> None:
    for name in GOLDENS:
        manifest = json.loads((GOLDEN / name / "manifest.json").read_text())
        assert {path[0] for n, path in FIELDS if n == name} == set(manifest) - {"bundle_hash"}
    assert {"exp_id", "derived", "warnings", "spec", "slime", "model_args", "files"} <= {p[0] for _, p in FIELDS}


@pytest.mark.parametrize(("golden", "path"), FIELDS, ids=[f"{n}:{'.'.join(p)}" for n, p in FIELDS])
def test_editing_any_manifest_field_is_detected_by_verify_and_run(golden: str, path: tuple[str, ...],
                                                                  tmp_path: Path) -> None:
    """Every value in the manifest (every field, every nested key, every list item) is covered by
    the bundle hash: an edit that keeps the hash is detected by `acrl verify` and refused by `acrl
    run` (whose verification does not check the derived section against spec.toml)."""
    bundle = copy_golden(tmp_path, golden)
    manifest = json.loads((bundle / "manifest.json").read_text())
    node: Any = manifest
    for step in path:
        node = node[int(step)] if isinstance(node, list) else node[step]
    set_at(manifest, path, changed(node))
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    try:
        result = verify_bundle(bundle)
    except BundleReadError:  # no longer an acrl manifest at all (a format, a version, an unsafe exp_id)
        with pytest.raises(BundleReadError):
            run_bundle(RunOptions(str(bundle), dry_run=True), out=io.StringIO())
        return
    assert not result.intact and result.recomputed_hash is not None
    assert (result.modified, result.added, result.removed, result.not_regular) == ((), (), (), ()) or \
        path[0] == "files"
    with pytest.raises(ModifiedBundleError):
        run_bundle(RunOptions(str(bundle), dry_run=True), out=io.StringIO())


json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
                           max_leaves=8)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(key=st.sampled_from(["derived", "warnings", "exp_id", "slime", "model_args", "spec", "overrides", "new"]),
       value=json_values)
def test_any_value_in_any_field_changes_the_bundle_hash(key: str, value: Any) -> None:
    manifest = json.loads((GOLDEN / "qwen3-4b-multiturn" / "manifest.json").read_text())
    before = manifest_hash(manifest)
    assert before == manifest["bundle_hash"]
    edited = dict(manifest, **{key: value})
    assert (manifest_hash(edited) == before) == (edited == manifest)
    # the canonical form is that of the parsed manifest: how the file is laid out does not matter
    assert manifest_hash(json.loads(json.dumps(edited, indent=3))) == manifest_hash(edited)


def test_a_reformatted_manifest_is_still_intact(tmp_path: Path) -> None:
    bundle = copy_golden(tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=False))
    assert verify_bundle(bundle).intact


def test_a_manifest_with_a_key_twice_is_not_a_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """json.loads keeps the last of two equal keys, other readers the first: refuse either way."""
    bundle = copy_golden(tmp_path)
    text = (bundle / "manifest.json").read_text()
    (bundle / "manifest.json").write_text(text.replace('"exp_id": ', '"exp_id": "../x", "exp_id": ', 1))
    code, out, err = verify_cli(capsys, str(bundle))
    assert (code, out) == (2, "")
    assert err.startswith(f"{bundle / 'manifest.json'}: is not an acrl manifest: the key 'exp_id' appears twice")


def old_format_bundle(tmp_path: Path) -> Path:
    """A golden bundle as acrl wrote it in bundle format 1: the hash of the file list only."""
    bundle = copy_golden(tmp_path)
    manifest = json.loads((bundle / "manifest.json").read_text())
    pairs = sorted([name, digest] for name, digest in manifest["files"].items())
    manifest.update(bundle_format=1, acrl_version="0.0.9",
                    bundle_hash=sha256(json.dumps(pairs, separators=(",", ":")).encode()))
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    return bundle


def test_a_bundle_of_an_older_format_asks_for_a_recompile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert BUNDLE_FORMAT == 2
    bundle = old_format_bundle(tmp_path)
    code, out, err = verify_cli(capsys, str(bundle))
    assert (code, out) == (2, "")
    first, fix = err.rstrip("\n").split("\n")
    assert first.startswith(f"{bundle / 'manifest.json'}: bundle format 1: compiled by an older acrl (acrl 0.0.9)")
    assert fix == "  fix: compile the spec again with this acrl: acrl-compile SPEC -o DIR --force"
    with pytest.raises(BundleReadError):
        run_bundle(RunOptions(str(bundle), dry_run=True, allow_modified=True))


# --- exp_id: one safe path component -------------------------------------------------------------

UNSAFE_EXP_IDS: list[Any] = ["../x", "..", ".", "a/b", "/abs", "", "a\\b", "x\n", "-x", ".hidden", "a..b",
                             "a" * 65, "é", 5, None, ["x"]]


def test_the_exp_id_check_is_the_specs_rule() -> None:
    from acrl.compiler._pipeline.validate.toolkit import _EXP_ID
    from acrl.compiler._review.verify import EXP_ID

    assert EXP_ID.pattern.strip("^$") == _EXP_ID.pattern.strip("^$")
    assert all(is_safe_exp_id(v) for v in ["a", "gsm8k-qwen2.5-3b-smoke", "A_1.b", "a" * 64])
    assert not any(is_safe_exp_id(v) for v in UNSAFE_EXP_IDS)


@pytest.mark.parametrize("exp_id", UNSAFE_EXP_IDS, ids=repr)
def test_an_unsafe_exp_id_is_refused_even_with_a_recomputed_hash(exp_id: Any, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    bundle = copy_golden(tmp_path)
    forge_manifest(bundle, exp_id=exp_id)
    code, out, err = verify_cli(capsys, str(bundle))
    assert (code, out) == (2, "")
    assert err.startswith(f"{bundle / 'manifest.json'}: is not an acrl manifest: exp_id ") and "\n  fix: " in err
    runs = tmp_path / "runs"
    with pytest.raises(BundleReadError):
        run_bundle(RunOptions(str(bundle), dry_run=True, allow_modified=True, runs_dir=str(runs)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle"]


# --- modes ---------------------------------------------------------------------------------------

UNSAFE_MODES = [("train.sh", 0o775, "group-writable"), ("train.sh", 0o757, "other-writable"),
                ("train.sh", 0o4755, "set-user-ID"), ("train.sh", 0o2755, "set-group-ID"),
                ("train.sh", 0o1755, "sticky"), ("spec.toml", 0o666, "group-writable, other-writable"),
                ("model_args.sh", 0o664, "group-writable"), ("manifest.json", 0o646, "other-writable"),
                ("", 0o777, "group-writable, other-writable"), ("", 0o1777, "group-writable, other-writable, sticky")]


@pytest.fixture
def shared_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundle's group has members other than its owner (not a user-private group)."""
    monkeypatch.setattr(_bundle, "_private_group", lambda uid, gid: False)


@pytest.fixture
def private_group(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bundle's group is its owner's private group (the scheme under which umask is 002)."""
    monkeypatch.setattr(_bundle, "_private_group", lambda uid, gid: True)


@pytest.mark.usefixtures("shared_group")
@pytest.mark.parametrize(("name", "mode", "what"), UNSAFE_MODES)
def test_an_unsafe_mode_is_flagged_by_verify(name: str, mode: int, what: str, tmp_path: Path) -> None:
    bundle = copy_golden(tmp_path)
    os.chmod(bundle / name, mode)
    result = verify_bundle(bundle)
    assert not result.intact
    assert result.unsafe_modes == (f"{name or './'} {mode:04o} ({what})",)
    assert result.as_json()["unsafe_modes"] == [f"{name or './'} {mode:04o} ({what})"]
    with pytest.raises(ModifiedBundleError):
        run_bundle(RunOptions(str(bundle), dry_run=True), out=io.StringIO())


@pytest.mark.usefixtures("shared_group")
def test_the_unsafe_mode_report_and_its_fix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = copy_golden(tmp_path)
    os.chmod(bundle / "train.sh", 0o4777)
    os.chmod(bundle / "spec.toml", 0o664)
    code, out, err = verify_cli(capsys, str(bundle))
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        f"{bundle}: modified since it was compiled (2 differences)",
        "  unsafe mode: spec.toml 0664 (group-writable)",
        "  unsafe mode: train.sh 4777 (group-writable, other-writable, set-user-ID)",
        f"  fix: chmod 0644 {bundle / 'spec.toml'}; chmod 0755 {bundle / 'train.sh'}",
    ]


@pytest.mark.parametrize("mode", [0o755, 0o700, 0o750, 0o555])
def test_modes_nobody_else_can_write_are_fine(mode: int, tmp_path: Path) -> None:
    bundle = copy_golden(tmp_path)
    os.chmod(bundle / "train.sh", mode)
    os.chmod(bundle, mode | 0o700)
    assert verify_bundle(bundle).unsafe_modes == ()


@pytest.fixture
def compiled(tmp_path: Path, write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> tuple[Path, Path]:
    spec, out = write_spec(), tmp_path / "b"
    assert compile_main([str(spec), "-o", str(out)]) == 0
    capsys.readouterr()
    return spec, out


@pytest.mark.usefixtures("private_group")
@pytest.mark.parametrize(("mode", "what"), [(0o775, "group-writable"), (0o1775, "group-writable, sticky"),
                                            (0o2775, "set-group-ID")])
def test_group_write_in_the_owners_private_group_is_safe(mode: int, what: str, tmp_path: Path) -> None:
    """Under the user-private-group scheme (umask 002) nobody but the owner can write a group-writable
    file; only the other unsafe bits are reported."""
    bundle = copy_golden(tmp_path)
    os.chmod(bundle / "train.sh", mode)
    result = verify_bundle(bundle)
    expected = () if what == "group-writable" else (f"train.sh {mode:04o} ({what.removeprefix('group-writable, ')})",)
    assert result.unsafe_modes == expected
    assert result.intact == (not expected)


def test_an_unknown_group_is_not_private() -> None:
    assert not _bundle._private_group(os.getuid(), 2**31 - 7)
    assert not _bundle._private_group(2**31 - 7, os.getgid())


@pytest.mark.usefixtures("private_group")
@pytest.mark.parametrize("umask", [0o002, 0o077, 0o022])
def test_a_checkout_under_any_umask_is_not_stale(umask: int, compiled: tuple[Path, Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """git keeps only the execute bit: a bundle checked out under umask 002 (0775/0664) or 077
    (0700/0600) is what the compile writes, for --check, verify and the write that leaves it as it is."""
    spec, out = compiled
    for path in [out, *out.iterdir()]:
        os.chmod(path, (0o777 if path.is_dir() or path.name == "train.sh" else 0o666) & ~umask)
    assert compile_main(["--check", str(spec), "-o", str(out)]) == 0, capsys.readouterr()
    assert verify_bundle(out).intact
    assert compile_main([str(spec), "-o", str(out)]) == 0
    assert "unchanged" in capsys.readouterr().out


@pytest.mark.usefixtures("shared_group")
@pytest.mark.parametrize(("name", "mode"), [("train.sh", 0o775), ("train.sh", 0o4755), ("train.sh", 0o644),
                                            ("spec.toml", 0o666), ("spec.toml", 0o2644),
                                            ("manifest.json", 0o755), ("./", 0o777), ("./", 0o1755)])
def test_check_compares_modes_with_what_the_compile_writes(name: str, mode: int, compiled: tuple[Path, Path],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = compiled
    assert compile_main(["--check", str(spec), "-o", str(out)]) == 0
    capsys.readouterr()
    wanted = stat.S_IMODE((out / name).stat().st_mode)
    os.chmod(out / name, mode)
    code = compile_main(["--check", str(spec), "-o", str(out)])
    text, err = capsys.readouterr()
    assert code == 1, text + err
    assert f"  {name}: mode {mode:04o}, the compile writes {wanted:04o}" in text.splitlines()
    assert wanted == (0o755 if name in ("train.sh", "./") else 0o644)


# --- odd paths and manifests: located errors, never an internal error -----------------------------

def odd_path(kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if kind == "proc-self":
        return Path("/proc/self")
    if kind == "missing":
        return tmp_path / "nope"
    if kind == "file":
        (tmp_path / "file").write_text("x")
        return tmp_path / "file"
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo"
    bundle = copy_golden(tmp_path)
    real = os.scandir

    def denied(path: Any) -> Any:
        if os.fspath(path) == str(bundle):
            raise PermissionError(13, "Permission denied", str(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", denied)  # chmod 000 does not stop root
    return bundle


@pytest.mark.parametrize(("kind", "reason"), [
    ("proc-self", "manifest.json: missing"), ("missing", "no such directory"), ("file", "is not a directory"),
    ("fifo", "is not a directory"), ("unlistable", "cannot be listed: Permission denied"),
])
def test_verify_of_an_odd_path_is_a_located_error(kind: str, reason: str, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    path = odd_path(kind, tmp_path, monkeypatch)
    code, out, err = verify_cli(capsys, str(path))
    assert (code, out) == (2, ""), err
    assert err.startswith(str(path)) and reason in err.splitlines()[0] and "\n  fix: " in err
    assert "internal error" not in err and "Traceback" not in err


def test_an_unreadable_file_in_a_bundle_is_reported_not_raised(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from acrl.compiler._pipeline import reading as _bundle

    bundle = copy_golden(tmp_path)
    real = _bundle._read_regular

    def failing(path: str) -> bytes | None:
        if path.endswith("spec.toml"):
            raise OSError(22, "Invalid argument")  # what reading /proc/self/pagemap gives
        return real(path)

    monkeypatch.setattr(_bundle, "_read_regular", failing)
    result = verify_bundle(bundle)
    assert result.not_regular == ("spec.toml (unreadable: Invalid argument)",) and not result.intact


@pytest.mark.parametrize("text", ["[]", '"x"', "3", "null", "true", "{", '{"a": 1, "a": 2}', "\xff"])
def test_check_against_a_manifest_that_is_not_an_object(text: str, compiled: tuple[Path, Path],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    spec, out = compiled
    (out / "manifest.json").write_bytes(text.encode("latin-1"))
    code = compile_main(["--check", str(spec), "-o", str(out)])
    text_out, err = capsys.readouterr()
    assert code == 1, err
    assert "internal error" not in err and "Traceback" not in err
    assert len([line for line in text_out.splitlines() if line.startswith("  manifest.json: differs")]) == 1
    assert f"not equivalent: {out} cannot be verified: {out / 'manifest.json'}" in text_out
    code = compile_main(["--check", str(spec), "-o", str(out), "--json"])
    data = json.loads(capsys.readouterr()[0])
    assert code == 1 and data["up_to_date"] is False


@pytest.mark.parametrize("text", ["[]", '"x"', "3", "null"])
def test_verify_and_run_against_a_manifest_that_is_not_an_object(text: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    bundle = copy_golden(tmp_path)
    (bundle / "manifest.json").write_text(text)
    code, out, err = verify_cli(capsys, str(bundle))
    assert (code, out) == (2, "")
    assert err.startswith(f"{bundle / 'manifest.json'}: is not an acrl manifest (not a JSON object)")
    with pytest.raises(BundleReadError):
        run_bundle(RunOptions(str(bundle), dry_run=True, allow_modified=True))


@pytest.mark.usefixtures("shared_group")
@pytest.mark.parametrize(("name", "mode"), [("train.sh", 0o775), ("spec.toml", 0o666), ("./", 0o777),
                                            ("train.sh", 0o644)])
def test_force_restores_the_modes_check_asks_for(name: str, mode: int, compiled: tuple[Path, Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """--check's fix for a mode (acrl-compile SPEC -o DIR --force) works: the bundle is rewritten. Since
    the files are the compiled ones, nothing is lost, and compiling without --force restores the modes too."""
    spec, out = compiled
    os.chmod(out / name, mode)
    assert compile_main([str(spec), "-o", str(out)]) == 0
    assert capsys.readouterr().out.endswith("\n  no differences: only the files' modes were restored\n")
    assert compile_main(["--check", str(spec), "-o", str(out)]) == 0
    os.chmod(out / name, mode)
    assert compile_main([str(spec), "-o", str(out), "--force"]) == 0
    capsys.readouterr()
    assert compile_main(["--check", str(spec), "-o", str(out)]) == 0
    assert verify_bundle(out).intact
