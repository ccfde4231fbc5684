"""The import-fidelity harness (issue 14, "Result"): does `acrl import train-sh` + `acrl-compile` reproduce a launch?

For one launch script it (a) runs the ORIGINAL with bash under recording stand-ins (tests/shims: ray, pkill, pgrep,
nvidia-smi; tests/shims/launch: python, ssh, sleep, hostname), from a temporary copy of its folder tree, with a PATH
of the stand-ins then /usr/bin:/bin only, so nothing real is stopped, killed or started; (b) imports it with
`acrl import train-sh SCRIPT --env NAME=VALUE ...` (only --env values) and compiles the spec with no edit, then runs
the bundle's train.sh under the same stand-ins; (c) compares the two recorded launches (tests/launch_compare.py).

    python tests/launch_fidelity.py --slime-dir DIR [--megatron-dir DIR] [--toolkit-dir DIR] [--json OUT]
                                    [--jobs N] [--patch-agentcore] [SCRIPT...]

DIR is a slime tree holding scripts/ (and slime/utils/arguments.py: slime's defaults, read by acrl's own reader
acrl.compiler._slime.default_facts). A tree with slime/ is each import's --slime-checkout: where it is a git
checkout at a commit acrl has facts for, the imports target that commit (`acrl import`'s default; a `git archive`
tree leaves them at agentcore-rl-toolkit's pin). --megatron-dir a Megatron-LM tree (megatron/training/arguments.py:
Megatron's defaults, which slime's parser includes, read by acrl.compiler._slime.megatron_defaults; without it, the
facts generated from the Megatron-LM slime HEAD uses, tests/data/megatron/); --toolkit-dir an agentcore-rl-toolkit
tree.
Both sides run with a dummy WANDB_API_KEY (so W&B flags that depend on a key appear on both), and the harness checks
that the dummy never reaches the spec, the bundle's files or any argv the bundle's run records.
--patch-agentcore adds a hand-written [agentcore] table to an imported spec of integration "agentcore" that has
none (a spec edit, so the result is NOT the Result criterion's: every such row says so; a script imported as
integration "slime" or "custom" needs no table and is never patched). The exit status is 0 when every
script reproduces, else 1.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import attrs
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from launch_compare import ALLOWED, CATEGORIES, Default, Launch, Mismatch, compare, counted, defaults_from, flags_of

from acrl.compiler._slime.default_facts import SLIME_ARGUMENTS_PY, parse_defaults
from acrl.compiler._slime.megatron_defaults import megatron_defaults
from acrl.compiler._slime.sglang_stack import sglang_at, slime_flag
from acrl.compiler._spec.tables import TOOLKIT_SLIME_COMMIT

SHIMS = Path(__file__).resolve().parent / "shims"
SHIM_NAMES = ("ray", "pkill", "pgrep", "nvidia-smi")
STANDIN_NAMES = ("python", "ssh", "sleep", "hostname", "pip")
# Variables bash itself sets in every child's environment: not the script's exports.
_BASH_SET = frozenset({"PWD", "OLDPWD", "SHLVL", "_"})
SYSTEM_PATH = "/usr/bin:/bin"
TOOLKIT_EXAMPLE = Path("src/agentcore_rl_toolkit/backends/slime/examples/math_agent")
# The [agentcore] table --patch-agentcore adds (the example spec's values): a spec edit, reported as such.
AGENTCORE_PATCH = ('\n[agentcore]  # added by launch_fidelity.py --patch-agentcore: NOT part of the import\n'
                   'runtime_arn = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/math_agent-a1B2c3D4e5"\n'
                   's3_bucket = "acrl-fidelity-rollouts"\n')
_RULE = re.compile(r"\((ACRL-[A-Z]+\d+)\)")
HEAD_IP = "10.11.12.13"  # what the ray shim reports as the head's address (ACRL_SHIM_NODE_IP)
# The values a user gives each script: what it reads from its environment, and what it computes from the machine
# (nvidia-smi's GPU count and NVLink: the stand-in reports 8 GPUs, all NVLink) that `acrl import` cannot evaluate.
# The multi-node scripts read MASTER_ADDR (the head's address) and a checkpoint folder with no default.
# A dummy W&B key (never a real one): the bundle turns W&B on only when its key variable is set at run time.
WANDB_DUMMY_KEY = "acrl-fidelity-dummy-wandb-key-not-a-secret-0000"
COMMON_ENV = {"DETECTED_GPUS": "8", "HAS_NVLINK": "1", "WANDB_API_KEY": WANDB_DUMMY_KEY}
# The Megatron-LM commit slime 624b824 uses, and the facts generated from it (acrl.compiler._slime.megatron_defaults).
MEGATRON_COMMIT = "1dcf0dafa884ad52ffb243625717a3471643e087"
DATA = Path(__file__).resolve().parent / "data"
MEGATRON_FACTS = DATA / "megatron" / MEGATRON_COMMIT / "megatron_defaults.json"
MULTI_NODE_ENV = {"MASTER_ADDR": HEAD_IP, "BASE_FOLDER": "/root", "BASE_DIR": "/root", "MLP_WORKER_0_HOST": HEAD_IP}
# run-glm4.7-30B-A3B.sh reads its model and data folder from BASE_DIR, with no default.
SCRIPT_ENV: dict[str, dict[str, str]] = {
    **{name: MULTI_NODE_ENV for name in (
        "run-qwen3-235B-A22B.sh", "run-qwen3-235B-A22B-sft.sh", "run-glm4.7-355B-A32B.sh", "run-glm5-744B-A40B.sh",
        "run-glm5.2-744B-A40B.sh", "run-kimi-k2-Instruct.sh", "run-kimi-k2-Thinking.sh", "run-deepseek-r1.sh",
        "run-qwen3-next-80B-A3B.sh", "run-qwen3.5-27B.sh", "run-qwen3.5-35B-A3B-sft.sh")},
    "run-glm4.7-30B-A3B.sh": {"BASE_DIR": "/root"},
    "train.sh": {"MODEL_DIR": "/root/Qwen3-4B", "TRAIN_DATA_PATH": "/root/gsm8k/train.jsonl",
                 "VAL_DATA_PATH": "/root/gsm8k/test.jsonl", "MODEL_TYPE": "qwen3-4B"},
}
# Scripts that source their model script relative to slime's root (${SCRIPT_DIR}/scripts/models/...): run, as
# their author does, from a copy at the root of the slime tree.
AT_SLIME_ROOT = frozenset({"run-qwen2.5-0.5B-reproducibility.sh"})


@attrs.frozen
class Side:
    """One run under the stand-ins."""

    returncode: int
    launch: Launch
    calls: tuple[dict[str, Any], ...]
    stderr_tail: str


@attrs.frozen
class Result:
    script: str
    env: dict[str, str]
    original: Side
    import_rc: int | None
    compile_rc: int | None
    bundle: Side | None
    mismatches: tuple[Mismatch, ...]
    patched: bool
    problem: str = ""  # why the import or compile failed, its last lines
    allowed: tuple[Mismatch, ...] = ()  # differences the criterion allows, each with why
    leaks: tuple[str, ...] = ()  # where the dummy W&B key was found: spec, bundle files, recorded argv
    target: str | None = None  # the imported spec's [slime] commit (its default where it writes none)

    @property
    def reproduces(self) -> bool:
        return (not self.patched and self.import_rc == 0 and self.compile_rc == 0 and not self.mismatches
                and not self.leaks)

    def as_json(self) -> dict[str, Any]:
        return {"script": self.script, "env": self.env, "import_rc": self.import_rc, "compile_rc": self.compile_rc,
                "patched_agentcore": self.patched, "reproduces": self.reproduces, "problem": self.problem,
                "original_rc": self.original.returncode, "original_launched": bool(self.original.launch.program),
                "bundle_rc": self.bundle and self.bundle.returncode,
                "counts": dict(Counter(m.category for m in self.mismatches)),
                "mismatches": [m.as_json() for m in self.mismatches],
                "allowed": [m.as_json() for m in self.allowed], "secret_leaks": list(self.leaks),
                "target": self.target}


def make_bin(root: Path) -> Path:
    """The stand-ins in one folder, each Python one's first line naming this interpreter (so that `env python3`
    never finds the python stand-in)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(parents=True)
    for name, source in [*((n, SHIMS / n) for n in SHIM_NAMES), *((n, SHIMS / "launch" / n) for n in STANDIN_NAMES),
                         ("python3", SHIMS / "launch" / "python"), ("pip3", SHIMS / "launch" / "pip")]:
        text = source.read_text(encoding="utf-8")
        if text.startswith("#!/usr/bin/env python3"):
            text = f"#!{sys.executable}" + text[len("#!/usr/bin/env python3"):]
        (bin_dir / name).write_text(text, encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def run_under_standins(argv: Sequence[str], *, bin_dir: Path, cwd: Path, work: Path, env: Mapping[str, str],
                       timeout: float = 60) -> Side:
    """Run ``argv`` (``bash SCRIPT``) with only the stand-ins and the system folders on PATH."""
    work.mkdir(parents=True, exist_ok=True)
    log = work / "calls.jsonl"
    log.unlink(missing_ok=True)
    full = {"PATH": f"{bin_dir}:{SYSTEM_PATH}", "HOME": str(work), "LANG": "C.UTF-8", "ACRL_SHIM_LOG": str(log),
            "ACRL_SHIM_NODE_IP": HEAD_IP, "ACRL_RUN_ID": "fidelity.1", "TMPDIR": str(work),
            "ACRL_SHIM_RECORD_ENV": "all", **env}
    started = time.time()
    try:
        proc = subprocess.run(list(argv), cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout,
                              check=False)
        rc, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, stderr = 124, str(exc.stderr or "")
    calls = tuple(json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()) if log.exists() else ()
    launch = launch_of(calls, full)
    launch = attrs.evolve(launch, custom_config=_custom_config(launch, cwd),
                          sglang_config=_sglang_config(launch, cwd, work, started))
    return Side(rc, launch, calls, "\n".join(stderr.splitlines()[-15:]))


def _custom_config(launch: Launch, cwd: Path) -> dict[str, Any] | None:
    """The --custom-config-path file the launch names, read (relative to the job's working_dir, else ``cwd``)."""
    words = flags_of(launch.program).get("--custom-config-path")
    if not words:
        return None
    folder = Path(launch.runtime_env.get("working_dir") or cwd)
    try:
        data = yaml.safe_load((folder / words[-1]).read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def _sglang_config(launch: Launch, cwd: Path, work: Path, started: float) -> tuple[Any] | None:
    """The --sglang-config file the launch names, read with yaml.safe_load (relative to the job's working_dir, else
    ``cwd``), as a 1-tuple; None where there is none or it cannot be read. A file the run made in the system's
    temporary folder (slime's run-glm5.2-744B-A40B.sh: `mktemp /tmp/...XXXXXX.yaml`, an absolute template that
    TMPDIR does not move) is removed once read."""
    words = flags_of(launch.program).get("--sglang-config")
    if not words:
        return None
    path = Path(launch.runtime_env.get("working_dir") or cwd) / words[-1]
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if path.parent.resolve() == Path(tempfile.gettempdir()).resolve() and not path.resolve().is_relative_to(
                work.resolve()) and path.is_file() and path.stat().st_mtime >= started - 1:
            path.unlink()
    except (OSError, yaml.YAMLError):
        return None
    return (data,)


def launch_of(calls: Sequence[Mapping[str, Any]], given: Mapping[str, str]) -> Launch:
    """The first `ray start --head` (its argv, and what the script exported to it: the variables it saw that
    ``given``, the run's environment, did not hold so) and the last `ray job submit` the stand-ins recorded."""
    starts = [c for c in calls if c["argv"][:2] == ["ray", "start"] and "--head" in c["argv"]]
    submits = [c["argv"][1:] for c in calls if c["argv"][:3] == ["ray", "job", "submit"]]
    env: dict[str, str] = starts[0].get("env", {}) if starts else {}
    exported = tuple(sorted((k, v) for k, v in env.items() if v is not None and given.get(k) != v
                            and k not in _BASH_SET))
    return Launch(tuple(starts[0]["argv"][1:]) if starts else None, tuple(submits[-1]) if submits else None,
                  exported, tuple(sorted((k, v) for k, v in env.items() if v is not None)))


def _acrl(args: Sequence[str], env: Mapping[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = ("import sys; from acrl.runtime._cli import main; sys.exit(main())" if args[0] != "acrl-compile" else
            "import sys; from acrl.compiler._cli.main import compile_main; sys.exit(compile_main())")
    rest = list(args[1:]) if args[0] == "acrl-compile" else list(args)
    return subprocess.run([sys.executable, "-c", code, *rest], cwd=cwd, env=dict(env), capture_output=True,
                          text=True, timeout=300, check=False)


def check_script(script: Path, tree: Path, *, slime_dir: Path | None, defaults: Mapping[str, Default],
                 env: Mapping[str, str], patch_agentcore: bool = False, work: Path) -> Result:
    """Run ``script`` (inside ``tree``, already a temporary copy) and its imported bundle; compare."""
    bin_dir = make_bin(work)
    original = run_under_standins(["bash", str(script)], bin_dir=bin_dir, cwd=script.parent, work=work / "original",
                                  env=env)
    tool_env = {"PATH": os.environ.get("PATH", SYSTEM_PATH), "HOME": str(work / "home"), "LANG": "C.UTF-8"}
    checkout = ["--slime-checkout", str(slime_dir)] if slime_dir is not None else []
    spec = work / "spec.toml"
    imported = _acrl(["import", "train-sh", str(script), *(f"--env={k}={v}" for k, v in env.items()),
                      "-o", str(spec), "--force", *checkout], tool_env, work)
    problem = "" if spec.exists() else _errors(imported.stderr)
    patched = False
    if patch_agentcore and spec.exists() and _needs_agentcore(spec.read_text(encoding="utf-8")):
        spec.write_text(spec.read_text(encoding="utf-8") + AGENTCORE_PATCH, encoding="utf-8")
        patched = True
    compile_rc: int | None = None
    bundle: Side | None = None
    if spec.exists():
        compiled = _acrl(["acrl-compile", str(spec), "-o", str(work / "bundle"), "--force", *checkout], tool_env, work)
        compile_rc = compiled.returncode
        if compile_rc:
            problem = _errors(compiled.stderr)
        else:
            bundle = run_under_standins(["bash", str(work / "bundle" / "train.sh")], bin_dir=bin_dir,
                                        cwd=work / "bundle", work=work / "bundle-run",
                                        env={**env, **joined_nodes(work / "bundle")})
    differences = compare(original.launch, bundle.launch, defaults, _alias(work / "bundle")) \
        if bundle is not None else []
    leaks = secret_leaks(env.get("WANDB_API_KEY", ""), spec, work / "bundle", bundle)
    return Result(script.name, dict(env), original, imported.returncode, compile_rc, bundle,
                  tuple(counted(differences)), patched, problem,
                  tuple(m for m in differences if m.category == ALLOWED), leaks, _target(spec))


def _target(spec: Path) -> str | None:
    """The slime commit the imported spec targets: its [slime] commit, else the key's default (None: no spec)."""
    if not spec.exists():
        return None
    slime = tomllib.loads(spec.read_text(encoding="utf-8")).get("slime", {})
    return str(slime.get("commit", TOOLKIT_SLIME_COMMIT))


def _alias(bundle_dir: Path) -> Callable[[str], tuple[str, ...]]:
    """flag -> its other names of the same dest at the slime commit the bundle targets (its manifest's): the flag a
    deprecated alias stands for, the other options of its sglang argument (launch_compare.same_dest)."""
    commit = json.loads((bundle_dir / "manifest.json").read_text(encoding="utf-8"))["slime"]["commit"]
    facts = sglang_at(commit)

    def names(flag: str) -> tuple[str, ...]:
        argument = facts.flags.get(flag) if facts is not None else None
        same = [f for f, a in facts.flags.items() if a is argument] if facts is not None and argument else []
        return tuple(f for f in dict.fromkeys([slime_flag(commit, flag), *same]) if f != flag)
    return names


def joined_nodes(bundle_dir: Path) -> dict[str, str]:
    """The ray stand-in's answer to `ray list nodes` for a bundle whose head waits for other nodes (join.sh): every
    node of its placement joined, as the multi-node script's ssh loop would have started them."""
    derived = json.loads((bundle_dir / "manifest.json").read_text(encoding="utf-8"))["derived"]
    nodes, per_node = derived.get("nodes") or 1, derived.get("gpus_per_node") or 8
    return {"ACRL_SHIM_NODES": ",".join([str(per_node)] * nodes)} if nodes > 1 else {}


def secret_leaks(secret: str, spec: Path, bundle_dir: Path, bundle: Side | None) -> tuple[str, ...]:
    """Where ``secret`` (the dummy W&B key both runs were given) appears: the imported spec, a file of the bundle,
    an argv (the runtime-env JSON of `ray job submit` included) that the bundle's run recorded."""
    if not secret:
        return ()
    found = [str(p.relative_to(spec.parent)) for p in (spec, *sorted(bundle_dir.rglob("*")))
             if p.is_file() and secret.encode() in p.read_bytes()]
    found += [f"argv of {' '.join(c['argv'][:3])}" for c in (bundle.calls if bundle else ())
              if any(secret in word for word in c["argv"])]
    return tuple(dict.fromkeys(found))


def _needs_agentcore(spec_text: str) -> bool:
    """Whether the imported spec chose integration "agentcore" (the default) and has no [agentcore] table: only then
    does --patch-agentcore add one (a slime or custom spec compiles without, and refuses one: ACRL-I002)."""
    try:
        data = tomllib.loads(spec_text)
    except tomllib.TOMLDecodeError:
        return False
    experiment = data.get("experiment")
    integration = experiment.get("integration", "agentcore") if isinstance(experiment, dict) else "agentcore"
    return integration == "agentcore" and "agentcore" not in data


def _errors(stderr: str) -> str:
    """The errors' rule ids (or their text where they have none), as a short list."""
    lines = [line for line in stderr.splitlines() if ": error: " in line]
    ids = [m.group(1) if (m := _RULE.search(line)) else line.split(": error: ", 1)[1] for line in lines]
    return "; ".join(dict.fromkeys(ids)) or "\n".join(stderr.splitlines()[-3:])


def slime_scripts(slime_dir: Path) -> list[str]:
    return sorted(p.name for p in (slime_dir / "scripts").glob("run-*.sh"))


def check_slime_script(name: str, slime_dir: Path, defaults: Mapping[str, Default], *, patch_agentcore: bool,
                       work: Path, env: Mapping[str, str] | None = None) -> Result:
    """One of slime's scripts/run-*.sh, run from a copy of slime's scripts/ (and, for AT_SLIME_ROOT, from a copy at
    the tree's root)."""
    tree = work / "slime"
    shutil.copytree(slime_dir / "scripts", tree / "scripts", symlinks=True)
    script = tree / "scripts" / name
    if name in AT_SLIME_ROOT:
        script = Path(shutil.copy(script, tree / name))
    values = {**COMMON_ENV, **SCRIPT_ENV.get(name, {}), **(env or {})}
    return check_script(script, tree, slime_dir=slime_dir if (slime_dir / "slime").is_dir() else None,
                        defaults=defaults, env=values, patch_agentcore=patch_agentcore, work=work / "run")


def check_toolkit_example(toolkit_dir: Path, slime_dir: Path, defaults: Mapping[str, Default], *,
                          patch_agentcore: bool, work: Path) -> Result:
    """The toolkit's examples/math_agent/train.sh, from a copy of its folder with config.yaml made from
    config.yaml.example as its comment says (the ARN and bucket filled in), SLIME_DIR a copy of slime's scripts."""
    tree = work / "toolkit"
    shutil.copytree(toolkit_dir / TOOLKIT_EXAMPLE, tree)
    example = (tree / "config.yaml.example").read_text(encoding="utf-8")
    (tree / "config.yaml").write_text(
        example.replace("arn:aws:bedrock-agentcore:<region>:<account-id>:runtime/<runtime-name>-<id>",
                        "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/math_agent-a1B2c3D4e5")
        .replace("your-s3-bucket-name", "acrl-fidelity-rollouts"), encoding="utf-8")
    shutil.copytree(slime_dir / "scripts", work / "slime" / "scripts", symlinks=True)
    values = {**COMMON_ENV, **SCRIPT_ENV["train.sh"], "SLIME_DIR": str(work / "slime")}
    result = check_script(tree / "train.sh", tree, slime_dir=slime_dir if (slime_dir / "slime").is_dir() else None,
                          defaults=defaults, env=values, patch_agentcore=patch_agentcore, work=work / "run")
    return attrs.evolve(result, script="toolkit:math_agent/train.sh")


def load_defaults(slime_dir: Path, megatron_dir: Path | None) -> tuple[dict[str, Default], str]:
    """slime's and Megatron-LM's flag defaults (slime's winning: its reset_arg resets Megatron's), and where they
    were read from. slime's from the tree's slime/utils/arguments.py by acrl's reader (nothing where the tree has
    no slime/); Megatron's from ``megatron_dir``, else the generated facts of MEGATRON_COMMIT."""
    slime_file = slime_dir / SLIME_ARGUMENTS_PY
    slime = parse_defaults(slime_file.read_text(encoding="utf-8")) if slime_file.is_file() else {}
    if megatron_dir is not None:
        megatron, where = megatron_defaults(megatron_dir), f"Megatron-LM defaults read from {megatron_dir}"
    else:
        megatron = json.loads(MEGATRON_FACTS.read_text(encoding="utf-8"))["flags"]
        where = f"Megatron-LM defaults of {MEGATRON_COMMIT[:8]} ({MEGATRON_FACTS.relative_to(DATA.parent.parent)})"
    source = f"slime defaults read from {slime_file}" if slime else "no slime defaults (no slime/ in --slime-dir)"
    return defaults_of(slime, megatron), f"{source}; {where}"


def defaults_of(slime: Mapping[str, Mapping[str, Any]],
                megatron: Mapping[str, Mapping[str, Any]]) -> dict[str, Default]:
    """{flag: Default} of slime's facts (acrl.compiler._slime.default_facts) over Megatron-LM's
    (acrl.compiler._slime.megatron_defaults), each saying where it was read."""
    cited = {flag: {**fact, "via": f"{SLIME_ARGUMENTS_PY}:{fact['line']}"
                    + (" (reset_arg)" if fact.get("via") == "reset_arg" else "")} for flag, fact in slime.items()}
    return defaults_from(megatron, cited, sources=("Megatron-LM", "slime"))


def table(results: Sequence[Result]) -> str:
    """The markdown table: script, import and compile exit, mismatches by category, allowed differences."""
    counted_categories = [c for c in CATEGORIES if c != ALLOWED]
    short = {c: c.replace("flag-", "").replace("runtime-env", "renv") for c in counted_categories}
    head = ["script", "import", "compile", *short.values(), "allowed", "secret leaks", "reproduces",
            "why it does not compile"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results:
        counts = Counter(m.category for m in r.mismatches)
        verdict = "yes" if r.reproduces else "no (patched spec)" if r.patched else "no"
        cells = [r.script, _rc(r.import_rc), _rc(r.compile_rc),
                 *(str(counts.get(c, "")) if r.bundle else "-" for c in counted_categories),
                 str(len(r.allowed)) if r.bundle else "-", str(len(r.leaks) or ""), verdict,
                 r.problem.replace("|", "/")]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def details(results: Sequence[Result]) -> str:
    """Each script's mismatches and allowed differences, one a line."""
    lines = []
    for r in results:
        lines.append(f"{r.script}:")
        lines += [f"  {m.category}: {m.subject}: original {m.original!r}, bundle {m.bundle!r}"
                  + (f" ({m.why})" if m.why else "") for m in r.mismatches]
        lines += [f"  allowed: {m.subject}: {m.why}" for m in r.allowed]
        lines += [f"  SECRET LEAK: the dummy W&B key is in {where}" for where in r.leaks]
    return "\n".join(lines)


def _status(result: Result) -> str:
    if result.bundle is None:
        return f"import exit {result.import_rc}, compile exit {_rc(result.compile_rc)}: {result.problem}"
    return (f"{len(result.mismatches)} mismatches, {len(result.allowed)} allowed"
            + (f", {len(result.leaks)} SECRET LEAKS" if result.leaks else "")
            + (" (spec patched)" if result.patched else ""))


def _rc(rc: int | None) -> str:
    return "-" if rc is None else str(rc)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slime-dir", type=Path, required=True, help="a slime tree with scripts/ (and slime/)")
    parser.add_argument("--megatron-dir", type=Path,
                        help=f"a Megatron-LM tree (default: the facts of {MEGATRON_COMMIT[:8]} in tests/data)")
    parser.add_argument("--toolkit-dir", type=Path, help="an agentcore-rl-toolkit tree: also its example train.sh")
    parser.add_argument("--json", type=Path, help="write every mismatch here")
    parser.add_argument("--jobs", type=int, default=2, help="scripts checked at once (default 2)")
    parser.add_argument("--details", action="store_true", help="also print each mismatch and allowed difference")
    parser.add_argument("--patch-agentcore", action="store_true",
                        help="add a hand-written [agentcore] table to specs without one (a spec EDIT: reported)")
    parser.add_argument("scripts", nargs="*", help="only these run-*.sh (default: all)")
    args = parser.parse_args(argv)
    if not (args.slime_dir / "scripts").is_dir():
        parser.error(f"--slime-dir {args.slime_dir}: no scripts/ folder there (a slime checkout: `git clone "
                     "--shared --no-checkout SLIME_GIT DIR && git -C DIR checkout --detach COMMIT`)")
    if args.megatron_dir is not None and not (args.megatron_dir / "megatron" / "training" / "arguments.py").is_file():
        parser.error(f"--megatron-dir {args.megatron_dir}: no megatron/training/arguments.py there (a Megatron-LM "
                     "checkout, or `git archive COMMIT megatron | tar -x -C DIR`)")
    if args.toolkit_dir is not None and not (args.toolkit_dir / TOOLKIT_EXAMPLE / "train.sh").is_file():
        parser.error(f"--toolkit-dir {args.toolkit_dir}: no {TOOLKIT_EXAMPLE}/train.sh there")
    defaults, read_from = load_defaults(args.slime_dir, args.megatron_dir)
    print(f"defaults: {read_from}", file=sys.stderr)
    names = args.scripts or slime_scripts(args.slime_dir)
    with tempfile.TemporaryDirectory(prefix="acrl-fidelity-") as tmp, \
            ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        futures = [pool.submit(check_slime_script, name, args.slime_dir, defaults,
                               patch_agentcore=args.patch_agentcore, work=Path(tmp) / str(i))
                   for i, name in enumerate(names)]
        if args.toolkit_dir is not None:
            futures.append(pool.submit(check_toolkit_example, args.toolkit_dir, args.slime_dir, defaults,
                                       patch_agentcore=args.patch_agentcore, work=Path(tmp) / "toolkit"))
        results = []
        for future in futures:  # in order, each printed as it is ready
            results.append(future.result())
            print(f"{results[-1].script}: {_status(results[-1])}", file=sys.stderr)
    if args.patch_agentcore:
        print("NOTE: --patch-agentcore: specs without [agentcore] were EDITED before compiling; these rows do not "
              "measure the Result criterion (import + compile with no edit).")
    print(table(results))
    print(f"\n{sum(r.reproduces for r in results)} of {len(results)} reproduce the original launch")
    if args.details:
        print("\n" + details(results))
    if args.json is not None:
        args.json.write_text(json.dumps({"patched_agentcore": args.patch_agentcore, "defaults": len(defaults),
                                         "defaults_from": read_from, "results": [r.as_json() for r in results]},
                                        indent=1) + "\n", encoding="utf-8")
    return 0 if all(r.reproduces for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
