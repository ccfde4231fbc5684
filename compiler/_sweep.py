"""Sweeps: a spec with a [sweep] table compiles to one bundle per point, and an index.

```toml
[sweep]
grid = { "rollout.batch_size" = [32, 64], "train.lr" = [1e-6, 3e-6] }   # every combination
points = [ { "rollout.temperature" = 0.7 }, { "rollout.temperature" = 1.0, "rollout.batch_size" = 16 } ]
```

The points are the grid's cartesian product (keys in the order written, the first varying
slowest), then each table of ``points``, as written: the two lists are concatenated, never
multiplied. A point's values are set on the spec (after its bases and ``--set``) as a ``--set``
would be. Its name lists them, ``batch_size=32,lr=1e-06`` (each key by the shortest tail of its
dotted path that no other swept key shares), and its directory and experiment-id suffix are that
name made safe: ``batch_size-32_lr-1e-06``. Unless a point sets ``experiment.id`` itself, its
bundle's id is ``<experiment.id>-<directory>``, so that every point has its own Ray submission id.

The spec is parsed, its bases merged and its overrides applied once; each point then only
overlays its values, and is structured, validated and rendered (with templates compiled once).
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import os
import re
from collections.abc import Iterator, Mapping
from typing import Any, get_args, get_origin

import attrs

from ._compile import SWEEP, Bundle, Target, compile_source
from ._errors import Diagnostic, SpecError
from ._layers import dotted, key_problem, overlay, parse_key
from ._source import NO_LINE, KeyPath, Position, SpecSource
from ._spec import Spec

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_MAX_EXP_ID = 64
MAX_POINTS = 100_000
_TABLE_KEYS = ("grid", "points")


@attrs.frozen
class Value:
    """One swept key of one point, and where in [sweep] it was written."""

    path: KeyPath
    value: Any
    file: str
    position: Position


@attrs.frozen
class Point:
    """One point of a sweep: its name (``batch_size=32,lr=1e-06``), directory and values."""

    name: str
    directory: str
    values: tuple[Value, ...]

    def overrides(self) -> list[dict[str, Any]]:
        """The point's values as JSON can hold them (an invalid point's may be nan or a TOML date)."""
        return [{"key": dotted(v.path), "value": _json_value(v.value)} for v in self.values]


def _json_value(value: Any) -> Any:
    """``value`` with what strict JSON has no literal for (nan, inf, dates and times) as TOML writes it."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, list):
        return [_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, str | int | float | bool):
        return value
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


@attrs.frozen
class PointResult:
    """A point compiled: its bundle, or the diagnostics that stopped it."""

    point: Point
    bundle: Bundle | None
    diagnostics: tuple[Diagnostic, ...] = ()


def sweep_points(source: SpecSource) -> tuple[SpecSource, tuple[Point, ...]]:
    """The spec without its [sweep] table, and the sweep's points. Raises SpecError listing every
    problem of the [sweep] table itself (unknown keys, values that are not arrays, ...)."""
    table = source.data.get(SWEEP)
    problems: list[Diagnostic] = []
    if not isinstance(table, Mapping):
        raise SpecError([source.diagnostic((SWEEP,), "[sweep] must be a table",
                                           hint='write [sweep] with grid = {"table.key" = [values]} and/or points')])
    for key in table:
        if key not in _TABLE_KEYS:
            close = difflib.get_close_matches(key, _TABLE_KEYS, n=1)
            problems.append(source.diagnostic((SWEEP, key), f"unknown key {key!r}",
                                              hint=f'did you mean "{close[0]}"?' if close else
                                              "keys allowed in [sweep]: grid, points"))
    axes = list(_grid(source, table.get("grid", {}), problems))
    explicit = list(_explicit(source, table.get("points", []), problems))
    if not problems and not axes and not explicit:
        problems.append(source.diagnostic((SWEEP,), "the sweep has no points",
                                          hint='add grid = {"table.key" = [values, ...]} or points = [{...}, ...]'))
    size = math.prod(len(axis) for axis in axes) if axes else 0
    if size > MAX_POINTS:
        problems.append(source.diagnostic((SWEEP, "grid"), f"the grid has {size:,} points, more than {MAX_POINTS:,}",
                                          hint="sweep fewer keys or values at once"))
    if problems:
        raise SpecError(problems)
    combos = [tuple(combo) for combo in itertools.product(*axes)] if axes else []
    every = [*combos, *(tuple(p) for p in explicit)]
    base = attrs.evolve(source, data={k: v for k, v in source.data.items() if k != SWEEP},
                        positions={p: pos for p, pos in source.positions.items() if p[0] != SWEEP})
    return base, _named(source, every)


