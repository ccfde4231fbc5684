"""Sweeps, stage one: the points of a [sweep] table, each with its name and directory.

The points are the grid's cartesian product (keys in the order written, the first varying
slowest), then each table of ``points``, as written: the two lists are concatenated, never
multiplied. A point's name lists its values, ``batch_size=32,lr=1e-06`` (each key by the shortest
tail of its dotted path that no other swept key shares), and its directory and experiment-id
suffix are that name made safe: ``batch_size-32_lr-1e-06``, unique (case-insensitively) among
the sweep's points. Every problem of the table itself (unknown keys, a key swept twice, values
that are not arrays, two identical points) is reported here, before any point is compiled.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
import json
import math
import re
from collections.abc import Iterator, Mapping
from typing import Any, get_args, get_origin

import attrs

from .._spec.tables import Spec, table_class
from ..errors import Diagnostic, SpecError, dotted
from .layers import SWEEP, key_problem, parse_key
from .parse import NO_LINE, KeyPath, Position, SpecSource

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


class SweepKeyError(SpecError):
    """The [sweep] table names keys a spec does not have (and nothing else is wrong with it): ``base`` and
    ``points`` are the sweep without them, whose points can still be compiled, so that their errors are reported
    in the same run (compiler/_cli/front.py). ``targets``: the keys they were probably meant to be (did-you-mean),
    whose errors in the points are not reported (the swept value would replace the one checked)."""

    def __init__(self, dropped: list[Diagnostic], base: SpecSource, points: tuple[Point, ...]) -> None:
        super().__init__(dropped, unchecked=DROPPED)
        self.base, self.points = base, points
        self.targets = frozenset(m for d in dropped for m in re.findall(r'did you mean "([^"]+)"', d.hint))


DROPPED = "The points were compiled without the [sweep] keys with errors"
NOT_COMPILED = "No sweep point was compiled"


def sweep_points(source: SpecSource) -> tuple[SpecSource, tuple[Point, ...]]:
    """The spec without its [sweep] table, and the sweep's points. Raises SpecError listing every
    problem of the [sweep] table itself (unknown keys, values that are not arrays, ...); SweepKeyError when
    they are only keys a spec does not have (the points without them can be compiled)."""
    table = source.data.get(SWEEP)
    problems: list[Diagnostic] = []
    dropped: list[Diagnostic] = []  # a key no spec has: its values are left out of the points
    if not isinstance(table, Mapping):
        raise SpecError([source.diagnostic((SWEEP,), "[sweep] must be a table",
                                           hint='write [sweep] with grid = {"table.key" = [values]} and/or points')])
    for key in table:
        if key not in _TABLE_KEYS:
            close = difflib.get_close_matches(key, _TABLE_KEYS, n=1)
            dropped.append(source.diagnostic((SWEEP, key), f"unknown key {key!r}",
                                              hint=f'did you mean "{close[0]}"?' if close else
                                              "keys allowed in [sweep]: grid, points"))
    axes = list(_grid(source, table.get("grid", {}), problems, dropped))
    explicit = [p for p in _explicit(source, table.get("points", []), problems, dropped) if p]
    for values in [[axis[0] for axis in axes], *explicit]:
        problems += _overlapping(values)
    if not problems and not dropped and not axes and not explicit:
        problems.append(source.diagnostic((SWEEP,), "the sweep has no points",
                                          hint='add grid = {"table.key" = [values, ...]} or points = [{...}, ...]'))
    size = math.prod(len(axis) for axis in axes) if axes else 0
    if size > MAX_POINTS:
        problems.append(source.diagnostic((SWEEP, "grid"), f"the grid has {size:,} points, more than {MAX_POINTS:,}",
                                          hint="sweep fewer keys or values at once"))
    if problems:
        raise SpecError(_in_order([*problems, *dropped]), unchecked=NOT_COMPILED)
    combos = [tuple(combo) for combo in itertools.product(*axes)] if axes else []
    every = [*combos, *(tuple(p) for p in explicit)]
    base = attrs.evolve(source, data={k: v for k, v in source.data.items() if k != SWEEP},
                        positions={p: pos for p, pos in source.positions.items() if p[0] != SWEEP})
    try:
        points = _named(source, every)
    except SpecError as exc:  # without the dropped values, two points may be the same: only the dropped are sure
        raise SpecError(dropped or exc.diagnostics, unchecked=NOT_COMPILED if dropped else "") from None
    if dropped:
        if not points:
            raise SpecError(dropped, unchecked=NOT_COMPILED)
        raise SweepKeyError(dropped, base, points)
    return base, points


def _in_order(found: list[Diagnostic]) -> list[Diagnostic]:
    return sorted(found, key=lambda d: (d.line is None, d.line or 0, d.column or 0))


def _grid(source: SpecSource, grid: Any, problems: list[Diagnostic],
          dropped: list[Diagnostic]) -> Iterator[list[Value]]:
    if not isinstance(grid, Mapping):
        problems.append(source.diagnostic((SWEEP, "grid"), "expected a table of arrays",
                                          hint='write grid = { "rollout.batch_size" = [32, 64] }'))
        return
    for raw, path, values in _flatten(source, grid, (SWEEP, "grid"), (), dropped, arrays=True):
        if not isinstance(values, list) or not values:
            problems.append(source.diagnostic(raw, f"expected a non-empty array of the values of {dotted(path)}",
                                              hint=f'write "{dotted(path)}" = [value, value, ...]'))
            continue
        yield [_value(source, path, v, (*raw, i)) for i, v in enumerate(values)]


def _explicit(source: SpecSource, points: Any, problems: list[Diagnostic],
              dropped: list[Diagnostic]) -> Iterator[list[Value]]:
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
               _flatten(source, point, (SWEEP, "points", i), (), dropped, arrays=False)]


def _overlapping(values: list[Value]) -> Iterator[Diagnostic]:
    """A key set twice by one point ("rollout.batch_size" and rollout = { batch_size }), or a key and
    the table holding it: one of the two values would silently win."""
    for n, later in enumerate(values):
        for earlier in values[:n]:
            short, long = sorted((earlier.path, later.path), key=len)
            if long[:len(short)] == short:
                first = f"line {earlier.position[0]}, column {earlier.position[1]}" if earlier.position[0] \
                    else "an earlier key"
                also = "" if short == long else f" (by {dotted(earlier.path)} too)"
                yield Diagnostic("error", f"{dotted(later.path)} is swept twice{also}: first at {first}",
                                 file=later.file, key=SWEEP,
                                 line=later.position[0] or None, column=later.position[1] or None,
                                 hint="write each key once in grid, and once in each table of points")
                break


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
        if (table := table_class(tp)) is not None:
            fields = {f.name: f.type for f in attrs.fields(table)}
            if step not in fields:
                return None
            tp = fields[step]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        else:
            return None
    return get_origin(tp) is dict if table_class(tp) is None else False


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
    too_long = [p for p in out if len(p.directory) > room and ("experiment", "id") not in {v.path for v in p.values}]
    if too_long and isinstance(base_id, str):  # even the hash of the name does not fit beside the id
        longest = _MAX_EXP_ID - 1 - max(len(p.directory) for p in too_long)
        problems.append(source.diagnostic(
            ("experiment", "id"), f"the experiment id is {len(base_id)} characters: each point's id adds "
            f"-<point> to it ({too_long[0].directory}), and ids are at most {_MAX_EXP_ID} characters",
            hint=f"shorten [experiment] id to at most {max(longest, 1)} characters for this sweep"))
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
