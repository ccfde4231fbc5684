"""The compiling machine's slime checkout (--slime-checkout, ACRL_SLIME_CHECKOUT) is not the cluster's [slime] dir:
model scripts and flag definitions are read from the one, train.sh runs slime at the other (issue 14)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tomli_w

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._cli.main import acrl_main, compile_main
from conftest import MINIMAL, REPO, merge

FIXTURES = REPO / "tests" / "fixtures"
SLIME = FIXTURES / "slime_checkout"
MEGATRON = FIXTURES / "megatron_checkout"
CLUSTER_SLIME = "/cluster/nowhere-here/slime"  # the cluster's path: not on this machine
SCRIPT_SPEC = merge(MINIMAL, {"slime": {"dir": CLUSTER_SLIME, "megatron_dir": "/cluster/nowhere-here/Megatron-LM"},
                              "model": {"type": "acrl-fixture-3B", "args": None, "args_source": "script"}})
FIXTURE_ARGS = ["--swiglu", "--num-layers", "36", "--hidden-size", "2048"]


@pytest.fixture(autouse=True)
def _no_checkout_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ACRL_SLIME_CHECKOUT", raising=False)
    monkeypatch.delenv("ACRL_MEGATRON_CHECKOUT", raising=False)


def write(tmp_path: Path, spec: dict[str, object] = SCRIPT_SPEC, name: str = "spec.toml") -> Path:
    path = tmp_path / name
    path.write_text(tomli_w.dumps(spec))
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = compile_main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_the_option_reads_the_script_and_train_sh_keeps_the_cluster_path(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(write(tmp_path)), "-o", str(tmp_path / "b"), "--slime-checkout", str(SLIME),
                       "--no-cache", "--verbose")  # --verbose: the notes
    assert code == 0, err
    model_args = (tmp_path / "b" / "model_args.sh").read_text()
    assert "  --num-layers 36\n" in model_args and "  --vocab-size 151936\n" in model_args
    train_sh = (tmp_path / "b" / "train.sh").read_text()
    assert f"readonly SLIME_DIR={CLUSTER_SLIME}\n" in train_sh and str(SLIME) not in train_sh
    recorded = json.loads((tmp_path / "b" / "manifest.json").read_text())["model_args"]
    assert recorded["source"] == "script"
    assert recorded["from"] == f"{SLIME}/scripts/models/acrl-fixture-3B.sh"
    assert recorded["checkout"] == {"path": str(SLIME), "commit": None}
    spec_toml = (tmp_path / "b" / "spec.toml").read_text()
    assert f'dir = "{CLUSTER_SLIME}"' in spec_toml and str(SLIME) not in spec_toml
    assert "MODEL_ARGS read from" in err and "--slime-checkout" in err
    assert acrl_main(["verify", str(tmp_path / "b")]) == 0  # the manifest, checkout and all, reads back


def test_the_environment_variable_does_the_same(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ACRL_SLIME_CHECKOUT", str(SLIME))
    bundle = compile_spec(write(tmp_path))
    assert list(bundle.model_args.args[:5]) == FIXTURE_ARGS
    assert bundle.model_args.checkout == (str(SLIME), None)
    assert any("(ACRL_SLIME_CHECKOUT)" in note for note in bundle.notes)
    by_option = compile_spec(write(tmp_path), checkouts=((str(SLIME), "--slime-checkout"), None))
    assert by_option.files == bundle.files  # how the checkout was given is not part of the bundle
    assert f"readonly SLIME_DIR={CLUSTER_SLIME}\n".encode() in bundle.files["train.sh"]


def test_the_option_wins_over_the_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ACRL_SLIME_CHECKOUT", str(tmp_path / "not-here"))
    code, _, err = run(capsys, str(write(tmp_path)), "-o", str(tmp_path / "b"), "--slime-checkout", str(SLIME))
    assert code == 0, err


def test_without_a_checkout_the_error_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(write(tmp_path))
    (diag,) = info.value.diagnostics
    assert "no slime checkout is on this machine" in diag.message and CLUSTER_SLIME in diag.message
    assert diag.hint is not None and "--slime-checkout DIR" in diag.hint and "ACRL_SLIME_CHECKOUT" in diag.hint
    assert diag.key == "model.args_source"


def test_a_checkout_that_is_not_here_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(write(tmp_path)), "--slime-checkout", str(tmp_path / "no-such"))
    assert code == 2 and f"--slime-checkout {tmp_path / 'no-such'}: no such directory on this machine" in err


def test_a_checkout_without_the_model_script_says_which(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(write(tmp_path), checkouts=((str(MEGATRON), "--slime-checkout"), None))
    assert "has no scripts/models/acrl-fixture-3B.sh" in info.value.diagnostics[0].message


def test_flags_are_checked_against_the_given_checkouts(tmp_path: Path) -> None:
    # a commit acrl has no facts about: the checkouts decide (with facts, ACRL-F003 names the flag: test_commit_facts)
    spec = merge(MINIMAL, {"slime": {"dir": CLUSTER_SLIME, "commit": "1234567890abcdef1234567890abcdef12345678"},
                           "extra": {"flags": {"--use-tensorbord": True}}})
    with pytest.raises(SpecError) as info:
        compile_spec(write(tmp_path, spec), checkouts=((str(SLIME), "--slime-checkout"),
                                                       (str(MEGATRON), "--megatron-checkout")))
    (diag,) = info.value.diagnostics
    assert diag.rule == "ACRL-F004" and diag.hint == "did you mean --use-tensorboard?"
    assert f"at {SLIME} (--slime-checkout)" in diag.message
    fine = merge(spec, {"extra": {"flags": {"--use-tensorbord": None, "--use-tensorboard": True}}})
    bundle = compile_spec(write(tmp_path, fine), checkouts=((str(SLIME), "--slime-checkout"),
                                                             (str(MEGATRON), "--megatron-checkout")))
    assert any(n.startswith(f"flags checked against the slime checkout {SLIME}") for n in bundle.notes)
    # flag verification leaves no trace in the bundle: the same bytes as a compile without any checkout
    assert bundle.files == compile_spec(write(tmp_path, fine), checkouts=(None, None)).files


def test_the_cluster_path_is_still_read_where_it_exists(tmp_path: Path) -> None:
    spec = merge(SCRIPT_SPEC, {"slime": {"dir": str(SLIME)}})
    bundle = compile_spec(write(tmp_path, spec))
    assert bundle.model_args.checkout == (str(SLIME), None)
    assert any("the cluster's path, which exists on this machine" in n for n in bundle.notes)


def test_the_compile_cache_keys_on_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    spec = write(tmp_path, merge(MINIMAL, {"slime": {"dir": CLUSTER_SLIME,
                                                     "commit": "1234567890abcdef1234567890abcdef12345678"}}))
    for _ in range(2):  # the second is a hit
        code, _, err = run(capsys, str(spec), "-o", str(tmp_path / "a"), "--verbose")  # --verbose: the notes
        assert code == 0 and "flags not checked" in err
    code, _, err = run(capsys, str(spec), "-o", str(tmp_path / "a"), "--slime-checkout", str(SLIME), "--verbose")
    assert code == 0 and "flags not checked" not in err and "flags checked against" in err


def test_check_explain_and_sweeps_use_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write(tmp_path)
    out = str(tmp_path / "b")
    assert run(capsys, str(spec), "-o", out, "--slime-checkout", str(SLIME))[0] == 0
    assert run(capsys, str(spec), "-o", out, "--check", "--slime-checkout", str(SLIME))[0] == 0
    assert run(capsys, str(spec), "-o", out, "--check")[0] == 1  # no checkout: the script cannot be read
    assert acrl_main(["explain", "--slime-checkout", str(SLIME), str(spec), "--num-layers"]) == 0
    assert "acrl-fixture-3B.sh" in capsys.readouterr().out
    sweep = write(tmp_path, merge(SCRIPT_SPEC, {"sweep": {"grid": {"rollout.temperature": [0.7, 1.0]}}}), "s.toml")
    code, _, err = run(capsys, str(sweep), "-o", str(tmp_path / "s"), "--slime-checkout", str(SLIME))
    assert code == 0, err
    manifests = sorted((tmp_path / "s").glob("*/manifest.json"))
    assert len(manifests) == 2
    assert all(json.loads(m.read_text())["model_args"]["checkout"]["path"] == str(SLIME) for m in manifests)
