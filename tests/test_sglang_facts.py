"""The sglang a slime commit runs (compiler/_slime/sglang/<slime commit>.json and index.json, read by
_slime/sglang_stack.py): the generator on small server_args.py files of sglang's two shapes (hand-written here),
the packaged facts' provenance and index, the flags acrl passes, and the rules that read them (ACRL-F002/F005/F006/
F007, ACRL-G008). What each of the four commits' sglang says, and the rules there: tests/test_sglang_commits.py.

With ACRL_SGLANG_WHEELS=DIR (the three wheels: ``pip download sglang==0.5.15.post1 --no-deps -d DIR``, the same for
0.5.13 and 0.5.12.post1) and ACRL_SLIME_DIR (a slime work tree or git directory holding the four commits),
regenerating the packaged facts gives the same bytes.
"""

from __future__ import annotations

import difflib
import json
import os
import shlex
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from acrl.compiler import SpecError
from acrl.compiler._pipeline.argv import build_argv
from acrl.compiler._slime import sglang_facts, sglang_stack
from acrl.compiler._slime.sglang_args import SlimeSglangError, read_server_args, read_slime_side, slime_options
from conftest import REPO, SLIME_HEAD, SLIME_PIN

HEAD = {"slime": {"commit": SLIME_HEAD}}
V030, V031 = "bf14dc21f9500746447f2572d0692e981c4d2a7e", "a6272da0d4f3d0a08520c99a2f3b4f6c887960dc"  # tags

# sglang 0.5.15's shape: flags derived from A[T, ...] fields, then a few add_argument calls (deprecations)
DATACLASS_SHAPE = '''\
from __future__ import annotations
import argparse
import dataclasses
from typing import ClassVar, List, Literal, Optional
from sglang.srt.arg_groups.arg_utils import A, Arg, add_cli_args_from_dataclass
from sglang.srt.arg_groups.argparse_actions import DeprecatedAction, DeprecatedAliasStoreAction


@dataclasses.dataclass
class ServerArgs:
    model_path: A[str, Arg(help="Weights.", aliases=["--model"])]
    tp_size: A[int, Arg(help="Tensor parallel size.", aliases=["--tensor-parallel-size"])] = 1
    mem_fraction_static: A[Optional[float], "Static memory " "fraction."] = None
    cuda_graph_max_bs_decode: A[Optional[int], "Largest decode batch."] = None
    attention_backend: A[Literal["fa3", "triton"], "Backend."] = "fa3"
    fp8_gemm_runner_backend: A[str, Arg(help="x", cli_name="--fp8-gemm-backend", choices=["auto", "dg"])] = "auto"
    cuda_graph_bs: A[Optional[List[int]], "Batch sizes."] = None
    enable_metrics: A[bool, "Metrics."] = False
    lora_strict: A[bool, Arg(help="Strict.", action=argparse.BooleanOptionalAction)] = True
    internal_only: A[bool, Arg(help="Set by code.", no_cli=True)] = False
    stat_loggers: Optional[dict] = None
    LIMIT: ClassVar[int] = 3

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add_cli_args_from_dataclass(parser, ServerArgs)
        parser.add_argument("--tool-call-parser", type=str, choices=["auto", "qwen"], default=None)
        parser.add_argument("--cuda-graph-max-bs", type=int, action=DeprecatedAliasStoreAction,
                            new_flag="--cuda-graph-max-bs-decode", dest="cuda_graph_max_bs_decode")
        parser.add_argument("--old-knob", action=DeprecatedAction, help="Note: --old-knob is deprecated now.")
'''

# sglang 0.5.13's shape: plain fields, every flag an add_argument call
ADD_ARGUMENT_SHAPE = '''\
import dataclasses
from typing import Optional


@dataclasses.dataclass
class ServerArgs:
    model_path: str
    tp_size: int = 1
    cuda_graph_max_bs: Optional[int] = None

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--model-path", "--model", type=str, required=True)
        parser.add_argument("--tensor-parallel-size", "--tp-size", type=int, default=ServerArgs.tp_size)
        parser.add_argument("--cuda-graph-max-bs", type=int, default=ServerArgs.cuda_graph_max_bs, nargs=None)
'''

