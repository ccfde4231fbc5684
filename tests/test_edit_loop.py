"""The edit loop through the real console scripts: edit the spec, compile again, read what changed.

A spec recompiled over the intact bundle it produced replaces it and says what changed (acrl diff's
headline); a bundle modified by hand, another spec's, or one with a manifest acrl cannot read is refused
with exit status 3, saying what differs, and nothing is written; an identical recompile leaves every file
(and its mtime) alone. Sweeps behave the same, point by point.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SPECS

BIN = Path(sys.executable).parent
SMOKE = SPECS / "gsm8k-qwen2.5-3b-smoke.toml"
EXP = "gsm8k-qwen2.5-3b-smoke"
EDIT = "\n[parallel]\ntensor = 4\n\n[train]\nlr = 2e-6\n"  # the README's edit: two keys, five differences


def acrl_compile(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN / "acrl-compile"), *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                          env=env)


def state(folder: Path) -> dict[str, tuple[bytes | None, int, int]]:
    """Every entry under ``folder``: its bytes (None for a directory), mode and mtime in nanoseconds."""
    out = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        out[str(path.relative_to(folder))] = (None if path.is_dir() else path.read_bytes(), st.st_mode, st.st_mtime_ns)
    return out


@pytest.fixture
def work(tmp_path: Path) -> Path:
    """A folder with the smoke spec as spec.toml, compiled once to bundles/<exp_id>."""
    shutil.copy(SMOKE, tmp_path / "spec.toml")
    proc = acrl_compile("spec.toml", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith(f"created bundles/{EXP}/"), proc.stderr
    return tmp_path


def test_an_edit_replaces_the_bundle_and_says_what_changed(work: Path) -> None:
    """README.md's edit loop, word for word: [train] lr and [parallel] tensor edited, the bundle replaced."""
    with (work / "spec.toml").open("a", encoding="utf-8") as f:
        f.write(EDIT)
    proc = acrl_compile("spec.toml", cwd=work)
    manifest = json.loads((work / "bundles" / EXP / "manifest.json").read_text())
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout == (
        f"replaced bundles/{EXP}/  bundle sha256:{manifest['bundle_hash']}\n"
        "  5 differences from the bundle it replaced. Spec: parallel.tensor 2 -> 4; train.lr 1e-06 -> 2e-06.\n"
        "  Placement: actor 8 ranks: TP 2 x CP 1 x PP 1 x DP 4 -> 8 ranks: TP 4 x CP 1 x PP 1 x DP 2. Slime\n"
        "  flags: --tensor-model-parallel-size 2 -> 4; --lr 1e-06 -> 2e-06.\n")
    assert "--tensor-model-parallel-size 4" in (work / "bundles" / EXP / "train.sh").read_text()
    assert sorted(p.name for p in (work / "bundles").iterdir()) == [EXP]  # no temporary sibling left
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    shown = proc.stdout.replace(manifest["bundle_hash"], "…")
    again = acrl_compile("spec.toml", cwd=work)
    assert again.stdout == f"unchanged bundles/{EXP}/  bundle sha256:{manifest['bundle_hash']}\n"
    again_shown = again.stdout.replace(manifest["bundle_hash"], "…")
    assert f"$ acrl-compile specs/{EXP}.toml\n{shown}$ acrl-compile specs/{EXP}.toml\n{again_shown}" in readme
    data = json.loads(acrl_compile("spec.toml", "--json", "--set", "train.lr=3e-6", cwd=work).stdout)
    assert (data["status"], data["changes"]) == (
        "replaced", "2 differences from the bundle it replaced. Spec: train.lr 2e-06 -> 3e-06. Slime flags: "
        "--lr 2e-06 -> 3e-06.")


def test_the_bundle_format_written_is_one_the_edit_loop_checks() -> None:
    from acrl.compiler._pipeline.compile import BUNDLE_FORMAT
    from acrl.compiler._pipeline.ownership import CHECKED_FORMATS

    assert BUNDLE_FORMAT in CHECKED_FORMATS


def test_an_identical_recompile_touches_nothing(work: Path) -> None:
    before = state(work)
    proc = acrl_compile("spec.toml", "--no-cache", cwd=work)
    assert proc.returncode == 0 and proc.stdout.startswith(f"unchanged bundles/{EXP}/")
    assert state(work) == before  # bytes, modes and mtimes


