"""Hostile inputs: every file a user gives acrl is read bounded, and every input, however large, deep
or strange, ends in a located error (exit status 1 or 2), never a traceback, an internal error, a
hang or unbounded memory. Each case runs the real command line in a subprocess, under a time limit
and an address-space limit."""

from __future__ import annotations

import itertools
import os
import resource
import shutil
import stat
import subprocess
import sys
import threading
import tomllib
from pathlib import Path

import attrs
import pytest
import tomli_w
from hypothesis import given, settings
from hypothesis import strategies as st

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._pipeline.bundle import INPUT_LIMIT, YAML_LIMIT, read_file, read_input, write_bundle
from acrl.compiler._pipeline.parse import MAX_DIGITS, MAX_NESTING, parse_spec_text, toml_bounds
from acrl.compiler._pipeline.values import keys_of_kind
from acrl.compiler._spec.tables import Spec
from conftest import MINIMAL, SpecWriter, merge

MEMORY = 1 << 30  # bytes of address space each command may use
TIMEOUT = 10  # seconds


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))


def _spec(overrides: dict[str, object] | None = None, tail: str = "") -> str:
    return tomli_w.dumps(merge(MINIMAL, overrides or {})) + tail


YAML_OK = ("exp_id: x\nagent_runtime_arn: arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/a-b\n"
           "s3_bucket: b\nmodel_dir: /m\ndata_path: /d.jsonl\nmodel_type: qwen2.5-3B\n")
SCRIPT_HEAD = "#!/bin/bash\n"
SCRIPT_TAIL = "ray job submit --address=http://127.0.0.1:8265 -- python3 train.py --foo \"$A\"\n"


def _laughs(levels: int) -> str:
    names = "abcdefghijklmnop"[:levels]
    text = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    for parent, child in itertools.pairwise(names):
        text += f"{child}: &{child} [" + ", ".join([f"*{parent}"] * 9) + "]\n"
    return YAML_OK + text


