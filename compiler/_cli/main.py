"""The command lines' front: `acrl-compile` and the compiler's `acrl` commands, parsed and dispatched.
Each command's handler (compile_cmd.py: compile, --check, check-bundles; commands.py: the others)
makes one call and prints; one function here turns errors into a message on stderr and an exit
status (0 ok, 1 invalid spec or check failed, 2 usage, 70 a bug in acrl).

Nothing is imported up front but os, sys and the handler modules (which import nothing heavy
either), so that `acrl --help` stays as fast as the interpreter allows: argparse is imported when a
parser is built (not at all when the help printed last time for the same words and width is kept:
help.py), and the compiler, and even json, pathlib and typing, by the command that needs them
(docs/performance.md has the numbers).
"""

from __future__ import annotations

import os
import sys

from .._version import __version__
from . import commands as _commands
from . import compile_cmd as _compile_cmd
from . import completion as _completion
from . import init_cmd as _init_cmd
from .examples import apply_examples as _apply_examples
from .help import HelpFormatter as _HelpFormatter
from .help import help_words, print_help_and_keep_it, print_kept_help
from .output import COMPILE_EXIT_STATUS, EXIT_INTERNAL, EXIT_OK, EXIT_USAGE
from .output import print_json as _print_json
from .suggest import parser_class as _parser_class

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import Any


def assignment(text: str) -> str:
    """A --set argument's shape (KEY=VALUE), checked as argparse parses it: without '=' it is a usage error (exit 2);
    the key and the value are checked where the spec is read (compiler/_pipeline/layers.py)."""
    if "=" not in text:
        import argparse  # lazy: argparse is imported by whoever builds the parser, at run time only

        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. --set rollout.batch_size=64)")
    return text


def _compile_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("spec", help="the experiment spec (TOML; it may extend a base spec, and a [sweep] table "
                        "compiles to a bundle per point)")
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="bundle directory (default: bundles/<exp_id>); for a sweep, the directory of its "
                        "point bundles and sweep.json; -o - writes nothing and lists the bundle's files (name, "
                        "size, sha256)")
    parser.add_argument("--print", dest="print_file", metavar="FILE",
                        help="write nothing; print the bundle's FILE (train.sh, spec.toml, manifest.json, "
                        "model_args.sh, ...; a sweep's POINT/FILE or sweep.json) on stdout")
    parser.add_argument("--strict", action="store_true", help="treat warnings as errors")
    parser.add_argument("--force", action="store_true",
                        help="replace a bundle that was modified by hand or compiled from another spec (the "
                        "intact bundle of the same spec is replaced without it, and what changed is said)")
    parser.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    verbosity.add_argument("-v", "--verbose", action="store_true",
                           help="also print the compile's notes (what acrl supplied or checked the flags against) "
                           "and how long it took")
    _colour_argument(parser)
    parser.add_argument("--no-cache", action="store_true",
                        help="compile even if this spec's compile is cached (and do not cache it)")
    parser.add_argument("--check", action="store_true",
                        help="write no bundle; exit 1, with the differences, when DIR is not exactly what SPEC "
                        "compiles to (a stale, hand-edited or missing bundle)")
    parser.add_argument("--target", choices=("ray", "kuberay"), default="ray",
                        help="ray (default): train.sh submits to a Ray cluster; kuberay: also write rayjob.yaml, "
                        "a KubeRay RayJob ([kuberay] image and secret)")
    parser.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE", type=assignment,
                        help="set a spec key, VALUE written as in TOML (64, '\"text\"', [1, 2], {a = 1}); "
                        "repeatable, applied in order on top of the spec and its bases")
    parser.add_argument("--keep-going", action="store_true",
                        help="sweep: write the bundles of the valid points even when some are invalid "
                        "(the exit status is still 1)")
    _checkout_arguments(parser)
    parser.set_defaults(run=_compile_cmd.run_compile)


def _colour_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour errors and warnings: auto (default) on a terminal unless NO_COLOR is set")


