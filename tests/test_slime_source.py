"""Static reading of the flags a slime + Megatron-LM checkout accepts, and of a checkout's commit."""

from __future__ import annotations

import ast
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from test_megatron_defaults import MEGATRON_COMMIT

from acrl.compiler._slime.source import (
    UNVERIFIED_PREFIXES,
    AcceptedFlags,
    FlagStatus,
    read_accepted_flags,
    read_git_commit,
)
from conftest import SLIME_HEAD

FIXTURES = Path(__file__).parent / "fixtures"
SLIME = FIXTURES / "slime_checkout"
MEGATRON = FIXTURES / "megatron_checkout"


@pytest.fixture(scope="module")
def accepted() -> AcceptedFlags:
    result = read_accepted_flags(SLIME, MEGATRON)
    assert result is not None
    return result


def _slime_checkout(root: Path, arguments_py: str) -> Path:
    """A minimal slime checkout whose only arguments file has the given text."""
    path = root / "slime" / "utils" / "arguments.py"
    path.parent.mkdir(parents=True)
    path.write_text(arguments_py)
    return root


def _ast_flags(text: str) -> set[str]:
    """The reference the scanner must agree with: the same rule, applied with ``ast.walk``."""
    flags: set[str] = set()
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if not (name.endswith("add_argument") or name == "reset_arg"):
            continue
        names = [
            a.value
            for a in node.args
            if isinstance(a, ast.Constant) and isinstance(a.value, str) and a.value.startswith("-")
        ]
        flags.update(names)
        if any(
            k.arg == "action" and ast.unparse(k.value).endswith("BooleanOptionalAction")
            for k in node.keywords
        ):
            flags.update("--no-" + n[2:] for n in names if n.startswith("--"))
    return flags


# ---------------------------------------------------------------------------------------------
# Flags


@pytest.mark.parametrize(
    "flag",
    [
        "--actor-num-nodes",  # parser.add_argument on one line
        "--actor-num-gpus-per-node",  # ... over several lines
        "--rollout-batch-size",  # group.add_argument with two option strings
        "--rollout-global-batch-size",
        "--n-samples-per-prompt",
        "--distributed-backend",  # reset_arg
        "--custom-config-path",  # reset_arg over several lines
        "--offload-train",  # BooleanOptionalAction
        "--no-offload-train",
        "--no-use-tensorboard",
        "--use-gated-attention",
        "--train-backend",  # a second parser in _pre_parse_mode
        "--sglang-router-ip",  # sglang flags slime declares itself are known
        "--sglang-server-concurrency",
        "--dynamic-sampling-filter-path",  # slime/**/arguments*.py are all read
    ],
)
def test_slime_flags_of_every_shape_are_known(accepted: AcceptedFlags, flag: str) -> None:
    check = accepted.check(flag)
    assert check.status is FlagStatus.KNOWN
    assert check.flag == flag
    assert check.suggestions == ()


@pytest.mark.parametrize(
    "flag",
    [
        "--seq-length",
        "--tensor-model-parallel-size",  # two option strings
        "--tp",
        "--overlap-grad-reduce",  # BooleanOptionalAction
        "--no-overlap-grad-reduce",
        "--no-persist-layer-norm",  # store_false with an explicit --no- name
        "--no-bias-gelu-fusion",
        "--no-load-optim",
        "--lr",
        "--enable-ft-package",  # from an add_*args function arguments.py imports and calls
    ],
)
def test_megatron_flags_of_every_shape_are_known(accepted: AcceptedFlags, flag: str) -> None:
    assert accepted.check(flag).status is FlagStatus.KNOWN


@pytest.mark.parametrize(
    "flag",
    [
        "--num-layers",
        "--hidden-size",
        "--qk-layernorm",  # declared after a method
        "--sequence-parallel",  # from the base class ModelParallelConfig
        "--exit-signal-handler",  # bool defaulting to False: store_true under its own name
        "--no-add-bias-linear",  # bool defaulting to True: --no-/--disable-
        "--disable-add-bias-linear",
        "--no-apply-rope-fusion",  # Optional[bool] = None is store_false as well
        "--attention-backend",  # metadata argparse_meta arg_names replace the derived name
        "--attn-backend",
        "--init-method-std",  # metadata without argparse_meta
        "--micro-batch-size",  # TrainingConfig, imported inside a function through a package
        # argparse_meta without arg_names keeps the field's names (Megatron 1dcf0daf's argument_utils.py:136-188;
        # its TransformerConfig.num_layers, ModelParallelConfig.use_cpu_initialization, rampup_batch_size)
        "--use-cpu-initialization",
        "--rampup-batch-size",
    ],
)
def test_argument_group_factory_dataclass_fields_are_flags(accepted: AcceptedFlags, flag: str) -> None:
    assert accepted.check(flag).status is FlagStatus.KNOWN


