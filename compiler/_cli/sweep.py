"""The command line of sweeps: `acrl-compile SWEEP.toml -o DIR` and its --check (compiler/_cli/main.py
calls these when the spec has a [sweep] table; compiler/_pipeline/sweep.py does the work)."""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .._pipeline import sweep as _sweep
from .._pipeline.bundle import read_file
from .._secrets import redact
from ..errors import SpecError, UsageError
from .output import EXIT_FAILED, EXIT_OK
from .output import print_json as _print_json

if TYPE_CHECKING:
    import argparse

    from .._pipeline.parse import SpecSource


def run_sweep(args: argparse.Namespace, source: SpecSource) -> int:
    """A spec with a [sweep] table: validate every point, then write a bundle per point and sweep.json
    (none when a point is invalid, unless --keep-going)."""
    base, points = _sweep.sweep_points(source)
    results = _sweep.compile_points(base, points, strict=args.strict, target=args.target)
    invalid = [r for r in results if r.bundle is None]
    if invalid and not args.keep_going:
        error = SpecError([d for r in invalid for d in r.diagnostics])
        raise error.evolve(message=f"{error.message}\n{len(invalid)} of {len(results)} sweep points are invalid "
                           "(--keep-going writes the others)")
    experiment = base.data.get("experiment")
    name = experiment.get("id") if isinstance(experiment, dict) else None
    out = args.output.rstrip(os.sep) or os.sep if args.output is not None else \
        os.path.join("bundles", name if isinstance(name, str) else Path(args.spec).stem)
    statuses = _sweep.write_sweep(out, source.name, results, force=args.force)
    warnings = list(dict.fromkeys(w.format() for r in results if r.bundle for w in r.bundle.warnings))
    if args.json:
        _print_json({"ok": not invalid, "sweep": out, "index": os.path.join(out, _sweep.INDEX),
                     "points": [{"name": r.point.name, "bundle": os.path.join(out, r.point.directory),
                                 "bundle_hash": r.bundle.bundle_hash if r.bundle else None, "status": status}
                                for r, status in statuses],
                     "invalid": [{"name": redact(r.point.name), "errors": [d.as_json() for d in r.diagnostics]}
                                 for r in invalid]})
        return EXIT_FAILED if invalid else EXIT_OK
    for text in warnings:
        print(text, file=sys.stderr)
    for r, status in statuses:
        assert r.bundle is not None
        print(f"{status} {os.path.join(out, r.point.directory)}{os.sep}  bundle sha256:{r.bundle.bundle_hash}")
    if invalid:
        print("\n".join(d.format() for r in invalid for d in r.diagnostics), file=sys.stderr)
        print(f"{len(invalid)} of {len(results)} sweep points are invalid; the other {len(statuses)} were written",
              file=sys.stderr)
    print(f"sweep: {len(statuses)} bundles, index {os.path.join(out, _sweep.INDEX)}")
    return EXIT_FAILED if invalid else EXIT_OK


def check_sweep(args: argparse.Namespace, source: SpecSource) -> int:
    """--check of a sweep: every point's bundle, and the index, against what the spec compiles to."""
    # lazy: only --check compares bundles; a sweep compile does not pay for _diff
    from .._review.diff import check_bundle, format_check

    if args.output is None:
        raise UsageError("--check of a sweep needs the directory of its bundles", hint="add -o DIR")
    base, points = _sweep.sweep_points(source)
    results = _sweep.compile_points(base, points, strict=args.strict, target=args.target)
    invalid = [d for r in results if r.bundle is None for d in r.diagnostics]
    if invalid:
        raise SpecError(invalid)
    out = args.output.rstrip(os.sep) or os.sep
    checks = [check_bundle(args.spec, r.bundle.files, os.path.join(out, r.point.directory))
              for r in results if r.bundle is not None]
    index = os.path.join(out, _sweep.INDEX)
    index_ok = read_file(index) == _sweep.sweep_index(source.name, results)
    ok = index_ok and all(c.up_to_date for c in checks)
    if args.json:
        _print_json({"ok": ok, "index_up_to_date": index_ok, "points": [c.as_json() for c in checks]})
    else:
        for check in checks:  # the fix recompiles the whole sweep, not one point's directory
            fix = f" -o {shlex.quote(check.out)} --force", f" -o {shlex.quote(out)} --force"
            print(format_check(check).replace(*fix))
        print(f"{index} is {'up to date' if index_ok else 'stale or missing'}")
    return EXIT_OK if ok else EXIT_FAILED