@pytest.mark.parametrize(("edit", "reason"), [
    (lambda b: (b / "train.sh").write_text("echo mine\n"), "was modified by hand since it was compiled (modified: "
                                                           "train.sh)"),
    (lambda b: (b / "notes.txt").write_text("mine\n"), "was modified by hand since it was compiled (added: notes.txt)"),
    (lambda b: (b / "model_args.sh").unlink(), "was modified by hand since it was compiled (removed: model_args.sh)"),
    (lambda b: (b / "manifest.json").write_text((b / "manifest.json").read_text().replace(
        '"acrl_version": "', '"acrl_version": "9', 1)),
     "was modified by hand since it was compiled (manifest.json: its bundle_hash does not match its contents)"),
    (lambda b: (b / "manifest.json").write_text("[]"), "has a manifest.json that is not one acrl writes"),
    (lambda b: (b / "manifest.json").write_text((b / "manifest.json").read_text().replace(
        '"bundle_format": 2', '"bundle_format": 1', 1)), "has a manifest of bundle format 1, which this acrl cannot "
                                                         "check for edits"),
])
def test_a_bundle_modified_by_hand_is_refused_with_exit_3(work: Path, edit: object, reason: str) -> None:
    bundle = work / "bundles" / EXP
    edit(bundle)  # type: ignore[operator]
    with (work / "spec.toml").open("a", encoding="utf-8") as f:
        f.write(EDIT)
    before = state(work)
    proc = acrl_compile("spec.toml", cwd=work)
    assert (proc.returncode, proc.stdout) == (3, "")
    assert proc.stderr.startswith(f"bundles/{EXP}: {reason}"), proc.stderr
    assert proc.stderr.endswith("; not overwritten.\n  fix: pass --force to replace it, or choose another directory "
                                "with -o.\n")
    assert state(work) == before  # nothing written, nothing left beside it
    forced = acrl_compile("spec.toml", "--force", cwd=work)
    assert forced.returncode == 0 and forced.stdout.startswith(f"replaced bundles/{EXP}/")
    assert subprocess.run([str(BIN / "acrl"), "verify", f"bundles/{EXP}"], cwd=work, capture_output=True).returncode \
        == 0


def test_another_specs_bundle_is_refused_and_named(work: Path) -> None:
    other = (work / "spec.toml").read_text().replace(f'id = "{EXP}"', 'id = "other-exp"')
    (work / "other.toml").write_text(other)
    proc = acrl_compile("other.toml", "-o", f"bundles/{EXP}", cwd=work)
    assert proc.returncode == 3 and proc.stderr.startswith(
        f'bundles/{EXP}: holds the bundle of another experiment, "{EXP}" (compiled from spec.toml); this spec\'s '
        'experiment is "other-exp"; not overwritten.')
    shutil.copy(work / "spec.toml", work / "copy.toml")  # the same experiment, another spec file
    proc = acrl_compile("copy.toml", "--set", "train.lr=5e-6", cwd=work)
    assert proc.returncode == 3 and proc.stderr.startswith(
        f"bundles/{EXP}: holds the bundle compiled from another spec file, spec.toml; this spec is copy.toml")
    assert acrl_compile("copy.toml", "--set", "train.lr=5e-6", "--force", cwd=work).returncode == 0


