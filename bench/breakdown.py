"""Where one cold `acrl-compile` spends its time: timestamps between the imports and the stages of a
compile in a fresh process, medians over --runs processes.

    python bench/breakdown.py [--runs 25] [--cpu] [--spec SPEC] [--python OTHER_PYTHON ...]

Run it with the python of a regular install (see docs/performance.md); --python adds columns for
other installs (e.g. the previous version), run interleaved with this one.

--cpu times the process's CPU time (time.process_time) instead of wall time, and the bare start's
CPU time (user + sys) as the unit: on a loaded machine, waiting for a CPU then counts in no row.

After the first compile, the child compiles the same spec a second time in the same process ("again"
rows, not in the total): what a long-lived process (a sweep's points, a test suite) pays per
compile once everything is imported and generated. `python -c pass` runs interleaved with the
children, and every row is also given as a ratio to it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# The stages are marked in the order a compile meets them; each library is imported on its own
# first, so that a module's row is its own cost, not its dependencies'.
CHILD = r"""
import time, sys
T = time.process_time if sys.argv[3] == "cpu" else time.perf_counter
marks = [("start", T())]
def mark(name): marks.append((name, T()))
import re, argparse; mark("re + argparse (console script, command line)")
from acrl.compiler._cli import main as _cli; mark("acrl.compiler._cli.main")
import attrs; mark("import attrs")
import cattrs; mark("import cattrs")
import jinja2; mark("import jinja2")
import tomllib; mark("import tomllib")
import yaml; mark("import yaml")
import tomli_w; mark("import tomli_w")
from acrl.compiler._spec import tables as _spec; mark("acrl: _spec (attrs classes)")
from acrl.compiler._pipeline.model_args import resolve as _model_args; mark("acrl: _model_args")
from acrl.compiler._slime import source as _slime_source; mark("acrl: _slime_source")
from acrl.compiler._pipeline import compile as _compile
from acrl.compiler._pipeline import render as _render
from acrl.compiler._pipeline import parse as _source
from acrl.compiler._pipeline import structure as _structure; mark("acrl: every other module")
from pathlib import Path
source = _source.read_spec(Path(sys.argv[1])); mark("parse (tomllib + key positions)")
_structure.structure(source); mark("structure (cattrs generates code)")
for name in _render.TEMPLATE_VARIABLES:
    _render.environment().get_template(name)
mark("load the templates")
bundle = _compile.compile_source(source); mark("structure again + resolve + validate + render + hash")
_compile.write(bundle, Path(sys.argv[2])); mark("write")
source = _source.read_spec(Path(sys.argv[1])); mark("again: parse")
bundle = _compile.compile_source(source); mark("again: structure + resolve + validate + render + hash")
_compile.write(bundle, Path(sys.argv[2] + "-again")); mark("again: write (a new bundle directory)")
import json
print(json.dumps([(name, t - marks[0][1]) for name, t in marks]))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--spec", type=Path, default=REPO / "specs" / "gsm8k-qwen2.5-3b-smoke.toml")
    parser.add_argument("--cpu", action="store_true", help="CPU time instead of wall time")
    parser.add_argument("--python", action="append", default=[], help="also time this interpreter's install")
    args = parser.parse_args()
    pythons = [sys.executable, *args.python]
    scratch = Path(tempfile.mkdtemp(prefix="acrl-breakdown-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(scratch / "cache")
    stages: list[dict[str, list[float]]] = [{} for _ in pythons]
    bare: list[float] = []
    try:
        for n in range(args.runs + 1):
            started = time.perf_counter()
            proc = subprocess.Popen([sys.executable, "-c", "pass"], env=env)
            usage = os.wait4(proc.pid, 0)[2]
            if n:
                bare.append(usage.ru_utime + usage.ru_stime if args.cpu else time.perf_counter() - started)
            for i, python in enumerate(pythons):
                out = subprocess.run([python, "-c", CHILD, str(args.spec), str(scratch / f"out-{i}-{n}"),
                                      "cpu" if args.cpu else "wall"],
                                     capture_output=True, text=True, env=env, check=True).stdout
                marks = json.loads(out)
                if n:  # the first round warms the file cache, the .pyc files and the template cache
                    for (_, before), (name, after) in itertools.pairwise(marks):
                        stages[i].setdefault(name, []).append(after - before)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    start = statistics.median(bare)
    clock = "CPU time (user + sys)" if args.cpu else "wall time"
    print(f"{clock}, median of {args.runs} processes each; bare interpreter start (python -c pass) "
          f"{start * 1e3:.1f} ms\n")
    width = max(len(name) for name in stages[0])
    print(f"| {'stage':<{width}} | " + " | ".join(f"{Path(p).parent.parent.name:>19}" for p in pythons) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * 20 + ":" for _ in pythons) + "|")

    def row(name: str, seconds: list[float]) -> None:
        print(f"| {name:<{width}} | " + " | ".join(f"{t * 1e3:7.1f} ms ({t / start:5.2f}x)" for t in seconds) + " |")

    for name in stages[0]:
        if not name.startswith("again"):
            row(name, [statistics.median(s[name]) for s in stages])
    row("total after the interpreter started",
        [sum(statistics.median(times) for name, times in s.items() if not name.startswith("again")) for s in stages])
    for name in stages[0]:
        if name.startswith("again"):
            row(name, [statistics.median(s[name]) for s in stages])
    row("again: total (a second compile in the same process)",
        [sum(statistics.median(times) for name, times in s.items() if name.startswith("again")) for s in stages])

if __name__ == "__main__":
    main()