# slime's shape (slime/backends/sglang_utils/arguments.py): the skip list and its own --sglang-* flags
SLIME_ARGUMENTS = '''\
def add_sglang_router_arguments(parser):
    parser.add_argument("--sglang-router-ip", type=str, default=None)
    return parser


def add_sglang_arguments(parser):
    parser = add_sglang_router_arguments(parser)
    parser.add_argument("--sglang-server-concurrency", type=int, default=512)
    old_add_argument = parser.add_argument
    skipped_args = ["model_path", "tp_size"]

    def new_add_argument_wrapper(*name_or_flags, **kwargs):
        old_add_argument(*name_or_flags, **kwargs)

    parser.add_argument = new_add_argument_wrapper
    parser.add_argument = old_add_argument
    parser.add_argument("--prefill-num-servers", type=int, default=None)
    parser.add_argument("--sglang-config", type=str, default=None)
    return parser
'''


def by_first_option(arguments: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {a["options"][0]: a for a in arguments}


def test_the_dataclass_shape_gives_flags_as_add_cli_args_from_dataclass_does() -> None:
    fields, arguments = read_server_args(DATACLASS_SHAPE)
    assert fields == ["model_path", "tp_size", "mem_fraction_static", "cuda_graph_max_bs_decode", "attention_backend",
                      "fp8_gemm_runner_backend", "cuda_graph_bs", "enable_metrics", "lora_strict", "internal_only",
                      "stat_loggers"]  # not the ClassVar
    got = by_first_option(arguments)
    assert list(got) == ["--model-path", "--tp-size", "--mem-fraction-static", "--cuda-graph-max-bs-decode",
                         "--attention-backend", "--fp8-gemm-backend", "--cuda-graph-bs", "--enable-metrics",
                         "--lora-strict", "--tool-call-parser", "--cuda-graph-max-bs", "--old-knob"]
    assert got["--model-path"]["options"] == ["--model-path", "--model"] and "dest" not in got["--model-path"]
    assert got["--tp-size"]["options"] == ["--tp-size", "--tensor-parallel-size"]
    assert got["--mem-fraction-static"]["type"] == "float" and got["--cuda-graph-bs"]["nargs"] == "+"
    assert got["--attention-backend"]["choices"] == ["fa3", "triton"]
    assert got["--fp8-gemm-backend"] == {"options": ["--fp8-gemm-backend"], "line": 16, "via": "field",
                                         "dest": "fp8_gemm_runner_backend", "type": "str", "choices": ["auto", "dg"]}
    assert got["--enable-metrics"]["action"] == "store_true"
    assert got["--lora-strict"]["action"] == "argparse.BooleanOptionalAction"
    assert got["--tool-call-parser"]["via"] == "add_argument" and got["--tool-call-parser"]["choices"] == ["auto",
                                                                                                         "qwen"]
    assert got["--cuda-graph-max-bs"]["deprecated"] == {"new_flag": "--cuda-graph-max-bs-decode"}
    assert got["--cuda-graph-max-bs"]["dest"] == "cuda_graph_max_bs_decode"
    assert got["--old-knob"]["deprecated"] == {"help": "Note: --old-knob is deprecated now."}


def test_the_add_argument_shape_gives_each_call() -> None:
    fields, arguments = read_server_args(ADD_ARGUMENT_SHAPE)
    assert fields == ["model_path", "tp_size", "cuda_graph_max_bs"]
    assert [(a["options"], a["line"]) for a in arguments] == [
        (["--model-path", "--model"], 13), (["--tensor-parallel-size", "--tp-size"], 14), (["--cuda-graph-max-bs"], 15)]
    assert not any("deprecated" in a for a in arguments)


@pytest.mark.parametrize(("source", "why"), [
    ("x = 1\n", "expected one class ServerArgs"),
    ("class ServerArgs:\n    @staticmethod\n    def add_cli_args(parser):\n        parser.add_argument(NAME)\n",
     "not all string literals"),
    ("class ServerArgs:\n    @staticmethod\n    def add_cli_args(parser):\n        parser.add_argument_group('x')\n",
     "argument groups are not wrapped"),
])
def test_a_shape_not_read_is_an_error_naming_the_line(source: str, why: str) -> None:
    with pytest.raises(SlimeSglangError, match=why):
        read_server_args(source)


def test_slime_prefixes_each_option_and_drops_the_skipped_arguments() -> None:
    """slime's wrapper (arguments.py:61-118 at 624b824) checks dest, else the first --option, against skipped_args."""
    skipped, own = read_slime_side(SLIME_ARGUMENTS)
    assert skipped == ["model_path", "tp_size"]
    assert own == {"--sglang-config": 18, "--sglang-router-ip": 2, "--sglang-server-concurrency": 8}
    got = by_first_option(read_server_args(DATACLASS_SHAPE)[1])
    assert slime_options(got["--model-path"], set(skipped)) == []
    assert slime_options(got["--tp-size"], set(skipped)) == []  # first option --tp-size: tp_size
    assert slime_options(got["--fp8-gemm-backend"], set(skipped)) == ["--sglang-fp8-gemm-backend"]
    assert slime_options(got["--lora-strict"], set()) == ["--sglang-lora-strict", "--no-sglang-lora-strict"]
    old = by_first_option(read_server_args(ADD_ARGUMENT_SHAPE)[1])
    # sglang 0.5.13 lists --tensor-parallel-size first: tensor_parallel_size is not skipped, so both exist
    assert slime_options(old["--tensor-parallel-size"], set(skipped)) == ["--sglang-tensor-parallel-size",
                                                                          "--sglang-tp-size"]


def _wheel(tmp_path: Path, source: str, version: str = "9.9.9") -> Path:
    path = tmp_path / f"sglang-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr(sglang_facts.SERVER_ARGS, source)
        wheel.writestr(f"sglang-{version}.dist-info/METADATA", f"Name: sglang\nVersion: {version}\n")
    return path


def _patch(before: str, after: str) -> str:
    path = sglang_facts.PATCHED
    hunks = "".join(difflib.unified_diff(before.splitlines(True), after.splitlines(True), f"a/{path}", f"b/{path}"))
    index = f"{sglang_facts.blob_id(before.encode())[:11]}..{sglang_facts.blob_id(after.encode())[:11]}"
    return f"diff --git a/{path} b/{path}\nindex {index} 100644\n{hunks}"


def _slime_repo(tmp_path: Path, patches: dict[str, str], tag: str = "v9.9.9-cu129") -> Path:
    repo = tmp_path / "slime"
    files = {"docker/Dockerfile": f"ARG SGLANG_IMAGE_TAG={tag}\nFROM slimerl/sglang:${{SGLANG_IMAGE_TAG}}\n",
             sglang_facts.SLIME_SGLANG_ARGUMENTS: SLIME_ARGUMENTS,
             **{f"docker/patch/latest/{name}": text for name, text in patches.items()}}
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return repo


def test_the_generator_applies_slimes_patches_in_the_order_their_index_lines_chain(tmp_path: Path) -> None:
    one = DATACLASS_SHAPE.replace('    stat_loggers:', '    release_cache: A[bool, "Release."] = False\n'
                                                    '    stat_loggers:')
    two = one.replace('    stat_loggers:', '    pull_hook: A[Optional[str], "Hook."] = None\n    stat_loggers:')
    # named so that sorting by name would apply them in the wrong order
    patches = {"sglang-a.patch": _patch(one, two), "sglang-b.patch": _patch(DATACLASS_SHAPE, one),
               "sglang-top_p.patch": "diff --git a/python/other.py b/python/other.py\n"}
    repo = _slime_repo(tmp_path, patches)
    out = tmp_path / "facts.json"
    argv = [str(_wheel(tmp_path, DATACLASS_SHAPE)), "--slime", str(repo), "-o", str(out)]
    assert sglang_facts.main(argv) == 0
    data = json.loads(out.read_text())
    assert [p["path"] for p in data["provenance"]["slime"]["patches"]] == ["docker/patch/latest/sglang-b.patch",
                                                                           "docker/patch/latest/sglang-a.patch"]
    assert data["provenance"]["server_args_blob"] == sglang_facts.blob_id(DATACLASS_SHAPE.encode())
    assert data["provenance"]["sglang_version"] == "9.9.9" and data["provenance"]["wheel"].endswith(".whl")
    assert data["provenance"]["slime"]["image"] == "docker/Dockerfile:1: ARG SGLANG_IMAGE_TAG=v9.9.9-cu129"
    assert shlex.split(data["provenance"]["generator"])[3:5] == ["WHEELS/sglang-9.9.9-py3-none-any.whl", "--slime"]
    assert "SLIME_DIR" in data["provenance"]["generator"] and str(repo) not in data["provenance"]["generator"]
    assert {"release_cache", "pull_hook"} <= set(data["fields"])
    assert {"--release-cache", "--pull-hook"} <= {a["options"][0] for a in data["arguments"]}
    assert data["slime"]["skipped"] == ["model_path", "tp_size"]
    assert out.read_text() == sglang_facts.dumps(data)  # one argument a line


@pytest.mark.parametrize(("tag", "patch", "why"), [
    ("v1.0.0-cu129", None, "builds sglang 1.0.0, the wheel is 9.9.9"),
    ("v9.9.9-cu129", "foreign", "no patch of server_args.py applies"),
])
def test_the_generator_refuses_a_wheel_that_is_not_the_images(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              tag: str, patch: str | None, why: str) -> None:
    patches = {} if patch is None else {"sglang.patch": _patch(ADD_ARGUMENT_SHAPE, ADD_ARGUMENT_SHAPE + "\n")}
    repo = _slime_repo(tmp_path, patches, tag)
    assert sglang_facts.main([str(_wheel(tmp_path, DATACLASS_SHAPE)), "--slime", str(repo), "-o",
                              str(tmp_path / "f.json")]) == 1
    assert why in capsys.readouterr().err and not (tmp_path / "f.json").exists()


OTHER_PATCH = {"sglang-top_p.patch": "diff --git a/python/other.py b/python/other.py\n"}  # not server_args.py
FACTS_DIR = REPO / "compiler" / "_slime" / "sglang"  # the sources (sglang_stack.FACTS_DIR: the installed copies)
FACTS = sorted(p for p in FACTS_DIR.glob("*.json") if p.name != sglang_stack.INDEX)


def test_the_generator_keys_the_facts_by_slime_commit_in_a_folder(tmp_path: Path) -> None:
    """Two slime commits that run the same sglang wheel with different patches (v0.3.1 and 624b824) get a file each,
    and the folder's index says which sglang each runs, with its deprecated aliases."""
    one = DATACLASS_SHAPE.replace('    stat_loggers:', '    release_cache: A[bool, "Release."] = False\n'
                                                    '    stat_loggers:')
    repo = _slime_repo(tmp_path, OTHER_PATCH)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    first = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (repo / "docker/patch/latest/sglang-release.patch").write_text(_patch(DATACLASS_SHAPE, one))
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "patch"], check=True)
    second = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    out, wheel = tmp_path / "sglang", str(_wheel(tmp_path, DATACLASS_SHAPE))
    out.mkdir()
    for commit in (first, second):
        assert sglang_facts.main([wheel, "--slime", str(repo), "--commit", commit, "-o", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted([f"{first}.json", f"{second}.json", "index.json"])
    fields = {c: json.loads((out / f"{c}.json").read_text())["fields"] for c in (first, second)}
    assert "release_cache" in fields[second] and "release_cache" not in fields[first]
    index = json.loads((out / "index.json").read_text())["commits"]
    alias = {"--sglang-cuda-graph-max-bs": "--sglang-cuda-graph-max-bs-decode"}
    assert index == {first: {"sglang_version": "9.9.9", "aliases": alias},
                     second: {"sglang_version": "9.9.9", "aliases": alias}}
    (out / "index.json").unlink()
    assert sglang_facts.main(["--index", str(out)]) == 0 and json.loads((out / "index.json").read_text())["commits"] \
        == index


def test_the_index_refuses_a_file_not_named_by_its_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo = _slime_repo(tmp_path, OTHER_PATCH)
    wheel = str(_wheel(tmp_path, DATACLASS_SHAPE))
    out = tmp_path / "sglang"
    out.mkdir()
    assert sglang_facts.main([wheel, "--slime", str(repo), "-o", str(out / "9.9.9.json")]) == 0
    assert sglang_facts.main(["--index", str(out)]) == 1
    assert "must be named" in capsys.readouterr().err and not (out / "index.json").exists()
    (out / "9.9.9.json").unlink()
    assert sglang_facts.main([wheel, "-o", str(out)]) == 1  # no --slime: the file would belong to no commit
    assert "--slime" in capsys.readouterr().err and not list(out.iterdir())


def test_the_packaged_facts_are_each_named_by_their_slime_commit() -> None:
    assert [f.stem for f in FACTS] == sglang_stack.commits_with_facts()
    for path in FACTS:
        provenance = json.loads(path.read_text())["provenance"]
        commit, version = provenance["slime"]["commit"], provenance["sglang_version"]
        assert path.stem == commit and sglang_stack.sglang_version(commit) == version
        assert provenance["wheel"].startswith(f"sglang-{version}-cp311-") and len(provenance["wheel_sha256"]) == 64
        assert provenance["slime"]["image"] == f"docker/Dockerfile:1: ARG SGLANG_IMAGE_TAG=v{version}-cu129"
        assert provenance["slime"]["patches"][0]["blob_before"] == provenance["server_args_blob"]
        words = shlex.split(provenance["generator"])
        assert words[3] == f"WHEELS/{provenance['wheel']}" and words[words.index("--commit") + 1] == commit
        assert words[words.index("-o") + 1] == "compiler/_slime/sglang"


def test_the_packaged_index_is_the_one_its_files_give() -> None:
    """index.json is what the compiler reads instead of the files: it must say what they say."""
    assert (FACTS_DIR / sglang_stack.INDEX).read_text() == sglang_facts.index_text(FACTS_DIR)


def test_the_facts_say_what_each_commits_sglang_does() -> None:
    head, pin = sglang_stack.sglang_at(SLIME_HEAD[:9]), sglang_stack.sglang_at(SLIME_PIN)
    assert head is not None and pin is not None and (head.version, pin.version) == ("0.5.15.post1", "0.5.13")
    assert head.deprecation("--sglang-cuda-graph-max-bs") == ("--sglang-cuda-graph-max-bs-decode", "")
    assert pin.deprecation("--sglang-cuda-graph-max-bs") is None and not pin.known("--sglang-cuda-graph-max-bs-decode")
    # slime's patches of its image's sglang (docker/patch/latest) add flags the wheel lacks
    assert head.known("--sglang-enable-fp32-moe-router") and head.known("--sglang-custom-pull-weights-pre-read-hook")
    assert pin.known("--sglang-update-weight-delta-chunk-bytes")
    assert "release_hicache" in head.fields and "update_weight_delta_read_workers" in pin.fields
    # slime sets tp_size itself; sglang 0.5.13 lists --tensor-parallel-size first, so slime's skip misses it there
    assert head.dropped["--sglang-tp-size"] == "tp_size" and pin.known("--sglang-tp-size")
    assert head.known("--sglang-config") and head.known("--sglang-router-ip") and not head.known("--sglang-model")
    assert sglang_stack.sglang_at("0123456789abc") is None and sglang_stack.sglang_at("624b8") is None


@pytest.mark.parametrize("commit", [V030, SLIME_PIN, V031, SLIME_HEAD])
def test_every_sglang_flag_acrl_writes_is_current_at_each_commit(commit: str, compile_overrides) -> None:  # type: ignore[no-untyped-def]
    facts = sglang_stack.sglang_at(commit)
    assert facts is not None
    every = {"sglang": {"context_length": 4096, "tool_call_parser": "qwen25", "reasoning_parser": "qwen3",
                        "data_parallel_size": 1}}
    spec = compile_overrides({"slime": {"commit": commit}, **every}).spec
    flags = [a.flag for g in build_argv(spec) for a in g.args if a.flag.startswith("--sglang-")]
    assert len(flags) == 8
    for flag in flags:
        assert facts.known(flag) and facts.deprecation(flag) is None, flag


def test_cuda_graph_max_bs_is_passed_as_the_targeted_sglang_names_it(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    pin = compile_overrides().files["train.sh"].decode()
    head = compile_overrides(HEAD).files["train.sh"].decode()
    assert "  --sglang-cuda-graph-max-bs 32\n" in pin and "--sglang-cuda-graph-max-bs-decode" not in pin
    assert "  --sglang-cuda-graph-max-bs-decode 32\n" in head and "--sglang-cuda-graph-max-bs " not in head
    other = compile_overrides({"slime": {"commit": "0123456789abcdef"}}).files["train.sh"].decode()
    assert "  --sglang-cuda-graph-max-bs 32\n" in other  # no facts: acrl's own name


def test_explain_and_the_review_groups_follow_the_flag_passed(write_spec, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from acrl.compiler import compile_spec, write
    from acrl.compiler._review.explain import explain_path
    from acrl.compiler._review.flag_groups import flag_group

    path = write_spec(HEAD)
    write(compile_spec(path), tmp_path / "b")
    for explained in (explain_path(path), explain_path(tmp_path / "b")):
        (item,) = explained.select("--sglang-cuda-graph-max-bs-decode").flags
        assert item.value == ("32",) and item.related == ("sglang.cuda_graph_max_bs",)
        (key,) = explained.select("sglang.cuda_graph_max_bs").keys
        assert key.related == ("--sglang-cuda-graph-max-bs-decode",)
    assert flag_group("--sglang-cuda-graph-max-bs-decode", None) == flag_group("--sglang-cuda-graph-max-bs", None) \
        == "rollout and sglang"


def test_diff_shows_the_flag_renamed_between_the_pin_and_head(write_spec, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    from acrl.compiler._cli.main import acrl_main

    a, b = write_spec(name="a.toml"), write_spec(HEAD, name="b.toml")
    assert acrl_main(["diff", str(a), str(b), "--format", "json"]) == 1
    flags = {c["key"]: (c["change"], c["before"], c["after"], c.get("group"))
             for c in json.loads(capsys.readouterr().out)["sections"]["flags"]}
    assert flags["--sglang-cuda-graph-max-bs"] == ("removed", ["32"], None, "rollout and sglang")
    assert flags["--sglang-cuda-graph-max-bs-decode"] == ("added", None, ["32"], "rollout and sglang")


def test_an_escape_hatch_alias_of_a_flag_acrl_passes_is_a_duplicate_not_an_abbreviation(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(SpecError) as info:
        compile_overrides({**HEAD, "extra": {"flags": {"--sglang-cuda-graph-max-bs": 8}}})
    got = sorted((d.rule, d.key) for d in info.value.diagnostics)
    assert got == [("ACRL-F002", "extra.flags.--sglang-cuda-graph-max-bs"),
                   ("ACRL-F006", "extra.flags.--sglang-cuda-graph-max-bs")]
    (f002,) = [d for d in info.value.diagnostics if d.rule == "ACRL-F002"]
    assert f002.hint == "set [sglang] cuda_graph_max_bs = 8 instead"


def test_sglang_flag_findings_point_at_their_keys(write_spec) -> None:  # type: ignore[no-untyped-def]
    from acrl.compiler import compile_spec

    path = write_spec({**HEAD, "extra": {"flags": {"--sglang-enable-metrics": True, "--sglang-mem-fracton-static": 0.5,
                                                   "--sglang-disable-cuda-graph": True},
                                         "args": ["--sglang-enable-dp-attention", "--sglang-chunked-prefill=512",
                                                  "--sglang-collect-tokens-histogram"]}})
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    got = [(d.rule, d.severity, d.key, d.hint) for d in info.value.diagnostics if d.rule in ("ACRL-F006", "ACRL-F007")]
    assert got == [
        ("ACRL-F006", "warning", "extra.flags.--sglang-disable-cuda-graph",
         "write --sglang-cuda-graph-backend-{decode,prefill}=disabled instead"),
        ("ACRL-F006", "warning", "extra.args.2", "remove it"),  # a DeprecatedAction: only a warning, no effect
        ("ACRL-F007", "error", "extra.flags.--sglang-mem-fracton-static", "did you mean --sglang-mem-fraction-static?"),
        ("ACRL-F007", "error", "extra.args.1", "write the full flag (--sglang-chunked-prefill-size)")]
    lines = {d.key: d.source_line for d in info.value.diagnostics}
    assert lines["extra.flags.--sglang-mem-fracton-static"].startswith('--sglang-mem-fracton-static = 0.5')


def test_overrides_must_be_server_args_fields_of_the_targeted_sglang(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    group = {"worker_type": "regular", "num_gpus": 8}
    overrides = {"mem-fraction-static": 0.7, "cuda_graph_max_bs": 16, "enable_fp32_moe_router": True}
    models = {"sglang": {"models": {"default": {"server_groups": [{**group, "overrides": overrides}]}}}}
    with pytest.raises(SpecError) as info:
        compile_overrides({**HEAD, **models})
    (diag,) = info.value.diagnostics
    assert (diag.rule, diag.key) == ("ACRL-G008", "sglang.models.default.server_groups.0.overrides.cuda_graph_max_bs")
    assert diag.hint == "did you mean cuda_graph_max_bs_decode?"
    # at the pin, cuda_graph_max_bs is a field and slime's patch for 624b824 (enable_fp32_moe_router) is not
    with pytest.raises(SpecError) as info:
        compile_overrides(models)
    assert [(d.rule, d.key.rsplit(".", 1)[1]) for d in info.value.diagnostics] == [
        ("ACRL-G008", "enable_fp32_moe_router")]
    unknown = compile_overrides({"slime": {"commit": "0123456789abcdef"}, **models})  # no facts: not checked
    assert not [w for w in unknown.warnings if w.rule == "ACRL-G008"]


def test_the_facts_are_read_only_when_a_compile_needs_them(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    """A compile reads the small index (the argv's --sglang-* names); a commit's big file only for an escape-hatch
    --sglang-* flag or a server group's overrides, once per process."""
    code = ("import acrl.compiler\nfrom acrl.compiler._slime import sglang_stack as s\n"
            "print(s._read.cache_info().currsize, s._index.cache_info().currsize)\n")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "0 0\n"
    sglang_stack._read.cache_clear()
    for commit in sglang_stack.commits_with_facts():  # the flag renamed at v0.3.1 and 624b824 included
        compile_overrides({"slime": {"commit": commit}, "extra": {"flags": {"--wandb-group": "g"}}})
    compile_overrides({"slime": {"commit": "0123456789abcdef"}, "extra": {"flags": {"--sglang-anything": 1}}})
    assert sglang_stack._read.cache_info().currsize == 0
    compile_overrides({**HEAD, "extra": {"flags": {"--sglang-enable-metrics": True}}})
    compile_overrides({**HEAD, "extra": {"flags": {"--sglang-enable-metrics": True}}})
    assert sglang_stack._read.cache_info().currsize == 1 and sglang_stack._read.cache_info().misses == 1
    group = {"worker_type": "regular", "num_gpus": 8, "overrides": {"mem_fraction_static": 0.7}}
    compile_overrides({"sglang": {"models": {"default": {"server_groups": [group]}}}})
    assert sglang_stack._read.cache_info().currsize == 2  # the pin's, for ACRL-G008


@pytest.mark.upstream("ACRL_SGLANG_WHEELS", "ACRL_SLIME_DIR")
@pytest.mark.parametrize("facts", FACTS, ids=lambda p: p.stem)
def test_regenerating_gives_the_same_bytes(facts: Path, tmp_path: Path) -> None:
    words = shlex.split(json.loads(facts.read_text())["provenance"]["generator"])[3:]
    folder = str(FACTS_DIR.relative_to(REPO))
    argv = [str(Path(os.environ["ACRL_SGLANG_WHEELS"], w.removeprefix("WHEELS/"))) if w.startswith("WHEELS/") else
            os.environ["ACRL_SLIME_DIR"] if w == "SLIME_DIR" else str(tmp_path) if w == folder else w for w in words]
    assert sglang_facts.main(argv) == 0
    # the recorded command names the project's folder, so it is the same whatever -o this run wrote to
    assert (tmp_path / facts.name).read_bytes().replace(str(tmp_path).encode(), folder.encode()) == facts.read_bytes()
    assert json.loads((tmp_path / "index.json").read_text())["commits"] == \
        {facts.stem: json.loads((FACTS_DIR / "index.json").read_text())["commits"][facts.stem]}
