"""`acrl diff RUN_A RUN_B` and `acrl diff RUN BUNDLE|SPEC` (either order): what actually ran, compared.

Two runs of "the same bundle" can differ in what they ran: another dataset behind the same path, another slime
checkout on the cluster, a W&B key set or not, a resumed checkpoint. Their records (run.json) keep what ran:
the entrypoint's argv, the Ray job's env, the stack found on the cluster and the one the bundle targets, a
size and sha256 of every data and eval file, the bundle hash and the checkpoint resumed from. They are compared
part by part, keyed, with acrl diff's own comparison and formats (acrl.compiler.diff_parts / format_diff), and
`acrl diff`'s exit status: 0 the same, 1 different, 2 trouble.

Against a bundle or spec (compiled in memory), the record's argv, env and target are compared with what the
bundle's train.sh gives the job, read as `acrl diff` reads a bundle. What train.sh decides only at launch (the
W&B flags, a value from a shell variable, the variables it forwards from the launching shell) is said in a note,
not counted. A record written before acrl kept a part says "not recorded" for it, and one whose launching machine
could not see a part (null in the record) "not known": such a pair is never called the same, since what ran
there cannot be compared.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from acrl.compiler import BundleDiff, Part, argv_flags, diff_parts, launch_of

from ._run_ref import find_record, looks_like_record, read_record, recorded_what_ran, resume_known

# The parts of a run record compared, in order: (part, title, the record's field). "bundle" is always recorded.
PARTS = (
    ("bundle", "bundle", None),
    ("flags", "slime argv (what the job got)", "argv"),
    ("runtime_env", "runtime environment (the Ray job's env_vars, working_dir)", "runtime_env"),
    ("stack", "stack found on the cluster", "stack"),
    ("target", "target stack (the bundle's manifest)", "target"),
    ("inputs", "data and eval inputs (size, sha256)", "inputs"),
    ("resumed_from", "resumed from", "resumed_from"),
    ("wandb", "W&B", "wandb"),
)
WITH_BUNDLE = ("bundle", "flags", "runtime_env", "target")  # what a bundle can say
# Why a record's part is None, as the diff says it
NOT_RECORDED = "not recorded (a record written before acrl kept {it})"
NOT_SEEN = "not known (the launching machine could not see {it})"
NOT_WRITTEN = "not known (its `acrl run` writes {it} when the run ends, and had not)"
_HEX = re.compile(r"[0-9a-f]{7,40}")
# A target's names in a record, as the manifest's slime section names them too
_TARGET_NAMES = {"slime": ("slime", "commit", "slime_commit"), "megatron": ("megatron", "megatron_commit"),
                 "sglang": ("sglang", "sglang_version")}


@attrs.frozen
class Side:
    """One side of the comparison: its parts (None: not recorded) and what it says beside them."""

    label: str
    parts: Mapping[str, Mapping[str, Any] | None]
    is_record: bool
    titles: Mapping[str, str | None] = attrs.Factory(dict)  # flag -> train.sh's array comment (a bundle's)
    at_launch: tuple[str, ...] = ()  # env_vars a bundle's train.sh takes from the launching shell
    stack: Mapping[str, Any] | None = None
    notes: tuple[str, ...] = ()
    missing: Mapping[str, str] = attrs.Factory(dict)  # part -> why it is None (NOT_RECORDED, NOT_SEEN, NOT_WRITTEN)


def diff_runs(a: str, b: str, runs_dir: str = "runs", overrides: Sequence[str] = ()) -> BundleDiff:
    """The diff of ``a`` and ``b``, each a run (see _run_ref) or, for one of them, a bundle or spec (compiled
    with ``overrides``, `--set KEY=VALUE`)."""
    left = record_side(a, runs_dir) if looks_like_record(a) else bundle_side(a, overrides)
    right = record_side(b, runs_dir) if looks_like_record(b) else bundle_side(b, overrides)
    return compare(left, right)


def record_side(ref: str, runs_dir: str = "runs") -> Side:
    record = read_record(find_record(ref, runs_dir))
    return side_of_record(f"run {record['exp_id']}/{record['run_id']}", record)


def side_of_record(label: str, record: Mapping[str, Any]) -> Side:
    """A run record's parts; a field the record lacks (written before acrl kept it) is None."""
    parts: dict[str, Mapping[str, Any] | None] = {}
    bundle = {"exp_id": record.get("exp_id"), "bundle_hash": record.get("bundle_hash")}
    if record.get("modified_files"):
        bundle["modified_files"] = record["modified_files"]
    parts["bundle"] = bundle
    argv = record.get("argv")
    parts["flags"] = argv_flags(argv) if isinstance(argv, list) and all(isinstance(w, str) for w in argv) else None
    env = record.get("runtime_env")
    if isinstance(env, Mapping):
        env_vars = env.get("env_vars")
        env_vars = env_vars if isinstance(env_vars, Mapping) else {}
        parts["runtime_env"] = {**{str(k): v for k, v in env_vars.items()},
                                **({"(working_dir)": env["working_dir"]} if env.get("working_dir") else {})}
    else:
        parts["runtime_env"] = None
    stack = record.get("stack")
    parts["stack"] = dict(stack) if isinstance(stack, Mapping) else None
    target = record.get("target")
    parts["target"] = _target(target) if isinstance(target, Mapping) else None
    parts["inputs"] = _inputs(record["inputs"]) if isinstance(record.get("inputs"), list) else None
    came = record.get("resumed_from")
    if isinstance(came, Mapping):
        parts["resumed_from"] = {"resumed": True, **came}
    else:  # null: started from the model, where its acrl run finished the record (else not known)
        parts["resumed_from"] = {"resumed": False} if resume_known(record) else None
    parts["wandb"] = dict(record["wandb"]) if isinstance(record.get("wandb"), Mapping) else None
    new = recorded_what_ran(record)
    missing = {part: NOT_SEEN if new else NOT_RECORDED for part, value in parts.items() if value is None}
    if new and parts["resumed_from"] is None:
        missing["resumed_from"] = NOT_WRITTEN
    return Side(label, parts, True, stack=parts["stack"], missing=missing)


