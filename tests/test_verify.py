"""`acrl verify` and acrl.compiler._review.verify: every file against the manifest, and the manifest
against itself. Bundles are copied from tests/golden/ or compiled here, then edited."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from acrl.compiler._cli.main import acrl_main
from acrl.compiler._pipeline.bundle import manifest_hash, sha256
from acrl.compiler._pipeline.compile import BUNDLE_FORMAT
from acrl.compiler._review.verify import READABLE_FORMATS, verify_bundle
from acrl.compiler._version import __version__
from conftest import REPO, SpecWriter, forge_manifest

GOLDEN = REPO / "tests" / "golden" / "gsm8k-qwen2.5-3b-smoke"


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    target = tmp_path / "bundle"
    shutil.copytree(GOLDEN, target)
    return target


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = acrl_main(["verify", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def rewrite_manifest(bundle: Path, **changes: object) -> None:
    """Edit manifest fields, leaving its bundle hash as it was."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest.update(changes)
    (bundle / "manifest.json").write_text(json.dumps(manifest))


def test_a_freshly_compiled_bundle_is_intact(tmp_path: Path, write_spec: SpecWriter,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert acrl_main(["compile", str(write_spec()), "-o", str(tmp_path / "b")]) == 0
    capsys.readouterr()
    manifest = json.loads((tmp_path / "b" / "manifest.json").read_text())
    code, out, err = run(capsys, str(tmp_path / "b"))
    assert (code, out, err) == (0, f"{tmp_path / 'b'}: intact, bundle sha256:{manifest['bundle_hash']}\n", "")


def test_modified_truncated_removed_and_added_files_are_each_listed(bundle: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    with open(bundle / "train.sh", "a") as f:
        f.write("echo extra\n")
    data = (bundle / "custom_config.yaml").read_bytes()
    (bundle / "custom_config.yaml").write_bytes(data[: len(data) // 2])
    (bundle / "spec.toml").unlink()
    (bundle / "notes.txt").write_text("hi\n")
    (bundle / "logs").mkdir()
    code, out, err = run(capsys, str(bundle))
    assert (code, err) == (1, "")
    assert out.splitlines() == [
        f"{bundle}: modified since it was compiled (5 differences)",
        "  modified: custom_config.yaml", "  modified: train.sh",
        "  removed:  spec.toml",
        "  added:    logs/", "  added:    notes.txt",
        "  fix: compile the spec again (acrl-compile SPEC -o DIR --force), or review the edit with `acrl diff`",
    ]
    result = verify_bundle(bundle)
    assert (result.modified, result.removed, result.added) == (
        ("custom_config.yaml", "train.sh"), ("spec.toml",), ("logs/", "notes.txt"))


def test_a_manifest_edited_to_match_an_edited_file_still_fails(bundle: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Updating one file's sha256 in the manifest is not enough: the bundle hash covers the list.

    What verify proves is only that the files match the manifest: a forger who rewrites the
    bundle_hash as well passes it (the manifest describes itself). Against that, only a hash
    recorded elsewhere (--expect-hash) or `acrl-compile --check` against the spec helps; see
    test_a_full_rehash_passes_verify_but_not_expect_hash."""
    (bundle / "train.sh").write_bytes((bundle / "train.sh").read_bytes() + b"echo pwned\n")
    manifest = json.loads((bundle / "manifest.json").read_text())
    files = dict(manifest["files"], **{"train.sh": sha256((bundle / "train.sh").read_bytes())})
    rewrite_manifest(bundle, files=files)
    result = verify_bundle(bundle)
    assert result.modified == () and not result.intact
    assert result.recomputed_hash == manifest_hash(dict(manifest, files=files))
    code, out, _ = run(capsys, str(bundle), "--json")
    data = json.loads(out)
    assert (code, data["manifest_hash_ok"], data["recomputed_hash"]) == (1, False, result.recomputed_hash)


def test_another_acrl_version_with_the_same_format_is_verified_and_noted(bundle: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    forge_manifest(bundle, acrl_version="0.0.9")
    code, out, _ = run(capsys, str(bundle))
    assert code == 0
    assert out.splitlines()[1] == (f"note: made by acrl 0.0.9 (this is acrl {__version__}); its bundle format "
                                   f"{BUNDLE_FORMAT} is one this acrl reads, so its hashes were checked")


def test_an_unreadable_bundle_format_is_an_error_naming_the_writer(bundle: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rewrite_manifest(bundle, acrl_version="9.0.0", bundle_format=99)
    code, out, err = run(capsys, str(bundle))
    assert (code, out) == (2, "")
    assert err.startswith(f"{bundle / 'manifest.json'}: bundle format 99, written by acrl 9.0.0; acrl {__version__} "
                          f"reads bundle format {BUNDLE_FORMAT}\n  fix: verify it with acrl 9.0.0")


@pytest.mark.parametrize(("damage", "message"), [
    ("delete", "manifest.json: missing: without its manifest a bundle cannot be verified"),
    ("truncate", "manifest.json:"),  # file:line:col: is not valid JSON
    ("list", "is not an acrl manifest (not a JSON object)"),
    ("no-files", "is not an acrl manifest: files is not an object of file name -> sha256"),
    ("no-format", "has no bundle_format (written by acrl 0.1.0?)"),
])
def test_a_missing_or_unparsable_manifest_is_a_clear_error(damage: str, message: str, bundle: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    path = bundle / "manifest.json"
    text = path.read_text()
    manifest = json.loads(text)
    if damage == "delete":
        path.unlink()
    elif damage == "truncate":
        path.write_text(text[: len(text) // 2])
    elif damage == "list":
        path.write_text("[]")
    elif damage == "no-files":
        rewrite_manifest(bundle, files=["train.sh"])
    else:
        manifest.pop("bundle_format")
        path.write_text(json.dumps(manifest))
    code, out, err = run(capsys, str(bundle))
    assert (code, out) == (2, "")
    assert message in err and "\n  fix: " in err and "Traceback" not in err
    if damage == "truncate":
        assert "is not valid JSON" in err


def test_not_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(tmp_path / "nope"))
    assert code == 2 and err.startswith(f"{tmp_path / 'nope'}: no such directory")
    (tmp_path / "file").write_text("")
    assert run(capsys, str(tmp_path / "file"))[0] == 2


def test_paths_named_by_the_manifest_are_never_opened(bundle: Path) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    files = dict(manifest["files"], **{"../outside": "0" * 64})
    manifest.update(files=files, bundle_hash=manifest_hash(dict(manifest, files=files)))
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    (bundle.parent / "outside").write_text("not part of the bundle")
    result = verify_bundle(bundle)
    assert result.removed == ("../outside",) and not result.intact


def test_a_train_sh_that_lost_its_mode_is_noted_not_modified(bundle: Path) -> None:
    os.chmod(bundle / "train.sh", 0o644)
    result = verify_bundle(bundle)
    assert result.intact
    assert result.notes == ("train.sh is not executable (run it with `bash train.sh`, or chmod +x it)",)


def test_json(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bundle / "spec.toml").unlink()
    code, out, _ = run(capsys, str(bundle), "--json")
    data = json.loads(out)
    assert code == 1
    assert data == {"path": str(bundle), "intact": False, "acrl_version": __version__, "bundle_format": BUNDLE_FORMAT,
                    "bundle_hash": json.loads((bundle / "manifest.json").read_text())["bundle_hash"],
                    "added": [], "removed": ["spec.toml"], "modified": [], "manifest_hash_ok": True,
                    "recomputed_hash": None, "not_regular": [], "derived_mismatch": [], "expected_hash": None,
                    "expected_hash_ok": True, "unsafe_modes": [], "notes": []}


def test_the_compiler_writes_a_format_verify_reads() -> None:
    assert BUNDLE_FORMAT in READABLE_FORMATS


def test_verify_stays_light_for_the_executor() -> None:
    """The executor imports verify before every run: no Jinja, cattrs, YAML or TOML writer."""
    import json as _json
    import subprocess
    import sys

    code = "import sys, json\nimport acrl.compiler._review.verify\nprint(json.dumps(sorted(sys.modules)))"
    loaded = _json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                        check=True).stdout)
    assert not [m for m in loaded if m.split(".")[0] in ("jinja2", "cattrs", "yaml", "tomli_w")]


def rehash(bundle: Path) -> dict[str, object]:
    """Rewrite the manifest's file list and bundle_hash to match the files, as a forger would."""
    return forge_manifest(bundle)


def test_a_full_rehash_passes_verify_but_not_expect_hash(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    recorded = json.loads((bundle / "manifest.json").read_text())["bundle_hash"]
    assert run(capsys, str(bundle), "--expect-hash", recorded)[0] == 0
    assert run(capsys, str(bundle), "--expect-hash", f"sha256:{recorded.upper()}")[0] == 0
    with open(bundle / "train.sh", "a") as f:
        f.write("echo pwned\n")
    forged = rehash(bundle)
    assert verify_bundle(bundle).intact  # the manifest describes itself: this cannot be caught from inside
    code, out, err = run(capsys, str(bundle), "--expect-hash", recorded)
    assert (code, err) == (1, "")
    assert f"  bundle hash: the files hash to sha256:{forged['bundle_hash']}, not the expected sha256:{recorded}" in out
    data = json.loads(run(capsys, str(bundle), "--expect-hash", recorded, "--json")[1])
    assert (data["intact"], data["expected_hash"], data["expected_hash_ok"]) == (False, recorded, False)


def test_expect_hash_is_the_hash_of_the_files_not_the_manifests_claim(bundle: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    forged = "0" * 64
    rewrite_manifest(bundle, bundle_hash=forged)
    code, out, _ = run(capsys, str(bundle), "--expect-hash", forged, "--json")
    data = json.loads(out)
    assert (code, data["expected_hash"], data["expected_hash_ok"]) == (1, forged, False)


@pytest.mark.parametrize("target", ["same", "other"])
def test_a_symlink_is_never_followed(target: str, bundle: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path / "elsewhere.sh"
    data = (bundle / "train.sh").read_bytes()
    elsewhere.write_bytes(data if target == "same" else data + b"echo pwned\n")
    (bundle / "train.sh").unlink()
    (bundle / "train.sh").symlink_to(elsewhere)
    (bundle / "extra").symlink_to(tmp_path)
    result = verify_bundle(bundle)
    assert not result.intact
    assert (result.modified, result.removed, result.added) == ((), (), ())
    assert result.not_regular == ("extra (symbolic link)", "train.sh (symbolic link)")
    code, out, _ = run(capsys, str(bundle), "--json")
    assert (code, json.loads(out)["not_regular"]) == (1, ["extra (symbolic link)", "train.sh (symbolic link)"])


def test_a_fifo_is_not_a_regular_file(bundle: Path) -> None:
    (bundle / "spec.toml").unlink()
    os.mkfifo(bundle / "spec.toml")
    result = verify_bundle(bundle)  # does not block on the FIFO
    assert result.not_regular == ("spec.toml (special file)",) and result.removed == () and not result.intact


def test_a_symlinked_manifest_is_not_read(bundle: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bundle / "manifest.json").rename(tmp_path / "manifest.json")
    (bundle / "manifest.json").symlink_to(tmp_path / "manifest.json")
    code, out, err = run(capsys, str(bundle))
    assert (code, out) == (2, "") and err.startswith(f"{bundle / 'manifest.json'}: is not a regular file")


def test_a_forged_derived_section_does_not_verify(bundle: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = json.loads((bundle / "manifest.json").read_text())
    forge_manifest(bundle, derived=dict(manifest["derived"], global_batch_size=999))  # and its hash
    assert verify_bundle(bundle).intact  # the executor's check: hashes only (a forger can rehash)
    result = verify_bundle(bundle, check_derived=True)
    assert result.derived_mismatch == ("global_batch_size: 999 in the manifest, spec.toml gives 256",)
    code, out, _ = run(capsys, str(bundle))
    assert code == 1
    assert ("  manifest.json: derived section does not match spec.toml (global_batch_size: 999 in the manifest, "
            "spec.toml gives 256)") in out.splitlines()


def test_the_derived_section_is_computed_from_spec_toml_as_the_compiler_does(tmp_path: Path,
                                                                              write_spec: SpecWriter) -> None:
    from acrl.compiler._review.view import derived_from_spec

    assert acrl_main(["compile", str(write_spec({"cluster": {"colocate": False, "rollout_num_gpus": 4}})),
                      "-o", str(tmp_path / "b")]) == 0
    for directory in [tmp_path / "b", *sorted((REPO / "tests" / "golden").iterdir())]:
        manifest = json.loads((directory / "manifest.json").read_text())
        assert derived_from_spec((directory / "spec.toml").read_bytes()) == manifest["derived"], directory
        assert verify_bundle(directory, check_derived=True).derived_mismatch == ()


def test_warnings_are_covered_by_the_bundle_hash(bundle: Path) -> None:
    """The manifest's compile warnings are informational, and covered by the bundle hash like every
    other manifest field (bundle format 2): forged warnings make the bundle modified."""
    rewrite_manifest(bundle, warnings=[{"severity": "warning", "message": "forged"}])
    result = verify_bundle(bundle, check_derived=True)
    assert not result.intact and result.recomputed_hash is not None
