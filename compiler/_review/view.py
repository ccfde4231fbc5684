"""What a bundle's files say, read back from the files themselves, for `acrl diff` and `--check`.

A bundle's truth is its files, whoever wrote them: the slime argv is read from train.sh's bash
array assignments (``SLIME_ARGS=( ... )``, ``SLIME_ARGS+=( ... )``, read by
:mod:`acrl.compiler._review.shell_files` through the one shell lexer, group titles from the
``# title`` lines acrl writes inside the array), MODEL_ARGS from model_args.sh,
the custom config with yaml.safe_load, the resolved spec with tomllib, the Ray job's environment
and the launch settings from train.sh's assignments, and the derived quantities computed from
spec.toml (the manifest's copy is used only when spec.toml is not a valid spec). Compile warnings
come from the manifest, whose every field the bundle hash covers. A spec is compiled in memory and
its files are read the same way, so both kinds of input go through :func:`read_view`.

Every line of a shell file that is not a comment is kept as a "script line", so a hand edit
anywhere (an added command, say) still shows in a diff. A line whose meaning is read into one of
the parts above is kept as a placeholder that names the part (``ray start --head <launch
setting>``, ``SLIME_ARGS+=( ... )``), so that moving it (into another branch, out of its ``if``)
shows too, while a changed value shows once, in its own part. The shebang is kept as it is.
"""

from __future__ import annotations

import base64
import datetime
import json
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .._pipeline.argv import derived
from .._pipeline.bundle import MANIFEST, NOT_REGULAR, read_bundle, sha256
from .._pipeline.parse import SpecSource, decode_spec
from .._pipeline.structure import structure
from .._spec.tables import Spec
from ..errors import BundleReadError, SpecError
from .layout import Layout, layout_of
from .shell_files import FORWARDED as FORWARDED  # re-exported: read there, reached here
from .shell_files import PINNED_AT_LAUNCH as PINNED_AT_LAUNCH
from .shell_files import Flag, TrainSh, read_model_args_sh, read_train_sh, script_lines
from .shell_files import bash_arrays as bash_arrays

TRAIN_SH, MODEL_ARGS_SH, CUSTOM_CONFIG, SPEC_TOML = "train.sh", "model_args.sh", "custom_config.yaml", "spec.toml"
# the manifest's derived fields of slime's placement, none of them in a manifest written before acrl modelled it
PLACEMENT_FIELDS = frozenset({"nodes", "gpus_per_node", "placement_gpus", "rollout_offset", "node_gpus"})
JOIN_SH = "join.sh"  # only in a bundle whose other nodes join its local head: its lines are script lines
# only with [checkpoint] save or load: train.sh's checkpoint block, which train.sh sources (and the RayJob's
# entrypoint): read as part of train.sh, in place of that line, so that its SLIME_ARGS+=( --load ... ) are flags
CHECKPOINT_SH = "checkpoint.sh"
SOURCE_CHECKPOINT = 'source "$BUNDLE_DIR/checkpoint.sh"'
KNOWN_FILES = (TRAIN_SH, MODEL_ARGS_SH, CUSTOM_CONFIG, SPEC_TOML, MANIFEST, JOIN_SH, CHECKPOINT_SH)


@attrs.frozen
class BundleView:
    """The meaning of one bundle's files. Mappings are keyed so that order never matters."""

    label: str
    flags: Mapping[str, Flag]  # SLIME_ARGS, the run-time additions included; a repeated flag: its last value
    model_args: Mapping[str, tuple[str, ...]]
    custom_config: Mapping[str, Any]  # dotted keys
    spec: Mapping[str, Any]  # dotted keys of the resolved spec.toml
    runtime_env: Mapping[str, str]  # the Ray job's env_vars
    launch: Mapping[str, str]  # train.sh's settings: its variables, the Ray address, ...
    derived: Mapping[str, Any]  # computed from spec.toml as the manifest's derived section is; the model-args source
    warnings: tuple[str, ...]
    script_lines: Mapping[str, tuple[str, ...]]  # per shell file: lines none of the above explains
    file_status: Mapping[str, str]  # "present", "missing", "unreadable: ...", or an unknown file's sha256
    manifest: Mapping[str, Any] | None
    notes: tuple[str, ...]
    integrity: tuple[str, ...] = ()  # why this bundle does not match its own manifest (set by the diff's load)
    layout: Layout | None = None  # slime's placement of spec.toml (`acrl layout`); None when it is not a spec


