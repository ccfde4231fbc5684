"""Stages 6 and 7, hash and write: the manifest's hashes, and writing a bundle atomically.

The bundle hash is the sha256 of the canonical JSON list of [path, sha256] of every file but the
manifest. A bundle is written into a temporary sibling directory and renamed into place, so a
reader never sees half a bundle; an existing different bundle is replaced only when forced.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from pathlib import Path

from ._errors import BundleExistsError, BundleWriteError

MANIFEST = "manifest.json"
EXECUTABLE = frozenset({"train.sh"})


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def bundle_hash(file_hashes: Mapping[str, str]) -> str:
    """sha256 of the canonical list of (path, sha256) of every file but the manifest."""
    pairs = sorted([path, digest] for path, digest in file_hashes.items() if path != MANIFEST)
    return sha256(json.dumps(pairs, separators=(",", ":")).encode())


def read_bundle(path: Path) -> dict[str, bytes] | None:
    """The files of an existing bundle directory (top level only), or None when there is none."""
    if not path.is_dir():
        return None
    files: dict[str, bytes] = {}
    for entry in sorted(path.iterdir()):
        if entry.is_file():
            files[entry.name] = entry.read_bytes()
        else:
            files[entry.name + "/"] = b""
    return files


def write_bundle(path: Path, files: Mapping[str, bytes], *, force: bool) -> str:
    """Write ``files`` into directory ``path`` atomically. Returns "created", "unchanged" or
    "replaced". Raises BundleExistsError when ``path`` differs and ``force`` is false."""
    existing = read_bundle(path)
    if existing is not None:
        if existing == dict(files) and _modes_ok(path):
            return "unchanged"
        if not force:
            raise BundleExistsError(path=str(path), reason="exists and differs from the compiled bundle")
        if existing and MANIFEST not in existing:
            raise BundleExistsError(path=str(path), reason="is not empty and is not an acrl bundle "
                                                           "(no manifest.json), so even --force keeps it")
    elif path.exists():
        raise BundleExistsError(path=str(path), reason="exists and is not a directory")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent))
    except OSError as exc:
        raise BundleWriteError(path=str(path), reason=exc.strerror or str(exc)) from None
    try:
        for name, data in files.items():
            target = staging / name
            target.write_bytes(data)
            os.chmod(target, 0o755 if name in EXECUTABLE else 0o644)
        os.chmod(staging, 0o755)
        if existing is None:
            os.rename(staging, path)
            return "created"
        old = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".old", dir=parent))
        os.rename(path, old / "bundle")
        os.rename(staging, path)
        shutil.rmtree(old, ignore_errors=True)
        return "replaced"
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        raise BundleWriteError(path=str(path), reason=exc.strerror or str(exc)) from None


def _modes_ok(path: Path) -> bool:
    return all(os.access(path / name, os.X_OK) for name in EXECUTABLE if (path / name).exists())
