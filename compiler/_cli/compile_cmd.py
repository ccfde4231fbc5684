"""`acrl-compile SPEC` (= `acrl compile`), its --check, and `acrl check-bundles`: each handler turns
its arguments into options, makes one call to the front door (compiler/_cli/front.py) and prints
the result it gets back, a bundle's or a sweep's.

Imports nothing of the compiler up front: `acrl --help` builds the parsers, which name these
handlers, and must not load the compile path (tests/test_performance_cli.py).
"""

from __future__ import annotations

import os
import sys

from .output import EXIT_FAILED, EXIT_OK
from .output import print_json as _print_json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from .._review.diff import CheckResult
    from .front import BundleResult, SweepCheckResult, SweepResult


def run_compile(args: argparse.Namespace) -> int:
    # lazy: the front door brings the compile cache and hashlib; --help names this handler, never runs it
    from .front import CompileOptions, SweepResult, compile_to

    if args.check:
        return run_check(args)
    options = CompileOptions(strict=args.strict, target=args.target, overrides=tuple(args.overrides),
                             force=args.force, keep_going=args.keep_going, cache=not args.no_cache)
    result = compile_to(args.spec, args.output, options)
    if isinstance(result, SweepResult):
        return _print_sweep(result, as_json=args.json)
    return _print_bundle(result, as_json=args.json)


def _print_bundle(result: BundleResult, *, as_json: bool) -> int:
    if as_json:
        _print_json({"ok": True, "bundle": result.out, "bundle_hash": result.bundle_hash, "status": result.status,
                     "warnings": [data for _, data in result.warnings], "notes": list(result.notes)})
        return EXIT_OK
    for text, _ in result.warnings:
        print(text, file=sys.stderr)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"{result.status} {result.out}{os.sep}  bundle sha256:{result.bundle_hash}")
    return EXIT_OK


def _print_sweep(result: SweepResult, *, as_json: bool) -> int:
    # lazy: only a sweep's invalid points need redacting here (--help must not load it)
    from .._secrets import redact

    status = EXIT_FAILED if result.invalid else EXIT_OK
    if as_json:
        _print_json({"ok": not result.invalid, "sweep": result.out, "index": result.index,
                     "points": [{"name": r.point.name, "bundle": os.path.join(result.out, r.point.directory),
                                 "bundle_hash": r.bundle.bundle_hash if r.bundle else None, "status": written}
                                for r, written in result.written],
                     "invalid": [{"name": redact(r.point.name), "errors": [d.as_json() for d in r.diagnostics]}
                                 for r in result.invalid]})
        return status
    for text in result.warnings:
        print(text, file=sys.stderr)
    for r, written in result.written:
        assert r.bundle is not None
        print(f"{written} {os.path.join(result.out, r.point.directory)}{os.sep}  "
              f"bundle sha256:{r.bundle.bundle_hash}")
    if result.invalid:
        print("\n".join(d.format() for r in result.invalid for d in r.diagnostics), file=sys.stderr)
        print(f"{len(result.invalid)} of {result.points} sweep points are invalid; the other "
              f"{len(result.written)} were written", file=sys.stderr)
    print(f"sweep: {len(result.written)} bundles, index {result.index}")
    return status


def run_check(args: argparse.Namespace) -> int:
    # lazy: the front door and the review tools; --help names this handler, never runs it
    from .._review.diff import format_check
    from ..errors import UsageError
    from .front import CheckOptions, SweepCheckResult, check_to

    if args.force:
        raise UsageError("--check writes nothing, so --force has nothing to replace", hint="drop --force")
    result = check_to(args.spec, args.output, CheckOptions(strict=args.strict, target=args.target,
                                                           overrides=tuple(args.overrides)))
    if isinstance(result, SweepCheckResult):
        return _print_sweep_check(result, as_json=args.json)
    if args.json:
        _print_json({"ok": result.up_to_date, **result.as_json()})
    else:
        print(format_check(result))
    return EXIT_OK if result.up_to_date else EXIT_FAILED


def _print_sweep_check(result: SweepCheckResult, *, as_json: bool) -> int:
    # lazy: the review tools' formatting and shlex, only for --check of a sweep
    import shlex

    # lazy: as above
    from .._review.diff import format_check

    if as_json:
        _print_json({"ok": result.up_to_date, "index_up_to_date": result.index_up_to_date,
                     "points": [c.as_json() for c in result.checks]})
    else:
        for check in result.checks:  # the fix recompiles the whole sweep, not one point's directory
            fix = f" -o {shlex.quote(check.out)} --force", f" -o {shlex.quote(result.out)} --force"
            print(format_check(check).replace(*fix))
        print(f"{result.index} is {'up to date' if result.index_up_to_date else 'stale or missing'}")
    return EXIT_OK if result.up_to_date else EXIT_FAILED


def run_check_bundles(args: argparse.Namespace) -> int:
    # lazy: the front door, the review tools and glob; --help names this handler, never runs it
    import glob

    # lazy: as above
    from .._review.diff import format_check
    from ..errors import AcrlError, UsageError
    from .front import CheckOptions, SweepCheckResult, check_to

    specs = args.specs or sorted(glob.glob(os.path.join("specs", "*.toml")))
    if not specs:
        raise UsageError("acrl check-bundles: no SPEC given and no specs/*.toml here",
                         hint="name the specs, e.g. `acrl check-bundles experiments/*.toml --bundles-dir out`")
    results: list[dict[str, Any]] = []
    failed = 0
    for spec in specs:
        try:
            result: CheckResult | SweepCheckResult = check_to(spec, None, CheckOptions(strict=args.strict),
                                                              bundles_dir=args.bundles_dir, sweeps=False)
        except AcrlError as exc:
            failed += 1
            results.append({"spec": spec, "up_to_date": False, "error": exc.as_json()})
            if not args.json:
                print(exc, file=sys.stderr)
            continue
        assert not isinstance(result, SweepCheckResult)  # sweeps=False: a sweep raises
        failed += not result.up_to_date
        results.append(result.as_json())
        if not args.json:
            print(format_check(result))
    if args.json:
        _print_json({"ok": failed == 0, "results": results})
    elif failed:
        print(f"{failed} of {len(specs)} bundle(s) are not what their specs compile to", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK
