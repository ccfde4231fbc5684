"""The size and sha256 of the files a run reads (its [data] path and [eval.datasets]), for the run record.

The datasets check already streams every dataset line by line (checks.scan_jsonl): it hashes what it
reads and leaves the result here, keyed by the file's identity (device, inode, size, modification
time), so that the record costs no second read. A file the check did not read (--skip datasets) is
hashed here, streamed, up to ACRL_HASH_LIMIT_GIB (default 64 GiB): a larger one is recorded with its
size and why it has no hash. Only a regular file readable on the launching machine is read; a FIFO
or a device never is (it could block, or never end).
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import threading
from pathlib import Path

import attrs

from acrl.compiler import AcrlError, file_kind

CHUNK = 1 << 20
DEFAULT_LIMIT_GIB = 64.0


@attrs.frozen
class Fingerprint:
    size: int
    sha256: str


_SEEN: dict[tuple[str, int, int, int, int], Fingerprint] = {}
_LOCK = threading.Lock()


def identity(path: str | os.PathLike[str], st: os.stat_result) -> tuple[str, int, int, int, int]:
    """What names one version of one file: its path, device, inode, size and modification time (ns)."""
    return (os.fspath(path), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def remember(path: str | os.PathLike[str], before: os.stat_result, after: os.stat_result, size: int,
             digest: str) -> None:
    """Keep the fingerprint of ``path`` as read between the stats ``before`` and ``after``; nothing when the file
    changed while it was read (then the record hashes it again)."""
    key = identity(path, before)
    if key == identity(path, after) and size == before.st_size:
        with _LOCK:
            _SEEN[key] = Fingerprint(size, digest)


def hash_limit() -> int:
    """ACRL_HASH_LIMIT_GIB in bytes: the largest file the record hashes when no check has read it."""
    value = os.environ.get("ACRL_HASH_LIMIT_GIB", "")
    try:
        gib = float(value) if value else DEFAULT_LIMIT_GIB
        if not 0 <= gib < 1 << 20:
            raise ValueError
    except ValueError:
        raise AcrlError(f"ACRL_HASH_LIMIT_GIB={value!r}: not a number of GiB",
                        hint=f"set it to the largest data file to hash for the run record (default "
                        f"{DEFAULT_LIMIT_GIB:g}), or unset it") from None
    return int(gib * (1 << 30))


def open_regular(path: str | os.PathLike[str]) -> tuple[int, os.stat_result]:
    """A read-only descriptor of ``path`` and its stat; OSError (EINVAL) for anything but a regular file. Opened
    non-blocking: a FIFO never makes it wait for a writer."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise OSError(errno.EINVAL, f"not a regular file ({file_kind(st.st_mode)})")
    return fd, st


def fingerprint(path: Path, limit: int | None = None) -> tuple[int, str | None, str | None]:
    """(size, sha256 or None, why not or None) of the regular file ``path``: the datasets check's when it read
    this very file, else streamed here unless larger than ``limit`` (default: :func:`hash_limit`). Raises
    OSError when it cannot be opened, or is not a regular file."""
    fd, before = open_regular(path)
    with _LOCK:
        seen = _SEEN.get(identity(path, before))
    if seen is not None:
        os.close(fd)
        return seen.size, seen.sha256, None
    limit = hash_limit() if limit is None else limit
    if before.st_size > limit:
        os.close(fd)
        return before.st_size, None, (f"not hashed: {before.st_size} bytes, over the {limit / (1 << 30):g} GiB "
                                      "limit (ACRL_HASH_LIMIT_GIB)")
    digest = hashlib.sha256()
    size = 0
    with os.fdopen(fd, "rb") as f:
        while chunk := f.read(CHUNK):
            digest.update(chunk)
            size += len(chunk)
        after = os.fstat(f.fileno())
    if identity(path, after) != identity(path, before) or size != before.st_size:
        return size, None, "not hashed: the file changed while it was read"
    remember(path, before, after, size, digest.hexdigest())
    return size, digest.hexdigest(), None
