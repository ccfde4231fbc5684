"""Read, statically, which command-line flags a slime + Megatron-LM checkout accepts.

slime parses with ``parse_known_args``, so a misspelt or removed flag is silently ignored. When
the user's checkouts are on the compiling machine we read the flags from their source text and
never import slime, megatron, sglang or torch:

* every string literal starting with ``-`` among the leading positional arguments of a call whose
  callee ends in ``add_argument`` or is ``reset_arg``, anywhere in the file (code inside strings
  and comments is skipped); ``action=...BooleanOptionalAction`` also accepts ``--no-<name>``;
* ``ArgumentGroupFactory(SomeConfig, exclude=[...])``, with which newer Megatron-LM builds flag
  groups from dataclasses: the dataclass and its bases are found through the imports and each
  field becomes ``--field-name`` as the factory does it (bools: ``--x`` when the default is False,
  else ``--no-x`` and ``--disable-x``; ``metadata={"argparse_meta": {"arg_names": [...]}}`` wins);
* ``add_*args`` functions that an entry file imports and calls: their module is scanned too.

The scanning itself (regexes that skip strings and comments, ``ast`` on the small pieces) is in
``scan``.

What cannot be enumerated is reported, never guessed. ``--sglang-*`` and ``--router-*`` flags are
generated at run time from sglang's ``ServerArgs``/``RouterArgs``: unverifiable prefixes. A gap (what
could not be read: ``scan``'s docstring lists them) makes a flag not found "unverifiable" instead of
"unknown" only when the gap could hide it: an unreadable dataclass field hides the option strings of
its name; no Megatron checkout, a file that cannot be read, a module, factory dataclass or base class
that cannot be found, or flag names hidden in metadata could hide any flag, so they stay global.

An unknown flag that is a prefix of accepted ones carries its :class:`.flag_verdict.Abbreviation`:
slime's parsers do not expand it, but its sglang parser does (the flags read from
slime/backends/sglang_utils/arguments.py, with the ``--sglang-*`` family and, where that file calls
``RouterArgs.add_cli_args``, the ``--router-*`` one); :mod:`.flag_verdict` says why.
"""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path

import attrs

from .._pipeline.bundle import read_input
from .flag_verdict import MEGATRON_FILE, SGLANG_FILE, FlagCheck, FlagStatus, abbreviation
from .scan import Reader

__all__ = [
    "UNVERIFIED_PREFIXES",
    "AcceptedFlags",
    "FlagCheck",
    "FlagStatus",
    "read_accepted_flags",
    "read_git_commit",
]

UNVERIFIED_PREFIXES = ("--router-", "--sglang-")

_HEX = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


@attrs.frozen
class AcceptedFlags:
    """Every flag read from the checkouts, the files read, and what could not be read."""

    flags: frozenset[str]
    files: tuple[tuple[str, str], ...]  # (path relative to its checkout, sha256), sorted
    unverified_prefixes: tuple[str, ...] = UNVERIFIED_PREFIXES
    gaps: tuple[str, ...] = ()  # why a flag not found may still exist
    scopes: tuple[tuple[str, frozenset[str]], ...] = ()  # a gap -> the only flags it could hide; other gaps: any
    sglang_parser: frozenset[str] = frozenset()  # the flags of slime's sglang parser, which expands abbreviations
    families: tuple[str, ...] = UNVERIFIED_PREFIXES  # the prefixes of the flags that parser generates
    parsers: tuple[str, str] = (SGLANG_FILE, MEGATRON_FILE)  # the files (and lines) of it and allow_abbrev=False

    def hiding(self, flag: str) -> tuple[str, ...]:
        """The gaps that could hide ``flag``."""
        scoped = dict(self.scopes)
        return tuple(gap for gap in self.gaps if gap not in scoped or flag in scoped[gap])

    def check(self, flag: str) -> FlagCheck:
        """Known, unknown (with close matches, and as an abbreviation where it is one) or unverifiable;
        ``--x=value`` is checked as ``--x``."""
        name = flag.split("=", 1)[0]
        if name in self.flags:
            return FlagCheck(name, FlagStatus.KNOWN)
        close = tuple(difflib.get_close_matches(name, self.flags, n=3, cutoff=0.75))
        prefix = next((p for p in self.unverified_prefixes if name.startswith(p)), None)
        if prefix is not None:
            why = f"{prefix}* flags are generated at run time and cannot be read from the source"
            return FlagCheck(name, FlagStatus.UNVERIFIABLE, close, why)
        if hiding := self.hiding(name):
            why = "not found, but the flags could not all be read: " + "; ".join(hiding)
            return FlagCheck(name, FlagStatus.UNVERIFIABLE, close, why)
        return FlagCheck(name, FlagStatus.UNKNOWN, close, "accepted by neither slime nor Megatron-LM",
                         abbreviation(name, self.flags, self.sglang_parser, self.families, self.parsers))


