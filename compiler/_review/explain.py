"""`acrl explain`: where every value of the resolved spec and every slime flag of train.sh came from.

A value comes from the spec (file and line: the spec's own, or the base spec it extends that set
it), from a ``--set KEY=VALUE`` (its origin is that --set), from a default, or was derived by the compiler (an
"auto" resolved, a key that defaults to another). A flag comes from a spec key (and so from that
key's origin), from the MODEL_ARGS source, from [extra], from a derivation (--global-batch-size),
or is added by train.sh at run time. Positions come from ``_source``; flag origins from ``_argv``.

For a bundle, the values are those of its resolved spec.toml, so every value written there has
the origin "bundle .../spec.toml line N"; MODEL_ARGS are read from model_args.sh (their source may
not be on this machine), and train.sh's flags are compared with what spec.toml gives, so a
hand-edited bundle is explained as it is, not as it should be.
"""

from __future__ import annotations

import difflib
import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from .._pipeline.argv import ArgGroup, ArgOrigin, build_argv, global_batch_size, runtime_args
from .._pipeline.parse import NO_LINE, KeyPath, SpecSource, parse_spec_text
from .._spec.flags import normalize_flag, parse_flags
from .._spec.schema import custom_config_keys, toml_literal
from .._spec.tables import Spec
from .._version import __version__
from ..errors import BundleReadError, Diagnostic, SpecError, UsageError

OriginKind = Literal["spec", "bundle", "set", "default", "derived", "model_args", "runtime", "unknown"]
_MISSING = object()
_RESOLVED_WHY = {
    "model.args_source": "'auto' is 'args' when [model.args] is given, else 'catalog' when acrl's catalog has "
                         "model.type, else 'script'",
    "model.ref_load": "defaults to model.dir",
    "model.megatron_to_hf_mode": "'auto' is 'bridge' where the targeted slime has the flag",
}
_DERIVED_DOCS = {"--global-batch-size": global_batch_size.__doc__ or ""}
_MODEL_ARGS_GROUP = "model architecture (MODEL_ARGS, model_args.sh)"
_RUNTIME_GROUP = "added by train.sh at run time"
_VERIFY_HINT = "hand-edited? `acrl verify BUNDLE` lists what changed; compile the spec again to repair it"


@attrs.frozen
class Origin:
    """Where one value came from: its kind, a sentence for people, and the file and line if written."""

    kind: OriginKind
    text: str
    file: str | None = None
    line: int | None = None

    def as_json(self) -> dict[str, object]:
        return {"kind": self.kind, "text": self.text, "file": self.file, "line": self.line}


@attrs.frozen
class Item:
    """One explained value: a spec key (``rollout.batch_size``) or a slime flag (``--global-batch-size``)."""

    name: str
    kind: Literal["key", "flag"]
    value: Any  # a key's TOML value (None: unset); a flag's values, as a tuple of argv tokens
    origin: Origin
    doc: str
    group: str  # a key's table, a flag's group in train.sh
    related: tuple[str, ...] = ()  # a key's flags; a flag's spec keys
    note: str = ""  # a key's flag that is not passed, or the custom_config.yaml key it is written to
    sources: tuple[str, ...] = ()  # a derived flag's inputs: "key = value (origin)"

    def shown(self) -> str:
        if self.kind == "flag":
            return " ".join([self.name, *(shlex.quote(v) for v in self.value)])
        return f"{self.name} = {'(unset)' if self.value is None else toml_literal(self.value)}"

    def as_json(self) -> dict[str, object]:
        value = list(self.value) if self.kind == "flag" else self.value
        return {"name": self.name, "kind": self.kind, "value": value, "origin": self.origin.as_json(),
                "doc": self.doc, "group": self.group, "note": self.note or None, "from": list(self.sources),
                ("flags" if self.kind == "key" else "keys"): list(self.related)}