@pytest.mark.parametrize(
    "flag",
    [
        "--add-bias-linear",  # default True: only the negative names exist
        "--apply-rope-fusion",
        "--no-exit-signal-handler",  # default False: no negative name
        "--moe-token-dropping",  # excluded through a list assigned before the call
        "--gradient-accumulation-fusion",
        "--pipeline-dtype",  # field(init=False)
        "--registry",  # ClassVar
        "---registry",
        "--local-annotation",  # an annotation inside __post_init__
        "--num-not-a-field",  # inside the class docstring
        "--q-lora-rank",  # a dataclass that no factory call uses
        "--commented-out-flag",  # add_argument in a comment
        "--in-help-text",  # ... in a string
        "--in-docstring",  # ... in a docstring
        "--no-use-cpu-initialization",  # default False: store_true, no negative name
        "--use-cpu-initializatoin",  # a typo: unknown, not unverifiable (issue 15: --use-tiss compiled)
    ],
)
def test_flags_that_are_not_accepted_are_unknown(accepted: AcceptedFlags, flag: str) -> None:
    assert accepted.gaps == ()
    check = accepted.check(flag)
    assert check.status is FlagStatus.UNKNOWN
    assert check.reason


def test_unknown_flag_gets_close_matches(accepted: AcceptedFlags) -> None:
    check = accepted.check("--rollout-batch-sise")
    assert check.status is FlagStatus.UNKNOWN
    assert check.suggestions[0] == "--rollout-batch-size"
    assert accepted.check("--tensor-model-paralel-size").suggestions[0] == "--tensor-model-parallel-size"
    assert accepted.check("--completely-unrelated-words").suggestions == ()


def test_a_value_after_equals_is_not_part_of_the_flag(accepted: AcceptedFlags) -> None:
    check = accepted.check("--lr=1e-5")
    assert (check.flag, check.status) == ("--lr", FlagStatus.KNOWN)
    assert accepted.check("--lrr=1e-5").status is FlagStatus.UNKNOWN


@pytest.mark.parametrize("flag", ["--sglang-mem-fraction-static", "--sglang-anything", "--router-policy"])
def test_runtime_generated_prefixes_are_unverifiable(accepted: AcceptedFlags, flag: str) -> None:
    assert accepted.unverified_prefixes == UNVERIFIED_PREFIXES == ("--router-", "--sglang-")
    check = accepted.check(flag)
    assert check.status is FlagStatus.UNVERIFIABLE
    assert check.reason.startswith(next(p for p in UNVERIFIED_PREFIXES if flag.startswith(p)) + "*")


def test_unverifiable_flags_still_get_close_matches(accepted: AcceptedFlags) -> None:
    check = accepted.check("--sglang-router-ipp")
    assert check.status is FlagStatus.UNVERIFIABLE
    assert check.suggestions[0] == "--sglang-router-ip"


def test_every_file_read_is_recorded_relative_with_its_sha256(accepted: AcceptedFlags) -> None:
    paths = [path for path, _ in accepted.files]
    assert paths == sorted(paths)
    assert set(paths) == {
        "slime/backends/megatron_utils/arguments.py",
        "slime/backends/sglang_utils/arguments.py",
        "slime/rollout/filter_hub/arguments.py",
        "slime/utils/arguments.py",
        "megatron/training/arguments.py",
        "megatron/training/ft_args.py",
        "megatron/training/config/__init__.py",
        "megatron/training/config/training_config.py",
        "megatron/core/transformer/__init__.py",
        "megatron/core/transformer/transformer_config.py",
        "megatron/core/model_parallel_config.py",
    }
    for path, sha in accepted.files:
        root = SLIME if path.startswith("slime/") else MEGATRON
        assert sha == hashlib.sha256((root / path).read_bytes()).hexdigest()


