"""The slime-parser check against a stand-in slime checkout shaped like slime's: a parse_args that
pre-parses the mode flags, parses --sglang-* with its own parser, parses Megatron's and slime's
flags (Megatron's validation in a separate Megatron checkout), all with parse_known_args, then
runs slime's validation."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import pytest

from acrl.runtime._preflight.outcome import CheckFailed
from acrl.runtime._preflight.slime_parser import check_slime_parser

SLIME_ARGUMENTS = '''
import argparse

from megatron.training.arguments import validate_args as megatron_validate_args


def _pre_parse_mode():
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("--debug-train-only", action="store_true", default=False)
    return parser.parse_known_args()[0]


def sglang_parse_args():
    parser = argparse.ArgumentParser(add_help=False)  # sglang keeps allow_abbrev=True
    parser.add_argument("--sglang-mem-fraction-static", type=float, default=0.9)
    parser.add_argument("--sglang-context-length", type=int, default=None)
    return parser.parse_known_args()[0]


def megatron_parse_args(extra_args_provider):
    parser = argparse.ArgumentParser(description="Megatron-LM Arguments", allow_abbrev=False)
    parser.add_argument("--num-layers", type=int)
    parser.add_argument("--tensor-model-parallel-size", type=int, default=1)
    parser.add_argument("--num-attention-heads", type=int)
    parser = extra_args_provider(parser)
    args, _ = parser.parse_known_args()
    return args


def add_slime_arguments(parser):
    parser.add_argument("--rollout-batch-size", type=int, required=True)
    parser.add_argument("--n-samples-per-prompt", type=int, default=1)
    parser.add_argument("--global-batch-size", type=int, default=None)
    parser.add_argument("--custom-config-path", type=str, default=None)
    return parser


def slime_validate_args(args):
    if args.global_batch_size is not None:
        samples = args.rollout_batch_size * args.n_samples_per_prompt
        assert samples % args.global_batch_size == 0, (
            f"rollout_batch_size * n_samples_per_prompt ({samples}) must be a multiple of "
            f"global_batch_size ({args.global_batch_size})")
    if args.custom_config_path is not None:
        open(args.custom_config_path).close()


def parse_args(add_custom_arguments=None):
    pre = _pre_parse_mode()
    sglang_ns = sglang_parse_args()
    args = megatron_parse_args(extra_args_provider=add_slime_arguments)
    for ns in (pre, sglang_ns):
        for key, value in vars(ns).items():
            setattr(args, key, value)
    megatron_validate_args(args)
    slime_validate_args(args)
    return args
'''

MEGATRON_ARGUMENTS = '''
def validate_args(args):
    if args.num_attention_heads is not None:
        assert args.num_attention_heads % args.tensor_model_parallel_size == 0, (
            "num_attention_heads must be divisible by tensor_model_parallel_size")
'''

GOOD_ARGV = ["--num-layers", "36", "--num-attention-heads", "16", "--tensor-model-parallel-size", "2",
             "--rollout-batch-size", "32", "--n-samples-per-prompt", "8", "--global-batch-size", "256",
             "--sglang-mem-fraction-static", "0.7", "--custom-config-path", "custom_config.yaml"]


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


@pytest.fixture
def checkouts(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(slime_dir, megatron_dir, bundle_dir) of a stand-in slime and Megatron, and a bundle holding
    the custom config the argv names."""
    slime, megatron, bundle = tmp_path / "slime", tmp_path / "Megatron-LM", tmp_path / "bundle"
    for package in ("slime", "slime/utils"):
        _write(slime / package / "__init__.py", "")
    _write(slime / "slime/utils/arguments.py", SLIME_ARGUMENTS)
    for package in ("megatron", "megatron/training"):
        _write(megatron / package / "__init__.py", "")
    _write(megatron / "megatron/training/arguments.py", MEGATRON_ARGUMENTS)
    _write(bundle / "custom_config.yaml", "agentcore: {}\n")
    return slime, megatron, bundle


def check(checkouts: tuple[Path, Path, Path], argv: list[str], **kwargs: object) -> str:
    slime, megatron, bundle = checkouts
    return check_slime_parser(slime, argv, megatron_dir=megatron, cwd=bundle, **kwargs)  # type: ignore[arg-type]


def test_argv_every_parser_accepts_passes(checkouts: tuple[Path, Path, Path]) -> None:
    detail = check(checkouts, GOOD_ARGV)
    assert detail == (f"slime.utils.arguments.parse_args accepted all {len(GOOD_ARGV)} tokens "
                      "(3 parsers, none left a flag unknown)")


