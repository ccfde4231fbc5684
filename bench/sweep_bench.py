"""Time of a 1,000-point sweep, per bundle, as a ratio to a bare interpreter start measured in the same run.

    python bench/sweep_bench.py [--points 1000] [--runs 5] [--dir DIR] [--json]

The sweep is specs/gsm8k-qwen2.5-3b-smoke.toml with a 10 x 10 x 10 grid (rollout.batch_size,
train.lr, rollout.temperature): 1,000 points. Each round, in turn (so that load on the machine hits
all of them alike), every one a fresh process:

- "bare interpreter": `python -c pass`, the unit of the ratios;
- "acrl-compile (whole command)": `acrl-compile SWEEP.toml -o DIR`, what a user waits for: start-up,
  imports, compiling every point, writing 1,000 bundles and sweep.json, into an empty directory;
- the same work in one fresh process with a timestamp between the stages (what the command does,
  split up): the imports, reading the spec and expanding its points, compiling every point (nothing
  written), writing the bundles (write_sweep). Then, in the same process and not part of the
  command, "files alone": the same bytes written the plainest way (a directory per point,
  open/write per file, a rename), nothing compiled: the file system's floor; and "compile again":
  the same 1,000 points compiled a second time in that process, warm. Up to 2026-11-23 this bench
  reported only that warm figure as "compile": it leaves out the first pass's one-time costs and
  all of the writing, which is why it read ~2 ms per point while the command took 5-7.

Every figure is the median over --runs rounds (after one untimed round that warms the file cache,
the .pyc files and the compiled-template cache, as on any machine that compiled before; sweeps are
never kept in the compile cache). Wall time per bundle, its ratio to the bare start, and CPU time
(user + sys for the commands; the process's own CPU for the stages), which load on a shared machine
disturbs less than wall time. Bundles are written under --dir (default: the system's temporary
directory), so that a disk and a RAM file system (/dev/shm) can be compared: on a disk, creating
files is most of the cost of writing a bundle and varies most between runs.
"""

from __future__ import annotations

import argparse
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
SMOKE = REPO / "specs" / "gsm8k-qwen2.5-3b-smoke.toml"
BARE = "bare interpreter (python -c pass)"
COMMAND = "acrl-compile (whole command)"

# The stages of the command, in a fresh process: (name, wall seconds, CPU seconds) after each.
CHILD = r"""
import os, sys, time, json
marks = [("start", time.perf_counter(), time.process_time())]
def mark(name): marks.append((name, time.perf_counter(), time.process_time()))
from pathlib import Path
from acrl.compiler._pipeline import sweep as _sweep
from acrl.compiler._pipeline.layers import load_spec
import attrs, cattrs, jinja2, yaml, tomli_w
mark("imports (acrl and its libraries)")
spec, out = Path(sys.argv[1]), Path(sys.argv[2])
source = load_spec(spec)
base, points = _sweep.sweep_points(source)
mark("read the spec, expand the points")
results = _sweep.compile_points(base, points)
assert all(r.bundle is not None for r in results), [r.diagnostics for r in results if r.bundle is None][:1]
mark("compile every point (nothing written)")
_sweep.write_sweep(str(out / "acrl"), source.name, results)
mark("write the bundles and sweep.json (write_sweep)")
floor = out / "floor"
floor.mkdir()
for i, r in enumerate(results):
    staging = floor / f".{i}.tmp"
    staging.mkdir()
    for name, data in r.bundle.files.items():
        with open(staging / name, "wb") as f:
            f.write(data)
    staging.rename(floor / str(i))
mark("files alone: the same bytes, plain mkdir/open/write/rename")
del results
again = _sweep.compile_points(base, points)
mark("compile every point again, same process (warm)")
print(json.dumps([(name, t - pt, c - pc) for (_, pt, pc), (name, t, c) in zip(marks, marks[1:])] + [len(again)]))
"""
IN_COMMAND = 4  # the first four stages are what the command does; the others are yardsticks


