"""The preflight checks that run code in the target Python, the ``python3`` train.sh runs slime with:

- ``slime-parser``: slime's own parse_args on the exact argv train.sh will submit
  (runtime/_preflight/slime_parser.py). The argv comes from train.sh itself, run with ACRL_PRINT_ARGV=1: the
  W&B flags and --train-env-vars are only decided there, at launch, so train.sh stays the single
  description of the launch and nothing here re-derives it.
- ``rollout-module``: every dotted function path the bundle hands slime (rollout function, reward
  post-processing, custom generate and reward functions, each rollout sample hook) imports and names a
  callable, with the import path the Ray job has (slime's dir, the bundle as working_dir, Megatron).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import TYPE_CHECKING

from .outcome import CheckFailed, CheckSkipped
from .slime_parser import check_slime_parser

if TYPE_CHECKING:
    from .bundle_info import BundleInfo

TIMEOUT_S = 120.0

# spec key -> slime flag, for every function slime loads by dotted path (a list key: one per item, slime's
# load_function on each --rollout-sample-hook-path, slime/rollout/sample_hooks.py:24-26 at 624b824)
FUNCTION_KEYS = (
    ("rollout.function_path", "--rollout-function-path"),
    ("rollout.reward_post_process_path", "--custom-reward-post-process-path"),
    ("rollout.custom_generate_function_path", "--custom-generate-function-path"),
    ("rollout.custom_rm_path", "--custom-rm-path"),
    ("rollout.sample_hook_paths", "--rollout-sample-hook-path"),
)


def train_sh_env(info: BundleInfo) -> dict[str, str]:
    """The environment `acrl run` gives train.sh (--address reaches it as ACRL_RAY_ADDRESS; --resume as
    ACRL_RESUME=required, which makes train.sh refuse to start when there is no checkpoint to resume)."""
    env = dict(os.environ)
    if info.address:
        env["ACRL_RAY_ADDRESS"] = info.address
    if info.resume:
        env["ACRL_RESUME"] = "required"
    return env


def entrypoint_argv(info: BundleInfo) -> list[str]:
    """The exact command train.sh would submit (``python3 ENTRYPOINT FLAGS...``), as train.sh prints
    it with ACRL_PRINT_ARGV=1, before it touches any process or Ray. Read once per bundle: the checks
    that need it and the run record share it (``info.memo``)."""
    with info.memo_lock:
        if "argv" not in info.memo:
            info.memo["argv"] = _entrypoint_argv(info)
        return list(info.memo["argv"])


def _entrypoint_argv(info: BundleInfo) -> list[str]:
    edited = sorted({"train.sh", "model_args.sh", "manifest.json"} & set(info.modified))
    if edited:  # a train.sh edited by hand may not honour ACRL_PRINT_ARGV: running it could launch the job
        raise CheckSkipped(f"{', '.join(edited)} modified (--allow-modified): train.sh is not run to read its argv")
    env = train_sh_env(info) | {"ACRL_PRINT_ARGV": "1"}
    try:
        out = subprocess.run(["bash", str(info.path / "train.sh")], env=env, capture_output=True,
                             stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CheckFailed(f"cannot run train.sh to read its argv: {exc}", "run `ACRL_PRINT_ARGV=1 bash "
                          f"{info.path / 'train.sh'}` by hand to see why") from None
    words = out.stdout.split(b"\0")
    if out.returncode != 0 or len(words) < 3 or words[-1] != b"":
        err = out.stderr.decode("utf-8", "replace").strip().splitlines()
        errors = [line for line in err if line.startswith("acrl: error: ")]
        if out.returncode == 2 and errors:  # its checkpoint block refused to start (the checkpoint row says why)
            raise CheckFailed(f"train.sh refuses to start (exit 2): {errors[-1].removeprefix('acrl: error: ')}",
                              "see the checkpoint check's row for the fix")
        raise CheckFailed(f"train.sh did not print its argv (exit {out.returncode}"
                          f"{': ' + err[-1] if err else ''})",
                          "compile the bundle again with this acrl (ACRL_PRINT_ARGV is new in train.sh)")
    return [w.decode("utf-8", "surrogateescape") for w in words[:-1]]


def target_python(command: str) -> str:
    """The interpreter train.sh's command names, as PATH resolves it here."""
    found = shutil.which(command)
    if found is None:
        raise CheckFailed(f"{command} is not on PATH (train.sh runs slime with it)",
                          f"put the Python that runs slime first on PATH as {command}")
    return found


