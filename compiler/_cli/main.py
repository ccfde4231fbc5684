"""The command line: thin. Each command calls one library function; one handler turns errors
into a message on stderr and an exit status (0 ok, 1 invalid spec or check failed, 2 usage).

Nothing is imported up front but os and sys, so that `acrl --help` stays as fast as the
interpreter allows: argparse is imported when a parser is built (not at all when the help printed
last time for the same words and width is kept: compiler/_fast/cache.py), and the compiler, and even
json, pathlib and typing, by the command that needs them (docs/performance.md has the numbers).
"""

from __future__ import annotations

import os
import sys

from .._version import __version__
from .output import EXIT_FAILED, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from .output import print_json as _print_json

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any

    from .._fast import cache as _cache
    from .._pipeline.parse import SpecSource

def _HelpFormatter(prog: str) -> argparse.HelpFormatter:
    """argparse's formatter, given the width argparse would compute itself: argparse finds it with
    shutil.get_terminal_size, and importing shutil (with zlib, bz2 and lzma) is ~3 ms of `acrl --help`."""
    import argparse

    return argparse.HelpFormatter(prog, width=_terminal_columns() - 2)


def _terminal_columns() -> int:
    """shutil.get_terminal_size().columns: $COLUMNS, else the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        stdout = sys.__stdout__
        try:
            columns = os.get_terminal_size(stdout.fileno()).columns if stdout is not None else 0
        except (AttributeError, ValueError, OSError):  # closed, detached or not a terminal
            columns = 0
    return columns or 80


def _compile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="the experiment spec (TOML; it may extend a base spec, and a [sweep] table "
                        "compiles to a bundle per point)")
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="bundle directory (default: bundles/<exp_id>); for a sweep, the directory of its "
                        "point bundles and sweep.json")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")
    parser.add_argument("--force", action="store_true", help="replace an existing, different bundle")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    parser.add_argument("--no-cache", action="store_true",
                        help="compile even if this spec's compile is cached (and do not cache it)")
    parser.add_argument("--check", action="store_true",
                        help="write no bundle; exit 1, with the differences, when DIR is not exactly what SPEC "
                        "compiles to (a stale, hand-edited or missing bundle)")
    parser.add_argument("--target", choices=("ray", "kuberay"), default="ray",
                        help="ray (default): train.sh submits to a Ray cluster; kuberay: also write rayjob.yaml, "
                        "a KubeRay RayJob ([kuberay] image and secret)")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE",
                        help="set a spec key, VALUE written as in TOML (64, '\"text\"', [1, 2], {a = 1}); "
                        "repeatable, applied in order on top of the spec and its bases")
    parser.add_argument("--keep-going", action="store_true",
                        help="sweep: write the bundles of the valid points even when some are invalid "
                        "(the exit status is still 1)")
    parser.set_defaults(run=_run_compile)


def _run_compile(args: argparse.Namespace) -> int:
    from .._fast import cache as _cache
    from .._pipeline.bundle import read_file, write_bundle

    if args.check:
        return _run_check(args)
    cached = not args.no_cache and args.target == "ray"  # the cache holds default-target bundles only
    raw = read_file(args.spec)  # once: the spec may be a pipe (/dev/stdin, <(...)); None: the compile says why
    overrides = tuple(args.overrides)
    entry = _cache.lookup(args.spec, raw, strict=args.strict, overrides=overrides) \
        if cached and raw is not None else None
    if entry is None:
        compiled = _compile_and_keep(args.spec, raw, strict=args.strict, keep=cached, target=args.target,
                                     overrides=overrides, sweep=args)
        if not isinstance(compiled, _cache.Entry):
            from .sweep import run_sweep

            return run_sweep(args, compiled)
        entry = compiled
    out = args.output.rstrip(os.sep) or os.sep if args.output is not None else os.path.join("bundles", entry.exp_id)
    status = write_bundle(out, entry.files, force=args.force)
    if args.json:
        _print_json({"ok": True, "bundle": out, "bundle_hash": entry.bundle_hash, "status": status,
                     "warnings": [data for _, data in entry.warnings], "notes": list(entry.notes)})
        return EXIT_OK
    for text, _ in entry.warnings:
        print(text, file=sys.stderr)
    for note in entry.notes:
        print(f"note: {note}", file=sys.stderr)
    print(f"{status} {out}{os.sep}  bundle sha256:{entry.bundle_hash}")
    return EXIT_OK


def _compile_and_keep(spec: str, raw: bytes | None, *, strict: bool, keep: bool, target: str = "ray",
                      overrides: tuple[str, ...] = (), sweep: object = None) -> _cache.Entry | SpecSource:
    """Compile ``spec`` (its bytes ``raw`` if they were read) with the ``--set`` ``overrides`` and,
    with ``keep``, put the result in the compile cache. A spec with a [sweep] table: its parsed
    source when ``sweep`` is given (the caller compiles the sweep), else the SweepSpecError."""
    import time
    from pathlib import Path

    from .._fast import cache as _cache
    from .._pipeline import compile as _compile

    started = time.time_ns()
    kind: _compile.Target = "kuberay" if target == "kuberay" else "ray"
    try:
        bundle = _compile.compile_spec(Path(spec), strict=strict, target=kind, data=raw, overrides=overrides)
    except _compile.SweepSpecError as exc:
        if sweep is None:
            raise
        return exc.source
    inputs = _compile.external_inputs(bundle, Path(spec).parent) if keep else None
    signatures = [(os.path.abspath(p), _cache.signature(os.fspath(p))) for p in inputs or ()]
    entry = _cache.Entry(bundle.exp_id, bundle.bundle_hash, bundle.files,
                         [(w.format(), w.as_json()) for w in bundle.warnings], bundle.notes, signatures)
    if inputs is not None and _cache.UNKNOWN not in (sig for _, sig in signatures):
        _cache.store(spec, bundle.spec_sha256, entry, strict=strict, started_ns=started, overrides=overrides)
    return entry


def _handle(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return run(args)
    except BrokenPipeError:  # the reader went away (`acrl models | head`): not an error of ours
        _stdout_to_devnull()
        return EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from ..errors import AcrlError  # imported only when needed: it brings attrs

        if isinstance(exc, AcrlError):
            if getattr(args, "json", False):
                try:
                    _print_json({"ok": False, "error": exc.as_json()})
                except BrokenPipeError:  # `--json | head`: the error's exit status still tells
                    _stdout_to_devnull()
            else:
                print(exc, file=sys.stderr)
            return exc.exit_code
        if os.environ.get("ACRL_DEBUG"):  # a bug in acrl, not in the input: say so, without a traceback
            raise
        from .._secrets import redact  # a bug's message may quote an input that holds a secret

        print(f"acrl: internal error: {type(exc).__name__}: {redact(str(exc))}\n"
              "  This is a bug in acrl; rerun with ACRL_DEBUG=1 for a traceback and report it.",
              file=sys.stderr)
        return EXIT_INTERNAL


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null once its reader is gone, so that the interpreter's last flush does not
    fail again (and print "Exception ignored ... BrokenPipeError")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _help_words(argv: Sequence[str] | None) -> list[str] | None:
    """The command line if all it asks for is help (command names, then -h or --help), else None."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[-1] in ("-h", "--help") and all(w.replace("-", "").isalnum() and not w.startswith("-")
                                                        for w in words[:-1]):
        return words
    return None


