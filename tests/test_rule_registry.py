"""The rule registry (compiler/_pipeline/validate/engine.py): one hop from a rule id to its module, and
RULES in the one order engine.ORDER declares (docs/rules.md and the diagnostics come out in it)."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from collections.abc import Iterator

import pytest

from acrl.compiler import RULES
from acrl.compiler._pipeline.validate import engine
from acrl.compiler._pipeline.validate.engine import ORDER, Context, Finding, rule

# The module of each id prefix (the docs/rules.md sections).
FAMILY = {"P": "parallel", "C": "cluster", "B": "batch", "A": "algorithm", "E": "eval", "I": "integration",
          "T": "toolkit", "F": "flags", "S": "secrets", "K": "kuberay", "M": "model", "L": "launch",
          "G": "server_groups", "N": "training", "R": "rollout_features", "H": "checkpoint"}
# Ids of a prefix kept in a second module (the escape hatch's values and deprecations, apart from flags.py's rules).
SPLIT = {"ACRL-F009": "flag_values", "ACRL-F010": "flag_values", "ACRL-F011": "flag_values",
         # what --target kuberay's job needs (paths, CPUs, nodes, size), apart from the [kuberay] table's own values
         **{f"ACRL-K0{n}": "kuberay_job" for n in ("06", "08", "09", "10", "11", "12")}}


def _prefix(rule_id: str) -> str:
    return rule_id.split("-")[1][0]


def test_every_registered_rule_is_in_order_exactly_once_and_every_id_there_is_registered() -> None:
    assert [i for i, n in Counter(ORDER).items() if n > 1] == []
    registered = [r.id for r in RULES]
    assert [i for i, n in Counter(registered).items() if n > 1] == []
    assert registered == list(ORDER)


def test_importing_any_validate_module_registers_every_rule() -> None:
    """A fresh interpreter that imports only the engine (as compile.py and _cli/docs.py reach it) sees
    the whole catalog: the package registers its rule modules."""
    code = "from acrl.compiler._pipeline.validate.engine import RULES; print(' '.join(r.id for r in RULES))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == list(ORDER)


@pytest.mark.parametrize("rule_id", ORDER)
def test_a_rule_id_leads_to_its_module(rule_id: str) -> None:
    found = next(r for r in RULES if r.id == rule_id)
    module = sys.modules[found.check.__module__]
    assert module.__name__ == f"acrl.compiler._pipeline.validate.{SPLIT.get(rule_id, FAMILY[_prefix(rule_id)])}"
    assert module.__doc__ is not None and f"ACRL-{_prefix(rule_id)}*" in module.__doc__


def test_registration_keeps_the_declared_order_whatever_the_import_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine, "RULES", [])

    def check(ctx: Context) -> Iterator[Finding]:
        yield from ()

    for rule_id in ("ACRL-M001", "ACRL-P001", "ACRL-M009", "ACRL-F001"):
        rule(rule_id, "error", ["parallel.tensor"], "t")(check)
    assert [r.id for r in engine.RULES] == ["ACRL-P001", "ACRL-M009", "ACRL-F001", "ACRL-M001"]


def test_a_rule_not_in_the_order_cannot_be_registered() -> None:
    with pytest.raises(ValueError, match="ACRL-X001"):
        rule("ACRL-X001", "error", ["parallel.tensor"], "t")
