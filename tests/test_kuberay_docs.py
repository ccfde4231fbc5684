"""docs/kuberay.md's example cannot drift: its rayjob.yaml is the one a fresh compile of its spec writes, and its
`acrl run` / `acrl status` transcript is what they print for that bundle against the stand-in kubectl
(tests/shims/kubectl; run ids, times, the bundle hash and this machine's paths normalized).

    python tests/test_kuberay_docs.py --update     # rewrite the YAML block from the spec block, and the transcript
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "kuberay.md"
MARK = "<!-- rayjob.yaml of the spec above: generated, do not edit -->\n"


def example_spec(text: str) -> str:
    """The doc's first ```toml block."""
    match = re.search(r"^```toml\n(.*?)^```\n", text, re.S | re.M)
    assert match, "docs/kuberay.md has no ```toml block"
    return match.group(1)


def yaml_block(text: str) -> str:
    """The ```yaml block after MARK."""
    start = text.index(MARK) + len(MARK)
    match = re.match(r"```yaml\n(.*?)^```\n", text[start:], re.S | re.M)
    assert match, "docs/kuberay.md has no ```yaml block after the generated-block comment"
    return match.group(1)


def compiled(spec: str) -> str:
    from acrl.compiler import compile_spec

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.toml"
        path.write_text(spec, encoding="utf-8")
        return compile_spec(path, target="kuberay").files["rayjob.yaml"].decode("utf-8")


def test_the_docs_rayjob_is_what_its_spec_compiles_to() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert yaml_block(text) == compiled(example_spec(text)), \
        "docs/kuberay.md's rayjob.yaml is stale: run `python tests/test_kuberay_docs.py --update` and commit it"


RUN_MARK = "<!-- acrl run of the bundle above, against tests/shims/kubectl: generated, do not edit -->\n"
BUNDLE = "bundles/gsm8k-qwen2.5-3b-eks"
RUN = f"acrl run {BUNDLE} --context eks-prod --skip aws-identity,s3-bucket,agent-runtime"
HASH = "f8122ebea80e3e1e54cb9723da5491ebcea0ed3ab8da9b4363aa95ab80be04c2"  # shown as the bundle's (normalized)
# What the stand-in's cluster holds: the Secret without the optional WANDB_ENTITY, the RayJob's life, the job's log
SCENARIO = {
    "current_context": "eks-dev", "contexts": {"eks-dev": "default", "eks-prod": "rl"},
    "secrets": {"acrl-secrets": {"WANDB_API_KEY": "(a value)"}},
    # the job's log follows from Running on; the RayJob ends once it has been printed: one order, whatever the timing
    "statuses": ["new", "initializing", "initializing", "running", "complete-succeeded"], "hold_at": 4,
    "logs": ("2026-11-21 16:12:49,810\tINFO cli.py:39 -- Job submission server address: "
             "http://$NAME-4tq9c-head-svc.rl.svc.cluster.local:8265\n"
             "2026-11-21 16:12:50,123\tSUCC cli.py:63 -- Job '$NAME-x7k2p' submitted successfully\n"
             'acrl-resume: {"checkpoint_dir": null, "data_state": null, "decision": "started", "iteration": null, '
             '"message": "starting from the model: no checkpoint in /fsx/checkpoints/gsm8k-qwen2.5-3b-eks", "mode": '
             '"auto", "start_rollout_id": 0, "tracker": null}\n'
             "acrl: starting from the model: no checkpoint in /fsx/checkpoints/gsm8k-qwen2.5-3b-eks\n"
             "(slime's log: rollouts 0 to 199)\n"
             "2026-11-21 18:02:09,117\tSUCC cli.py:63 -- Job '$NAME-x7k2p' succeeded\n"),
}


def transcript(spec: str) -> str:
    """`acrl run` and `acrl status` of the spec's bundle against the stand-in kubectl, normalized."""
    import json
    import os
    import subprocess

    from acrl.compiler import compile_spec, write

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "spec.toml").write_text(spec, encoding="utf-8")
        bundle = compile_spec(root / "spec.toml", target="kuberay")
        write(bundle, root / BUNDLE)
        name = bundle.files["rayjob.yaml"].decode().split("\nkind: RayJob\nmetadata:\n  name: ", 1)[1].split("\n")[0]
        plan = dict(SCENARIO, logs=str(SCENARIO["logs"]).replace("$NAME", name))
        (root / "scenario.json").write_text(json.dumps(plan), encoding="utf-8")
        env = {**os.environ, "PATH": os.pathsep.join([str(REPO / "tests" / "shims"), str(Path(sys.executable).parent),
                                                      "/usr/bin", "/bin"]),
               "ACRL_SHIM_LOG": str(root / "calls.jsonl"), "ACRL_KUBE_SCENARIO": str(root / "scenario.json"),
               "ACRL_KUBE_STATE": str(root / "state.json"), "ACRL_KUBE_POLL": "0.01"}
        out = []
        for command in (RUN, "acrl status RUN"):
            if command.endswith("RUN"):
                command = command.replace("RUN", next((root / "runs").glob("*/*")).name)
            done = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", *command.split()[1:]], cwd=root,
                                  env=env, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, done.stdout + done.stderr
            out.append(f"$ {command}\n{done.stdout}{done.stderr}")
        text = "".join(out).replace(str(root) + "/", "").replace(str(REPO / "tests" / "shims"), "/usr/local/bin")
    text = re.sub(r"\d{8}T\d{6}Z-[0-9a-f]{6}", "20261121T161000Z-3f9a1c", text)
    text = re.sub(r"(?<= )[ \d]{4}\dms(?=  )", "    1ms", text)  # the table's times
    # the bundle's hash covers train.sh, which changes with every template change: a fixed one
    text = re.sub(r"sha256:[0-9a-f]{64}", "sha256:" + HASH, text)
    text = re.sub(r"sha256 [0-9a-f]{12}\b", "sha256 " + HASH[:12], text)
    for field, value in (("started", "2026-11-21T16:10:00.412Z"), ("ended", "2026-11-21T18:02:13.905Z"),
                         ("duration", "6733.5 s")):  # `acrl status`'s: the stand-in's RayJob ends at once
        text = re.sub(rf"(?m)^({field}: +).*$", rf"\g<1>{value}", text)
    return text


def run_block(text: str) -> str:
    """The ```console block after RUN_MARK."""
    start = text.index(RUN_MARK) + len(RUN_MARK)
    match = re.match(r"```console\n(.*?)^```\n", text[start:], re.S | re.M)
    assert match, "docs/kuberay.md has no ```console block after the generated-transcript comment"
    return match.group(1)


def test_the_docs_transcript_is_what_acrl_run_prints() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert run_block(text) == transcript(example_spec(text)), \
        "docs/kuberay.md's acrl run transcript is stale: run `python tests/test_kuberay_docs.py --update`"


def update() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(MARK) + len(MARK)
    old = f"```yaml\n{yaml_block(text)}```\n"
    text = text[:start] + text[start:].replace(old, f"```yaml\n{compiled(example_spec(text))}```\n", 1)
    start = text.index(RUN_MARK) + len(RUN_MARK)
    old = f"```console\n{run_block(text)}```\n"
    text = text[:start] + text[start:].replace(old, f"```console\n{transcript(example_spec(text))}```\n", 1)
    DOC.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(__doc__)
    update()
    print(f"updated {DOC.relative_to(REPO)}")
