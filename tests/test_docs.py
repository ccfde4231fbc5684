"""Generated documentation is never stale."""

from __future__ import annotations

from acrl.compiler._docs import rules_markdown
from conftest import REPO


def test_rules_doc_is_current() -> None:
    assert (REPO / "docs" / "rules.md").read_text(encoding="utf-8") == rules_markdown(), \
        "docs/rules.md is stale: run python -m acrl.compiler._docs"


def test_every_rule_is_documented() -> None:
    from acrl.compiler import RULES

    assert all(r.check.__doc__ for r in RULES)
