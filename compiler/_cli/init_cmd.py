"""`acrl init`: a commented spec that compiles, from a few answers: the model (a catalog name), the machines, the
training data, the eval datasets, the integration and the output file. Each answer is a flag; on a terminal, the
ones not given are asked (with the default shown in brackets); when stdin is not a terminal (or with --no-input)
nothing is asked, and a missing required answer is a usage error naming its flag (exit 2).

The spec is written (init_spec.py) with the parallel sizes init_fit.py finds by compiling it in memory; an answer
the compiler refuses whatever the layout (a bucket name, an id) is asked again on a terminal, and a usage error
naming its flag otherwise. A model that no layout of the GPUs can run is refused with the compiler's own numbers
(exit 1). Nothing is written over an existing file without --force (exit 3, as every command refuses an output in
its way).

Imports nothing up front but os and sys: `acrl --help` builds this command's parser.
"""

from __future__ import annotations

import sys

from .help import HelpFormatter
from .init_choices import DEFAULT_RM_TYPE, INTEGRATIONS, RM_TYPES
from .output import EXIT_OK
from .suggest import closest

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; mypy treats it the same
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

    from .init_fit import AnswerProblem
    from .init_spec import Answers

DEFAULTS = {"gpus_per_node": 8, "nodes": 1, "gpu_memory_gib": 80.0, "integration": "agentcore", "output": "spec.toml",
            "rm_type": DEFAULT_RM_TYPE}


def add_parser(commands: argparse._SubParsersAction[Any]) -> None:
    init = commands.add_parser(
        "init", help="write a commented spec from a few answers (asked on a terminal)", formatter_class=HelpFormatter,
        description="Write a commented spec that compiles, from a catalog model, the machines, the training data, "
        "the eval datasets and the integration: as flags, or asked on a terminal for what the flags do not give "
        "(nothing is asked when stdin is not a terminal, or with --no-input: a missing required answer is then a "
        "usage error). The tensor, pipeline and expert parallel sizes and the GPUs per SGLang engine are chosen by "
        "compiling the spec in memory: the smallest tensor parallel size whose layout slime can place and whose "
        "memory estimate fits; a model no layout of these GPUs runs is refused (exit 1). An existing file is "
        "replaced only with --force (else exit 3).")
    init.add_argument("--model", metavar="NAME", help="a model of acrl's catalog (`acrl models` lists them), "
                      "e.g. qwen3-8B (required)")
    init.add_argument("--gpus-per-node", type=int, metavar="N", help="GPUs of each node (default 8)")
    init.add_argument("--nodes", type=int, metavar="N", help="nodes (default 1; others join with join.sh)")
    init.add_argument("--gpu-memory-gib", type=float, metavar="GIB",
                      help="memory of one GPU (default 80: an A100/H100 80GB; 141 for an H200)")
    init.add_argument("--data", metavar="PATH", help="the training prompts, JSONL on the cluster (required)")
    init.add_argument("--eval", action="append", metavar="NAME=PATH",
                      help="an eval dataset, JSONL on the cluster (repeatable; evaluated every 10 rollouts)")
    init.add_argument("--integration", choices=INTEGRATIONS,
                      help="agentcore (default): the toolkit's rollout with an AgentCore Runtime agent; slime: "
                      "slime's own rollout and rule-based reward")
    init.add_argument("--runtime-arn", metavar="ARN", help="the agent's AgentCore Runtime ARN (agentcore: required)")
    init.add_argument("--s3-bucket", metavar="BUCKET",
                      help="the bucket the agent writes rollout results to (agentcore: required)")
    init.add_argument("--rm-type", choices=RM_TYPES,
                      help=f"slime: slime's rule-based reward, --rm-type (default {DEFAULT_RM_TYPE})")
    init.add_argument("--model-dir", metavar="DIR", help="the Hugging Face checkpoint on the cluster (default: "
                      "/data/models/<its name>)")
    init.add_argument("--id", dest="exp_id", metavar="ID", help="the experiment id (default: the output file's "
                      "name, else the model's)")
    init.add_argument("-o", "--output", metavar="SPEC", help="the spec file to write (default spec.toml; - prints it)")
    init.add_argument("--force", action="store_true", help="replace an existing file")
    init.add_argument("--no-input", action="store_true", help="ask nothing, even on a terminal")
    init.set_defaults(run=run_init)


# --- the answers ---------------------------------------------------------------------------------------------------

def _positive_int(text: str) -> tuple[int | None, str]:
    try:
        value = int(text)
    except ValueError:
        return None, f"{text!r} is not a whole number"
    return (value, "") if value >= 1 else (None, "must be at least 1")


def _positive_float(text: str) -> tuple[float | None, str]:
    try:
        value = float(text)
    except ValueError:
        return None, f"{text!r} is not a number"
    return (value, "") if value > 0 and value < float("inf") else (None, "must be a number of GiB above 0")


