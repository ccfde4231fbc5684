"""A bundle (and a sweep) is replaced atomically, whenever its writer is killed: ``-o`` holds the old
or the new bundle, never nothing, and what a killed writer left beside it is put back or removed by
the next write. The kill is injected in a real subprocess (SIGKILL at the k-th file system step),
as `strace -e inject=rename:signal=KILL:when=2` would, without needing strace."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from acrl.compiler import BundleExistsError
from acrl.compiler._pipeline.bundle import STALE_SECONDS, _exchange, read_bundle, recover, write_bundle
from acrl.compiler._pipeline.layers import load_spec
from acrl.compiler._pipeline.sweep import compile_points, sweep_points, write_sweep
from conftest import SpecWriter

OLD = {"manifest.json": b"{}\n", "train.sh": b"#!/bin/bash\necho old\n", "spec.toml": b"a = 1\n"}
NEW = {"manifest.json": b"{ }\n", "train.sh": b"#!/bin/bash\necho new\n", "spec.toml": b"a = 2\n",
       "model_args.sh": b"MODEL_ARGS=()\n"}

# Runs write_bundle(OUT, NEW, force=True) and SIGKILLs itself before the K-th step: an os.rename,
# an exchange of two directories, or a removal of a tree. MODE "rename": only os.rename is counted
# (the strace reproduction); "exchange": steps counted, renameat2 used; "fallback": no renameat2.
_KILLER = r"""
import os, signal, sys
from acrl.compiler._pipeline import bundle as _bundle
out, k, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
NEW = NEW_FILES
calls = [0]
def step(fn):
    def wrapped(*a, **kw):
        calls[0] += 1
        if calls[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*a, **kw)
    return wrapped
os.rename = step(os.rename)
if mode != "rename":
    _bundle._remove_tree = step(_bundle._remove_tree)
    _bundle._exchange = step(_bundle._exchange if mode == "exchange" else (lambda a, b: False))
print(_bundle.write_bundle(out, NEW, force=True))
""".replace("NEW_FILES", repr(NEW))


def _can_exchange(where: Path) -> bool:
    """Whether this system swaps two directories in one step (Linux 3.15+ and glibc 2.28+)."""
    (where / "a").mkdir()
    (where / "b").mkdir()
    try:
        return _exchange(str(where / "a"), str(where / "b"))
    finally:
        (where / "a").rmdir()
        (where / "b").rmdir()


@pytest.fixture
def exchange(tmp_path: Path) -> None:
    if not _can_exchange(tmp_path):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here: the fallback is tested on its own")


def _kill_at(out: Path, k: int, mode: str) -> bool:
    """Run the writer; True when it was killed."""
    proc = subprocess.run([sys.executable, "-c", _KILLER, str(out), str(k), mode], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode in (0, -9), proc.stderr
    return proc.returncode == -9


def _siblings(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name != out.name)


@pytest.mark.usefixtures("exchange")
def test_a_kill_at_the_second_rename_leaves_a_bundle(tmp_path: Path) -> None:
    """The issue's reproduction: the writer killed at its 2nd rename left no bundle at -o."""
    out = tmp_path / "bundle"
    write_bundle(out, OLD, force=False)
    _kill_at(out, 2, "rename")
    assert read_bundle(out) in (OLD, NEW)


@pytest.mark.parametrize("mode", ["exchange", "fallback"])
def test_a_writer_killed_at_any_step_leaves_the_old_or_the_new_bundle(tmp_path: Path, mode: str) -> None:
    """Every step of a --force replace: with renameat2, -o holds a whole bundle at once; without,
    at least after the next write's recovery. Either way the next write leaves no sibling behind."""
    if mode == "exchange" and not _can_exchange(tmp_path):
        pytest.skip("no renameat2(RENAME_EXCHANGE) here")
    for k in range(1, 6):
        out = tmp_path / f"k{k}" / "bundle"
        out.parent.mkdir()
        write_bundle(out, OLD, force=False)
        killed = _kill_at(out, k, mode)
        if mode == "exchange":
            assert read_bundle(out) in (OLD, NEW), k
        recover(out)
        assert read_bundle(out) in (OLD, NEW), (k, _siblings(out))
        assert _siblings(out) == [], k
        assert write_bundle(out, NEW, force=True) in ("replaced", "unchanged")
        assert read_bundle(out) == NEW and _siblings(out) == []
        if not killed:
            break
    else:
        pytest.fail("the writer was killed at every step: the table does not reach the end of the replace")


