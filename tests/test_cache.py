"""The compile cache (compiler/_fast/cache.py): a hit repeats exactly what compiling would print and
write, without importing the compiler's libraries; anything that could change the result is a miss."""

from __future__ import annotations

import ast
import json
import os
import shutil
import stat
import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest
import tomli_w

import acrl.compiler._pipeline.compile as compile_module
from acrl.compiler._cli.main import compile_main
from acrl.compiler._fast import cache as _cache
from acrl.compiler._pipeline.parse import SpecSource
from conftest import EXAMPLE_SPECS, MINIMAL, REPO, SpecWriter, merge

HF = REPO / "tests" / "fixtures" / "hf"
HEAVY = ("attr", "attrs", "cattrs", "jinja2", "yaml", "markupsafe", "tomllib", "tomli_w", "pathlib", "tempfile",
         "shutil", "json", "typing", "subprocess")


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache home of this test's own. Inputs count as changed during a compile only when
    their timestamps are not older than its start (no slack for coarse file-system clocks): the
    tests write their config.json files just before compiling, and cannot date a ctime back."""
    home = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    monkeypatch.setattr(_cache, "_TIMESTAMP_SLACK_NS", 0)
    return home


@pytest.fixture
def compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The specs that were really compiled (not served from the cache) in this test."""
    calls: list[str] = []
    real = compile_module.compile_source

    def spy(source: SpecSource, **kwargs: bool) -> compile_module.Bundle:
        calls.append(source.name)
        return real(source, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(compile_module, "compile_source", spy)
    return calls


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = compile_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def entries(home: Path) -> list[Path]:
    folder = home / "acrl" / "compile"
    return sorted(folder.glob("*.acrl-compile")) if folder.is_dir() else []


def tree(path: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in sorted(path.iterdir())}


def age(path: Path, seconds: float = 60) -> None:
    """Date a file back, as if written a while before the compile (see the racy-input rule)."""
    past = time.time() - seconds
    os.utime(path, (past, past))


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_a_hit_prints_and_writes_exactly_what_compiling_does(spec: Path, tmp_path: Path, cache_home: Path,
                                                             compiles: list[str],
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    first = run(capsys, str(spec), "-o", str(tmp_path / "a"))
    second = run(capsys, str(spec), "-o", str(tmp_path / "b"))
    uncached = run(capsys, str(spec), "-o", str(tmp_path / "c"), "--no-cache")
    assert compiles == [str(spec), str(spec)]  # the second was a hit; --no-cache compiles
    assert first[0] == second[0] == uncached[0] == 0
    assert [second[1], second[2]] == [first[1].replace("/a", "/b"), first[2]]
    assert uncached[2] == first[2]
    assert tree(tmp_path / "a") == tree(tmp_path / "b") == tree(tmp_path / "c")
    assert len(entries(cache_home)) == 1


def test_warnings_and_json_output_come_back_from_a_hit(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                                       compiles: list[str],
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec({"agentcore": {"max_concurrent": 200}})
    results = [run(capsys, str(path), "-o", str(tmp_path / name), "--json") for name in ("a", "b")]
    assert len(compiles) == 1
    assert results[0] == (0, results[1][1].replace(str(tmp_path / "b"), str(tmp_path / "a")), results[1][2])
    (warning,) = json.loads(results[1][1])["warnings"]  # the hit's
    assert (warning["rule"], warning["key"], warning["severity"]) == \
        ("ACRL-T002", "agentcore.max_concurrent", "warning")
    text = [run(capsys, str(path), "-o", str(tmp_path / name)) for name in ("c", "d")]
    assert text[0][2] == text[1][2]
    assert text[1][2].startswith(f"{path}:{warning['line']}:{warning['column']}: warning: [agentcore] max_concurrent")


def test_strict_is_never_served_a_non_strict_compile(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec({"agentcore": {"max_concurrent": 200}})
    assert run(capsys, str(path), "-o", str(tmp_path / "w"))[0] == 0
    code, out, _ = run(capsys, str(path), "-o", str(tmp_path / "s"), "--strict", "--json")
    (error,) = json.loads(out)["error"]["diagnostics"]
    assert (code, error["rule"], error["severity"]) == (1, "ACRL-T002", "error")
    assert not (tmp_path / "s").exists()


def test_errors_are_not_cached(write_spec: SpecWriter, tmp_path: Path, cache_home: Path, compiles: list[str],
                               capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec({"rollout": {"batch_size": "many"}})
    assert [run(capsys, str(path), "-o", str(tmp_path / "b"))[0] for _ in range(2)] == [1, 1]
    assert len(compiles) == 2 and entries(cache_home) == []


def test_an_edited_spec_is_compiled_again(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                          compiles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec()
    assert run(capsys, str(path), "-o", str(tmp_path / "a"))[0] == 0
    write_spec({"rollout": {"batch_size": 64}})
    assert run(capsys, str(path), "-o", str(tmp_path / "b"))[0] == 0
    assert len(compiles) == 2
    assert (tmp_path / "a" / "train.sh").read_bytes() != (tmp_path / "b" / "train.sh").read_bytes()


def model_spec(write_spec: SpecWriter, **model: object) -> Path:
    spec = merge(MINIMAL, {"model": {"args": None}})
    spec["model"].update(model)
    return write_spec(text=tomli_w.dumps(spec))


def test_a_changed_config_json_is_a_miss(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                         compiles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # The base model's config.json agrees with the qwen2.5-32B catalog entry; the Instruct one does not.
    config = tmp_path / "config.json"
    base = (HF / "Qwen2.5-32B-Instruct" / "config.json").read_text().replace('"rms_norm_eps": 1e-06',
                                                                              '"rms_norm_eps": 1e-05')
    config.write_text(base)
    age(config)
    path = model_spec(write_spec, type="qwen2.5-32B", hf_config="config.json")
    assert run(capsys, str(path), "-o", str(tmp_path / "a"))[0] == 0
    assert run(capsys, str(path), "-o", str(tmp_path / "a"))[0] == 0
    assert len(compiles) == 1 and len(entries(cache_home)) == 1
    shutil.copy(HF / "Qwen2.5-32B-Instruct" / "config.json", config)
    age(config, 30)  # even with a timestamp in the past, the file is another one
    code, _, err = run(capsys, str(path), "-o", str(tmp_path / "b"))
    assert code == 1 and "rms_norm_eps" in err and len(compiles) == 2


def test_a_config_json_that_appears_is_a_miss(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                              compiles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    model_dir = tmp_path / "models" / "Qwen2.5-32B-Instruct"
    path = model_spec(write_spec, type="qwen2.5-32B", dir=str(model_dir))
    code, _, err = run(capsys, str(path), "-o", str(tmp_path / "a"))
    assert code == 0 and "MODEL_ARGS checked against" not in err
    model_dir.mkdir(parents=True)
    shutil.copy(HF / "Qwen2.5-32B-Instruct" / "config.json", model_dir / "config.json")
    code, _, err = run(capsys, str(path), "-o", str(tmp_path / "b"))
    assert code == 1 and "rms_norm_eps" in err and len(compiles) == 2


def test_an_input_changed_too_recently_to_tell_is_not_trusted(write_spec: SpecWriter, tmp_path: Path,
                                                              cache_home: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_cache, "_TIMESTAMP_SLACK_NS", 2_000_000_000)  # the real one
    config = tmp_path / "config.json"
    shutil.copy(HF / "Qwen2.5-3B-Instruct" / "config.json", config)  # could change again unseen
    path = model_spec(write_spec, type="qwen2.5-3B", hf_config="config.json")
    assert run(capsys, str(path), "-o", str(tmp_path / "a"))[0] == 0
    assert entries(cache_home) == []
    monkeypatch.setattr(_cache, "_TIMESTAMP_SLACK_NS", 0)  # as it will be once the clock has moved on
    assert run(capsys, str(path), "-o", str(tmp_path / "a"))[0] == 0
    assert len(entries(cache_home)) == 1


def test_a_slime_checkout_on_this_machine_is_never_cached(write_spec: SpecWriter, tmp_path: Path,
                                                          cache_home: Path, compiles: list[str],
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    slime = tmp_path / "slime"
    path = write_spec({"slime": {"dir": str(slime)}})
    code, _, err = run(capsys, str(path), "-o", str(tmp_path / "a"), "--verbose")  # notes only with --verbose
    assert code == 0 and "no slime checkout on this machine" in err and len(entries(cache_home)) == 1
    (slime / "slime" / "utils").mkdir(parents=True)
    (slime / "slime" / "utils" / "arguments.py").write_text(
        "def add(parser):\n    parser.add_argument('--rollout-batch-size', type=int)\n")
    code, _, err = run(capsys, str(path), "-o", str(tmp_path / "b"), "--verbose")
    assert code == 0 and "no slime checkout on this machine" not in err and "flags checked against" in err
    run(capsys, str(path), "-o", str(tmp_path / "b"))
    assert len(compiles) == 3 and len(entries(cache_home)) == 1


def test_a_sourced_model_script_is_never_cached(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                                compiles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    slime = tmp_path / "slime"
    (slime / "scripts" / "models").mkdir(parents=True)
    (slime / "scripts" / "models" / "tiny.sh").write_text(
        "MODEL_ARGS=(--num-layers 2 --hidden-size 64 --num-attention-heads 4 --ffn-hidden-size 128 "
        "--vocab-size 1000 --seq-length 128 --max-position-embeddings 128)\n")
    spec = merge(MINIMAL, {"model": {"args": None, "type": "tiny", "args_source": "script"},
                           "slime": {"dir": str(slime)}})
    path = write_spec(text=tomli_w.dumps(spec))
    results = [run(capsys, str(path), "-o", str(tmp_path / "b")) for _ in range(2)]
    assert [r[0] for r in results] == [0, 0], results[0][2]
    assert len(compiles) == 2 and entries(cache_home) == []


def test_the_same_relative_spec_path_from_another_directory_is_another_entry(
        tmp_path: Path, cache_home: Path, compiles: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("one", "two"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "spec.toml").write_text(tomli_w.dumps(MINIMAL))
        monkeypatch.chdir(tmp_path / name)
        assert run(capsys, "spec.toml", "-o", "out")[0] == 0
    assert len(compiles) == 2 and len(entries(cache_home)) == 2


def test_a_corrupt_entry_is_a_miss_and_is_removed(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                                  compiles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec()
    first = run(capsys, str(path), "-o", str(tmp_path / "a"))
    (entry,) = entries(cache_home)
    data = bytearray(entry.read_bytes())
    data[-5] ^= 0xFF
    entry.write_bytes(bytes(data))
    assert run(capsys, str(path), "-o", str(tmp_path / "a")) == (0, first[1].replace("created", "unchanged"),
                                                                  first[2])
    assert len(compiles) == 2 and len(entries(cache_home)) == 1  # compiled, and kept anew
    entry.write_bytes(b"short")
    assert run(capsys, str(path), "-o", str(tmp_path / "a"))[0] == 0 and len(compiles) == 3


def test_an_unsafe_cache_directory_is_not_used(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                               compiles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    folder = cache_home / "acrl" / "compile"
    folder.mkdir(parents=True)
    folder.chmod(0o777)  # anyone could plant an entry
    path = write_spec()
    for _ in range(2):
        assert run(capsys, str(path), "-o", str(tmp_path / "a"))[0] == 0
    assert len(compiles) == 2 and entries(cache_home) == []


def test_the_least_recently_used_entries_go_first(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                                  monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(_cache, "MAX_ENTRIES", 2)
    paths = [write_spec({"rollout": {"batch_size": n}}, name=f"s{n}.toml") for n in (8, 16, 32)]
    for n, path in enumerate(paths):
        assert run(capsys, str(path), "-o", str(tmp_path / str(n)))[0] == 0
        for i, entry in enumerate(entries(cache_home)):  # distinct, increasing times whatever the clock
            os.utime(entry, ns=(entry.stat().st_mtime_ns, entry.stat().st_mtime_ns - (10 - i) * 10**9))
    assert len(entries(cache_home)) == 2


def test_a_library_or_compiler_file_that_changes_changes_every_key(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    library = tmp_path / "site" / "fakelib"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text("VERSION = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setattr(_cache, "_LIBRARIES", (*_cache._LIBRARIES, "fakelib"))
    monkeypatch.setattr(_cache, "_FINGERPRINT", None)
    before = _cache.key("spec.toml", "0" * 64, strict=False)
    monkeypatch.setattr(_cache, "_FINGERPRINT", None)
    assert _cache.key("spec.toml", "0" * 64, strict=False) == before
    (library / "__init__.py").write_text("VERSION = 22\n")  # an upgrade
    monkeypatch.setattr(_cache, "_FINGERPRINT", None)
    assert _cache.key("spec.toml", "0" * 64, strict=False) != before


@pytest.mark.parametrize("edited", ["compiler/_pipeline/render.py", "templates/train.sh.jinja"])
def test_an_edit_to_the_compiler_or_a_template_changes_every_key(edited: str, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    for part in ("compiler", "templates"):
        shutil.copytree(REPO / part, tmp_path / part, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(_cache, "__file__", str(tmp_path / "compiler" / "_fast/cache.py"))  # where the code is
    monkeypatch.setattr(_cache, "_FINGERPRINT", None)
    before = _cache.key("spec.toml", "0" * 64, strict=False)
    with open(tmp_path / edited, "a") as f:
        f.write("\n")
    monkeypatch.setattr(_cache, "_FINGERPRINT", None)
    assert _cache.key("spec.toml", "0" * 64, strict=False) != before


def test_a_spec_read_from_a_pipe_compiles(tmp_path: Path, cache_home: Path) -> None:
    """The spec is read once: a pipe has nothing left for a second read."""
    for _ in range(2):  # a miss, then a hit
        proc = subprocess.run(f"cat {EXAMPLE_SPECS[0]} | {sys.executable} -m acrl.compiler._cli.main compile /dev/stdin "  # noqa: E501
                              f"-o {tmp_path / 'out'} --force", shell=True, capture_output=True, text=True,
                              env={**os.environ, "XDG_CACHE_HOME": str(cache_home)})
        assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "train.sh").read_bytes() == \
        (REPO / "tests" / "golden" / EXAMPLE_SPECS[0].stem / "train.sh").read_bytes()


def test_an_input_that_cannot_be_stated_is_not_an_internal_error(write_spec: SpecWriter, tmp_path: Path,
                                                                 cache_home: Path, compiles: list[str],
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)  # os.stat: too many levels of symbolic links
    path = write_spec({"slime": {"dir": str(loop)}})
    for flags in ((), ("--no-cache",), ()):
        code, _, err = run(capsys, str(path), "-o", str(tmp_path / "a"), *flags)
        assert code == 0 and "internal error" not in err
    assert len(compiles) == 3 and entries(cache_home) == []  # never kept: it cannot be watched


def test_a_cache_home_others_can_write_to_is_not_used(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                                      compiles: list[str],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (cache_home / "acrl").mkdir(parents=True)
    (cache_home / "acrl").chmod(0o777)  # the leaf could be swapped for someone else's
    path = write_spec()
    for _ in range(2):
        assert run(capsys, str(path), "-o", str(tmp_path / "a"))[0] == 0
    assert len(compiles) == 2 and entries(cache_home) == []


def _imports_after_compile(tmp_path: Path, spec: Path, out: str) -> tuple[list[str], str]:
    """Run acrl-compile in a fresh interpreter and list the modules it imported. -S: without the
    site machinery, so that an editable install's import hook (pathlib, importlib, ...) does not
    hide what the compile itself imports; acrl and the libraries come from PYTHONPATH."""
    tree = tmp_path / "path"
    if not tree.exists():
        (tree / "acrl").mkdir(parents=True)
        for part in ("compiler", "templates"):
            (tree / "acrl" / part).symlink_to(REPO / part)
    site = os.path.dirname(os.path.dirname(attrs.__file__))
    code = ("import sys\nfrom acrl.compiler._cli.main import compile_main\n"
            f"code = compile_main([{str(spec)!r}, '-o', {out!r}])\n"
            "print(repr(sorted(sys.modules)), file=sys.stderr)\nsys.exit(code)\n")
    env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{site}"}
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return ast.literal_eval(proc.stderr.splitlines()[-1]), proc.stdout


def test_a_hit_imports_none_of_the_compilers_libraries(tmp_path: Path, cache_home: Path) -> None:
    spec = EXAMPLE_SPECS[0]
    loaded, _ = _imports_after_compile(tmp_path, spec, "a")
    assert {"cattrs", "jinja2", "yaml"} <= set(loaded)  # a miss compiles
    loaded, out = _imports_after_compile(tmp_path, spec, "b")
    assert out.startswith(f"created b{os.sep} ")
    assert [m for m in loaded if m.split(".")[0] in HEAVY] == []
    assert (tmp_path / "a" / "train.sh").read_bytes() == (tmp_path / "b" / "train.sh").read_bytes()


def test_no_cache_neither_reads_nor_writes(write_spec: SpecWriter, tmp_path: Path, cache_home: Path,
                                           compiles: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    path = write_spec()
    run(capsys, str(path), "-o", str(tmp_path / "a"), "--no-cache")
    assert entries(cache_home) == []
    run(capsys, str(path), "-o", str(tmp_path / "a"))
    run(capsys, str(path), "-o", str(tmp_path / "a"), "--no-cache")
    assert len(compiles) == 3



_AUDIT = r"""
import json, sys
from pathlib import Path
from acrl.compiler._pipeline import compile as _compile

warm_up, spec = Path(sys.argv[1]), Path(sys.argv[2])
_compile.compile_spec(warm_up)  # every module the compile imports lazily is imported now
events = []

def hook(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        events.append(("open", str(args[0])))
    elif event in ("os.listdir", "os.scandir", "os.walk"):
        events.append((event, str(args[0])))
    elif event == "subprocess.Popen":
        events.append((event, str(args[1])))

sys.addaudithook(hook)
bundle = _compile.compile_spec(spec)
inputs = _compile.external_inputs(bundle, spec.parent)
sys.stdout.write(json.dumps({"events": events, "inputs": None if inputs is None else [str(p) for p in inputs]}))
"""


@pytest.mark.parametrize("with_config", [True, False])
def test_every_file_a_compile_reads_is_the_spec_or_an_input_the_cache_watches(
        write_spec: SpecWriter, tmp_path: Path, cache_home: Path, with_config: bool) -> None:
    """If the compiler starts reading another file, this fails until external_inputs names it: a
    cache that does not watch an input would hand out stale bundles. (Python's audit events cover
    opening and listing files; a stat alone raises none, hence the directory checks above.)"""
    model_dir = tmp_path / "models" / "Qwen2.5-3B-Instruct"
    if with_config:
        model_dir.mkdir(parents=True)
        shutil.copy(HF / "Qwen2.5-3B-Instruct" / "config.json", model_dir / "config.json")
    warm_up = model_spec(write_spec, type="qwen2.5-3B", dir=str(model_dir))
    shutil.copy(warm_up, tmp_path / "warm-up.toml")
    proc = subprocess.run([sys.executable, "-c", _AUDIT, str(tmp_path / "warm-up.toml"), str(warm_up)],
                          capture_output=True, text=True, env={**os.environ, "XDG_CACHE_HOME": str(cache_home)})
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    allowed = [str(cache_home), str(REPO / "templates"), str(REPO / "compiler"), sys.prefix, sys.base_prefix]
    outside = {path for _, path in result["events"] if not path.startswith(tuple(allowed))}
    assert result["inputs"] is not None
    assert outside <= {str(warm_up), *result["inputs"]}
    assert str(model_dir / "config.json") in outside  # looked for, whether it is there or not


def _help_in_fresh_interpreter(tmp_path: Path, argv: list[str], columns: str) -> tuple[str, list[str]]:
    tree = tmp_path / "path"
    if not tree.exists():
        (tree / "acrl").mkdir(parents=True)
        (tree / "acrl" / "compiler").symlink_to(REPO / "compiler")
        (tree / "acrl" / "runtime").symlink_to(REPO / "runtime")
    code = ("import sys\nfrom acrl.runtime._cli import main\n"  # the `acrl` console script
            f"try:\n    main({argv!r})\nexcept SystemExit as exc:\n    assert exc.code == 0, exc.code\n"
            "print(repr(sorted(sys.modules)), file=sys.stderr)\n")
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": columns}
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, env=env, check=True)
    return proc.stdout, ast.literal_eval(proc.stderr.splitlines()[-1])


@pytest.mark.parametrize("argv", [["--help"], ["compile", "-h"], ["models", "show", "--help"], ["run", "-h"]])
def test_help_is_printed_again_without_building_a_parser(argv: list[str], tmp_path: Path, cache_home: Path) -> None:
    first, loaded = _help_in_fresh_interpreter(tmp_path, argv, "100")
    assert "argparse" in loaded and first.startswith("usage: acrl")
    again, loaded = _help_in_fresh_interpreter(tmp_path, argv, "100")
    assert again == first and "argparse" not in loaded
    narrow, loaded = _help_in_fresh_interpreter(tmp_path, argv, "50")  # another width: argparse again
    assert "argparse" in loaded and narrow.startswith("usage: acrl")


def test_kept_help_that_does_not_match_is_not_printed(tmp_path: Path, cache_home: Path) -> None:
    first, _ = _help_in_fresh_interpreter(tmp_path, ["--help"], "80")
    (kept,) = (cache_home / "acrl" / "help").glob("*.help")
    material, _, text = kept.read_text().partition("\n")
    kept.write_text(material + "\n" + text[:-10])  # truncated
    again, loaded = _help_in_fresh_interpreter(tmp_path, ["--help"], "80")
    assert again == first and "argparse" in loaded
    kept.write_text(material.replace("'--help'", "'--hel'") + "\n" + "usage: forged\n")  # for other words
    again, loaded = _help_in_fresh_interpreter(tmp_path, ["--help"], "80")
    assert again == first and "argparse" in loaded


def test_an_unknown_command_with_help_is_still_an_error(capsys: pytest.CaptureFixture[str], cache_home: Path) -> None:
    from acrl.compiler._cli.main import acrl_main

    for _ in range(2):
        with pytest.raises(SystemExit) as exc:
            acrl_main(["nonsense", "--help"])
        assert exc.value.code == 2 and "unknown command 'nonsense'" in capsys.readouterr().err
    assert list((cache_home / "acrl" / "help").glob("*")) == [] if (cache_home / "acrl" / "help").exists() else True


def test_check_writes_nothing_even_into_an_empty_cache_home(tmp_path: Path, cache_home: Path) -> None:
    """--check compiles with cold caches and still writes no file anywhere (subprocess: the template
    cache's read-only switch is process-wide)."""
    proc = subprocess.run([sys.executable, "-m", "acrl.compiler._cli.main", "compile", "--check", str(EXAMPLE_SPECS[0]),
                           "-o", str(REPO / "tests" / "golden" / EXAMPLE_SPECS[0].stem)], capture_output=True,
                          text=True, env={**os.environ, "XDG_CACHE_HOME": str(cache_home)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert [p for p in cache_home.rglob("*") if p.is_file()] == []


def test_help_words_that_argparse_takes_as_an_argument_run_the_command(tmp_path: Path, cache_home: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`acrl explain NAME --help`: argparse hands --help to explain as its KEY (argparse.REMAINDER); explain
    prints its own help for it, as the user asked, rather than any help kept for other words."""
    from acrl.compiler._cli.main import acrl_main

    bundle = tmp_path / "mybundle"
    shutil.copytree(REPO / "tests" / "golden" / EXAMPLE_SPECS[0].stem, bundle)
    os.chdir(tmp_path)
    try:
        code = acrl_main(["explain", "mybundle", "--help"])
    finally:
        os.chdir(REPO)
    out, err = capsys.readouterr()
    assert code == 0 and out.startswith("usage: acrl explain [-h]") and err == ""
    assert "SPEC|BUNDLE" in out  # explain's help, not acrl's


def test_the_compilers_own_help_is_kept_apart_from_the_acrl_commands_help(
        cache_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`python -m acrl.compiler._cli.main --help` has no `run`; it must never be what `acrl --help` prints."""
    from acrl.compiler._cli.main import acrl_main
    from acrl.runtime._cli import main

    for entry_point in (acrl_main, main, acrl_main, main):  # each twice: the second time from the cache
        with pytest.raises(SystemExit):
            entry_point(["--help"])
        out = capsys.readouterr().out
        assert ("    run " in out) == (entry_point is main), out
