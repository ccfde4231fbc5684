"""Abbreviated flags (issue 15: "abbreviations of any flag are errors"): what slime's parsers do with a prefix of their
flags, checked against argparse itself, and the wording of ACRL-F003 for one (the golden test)."""

from __future__ import annotations

import argparse
import os
import subprocess

import pytest

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._slime.commit_facts import known_commits
from acrl.compiler._slime.flag_verdict import (
    abbreviation,
    registers_router,
    sglang_parser_flags,
)
from conftest import SLIME_HEAD, SpecWriter

CANDIDATES = ["--use-ti", "--use", "--sglang", "--sgl", "--s", "--prefill", "--p", "--pre", "--r", "--ro", "--rou",
              "--router", "--rollout-batch", "--num-lay", "--lr", "--sglang-config", "--prefill-num-servers"]


def _parsers(flags: frozenset[str], router: bool) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """slime's two parsers as argparse builds them (compiler/_slime/flag_verdict.py): the sglang parser with the
    default allow_abbrev and a few generated flags of each family, and Megatron's, allow_abbrev=False, with the
    rest."""
    phase1 = argparse.ArgumentParser(add_help=False, exit_on_error=False)  # allow_abbrev as the facts record
    generated = ["--sglang-mem-fraction-static", "--sglang-log-level"]
    generated += ["--router-policy", "--router-log-level"] if router else []
    for flag in sorted(sglang_parser_flags(flags) | set(generated)):
        phase1.add_argument(flag)
    phase2 = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    for flag in sorted(flags - sglang_parser_flags(flags)):
        phase2.add_argument(flag)
    return phase1, phase2


@pytest.mark.parametrize("facts", known_commits(), ids=lambda f: f.name)
def test_the_verdict_on_an_abbreviation_is_what_argparse_does(facts, capsys) -> None:  # type: ignore[no-untyped-def]
    """For every commit acrl has facts for: a prefix of several of the sglang parser's flags stops it ("ambiguous
    option"), of one is expanded to it, else the main parser ignores it (allow_abbrev=False)."""
    router = registers_router(facts.commit)
    assert router is not None
    phase1, phase2 = _parsers(facts.flags, router)
    families = ("--sglang-", "--router-") if router else ("--sglang-",)
    for flag in CANDIDATES:
        verdict = abbreviation(flag, facts.flags, sglang_parser_flags(facts.flags), families, ("", ""))
        try:
            namespace, _ = phase1.parse_known_args([flag, "1"])
            taken = [k for k, v in vars(namespace).items() if v == "1"]
        except (argparse.ArgumentError, SystemExit) as exc:  # 3.12 raises it; 3.11 exits whatever exit_on_error
            assert isinstance(exc, SystemExit) or "ambiguous option" in str(exc)
            assert verdict is not None and verdict.ambiguous, (facts.name, flag)
            continue
        _, rest = phase2.parse_known_args([flag, "1"])
        if flag in facts.flags:  # a flag: taken as itself, not an abbreviation
            assert verdict is None and (taken or flag not in rest)
        elif taken:
            assert verdict is not None and verdict.expanded is not None, (facts.name, flag)
            assert taken == [verdict.expanded[2:].replace("-", "_")]
        else:
            assert flag in rest  # ignored by both: an abbreviation of main-parser flags, or nothing
            assert (verdict is not None) == any(f.startswith(flag) for f in facts.flags)
            assert verdict is None or not (verdict.ambiguous or verdict.expanded), (facts.name, flag)


def test_abbreviation_is_none_for_a_flag_a_family_member_or_nothing() -> None:
    flags, sglang = frozenset({"--use-tis", "--prefill-num-servers"}), frozenset({"--prefill-num-servers"})
    families = ("--sglang-",)
    assert abbreviation("--use-tis", flags, sglang, families, ("", "")) is None
    assert abbreviation("--sglang-mem", flags, sglang, families, ("", "")) is None  # rules F005, F007
    assert abbreviation("--", flags, sglang, families, ("", "")) is None
    assert abbreviation("--other", flags, sglang, families, ("", "")) is None
    found = abbreviation("--s", flags, sglang, families, ("a", "b"))
    assert found is not None and found.ambiguous and found.sglang == ("--sglang-*",) and found.parsers == ("a", "b")


