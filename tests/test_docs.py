"""Generated documentation is never stale: docs/rules.md, docs/reference.md and the shipped schema."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from acrl.compiler._cli.docs import GENERATED, REGENERATE, main, reference_markdown, rules_markdown
from acrl.compiler._spec.schema import FLAG_KEYWORD, spec_schema
from conftest import REPO


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generated_doc_is_current(name: str) -> None:
    assert (REPO / "docs" / name).read_text(encoding="utf-8") == GENERATED[name](), \
        f"docs/{name} is stale: run `{REGENERATE}` from the repository root and commit the result"


def test_the_staleness_message_names_a_command_that_regenerates_every_file(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    proc = subprocess.run([sys.executable, *REGENERATE.split()[1:]], cwd=tmp_path, capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "docs").iterdir()) == sorted(GENERATED)
    for name, generate in GENERATED.items():
        assert (tmp_path / "docs" / name).read_text(encoding="utf-8") == generate()


def test_named_files_only_are_regenerated(tmp_path: Path) -> None:
    assert main([str(tmp_path / "rules.md")]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["rules.md"]
    assert (tmp_path / "rules.md").read_text(encoding="utf-8") == rules_markdown()


def test_unknown_targets_and_missing_docs_folder_are_usage_errors(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "notes.md")]) == 2
    assert "not a generated file" in capsys.readouterr().err
    assert main([str(tmp_path / "nowhere" / "rules.md")]) == 2
    assert "run `python -m acrl.compiler._cli.docs` from the repository root" in capsys.readouterr().err


def test_every_rule_is_documented() -> None:
    from acrl.compiler import RULES

    assert all(r.check.__doc__ for r in RULES)
    listed = rules_markdown()
    assert [r.id for r in RULES if f"| {r.id} | {r.severity} |" not in listed] == []  # every id has a section


def test_reference_lists_every_key_with_its_flag_and_default() -> None:
    text = reference_markdown()
    schema = spec_schema()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    tables = {name: t for name, t in schema["properties"].items() if name != "extends"}  # the one non-table
    def nested(table: dict) -> int:  # the keys of the tables inside a table ([sglang.models.NAME], its server_groups)
        inner = [p if "properties" in p else p.get("additionalProperties") if p.get("type") == "object"
                 else p.get("items") for p in table["properties"].values()]  # [kuberay.head] is a table itself
        return sum(len(i["properties"]) + nested(i) for i in inner if isinstance(i, dict) and "properties" in i)

    assert len(rows) == sum(len(t["properties"]) + nested(t) for t in tables.values())
    assert "\n### [[sglang.models.NAME.server_groups]]\n" in text
    assert "| `worker_type` | one of `\"regular\"`, `\"prefill\"`, `\"decode\"`, `\"placeholder\"`, " \
        "`\"encoder\"` |" in text
    for table, table_schema in tables.items():
        assert f"\n## [{table}]\n" in text
        for key, prop in table_schema["properties"].items():
            section = text.split(f"\n## [{table}]\n", 1)[1].split("\n## ", 1)[0]
            (row,) = [r for r in section.splitlines() if r.startswith(f"| `{key}` |")]
            if FLAG_KEYWORD in prop:
                assert f"`{prop[FLAG_KEYWORD]}`" in row
    assert "| `batch_size` | integer, ≥ 1 | `32` | `--rollout-batch-size` | Prompts per rollout. |" in text
    assert "| `pipeline` | integer, ≥ 1 | `1` | `--pipeline-model-parallel-size` (left out when `1`) |" in text
    assert "| `mem_fraction_static` | number, > 0, < 1 | `0.7` |" in text
    assert "| `seed` | integer, ≥ 0 | *unset* | `--seed` |" in text
    assert "| `id` | string | *required* | custom_config.yaml: `exp_id` |" in text
    assert "| `advantage_estimator` | one of `\"grpo\"`, `\"gspo\"`," in text
    assert "| `forward` | array of string | `[\"WANDB_ENTITY\"]` |" in text
    assert "| `datasets` | table of string | `{}` | `--eval-prompt-data` |" in text
    assert "| `flags` | table of boolean, number, string or array of numbers and strings | `{}` |" in text


def test_reference_escapes_what_markdown_would_swallow() -> None:
    schema = spec_schema()
    schema["properties"]["data"]["properties"]["path"]["description"] = "a <dir> | b"
    assert "| a \\<dir> \\| b |" in reference_markdown(schema)
