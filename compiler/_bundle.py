"""Stages 6 and 7, hash and write: the manifest's hashes, and writing a bundle atomically.

The bundle hash (bundle format 2) is the sha256 of the canonical JSON of the manifest without its
``bundle_hash`` field: the manifest's ``files`` lists every other file's sha256, so the hash covers
every file and every manifest field (exp_id, derived, warnings, ...). A bundle is written into a
temporary sibling directory and renamed into place, so a reader never sees half a bundle; an
existing different bundle is replaced only when forced.
"""

from __future__ import annotations

import hashlib
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import NoReturn

    StrPath = str | os.PathLike[str]

MANIFEST = "manifest.json"
EXECUTABLE = frozenset({"train.sh"})


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_hash(manifest: Mapping[str, object]) -> str:
    """The bundle hash: sha256 of the canonical JSON (sorted keys, no spaces, ASCII) of ``manifest``
    without its ``bundle_hash`` field. Covers every file (the manifest's ``files``: name -> sha256)
    and every other field of the manifest."""
    import json

    body = {key: value for key, value in manifest.items() if key != "bundle_hash"}
    return sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode())


# A bundle directory and its files are written with these modes (see write_bundle).
DIR_MODE, FILE_MODE, EXECUTABLE_MODE = 0o755, 0o644, 0o755


def written_mode(name: str) -> int:
    """The mode write_bundle gives the bundle file ``name``."""
    return EXECUTABLE_MODE if name in EXECUTABLE else FILE_MODE


def _private_group(uid: int, gid: int) -> bool:
    """Whether group ``gid`` is user ``uid``'s own: its primary group, named after it, with no other
    member (the user-private-group scheme, under which ``umask 002`` is the default and a git
    checkout's files are group-writable without anyone else being able to write them)."""
    import grp
    import pwd

    try:
        user, group = pwd.getpwuid(uid), grp.getgrgid(gid)
    except (KeyError, OverflowError):
        return False
    return user.pw_gid == gid and group.gr_name == user.pw_name and set(group.gr_mem) <= {user.pw_name}


def unsafe_bits(st: os.stat_result) -> int:
    """The mode bits of ``st`` that let someone else change the entry after it was checked (other-
    writable; group-writable unless the group is the owner's private group) or run it with other
    rights (set-user-ID, set-group-ID, sticky)."""
    import stat

    bits = stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
    if st.st_mode & stat.S_IWGRP and not _private_group(st.st_uid, st.st_gid):
        bits |= stat.S_IWGRP
    return stat.S_IMODE(st.st_mode) & bits


def mode_differs(name: str, st: os.stat_result) -> bool:
    """Whether the bundle entry ``name`` (``""`` or ``./`` for the directory) has a mode that
    `acrl-compile --check` reports: unsafe bits, or a file whose owner-execute bit is not the one
    write_bundle gives it. Other bits are left to the checkout's umask, as git leaves them (git keeps
    only the execute bit), so a bundle checked out under ``umask 002`` or ``077`` is not stale."""
    import stat

    if unsafe_bits(st):
        return True
    if name in ("", "./"):
        return False
    return bool(st.st_mode & stat.S_IXUSR) != bool(written_mode(name) & stat.S_IXUSR)


def unsafe_modes(path: StrPath, names: Iterable[str]) -> list[tuple[str, int, int]]:
    """(name, mode, unsafe bits) of the bundle directory (``""``) and of each file of ``names`` in it
    whose mode has :func:`unsafe_bits`. Entries that are gone are left out."""
    import stat

    found = []
    for name in ("", *names):
        try:
            st = os.lstat(os.path.join(path, name))
        except OSError:
            continue
        if bits := unsafe_bits(st):
            found.append((name, stat.S_IMODE(st.st_mode), bits))
    return found


def describe_mode(mode: int, bits: int | None = None) -> str:
    """``0775 (group-writable)``: the mode and what is unsafe about it (``bits``; all of ``mode``'s
    unsafe-looking bits when not given)."""
    import stat

    bits = mode if bits is None else bits
    what = [word for bit, word in ((stat.S_IWGRP, "group-writable"), (stat.S_IWOTH, "other-writable"),
                                   (stat.S_ISUID, "set-user-ID"), (stat.S_ISGID, "set-group-ID"),
                                   (stat.S_ISVTX, "sticky")) if bits & bit]
    return f"{mode:04o} ({', '.join(what)})" if what else f"{mode:04o}"