def _checkout_arguments(parser: argparse.ArgumentParser) -> None:
    """--slime-checkout / --megatron-checkout: this machine's checkouts, read for model scripts and flags."""
    parser.add_argument("--slime-checkout", metavar="DIR",
                        help="the slime checkout on this machine to read model scripts (args_source = \"script\") "
                        "and flag definitions from (default: $ACRL_SLIME_CHECKOUT, else [slime] dir where it exists "
                        "here); train.sh still runs slime at [slime] dir")
    parser.add_argument("--megatron-checkout", metavar="DIR",
                        help="the Megatron-LM checkout on this machine whose flags are read (default: "
                        "$ACRL_MEGATRON_CHECKOUT, else [slime] megatron_dir where it exists here)")


def _handle(run: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    from .._slime.checkout import set_from_options  # lazy: only os; --help never needs it

    try:
        set_from_options(getattr(args, "slime_checkout", None), getattr(args, "megatron_checkout", None))
        return run(args)
    except BrokenPipeError:  # the reader went away (`acrl models | head`): not an error of ours
        _stdout_to_devnull()
        return EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        from ..errors import AcrlError  # lazy: only when something went wrong: it brings attrs

        if isinstance(exc, AcrlError):
            if getattr(args, "json", False):
                try:
                    _print_json({"ok": False, "error": exc.as_json()})
                except BrokenPipeError:  # `--json | head`: the error's exit status still tells
                    _stdout_to_devnull()
            else:
                from .colour import enabled, paint  # lazy: only an error printed needs it

                colour = enabled(sys.stderr, getattr(args, "color", "auto"))
                print(paint(str(exc), default="error") if colour else exc, file=sys.stderr)
            return exc.exit_code
        if os.environ.get("ACRL_DEBUG"):  # a bug in acrl, not in the input: say so, without a traceback
            raise
        from .._secrets import redact  # lazy: only for a bug; its message may quote an input that holds a secret

        print(f"acrl: internal error: {type(exc).__name__}: {redact(str(exc))}\n"
              "  This is a bug in acrl; rerun with ACRL_DEBUG=1 for a traceback and report it.",
              file=sys.stderr)
        return EXIT_INTERNAL
    finally:
        set_from_options(None, None)  # for this command only (tests run many in one process)


def _stdout_to_devnull() -> None:
    """Point stdout at /dev/null once its reader is gone, so that the interpreter's last flush does not
    fail again (and print "Exception ignored ... BrokenPipeError")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def _main(parser: argparse.ArgumentParser, argv: Sequence[str] | None, help_key: str | None = None) -> int:
    """Parse and run; ``help_key`` names this command line's kept help (default: the program's name)."""
    words = help_words(argv)
    if words is not None:
        print_help_and_keep_it(parser, words, help_key or parser.prog)
    args = parser.parse_args(argv)
    run = getattr(args, "run", None)
    if run is None:  # a command that needs a subcommand (`acrl import`), or none at all: its help, as usage
        getattr(args, "usage_of", parser).print_help(sys.stderr)
        return EXIT_USAGE
    return _handle(run, args)


def compile_main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``acrl-compile``."""
    if print_kept_help("acrl-compile", argv):
        raise SystemExit(0)
    return _main(compile_parser(), argv)


def compile_parser() -> argparse.ArgumentParser:
    """The parser of ``acrl-compile`` (also read by `acrl completion`)."""
    parser = _parser_class()(prog="acrl-compile",
                             description=f"Compile an experiment spec into a run bundle. {COMPILE_EXIT_STATUS}",
                             formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"acrl {__version__}")
    _compile_arguments(parser)
    _apply_examples(parser)
    return parser