@attrs.frozen
class Explanation:
    """Every value of one spec or bundle, explained; :meth:`select` narrows it to one key or flag."""

    subject: str
    kind: Literal["spec", "bundle"]
    keys: tuple[Item, ...]
    flags: tuple[Item, ...]
    notes: tuple[str, ...] = ()

    def select(self, key: str) -> Explanation:
        """Only ``key``: a dotted spec key, a table (``rollout``, ``model.args``) or a flag (``--lr``).
        Raises UsageError, with a did-you-mean, for a name that is neither."""
        flag = key if key.startswith("-") else None
        keys = [] if flag else [i for i in self.keys if i.name == key or i.name.startswith(f"{key}.")]
        flags = [i for i in self.flags if i.name == (flag or normalize_flag(key))] if flag or not keys else []
        if not keys and not flags:
            raise self._unknown(key)
        return attrs.evolve(self, keys=tuple(keys), flags=tuple(flags))

    def _unknown(self, key: str) -> UsageError:
        names = sorted({i.name for i in (*self.keys, *self.flags)})
        leaf = [n for n in names if n.rsplit(".", 1)[-1] == key]
        close = leaf or difflib.get_close_matches(key, names, n=3, cutoff=0.6)
        hint = ("did you mean " + " or ".join(close) + "?") if close else \
            f"run `acrl explain {self.subject}` to list every key and flag"
        what = "slime flag in train.sh" if key.startswith("-") else "key of the resolved spec nor a slime flag"
        return UsageError(f"{self.subject}: {key!r} is not a {what}", hint=hint)

    def as_json(self) -> dict[str, object]:
        return {"ok": True, "subject": self.subject, "kind": self.kind, "notes": list(self.notes),
                "keys": [i.as_json() for i in self.keys], "flags": [i.as_json() for i in self.flags]}

    def format(self) -> str:
        """The explanation as text: a block per value, headed by its table or flag group."""
        what = "the bundle's resolved spec.toml and train.sh" if self.kind == "bundle" else "the spec"
        out = [f"# acrl explain {self.subject}: {_count(self.keys, 'value')} and {_count(self.flags, 'slime flag')} "
               f"of {what}"]
        out += [f"# note: {note}" for note in self.notes]
        for title, items in (("spec values", self.keys), ("slime flags, in train.sh order", self.flags)):
            if not items:
                continue
            out += ["", f"## {title}"]
            group = None
            for item in items:
                if item.group != group:
                    group = item.group
                    out += ["", f"[{group}]" if item.kind == "key" else f"# {group}"]
                out += _block(item)
        return "\n".join(out) + "\n"


def _count(items: tuple[Item, ...], noun: str) -> str:
    return f"{len(items)} {noun}{'' if len(items) == 1 else 's'}"


def _block(item: Item) -> list[str]:
    out = [item.shown(), f"    origin: {item.origin.text}"]
    for n, line in enumerate(item.sources):
        out.append(f"    {'from: ' if n == 0 else '      '}{line}")
    if item.kind == "key" and item.related:
        out.append(f"    flags: {', '.join(item.related)}")
    if item.note:
        out.append(f"    note: {item.note}")
    if item.doc:
        out.append(f"    doc: {item.doc}")
    return out


@attrs.frozen
class _ModelArgsInfo:
    args: tuple[str, ...]
    source: str
    description: str
    overridden: frozenset[str]


def explain_spec(source: SpecSource) -> Explanation:
    """Compile ``source`` in memory (raising SpecError if it is invalid) and explain the result."""
    from .._pipeline.compile import compile_source, resolved_spec

    bundle = compile_source(source)
    resolved = resolved_spec(bundle.spec, bundle.model_args)
    info = _ModelArgsInfo(bundle.model_args.args, bundle.model_args.source, bundle.model_args.description,
                          frozenset(flag for flag, _ in bundle.model_args.overrides))
    keys = _key_items(source, bundle.spec, resolved, in_bundle=False)
    flags = _flag_items(source, resolved, info, keys, bundle.groups)
    notes = [f"warning: {w.table_and_key}: {w.message}" + (f" ({w.rule})" if w.rule else "") for w in bundle.warnings]
    return Explanation(source.name, "spec", tuple(keys), tuple(flags), tuple(notes))


def explain_path(path: Path, overrides: Sequence[str] = ()) -> Explanation:
    """Explain a spec file (with its bases and the ``--set`` ``overrides``), or a bundle directory."""
    if path.is_dir():
        if overrides:
            raise UsageError(f"acrl explain: --set applies to a spec, and {path} is a bundle",
                             hint="explain the spec with --set, or the bundle without it")
        return explain_bundle(path)
    from .._pipeline.layers import load_spec

    return explain_spec(load_spec(path, overrides=overrides))


