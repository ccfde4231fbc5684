"""Compile time of a 1,000-point sweep, per bundle, as a ratio to a bare interpreter start.

    python bench/sweep_bench.py [--points 1000] [--runs 5] [--dir DIR] [--json]

The sweep is specs/gsm8k-qwen2.5-3b-smoke.toml with a 10 x 10 x 10 grid (rollout.batch_size,
train.lr, rollout.temperature): 1,000 points. Timed, each --runs times (the median is reported):

- "compile": in one process, parse the spec once, then overlay, structure, validate and render every
  point (sweep_points + compile_points): bundles in memory, nothing written;
- "compile + write": the same, then write_sweep into an empty directory (1,000 bundle directories,
  each written atomically, and sweep.json);
- "acrl-compile": the whole command, as a fresh process (interpreter start and imports included),
  into an empty directory.
- "files alone": the floor any tool pays on this file system: the same bytes written with plain
  mkdir / open / write / rename, one directory per point, nothing compiled. "compile + write"
  minus this is acrl's own share.

Each is reported in ms per bundle and as a ratio of that to `python -c pass` (the median of --runs
starts, measured in the same run). The compiled-template cache points at a temporary directory,
filled by an untimed first round. Bundles are written under --dir (default: the system's temporary
directory), so that a disk and a RAM file system (/dev/shm) can be compared: creating a file is
most of the cost of writing a bundle.
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


def sweep_spec(points: int) -> str:
    side = round(points ** (1 / 3))
    batch = [8 * (i + 1) for i in range(side)]
    lr = [round(1e-7 * (i + 1), 9) for i in range(side)]
    temperature = [round(0.1 * (i + 1), 2) for i in range(side)]
    grid = (f'grid = {{ "rollout.batch_size" = {batch}, "train.lr" = {lr}, '
            f'"rollout.temperature" = {temperature} }}')
    return SMOKE.read_text(encoding="utf-8") + f"\n[sweep]\n{grid}\n"


def in_process(spec: Path, out: Path | None) -> tuple[float, int]:
    from acrl.compiler import _sweep
    from acrl.compiler._layers import load_spec

    started = time.perf_counter()
    source = load_spec(spec)
    base, points = _sweep.sweep_points(source)
    results = _sweep.compile_points(base, points)
    assert all(r.bundle is not None for r in results), [r.diagnostics for r in results if r.bundle is None][:1]
    if out is not None:
        _sweep.write_sweep(str(out), source.name, results)
    return time.perf_counter() - started, len(results)


def files_alone(spec: Path, out: Path) -> float:
    """Write the bundles' bytes the plainest way (a directory per point, then a rename): the file
    system's own cost, the baseline of "compile + write"."""
    from acrl.compiler import _sweep
    from acrl.compiler._layers import load_spec

    base, points = _sweep.sweep_points(load_spec(spec))
    bundles = [r.bundle.files for r in _sweep.compile_points(base, points) if r.bundle is not None]
    out.mkdir()
    started = time.perf_counter()
    for i, files in enumerate(bundles):
        staging = out / f".{i}.tmp"
        staging.mkdir()
        for name, data in files.items():
            with open(staging / name, "wb") as f:
                f.write(data)
        staging.rename(out / str(i))
    return time.perf_counter() - started


def wall(argv: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--points", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--dir", help="where to write the bundles (default: the system's temporary directory)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    scratch = Path(tempfile.mkdtemp(prefix="acrl-sweep-bench-", dir=args.dir))
    os.environ["XDG_CACHE_HOME"] = str(scratch / "cache")
    try:
        spec = scratch / "sweep.toml"
        spec.write_text(sweep_spec(args.points), encoding="utf-8")
        compile_bin = Path(sys.executable).parent / "acrl-compile"
        in_process(spec, None)  # untimed: imports, templates compiled and cached
        bare, compiled, written, command, floor = [], [], [], [], []
        count = 0
        for n in range(args.runs):
            bare.append(wall([sys.executable, "-c", "pass"]))
            seconds, count = in_process(spec, None)
            compiled.append(seconds)
            written.append(in_process(spec, scratch / f"out-{n}")[0])
            command.append(wall([str(compile_bin), str(spec), "-o", str(scratch / f"cli-{n}")]))
            floor.append(files_alone(spec, scratch / f"floor-{n}"))
            for name in ("out", "cli", "floor"):
                shutil.rmtree(scratch / f"{name}-{n}")
        start = statistics.median(bare)
        rows = {name: statistics.median(times) / count for name, times in
                (("compile", compiled), ("compile + write", written), ("acrl-compile", command),
                 ("files alone", floor))}
        report = {"points": count, "runs": args.runs, "dir": str(scratch), "bare_start_ms": start * 1000,
                  "per_bundle_ms": {k: v * 1000 for k, v in rows.items()},
                  "per_bundle_ratio_to_bare_start": {k: v / start for k, v in rows.items()}}
        if args.json:
            print(json.dumps(report, indent=2))
            return
        print(f"{count} points, median of {args.runs} runs, written under {scratch.parent}; bare interpreter "
              f"start (python -c pass): {start * 1000:.1f} ms")
        print(f"{'':<18} {'ms/bundle':>10} {'x bare start':>13}")
        for name, seconds in rows.items():
            print(f"{name:<18} {seconds * 1000:>10.2f} {seconds / start:>13.3f}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