def test_not_a_slime_checkout_gives_none(tmp_path: Path) -> None:
    assert read_accepted_flags(tmp_path, MEGATRON) is None
    assert read_accepted_flags(tmp_path / "missing", None) is None
    assert read_accepted_flags(MEGATRON, MEGATRON) is None
    (tmp_path / "slime" / "utils").mkdir(parents=True)
    assert read_accepted_flags(tmp_path, None) is None


@pytest.mark.parametrize("megatron", ["none", "missing", "empty"])
def test_without_megatron_flags_not_in_slime_are_unverifiable(tmp_path: Path, megatron: str) -> None:
    megatron_dir = {"none": None, "missing": tmp_path / "missing", "empty": tmp_path}[megatron]
    result = read_accepted_flags(SLIME, megatron_dir)
    assert result is not None
    assert result.check("--rollout-batch-size").status is FlagStatus.KNOWN
    assert all(path.startswith("slime/") for path, _ in result.files)
    assert len(result.gaps) == 1 and "Megatron" in result.gaps[0]
    megatron_flag = result.check("--tensor-model-parallel-size")
    assert megatron_flag.status is FlagStatus.UNVERIFIABLE
    assert "Megatron" in megatron_flag.reason
    typo = result.check("--rollout-batch-sise")
    assert typo.status is FlagStatus.UNVERIFIABLE
    assert typo.suggestions[0] == "--rollout-batch-size"


def _megatron_copy(tmp_path: Path) -> Path:
    return Path(shutil.copytree(MEGATRON, tmp_path / "megatron_checkout"))


def test_a_dataclass_that_cannot_be_found_is_a_gap(tmp_path: Path) -> None:
    megatron = _megatron_copy(tmp_path)
    shutil.rmtree(megatron / "megatron" / "training" / "config")
    result = read_accepted_flags(SLIME, megatron)
    assert result is not None
    assert any("TrainingConfig" in gap for gap in result.gaps)
    assert result.check("--micro-batch-size").status is FlagStatus.UNVERIFIABLE
    assert result.check("--num-layers").status is FlagStatus.KNOWN


def test_a_missing_imported_add_args_module_is_a_gap(tmp_path: Path) -> None:
    megatron = _megatron_copy(tmp_path)
    (megatron / "megatron" / "training" / "ft_args.py").unlink()
    result = read_accepted_flags(SLIME, megatron)
    assert result is not None
    assert any("add_fault_tolerance_args" in gap for gap in result.gaps)
    assert result.check("--enable-ft-package").status is FlagStatus.UNVERIFIABLE


def test_a_dataclass_field_that_cannot_be_parsed_is_a_gap(tmp_path: Path) -> None:
    megatron = _megatron_copy(tmp_path)
    config = megatron / "megatron" / "training" / "config" / "training_config.py"
    config.write_text(config.read_text() + "\n    broken_field: int = (1,\n")
    line = config.read_text().splitlines().index("    broken_field: int = (1,") + 1
    result = read_accepted_flags(SLIME, megatron)
    assert result is not None
    gap = f"training_config.py:{line}: cannot read this dataclass field"
    assert [gap for gap in result.gaps if gap.startswith("training_config.py:")] == [gap]  # golden wording of a gap
    assert result.check("--micro-batch-size").status is FlagStatus.KNOWN
    # the gap hides only what the factory could make of that field's name (issue 15: any gap hid every flag)
    assert dict(result.scopes) == {gap: {"--broken-field", "--no-broken-field", "--disable-broken-field"}}
    for hidden in ("--broken-field", "--no-broken-field", "--disable-broken-field"):
        check = result.check(hidden)
        assert check.status is FlagStatus.UNVERIFIABLE and gap in check.reason
    typo = result.check("--use-cpu-initializatoin")
    assert typo.status is FlagStatus.UNKNOWN and typo.suggestions[0] == "--use-cpu-initialization"
    assert result.check("--broken-fiel").status is FlagStatus.UNKNOWN  # not a name the field could make


def test_an_unknown_group_factory_is_a_gap(tmp_path: Path) -> None:
    checkout = _slime_checkout(
        tmp_path,
        "def add(parser):\n"
        "    parser.add_argument('--known')\n"
        "    MyArgumentGroupFactory(SomeConfig).build_group(parser)\n",
    )
    result = read_accepted_flags(checkout, MEGATRON)
    assert result is not None
    assert any("MyArgumentGroupFactory" in gap for gap in result.gaps)
    assert result.check("--known").status is FlagStatus.KNOWN
    assert result.check("--anything-else").status is FlagStatus.UNVERIFIABLE