def read_accepted_flags(slime_dir: Path, megatron_dir: Path | None) -> AcceptedFlags | None:
    """Read the flags of a slime checkout and, if given and present, its Megatron-LM checkout.

    None when ``slime_dir`` has no ``slime/utils/arguments.py`` (not a slime checkout on this
    machine). Reads every ``arguments*.py`` under ``slime/`` and Megatron's
    ``megatron/training/arguments.py``, plus the modules these lead to. Without a Megatron checkout
    the result has a gap, so flags not found in slime are unverifiable rather than unknown.
    """
    slime_dir = Path(slime_dir)
    entry = slime_dir / "slime" / "utils" / "arguments.py"
    if not entry.is_file():
        return None
    reader = Reader((slime_dir,) if megatron_dir is None else (slime_dir, Path(megatron_dir)))
    for path in sorted({entry, *_find_arguments_files(slime_dir / "slime")}):
        reader.scan(path, follow=path == entry)
    if megatron_dir is None:
        reader.gaps.append("no Megatron-LM checkout was given, so Megatron's flags were not read")
    elif (Path(megatron_dir) / "megatron" / "training" / "arguments.py").is_file():
        reader.scan(Path(megatron_dir) / "megatron" / "training" / "arguments.py", follow=True)
    else:
        reader.gaps.append(
            f"{megatron_dir} has no megatron/training/arguments.py, so Megatron's flags were not read"
        )
    sglang = slime_dir / SGLANG_FILE
    sglang_text = _source_text(reader, sglang)
    megatron_text = _source_text(reader, Path(megatron_dir) / MEGATRON_FILE) if megatron_dir is not None else ""
    routers = sglang_text is None or re.search(r"\bRouterArgs\s*\.\s*add_cli_args\s*\(", sglang_text)
    return AcceptedFlags(
        frozenset(reader.flags), tuple(sorted(reader.files.items())), gaps=tuple(reader.gaps),
        scopes=tuple(reader.scopes.items()), sglang_parser=reader.defined.get(sglang, frozenset()),
        families=UNVERIFIED_PREFIXES if routers else ("--sglang-",),
        parsers=(str(sglang) + _line(sglang_text, r"^def sglang_parse_args\b") + " sglang_parse_args",
                 str(Path(megatron_dir or "") / MEGATRON_FILE) + _line(megatron_text, r"\ballow_abbrev\s*=\s*False")))


def _source_text(reader: Reader, path: Path) -> str | None:
    """The text of a file the reader read, else None."""
    source = reader.load(path) if path in reader.scanned else None
    return source.text if source is not None else None


def _line(text: str | None, pattern: str) -> str:
    """``:LINE`` of the first match of ``pattern`` in ``text``, else ""."""
    m = re.search(pattern, text or "", re.M)
    return f":{(text or '').count(chr(10), 0, m.start()) + 1}" if m else ""


def read_git_commit(checkout: Path) -> str | None:
    """The commit a checkout's HEAD points at, read from ``.git`` without running git.

    Follows ``.git`` files (``gitdir: ...``, worktrees and submodules, with ``commondir``),
    symbolic refs, loose refs and ``packed-refs``. None if not a git checkout, HEAD is unborn,
    or the refs are stored in a form this does not read (reftable).
    """
    checkout = Path(checkout)
    dotgit = checkout / ".git"
    try:
        if dotgit.is_file():
            line = _text(dotgit).strip()
            if not line.startswith("gitdir:"):
                return None
            gitdir = checkout / line[len("gitdir:") :].strip()
        elif dotgit.is_dir():
            gitdir = dotgit
        else:
            return None
        common = (
            gitdir / _text(gitdir / "commondir").strip()
            if (gitdir / "commondir").is_file()
            else gitdir
        )
        head: str | None = _text(gitdir / "HEAD").strip()
        for _ in range(8):
            if head is None or _HEX.fullmatch(head):
                return head
            if not head.startswith("ref:"):
                return None
            head = _read_ref(gitdir, common, head[len("ref:") :].strip())
    except (OSError, UnicodeDecodeError):
        return None
    return None


GIT_LIMIT = 256 << 20  # of packed-refs (a large repository's is tens of MiB); other git files are tiny


def _text(path: Path, *, limit: int = 1 << 20) -> str:
    """A git file's text, read bounded (raises OSError when not a regular file or too large; UnicodeDecodeError)."""
    return read_input(path, limit=limit).decode("utf-8")


def _read_ref(gitdir: Path, common: Path, ref: str) -> str | None:
    for base in (gitdir, common):
        if (base / ref).is_file():
            return _text(base / ref).strip()
    if (common / "packed-refs").is_file():
        for line in _text(common / "packed-refs", limit=GIT_LIMIT).splitlines():
            sha, _, name = line.partition(" ")
            if not line.startswith(("#", "^")) and name.strip() == ref:
                return sha
    return None


def _find_arguments_files(top: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(top):
        dirnames[:] = [d for d in dirnames if not d.startswith((".", "__pycache__"))]
        found += [Path(dirpath, f) for f in filenames if f.startswith("arguments") and f.endswith(".py")]
    return found

