"""docs/kuberay.md's example cannot drift: its rayjob.yaml is the one a fresh compile of its spec writes.

    python tests/test_kuberay_docs.py --update     # rewrite the YAML block from the spec block
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


def update() -> None:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(MARK) + len(MARK)
    old = f"```yaml\n{yaml_block(text)}```\n"
    DOC.write_text(text[:start] + text[start:].replace(old, f"```yaml\n{compiled(example_spec(text))}```\n", 1),
                   encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit(__doc__)
    update()
    print(f"updated {DOC.relative_to(REPO)}")