def _print_kept_help(prog: str, argv: Sequence[str] | None) -> bool:
    """Print the help argparse printed last time for this command line, if it is kept and current
    (compiler/_fast/cache.py); then no parser need be built."""
    words = _help_words(argv)
    if words is None:
        return False
    from .._fast.cache import help_text

    text = help_text(prog, words, _terminal_columns())
    if text is None:
        return False
    sys.stdout.write(text)
    return True


def _print_help_and_keep_it(parser: argparse.ArgumentParser, words: list[str], key: str) -> None:
    """argparse's help for ``words`` on stdout, as parse_args prints it, kept for next time. Returns
    (having printed nothing) when argparse does not take the words as a request for help, e.g.
    ``acrl explain BUNDLE --help``, where --help is the KEY argument."""
    import io

    from .._fast.cache import keep_help

    buffer = io.StringIO()
    real, sys.stdout = sys.stdout, buffer
    try:
        parser.parse_args(words)
        return
    except SystemExit as exc:
        code = exc.code
    finally:
        sys.stdout = real
    text = buffer.getvalue()
    sys.stdout.write(text)
    if code == 0 and text:
        keep_help(key, words, _terminal_columns(), text)
    raise SystemExit(code)


def _main(parser: argparse.ArgumentParser, argv: Sequence[str] | None, help_key: str | None = None) -> int:
    """Parse and run; ``help_key`` names this command line's kept help (default: the program's name)."""
    words = _help_words(argv)
    if words is not None:
        _print_help_and_keep_it(parser, words, help_key or parser.prog)
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    return _handle(run, args)