# name -> (files to write into the case's directory, the command's arguments after `acrl`,
#          a string the output must contain: the file, the key or the line the error is about)
# A file's content "->TARGET" makes a symbolic link, an int a sparse file of that size, BUNDLE a
# compiled bundle directory (of MINIMAL) holding a 3 GiB sparse big.bin, DEEP_BUNDLE one whose
# manifest.json is arrays nested 100,000 deep.
BUNDLE = "@bundle"
DEEP_BUNDLE = "@deep-bundle"
BIG_SLIME = "@big-slime"  # a slime checkout (tests/fixtures) whose utils/arguments.py and .git/HEAD are 3 GiB
Case = tuple[dict[str, str | bytes | int], list[str], str]
CASES: dict[str, Case] = {
    "integer over 4300 digits": ({"s.toml": _spec(tail="\n[extra]\nbig = " + "9" * 5000 + "\n")},
                                 ["compile", "s.toml", "-o", "out"], "s.toml:"),
    "huge negative integer on a range-checked key": (
        {"s.toml": _spec().replace('id = "test-exp"', 'id = "test-exp"\nnum_rollout = -' + "9" * 4000)},
        ["compile", "s.toml", "-o", "out"], "num_rollout"),
    "huge integer in --set": ({"s.toml": _spec()},
                              ["compile", "s.toml", "-o", "out", "--set", "experiment.num_rollout=" + "9" * 5000],
                              "experiment.num_rollout"),
    "arrays nested 3000 deep": ({"s.toml": _spec(tail="\n[extra]\ndeep = " + "[" * 3000 + "]" * 3000 + "\n")},
                                ["compile", "s.toml", "-o", "out"], "s.toml:"),
    "inline tables nested 3000 deep": (
        {"s.toml": _spec(tail="\n[extra]\ndeep = " + "{a = " * 3000 + "1" + "}" * 3000 + "\n")},
        ["compile", "s.toml", "-o", "out"], "s.toml:"),
    "dotted key 3000 deep": ({"s.toml": _spec(tail="\n[extra]\n" + ".".join(["a"] * 3000) + " = 1\n")},
                             ["compile", "s.toml", "-o", "out"], "s.toml:"),
    "nesting 3000 deep in --set": ({"s.toml": _spec()},
                                   ["compile", "s.toml", "-o", "out", "--set", "extra.x=" + "[" * 3000 + "]" * 3000],
                                   "extra.x"),
    "path component over 255 bytes in [slime] dir": (
        {"s.toml": _spec({"slime": {"dir": "/tmp/" + "a" * 300}})}, ["compile", "s.toml", "-o", "out"], "[slime] dir"),
    "path over 4096 bytes in [slime] dir": (
        {"s.toml": _spec({"slime": {"dir": "/aa" * 2000}})}, ["compile", "s.toml", "-o", "out"], "[slime] dir"),
    "path component over 255 bytes in [model] dir": (
        {"s.toml": _spec({"model": {"dir": "/tmp/" + "a" * 300}})}, ["compile", "s.toml", "-o", "out"], "[model] dir"),
    "path component over 255 bytes in [model] hf_config": (
        {"s.toml": _spec({"model": {"hf_config": "a" * 300 + ".json"}})}, ["compile", "s.toml", "-o", "out"],
        "[model] hf_config"),
    "extends /dev/zero": ({"s.toml": 'extends = "/dev/zero"\n' + _spec()}, ["compile", "s.toml", "-o", "out"],
                          "s.toml:1:"),
    "extends a symbolic link to /dev/zero": (
        {"s.toml": 'extends = "zero.toml"\n' + _spec(), "zero.toml": "->/dev/zero"},
        ["compile", "s.toml", "-o", "out"], "s.toml:1:"),
    "extends a directory": ({"s.toml": 'extends = "."\n' + _spec()}, ["compile", "s.toml", "-o", "out"], "s.toml:1:"),
    "extends a file over the limit": ({"s.toml": 'extends = "big.toml"\n' + _spec(),
                                       "big.toml": "# " + "x" * INPUT_LIMIT + "\n"},
                                      ["compile", "s.toml", "-o", "out"], "too large"),
    "compile /dev/zero": ({}, ["compile", "/dev/zero", "-o", "out"], "/dev/zero"),
    "compile a spec over the limit": ({"s.toml": _spec(tail="# " + "x" * INPUT_LIMIT)},
                                      ["compile", "s.toml", "-o", "out"], "too large"),
    "check /dev/zero": ({}, ["compile", "/dev/zero", "-o", "out", "--check"], "/dev/zero"),
    "explain /dev/zero": ({}, ["explain", "/dev/zero"], "/dev/zero"),
    "explain a symbolic link to /dev/zero": ({"z.toml": "->/dev/zero"}, ["explain", "z.toml"], "z.toml"),
    "import a symbolic link to /dev/zero": ({"z.yaml": "->/dev/zero"},
                                            ["import", "slime-runner", "z.yaml", "-o", "i.toml"], "z.yaml"),
    "import train-sh /dev/zero": ({}, ["import", "train-sh", "/dev/zero", "-o", "i.toml"], "/dev/zero"),
    "import a YAML over the limit": ({"big.yaml": YAML_OK + "x: [" + "1, " * (YAML_LIMIT // 3) + "1]\n"},
                                     ["import", "slime-runner", "big.yaml", "-o", "i.toml"], "too large"),
    "import a billion laughs YAML": ({"l.yaml": _laughs(10)}, ["import", "slime-runner", "l.yaml", "-o", "i.toml"],
                                     "l.yaml:12: too large"),  # the first value over 100,000
    "import a YAML that contains itself": ({"r.yaml": YAML_OK + "extra_flags: &r [*r]\n"},
                                           ["import", "slime-runner", "r.yaml", "-o", "i.toml"], "r.yaml:7: too large"),
    "import a script over the limit": ({"t.sh": SCRIPT_HEAD + "#" + "x" * INPUT_LIMIT + "\n" + SCRIPT_TAIL},
                                       ["import", "train-sh", "t.sh", "-o", "i.toml"], "too large"),
    "import a doubling variable chain": (
        {"t.sh": SCRIPT_HEAD + "A=xxxxxxxx\n" + 'A="$A$A"\n' * 40 + SCRIPT_TAIL},
        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh:"),
    "import a doubling array chain": (
        {"t.sh": SCRIPT_HEAD + "A=(x x x x x x x x)\n" + 'A=("${A[@]}" "${A[@]}")\n' * 40 + SCRIPT_TAIL},
        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh:"),
    "import a doubling += chain": (
        {"t.sh": SCRIPT_HEAD + "A=xxxxxxxx\n" + 'A+="$A"\n' * 40 + SCRIPT_TAIL},
        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh:"),
    "import a script sourcing itself": ({"t.sh": SCRIPT_HEAD + "A=x\n" + "source t.sh\n" * 2000 + SCRIPT_TAIL},
                                        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh"),
    "import expansions nested 3000 deep": (
        {"t.sh": SCRIPT_HEAD + "A=" + "${X:-" * 3000 + "}" * 3000 + "\n" + SCRIPT_TAIL},
        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh:2:"),
    "import expansions nested through a megabyte": (
        {"t.sh": SCRIPT_HEAD + "A=" + "${X:-" * 140_000 + "}" * 140_000 + "\n" + SCRIPT_TAIL},
        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh:2:"),
    "import a chain of $(seq ...) arrays": (
        {"t.sh": SCRIPT_HEAD + "A=($(seq 1 10000))\n" + 'A=("${A[@]}" $(seq 1 10000))\n' * 20 + SCRIPT_TAIL},
        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh:12:"),
    "import command substitutions nested 3000 deep": (
        {"t.sh": SCRIPT_HEAD + "A=" + "$(basename " * 3000 + "x" + ")" * 3000 + "\n" + SCRIPT_TAIL},
        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh:2:"),
    "import a $(seq ...) of 10^14 numbers, 2000 times": (
        {"t.sh": SCRIPT_HEAD + "A=$(seq 1 99999999999999)\n" * 2000 + SCRIPT_TAIL},
        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh:2002: unresolved: --foo: line 2001: $(seq"),
    "import $(( )) of 5000 nested powers": (
        {"t.sh": SCRIPT_HEAD + "A=$((" + "9**" * 5000 + "9))\n" + SCRIPT_TAIL},
        ["import", "train-sh", "t.sh", "-o", "i.toml"], "t.sh:3: unresolved: --foo: line 2:"),
    "import a YAML nested 500 deep": ({"d.yaml": YAML_OK + "extra_flags: " + "[" * 500 + "]" * 500 + "\n"},
                                      ["import", "slime-runner", "d.yaml", "-o", "i.toml"], "d.yaml"),
    "import a YAML nested 200 deep": ({"d.yaml": YAML_OK + "extra_flags: " + "[" * 200 + "]" * 200 + "\n"},
                                      ["import", "slime-runner", "d.yaml", "-o", "i.toml"], "d.yaml:7: too large"),
    "import over an existing 3 GiB file": ({"y.yaml": YAML_OK, "i.toml": 3 << 30},
                                           ["import", "slime-runner", "y.yaml", "-o", "i.toml"], "i.toml"),
    "50,000 unknown keys": ({"s.toml": _spec(tail="".join(f"\nx{i} = {i}" for i in range(50_000)))},
                            ["compile", "s.toml", "-o", "out"], "s.toml:"),
    "verify a bundle holding a 3 GiB file": ({"b": BUNDLE}, ["verify", "b"], "big.bin"),
    "explain a bundle holding a 3 GiB file": ({"b": BUNDLE}, ["explain", "b", "--json"], "b"),
    "diff a bundle holding a 3 GiB file": ({"b": BUNDLE, "b1": BUNDLE}, ["diff", "b", "b1"], "big.bin"),
    "check a bundle holding a 3 GiB file": ({"b": BUNDLE, "s.toml": _spec()},
                                            ["compile", "s.toml", "-o", "b", "--check"], "big.bin"),
    "verify a bundle whose manifest nests 100,000 deep": ({"b": DEEP_BUNDLE}, ["verify", "b"], "manifest.json"),
    "explain a bundle whose manifest nests 100,000 deep": ({"b": DEEP_BUNDLE}, ["explain", "b"], "b"),
    "diff a bundle whose manifest nests 100,000 deep": ({"b": DEEP_BUNDLE, "b1": BUNDLE}, ["diff", "b1", "b"],
                                                       "manifest.json"),
    "check a bundle whose manifest nests 100,000 deep": ({"b": DEEP_BUNDLE, "s.toml": _spec()},
                                                        ["compile", "s.toml", "-o", "b", "--check"], "manifest.json"),
    "a config.json nested 100,000 deep": (
        {"s.toml": _spec({"model": {"args": None, "args_source": "hf", "hf_config": "config.json"}}),
         "config.json": "[" * 100_000 + "]" * 100_000}, ["compile", "s.toml", "-o", "out"], "hf_config"),
    "a slime checkout with a 3 GiB arguments.py": (
        {"slime": BIG_SLIME, "s.toml": _spec({"slime": {"dir": "slime"}})},
        ["compile", "s.toml", "-o", "out", "--verbose"], "arguments.py"),  # a note: shown with --verbose
}

# explain checks no integrity: it explains what it reads; an unreadable slime source is a note
SUCCEEDS = {"explain a bundle holding a 3 GiB file", "explain a bundle whose manifest nests 100,000 deep",
            "a slime checkout with a 3 GiB arguments.py",
            # a value the importer refuses to compute is a note, and the spec is written without it
            "import a $(seq ...) of 10^14 numbers, 2000 times", "import $(( )) of 5000 nested powers"}


def _write(where: Path, files: dict[str, str | bytes | int]) -> None:
    for name, content in files.items():
        path = where / name
        if content == BIG_SLIME:
            shutil.copytree(Path(__file__).parent / "fixtures" / "slime_checkout", path)
            (path / ".git").mkdir()
            for big in (path / "slime" / "utils" / "arguments.py", path / ".git" / "HEAD"):
                with open(big, "wb") as f:
                    f.truncate(3 << 30)
        elif content in (BUNDLE, DEEP_BUNDLE):
            write_bundle(path, compile_spec(where / "minimal.toml", data=_spec().encode()).files, force=False)
            if content == BUNDLE:
                with open(path / "big.bin", "wb") as f:
                    f.truncate(3 << 30)
            else:
                (path / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
        elif isinstance(content, int):
            with open(path, "wb") as f:
                f.truncate(content)
        elif isinstance(content, str) and content.startswith("->"):
            path.symlink_to(content[2:])
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")


@pytest.mark.parametrize("name", list(CASES))
def test_a_hostile_input_ends_in_a_located_error(name: str, tmp_path: Path) -> None:
    files, argv, located = CASES[name]
    _write(tmp_path, files)
    env = {k: v for k, v in os.environ.items() if k != "ACRL_DEBUG"}
    proc = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", *argv], cwd=tmp_path, capture_output=True,
                          text=True, timeout=TIMEOUT, preexec_fn=_limits, env=env)
    output = proc.stdout + proc.stderr
    assert proc.returncode in ((0, 1, 2) if name in SUCCEEDS else (1, 2, 3)), output[-2000:]  # 3: an output in the way
    assert "Traceback" not in output and "internal error" not in output, output[-2000:]
    assert located in output, output[-2000:]
    if name not in SUCCEEDS:
        assert not any((tmp_path / name).exists() for name in ("out", "i.toml") if name not in files)


# --- the bounded reader ---------------------------------------------------------------------------------


def test_read_input_refuses_what_is_not_a_regular_file(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "fifo")
    for path, kind in (("/dev/zero", "character device"), (tmp_path / "link", "character device"),
                       (tmp_path, "directory"), (tmp_path / "fifo", "FIFO")):
        with pytest.raises(OSError, match=kind) as caught:
            read_input(path)
        assert caught.value.strerror.startswith("not a regular file")
    assert read_file("/dev/zero") is None


def test_read_input_stops_at_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 1000)
    assert read_input(path, limit=1000) == b"x" * 1000
    with pytest.raises(OSError, match=r"too large \(over the limit of 999 bytes\)"):
        read_input(path, limit=999)
    with pytest.raises(OSError, match="character device"):
        read_input("/dev/zero", limit=1 << 20, pipe=True)  # a device is refused before any read


def test_a_pipe_is_read_when_allowed_and_bounded(tmp_path: Path) -> None:
    """The spec may come through a pipe (/dev/stdin): read to its end, at most the limit; a FIFO
    that no writer opens reads as empty at once, never waits."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert read_input(fifo, pipe=True) == b""  # no writer: end of file, no wait
    read, write = os.pipe()
    feeder = threading.Thread(target=lambda: (os.write(write, b"y" * 5000), os.close(write)))
    feeder.start()
    with pytest.raises(OSError, match="too large"):
        read_input(f"/proc/self/fd/{read}", pipe=True, limit=4096)
    feeder.join()
    os.close(read)


def test_a_spec_piped_without_end_is_refused_at_the_limit(tmp_path: Path) -> None:
    proc = subprocess.run(f"yes | {sys.executable} -m acrl.compiler._cli.main compile /dev/stdin -o out",
                          shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT,
                          preexec_fn=_limits)
    assert proc.returncode == 1 and "too large" in proc.stderr and "Traceback" not in proc.stderr



# --- TOML values beyond Python's limits, for every key ------------------------------------------------


def _bounded_fields(cl: type = Spec, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """(key path, bound) of every numeric key with a ge/gt/le/lt bound."""
    out: list[tuple[tuple[str, ...], str]] = []
    for field in attrs.fields(cl):
        if isinstance(field.type, type) and attrs.has(field.type):
            out += _bounded_fields(field.type, (*path, field.name))
        else:
            out += [((*path, field.name), b) for b in ("ge", "gt", "le", "lt") if field.metadata.get(b) is not None]
    return out


BOUNDED = _bounded_fields()


def test_the_table_covers_range_checked_keys() -> None:
    assert (("experiment", "num_rollout"), "ge") in BOUNDED and len(BOUNDED) > 10


@pytest.mark.parametrize(("key", "bound"), BOUNDED, ids=[".".join(k) + ":" + b for k, b in BOUNDED])
def test_an_integer_of_thousands_of_digits_on_a_range_checked_key_is_a_located_error(
        key: tuple[str, ...], bound: str, write_spec: SpecWriter) -> None:
    value = -(10 ** 4000) if bound in ("ge", "gt") else 10 ** 4000
    spec: dict[str, object] = {}
    table = spec
    for step in key[:-1]:
        table = table.setdefault(step, {})  # type: ignore[assignment]
    table[key[-1]] = value
    with pytest.raises(SpecError) as caught:
        compile_spec(write_spec(spec))
    located = [d for d in caught.value.diagnostics if d.key == ".".join(key)]
    assert located and located[0].line is not None, caught.value.message[:2000]
    assert len(caught.value.message) < 20_000  # the value is not printed whole


_PIECES = st.sampled_from(["[", "]", "{", "}", "a = ", ", ", "1", "\"", "'", "#", "\n", "x.y = ", "'''", '"""',
                           "[[t]]\n", "[t]\n", "\\"])


@st.composite
def _hostile_toml(draw: st.DrawFn) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 8))):
        if draw(st.booleans()):
            parts.append(draw(_PIECES) * draw(st.integers(1, 300)))
        else:
            parts.append("9" * draw(st.integers(1, 5000)))
    return "k = " + "".join(parts)


@settings(max_examples=300, deadline=None)
@given(_hostile_toml())
def test_any_toml_text_parses_or_is_a_located_spec_error(text: str) -> None:
    """Whatever the nesting or the digits, parsing ends in data or a SpecError, never a
    RecursionError or ValueError; and the pre-scan refuses nothing tomllib would parse within limits."""
    try:
        parse_spec_text(text, "s.toml")
    except SpecError as exc:
        assert exc.diagnostics[0].file == "s.toml"
        if toml_bounds(text) is None:
            return
        try:
            data = tomllib.loads(text)
        except (tomllib.TOMLDecodeError, RecursionError, ValueError):
            return
        assert _depth(data) > MAX_NESTING // 2 or "9" * MAX_DIGITS in text, text[:200]


def _depth(value: object) -> int:
    stack, deepest = [(value, 1)], 0
    while stack:
        item, d = stack.pop()
        deepest = max(deepest, d)
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        stack += [(c, d + 1) for c in children]
    return deepest


PATH_KEYS = keys_of_kind("path")  # every key whose setting() says kind="path"


@pytest.mark.parametrize("key", PATH_KEYS, ids=[".".join(map(str, k)) for k in PATH_KEYS])
@pytest.mark.parametrize("value", ["/x/" + "a" * 256, "/" + "ab/" * 1400], ids=["component", "whole"])
def test_a_path_no_file_system_can_name_is_a_located_error(key: tuple[str | int, ...], value: str,
                                                          write_spec: SpecWriter) -> None:
    *tables, last = ("ds" if step == "*" else step for step in key)
    item = last == 0  # an item of an array
    if item:
        *tables, last = tables
    spec: dict[str, object] = {}
    table = spec
    for step in tables:
        table = table.setdefault(str(step), {})  # type: ignore[assignment]
    table[str(last)] = [value] if item else value
    if (*tables, last) == ("checkpoint", "save"):
        table["save_interval"] = 10
    with pytest.raises(SpecError) as caught:
        compile_spec(write_spec(spec))
    assert [d.key for d in caught.value.diagnostics if d.severity == "error"] == \
        [".".join(map(str, (*tables, last, *((0,) if item else ()))))], caught.value.message[:2000]


NAME_KEYS = keys_of_kind("name")  # every key whose setting() says kind="name" (ids, addresses, images, W&B names)


@pytest.mark.parametrize("key", NAME_KEYS, ids=[".".join(map(str, k)) for k in NAME_KEYS])
@pytest.mark.parametrize("value", ["", " \t", "a" * 257, "x\ny"], ids=["empty", "blank", "long", "line-break"])
def test_an_empty_or_absurd_name_is_a_located_error_of_its_key(key: tuple[str, ...], value: str,
                                                               write_spec: SpecWriter) -> None:
    table, last = key
    with pytest.raises(SpecError) as caught:
        compile_spec(write_spec({table: {last: value}}))
    errors = [d for d in caught.value.diagnostics if d.severity == "error"]
    assert [d.key for d in errors] == [f"{table}.{last}"], caught.value.message[:2000]
    assert errors[0].line is not None and errors[0].hint, caught.value.message[:2000]


def test_import_never_replaces_what_is_not_a_regular_file(tmp_path: Path) -> None:
    """-o FIFO --force: the spec is not renamed over it (as root, -o /dev/null --force would have
    replaced the device)."""
    (tmp_path / "y.yaml").write_text(YAML_OK)
    os.mkfifo(tmp_path / "fifo")
    proc = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "import", "slime-runner", "y.yaml", "-o", "fifo",
                           "--force"], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
    assert proc.returncode == 3 and "fifo" in proc.stderr and "Traceback" not in proc.stderr
    assert stat.S_ISFIFO(os.lstat(tmp_path / "fifo").st_mode)


def test_import_removes_only_the_temporaries_of_importers_that_are_gone(tmp_path: Path) -> None:
    (tmp_path / "y.yaml").write_text(YAML_OK)
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True).stdout)
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        kept = [f".i.toml.{live.pid}.abcd1234.tmp", ".i.toml.abcd1234.tmp", f".j.toml.{dead}.abcd1234.tmp"]
        for name in [*kept, f".i.toml.{dead}.abcd1234.tmp"]:
            (tmp_path / name).write_text("x")
        proc = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "import", "slime-runner", "y.yaml", "-o",
                               "i.toml"], cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT)
        assert (tmp_path / "i.toml").is_file(), proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == sorted(kept)
    finally:
        live.kill()
        live.wait()


def test_preflight_reads_a_bundle_nested_thousands_deep_as_unreadable(tmp_path: Path) -> None:
    from acrl.compiler import AcrlError
    from acrl.runtime._preflight.checks import read_bundle_info

    write_bundle(tmp_path / "b", compile_spec(tmp_path / "s.toml", data=_spec().encode()).files, force=False)
    (tmp_path / "b" / "spec.toml").write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(AcrlError) as error:
        read_bundle_info(tmp_path / "b")
    assert error.value.message.startswith(f"{tmp_path / 'b'}: ") and "acrl-compile" in (error.value.hint or "")


def test_an_extends_chain_is_bounded(tmp_path: Path) -> None:
    from acrl.compiler._pipeline.layers import MAX_BASES, load_spec

    for i in range(MAX_BASES + 1):
        (tmp_path / f"c{i}.toml").write_text(f'extends = "c{i + 1}.toml"\n')
    (tmp_path / f"c{MAX_BASES + 1}.toml").write_text(_spec())
    with pytest.raises(SpecError) as caught:
        load_spec(tmp_path / "c0.toml")
    (error,) = caught.value.diagnostics
    assert (error.file, error.key, error.line) == (str(tmp_path / f"c{MAX_BASES}.toml"), "extends", 1)
    (tmp_path / f"c{MAX_BASES}.toml").write_text(_spec())
    assert load_spec(tmp_path / "c0.toml").data["experiment"]["id"] == "test-exp"  # a chain of MAX_BASES is fine


# --- preflight: datasets and config.json on the cluster ----------------------------------------------


def _preflight_outcome(check: str, where: Path, spec: dict[str, object]) -> tuple[str, str]:
    from acrl.runtime._preflight import checks as _preflight

    info = _preflight.BundleInfo(where, spec, None, (), None)
    result = _preflight.run_check(_preflight.Check("c", getattr(_preflight, check)), info)
    return result.status, result.detail


@pytest.mark.parametrize("kind", ["device", "fifo", "link to a device"])
def test_a_dataset_that_is_not_a_regular_file_fails_at_once(tmp_path: Path, kind: str) -> None:
    """/dev/zero (a line without end) raised MemoryError; a FIFO without a writer hung the check."""
    path = tmp_path / "d.jsonl"
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path = Path("/dev/zero") if kind == "device" else path
        if kind == "link to a device":
            path.symlink_to("/dev/zero")
    script = ("import sys; sys.path.insert(0, 'tests'); from pathlib import Path; import test_bounds as t; "
              f"print(t._preflight_outcome('check_datasets', Path({str(tmp_path)!r}), "
              f"{{'data': {{'path': {str(path)!r}}}}}))")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=TIMEOUT,
                          preexec_fn=_limits, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.startswith("('failed'") and "not a regular file" in proc.stdout


def test_a_dataset_line_over_the_limit_is_a_bad_line_read_in_bounded_memory(tmp_path: Path) -> None:
    from acrl.runtime._preflight.checks import LINE_LIMIT, scan_jsonl

    path = tmp_path / "d.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"prompt": "p", "metadata": {}}\n')
        f.truncate(f.tell() + LINE_LIMIT + 100)  # a line of NULs, past the limit
        f.seek(0, os.SEEK_END)
        f.write(b'\n{"prompt": "p", "metadata": {}}\n' + b"[" * 100_000 + b"]" * 100_000 + b"\n")
    count, bad, bad_count = scan_jsonl(path)
    assert (count, bad_count) == (4, 2)
    assert [n for n, _ in bad] == [2, 4] and "too large" in bad[0][1] and "nested too deeply" in bad[1][1]


def test_a_config_json_is_read_bounded(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    with open(model / "config.json", "wb") as f:
        f.truncate(INPUT_LIMIT + 1)
    status, detail = _preflight_outcome("check_model", tmp_path, {"model": {"dir": str(model)}})
    assert status == "failed" and "too large" in detail
    (model / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    status, detail = _preflight_outcome("check_model", tmp_path, {"model": {"dir": str(model)}})
    assert status == "failed" and "nested too deeply" in detail


def test_git_files_of_a_checkout_are_read_bounded(tmp_path: Path) -> None:
    from acrl.compiler._slime.source import read_git_commit

    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("a" * 40 + "\n")
    assert read_git_commit(tmp_path) == "a" * 40
    (tmp_path / ".git" / "HEAD").write_text("a" * 40 + " " * (2 << 20))  # past the limit: not read, not trusted
    assert read_git_commit(tmp_path) is None


def test_acrl_runs_lists_hostile_records_as_unreadable(tmp_path: Path) -> None:
    """`acrl runs` reads run.json bounded: a device, a FIFO, an over-large or deeply nested record is
    listed as unreadable, in bounded time and memory, never an internal error."""
    from acrl.runtime._records import RECORD_LIMIT, list_records

    runs = tmp_path / "runs"
    for run_id in ("a", "b", "c", "d"):
        (runs / "exp" / run_id).mkdir(parents=True)
    (runs / "exp" / "a" / "run.json").symlink_to("/dev/zero")
    os.mkfifo(runs / "exp" / "b" / "run.json")
    with open(runs / "exp" / "c" / "run.json", "wb") as big:
        big.truncate(RECORD_LIMIT + 1)
    (runs / "exp" / "d" / "run.json").write_text("[" * 100_000 + "]" * 100_000)
    records = {r["run_id"]: r for r in list_records(runs)}
    assert {k: r["status"] for k, r in records.items()} == dict.fromkeys("abcd", "unreadable")
    assert "not a regular file" in records["a"]["error"] and "not a regular file" in records["b"]["error"]
    assert "too large" in records["c"]["error"]
