"""What a bundle would run, in the terms a run record keeps, for `acrl diff RUN BUNDLE|SPEC` and `acrl diff RUN_A
RUN_B` (the comparison itself is acrl.runtime's: it reads run records; the compiler never does).

A run record (runs/<exp_id>/<run_id>/run.json) keeps the entrypoint's argv as the job got it (``python3
ENTRYPOINT MODEL_ARGS... SLIME_ARGS...``), the Ray job's env_vars and the stack the bundle targets. A bundle's
are read from its files by :mod:`.view` (a spec is compiled in memory first), exactly as `acrl diff` reads
them, so both sides of the comparison go through the same reader: :func:`argv_flags` reads an argv into flags
with the rules read_train_sh applies to SLIME_ARGS (a later flag wins; an append flag keeps every value).
:func:`diff_parts` builds acrl diff's own BundleDiff from keyed parts, and :func:`format_diff` prints it in
acrl diff's formats, so the record diff reads and exits like every other acrl diff.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from .._pipeline.argv import OTHER
from .._spec.rollout_features import APPEND_FLAGS
from .changes import BundleDiff, Section, _compare
from .diff import load
from .diff_format import format_markdown, format_text
from .flag_groups import GROUPS, flag_group
from .shell_files import FORWARDED, NO_FLAG, PINNED_AT_LAUNCH, flag_occurrences

ENTRYPOINT = NO_FLAG  # the words before the first flag: python3 and slime's train.py


@attrs.frozen
class Launch:
    """What a bundle (or a spec compiled in memory) runs, in a run record's terms."""

    label: str
    flags: Mapping[str, tuple[str, ...]]  # the entrypoint's argv: python3 ENTRYPOINT, MODEL_ARGS, SLIME_ARGS
    titles: Mapping[str, str | None]  # flag -> the train.sh array comment above it (for its review group)
    env_vars: Mapping[str, str]  # the Ray job's env_vars that the bundle fixes
    env_at_launch: tuple[str, ...]  # env_vars train.sh takes from the launching shell (forwarded, pinned CUDA)
    target: Mapping[str, str | None]  # the stack the bundle targets: slime, megatron, sglang (manifest.json)
    bundle_hash: str | None
    exp_id: str | None
    notes: tuple[str, ...] = ()  # the reader's notes and why a bundle does not match its manifest


def launch_of(path: str, overrides: Sequence[str] = ()) -> Launch:
    """Read a bundle directory, or compile a spec (.toml) in memory with ``overrides`` (`--set`), as
    :class:`Launch`; BundleReadError or SpecError as `acrl diff` raises them."""
    view = load(path, overrides)
    manifest = view.manifest or {}
    flags: dict[str, tuple[str, ...]] = {}
    entrypoint = _entrypoint(view.launch)
    if entrypoint is not None:
        flags[ENTRYPOINT] = ("python3", entrypoint)
    titles: dict[str, str | None] = {}
    for flag, values in view.model_args.items():  # MODEL_ARGS come first in the argv, SLIME_ARGS win
        flags[flag], titles[flag] = values, None
    for flag, arg in view.flags.items():
        flags.pop(flag, None)
        flags[flag], titles[flag] = arg.values, arg.title
    at_launch = tuple(sorted(n for n, v in view.runtime_env.items() if v in (FORWARDED, PINNED_AT_LAUNCH)))
    env = {n: v for n, v in view.runtime_env.items() if n not in at_launch}
    slime = manifest.get("slime")
    slime = slime if isinstance(slime, Mapping) else {}
    target = {"slime": slime.get("commit"), "megatron": slime.get("megatron_commit"),
              "sglang": slime.get("sglang_version")}
    bundle_hash = manifest.get("bundle_hash") if isinstance(manifest.get("bundle_hash"), str) else None
    exp_id = manifest.get("exp_id") if isinstance(manifest.get("exp_id"), str) else None
    return Launch(view.label, flags, titles, env, at_launch, target, bundle_hash or None, exp_id,
                  (*view.integrity, *view.notes))


def _entrypoint(launch: Mapping[str, str]) -> str | None:
    """train.sh's ENTRYPOINT ($SLIME_DIR/train.py) with its launch settings put in, as the job gets it."""
    value = launch.get("ENTRYPOINT")
    if value is None:
        return None
    return re.sub(r"\$\{?(\w+)\}?", lambda m: launch.get(m.group(1), m.group(0)), value)


def argv_flags(argv: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """An entrypoint argv (``python3 train.py --a 1 --b``) as flags, read as train.sh's SLIME_ARGS are: the
    words before the first flag under ENTRYPOINT, a repeated flag's last value (at its last place), an
    append flag's values all kept in order."""
    flags: dict[str, tuple[str, ...]] = {}
    for flag, values, _ in flag_occurrences([(None, list(argv))]):
        if flag in APPEND_FLAGS and flag in flags:
            flags[flag] = (*flags[flag], *values)
            continue
        flags.pop(flag, None)
        flags[flag] = values
    return flags


@attrs.frozen
class Part:
    """One section of a record diff: ``a`` and ``b`` compared key by key. ``titles``: for the slime flags
    (section id "flags"), the array comment above each flag where one side is a bundle."""

    id: str
    title: str
    a: Mapping[str, Any]
    b: Mapping[str, Any]
    titles: Mapping[str, str | None] = attrs.Factory(dict)


def diff_parts(a: str, b: str, parts: Iterable[Part], notes: Sequence[str] = (),
               unverified: Sequence[str] = ()) -> BundleDiff:
    """acrl diff's BundleDiff of ``parts`` (compared as `acrl diff` compares a bundle's: keyed, values of the
    same JSON type); slime flags are put in their review groups, in acrl diff's order of groups."""
    sections = []
    for part in parts:
        changes = _compare(part.a, part.b)
        if part.id == "flags":
            changes = sorted((attrs.evolve(c, group=flag_group(c.key, part.titles.get(c.key))) for c in changes),
                             key=lambda c: GROUPS.index(c.group or OTHER))
        sections.append(Section(part.id, part.title, tuple(changes)))
    return BundleDiff(a, b, tuple(sections), tuple(notes), tuple(unverified))


def format_diff(diff: BundleDiff, style: str) -> str:
    """``diff`` as `acrl diff --format text|markdown` prints it (json: ``diff.as_json()``)."""
    return format_markdown(diff) if style == "markdown" else format_text(diff) + "\n"


__all__ = ["ENTRYPOINT", "Launch", "Part", "argv_flags", "diff_parts", "format_diff", "launch_of"]