def _megatron_tree(root: Path, config: str, exclude: str = "[]") -> Path:
    """A Megatron-shaped tree: arguments.py builds a group from ``Cfg`` in config.py, whose text is ``config``."""
    training = root / "megatron" / "training"
    training.mkdir(parents=True)
    (training / "arguments.py").write_text(
        "import argparse\nfrom megatron.training.cfg import Cfg\n\n"
        "def parse_args():\n    parser = argparse.ArgumentParser(allow_abbrev=False)\n"
        "    parser.add_argument('--plain-flag')\n"
        f"    ArgumentGroupFactory(Cfg, exclude={exclude}).build_group(parser)\n")
    (training / "cfg.py").write_text("from dataclasses import dataclass, field\n\n" + config)
    return root


@pytest.mark.parametrize(("config", "exclude", "hidden"), [
    ("@dataclass\nclass Cfg:\n    good: int = 1\n    bad: int = (1,\n", "[]", {"--bad", "--no-bad", "--disable-bad"}),
    # what the factory skips hides nothing
    ("@dataclass\nclass Cfg:\n    good: int = 1\n    bad: int = (1,\n", "['bad']", None),
    # metadata can rename the flag anything (argparse_meta arg_names): any flag
    ("@dataclass\nclass Cfg:\n    good: int = 1\n    bad: int = field(metadata={'argparse_meta': (1,)\n", "[]", "any"),
    # a base class that cannot be found adds fields of any name: any flag
    ("@dataclass\nclass Cfg(Missing):\n    good: int = 1\n", "[]", "any"),
])
def test_a_gap_hides_only_the_flags_it_could_concern(tmp_path: Path, config: str, exclude: str,
                                                     hidden: set[str] | str | None) -> None:
    megatron = _megatron_tree(tmp_path / "megatron", config, exclude)
    result = read_accepted_flags(SLIME, megatron)
    assert result is not None and {"--good", "--plain-flag"} <= result.flags
    typo = result.check("--plain-flagg")
    if hidden is None:
        assert result.gaps == () and typo.status is FlagStatus.UNKNOWN
    elif hidden == "any":
        assert len(result.gaps) == 1 and result.scopes == ()
        assert typo.status is FlagStatus.UNVERIFIABLE and result.gaps[0] in typo.reason
    else:
        (gap,) = result.gaps
        assert dict(result.scopes) == {gap: hidden}
        assert typo.status is FlagStatus.UNKNOWN and typo.suggestions == ("--plain-flag",)
        assert {result.check(flag).status for flag in hidden} == {FlagStatus.UNVERIFIABLE}


def test_an_unknown_prefix_of_accepted_flags_is_an_abbreviation(accepted: AcceptedFlags) -> None:
    """Read from the checkouts: slime's sglang parser's own flags, the families it generates (no RouterArgs call in
    the fixture: no --router-* family), and where the two parsers are (the fixture's lines)."""
    assert {"--sglang-router-ip", "--sglang-server-concurrency"} <= accepted.sglang_parser
    assert "--rollout-batch-size" not in accepted.sglang_parser
    assert accepted.families == ("--sglang-",)
    megatron_line = next(i for i, line in enumerate(
        (MEGATRON / "megatron/training/arguments.py").read_text().splitlines(), 1) if "allow_abbrev=False" in line)
    assert accepted.parsers == (f"{SLIME}/slime/backends/sglang_utils/arguments.py sglang_parse_args",
                                f"{MEGATRON}/megatron/training/arguments.py:{megatron_line}")
    check = accepted.check("--use-tensorboar")
    assert check.status is FlagStatus.UNKNOWN and check.abbreviation is not None
    assert (check.abbreviation.longer, check.abbreviation.sglang) == (("--use-tensorboard",), ())
    assert check.abbreviation.parsers == accepted.parsers
    sglang = accepted.check("--sglang").abbreviation
    assert sglang is not None and sglang.ambiguous and sglang.sglang == ("--sglang-*",)
    assert accepted.check("--sglang-router-i").abbreviation is None  # inside the family: rules F005/F007
    assert accepted.check("--completely-unrelated").abbreviation is None


