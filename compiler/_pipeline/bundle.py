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
        from ..errors import BundleReadError

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
    import errno
    import stat

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
    import stat

    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "a special file"


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
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(BUNDLE_FILE_LIMIT + 1)
        return data if len(data) <= BUNDLE_FILE_LIMIT else TOO_LARGE


BUNDLE_FILE_LIMIT = 16 << 20  # a compiled bundle's files are a few KiB; a larger one is not read whole
TOO_LARGE = b"\0acrl: not read: a file over 16 MiB\n"  # what read_bundle gives for one (never a compiled file)


def write_bundle(path: StrPath, files: Mapping[str, bytes], *, force: bool, recovered: bool = False) -> str:
    """Write ``files`` into directory ``path`` atomically. Returns "created", "unchanged" or
    "replaced". Raises BundleExistsError when ``path`` differs and ``force`` is false.

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
    path = os.fspath(path)
    parent = os.path.dirname(os.path.abspath(path))
    if not recovered:  # the caller ran recover_folder on the parent: a sweep; listing it per point was quadratic
        recover(path)
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
        if _exchange(staging, path):  # staging now holds the old bundle
            _remove_tree(staging)
            return "replaced"
        old = _fresh_dir(parent, os.path.basename(path), ".old")
        os.rename(path, os.path.join(old, "bundle"))
        os.rename(staging, path)
        _remove_tree(old)
        return "replaced"
    except OSError as exc:
        _remove_tree(staging)
        _raise_write(path, exc)


RENAME_EXCHANGE = 2  # linux/fs.h
_AT_FDCWD = -100


def _exchange(a: str, b: str) -> bool:
    """Swap the directories ``a`` and ``b`` in one step (Linux's renameat2 RENAME_EXCHANGE, glibc
    2.28 and later). False, having changed nothing, where the system or the file system cannot."""
    import sys

    if not sys.platform.startswith("linux"):
        return False
    import ctypes
    import errno

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
    import time

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
    import contextlib
    import shutil

    if os.path.islink(path):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return
    shutil.rmtree(path, ignore_errors=True)


def _raise_exists(path: str, reason: str) -> NoReturn:
    from ..errors import BundleExistsError

    raise BundleExistsError(path=path, reason=reason)


def _raise_write(path: str, exc: OSError) -> NoReturn:
    from ..errors import BundleWriteError

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
