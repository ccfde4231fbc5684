"""`acrl-compile SPEC` (= `acrl compile`), its --check, and `acrl check-bundles`: each handler turns
its arguments into options, makes one call to the front door (compiler/_cli/front.py) and prints
the result it gets back, a bundle's or a sweep's.

Imports nothing of the compiler up front: `acrl --help` builds the parsers, which name these
handlers, and must not load the compile path (tests/test_performance_cli.py).
"""

from __future__ import annotations

import os
import sys

from .output import EXIT_FAILED, EXIT_OK, EXIT_USAGE, require_input
from .output import print_json as _print_json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from .._review.diff import CheckResult
    from .front import BundleResult, SweepCheckResult, SweepResult


def run_compile(args: argparse.Namespace) -> int:
    # lazy: the front door brings the compile cache and hashlib; --help names this handler, never runs it
    import time

    # lazy: as above
    from .front import CompileOptions, SweepResult, compile_to, preview

    started = time.perf_counter()
    listing = args.output == "-"
    if args.check:
        if args.print_file is not None or listing:
            raise _usage("--check compares the bundle in -o DIR with the spec; --print and -o - print one instead",
                         "drop --check to print, or give -o DIR to check")
        return run_check(args)
    require_input(args.spec, "spec")
    options = CompileOptions(strict=args.strict, target=args.target, overrides=tuple(args.overrides),
                             force=args.force, keep_going=args.keep_going, cache=not args.no_cache)
    if args.print_file is not None or listing:
        if args.print_file is not None and args.output is not None:
            raise _usage("--print writes nothing, so -o has nowhere to go", "drop -o, or drop --print to write")
        if args.force or args.keep_going:
            raise _usage(f"{'--print' if args.print_file is not None else '-o -'} writes nothing, so "
                         f"{'--force' if args.force else '--keep-going'} has nothing to do", "drop it")
        return _print_preview(preview(args.spec, options), args)
    result = compile_to(args.spec, args.output, options)
    if isinstance(result, SweepResult):
        return _print_sweep(result, args, time.perf_counter() - started)
    return _print_bundle(result, args, time.perf_counter() - started)


def _usage(message: str, hint: str) -> Exception:
    from ..errors import UsageError  # lazy: errors brings attrs; only a wrong command line needs it

    return UsageError(message, hint=hint)


def _stderr(text: str, args: argparse.Namespace) -> None:
    """``text`` (warnings, notes) on stderr, coloured where it goes to a terminal (colour.py)."""
    from .colour import enabled, paint  # lazy: only what is printed to stderr needs it

    print(paint(text) if enabled(sys.stderr, args.color) else text, file=sys.stderr)


def _print_notes(result: BundleResult, args: argparse.Namespace, seconds: float | None = None) -> None:
    """Warnings (unless --quiet), and with --verbose the compile's notes and how long it took."""
    if args.quiet:
        return
    for text, _ in result.warnings:
        _stderr(text, args)
    if args.verbose:
        for note in result.notes:
            _stderr(f"note: {note}", args)
        if seconds is not None:
            how = "from the compile cache" if result.cached else "compiled"
            _stderr(f"note: {how} in {seconds * 1000:.0f} ms", args)


def _print_bundle(result: BundleResult, args: argparse.Namespace, seconds: float) -> int:
    wanted = args.json or not args.quiet
    changed = _summary(result.previous, result.files) if result.previous is not None and wanted else None
    if args.json:
        _print_json({"ok": True, "bundle": result.out, "bundle_hash": result.bundle_hash, "status": result.status,
                     "warnings": [data for _, data in result.warnings], "notes": list(result.notes),
                     "changes": changed})
        return EXIT_OK
    _print_notes(result, args, seconds)
    if not args.quiet:
        print(f"{result.status} {result.out}{os.sep}  bundle sha256:{result.bundle_hash}")
        if changed is not None:
            print(_wrapped(changed))
    return EXIT_OK


def _summary(old: dict[str, bytes], new: dict[str, bytes]) -> str:
    from .._review.summary import summary  # lazy: the review tools, only when a bundle was replaced

    return summary(old, new)


def _wrapped(text: str) -> str:
    from .._review.summary import wrapped  # lazy: as _summary

    return wrapped(text)