class _Unreadable(ValueError):
    """A file that cannot be read as what it should be; the message says why."""


@attrs.frozen
class BundleSpec:
    """A bundle read for review: the path as shown, its files, and its resolved spec.toml as text."""

    shown: str
    files: Mapping[str, bytes]
    spec_text: str


def read_bundle_spec(directory: Path) -> BundleSpec:
    """A bundle directory's files and spec.toml, for the tools that explain or draw a bundle from its resolved
    spec (explain, layout); BundleReadError when it is not a bundle or spec.toml is not text."""
    shown = str(directory).rstrip("/") or "/"
    files = read_bundle(directory)
    if files is None or SPEC_TOML not in files:
        reason = "no such directory" if files is None else "is not an acrl bundle: it has no spec.toml"
        raise BundleReadError(path=shown, reason=reason, fix="give a bundle directory written by acrl-compile "
                              "(e.g. bundles/<exp_id>) or a spec file (.toml)")
    try:
        text = files[SPEC_TOML].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleReadError(path=f"{shown}/{SPEC_TOML}", reason=f"is not UTF-8 text (byte {exc.start})",
                              fix="compile the spec again: acrl-compile SPEC -o DIR --force") from None
    return BundleSpec(shown, files, text)


def read_view(label: str, files: Mapping[str, bytes]) -> BundleView:
    """Read every part of the bundle ``files`` (name -> bytes) that a diff compares. Never raises on
    a broken file: it is marked unreadable, and its parts are empty."""
    status: dict[str, str] = {}
    notes: list[str] = []

    def text(name: str) -> str | None:
        if name not in files:
            status[name] = "missing"
            return None
        try:
            status[name] = "present"
            return files[name].decode("utf-8")
        except UnicodeDecodeError as exc:
            status[name] = f"unreadable: not UTF-8 text (byte {exc.start})"
            return None

    def parse(name: str, reader: Any) -> Any:
        source = text(name)
        if source is None:
            return None
        try:
            return reader(source)
        except (_Unreadable, ValueError) as exc:  # tomllib, json and shell syntax errors are ValueErrors
            status[name] = f"unreadable: {exc}"
            notes.append(f"{label}: {name} cannot be read ({exc}); its contents are left out of the comparison")
            return None
        except Exception as exc:  # yaml.YAMLError and kin
            status[name] = f"unreadable: {type(exc).__name__}"
            notes.append(f"{label}: {name} cannot be read ({' '.join(str(exc).split())}); its contents are left out "
                         "of the comparison")
            return None

    checkpoint = text(CHECKPOINT_SH) if CHECKPOINT_SH in files else None
    inlined = checkpoint is not None and _source_line(files.get(TRAIN_SH, b"").decode("utf-8", "replace")) is not None
    train = parse(TRAIN_SH, lambda source: read_train_sh(with_checkpoint_sh(source, checkpoint))) or TrainSh()
    model: tuple[dict[str, tuple[str, ...]], tuple[str, ...]] = parse(MODEL_ARGS_SH, read_model_args_sh) or ({}, ())
    custom = parse(CUSTOM_CONFIG, _read_yaml) or {}
    spec = parse(SPEC_TOML, _read_toml) or {}
    manifest = parse(MANIFEST, _read_json)
    join = text(JOIN_SH) if JOIN_SH in files else None
    for name in sorted(files):
        if name.endswith(NOT_REGULAR):  # a link or special file, never followed (see read_bundle)
            status[name.removesuffix(NOT_REGULAR)] = f"not a regular file ({files[name].decode()})"
        elif name not in KNOWN_FILES:
            status[name] = "folder" if name.endswith("/") else f"sha256:{sha256(files[name])[:16]}"
    derived: dict[str, Any] = {}
    warnings: tuple[str, ...] = ()
    resolved = spec_of(files[SPEC_TOML], manifest) if spec else None
    computed = _derived(resolved) if resolved is not None else None
    if computed is not None:  # what the files say, not the manifest's copy
        derived = dict(computed)
        if "model.args_source" in spec:
            derived["model_args_source"] = spec["model.args_source"]
    elif manifest is not None:
        derived = dict(manifest.get("derived") or {}) if isinstance(manifest.get("derived"), dict) else {}
        provenance = manifest.get("model_args")
        if isinstance(provenance, dict) and "source" in provenance:
            derived["model_args_source"] = provenance["source"]
        if derived:
            notes.append(f"{label}: the derived quantities are manifest.json's: spec.toml cannot be read as a "
                         "spec, so they cannot be computed from it")
    if manifest is not None:
        warnings = tuple(sorted(_warning_text(w) for w in manifest.get("warnings") or () if isinstance(w, dict)))
    join_lines = script_lines(join.split("\n")) if join is not None else ()
    checkpoint_lines = script_lines(checkpoint.split("\n")) if checkpoint is not None and not inlined else ()
    script = {name: lines for name, lines in ((TRAIN_SH, train.script), (MODEL_ARGS_SH, model[1]),
                                              (JOIN_SH, join_lines), (CHECKPOINT_SH, checkpoint_lines)) if lines}
    return BundleView(label, train.flags, model[0], custom, spec, train.runtime_env, train.launch, derived,
                      warnings, script, status, manifest, (*notes, *(f"{label}: {n}" for n in train.notes)),
                      layout=_layout(label, resolved) if resolved is not None else None)