def _model(text: str) -> tuple[Any, str]:
    from .._pipeline.model_args.catalog import CATALOG, entry  # lazy: the catalog is for this command only

    found = entry(text.strip())
    if found is not None:
        return found, ""
    best = closest(text.strip(), CATALOG)
    return None, (f"{text!r} is not in acrl's model catalog" + (f"; did you mean {best!r}?" if best else "") +
                  " (`acrl models` lists them)")


def _path(text: str) -> tuple[str | None, str]:
    return (text.strip(), "") if text.strip() else (None, "give a path")


def _datasets(items: list[str]) -> tuple[dict[str, str] | None, str]:
    found: dict[str, str] = {}
    for item in items:
        name, eq, path = item.partition("=")
        if not eq or not name.strip() or not path.strip():
            return None, f"{item!r} is not NAME=PATH (e.g. gsm8k=/data/gsm8k/test.jsonl)"
        if name.strip() in found:
            return None, f"the eval dataset {name.strip()!r} is given twice"
        found[name.strip()] = path.strip()
    return found, ""


def _eval_line(text: str) -> tuple[dict[str, str] | None, str]:
    return _datasets([t for t in (p.strip() for p in text.split(",")) if t])


def _integration(text: str) -> tuple[str | None, str]:
    value = text.strip().lower()
    return (value, "") if value in INTEGRATIONS else (None, f"answer {' or '.join(INTEGRATIONS)}")


# dest -> (question, flag, check): a check returns the value, or None and why not
QUESTIONS: dict[str, tuple[str, str, Callable[[str], tuple[Any, str]]]] = {
    "model": ("Model (a catalog name; `acrl models` lists them)", "--model", _model),
    "gpus_per_node": ("GPUs per node", "--gpus-per-node", _positive_int),
    "nodes": ("Nodes", "--nodes", _positive_int),
    "data": ("Training data (JSONL on the cluster)", "--data", _path),
    "eval": ("Eval datasets, NAME=PATH, comma-separated (empty: none)", "--eval", _eval_line),
    "integration": ("Integration (agentcore: an AgentCore Runtime agent; slime: slime's own rollout)",
                    "--integration", _integration),
    "runtime_arn": ("AgentCore Runtime ARN of the agent", "--runtime-arn", _path),
    "s3_bucket": ("S3 bucket for rollout results", "--s3-bucket", _path),
    "model_dir": ("Hugging Face checkpoint directory on the cluster", "--model-dir", _path),
    "output": ("Write the spec to", "--output", _path),
}


class _Asker:
    """Asks on the terminal: the question and its default on stderr, the answer from stdin."""

    def ask(self, dest: str, default: str | None = None) -> Any:
        question, flag, check = QUESTIONS[dest]
        from ..errors import UsageError  # lazy: only an interactive init gets here

        while True:
            sys.stderr.write(f"{question}{f' [{default}]' if default is not None else ''}: ")
            sys.stderr.flush()
            line = sys.stdin.readline()
            if not line:
                sys.stderr.write("\n")
                raise UsageError("acrl init: no answer (end of input); nothing was written",
                                 hint=f"answer it, or give it as {flag}")
            text = line.strip() or (default or "")
            value, why = check(text) if text or dest == "eval" else (None, "an answer is needed")
            if not why:
                return value
            sys.stderr.write(f"  {why}\n")


