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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from .._pipeline.argv import build_argv
from .._pipeline.compile import compile_source, resolved_spec, supplied_keys
from .._pipeline.layers import load_spec
from .._pipeline.parse import SpecSource, parse_spec_text
from .._pipeline.structure import structure
from .._spec.flags import normalize_flag
from .._version import __version__
from ..errors import BundleReadError, Diagnostic, SpecError, UsageError
from .explain_items import (
    MODEL_ARGS_GROUP,
    VERIFY_HINT,
    Item,
    ModelArgsInfo,
    Origin,
    flag_items,
    key_items,
    with_recorded_origins,
)
from .layout import layout_of
from .layout_format import printable
from .verify import verify_files
from .view import SPEC_TOML, legacy_cluster, read_bundle_spec, read_view

__all__ = ["Explanation", "Item", "Origin", "explain_bundle", "explain_path", "explain_spec"]


@attrs.frozen
class Explanation:
    """Every value of one spec or bundle, explained; :meth:`select` narrows it to one key or flag."""

    subject: str
    kind: Literal["spec", "bundle"]
    keys: tuple[Item, ...]
    flags: tuple[Item, ...]
    notes: tuple[str, ...] = ()
    placement: tuple[str, ...] = ()  # slime's placement in `acrl layout`'s sentences, shown with [cluster]

    def select(self, key: str) -> Explanation:
        """Only ``key``: a dotted spec key, a table (``rollout``, ``model.args``) or a flag (``--lr``).
        Raises UsageError, with a did-you-mean, for a name that is neither."""
        flag = key if key.startswith("-") else None
        keys = [] if flag else [i for i in self.keys if i.name == key or i.name.startswith(f"{key}.")]
        flags = [i for i in self.flags if i.name == (flag or normalize_flag(key))] if flag or not keys else []
        if not keys and not flags:
            raise self._unknown(key)
        placement = self.placement if any(i.group == "cluster" for i in keys) else ()
        return attrs.evolve(self, keys=tuple(keys), flags=tuple(flags), placement=placement)

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
                "keys": [i.as_json() for i in self.keys], "flags": [i.as_json() for i in self.flags],
                "placement": list(self.placement)}

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
                    if item.kind == "key" and group == "cluster" and self.placement:
                        out += ["# slime's placement of these keys (`acrl layout` draws it per GPU):",
                                *(f"#   {printable(line)}" for line in self.placement)]
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


def explain_spec(source: SpecSource) -> Explanation:
    """Compile ``source`` in memory (raising SpecError if it is invalid) and explain the result."""
    bundle = compile_source(source)
    resolved = resolved_spec(bundle.spec, bundle.model_args)
    info = ModelArgsInfo(bundle.model_args.args, bundle.model_args.source, bundle.model_args.description,
                          frozenset(flag for flag, _ in bundle.model_args.overrides))
    keys = key_items(source, bundle.spec, resolved, in_bundle=False)
    flags = flag_items(source, resolved, info, keys, bundle.groups)
    notes = [f"warning: {w.table_and_key}: {w.message}" + (f" ({w.rule})" if w.rule else "") for w in bundle.warnings]
    return Explanation(source.name, "spec", tuple(keys), tuple(flags), tuple(notes),
                       tuple(layout_of(source.name, bundle.spec).summary()))


def explain_path(path: Path, overrides: Sequence[str] = ()) -> Explanation:
    """Explain a spec file (with its bases and the ``--set`` ``overrides``), or a bundle directory."""
    if path.is_dir():
        if overrides:
            raise UsageError(f"acrl explain: --set applies to a spec, and {path} is a bundle",
                             hint="explain the spec with --set, or the bundle without it")
        return explain_bundle(path)
    return explain_spec(load_spec(path, overrides=overrides))


def explain_bundle(directory: Path) -> Explanation:
    """Explain a bundle from its files, read as `acrl diff` reads them: the values of its resolved
    spec.toml, MODEL_ARGS from model_args.sh, and the flags train.sh passes, each traced to spec.toml."""
    bundle = read_bundle_spec(directory)
    shown, files, text = bundle.shown, bundle.files, bundle.spec_text
    view = read_view(shown, files)
    source = legacy_cluster(parse_spec_text(text, f"{shown}/{SPEC_TOML}"), view.manifest)
    made_by = str(view.manifest.get("acrl_version")) if view.manifest else None
    spec, diagnostics = structure(source)
    if spec is None:
        if made_by is not None and made_by != __version__:
            diagnostics = [*diagnostics, Diagnostic(
                "error", f"the bundle was made by acrl {made_by}; this is acrl {__version__}", file=source.name,
                hint="compile the original spec with this acrl")]
        raise SpecError(diagnostics)
    info = ModelArgsInfo(tuple(t for flag, values in view.model_args.items() for t in (flag, *values)),
                          *_provenance(view.manifest, files.get("model_args.sh", b"")))
    keys = with_recorded_origins(key_items(source, spec, spec, in_bundle=True), view.manifest or {})
    flags = flag_items(source, spec, info, keys, build_argv(spec, supplied_keys(source, spec)))
    flags, mismatches = _as_train_sh_passes(flags, view.flags, view.file_status.get("train.sh", "missing"), shown)
    model_args_status = view.file_status.get("model_args.sh", "missing")
    if model_args_status != "present":
        mismatches.insert(0, f"{shown}/model_args.sh is {model_args_status}: no MODEL_ARGS are explained "
                             f"({VERIFY_HINT})")
    recorded_spec = view.manifest.get("spec") if view.manifest else None
    spec_name = recorded_spec.get("name") if isinstance(recorded_spec, Mapping) else None
    notes = [f"values are those of {source.name}, the spec as acrl resolved it when it compiled "
             f"{spec_name if isinstance(spec_name, str) else 'the bundle'}", *_bundle_notes(shown, files, made_by),
             *(n for n in view.notes if not n.endswith("left out of the comparison")), *mismatches]  # said here
    return Explanation(shown, "bundle", tuple(keys), tuple(flags), tuple(notes),
                       tuple(layout_of(shown, spec).summary()))


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

# --- train.sh as it is ---


def _as_train_sh_passes(flags: list[Item], passed: Mapping[str, Any], status: str,
                        shown: str) -> tuple[list[Item], list[str]]:
    """The flags in train.sh's order, as train.sh passes them (``passed``: flag -> Flag, read by
    ``_bundle_view``). Where train.sh and spec.toml disagree, train.sh wins and a note says so."""
    train_sh = f"{shown}/train.sh"
    model = [i for i in flags if i.group == MODEL_ARGS_GROUP]
    computed = {i.name: i for i in flags if i.group != MODEL_ARGS_GROUP}
    if status != "present":
        return flags, [f"{train_sh} is {status}: its flags are shown as spec.toml gives them ({VERIFY_HINT})"]
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
        notes.append(f"so train.sh is not what spec.toml compiles to: {VERIFY_HINT}")
    return out, notes