def test_flags_no_parser_knows_are_named(checkouts: tuple[Path, Path, Path]) -> None:
    argv = [*GOOD_ARGV, "--use-dynamic-global-batch-size", "--megatron-to-hf-mode", "bridge"]
    with pytest.raises(CheckFailed) as failed:
        check(checkouts, argv)
    assert failed.value.message == ("no parser of this slime knows --use-dynamic-global-batch-size, "
                                    "--megatron-to-hf-mode (slime ignores them silently)")
    assert "remove them" in failed.value.hint


def test_a_flag_taken_as_an_abbreviation_is_named(checkouts: tuple[Path, Path, Path]) -> None:
    argv = [arg if arg != "--sglang-mem-fraction-static" else "--sglang-mem-fraction" for arg in GOOD_ARGV]
    with pytest.raises(CheckFailed) as failed:
        check(checkouts, argv)
    assert failed.value.message == ("taken only as abbreviations: "
                                    "--sglang-mem-fraction -> --sglang-mem-fraction-static")


def test_slimes_validation_error_is_reported_with_where_it_was_raised(checkouts: tuple[Path, Path, Path]) -> None:
    argv = [arg if arg != "256" else "100" for arg in GOOD_ARGV]
    with pytest.raises(CheckFailed) as failed:
        check(checkouts, argv)
    message = failed.value.message
    assert message.startswith("slime (slime/utils/arguments.py:")
    assert message.endswith("rejected the arguments: AssertionError: rollout_batch_size * n_samples_per_prompt "
                            "(256) must be a multiple of global_batch_size (100) "
                            "(unknown flags are checked once this passes)")
    assert "acrl explain" in failed.value.hint


def test_megatrons_validation_error_names_megatron(checkouts: tuple[Path, Path, Path]) -> None:
    argv = [arg if arg != "16" else "15" for arg in GOOD_ARGV]
    with pytest.raises(CheckFailed) as failed:
        check(checkouts, argv)
    assert failed.value.message.startswith("Megatron (megatron/training/arguments.py:")
    assert "num_attention_heads must be divisible by tensor_model_parallel_size" in failed.value.message


def test_a_relative_path_resolves_in_the_bundle(checkouts: tuple[Path, Path, Path]) -> None:
    bundle = checkouts[2]
    (bundle / "custom_config.yaml").unlink()
    with pytest.raises(CheckFailed) as failed:
        check(checkouts, GOOD_ARGV)
    assert "FileNotFoundError" in failed.value.message and "custom_config.yaml" in failed.value.message


def test_a_bad_value_is_argparses_error(checkouts: tuple[Path, Path, Path]) -> None:
    argv = [arg if arg != "36" else "thirty-six" for arg in GOOD_ARGV]
    with pytest.raises(CheckFailed) as failed:
        check(checkouts, argv)
    assert failed.value.message == ("argparse rejected the command line: train.py: argument --num-layers: "
                                    "invalid int value: 'thirty-six' (unknown flags are checked once this passes)")


def test_import_error_is_clear(checkouts: tuple[Path, Path, Path]) -> None:
    slime = checkouts[0]
    _write(slime / "slime/utils/arguments.py", "import sglang_not_installed_here\n" + SLIME_ARGUMENTS)
    with pytest.raises(CheckFailed) as failed:
        check(checkouts, GOOD_ARGV)
    assert failed.value.message == (
        f"cannot import slime.utils.arguments from {slime} with {sys.executable}: "
        "ModuleNotFoundError: No module named 'sglang_not_installed_here'")
    assert "Python that runs slime" in failed.value.hint


def test_not_a_directory_fails_at_once(tmp_path: Path) -> None:
    with pytest.raises(CheckFailed, match="is not a directory"):
        check_slime_parser(tmp_path / "absent", GOOD_ARGV)


def test_a_missing_python_is_named(checkouts: tuple[Path, Path, Path], tmp_path: Path) -> None:
    with pytest.raises(CheckFailed) as failed:
        check(checkouts, GOOD_ARGV, python=str(tmp_path / "no-python"))
    assert "cannot start the target Python" in failed.value.message


def test_a_hanging_import_times_out(checkouts: tuple[Path, Path, Path]) -> None:
    slime = checkouts[0]
    _write(slime / "slime/utils/arguments.py",
           "print('connecting to the file server', flush=True)\nimport time\ntime.sleep(600)\n")
    started = time.monotonic()
    with pytest.raises(CheckFailed) as failed:
        check(checkouts, GOOD_ARGV, timeout=2)
    assert time.monotonic() - started < 30
    assert failed.value.message.startswith("slime's parser did not finish within 2 s")
    assert "last output: connecting to the file server" in failed.value.message
