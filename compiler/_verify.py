"""Verify a bundle against its manifest: every file's sha256, and the bundle hash itself.

`acrl verify` prints the result; the executor calls :func:`verify_bundle` to refuse a modified
bundle. A bundle is the top level of its directory: anything else found there (a file or a
folder) is reported as added. Paths named by the manifest are never opened, only compared with
the directory's listing, so a hostile manifest cannot make verify read outside the bundle.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import attrs

from ._bundle import EXECUTABLE, MANIFEST, bundle_hash, read_bundle, sha256
from ._errors import BundleReadError
from ._version import __version__

# Manifest layouts this acrl reads. _compile.BUNDLE_FORMAT must be one of them (a test checks).
READABLE_FORMATS = frozenset({1})


@attrs.frozen
class Verification:
    """The result of checking one bundle against its manifest."""

    path: str
    acrl_version: str  # the acrl that wrote the manifest
    bundle_format: int
    bundle_hash: str  # as the manifest records it
    added: tuple[str, ...] = ()  # in the directory, not in the manifest
    removed: tuple[str, ...] = ()  # in the manifest, not in the directory
    modified: tuple[str, ...] = ()  # in both, with another sha256
    recomputed_hash: str | None = None  # set when the manifest's bundle_hash does not match its file list
    notes: tuple[str, ...] = ()  # facts that do not make the bundle modified (another acrl version, modes)

    @property
    def intact(self) -> bool:
        """True when every file matches the manifest and the manifest matches itself."""
        return not (self.added or self.removed or self.modified or self.recomputed_hash)

    def problems(self) -> list[str]:
        """One line per difference from the manifest."""
        lines = [f"modified: {name}" for name in self.modified]
        lines += [f"removed:  {name}" for name in self.removed]
        lines += [f"added:    {name}" for name in self.added]
        if self.recomputed_hash is not None:
            lines.append(f"manifest: its bundle_hash {self.bundle_hash[:12]}... does not match its own file list "
                         f"(which hashes to {self.recomputed_hash[:12]}...)")
        return lines

    def format(self) -> str:
        """The report `acrl verify` prints."""
        notes = [f"note: {note}" for note in self.notes]
        if self.intact:
            return "\n".join([f"{self.path}: intact, bundle sha256:{self.bundle_hash}", *notes])
        head = f"{self.path}: modified since it was compiled ({len(self.problems())} "
        head += "difference)" if len(self.problems()) == 1 else "differences)"
        fix = "  fix: compile the spec again (acrl-compile SPEC -o DIR --force), or review the edit with `acrl diff`"
        return "\n".join([head, *(f"  {line}" for line in self.problems()), *notes, fix])

    def as_json(self) -> dict[str, object]:
        return {"path": self.path, "intact": self.intact, "acrl_version": self.acrl_version,
                "bundle_format": self.bundle_format, "bundle_hash": self.bundle_hash,
                "added": list(self.added), "removed": list(self.removed), "modified": list(self.modified),
                "manifest_hash_ok": self.recomputed_hash is None, "recomputed_hash": self.recomputed_hash,
                "notes": list(self.notes)}


def verify_bundle(path: str | os.PathLike[str]) -> Verification:
    """Recompute every hash of the bundle directory ``path`` against its manifest.json.

    Raises BundleReadError when there is no such directory, no manifest, a manifest that is not
    valid JSON or not an acrl manifest, or a bundle format this acrl cannot read."""
    where = os.fspath(path)
    files = read_bundle(where)
    if files is None:
        reason = "no such directory" if not os.path.lexists(where) else "is not a directory"
        raise BundleReadError(path=where, reason=f"{reason}; a bundle is a directory with a manifest.json",
                              fix="give the bundle's directory, e.g. bundles/<exp_id>")
    modes = [f"{name} is not executable (run it with `bash {name}`, or chmod +x it)"
             for name in sorted(EXECUTABLE) if name in files and not os.access(os.path.join(where, name), os.X_OK)]
    result = verify_files(files, where=where)
    return attrs.evolve(result, notes=(*result.notes, *modes)) if modes else result


def verify_files(files: Mapping[str, bytes], *, where: str) -> Verification:
    """:func:`verify_bundle` of files already read (name -> bytes; a folder is ``name/``)."""
    manifest = read_manifest(files, where=where)
    recorded: Mapping[str, str] = manifest["files"]
    present = {name: sha256(data) for name, data in files.items() if name != MANIFEST}
    added = sorted(name for name in present if name not in recorded)
    removed = sorted(name for name in recorded if name not in present)
    modified = sorted(name for name in recorded if name in present and present[name] != recorded[name])
    recomputed = bundle_hash(recorded)
    notes = []
    if manifest["acrl_version"] != __version__:
        notes.append(f"made by acrl {manifest['acrl_version']} (this is acrl {__version__}); its bundle format "
                     f"{manifest['bundle_format']} is one this acrl reads, so its hashes were checked")
    return Verification(where, manifest["acrl_version"], manifest["bundle_format"], manifest["bundle_hash"],
                        tuple(added), tuple(removed), tuple(modified),
                        None if recomputed == manifest["bundle_hash"] else recomputed, tuple(notes))


def read_manifest(files: Mapping[str, bytes], *, where: str) -> dict[str, Any]:
    """The bundle's manifest, checked for the fields verify needs; BundleReadError otherwise."""
    name = os.path.join(where, MANIFEST)
    recompile = "compile the spec again: acrl-compile SPEC -o DIR --force"
    if MANIFEST not in files:
        raise BundleReadError(path=name, reason="missing: without its manifest a bundle cannot be verified",
                              fix=recompile)
    try:
        manifest = json.loads(files[MANIFEST].decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise BundleReadError(path=name, reason=f"is not UTF-8 text ({exc.reason} at byte {exc.start})",
                              fix=recompile) from None
    except json.JSONDecodeError as exc:
        raise BundleReadError(path=f"{name}:{exc.lineno}:{exc.colno}", reason=f"is not valid JSON: {exc.msg}",
                              fix=recompile) from None
    if not isinstance(manifest, dict):
        raise BundleReadError(path=name, reason="is not an acrl manifest (not a JSON object)", fix=recompile)
    version = manifest.get("acrl_version")
    version_text = f"acrl {version}" if isinstance(version, str) else "an unknown acrl version"
    fmt = manifest.get("bundle_format")
    if type(fmt) is not int:
        raise BundleReadError(path=name, reason=f"has no bundle_format (written by {version_text}?)", fix=recompile)
    if fmt not in READABLE_FORMATS:
        readable = ", ".join(str(f) for f in sorted(READABLE_FORMATS))
        raise BundleReadError(path=name, reason=f"bundle format {fmt}, written by {version_text}; acrl {__version__} "
                              f"reads bundle format {readable}",
                              fix=f"verify it with {version_text}, or compile the spec again with this acrl")
    problems = []
    if not isinstance(version, str):
        problems.append("acrl_version is not a string")
    if not isinstance(manifest.get("bundle_hash"), str):
        problems.append("bundle_hash is not a string")
    recorded = manifest.get("files")
    if not isinstance(recorded, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in recorded.items()):
        problems.append("files is not an object of file name -> sha256")
    if problems:
        raise BundleReadError(path=name, reason="is not an acrl manifest: " + "; ".join(problems), fix=recompile)
    return manifest
