"""Bundles compiled before issue 13: their spec.toml's [cluster] num_nodes x gpus_per_node were the actor's
nodes and GPUs per node, and their manifest's derived section has no placement fields. acrl verify, layout,
explain and diff read them in those terms: such a bundle is intact, and its placement is the one it ran."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from acrl.compiler._cli.main import acrl_main
from conftest import SpecWriter, forge_manifest

PLACEMENT = ("nodes", "gpus_per_node", "placement_gpus", "rollout_offset", "node_gpus")


def _old_bundle(tmp_path: Path, write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> Path:
    """What acrl before issue 13 wrote for an actor of 2 nodes x 8 GPUs and 8 rollout GPUs on an existing
    cluster: spec.toml without head_port and dashboard_host, num_nodes = 2 (--actor-num-nodes 2), and a
    derived section of actor_gpus 16 without the placement fields."""
    spec = write_spec({"cluster": {"address": "http://head:8265", "num_nodes": 3, "colocate": False,
                                   "rollout_num_gpus": 8, "actor_num_nodes": 2}})
    out = tmp_path / "old"
    assert acrl_main(["compile", str(spec), "-o", str(out)]) == 0
    text = (out / "spec.toml").read_text()
    text = re.sub(r"(?m)^(head_port|dashboard_host|actor_num_nodes|actor_num_gpus_per_node) = .*\n", "", text)
    text = re.sub(r"(?m)^num_nodes = 3$", "num_nodes = 2", text)
    (out / "spec.toml").write_text(text)
    derived = json.loads((out / "manifest.json").read_text())["derived"]
    assert derived["actor_gpus"] == 16
    forge_manifest(out, derived={k: v for k, v in derived.items() if k not in PLACEMENT})
    capsys.readouterr()
    return out


def test_an_old_bundle_is_intact(tmp_path: Path, write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = _old_bundle(tmp_path, write_spec, capsys)
    assert acrl_main(["verify", str(bundle)]) == 0, capsys.readouterr()
    assert "intact" in capsys.readouterr().out


def test_an_old_bundle_is_drawn_as_it_ran(tmp_path: Path, write_spec: SpecWriter,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    bundle = _old_bundle(tmp_path, write_spec, capsys)
    assert acrl_main(["layout", str(bundle)]) == 0
    out = capsys.readouterr().out
    assert "3 nodes x 8 GPUs" in out and "placement group: 24 GPUs" in out and "actor: 16 ranks" in out
    assert "does not match its manifest" not in out and "does not fit" not in out


def test_an_old_bundle_diffs_with_its_recompile_by_its_files_only(tmp_path: Path, write_spec: SpecWriter,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    bundle = _old_bundle(tmp_path, write_spec, capsys)
    acrl_main(["diff", str(bundle), str(bundle)])
    out = capsys.readouterr().out
    assert "changed after it was compiled" not in out


def test_a_bundle_with_placement_fields_is_read_in_todays_terms(tmp_path: Path, write_spec: SpecWriter,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """Between issue 13's first commit and head_port, spec.toml had no head_port but num_nodes already meant the
    machines: its manifest has the placement fields, and that (not spec.toml alone) says which terms it is in."""
    spec = write_spec({"cluster": {"num_nodes": 2}})
    out = tmp_path / "b"
    assert acrl_main(["compile", str(spec), "-o", str(out)]) == 0
    text = re.sub(r"(?m)^(head_port|dashboard_host) = .*\n", "", (out / "spec.toml").read_text())
    (out / "spec.toml").write_text(text)
    forge_manifest(out)
    capsys.readouterr()
    assert acrl_main(["verify", str(out)]) == 0, capsys.readouterr()
    capsys.readouterr()
    assert acrl_main(["layout", str(out)]) == 0
    layout = capsys.readouterr().out
    assert "2 nodes x 8 GPUs" in layout and "actor: 16 ranks" in layout
