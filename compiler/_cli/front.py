"""The front door of `acrl-compile`: one call per command, a plain spec and a [sweep] spec alike.

    result = compile_to("spec.toml", "out/", CompileOptions(strict=True))
    # BundleResult (one bundle written) or SweepResult (a bundle per point and sweep.json)

    check = check_to("spec.toml", "out/", CheckOptions())
    # CheckResult (compiler/_review/diff.py) or SweepCheckResult

The caches (compiler/_fast/) are consulted here and nowhere else: a plain compile is looked up in
the compile cache first, and a compile that can be repeated is kept; `--check` reads no compile
cache and writes no compiled template (compiler/_fast/template_cache.read_only). Whether a spec is
a sweep is read from the spec, not from an exception.

The options and results are small classes of the standard library, not attrs: a cache hit imports
neither attrs nor the pipeline (tests/test_cache.py holds it to that), and this module is on its path.
"""

from __future__ import annotations

import os

from .._fast import cache as _cache
from .._pipeline.bundle import BundleWriter, read_file
from .._slime.checkout import requested

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    from .._pipeline.compile import Target
    from .._pipeline.parse import SpecSource
    from .._pipeline.sweep import Point, PointResult
    from .._review.diff import CheckResult


class _Frozen:
    """A value: set once by __init__, compared and shown by its fields."""

    __slots__: tuple[str, ...] = ()

    def __init__(self, **fields: object) -> None:
        for name in self.__slots__:
            object.__setattr__(self, name, fields.pop(name))
        if fields:
            raise TypeError(f"{type(self).__name__}: unknown field(s) {', '.join(sorted(fields))}")

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash(tuple(getattr(self, n) for n in self.__slots__))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n in self.__slots__)})"


class CheckOptions(_Frozen):
    """What decides a compile's bytes: --strict, --target and the --set overrides, in order."""

    __slots__ = ("overrides", "strict", "target")
    strict: bool
    target: Target
    overrides: tuple[str, ...]

    def __init__(self, *, strict: bool = False, target: Target = "ray", overrides: tuple[str, ...] = ()) -> None:
        super().__init__(strict=strict, target=target, overrides=tuple(overrides))


class CompileOptions(_Frozen):
    """CheckOptions, and how the result is written: --force, --keep-going (a sweep's valid points
    are written even when some are invalid) and --no-cache (``cache=False``)."""

    __slots__ = ("cache", "force", "keep_going", "overrides", "strict", "target")
    strict: bool
    target: Target
    overrides: tuple[str, ...]
    force: bool
    keep_going: bool
    cache: bool

    def __init__(self, *, strict: bool = False, target: Target = "ray", overrides: tuple[str, ...] = (),
                 force: bool = False, keep_going: bool = False, cache: bool = True) -> None:
        super().__init__(strict=strict, target=target, overrides=tuple(overrides), force=force,
                         keep_going=keep_going, cache=cache)


class BundleResult(_Frozen):
    """One bundle written to ``out``: "created", "unchanged" or "replaced", and what the compile said
    (``warnings``: each as printed and as JSON). ``files``: the bundle's; ``previous``: the files of
    the bundle it replaced (None unless "replaced"), for the summary of what changed; ``cached``:
    whether it came from the compile cache. A preview (:func:`preview`) has the status "preview" and
    writes nothing; a [sweep] spec's preview names its files ``<point>/<file>`` and sweep.json, and
    has no bundle hash."""

    __slots__ = ("bundle_hash", "cached", "files", "notes", "out", "previous", "status", "warnings")
    out: str
    status: str
    bundle_hash: str
    warnings: tuple[tuple[str, dict[str, object]], ...]
    notes: tuple[str, ...]
    files: dict[str, bytes]
    previous: dict[str, bytes] | None
    cached: bool


class SweepResult(_Frozen):
    """A [sweep] spec's bundles written under ``out``: ``written`` (each point and its status), the
    ``invalid`` points (written only with keep_going), the warnings and notes of all points, and the
    index; ``previous``: the files of each point bundle replaced, by its directory (as BundleResult's)."""

    __slots__ = ("index", "invalid", "notes", "out", "points", "previous", "warnings", "written")
    out: str
    index: str
    points: int
    written: tuple[tuple[PointResult, str], ...]
    invalid: tuple[PointResult, ...]
    warnings: tuple[str, ...]
    notes: tuple[str, ...]
    previous: dict[str, dict[str, bytes]]


class SweepCheckResult(_Frozen):
    """--check of a sweep: each point's bundle and the index against what the spec compiles to."""

    __slots__ = ("checks", "index", "index_up_to_date", "out")
    out: str
    index: str
    index_up_to_date: bool
    checks: tuple[CheckResult, ...]

    @property
    def up_to_date(self) -> bool:
        return self.index_up_to_date and all(c.up_to_date for c in self.checks)