def _given(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """The answers given as flags, checked; and what is wrong with them (each naming its flag)."""
    values: dict[str, Any] = {}
    problems = []
    for dest in ("model", "gpus_per_node", "nodes", "gpu_memory_gib", "data", "eval", "integration", "runtime_arn",
                 "s3_bucket", "rm_type", "model_dir", "exp_id", "output"):
        raw = getattr(args, dest)
        if raw is None:
            continue
        value: Any
        if dest == "eval":
            value, why = _datasets(raw)
        elif dest == "gpu_memory_gib":
            value, why = _positive_float(str(raw))
        elif dest in QUESTIONS:
            value, why = QUESTIONS[dest][2](str(raw))
        else:
            value, why = _path(str(raw))
        if why:
            flag = QUESTIONS[dest][1] if dest in QUESTIONS else "--" + dest.replace("_", "-")
            problems.append(f"{'--id' if dest == 'exp_id' else flag}: {why}")
        else:
            values[dest] = value
    return values, problems


def _required(values: dict[str, Any]) -> list[str]:
    needed = ["model", "data"]
    if values.get("integration", DEFAULTS["integration"]) == "agentcore":
        needed += ["runtime_arn", "s3_bucket"]
    return [d for d in needed if d not in values]


def _answers(values: dict[str, Any]) -> Answers:
    from .init_spec import Answers  # lazy: attrs and tomli-w are for this command only

    merged = {**DEFAULTS, **values}
    return Answers(**merged)


def _interactive(values: dict[str, Any]) -> dict[str, Any]:
    """The answers the flags did not give, asked; then the output file, unless it was given."""
    from .init_spec import default_model_dir  # lazy: attrs and tomli-w are for this command only

    asker = _Asker()
    for dest in ("model", "gpus_per_node", "nodes", "data", "eval", "integration"):
        if dest not in values:
            default = DEFAULTS.get(dest)
            values[dest] = asker.ask(dest, None if default is None else str(default))
    if values["integration"] == "agentcore":
        for dest in ("runtime_arn", "s3_bucket"):
            if dest not in values:
                values[dest] = asker.ask(dest)
    if "model_dir" not in values:
        values["model_dir"] = asker.ask("model_dir", default_model_dir(values["model"]))
    if "output" not in values:
        values["output"] = asker.ask("output", str(DEFAULTS["output"]))
    return values


def run_init(args: argparse.Namespace) -> int:
    from ..errors import UsageError  # lazy: --help names this handler, never runs it
    from .init_fit import answer_problems, fit  # lazy: the compiler's pipeline, for this command only

    values, wrong = _given(args)
    if wrong:
        raise UsageError("acrl init: nothing was written:\n" + "\n".join(f"  {w}" for w in wrong),
                         hint="correct the flags named (acrl init --help)")
    interactive = not args.no_input and sys.stdin.isatty()
    if interactive:
        values = _interactive(values)
    missing = _required(values)
    if missing:
        why = "--no-input is given" if args.no_input else "stdin is not a terminal"
        raise UsageError(f"acrl init: missing {', '.join(QUESTIONS[d][1] for d in missing)} ({why}, so nothing is "
                         "asked); nothing was written",
                         hint=f"give them as flags, e.g. acrl init {_example(missing)}; or run acrl init on a "
                         "terminal to be asked" + ("; or --integration slime for slime's own rollout (no AgentCore)"
                                                   if "runtime_arn" in missing else ""))
    problems = answer_problems(_answers(values))
    while interactive and _askable(problems):  # asked again, with the compiler's reason
        for problem in _askable(problems):
            dest = _dest(problem.flag)
            sys.stderr.write(problem.format() + "\n")
            values[dest] = _Asker().ask(dest)
        problems = answer_problems(_answers(values))
    if problems:
        raise UsageError("acrl init: the answers do not make a valid spec; nothing was written:\n" + "\n".join(
            p.format() for p in problems), hint="change the answers named, as said below each")
    fitted = fit(_answers(values))
    a, layout = fitted.answers, fitted.layout
    to_stdout = a.output == "-"  # -o -: the spec on stdout (as acrl-compile -o - lists), the summary on stderr
    if to_stdout:
        sys.stdout.write(fitted.text)
    else:
        _write(a.output, fitted.text, force=args.force or _confirmed_overwrite(a.output, interactive))
    for warning in fitted.warnings:
        print(warning.format(), file=sys.stderr)
    print(f"{'printed the spec' if to_stdout else f'wrote {a.output}'}: {a.model.name} on {a.nodes} "
          f"node{'s' if a.nodes > 1 else ''} x {a.gpus_per_node} GPUs, {layout.shown()}; it compiles"
          f"{'' if to_stdout else f': acrl-compile {a.output}'}", file=sys.stderr if to_stdout else sys.stdout)
    return EXIT_OK


def _example(missing: list[str]) -> str:
    examples = {"model": "--model qwen3-4B", "data": "--data /data/train.jsonl",
                "runtime_arn": "--runtime-arn arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/NAME",
                "s3_bucket": "--s3-bucket BUCKET"}
    return " ".join(examples[d] for d in missing)


def _dest(flag: str) -> str:
    return next(dest for dest, (_, f, _) in QUESTIONS.items() if f == flag)


def _askable(problems: list[AnswerProblem]) -> list[AnswerProblem]:
    """The problems a question can fix (not --id, --rm-type or --gpu-memory-gib, which are flags only)."""
    return [p for p in problems if p.flag in {f for _, f, _ in QUESTIONS.values()}]


def _confirmed_overwrite(path: str, interactive: bool) -> bool:
    """On a terminal, whether an existing, different ``path`` may be replaced (asked); False otherwise."""
    import os  # lazy: only init writes a file

    if not interactive or not os.path.isfile(path):
        return False
    sys.stderr.write(f"{path} exists; replace it? [y/N]: ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _write(output: str, text: str, *, force: bool) -> None:
    from pathlib import Path  # lazy: only init writes a file

    from .._importers.base import write_new_file  # lazy: as above

    write_new_file(Path(output), text, force=force, what="the spec", example="spec.toml")
