"""MODEL_ARGS: resolve the architecture arguments at compile time and freeze them with provenance.

Four sources:
- ``args``: the spec's literal [model.args] table;
- ``catalog``: acrl's built-in catalog, written from the models' published config.json
(_pipeline/model_args/catalog.py);
- ``hf``: the checkpoint's own config.json, translated by _pipeline/model_args/hf_config.py;
- ``script``: slime's scripts/models/<type>.sh, sourced by bash in a clean environment
  (``subprocess.run(env=...)``: only PATH, LC_ALL, HOME and the knobs the spec names; an empty temporary
  working directory), so the result does not depend on the caller's environment or on files that a glob
  could match. Nothing is sourced unless [model] type is a slime model name (:func:`model_type_problem`)
  and every [model.script_env] name and value passed :func:`script_env_problems`.
The result is compared with the checkpoint's config.json when it is on this machine, else, for a script, with the
catalog entry of the same name.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from ..._secrets import env_name
from ..._slime.checkout import SLIME_OPTION, SPEC_SLIME, Checkout, missing_hint
from ..._spec.flags import flag_tokens, normalize_flag, parse_flags, table_tokens
from ..._spec.tables import Spec
from ..bundle import read_input
from .catalog import CATALOG, CatalogEntry, entry, lookup_error
from .hf_config import Mismatch, compare, derive_model_args

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


@attrs.frozen
class Reference:
    """The config.json fields of the model MODEL_ARGS should describe, and how messages name them."""

    fields: Mapping[str, Any]
    shown: str  # "/models/Qwen3-4B/config.json" or "acrl catalog: qwen3-4B (Qwen/Qwen3-4B)"
    kind: Literal["config.json", "catalog"]


@attrs.frozen
class Resolution:
    """MODEL_ARGS, the disagreements with the checkpoint's config.json (or, for a slime script, with the catalog
    entry of the same name), and notes for the user."""

    model_args: ModelArgs
    mismatches: tuple[Mismatch, ...] = ()  # against the checkpoint's config.json (errors)
    notes: tuple[str, ...] = ()
    matching_catalog: str | None = None  # a catalog entry whose architecture matches the config.json
    # The model as published: the config.json read on this machine, else the catalog entry named by [model] type.
    reference: Reference | None = None
    catalog_mismatches: tuple[Mismatch, ...] = ()  # slime's script against the catalog entry of the same name
    script_matches: str | None = None  # a catalog entry whose architecture is exactly the script's
    # the catalog entry against slime's script of its architecture, where MODEL_ARGS come from the catalog and the
    # script is readable here; documented corrections are notes, not these
    script_differences: tuple[Mismatch, ...] = ()


def resolve_model_args(spec: Spec, spec_dir: Path = Path(), checkout: Checkout | None = None) -> Resolution:
    """Resolve MODEL_ARGS from the source the spec chooses, apply [model.overrides], and compare the result
    with the checkpoint's config.json when it is on this machine. ``checkout``: this machine's slime checkout
    (_slime/checkout.py: locate), where a model script is read from; never the cluster's [slime] dir as such."""
    source = spec.model.args_source
    if source == "auto":
        source = "args" if spec.model.args else "catalog" if entry(spec.model.type) else "script"
    config = _hf_config(spec, spec_dir)
    if source == "args":
        if not spec.model.args:
            raise ModelArgsError("args_source is 'args' but [model.args] is empty",
                                 'add the architecture flags to [model.args], or set args_source = "script"',
                                 "args_source")
        tokens = tuple(table_tokens(spec.model.args))
        base = ModelArgs(tokens, "args", "the spec's [model.args] table", _digest(tokens))
    elif source == "catalog":
        found = entry(spec.model.type)
        if found is None:
            raise ModelArgsError(lookup_error(spec.model.type), "see `acrl models`, or choose another args_source")
        base = ModelArgs(found.model_args(), "catalog", _catalog_shown(found),
                         hashlib.sha256(found.digest_source().encode()).hexdigest())
    elif source == "hf":
        if config is None:
            raise ModelArgsError(f"args_source is 'hf' but {_config_path(spec, spec_dir)} is not on this machine",
                                 "compile where the checkpoint is, or set [model] hf_config to a copy of its "
                                 "config.json", "hf_config" if spec.model.hf_config else "dir")
        derived = derive_model_args(config.data)
        if derived.unsupported:
            raise ModelArgsError("config.json cannot be expressed as MODEL_ARGS: " + "; ".join(derived.unsupported),
                                 "give the architecture in [model.args] or use args_source = \"script\"",
                                 "args_source")
        base = ModelArgs(derived.args, "hf", config.shown, config.sha256)
    else:
        base = _from_script(spec, checkout)
    model_args = _apply_overrides(base, spec)
    published = entry(spec.model.type)
    if config is not None:
        reference: Reference | None = Reference(config.data, config.shown, "config.json")
    elif published is not None:
        reference = Reference(published.hf_fields, _catalog_shown(published), "catalog")
    else:
        reference = None
    if config is None and source == "script" and published is not None:
        return _against_catalog(model_args, base, published, reference)
    if config is None or source == "hf":
        return _against_script(Resolution(model_args, reference=reference), spec, source, base, published, checkout)
    overridden = {flag for flag, _ in model_args.overrides}
    derived = derive_model_args(config.data)
    mismatches = [m for m in compare(model_args.args, base.description, derived.args, config.shown)
                  if m.flag not in overridden]
    notes = [f"MODEL_ARGS checked against {config.shown}"]
    notes += [f"{config.shown}: {u} (not compared)" for u in derived.unsupported]
    notes += [f"setting differs (not an error): {m.message}" for m in mismatches if m.severity == "warning"]
    errors = tuple(m for m in mismatches if m.severity == "error")
    match = _matching_catalog(derived.args, config.shown) if errors else None
    return _against_script(Resolution(model_args, errors, tuple(notes), match, reference), spec, source, base,
                           published, checkout)


