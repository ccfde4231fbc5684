"""The ``acrl`` console script: the compiler's commands plus the executor's `run`, `runs`, `status` and `logs`,
and `acrl diff` of run records.

The compiler never imports acrl.runtime, so the entry point lives here and hands the compiler's
command line (acrl.compiler.acrl_main) the executor's subcommands. Like the compiler's, it
imports nothing but os and sys up front: each handler imports the executor when it runs, so
`acrl --help` stays fast.
"""

from __future__ import annotations

import sys

from acrl.compiler import HelpFormatter, acrl_main

# The preflight checks' names, for shell completion of --skip without importing the checks (tests/test_completion.py
# holds it to _preflight's CHECKS and kube_checks).
CHECK_NAMES = ("bash", "ray-cli", "slime", "megatron", "sglang", "slime-parser", "rollout-module", "external-engines",
               "opd-teacher", "model", "datasets", "wandb", "checkpoint", "gpus", "cuda-home", "aws-identity",
               "s3-bucket", "agent-runtime", "kubectl", "kube-context", "rayjob-crd", "secrets", "rayjob-exists")

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
                              "bundle is refused or a check fails. A bundle compiled with --target kuberay is applied "
                              "with kubectl instead (its rayjob.yaml), the RayJob watched until it ends and recorded; "
                              "Ctrl-C deletes the RayJob (docs/kuberay.md).", formatter_class=HelpFormatter)
    run.add_argument("bundle", metavar="BUNDLE", help="a bundle directory (bundles/<exp_id>)")
    run.add_argument("--dry-run", action="store_true",
                     help="verify and run the checks, print the command; run nothing, record nothing")
    skip = run.add_argument("--skip", action="append", default=[], metavar="CHECK[,CHECK]",
                            help="skip these preflight checks (comma-separated or repeated; e.g. --skip "
                            "gpus,aws-identity)")
    skip.completions = CHECK_NAMES  # what `acrl completion` offers after --skip (argparse keeps what is set)
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
    run.add_argument("--target", choices=("ray", "kuberay"),
                     help="ray: run train.sh; kuberay: kubectl apply the bundle's rayjob.yaml and watch the RayJob "
                     "(default: kuberay when the bundle has a rayjob.yaml, else ray)")
    run.add_argument("--context", metavar="CTX", help="kuberay: kubectl's context (default: its current one)")
    run.add_argument("--namespace", metavar="NS",
                     help="kuberay: the RayJob's namespace when rayjob.yaml names none ([kuberay] namespace; "
                     "default: the context's)")
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
    _add_record_commands(commands)
    for name, lines in _EXAMPLES.items():  # every --help ends with examples (tests/test_cli_examples.py)
        commands.choices[name].epilog = "\n".join(["examples:", *(f"  {line}" for line in lines)])


_B = "bundles/gsm8k-qwen2.5-3b-smoke/"
_EXAMPLES = {
    "run": (f"acrl run {_B} --dry-run    # verify and check; run nothing",
            f"ACRL_RAY_ADDRESS=http://head:8265 acrl run {_B} --skip gpus",
            "acrl run bundles/gsm8k-qwen2.5-3b-eks/ --context eks-prod    # a --target kuberay bundle: kubectl"),
    "runs": ("acrl runs", "acrl runs --runs-dir /shared/runs --json"),
    "status": ("acrl status 20260101T120000Z-1a2b3c", "acrl status gsm8k-qwen2.5-3b-smoke/1a2b3c --json"),
    "logs": ("acrl logs 1a2b3c --follow", "acrl logs gsm8k-qwen2.5-3b-smoke/1a2b3c > job.log"),
    "diff": ("acrl diff bundles/old/ spec.toml --format markdown", "acrl diff RUN_A RUN_B     # what two runs ran"),
}


_RUN_HELP = ("a run id (or its first or last characters) under --runs-dir, EXP_ID/RUN_ID, a "
             "runs/<exp_id>/<run_id> folder or its run.json")