def run_process(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds (user + sys of the finished child, as the OS accounts it) and stdout."""
    with tempfile.TemporaryFile() as stdout:
        started = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=stdout, stderr=subprocess.PIPE, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            sys.exit(f"{' '.join(argv)} exited {code}:\n{proc.stderr.read().decode() if proc.stderr else ''}")
        stdout.seek(0)
        return seconds, usage.ru_utime + usage.ru_stime, stdout.read().decode()


def sweep_spec(points: int) -> str:
    side = round(points ** (1 / 3))
    batch = [8 * (i + 1) for i in range(side)]
    lr = [round(1e-7 * (i + 1), 9) for i in range(side)]
    temperature = [round(0.1 * (i + 1), 2) for i in range(side)]
    grid = (f'grid = {{ "rollout.batch_size" = {batch}, "train.lr" = {lr}, '
            f'"rollout.temperature" = {temperature} }}')
    return SMOKE.read_text(encoding="utf-8") + f"\n[sweep]\n{grid}\n"


def measure(runs: int, points: int, where: str | None) -> tuple[int, dict[str, list[tuple[float, float]]]]:
    scratch = Path(tempfile.mkdtemp(prefix="acrl-sweep-bench-", dir=where))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(scratch / "cache")
    py, compile_bin = sys.executable, str(Path(sys.executable).parent / "acrl-compile")
    rows: dict[str, list[tuple[float, float]]] = {}
    count = 0
    try:
        spec = scratch / "sweep.toml"
        spec.write_text(sweep_spec(points), encoding="utf-8")
        for n in range(runs + 1):  # round 0 is untimed: file cache, .pyc files, template cache
            out = scratch / f"run-{n}"
            out.mkdir()
            timings = [(BARE, run_process([py, "-c", "pass"], env)[:2]),
                       (COMMAND, run_process([compile_bin, str(spec), "-o", str(out / "cli")], env)[:2])]
            *stages, count = json.loads(run_process([py, "-c", CHILD, str(spec), str(out)], env)[2])
            timings += [(name, (wall, cpu)) for name, wall, cpu in stages]
            if n:
                for name, value in timings:
                    rows.setdefault(name, []).append(value)
            shutil.rmtree(out)
        return count, rows
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", help="where to write the bundles (default: the system's temporary directory)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    count, rows = measure(args.runs, args.points, args.dir)
    start = statistics.median(wall for wall, _ in rows[BARE])
    start_cpu = statistics.median(cpu for _, cpu in rows[BARE])
    medians = {name: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
               for name, v in rows.items()}
    names = list(medians)
    in_command = names[2:2 + IN_COMMAND]
    report = {
        "points": count, "runs": args.runs, "dir": args.dir or tempfile.gettempdir(),
        "bare_start_ms": round(start * 1e3, 2), "bare_start_cpu_ms": round(start_cpu * 1e3, 2),
        "per_bundle": {name: {"wall_ms": round(w / count * 1e3, 3), "x_bare_start": round(w / count / start, 3),
                              "cpu_ms": round(c / count * 1e3, 3), "cpu_x_bare_start": round(c / count / start_cpu, 3)}
                       for name, (w, c) in medians.items() if name != BARE},
        "stages_of_the_command_sum_ms_per_bundle":
            round(sum(medians[name][0] for name in in_command) / count * 1e3, 3),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"{count} points, median of {args.runs} rounds, bundles written under {report['dir']}; python "
          f"{sys.version.split()[0]}, {os.cpu_count()} CPUs; bare interpreter start (python -c pass): "
          f"{start * 1e3:.1f} ms, {start_cpu * 1e3:.1f} ms CPU\n")
    width = max(len(name) for name in names) + 2
    print(f"| {'per bundle':<{width}} | {'wall':>9} | {'x bare start':>12} | {'CPU':>9} | {'CPU x bare':>10} |")
    print(f"|{'-' * (width + 2)}|{'-' * 10}:|{'-' * 13}:|{'-' * 10}:|{'-' * 11}:|")
    for name in names[1:]:
        wall, cpu = medians[name]
        if name == names[2 + IN_COMMAND]:
            total = report["stages_of_the_command_sum_ms_per_bundle"]
            label = "= the stages of the command, summed"
            print(f"| {label:<{width}} | {total:6.2f} ms | {total / 1e3 / start:11.3f}x | {'':>9} | {'':>10} |")
        label = f"- {name}" if name in in_command else name
        print(f"| {label:<{width}} | {wall / count * 1e3:6.2f} ms | {wall / count / start:11.3f}x | "
              f"{cpu / count * 1e3:6.2f} ms | {cpu / count / start_cpu:9.3f}x |")

if __name__ == "__main__":
    main()
