"""`acrl verify` and acrl.compiler._verify: every file against the manifest, and the manifest
against itself. Bundles are copied from tests/golden/ or compiled here, then edited."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from acrl.compiler._bundle import bundle_hash, sha256
from acrl.compiler._cli import acrl_main
from acrl.compiler._compile import BUNDLE_FORMAT
from acrl.compiler._verify import READABLE_FORMATS, verify_bundle
from acrl.compiler._version import __version__
from conftest import REPO, SpecWriter

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
    """Updating one file's sha256 in the manifest is not enough: the bundle hash covers the list."""
    (bundle / "train.sh").write_bytes((bundle / "train.sh").read_bytes() + b"echo pwned\n")
    manifest = json.loads((bundle / "manifest.json").read_text())
    files = dict(manifest["files"], **{"train.sh": sha256((bundle / "train.sh").read_bytes())})
    rewrite_manifest(bundle, files=files)
    result = verify_bundle(bundle)
    assert result.modified == () and not result.intact
    assert result.recomputed_hash == bundle_hash(files)
    code, out, _ = run(capsys, str(bundle))
    assert code == 1 and "manifest: its bundle_hash" in out and "does not match its own file list" in out


def test_another_acrl_version_with_the_same_format_is_verified_and_noted(bundle: Path,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    rewrite_manifest(bundle, acrl_version="0.0.9")
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
                          "reads bundle format 1\n  fix: verify it with acrl 9.0.0")


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
    rewrite_manifest(bundle, files=files, bundle_hash=bundle_hash(files))
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
                    "recomputed_hash": None, "notes": []}


def test_the_compiler_writes_a_format_verify_reads() -> None:
    assert BUNDLE_FORMAT in READABLE_FORMATS


def test_verify_stays_light_for_the_executor() -> None:
    """The executor imports verify before every run: no Jinja, cattrs, YAML or TOML writer."""
    import json as _json
    import subprocess
    import sys

    code = "import sys, json\nimport acrl.compiler._verify\nprint(json.dumps(sorted(sys.modules)))"
    loaded = _json.loads(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                        check=True).stdout)
    assert not [m for m in loaded if m.split(".")[0] in ("jinja2", "cattrs", "yaml", "tomli_w")]
