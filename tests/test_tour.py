"""docs/tour.md is what acrl prints: the tour's commands run again in a pseudo-terminal give the same page (timings and
the paths of executables masked), and, where tmux is installed, the tmux recording and the pseudo-terminal agree."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent


def tour() -> ModuleType:
    spec = importlib.util.spec_from_file_location("acrl_tour", REPO / "docs" / "tour.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["acrl_tour"] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_the_tour_is_what_acrl_prints() -> None:
    module = tour()
    page = module.generate("pty")
    assert module.comparable(page) == module.comparable(module.DOC.read_text(encoding="utf-8")), \
        "docs/tour.md is stale: python docs/tour.py (tmux), or python docs/tour.py --driver pty"
    # It shows what it says it shows: every step's command, errors with their fix, the edit loop, the layout's grid.
    for _, command in module.STEPS:
        assert f"$ {command}\n" in page
    assert "fix:" in page and "replaced bundles/qwen3-8b-grpo/" in page and "node 0 (head, local)" in page


def test_the_comparison_masks_only_what_differs_between_machines() -> None:
    module = tour()
    a = "bash              passed       3ms  /usr/bin/bash\nmodel             failed      12ms  [model] dir /m\n"
    b = "bash              passed       0ms  /bin/bash\nmodel             failed       1ms  [model] dir /m\n"
    assert module.comparable(a) == module.comparable(b)
    assert module.comparable(a) != module.comparable(a.replace("[model] dir /m", "[model] dir /n"))
    assert module.comparable("lr 1e-06 -> 2e-06") != module.comparable("lr 1e-06 -> 3e-06")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed: the recording itself is not checked")
def test_tmux_records_what_the_pseudo_terminal_sees() -> None:
    module = tour()
    assert module.comparable(module.generate("tmux")) == module.comparable(module.generate("pty"))