def compile_to(spec: str, out: str | None, options: CompileOptions) -> BundleResult | SweepResult:
    """Compile ``spec`` and write it under ``out`` (default: bundles/<exp_id>). Raises AcrlError."""
    cached = options.cache and options.target == "ray"  # the cache holds default-target bundles only
    raw = read_file(spec)  # once: the spec may be a pipe (/dev/stdin, <(...)); None: the compile says why
    entry = _cache.lookup(spec, raw, strict=options.strict, overrides=options.overrides, checkouts=requested()) \
        if cached and raw is not None else None
    cached_entry = entry is not None
    if entry is None:
        compiled = _compile(spec, raw, options, keep=cached)
        if not isinstance(compiled, _cache.Entry):
            return _compile_sweep(spec, out, compiled, options)
        entry = compiled
    where = _directory(out, "bundles", entry.exp_id)
    writer = BundleWriter(force=options.force)
    status = writer.write(where, entry.files)
    previous = writer.replaced.get(where)
    return BundleResult(out=where, status=status, bundle_hash=entry.bundle_hash, warnings=entry.warnings,
                        notes=entry.notes, files=entry.files, previous=dict(previous) if previous else None,
                        cached=cached_entry)


def preview(spec: str, options: CompileOptions) -> BundleResult:
    """Compile ``spec`` as :func:`compile_to` would, and write nothing (`--print FILE`, `-o -`): the
    compile cache is read but not written. A [sweep] spec gives every valid point's files as
    ``<point directory>/<file>``, and sweep.json; an invalid point is an error, as without
    keep_going."""
    raw = read_file(spec)
    entry = _cache.lookup(spec, raw, strict=options.strict, overrides=options.overrides, checkouts=requested()) \
        if options.cache and options.target == "ray" and raw is not None else None
    compiled = entry if entry is not None else _compile(spec, raw, options, keep=False)
    if isinstance(compiled, _cache.Entry):
        return BundleResult(out="-", status="preview", bundle_hash=compiled.bundle_hash, warnings=compiled.warnings,
                            notes=compiled.notes, files=compiled.files, previous=None, cached=entry is not None)
    from .._pipeline import sweep as _sweep  # lazy: only a [sweep] spec needs the sweep stages

    _, _, results = _sweep_results(compiled, options)

    files = {f"{r.point.directory}/{name}": data for r in results if r.bundle for name, data in r.bundle.files.items()}
    files[_sweep.INDEX] = _sweep.sweep_index(compiled.name, results)
    warnings = tuple(dict.fromkeys((w.format(), w.as_json()) for r in results if r.bundle for w in r.bundle.warnings))
    notes = tuple(dict.fromkeys(n for r in results if r.bundle for n in r.bundle.notes))
    return BundleResult(out="-", status="preview", bundle_hash="", warnings=warnings, notes=notes, files=files,
                        previous=None, cached=False)


def check_to(spec: str, out: str | None, options: CheckOptions, *, bundles_dir: str = "bundles",
             sweeps: bool = True) -> CheckResult | SweepCheckResult:
    """Compile ``spec`` afresh (no compile cache is read or written, no compiled template kept) and
    compare it with its bundle directory (default: ``bundles_dir/<exp_id>``). Writes nothing. With
    ``sweeps=False`` a [sweep] spec is an error (SweepSpecError), as `acrl check-bundles` reports it."""
    # lazy: the pipeline and the review tools: this module is on a cache hit's path, which needs neither
    from .._fast.template_cache import read_only
    from .._pipeline.compile import SweepSpecError
    from .._review.diff import check_bundle

    with read_only():
        compiled = _compile(spec, read_file(spec), options, keep=False)
    if not isinstance(compiled, _cache.Entry):
        if not sweeps:
            raise SweepSpecError(compiled)
        return _check_sweep(spec, out, compiled, options)
    return check_bundle(spec, compiled.files, _directory(out, bundles_dir, compiled.exp_id))


def _directory(out: str | None, default_parent: str, name: str) -> str:
    return out.rstrip(os.sep) or os.sep if out is not None else os.path.join(default_parent, name)


def _compile(spec: str, raw: bytes | None, options: CheckOptions | CompileOptions, *,
             keep: bool) -> _cache.Entry | SpecSource:
    """Compile ``spec`` (its bytes ``raw`` if they were read) and, with ``keep``, put the result in
    the compile cache. A spec with a [sweep] table: its parsed source, for the caller to compile."""
    # lazy: a cache hit must not load the pipeline (attrs, cattrs, Jinja; tests/test_cache.py)
    import time
    from pathlib import Path

    # lazy: as above
    from .._pipeline import compile as _pipeline
    from .._pipeline.layers import SWEEP, load_spec

    started = time.time_ns()
    source = load_spec(Path(spec), data=raw, overrides=options.overrides)
    if SWEEP in source.data:
        return source
    bundle = _pipeline.compile_source(source, strict=options.strict, target=options.target)
    inputs = _pipeline.external_inputs(bundle, Path(spec).parent) if keep else None
    signatures = [(os.path.abspath(p), _cache.signature(os.fspath(p))) for p in inputs or ()]
    entry = _cache.Entry(bundle.exp_id, bundle.bundle_hash, bundle.files,
                         [(w.format(), w.as_json()) for w in bundle.warnings], bundle.notes, signatures)
    if inputs is not None and _cache.UNKNOWN not in (sig for _, sig in signatures):
        _cache.store(spec, bundle.spec_sha256, entry, strict=options.strict, started_ns=started,
                     overrides=options.overrides, checkouts=requested())
    return entry


