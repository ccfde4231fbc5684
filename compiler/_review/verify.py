"""Verify a bundle against its manifest: every file's sha256, and the bundle hash itself.

`acrl verify` prints the result; the executor calls :func:`verify_bundle` to refuse a modified
bundle. A bundle is the top level of its directory: anything else found there (a file or a
folder) is reported as added, and a symbolic link or special file as not a regular file (a link
is never followed). Paths named by the manifest are never opened, only compared with the
directory's listing, so a hostile manifest cannot make verify read outside the bundle.

What an intact result proves: the files are the ones the manifest lists, the manifest's bundle
hash is that of the whole manifest (its file list and every other field: exp_id, derived,
warnings, ...; _bundle.manifest_hash), and no file or the directory can be changed by others
(group- or other-writable) or carries set-ID or sticky bits. The manifest describes itself, so
whoever can rewrite a file can rewrite the manifest to match: only a hash recorded elsewhere
(``expect_hash``, from a pull request or CI) or recompiling the spec (``acrl-compile --check``)
catches that. The derived section can also be checked against spec.toml (``check_derived``).
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from typing import Any

import attrs

from .._pipeline.manifest import Manifest, ManifestShapeError
from .._pipeline.reading import (
    DIR_MODE,
    EXECUTABLE,
    MANIFEST,
    NOT_REGULAR,
    describe_mode,
    manifest_hash,
    read_files,
    sha256,
    unsafe_modes,
    written_mode,
)
from .._version import __version__
from ..errors import BundleReadError, UsageError

# Manifest layouts this acrl reads. _compile.BUNDLE_FORMAT must be one of them (a test checks).
# Format 1's bundle hash covered only the file list, so a format-1 manifest's other fields (exp_id,
# derived, ...) could be edited unseen: such a bundle is an error that asks for a recompile.
READABLE_FORMATS = frozenset({2})


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
    recomputed_hash: str | None = None  # set when the manifest's bundle_hash is not the hash of its contents
    notes: tuple[str, ...] = ()  # facts that do not make the bundle modified (another acrl version, modes)
    not_regular: tuple[str, ...] = ()  # "name (symbolic link)": entries that are not regular files or folders
    derived_mismatch: tuple[str, ...] = ()  # "key: manifest value, spec.toml gives value", when checked
    expected_hash: str | None = None  # the bundle hash the caller expects (--expect-hash)
    actual_hash: str | None = None  # the bundle hash of the files as they are, when expected_hash is given
    unsafe_modes: tuple[str, ...] = ()  # "train.sh 0775 (group-writable)"; "./" is the bundle directory
    # What was verified, for a caller that goes on to use it (acrl run): the files as read (see
    # reading.read_files) and the manifest, typed. Trust them only when ``intact``. ``manifest`` is
    # None only for a manifest that does not match its own hash and has a field of another shape.
    files: Mapping[str, bytes] = attrs.field(factory=dict, eq=False, repr=False)
    manifest: Manifest | None = attrs.field(default=None, eq=False, repr=False)
    exp_id: str = attrs.field(default="", eq=False, repr=False)  # checked: one safe path component

    @property
    def intact(self) -> bool:
        """True when every file matches the manifest, the manifest matches itself and no mode is
        unsafe (and, when they were asked for, the derived section matches spec.toml and the hash
        is the expected one)."""
        return not (self.added or self.removed or self.modified or self.recomputed_hash or self.not_regular
                    or self.derived_mismatch or self.unsafe_modes or not self.expected_hash_ok)

    @property
    def expected_hash_ok(self) -> bool:
        return self.expected_hash is None or self.actual_hash == self.expected_hash

    def problems(self) -> list[str]:
        """One line per difference from the manifest."""
        lines = [f"modified: {name}" for name in self.modified]
        lines += [f"removed:  {name}" for name in self.removed]
        lines += [f"added:    {name}" for name in self.added]
        lines += [f"not a regular file: {name}" for name in self.not_regular]
        lines += [f"unsafe mode: {entry}" for entry in self.unsafe_modes]
        if self.recomputed_hash is not None:
            lines.append(f"manifest: its bundle_hash {self.bundle_hash[:12]}... does not match its own contents, "
                         f"file list and fields (which hash to {self.recomputed_hash[:12]}...)")
        if self.derived_mismatch:
            lines.append("manifest.json: derived section does not match spec.toml "
                         f"({'; '.join(self.derived_mismatch)})")
        if not self.expected_hash_ok:
            lines.append(f"bundle hash: the files hash to sha256:{self.actual_hash}, not the expected "
                         f"sha256:{self.expected_hash}")
        return lines

    def format(self) -> str:
        """The report `acrl verify` prints: :meth:`report`, then the fix when the bundle is not intact."""
        return self.report() if self.intact else f"{self.report()}\n  fix: {self.fix()}"

    def report(self) -> str:
        """What was found: intact (and the hash), or each difference; notes either way. No fix."""
        notes = [f"note: {note}" for note in self.notes]
        if self.intact:
            expected = " (the expected hash)" if self.expected_hash is not None else ""
            return "\n".join([f"{self.path}: intact, bundle sha256:{self.bundle_hash}{expected}", *notes])
        head = f"{self.path}: modified since it was compiled ({len(self.problems())} "
        head += "difference)" if len(self.problems()) == 1 else "differences)"
        return "\n".join([head, *(f"  {line}" for line in self.problems()), *notes])

    def fix(self) -> str:
        """How to make a bundle that is not intact match its manifest again ("" when it is intact)."""
        if self.intact:
            return ""
        if self.unsafe_modes and not (self.added or self.removed or self.modified or self.recomputed_hash
                                      or self.not_regular or self.derived_mismatch):
            return self.chmod_fix()
        return "compile the spec again (acrl-compile SPEC -o DIR --force), or review the edit with `acrl diff`"

    def chmod_fix(self) -> str:
        """The chmod commands that give the unsafe entries the modes acrl-compile writes."""
        by_mode: dict[int, list[str]] = {}
        for entry in self.unsafe_modes:
            name = entry.split(" ", 1)[0]
            mode, path = (DIR_MODE, self.path) if name == "./" else (written_mode(name), os.path.join(self.path, name))
            by_mode.setdefault(mode, []).append(shlex.quote(path))
        return "; ".join(f"chmod {mode:04o} {' '.join(paths)}" for mode, paths in sorted(by_mode.items()))

    def as_json(self) -> dict[str, object]:
        return {"path": self.path, "intact": self.intact, "acrl_version": self.acrl_version,
                "bundle_format": self.bundle_format, "bundle_hash": self.bundle_hash,
                "added": list(self.added), "removed": list(self.removed), "modified": list(self.modified),
                "manifest_hash_ok": self.recomputed_hash is None, "recomputed_hash": self.recomputed_hash,
                "not_regular": list(self.not_regular), "derived_mismatch": list(self.derived_mismatch),
                "expected_hash": self.expected_hash, "expected_hash_ok": self.expected_hash_ok,
                "unsafe_modes": list(self.unsafe_modes), "notes": list(self.notes)}


def verify_bundle(path: str | os.PathLike[str], *, check_derived: bool = False,
                  expect_hash: str | None = None) -> Verification:
    """Recompute every hash of the bundle directory ``path`` against its manifest.json.

    ``check_derived``: also compute the manifest's derived section from spec.toml and compare
    (this imports the spec parser; the executor does not need it). ``expect_hash``: the bundle
    hash the files must have (hex sha256, ``sha256:`` prefix allowed), e.g. one recorded in a
    pull request: the only check a forger who rewrote the manifest as well cannot pass.

    Raises BundleReadError when there is no such directory (or one that cannot be listed), no
    manifest, a manifest that is not valid JSON or not an acrl manifest, or a bundle format this
    acrl cannot read."""
    where = os.fspath(path)
    if not os.path.isdir(where):
        reason = "no such directory" if not os.path.lexists(where) else "is not a directory"
        raise BundleReadError(path=where, reason=f"{reason}; a bundle is a directory with a manifest.json",
                              fix="give the bundle's directory, e.g. bundles/<exp_id>")
    if not os.path.lexists(os.path.join(where, MANIFEST)):  # before reading the rest: /proc/self is a directory
        read_manifest({}, where=where)  # raises: missing
    files = read_files(where)
    if files is None:  # gone since the check above
        raise BundleReadError(path=where, reason="is not a directory; a bundle is a directory with a manifest.json",
                              fix="give the bundle's directory, e.g. bundles/<exp_id>")
    modes = [f"{name} is not executable (run it with `bash {name}`, or chmod +x it)"
             for name in sorted(EXECUTABLE) if name in files and not os.access(os.path.join(where, name), os.X_OK)]
    result = verify_files(files, where=where, check_derived=check_derived, expect_hash=expect_hash)
    regular = [name for name in files if not name.endswith(("/", NOT_REGULAR))]
    unsafe = tuple(f"{name or './'} {describe_mode(mode, bits)}"
                   for name, mode, bits in unsafe_modes(where, sorted(regular)))
    return attrs.evolve(result, notes=(*result.notes, *modes), unsafe_modes=unsafe)


@attrs.frozen
class BundleDir:
    """A bundle directory as :func:`read_bundle` read and verified it: its files as read (never
    through a link), its manifest typed, and the verification. Trust the files and the manifest's
    fields only when ``intact`` (or when the caller chose to run a modified bundle)."""

    path: str
    files: Mapping[str, bytes] = attrs.field(repr=False)
    manifest: Manifest | None = attrs.field(repr=False)  # None: see Verification.manifest
    verification: Verification

    @property
    def intact(self) -> bool:
        return self.verification.intact

    @property
    def exp_id(self) -> str:
        """The manifest's exp_id, one safe path component (checked even when not intact)."""
        return self.verification.exp_id


