"""The front door of acrl-compile (compiler/_cli/front.py): one call for a plain spec and a [sweep]
spec, a typed result the handler matches on, and the caches used there and nowhere else."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import tomli_w
from test_layering import IMPORTS

from acrl.compiler._cli.front import (
    BundleResult,
    CheckOptions,
    CompileOptions,
    SweepCheckResult,
    SweepResult,
    check_to,
    compile_to,
)
from acrl.compiler._fast import template_cache
from acrl.compiler._pipeline.compile import SweepSpecError
from acrl.compiler._pipeline.render import environment
from acrl.compiler._review.diff import CheckResult
from conftest import MINIMAL, merge

SWEEP = '[sweep]\ngrid = { "rollout.batch_size" = [32, 64] }\n'


def write(tmp_path: Path, sweep: str = "") -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(tomli_w.dumps(merge(MINIMAL, {})) + "\n" + sweep, encoding="utf-8")
    return path


@pytest.fixture
def templates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty cache home, and a fresh Jinja environment that opens its template cache there."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    environment.cache_clear()
    yield tmp_path / "cache" / "acrl" / "templates"
    environment.cache_clear()


def kept(templates: Path) -> list[str]:
    return sorted(p.name for p in templates.glob("*.jinja-code")) if templates.is_dir() else []


def test_a_plain_spec_gives_a_bundle_result(tmp_path: Path) -> None:
    spec, out = write(tmp_path), tmp_path / "out"
    first = compile_to(str(spec), str(out), CompileOptions())
    assert isinstance(first, BundleResult)
    assert (first.out, first.status) == (str(out), "created")
    assert first.bundle_hash == json.loads((out / "manifest.json").read_text())["bundle_hash"]
    again = compile_to(str(spec), str(out) + "/", CompileOptions(cache=False))
    assert (again.out, again.status, again.bundle_hash) == (str(out), "unchanged", first.bundle_hash)


def test_a_sweep_spec_gives_a_sweep_result_from_the_same_call(tmp_path: Path) -> None:
    spec, out = write(tmp_path, SWEEP), tmp_path / "out"
    result = compile_to(str(spec), str(out), CompileOptions())
    assert isinstance(result, SweepResult)
    assert (result.out, result.index, result.points, result.invalid) == (str(out), str(out / "sweep.json"), 2, ())
    assert [(r.point.directory, status) for r, status in result.written] == [("batch_size-32", "created"),
                                                                              ("batch_size-64", "created")]
    index = json.loads((out / "sweep.json").read_text())
    assert [p["bundle_hash"] for p in index["points"]] == [r.bundle.bundle_hash for r, _ in result.written
                                                           if r.bundle is not None]


def test_check_to_gives_a_check_result_or_a_sweep_check_result(tmp_path: Path) -> None:
    plain = write(tmp_path)
    compile_to(str(plain), str(tmp_path / "one"), CompileOptions())
    one = check_to(str(plain), str(tmp_path / "one"), CheckOptions())
    assert isinstance(one, CheckResult) and one.up_to_date
    sweep = write(tmp_path, SWEEP)
    compile_to(str(sweep), str(tmp_path / "many"), CompileOptions())
    many = check_to(str(sweep), str(tmp_path / "many"), CheckOptions())
    assert isinstance(many, SweepCheckResult) and many.up_to_date and many.index_up_to_date
    assert [Path(c.out).name for c in many.checks] == ["batch_size-32", "batch_size-64"]
    stale = check_to(str(sweep), str(tmp_path / "many"), CheckOptions(overrides=("rollout.temperature=0.5",)))
    assert isinstance(stale, SweepCheckResult) and not stale.up_to_date and not stale.index_up_to_date
    with pytest.raises(SweepSpecError) as raised:  # acrl check-bundles: a sweep is an error, as before
        check_to(str(sweep), None, CheckOptions(), sweeps=False)
    assert [(d.key, d.severity) for d in raised.value.diagnostics] == [("sweep", "error")]


@pytest.mark.parametrize("sweep", ["", SWEEP], ids=["plain", "sweep"])
def test_check_keeps_no_compiled_template(sweep: str, tmp_path: Path, templates: Path) -> None:
    """--check writes nothing, not even a compiled template; for a sweep, its points included."""
    spec = write(tmp_path, sweep)
    result = check_to(str(spec), str(tmp_path / "missing"), CheckOptions())
    assert not result.up_to_date
    assert kept(templates) == []
    environment.cache_clear()  # a new process: the templates compiled above are gone with the last one
    compile_to(str(spec), str(tmp_path / "out"), CompileOptions(cache=False))  # a compile keeps them
    assert kept(templates) != []


def test_read_only_flips_no_module_global_and_ends_with_its_block() -> None:
    before = dict(vars(template_cache))
    with template_cache.read_only():
        assert not template_cache._WRITABLE.get()
        assert dict(vars(template_cache)) == before
    assert template_cache._WRITABLE.get()
    with pytest.raises(RuntimeError), template_cache.read_only():
        raise RuntimeError("a compile that fails")
    assert template_cache._WRITABLE.get()
    assert not hasattr(template_cache, "WRITABLE")


def test_options_are_frozen_values() -> None:
    options = CompileOptions(strict=True, overrides=["a=1"])  # type: ignore[arg-type]
    assert options == CompileOptions(strict=True, overrides=("a=1",)) != CompileOptions(overrides=("a=1",))
    assert options.overrides == ("a=1",) and options.cache and options.target == "ray"
    with pytest.raises(AttributeError):
        options.strict = False  # type: ignore[misc]
    assert hash(CheckOptions()) == hash(CheckOptions())


def test_only_the_front_door_uses_the_caches() -> None:
    """The compile and help cache are read by the front door (and --help) only; compiled templates
    by the renderer, made read-only by the front door for --check."""
    users = {(i.target, i.module) for i in IMPORTS if i.target.startswith("acrl.compiler._fast.")
             and not i.module.startswith("acrl.compiler._fast")}
    assert users == {("acrl.compiler._fast.cache", "acrl.compiler._cli.front"),
                     ("acrl.compiler._fast.cache", "acrl.compiler._cli.help"),
                     ("acrl.compiler._fast.template_cache", "acrl.compiler._cli.front"),
                     ("acrl.compiler._fast.template_cache", "acrl.compiler._pipeline.render")}