def test_an_abbreviation_is_named_as_one(write_spec: SpecWriter) -> None:
    """The golden wording: --use-ti (for --use-tis) at slime 624b824, without a checkout (ACRL-F003)."""
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec({"slime": {"commit": SLIME_HEAD}, "extra": {"flags": {"--use-ti": True}}}),
                     display_name="spec.toml")
    (diag,) = info.value.diagnostics
    assert (diag.rule, diag.key) == ("ACRL-F003", "extra.flags.--use-ti")
    assert diag.message == ("--use-ti is an abbreviation of --use-tis that slime's parser does not expand "
                            "(allow_abbrev=False: Megatron-LM megatron/training/arguments.py:90 at 1dcf0daf); slime "
                            "would ignore it silently")
    assert diag.hint == "write --use-tis"


@pytest.mark.parametrize(("flags", "key", "says"), [
    ({"--prefill": 2}, "extra.flags.--prefill", "reads it as --prefill-num-servers"),  # expanded by the sglang parser
    ({"--sgl": True}, "extra.flags.--sgl", "slime exits at start"),  # ambiguous there
])
def test_what_the_sglang_parser_does_with_an_abbreviation(write_spec: SpecWriter, flags: dict[str, object], key: str,
                                                         says: str) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec({"slime": {"commit": SLIME_HEAD}, "extra": {"flags": flags}}))
    (diag,) = info.value.diagnostics
    assert (diag.rule, diag.key) == ("ACRL-F003", key) and says in diag.message
    assert "slime/backends/sglang_utils/arguments.py:203" in diag.message


def test_the_facts_record_each_commits_parsers() -> None:
    """The parser facts flag_facts generates (parser_facts.py) for every commit acrl ships: the sglang parser expands
    abbreviations and Megatron's does not; only v0.3.0 registers no --router-* flags. Their lines are held to the
    sources by test_the_cited_lines_are_slimes / _megatrons (mirrors) and, byte for byte, by the regeneration test of
    tests/test_commit_facts.py."""
    for facts in known_commits():
        sglang, megatron = facts.parsers["sglang"], facts.parsers["megatron"]
        assert sglang["allow_abbrev"] is True and megatron["allow_abbrev"] is False
        assert (sglang["router_line"] is None) == (facts.name == "v0.3.0")
        assert registers_router(facts.commit) is (facts.name != "v0.3.0")
    assert registers_router("1234567890abc") is None


@pytest.mark.upstream("ACRL_SLIME_DIR")
def test_the_cited_lines_are_slimes() -> None:
    for facts in known_commits():
        parse_line, router_line = facts.parsers["sglang"]["line"], facts.parsers["sglang"]["router_line"]
        text = subprocess.run(["git", "-C", os.environ["ACRL_SLIME_DIR"], "show",
                               f"{facts.commit}:slime/backends/sglang_utils/arguments.py"], capture_output=True,
                              text=True, check=True).stdout.splitlines()
        assert text[parse_line - 1] == "def sglang_parse_args():"
        assert "parse_known_args()" in "\n".join(text[parse_line:])  # the sglang parser keeps argparse's abbrev
        routers = [i for i, line in enumerate(text, 1) if "RouterArgs.add_cli_args(" in line]
        assert routers == ([router_line] if router_line else [])


@pytest.mark.upstream("ACRL_MEGATRON_DIR")
def test_the_cited_megatron_line_is_its_allow_abbrev() -> None:
    for facts in known_commits():
        text = subprocess.run(["git", "-C", os.environ["ACRL_MEGATRON_DIR"], "show",
                               f"{facts.megatron_commit}:megatron/training/arguments.py"], capture_output=True,
                              text=True, check=True).stdout.splitlines()
        assert "allow_abbrev=False" in text[facts.parsers["megatron"]["line"] - 1]
