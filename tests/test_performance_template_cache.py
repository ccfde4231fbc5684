"""The compiled-template cache ($XDG_CACHE_HOME/acrl/templates) never changes a byte of a bundle:
cold, warm, stale, corrupt, unusable or shared by concurrent compiles (docs/performance.md)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jinja2
import pytest

from acrl.compiler import compile_spec
from acrl.compiler._fast import template_cache as _template_cache
from acrl.compiler._fast.template_cache import TemplateCache
from acrl.compiler._pipeline import render as _render
from acrl.compiler._pipeline.render import environment
from conftest import EXAMPLE_SPECS, SPECS

SMOKE = SPECS / "gsm8k-qwen2.5-3b-smoke.toml"
Files = dict[str, bytes]


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """XDG_CACHE_HOME in tmp_path, and a fresh environment() for every compile of the test."""
    home = tmp_path / "cache-home"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    environment.cache_clear()
    yield home
    environment.cache_clear()


def entries(home: Path) -> list[Path]:
    return sorted((home / "acrl" / "templates").iterdir())


def compile_files(spec: Path = SMOKE) -> Files:
    environment.cache_clear()  # a new process, as far as the templates are concerned
    return dict(compile_spec(spec).files)


def reference(spec: Path, monkeypatch: pytest.MonkeyPatch) -> Files:
    """The bundle compiled without any template cache."""
    with monkeypatch.context() as m:
        m.setenv("XDG_CACHE_HOME", os.devnull)  # not a directory: no cache
        environment.cache_clear()
        assert environment().bytecode_cache is None
        return compile_files(spec)


def forbid_template_compiles(monkeypatch: pytest.MonkeyPatch) -> None:
    def compile_(*args: object, **kwargs: object) -> None:
        raise AssertionError("a template was compiled instead of loaded from the cache")
    monkeypatch.setattr(jinja2.Environment, "compile", compile_)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_cold_warm_and_no_cache_give_the_same_bytes(spec: Path, cache_home: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    expected = reference(spec, monkeypatch)
    assert compile_files(spec) == expected  # cold: compiles and fills the cache
    # train.sh.jinja and model_args.sh.jinja, and checkpoint.sh.jinja for a bundle that checkpoints
    assert len(entries(cache_home)) == 2 + ("checkpoint.sh" in expected)
    with monkeypatch.context() as m:
        forbid_template_compiles(m)
        assert compile_files(spec) == expected  # warm: only loads


CORRUPTIONS: dict[str, Callable[[bytes], bytes]] = {
    "empty": lambda data: b"",
    "truncated": lambda data: data[: len(data) // 2],
    "one bit flipped in the code": lambda data: data[:-40] + bytes([data[-40] ^ 1]) + data[-39:],
    "garbage": lambda data: os.urandom(len(data)),
    "hashes right but is not Jinja's": lambda data: hashlib.sha256(b"x").digest() + b"x",
    "hashes right but holds no code": lambda data: (lambda p: hashlib.sha256(p).digest() + p)(
        data[32:data.index(b"j2") + 2 + 50]),
}


@pytest.mark.parametrize("corrupt", list(CORRUPTIONS.values()), ids=list(CORRUPTIONS))
def test_a_corrupt_entry_is_compiled_again_and_replaced(corrupt: Callable[[bytes], bytes], cache_home: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    expected = reference(SMOKE, monkeypatch)
    compile_files()
    good = {path: path.read_bytes() for path in entries(cache_home)}
    for path, data in good.items():
        path.write_bytes(corrupt(data))
    assert compile_files() == expected
    assert {path: path.read_bytes() for path in entries(cache_home)} == good


def _environment(sh: Callable[[object], str], source: str) -> jinja2.Environment:
    """An environment configured like the bundle's, on a template we can change."""
    env = jinja2.Environment(loader=jinja2.DictLoader({"t.jinja": source}), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True, trim_blocks=True, lstrip_blocks=True, autoescape=False)
    env.filters["sh"] = sh
    env.bytecode_cache = TemplateCache.open(env)
    assert env.bytecode_cache is not None
    return env


def test_a_changed_template_is_compiled_again(cache_home: Path) -> None:
    assert _environment(_render._sh, "{{ x | sh }} one\n").get_template("t.jinja").render(x="a b") == "'a b' one\n"
    assert _environment(_render._sh, "{{ x | sh }} two\n").get_template("t.jinja").render(x="a b") == "'a b' two\n"
    assert _environment(_render._sh, "{{ x | sh }} one\n").get_template("t.jinja").render(x="a b") == "'a b' one\n"


