"""The semantic differences between two read bundles, part by part (for `acrl diff` and `--check`).

Each part is compared keyed, so that reordering is never a difference: slime's placement (in `acrl
layout`'s terms, :mod:`.layout_changes`), slime flags (in their review groups, :mod:`.flag_groups`),
MODEL_ARGS, custom-config keys, the Ray job's environment, the launch settings, the resolved spec, the
derived quantities, compile warnings, script lines acrl does not interpret, and files only one side has.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

import attrs

from .._pipeline.argv import OTHER
from .flag_groups import GROUPS, flag_group
from .layout_changes import placement_changes
from .view import KNOWN_FILES, BundleView


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Any = _Absent()  # one side has no such key


@attrs.frozen
class Change:
    """One key whose value differs; ``before`` or ``after`` is ABSENT when only one side has it."""

    key: str
    before: Any
    after: Any
    group: str | None = None  # slime flags only

    @property
    def kind(self) -> str:
        return "added" if self.before is ABSENT else "removed" if self.after is ABSENT else "changed"


@attrs.frozen
class Section:
    id: str
    title: str
    changes: tuple[Change, ...]


SECTIONS = (
    ("derived", "derived quantities"), ("placement", "placement (acrl layout)"), ("flags", "slime flags"),
    ("model_args", "model args (model_args.sh)"),
    ("custom_config", "custom config (custom_config.yaml)"), ("runtime_env", "runtime environment (Ray job env_vars)"),
    ("launch", "launch settings (train.sh)"), ("spec", "resolved spec (spec.toml)"),
    ("warnings", "compile warnings"), ("script", "script lines acrl does not interpret"),
    ("files", "bundle files"),
)
DERIVED_LABELS = {
    "actor_gpus": "GPUs, actor (training)", "rollout_gpus": "GPUs, rollout engines",
    "samples_per_rollout": "samples per rollout", "global_batch_size": "global batch (samples per optimizer step)",
    "optimizer_steps_per_rollout": "optimizer steps per rollout", "model_args_source": "model-args source",
}


@attrs.frozen
class BundleDiff:
    """The semantic differences between bundle ``a`` and bundle ``b``."""

    a: str
    b: str
    sections: tuple[Section, ...]
    notes: tuple[str, ...] = ()
    unverified: tuple[str, ...] = ()  # a side that does not match its own manifest: never equivalent

    @property
    def equivalent(self) -> bool:
        return not self.unverified and not any(section.changes for section in self.sections)

    @property
    def count(self) -> int:
        return sum(len(section.changes) for section in self.sections)

    def as_json(self) -> dict[str, Any]:
        sections = {s.id: [_change_json(s.id, c) for c in s.changes] for s in self.sections}
        return {"a": self.a, "b": self.b, "equivalent": self.equivalent, "differences": self.count,
                "sections": sections, "unverified": list(self.unverified), "notes": list(self.notes)}


def _change_json(section: str, change: Change) -> dict[str, Any]:
    def value(v: Any) -> Any:
        return None if v is ABSENT else list(v) if isinstance(v, tuple) else v

    out = {"key": change.key, "change": change.kind, "before": value(change.before), "after": value(change.after)}
    if section == "derived":
        out["label"] = DERIVED_LABELS.get(change.key, change.key)
    return {"group": change.group, **out} if change.group is not None else out


def diff_views(a: BundleView, b: BundleView) -> BundleDiff:
    """Compare two read bundles part by part."""
    flags = []
    for change in _compare(_flag_values(a), _flag_values(b)):
        side = b.flags.get(change.key) or a.flags[change.key]
        flags.append(attrs.evolve(change, group=flag_group(change.key, side.title)))
    flags.sort(key=lambda c: GROUPS.index(c.group or OTHER))
    parts: dict[str, list[Change]] = {
        "derived": _compare(a.derived, b.derived, order=list(DERIVED_LABELS)),
        "placement": [Change(k, before, after) for k, before, after in placement_changes(a.layout, b.layout)],
        "flags": flags,
        "model_args": _compare(a.model_args, b.model_args),
        "custom_config": _compare(a.custom_config, b.custom_config),
        "runtime_env": _compare(a.runtime_env, b.runtime_env),
        "launch": _compare(a.launch, b.launch),
        "spec": _compare(a.spec, b.spec),
        "warnings": _compare(dict.fromkeys(a.warnings, True), dict.fromkeys(b.warnings, True)),
        "script": _script_changes(a.script_lines, b.script_lines),
        "files": _compare(a.file_status, b.file_status, order=list(KNOWN_FILES)),
    }
    notes = [*a.notes, *b.notes, *_version_notes(a, b)]
    return BundleDiff(a.label, b.label, tuple(Section(id, title, tuple(parts[id])) for id, title in SECTIONS),
                      tuple(notes), (*a.integrity, *b.integrity))


def _flag_values(view: BundleView) -> dict[str, tuple[str, ...]]:
    return {flag: arg.values for flag, arg in view.flags.items()}


def _same(x: Any, y: Any) -> bool:
    """Equal values of the same JSON type: 1, 1.0 and true are three different values."""
    return json.dumps(x, sort_keys=True, default=str) == json.dumps(y, sort_keys=True, default=str)


def _compare(a: Mapping[str, Any], b: Mapping[str, Any], order: list[str] | None = None) -> list[Change]:
    keys = sorted(set(a) | set(b), key=lambda k: (order.index(k) if order and k in order else len(order or ()), k))
    return [Change(k, a.get(k, ABSENT), b.get(k, ABSENT)) for k in keys
            if k not in a or k not in b or not _same(a[k], b[k])]


def _script_changes(a: Mapping[str, tuple[str, ...]], b: Mapping[str, tuple[str, ...]]) -> list[Change]:
    out = []
    for name in sorted(set(a) | set(b)):
        old, new = a.get(name, ()), b.get(name, ())
        removed: list[str] = []
        added: list[str] = []
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
            if tag != "equal":
                removed += old[i1:i2]
                added += new[j1:j2]
        if removed or added:
            out.append(Change(name, tuple(removed), tuple(added)))
    return out


def _version_notes(a: BundleView, b: BundleView) -> list[str]:
    versions = [(v.label, (v.manifest or {}).get("acrl_version")) for v in (a, b)]
    if versions[0][1] != versions[1][1] and all(isinstance(v, str) for _, v in versions):
        return [f"{versions[0][0]} was made by acrl {versions[0][1]} and {versions[1][0]} by acrl {versions[1][1]}: "
                "differences in acrl's own templates show as script lines"]
    return []