def test_only_the_siblings_of_writers_that_are_gone_are_removed(tmp_path: Path) -> None:
    out = tmp_path / "bundle"
    write_bundle(out, OLD, force=False)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    dead_pid = _dead_pid()
    try:
        keep = [f".bundle.{live.pid}.0123456789ab.tmp",  # a live writer's
                ".bundle.0123456789ab.tmp",  # no pid, and recent: perhaps a live writer of an older acrl
                ".bundle.x.tmp", f".other.{dead_pid}.0123456789ab.tmp", f"bundle.{dead_pid}.0123456789ab.tmp"]
        gone = [f".bundle.{dead_pid}.0123456789ab.tmp", f".bundle.{dead_pid}.ba9876543210.old",
                ".bundle.ffffffffffff.old"]
        for name in keep + gone:
            (tmp_path / name).mkdir()
            (tmp_path / name / "f").write_text("x")
        old = time.time() - STALE_SECONDS - 60
        os.utime(tmp_path / ".bundle.ffffffffffff.old", (old, old))
        write_bundle(out, NEW, force=True)
        assert _siblings(out) == sorted(keep)
        assert read_bundle(out) == NEW
    finally:
        live.kill()
        live.wait()


def test_a_bundle_moved_aside_by_a_killed_writer_is_put_back(tmp_path: Path) -> None:
    """Where renameat2 is missing, a kill between the renames leaves .<name>.<pid>.<random>.old/bundle
    and nothing at -o: the next write (even one that then refuses) puts it back first."""
    out = tmp_path / "bundle"
    aside = tmp_path / f".bundle.{_dead_pid()}.0123456789ab.old"
    aside.mkdir()
    write_bundle(aside / "bundle", OLD, force=False)
    with pytest.raises(BundleExistsError) as refused:
        write_bundle(out, NEW, force=False)
    assert refused.value.message.startswith(f"{out}: ")
    assert read_bundle(out) == OLD and _siblings(out) == []


def test_a_sweep_and_its_index_have_fixed_modes_whatever_the_umask(write_spec: SpecWriter, tmp_path: Path) -> None:
    source, points = sweep_points(load_spec(write_spec({"sweep": {"grid": {"rollout.batch_size": [32, 64]}}})))
    results = compile_points(source, points)
    out = tmp_path / "sweep"
    stale = out / f"sweep.json.{_dead_pid()}.tmp"
    before = os.umask(0)
    try:
        out.mkdir(mode=0o777)
        os.chmod(out, 0o777)
        stale.write_text("{}")
        fresh = tmp_path / "fresh"
        write_sweep(str(fresh), "s.toml", results)
        write_sweep(str(out), "s.toml", results)
    finally:
        os.umask(before)
    assert (fresh.stat().st_mode & 0o777, (fresh / "sweep.json").stat().st_mode & 0o777) == (0o755, 0o644)
    assert (out / "sweep.json").stat().st_mode & 0o777 == 0o644
    assert out.stat().st_mode & 0o777 == 0o777  # a directory the user made is the user's
    assert not stale.exists()
    for point in fresh.iterdir():
        if point.is_dir():
            assert point.stat().st_mode & 0o777 == 0o755


def _dead_pid() -> int:
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)