def compile_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``acrl-compile``."""
    if _print_kept_help("acrl-compile", argv):
        raise SystemExit(0)
    import argparse

    parser = argparse.ArgumentParser(
        prog="acrl-compile", description="Compile an experiment spec into a run bundle.",
        formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"acrl {__version__}")
    _compile_arguments(parser)
    return _main(parser, argv)


def acrl_main(argv: Sequence[str] | None = None, *,
              more_commands: Callable[[argparse._SubParsersAction[Any]], None] | None = None) -> int:
    """Entry point of ``acrl``'s compiler commands. ``more_commands`` adds subcommands that live
    outside the compiler (the executor's, from acrl.runtime: the compiler never imports it)."""
    # The help depends on the commands added: `python -m acrl.compiler._cli.main --help` keeps its own.
    help_key = "acrl" if more_commands is None else f"acrl+{more_commands.__module__}"
    if _print_kept_help(help_key, argv):
        raise SystemExit(0)
    import argparse

    parser = argparse.ArgumentParser(prog="acrl", description="Compile and run slime RL bundles "
                                     "for agents on Amazon Bedrock AgentCore Runtime.", formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"acrl {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    _compile_arguments(commands.add_parser("compile", help="compile a spec into a bundle (= acrl-compile)",
                                           description="Compile an experiment spec into a run bundle.",
                                           formatter_class=_HelpFormatter))
    models = commands.add_parser("models", help="list the built-in model catalog, or show one model's MODEL_ARGS",
                                 description="The built-in catalog of model architectures (args_source = "
                                 "\"catalog\"), written from the models' published config.json.",
                                 formatter_class=_HelpFormatter)
    models_commands = models.add_subparsers(title="commands", metavar="COMMAND")
    show = models_commands.add_parser("show", help="MODEL_ARGS of one model and the config.json field of each",
                                      formatter_class=_HelpFormatter)
    show.add_argument("name", help="a catalog name, e.g. qwen2.5-3B")
    for p in (models, show):
        p.add_argument("--json", action="store_true", help="print JSON on stdout")
    models.set_defaults(run=_run_models, name=None)
    show.set_defaults(run=_run_models)
    schema = commands.add_parser("schema", help="print the spec's JSON Schema, for TOML editors (docs/editor.md)",
                                 description="The JSON Schema (draft 2020-12) of an experiment spec, generated from "
                                 "acrl's spec classes: types, defaults, enums, ranges and descriptions.",
                                 formatter_class=_HelpFormatter)
    schema.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead of stdout")
    schema.set_defaults(run=_run_schema)
    explain = commands.add_parser("explain", help="where each value and slime flag of a spec or bundle came from",
                                  description="For every value of the resolved spec and every slime flag of train.sh: "
                                  "its origin (spec file and line, default, model-args source, derived by the "
                                  "compiler) and its documentation.", formatter_class=_HelpFormatter)
    explain.add_argument("target", metavar="SPEC|BUNDLE", help="a spec file, or a bundle directory")
    explain.add_argument("key", nargs=argparse.REMAINDER, metavar="KEY",
                         help="only this: a spec key (rollout.batch_size), a table (rollout) or a slime flag "
                         "(--global-batch-size)")
    explain.add_argument("--json", action="store_true", help="print JSON on stdout")
    explain.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE",
                         help="explain the spec with this key set, as acrl-compile --set does")
    explain.set_defaults(run=_run_explain, print_help=explain.print_help)
    _review_commands(commands)
    _import_commands(commands)
    if more_commands is not None:
        more_commands(commands)
    return _main(parser, argv, help_key)