def acrl_main(argv: Sequence[str] | None = None, *,
              more_commands: Callable[[argparse._SubParsersAction[Any]], None] | None = None) -> int:
    """Entry point of ``acrl``'s compiler commands. ``more_commands`` adds subcommands that live
    outside the compiler (the executor's, from acrl.runtime: the compiler never imports it)."""
    # The help depends on the commands added: `python -m acrl.compiler._cli.main --help` keeps its own.
    help_key = "acrl" if more_commands is None else f"acrl+{more_commands.__module__}"
    if print_kept_help(help_key, argv):
        raise SystemExit(0)
    import argparse  # lazy: not when the help printed last time is kept (help.py)

    parser = _parser_class()(prog="acrl", description="Compile and run slime RL bundles "
                             "for agents on Amazon Bedrock AgentCore Runtime.", formatter_class=_HelpFormatter)
    parser.add_argument("--version", action="version", version=f"acrl {__version__}")
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")
    _init_cmd.add_parser(commands)
    _compile_arguments(commands.add_parser("compile", help="compile a spec into a bundle (= acrl-compile)",
                                           description="Compile an experiment spec into a run bundle. "
                                           f"{COMPILE_EXIT_STATUS}", formatter_class=_HelpFormatter))
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
    models.set_defaults(run=_commands.run_models, name=None)
    show.set_defaults(run=_commands.run_models)
    schema = commands.add_parser("schema", help="print the spec's JSON Schema, for TOML editors (docs/editor.md)",
                                 description="The JSON Schema (draft 2020-12) of an experiment spec, generated from "
                                 "acrl's spec classes: types, defaults, enums, ranges and descriptions.",
                                 formatter_class=_HelpFormatter)
    schema.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead of stdout")
    schema.set_defaults(run=_commands.run_schema)
    explain = commands.add_parser("explain", help="where each value and slime flag of a spec or bundle came from",
                                  description="For every value of the resolved spec and every slime flag of train.sh: "
                                  "its origin (spec file and line, default, model-args source, derived by the "
                                  "compiler) and its documentation.", formatter_class=_HelpFormatter)
    explain.add_argument("target", metavar="SPEC|BUNDLE", help="a spec file, or a bundle directory")
    explain.add_argument("key", nargs=argparse.REMAINDER, metavar="KEY",
                         help="only this: a spec key (rollout.batch_size), a table (rollout) or a slime flag "
                         "(--global-batch-size)")
    explain.add_argument("--json", action="store_true", help="print JSON on stdout")
    explain.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE", type=assignment,
                         help="explain the spec with this key set, as acrl-compile --set does")
    _checkout_arguments(explain)
    explain.set_defaults(run=_commands.run_explain, print_help=explain.print_help)
    layout = commands.add_parser("layout", help="which GPU of which node does what: slime's placement, drawn",
                                 description="Draw slime's placement of a spec or bundle, node by node: each GPU with "
                                 "its actor rank and Megatron coordinates (TP/PP/CP/DP), its rollout engine and which "
                                 "of the engine's GPUs it is, or why it is idle; the head, the placement group's size "
                                 "and rollout offset, each node's ray start --num-gpus and whether "
                                 "--num-gpus-per-node is passed (docs/cluster.md). A spec is compiled in memory; "
                                 "nothing is written but -o FILE. An invalid spec is drawn when it can be, with its "
                                 "diagnostics, and exits 1.", formatter_class=_HelpFormatter)
    layout.add_argument("target", metavar="SPEC|BUNDLE", help="a spec file, or a bundle directory")
    layout.add_argument("--format", choices=("text", "markdown", "svg"), default="text",
                        help="text (default: for a terminal), markdown (a table per node, for a pull request) or "
                        "svg (a self-contained picture)")
    layout.add_argument("-o", "--output", metavar="FILE", help="write it to FILE (atomically) instead of stdout")
    layout.add_argument("--force", action="store_true", help="replace an existing FILE")
    layout.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE", type=assignment,
                        help="draw the spec with this key set, as acrl-compile --set does")
    _colour_argument(layout)
    _checkout_arguments(layout)
    layout.set_defaults(run=_commands.run_layout, json=False)
    _review_commands(commands)
    _import_commands(commands)
    if more_commands is not None:
        more_commands(commands)
    _completion.add_parser(commands)
    # it completes every command, the executor's too, and acrl-compile's
    commands.choices["completion"].set_defaults(root=parser, more_roots=(compile_parser,))
    _apply_examples(parser)
    return _main(parser, argv, help_key)


