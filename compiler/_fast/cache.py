"""The compile cache: a compile that succeeded, kept under everything that determined its output.

Compiling needs attrs, cattrs, Jinja and PyYAML, and importing them alone takes ~8x as long as
starting the interpreter. Compiling a spec that has not changed since its last compile (the
regenerate-and-commit loop, CI, ``--check``) needs none of them: the CLI looks the spec up here
first, and on a hit writes the kept files, prints the kept warnings and notes, and is done.

A hit can never give other bytes than compiling would:

- The key holds the spec's bytes, the path it was given as and the working directory (they show
  in messages and resolve the spec's relative paths), ``--strict``, the Python version and a
  fingerprint of the code that compiles: each file of acrl's compiler and templates and of the
  libraries it renders with (size, mtime, inode), so an edit, upgrade or reinstall is a new key.
- The ``--set`` overrides, in order, are part of the key too, and so are the slime and Megatron-LM
  checkouts asked for on this machine (--slime-checkout, ACRL_SLIME_CHECKOUT, ...): another checkout
  can give other MODEL_ARGS and other flag checks. A compile that read a checkout is never kept.
- Each entry lists the files outside the spec that the compile read or looked for (the
  checkpoint's config.json, the slime checkout, the base specs named by ``extends``), each with its
  stat signature, or with "absent";
  any change is a miss. Compiles whose inputs cannot all be named that way (a slime model script
  was sourced by bash; a slime checkout was read to verify flags) are not kept.
- Each entry starts with the sha256 of the rest: a truncated or corrupt entry is a miss and is
  removed. Entries are written to a temporary name and renamed into place.
- The directory ($XDG_CACHE_HOME/acrl/compile, default ~/.cache/acrl/compile) must be the user's
  own and not writable by others, as entries are unmarshalled; otherwise there is no cache.
- At most ``MAX_ENTRIES`` entries are kept; the least recently used go first.

The same directory keeps the text of ``--help`` (:func:`help_text`): argparse's output for the same
words, terminal width, Python and acrl code, so that ``acrl --help`` need not import argparse's
helpers and build every parser to print what it printed last time.

Only the standard library's lightest modules are imported here (hashlib only by the functions that
hash, as it loads OpenSSL): a hit must stay cheap.
"""

from __future__ import annotations

import marshal
import os
import stat
import sys

from .._version import __version__

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import Any

FORMAT = 1
MAX_ENTRIES = 256
_SUFFIX = ".acrl-compile"
_TIMESTAMP_SLACK_NS = 2_000_000_000  # coarser file-system clocks (FAT: 2 s) included
# Libraries whose code shapes a bundle's bytes (the compiler's own files are added by directory).
_LIBRARIES = ("attr", "attrs", "cattrs", "jinja2", "markupsafe", "yaml", "tomli_w")
# .json: the facts a compile reads (model_args/slime_models.json, _slime/commits/ and _slime/sglang/*.json)
_CODE_SUFFIXES = (".py", ".jinja", ".so", ".pyd", ".json")

Signature = tuple[int, int, int, int] | None  # (mtime_ns, ctime_ns, size, inode), None: absent
UNKNOWN: Signature = (-1, -1, -1, -1)  # cannot be stat'ed: a compile that read it is not kept


class Entry:
    """What a compile printed and wrote: enough to repeat it without compiling."""

    __slots__ = ("bundle_hash", "exp_id", "files", "inputs", "notes", "warnings")

    def __init__(self, exp_id: str, bundle_hash: str, files: Mapping[str, bytes],
                 warnings: Iterable[tuple[str, dict[str, object]]], notes: Iterable[str],
                 inputs: Iterable[tuple[str, Signature]]) -> None:
        self.exp_id = exp_id
        self.bundle_hash = bundle_hash
        self.files = dict(files)
        self.warnings = tuple(warnings)  # (as printed, as JSON)
        self.notes = tuple(notes)
        self.inputs = tuple(inputs)

    def _data(self) -> tuple[Any, ...]:  # what marshal can write
        return (FORMAT, self.exp_id, self.bundle_hash, sorted(self.files.items()),
                [list(w) for w in self.warnings], list(self.notes), [list(i) for i in self.inputs])


