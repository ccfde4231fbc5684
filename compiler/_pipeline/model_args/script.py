"""MODEL_ARGS from slime's scripts/models/<type>.sh, sourced by bash in a clean environment, and what a model type and
a [model.script_env] must be for that (compiler/_pipeline/model_args/resolve.py chooses the source). Also the types
every source shares: :class:`ModelArgs` and :class:`ModelArgsError`.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

import attrs

from ..._secrets import env_name
from ..._slime.checkout import SLIME_OPTION, SPEC_SLIME, Checkout, missing_hint
from ..._spec.tables import Spec
from ..bundle import read_input
from .catalog import close_names, entry

_ENV_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_ASSIGNED = re.compile(r"^\s*(?:export\s+|local\s+|declare\s+(?:-\w+\s+)*)?([A-Za-z_][A-Za-z0-9_]*)=", re.M)
_BASH_SPECIAL = frozenset({"BASH_SOURCE", "BASH", "PWD", "HOME", "PATH", "IFS", "RANDOM", "LINENO"})
_SOURCE_TIMEOUT_S = 10

# A slime model type names scripts/models/<type>.sh: letters, digits, '.', '_' and '-' (qwen2.5-3B, glm4-32B,
# deepseek-v3), never a path ('/', '..') or anything a shell, a comment line or a file name could misread.
_MODEL_TYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
ENV_NAME = env_name(at_most=128)  # at most 128: a longer name is a mistake (or a value)
# Variables that change how bash, the dynamic loader, libc or an interpreter the script may start behaves: set
# for the script, they would run code of their own (BASH_ENV, BASH_FUNC_x%%, PS4 with xtrace, LD_PRELOAD, ...).
_SHELL_VARIABLES = frozenset({
    "ENV", "SHELLOPTS", "BASHOPTS", "PS0", "PS1", "PS2", "PS3", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH",
    "GLOBIGNORE", "EXECIGNORE", "FUNCNEST", "POSIXLY_CORRECT", "INPUTRC", "HISTFILE", "MAIL", "MAILPATH",
    "MAILCHECK", "TMOUT", "PATH", "HOME", "SHELL", "TERM", "LC_ALL", "LANG", "LOCPATH", "NLSPATH",
    "HOSTALIASES", "RESOLV_HOST_CONF", "TMPDIR", "PWD", "OLDPWD",
})
_SHELL_PREFIXES = ("BASH", "LD_", "DYLD_", "GCONV_", "GLIBC_", "MALLOC_", "PYTHON", "PERL", "RUBY", "NODE_")


def is_dir_here(path: Path) -> bool:
    """Whether ``path`` is a directory on this machine; False for a path no file system could hold (a name over
    NAME_MAX, which Path.is_dir raises on instead of answering)."""
    try:
        return path.is_dir()
    except (OSError, ValueError):
        return False


def is_file_here(path: Path) -> bool:
    """Like :func:`is_dir_here`, for a file."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


def model_type_problem(model_type: str) -> str | None:
    """Why ``model_type`` cannot name slime's scripts/models/<type>.sh, or None when it can."""
    if _MODEL_TYPE.fullmatch(model_type) and ".." not in model_type:
        return None
    return ("is not a slime model name: it names scripts/models/<type>.sh and is written into model_args.sh, so "
            "it may only hold 1-128 letters, digits, '.', '_' and '-', starting with a letter or digit, without '..'")


def script_env_problems(script_env: Mapping[str, str]) -> list[tuple[str, str, str]]:
    """(name, message, fix) for each [model.script_env] entry that must not reach the model script's environment:
    a name that is not a variable name (``-S...`` was once read by ``env`` as an option), one that changes how bash
    or the loader behaves, a value with a NUL byte (no environment can hold one). Messages never show values."""
    out = []
    for name, value in script_env.items():
        if not ENV_NAME.fullmatch(name):
            shown = repr(name) if len(name) <= 80 else f"{name[:60]!r}... ({len(name)} characters)"
            out.append((name, f"{shown} is not an environment variable name",
                        "use 1-128 letters, digits and '_', not starting with a digit"))
        elif name in _SHELL_VARIABLES or name.startswith(_SHELL_PREFIXES):
            out.append((name, f"{name} changes how bash, the loader or the system behaves when the model script is "
                        "sourced, so it cannot be set for the script",
                        "set only the knobs the script reads (e.g. MODEL_ARGS_ROTARY_BASE); remove this name"))
        if "\0" in value:
            out.append((name, f"the value of {name if ENV_NAME.fullmatch(name) else repr(name[:80])} holds a NUL byte, "
                        "which no environment variable can hold", "remove the \\u0000 from the value"))
    return out