def explain_bundle(directory: Path) -> Explanation:
    """Explain a bundle from its files, read as `acrl diff` reads them: the values of its resolved
    spec.toml, MODEL_ARGS from model_args.sh, and the flags train.sh passes, each traced to spec.toml."""
    from .._pipeline.bundle import read_bundle
    from .._pipeline.structure import structure
    from .view import SPEC_TOML, read_view

    shown = str(directory).rstrip("/") or "/"
    files = read_bundle(directory)
    if files is None or SPEC_TOML not in files:
        reason = "no such directory" if files is None else "is not an acrl bundle: it has no spec.toml"
        raise BundleReadError(path=shown, reason=reason, fix="give a bundle directory written by acrl-compile "
                              "(e.g. bundles/<exp_id>) or a spec file (.toml)")
    view = read_view(shown, files)
    try:
        text = files[SPEC_TOML].decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BundleReadError(path=f"{shown}/{SPEC_TOML}", reason=f"is not UTF-8 text (byte {exc.start})",
                              fix="compile the spec again: acrl-compile SPEC -o DIR --force") from None
    source = parse_spec_text(text, f"{shown}/{SPEC_TOML}")
    made_by = str(view.manifest.get("acrl_version")) if view.manifest else None
    spec, diagnostics = structure(source)
    if spec is None:
        if made_by is not None and made_by != __version__:
            diagnostics = [*diagnostics, Diagnostic(
                "error", f"the bundle was made by acrl {made_by}; this is acrl {__version__}", file=source.name,
                hint="compile the original spec with this acrl")]
        raise SpecError(diagnostics)
    info = _ModelArgsInfo(tuple(t for flag, values in view.model_args.items() for t in (flag, *values)),
                          *_provenance(view.manifest, files.get("model_args.sh", b"")))
    keys = _with_recorded_origins(_key_items(source, spec, spec, in_bundle=True), view.manifest or {})
    flags = _flag_items(source, spec, info, keys, build_argv(spec))
    flags, mismatches = _as_train_sh_passes(flags, view.flags, view.file_status.get("train.sh", "missing"), shown)
    model_args_status = view.file_status.get("model_args.sh", "missing")
    if model_args_status != "present":
        mismatches.insert(0, f"{shown}/model_args.sh is {model_args_status}: no MODEL_ARGS are explained "
                             f"({_VERIFY_HINT})")
    recorded_spec = view.manifest.get("spec") if view.manifest else None
    spec_name = recorded_spec.get("name") if isinstance(recorded_spec, Mapping) else None
    notes = [f"values are those of {source.name}, the spec as acrl resolved it when it compiled "
             f"{spec_name if isinstance(spec_name, str) else 'the bundle'}", *_bundle_notes(shown, files, made_by),
             *(n for n in view.notes if not n.endswith("left out of the comparison")), *mismatches]  # said here
    return Explanation(shown, "bundle", tuple(keys), tuple(flags), tuple(notes))


def _provenance(manifest: Mapping[str, Any] | None, model_args_sh: bytes) -> tuple[str, str, frozenset[str]]:
    """(source, description, overridden flags) of MODEL_ARGS: from the manifest, else model_args.sh's header."""
    recorded = manifest.get("model_args") if manifest else None
    if isinstance(recorded, dict) and isinstance(recorded.get("source"), str):
        overrides = recorded.get("overrides")
        return (recorded["source"], str(recorded.get("from", "")),
                frozenset(overrides) if isinstance(overrides, dict) else frozenset())
    header = re.search(r"^# Source: (\S+) \((.*)\)$", model_args_sh.decode("utf-8", "replace"), re.M)
    if header is None:
        return "unknown", "model_args.sh (its provenance header is missing)", frozenset()
    overridden = re.findall(r"^# overridden by the spec's \[model\.overrides\]: (\S+)",
                            model_args_sh.decode("utf-8", "replace"), re.M)
    return header.group(1), header.group(2), frozenset(overridden)