def _import_commands(commands: Any) -> None:
    """`acrl import slime-runner|train-sh FILE -o SPEC` (docs/migration.md)."""
    imports = commands.add_parser("import", help="convert a SlimeRunner YAML or a hand-written train.sh into a spec",
                                  description="Write a spec from what you launch slime with today, report what "
                                  "did not carry over as it was, and compile the spec in memory to show whether it "
                                  "is valid (docs/migration.md).", formatter_class=_HelpFormatter)
    kinds = imports.add_subparsers(title="sources", metavar="SOURCE")
    runner = kinds.add_parser("slime-runner", help="a YAML file of SlimeRunner keyword arguments",
                              description="Convert the YAML file SlimeRunner.from_yaml reads into a spec whose "
                              "train.sh passes slime the same flags and values.", formatter_class=_HelpFormatter)
    runner.add_argument("file", metavar="CONFIG.yaml", help="the SlimeRunner YAML")
    runner.add_argument("--num-rollout", type=int, metavar="N",
                        help="the num_rollout SlimeRunner.run() was called with (default: the YAML's, if any)")
    script = kinds.add_parser("train-sh", help="a hand-written launch script of slime's example shape",
                              description="Map every flag of a train.sh (ray job submit ... -- python3 train.py "
                              "FLAGS) onto spec keys, put the rest in [extra], and report what cannot be resolved "
                              "(unset variables, command substitutions) instead of guessing.",
                              formatter_class=_HelpFormatter)
    script.add_argument("file", metavar="FILE", help="the launch script")
    for p in (runner, script):
        p.add_argument("-o", "--output", metavar="SPEC", required=True, help="the spec file to write")
        p.add_argument("--force", action="store_true", help="replace an existing file")
        p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    runner.set_defaults(run=_run_import, kind="slime-runner")
    script.set_defaults(run=_run_import, kind="train-sh", num_rollout=None)


def _run_import(args: argparse.Namespace) -> int:
    from .._importers.base import printable, run_import

    options = {"num_rollout": args.num_rollout} if args.kind == "slime-runner" else {}
    report = run_import(args.kind, args.file, args.output, force=args.force, **options)
    if args.json:
        _print_json(report.as_json())
    else:
        for note in report.notes:  # a script's text may hold terminal escapes: shown, not obeyed
            print(f"note: {printable(note.format())}", file=sys.stderr)
        if report.compiled:
            print(f"wrote {args.output}: it compiles (acrl-compile {args.output})")
        else:
            print(report.problems, file=sys.stderr)
            print(f"wrote {args.output}, but it does not compile yet: fix what is listed above", file=sys.stderr)
    return EXIT_OK if report.compiled else EXIT_FAILED


def _review_commands(commands: Any) -> None:
    """`acrl diff`, `acrl verify` and `acrl check-bundles` (docs/review.md)."""
    diff = commands.add_parser("diff", help="semantic diff of two bundles or specs (exit 1 when they differ)",
                               description="What differs between A and B, flag by flag: slime flags by group, model "
                               "args, custom config, the Ray job's environment, launch settings, resolved spec and "
                               "derived quantities. A and B are bundle directories or specs (compiled in memory). "
                               "Exit 0 when equivalent, 1 when different, 2 on trouble, like diff(1).",
                               formatter_class=_HelpFormatter)
    diff.add_argument("a", metavar="A", help="a bundle directory or a spec (.toml)")
    diff.add_argument("b", metavar="B", help="a bundle directory or a spec (.toml)")
    diff.add_argument("--format", choices=("text", "markdown", "json"), default="text",
                      help="text (default), markdown (for a pull request) or json")
    diff.set_defaults(run=_run_diff)
    verify = commands.add_parser("verify", help="check a bundle's files against its manifest (exit 1 if modified)",
                                 description="Recompute the sha256 of every file of BUNDLE and its bundle hash, and "
                                 "compare them with manifest.json; check the manifest's derived section against "
                                 "spec.toml. Exit 0 when intact, 1 when a file was added, removed, modified or is not "
                                 "a regular file (links are not followed), or the hash is not --expect-hash, 2 when "
                                 "the bundle cannot be read. Intact means the files match the manifest: whoever can "
                                 "edit a file can rewrite the manifest too, which only --expect-hash (a hash recorded "
                                 "elsewhere) or `acrl-compile --check` against the spec catches. The manifest's "
                                 "compile warnings are informational and not checked.",
                                 formatter_class=_HelpFormatter)
    verify.add_argument("bundle", metavar="BUNDLE", help="a bundle directory")
    verify.add_argument("--expect-hash", metavar="SHA256", help="the bundle hash the files must have (e.g. one "
                        "recorded in a pull request or by CI; `sha256:` prefix allowed): exit 1 when it differs")
    verify.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    verify.set_defaults(run=_run_verify)
    check = commands.add_parser("check-bundles", help="check that committed bundles are what their specs compile to",
                                description="For each SPEC, `acrl-compile --check SPEC -o DIR/<exp_id>`: exit 1 when "
                                "a bundle is stale, hand-edited or missing. Writes nothing. The pre-commit hook "
                                "acrl-check runs this (docs/review.md).", formatter_class=_HelpFormatter)
    check.add_argument("specs", nargs="*", metavar="SPEC", help="specs to check (default: specs/*.toml)")
    check.add_argument("--bundles-dir", metavar="DIR", default="bundles",
                       help="where the bundles are, one per exp_id (default: bundles)")
    check.add_argument("--strict", action="store_true", help="treat warnings as errors")
    check.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    check.set_defaults(run=_run_check_bundles)