def _against_script(resolution: Resolution, spec: Spec, source: str, base: ModelArgs,
                    published: CatalogEntry | None, checkout: Checkout | None) -> Resolution:
    """The catalog entry against slime's script of its architecture whenever that script is in this machine's checkout,
    whatever the source (the script source without config.json is _against_catalog). A documented difference
    (CORRECTIONS) is a note; any other an ACRL-M008 error when MODEL_ARGS come from the catalog, else a note."""
    if published is None or published.slime_script is None or checkout is None or not (
            Path(checkout.path) / f"scripts/models/{published.slime_script}.sh").is_file():
        return resolution  # no script to compare with on this machine
    if source == "script" and published.slime_script == spec.model.type:
        script = base
    else:
        try:
            script = _from_script(attrs.evolve(spec, model=attrs.evolve(spec.model, type=published.slime_script)),
                                  checkout)
        except ModelArgsError as exc:
            return attrs.evolve(
                resolution, notes=(*resolution.notes, f"acrl catalog not compared with slime's script: {exc.message}"))
    ours = resolution.model_args.args if source == "catalog" else published.model_args()
    overridden = {flag for flag, _ in resolution.model_args.overrides} if source == "catalog" else set()
    corrections = dict(published.slime_differences)
    found = [m for m in compare(ours, _catalog_shown(published), script.args, script.description)
             if m.flag not in overridden]
    notes = [f"{m.problem} (a documented correction of slime's script: {corrections[m.flag]})"
             for m in found if m.flag in corrections]
    other = tuple(m for m in found if m.flag not in corrections)
    if source != "catalog":
        notes += [f"acrl's catalog differs from slime's script (not this spec's MODEL_ARGS): {m.problem}"
                  for m in other]
        other = ()
    notes.insert(0, f"acrl catalog: {published.name} compared with {script.description}")
    return attrs.evolve(resolution, notes=(*resolution.notes, *notes), script_differences=other)