def read_bundle(path: str | os.PathLike[str], *, expect_hash: str | None = None,
                check_derived: bool = False) -> BundleDir:
    """Read the bundle directory ``path`` and verify it against its manifest (:func:`verify_bundle`,
    whose errors it raises: BundleReadError for no bundle or a manifest acrl did not write)."""
    verification = verify_bundle(path, check_derived=check_derived, expect_hash=expect_hash)
    return BundleDir(verification.path, verification.files, verification.manifest, verification)


def verify_files(files: Mapping[str, bytes], *, where: str, check_derived: bool = False,
                 expect_hash: str | None = None) -> Verification:
    """:func:`verify_bundle` of files already read (name -> bytes; a folder is ``name/``, a link or
    special file ``name/!``: see read_bundle)."""
    manifest = read_manifest(files, where=where)
    recorded: Mapping[str, str] = manifest["files"]
    irregular = {name[:-len(NOT_REGULAR)]: data.decode() for name, data in files.items()
                 if name.endswith(NOT_REGULAR)}
    present = {name: sha256(data) for name, data in files.items()
               if name != MANIFEST and not name.endswith(NOT_REGULAR)}
    added = sorted(name for name in present if name not in recorded)
    removed = sorted(name for name in recorded if name not in present and name not in irregular)
    modified = sorted(name for name in recorded if name in present and present[name] != recorded[name])
    recomputed = manifest_hash(manifest)
    typed = _typed(manifest, where=where, trusted=recomputed == manifest["bundle_hash"])
    notes = []
    if manifest["acrl_version"] != __version__:
        notes.append(f"made by acrl {manifest['acrl_version']} (this is acrl {__version__}); its bundle format "
                     f"{manifest['bundle_format']} is one this acrl reads, so its hashes were checked")
    mismatch: list[str] = []
    if check_derived:
        mismatch, note = _derived_mismatch(files, manifest)
        notes += [note] if note else []
    expected = None if expect_hash is None else expect_hash.strip().lower().removeprefix("sha256:")
    if expected is not None and not re.fullmatch(r"[0-9a-f]{64}", expected):  # the command line is wrong: exit 2
        raise UsageError(f"--expect-hash {expect_hash!r}: not a bundle hash",
                         hint="give the 64 hex digits of a sha256, as `acrl verify` prints them (a `sha256:` "
                         "prefix is allowed)")
    return Verification(where, manifest["acrl_version"], manifest["bundle_format"], manifest["bundle_hash"],
                        tuple(added), tuple(removed), tuple(modified),
                        None if recomputed == manifest["bundle_hash"] else recomputed, tuple(notes),
                        tuple(f"{name} ({kind})" for name, kind in sorted(irregular.items())), tuple(mismatch),
                        expected, None if expected is None else manifest_hash({**manifest, "files": present}),
                        files=files, manifest=typed, exp_id=manifest["exp_id"])


