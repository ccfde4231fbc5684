"""The preflight checks of the stack the bundle targets: slime's checkout at its commit, the Megatron-LM checkout at
the commit that slime runs, the sglang installed in train.sh's python3 at the version it runs (the verified
manifest's ``slime`` section, from acrl's facts of the commit: compiler/_slime/commits)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from acrl.compiler import read_git_commit

from .outcome import CheckFailed, CheckSkipped
from .python import TIMEOUT_S, target_python

if TYPE_CHECKING:
    from .bundle_info import BundleInfo


def check_slime(info: BundleInfo) -> str:
    slime = Path(info.get("slime.dir", ""))
    entry = "train_async.py" if info.get("train.mode") == "async" else "train.py"
    if not (slime / entry).is_file():
        what = "no such directory" if not slime.is_dir() else f"has no {entry}"
        raise CheckFailed(f"[slime] dir {slime}: {what}",
                          f"point [slime] dir at a slime checkout (with {entry}) and compile again")
    wanted = info.get("slime.commit")
    found = read_git_commit(slime)
    if found is None:
        return f"{slime / entry} (not a git checkout: commit not compared)"
    if wanted and found != wanted:
        raise CheckFailed(f"{slime} is at commit {found[:12]}, the bundle targets {wanted[:12]} ([slime] commit)",
                          f"git -C {slime} checkout {wanted}, or set [slime] commit = \"{found}\" and compile again")
    return f"{slime / entry} at {found[:12]}"


def check_megatron(info: BundleInfo) -> str:
    """[slime] megatron_dir exists; a git checkout is at the Megatron-LM commit the bundle's slime runs (the
    manifest's slime.megatron_commit, from acrl's facts: slime's docker/Dockerfile)."""
    megatron = Path(info.get("slime.megatron_dir", ""))
    if not megatron.is_dir():
        raise CheckFailed(f"[slime] megatron_dir {megatron}: no such directory",
                          "point [slime] megatron_dir at a Megatron-LM checkout and compile again")
    wanted, found = info.megatron_commit, read_git_commit(megatron)
    if wanted is None:
        return f"{megatron} (the bundle records no Megatron-LM commit: not compared)"
    if found is None:
        return f"{megatron} (not a git checkout: not compared with {wanted[:12]}, the one slime runs)"
    if found != wanted:
        raise CheckFailed(f"{megatron} is at commit {found[:12]}, but slime {str(info.get('slime.commit'))[:12]} runs "
                          f"Megatron-LM {wanted[:12]} (its docker/Dockerfile)",
                          f"git -C {megatron} checkout {wanted} (and apply slime's docker/patch/latest/megatron*.patch "
                          "as its Dockerfile does), or target the slime commit this Megatron-LM belongs to")
    return f"{megatron} at {found[:12]}, the Megatron-LM slime runs"


# Runs in the target Python: the installed sglang's version, without importing sglang (seconds, and a GPU probe).
_SGLANG_VERSION = ("import importlib.metadata as m\ntry:\n    print(m.version('sglang'))\n"
                   "except m.PackageNotFoundError:\n    print()")


def check_sglang(info: BundleInfo) -> str:
    """The sglang installed in the python3 train.sh runs is the one the bundle's slime runs (the manifest's
    slime.sglang_version, from acrl's facts: slime's docker/Dockerfile ``ARG SGLANG_IMAGE_TAG``)."""
    wanted = info.sglang_version
    if wanted is None:
        raise CheckSkipped("the bundle records no SGLang version (acrl had no facts of its slime commit)")
    python = target_python("python3")
    try:
        out = subprocess.run([python, "-c", _SGLANG_VERSION], capture_output=True, text=True, errors="replace",
                             stdin=subprocess.DEVNULL, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise CheckFailed(f"{python} did not say its sglang version within {TIMEOUT_S:g} s",
                          f"run `{python} -m pip show sglang` to see why") from None
    found = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else ""
    if out.returncode != 0:
        raise CheckFailed(f"{python} exited {out.returncode} asked for its sglang version: {out.stderr.strip()[-200:]}",
                          f"run `{python} -m pip show sglang` to see why")
    if not found:
        raise CheckSkipped(f"sglang is not installed in {python}: its version cannot be compared with {wanted}")
    if found != wanted:
        raise CheckFailed(f"{python} has sglang {found}, but slime {str(info.get('slime.commit'))[:12]} runs sglang "
                          f"{wanted} (its docker/Dockerfile)", f"install sglang=={wanted} (with slime's "
                          "docker/patch sglang patches, as its image does), or target the slime commit that runs "
                          f"sglang {found}")
    return f"sglang {found} in {python}, the version slime runs"
