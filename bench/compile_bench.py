"""Start-up and compile time of acrl, as ratios to a bare interpreter start measured in the same run.

    python bench/compile_bench.py [--runs 21] [--json] [--against OTHER_VENV ...]

Each command runs --runs times as a fresh process; the median wall time (and the median CPU time,
user + sys, which other load on the machine disturbs less) is reported, and each wall time is
divided by the median of `python -c pass` measured in the same run. Commands are interleaved, so
that machine noise hits all of them alike. Run it with the python of a regular (non-editable)
install: an editable install adds an import hook to every start. --against times the acrl
commands of other installs too (e.g. one of the previous version), interleaved with this one.

Compiled templates and whole compiles are cached in $XDG_CACHE_HOME/acrl (docs/performance.md): the
bench points XDG_CACHE_HOME at a temporary directory, which the first, untimed round fills ("warm").
It times a spec compiled before (a compile-cache hit), an edited spec (a miss: each run compiles a
copy with one more comment line, so the bytes differ), and a compile with both caches empty every
time ("cold", as on a machine's first compile).

What each cache buys is read off rows of the same run: the help cache, `acrl --help` against
`acrl --help, nothing kept`; the compile cache, `compiled before` against `--no-cache` (which neither
reads nor writes it) and `edited` (a miss: the lookup and the store on top of a compile); the
template cache, `edited` against `both caches empty`. Every row is given as a ratio to the bare
start and to importing the compiler's dependencies (attrs, cattrs, Jinja2, PyYAML, tomli-w,
tomllib: the floor of any compile that misses the compile cache), and its CPU time (user + sys)
as a ratio to the bare start's, which load from other work on the machine disturbs less.
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
HF_CONFIG = REPO / "tests" / "fixtures" / "hf" / "Qwen2.5-3B-Instruct" / "config.json"
BARE = "bare interpreter (python -c pass)"
FLOOR = "import the compiler's dependencies"
INVALID_SPEC = SMOKE.read_text(encoding="utf-8").replace("[data]", "[data]\nbatch_sise = 3", 1)


class Command:
    def __init__(self, argv: list[str], *, exit_code: int = 0, fresh_cache: bool = False) -> None:
        self.argv, self.exit_code, self.fresh_cache = argv, exit_code, fresh_cache
        self.wall: list[float] = []
        self.cpu: list[float] = []


def commands(bins: list[Path], scratch: Path, runs: int) -> dict[str, Command]:
    py = sys.executable
    (scratch / "invalid.toml").write_text(INVALID_SPEC, encoding="utf-8")
    smoke = SMOKE.read_text(encoding="utf-8")
    for n in range(runs + 1):  # a different spec for every run of "edited"
        (scratch / f"edited-{n}.toml").write_text(smoke + f"# edit {n}\n", encoding="utf-8")
    # The same spec, checked against the checkpoint's config.json (issue 3: the check must stay within the
    # compile-time target): the published Qwen2.5-3B-Instruct config, dated back so the cache may trust it.
    shutil.copy(HF_CONFIG, scratch / "config.json")
    os.utime(scratch / "config.json", (time.time() - 60, time.time() - 60))
    with_config = smoke.replace("[model]\n", '[model]\nhf_config = "config.json"\n', 1)
    (scratch / "with-config.toml").write_text(with_config, encoding="utf-8")
    for n in range(runs + 1):
        (scratch / f"with-config-{n}.toml").write_text(with_config + f"# edit {n}\n", encoding="utf-8")
    cmds = {
        BARE: Command([py, "-c", "pass"]),
        # The floor of `acrl --help`: what pip's console-script wrapper (re) and argparse's help
        # (argparse, gettext's locale, textwrap) import, whatever the program.
        "import what any argparse --help needs": Command([py, "-c", "import re, argparse, locale, textwrap"]),
        FLOOR:
            Command([py, "-c", "import attrs, cattrs, jinja2, yaml, tomli_w, tomllib"]),
    }
    for i, bin_dir in enumerate(bins):
        tag = "" if i == 0 else f" [{bin_dir.parent.name}]"
        compile_ = [str(bin_dir / "acrl-compile"), str(SMOKE), "-o"]
        edited = [str(bin_dir / "acrl-compile"), str(scratch / "edited-{n}.toml"), "-o"]
        cmds.update({
            f"acrl --help{tag}": Command([str(bin_dir / "acrl"), "--help"]),
            f"acrl --help, nothing kept (argparse formats it){tag}":
                Command([str(bin_dir / "acrl"), "--help"], fresh_cache=True),
            f"acrl-compile smoke spec, compiled before (new bundle){tag}":
                Command([*compile_, str(scratch / f"new{i}-{{n}}")]),
            f"acrl-compile smoke spec, compiled before (bundle up to date){tag}":
                Command([*compile_, str(scratch / f"same{i}")]),
            f"acrl-compile edited smoke spec (new bundle){tag}": Command([*edited, str(scratch / f"edit{i}-{{n}}")]),
            f"acrl-compile smoke spec + config.json check, compiled before{tag}":
                Command([str(bin_dir / "acrl-compile"), str(scratch / "with-config.toml"), "-o",
                         str(scratch / f"cfg{i}-{{n}}")]),
            f"acrl-compile edited smoke spec + config.json check{tag}":
                Command([str(bin_dir / "acrl-compile"), str(scratch / "with-config-{n}.toml"), "-o",
                         str(scratch / f"cfgedit{i}-{{n}}")]),
            f"acrl-compile --no-cache smoke spec (compile cache off, templates kept){tag}":
                Command([str(bin_dir / "acrl-compile"), "--no-cache", str(SMOKE), "-o", str(scratch / f"nc{i}-{{n}}")]),
            f"acrl-compile smoke spec, both caches empty{tag}":
                Command([*compile_, str(scratch / f"cold{i}-{{n}}")], fresh_cache=True),
            f"acrl-compile invalid spec (exit 1){tag}":
                Command([str(bin_dir / "acrl-compile"), str(scratch / "invalid.toml"), "-o", str(scratch / "x")],
                        exit_code=1),
        })
    return cmds


def run_once(cmd: Command, n: int, env: dict[str, str], scratch: Path) -> tuple[float, float]:
    if cmd.fresh_cache:
        env = {**env, "XDG_CACHE_HOME": tempfile.mkdtemp(prefix="cache-", dir=scratch)}
    argv = [a.replace("{n}", str(n)) for a in cmd.argv]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if proc.returncode != cmd.exit_code:
        sys.exit(f"{' '.join(argv)} exited {proc.returncode}, expected {cmd.exit_code}:\n{stderr}")
    return wall, usage.ru_utime + usage.ru_stime


def measure(runs: int, bins: list[Path]) -> dict[str, Command]:
    scratch = Path(tempfile.mkdtemp(prefix="acrl-bench-"))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["XDG_CACHE_HOME"] = str(scratch / "cache")
    try:
        cmds = commands(bins, scratch, runs)
        for n in range(runs + 1):
            for cmd in cmds.values():
                wall, cpu = run_once(cmd, n, env, scratch)
                if n:  # the first round warms the file cache, the .pyc files and the template cache
                    cmd.wall.append(wall)
                    cmd.cpu.append(cpu)
        return cmds
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--against", action="append", default=[], type=Path, metavar="VENV",
                        help="also time the acrl commands installed in this virtual environment")
    args = parser.parse_args()
    bins = [Path(sys.executable).parent, *(venv / "bin" for venv in args.against)]
    for bin_dir in bins:
        for script in ("acrl", "acrl-compile"):
            if not (bin_dir / script).exists():
                sys.exit(f"{script} is not installed in {bin_dir}: pip install . first")
    cmds = measure(args.runs, bins)
    base = statistics.median(cmds[BARE].wall)
    floor = statistics.median(cmds[FLOOR].wall)
    base_cpu = statistics.median(cmds[BARE].cpu)
    rows = {name: (statistics.median(c.wall), statistics.median(c.cpu)) for name, c in cmds.items()}
    if args.json:
        print(json.dumps({name: {"median_ms": round(w * 1e3, 2), "cpu_ms": round(c * 1e3, 2),
                                 "ratio": round(w / base, 2), "ratio_to_dependency_import": round(w / floor, 2),
                                 "cpu_ratio": round(c / base_cpu, 2)}
                          for name, (w, c) in rows.items()}, indent=2))
        return
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, median of {args.runs} runs each; "
          f"'x deps' is the ratio to importing the compiler's dependencies\n")
    width = max(len(name) for name in rows)
    print(f"| {'command':<{width}} | {'median':>9} | {'x bare start':>12} | {'x deps':>6} | {'CPU':>9} | "
          f"{'CPU x bare':>10} |")
    print(f"|{'-' * (width + 2)}|{'-' * 10}:|{'-' * 13}:|{'-' * 7}:|{'-' * 10}:|{'-' * 11}:|")
    for name, (wall, cpu) in rows.items():
        print(f"| {name:<{width}} | {wall * 1e3:6.1f} ms | {wall / base:11.2f}x | {wall / floor:5.2f}x | "
              f"{cpu * 1e3:6.1f} ms | {cpu / base_cpu:9.2f}x |")


if __name__ == "__main__":
    main()
