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

from acrl.runtime._preflight.outcome import CheckFailed, CheckSkipped
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


# --- GPU queries: Megatron's validation asks torch for the GPU (1dcf0daf arguments.py:852, :927-952) ----------------

# A stand-in Megatron whose validation asks as the real one does: the device's architecture through
# torch.cuda.get_device_properties(torch.device("cuda:0")).major (megatron/training/utils.py:447-449), and with tensor
# parallelism before Blackwell it asserts CUDA_DEVICE_MAX_CONNECTIONS=1.
MEGATRON_ASKING_THE_GPU = '''
import os

import torch


def get_device_arch_version():
    return torch.cuda.get_device_properties(torch.device("cuda:0")).major


def validate_args(args):
    if args.tensor_model_parallel_size > 1 and get_device_arch_version() < 10:
        assert os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1", (
            "Using tensor model parallelism or context parallelism require setting the environment variable "
            "CUDA_DEVICE_MAX_CONNECTIONS to 1")
'''

# torch as a machine without an NVIDIA driver answers (torch/cuda/__init__.py's _lazy_init), or, with
# STANDIN_MACHINE_GPU=MAJOR, as a machine with a GPU of that architecture.
STANDIN_TORCH = '''
import os
from types import SimpleNamespace


class device:
    def __init__(self, name):
        self.name = name


def _properties(device=None):
    major = os.environ.get("STANDIN_MACHINE_GPU")
    if not major:
        raise RuntimeError("Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and "
                           "installed a driver from http://www.nvidia.com/Download/index.aspx")
    return SimpleNamespace(name="machine GPU", major=int(major), minor=0)


cuda = SimpleNamespace(get_device_properties=_properties,
                       get_device_capability=lambda device=None: (_properties().major, 0),
                       get_device_name=lambda device=None: _properties().name)
'''


@pytest.fixture
def asking(checkouts: tuple[Path, Path, Path]) -> tuple[Path, Path, Path]:
    megatron = checkouts[1]
    _write(megatron / "megatron/training/arguments.py", MEGATRON_ASKING_THE_GPU)
    _write(megatron / "torch/__init__.py", STANDIN_TORCH)
    return checkouts


JOB_ENV = {"PATH": "/usr/bin:/bin", "CUDA_DEVICE_MAX_CONNECTIONS": "1"}


def test_no_gpu_and_none_declared_is_this_machines_limit_not_the_specs(asking: tuple[Path, Path, Path]) -> None:
    with pytest.raises(CheckSkipped) as skipped:
        check(asking, GOOD_ARGV, env=JOB_ENV)
    assert skipped.value.reason.startswith("this machine cannot check it: slime's validation asks the GPU "
                                           "(torch.cuda.get_device_properties: Found no NVIDIA driver")
    assert "[cluster] gpu" in skipped.value.reason


def test_the_declared_gpu_answers_and_is_reported_as_assumed(asking: tuple[Path, Path, Path]) -> None:
    detail = check(asking, GOOD_ARGV, env=JOB_ENV, gpu=("H100", (9, 0)))
    assert detail.endswith("; its 1 GPU queries answered from [cluster] gpu = H100 (assumed: compute capability 9.0)")


def test_the_jobs_environment_decides_megatrons_assertion(asking: tuple[Path, Path, Path]) -> None:
    """On Hopper Megatron asserts CUDA_DEVICE_MAX_CONNECTIONS=1 (train.sh's runtime env sets it); on Blackwell not."""
    with pytest.raises(CheckFailed) as failed:
        check(asking, GOOD_ARGV, env={"PATH": "/usr/bin:/bin"}, gpu=("H100", (9, 0)))
    assert "CUDA_DEVICE_MAX_CONNECTIONS to 1" in failed.value.message
    assert "the validation ran as on a H100 ([cluster] gpu)" in failed.value.hint
    assert check(asking, GOOD_ARGV, env={"PATH": "/usr/bin:/bin"}, gpu=("B200", (10, 0)))


def test_this_machines_gpu_answers_when_none_is_declared(asking: tuple[Path, Path, Path]) -> None:
    detail = check(asking, GOOD_ARGV, env={**JOB_ENV, "STANDIN_MACHINE_GPU": "9"})
    assert detail.endswith("; its 1 GPU queries answered by this machine's GPU (set [cluster] gpu for the cluster's)")


def test_the_declared_gpu_answers_even_on_a_machine_with_another(asking: tuple[Path, Path, Path]) -> None:
    """The cluster's GPU is the one the job validates on: a Blackwell machine does not hide Hopper's assertion."""
    with pytest.raises(CheckFailed):
        check(asking, GOOD_ARGV, env={"PATH": "/usr/bin:/bin", "STANDIN_MACHINE_GPU": "10"}, gpu=("H100", (9, 0)))


def test_gpu_models_and_their_capabilities_are_one_table() -> None:
    import typing

    from acrl.compiler._spec.launch import GPU_CAPABILITY, GpuModel

    assert list(typing.get_args(GpuModel)) == list(GPU_CAPABILITY)