def test_a_router_family_is_read_where_slime_registers_it(tmp_path: Path) -> None:
    checkout = _slime_checkout(tmp_path, "def add(parser):\n    parser.add_argument('--known')\n")
    sglang = checkout / "slime" / "backends" / "sglang_utils" / "arguments.py"
    sglang.parent.mkdir(parents=True)
    sglang.write_text("def add_sglang_router_arguments(parser):\n    parser.add_argument('--sglang-router-ip')\n"
                      "    RouterArgs.add_cli_args(parser, use_router_prefix=True)\n\n\n"
                      "def sglang_parse_args():\n    parser = argparse.ArgumentParser(add_help=False)\n")
    result = read_accepted_flags(checkout, MEGATRON)
    assert result is not None and result.families == ("--router-", "--sglang-")
    assert result.parsers[0] == f"{checkout}/slime/backends/sglang_utils/arguments.py:6 sglang_parse_args"
    router = result.check("--rou").abbreviation
    assert router is not None and router.ambiguous and router.sglang == ("--router-*",)


TRICKY = r'''
import argparse


def add(parser, group, names, obj):
    """Docstring: parser.add_argument("--in-docstring")."""
    parser.add_argument("--plain")
    parser.add_argument('--single', '-s', type=int)
    parser.add_argument(
        # a comment inside the call
        "--after-comment",  # and one after an argument
        "--alias",
        help="a ) paren, a \" quote and add_argument('--in-help')",
    )
    parser.add_argument("--implicit" "-concat", r"--raw\d", "--escaped\u0041")
    group.add_argument(*names)
    group.add_argument(f"--fstring-{names}")
    parser.add_argument(
        "--bool", action=argparse.BooleanOptionalAction, help="("
    )
    parser.add_argument(
        "--bool-later",
        help="long " * 3,
        action=argparse.BooleanOptionalAction,
    )
    parser.add_argument("--not-bool", help="BooleanOptionalAction is only mentioned here")
    self_reset_arg(parser, "--other-function")
    obj.reset_arg(parser, "--method-reset")
    parser.add_argument("positional")
    old_add_argument("--suffix-call")
    text = """
    parser.add_argument("--in-triple-string")
    """
    # parser.add_argument("--in-comment")
    return parser, text
'''


@pytest.mark.parametrize(
    "path",
    [
        *(p for p in sorted(SLIME.rglob("*.py")) if "add_argument(" in p.read_text()),
        MEGATRON / "megatron" / "training" / "arguments.py",
        MEGATRON / "megatron" / "training" / "ft_args.py",
        None,  # TRICKY
    ],
    ids=lambda p: "tricky" if p is None else p.name if p.parent.name == "training" else p.parent.name,
)
def test_scanner_agrees_with_an_ast_walk(tmp_path: Path, path: Path | None) -> None:
    text = TRICKY if path is None else path.read_text()
    result = read_accepted_flags(_slime_checkout(tmp_path, text), None)
    assert result is not None
    expected = _ast_flags(text)
    assert expected  # the comparison means something
    assert result.flags == expected


def test_tricky_source_yields_exactly_these_flags(tmp_path: Path) -> None:
    result = read_accepted_flags(_slime_checkout(tmp_path, TRICKY), None)
    assert result is not None
    assert result.flags == {
        "--plain",
        "--single",
        "-s",
        "--after-comment",
        "--alias",
        "--implicit-concat",
        "--raw\\d",
        "--escapedA",
        "--bool",
        "--no-bool",
        "--bool-later",
        "--no-bool-later",
        "--not-bool",
        "--method-reset",
        "--suffix-call",
    }


def test_syntax_this_python_cannot_parse_does_not_stop_the_reading(tmp_path: Path) -> None:
    text = (
        "def first[T](xs: list[T]) -> T:\n"  # PEP 695, Python 3.12
        "    return xs[0]\n"
        "\n"
        "def add(parser, d):\n"
        '    parser.add_argument("--still-read", help=f"{d["key"]}")\n'  # PEP 701 nested quotes
        '    parser.add_argument("--also-read")\n'
    )
    if sys.version_info < (3, 12):
        with pytest.raises(SyntaxError):
            ast.parse(text)
    result = read_accepted_flags(_slime_checkout(tmp_path, text), None)
    assert result is not None
    assert {"--still-read", "--also-read"} <= result.flags