def _grid(source: SpecSource, grid: Any, problems: list[Diagnostic]) -> Iterator[list[Value]]:
    if not isinstance(grid, Mapping):
        problems.append(source.diagnostic((SWEEP, "grid"), "expected a table of arrays",
                                          hint='write grid = { "rollout.batch_size" = [32, 64] }'))
        return
    for raw, path, values in _flatten(source, grid, (SWEEP, "grid"), (), problems, arrays=True):
        if not isinstance(values, list) or not values:
            problems.append(source.diagnostic(raw, f"expected a non-empty array of the values of {dotted(path)}",
                                              hint=f'write "{dotted(path)}" = [value, value, ...]'))
            continue
        yield [_value(source, path, v, (*raw, i)) for i, v in enumerate(values)]


def _explicit(source: SpecSource, points: Any, problems: list[Diagnostic]) -> Iterator[list[Value]]:
    if not isinstance(points, list):
        problems.append(source.diagnostic((SWEEP, "points"), "expected an array of tables",
                                          hint='write points = [ { "rollout.temperature" = 0.7 }, ... ]'))
        return
    for i, point in enumerate(points):
        if not isinstance(point, Mapping) or not point:
            problems.append(source.diagnostic((SWEEP, "points", i), "expected a non-empty table of key = value",
                                              hint='write { "rollout.temperature" = 0.7 }'))
            continue
        yield [_value(source, path, v, raw) for raw, path, v in
               _flatten(source, point, (SWEEP, "points", i), (), problems, arrays=False)]


def _value(source: SpecSource, path: KeyPath, value: Any, raw: KeyPath) -> Value:
    file, pos = source.locate(raw)
    return Value(path, value, file, pos or NO_LINE)


def _flatten(source: SpecSource, table: Mapping[str, Any], raw: KeyPath, path: KeyPath, problems: list[Diagnostic],
             *, arrays: bool) -> Iterator[tuple[KeyPath, KeyPath, Any]]:
    """(where written, spec key path, value) of every leaf: keys are dotted strings, or tables."""
    for key, value in table.items():
        try:
            parts, end = parse_key(key)
        except ValueError:
            parts, end = (), 0
        if end != len(key):
            problems.append(source.diagnostic((*raw, key), f"{key!r} is not a spec key",
                                              hint='name a key by its dotted path, e.g. "rollout.batch_size"'))
            continue
        here = (*path, *parts)
        if isinstance(value, Mapping) and (arrays or _is_open_table(here) is False):
            yield from _flatten(source, value, (*raw, key), here, problems, arrays=arrays)
            continue
        problem = key_problem(here)
        if problem is not None:  # shown as "[sweep] grid: unknown key 'rollout.batch_sise'"
            found = source.diagnostic((*raw, key), problem[0], hint=problem[1])
            problems.append(attrs.evolve(found, key=".".join(map(str, raw[:2]))))
            continue
        yield (*raw, key), here, value


def _is_open_table(path: KeyPath) -> bool | None:
    """Whether ``path`` is a table of any keys ([model.args]); None when it is no table at all."""
    tp: Any = Spec
    for step in path:
        if isinstance(tp, type) and attrs.has(tp):
            fields = {f.name: f.type for f in attrs.fields(tp)}
            if step not in fields:
                return None
            tp = fields[step]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            return None
    return get_origin(tp) is dict if not (isinstance(tp, type) and attrs.has(tp)) else False