def test_a_folder_that_is_not_a_bundle_is_kept_even_with_force(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "thesis.tex").write_text("years of work")
    proc = acrl_compile(str(SMOKE), "-o", "out", "--force", cwd=tmp_path)
    assert proc.returncode == 3 and "is not an acrl bundle (no manifest.json), so even --force keeps it" in proc.stderr
    assert "--force" not in proc.stderr.split("fix:", 1)[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and (tmp_path / "out" / "thesis.tex").exists()


def test_a_sweep_replaces_its_intact_points_and_refuses_a_hand_edit(tmp_path: Path) -> None:
    spec = tmp_path / "sweep.toml"
    spec.write_text(SMOKE.read_text() + '\n[sweep]\ngrid = { "rollout.temperature" = [0.7, 1.0] }\n')
    assert acrl_compile("sweep.toml", "-o", "out", cwd=tmp_path).returncode == 0
    spec.write_text(spec.read_text() + "\n[train]\nlr = 2e-6\n")
    proc = acrl_compile("sweep.toml", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 0
    paragraph = "  2 differences from the bundle it replaced. Spec: train.lr 1e-06 -> 2e-06. Slime flags: --lr\n" \
                "  1e-06 -> 2e-06.\n"
    for point in ("temperature-0.7", "temperature-1.0"):
        assert re.search(rf"^replaced out/{point}/  bundle sha256:[0-9a-f]{{64}}\n{re.escape(paragraph)}",
                         proc.stdout, re.M), proc.stdout
    (tmp_path / "out" / "temperature-1.0" / "spec.toml").write_text("# mine\n")
    spec.write_text(spec.read_text().replace("lr = 2e-6", "lr = 3e-6"))
    before = state(tmp_path / "out")
    proc = acrl_compile("sweep.toml", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 3 and proc.stderr.startswith(
        "out: out/temperature-1.0 was modified by hand since it was compiled (modified: spec.toml); not overwritten.")
    assert state(tmp_path / "out") == before  # not even the intact point was written
    index = tmp_path / "out" / "sweep.json"  # an index edited by hand is refused too
    assert acrl_compile("sweep.toml", "-o", "out", "--force", cwd=tmp_path).returncode == 0
    index.write_text(index.read_text().replace('"bundle_hash": "', '"bundle_hash": "0', 1))
    spec.write_text(spec.read_text().replace("lr = 3e-6", "lr = 4e-6"))
    proc = acrl_compile("sweep.toml", "-o", "out", cwd=tmp_path)
    assert proc.returncode == 3 and "out/sweep.json was modified by hand (it lists temperature-0.7 with another " \
        "bundle hash than its bundle's)" in proc.stderr


def test_print_writes_nothing_and_prints_the_file(work: Path) -> None:
    bundle = work / "bundles" / EXP
    shutil.rmtree(work / "bundles")
    for name in ("train.sh", "spec.toml", "manifest.json", "model_args.sh", "custom_config.yaml"):
        proc = subprocess.run([str(BIN / "acrl"), "compile", "spec.toml", "--print", name], cwd=work,
                              capture_output=True, timeout=120)
        assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
        compiled = acrl_compile("spec.toml", "-o", "again", cwd=work)
        assert compiled.returncode == 0
        assert proc.stdout == (work / "again" / name).read_bytes()
        shutil.rmtree(work / "again")
    assert sorted(p.name for p in work.iterdir()) == ["spec.toml"] and not bundle.exists()
    proc = acrl_compile("spec.toml", "--print", "rayjob.yaml", cwd=work)
    assert proc.returncode == 2 and proc.stderr == (
        "--print rayjob.yaml: the bundle has no such file\n"
        "  fix: one of: custom_config.yaml, manifest.json, model_args.sh, spec.toml, train.sh\n")
    assert acrl_compile("spec.toml", "--print", "train.sh", "-o", "x", cwd=work).returncode == 2
    assert sorted(p.name for p in work.iterdir()) == ["spec.toml"]


def test_dash_o_lists_the_files_instead_of_making_a_folder_named_dash(work: Path) -> None:
    shutil.rmtree(work / "bundles")
    proc = acrl_compile("spec.toml", "-o", "-", cwd=work)
    assert proc.returncode == 0 and sorted(p.name for p in work.iterdir()) == ["spec.toml"]
    assert acrl_compile("spec.toml", "-o", "b", cwd=work).returncode == 0
    manifest = json.loads((work / "b" / "manifest.json").read_text())
    rows = [line.split() for line in proc.stdout.splitlines()]
    assert rows[-1] == ["(bundle)", f"sha256:{manifest['bundle_hash']}"]
    files = {name: (int(size), digest) for name, size, digest in rows[:-1]}
    assert files == {p.name: (p.stat().st_size, "sha256:" + __import__("hashlib").sha256(p.read_bytes()).hexdigest())
                     for p in (work / "b").iterdir()}
    listing = json.loads(acrl_compile("spec.toml", "-o", "-", "--json", cwd=work).stdout)
    assert listing["bundle_hash"] == manifest["bundle_hash"]
    assert {f["name"]: f["sha256"] for f in listing["files"]} == {n: d[7:] for n, (_, d) in files.items()}
    sweep = work / "sweep.toml"
    sweep.write_text((work / "spec.toml").read_text() + '\n[sweep]\ngrid = { "rollout.temperature" = [0.7, 1.0] }\n')
    names = [line.split()[0] for line in acrl_compile("sweep.toml", "-o", "-", cwd=work).stdout.splitlines()]
    assert names[0] == "sweep.json" and "temperature-1.0/train.sh" in names and "-" not in os.listdir(work)


def test_quiet_and_verbose(work: Path) -> None:
    quiet = acrl_compile("spec.toml", "-q", "--set", "agentcore.max_concurrent=200", cwd=work)  # a warning (T002)
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "", "")
    loud = acrl_compile("spec.toml", "--set", "agentcore.max_concurrent=200", cwd=work)
    assert "(ACRL-T002)" in loud.stderr and "note:" not in loud.stderr and loud.stdout.startswith("unchanged ")
    verbose = acrl_compile("spec.toml", "-v", "--no-cache", cwd=work)
    notes = [line for line in verbose.stderr.splitlines() if line.startswith("note: ")]
    assert notes[0].startswith("note: flags checked against acrl's facts of slime fa3c990")
    assert re.fullmatch(r"note: compiled in \d+ ms", notes[-1])
    assert json.loads(acrl_compile("spec.toml", "--json", cwd=work).stdout)["notes"][0].startswith("flags checked")
    bad = acrl_compile("spec.toml", "-q", "--set", "rollout.batch_size=0", cwd=work)
    assert bad.returncode == 1 and "error: [rollout] batch_size" in bad.stderr  # errors still print
    assert acrl_compile("spec.toml", "-q", "-v", cwd=work).returncode == 2


def _on_a_terminal(args: list[str], cwd: Path, **env: str) -> str:
    """What ``acrl-compile ARGS`` writes to stderr when stderr is a terminal (a pseudo-terminal)."""
    import pty

    master, slave = pty.openpty()
    environment = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "TERM")}
    proc = subprocess.run([str(BIN / "acrl-compile"), *args], cwd=cwd, stdout=subprocess.DEVNULL, stderr=slave,
                          env={**environment, "TERM": "xterm", **env}, timeout=120)
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the terminal's other end is closed and drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    assert proc.returncode == 1
    return b"".join(chunks).decode()


