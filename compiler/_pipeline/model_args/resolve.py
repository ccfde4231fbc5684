"""MODEL_ARGS: resolve the architecture arguments at compile time and freeze them with provenance.

Four sources:
- ``args``: the spec's literal [model.args] table;
- ``catalog``: acrl's built-in catalog, written from the models' published config.json
(_pipeline/model_args/catalog.py);
- ``hf``: the checkpoint's own config.json, translated by _pipeline/model_args/hf_config.py;
- ``script``: slime's scripts/models/<type>.sh, sourced by bash in a clean environment
  (``subprocess.run(env=...)``: only PATH, LC_ALL, HOME and the knobs the spec names; an empty temporary
  working directory: model_args/script.py), so the result does not depend on the caller's environment or on files
  that a glob could match. Nothing is sourced unless [model] type is a slime model name (:func:`model_type_problem`)
  and every [model.script_env] name and value passed :func:`script_env_problems`.
The result is compared with the checkpoint's config.json when it is on this machine, else, for a script, with the
catalog entry of the same name.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from ..._slime.checkout import Checkout
from ..._spec.flags import flag_tokens, normalize_flag, parse_flags, table_tokens
from ..._spec.tables import Spec
from ..bundle import read_input
from .catalog import CATALOG, CatalogEntry, close_names, entry, lookup_error, lookup_hint
from .hf_config import Mismatch, compare, derive_model_args
from .script import ENV_NAME as ENV_NAME  # the names every stage reads from here
from .script import ModelArgs as ModelArgs
from .script import ModelArgsError as ModelArgsError
from .script import from_script as _from_script
from .script import is_dir_here as is_dir_here
from .script import is_file_here as is_file_here
from .script import model_type_problem as model_type_problem
from .script import script_env_problems as script_env_problems


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
        if source == "script":
            _script_is_there(spec.model.type, checkout)
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
            raise ModelArgsError(lookup_error(spec.model.type, listing=False), lookup_hint(spec.model.type))
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


def _script_is_there(model_type: str, checkout: Checkout | None) -> None:
    """A [model] type neither in the catalog nor a script here: said so, with the closest names of both."""
    if model_type_problem(model_type) is not None:
        return  # ACRL-M009's, before anything is resolved
    scripts = Path(checkout.path) / "scripts" / "models" if checkout is not None else None
    if scripts is not None and is_file_here(scripts / f"{model_type}.sh"):
        return
    try:
        names = sorted(p.name[:-3] for p in scripts.glob("*.sh")) if scripts is not None else []
    except OSError:
        names = []
    close = [repr(n) for n in close_names(model_type, names)]
    mean = f" (did you mean {', '.join(close[:-1]) + ' or ' if close[:-1] else ''}{close[-1]}?)" if close else ""
    raise ModelArgsError(f"{model_type!r} is not in acrl's model catalog{mean}, and no slime checkout is on this "
                         f"machine to read scripts/models/{model_type}.sh from" if checkout is None else
                         f"{model_type!r} is neither in acrl's model catalog nor a script of the slime checkout "
                         f"{checkout.shown()} (scripts/models/{model_type}.sh){mean}",
                         lookup_hint(model_type, names, checkout=checkout is not None))


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
