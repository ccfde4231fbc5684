"""The compiler's other `acrl` commands: import, diff, verify, models, schema and explain. Each handler
makes one library call and prints its result.

Imports nothing of the compiler up front: `acrl --help` builds the parsers, which name these
handlers, and must not load what they run (tests/test_performance_cli.py); each handler imports
what it calls.
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

    from .._pipeline.model_args.catalog import CatalogEntry


def run_import(args: argparse.Namespace) -> int:
    # lazy: --help names this handler and must not load what it runs (tests/test_performance_cli.py)
    from .._importers.base import printable
    from .._importers.base import run_import as convert

    require_input(args.file, "SlimeRunner YAML" if args.kind == "slime-runner" else "launch script")
    options = {"num_rollout": args.num_rollout} if args.kind == "slime-runner" else {"env": args.env}
    options["target_commit"] = args.target_commit
    report = convert(args.kind, args.file, args.output, force=args.force, **options)
    if args.json:
        _print_json(report.as_json())
    else:
        for note in report.notes:  # a script's text may hold terminal escapes: shown, not obeyed
            print(f"note: {printable(note.format())}", file=sys.stderr)
        if report.compiled:
            print(f"wrote {args.output}: it compiles (acrl-compile {args.output})")
        else:
            from .colour import enabled, paint  # lazy: only problems printed need it

            print(paint(report.problems) if enabled(sys.stderr) else report.problems, file=sys.stderr)
            print(f"wrote {args.output}, but it does not compile yet: fix what is listed above", file=sys.stderr)
    return EXIT_OK if report.compiled else EXIT_FAILED


def run_diff(args: argparse.Namespace) -> int:
    # lazy: --help names this handler and must not load what it runs (tests/test_performance_cli.py)
    from .._review import diff as _diff
    from ..errors import AcrlError

    args.json = args.format == "json"  # errors as JSON too
    check_set_targets(args)
    try:
        result = _diff.diff_paths(args.a, args.b, overrides=args.overrides)
    except AcrlError as exc:  # as diff(1): 2 is trouble (an invalid spec included), 1 is "different"
        raise exc.evolve(exit_code=EXIT_USAGE) from exc.__cause__
    if args.format == "json":
        _print_json(result.as_json())
    elif args.format == "markdown":
        sys.stdout.write(_diff.format_markdown(result))
    else:
        print(_diff.format_text(result))
    return EXIT_OK if result.equivalent else EXIT_FAILED


def check_set_targets(args: argparse.Namespace) -> None:
    """`acrl diff --set`: a UsageError when neither A nor B is a spec (.toml) the overrides could apply to."""
    from ..errors import UsageError  # lazy: only a wrong command line needs it

    if args.overrides and not any(path.endswith(".toml") and not os.path.isdir(path) for path in (args.a, args.b)):
        raise UsageError("acrl diff: --set applies to a spec (.toml), and neither A nor B is one",
                         hint="give a spec on one side, e.g. acrl diff bundles/exp spec.toml --set KEY=VALUE")


def run_verify(args: argparse.Namespace) -> int:
    # lazy: --help names this handler and must not load what it runs (tests/test_performance_cli.py)
    from .._review.verify import verify_bundle

    result = verify_bundle(args.bundle, check_derived=True, expect_hash=args.expect_hash)
    if args.json:
        _print_json(result.as_json())
    else:
        print(result.format())
    return EXIT_OK if result.intact else EXIT_FAILED


def run_models(args: argparse.Namespace) -> int:
    # lazy: --help names this handler and must not load what it runs (tests/test_performance_cli.py)
    from .._pipeline.model_args.catalog import CATALOG, entry, lookup_error
    from .._spec.flags import parse_flags
    from ..errors import AcrlError

    if args.name is None:
        rows = [_catalog_row(e, parse_flags) for e in CATALOG.values()]
        if args.json:
            _print_json(rows)
            return EXIT_OK
        print(f"{'name':<24} {'architecture':<22} {'layers':>6} {'hidden':>6} {'heads':>9} {'experts':>7}  source")
        for r in rows:
            heads = f"{r['heads']}/{r['kv_heads']}"
            print(f"{r['name']:<24} {r['architecture']:<22} {r['layers'] or '-':>6} {r['hidden_size'] or '-':>6} "
                  f"{heads:>9} "
                  f"{r['experts'] or '-':>7}  {r['source']}")
        return EXIT_OK
    found = entry(args.name)
    if found is None:  # a name the command line got wrong: a usage error
        raise AcrlError(lookup_error(args.name), exit_code=EXIT_USAGE)
    if found.script_args is not None:
        return _print_script_entry(found, args.json)
    derived = found.derived()
    lines = []
    for flag, values in parse_flags(derived.args).items():
        field = derived.source(flag)
        key = (field or "").split(" ")[0].split(".")[0]
        lines.append({"flag": flag, "values": values, "hf_field": field,
                      **({"hf_value": found.hf_fields[key]} if key in found.hf_fields else {})})
    if args.json:
        _print_json({"name": found.name, "source": found.source, "model_args": list(found.model_args()),
                     "fields": lines, "slime_differences": list(getattr(found, "slime_differences", ()) or ())})
        return EXIT_OK
    print(f"# {found.name}: from {found.source}'s config.json")
    for line in lines:
        arg = " ".join([str(line["flag"]), *line["values"]])
        origin = str(line["hf_field"] or "")
        if "hf_value" in line:
            origin += f" = {_json_value(line['hf_value'])}"
        print(f"{arg:<44} {origin}".rstrip())
    for flag, values in parse_flags(found.settings).items():
        print(f"{' '.join([flag, *values]):<44} slime's script (a performance setting, not in config.json)")
    for difference in getattr(found, "slime_differences", ()) or ():
        print(f"# differs from slime's script: {difference}")
    return EXIT_OK


def _catalog_row(e: CatalogEntry, parse_flags: Any) -> dict[str, Any]:
    """One row of `acrl models`: from the published config.json fields, or from the MODEL_ARGS of slime's script."""
    if e.script_args is None:
        f = e.hf_fields
        return {"name": e.name, "architecture": f["architectures"][0], "source": e.source,
                "layers": f["num_hidden_layers"], "hidden_size": f["hidden_size"], "heads": f["num_attention_heads"],
                "kv_heads": f.get("num_key_value_heads", f["num_attention_heads"]), "experts": f.get("num_experts")}
    flags = parse_flags(e.script_args)

    def number(flag: str) -> int | None:
        values = flags.get(flag) or []
        return int(values[0]) if values and values[0].isdigit() else None

    heads = number("--num-attention-heads")
    return {"name": e.name, "architecture": "(slime's script)", "source": e.source, "layers": number("--num-layers"),
            "hidden_size": number("--hidden-size"), "heads": heads,
            "kv_heads": number("--num-query-groups") if "--group-query-attention" in flags else heads,
            "experts": number("--num-experts")}