def _against_catalog(model_args: ModelArgs, base: ModelArgs, published: CatalogEntry,
                     reference: Reference | None) -> Resolution:
    """slime's script compared with the catalog entry of the same name, the catalog being the reference: it is
    written from the published config.json. Only done where the checkpoint's own config.json is not here to
    decide (with it, ACRL-M005 compares the script against the checkpoint itself)."""
    overridden = {flag for flag, _ in model_args.overrides}
    shown = _catalog_shown(published)
    mismatches = [m for m in compare(model_args.args, base.description, published.model_args(), shown)
                  if m.flag not in overridden]
    notes = [f"MODEL_ARGS checked against {shown}"]
    notes += [f"setting differs (not an error): {m.message}" for m in mismatches if m.severity == "warning"]
    errors = tuple(m for m in mismatches if m.severity == "error")
    match = _matching_catalog(model_args.args, base.description) if errors else None
    return Resolution(model_args, notes=tuple(notes), reference=reference, catalog_mismatches=errors,
                      script_matches=match)


def _catalog_shown(found: CatalogEntry) -> str:
    return f"acrl catalog: {found.name} ({found.source})"


def _matching_catalog(args: tuple[str, ...], shown: str) -> str | None:
    """The first catalog entry with no architecture difference from ``args``."""
    for name, found in CATALOG.items():
        if not any(m.severity == "error" for m in compare(found.model_args(), name, args, shown)):
            return name
    return None


@attrs.frozen
class _Config:
    data: Mapping[str, Any]
    shown: str  # how messages name it: the spec's own words, never a path the spec did not write
    sha256: str


def _config_path(spec: Spec, spec_dir: Path) -> Path:
    if spec.model.hf_config is not None:
        return spec_dir / spec.model.hf_config
    return Path(spec.model.dir) / "config.json"


def _hf_config(spec: Spec, spec_dir: Path) -> _Config | None:
    path = _config_path(spec, spec_dir)
    shown = spec.model.hf_config or f"{spec.model.dir.rstrip('/')}/config.json"
    try:
        raw = read_input(path)
    except FileNotFoundError:
        if spec.model.hf_config is not None:
            raise ModelArgsError(f"hf_config {shown} does not exist", "fix the path (relative to the spec)",
                                 "hf_config") from None
        return None
    except OSError as exc:
        raise ModelArgsError(f"cannot read {shown}: {exc.strerror}", "check its permissions", "hf_config") from None
    try:
        data = json.loads(raw)
    except RecursionError:
        raise ModelArgsError(f"{shown} is not valid JSON: nested too deeply", "point hf_config at a config.json",
                             "hf_config") from None
    except ValueError as exc:
        raise ModelArgsError(f"{shown} is not valid JSON: {exc}", "point hf_config at a config.json",
                             "hf_config") from None
    if not isinstance(data, dict):
        raise ModelArgsError(f"{shown} is not a JSON object", "point hf_config at a config.json", "hf_config")
    return _Config(data, shown, hashlib.sha256(raw).hexdigest())


def _apply_overrides(base: ModelArgs, spec: Spec) -> ModelArgs:
    if not spec.model.overrides:
        return base
    flags = parse_flags(base.args)
    applied: list[tuple[str, str]] = []
    for name, value in spec.model.overrides.items():
        tokens = flag_tokens(normalize_flag(name), value)
        flag = normalize_flag(name)
        flags.pop(flag, None)
        if tokens:
            flags[flag] = tokens[1:]
        applied.append((flag, " ".join(tokens[1:]) if tokens else "(removed)"))
    args = tuple(t for flag, values in flags.items() for t in (flag, *values))
    return attrs.evolve(base, args=args, overrides=tuple(applied))


def _digest(tokens: tuple[str, ...]) -> str:
    return hashlib.sha256("\0".join(tokens).encode()).hexdigest()


def _from_script(spec: Spec, checkout: Checkout | None) -> ModelArgs:
    import subprocess  # lazy: only specs that source a model script pay for it (the compile path stays light)

    # The compile reports these first, located (ACRL-M009, ACRL-S002); checked again: never source otherwise.
    type_problem = model_type_problem(spec.model.type)
    if type_problem is not None:
        raise ModelArgsError(f"[model] type {type_problem}", "use the name of a file in slime's scripts/models")
    for _name, message, hint in script_env_problems(spec.model.script_env):
        raise ModelArgsError(message, hint, "script_env")
    relative = f"scripts/models/{spec.model.type}.sh"
    if checkout is None:
        raise ModelArgsError(
            f"args_source is 'script' but no slime checkout is on this machine to read {relative} from "
            f"({SPEC_SLIME} {spec.slime.dir} is the cluster's path and does not exist here)",
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


