"""The ``acrl`` console script: the compiler's commands plus the executor's `run` and `runs`.

The compiler never imports acrl.runtime, so the entry point lives here and hands the compiler's
command line (acrl.compiler.acrl_main) the executor's subcommands. Like the compiler's, it
imports nothing but os and sys up front: each handler imports the executor when it runs, so
`acrl --help` stays fast.
"""

from __future__ import annotations

import sys

from acrl.compiler import HelpFormatter, acrl_main

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from typing import Any


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``acrl``."""
    return acrl_main(argv, more_commands=_add_run_commands)


def _add_run_commands(commands: argparse._SubParsersAction[Any]) -> None:
    run = commands.add_parser("run", help="verify a bundle, run preflight checks, run its train.sh, keep a record",
                              description="Verify BUNDLE against its manifest (a modified bundle is refused), run "
                              "the preflight checks (a table of passed / failed / skipped), then run its train.sh "
                              "with the output shown and kept, and write runs/<exp_id>/<run_id>/run.json. Ctrl-C "
                              "stops the Ray job and records the run as cancelled; a second Ctrl-C (or "
                              "ACRL_STOP_GRACE seconds, default 90) ends train.sh and everything it started. Exit "
                              "status: train.sh's (75: the job's state is unknown, recorded as such); 1 when the "
                              "bundle is refused or a check fails.", formatter_class=HelpFormatter)
    run.add_argument("bundle", metavar="BUNDLE", help="a bundle directory (bundles/<exp_id>)")
    run.add_argument("--dry-run", action="store_true",
                     help="verify and run the checks, print the command; run nothing, record nothing")
    run.add_argument("--skip", action="append", default=[], metavar="CHECK",
                     help="skip the preflight check CHECK (repeatable; e.g. --skip gpus)")
    run.add_argument("--allow-modified", action="store_true",
                     help="run a bundle whose files differ from its manifest (recorded in run.json)")
    run.add_argument("--address", metavar="ADDR",
                     help="an existing Ray cluster's dashboard address (http://head:8265), instead of the spec's "
                     "(default: ACRL_RAY_ADDRESS from the environment); one with user:password is refused here: "
                     "export it as ACRL_RAY_ADDRESS instead (the command line is in the process list)")
    run.add_argument("--runs-dir", metavar="DIR", default="runs", help="where run records go (default: runs)")
    run.add_argument("--expect-hash", metavar="SHA256",
                     help="refuse to run unless the bundle's files and manifest hash to SHA256 (the bundle hash you "
                     "reviewed, e.g. from a pull request; recorded in run.json), as `acrl verify --expect-hash`")
    run.add_argument("--resume", action="store_true",
                     help="resume from the bundle's checkpoint ([checkpoint] load, else save) or refuse to start: "
                     "train.sh gets ACRL_RESUME=required for this launch (the bundle stays the same); the "
                     "'checkpoint' check reads the directory first, and the record says what was resumed")
    run.set_defaults(run=_run_run)
    runs = commands.add_parser("runs", help="list the recorded runs, a resumed run under the run it resumed from",
                               description="List the run records under DIR/<exp_id>/<run_id>/run.json, per "
                               "experiment; a run that resumed from the checkpoint another run saved is listed under "
                               "it, indented, with '<- RUN_ID' (--json: each record gains 'chain', the run ids from "
                               "the first run of its chain to it, and 'resumed_by'). A record still 'running' whose "
                               "acrl run is gone from this machine is shown as launcher-died.",
                               formatter_class=HelpFormatter)
    runs.add_argument("--runs-dir", metavar="DIR", default="runs", help="where run records are (default: runs)")
    runs.add_argument("--json", action="store_true", help="print the records as JSON on stdout")
    runs.set_defaults(run=_run_runs)


def _run_run(args: argparse.Namespace) -> int:
    from ._run import RunOptions, run_bundle  # lazy: the executor (attrs, verify, preflight) is not for `acrl --help`

    return run_bundle(RunOptions(args.bundle, dry_run=args.dry_run, skip=tuple(args.skip),
                                 allow_modified=args.allow_modified, address=args.address, runs_dir=args.runs_dir,
                                 expect_hash=args.expect_hash, resume=args.resume))


def _run_runs(args: argparse.Namespace) -> int:
    from ._runs import format_records, runs  # lazy: `acrl --help` does not pay for it

    records = runs(args.runs_dir)
    if args.json:
        import json  # lazy: only `acrl runs --json` prints JSON; `acrl --help` does not pay for it

        print(json.dumps(records, indent=2, sort_keys=True))
    else:
        print(format_records(records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