def _import_commands(commands: Any) -> None:
    """`acrl import slime-runner|train-sh FILE -o SPEC` (docs/migration.md)."""
    imports = commands.add_parser("import", help="convert a SlimeRunner YAML or a hand-written train.sh into a spec",
                                  description="Write a spec from what you launch slime with today, report what "
                                  "did not carry over as it was, and compile the spec in memory to show whether it "
                                  "is valid (docs/migration.md).", formatter_class=_HelpFormatter)
    kinds = imports.add_subparsers(title="sources", metavar="SOURCE")
    imports.set_defaults(usage_of=imports)
    runner = kinds.add_parser("slime-runner", help="a YAML file of SlimeRunner keyword arguments",
                              description="Convert the YAML file SlimeRunner.from_yaml reads into a spec whose "
                              "train.sh passes slime the same flags and values.", formatter_class=_HelpFormatter)
    runner.add_argument("file", metavar="CONFIG.yaml", help="the SlimeRunner YAML")
    runner.add_argument("--num-rollout", type=int, metavar="N",
                        help="the num_rollout SlimeRunner.train() was called with (default: the YAML's, if any)")
    script = kinds.add_parser("train-sh", help="a hand-written launch script of slime's example shape",
                              description="Map every flag of a train.sh (ray job submit ... -- python3 train.py "
                              "FLAGS) onto spec keys, put the rest in [extra], and report what cannot be resolved "
                              "(unset variables, command substitutions) instead of guessing.",
                              formatter_class=_HelpFormatter)
    script.add_argument("file", metavar="FILE", help="the launch script")
    script.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="a variable the script reads from its environment (repeatable); secrets are never "
                        "copied into the spec")
    for p, default in ((runner, "agentcore-rl-toolkit's pin, the slime SlimeRunner ran"),
                       (script, "the commit of the slime checkout the script is in, else of --slime-checkout, where "
                                "acrl has facts for it; else agentcore-rl-toolkit's pin")):
        p.add_argument("--target-commit", metavar="REV",
                       help="the slime commit the spec targets ([slime] commit), whose flags the import maps: one "
                       "acrl has facts for, as a hash (7+ hex digits) or tag, e.g. v0.3.1 (default: " + default + ")")
        p.add_argument("-o", "--output", metavar="SPEC", required=True, help="the spec file to write")
        p.add_argument("--force", action="store_true", help="replace an existing file")
        p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
        _checkout_arguments(p)
    runner.set_defaults(run=_commands.run_import, kind="slime-runner")
    script.set_defaults(run=_commands.run_import, kind="train-sh", num_rollout=None)


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
    diff.add_argument("--set", action="append", default=[], dest="overrides", metavar="KEY=VALUE", type=assignment,
                      help="compile A and B, where they are specs, with this key set, as acrl-compile --set does "
                      "(repeatable; e.g. acrl diff bundles/exp spec.toml --set train.lr=2e-6: what that compile "
                      "would change)")
    _checkout_arguments(diff)
    diff.set_defaults(run=_commands.run_diff)
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
    verify.set_defaults(run=_commands.run_verify)
    check = commands.add_parser("check-bundles", help="check that committed bundles are what their specs compile to",
                                description="For each SPEC, `acrl-compile --check SPEC -o DIR/<exp_id>`: exit 1 when "
                                "a bundle is stale, hand-edited or missing. Writes nothing. The pre-commit hook "
                                "acrl-check runs this (docs/review.md).", formatter_class=_HelpFormatter)
    check.add_argument("specs", nargs="*", metavar="SPEC", help="specs to check (default: specs/*.toml)")
    check.add_argument("--bundles-dir", metavar="DIR", default="bundles",
                       help="where the bundles are, one per exp_id (default: bundles)")
    check.add_argument("--strict", action="store_true", help="treat warnings as errors")
    check.add_argument("--json", action="store_true", help="print the results as JSON on stdout")
    _checkout_arguments(check)
    check.set_defaults(run=_compile_cmd.run_check_bundles)


if __name__ == "__main__":
    sys.exit(acrl_main())