def test_a_changed_file_is_read_again(tmp_path: Path) -> None:
    checkout = Path(shutil.copytree(SLIME, tmp_path / "slime_checkout"))
    first = read_accepted_flags(checkout, None)
    assert first is not None
    assert read_accepted_flags(checkout, None) == first
    path = checkout / "slime" / "utils" / "arguments.py"
    path.write_text(path.read_text() + '\n\ndef more(parser):\n    parser.add_argument("--added-later")\n')
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    second = read_accepted_flags(checkout, None)
    assert second is not None
    assert second.flags == first.flags | {"--added-later"}
    assert dict(second.files)["slime/utils/arguments.py"] != dict(first.files)["slime/utils/arguments.py"]


def test_reading_a_realistic_size_checkout_is_fast(tmp_path: Path) -> None:
    lines = ["import argparse", "", "def add(parser):", "    group = parser.add_argument_group('g')"]
    for i in range(600):  # ~3000 lines, ~130k characters: the size of slime's arguments.py
        lines += [
            "    group.add_argument(",
            f"        '--flag-{i}', type=int, default=None, dest='flag_{i}',",
            f"        help='What flag {i} does, in a sentence long enough to look like real help text. '",
            "        'And a second string, as Megatron writes them.',",
            "    )",
        ]
    checkout = _slime_checkout(tmp_path, "\n".join(lines) + "\n")
    start = time.perf_counter()
    result = read_accepted_flags(checkout, None)
    elapsed = time.perf_counter() - start
    assert result is not None
    assert len(result.flags) == 600
    assert elapsed < 0.25, f"{elapsed * 1000:.0f} ms"  # measured ~7 ms; generous for slow CI


def test_importing_and_reading_imports_no_framework() -> None:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from acrl.compiler._slime.source import read_accepted_flags\n"
        f"assert read_accepted_flags(Path({str(SLIME)!r}), Path({str(MEGATRON)!r})) is not None\n"
        "banned = {'slime', 'megatron', 'torch', 'sglang', 'sglang_router', 'ray', 'transformers'}\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in banned))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------
# Git commits


def _git(cwd: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=True)
    return done.stdout.strip()


needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    _git(path, "init", "-q")
    for n in range(2):
        (path / "file.txt").write_text(str(n))
        _git(path, "add", "file.txt")
        _git(path, "commit", "-q", "-m", f"commit {n}")
    return path