def bundle_side(path: str, overrides: Sequence[str] = ()) -> Side:
    launch = launch_of(path, overrides)
    parts: dict[str, Mapping[str, Any] | None] = {
        "bundle": {"exp_id": launch.exp_id, "bundle_hash": launch.bundle_hash}, "flags": dict(launch.flags),
        "runtime_env": dict(launch.env_vars), "target": dict(launch.target)}
    return Side(launch.label, parts, False, launch.titles, launch.env_at_launch, notes=launch.notes)


def compare(a: Side, b: Side) -> BundleDiff:
    """Part by part; with a bundle on one side, only what a bundle can say."""
    notes = [*a.notes, *b.notes]
    unverified = []
    both_records = a.is_record and b.is_record
    parts = []
    missing: tuple[dict[str, list[str]], dict[str, list[str]]] = ({}, {})
    for part, title, field in PARTS:
        if not both_records and part not in WITH_BUNDLE:
            continue
        left, right = a.parts.get(part), b.parts.get(part)
        for fields, side in zip(missing, (a, b), strict=True):
            if side.parts.get(part) is None:
                fields.setdefault(side.missing.get(part, NOT_RECORDED), []).append(field or part)
        if left is None or right is None:
            continue
        left, right = dict(left), dict(right)
        if part in ("stack", "target"):
            right = _same_commits(left, right)
        if part == "runtime_env" and not both_records:
            notes += _launch_env(a, b, left, right)
        if part == "flags" and not both_records:
            notes += _launch_flags(a, b, left, right)
        parts.append(Part(part, title, left, right, titles={**a.titles, **b.titles}))
    for label, reasons in zip((a.label, b.label), missing, strict=True):
        for reason, names in reasons.items():
            said = reason.format(it="it" if len(names) == 1 else "them")
            unverified.append(f"{label}: {', '.join(names)} {said}: what ran there cannot be compared")
    if not both_records:
        notes += _stack_against_target(a, b)
    diff: BundleDiff = diff_parts(a.label, b.label, parts, notes, unverified)
    return diff