def _compile_sweep(spec: str, out: str | None, source: SpecSource, options: CompileOptions) -> SweepResult:
    """Validate every point, then write a bundle per point and sweep.json (none when a point is
    invalid, unless keep_going)."""
    # lazy: only a [sweep] spec needs the sweep stages (a cache hit must not load the pipeline)
    from pathlib import Path

    # lazy: as above
    from .._pipeline import sweep as _sweep

    base, _, results = _sweep_results(source, options)
    invalid = tuple(r for r in results if r.bundle is None)
    experiment = base.data.get("experiment")
    name = experiment.get("id") if isinstance(experiment, dict) else None
    where = _directory(out, "bundles", name if isinstance(name, str) else Path(spec).stem)
    writer = BundleWriter.for_folder(where, force=options.force)
    statuses = _sweep.write_sweep(where, source.name, results, force=options.force, writer=writer)
    warnings = tuple(dict.fromkeys(w.format() for r in results if r.bundle for w in r.bundle.warnings)) + tuple(
        f"warning: {os.path.join(where, d)}: a bundle that is no point of this sweep (an earlier grid's?): left as "
        "it is, and sweep.json does not list it (remove it with rm -r, or keep it)"
        for d in _other_bundles(where, {r.point.directory for r in results}))
    notes = tuple(dict.fromkeys(n for r in results if r.bundle for n in r.bundle.notes))
    previous = {os.path.basename(path): dict(files) for path, files in writer.replaced.items()}
    return SweepResult(out=where, index=os.path.join(where, _sweep.INDEX), points=len(results),
                       written=tuple(statuses), invalid=invalid, warnings=warnings, notes=notes, previous=previous)


def _other_bundles(folder: str, points: set[str]) -> list[str]:
    """The bundles in a sweep's folder (directories with a manifest.json) that are not its points: an earlier grid's,
    said on every compile until they are removed (never removed by acrl: they may be someone's results)."""
    try:
        entries = sorted(os.listdir(folder))
    except OSError:
        return []
    return [d for d in entries if d not in points and os.path.isfile(os.path.join(folder, d, "manifest.json"))]


def _sweep_results(source: SpecSource, options: CompileOptions) -> tuple[SpecSource, tuple[Point, ...],
                                                                         tuple[PointResult, ...]]:
    """Every point of a [sweep] spec compiled; SpecError listing the invalid points' errors unless keep_going."""
    # lazy: only a [sweep] spec needs the sweep stages (a cache hit must not load the pipeline)
    from .._pipeline import sweep as _sweep
    from ..errors import SpecError

    base, points, results = _sweep.compile_sweep(source, strict=options.strict, target=options.target)
    invalid = tuple(r for r in results if r.bundle is None)
    if invalid and not options.keep_going:
        error = SpecError([d for r in invalid for d in r.diagnostics])
        raise error.evolve(message=f"{error.message}\n{len(invalid)} of {len(results)} sweep points are invalid "
                           "(--keep-going writes the others)")
    return base, points, results


def _check_sweep(spec: str, out: str | None, source: SpecSource, options: CheckOptions) -> SweepCheckResult:
    """--check of a sweep: every point's bundle, and the index, against what the spec compiles to."""
    # lazy: only a [sweep] spec needs the sweep stages
    from .._fast.template_cache import read_only
    from .._pipeline import sweep as _sweep
    from .._review.diff import check_bundle
    from ..errors import SpecError, UsageError

    if out is None:
        raise UsageError("--check of a sweep needs the directory of its bundles", hint="add -o DIR")
    with read_only():
        _, _, results = _sweep.compile_sweep(source, strict=options.strict, target=options.target)
    invalid = [d for r in results if r.bundle is None for d in r.diagnostics]
    if invalid:
        raise SpecError(invalid)
    where = _directory(out, "", "")
    checks = tuple(check_bundle(spec, r.bundle.files, os.path.join(where, r.point.directory))
                   for r in results if r.bundle is not None)
    index = os.path.join(where, _sweep.INDEX)
    return SweepCheckResult(out=where, index=index, checks=checks,
                            index_up_to_date=read_file(index) == _sweep.sweep_index(source.name, results))