def _print_preview(result: BundleResult, args: argparse.Namespace) -> int:
    """--print FILE: the file's bytes on stdout; -o -: one line per file (name, size, sha256)."""
    import hashlib  # lazy: only a listing hashes

    files = result.files
    if args.print_file is not None:
        name = args.print_file
        if name not in files:
            raise _usage(f"--print {name}: the bundle has no such file", "one of: " + ", ".join(sorted(files)))
        if args.json:
            _print_json({"ok": True, "file": name, "size": len(files[name]),
                         "sha256": hashlib.sha256(files[name]).hexdigest(), "text": files[name].decode("utf-8")})
        else:
            sys.stdout.flush()
            sys.stdout.buffer.write(files[name])
            sys.stdout.flush()
        _print_notes(result, args)
        return EXIT_OK
    rows = [(name, len(data), hashlib.sha256(data).hexdigest()) for name, data in sorted(files.items())]
    if args.json:
        _print_json({"ok": True, "bundle_hash": result.bundle_hash or None,
                     "files": [{"name": n, "size": size, "sha256": digest} for n, size, digest in rows],
                     "warnings": [data for _, data in result.warnings], "notes": list(result.notes)})
        return EXIT_OK
    _print_notes(result, args)
    width = max(len(n) for n, _, _ in rows)
    for name, size, digest in rows:
        print(f"{name:<{width}}  {size:>7}  sha256:{digest}")
    if result.bundle_hash:
        print(f"{'(bundle)':<{width}}  {'':>7}  sha256:{result.bundle_hash}")
    return EXIT_OK


SWEEP_SUMMARIES = 8  # a summary reads both bundles back (~30 ms): a sweep says what changed for this many points


def _print_sweep(result: SweepResult, args: argparse.Namespace, seconds: float) -> int:
    # lazy: only a sweep's invalid points need redacting here (--help must not load it)
    from .._secrets import redact

    status = EXIT_FAILED if result.invalid else EXIT_OK
    changes = {}  # point directory -> what changed in the bundle it replaced, for the first SWEEP_SUMMARIES
    replaced = [r for r, _ in result.written if r.bundle is not None and r.point.directory in result.previous]
    for r in replaced[:SWEEP_SUMMARIES if args.json or not args.quiet else 0]:
        assert r.bundle is not None
        changes[r.point.directory] = _summary(result.previous[r.point.directory], dict(r.bundle.files))
    if args.json:
        _print_json({"ok": not result.invalid, "sweep": result.out, "index": result.index,
                     "points": [{"name": r.point.name, "bundle": os.path.join(result.out, r.point.directory),
                                 "bundle_hash": r.bundle.bundle_hash if r.bundle else None, "status": written,
                                 "changes": changes.get(r.point.directory)}
                                for r, written in result.written],
                     "invalid": [{"name": redact(r.point.name), "errors": [d.as_json() for d in r.diagnostics]}
                                 for r in result.invalid], "notes": list(result.notes)})
        return status
    if not args.quiet:
        for text in result.warnings:
            _stderr(text, args)
    if args.verbose:
        for note in result.notes:
            _stderr(f"note: {note}", args)
        _stderr(f"note: compiled {result.points} points in {seconds * 1000:.0f} ms", args)
    if result.invalid:
        _stderr("\n".join(d.format() for r in result.invalid for d in r.diagnostics), args)
        _stderr(f"{len(result.invalid)} of {result.points} sweep points are invalid; the other "
                f"{len(result.written)} were written", args)
    if args.quiet:
        return status
    for r, written in result.written:
        assert r.bundle is not None
        print(f"{written} {os.path.join(result.out, r.point.directory)}{os.sep}  "
              f"bundle sha256:{r.bundle.bundle_hash}")
        if r.point.directory in changes:
            print(_wrapped(changes[r.point.directory]))
    if len(replaced) > SWEEP_SUMMARIES:
        print(f"  (what changed is said for the first {SWEEP_SUMMARIES} of the {len(replaced)} bundles replaced)")
    print(f"sweep: {len(result.written)} bundles, index {result.index}")
    return status


def run_check(args: argparse.Namespace) -> int:
    # lazy: the front door and the review tools; --help names this handler, never runs it
    from .._review.diff import format_check
    from ..errors import UsageError
    from .front import CheckOptions, SweepCheckResult, check_to

    if args.force:
        raise UsageError("--check writes nothing, so --force has nothing to replace", hint="drop --force")
    require_input(args.spec, "spec")
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
            fix = f" -o {shlex.quote(check.out)} ", f" -o {shlex.quote(result.out)} "
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
    failed = usage = 0
    for spec in specs:
        try:
            require_input(spec, "spec")
            result: CheckResult | SweepCheckResult = check_to(spec, None, CheckOptions(strict=args.strict),
                                                              bundles_dir=args.bundles_dir, sweeps=False)
        except AcrlError as exc:
            if exc.exit_code == EXIT_USAGE:  # a spec named that is not there: the command line is wrong, no bundle
                usage += 1                   # was compared, so none is counted as stale
            else:
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
        _print_json({"ok": failed == 0 and not usage, "results": results})
    elif failed:
        print(f"{failed} of {len(specs)} bundle(s) are not what their specs compile to", file=sys.stderr)
    return EXIT_USAGE if usage else EXIT_FAILED if failed else EXIT_OK
