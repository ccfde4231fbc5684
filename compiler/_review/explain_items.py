"""The items `acrl explain` lists: each value of the resolved spec and each slime flag, with its origin.

A key's origin comes from the spec source's positions (its file and line, a ``--set``, a default) or is a
value the compiler resolved; a flag's from the :class:`~acrl.compiler._pipeline.argv.ArgOrigin` argv gives it
(a spec key, or the keys a derivation read), from MODEL_ARGS, [extra] or the run-time arguments.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping
from typing import Any, Literal

import attrs

from .._pipeline.argv import ArgGroup, ArgOrigin, RuntimeArgs, global_batch_size, runtime_args
from .._pipeline.model_args.catalog import entry
from .._pipeline.parse import KeyPath, SpecSource
from .._spec import profiles
from .._spec.flags import normalize_flag, parse_flags
from .._spec.rollout_features import APPEND_FLAGS
from .._spec.schema import custom_config_keys, plain, toml_literal
from .._spec.setting import switch_for
from .._spec.tables import Spec

OriginKind = Literal["spec", "bundle", "set", "default", "profile", "derived", "model_args", "runtime", "unknown"]
_MISSING = object()
_RESOLVED_WHY = {
    "model.args_source": "'auto' is 'args' when [model.args] is given, else 'catalog' when acrl's catalog has "
                         "model.type, else 'script'",
    "model.ref_load": "defaults to model.dir",
    "model.megatron_to_hf_mode": "'auto' is 'bridge' where the targeted slime has the flag",
}
_DERIVED_DOCS = {"--global-batch-size": global_batch_size.__doc__ or ""}
MODEL_ARGS_GROUP = "model architecture (MODEL_ARGS, model_args.sh)"
_RUNTIME_GROUP = "added by train.sh at run time"
VERIFY_HINT = "hand-edited? `acrl verify BUNDLE` lists what changed; compile the spec again to repair it"


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
class ModelArgsInfo:
    args: tuple[str, ...]
    source: str
    description: str
    overridden: frozenset[str]



# --- spec values ---


def key_items(source: SpecSource, written: Spec, resolved: Spec, *, in_bundle: bool) -> list[Item]:
    items = []
    written_to = custom_config_keys() if resolved.agentcore is not None else {}
    integration, profile = resolved.experiment.integration, profiles.by_key()
    for path, value, field in _leaves(resolved, ()):
        name = ".".join(map(str, path))
        given = _lookup(written, path)
        if isinstance(value, list) and any(attrs.has(type(v)) for v in value):  # an array of tables
            value, given = plain(value), plain(given)  # as spec.toml holds it ([[kuberay.worker.tolerations]])
        origin = _key_origin(source, path, name, given, value, in_bundle)
        if origin.kind == "default" and name in profile and integration != profiles.DEFAULT_INTEGRATION:
            # a value the slime or custom profile supplied (agentcore's are the keys' documented defaults)
            origin = Origin("profile", f"default of the {integration} integration profile ({profile[name].where})")
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
    if field.metadata.get("switches"):  # [checkpoint] load_optimizer, scheduler: the value picks a flag, or none
        if switch_for(field, value) is not None:
            return ""
        return "no flag is passed while the key is unset" if value is None else \
            f"no flag is passed at {toml_literal(value)}: slime's own default"
    if not flag:
        return ""
    if field.metadata.get("at_launch") and value is not None:
        return f"{flag} is passed by train.sh at launch, as its checkpoint check decides (docs/spec.md, Resuming)"
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


def with_recorded_origins(keys: list[Item], manifest: Mapping[str, Any]) -> list[Item]:
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
    writer = source.written_by(path)
    file = writer.name
    at = source.line_of(path)
    line = at[0] if at else None
    where = f"{'bundle ' if in_bundle else ''}{file} line {line}" if line is not None else file
    if written != value:
        wrote = f" ({where} wrote {toml_literal(written)})" if pos and written not in (None, _MISSING) else ""
        why = _RESOLVED_WHY.get(name, "resolved by the compiler")
        return Origin("derived", f"derived by the compiler: {why}{wrote}", file if pos else None, line)
    if pos and writer.by != "file":  # --set KEY=VALUE, or the experiment id of a [sweep] point
        return Origin("set", where, file)
    if pos:
        return Origin("bundle" if in_bundle else "spec", where, file, line)
    return Origin("default", "default" if value is not None else "default: unset")


# --- slime flags ---


def flag_items(source: SpecSource, spec: Spec, info: ModelArgsInfo, keys: list[Item],
                groups: tuple[ArgGroup, ...]) -> list[Item]:
    by_name = {i.name: i for i in keys}
    flags = _model_arg_items(spec, info, by_name)
    for group in groups:
        for arg in group.args:
            if arg.flag in APPEND_FLAGS and flags and flags[-1].name == arg.flag:  # action="append": one item, as
                flags[-1] = attrs.evolve(flags[-1], value=(*flags[-1].value, *arg.values))  # train.sh is read
                continue
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


def _model_arg_items(spec: Spec, info: ModelArgsInfo, keys: Mapping[str, Item]) -> list[Item]:
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
                              MODEL_ARGS_GROUP, (key.name,)))
        elif info.source == "args" and flag in written:
            key = keys[written[flag]]
            origin = Origin(key.origin.kind if key.origin.kind == "bundle" else "model_args",
                            f"model args source 'args': {key.name} ({key.origin.text})", key.origin.file,
                            key.origin.line)
            items.append(Item(flag, "flag", tuple(values), origin, doc, MODEL_ARGS_GROUP, (key.name,)))
        else:
            origin = Origin("model_args", f"model args source '{info.source}': {info.description}")
            items.append(Item(flag, "flag", tuple(values), origin, doc, MODEL_ARGS_GROUP, ("model.args_source",)))
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

    items = [] if run_time.custom_config is None else [  # integration "agentcore" only
        runtime("--custom-config-path", (run_time.custom_config,),
                "train.sh: the bundle's custom_config.yaml, written from [agentcore] and experiment.id",
                "The file the rollout integration reads the agent's and the gateway's settings from.")]
    if run_time.sglang_config is not None:  # [sglang.models]
        items.append(runtime("--sglang-config", (run_time.sglang_config,),
                             "train.sh: the bundle's sglang_config.yaml, written from [sglang.models]",
                             "slime's SGLang deployment: each model's server groups.", "sglang.models"))
    when = f"train.sh, only when ${env} is set at run time (wandb.key_env)"
    if not run_time.wandb_enabled:  # then, as train.sh adds them: --train-env-vars, the checkpoint's
        return items + _cuda_item(run_time) + _checkpoint_items(spec)
    items.append(runtime("--use-wandb", (), when, "Log to Weights & Biases.", "wandb.key_env"))
    for arg in run_time.wandb:
        key = keys[arg.origin]
        items.append(runtime(arg.flag, arg.values, f"{key.name} ({key.origin.text}); passed by {when}",
                             key.doc, key.name, "wandb.key_env"))
    return items + _cuda_item(run_time) + _checkpoint_items(spec)


def _checkpoint_items(spec: Spec) -> list[Item]:
    """The [checkpoint] flags train.sh adds at launch, as its checkpoint block decides (_pipeline/resume.py)."""
    c = spec.checkpoint
    if c.save is None and c.load is None:
        return []
    why = "train.sh at launch, when it finds a checkpoint to load"
    out = [Item("--load", "flag", ("$FROM",), Origin("runtime", f"{why}: checkpoint.save's, else checkpoint.load's "
                                                                "(checkpoint.resume)"),
                "The checkpoint slime resumes from.", _RUNTIME_GROUP, ("checkpoint.save", "checkpoint.load",
                                                                      "checkpoint.resume"))]
    if c.ckpt_step is not None:
        out.append(Item("--ckpt-step", "flag", ("$CKPT_STEP",), Origin("runtime", f"checkpoint.ckpt_step; {why} "
                                                                                   "in the first launch's directory"),
                        "The iteration to load.", _RUNTIME_GROUP, ("checkpoint.ckpt_step",)))
    if c.start_rollout_id is not None:
        out.append(Item("--start-rollout-id", "flag", ("$START_ROLLOUT_ID",), Origin(
            "runtime", "checkpoint.start_rollout_id; train.sh at launch, unless it resumes the run's own save"),
            "The first rollout id.", _RUNTIME_GROUP, ("checkpoint.start_rollout_id",)))
    return out


def _cuda_item(run_time: RuntimeArgs) -> list[Item]:
    if not run_time.train_env_vars:
        return []
    return [Item("--train-env-vars", "flag", ("$TRAIN_ENV_VARS",), Origin("runtime", "train.sh: CUDA_HOME and "
                 "LD_LIBRARY_PATH as JSON, computed at run time from cuda.home"),
                 "Environment of the training actors: the pinned CUDA toolkit.", _RUNTIME_GROUP, ("cuda.home",))]
