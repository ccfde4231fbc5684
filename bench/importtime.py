"""`python -X importtime` of a command, as medians over --runs processes (one run is too noisy).

    python bench/importtime.py [--runs 21] [--depth 2] [--min-ms 0.3] -- acrl --help

The command's first word is looked up next to this python (bin/acrl of a regular install) and run
by this python with -X importtime. Prints cumulative and self milliseconds per module, indented as
Python nests the imports.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--depth", type=int, default=2, help="deepest nesting level shown")
    parser.add_argument("--min-ms", type=float, default=0.3, help="hide modules cheaper than this, cumulative")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = [c for c in args.command if c != "--"]
    if not command:
        parser.error("give a command, e.g. -- acrl --help")
    script = Path(sys.executable).parent / command[0]
    program = [str(script)] if script.exists() else [shutil.which(command[0]) or command[0]]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    order: list[tuple[int, str]] = []
    times: dict[tuple[int, str], tuple[list[int], list[int]]] = {}
    for _ in range(args.runs):
        stderr = subprocess.run([sys.executable, "-X", "importtime", *program, *command[1:]],
                                capture_output=True, text=True, env=env).stderr
        for line in stderr.splitlines():
            if not line.startswith("import time:") or "self [us]" in line:
                continue
            self_us, cumulative_us, name = line.split(":", 1)[1].split("|")
            key = ((len(name) - len(name.lstrip())) // 2, name.strip())
            if key not in times:
                order.append(key)
                times[key] = ([], [])
            times[key][0].append(int(self_us))
            times[key][1].append(int(cumulative_us))
    print(f"{'cumulative':>10} {'self':>8}  module   (ms, medians of {args.runs} runs)")
    for depth, name in order:
        self_us, cumulative_us = times[(depth, name)]
        cumulative = statistics.median(cumulative_us) / 1e3
        if depth <= args.depth and cumulative >= args.min_ms:
            print(f"{cumulative:10.2f} {statistics.median(self_us) / 1e3:8.2f}  {'  ' * depth}{name}")


if __name__ == "__main__":
    main()
