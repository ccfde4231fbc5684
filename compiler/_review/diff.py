"""`acrl diff`: a semantic diff of two bundles or specs, and `acrl-compile --check`.

Both inputs are read by :func:`acrl.compiler._review.view.read_view` (a spec is compiled in memory
first), then compared part by part, keyed so that reordering is never a difference: slime flags
(grouped by what they affect), MODEL_ARGS, custom-config keys, the Ray job's environment, the
launch settings, the resolved spec, the derived quantities, compile warnings, script lines acrl
does not interpret, and files only one side has. Formatting (text, markdown, JSON) is here too.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
from collections.abc import Callable, Mapping
from typing import Any

import attrs

from .._pipeline.bundle import DIR_MODE, MANIFEST, NOT_REGULAR, mode_differs, read_bundle, written_mode
from ..errors import BundleReadError
from .view import KNOWN_FILES, TYPE_TAG, BundleView, flatten, read_view

CLUSTER, BATCH, ALGORITHM, OPTIMIZER = "cluster and parallelism", "batch arithmetic", "algorithm", "optimizer"
ROLLOUT, MODEL, INTEGRATION = "rollout and sglang", "model architecture", "integration"
ENVIRONMENT, OTHER = "environment", "other"
GROUPS = (CLUSTER, BATCH, ALGORITHM, OPTIMIZER, ROLLOUT, MODEL, INTEGRATION, ENVIRONMENT, OTHER)

# _argv's group titles, as train.sh writes them in the SLIME_ARGS array: those that are diff groups
# are used as they are; under the others a flag goes where the flag table says, else to the default.
_TITLE_DEFAULTS = {"model and data": MODEL, "training kernels": OTHER, "evaluation": ROLLOUT,
                   "checkpoints": OTHER}
_EXACT = {
    CLUSTER: "--actor-num-nodes --actor-num-gpus-per-node --critic-num-nodes --critic-num-gpus-per-node --colocate "
             "--rollout-num-gpus --rollout-num-gpus-per-engine --num-gpus-per-node --sequence-parallel --offload "
             "--offload-train --offload-rollout",
    BATCH: "--num-rollout --num-epoch --rollout-batch-size --n-samples-per-prompt --over-sampling-batch-size "
           "--num-steps-per-rollout --global-batch-size --micro-batch-size --use-dynamic-batch-size "
           "--max-tokens-per-gpu --log-probs-max-tokens-per-gpu --balance-data",
    ALGORITHM: "--advantage-estimator --use-kl-loss --entropy-coef --normalize-advantages --use-tis --gamma --lambd "
               "--loss-type --calculate-per-token-loss --use-rollout-logprobs",
    OPTIMIZER: "--lr --min-lr --weight-decay --clip-grad --optimizer --use-precision-aware-optimizer "
               "--accumulate-allreduce-grads-in-fp32 --use-distributed-optimizer",
    ROLLOUT: "--prompt-data --input-key --label-key --metadata-key --tool-key --apply-chat-template "
             "--n-samples-per-eval-prompt --partial-rollout",
    MODEL: "--hf-checkpoint --ref-load --load --megatron-to-hf-mode --attention-backend --attention-dropout "
           "--hidden-dropout --attention-softmax-in-fp32 --num-layers --hidden-size --ffn-hidden-size "
           "--num-attention-heads --group-query-attention --num-query-groups --kv-channels --swiglu --normalization "
           "--norm-epsilon --vocab-size --disable-bias-linear --add-qkv-bias --qk-layernorm "
           "--untie-embeddings-and-output-weights --use-rotary-position-embeddings --position-embedding-type "
           "--max-position-embeddings --seq-length --num-experts",
    INTEGRATION: "--rollout-function-path --custom-config-path --rm-type --reward-key --eval-function-path",
    ENVIRONMENT: "--train-env-vars --use-wandb",
}
_FLAG_GROUPS = {flag: group for group, flags in _EXACT.items() for flag in flags.split()}
_PREFIXES = (("--sglang-", ROLLOUT), ("--wandb-", ENVIRONMENT), ("--custom-", INTEGRATION), ("--actor-", CLUSTER),
             ("--critic-", CLUSTER), ("--rollout-", ROLLOUT), ("--eval-", ROLLOUT), ("--kl-", ALGORITHM),
             ("--eps-clip", ALGORITHM), ("--tis-", ALGORITHM), ("--lr-", OPTIMIZER), ("--adam-", OPTIMIZER),
             ("--optimizer-", OPTIMIZER), ("--overlap-", OPTIMIZER), ("--moe-", MODEL), ("--rotary-", MODEL))
_SUFFIXES = (("-parallel-size", CLUSTER), ("-function-path", INTEGRATION))


def flag_group(flag: str, title: str | None) -> str:
    """The diff group of ``flag`` given the array comment above it in train.sh (None: none)."""
    if title in GROUPS and title != OTHER:
        return title
    found = _FLAG_GROUPS.get(flag)
    found = found or next((g for p, g in _PREFIXES if flag.startswith(p)), None)
    found = found or next((g for s, g in _SUFFIXES if flag.endswith(s)), None)
    return found or _TITLE_DEFAULTS.get(title or "", OTHER)


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
    ("derived", "derived quantities"), ("flags", "slime flags"), ("model_args", "model args (model_args.sh)"),
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


# --- inputs ----------------------------------------------------------------------------------

def load(path: str) -> BundleView:
    """Read a bundle directory, or compile a spec (.toml) in memory, into a view. A bundle that
    does not match its own manifest is read as it is, with a note saying so."""
    if os.path.isdir(path):
        files = read_bundle(path) or {}
        if not set(files) & set(KNOWN_FILES):
            raise BundleReadError(path=path, reason=f"is not an acrl bundle: none of {', '.join(KNOWN_FILES)} is in it",
                                  fix="give a bundle directory (e.g. bundles/<exp_id>) or a spec file (.toml)")
        return attrs.evolve(read_view(path, files), integrity=tuple(_integrity_notes(path, files)))
    if os.path.isfile(path) and path.endswith(".toml"):
        from pathlib import Path

        from .._pipeline.compile import compile_spec

        return read_view(path, compile_spec(Path(path)).files)
    reason = "no such file or directory"
    if os.path.lexists(path):
        reason = "is neither a bundle directory nor a spec (.toml)"
    raise BundleReadError(path=path, reason=reason,
                          fix="give a bundle directory (e.g. bundles/<exp_id>) or a spec file (.toml)")


def _integrity_notes(path: str, files: Mapping[str, bytes]) -> list[str]:
    from .verify import verify_files

    try:
        result = verify_files(files, where=path, check_derived=True)
    except BundleReadError as exc:
        return [f"{path} cannot be verified: {exc.message}"]
    if result.intact:
        return []
    what = [f"{kind} {', '.join(names)}" for kind, names in (("modified", result.modified),
            ("removed", result.removed), ("added", result.added), ("not a regular file", result.not_regular)) if names]
    if result.recomputed_hash is not None:
        what.append("a bundle_hash that does not match its own contents")
    if result.derived_mismatch:
        what.append("a derived section that does not match spec.toml")
    return [f"{path} does not match its manifest ({'; '.join(what)}): it was changed after it was compiled "
            f"(see `acrl verify {path}`)"]


def diff_paths(a: str, b: str) -> BundleDiff:
    """The semantic diff of two bundles or specs (see :func:`load`)."""
    return diff_views(load(a), load(b))


# --- --check ---------------------------------------------------------------------------------

@attrs.frozen
class CheckResult:
    """Whether directory ``out`` holds exactly the bundle ``spec`` compiles to."""

    spec: str
    out: str
    byte_differences: tuple[str, ...]  # one line per file that differs byte for byte (or by mode)
    diff: BundleDiff | None  # None when ``out`` is not a directory

    @property
    def up_to_date(self) -> bool:
        return not self.byte_differences

    def as_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "bundle": self.out, "up_to_date": self.up_to_date,
                "byte_differences": list(self.byte_differences),
                "diff": self.diff.as_json() if self.diff is not None else None}


def check_bundle(spec: str, compiled: Mapping[str, bytes], out: str) -> CheckResult:
    """Compare the directory ``out`` with the files ``compiled`` from ``spec``. Reads, never writes."""
    existing = read_bundle(out)
    if existing is None:
        why = "does not exist" if not os.path.lexists(out) else "is not a directory"
        return CheckResult(spec, out, (f"{out} {why}",), None)
    lines = []
    for name in sorted(set(existing) | set(compiled)):
        if name not in existing:
            lines.append(f"{name}: missing from {out}")
        elif name not in compiled:
            lines.append(f"{name}: in {out}, not in the compiled bundle")
        elif existing[name] != compiled[name]:
            lines.append(f"{name}: differs{_manifest_keys(existing, compiled) if name == MANIFEST else ''}")
    lines += _mode_differences(out, [name for name in compiled if name in existing and not name.endswith(NOT_REGULAR)])
    if not lines:
        return CheckResult(spec, out, (), None)
    view = attrs.evolve(read_view(out, existing), integrity=tuple(_integrity_notes(out, existing)))
    return CheckResult(spec, out, tuple(lines), diff_views(view, read_view(f"{spec} (compiled)", compiled)))


def _mode_differences(out: str, names: list[str]) -> list[str]:
    """``name: mode 0775, the compile writes 0755`` for the directory ``out`` (``./``) and each file
    of ``names`` in it whose mode :func:`_bundle.mode_differs` from what acrl-compile writes: unsafe
    bits, or the wrong owner-execute bit."""
    import stat

    lines = []
    for name, wanted in [("./", DIR_MODE), *((name, written_mode(name)) for name in sorted(names))]:
        try:
            st = os.lstat(os.path.join(out, name))
        except OSError:
            continue
        if mode_differs(name, st):
            lines.append(f"{name}: mode {stat.S_IMODE(st.st_mode):04o}, the compile writes {wanted:04o}")
    return lines


def _manifest_keys(existing: Mapping[str, bytes], compiled: Mapping[str, bytes]) -> str:
    try:
        old, new = (json.loads(files[MANIFEST]) for files in (existing, compiled))
    except ValueError:  # not UTF-8, not JSON
        return " (not valid JSON)"
    except RecursionError:  # nested thousands deep
        return " (nested too deeply to read)"
    if not isinstance(old, dict):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(old), "number")
        return f" (a JSON {kind}, not an object)"
    old, new = flatten(old), flatten(new)
    keys = [c.key for c in _compare(old, new) if not c.key.startswith("files.")]
    return f" ({', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''})" if keys else ""


# --- formats ---------------------------------------------------------------------------------

def _plain(value: Any) -> str:
    if isinstance(value, tuple):
        return shlex.join(value) if value else "(set)"
    if isinstance(value, str):
        return value if value and value.strip() == value else json.dumps(value)
    if isinstance(value, dict) and set(value) == {TYPE_TAG, "value"} and isinstance(value["value"], str):
        return f"{value[TYPE_TAG]} {value['value']}"  # a date, not the string "2001-01-01" (see json_value)
    return json.dumps(value, default=str)


def format_text(diff: BundleDiff) -> str:
    """The diff for a terminal: one line per change, grouped by section (and flag group)."""
    if diff.equivalent:
        return "\n".join([f"{diff.a} and {diff.b} are equivalent (no semantic differences)",
                          *(f"note: {n}" for n in diff.notes)])
    noun = "difference" if diff.count == 1 else "differences"
    out = [f"--- {diff.a}", f"+++ {diff.b}", f"{diff.count} {noun}"]
    for section in diff.sections:
        if not section.changes:
            continue
        out.append(f"{section.title}:")
        group = None
        for change in section.changes:
            if change.group is not None and change.group != group:
                group = change.group
                out.append(f"  [{group}]")
            out += [("    " if group else "  ") + line for line in _text_lines(section.id, change)]
    out += [f"not equivalent: {line}" for line in diff.unverified]
    return "\n".join(out + [f"note: {n}" for n in diff.notes])


def _text_lines(section: str, change: Change) -> list[str]:
    key = DERIVED_LABELS.get(change.key, change.key) if section == "derived" else change.key
    if section == "script":
        return [f"{key}:", *(f"  - {line}" for line in change.before), *(f"  + {line}" for line in change.after)]
    if section == "warnings":
        return [f"{'+' if change.kind == 'added' else '-'} {key}"]
    if change.kind == "changed":
        return [f"~ {key}: {_plain(change.before)} -> {_plain(change.after)}"]
    value = change.after if change.kind == "added" else change.before
    shown = "" if value == () else f": {_plain(value)}"
    return [f"{'+' if change.kind == 'added' else '-'} {key}{shown}"]


def _code(text: str) -> str:
    """A markdown code span that survives a table cell: pipes escaped, newlines shown as \\n."""
    text = text.replace("\n", "\\n").replace("|", "\\|")
    run = max((len(r) for r in _backtick_runs(text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _backtick_runs(text: str) -> list[str]:
    runs, current = [], ""
    for c in text:
        if c == "`":
            current += c
        elif current:
            runs.append(current)
            current = ""
    return [*runs, current] if current else runs


def _cell(section: str, value: Any) -> str:
    if value is ABSENT:
        return "_absent_"
    if value == ():
        return "_set_"
    return _code(_plain(value))


def format_markdown(diff: BundleDiff) -> str:
    """The diff as GitHub-flavoured markdown, ready to paste into a pull request."""
    out = [f"### `acrl diff` {_code(diff.a)} → {_code(diff.b)}", ""]
    if diff.equivalent:
        out.append("No semantic differences.")
    elif not diff.count:
        out.append("**0 semantic differences**, but a bundle that does not match its manifest is equivalent to "
                   "nothing.")
    else:
        counts = ", ".join(f"{s.title} ({len(s.changes)})" for s in diff.sections if s.changes)
        out.append(f"**{diff.count} difference{'s' if diff.count != 1 else ''}**: {counts}.")
    for section in diff.sections:
        if not section.changes:
            continue
        title = f"{section.title[0].upper()}{section.title[1:]}"
        if section.id == "spec" or (section.id == "script" and _lines(section) > 12):  # long; said above
            out += ["", f"<details><summary><b>{title}</b> ({len(section.changes)})</summary>", "",
                    *_md_section(section), "", "</details>"]
        else:
            out += ["", f"#### {title}", "", *_md_section(section)]
    if diff.unverified or diff.notes:
        out.append("")
        out += [f"> **Not equivalent:** {line}  " for line in diff.unverified]
        out += [f"> **Note:** {note}  " for note in diff.notes]
    return "\n".join(out).rstrip() + "\n"


def _lines(section: Section) -> int:
    return sum(len(c.before) + len(c.after) for c in section.changes)


def _md_section(section: Section) -> list[str]:
    if section.id == "script":
        out = []
        for change in section.changes:
            lines = [f"- {line}" for line in change.before] + [f"+ {line}" for line in change.after]
            fence = "`" * max(3, 1 + max((len(r) for line in lines for r in _backtick_runs(line)), default=0))
            out += [f"{_code(change.key)}: {len(change.before)} removed, {len(change.after)} added", "",
                    f"{fence}diff", *lines, fence, ""]
        return out[:-1]
    if section.id == "warnings":
        return [f"- {'added' if c.kind == 'added' else 'removed'}: {_code(c.key)}" for c in section.changes]
    label: Callable[[Change], str] = (lambda c: DERIVED_LABELS.get(c.key, _code(c.key))) \
        if section.id == "derived" else (lambda c: _code(c.key))
    group = section.id == "flags"
    head = "| group | flag | before | after |" if group else \
        f"| {'quantity' if section.id == 'derived' else 'key'} | before | after |"
    out = [head,
           "|---|---|---|---|" if group else "|---|---|---|"]
    for change in section.changes:
        cells = [label(change), _cell(section.id, change.before), _cell(section.id, change.after)]
        out.append("| " + " | ".join([change.group or "", *cells] if group else cells) + " |")
    return out


def format_check(result: CheckResult) -> str:
    """What `acrl-compile --check` prints: the semantic diff (committed -> compiled) and the files
    that differ byte for byte, or that the bundle is up to date."""
    spec, out = shlex.quote(result.spec), shlex.quote(result.out)
    if result.up_to_date:
        return f"{result.out} is up to date with {result.spec}"
    if result.diff is None:
        return (f"{result.byte_differences[0]}: it should hold the bundle {result.spec} compiles to\n"
                f"fix: acrl-compile {spec} -o {out} (and commit the result)")
    return "\n\n".join([
        format_text(result.diff),
        "\n".join([f"{result.out} is not what {result.spec} compiles to; files that differ byte for byte:",
                   *(f"  {line}" for line in result.byte_differences)]),
        f"fix: acrl-compile {spec} -o {out} --force (and commit the result), or undo the edit in {out}",
    ])