def with_checkpoint_sh(train_sh: str, checkpoint_sh: str | None) -> str:
    """train.sh's text with checkpoint.sh's in place of the line that sources it (the lines that line stood for);
    train.sh as it is without checkpoint.sh, or when no line of it is exactly that one (an edited train.sh)."""
    number = _source_line(train_sh) if checkpoint_sh is not None else None
    if checkpoint_sh is None or number is None:
        return train_sh
    lines = train_sh.split("\n")
    return "\n".join([*lines[:number], checkpoint_sh.rstrip("\n"), *lines[number + 1:]])


def _source_line(train_sh: str) -> int | None:
    """The index of train.sh's line that sources checkpoint.sh, or None."""
    return next((n for n, line in enumerate(train_sh.split("\n")) if line.strip() == SOURCE_CHECKPOINT), None)


def derived_from_spec(data: bytes, manifest: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """The manifest's derived section computed from a bundle's resolved spec.toml, the way
    acrl.compiler._pipeline.compile._manifest computes it (a test keeps the two the same); None when
    ``data`` is not a valid spec (a spec made by another acrl, say). ``manifest``: the bundle's, when its
    spec.toml may be one compiled before issue 13 (see :func:`legacy_cluster`)."""
    spec = spec_of(data, manifest)
    return None if spec is None else _derived(spec)


def spec_of(data: bytes, manifest: Mapping[str, Any] | None = None) -> Spec | None:
    """A bundle's resolved spec.toml as a Spec (read with its ``manifest``, see :func:`legacy_cluster`); None when
    it is not one."""
    try:
        spec, _ = structure(legacy_cluster(decode_spec(data, SPEC_TOML), manifest))
    except SpecError:
        return None
    return spec


def legacy_cluster(source: SpecSource, manifest: Mapping[str, Any] | None) -> SpecSource:
    """A bundle's resolved spec.toml read in the [cluster] terms it was compiled in. A bundle compiled before issue
    13 has a manifest whose derived section has none of the placement fields, and a spec.toml whose [cluster] has
    no head_port (acrl now writes it, as every key with a default): its num_nodes x gpus_per_node were the actor's
    nodes and GPUs per node (--actor-num-nodes, --actor-num-gpus-per-node) and a local head was one node (its `ray
    start --num-gpus` was gpus_per_node). Read as the actor's keys, and num_nodes as 1 for a local head (with an
    address, the fewest nodes that hold the placement)."""
    derived = manifest.get("derived") if isinstance(manifest, Mapping) else None
    cluster = source.data.get("cluster")
    if not isinstance(derived, Mapping) or set(derived) & PLACEMENT_FIELDS or not isinstance(cluster, Mapping) \
            or {"head_port", "actor_num_nodes", "actor_num_gpus_per_node"} & set(cluster):
        return source
    upgraded = {k: v for k, v in cluster.items() if k != "num_nodes"}
    upgraded["actor_num_nodes"] = cluster.get("num_nodes", 1)
    upgraded["actor_num_gpus_per_node"] = cluster.get("gpus_per_node", 8)
    if "address" not in cluster:
        upgraded["num_nodes"] = 1
    return attrs.evolve(source, data={**source.data, "cluster": upgraded})


def manifest_of(files: Mapping[str, bytes]) -> dict[str, Any] | None:
    """A bundle's manifest.json as a JSON object; None when there is none, or it is not one."""
    try:
        return _read_json(files[MANIFEST].decode("utf-8"))
    except (KeyError, UnicodeDecodeError, ValueError, _Unreadable, RecursionError):
        return None


def _layout(label: str, spec: Spec) -> Layout | None:
    try:
        return layout_of(label, spec)
    except ArithmeticError:  # sizes no spec the rules accept holds (a hand-edited spec.toml)
        return None


def _derived(spec: Spec) -> dict[str, Any] | None:
    try:
        return derived(spec).as_json()
    except ArithmeticError:  # num_steps_per_rollout = 0 in a hand-edited spec.toml
        return None


def _warning_text(warning: Mapping[str, Any]) -> str:
    rule = f" ({warning['rule']})" if warning.get("rule") else ""
    key = f"{warning['key']}: " if warning.get("key") else ""
    return f"{key}{warning.get('message', '')}{rule}"


def _read_yaml(source: str) -> dict[str, Any]:
    import yaml  # lazy: PyYAML (~10 ms) only for custom_config.yaml; `acrl run`'s preflight imports this module

    data = yaml.safe_load(source)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _Unreadable(f"a mapping of keys was expected, found {type(data).__name__}")
    return flatten(data)


def _read_toml(source: str) -> dict[str, Any]:
    return flatten(tomllib.loads(source))


def _read_json(source: str) -> dict[str, Any]:
    data = json.loads(source)
    if not isinstance(data, dict):
        raise _Unreadable("a JSON object was expected")
    return data


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as dotted keys; an empty table has no keys (so it is the same as no table).
    Values are made JSON values (see :func:`json_value`)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json_value(value)
    return out


TYPE_TAG = "$type"


def json_value(value: Any) -> Any:
    """``value`` as a JSON value. A TOML or YAML date, time or datetime, YAML binary (bytes) and
    set, which JSON has no type for, become ``{"$type": "date", "value": "2001-01-01"}`` (ISO text,
    binary as base64, a set as a sorted list), so the date 2001-01-01 and the string "2001-01-01"
    stay different values; lists and tables inside them are converted too."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return {TYPE_TAG: type(value).__name__, "value": value.isoformat()}
    if isinstance(value, (bytes, bytearray)):
        return {TYPE_TAG: "binary", "value": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (set, frozenset)):
        items = [json_value(v) for v in value]
        return {TYPE_TAG: "set", "value": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float)):
        return value
    return {TYPE_TAG: type(value).__name__, "value": str(value)}