def job_env(info: BundleInfo) -> dict[str, str]:
    """The environment slime's processes get in the Ray job: the launching shell's (train.sh's, where forwarded
    variables come from), then the job's env_vars as the bundle's train.sh builds them (PYTHONPATH,
    CUDA_DEVICE_MAX_CONNECTIONS=1, [env] vars), read from train.sh itself by the review reader."""
    from acrl.compiler import job_env_vars  # lazy: the shell reader is loaded only for this check

    env = train_sh_env(info)
    env.update(job_env_vars((info.path / "train.sh").read_text(encoding="utf-8", errors="surrogateescape")))
    return env


def declared_gpu(info: BundleInfo) -> tuple[str, tuple[int, int]] | None:
    """[cluster] gpu and its compute capability, or None when the spec declares no GPU model."""
    from acrl.compiler import GPU_CAPABILITY  # lazy: the spec's table, loaded only for this check

    name = info.get("cluster.gpu")
    return (name, GPU_CAPABILITY[name]) if isinstance(name, str) and name in GPU_CAPABILITY else None


def check_slime_parser_of_bundle(info: BundleInfo) -> str:
    argv = entrypoint_argv(info)
    megatron = info.get("slime.megatron_dir")
    env = job_env(info)
    # the job's PYTHONPATH holds Megatron's dir (and [env] pythonpath); check_slime_parser puts slime's first
    return check_slime_parser(info.get("slime.dir", ""), argv[2:], python=target_python(argv[0]),
                              megatron_dir=megatron or None, cwd=info.path, env=env, program=argv[1],
                              timeout=TIMEOUT_S, gpu=declared_gpu(info))


# Runs in the target Python: argv[1] is a JSON list of dotted paths; prints a JSON list of problems.
_IMPORTER = r'''
import importlib, json, sys, traceback
problems = []
for dotted in json.loads(sys.argv[1]):
    module_name, _, name = dotted.rpartition(".")
    try:
        module = importlib.import_module(module_name)
    except BaseException as exc:
        problems.append([dotted, "cannot import " + module_name + ": "
                         + "".join(traceback.format_exception_only(type(exc), exc)).strip()])
        continue
    if not callable(getattr(module, name, None)):
        problems.append([dotted, module_name + " has no function " + repr(name)])
print(json.dumps(problems))
'''


def check_rollout_modules(info: BundleInfo) -> str:
    named = []
    for key, flag in FUNCTION_KEYS:
        value = info.get(key)
        named += [(f"{key}.{i}", flag, item) for i, item in enumerate(value)] if isinstance(value, list) else \
            [(key, flag, value)]
    paths = [(key, flag, value) for key, flag, value in named if isinstance(value, str) and value]
    if not paths:
        raise CheckSkipped("the bundle names no function for slime to load")
    bad = [key for key, _, value in paths if "." not in value.strip(".")]
    if bad:
        raise CheckFailed(f"{', '.join(bad)}: not a dotted path (module.function)",
                          "write it as package.module.function and compile again")
    # The Ray job's import path: slime's dir (its train.py's folder), the bundle (working_dir), Megatron.
    entries = [info.get("slime.dir", ""), str(info.path), info.get("slime.megatron_dir", "")]
    env = train_sh_env(info)
    env["PYTHONPATH"] = os.pathsep.join([e for e in entries if e] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                                                                     else []))
    python = target_python("python3")
    try:
        out = subprocess.run([python, "-c", _IMPORTER, json.dumps([v for _, _, v in paths])], env=env,
                             cwd=info.path, capture_output=True, text=True, errors="replace",
                             stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"importing the functions did not finish within {TIMEOUT_S:g} s",
                          f"run `{python} -c 'import MODULE'` to see where it waits") from None
    try:
        problems = json.loads(out.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise CheckFailed(f"{python} exited {out.returncode} while importing the functions: "
                          f"{out.stderr.strip()[-300:]}", "run the import by hand to see why") from None
    if problems:
        flag_of = {value: f"{key} ({flag})" for key, flag, value in paths}
        raise CheckFailed("; ".join(f"{flag_of[dotted]} = {dotted}: {why}" for dotted, why in problems),
                          f"install the integration into {python} (e.g. pip install agentcore-rl-toolkit), "
                          "or fix the dotted path in the spec")
    return f"{len(paths)} functions import in {python}"