_SWEEP_KILLER = r"""
import os, pickle, signal, sys
from acrl.compiler._pipeline import bundle as _bundle, sweep as _sweep
out, k, which = sys.argv[1], int(sys.argv[2]), sys.argv[4]
with open(sys.argv[3], "rb") as f:
    results = pickle.load(f)[which]
calls = [0]
def step(fn):
    def wrapped(*a, **kw):
        calls[0] += 1
        if calls[0] == k:
            os.kill(os.getpid(), signal.SIGKILL)
        return fn(*a, **kw)
    return wrapped
for name in ("rename", "replace", "unlink", "chmod"):
    setattr(os, name, step(getattr(os, name)))
_bundle._remove_tree = step(_bundle._remove_tree)
_bundle._exchange = step(_bundle._exchange)
_sweep.write_sweep(out, "s.toml", results, force=True)
"""


@pytest.mark.slow
def test_sweeps_killed_at_every_step_leave_bundles_and_the_next_sweep_leaves_nothing_else(
        write_spec: SpecWriter, tmp_path: Path) -> None:
    """The issue's 200 killed sweeps left 36 temporary siblings: each step of a sweep's --force
    rewrite is killed in turn; every point directory holds a whole bundle of one of the two sweeps,
    and the next complete sweep leaves only the points and sweep.json."""
    import pickle

    def compiled(lr: float, name: str) -> tuple:  # type: ignore[type-arg]
        source, points = sweep_points(load_spec(write_spec({"train": {"lr": lr}, "sweep": {
            "grid": {"rollout.batch_size": [32, 64]}}}, name=name)))
        return compile_points(source, points)

    sweeps = {"a": compiled(1e-6, "a.toml"), "b": compiled(2e-6, "b.toml")}
    bundles = {dict(r.bundle.files)["manifest.json"] for results in sweeps.values() for r in results}
    saved = tmp_path / "sweeps.pickle"
    saved.write_bytes(pickle.dumps(sweeps))
    out = tmp_path / "out"
    atomic = _can_exchange(tmp_path)
    for k in range(1, 60):
        write_sweep(str(out), "s.toml", sweeps["a"], force=True)
        proc = subprocess.run([sys.executable, "-c", _SWEEP_KILLER, str(out), str(k), str(saved), "b"],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode in (0, -9), proc.stderr
        for point in ("batch_size-32", "batch_size-64"):
            files = read_bundle(out / point)
            if atomic:
                assert files is not None and files.get("manifest.json") in bundles, (k, point)
        if proc.returncode == 0:
            break
    else:
        pytest.fail("killed at every step: the table does not reach the end of the sweep")
    assert k > 10  # two bundles of five files each, and the index, were written step by step
    write_sweep(str(out), "s.toml", sweeps["a"], force=True)
    assert sorted(p.name for p in out.iterdir()) == ["batch_size-32", "batch_size-64", "sweep.json"]


def test_a_sweep_recovers_what_killed_sweeps_left_of_points_it_no_longer_has(write_spec: SpecWriter,
                                                                               tmp_path: Path) -> None:
    source, points = sweep_points(load_spec(write_spec({"sweep": {"grid": {"rollout.batch_size": [32]}}})))
    out = tmp_path / "out"
    out.mkdir()
    dead = _dead_pid()
    (out / f".gone.{dead}.0123456789ab.tmp").mkdir()
    aside = out / f".moved.{dead}.0123456789ab.old"
    aside.mkdir()
    write_bundle(aside / "bundle", OLD, force=False)
    (out / f"sweep.json.{dead}.tmp").write_text("{}")
    write_sweep(str(out), "s.toml", compile_points(source, points))
    assert sorted(p.name for p in out.iterdir()) == ["batch_size-32", "moved", "sweep.json"]
    assert read_bundle(out / "moved") == OLD


def test_a_bundle_directory_that_is_a_link_is_replaced_and_its_target_kept(tmp_path: Path) -> None:
    real = tmp_path / "real"
    write_bundle(real, OLD, force=False)
    out = tmp_path / "bundle"
    out.symlink_to(real)
    assert write_bundle(out, NEW, force=True) == "replaced"
    assert not out.is_symlink() and read_bundle(out) == NEW
    assert read_bundle(real) == OLD  # the link was replaced, not what it pointed to
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bundle", "real"]
