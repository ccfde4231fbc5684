"""`acrl init`: the spec it writes compiles for every catalog model at a few GPU counts, or it refuses with the
compiler's reason; its parallel sizes are the smallest tensor parallel size that passes; answers come from flags,
from questions on a real pseudo-terminal, and are a usage error naming the flags when stdin is not a terminal;
nothing is overwritten without --force."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from pty_term import Terminal

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._cli.init_fit import InitRefused, answer_problems, fit
from acrl.compiler._cli.init_spec import Answers, Layout, render
from acrl.compiler._cli.main import acrl_main
from acrl.compiler._pipeline.model_args.catalog import CATALOG

ACRL = str(Path(sys.executable).parent / "acrl")
ARN = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/math_agent-a1B2c3D4e5"
AGENT = ["--runtime-arn", ARN, "--s3-bucket", "my-rollouts"]


def init(*args: str, cwd: Path, stdin: int | None = subprocess.DEVNULL) -> subprocess.CompletedProcess[str]:
    """The real console script, stdin not a terminal unless given."""
    env = {**os.environ, "XDG_CACHE_HOME": str(cwd / ".cache")}
    return subprocess.run([ACRL, "init", *args], capture_output=True, text=True, stdin=stdin, cwd=cwd, env=env,
                          timeout=120)


# --- every catalog model, a few GPU counts ------------------------------------------------------------------------

GPU_COUNTS = [(1, 8), (4, 8), (1, 1)]  # (nodes, GPUs per node)


@pytest.mark.slow
@pytest.mark.parametrize("integration", ["agentcore", "slime"])
def test_every_catalog_model_compiles_or_is_refused_with_the_reason(integration: str, tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    fitted = refused = 0
    for name in CATALOG:
        for nodes, per_node in GPU_COUNTS:
            out = tmp_path / f"{name}-{nodes}x{per_node}.toml"
            extra = AGENT if integration == "agentcore" else []
            code = acrl_main(["init", "--model", name, "--nodes", str(nodes), "--gpus-per-node", str(per_node),
                              "--data", "/data/train.jsonl", "--integration", integration, *extra, "-o", str(out)])
            printed = capsys.readouterr()
            if code == 0:
                fitted += 1
                bundle = compile_spec(out)  # raises on any error
                assert not [w for w in bundle.warnings if w.rule.startswith(("ACRL-M", "ACRL-P"))], name
                spec = tomllib.loads(out.read_text())
                assert spec["model"]["type"] == name and spec["cluster"]["num_nodes"] == nodes
                assert spec["cluster"]["gpus_per_node"] == per_node
                assert f"wrote {out}: {name} on {nodes} node" in printed.out
            else:
                refused += 1
                assert code == 1 and not out.exists(), (name, printed.err)
                assert f"acrl init: {name} does not fit {nodes} node" in printed.err
                assert "(ACRL-M007)" in printed.err or "(ACRL-M001)" in printed.err, printed.err
                assert "nothing was written" in printed.err
                assert re.search(r"fix: more GPUs \(--nodes \d+ fits\)|fix: more GPUs per node \(no --nodes up to 64 "
                                 r"of \d+ GPU\(s\) fits\)", printed.err), printed.err
    # The small models fit one GPU, the largest no single node: both branches are exercised.
    assert fitted > len(CATALOG) and refused > 10


@pytest.mark.parametrize(("model", "nodes", "expected"), [
    ("qwen2.5-3B", 1, Layout(1, 1, 1, 1)),
    ("glm4-32B", 1, Layout(4, 1, 1, 2)),  # 61 layers: no pipeline split, so tensor parallel 4
    ("qwen2.5-72B", 1, Layout(1, 8, 1, 4)),
    ("qwen3-30B-A3B", 1, Layout(1, 1, 4, 2)),  # experts split before layers
])
def test_the_smallest_tensor_parallel_size_that_passes(model: str, nodes: int, expected: Layout) -> None:
    answers = Answers(model=CATALOG[model], data="/data/train.jsonl", nodes=nodes, runtime_arn=ARN,
                      s3_bucket="my-rollouts")
    chosen = fit(answers).layout
    assert chosen == expected
    # every smaller tensor parallel size, with any pipeline and expert size, is refused by the compiler
    for tp in [t for t in (1, 2, 4) if t < chosen.tensor]:
        for pp in (1, 2, 4, 8):
            for ep in (1, 2, 4, 8):
                layout = Layout(tp, pp, ep, chosen.gpus_per_engine, chosen.batch_size)
                assert not passes(answers, layout), f"TP {tp} PP {pp} EP {ep} passes, yet TP {chosen.tensor} was chosen"


def passes(answers: Answers, layout: Layout) -> bool:
    """Whether the spec of ``answers`` with ``layout`` compiles with no layout or memory warning."""
    try:
        bundle = compile_spec(Path("x.toml"), data=render(answers, layout).encode())
    except SpecError:
        return False
    return not [w for w in bundle.warnings if w.rule.startswith(("ACRL-M", "ACRL-P"))]


def test_a_data_parallel_size_that_does_not_divide_the_batch_gets_a_batch_that_does() -> None:
    chosen = fit(Answers(model=CATALOG["qwen3-8B"], data="/d.jsonl", gpus_per_node=6, runtime_arn=ARN,
                         s3_bucket="my-rollouts")).layout
    assert (chosen.tensor, chosen.pipeline) == (1, 1) and chosen.batch_size == 33  # 33 x 8 samples over 6 ranks


def test_a_model_too_large_for_the_gpus_is_refused_with_the_compilers_numbers(tmp_path: Path) -> None:
    proc = init("--model", "qwen3-235B-A22B", "--data", "/d.jsonl", "--integration", "slime", cwd=tmp_path)
    assert proc.returncode == 1 and not (tmp_path / "spec.toml").exists()
    first = proc.stderr.splitlines()[0]
    assert first.startswith("acrl init: qwen3-235B-A22B does not fit 1 node x 8 GPUs of 80 GiB")
    assert re.search(r"the training actor needs about [\d.]+ GiB per GPU .*\(ACRL-M007\)", proc.stderr)
    assert "fix: more GPUs (--nodes 8 fits), or GPUs with more memory (--gpu-memory-gib 141" in proc.stderr
    # the fewest that fit, doubling: 4 nodes do not, 8 do (the review's three tries, 2 -> 4 -> 8, in one)
    with pytest.raises(InitRefused):
        fit(Answers(model=CATALOG["qwen3-235B-A22B"], data="/d.jsonl", nodes=4, integration="slime"))
    assert fit(Answers(model=CATALOG["qwen3-235B-A22B"], data="/d.jsonl", nodes=8, integration="slime")).layout
    with pytest.raises(InitRefused):
        fit(Answers(model=CATALOG["kimi-k2"], data="/d.jsonl", nodes=4, integration="slime"))


# --- flags, stdin not a terminal ----------------------------------------------------------------------------------

def test_the_written_spec_compiles_through_the_console_scripts(tmp_path: Path) -> None:
    proc = init("--model", "qwen3-8b", "--data", "/data/train.jsonl", "--eval", "gsm8k=/data/gsm8k.jsonl",
                "--eval", "math 500=/data/math.jsonl", *AGENT, "-o", "math-8b.toml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("wrote math-8b.toml: qwen3-8B on 1 node x 8 GPUs, TP 1, PP 1")
    spec = tomllib.loads((tmp_path / "math-8b.toml").read_text())
    assert spec["experiment"]["id"] == "math-8b"  # from the file's name
    assert spec["eval"]["datasets"] == {"gsm8k": "/data/gsm8k.jsonl", "math 500": "/data/math.jsonl"}
    assert spec["eval"]["interval"] == 10 and spec["agentcore"]["runtime_arn"] == ARN
    assert spec["model"] == {"type": "qwen3-8B", "args_source": "catalog", "dir": "/data/models/Qwen3-8B"}
    compiled = subprocess.run([str(Path(sys.executable).parent / "acrl-compile"), "math-8b.toml"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr
    assert compiled.stdout.startswith("created bundles/math-8b/")


def test_every_key_is_commented_and_the_header_points_to_the_docs(tmp_path: Path) -> None:
    text = render(Answers(model=CATALOG["qwen3-30B-A3B"], data="/d.jsonl", integration="slime",
                          eval={"aime": "/e.jsonl"}), Layout(1, 1, 4, 2))
    lines = text.splitlines()
    keys = [i for i, line in enumerate(lines) if re.match(r'^[A-Za-z"][^=]* = ', line)]
    assert len(keys) > 20
    for i in keys:
        assert " # " in lines[i] or lines[i - 1].startswith("# "), lines[i]
    header = "\n".join(line for line in lines if line.startswith("#"))
    for doc in ("docs/spec.md", "docs/reference.md", "docs/rules.md", "docs/memory.md", "docs/cluster.md"):
        assert doc in header
    assert 'rm-type = "deepscaler"' in text and "expert = 4" in text


def test_values_are_written_as_toml_strings_whatever_they_hold(tmp_path: Path) -> None:
    path = '/data/a "quoted" \\ back # not a comment'
    proc = init("--model", "qwen2.5-0.5B", "--data", path, "--eval", 'x"y=/e "q".jsonl', "--integration", "slime",
                "-o", "s.toml", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    spec = tomllib.loads((tmp_path / "s.toml").read_text())
    assert spec["data"]["path"] == path and spec["eval"]["datasets"] == {'x"y': '/e "q".jsonl'}


def test_missing_answers_without_a_terminal_are_a_usage_error_naming_the_flags(tmp_path: Path) -> None:
    proc = init(cwd=tmp_path)
    assert proc.returncode == 2 and not list(tmp_path.glob("*.toml"))
    assert proc.stderr.startswith("acrl init: missing --model, --data, --runtime-arn, --s3-bucket (stdin is not a "
                                  "terminal, so nothing is asked); nothing was written")
    assert "--integration slime" in proc.stderr  # the way out of the AgentCore answers
    proc = init("--model", "qwen3-4B", "--integration", "slime", cwd=tmp_path)
    assert proc.returncode == 2 and "acrl init: missing --data (" in proc.stderr


def test_no_input_asks_nothing_even_on_a_terminal(tmp_path: Path) -> None:
    term = Terminal([ACRL, "init", "--no-input", "--model", "qwen3-4B"], cwd=tmp_path)
    assert term.finish() == 2
    assert "missing --data, --runtime-arn, --s3-bucket (--no-input is given" in term.text


def test_wrong_answers_are_named_by_their_flags(tmp_path: Path) -> None:
    proc = init("--model", "qwen3-8c", "--nodes", "0", "--data", " ", "--eval", "gsm8k", cwd=tmp_path)
    assert proc.returncode == 2
    assert "  --model: 'qwen3-8c' is not in acrl's model catalog; did you mean 'qwen3-8B'?" in proc.stderr
    assert "  --nodes: must be at least 1" in proc.stderr and "  --data: give a path" in proc.stderr
    assert "  --eval: 'gsm8k' is not NAME=PATH" in proc.stderr
    # what the compiler refuses whatever the layout: its rule, under the flag that gave the value
    proc = init("--model", "qwen3-8B", "--data", "/d.jsonl", "--runtime-arn", "arn:x", "--s3-bucket", "My_Bucket",
                cwd=tmp_path)
    assert proc.returncode == 2 and not (tmp_path / "spec.toml").exists()
    assert "  --runtime-arn: 'arn:x' is not an AgentCore Runtime ARN (ACRL-T003)" in proc.stderr
    assert "  --s3-bucket: 'My_Bucket' is not a valid S3 bucket name (ACRL-T004)" in proc.stderr


def test_answer_problems_name_the_flag_of_each_key() -> None:
    answers = Answers(model=CATALOG["qwen3-8B"], data="/d.jsonl", runtime_arn=ARN, s3_bucket="ok-bucket",
                      exp_id="-bad")
    assert [p.flag for p in answer_problems(answers)] == ["--id"]


def test_an_existing_file_is_replaced_only_with_force(tmp_path: Path) -> None:
    target = tmp_path / "spec.toml"
    target.write_text("# mine\n")
    args = ("--model", "qwen3-4B", "--data", "/d.jsonl", "--integration", "slime")
    proc = init(*args, cwd=tmp_path)
    assert proc.returncode == 3 and "spec.toml: exists; not overwritten." in proc.stderr  # 3: an output in the way
    assert "--force" in proc.stderr and target.read_text() == "# mine\n"
    proc = init(*args, "--force", cwd=tmp_path)
    assert proc.returncode == 0 and tomllib.loads(target.read_text())["model"]["type"] == "qwen3-4B"


# --- questions on a real terminal ---------------------------------------------------------------------------------

def test_questions_on_a_terminal_with_defaults_and_answers_asked_again(tmp_path: Path) -> None:
    term = Terminal([ACRL, "init"], cwd=tmp_path, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / ".cache")})
    for prompt, answer in [
        ("Model (a catalog name; `acrl models` lists them): ", "qwen3-8c"),
        ("did you mean 'qwen3-8B'?", None),
        ("Model (a catalog name; `acrl models` lists them): ", "qwen3-8B"),
        ("GPUs per node [8]: ", ""),
        ("Nodes [1]: ", "two"),
        ("'two' is not a whole number", None),
        ("Nodes [1]: ", "2"),
        ("Training data (JSONL on the cluster): ", "/data/train.jsonl"),
        ("Eval datasets, NAME=PATH, comma-separated (empty: none): ", "gsm8k=/data/g.jsonl, math=/data/m.jsonl"),
        ("Integration (agentcore: an AgentCore Runtime agent; slime: slime's own rollout) [agentcore]: ", ""),
        ("AgentCore Runtime ARN of the agent: ", ARN),
        ("S3 bucket for rollout results: ", "Not A Bucket"),
        ("Hugging Face checkpoint directory on the cluster [/data/models/Qwen3-8B]: ", ""),
        ("Write the spec to [spec.toml]: ", "exp.toml"),
        ("--s3-bucket: 'Not A Bucket' is not a valid S3 bucket name (ACRL-T004)", None),  # the compiler's reason
        ("S3 bucket for rollout results: ", "my-rollouts"),
    ]:
        term.expect(prompt)
        if answer is not None:
            term.type(answer)
    assert term.finish() == 0, term.text
    assert "wrote exp.toml: qwen3-8B on 2 nodes x 8 GPUs" in term.text
    spec = tomllib.loads((tmp_path / "exp.toml").read_text())
    assert spec["cluster"]["num_nodes"] == 2 and spec["agentcore"]["s3_bucket"] == "my-rollouts"
    assert spec["eval"]["datasets"] == {"gsm8k": "/data/g.jsonl", "math": "/data/m.jsonl"}
    assert spec["model"]["dir"] == "/data/models/Qwen3-8B"
    compile_spec(tmp_path / "exp.toml")


def test_on_a_terminal_flags_given_are_not_asked_and_replacing_a_file_is_asked(tmp_path: Path) -> None:
    (tmp_path / "spec.toml").write_text("# mine\n")
    term = Terminal([ACRL, "init", "--model", "qwen3-4B", "--data", "/d.jsonl", "--integration", "slime",
                     "--gpus-per-node", "4", "--nodes", "1"], cwd=tmp_path)
    for prompt, answer in [("Eval datasets", ""), ("Hugging Face checkpoint directory", "/m/q"),
                           ("Write the spec to [spec.toml]: ", ""), ("spec.toml exists; replace it? [y/N]: ", "n")]:
        term.expect(prompt)
        term.type(answer)
    assert term.finish() == 3 and "spec.toml: exists; not overwritten." in term.text
    assert "Model (" not in term.text and "GPUs per node" not in term.text and "ARN" not in term.text
    assert (tmp_path / "spec.toml").read_text() == "# mine\n"


def test_end_of_input_on_a_terminal_writes_nothing(tmp_path: Path) -> None:
    term = Terminal([ACRL, "init"], cwd=tmp_path)
    term.expect("Model (")
    os.write(term.master, b"\x04")  # Ctrl-D
    assert term.finish() == 2 and "acrl init: no answer (end of input); nothing was written" in term.text
    assert not list(tmp_path.glob("*.toml"))


def test_output_dash_prints_the_spec_and_writes_no_file(tmp_path: Path) -> None:
    proc = init("--model", "qwen3-4B", "--data", "/data/train.jsonl", "--integration", "slime", "-o", "-",
                cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith(".")] == []  # no file named "-"
    assert proc.stderr.startswith("printed the spec: qwen3-4B on 1 node x 8 GPUs")
    assert "acrl-compile SPEC" in proc.stdout and tomllib.loads(proc.stdout)["experiment"]["id"] == "qwen3-4B"
    (tmp_path / "s.toml").write_text(proc.stdout, encoding="utf-8")
    compiled = subprocess.run([str(Path(sys.executable).parent / "acrl-compile"), "s.toml", "-q"], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120)
    assert compiled.returncode == 0, compiled.stderr
