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

The points and their names come from :mod:`acrl.compiler._pipeline.sweep_points`. The spec is parsed, its
bases merged and its overrides applied once; each point then only overlays its values, and is
structured, validated and rendered (with templates compiled once). Only :func:`write_sweep`
touches the output directory.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from .._secrets import masked_overrides, redact
from ..errors import BundleExistsError, BundleWriteError, Diagnostic, SpecError, dotted
from .bundle import MANIFEST, BundleWriter, _writer_gone, read_bundle, read_file
from .compile import Bundle, Target, compile_source, manifest_file_name
from .layers import overlay
from .manifest import ManifestWarning
from .ownership import refusal
from .parse import NO_LINE, KeyPath, Position, SpecSource, Written
from .sweep_index import IndexPoint, InvalidPoint, PointValue, SweepIndex
from .sweep_points import MAX_POINTS, Point, SweepKeyError, Value, sweep_points

__all__ = ["INDEX", "MAX_POINTS", "Point", "PointResult", "Value", "compile_points", "compile_sweep", "point_source",
           "sweep_index", "sweep_points", "write_sweep"]


@attrs.frozen
class PointResult:
    """A point compiled: its bundle, or the diagnostics that stopped it."""

    point: Point
    bundle: Bundle | None
    diagnostics: tuple[Diagnostic, ...] = ()


def point_source(base: SpecSource, point: Point) -> SpecSource:
    """The spec of one point: ``base`` with the point's values (and its experiment id) set."""
    data: dict[str, Any] = {}
    positions: dict[KeyPath, Position] = {}
    files: dict[KeyPath, Written] = {}
    overrides = []
    for v in point.values:
        _set(data, v.path, v.value)
        positions[v.path], files[v.path] = v.position, Written(v.file)
        overrides.append((dotted(v.path), v.value, "sweep"))
    experiment = base.data.get("experiment")
    base_id = experiment.get("id") if isinstance(experiment, Mapping) else None
    if isinstance(base_id, str) and ("experiment", "id") not in positions:
        _set(data, ("experiment", "id"), f"{base_id}-{point.directory}")
        where = f"[sweep] point {point.name}"
        positions[("experiment", "id")], files[("experiment", "id")] = NO_LINE, Written(where, "sweep")
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
                attrs.evolve(d, message=f"sweep point {redact(point.name)}: {d.message}") for d in exc.diagnostics)))
            continue
        results.append(PointResult(point, bundle))
    return tuple(results)


def compile_sweep(source: SpecSource, *, strict: bool = False,
                  target: Target = "ray") -> tuple[SpecSource, tuple[Point, ...], tuple[PointResult, ...]]:
    """The points of ``source``'s [sweep] (sweep_points), each compiled. When the [sweep] names keys a spec does
    not have, the points without them are compiled all the same and SpecError lists both: the unknown keys, then
    the points' errors (but those at a key an unknown one was probably meant to be), with the closing line."""
    try:
        base, points = sweep_points(source)
    except SweepKeyError as exc:
        results = compile_points(exc.base, exc.points, strict=strict, target=target)
        found = [d for r in results if r.bundle is None for d in r.diagnostics
                 if not any(d.key == t or d.key.startswith(f"{t}.") for t in exc.targets)]
        raise SpecError([*exc.diagnostics, *found], unchecked=exc.unchecked) from None
    return base, points, compile_points(base, points, strict=strict, target=target)


INDEX = "sweep.json"


def sweep_index(source_name: str, results: tuple[PointResult, ...]) -> bytes:
    """sweep.json (:class:`~acrl.compiler._pipeline.sweep_index.SweepIndex`): every point's name,
    directory, experiment id, overrides and bundle hash (and the errors of the points that did not
    compile, when they were written anyway). Deterministic."""
    def values(overrides: list[dict[str, Any]]) -> list[PointValue]:
        return [PointValue(key=str(o["key"]), value=o["value"]) for o in overrides]

    points = [IndexPoint(name=r.point.name, directory=r.point.directory, exp_id=r.bundle.exp_id,
                         bundle_hash=r.bundle.bundle_hash, overrides=values(r.point.overrides()))
              for r in results if r.bundle is not None]
    invalid = [InvalidPoint(name=redact(r.point.name), overrides=values(masked_overrides(r.point.overrides())),
                            errors=[ManifestWarning(**attrs.evolve(d, file=manifest_file_name(d.file)).as_json())  # type: ignore[arg-type]
                                    for d in r.diagnostics if d.severity == "error"])
               for r in results if r.bundle is None]
    return SweepIndex(spec=Path(source_name).name, points=points, invalid=invalid or None).to_bytes()