def _typed(manifest: Mapping[str, Any], *, where: str, trusted: bool) -> Manifest | None:
    """``manifest`` as a Manifest. A field of another shape than acrl writes is an error when the
    manifest matches its own hash (a forger's, or another program's), else the bundle is reported as
    modified, as any edit is, and None is returned."""
    try:
        return Manifest.from_json(manifest)
    except ManifestShapeError as exc:
        if not trusted:
            return None
        raise BundleReadError(path=os.path.join(where, MANIFEST), reason=f"is not an acrl manifest: {exc}",
                              fix=RECOMPILE) from None


def _derived_mismatch(files: Mapping[str, bytes], manifest: Mapping[str, Any]) -> tuple[list[str], str | None]:
    """The keys of the manifest's derived section that spec.toml does not give, and a note when
    the section cannot be checked."""
    from .view import PLACEMENT_FIELDS, SPEC_TOML, derived_from_spec  # lazy: view loads YAML and TOML readers

    if SPEC_TOML not in files:
        return [], None  # reported as removed
    computed = derived_from_spec(files[SPEC_TOML], manifest)
    if computed is None:
        return [], "the manifest's derived section was not checked: spec.toml is not a spec this acrl reads"
    recorded = manifest.get("derived")
    if not isinstance(recorded, dict):
        return [f"no derived section; spec.toml gives {json.dumps(computed, sort_keys=True)}"], None
    out = []
    # a manifest written before acrl modelled placement has none of its fields (None in Derived)
    later = set() if set(recorded) & PLACEMENT_FIELDS else PLACEMENT_FIELDS
    for key in sorted((set(recorded) | set(computed)) - later):
        old, new = recorded.get(key, "(absent)"), computed.get(key, "(absent)")
        if json.dumps(old) != json.dumps(new):  # 1, 1.0 and true are three different values
            out.append(f"{key}: {json.dumps(old)} in the manifest, spec.toml gives {json.dumps(new)}")
    return out, None