NOT_REGULAR = "/!"  # the suffix of an entry that is not a regular file or a directory (no file name has a "/")


def read_bundle(path: StrPath) -> dict[str, bytes] | None:
    """The files of an existing bundle directory (top level only), or None when there is none.

    Only regular files are read. A subdirectory is listed as ``name/`` with no content; a symbolic
    link (to anything) as ``name/!`` with the content ``symbolic link``, and any other entry (a
    FIFO, a socket, a device) as ``name/!`` with the content ``special file``: a link is never
    followed, so a bundle whose train.sh points elsewhere never reads as the same bundle."""
    if not os.path.isdir(path):
        return None
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as exc:  # unreadable (permissions), or gone since the check
        from ._errors import BundleReadError

        raise BundleReadError(path=os.fspath(path), reason=f"cannot be listed: {exc.strerror or exc}",
                              fix="give a bundle directory you can read") from None
    files: dict[str, bytes] = {}
    for entry in entries:
        if entry.is_symlink():
            files[entry.name + NOT_REGULAR] = b"symbolic link"
        elif entry.is_dir(follow_symlinks=False):
            files[entry.name + "/"] = b""
        elif entry.is_file(follow_symlinks=False):
            try:
                data = _read_regular(entry.path)  # None: swapped for a link or special file since the listing
            except OSError as exc:  # unreadable (permissions; a /proc file)
                files[entry.name + NOT_REGULAR] = f"unreadable: {exc.strerror or exc}".encode()
                continue
            if data is None:
                files[entry.name + NOT_REGULAR] = b"special file"
            else:
                files[entry.name] = data
        else:
            files[entry.name + NOT_REGULAR] = b"special file"
    return files


def read_file(path: str) -> bytes | None:
    """The bytes of the file ``path``, or None when it cannot be read (missing, a directory, ...).
    Read once, with open: ``path`` may be a pipe (/dev/stdin, <(...))."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _read_regular(path: str) -> bytes | None:
    """The bytes of the regular file ``path``, never through a symbolic link; None when it is not one."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        import errno

        if exc.errno in (errno.ELOOP, errno.ENXIO):
            return None
        raise
    with os.fdopen(fd, "rb") as f:
        return f.read() if stat.S_ISREG(os.fstat(f.fileno()).st_mode) else None


def write_bundle(path: StrPath, files: Mapping[str, bytes], *, force: bool) -> str:
    """Write ``files`` into directory ``path`` atomically. Returns "created", "unchanged" or
    "replaced". Raises BundleExistsError when ``path`` differs and ``force`` is false.

    Only os and hashlib are imported on the way to "created" or "unchanged", so that the compile
    cache's fast path stays fast; errors import what they need.
    """
    path = os.fspath(path)
    existing = read_bundle(path)
    if existing is not None:
        if existing == dict(files) and _modes_ok(path):
            return "unchanged"
        if not force:
            _raise_exists(path, "exists and differs from the compiled bundle")
        if existing and MANIFEST not in existing:
            _raise_exists(path, "is not empty and is not an acrl bundle (no manifest.json), so even --force keeps it")
    elif os.path.lexists(path):
        _raise_exists(path, "exists and is not a directory")
    parent = os.path.dirname(os.path.abspath(path))
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
            return "created"
        old = _fresh_dir(parent, os.path.basename(path), ".old")
        os.rename(path, os.path.join(old, "bundle"))
        os.rename(staging, path)
        _remove_tree(old)
        return "replaced"
    except OSError as exc:
        _remove_tree(staging)
        _raise_write(path, exc)


def _fresh_dir(parent: str, name: str, suffix: str) -> str:
    """A new, empty directory ``.<name>.<random><suffix>`` in ``parent`` (what tempfile.mkdtemp
    does, without importing tempfile, random and shutil)."""
    for _ in range(100):
        candidate = os.path.join(parent, f".{name}.{os.urandom(6).hex()}{suffix}")
        try:
            os.mkdir(candidate, 0o700)
        except FileExistsError:
            continue
        return candidate
    raise FileExistsError(f"no free temporary name in {parent}")


def _remove_tree(path: str) -> None:
    import shutil

    shutil.rmtree(path, ignore_errors=True)


def _raise_exists(path: str, reason: str) -> NoReturn:
    from ._errors import BundleExistsError

    raise BundleExistsError(path=path, reason=reason)


def _raise_write(path: str, exc: OSError) -> NoReturn:
    from ._errors import BundleWriteError

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