@attrs.frozen
class ModelArgs:
    """Frozen MODEL_ARGS and where they came from."""

    args: tuple[str, ...]
    source: Literal["args", "catalog", "hf", "script"]
    description: str  # human-readable origin, e.g. "the spec's [model.args] table"
    sha256: str  # of the source: the script file, the config.json, or the canonical args or catalog fields
    env: tuple[tuple[str, str | None], ...] = ()  # knobs the script reads: (name, value or None=unset)
    overrides: tuple[tuple[str, str], ...] = ()  # (flag, value as written into MODEL_ARGS) from [model.overrides]
    # the slime checkout on this machine a script was read from: (path as given, git commit). How it was given
    # (option, variable, [slime] dir) is only in the compile's notes: it must not change the bundle's bytes
    checkout: tuple[str, str | None] | None = None

    def provenance(self) -> dict[str, object]:
        out: dict[str, object] = {"source": self.source, "from": self.description, "sha256": self.sha256,
                                  "env": {name: value for name, value in self.env},
                                  "overrides": {flag: value for flag, value in self.overrides}}
        if self.checkout is not None:
            out["checkout"] = dict(zip(("path", "commit"), self.checkout, strict=True))
        return out


class ModelArgsError(Exception):
    """MODEL_ARGS could not be resolved; message and hint are user-facing."""

    def __init__(self, message: str, hint: str, key: str = "type") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.key = key  # the [model] key the message points at


def from_script(spec: Spec, checkout: Checkout | None) -> ModelArgs:
    import subprocess  # lazy: only specs that source a model script pay for it (the compile path stays light)

    # The compile reports these first, located (ACRL-M009, ACRL-S002); checked again: never source otherwise.
    type_problem = model_type_problem(spec.model.type)
    if type_problem is not None:
        raise ModelArgsError(f"[model] type {type_problem}", "use the name of a file in slime's scripts/models")
    for _name, message, hint in script_env_problems(spec.model.script_env):
        raise ModelArgsError(message, hint, "script_env")
    relative = f"scripts/models/{spec.model.type}.sh"
    if checkout is None:
        close = close_names(spec.model.type) if entry(spec.model.type) is None else []
        catalog = f" ({spec.model.type!r} is not in acrl's catalog either; did you mean {close[0]!r}?)" if close else ""
        raise ModelArgsError(
            f"args_source is 'script' but no slime checkout is on this machine to read {relative} from "
            f"({SPEC_SLIME} {spec.slime.dir} is the cluster's path and does not exist here){catalog}",
            missing_hint("the model script") + ", or use args_source = \"catalog\" (`acrl models`) or give the "
            "architecture in [model.args]", "args_source" if spec.model.args_source == "script" else "type")
    script = Path(checkout.path) / relative
    if not is_file_here(script):
        raise ModelArgsError(
            f"model script {script} does not exist: the slime checkout {checkout.shown()} has no {relative}",
            "check [model] type against the checkout's scripts/models" + (
                f", or give another checkout with {SLIME_OPTION} DIR" if checkout.via != SLIME_OPTION else ""))
    text = read_input(script)
    knobs = _env_knobs(text.decode("utf-8", "replace"))
    with tempfile.TemporaryDirectory(prefix="acrl-model-args-") as empty:
        # the environment is given to the process, never as words of a command line (where a name could be
        # read as an option of `env`); the spec's knobs cannot replace PATH, HOME or LC_ALL (script_env_problems)
        env = {**spec.model.script_env, "PATH": "/usr/bin:/bin", "LC_ALL": "C", "HOME": empty}
        try:
            proc = subprocess.run(
                ["bash", "--noprofile", "--norc",
                 "-c", 'source "$1" >/dev/null || exit; declare -p MODEL_ARGS >/dev/null 2>&1 || exit 64; '
                       'printf "%s\\0" "${MODEL_ARGS[@]}"', "acrl-model-args", str(script)],
                env=env, cwd=empty, capture_output=True, timeout=_SOURCE_TIMEOUT_S, check=False)
        except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
            raise ModelArgsError(f"sourcing {script} failed: {exc}", "check that bash is installed and the "
                                 "script does not wait for input") from None
    if proc.returncode == 64:
        raise ModelArgsError(f"{script} does not define MODEL_ARGS", "check [model] type")
    if proc.returncode != 0:
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        detail = f": {err[-1]}" if err else ""
        raise ModelArgsError(f"sourcing {script} failed (exit {proc.returncode}){detail}",
                             "run the script by hand with bash to see why")
    args = tuple(a.decode("utf-8", "replace") for a in proc.stdout.split(b"\0")[:-1])
    recorded = tuple((k, spec.model.script_env.get(k)) for k in knobs)
    description = f"{checkout.path}/{relative}"
    return ModelArgs(args, "script", description, hashlib.sha256(text).hexdigest(), recorded,
                     checkout=(checkout.path, checkout.commit))


def _env_knobs(script: str) -> tuple[str, ...]:
    """Environment variables a script reads without assigning them first (its knobs)."""
    code = "\n".join(line.split("#", 1)[0] if not line.lstrip().startswith("#!") else "" for line in
                     script.splitlines())
    assigned = set(_ASSIGNED.findall(code))
    used = {m for m in _ENV_REF.findall(code)}
    return tuple(sorted(used - assigned - _BASH_SPECIAL - {"MODEL_ARGS"}))
