"""`acrl layout SPEC|BUNDLE`: the per-node picture of slime's placement, as text, markdown and SVG, on the layouts
issue 13 names (colocated 1 x 8, disaggregated 4 + 4 on one node, 2 nodes of 8, 4-GPU nodes, an engine over two
nodes), on an engine given another node's address, on hostile values, and a bundle against its spec."""

from __future__ import annotations

import collections
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from acrl.compiler._cli.main import acrl_main
from acrl.compiler._review.layout_format import format_text
from acrl.compiler._review.layout_read import layout_path
from conftest import EXAMPLE_SPECS, REPO, SpecWriter

GOLDEN = REPO / "tests" / "golden"
SVG = "{http://www.w3.org/2000/svg}"
LAYOUTS: dict[str, dict[str, Any]] = {
    "colocated-1x8": {},
    "disaggregated-4+4": {"cluster": {"colocate": False, "rollout_num_gpus": 4}},
    "two-nodes-8+8": {"cluster": {"num_nodes": 2, "colocate": False, "rollout_num_gpus": 8}},
    "four-gpu-nodes": {"cluster": {"num_nodes": 2, "gpus_per_node": 4, "colocate": False, "rollout_num_gpus": 4}},
    "multi-node-engine": {"cluster": {"num_nodes": 3, "colocate": False, "rollout_num_gpus": 16},
                          "rollout": {"gpus_per_engine": 16}},
}
# (nodes, {role: GPU cells}) of each layout
EXPECTED = {
    "colocated-1x8": (1, {"actor+engine": 8}),
    "disaggregated-4+4": (1, {"actor": 4, "engine": 4}),
    "two-nodes-8+8": (2, {"actor": 8, "engine": 8}),
    "four-gpu-nodes": (2, {"actor": 4, "engine": 4}),
    "multi-node-engine": (3, {"actor": 8, "engine": 16}),
}
# an engine slime gives another node's address: the rollout starts mid-node and spans two nodes (ACRL-C003)
FOREIGN = {"cluster": {"num_nodes": 2, "colocate": False, "rollout_num_gpus": 8, "actor_num_nodes": 1,
                       "actor_num_gpus_per_node": 4}}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = acrl_main(["layout", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def svg_cells(text: str) -> tuple[ET.Element, list[ET.Element], collections.Counter[str]]:
    root = ET.fromstring(text)
    nodes = [g for g in root.iter(f"{SVG}g") if g.get("class") == "node"]
    gpus = [g for g in root.iter(f"{SVG}g") if g.get("class") == "gpu"]
    assert all(len([r for r in g if r.tag == f"{SVG}rect"]) == 1 for g in gpus)  # one rect per GPU
    return root, nodes, collections.Counter(str(g.get("data-role")) for g in gpus)


def grid(out: str, node: int) -> dict[str, list[str]]:
    """The rows of one node's grid in the text format: label -> a value per GPU."""
    lines = out.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"node {node}") and
                 lines[i + 1].startswith("  GPU"))
    rows = {}
    for line in lines[start + 1:]:
        if not line.startswith("  "):
            break
        label = line[2:14].strip()
        rows[label] = line[14:].split()
    return rows


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_svg_has_a_cell_per_gpu_filled_by_role(name: str, write_spec: SpecWriter,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(write_spec(LAYOUTS[name])), "--format", "svg")
    assert (code, err) == (0, "")
    root, nodes, roles = svg_cells(out)
    count, wanted = EXPECTED[name]
    assert len(nodes) == count
    assert {r: n for r, n in roles.items() if r in ("actor", "engine", "actor+engine")} == wanted
    fills = {g.get("data-role"): next(r for r in g if r.tag == f"{SVG}rect").get("fill")
             for g in root.iter(f"{SVG}g") if g.get("class") == "gpu"}
    assert len(set(fills.values())) == len(fills)  # a fill per role
    legend = [g for g in root.iter(f"{SVG}g") if g.get("class") == "legend"]
    assert len(legend) == 1 and len([t for t in legend[0] if t.tag == f"{SVG}text"]) == len(fills)