def _run_diff(args: argparse.Namespace) -> int:
    from .._review import diff as _diff
    from ..errors import AcrlError

    args.json = args.format == "json"  # errors as JSON too
    try:
        result = _diff.diff_paths(args.a, args.b)
    except AcrlError as exc:  # as diff(1): 2 is trouble (an invalid spec included), 1 is "different"
        raise exc.evolve(exit_code=EXIT_USAGE) from exc.__cause__
    if args.format == "json":
        _print_json(result.as_json())
    elif args.format == "markdown":
        sys.stdout.write(_diff.format_markdown(result))
    else:
        print(_diff.format_text(result))
    return EXIT_OK if result.equivalent else EXIT_FAILED


def _run_verify(args: argparse.Namespace) -> int:
    from .._review.verify import verify_bundle

    result = verify_bundle(args.bundle, check_derived=True, expect_hash=args.expect_hash)
    if args.json:
        _print_json(result.as_json())
    else:
        print(result.format())
    return EXIT_OK if result.intact else EXIT_FAILED


def _check(spec: str, output: str | None, *, strict: bool, bundles_dir: str = "bundles", target: str = "ray",
           overrides: tuple[str, ...] = ()) -> Any:
    """--check: compile ``spec`` afresh (the compile cache is neither read nor written) and compare
    it with its bundle directory (default: ``bundles_dir/<exp_id>``). Writes nothing, not even a
    compiled template into the template cache."""
    from .._fast import template_cache as _template_cache
    from .._pipeline.bundle import read_file
    from .._pipeline.parse import SpecSource
    from .._review.diff import check_bundle

    _template_cache.WRITABLE = False
    try:
        entry = _compile_and_keep(spec, read_file(spec), strict=strict, keep=False, target=target,
                                  overrides=overrides)
    finally:
        _template_cache.WRITABLE = True
    assert not isinstance(entry, SpecSource)  # without sweep=, a sweep raises
    out = output.rstrip(os.sep) or os.sep if output is not None else os.path.join(bundles_dir, entry.exp_id)
    return check_bundle(spec, entry.files, out)


def _run_check(args: argparse.Namespace) -> int:
    from .._review.diff import format_check
    from ..errors import UsageError

    if args.force:
        raise UsageError("--check writes nothing, so --force has nothing to replace", hint="drop --force")
    from .._pipeline.compile import SweepSpecError

    try:
        result = _check(args.spec, args.output, strict=args.strict, target=args.target,
                        overrides=tuple(args.overrides))
    except SweepSpecError as exc:
        from .sweep import check_sweep

        return check_sweep(args, exc.source)
    if args.json:
        _print_json({"ok": result.up_to_date, **result.as_json()})
    else:
        print(format_check(result))
    return EXIT_OK if result.up_to_date else EXIT_FAILED


def _run_check_bundles(args: argparse.Namespace) -> int:
    import glob

    from .._review.diff import format_check
    from ..errors import AcrlError, UsageError

    specs = args.specs or sorted(glob.glob(os.path.join("specs", "*.toml")))
    if not specs:
        raise UsageError("acrl check-bundles: no SPEC given and no specs/*.toml here",
                         hint="name the specs, e.g. `acrl check-bundles experiments/*.toml --bundles-dir out`")
    results: list[dict[str, Any]] = []
    failed = 0
    for spec in specs:
        try:
            result = _check(spec, None, strict=args.strict, bundles_dir=args.bundles_dir)
        except AcrlError as exc:
            failed += 1
            results.append({"spec": spec, "up_to_date": False, "error": exc.as_json()})
            if not args.json:
                print(exc, file=sys.stderr)
            continue
        failed += not result.up_to_date
        results.append(result.as_json())
        if not args.json:
            print(format_check(result))
    if args.json:
        _print_json({"ok": failed == 0, "results": results})
    elif failed:
        print(f"{failed} of {len(specs)} bundle(s) are not what their specs compile to", file=sys.stderr)
    return EXIT_FAILED if failed else EXIT_OK


