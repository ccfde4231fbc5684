"""The preflight checks one by one, on real files, and the runner: skipping, needs, parallelism,
and a crashing check reported as a failure."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest

from acrl.compiler import Derived
from acrl.runtime._preflight import checks as _preflight
from acrl.runtime._preflight.checks import BundleInfo, Check, run_preflight, scan_jsonl
from acrl.runtime._preflight.outcome import CheckFailed, CheckSkipped
from conftest import QWEN25_3B_ARGS, REPO

HF = REPO / "tests" / "fixtures" / "hf"
COMMIT = "fa3c990af6f18efd3fd9922698bf4bf4048d1263"


def model_tokens(args: Mapping[str, Any] = QWEN25_3B_ARGS) -> tuple[str, ...]:
    tokens: list[str] = []
    for name, value in args.items():
        tokens += [f"--{name}"] if value is True else [f"--{name}", str(value)]
    return tuple(tokens)


def info(tmp_path: Path, spec: Mapping[str, Any] | None = None, *, address: str | None = None,
         derived: Mapping[str, int] | None = None, model_args: tuple[str, ...] | None = None) -> BundleInfo:
    gpus = {"actor_gpus": 8, "rollout_gpus": 8, **(derived or {})}
    typed = Derived(**gpus, samples_per_rollout=64, global_batch_size=64, optimizer_steps_per_rollout=1)
    return BundleInfo(tmp_path, dict(spec or {}), typed, model_tokens() if model_args is None else model_args,
                      address)


def outcome(check: Any, bundle: BundleInfo) -> tuple[str, str]:
    result = _preflight.run_check(Check("c", check), bundle)
    return result.status, result.detail


# --- datasets ----------------------------------------------------------------------------------

def test_scan_reports_counts_and_the_first_bad_lines_with_numbers(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    rows = [json.dumps({"prompt": "ok", "metadata": {}}), "not json", "[1, 2]", json.dumps({"metadata": {}}),
            json.dumps({"prompt": 3, "metadata": {}}), json.dumps({"prompt": "p", "metadata": "m"}),
            json.dumps({"prompt": "p"}), "", json.dumps({"prompt": "ok", "metadata": {"a": 1}})]
    path.write_bytes(("\n".join(rows) + "\n").encode() + b"\xff\xfe\n")
    count, bad, bad_count = scan_jsonl(path, keep=10)
    assert count == 10 and bad_count == 8
    assert bad == [(2, "not JSON (Expecting value)"), (3, "a JSON list, not an object"), (4, "no string 'prompt'"),
                   (5, "'prompt' is not a string"), (6, "'metadata' is not an object"),
                   (7, "no object 'metadata'"), (8, "empty line"), (10, "not UTF-8 (byte 0)")]
    assert scan_jsonl(path, keep=2)[1] == bad[:2]


def test_datasets_check_covers_data_and_eval_sets_relative_to_the_bundle(tmp_path: Path) -> None:
    good = tmp_path / "train.jsonl"
    good.write_text(json.dumps({"prompt": "p", "metadata": {}}) + "\n")
    (tmp_path / "eval.jsonl").write_text(json.dumps({"question": "q", "meta": {}}) + "\n")
    spec = {"data": {"path": str(good), "input_key": "question", "metadata_key": "meta"},
            "eval": {"datasets": {"a": "eval.jsonl"}}}
    status, detail = outcome(_preflight.check_datasets, info(tmp_path, spec))
    assert status == "failed" and f"data.path {good}: 1 of 1 lines bad: line 1: no string 'question'" in detail
    assert "eval.datasets.a" not in detail
    spec["eval"] = {"datasets": {"a": "eval.jsonl", "b": "missing.jsonl"}}
    status, detail = outcome(_preflight.check_datasets, info(tmp_path, {**spec, "data": {"path": "eval.jsonl",
                                                                                         "input_key": "question",
                                                                                         "metadata_key": "meta"}}))
    assert status == "failed" and detail == f"eval.datasets.b {tmp_path / 'missing.jsonl'}: No such file or directory"
    (tmp_path / "missing.jsonl").write_text("")
    status, detail = outcome(_preflight.check_datasets, info(tmp_path, {**spec, "data": {"path": "eval.jsonl"}}))
    assert status == "failed" and "missing.jsonl: empty" in detail
    assert outcome(_preflight.check_datasets, info(tmp_path, {})) == ("skipped", "the spec names no dataset")


def test_a_large_dataset_is_streamed(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    line = json.dumps({"prompt": "What is 12 * 34? Think step by step.", "metadata": {"answer": "408"}}) + "\n"
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(200_000):
            f.write(line)
        f.write('{"prompt": "last", "metadata": []}\n')
    started = time.perf_counter()
    status, detail = outcome(_preflight.check_datasets, info(tmp_path, {"data": {"path": str(path)}}))
    elapsed = time.perf_counter() - started
    assert status == "failed" and "1 of 200001 lines bad: line 200001: 'metadata' is not an object" in detail
    assert elapsed < 30  # generous on a shared 2-CPU machine; a typical run takes well under a second


# --- slime, megatron, model, gpus, cuda ----------------------------------------------------------

def test_slime_check_finds_the_entrypoint_and_compares_the_commit(tmp_path: Path) -> None:
    slime = tmp_path / "slime"
    slime.mkdir()
    spec: dict[str, Any] = {"slime": {"dir": str(slime), "commit": COMMIT}, "train": {"mode": "sync"}}
    status, detail = outcome(_preflight.check_slime, info(tmp_path, spec))
    assert status == "failed" and detail == f"[slime] dir {slime}: has no train.py"
    (slime / "train.py").write_text("")
    assert outcome(_preflight.check_slime, info(tmp_path, spec)) == (
        "passed", f"{slime / 'train.py'} (not a git checkout: commit not compared)")
    spec["train"]["mode"] = "async"
    assert outcome(_preflight.check_slime, info(tmp_path, spec))[1].endswith("has no train_async.py")
    spec["train"]["mode"] = "sync"
    (slime / ".git").mkdir()
    (slime / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (slime / ".git" / "refs" / "heads").mkdir(parents=True)
    (slime / ".git" / "refs" / "heads" / "main").write_text(COMMIT + "\n")
    assert outcome(_preflight.check_slime, info(tmp_path, spec)) == ("passed", f"{slime / 'train.py'} at fa3c990af6f1")
    (slime / ".git" / "refs" / "heads" / "main").write_text("0" * 40 + "\n")
    result = _preflight.run_check(Check("slime", _preflight.check_slime), info(tmp_path, spec))
    assert result.status == "failed" and "at commit 000000000000, the bundle targets fa3c990af6f1" in result.detail
    assert f"git -C {slime} checkout {COMMIT}" in result.hint


def test_model_check_compares_config_json_with_the_frozen_args(tmp_path: Path) -> None:
    model = tmp_path / "model"
    spec = {"model": {"dir": str(model)}}
    missing = f"[model] dir {model}: no such directory"
    assert outcome(_preflight.check_model, info(tmp_path, spec)) == ("failed", missing)
    shutil.copytree(HF / "Qwen2.5-3B-Instruct", model)
    status, detail = outcome(_preflight.check_model, info(tmp_path, spec))
    assert status == "passed" and detail.startswith(f"{model / 'config.json'} matches")
    other = model_tokens({**QWEN25_3B_ARGS, "num-layers": 28})
    status, detail = outcome(_preflight.check_model, info(tmp_path, spec, model_args=other))
    assert status == "failed" and "--num-layers: 28 in model_args.sh, but 36 in" in detail
    (model / "config.json").write_text("{")
    assert outcome(_preflight.check_model, info(tmp_path, spec))[1].startswith(f"{model / 'config.json'}: cannot be")


def test_megatron_and_cuda_home(tmp_path: Path) -> None:
    spec: dict[str, Any] = {"slime": {"megatron_dir": str(tmp_path / "m")}}
    assert outcome(_preflight.check_megatron, info(tmp_path, spec))[0] == "failed"
    (tmp_path / "m").mkdir()
    assert outcome(_preflight.check_megatron, info(tmp_path, spec)) == (
        "passed", f"{tmp_path / 'm'} (the bundle records no Megatron-LM commit: not compared)")
    assert outcome(_preflight.check_cuda_home, info(tmp_path, spec))[0] == "skipped"
    spec["cuda"] = {"home": str(tmp_path / "cuda-12.9")}
    assert outcome(_preflight.check_cuda_home, info(tmp_path, spec)) == (
        "failed", f"[cuda] home {tmp_path / 'cuda-12.9'}: no such directory")


def fake_nvidia_smi(folder: Path, gpus: int) -> str:
    folder.mkdir(exist_ok=True)
    script = folder / "nvidia-smi"
    lines = "".join(f"echo 'GPU {i}: NVIDIA H100 80GB HBM3 (UUID: GPU-{i})'\n" for i in range(gpus))
    script.write_text(f"#!/bin/sh\n{lines}")
    script.chmod(0o755)
    return str(folder)


def test_gpus_counts_what_nvidia_smi_lists_against_the_bundle(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    colocated = {"cluster": {"colocate": True}}
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    if importlib.util.find_spec("torch") is None:
        assert outcome(_preflight.check_gpus, info(tmp_path, colocated)) == (
            "skipped", "neither nvidia-smi nor torch is here to count GPUs")
    monkeypatch.setenv("PATH", fake_nvidia_smi(tmp_path / "bin", 8))
    assert outcome(_preflight.check_gpus, info(tmp_path, colocated)) == ("passed", "8 GPUs (nvidia-smi -L), 8 needed")
    apart = {"cluster": {"colocate": False}}
    assert outcome(_preflight.check_gpus, info(tmp_path, apart, derived={"actor_gpus": 4, "rollout_gpus": 4})) == (
        "passed", "8 GPUs (nvidia-smi -L), 8 needed")
    assert outcome(_preflight.check_gpus, info(tmp_path, apart)) == (
        "failed", "8 GPUs here (nvidia-smi -L), the bundle needs 16")
    status, detail = outcome(_preflight.check_gpus, info(tmp_path, colocated, address="http://head:8265"))
    assert status == "skipped" and "the cluster at http://head:8265" in detail


def test_gpus_asks_torch_when_there_is_no_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "site"
    (fake / "torch" / "cuda").mkdir(parents=True)
    (fake / "torch" / "__init__.py").write_text("from . import cuda\n")
    (fake / "torch" / "cuda" / "__init__.py").write_text("def device_count():\n    return 4\n")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("PYTHONPATH", str(fake))
    monkeypatch.syspath_prepend(str(fake))
    assert outcome(_preflight.check_gpus, info(tmp_path, {}, derived={"actor_gpus": 4})) == (
        "passed", "4 GPUs (torch), 4 needed")
    assert outcome(_preflight.check_gpus, info(tmp_path, {}, derived={"actor_gpus": 8})) == (
        "failed", "4 GPUs here (torch), the bundle needs 8")


# --- the runner ------------------------------------------------------------------------------------

def test_checks_run_in_parallel_skip_by_name_and_wait_for_their_needs(tmp_path: Path) -> None:
    barrier = threading.Barrier(2, timeout=10)
    order: list[str] = []

    def together(_: BundleInfo) -> str:  # passes only if the other one runs at the same time
        barrier.wait()
        order.append("together")
        return "ran in parallel"

    def after(_: BundleInfo) -> str:
        order.append("after")
        return "ok"

    def fails(_: BundleInfo) -> str:
        raise CheckFailed("broken", "mend it")

    def skips(_: BundleInfo) -> str:
        raise CheckSkipped("not here")

    def crashes(_: BundleInfo) -> str:
        raise ZeroDivisionError("division by zero")

    checks = [Check("a", together), Check("b", together), Check("c", after, ("a", "b")), Check("d", fails),
              Check("e", after, ("d",)), Check("f", skips), Check("g", crashes), Check("h", after)]
    results = run_preflight(info(tmp_path), skip=["h"], checks=checks)
    got = {r.name: (r.status, r.detail, r.hint) for r in results}
    assert [r.name for r in results] == list("abcdefgh")
    assert got["a"] == got["b"] == ("passed", "ran in parallel", "")
    assert got["c"] == ("passed", "ok", "") and order.index("after") > max(i for i, o in enumerate(order)
                                                                           if o == "together")
    assert got["d"] == ("failed", "broken", "mend it")
    assert got["e"] == ("skipped", "needs d, which did not pass", "")
    assert got["f"] == ("skipped", "not here", "")
    assert got["g"][0] == "failed" and got["g"][1] == "ZeroDivisionError: division by zero"
    assert got["h"] == ("skipped", "--skip", "")
    assert all(r.seconds >= 0 for r in results)
    table = _preflight.format_table(results)
    assert "fix: mend it" in table and table.endswith("preflight: 3 passed, 2 failed, 3 skipped")


def test_a_check_that_needs_an_unknown_check_fails_instead_of_hanging(tmp_path: Path) -> None:
    (result,) = run_preflight(info(tmp_path), checks=[Check("x", lambda _: "ok", ("nope",))])
    assert result.status == "failed" and "needs nope" in result.detail


def test_register_adds_a_check_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_preflight, "CHECKS", list(_preflight.CHECKS))
    _preflight.register("aws-identity", lambda _: "arn:aws:iam::1:user/x", needs=["bash"])
    assert _preflight.CHECKS[-1] == Check("aws-identity", _preflight.CHECKS[-1].function, ("bash",))
    assert [c.name for c in _preflight.CHECKS][:15] == ["bash", "ray-cli", "slime", "megatron", "sglang",
                                                       "slime-parser", "rollout-module", "external-engines",
                                                       "opd-teacher", "model", "datasets", "wandb", "checkpoint",
                                                       "gpus", "cuda-home"]


def test_the_gpus_needed_are_the_verified_manifests_typed_derived_section() -> None:
    """Given the manifest read_bundle verified, the checks take its Derived as it is (not spec.toml's)."""
    import attrs

    from acrl.compiler import read_bundle

    golden = REPO / "tests" / "golden" / "qwen3-8b-async-disaggregated"
    bundle = read_bundle(golden)
    assert bundle.intact and bundle.manifest is not None
    manifest = attrs.evolve(bundle.manifest, derived=attrs.evolve(bundle.manifest.derived, actor_gpus=3,
                                                                  rollout_gpus=5, node_gpus=(6, 2)))
    info = _preflight.read_bundle_info(golden, files=bundle.files, manifest=manifest)
    assert info.derived == manifest.derived
    assert _preflight.gpus_needed(info) == 6  # what slime's placement group takes on the head node
    # a manifest written before acrl modelled placement: the actor's, plus the rollout's when not colocated
    old = attrs.evolve(manifest, derived=attrs.evolve(manifest.derived, node_gpus=None))
    info = _preflight.read_bundle_info(golden, files=bundle.files, manifest=old)
    assert _preflight.gpus_needed(info) == (3 if info.get("cluster.colocate", True) else 3 + 5)
    unverified = _preflight.read_bundle_info(golden)  # no verified manifest: spec.toml's
    assert unverified.derived == bundle.manifest.derived


def test_the_local_checks_on_an_example_bundle_name_every_missing_path(tmp_path: Path) -> None:
    bundle = _preflight.read_bundle_info(REPO / "tests" / "golden" / "qwen3-4b-multiturn")
    assert bundle.model_args[:4] == ("--swiglu", "--num-layers", "36", "--hidden-size")
    results = {r.name: r for r in run_preflight(bundle, skip=["gpus", "ray-cli", "bash"])}
    if not Path("/root/slime/train.py").exists():
        assert results["slime"].detail == "[slime] dir /root/slime: no such directory"
    if not Path("/data/agent/train.jsonl").exists():
        assert "data.path /data/agent/train.jsonl" in results["datasets"].detail
        assert "eval.datasets.gsm8k /data/eval/gsm8k_test.jsonl" in results["datasets"].detail


MEGATRON_OF_PIN = "1dcf0dafa884ad52ffb243625717a3471643e087"  # slime fa3c990's docker/Dockerfile ARG MEGATRON_COMMIT


def git_checkout(path: Path) -> str:
    """``path`` made a git checkout with one commit; its commit."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "README").write_text("x")
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=t", "-c", "user.email=t@e", "commit", "-qm", "x"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_megatron_is_compared_with_the_commit_the_targeted_slime_runs(tmp_path: Path) -> None:
    """The verified manifest records the Megatron-LM commit the bundle's slime runs (issue 15): a checkout at
    another commit fails, naming both; one that is not a git checkout passes, saying it was not compared."""
    spec = {"slime": {"megatron_dir": str(tmp_path / "m"), "commit": "fa3c990af6f18efd3fd9922698bf4bf4048d1263"}}
    (tmp_path / "m").mkdir()
    recorded = attrs.evolve(info(tmp_path, spec), megatron_commit=MEGATRON_OF_PIN)
    assert outcome(_preflight.check_megatron, recorded) == (
        "passed", f"{tmp_path / 'm'} (not a git checkout: not compared with 1dcf0dafa884, the one slime runs)")
    found = git_checkout(tmp_path / "m")
    status, detail = outcome(_preflight.check_megatron, recorded)
    assert status == "failed" and detail == (f"{tmp_path / 'm'} is at commit {found[:12]}, but slime fa3c990af6f1 "
                                             "runs Megatron-LM 1dcf0dafa884 (its docker/Dockerfile)")
    assert outcome(_preflight.check_megatron, attrs.evolve(recorded, megatron_commit=found))[0] == "passed"


def stand_in_python(folder: Path, sglang: str | None) -> str:
    """A python3 on PATH whose installed sglang is ``sglang`` (None: not installed), as the check asks it."""
    folder.mkdir(exist_ok=True)
    site = folder / "site"
    if sglang is not None:
        dist = site / f"sglang-{sglang}.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: sglang\nVersion: {sglang}\n")
    script = folder / "python3"
    script.write_text(f'#!/bin/sh\nPYTHONPATH={site} exec {sys.executable} -S "$@"\n')
    script.chmod(0o755)
    return f"{folder}:{os.environ['PATH']}"


@pytest.mark.parametrize(("installed", "status", "detail"), [
    ("0.5.13", "passed", "sglang 0.5.13 in "),
    ("0.5.15.post1", "failed", "has sglang 0.5.15.post1, but slime fa3c990af6f1 runs sglang 0.5.13"),
    (None, "skipped", "sglang is not installed in "),
])
def test_sglang_is_the_version_the_targeted_slime_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        installed: str | None, status: str, detail: str) -> None:
    monkeypatch.setenv("PATH", stand_in_python(tmp_path / "bin", installed))
    spec = {"slime": {"commit": "fa3c990af6f18efd3fd9922698bf4bf4048d1263"}}
    found = outcome(_preflight.check_sglang, attrs.evolve(info(tmp_path, spec), sglang_version="0.5.13"))
    assert found[0] == status and detail in found[1]
    assert outcome(_preflight.check_sglang, info(tmp_path, spec))[0] == "skipped"  # no version recorded