def _print_script_entry(found: CatalogEntry, as_json: bool) -> int:
    """`acrl models NAME` for an entry whose MODEL_ARGS are slime's script's (no config.json translation)."""
    if as_json:
        _print_json({"name": found.name, "source": found.source, "model_args": list(found.model_args()),
                     "fields": [], "slime_differences": list(found.slime_differences)})
        return EXIT_OK
    print(f"# {found.name}: MODEL_ARGS of {found.source} (an architecture acrl does not translate from config.json)")
    print(" ".join(found.model_args()))
    return EXIT_OK


def _json_value(value: object) -> str:
    # lazy: --help names this handler and must not load what it runs (tests/test_performance_cli.py)
    import json

    return json.dumps(value)


def run_schema(args: argparse.Namespace) -> int:
    # lazy: --help names this handler and must not load what it runs (tests/test_performance_cli.py)
    from .._spec.schema import schema_json

    text = schema_json()
    if args.output is None:
        sys.stdout.write(text)
        return EXIT_OK
    # lazy: as above
    from pathlib import Path

    # lazy: as above
    from ..errors import AcrlError

    if os.path.isdir(args.output):
        raise AcrlError(f"{args.output}: is a directory", hint="give the file to write with -o, e.g. -o "
                        "acrl-spec.schema.json", exit_code=EXIT_USAGE)
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise AcrlError(f"{args.output}: cannot write the schema: {exc.strerror or exc}",
                        hint="choose a writable path with -o") from None
    return EXIT_OK


def _set_options(words: list[str]) -> tuple[list[str], list[str]]:
    """``--set KEY=VALUE`` and ``--set=KEY=VALUE`` taken out of explain's words (argparse hands them
    over with KEY, which may itself start with dashes)."""
    # lazy: --help names this handler and must not load what it runs (tests/test_performance_cli.py)
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


def run_explain(args: argparse.Namespace) -> int:
    # KEY may be a flag (--lr), so argparse hands over everything after SPEC|BUNDLE; --json may be among it.
    if args.key[:1] in (["-h"], ["--help"]):  # `acrl explain SPEC --help`: help, not a key named --help
        args.print_help()
        return EXIT_OK
    words = [w for w in args.key if w != "--json"]
    args.json = args.json or len(words) < len(args.key)
    words, overrides = _set_options(words)
    words = words[1:] if words[:1] == ["--"] else words
    # lazy: --help names this handler and must not load what it runs (tests/test_performance_cli.py)
    from pathlib import Path

    # lazy: as above
    from .._review.explain import explain_path
    from ..errors import UsageError

    if len(words) > 1:
        raise UsageError(f"acrl explain: one KEY at a time, got {len(words)}: {' '.join(words)}",
                         hint="run acrl explain once per key, or without KEY for everything")
    require_input(args.target, "spec file or bundle directory", directory_ok=True)
    explanation = explain_path(Path(args.target), [*args.overrides, *overrides])
    if words:
        explanation = explanation.select(words[0])
    if args.json:
        _print_json(explanation.as_json())
    else:
        sys.stdout.write(explanation.format())
    return EXIT_OK


def run_layout(args: argparse.Namespace) -> int:
    # lazy: --help names this handler and must not load what it runs (tests/test_performance_cli.py)
    from pathlib import Path

    # lazy: as above
    from .._importers.base import write_new_file
    from .._review import layout_format, layout_svg
    from .._review.layout_read import layout_path
    from .colour import enabled

    require_input(args.target, "spec file or bundle directory", directory_ok=True)
    picture, error = layout_path(Path(args.target), args.overrides)
    if picture is not None and (args.output is None or error is None):
        if args.format == "svg":
            text = layout_svg.format_svg(picture)
        elif args.format == "markdown":
            text = layout_format.format_markdown(picture)
        else:
            colour = args.output is None and enabled(sys.stdout, args.color)
            text = layout_format.format_text(picture, colour=colour)
        if args.output is None:
            sys.stdout.write(text)
            sys.stdout.flush()
        else:
            write_new_file(Path(args.output), text, force=args.force, what="the layout", example="layout.svg")
    if error is not None:  # drawn above when it could be; the diagnostics and exit 1 as for any invalid spec
        raise error
    return EXIT_OK
