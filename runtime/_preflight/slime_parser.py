"""The "slime's own parser" preflight check: parse the exact argv train.sh submits with the
targeted slime checkout's own argument parsing, in the Python that runs slime, before any cluster
starts.

slime's ``parse_args`` (slime/utils/arguments.py) reads ``sys.argv`` with several parsers (a
pre-parse of the mode flags, sglang's ``--sglang-*`` parser, Megatron's parser extended with slime's
arguments), every one with ``parse_known_args``, then runs slime's, Megatron's and sglang's
validation. A token no parser knows is dropped without a word, and argparse's abbreviations let
``--sglang-mem-fraction`` stand for ``--sglang-mem-fraction-static``. This check runs that same
``parse_args`` in a subprocess (no Ray, no GPU work), recording what each parser left over, and
reports validation errors, parse errors, tokens no parser knows and abbreviated flags.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .outcome import CheckFailed, CheckSkipped

DEFAULT_MODULE = "slime.utils.arguments"
DEFAULT_FUNCTION = "parse_args"

# Runs in the target Python: argv[1] is the request (JSON), argv[2] the file the result goes to.
# Every parse_known_args over the whole command line is recorded: what the parser left over and
# which option strings it knows. argparse errors raise instead of exiting, so they are reported too.
_RUNNER = r'''
import argparse, importlib, json, os, sys, traceback
request = json.load(open(sys.argv[1], encoding="utf-8"))
result_path = sys.argv[2]
argv = request["argv"]
calls = []

class _ParserError(Exception):
    pass

_parse_known_args = argparse.ArgumentParser.parse_known_args

def _recording(self, args=None, namespace=None):
    whole = args is None or list(args) == argv
    namespace, rest = _parse_known_args(self, args, namespace)
    if whole:
        calls.append({"prog": self.prog, "unknown": list(rest),
                      "options": sorted(self._option_string_actions)})
    return namespace, rest

def _error(self, message):
    raise _ParserError(f"{self.prog}: {message}")

argparse.ArgumentParser.parse_known_args = _recording
argparse.ArgumentParser.error = _error

def _origin(exc):
    frames = traceback.extract_tb(exc.__traceback__)
    return [(f.filename, f.lineno) for f in frames]

# slime's and Megatron's validation ask torch for the GPU (Megatron 1dcf0daf arguments.py:852 and :927, through
# training/utils.py:447-449). The cluster's GPU declared in the spec answers (no CUDA is touched); otherwise this
# machine's GPU does, and a machine without one fails the query as it would: every query is recorded.
gpu = request.get("gpu")
queries = []
try:
    import torch
    cuda = torch.cuda
except BaseException:
    cuda = None

class _Properties:
    def __init__(self, name, major, minor):
        self.name, self.major, self.minor = name, major, minor

def _asking(name, real):
    def query(*args, **kwargs):
        if gpu is not None:
            queries.append({"query": name, "answered": "spec"})
            major, minor = gpu["capability"]
            return {"get_device_capability": (major, minor), "get_device_name": gpu["name"]}.get(
                name, _Properties(gpu["name"], major, minor))
        try:
            answer = real(*args, **kwargs)
        except BaseException as exc:
            queries.append({"query": name, "answered": None, "error": str(exc).splitlines()[0][:200]})
            raise
        queries.append({"query": name, "answered": "machine"})
        return answer
    return query

for _name in ("get_device_capability", "get_device_properties", "get_device_name"):
    if cuda is not None and callable(getattr(cuda, _name, None)):
        setattr(cuda, _name, _asking(_name, getattr(cuda, _name)))

result = {"stage": "ok", "calls": calls, "gpu_queries": queries}
sys.argv = [request["program"], *argv]
try:
    stage = "import"
    module = importlib.import_module(request["module"])
    stage = "parse"
    getattr(module, request["function"])()
except _ParserError as exc:
    result.update(stage="argparse", error=str(exc))
except SystemExit as exc:
    result.update(stage="exit", error=f"exited with status {exc.code!r}", frames=_origin(exc))
except BaseException as exc:
    result.update(stage=stage if stage == "import" else "validate",
                  error="".join(traceback.format_exception_only(type(exc), exc)).strip(), frames=_origin(exc))
with open(result_path, "w", encoding="utf-8") as out:
    json.dump(result, out)
'''

_NUMBER = re.compile(r"^-\d|^-\.\d")


def _is_flag(token: str) -> bool:
    return token.startswith("-") and token != "-" and not _NUMBER.match(token)


def _owner(path: str, slime_dir: Path, megatron_dir: Path | None) -> str:
    resolved = str(Path(path).resolve())
    if megatron_dir is not None and resolved.startswith(str(megatron_dir.resolve()) + os.sep):
        return "Megatron"
    if "sglang" in Path(path).parts:
        return "sglang"
    if "megatron" in Path(path).parts:
        return "Megatron"
    if resolved.startswith(str(slime_dir.resolve()) + os.sep):
        return "slime"
    return "Python"


def _where(frames: Sequence[Sequence[Any]], slime_dir: Path, megatron_dir: Path | None) -> str:
    """``slime (slime/utils/arguments.py:1234)`` for the innermost frame inside slime, Megatron or sglang."""
    for filename, lineno in reversed([tuple(frame) for frame in frames]):
        owner = _owner(filename, slime_dir, megatron_dir)
        if owner != "Python":
            for root in (slime_dir, megatron_dir):
                if root is not None and str(Path(filename).resolve()).startswith(str(root.resolve()) + os.sep):
                    filename = os.path.relpath(Path(filename).resolve(), root.resolve())
                    break
            return f"{owner} ({filename}:{lineno})"
    return "Python"


def _unknown_tokens(argv: Sequence[str], calls: Sequence[Mapping[str, Any]]) -> list[str]:
    """Flags every full-command-line parser left over, in argv order."""
    common = Counter(calls[0]["unknown"])
    for call in calls[1:]:
        common &= Counter(call["unknown"])
    out = []
    for token in argv:
        if common[token] > 0 and _is_flag(token):
            out.append(token)
            common[token] -= 1
    return out


def _abbreviations(argv: Sequence[str], calls: Sequence[Mapping[str, Any]], unknown: Sequence[str]) -> list[str]:
    """``--x -> --x-full`` for each flag that a parser took only as an abbreviation of a longer option."""
    known = {option for call in calls for option in call["options"]}
    out = []
    for token in argv:
        if token == "--":
            break
        flag = token.split("=", 1)[0]
        if not flag.startswith("--") or flag in known or token in unknown:
            continue
        longer = sorted(option for option in known if option.startswith(flag))
        if longer:
            out.append(f"{flag} -> {longer[0]}")
    return out


def check_slime_parser(
    slime_dir: str | os.PathLike[str],
    argv: Sequence[str],
    *,
    python: str = sys.executable,
    megatron_dir: str | os.PathLike[str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
    program: str = "train.py",
    module: str = DEFAULT_MODULE,
    function: str = DEFAULT_FUNCTION,
    timeout: float = 120.0,
    gpu: tuple[str, tuple[int, int]] | None = None,
) -> str:
    """Parse ``argv`` (the exact flags train.sh passes to slime's entry point) with slime's own
    ``parse_args`` in ``python``, with ``slime_dir`` (and ``megatron_dir``) first on the path and
    ``cwd`` as working directory (the bundle: relative paths such as custom_config.yaml resolve). ``gpu`` (the
    cluster's GPU model and its compute capability, from [cluster] gpu) answers the GPU queries of slime's and
    Megatron's validation; without it this machine's GPU answers, and where it has none the check is skipped as one
    this machine cannot do (not blamed on the spec).

    Passes with a one-line detail; raises CheckFailed for an import failure, a parse or validation
    error of slime, Megatron or sglang, a flag no parser knows, an abbreviated flag, or a timeout.
    """
    slime_path = Path(slime_dir)
    megatron_path = Path(megatron_dir) if megatron_dir is not None else None
    if not slime_path.is_dir():
        raise CheckFailed(f"slime_dir {str(slime_path)!r} is not a directory",
                          "point [slime] dir at the slime checkout on this machine")
    child_env = dict(os.environ if env is None else env)
    path_entries = [str(slime_path.resolve())]
    if megatron_path is not None:
        path_entries.append(str(megatron_path.resolve()))
    if child_env.get("PYTHONPATH"):
        path_entries.append(child_env["PYTHONPATH"])
    child_env["PYTHONPATH"] = os.pathsep.join(path_entries)
    child_env["PYTHONUNBUFFERED"] = "1"

    with tempfile.TemporaryDirectory(prefix="acrl-slime-parser-") as scratch:
        request_file, result_file = Path(scratch, "request.json"), Path(scratch, "result.json")
        request_file.write_text(json.dumps({"argv": list(argv), "program": program, "module": module,
                                            "function": function,
                                            "gpu": None if gpu is None else {"name": gpu[0],
                                                                             "capability": list(gpu[1])}}),
                                encoding="utf-8")
        command = [python, "-c", _RUNNER, str(request_file), str(result_file)]
        try:
            proc = subprocess.Popen(command, cwd=cwd, env=child_env, stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    errors="replace", start_new_session=True)
        except OSError as exc:
            raise CheckFailed(f"cannot start the target Python {python!r}: {exc.strerror or exc}",
                              "pass the Python that runs slime on this machine") from None
        try:
            output, _ = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):  # it may have exited just now
                os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            raise CheckFailed(
                f"slime's parser did not finish within {timeout:g} s (importing {module} or parsing hung)"
                + _tail(output),
                f"run `{python} -c 'import {module}'` with PYTHONPATH={slime_path} to see where it waits "
                "(a network file system, a lock, a download at import time)") from None
        if not result_file.is_file():
            raise CheckFailed(f"the parser process exited with status {proc.returncode} without a result"
                              + _tail(output), "run train.sh's python by hand with these flags to see why")
        result = json.loads(result_file.read_text(encoding="utf-8"))
    return _judge(result, list(argv), slime_path, megatron_path, python, module, function, gpu)


def _tail(output: str, lines: int = 3) -> str:
    text = " | ".join(line.strip() for line in output.strip().splitlines()[-lines:] if line.strip())
    return f"; last output: {text}" if text else ""


def _gpu_words(queries: Sequence[Mapping[str, Any]], gpu: tuple[str, tuple[int, int]] | None) -> str:
    """How the validation's GPU queries were answered, for the check's detail and hints."""
    if not queries:
        return ""
    if gpu is not None:
        major, minor = gpu[1]
        return (f"; its {len(queries)} GPU queries answered from [cluster] gpu = {gpu[0]} (assumed: compute "
                f"capability {major}.{minor})")
    return f"; its {len(queries)} GPU queries answered by this machine's GPU (set [cluster] gpu for the cluster's)"


def _judge(result: Mapping[str, Any], argv: list[str], slime_dir: Path, megatron_dir: Path | None,
           python: str, module: str, function: str, gpu: tuple[str, tuple[int, int]] | None = None) -> str:
    stage, calls = result["stage"], result["calls"]
    queries = result.get("gpu_queries", [])
    unanswered = [q for q in queries if q.get("answered") is None]
    if stage == "validate" and unanswered:
        raise CheckSkipped(
            f"this machine cannot check it: slime's validation asks the GPU (torch.cuda.{unanswered[0]['query']}: "
            f"{unanswered[0].get('error', 'failed')}) and this machine has none, and the spec declares no "
            "[cluster] gpu to answer with; set [cluster] gpu (e.g. \"H100\") and compile again, or run the check "
            "on a machine with the cluster's GPU")
    if stage == "import":
        raise CheckFailed(f"cannot import {module} from {slime_dir} with {python}: {result['error']}",
                          "check [slime] dir (a slime checkout) and run with the Python that runs slime, "
                          "with slime's requirements installed")
    problems: list[str] = []
    hints: list[str] = []
    if stage == "argparse":
        problems.append(f"argparse rejected the command line: {result['error']}")
        hints.append("fix the flag's value in the spec (`acrl explain FLAG` says which key sets it)")
    elif stage in ("validate", "exit"):
        problems.append(f"{_where(result.get('frames', []), slime_dir, megatron_dir)} rejected the arguments: "
                        f"{result['error']}")
        hints.append("fix the spec keys behind the flags named (`acrl explain FLAG` says which key sets each)"
                     + (f"; the validation ran as on a {gpu[0]} ([cluster] gpu): if the cluster's GPU is another, "
                        "correct [cluster] gpu" if gpu is not None and queries else ""))
    if problems:
        # a parser that raised recorded nothing: what it would have known cannot be told yet
        raise CheckFailed("; ".join(problems) + " (unknown flags are checked once this passes)", "; ".join(hints))
    if calls:
        unknown = _unknown_tokens(argv, calls)
        if unknown:
            problems.append(f"no parser of this slime knows {', '.join(unknown)} (slime ignores them silently)")
            hints.append("remove them, or spell them as the targeted slime commit does")
        abbreviated = _abbreviations(argv, calls, unknown)
        if abbreviated:
            problems.append(f"taken only as abbreviations: {', '.join(abbreviated)}")
            hints.append("write each flag in full")
    if problems:
        raise CheckFailed("; ".join(problems), "; ".join(hints))
    if not calls:
        return f"{module}.{function} accepted {len(argv)} tokens (no whole-command-line parser seen: " \
               "unknown flags not checked)"
    return (f"{module}.{function} accepted all {len(argv)} tokens ({len(calls)} parsers, none left a flag unknown)"
            + _gpu_words(queries, gpu))
