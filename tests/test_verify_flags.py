"""Escape-hatch flags checked against a slime and Megatron checkout on the compiling machine."""

from __future__ import annotations

import pytest

from acrl.compiler import SpecError, compile_spec
from conftest import REPO, SpecWriter

FIXTURES = REPO / "tests" / "fixtures"
# a slime commit acrl has no facts about: the checkout alone decides (ACRL-F004); see the end of this file for a
# commit with facts (ACRL-F003)
NO_FACTS = "1234567890abcdef1234567890abcdef12345678"
CHECKOUTS = {"slime": {"dir": str(FIXTURES / "slime_checkout"), "megatron_dir": str(FIXTURES / "megatron_checkout"),
                       "commit": NO_FACTS}}


def test_known_flags_pass_and_are_reported_as_verified(write_spec: SpecWriter) -> None:
    bundle = compile_spec(write_spec({**CHECKOUTS, "extra": {"flags": {"--use-tensorboard": True}}}))
    assert b"--use-tensorboard" in bundle.files["train.sh"]
    assert not any("flags not verified" in note for note in bundle.notes)


def test_a_misspelled_flag_is_an_error_with_did_you_mean(write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec({**CHECKOUTS, "extra": {"flags": {"--use-tensorbord": True}}}),
                     display_name="spec.toml")
    (diag,) = info.value.diagnostics
    assert diag.rule == "ACRL-F004" and diag.key == "extra.flags.--use-tensorbord"
    assert diag.hint == "did you mean --use-tensorboard?"


def test_sglang_flags_are_checked_against_acrls_sglang_facts_where_it_has_them(write_spec: SpecWriter) -> None:
    """The checkout cannot say which --sglang-* flags exist (slime makes them from sglang at run time); acrl's facts of
    the sglang the targeted commit runs can (ACRL-F007, tests/test_sglang_facts.py), for the commits it has them for."""
    flags = {"extra": {"flags": {"--sglang-enable-metrics": True}}}
    pin = {"slime": {**CHECKOUTS["slime"], "commit": "fa3c990af6f18efd3fd9922698bf4bf4048d1263"}}
    bundle = compile_spec(write_spec({**CHECKOUTS, **flags, **pin}))  # the pin, sglang 0.5.13
    (note,) = [n for n in bundle.notes if "generated from sglang" in n]
    assert note.startswith("flags starting with --router- are generated") and "sglang 0.5.13" in note
    other = compile_spec(write_spec({**CHECKOUTS, **flags, "slime": {**CHECKOUTS["slime"], "commit": "0123456789ab"}}))
    (note,) = [n for n in other.notes if "generated from sglang" in n]
    assert note.startswith("flags starting with --router-, --sglang- are generated") and "facts" not in note


def test_bundle_bytes_do_not_depend_on_the_checkout_being_here(write_spec: SpecWriter, tmp_path) -> None:  # type: ignore[no-untyped-def]
    here = compile_spec(write_spec({**CHECKOUTS, "extra": {"flags": {"--use-tensorboard": True}}}))
    away = {"slime": {"dir": str(tmp_path / "nowhere"), "megatron_dir": CHECKOUTS["slime"]["megatron_dir"]}}
    elsewhere = compile_spec(write_spec({**away, "extra": {"flags": {"--use-tensorboard": True}}}))
    assert here.notes != elsewhere.notes
    assert here.files["manifest.json"].count(b"not verified") == elsewhere.files["manifest.json"].count(
        b"not verified") == 0


def test_without_a_checkout_the_compile_says_flags_were_not_verified(write_spec: SpecWriter) -> None:
    bundle = compile_spec(write_spec({"slime": {"commit": NO_FACTS}, "extra": {"flags": {"--anything-goes": 1}}}))
    assert any(note.startswith("flags not verified: no slime checkout on this machine ([slime] dir /root/slime")
               for note in bundle.notes)