def _run_models(args: argparse.Namespace) -> int:
    from .._pipeline.model_args.catalog import CATALOG, entry, lookup_error
    from .._spec.flags import parse_flags
    from ..errors import AcrlError

    if args.name is None:
        rows = [{"name": e.name, "architecture": e.hf_fields["architectures"][0], "source": e.source,
                 "layers": e.hf_fields["num_hidden_layers"], "hidden_size": e.hf_fields["hidden_size"],
                 "heads": e.hf_fields["num_attention_heads"],
                 "kv_heads": e.hf_fields.get("num_key_value_heads", e.hf_fields["num_attention_heads"]),
                 "experts": e.hf_fields.get("num_experts")} for e in CATALOG.values()]
        if args.json:
            _print_json(rows)
            return EXIT_OK
        print(f"{'name':<24} {'architecture':<22} {'layers':>6} {'hidden':>6} {'heads':>9} {'experts':>7}  source")
        for r in rows:
            heads = f"{r['heads']}/{r['kv_heads']}"
            print(f"{r['name']:<24} {r['architecture']:<22} {r['layers']:>6} {r['hidden_size']:>6} {heads:>9} "
                  f"{r['experts'] or '-':>7}  {r['source']}")
        return EXIT_OK
    found = entry(args.name)
    if found is None:
        raise AcrlError(lookup_error(args.name))
    derived = found.derived()
    lines = []
    for flag, values in parse_flags(derived.args).items():
        field = derived.source(flag)
        key = (field or "").split(" ")[0].split(".")[0]
        lines.append({"flag": flag, "values": values, "hf_field": field,
                      **({"hf_value": found.hf_fields[key]} if key in found.hf_fields else {})})
    if args.json:
        _print_json({"name": found.name, "source": found.source, "model_args": list(derived.args),
                     "fields": lines, "slime_differences": list(getattr(found, "slime_differences", ()) or ())})
        return EXIT_OK
    print(f"# {found.name}: from {found.source}'s config.json")
    for line in lines:
        arg = " ".join([str(line["flag"]), *line["values"]])
        origin = str(line["hf_field"] or "")
        if "hf_value" in line:
            origin += f" = {_json_value(line['hf_value'])}"
        print(f"{arg:<44} {origin}".rstrip())
    for difference in getattr(found, "slime_differences", ()) or ():
        print(f"# differs from slime's script: {difference}")
    return EXIT_OK


def _json_value(value: object) -> str:
    import json

    return json.dumps(value)


def _run_schema(args: argparse.Namespace) -> int:
    from .._spec.schema import schema_json

    text = schema_json()
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    from pathlib import Path

    from ..errors import AcrlError

    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise AcrlError(f"{args.output}: cannot write the schema: {exc.strerror or exc}",
                        hint="choose a writable path with -o") from None
    return EXIT_OK


def _set_options(words: list[str]) -> tuple[list[str], list[str]]:
    """``--set KEY=VALUE`` and ``--set=KEY=VALUE`` taken out of explain's words (argparse hands them
    over with KEY, which may itself start with dashes)."""
    from ..errors import UsageError

    rest, overrides = [], []
    i = 0
    while i < len(words):
        if words[i] == "--set":
            if i + 1 == len(words):
                raise UsageError("acrl explain: --set needs KEY=VALUE", hint="--set rollout.batch_size=64")
            overrides.append(words[i + 1])
            i += 2
            continue
        if words[i].startswith("--set="):
            overrides.append(words[i][len("--set="):])
        else:
            rest.append(words[i])
        i += 1
    return rest, overrides


def _run_explain(args: argparse.Namespace) -> int:
    # KEY may be a flag (--lr), so argparse hands over everything after SPEC|BUNDLE; --json may be among it.
    if args.key[:1] in (["-h"], ["--help"]):  # `acrl explain SPEC --help`: help, not a key named --help
        args.print_help()
        return EXIT_OK
    words = [w for w in args.key if w != "--json"]
    args.json = args.json or len(words) < len(args.key)
    words, overrides = _set_options(words)
    words = words[1:] if words[:1] == ["--"] else words
    from pathlib import Path

    from .._review.explain import explain_path
    from ..errors import UsageError

    if len(words) > 1:
        raise UsageError(f"acrl explain: one KEY at a time, got {len(words)}: {' '.join(words)}",
                         hint="run acrl explain once per key, or without KEY for everything")
    explanation = explain_path(Path(args.target), [*args.overrides, *overrides])
    if words:
        explanation = explanation.select(words[0])
    if args.json:
        _print_json(explanation.as_json())
    else:
        sys.stdout.write(explanation.format())
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(acrl_main())