def test_text_colocated_one_node(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(write_spec()))
    assert (code, err) == (0, "")
    assert "\033" not in out  # not a terminal: no colour
    assert "head: node 0, a local Ray head: ray start --head --num-gpus 8" in out
    assert "slime's placement group: 8 GPUs sorted by node IP and GPU id, actor slots 0-7, rollout slots 0-7 " \
           "(rollout offset 0)" in out
    assert "--num-gpus-per-node: not passed (8, slime's default, is the node size)" in out
    rows = grid(out, 0)
    assert rows["GPU"] == [str(g) for g in range(8)]
    assert rows["actor"] == [str(g) for g in range(8)]
    assert rows["TP/PP/CP/DP"][:3] == ["0/0/0/0", "1/0/0/0", "0/0/0/1"]  # TP 2: rank 2 is DP 1
    assert rows["engine:GPU"] == ["0:0", "0:1", "1:0", "1:1", "2:0", "2:1", "3:0", "3:1"]


def test_text_disaggregated_on_one_node(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(write_spec(LAYOUTS["disaggregated-4+4"])))
    assert code == 0
    rows = grid(out, 0)
    assert rows["actor"] == ["0", "1", "2", "3", "-", "-", "-", "-"]
    assert rows["engine:GPU"] == ["-", "-", "-", "-", "0:0", "0:1", "1:0", "1:1"]
    assert "rollout slots 4-7 (rollout offset 4)" in out
    assert "default: [cluster] actor_num_nodes = 1, actor_num_gpus_per_node = 4: the GPUs the rollout leaves" in out


def test_text_two_nodes_and_four_gpu_nodes(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(write_spec(LAYOUTS["two-nodes-8+8"])))
    assert code == 0
    assert grid(out, 0)["actor"] == [str(g) for g in range(8)]
    assert grid(out, 1)["engine:GPU"] == ["0:0", "0:1", "1:0", "1:1", "2:0", "2:1", "3:0", "3:1"]
    assert "node 1: joins the head with ray start --num-gpus 8" in out
    code, out, _ = run(capsys, str(write_spec(LAYOUTS["four-gpu-nodes"])))
    assert code == 0
    assert "--num-gpus-per-node 4: passed (nodes of 4 GPUs)" in out
    assert grid(out, 1)["GPU"] == ["0", "1", "2", "3"]
    assert "head: node 0, a local Ray head: ray start --head --num-gpus 4" in out


def test_a_multi_node_engine(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(write_spec(LAYOUTS["multi-node-engine"])))
    assert code == 0
    assert grid(out, 1)["engine:GPU"] == [f"0:{k}" for k in range(8)]
    assert grid(out, 2)["engine:GPU"] == [f"0:{k}" for k in range(8, 16)]
    assert "rollout: 1 engine of 16 GPUs (SGLang tp 16, pp 1, dp 1)" in out
    assert "address:" not in out  # one engine over whole nodes has its first node's address, as it should


def test_markdown_has_a_table_per_node(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(write_spec(LAYOUTS["two-nodes-8+8"])), "--format", "markdown")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith("### `acrl layout` `")
    heads = [i for i, line in enumerate(lines) if line.startswith("#### ")]
    assert [lines[i] for i in heads] == ["#### node 0 (head, local): ray start --head --num-gpus 8",
                                         "#### node 1: ray start --num-gpus 8"]
    for i in heads:
        assert lines[i + 2] == "| GPU | actor rank | TP | PP | CP | DP | rollout engine | engine's GPU | note |"
        assert len([line for line in lines[i + 4:i + 12] if line.startswith("| ")]) == 8
    assert lines[heads[0] + 4] == "| 0 | 0 | 0 | 0 | 0 | 0 |  |  |  |"
    assert lines[heads[1] + 5] == "| 1 |  |  |  |  |  | 0 | 1 of 2 |  |"