def _target(target: Mapping[str, Any]) -> dict[str, Any]:
    """A record's target stack under the names a bundle's is read with (slime, megatron, sglang)."""
    out = {}
    for name, aliases in _TARGET_NAMES.items():
        out[name] = next((target[k] for k in aliases if k in target), None)
    out.update({k: v for k, v in target.items() if not any(k in aliases for aliases in _TARGET_NAMES.values())})
    return out


def _inputs(entries: Sequence[Any]) -> dict[str, Any]:
    """inputs: [{"key": "data.path", "path", "size", "sha256"} or {..., "error"}] as ``data.path.sha256`` ..."""
    out: dict[str, Any] = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            continue
        key = str(entry.get("key") or f"[{i}]")
        for field, value in entry.items():
            if field != "key":
                out[f"{key}.{field}"] = value
    return out


def _same_commits(a: Mapping[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """``b`` with each commit that names the same commit as ``a``'s (one a prefix of the other: fa3c990 and
    fa3c990af6f1...) written as ``a``'s, so that a short and a full hash are no difference."""
    for key, value in b.items():
        other = a.get(key)
        if isinstance(value, str) and isinstance(other, str) and _HEX.fullmatch(value) and _HEX.fullmatch(other) \
                and (value.startswith(other) or other.startswith(value)):
            b[key] = other
    return b


def _launch_env(a: Side, b: Side, left: dict[str, Any], right: dict[str, Any]) -> list[str]:
    """Take out of the comparison the env_vars the bundle's train.sh takes from the launching shell, and the
    record's working_dir (a bundle's is wherever it is uploaded from)."""
    names = [*a.at_launch, *b.at_launch]
    for env in (left, right):
        for name in [*names, "(working_dir)"]:
            env.pop(name, None)
    return [f"not compared: {', '.join(names)} (train.sh takes these from the launching shell at launch; the record "
            "shows what the job got, a secret as <redacted>)"] if names else []


_WANDB = re.compile(r"--use-wandb$|--wandb-")


def _launch_flags(a: Side, b: Side, left: dict[str, Any], right: dict[str, Any]) -> list[str]:
    """A bundle's flag whose value is a shell variable's is compared by presence only. train.sh adds the W&B
    flags only when the W&B key variable is set at launch: a record that says the key was not set and has none
    of them ran what the bundle runs then."""
    notes = []
    record_side, bundle = (a, right) if a.is_record else (b, left)
    record = left if a.is_record else right
    shell = [f for f, values in bundle.items() if f in record and any("$" in v for v in values)]
    for flag in shell:
        record[flag] = bundle[flag]
    if shell:
        notes.append(f"compared by presence only: {', '.join(shell)} (train.sh sets the value at launch)")
    wandb = [f for f in bundle if _WANDB.match(f)]
    used = (record_side.parts.get("wandb") or {}).get("key_present")
    if wandb and used is False and not any(_WANDB.match(f) for f in record):
        for flag in wandb:
            del bundle[flag]
        notes.append(f"not compared: {', '.join(wandb)} (train.sh adds the W&B flags only when the W&B key variable "
                     "is set at launch, and the record says it was not)")
    elif {f for f in set(left) ^ set(right) if _WANDB.match(f)}:
        notes.append("train.sh adds the W&B flags only when the W&B key variable is set at launch" + (
            "; the record does not say whether it was" if used is None else ""))
    return notes


def _stack_against_target(a: Side, b: Side) -> list[str]:
    """A record's stack found on the cluster against the bundle's target, in a note (a bundle has no stack)."""
    record, bundle = (a, b) if a.is_record else (b, a)
    found, target = record.stack or {}, bundle.parts.get("target") or {}
    notes = []
    for name, key in (("slime", "slime_commit"), ("megatron", "megatron_commit"), ("sglang", "sglang")):
        ran, wants = found.get(key), target.get(name)
        if isinstance(ran, str) and isinstance(wants, str) and _same_commits({name: wants}, {name: ran})[name] != wants:
            notes.append(f"{record.label} ran {name} {ran} (found on the cluster); {bundle.label} targets {wants}")
    return notes