def test_colour_on_a_terminal_only_and_never_with_no_color(work: Path) -> None:
    (work / "bad.toml").write_text((work / "spec.toml").read_text() + "\n[rollout]\nbatch_sise = 3\n")
    args = ["bad.toml"]
    coloured = _on_a_terminal(args, work)
    assert "\033[1;31merror\033[0m: [rollout] batch_sise:" in coloured  # the severity, red
    assert "       | \033[1;31m^\033[0m" in coloured and "\033[32mfix:\033[0m" in coloured  # the caret and the fix
    assert "\033[" not in _on_a_terminal(args, work, NO_COLOR="1")
    assert "\033[" not in _on_a_terminal([*args, "--color=never"], work)
    assert "\033[1;31merror" in _on_a_terminal([*args, "--color=always"], work, NO_COLOR="1")  # asked for: wins
    piped = acrl_compile(*args, cwd=work)  # not a terminal: plain, whatever TERM says
    assert piped.returncode == 1 and "\033[" not in piped.stderr and "error: [rollout] batch_sise" in piped.stderr
    forced = acrl_compile(*args, "--color=always", cwd=work)
    assert "\033[1;31merror\033[0m" in forced.stderr
    rule = acrl_compile("spec.toml", "--set", "agentcore.max_concurrent=200", "--color=always", cwd=work)
    assert "\033[1;33mwarning\033[0m" in rule.stderr and "(\033[36mACRL-T002\033[0m)" in rule.stderr


def test_the_summary_names_files_added_values_added_and_escapes_control_characters(tmp_path: Path) -> None:
    from acrl.compiler import compile_spec
    from acrl.compiler._review.summary import summary

    one = compile_spec(SMOKE).files
    two = compile_spec(SMOKE, overrides=["cluster.num_nodes=2"]).files
    text = summary(dict(one), dict(two))
    assert text.startswith("18 differences from the bundle it replaced. Spec: cluster.num_nodes = 2 (added). ")
    assert "Slime flags: --actor-num-nodes 1 -> 2." in text and text.endswith(" Files: +join.sh.")
    assert summary(dict(two), dict(one)).endswith(" Files: -join.sh.")
    hostile = dict(one)
    hostile["spec.toml"] = one["spec.toml"] + b'\n[zz]\nkey = "\\u001b[31mred"\n'
    text = summary(dict(one), hostile)
    assert "\033" not in text and "zz.key = \\x1b[31mred (added)" in text
    assert summary(dict(one), dict(one)) == "no differences: only the files' modes were restored"
    commented = {**one, "train.sh": one["train.sh"] + b"# a comment\n"}
    assert summary(dict(one), commented) == "no semantic differences (byte differences in train.sh)"
