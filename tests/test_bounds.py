"""Hostile inputs: every file a user gives acrl is read bounded, and every input, however large, deep
or strange, ends in a located error (exit status 1 or 2), never a traceback, an internal error, a
hang or unbounded memory. Each case runs the real command line in a subprocess, under a time limit
and an address-space limit."""

from __future__ import annotations

import itertools
import os
import resource
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import tomli_w

from acrl.compiler._bundle import INPUT_LIMIT, YAML_LIMIT, read_file, read_input
from conftest import MINIMAL, merge

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
Case = tuple[dict[str, str | bytes], list[str], str]
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
        {"s.toml": _spec({"slime": {"dir": "/tmp/" + "a" * 300}})}, ["compile", "s.toml", "-o", "out"], "slime.dir"),
    "path over 4096 bytes in [slime] dir": (
        {"s.toml": _spec({"slime": {"dir": "/aa" * 2000}})}, ["compile", "s.toml", "-o", "out"], "slime.dir"),
    "path component over 255 bytes in [model] dir": (
        {"s.toml": _spec({"model": {"dir": "/tmp/" + "a" * 300}})}, ["compile", "s.toml", "-o", "out"], "model.dir"),
    "path component over 255 bytes in [model] hf_config": (
        {"s.toml": _spec({"model": {"hf_config": "a" * 300 + ".json"}})}, ["compile", "s.toml", "-o", "out"],
        "hf_config"),
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
}


def _write(where: Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = where / name
        if isinstance(content, str) and content.startswith("->"):
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
    assert proc.returncode in (1, 2), output[-2000:]
    assert "Traceback" not in output and "internal error" not in output, output[-2000:]
    assert located in output, output[-2000:]
    assert not (tmp_path / "out").exists() and not (tmp_path / "i.toml").exists()


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
    proc = subprocess.run(f"yes | {sys.executable} -m acrl.compiler._cli compile /dev/stdin -o out",
                          shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT,
                          preexec_fn=_limits)
    assert proc.returncode == 1 and "too large" in proc.stderr and "Traceback" not in proc.stderr