def _bundle_notes(shown: str, files: Mapping[str, bytes], made_by: str | None) -> list[str]:
    """What the manifest says about the bundle: who made it, and whether the files still match it."""
    from .verify import verify_files

    try:
        result = verify_files(files, where=shown, check_derived=True)
    except BundleReadError as exc:
        return [f"{shown} cannot be verified: {exc.message}"]
    notes = [] if made_by == __version__ else [f"the bundle was made by acrl {made_by}; this is acrl {__version__}, "
                                               "which explains its spec.toml as it compiles it now"]
    changed = [*result.modified, *result.removed, *result.added, *result.not_regular]
    if result.derived_mismatch:
        changed.append("its derived section")
    if changed or result.recomputed_hash is not None:
        notes.append(f"{shown} does not match its manifest ({', '.join(changed) or 'bundle_hash'}): it was changed "
                     "after it was compiled")
    return notes


# --- spec values ---


def _key_items(source: SpecSource, written: Spec, resolved: Spec, *, in_bundle: bool) -> list[Item]:
    items = []
    written_to = custom_config_keys()
    for path, value, field in _leaves(resolved, ()):
        name = ".".join(map(str, path))
        origin = _key_origin(source, path, name, _lookup(written, path), value, in_bundle)
        doc = " ".join(field.metadata.get("doc", "").split())
        note = f"written to custom_config.yaml as {written_to[name]}" if name in written_to else ""
        if len(path) == 3:  # an entry of a table such as [model.args]
            doc = f"an entry of [{'.'.join(map(str, path[:2]))}]: {doc}"
        else:
            note = note or _not_passed(field, value)
        items.append(Item(name, "key", value, origin, doc, str(path[0]), note=note))
    return items


def _not_passed(field: attrs.Attribute[Any], value: Any) -> str:
    """Why the flag of a key is left out of train.sh, or "" when it is passed."""
    flag = field.metadata.get("flag")
    omit_if = field.metadata.get("omit_if", attrs.NOTHING)
    if not flag:
        return ""
    if value is None:
        return f"{flag} is not passed while the key is unset: slime's own default applies"
    if value is False:
        return f"{flag} is not passed: false leaves a store-true flag out"
    if omit_if is not attrs.NOTHING and value == omit_if:
        return f"{flag} is not passed: {toml_literal(value)} is what slime does without it"
    if isinstance(value, Mapping | list) and not value:
        return f"{flag} is not passed: the key is empty"
    return ""


def _leaves(obj: Any, path: KeyPath) -> Iterator[tuple[KeyPath, Any, attrs.Attribute[Any]]]:
    for field in attrs.fields(type(obj)):
        value = getattr(obj, field.name)
        here = (*path, field.name)
        if attrs.has(type(value)):
            yield from _leaves(value, here)
        elif isinstance(value, Mapping) and value:
            for key, entry in value.items():
                yield (*here, key), entry, field
        else:
            yield here, value, field


def _lookup(obj: Any, path: KeyPath) -> Any:
    for step in path:
        obj = obj.get(step, _MISSING) if isinstance(obj, Mapping) else getattr(obj, str(step), _MISSING)
    return obj


def _with_recorded_origins(keys: list[Item], manifest: Mapping[str, Any]) -> list[Item]:
    """A bundle's spec.toml is the merged spec: the manifest says which base (``extends``) or ``--set``
    set a value; add that to the key's origin."""
    setters: dict[str, str] = {}
    for base in manifest.get("extends") or ():
        if isinstance(base, Mapping) and isinstance(base.get("keys"), list):
            setters.update({str(k): f"{base.get('path')} (through extends)" for k in base["keys"]})
    for override in manifest.get("overrides") or ():
        if isinstance(override, Mapping) and isinstance(override.get("key"), str):
            setters[override["key"]] = f"--set {override['key']}={toml_literal(override.get('value'))}"
    out = []
    for key in keys:
        found = [setters[name] for name in setters if key.name == name or key.name.startswith(f"{name}.")]
        if found and key.origin.kind == "bundle":
            key = attrs.evolve(key, origin=attrs.evolve(key.origin, text=f"{key.origin.text}, set by {found[-1]}"))
        out.append(key)
    return out