def _named(source: SpecSource, points: list[tuple[Value, ...]]) -> tuple[Point, ...]:
    """Name every point by its values; the directories are safe and unique, in a stable order."""
    paths = list(dict.fromkeys(v.path for point in points for v in point))
    short = {p: _short(p, paths) for p in paths}
    experiment = source.data.get("experiment")
    base_id = experiment.get("id") if isinstance(experiment, Mapping) else None
    room = _MAX_EXP_ID - len(base_id) - 1 if isinstance(base_id, str) else _MAX_EXP_ID
    out: list[Point] = []
    taken: set[str] = set()  # case-folded: on macOS or Windows "A" and "a" are one directory
    names: dict[str, int] = {}
    problems = []
    for n, values in enumerate(points):
        name = ",".join(f"{short[v.path]}={_shown(v.value)}" for v in values)
        if name in names:
            problems.append(Diagnostic("error", f"sweep point {n + 1} ({name}) repeats point {names[name] + 1}",
                                       file=values[0].file, line=values[0].position[0] or None,
                                       column=values[0].position[1] or None, key=SWEEP,
                                       hint="remove one of them, from grid or points"))
            continue
        names[name] = n
        directory = _unique(_safe(name, room), room, taken)
        taken.add(directory.casefold())
        out.append(Point(name, directory, values))
    if problems:
        raise SpecError(problems)
    return tuple(out)


def _unique(directory: str, room: int, taken: set[str]) -> str:
    """``directory``, else the first of ``directory-2``, ``directory-3``, ... that no earlier point
    took (an earlier point may itself be named ``x-2``), shortened to fit ``room``."""
    candidate, n = directory, 1
    while candidate.casefold() in taken:
        n += 1
        suffix = f"-{n}"
        stem = directory if len(directory) + len(suffix) <= room else directory[:room - len(suffix)].rstrip("-._")
        candidate = stem + suffix
    return candidate


def _short(path: KeyPath, paths: list[KeyPath]) -> str:
    for n in range(1, len(path) + 1):
        tail = path[-n:]
        if not any(other != path and other[-n:] == tail for other in paths):
            return dotted(tail)
    return dotted(path)


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


def _safe(name: str, room: int) -> str:
    """``name`` as a directory name and experiment-id suffix: letters, digits, '.', '_' and '-'."""
    safe = _UNSAFE.sub("-", name.replace("=", "-").replace(",", "_"))
    safe = re.sub(r"\.\.+", "-", safe)  # ".." is never part of a name acrl makes: not a path, not an exp id
    safe = re.sub(r"--+", "-", safe).strip("-._") or "point"
    if len(safe) > room:
        digest = hashlib.sha256(name.encode()).hexdigest()[:8]
        safe = f"{safe[:max(room - 9, 0)].rstrip('-._')}-{digest}".lstrip("-")
    return safe


def point_source(base: SpecSource, point: Point) -> SpecSource:
    """The spec of one point: ``base`` with the point's values (and its experiment id) set."""
    data: dict[str, Any] = {}
    positions: dict[KeyPath, Position] = {}
    files: dict[KeyPath, str] = {}
    overrides = []
    for v in point.values:
        _set(data, v.path, v.value)
        positions[v.path], files[v.path] = v.position, v.file
        overrides.append((dotted(v.path), v.value, "sweep"))
    experiment = base.data.get("experiment")
    base_id = experiment.get("id") if isinstance(experiment, Mapping) else None
    if isinstance(base_id, str) and ("experiment", "id") not in positions:
        _set(data, ("experiment", "id"), f"{base_id}-{point.directory}")
        where = f"[sweep] point {point.name}"
        positions[("experiment", "id")], files[("experiment", "id")] = NO_LINE, where
    layer = SpecSource(f"[sweep] point {point.name}", "", data, positions, files, overrides=tuple(overrides))
    return overlay(base, layer, named=base)


def _set(data: dict[str, Any], path: KeyPath, value: Any) -> None:
    for step in path[:-1]:
        data = data.setdefault(str(step), {})
    data[str(path[-1])] = value


def compile_points(base: SpecSource, points: tuple[Point, ...], *, strict: bool = False,
                   target: Target = "ray") -> tuple[PointResult, ...]:
    """Compile every point; an invalid point's diagnostics say which point they are about."""
    results = []
    for point in points:
        try:
            bundle = compile_source(point_source(base, point), strict=strict, target=target)
        except SpecError as exc:
            results.append(PointResult(point, None, tuple(
                attrs.evolve(d, message=f"sweep point {point.name}: {d.message}") for d in exc.diagnostics)))
            continue
        results.append(PointResult(point, bundle))
    return tuple(results)


