"""Stage 7, write: a bundle written atomically, and what a killed writer left undone.

A bundle is written into a temporary sibling directory and renamed into place, so a reader never
sees half a bundle; an existing different bundle is replaced only when forced. Hashing and reading
a bundle back are :mod:`acrl.compiler._pipeline.reading`'s (their names are re-exported here for
the callers that read and write).
"""

from __future__ import annotations

import errno
import os
import sys

from .reading import (
    BUNDLE_FILE_LIMIT,
    DIR_MODE,
    EXECUTABLE,
    EXECUTABLE_MODE,
    FILE_MODE,
    INPUT_LIMIT,
    MANIFEST,
    NOT_REGULAR,
    TOO_LARGE,
    YAML_LIMIT,
    describe_mode,
    manifest_hash,
    mode_differs,
    read_file,
    read_files,
    read_input,
    sha256,
    unsafe_bits,
    unsafe_modes,
    written_mode,
)

read_bundle = read_files  # the name its callers know: a bundle directory's files as they are

# Re-exported: the readers and writers of bundles import these from here.
__all__ = [
    "BUNDLE_FILE_LIMIT",
    "DIR_MODE",
    "EXECUTABLE",
    "EXECUTABLE_MODE",
    "FILE_MODE",
    "INPUT_LIMIT",
    "MANIFEST",
    "NOT_REGULAR",
    "RENAME_EXCHANGE",
    "STALE_SECONDS",
    "TOO_LARGE",
    "YAML_LIMIT",
    "BundleWriter",
    "describe_mode",
    "manifest_hash",
    "mode_differs",
    "read_bundle",
    "read_file",
    "read_input",
    "recover",
    "recover_folder",
    "sha256",
    "unsafe_bits",
    "unsafe_modes",
    "write_bundle",
    "written_mode",
]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import NoReturn

    from .reading import StrPath


class BundleWriter:
    """Writes bundles into one folder, each atomically (:func:`write_bundle`). Made by
    :meth:`for_folder`, which first recovers what killed writers left anywhere in the folder (a
    sweep's points), so that each write need not list the folder again (quadratic in the points).
    ``replaced`` keeps the files of every bundle it replaced, by path, for the caller to say what
    changed (the compile's summary)."""

    def __init__(self, *, force: bool, folder_recovered: bool = False) -> None:
        self.force = force
        self.folder_recovered = folder_recovered
        self.replaced: dict[str, Mapping[str, bytes]] = {}

    @classmethod
    def for_folder(cls, folder: StrPath, *, force: bool) -> BundleWriter:
        """A writer of bundles directly below ``folder``, whose leftovers are recovered here, once."""
        recover_folder(folder)
        return cls(force=force, folder_recovered=True)

    def write(self, path: StrPath, files: Mapping[str, bytes]) -> str:
        """Write ``files`` into the bundle directory ``path``; see :func:`write_bundle`."""
        path = os.fspath(path)
        if not self.folder_recovered:
            recover(path)
        status, previous = _write(path, files, force=self.force)
        if previous is not None:
            self.replaced[path] = previous
        return status


def write_bundle(path: StrPath, files: Mapping[str, bytes], *, force: bool) -> str:
    """Write ``files`` into directory ``path`` atomically. Returns "created", "unchanged" or
    "replaced". An existing bundle is replaced when it is the intact bundle of the same spec
    (ownership.refusal: the edit loop), or with ``force``; otherwise BundleExistsError says what
    differs. A directory that is not an acrl bundle (no manifest.json) is never replaced.

    The bundle is written into a temporary sibling ``.<name>.<pid>.<random>.tmp`` and renamed into
    place; an existing bundle is swapped with it in one renameat2(RENAME_EXCHANGE) where the system
    has it, so that ``path`` holds the old or the new bundle at every instant, whenever the writer is
    killed. Elsewhere the old bundle is first moved into ``.<name>.<pid>.<random>.old``: a writer
    killed between the two renames leaves no bundle at ``path`` for an instant, and the next write
    puts the old one back (see :func:`recover`). Temporary siblings of writers that are gone are
    removed.

    Only os and hashlib are imported on the way to "created" or "unchanged", so that the compile
    cache's fast path stays fast; errors import what they need.
    """
    return BundleWriter(force=force).write(path, files)


def _write(path: str, files: Mapping[str, bytes], *, force: bool) -> tuple[str, Mapping[str, bytes] | None]:
    """:func:`write_bundle` once ``path``'s leftovers are recovered; with the files it replaced."""
    parent = os.path.dirname(os.path.abspath(path))
    existing = read_files(path)
    if existing is not None:
        if existing == dict(files) and _modes_ok(path):
            return "unchanged", None
        if existing and MANIFEST not in existing:
            _raise_exists(path, "is not empty and is not an acrl bundle (no manifest.json), so even --force keeps it",
                          forceable=False)
        if not force:
            from .ownership import refusal  # lazy: only a bundle that differs is asked whose it is

            reason = refusal(existing, files)
            if reason is not None:
                _raise_exists(path, reason)
    elif os.path.lexists(path):
        _raise_exists(path, "exists and is not a directory", forceable=False)
    try:
        os.makedirs(parent, exist_ok=True)
        staging = _fresh_dir(parent, os.path.basename(path), ".tmp")
    except OSError as exc:
        _raise_write(path, exc)
    try:
        for name, data in files.items():
            target = os.path.join(staging, name)
            with open(target, "wb") as f:
                f.write(data)
            os.chmod(target, 0o755 if name in EXECUTABLE else 0o644)
        os.chmod(staging, 0o755)
        if existing is None:
            os.rename(staging, path)
            return "created", None
        if _exchange(staging, path):  # staging now holds the old bundle
            _remove_tree(staging)
            return "replaced", existing
        old = _fresh_dir(parent, os.path.basename(path), ".old")
        os.rename(path, os.path.join(old, "bundle"))
        os.rename(staging, path)
        _remove_tree(old)
        return "replaced", existing
    except OSError as exc:
        _remove_tree(staging)
        _raise_write(path, exc)


RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
    """Swap the directories ``a`` and ``b`` in one step (Linux's renameat2 RENAME_EXCHANGE, glibc
    2.28 and later). False, having changed nothing, where the system or the file system cannot."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # lazy: ctypes costs ~5 ms and only a forced replace needs it

    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(code, os.strerror(code), b)


STALE_SECONDS = 3600  # a temporary sibling this old is a dead writer's, whatever its pid says


def _siblings(path: str) -> list[tuple[str, str, int | None]]:
    """(path, "tmp"|"old", writer pid or None) of every temporary sibling acrl names after ``path``:
    ``.<name>.<pid>.<12 hex>.tmp|old`` (and ``.<name>.<12 hex>.tmp|old`` of acrl before pids)."""
    parent = os.path.dirname(os.path.abspath(path))
    prefix = f".{os.path.basename(path)}."
    try:
        entries = [e for e in os.listdir(parent) if e.startswith(prefix) and e.endswith((".tmp", ".old"))]
    except OSError:
        return []
    found = []
    for entry in entries:
        middle = entry[len(prefix):-4].split(".")  # [pid,] random
        if len(middle) in (1, 2) and len(middle[-1]) == 12 and all(c in "0123456789abcdef" for c in middle[-1]) \
                and (len(middle) == 1 or middle[0].isdigit()):
            found.append((os.path.join(parent, entry), entry[-3:], int(middle[0]) if len(middle) == 2 else None))
    return found


def _writer_gone(sibling: str, pid: int | None) -> bool:
    """Whether the writer of ``sibling`` is gone: its process does not exist (or the sibling is
    older than STALE_SECONDS, for a pid of another machine or reused since)."""
    import time  # lazy: only a leftover sibling asks its age

    try:
        if time.time() - os.lstat(sibling).st_mtime > STALE_SECONDS:
            return True
    except OSError:
        return False
    if pid is None or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OverflowError):
        return False
    return False


def recover(path: StrPath) -> None:
    """Undo what a killed writer of ``path`` left: with no bundle at ``path``, the old bundle it had
    moved aside is put back; then the temporary siblings of writers that are gone are removed.
    A sibling of a live writer is never touched."""
    path = os.fspath(path)
    siblings = _siblings(path)
    if not siblings:
        return
    stale = [(sibling, kind) for sibling, kind, pid in siblings if _writer_gone(sibling, pid)]
    if not os.path.lexists(path):
        for sibling, kind in stale:
            if kind == "old" and os.path.isdir(os.path.join(sibling, "bundle")):
                try:
                    os.rename(os.path.join(sibling, "bundle"), path)
                except OSError:
                    continue
                break
    for sibling, _ in stale:
        _remove_tree(sibling)


def recover_folder(folder: StrPath) -> None:
    """:func:`recover` every bundle of ``folder`` that a killed writer left a sibling of (a sweep's
    points: one a later sweep no longer has is recovered and cleaned too)."""
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    names = set()
    for entry in entries:
        parts = entry[1:].rsplit(".", 3) if entry.startswith(".") else []
        if len(parts) == 4 and parts[3] in ("tmp", "old") and parts[1].isdigit() and len(parts[2]) == 12:
            names.add(parts[0])
    for name in sorted(names):
        recover(os.path.join(folder, name))


def _fresh_dir(parent: str, name: str, suffix: str) -> str:
    """A new, empty directory ``.<name>.<pid>.<random><suffix>`` in ``parent`` (what tempfile.mkdtemp
    does, without importing tempfile, random and shutil; the pid tells a later writer whether this
    one is gone)."""
    for _ in range(100):
        candidate = os.path.join(parent, f".{name}.{os.getpid()}.{os.urandom(6).hex()}{suffix}")
        try:
            os.mkdir(candidate, 0o700)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"no free temporary name in {parent}")


def _remove_tree(path: str) -> None:
    """Remove the directory ``path``, or the symbolic link ``path`` (a bundle directory that was a
    link, swapped out by _exchange), never what a link points to."""
    # lazy: shutil costs ~3 ms and only a replace or a leftover needs it
    import contextlib
    import shutil

    if os.path.islink(path):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    shutil.rmtree(path, ignore_errors=True)


def _raise_exists(path: str, reason: str, *, forceable: bool = True) -> NoReturn:
    from ..errors import BundleExistsError  # lazy: errors imports attrs; the cache's hit path never errs

    raise BundleExistsError(path=path, reason=reason, forceable=forceable)


def _raise_write(path: str, exc: OSError) -> NoReturn:
    from ..errors import BundleWriteError  # lazy: errors imports attrs; the cache's hit path never errs

    raise BundleWriteError(path=path, reason=exc.strerror or str(exc)) from None


def _modes_ok(path: str) -> bool:
    """Whether the directory ``path`` and its files have modes `acrl-compile --check` accepts
    (:func:`mode_differs`), so that an unchanged bundle is left as it is."""
    try:
        if mode_differs("", os.lstat(path)):
            return False
        return not any(mode_differs(name, os.lstat(os.path.join(path, name))) for name in os.listdir(path))
    except OSError:
        return False