def _key_origin(source: SpecSource, path: KeyPath, name: str, written: Any, value: Any, in_bundle: bool) -> Origin:
    pos = source.positions.get(path)
    file = source.files.get(path, source.name)
    line = pos[0] if pos and pos != NO_LINE else None
    where = f"{'bundle ' if in_bundle else ''}{file} line {line}" if line is not None else file
    if written != value:
        wrote = f" ({where} wrote {toml_literal(written)})" if pos and written not in (None, _MISSING) else ""
        why = _RESOLVED_WHY.get(name, "resolved by the compiler")
        return Origin("derived", f"derived by the compiler: {why}{wrote}", file if pos else None, line)
    if pos == NO_LINE:
        return Origin("set", where, file)
    if pos:
        return Origin("bundle" if in_bundle else "spec", where, file, line)
    return Origin("default", "default" if value is not None else "default: unset")


# --- slime flags ---


def _flag_items(source: SpecSource, spec: Spec, info: _ModelArgsInfo, keys: list[Item],
                groups: tuple[ArgGroup, ...]) -> list[Item]:
    by_name = {i.name: i for i in keys}
    flags = _model_arg_items(spec, info, by_name)
    for group in groups:
        for arg in group.args:
            flags.append(_arg_item(arg.flag, arg.values, arg.source, group.title, by_name))
    flags += _extra_arg_items(spec, by_name)
    flags += _runtime_items(spec, by_name)
    for index, key in enumerate(keys):
        related = tuple(dict.fromkeys(f.name for f in flags if key.name in f.related))
        keys[index] = attrs.evolve(key, related=related)
    return flags


def _from_key(key: Item) -> Origin:
    return attrs.evolve(key.origin, text=f"{key.name} ({key.origin.text})")


def _arg_item(flag: str, values: tuple[str, ...], source: ArgOrigin, group: str, keys: Mapping[str, Item]) -> Item:
    if source.kind == "derived":
        why = source.why
        inputs = tuple(k for k in source.keys if k in keys)
        doc = _DERIVED_DOCS.get(flag) or (keys[inputs[0]].doc if inputs else "")
        sources = tuple(f"{keys[k].shown()} ({keys[k].origin.text})" for k in inputs)
        return Item(flag, "flag", values, Origin("derived", f"derived by the compiler: {why}"), doc, group, inputs,
                    sources=sources)
    origin = source.keys[0]
    if origin in keys:
        key = keys[origin]
        doc = key.doc
        if origin.startswith("extra.flags."):
            doc = "[extra.flags] escape hatch: passed as written; acrl does not check what the flag means."
        return Item(flag, "flag", values, _from_key(key), doc, group, (origin,))
    entries = [k for name, k in keys.items() if name.startswith(f"{origin}.")]  # a table such as eval.datasets
    if not entries:
        return Item(flag, "flag", values, Origin("unknown", origin), "", group)
    text = f"{origin}: " + ", ".join(f"{k.name.rsplit('.', 1)[-1]} ({k.origin.text})" for k in entries)
    doc = entries[0].doc.split(": ", 1)[-1]
    return Item(flag, "flag", values, attrs.evolve(entries[0].origin, text=text), doc, group,
                tuple(k.name for k in entries))


def _model_arg_items(spec: Spec, info: _ModelArgsInfo, keys: Mapping[str, Item]) -> list[Item]:
    from .._pipeline.model_args.catalog import entry

    found = entry(spec.model.type) if info.source == "catalog" else None
    derivation = found.derived() if found is not None else None
    written = {normalize_flag(name): f"model.args.{name}" for name in spec.model.args}
    overrides = {normalize_flag(name): f"model.overrides.{name}" for name in spec.model.overrides}
    items = []
    for flag, values in parse_flags(info.args).items():
        doc = "Model architecture (MODEL_ARGS)."
        field = derivation.source(flag) if derivation is not None else None
        if field:
            doc += f" From config.json field {field}."
        if flag in info.overridden and flag in overrides:
            key = keys[overrides[flag]]
            items.append(Item(flag, "flag", tuple(values), _from_key(key), doc + " Overridden by [model.overrides].",
                              _MODEL_ARGS_GROUP, (key.name,)))
        elif info.source == "args" and flag in written:
            key = keys[written[flag]]
            origin = Origin(key.origin.kind if key.origin.kind == "bundle" else "model_args",
                            f"model args source 'args': {key.name} ({key.origin.text})", key.origin.file,
                            key.origin.line)
            items.append(Item(flag, "flag", tuple(values), origin, doc, _MODEL_ARGS_GROUP, (key.name,)))
        else:
            origin = Origin("model_args", f"model args source '{info.source}': {info.description}")
            items.append(Item(flag, "flag", tuple(values), origin, doc, _MODEL_ARGS_GROUP, ("model.args_source",)))
    return items