INDEX = "sweep.json"


def sweep_index(source_name: str, results: tuple[PointResult, ...]) -> bytes:
    """sweep.json: every point's name, directory, experiment id, overrides and bundle hash (and the
    errors of the points that did not compile, when they were written anyway). Deterministic."""
    from pathlib import Path

    points = [{"name": r.point.name, "directory": r.point.directory, "exp_id": r.bundle.exp_id,
               "bundle_hash": r.bundle.bundle_hash, "overrides": r.point.overrides()}
              for r in results if r.bundle is not None]
    invalid = [{"name": r.point.name, "overrides": r.point.overrides(),
                "errors": [attrs.evolve(d, file=Path(d.file).name).as_json() for d in r.diagnostics
                           if d.severity == "error"]}
               for r in results if r.bundle is None]
    index: dict[str, Any] = {"spec": Path(source_name).name, "points": points}
    if invalid:
        index["invalid"] = invalid
    return (json.dumps(index, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_sweep(out: str, source_name: str, results: tuple[PointResult, ...], *,
                force: bool = False) -> list[tuple[PointResult, str]]:
    """Write every compiled point's bundle into ``out/<directory>`` (each atomically), then the index
    ``out/sweep.json``. Nothing is written when an existing bundle (or index) differs and ``force`` is
    false, or a point's directory cannot hold a bundle even with ``force``: BundleExistsError names
    them. An index that will change is removed first, so a write failing half-way (a full disk) leaves
    no index of other bundles. Returns (point, "created"|"unchanged"|"replaced")."""
    from ._bundle import read_bundle, write_bundle
    from ._errors import BundleExistsError

    written = [r for r in results if r.bundle is not None]
    index = sweep_index(source_name, results)
    index_path = os.path.join(out, INDEX)
    # Every refusal write_bundle could make is made here, before the first bundle is written.
    blocked = [path for path in (os.path.join(out, r.point.directory) for r in written)
               if _not_replaceable(path, read_bundle(path))]
    if os.path.isdir(index_path):
        blocked.append(index_path)
    if blocked:
        raise BundleExistsError(path=_listed(blocked), reason="exist(s) and cannot be replaced by a bundle or "
                                "index (a file, or a directory that is not an acrl bundle), "
                                "so even --force keeps them")
    if not force:
        stale = [os.path.join(out, r.point.directory) for r in written
                 if _differs(read_bundle(os.path.join(out, r.point.directory)), r)]
        if os.path.lexists(index_path) and _read(index_path) != index:
            stale.append(index_path)
        if stale:
            raise BundleExistsError(path=_listed(stale), reason="exist(s) and differ(s) from the compiled sweep")
    if _read(index_path) not in (None, index):  # a write that fails half-way leaves no index of other bundles
        try:
            os.unlink(index_path)
        except OSError as exc:
            from ._errors import BundleWriteError

            raise BundleWriteError(path=index_path, reason=exc.strerror or str(exc)) from None
    statuses = []
    for r in written:
        assert r.bundle is not None
        statuses.append((r, write_bundle(os.path.join(out, r.point.directory), r.bundle.files, force=force)))
    temporary = f"{index_path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as f:
            f.write(index)
        os.replace(temporary, index_path)
    except OSError as exc:
        from ._errors import BundleWriteError

        raise BundleWriteError(path=index_path, reason=exc.strerror or str(exc)) from None
    return statuses


def _not_replaceable(path: str, existing: Mapping[str, bytes] | None) -> bool:
    """Whether write_bundle would refuse ``path`` even with --force."""
    from ._bundle import MANIFEST

    return os.path.lexists(path) if existing is None else bool(existing) and MANIFEST not in existing


def _listed(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def _differs(existing: Mapping[str, bytes] | None, result: PointResult) -> bool:
    return existing is not None and result.bundle is not None and existing != dict(result.bundle.files)


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None