# As the spec's rule ACRL-T005 (compiler/_pipeline/validate/toolkit.py) allows it: a directory name and a Ray id.
EXP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def is_safe_exp_id(value: object) -> bool:
    """Whether ``value`` is an experiment id that names exactly one directory below another."""
    return isinstance(value, str) and EXP_ID.fullmatch(value) is not None and ".." not in value


RECOMPILE = "compile the spec again: acrl-compile SPEC -o DIR --force"


class _DuplicateKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def read_manifest(files: Mapping[str, bytes], *, where: str) -> dict[str, Any]:
    """The bundle's manifest, checked for the fields verify needs; BundleReadError otherwise."""
    name = os.path.join(where, MANIFEST)
    recompile = RECOMPILE
    if MANIFEST + NOT_REGULAR in files:
        raise BundleReadError(path=name, reason=f"is not a regular file ({files[MANIFEST + NOT_REGULAR].decode()}, "
                              "not followed)", fix=recompile)
    if MANIFEST not in files:
        raise BundleReadError(path=name, reason="missing: without its manifest a bundle cannot be verified",
                              fix=recompile)
    try:
        manifest = json.loads(files[MANIFEST].decode("utf-8"), object_pairs_hook=_no_duplicate_keys)
    except _DuplicateKey as exc:
        raise BundleReadError(path=name, reason=f"is not an acrl manifest: the key {exc.args[0]!r} appears twice "
                              "in one object (readers disagree on which one counts)", fix=recompile) from None
    except UnicodeDecodeError as exc:
        raise BundleReadError(path=name, reason=f"is not UTF-8 text ({exc.reason} at byte {exc.start})",
                              fix=recompile) from None
    except json.JSONDecodeError as exc:
        raise BundleReadError(path=f"{name}:{exc.lineno}:{exc.colno}", reason=f"is not valid JSON: {exc.msg}",
                              fix=recompile) from None
    except RecursionError:  # arrays or objects nested thousands deep
        raise BundleReadError(path=name, reason="is not an acrl manifest (nested too deeply to read)",
                              fix=recompile) from None
    if not isinstance(manifest, dict):
        raise BundleReadError(path=name, reason="is not an acrl manifest (not a JSON object)", fix=recompile)
    version = manifest.get("acrl_version")
    version_text = f"acrl {version}" if isinstance(version, str) else "an unknown acrl version"
    fmt = manifest.get("bundle_format")
    if type(fmt) is not int:
        raise BundleReadError(path=name, reason=f"has no bundle_format (written by {version_text}?)", fix=recompile)
    if fmt not in READABLE_FORMATS and fmt < min(READABLE_FORMATS):
        raise BundleReadError(path=name, reason=f"bundle format {fmt}: compiled by an older acrl ({version_text}), "
                              "whose bundle hash does not cover the manifest's own fields, so this acrl "
                              f"(acrl {__version__}) does not trust it",
                              fix=f"compile the spec again with this acrl: {recompile.split(': ', 1)[1]}")
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
    if not is_safe_exp_id(manifest.get("exp_id")):
        problems.append(f"exp_id {json.dumps(manifest.get('exp_id'))} is not one safe path component "
                        "(letters, digits, '.', '_', '-'; no '..'), and `acrl run` names a directory with it")
    recorded = manifest.get("files")
    if not isinstance(recorded, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in recorded.items()):
        problems.append("files is not an object of file name -> sha256")
    if problems:
        raise BundleReadError(path=name, reason="is not an acrl manifest: " + "; ".join(problems), fix=recompile)
    return manifest