@needs_git
def test_commit_from_a_loose_ref(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = _git(repo, "rev-parse", "HEAD")
    branch = _git(repo, "symbolic-ref", "--short", "HEAD")
    assert (repo / ".git" / "refs" / "heads" / branch).is_file()
    monkeypatch.setenv("PATH", "")  # git itself is never run
    assert read_git_commit(repo) == expected


@needs_git
def test_commit_from_packed_refs(repo: Path) -> None:
    branch = _git(repo, "symbolic-ref", "--short", "HEAD")
    _git(repo, "pack-refs", "--all")
    assert not (repo / ".git" / "refs" / "heads" / branch).exists()
    assert read_git_commit(repo) == _git(repo, "rev-parse", "HEAD")


@needs_git
def test_commit_of_a_detached_head(repo: Path) -> None:
    tip = _git(repo, "rev-parse", "HEAD")
    _git(repo, "checkout", "-q", "--detach", "HEAD~1")
    expected = _git(repo, "rev-parse", "HEAD")
    assert expected != tip
    assert read_git_commit(repo) == expected


@needs_git
def test_commit_of_a_worktree_whose_dot_git_is_a_file(repo: Path) -> None:
    worktree = repo.parent / "worktree"
    _git(repo, "worktree", "add", "-q", "-b", "other", str(worktree), "HEAD~1")
    assert (worktree / ".git").is_file()
    expected = _git(worktree, "rev-parse", "HEAD")
    assert expected != _git(repo, "rev-parse", "HEAD")
    assert read_git_commit(worktree) == expected
    _git(repo, "pack-refs", "--all")
    assert read_git_commit(worktree) == expected


@needs_git
def test_no_commit_yet_gives_none(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    assert read_git_commit(tmp_path) is None


def test_not_a_git_checkout_gives_none(tmp_path: Path) -> None:
    assert read_git_commit(tmp_path) is None
    assert read_git_commit(tmp_path / "missing") is None
    (tmp_path / ".git").write_text("not a gitdir line\n")
    assert read_git_commit(tmp_path) is None


@pytest.mark.parametrize("meta", ['{"argparse_meta": {"arg_names": NAMES}}', '{"argparse_meta": META}',
                                  '{"argparse_meta": {**EXTRA, "nargs": 3}}'])
def test_flag_names_the_metadata_hides_are_a_gap(tmp_path: Path, meta: str) -> None:
    """Only a metadata whose flag names cannot be read is a gap (arg_names, or argparse_meta, not a literal); the
    flags of argparse_meta without arg_names are read (the test above)."""
    megatron = _megatron_copy(tmp_path)
    config = megatron / "megatron" / "training" / "config" / "training_config.py"
    config.write_text(config.read_text() + f"\n    hidden_names: int = field(default=0, metadata={meta})\n")
    result = read_accepted_flags(SLIME, megatron)
    assert result is not None
    assert [gap.split(": ", 1)[1] for gap in result.gaps] == ["TrainingConfig.hidden_names: cannot read the flag names "
                                                              "in the field's metadata"]
    assert result.check("--use-cpu-initializatoin").status is FlagStatus.UNVERIFIABLE


@pytest.mark.upstream("ACRL_SLIME_DIR", "ACRL_MEGATRON_DIR")
def test_the_real_stack_reads_without_gaps_and_names_a_typo(tmp_path: Path) -> None:
    """slime 624b824 with the Megatron-LM it uses (1dcf0daf): every flag definition is read, so a typo of a slime flag
    is unknown with its did-you-mean (issue 15: --use-tiss compiled with exit 0 and was never named)."""
    for name, git_dir, commit, paths in (("slime", "ACRL_SLIME_DIR", SLIME_HEAD, ["slime"]),
                                         ("megatron", "ACRL_MEGATRON_DIR", MEGATRON_COMMIT, ["megatron"])):
        (tmp_path / name).mkdir()
        archive = subprocess.run(["git", "-C", os.environ[git_dir], "archive", commit, *paths], capture_output=True,
                                 check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
            tar.extractall(tmp_path / name, filter="data")
    result = read_accepted_flags(tmp_path / "slime", tmp_path / "megatron")
    assert result is not None and result.gaps == ()
    typo = result.check("--use-tiss")
    assert typo.status is FlagStatus.UNKNOWN and typo.suggestions[0] == "--use-tis"
    assert {result.check(f).status for f in ("--use-tis", "--num-layers", "--rampup-batch-size")} == {FlagStatus.KNOWN}
    # an abbreviation, with where slime's two parsers are (slime 624b824, Megatron-LM 1dcf0daf)
    abbreviated = result.check("--use-ti")
    assert abbreviated.status is FlagStatus.UNKNOWN and abbreviated.abbreviation is not None
    assert abbreviated.abbreviation.longer == ("--use-tis",) and abbreviated.abbreviation.sglang == ()
    assert result.parsers == (f"{tmp_path}/slime/slime/backends/sglang_utils/arguments.py:203 sglang_parse_args",
                              f"{tmp_path}/megatron/megatron/training/arguments.py:90")
    assert result.families == UNVERIFIED_PREFIXES and "--prefill-num-servers" in result.sglang_parser
    prefill = result.check("--prefill").abbreviation
    assert prefill is not None and prefill.expanded == "--prefill-num-servers"
    # one field of the real TrainingConfig made unreadable hides its own names only
    config = tmp_path / "megatron" / "megatron" / "training" / "training_config.py"  # 1dcf0daf's, line 61
    text = config.read_text()
    assert "\n    exit_signal_handler: bool = False\n" in text
    config.write_text(text.replace("\n    exit_signal_handler: bool = False\n",
                                   "\n    exit_signal_handler: bool = (\n", 1))
    broken = read_accepted_flags(tmp_path / "slime", tmp_path / "megatron")
    assert broken is not None and len(broken.gaps) == 1
    assert dict(broken.scopes)[broken.gaps[0]] == {"--exit-signal-handler", "--no-exit-signal-handler",
                                                    "--disable-exit-signal-handler"}
    assert broken.check("--exit-signal-handler").status is FlagStatus.UNVERIFIABLE
    assert broken.check("--use-tiss").status is FlagStatus.UNKNOWN
