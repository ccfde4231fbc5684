"""The executor's own overhead: `acrl run BUNDLE` (GPU and AWS checks skipped) against `bash
BUNDLE/train.sh`, both with the test shims (tests/shims: ray, pkill, pgrep, nvidia-smi) first on
PATH, so that no cluster is involved and the difference is acrl's: start-up, manifest verification,
preflight (every local check: slime's parser and the rollout functions run on stand-ins, the model
check on a real config.json, the dataset check on --lines lines), the run record and the output
copy. Also `acrl run --dry-run` alone. Medians over --runs, interleaved.

    python bench/run_overhead.py [--runs 15] [--lines 10000]
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

import tomli_w

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from standins import write_standin_slime  # noqa: E402

from acrl.compiler import compile_spec, write  # noqa: E402
from conftest import MINIMAL, merge  # noqa: E402

SKIPPED = ("gpus", "aws-identity", "s3-bucket", "agent-runtime")  # the measure: no GPU, no AWS


def project(root: Path, lines: int) -> Path:
    write_standin_slime(root / "slime")
    (root / "megatron").mkdir()
    (root / "model").mkdir()
    shutil.copyfile(REPO / "tests" / "fixtures" / "hf" / "Qwen2.5-3B-Instruct" / "config.json",
                    root / "model" / "config.json")
    with open(root / "train.jsonl", "w", encoding="utf-8") as f:
        for i in range(lines):
            f.write(json.dumps({"prompt": f"What is {i} + {i}?", "metadata": {"answer": str(2 * i)}}) + "\n")
    spec = merge(MINIMAL, {"model": {"dir": str(root / "model")}, "data": {"path": str(root / "train.jsonl")},
                           "slime": {"dir": str(root / "slime"), "megatron_dir": str(root / "megatron")},
                           "cluster": {"address": "http://127.0.0.1:8265"}})
    (root / "spec.toml").write_text(tomli_w.dumps(spec))
    write(compile_spec(root / "spec.toml"), root / "bundle")
    return root / "bundle"


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--lines", type=int, default=10_000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        bundle = project(root, options.lines)
        shims = root / "shims"
        shims.mkdir()
        for name in ("ray", "pkill", "pgrep", "nvidia-smi"):
            shutil.copyfile(REPO / "tests" / "shims" / name, shims / name)
            (shims / name).chmod(0o755)
        env = {**os.environ, "PATH": os.pathsep.join([str(shims), os.environ.get("PATH", "")]),
               "ACRL_SHIM_LOG": str(root / "shim.jsonl"), "ACRL_RUN_ID": "bench"}
        acrl = [sys.executable, "-m", "acrl.runtime._cli", "run", str(bundle), "--runs-dir", str(root / "runs"),
                *(f"--skip={name}" for name in SKIPPED)]
        commands = {"bash train.sh": ["bash", str(bundle / "train.sh")], "acrl run": acrl,
                    "acrl run --dry-run": [*acrl, "--dry-run"]}
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(options.runs):
            for name, argv in commands.items():
                times[name].append(timed(argv, env))
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, value in medians.items():
        print(f"{name:<20} {value * 1000:8.1f} ms (median of {options.runs})")
    print(f"{'overhead':<20} {(medians['acrl run'] - medians['bash train.sh']) * 1000:8.1f} ms "
          f"(acrl run - bash train.sh; dataset of {options.lines} lines)")


if __name__ == "__main__":
    main()
