"""The generator of the per-flag argparse facts (compiler/_slime/argparse_facts.py, deprecations.py) on trees of
slime's and Megatron-LM's shape: slime's reset_arg sets only the default of Megatron's flag, a flag Megatron lacks is
added by it, aliases and BooleanOptionalAction's --no-x, and what marks a flag deprecated. The generated files of the
real commits are tests/test_commit_facts.py's."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_megatron_defaults import megatron_tree

from acrl.compiler._slime.argparse_facts import flag_details
from acrl.compiler._slime.deprecations import mark, read_deprecations
from acrl.compiler._slime.model_facts import FactsError
from acrl.compiler._slime.source import read_accepted_flags

SLIME_ARGS = '''import argparse

def reset_arg(parser, name, **kwargs):
    pass

def add(parser):
    parser.add_argument("--opd-type", type=str, choices=["sglang", "megatron"], default=None)
    parser.add_argument("--offload-train", action=argparse.BooleanOptionalAction)
    parser.add_argument("--n-samples", "--n-samples-per-prompt", type=int, default=1)
    parser.add_argument("--old-dir", type=str, help="Deprecated alias for --new-dir. Will go.")
    parser.add_argument("--new-dir", type=str)
    reset_arg(parser, "--rotary-percent", type=float, default=0.5)
    reset_arg(parser, "--sequence-parallel", action="store_true")
    reset_arg(parser, "--padded-vocab-size", type=int, default=None)

def validate(args):
    if args.ignored:
        print("--n-samples is deprecated and ignored.")
        print("--old-dir is deprecated.")
'''


def trees(tmp_path: Path) -> tuple[Path, Path]:
    slime = tmp_path / "slime"
    (slime / "slime" / "utils").mkdir(parents=True)
    (slime / "slime" / "utils" / "arguments.py").write_text(SLIME_ARGS, encoding="utf-8")
    return slime, megatron_tree(tmp_path / "megatron")


def details(tmp_path: Path) -> dict[str, dict[str, object]]:
    slime, megatron = trees(tmp_path)
    slime_only, both = read_accepted_flags(slime, None), read_accepted_flags(slime, megatron)
    assert slime_only is not None and both is not None and not both.gaps
    slime_files = dict(slime_only.files)
    return flag_details(slime, slime_files, megatron, [f for f, _ in both.files if f not in slime_files],
                        set(both.flags))


def test_each_flag_as_slimes_parse_defines_it(tmp_path: Path) -> None:
    out = details(tmp_path)
    assert out["--opd-type"] == {"owner": "slime", "at": "slime/utils/arguments.py:7", "type": "str",
                                 "choices": ["sglang", "megatron"], "default": None}
    # reset_arg on Megatron's flag: Megatron's definition, slime's default, and where slime set it
    assert out["--rotary-percent"] == {"owner": "megatron", "at": "megatron/training/arguments.py:9",
                                       "reset": "slime/utils/arguments.py:12", "type": "float", "default": 0.5}
    # without default=, reset_arg leaves Megatron's flag as it was (a factory bool field: store_true)
    seq = out["--sequence-parallel"]
    assert seq["default"] is False and seq["action"] == "store_true" and "reset" not in seq
    assert seq["at"] == "megatron/core/parallel.py:7" and seq["field"] == "TransformerConfig.sequence_parallel"
    # reset_arg on a flag Megatron lacks adds it, with its keywords
    assert out["--padded-vocab-size"] == {"owner": "slime", "at": "slime/utils/arguments.py:14", "type": "int",
                                          "default": None}
    assert out["--offload-train"]["aliases"] == ["--no-offload-train"]
    assert out["--no-offload-train"] == {"alias_of": "--offload-train"}
    assert out["--n-samples-per-prompt"] == {"alias_of": "--n-samples"}
    # the factory's kinds: an Enum's member names, a list's nargs, a Literal's choices, a bool's store_false
    assert out["--attention-backend"]["choices"] == ["flash", "auto"]
    assert out["--cuda-graph-bs"]["nargs"] == "+" and out["--cuda-graph-bs"]["type"] == "int"
    assert out["--moe-token-dispatcher-type"]["choices"] == ["allgather", "alltoall"]
    assert out["--no-masked-softmax-fusion"]["action"] == "store_false"
    assert out["--disable-masked-softmax-fusion"] == {"alias_of": "--no-masked-softmax-fusion"}
    assert out["--local-rank"]["expression"] == "int(os.getenv('LOCAL_RANK', '0'))"  # never guessed
    # a help text naming the replacement wins over a message naming none
    assert out["--old-dir"]["deprecated"] == {"text": "Deprecated alias for --new-dir. Will go.",
                                              "at": "slime/utils/arguments.py:10", "use": "--new-dir"}
    assert out["--n-samples"]["deprecated"] == {"text": "--n-samples is deprecated and ignored.",
                                                "at": "slime/utils/arguments.py:18"}


def test_a_flag_without_a_record_is_an_error(tmp_path: Path) -> None:
    slime, megatron = trees(tmp_path)
    with pytest.raises(FactsError, match=r"no record of --made-up"):
        flag_details(slime, ["slime/utils/arguments.py"], megatron, ["megatron/training/arguments.py"],
                     {"--made-up", "--opd-type"})


@pytest.mark.parametrize(("text", "expected"), [
    # Megatron-LM 1dcf0daf megatron/training/arguments.py
    ("Use rotary positional embeddings or not. Deprecated: use --position-embedding-type",
     {"text": "Deprecated: use --position-embedding-type", "use": "--position-embedding-type"}),
    ("--enable-cuda-graph is deprecated, use --cuda-graph-impl=local instead.",
     {"text": "--enable-cuda-graph is deprecated, use --cuda-graph-impl=local instead.",
      "use": "--cuda-graph-impl=local"}),
    ("DEPRECATED. Use the implementation from megatron core.Now ignored and mcore models are the default, use "
     "--use-legacy-models to not use core models.",  # the flag named two sentences on is no replacement
     {"text": "DEPRECATED. Use the implementation from megatron core."}),
    ("--batch-size argument is no longer valid, use --micro-batch-size instead",
     {"text": "--batch-size argument is no longer valid, use --micro-batch-size instead", "use": "--micro-batch-size",
      "refused": True}),
    ("Type of no weight decay condition.", None),
])
def test_what_marks_a_flag_deprecated_and_its_replacement(text: str, expected: dict[str, object] | None) -> None:
    assert mark(text) == expected


def test_a_dest_marks_it_and_a_message_needs_its_flag_first() -> None:
    source = ("def f(group, args):\n"
              "    group.add_argument('--use-dist-ckpt', action='store_true', dest='use_dist_ckpt_deprecated')\n"
              "    print('Consider --other; deprecated things are bad')\n")
    assert read_deprecations([("a.py", source)]) == {
        "--use-dist-ckpt": {"text": "dest='use_dist_ckpt_deprecated'", "at": "a.py:2"}}