def cache_directory(name: str) -> str | None:
    """$XDG_CACHE_HOME/acrl/<name> (default ~/.cache/acrl/<name>), created if needed; None where it
    cannot be, or is not the user's own, or others could write to it or to a directory above it up to
    the cache home (anyone could plant code, or swap the directory for theirs)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):  # unset, empty or relative: the XDG default
        base = os.path.join(os.path.expanduser("~"), ".cache")
    path = os.path.join(base, "acrl", name)
    try:
        os.makedirs(path, mode=0o700, exist_ok=True)
        chain = [os.lstat(p) for p in (path, os.path.dirname(path), base)]
    except OSError:
        return None
    owner = os.getuid() if hasattr(os, "getuid") else chain[0].st_uid
    for st in chain:
        others_write = st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX  # a sticky /tmp-like home is fine
        if not stat.S_ISDIR(st.st_mode) or others_write or st.st_uid not in (owner, 0):
            return None
    if chain[0].st_uid != owner or chain[0].st_mode & 0o022:
        return None
    return path


def signature(path: str) -> Signature:
    """What says a file (or directory) is unchanged: its stat, None when there is nothing there, or
    UNKNOWN when it cannot be told (a symbolic link loop, a name too long, no permission)."""
    try:
        st = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, ValueError):
        return UNKNOWN
    return (st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino)


def key(spec_path: str, spec_sha256: str, *, strict: bool, overrides: Sequence[str] = (),
        checkouts: Sequence[object] = ()) -> str:
    """The entry name for compiling the spec with this sha256, read from ``spec_path``, with the
    ``--set`` ``overrides`` (in order) and the local ``checkouts`` asked for (_slime/checkout.py:
    requested), in this process."""
    import hashlib  # lazy: it loads OpenSSL; `--help` reads kept help through this module and never hashes

    material = repr((FORMAT, __version__, sys.version, sys.flags.optimize, os.getcwd(), spec_path, strict,
                     spec_sha256, list(overrides), _code_fingerprint(), *([list(checkouts)] if checkouts else [])))
    return hashlib.sha256(material.encode()).hexdigest()


def lookup(spec_path: str, spec_bytes: bytes, *, strict: bool, overrides: Sequence[str] = (),
           checkouts: Sequence[object] = ()) -> Entry | None:
    """The kept compile of ``spec_bytes``, read from ``spec_path``, or None (no cache, no entry, or
    out of date)."""
    import hashlib  # lazy: it loads OpenSSL; `--help` reads kept help through this module and never hashes

    where = cache_directory("compile")
    if where is None:
        return None
    digest = hashlib.sha256(spec_bytes).hexdigest()
    entry_path = os.path.join(where, key(spec_path, digest, strict=strict, overrides=overrides,
                                           checkouts=checkouts) + _SUFFIX)
    try:
        with open(entry_path, "rb") as f:
            raw = f.read()
    except OSError:
        return None
    entry = _decode(raw)
    if entry is None:
        _remove(entry_path)
        return None
    if any(signature(path) != sig for path, sig in entry.inputs):
        return None
    _quietly(os.utime, entry_path)  # recently used
    return entry


def store(spec_path: str, spec_sha256: str, entry: Entry, *, strict: bool, started_ns: int,
          overrides: Sequence[str] = (), checkouts: Sequence[object] = ()) -> bool:
    """Keep ``entry``, the compile of the spec with sha256 ``spec_sha256``, which started at
    ``started_ns`` (time.time_ns()). Returns whether it was kept; any error only means it was not.

    An input changed too recently to be told apart from the version the compile read (the same
    timestamp, give or take the file system's resolution) is a reason not to keep it, as in git's
    "racy clean" check.
    """
    import hashlib  # lazy: it loads OpenSSL; `--help` reads kept help through this module and never hashes

    where = cache_directory("compile")
    if where is None:
        return False
    for _, sig in entry.inputs:
        if sig is not None and max(sig[0], sig[1]) >= started_ns - _TIMESTAMP_SLACK_NS:
            return False
    payload = marshal.dumps(entry._data())
    target = os.path.join(where, key(spec_path, spec_sha256, strict=strict, overrides=overrides,
                                       checkouts=checkouts) + _SUFFIX)
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as f:
            f.write(hashlib.sha256(payload).digest() + payload)
        os.replace(temporary, target)
    except OSError:
        _remove(temporary)
        return False
    _prune(where)
    return True


def _decode(raw: bytes) -> Entry | None:
    import hashlib  # lazy: it loads OpenSSL; `--help` reads kept help through this module and never hashes

    digest, payload = raw[:32], raw[32:]
    if hashlib.sha256(payload).digest() != digest:
        return None
    try:
        fmt, exp_id, bundle_hash, files, warnings, notes, inputs = marshal.loads(payload)
        if fmt != FORMAT:
            return None
        return Entry(exp_id, bundle_hash, dict(files), [(text, data) for text, data in warnings], notes,
                     [(path, tuple(sig) if sig is not None else None) for path, sig in inputs])
    except (ValueError, TypeError, EOFError):
        return None


def _prune(where: str) -> None:
    try:
        entries = [e for e in os.scandir(where) if e.name.endswith(_SUFFIX)]
        if len(entries) <= MAX_ENTRIES:
            return
        entries.sort(key=lambda e: e.stat().st_mtime_ns)
        for old in entries[: len(entries) - MAX_ENTRIES]:
            _remove(old.path)
    except OSError:
        pass


def _remove(path: str) -> None:
    _quietly(os.unlink, path)


def _quietly(operation: Callable[[str], object], path: str) -> None:
    """``operation(path)``, where failing only means the cache does less (contextlib.suppress,
    without importing contextlib on the fast path)."""
    try:
        operation(path)
    except OSError:
        return


_FINGERPRINT: str | None = None


def _code_fingerprint() -> str:
    """The stat of every file of acrl's compiler and templates and of the libraries it compiles with."""
    global _FINGERPRINT
    if _FINGERPRINT is None:
        import hashlib  # lazy: it loads OpenSSL; `--help` reads kept help through this module and never hashes

        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        stats: list[object] = []
        for folder in (here, os.path.join(os.path.dirname(here), "templates")):
            stats += _tree_signatures(folder)
        for name in _LIBRARIES:
            stats.append((name, _library_signature(name)))
        _FINGERPRINT = hashlib.sha256(repr(stats).encode()).hexdigest()
    return _FINGERPRINT


def _tree_signatures(folder: str) -> list[object]:
    """(path, signature) of every code file under ``folder``, sub-packages included."""
    found: list[object] = []
    for top, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        found += [(os.path.join(top, n), signature(os.path.join(top, n)))
                  for n in sorted(names) if n.endswith(_CODE_SUFFIXES)]
    return found or [(folder, None)]


def _library_signature(name: str) -> object:
    """Where a top-level package is on sys.path, with its files' signatures, without importing it."""
    for entry in sys.path:
        folder = os.path.join(entry or os.getcwd(), name)
        if os.path.isfile(os.path.join(folder, "__init__.py")):
            return _tree_signatures(folder)
    return None


def help_text(prog: str, words: Sequence[str], columns: int) -> str | None:
    """The help argparse printed for ``prog words`` at this width, if kept and still current: the
    same Python, and the same files in acrl's compiler and runtime (where the commands are defined)."""
    where = cache_directory("help")
    if where is None:
        return None
    try:
        with open(os.path.join(where, _help_name(prog, words, columns)), encoding="utf-8") as f:
            material, _, text = f.read().partition("\n")
    except (OSError, UnicodeDecodeError):
        return None
    expected = _help_material(prog, words, columns, len(text))
    return text if material == expected else None


def keep_help(prog: str, words: Sequence[str], columns: int, text: str) -> None:
    """Keep the help argparse printed for ``prog words`` at this width (see :func:`help_text`)."""
    where = cache_directory("help")
    if where is None or "\n" in prog or any("\n" in w for w in words):
        return
    target = os.path.join(where, _help_name(prog, words, columns))
    temporary = f"{target}.{os.getpid()}.tmp"
    try:
        with open(temporary, "w", encoding="utf-8") as f:
            f.write(_help_material(prog, words, columns, len(text)) + "\n" + text)
        os.replace(temporary, target)
    except OSError:
        _remove(temporary)


def _help_name(prog: str, words: Sequence[str], columns: int) -> str:
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in "-".join([prog, *words]))
    return f"{safe[:100]}-{columns}.help"


def _help_material(prog: str, words: Sequence[str], columns: int, length: int) -> str:
    """Everything the help text depends on, and its length (a truncated file does not match)."""
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = [*_tree_signatures(here), *_tree_signatures(os.path.join(os.path.dirname(here), "runtime"))]
    return repr((FORMAT, __version__, sys.version, prog, list(words), columns, length, code))
