"""MODEL_ARGS: resolve the architecture arguments at compile time and freeze them with provenance.

Two sources (the catalog and Hugging Face config.json come with issue 3):
- ``args``: the spec's literal [model.args] table;
- ``script``: slime's scripts/models/<type>.sh, sourced by bash in a clean environment
  (``env -i``, an empty temporary working directory, only the knobs the spec names), so the result
  does not depend on the caller's environment or on files that a glob could match.
"""

from __future__ import annotations

import hashlib
import re
import tempfile
from pathlib import Path
from typing import Literal

import attrs

from ._flags import table_tokens
from ._spec import Spec

_ENV_REF = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
_ASSIGNED = re.compile(r"^\s*(?:export\s+|local\s+|declare\s+(?:-\w+\s+)*)?([A-Za-z_][A-Za-z0-9_]*)=", re.M)
_BASH_SPECIAL = frozenset({"BASH_SOURCE", "BASH", "PWD", "HOME", "PATH", "IFS", "RANDOM", "LINENO"})
_SOURCE_TIMEOUT_S = 10


@attrs.frozen
class ModelArgs:
    """Frozen MODEL_ARGS and where they came from."""

    args: tuple[str, ...]
    source: Literal["args", "script"]
    description: str  # human-readable origin, e.g. "spec.toml [model.args]"
    sha256: str  # of the source: the script file, or the canonical args list
    env: tuple[tuple[str, str | None], ...] = ()  # knobs the script reads: (name, value or None=unset)

    def provenance(self) -> dict[str, object]:
        return {"source": self.source, "from": self.description, "sha256": self.sha256,
                "env": {name: value for name, value in self.env}}


class ModelArgsError(Exception):
    """MODEL_ARGS could not be resolved; message and hint are user-facing."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def resolve_model_args(spec: Spec) -> ModelArgs:
    """Resolve MODEL_ARGS from the source the spec chooses."""
    source = spec.model.args_source
    if source == "auto":
        source = "args" if spec.model.args else "script"
    if source == "args":
        if not spec.model.args:
            raise ModelArgsError("args_source is 'args' but [model.args] is empty",
                                 "add the architecture flags to [model.args], or set args_source = \"script\"")
        tokens = tuple(table_tokens(spec.model.args))
        digest = hashlib.sha256("\0".join(tokens).encode()).hexdigest()
        return ModelArgs(tokens, "args", "the spec's [model.args] table", digest)
    return _from_script(spec)


def _from_script(spec: Spec) -> ModelArgs:
    import subprocess  # only specs that source a script pay for it

    script = Path(spec.slime.dir) / "scripts" / "models" / f"{spec.model.type}.sh"
    if not script.is_file():
        raise ModelArgsError(
            f"model script {script} is not on this machine, so MODEL_ARGS cannot be resolved from it",
            "compile where slime is checked out (set [slime] dir), or give the architecture literally in "
            "[model.args] with args_source = \"args\"")
    text = script.read_bytes()
    knobs = _env_knobs(text.decode("utf-8", "replace"))
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C"}
    env.update({k: v for k, v in spec.model.script_env.items()})
    with tempfile.TemporaryDirectory(prefix="acrl-model-args-") as empty:
        env["HOME"] = empty
        try:
            proc = subprocess.run(
                ["env", "-i", *(f"{k}={v}" for k, v in sorted(env.items())), "bash", "--noprofile", "--norc",
                 "-c", 'source "$1" >/dev/null || exit; declare -p MODEL_ARGS >/dev/null 2>&1 || exit 64; '
                       'printf "%s\\0" "${MODEL_ARGS[@]}"', "acrl-model-args", str(script)],
                cwd=empty, capture_output=True, timeout=_SOURCE_TIMEOUT_S, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
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
    description = f"{spec.slime.dir}/scripts/models/{spec.model.type}.sh"
    return ModelArgs(args, "script", description, hashlib.sha256(text).hexdigest(), recorded)


def _env_knobs(script: str) -> tuple[str, ...]:
    """Environment variables a script reads without assigning them first (its knobs)."""
    code = "\n".join(line.split("#", 1)[0] if not line.lstrip().startswith("#!") else "" for line in
                     script.splitlines())
    assigned = set(_ASSIGNED.findall(code))
    used = {m for m in _ENV_REF.findall(code)}
    return tuple(sorted(used - assigned - _BASH_SPECIAL - {"MODEL_ARGS"}))


