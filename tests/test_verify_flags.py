"""Escape-hatch flags checked against a slime and Megatron checkout on the compiling machine."""

from __future__ import annotations

import shutil
from pathlib import Path

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


def _line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_without_facts_or_a_checkout_one_warning_names_every_escape_hatch_flag(write_spec: SpecWriter) -> None:
    """acrl has no facts of the commit and no checkout is here: ACRL-F008 names each escape-hatch flag by key (at the
    first), with the fix; the warning depends on this machine, so the bundle does not record it."""
    hatch = {"flags": {"--anything-goes": 1, "rollout-shuffle": True}, "args": ["--foo-bar", "3"]}
    path = write_spec({"slime": {"commit": NO_FACTS}, "extra": hatch})
    bundle = compile_spec(path, display_name="spec.toml")
    (warning,) = bundle.warnings
    assert (warning.rule, warning.severity, warning.key) == ("ACRL-F008", "warning", "extra.flags.--anything-goes")
    assert warning.line == _line_of(path, '--anything-goes = 1')
    for named in ("extra.flags.--anything-goes", "extra.flags.rollout-shuffle (--rollout-shuffle)",
                  "extra.args.0 (--foo-bar)"):
        assert named in warning.message
    assert "--slime-checkout" in warning.hint
    assert not any(n.startswith("flags not") for n in bundle.notes)  # the warning says it: no note besides
    assert b"ACRL-F008" not in bundle.files["manifest.json"]
    with pytest.raises(SpecError) as info:
        compile_spec(path, strict=True)
    assert [d.rule for d in info.value.diagnostics] == ["ACRL-F008"]


def test_without_escape_hatch_flags_there_is_no_warning_and_one_short_note(write_spec: SpecWriter) -> None:
    bundle = compile_spec(write_spec({"slime": {"commit": NO_FACTS}}))
    assert bundle.warnings == ()
    (note,) = [n for n in bundle.notes if n.startswith("flags not checked: ")]
    assert "1234567890ab" in note and "--slime-checkout" in note and len(note) < 150


def test_an_abbreviation_is_refused_as_one_by_the_checkout(write_spec: SpecWriter) -> None:
    """ACRL-F004 (a commit without facts, the checkout decides): slime's main parser does not expand --use-tensorboar;
    the sglang parser stops on --sglang (a prefix of every --sglang-* flag: argparse's "ambiguous option")."""
    path = write_spec({**CHECKOUTS, "extra": {"flags": {"--use-tensorboar": True}, "args": ["--sglang"]}})
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    found = {d.key: d for d in info.value.diagnostics}
    assert sorted(found) == ["extra.args.0", "extra.flags.--use-tensorboar"]
    assert {d.rule for d in found.values()} == {"ACRL-F004"}
    assert found["extra.flags.--use-tensorboar"].hint == "write --use-tensorboard"
    assert found["extra.flags.--use-tensorboar"].line == _line_of(path, '--use-tensorboar = true')
    megatron_line = _line_of(FIXTURES / "megatron_checkout/megatron/training/arguments.py", "allow_abbrev=False")
    assert f"megatron/training/arguments.py:{megatron_line}" in found["extra.flags.--use-tensorboar"].message
    assert "--sglang-*" in found["extra.args.0"].message and "exits" in found["extra.args.0"].message


def _broken_megatron(tmp_path: Path, field: str) -> Path:
    megatron = Path(shutil.copytree(FIXTURES / "megatron_checkout", tmp_path / "megatron"))
    config = megatron / "megatron" / "training" / "config" / "training_config.py"
    config.write_text(config.read_text() + f"\n{field}\n")
    return megatron


def test_a_gap_of_one_field_leaves_every_other_flag_checked(write_spec: SpecWriter, tmp_path: Path) -> None:
    """A dataclass field the reader cannot parse hides only its own option strings: those are ACRL-F008's (named, a
    warning); a typo elsewhere is still ACRL-F004's error with its did-you-mean (issue 15: any gap made every unknown
    flag unverifiable)."""
    megatron = _broken_megatron(tmp_path, "    broken_field: int = (1,")
    flags = {"--no-broken-field": True, "--use-cpu-initializatoin": True, "--use-tensorboard": True}
    spec = write_spec({"slime": {**CHECKOUTS["slime"], "megatron_dir": str(megatron)}, "extra": {"flags": flags}})
    with pytest.raises(SpecError) as info:
        compile_spec(spec, display_name="spec.toml")
    found = sorted((d.rule, d.severity, d.key) for d in info.value.diagnostics)
    assert found == [("ACRL-F004", "error", "extra.flags.--use-cpu-initializatoin"),
                     ("ACRL-F008", "warning", "extra.flags.--no-broken-field")]
    (typo,) = [d for d in info.value.diagnostics if d.rule == "ACRL-F004"]
    assert typo.hint == "did you mean --use-cpu-initialization?"
    (unchecked,) = [d for d in info.value.diagnostics if d.rule == "ACRL-F008"]
    assert "training_config.py:" in unchecked.message and "--use-tensorboard" not in unchecked.message


def test_a_global_gap_names_every_flag_it_could_hide(write_spec: SpecWriter, tmp_path: Path) -> None:
    """Flag names hidden in a field's metadata could be any flag: every escape-hatch flag not found is unchecked
    (a warning naming each), none refused."""
    megatron = _broken_megatron(tmp_path, "    hidden: int = field(default=0, metadata={'argparse_meta': META})")
    flags = {"--use-cpu-initializatoin": True, "--anything-goes": 1, "--use-tensorboard": True}
    bundle = compile_spec(write_spec({"slime": {**CHECKOUTS["slime"], "megatron_dir": str(megatron)},
                                      "extra": {"flags": flags}}))
    (warning,) = bundle.warnings
    assert warning.rule == "ACRL-F008" and warning.key == "extra.flags.--use-cpu-initializatoin"
    assert "extra.flags.--anything-goes" in warning.message and "--use-tensorboard" not in warning.message
    assert any(n.startswith("a flag not found may still exist: ") and "hidden" in n for n in bundle.notes)