def test_a_changed_filter_is_not_served_from_the_cache(cache_home: Path) -> None:
    # Jinja applies filters to constants at compile time: the compiled template holds "[a b]".
    source = '{{ "a b" | sh }}\n'
    assert _environment(lambda v: f"[{v}]", source).get_template("t.jinja").render() == "[a b]\n"
    assert _environment(lambda v: f"<{v}>", source).get_template("t.jinja").render() == "<a b>\n"
    assert _environment(_render._sh, source).get_template("t.jinja").render() == "'a b'\n"
    assert len(entries(cache_home)) == 3


def test_other_environment_options_get_other_entries(cache_home: Path) -> None:
    env = _environment(_render._sh, "{% if true %}\n  x\n{% endif %}\n")
    other = jinja2.Environment(loader=env.loader, keep_trailing_newline=True)
    other.filters["sh"] = _render._sh
    other.bytecode_cache = TemplateCache.open(other)
    assert env.get_template("t.jinja").render() == "  x\n"
    assert other.get_template("t.jinja").render() == "\n  x\n\n"
    assert len(entries(cache_home)) == 2


def test_an_unusable_cache_directory_means_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = reference(SMOKE, monkeypatch)
    (tmp_path / "file").write_text("")
    shared = tmp_path / "shared"
    (shared / "acrl" / "templates").mkdir(parents=True)
    (shared / "acrl" / "templates").chmod(0o777)  # anyone could plant code there
    homes = [tmp_path / "file", shared]
    if os.geteuid() == 0:  # only root can give a directory away
        (tmp_path / "theirs" / "acrl" / "templates").mkdir(parents=True, mode=0o700)
        os.chown(tmp_path / "theirs" / "acrl" / "templates", 12345, -1)
        homes.append(tmp_path / "theirs")
    for home in homes:
        monkeypatch.setenv("XDG_CACHE_HOME", str(home))
        environment.cache_clear()
        assert environment().bytecode_cache is None
        assert compile_files() == expected
    assert list((shared / "acrl" / "templates").iterdir()) == []
    environment.cache_clear()


def test_a_relative_xdg_cache_home_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "relative")
    monkeypatch.setenv("HOME", str(tmp_path))
    environment.cache_clear()
    cache = environment().bytecode_cache
    environment.cache_clear()
    assert isinstance(cache, TemplateCache)
    assert cache.directory == str(tmp_path / ".cache" / "acrl" / "templates")


@pytest.mark.parametrize("failing", ["mkstemp", "replace"])
def test_a_cache_that_cannot_be_written_is_skipped(failing: str, cache_home: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    expected = reference(SMOKE, monkeypatch)

    def fail(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    with monkeypatch.context() as m:
        m.setattr(_template_cache.tempfile if failing == "mkstemp" else _template_cache.os, failing, fail)
        assert compile_files() == expected
    assert entries(cache_home) == []  # nothing written, no temporary file left


@pytest.mark.slow
def test_concurrent_compiles_share_the_cache_safely(cache_home: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    expected = reference(SMOKE, monkeypatch)
    env = {**os.environ, "XDG_CACHE_HOME": str(cache_home)}
    for _ in range(2):  # into an empty cache, then into a full one
        outs = [tmp_path / f"out{i}-{len(list(tmp_path.iterdir()))}" for i in range(6)]
        procs = [subprocess.Popen([sys.executable, "-m", "acrl.compiler._cli.main", "compile", str(SMOKE), "-o", str(out)],  # noqa: E501
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for out in outs]
        assert [p.wait() for p in procs] == [0] * len(procs)
        for out in outs:
            assert {p.name: p.read_bytes() for p in out.iterdir()} == expected
        assert [p.name.endswith(".jinja-code") for p in entries(cache_home)] == [True, True]
    with monkeypatch.context() as m:
        forbid_template_compiles(m)
        assert compile_files() == expected


def test_the_key_of_a_filter_does_not_depend_on_reference_counts() -> None:
    """marshal.dumps writes an object referenced elsewhere as a back-reference, so its bytes for the same code
    change when other code in the process holds one of its constants (the filters' keys then changed in the
    middle of a test session, and the cache was missed)."""
    namespace: dict[str, Any] = {}
    exec(compile("def f(v):\n    return v * 1.2345\n", "filter", "exec"), namespace)
    function = namespace["f"]
    before = _template_cache._code_of(function)
    held = [c for c in function.__code__.co_consts if isinstance(c, float)]
    assert held and _template_cache._code_of(function) == before
