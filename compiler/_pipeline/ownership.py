"""Whether a compile may replace the bundle already in its output directory without ``--force``.

The edit loop is edit the spec, compile, look: recompiling a spec over the intact bundle it produced
before replaces that bundle (bundle.py writes it atomically) with nothing to confirm, since nothing
is lost: every byte of the old bundle came from the spec and acrl, and the spec is still there.
``--force`` is needed only where something would be lost or mixed up:

- the directory was modified by hand: a file differs from the sha256 its manifest records, a file was
  added or removed, or the manifest no longer matches its own bundle hash (as ``acrl verify`` decides);
- it holds another spec's bundle: the manifest records another experiment id, or another spec file
  name (a manifest records the spec's file name and sha256, never its directory: compiling the same
  spec from another folder, or an edited spec, is the same spec);
- it has a manifest.json acrl cannot read as one (not JSON, no file list).

A directory with no manifest.json at all is not replaced even with ``--force`` (bundle.py): it is
someone's files. An empty directory, or one whose files are the compiled bundle's with other modes,
is replaced without asking. :func:`refusal` says what differs, in words, for the error.

Pure: reads only the bytes it is given. json is imported only when there is a manifest to read.
"""

from __future__ import annotations

import os

from .reading import MANIFEST, NOT_REGULAR, manifest_hash, sha256

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

_SHOWN = 6  # file names listed per kind of difference, then "and N more"
# The bundle formats whose bundle hash is reading.manifest_hash (the whole manifest): a bundle of another format
# cannot be checked for hand edits. compile.BUNDLE_FORMAT is one of them (tests/test_edit_loop.py).
CHECKED_FORMATS = frozenset({2})


def refusal(existing: Mapping[str, bytes], compiled: Mapping[str, bytes]) -> str | None:
    """Why the bundle directory holding ``existing`` (as reading.read_files reads it) may not be
    replaced by ``compiled`` without --force, or None when it may. The reason is a phrase that
    follows the directory's name: "was modified by hand since it was compiled (modified: train.sh)"."""
    if not existing or dict(existing) == dict(compiled):
        return None  # empty, or the same files (only modes can differ): nothing is lost
    old = _manifest(existing)
    if old is None:
        return "has a manifest.json that is not one acrl writes (not a JSON object with a file list and a bundle hash)"
    if old.get("bundle_format") not in CHECKED_FORMATS:
        return (f"has a manifest of bundle format {_shown(old.get('bundle_format'))}, which this acrl cannot check "
                "for edits")
    edits = hand_edits(existing, old)
    if edits:
        return f"was modified by hand since it was compiled ({edits})"
    new = _manifest(compiled)
    if new is None:  # acrl always writes one; nothing to compare with
        return None
    old_id, new_id = old.get("exp_id"), new.get("exp_id")
    old_spec, new_spec = _spec_name(old), _spec_name(new)
    if old_id != new_id:
        source = f" (compiled from {_shown(old_spec)})" if old_spec else ""
        return (f"holds the bundle of another experiment, \"{_shown(old_id)}\"{source}; this spec's experiment is "
                f"\"{_shown(new_id)}\"")
    if old_spec != new_spec:
        return f"holds the bundle compiled from another spec file, {_shown(old_spec)}; this spec is {_shown(new_spec)}"
    return None


def hand_edits(existing: Mapping[str, bytes], manifest: Mapping[str, Any]) -> str:
    """What differs between the files ``existing`` and their ``manifest`` (a parsed manifest.json
    with a ``files`` object): "modified: train.sh; added: notes.txt", or "" when they match."""
    recorded = manifest["files"]
    irregular = sorted(name.removesuffix(NOT_REGULAR) for name in existing if name.endswith(NOT_REGULAR))
    present = {name: sha256(data) for name, data in existing.items() if name != MANIFEST
               and not name.endswith(NOT_REGULAR)}
    kinds = [
        ("modified", [n for n in sorted(recorded) if n in present and present[n] != recorded[n]]),
        ("removed", [n for n in sorted(recorded) if n not in present and n not in irregular]),
        ("added", [n for n in sorted(present) if n not in recorded]),
        ("not a regular file", irregular),
    ]
    parts = [f"{kind}: {_listed(names)}" for kind, names in kinds if names]
    if manifest_hash(manifest) != manifest.get("bundle_hash"):
        parts.append(f"{MANIFEST}: its bundle_hash does not match its contents")
    return "; ".join(parts)


def _manifest(files: Mapping[str, bytes]) -> dict[str, Any] | None:
    """The parsed manifest.json of ``files``: a JSON object whose ``files`` maps names to strings and
    with a string ``bundle_hash``; None for anything else."""
    import json  # lazy: the compile cache's path to "created" and "unchanged" never reads a manifest

    try:
        data = json.loads(files[MANIFEST])
    except (KeyError, ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("bundle_hash"), str):
        return None
    recorded = data.get("files")
    if not isinstance(recorded, dict) or not all(isinstance(v, str) for v in recorded.values()):
        return None
    return data


def _spec_name(manifest: Mapping[str, Any]) -> str | None:
    spec = manifest.get("spec")
    name = spec.get("name") if isinstance(spec, dict) else None
    return os.path.basename(name) if isinstance(name, str) else None


def _shown(value: object) -> str:
    """A manifest's value in a message: as written when it is a short printable string, else its repr
    (a hostile manifest's terminal escapes are shown, never sent), cut at 80 characters."""
    if isinstance(value, str) and value.isprintable() and 0 < len(value) <= 80:
        return value
    return repr(value)[:80] if value is not None else "none recorded"


def _listed(names: list[str]) -> str:
    shown = ", ".join(n if n.isprintable() else repr(n) for n in names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")
