"""Stage 6, hash, and every bounded read: the manifest's hashes, the modes a bundle's files are
written with, a bundle directory's files as they are (never following a link), and the bounded
read of any input a user gives acrl.

The bundle hash (bundle format 2) is the sha256 of the canonical JSON of the manifest without its
``bundle_hash`` field: the manifest's ``files`` lists every other file's sha256, so the hash covers
every file and every manifest field (exp_id, derived, warnings, ...). Writing a bundle is
:mod:`acrl.compiler._pipeline.bundle`'s.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    StrPath = str | os.PathLike[str]

MANIFEST = "manifest.json"
EXECUTABLE = frozenset({"train.sh", "join.sh"})


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def manifest_hash(manifest: Mapping[str, object]) -> str:
    """The bundle hash: sha256 of the canonical JSON (sorted keys, no spaces, ASCII) of ``manifest``
    without its ``bundle_hash`` field. Covers every file (the manifest's ``files``: name -> sha256)
    and every other field of the manifest."""
    import json  # lazy: the compile cache's hit path writes a bundle without json

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
    # lazy: only a group-writable file asks who its group is
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
    bits = stat.S_IWOTH | stat.S_ISUID | stat.S_ISGID | stat.S_ISVTX
    if st.st_mode & stat.S_IWGRP and not _private_group(st.st_uid, st.st_gid):
        bits |= stat.S_IWGRP
    return stat.S_IMODE(st.st_mode) & bits


def mode_differs(name: str, st: os.stat_result) -> bool:
    """Whether the bundle entry ``name`` (``""`` or ``./`` for the directory) has a mode that
    `acrl-compile --check` reports: unsafe bits, or a file whose owner-execute bit is not the one
    write_bundle gives it. Other bits are left to the checkout's umask, as git leaves them (git keeps
    only the execute bit), so a bundle checked out under ``umask 002`` or ``077`` is not stale."""
    if unsafe_bits(st):
        return True
    if name in ("", "./"):
        return False
    return bool(st.st_mode & stat.S_IXUSR) != bool(written_mode(name) & stat.S_IXUSR)


def unsafe_modes(path: StrPath, names: Iterable[str]) -> list[tuple[str, int, int]]:
    """(name, mode, unsafe bits) of the bundle directory (``""``) and of each file of ``names`` in it
    whose mode has :func:`unsafe_bits`. Entries that are gone are left out."""
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
    bits = mode if bits is None else bits
    what = [word for bit, word in ((stat.S_IWGRP, "group-writable"), (stat.S_IWOTH, "other-writable"),
                                   (stat.S_ISUID, "set-user-ID"), (stat.S_ISGID, "set-group-ID"),
                                   (stat.S_ISVTX, "sticky")) if bits & bit]
    return f"{mode:04o} ({', '.join(what)})" if what else f"{mode:04o}"


NOT_REGULAR = "/!"  # the suffix of an entry that is not a regular file or a directory (no file name has a "/")


def read_files(path: StrPath) -> dict[str, bytes] | None:
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
        from ..errors import BundleReadError  # lazy: errors (attrs) is not needed to write a cached bundle

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


INPUT_LIMIT = 1 << 20  # the most bytes acrl reads of any one input a user gives it (a spec, a script, a config.json)
YAML_LIMIT = 256 << 10  # of a YAML file: PyYAML (pure Python) parses about 100 KiB a second


def read_file(path: str, *, limit: int = INPUT_LIMIT) -> bytes | None:
    """The bytes of the file ``path``, or None when it cannot be read (missing, a directory, a device,
    larger than ``limit``, ...). Read once: ``path`` may be a pipe (/dev/stdin, <(...))."""
    try:
        return read_input(path, limit=limit, pipe=True)
    except (OSError, ValueError):
        return None


def read_input(path: StrPath, *, limit: int = INPUT_LIMIT, pipe: bool = False) -> bytes:
    """The bytes of ``path``, a file a user gave acrl to read (a spec, a base spec, a YAML, a script,
    a config.json): a regular file (through symbolic links) or, with ``pipe``, a pipe; at most
    ``limit`` bytes. Raises OSError whose strerror says why in words a message can show: "too large
    (over the limit of 4 MiB)", "not a regular file (a character device)", or the system's reason.
    A device (/dev/zero), a directory, a socket or (without ``pipe``) a FIFO is never read, and
    opening a FIFO never waits for a writer."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISREG(mode) or (pipe and stat.S_ISFIFO(mode))):
            raise OSError(errno.EINVAL, f"not a regular file ({_kind(mode)})")
        if stat.S_ISFIFO(mode) and hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # wait for the writer's data, as cat would (no writer: end of file)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OSError(errno.EFBIG, f"too large (over the limit of {_size(limit)})")
        return b"".join(chunks)
    finally:
        os.close(fd)


def _size(limit: int) -> str:
    for shift, unit in ((20, "MiB"), (10, "KiB")):
        if limit >= 1 << shift and not limit % (1 << shift):
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


def _read_regular(path: str) -> bytes | None:
    """The bytes of the regular file ``path``, never through a symbolic link; None when it is not one."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO):
            return None
        raise
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(BUNDLE_FILE_LIMIT + 1)
        return data if len(data) <= BUNDLE_FILE_LIMIT else TOO_LARGE


BUNDLE_FILE_LIMIT = 16 << 20  # a compiled bundle's files are a few KiB; a larger one is not read whole
TOO_LARGE = b"\0acrl: not read: a file over 16 MiB\n"  # what read_files gives for one (never a compiled file)