def _extra_arg_items(spec: Spec, keys: Mapping[str, Item]) -> list[Item]:
    key = keys.get("extra.args")
    if key is None or not spec.extra.args:
        return []
    return [Item(flag, "flag", tuple(values), _from_key(key), "[extra] args: raw arguments appended verbatim.",
                 "[extra] args", ("extra.args",)) for flag, values in parse_flags(spec.extra.args).items()]


def _runtime_items(spec: Spec, keys: Mapping[str, Item]) -> list[Item]:
    run_time = runtime_args(spec)
    env = run_time.key_env

    def runtime(flag: str, values: tuple[str, ...], text: str, doc: str, *inputs: str) -> Item:
        return Item(flag, "flag", values, Origin("runtime", text), doc, _RUNTIME_GROUP, inputs)

    items = [runtime("--custom-config-path", (run_time.custom_config,),
                     "train.sh: the bundle's custom_config.yaml, written from [agentcore] and experiment.id",
                     "The file the rollout integration reads the agent's and the gateway's settings from.")]
    when = f"train.sh, only when ${env} is set at run time (wandb.key_env)"
    items.append(runtime("--use-wandb", (), when, "Log to Weights & Biases.", "wandb.key_env"))
    for arg in run_time.wandb:
        key = keys[arg.origin]
        items.append(runtime(arg.flag, arg.values, f"{key.name} ({key.origin.text}); passed by {when}",
                             key.doc, key.name, "wandb.key_env"))
    if run_time.train_env_vars:
        items.append(runtime("--train-env-vars", ("$TRAIN_ENV_VARS",),
                             "train.sh: CUDA_HOME and LD_LIBRARY_PATH as JSON, computed at run time from cuda.home",
                             "Environment of the training actors: the pinned CUDA toolkit.", "cuda.home"))
    return items


# --- train.sh as it is ---


def _as_train_sh_passes(flags: list[Item], passed: Mapping[str, Any], status: str,
                        shown: str) -> tuple[list[Item], list[str]]:
    """The flags in train.sh's order, as train.sh passes them (``passed``: flag -> Flag, read by
    ``_bundle_view``). Where train.sh and spec.toml disagree, train.sh wins and a note says so."""
    train_sh = f"{shown}/train.sh"
    model = [i for i in flags if i.group == _MODEL_ARGS_GROUP]
    computed = {i.name: i for i in flags if i.group != _MODEL_ARGS_GROUP}
    if status != "present":
        return flags, [f"{train_sh} is {status}: its flags are shown as spec.toml gives them ({_VERIFY_HINT})"]
    out, notes = list(model), []
    for flag, found in passed.items():
        item = computed.pop(flag, None)
        values = tuple(found.values)
        if item is None:
            notes.append(f"{train_sh} passes {flag}, which spec.toml does not give")
            item = Item(flag, "flag", values, Origin("unknown", f"{train_sh} only: not from spec.toml"), "",
                        found.title or "not from spec.toml")
        elif values != item.value:
            notes.append(f"{train_sh} passes {shlex.join([flag, *values])}, spec.toml gives "
                         f"{shlex.join([flag, *item.value])}")
            item = attrs.evolve(item, value=values, origin=Origin(
                "unknown", f"{train_sh}, which differs from {item.origin.text}", item.origin.file, item.origin.line))
        out.append(item)
    notes += [f"{train_sh} does not pass {flag}, which spec.toml gives" for flag in computed]
    if notes:
        notes.append(f"so train.sh is not what spec.toml compiles to: {_VERIFY_HINT}")
    return out, notes
