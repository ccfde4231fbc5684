"""Where, on the compiling machine, acrl reads slime's model scripts and flag definitions from.

``[slime] dir`` and ``megatron_dir`` are the cluster's paths: train.sh runs slime there, and nothing here changes
that. The compiling machine's checkouts are given apart from them:

* ``--slime-checkout DIR`` (acrl-compile, explain, diff, layout, import, check-bundles), else the environment
  variable ``ACRL_SLIME_CHECKOUT``; likewise ``--megatron-checkout`` / ``ACRL_MEGATRON_CHECKOUT``;
* else, as before this existed, ``[slime] dir`` (``megatron_dir``) where that path is a directory on this
  machine (a compile on the cluster itself, or a laptop with the same layout); the compile says so in a note.

A checkout given explicitly must be a directory here (an error naming the option or variable otherwise). Where
MODEL_ARGS were read from a checkout's scripts/models/<type>.sh, the manifest records the checkout (the path as
given, how it was given and its git commit); the flag check (ACRL-F004) leaves no trace in the bundle, only notes.

Only ``os`` is imported up front: the compile cache's key (_cli/front.py) reads the requested checkouts on the
path of a cache hit, which must not load pathlib or attrs.
"""

from __future__ import annotations

import os

SLIME_OPTION, SLIME_ENV = "--slime-checkout", "ACRL_SLIME_CHECKOUT"
MEGATRON_OPTION, MEGATRON_ENV = "--megatron-checkout", "ACRL_MEGATRON_CHECKOUT"
SPEC_SLIME, SPEC_MEGATRON = "[slime] dir", "[slime] megatron_dir"

Asked = tuple[str, str] | None  # (path as given, how: the option or the variable)
_options: dict[str, str] = {}  # the command line's --slime-checkout / --megatron-checkout, for this process


def set_from_options(slime: str | None, megatron: str | None) -> None:
    """The command line's ``--slime-checkout`` / ``--megatron-checkout``, for the command being run (they win over
    the variables); ``(None, None)`` forgets them again (_cli/main.py does, after the command)."""
    _options.clear()
    for value, option in ((slime, SLIME_OPTION), (megatron, MEGATRON_OPTION)):
        if value is not None:
            _options[option] = value


def requested() -> tuple[Asked, Asked]:
    """The (slime, Megatron-LM) checkouts asked for: each an option's value, else its variable's, else None."""
    out: list[Asked] = []
    for option, env in ((SLIME_OPTION, SLIME_ENV), (MEGATRON_OPTION, MEGATRON_ENV)):
        if _options.get(option):
            out.append((_options[option], option))
        elif os.environ.get(env):
            out.append((os.environ[env], env))
        else:
            out.append(None)
    return out[0], out[1]


class Checkout:
    """A checkout on this machine: its path as given, how it was given (an option, a variable or the spec's
    key) and, for slime, its git commit when readable."""

    __slots__ = ("commit", "path", "via")

    def __init__(self, path: str, via: str, commit: str | None = None) -> None:
        self.path = path
        self.via = via
        self.commit = commit

    def __repr__(self) -> str:
        return f"Checkout({self.path!r}, {self.via!r}, {self.commit!r})"

    def shown(self) -> str:
        """``/src/slime (--slime-checkout, commit 1a2b3c4d5e6f)``."""
        commit = f", commit {self.commit[:12]}" if self.commit else ""
        return f"{self.path} ({self.via}{commit})"


class CheckoutError(Exception):
    """A checkout given explicitly is not a directory on this machine; message and hint are user-facing."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def locate(slime_dir: str, megatron_dir: str, asked: tuple[Asked, Asked] | None = None
           ) -> tuple[Checkout | None, Checkout | None]:
    """This machine's (slime, Megatron-LM) checkouts: the ones asked for (``asked``, default :func:`requested`),
    else ``[slime] dir`` / ``megatron_dir`` where they are directories here, else None. Raises CheckoutError when
    one asked for is not a directory."""
    from pathlib import Path  # lazy: pathlib is not on the compile cache's hit path (see the module docstring)

    from .source import read_git_commit  # lazy: it brings the pipeline's readers; the cache's hit path needs only os

    asked = requested() if asked is None else asked
    found: list[Checkout | None] = []
    for given, what, spec_key, spec_path in ((asked[0], "slime", SPEC_SLIME, slime_dir),
                                             (asked[1], "Megatron-LM", SPEC_MEGATRON, megatron_dir)):
        if given is not None:
            value, how = given
            if not _is_dir(value):
                raise CheckoutError(f"{how} {value}: no such directory on this machine",
                                    f"give {how} the directory of this machine's {what} checkout; the cluster's "
                                    f"path stays {spec_key}")
            found.append(Checkout(value, how))
        elif _is_dir(spec_path):
            found.append(Checkout(spec_path, spec_key))
        else:
            found.append(None)
    slime, megatron = found
    if slime is not None:
        slime.commit = read_git_commit(Path(slime.path))
    return slime, megatron


def _is_dir(path: str) -> bool:
    """Whether ``path`` is a directory here; False for one no file system could hold (a name over NAME_MAX)."""
    try:
        return os.path.isdir(path)
    except (OSError, ValueError):
        return False


def missing_hint(what: str) -> str:
    """The fix when no slime checkout is on this machine, naming the option and the variable."""
    return (f"give this machine's slime checkout with {SLIME_OPTION} DIR (or {SLIME_ENV}=DIR) to read {what}; "
            f"{SPEC_SLIME} stays the cluster's path")