def _add_record_commands(commands: argparse._SubParsersAction[Any]) -> None:
    """`acrl status`, `acrl logs`, and run records in `acrl diff` (whose parser is the compiler's)."""
    status = commands.add_parser(
        "status", help="a recorded run's state, asking Ray about its job now", formatter_class=HelpFormatter,
        description="Show a recorded run: its record's status, what Ray says of its job now (asked at the record's "
        "Ray address with its submission id, after the terminal that launched it is gone), start, end, duration, "
        "exit status, preflight and the checkpoint it resumed from. A record still 'running' whose `acrl run` is "
        "gone from this machine is shown as launcher-died, or as Ray's final state with a note. Exit status: 0 "
        "shown; 1 when Ray cannot be asked (the record's part is still shown); 2 when RUN names no run, or several.")
    status.add_argument("ref", metavar="RUN", help=_RUN_HELP)
    status.add_argument("--json", action="store_true", help="print the status as JSON on stdout")
    status.add_argument("--fix-record", action="store_true",
                        help="write Ray's final state of the job into a record left 'running' by an `acrl run` that "
                        "died (only then: its launcher known gone from this machine, the job ended)")
    logs = commands.add_parser("logs", help="a recorded run's job logs, from Ray (or its train.log)",
                               description="Print the logs of a recorded run's Ray job, asked at the record's Ray "
                               "address with its submission id; with --follow, as they come until the job ends. When "
                               "Ray no longer has the job or cannot be reached, the record's train.log (train.sh's "
                               "output, kept on the launching machine) is shown instead; stderr says which.",
                               formatter_class=HelpFormatter)
    logs.add_argument("ref", metavar="RUN", help=_RUN_HELP)
    logs.add_argument("-f", "--follow", action="store_true",
                      help="follow the logs until the job ends (Ctrl-C stops following, not the job)")
    for p in (status, logs):
        p.add_argument("--runs-dir", metavar="DIR", default="runs", help="where run records are (default: runs)")
        p.add_argument("--address", metavar="ADDR",
                       help="ask Ray at ADDR instead of the recorded address (a tunnel, a moved head); with "
                       "user:password: export ACRL_RAY_ADDRESS instead, which is used when it is the recorded "
                       "address with credentials")
    status.set_defaults(run=_run_status)
    logs.set_defaults(run=_run_logs, json=False)
    diff = commands.choices.get("diff")
    if diff is not None:
        diff.description = (diff.description or "") + (
            " A or B may also be a run record (" + _RUN_HELP + "): what actually ran is compared (argv, the Ray "
            "job's env, the stack found and targeted, data and eval fingerprints, bundle hash, resumed checkpoint), "
            "with another run, or with a bundle or spec.")
        diff.add_argument("--runs-dir", metavar="DIR", default="runs",
                          help="where run records are, for A or B given as a run id (default: runs)")
        diff.set_defaults(run=_run_diff, bundle_diff=diff.get_default("run"))
        for listed in commands._choices_actions:  # its line in `acrl --help`
            if listed.dest == "diff":
                listed.help = "semantic diff of two bundles, specs or run records (exit 1 when they differ)"


def _run_run(args: argparse.Namespace) -> int:
    from ._run import RunOptions, run_bundle  # lazy: the executor (attrs, verify, preflight) is not for `acrl --help`

    skip = tuple(name.strip() for words in args.skip for name in words.split(",") if name.strip())
    return run_bundle(RunOptions(args.bundle, dry_run=args.dry_run, skip=skip,
                                 allow_modified=args.allow_modified, address=args.address, runs_dir=args.runs_dir,
                                 expect_hash=args.expect_hash, resume=args.resume, target=args.target,
                                 context=args.context, namespace=args.namespace))


def _run_runs(args: argparse.Namespace) -> int:
    from ._runs import format_records, runs  # lazy: `acrl --help` does not pay for it

    records = runs(args.runs_dir)
    if args.json:
        import json  # lazy: only `acrl runs --json` prints JSON; `acrl --help` does not pay for it

        print(json.dumps(records, indent=2, sort_keys=True))
    else:
        print(format_records(records))
    return 0


def _run_status(args: argparse.Namespace) -> int:
    from ._status import fix_record, print_status, run_status  # lazy: `acrl --help` does not pay for it

    found = run_status(args.ref, args.runs_dir, args.address)
    if args.fix_record:
        fixed = fix_record(found)
        print(f"{found.path}: status {fixed.status}, ended {fixed.ended_at} (Ray's state of the job)")
        return 0
    print_status(found, sys.stdout, args.json)
    if found.ray_error is not None:
        if not args.json:
            print(f"acrl: error: {found.ray_error}", file=sys.stderr)  # the message and its fix
        return 1
    return 0


def _run_logs(args: argparse.Namespace) -> int:
    from ._logs import show_logs  # lazy: `acrl --help` does not pay for it

    return show_logs(args.ref, sys.stdout, sys.stderr, args.runs_dir, args.address, args.follow)


def _run_diff(args: argparse.Namespace) -> int:
    """`acrl diff`: run records here; bundles and specs alone are the compiler's."""
    from ._run_ref import looks_like_record  # lazy: only os and pathlib, but not for `acrl --help`

    if not (looks_like_record(args.a) or looks_like_record(args.b)):
        code: int = args.bundle_diff(args)
        return code
    from acrl.compiler import AcrlError, UsageError, format_diff  # lazy: the compiler's diff reader, for this only

    from ._record_diff import diff_runs  # lazy: `acrl --help` does not pay for it

    args.json = args.format == "json"  # errors as JSON too
    if args.overrides and not any(path.endswith(".toml") for path in (args.a, args.b)):  # as the compiler's diff
        raise UsageError("acrl diff: --set applies to a spec (.toml), and neither A nor B is one",
                         hint="give a spec on one side, e.g. acrl diff RUN spec.toml --set KEY=VALUE")
    try:
        result = diff_runs(args.a, args.b, args.runs_dir, overrides=args.overrides)
    except AcrlError as exc:  # as acrl diff (diff(1)): 2 is trouble, 1 is "different"
        raise exc.evolve(exit_code=2) from exc.__cause__
    if args.format == "json":
        import json  # lazy: only --format json prints JSON

        print(json.dumps(result.as_json(), indent=2, sort_keys=True))
    else:
        sys.stdout.write(format_diff(result, args.format))
    return 0 if result.equivalent else 1


if __name__ == "__main__":
    sys.exit(main())
