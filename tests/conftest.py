"""Shared fixtures: a minimal valid spec, a factory that merges overrides into it, and paths."""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from acrl.compiler import Bundle, compile_spec

REPO = Path(__file__).resolve().parent.parent
SPECS = REPO / "specs"
EXAMPLE_SPECS = sorted(SPECS.glob("*.toml"))
# Facts generated from slime's own code by acrl.compiler._slime.model_facts (tests/data/slime/README.md), one
# folder per slime commit: the HEAD acrl targets and agentcore-rl-toolkit's pin.
SLIME_DATA = REPO / "tests" / "data" / "slime"
SLIME_HEAD = "624b824a898ab0ec1fcb4d373004c7f3852bf515"
SLIME_PIN = "fa3c990af6f18efd3fd9922698bf4bf4048d1263"


def slime_facts(name: str, commit: str = SLIME_HEAD) -> dict[str, Any]:
    """One generated fact file of tests/data/slime/<commit>/ (model_args.json, hf_checks.json), parsed."""
    data: dict[str, Any] = json.loads((SLIME_DATA / commit / name).read_text(encoding="utf-8"))
    return data


def slime_model_args(commit: str = SLIME_HEAD) -> dict[str, list[str]]:
    """slime's scripts/models/*.sh at ``commit``, each resolved to its literal MODEL_ARGS list."""
    scripts: dict[str, list[str]] = slime_facts("model_args.json", commit)["scripts"]
    return scripts


QWEN25_3B_ARGS: dict[str, Any] = {
    "swiglu": True, "num-layers": 36, "hidden-size": 2048, "ffn-hidden-size": 11008,
    "num-attention-heads": 16, "use-rotary-position-embeddings": True, "disable-bias-linear": True,
    "add-qkv-bias": True, "normalization": "RMSNorm", "norm-epsilon": "1e-6", "rotary-base": 1000000,
    "group-query-attention": True, "num-query-groups": 2, "vocab-size": 151936,
}

# A slime commit acrl ships no flag facts for (compiler/_slime/commits): ACRL-F003 does not apply, so any escape-hatch
# flag compiles. Tests of something else (quoting, structure, the RayJob) that use made-up flags target it.
NO_FACTS = "1234567890abcdef1234567890abcdef12345678"

MINIMAL: dict[str, Any] = {
    "experiment": {"id": "test-exp"},
    "agentcore": {
        "runtime_arn": "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-abc123",
        "s3_bucket": "test-bucket",
    },
    "model": {"type": "qwen2.5-3B", "dir": "/models/Qwen2.5-3B-Instruct", "args": QWEN25_3B_ARGS},
    "data": {"path": "/data/train.jsonl"},
}

# [kuberay] of a --target kuberay compile: the image, and volumes that hold MINIMAL's model and data (every path the
# job reads must be mounted, ACRL-K006).
KUBERAY_TABLE: dict[str, Any] = {"image": "registry.example/slime:v1", "volumes": [
    {"name": "models", "mount_path": "/models", "claim": "models"},
    {"name": "data", "mount_path": "/data", "claim": "data"}]}


def merge(base: Mapping[str, Any], overrides: Mapping[str, Any]) -> dict[str, Any]:
    """Tables merge key by key; a None value deletes the key."""
    out = copy.deepcopy(dict(base))
    for key, value in overrides.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


SpecWriter = Callable[..., Path]


@pytest.fixture(autouse=True, scope="session")
def _cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The acrl caches (compiled templates, compiles) of this test session, not the user's ~/.cache.
    Tests that need an empty or no cache set XDG_CACHE_HOME themselves."""
    home = tmp_path_factory.mktemp("cache-home")
    with pytest.MonkeyPatch.context() as m:
        m.setenv("XDG_CACHE_HOME", str(home))
        yield home


@pytest.fixture
def write_spec(tmp_path: Path) -> SpecWriter:
    """write_spec(overrides=None, text=None, name="spec.toml") -> path of a spec file."""
    def write(overrides: Mapping[str, Any] | None = None, *, text: str | None = None,
              name: str = "spec.toml") -> Path:
        path = tmp_path / name
        if text is None:
            text = tomli_w.dumps(merge(MINIMAL, overrides or {}))
        path.write_text(text, encoding="utf-8")
        return path
    return write


@pytest.fixture
def compile_overrides(write_spec: SpecWriter) -> Callable[..., Bundle]:
    """compile_overrides(overrides, strict=False) -> Bundle of MINIMAL merged with overrides."""
    def run(overrides: Mapping[str, Any] | None = None, *, strict: bool = False) -> Bundle:
        return compile_spec(write_spec(overrides), strict=strict, display_name="spec.toml")
    return run


@pytest.fixture(scope="session")
def ray_head() -> Iterator[Any]:
    """The test session's one Ray head on 127.0.0.1 (test_run.start_ray_head), for every module that runs jobs."""
    from test_run import start_ray_head

    yield from start_ray_head()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true",
                     help="rewrite tests/golden/ from the example specs instead of comparing")
    parser.addoption("--upstream", action="store_true",
                     help="also run the checks of the generated facts against upstream checkouts (tests marked "
                          "upstream; each names the ACRL_* variables it needs, and a missing one is an error)")


# The checks that regenerate facts from upstream sources (slime, Megatron-LM, sglang wheels, KubeRay) and compare them
# with the committed ones: they need those sources, which a clone of acrl does not have, so the default run deselects
# them (no skips) and `pytest --upstream` runs them. Which variables each needs is the marker's arguments.
UPSTREAM_HELP = {
    "ACRL_SLIME_DIR": "slime's git directory (git clone --mirror https://github.com/THUDM/slime)",
    "ACRL_MEGATRON_DIR": "Megatron-LM's git directory (git clone --mirror https://github.com/NVIDIA/Megatron-LM)",
    "ACRL_SGLANG_WHEELS": "a folder of the sglang wheels the facts name (pip download sglang==V --no-deps -d DIR)",
    "ACRL_KUBERAY_DIR": "a clone of https://github.com/ray-project/kuberay",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    upstream = [item for item in items if item.get_closest_marker("upstream")]
    if not config.getoption("--upstream"):
        if upstream:
            config.hook.pytest_deselected(items=upstream)
            items[:] = [item for item in items if not item.get_closest_marker("upstream")]
        return
    missing = sorted({name for item in upstream for marker in item.iter_markers("upstream") for name in marker.args
                      if not os.environ.get(name)})
    if missing:
        raise pytest.UsageError("--upstream: set " + "; ".join(f"{name} to {UPSTREAM_HELP[name]}" for name in missing))


def forge_manifest(bundle: Path, **changes: Any) -> dict[str, Any]:
    """Rewrite ``bundle``'s manifest as a forger who can write it would: ``changes`` applied, every
    listed file's sha256 taken from the file as it is now, and the bundle hash recomputed over it
    all, so that the bundle matches its own manifest again. Returns the new manifest."""
    import json

    from acrl.compiler._pipeline.bundle import manifest_hash, sha256

    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"] = {name: sha256((bundle / name).read_bytes()) for name in manifest["files"]
                         if (bundle / name).is_file()}
    manifest.update(changes)
    manifest["bundle_hash"] = manifest_hash(manifest)
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    return manifest
