"""The slime commit an import targets, written as ``[slime] commit`` and used to map the input's flags (a flag the
commit lacks is left out with a note; one it has maps onto its spec key, ACRL-F003 gating the key at compile time).

``--target-commit REV`` names it: a commit acrl has facts for (compiler/_slime/commits), as a full hash, a prefix of
at least 7 hex digits or a tag those facts' provenance lists (``v0.3.1``). Without it, `acrl import train-sh` takes
the commit of the slime checkout the script is read from (the nearest folder above it with a ``.git``, holding
slime's ``slime/utils/arguments.py``), else of ``--slime-checkout`` / ``ACRL_SLIME_CHECKOUT`` where that is a git
checkout, when acrl has facts for that commit: slime's own ``scripts/run-*.sh`` use the flags of the commit they come
from. Otherwise, and always for `acrl import slime-runner` (SlimeRunner runs the slime that agentcore-rl-toolkit's
installer pins: src/agentcore_rl_toolkit/backends/slime/scripts/install_slime.sh:97 at 7bdd415 checks out fa3c990),
the target is the pin, :data:`TOOLKIT_SLIME_COMMIT` (``[slime] commit``'s default). A target taken from a checkout
is said in a note, and so is a checkout at a commit acrl has no facts for; the spec writes ``[slime] commit`` only
where it is not the default (as the importers write no other default).
"""

from __future__ import annotations

import re
from pathlib import Path

import attrs

from .._slime.checkout import requested
from .._slime.commit_facts import CommitFacts, commit_facts, known_commits
from .._slime.default_facts import SLIME_ARGUMENTS_PY
from .._slime.source import read_git_commit
from .._spec.tables import TOOLKIT_SLIME_COMMIT
from ..errors import UsageError
from .base import Note

_HEX = re.compile(r"[0-9a-fA-F]{7,40}")
_OPTION = "--target-commit"


@attrs.frozen
class Target:
    """The targeted commit (a full hash) and the notes that say why it is that one."""

    commit: str = TOOLKIT_SLIME_COMMIT
    notes: tuple[Note, ...] = ()

    def write(self, spec: dict[str, dict[str, object]]) -> None:
        """``[slime] commit`` into the imported spec's data, where it is not the default (the pin)."""
        if self.commit != TOOLKIT_SLIME_COMMIT:
            spec.setdefault("slime", {})["commit"] = self.commit


def known() -> str:
    """The commits acrl has facts for, as a usage error lists them: ``fa3c990 (the default), v0.3.0 (bf14dc2)``."""
    shown = []
    for facts in known_commits():
        what = ["agentcore-rl-toolkit's pin, the default"] if facts.commit == TOOLKIT_SLIME_COMMIT else []
        shown.append(f"{facts.name} ({', '.join([facts.commit[:7]] * bool(facts.tags) + what)})"
                     if facts.tags or what else facts.name)
    return ", ".join(shown)


def resolve(rev: str) -> CommitFacts:
    """The facts of ``rev`` (a full hash, a 7+ hex prefix or a tag of the facts' provenance); UsageError otherwise."""
    facts = commit_facts(rev) if _HEX.fullmatch(rev) else next(
        (f for f in known_commits() if rev in f.tags), None)
    if facts is None:
        raise UsageError(f"{_OPTION} {rev!r}: not a slime commit acrl has flag facts for",
                         hint=f"give one of {known()} (a full hash, 7 or more of its hex digits, or its tag)")
    return facts


def checkout_root(script: Path) -> Path | None:
    """The git checkout ``script`` is in: the nearest folder above it with a ``.git`` (a folder, or a worktree's
    file); None when there is none."""
    try:
        folder = script.resolve().parent
    except (OSError, RuntimeError):  # a symlink loop
        return None
    for candidate in (folder, *folder.parents):
        if _exists(candidate / ".git"):
            return candidate
    return None


def _exists(path: Path) -> bool:
    """Whether ``path`` exists; False where it cannot be told (a folder this user may not search)."""
    try:
        return path.exists()
    except OSError:
        return False


def _is_slime(root: Path) -> bool:
    try:
        return (root / SLIME_ARGUMENTS_PY).is_file()
    except OSError:  # a folder this user may not search
        return False


def _explicit_checkout() -> tuple[Path, str] | None:
    """--slime-checkout's (or ACRL_SLIME_CHECKOUT's) folder and how it was given, where it is a git checkout here (one
    that is not a folder is the error of the import's compile)."""
    asked, _ = requested()
    if asked is None or not _exists(Path(asked[0]) / ".git"):
        return None
    return Path(asked[0]), asked[1]


def for_script(script: Path, rev: str | None) -> Target:
    """`acrl import train-sh`'s target for ``script``: ``rev`` (--target-commit), else the commit of the slime
    checkout the script is in, else of --slime-checkout where it is a git checkout, where acrl has facts for it;
    else the pin."""
    if rev is not None:
        return Target(resolve(rev).commit)
    root = checkout_root(script)
    if root is not None and _is_slime(root):
        where: tuple[Path, str] | None = (root, "the script is in the slime checkout")
    else:
        given = _explicit_checkout()
        where = (given[0], f"the slime checkout given by {given[1]} is") if given is not None else None
    if where is None:
        return Target()
    folder, how = where
    return _from_checkout(folder, how)


def _from_checkout(folder: Path, how: str) -> Target:
    """The target of a slime checkout at ``folder`` (``how`` it was found, for the note)."""
    commit = read_git_commit(folder)
    facts = commit_facts(commit) if commit is not None else None
    pin = commit_facts(TOOLKIT_SLIME_COMMIT)
    pin_name = pin.name if pin is not None else TOOLKIT_SLIME_COMMIT[:7]
    if facts is None:
        at = f"at commit {commit[:12]}" if commit is not None else "at a commit that cannot be read from its .git"
        return Target(notes=(Note("unresolved", f"[slime] commit: {how} {folder}, {at}, which acrl has no flag facts "
                                  f"for (it has {known()}); the spec targets agentcore-rl-toolkit's pin {pin_name}, "
                                  f"its default, and maps the flags against it: pass {_OPTION} with the known commit "
                                  "closest to yours, or set [slime] commit by hand", str(folder)),))
    if facts.commit == TOOLKIT_SLIME_COMMIT:
        return Target(notes=(Note("default", f"[slime] commit: {how} {folder}, at {facts.name}, agentcore-rl-toolkit's "
                                  "pin (the default); the flags are mapped against it", str(folder)),))
    return Target(facts.commit, (Note("default", f"[slime] commit = {facts.commit!r}: {how} {folder}, at "
                                      f"{facts.name} (not agentcore-rl-toolkit's pin {pin_name}); the flags are "
                                      f"mapped against {facts.name}'s ({_OPTION} chooses another)", str(folder)),))


def for_slime_runner(rev: str | None) -> Target:
    """`acrl import slime-runner`'s target: ``rev`` (--target-commit), else the toolkit's pin, which SlimeRunner ran
    (its installer checks it out)."""
    return Target(resolve(rev).commit) if rev is not None else Target()