def test_an_engine_with_another_nodes_address_is_drawn_and_refused(write_spec: SpecWriter,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(FOREIGN)
    code, out, err = run(capsys, str(spec))
    assert code == 1 and "(ACRL-C003)" in err and "nothing was written" in err
    assert grid(out, 1)["engine:GPU"][:4] == ["2:0!", "2:1!", "3:0!", "3:1!"]
    assert "address: rollout engine 2 runs on node 1 but slime gives it node 0's address" in out
    assert grid(out, 1)["actor"][4:] == ["idle"] * 4
    code, out, err = run(capsys, str(spec), "--format", "svg")
    root, _, roles = svg_cells(out)
    assert code == 1 and roles["engine"] == 8 and roles["idle"] == 4
    marked = [g for g in root.iter(f"{SVG}g") if g.get("class") == "gpu"
              and next(r for r in g if r.tag == f"{SVG}rect").get("stroke") == "#c0392b"]
    assert len(marked) == 4


def test_an_invalid_spec_with_output_writes_nothing(write_spec: SpecWriter, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "layout.svg"
    code, out, err = run(capsys, str(write_spec(FOREIGN)), "--format", "svg", "-o", str(target))
    assert (code, out) == (1, "") and "(ACRL-C003)" in err and not target.exists()
    code, out, err = run(capsys, str(write_spec({"cluster": {"colokate": True}})))  # not even a spec: no picture
    assert (code, out) == (1, "") and "unknown key 'colokate'" in err


def test_output_file_is_written_once_and_replaced_with_force(write_spec: SpecWriter, tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "layout.md"
    spec = write_spec()
    assert run(capsys, str(spec), "--format", "markdown", "-o", str(target)) == (0, "", "")
    assert target.read_text().startswith("### `acrl layout`")
    assert run(capsys, str(spec), "--format", "markdown", "-o", str(target))[0] == 0  # the same text: kept
    code, _, err = run(capsys, str(spec), "-o", str(target))
    assert code == 3 and "exists; not overwritten" in err and "--force" in err
    assert run(capsys, str(spec), "-o", str(target), "--force")[0] == 0
    assert target.read_text().startswith("acrl layout ")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left
    code, _, err = run(capsys, str(spec), "-o", str(tmp_path))
    assert code == 2 and "is a directory" in err


HOSTILE_ADDRESS = 'http://<script>alert(1)</script>&amp;"\x1b[31m\x01:8265'


def test_hostile_values_are_escaped_in_every_format(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    # markup in an address that compiles; control characters, refused as no name has them (compiler/_pipeline/
    # values.py), drawn all the same
    for address, refused in ((HOSTILE_ADDRESS.split("\x1b")[0], False), (HOSTILE_ADDRESS, True)):
        spec = write_spec({"cluster": {"address": address}})
        code, out, err = run(capsys, str(spec), "--format", "svg")
        assert (code, "[cluster] address: holds the control character U+001B" in err) == (int(refused), refused)
        root, _, roles = svg_cells(out)  # well-formed XML
        assert roles["actor+engine"] == 8
        assert not [e for e in root.iter() if "script" in e.tag]
        texts = " ".join(e.text or "" for e in root.iter(f"{SVG}text"))
        assert "<script>alert(1)</script>&amp;\"" in texts  # shown as text, not markup
        code, out, _ = run(capsys, str(spec), "--format", "markdown")
        assert code == int(refused) and "<script>" not in out and "\x1b" not in out and "\\<script\\>" in out
    code, out, _ = run(capsys, str(spec))
    assert code == 1 and "\x1b" not in out and "\x01" not in out and "\\x1b[31m\\x01" in out
    # a hostile experiment id is refused (ACRL-T005; one with control characters, by the name check before it), and
    # still drawn as text, never as markup
    spec = write_spec({"experiment": {"id": "<script>&x"}})
    code, out, err = run(capsys, str(spec), "--format", "svg")
    root, _, _ = svg_cells(out)
    assert code == 1 and "ACRL-T005" in err and not [e for e in root.iter() if "script" in e.tag]
    assert root.find(f"{SVG}title") is not None and "experiment <script>&x" in str(root.find(f"{SVG}title").text)
    # and its control characters reach no format raw (the markdown's heading wrote them into a code span as they were)
    spec = write_spec({"experiment": {"id": "x\x1b[31m\x01y"}})
    for form in ("markdown", "text"):
        code, out, err = run(capsys, str(spec), "--format", form)
        assert code == 1 and "[experiment] id: holds the control character U+001B" in err
        assert "\x1b" not in out and "\x01" not in out and "x\\x1b[31m" in out


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=[s.stem for s in EXAMPLE_SPECS])
def test_a_bundle_and_its_spec_give_the_same_picture(spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = GOLDEN / spec.stem
    a, b = layout_path(spec)[0], layout_path(bundle)[0]
    assert a is not None and b is not None
    assert a.nodes == b.nodes and a.summary() == b.summary()
    for fmt in ("text", "markdown", "svg"):
        outs = [run(capsys, str(path), "--format", fmt) for path in (spec, bundle)]
        assert [o[0] for o in outs] == [0, 0]
        texts = [o[1].replace(str(path), "SUBJECT") for o, path in zip(outs, (spec, bundle), strict=True)]
        assert texts[0] == texts[1], fmt


def test_a_bundle_with_set_and_a_missing_target(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bundle = GOLDEN / "gsm8k-qwen2.5-3b-smoke"
    code, out, err = run(capsys, str(bundle), "--set", "cluster.num_nodes=2")
    assert (code, out) == (2, "") and "--set applies to a spec" in err
    (tmp_path / "empty").mkdir()
    code, out, err = run(capsys, str(tmp_path / "empty"))
    assert (code, out) == (2, "") and "is not an acrl bundle" in err
    code, out, err = run(capsys, str(tmp_path / "nope.toml"))
    assert (code, out) == (2, "") and "no such spec file or bundle directory" in err and "Traceback" not in err


@pytest.mark.parametrize("argv", [[], ["--format", "png", "spec.toml"], ["a.toml", "b.toml"], ["--nope", "a.toml"]])
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        acrl_main(["layout", *argv])
    assert exit_.value.code == 2 and "usage: acrl" in capsys.readouterr().err


def test_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        acrl_main(["layout", "--help"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and "--format {text,markdown,svg}" in out and "--force" in out


def test_set_overrides_and_colour(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec()
    code, out, _ = run(capsys, str(spec), "--set", "cluster.colocate=false", "--set", "cluster.rollout_num_gpus=4")
    assert code == 0 and grid(out, 0)["actor"][4:] == ["-"] * 4
    picture, error = layout_path(spec)
    assert picture is not None and error is None
    coloured = format_text(picture, colour=True)
    assert "\033[32m" in coloured and "\033[36m" in coloured
    assert "\033" not in format_text(picture)


def test_the_svg_in_the_docs_is_what_acrl_layout_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/cluster.md shows docs/layout-example.svg and the command that regenerates it."""
    from acrl.compiler._review.layout_svg import format_svg

    monkeypatch.chdir(REPO)
    command = "acrl layout specs/qwen3-8b-async-disaggregated.toml --format svg -o\ndocs/layout-example.svg --force"
    assert command in (REPO / "docs" / "cluster.md").read_text(encoding="utf-8")
    picture, _ = layout_path(Path("specs/qwen3-8b-async-disaggregated.toml"))
    assert picture is not None
    assert (REPO / "docs" / "layout-example.svg").read_text(encoding="utf-8") == format_svg(picture), \
        f"docs/layout-example.svg is stale: run `{' '.join(command.split())}` from the repository root"


@pytest.mark.parametrize(("flags", "rows", "line"), [
    ({"--debug-train-only": True}, ["GPU", "actor", "TP/PP/CP/DP"], "--debug-train-only: the actor alone"),
    ({"--debug-rollout-only": True}, ["GPU", "engine:GPU"], "--debug-rollout-only: the rollout alone"),
])
def test_debug_modes_draw_one_role(flags: dict[str, object], rows: list[str], line: str, write_spec: SpecWriter,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(write_spec({"extra": {"flags": flags}})))
    assert code == 0 and line in out
    assert list(grid(out, 0)) == rows


def test_an_external_rollout_has_no_local_engines(write_spec: SpecWriter, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec({"cluster": {"colocate": False, "rollout_num_gpus": 8},
                       "rollout": {"external_engine_addrs": ["10.0.0.1:3000"]}})
    code, out, _ = run(capsys, str(spec), "--format", "svg")
    _, nodes, roles = svg_cells(out)
    assert code == 0 and len(nodes) == 1 and roles == {"actor": 8}
    assert "rollout: external engines" in run(capsys, str(spec))[1]


SMOKE_SPEC = "specs/gsm8k-qwen2.5-3b-smoke.toml"
DOC_PICTURES = [
    [SMOKE_SPEC],
    [SMOKE_SPEC, "--set", "cluster.colocate=false", "--set", "cluster.rollout_num_gpus=4", "--format", "markdown"],
    [SMOKE_SPEC, "--set", "cluster.num_nodes=2", "--set", "cluster.colocate=false", "--set",
     "cluster.rollout_num_gpus=12", "--set", "cluster.actor_num_gpus_per_node=4"],
    [SMOKE_SPEC, "--set", "cluster.num_nodes=3", "--set", "cluster.gpus_per_node=4", "--set", "cluster.colocate=false",
     "--set", "cluster.rollout_num_gpus=8", "--set", "rollout.gpus_per_engine=8"],
]


@pytest.mark.parametrize("argv", DOC_PICTURES, ids=["colocated", "markdown", "foreign-address", "multi-node-engine"])
def test_the_pictures_pasted_in_the_docs_are_current(argv: list[str], monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(REPO)
    _, out, _ = run(capsys, *argv)
    assert out in (REPO / "docs" / "cluster.md").read_text(encoding="utf-8"), \
        f"docs/cluster.md: paste the output of `acrl layout {' '.join(argv)}` again"


def test_a_layout_reads_each_nodes_ray_gpus_once(monkeypatch: pytest.MonkeyPatch, write_spec: SpecWriter) -> None:
    """Placement.node_gpus is computed per call (one entry per node): read once per node, a 4096-node picture
    took a minute (quadratic in the nodes)."""
    from acrl.compiler._pipeline.placement import Placement

    calls = []
    original = Placement.node_gpus.fget
    assert original is not None

    def counted(self: Placement) -> tuple[int, ...]:
        calls.append(1)
        return original(self)

    path = write_spec({"cluster": {"num_nodes": 64, "colocate": False, "rollout_num_gpus": 8}})
    monkeypatch.setattr(Placement, "node_gpus", property(counted))
    layout, _ = layout_path(path)
    assert layout is not None and len(layout.nodes) == 64
    assert len(calls) <= 4, len(calls)  # the compile's (derived, train.sh) and the picture's


def test_the_text_picture_reads_every_cell_once_not_once_per_node(monkeypatch: pytest.MonkeyPatch,
                                                                  write_spec: SpecWriter) -> None:
    """Layout.cells is every node's cells: read once per node, a 2048-node text picture took 50 s."""
    from acrl.compiler._review.layout import Layout

    layout, _ = layout_path(write_spec({"cluster": {"num_nodes": 64, "colocate": False, "rollout_num_gpus": 8}}))
    assert layout is not None
    calls = []
    original = Layout.cells.fget
    assert original is not None

    def counted(self: Layout) -> Any:
        calls.append(1)
        return original(self)

    monkeypatch.setattr(Layout, "cells", property(counted))
    assert "\nnode 63" in format_text(layout)
    assert len(calls) <= 2, len(calls)


def test_a_joining_node_is_said_to_advertise_what_join_sh_advertises(write_spec: SpecWriter,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """join.sh starts a node with every GPU it has (checked to be gpus_per_node), not with its share of slime's
    group: the picture said `ray start --num-gpus 4` for a node join.sh starts with 8."""
    spec = write_spec({"cluster": {"num_nodes": 2, "colocate": False, "rollout_num_gpus": 4}})
    code, out, _ = run(capsys, str(spec))
    assert code == 0
    assert "node 1: joins the head with ray start --num-gpus 8 (join.sh); slime's group takes 4 of them" in out
    assert "\nnode 1: ray start --num-gpus 8 (join.sh); slime's group takes 4 of them\n" in out
    assert acrl_main(["compile", str(spec), "-o", str(spec.parent / "b")]) == 0
    assert 'ray start --address="$HEAD" --num-gpus "$GPUS"' in (spec.parent / "b" / "join.sh").read_text()
    assert "readonly SPEC_GPUS=8\n" in (spec.parent / "b" / "join.sh").read_text()