def write_sweep(out: str, source_name: str, results: tuple[PointResult, ...], *,
                force: bool = False, writer: BundleWriter | None = None) -> list[tuple[PointResult, str]]:
    """Write every compiled point's bundle into ``out/<directory>`` (each atomically), then the index
    ``out/sweep.json``. As for one bundle (ownership.py), an existing point bundle is replaced when it
    is the intact bundle of the same point of the same spec, and the index when it is this sweep's and
    lists the bundles that are there; otherwise nothing is written without ``force``, nor when a point's
    directory cannot hold a bundle even with ``force``: BundleExistsError names them and says why. An
    index that will change is removed first, so a write failing half-way (a full disk) leaves no index
    of other bundles. Returns (point, "created"|"unchanged"|"replaced"); ``writer`` (made for ``out``
    by BundleWriter.for_folder) keeps the files of the bundles it replaced."""
    writer = writer or BundleWriter.for_folder(out, force=force)  # what killed sweeps left: put back, removed
    _remove_stale_indexes(os.path.join(out, INDEX))
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
        refused = _refused(out, written, index_path, index, source_name)
        if refused:
            raise BundleExistsError(path=out, reason="; ".join(refused[:5]) + (
                f"; and {len(refused) - 5} more" if len(refused) > 5 else ""))
    _make_dir(out)
    if read_file(index_path) not in (None, index):  # a write that fails half-way leaves no index of other bundles
        try:
            os.unlink(index_path)
        except OSError as exc:
            raise BundleWriteError(path=index_path, reason=exc.strerror or str(exc)) from None
    statuses = []
    for r in written:
        assert r.bundle is not None
        statuses.append((r, writer.write(os.path.join(out, r.point.directory), r.bundle.files)))
    temporary = f"{index_path}.{os.getpid()}.tmp"
    try:
        with open(temporary, "wb") as f:
            f.write(index)
        os.chmod(temporary, 0o644)  # as a bundle's files, whatever the umask
        os.replace(temporary, index_path)
    except OSError as exc:
            raise BundleWriteError(path=index_path, reason=exc.strerror or str(exc)) from None
    return statuses


def _make_dir(out: str) -> None:
    """Create the sweep's directory, 0755 as a bundle's, whatever the umask (an existing one is the
    user's: left as it is)."""
    if os.path.isdir(out):
        return
    try:
        os.makedirs(out)
        os.chmod(out, 0o755)
    except OSError as exc:
        raise BundleWriteError(path=out, reason=exc.strerror or str(exc)) from None


def _remove_stale_indexes(index_path: str) -> None:
    """Remove the ``sweep.json.<pid>.tmp`` files that writers killed before their rename left."""
    folder, name = os.path.split(index_path)
    try:
        entries = os.listdir(folder)
    except OSError:
        return
    for entry in entries:
        pid = entry[len(name) + 1:-4]
        if entry.startswith(name + ".") and entry.endswith(".tmp") and pid.isdigit() and \
                _writer_gone(os.path.join(folder, entry), int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(folder, entry))


def _not_replaceable(path: str, existing: Mapping[str, bytes] | None) -> bool:
    """Whether write_bundle would refuse ``path`` even with --force."""
    return os.path.lexists(path) if existing is None else bool(existing) and MANIFEST not in existing


def _listed(paths: list[str]) -> str:
    return ", ".join(paths[:5]) + (f" and {len(paths) - 5} more" if len(paths) > 5 else "")


def _refused(out: str, written: list[PointResult], index_path: str, index: bytes, source_name: str) -> list[str]:
    """What in ``out`` a sweep may not replace without --force, each as "DIR modified by hand ...":
    the point bundles ownership.refusal refuses, and an index that is not this sweep's or does not
    list the bundles that are there (edited by hand)."""
    refused = []
    hashes: dict[str, object] = {}  # point directory -> the bundle hash its manifest records
    for r in written:
        assert r.bundle is not None
        path = os.path.join(out, r.point.directory)
        existing = read_bundle(path)
        if existing is None:
            continue
        hashes[r.point.directory] = _recorded_hash(existing)
        reason = refusal(existing, r.bundle.files)
        if reason is not None:
            refused.append(f"{path} {reason}")
    old = read_file(index_path) if os.path.lexists(index_path) else None
    if old is not None and old != index:
        why = _index_refusal(old, Path(source_name).name, out, hashes)
        if why:
            refused.append(f"{index_path} {why}")
    return refused


def _index_refusal(old: bytes, spec: str, out: str, hashes: dict[str, object]) -> str | None:
    """Why the existing sweep.json ``old`` may not be replaced without --force: it is not a sweep index,
    it is another spec's, or a point it lists has another bundle hash than the bundle in its directory."""
    try:
        data = json.loads(old)
    except (ValueError, RecursionError):
        data = None
    points = data.get("points") if isinstance(data, dict) else None
    if not isinstance(points, list) or not all(isinstance(p, dict) for p in points):
        return "is not a sweep index acrl writes"
    if data.get("spec") != spec:
        return f"is the index of another sweep spec ({data.get('spec')!r}), not of {spec}"
    for point in points:
        directory = point.get("directory")
        if not isinstance(directory, str) or directory in ("", ".", "..") or os.sep in directory:
            return "is not a sweep index acrl writes"
        on_disk = hashes.get(directory) if directory in hashes else \
            _recorded_hash(read_bundle(os.path.join(out, directory)))
        if on_disk is not None and on_disk != point.get("bundle_hash"):
            return f"was modified by hand (it lists {directory} with another bundle hash than its bundle's)"
    return None


def _recorded_hash(files: Mapping[str, bytes] | None) -> object:
    """The bundle hash the manifest of ``files`` records (None: no bundle, or no readable manifest)."""
    try:
        manifest = json.loads(files[MANIFEST]) if files is not None else None
    except (KeyError, ValueError, RecursionError):
        return None
    return manifest.get("bundle_hash") if isinstance(manifest, dict) else None


