"""Type-checking: every mistake reported at once, at its line, with a fix; never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from acrl.compiler import SpecError, compile_spec, parse_spec_text
from conftest import SpecWriter

BAD = """\
[experiment]
id = "x"
num_rollout = 0
bogus = 1

[agentcore]
runtime_arn = 5
s3_bucket = "bucket-name"
gateway_log_level = "warn"

[model]
type = "qwen2.5-3B"
dir = "/m"
args = { num-layers = 36, nested = { a = 1 } }

[rollout]
batch_sise = 3
temperature = 0
n_samples_per_prompt = "8"

[data]
path = "/d"
"""


def errors_of(path: Path) -> list[str]:
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    return [d.format().splitlines()[0] for d in info.value.diagnostics]


def diagnostics_of(path: Path) -> list[tuple[str, int | None, str]]:
    """(key, line, severity) of every problem compiling ``path`` reports."""
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    return [(d.key, d.line, d.severity) for d in info.value.diagnostics]


def test_every_error_is_reported_at_once_in_file_order(write_spec: SpecWriter) -> None:
    assert errors_of(write_spec(text=BAD)) == [
        "spec.toml:3:1: error: [experiment] num_rollout: must be at least 1, got 0",
        "spec.toml:4:1: error: [experiment] bogus: unknown key 'bogus'",
        "spec.toml:7:1: error: [agentcore] runtime_arn: expected a string, got an integer (5)",
        'spec.toml:9:1: error: [agentcore] gateway_log_level: "warn" is not one of "debug", "info", '
        '"warning", "error", "critical"',
        "spec.toml:14:27: error: [model.args] nested: expected a flag value (boolean, number, string or "
        "array of them), got a table",
        "spec.toml:17:1: error: [rollout] batch_sise: unknown key 'batch_sise'",
        "spec.toml:18:1: error: [rollout] temperature: must be greater than 0, got 0",
        "spec.toml:19:1: error: [rollout] n_samples_per_prompt: expected an integer, got a string ('8')",
    ]


def test_messages_show_the_line_and_a_fix(write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec(text=BAD), display_name="spec.toml")
    text = str(info.value)
    assert "    17 | batch_sise = 3\n       | ^\n  fix: did you mean \"batch_size\"?" in text
    assert 'fix: did you mean "warning"?' in text
    # the rules that read none of these keys ran too (none found anything); those that read one did not
    assert "\n8 errors; nothing was written.\n" in text and text.endswith("fixing these may reveal more.")


def test_toml_syntax_error_has_line_and_column(write_spec: SpecWriter) -> None:
    path = write_spec(text='[experiment]\nid = "x"\nnum_rollout = = 3\n')
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    (diag,) = info.value.diagnostics
    assert (diag.line, diag.column) == (3, 15)
    assert diag.message.startswith("expected a value here: ")  # tomllib's "Invalid value", said plainly
    assert diag.source_line == "num_rollout = = 3"


def test_missing_required_keys_and_tables(write_spec: SpecWriter) -> None:
    path = write_spec(text='[experiment]\nid = "x"\n[model]\ntype = "t"\n')
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    messages = [d.message for d in info.value.diagnostics]
    assert "missing required table [agentcore]" in messages
    assert "missing required table [data]" in messages
    assert ("model.dir", 3, 1) in [(d.key, d.line, d.column) for d in info.value.diagnostics]


def test_booleans_are_not_integers_and_integers_not_strings(write_spec: SpecWriter) -> None:
    path = write_spec({"cluster": {"gpus_per_node": True, "colocate": 1}, "model": {"dir": 3}})
    found = diagnostics_of(path)
    assert sorted(key for key, _, _ in found) == ["cluster.colocate", "cluster.gpus_per_node", "model.dir"]
    lines = path.read_text().splitlines()
    for key, line, severity in found:  # each at the line that sets it
        assert severity == "error" and line is not None and lines[line - 1].startswith(key.split(".")[-1] + " = ")


def test_integers_are_accepted_where_floats_are_expected(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    bundle = compile_overrides({"train": {"lr": 1}})
    assert "--lr 1.0" in bundle.files["train.sh"].decode()


def test_nul_in_a_string_is_rejected(write_spec: SpecWriter) -> None:
    path = write_spec({"data": {"path": "/data/a\u0000b"}})
    ((key, line, severity),) = diagnostics_of(path)
    assert (key, severity) == ("data.path", "error")
    assert line is not None and path.read_text().splitlines()[line - 1].startswith("path = ")


def test_unknown_table_suggests_the_right_one(write_spec: SpecWriter) -> None:
    path = write_spec({"rollouts": {"batch_size": 3}})
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    (diag,) = info.value.diagnostics
    assert diag.message == "unknown key 'rollouts'" and diag.hint == 'did you mean "rollout"?'


def test_positions_cover_inline_tables_arrays_and_quoted_keys() -> None:
    source = parse_spec_text(
        '[a]\nx = { "y.z" = 1, w = [1,\n  2] }\n[[b]]\nk = 1\n[[b]]\nk = 2\n[c.d]\n"q k" = """multi\n'
        'line = no"""\nafter = 1\n', "s.toml")
    assert source.positions[("a", "x", "y.z")] == (2, 7)
    assert source.positions[("a", "x", "w")] == (2, 18)
    assert source.positions[("b", 1, "k")] == (7, 1)
    assert source.positions[("c", "d", "q k")] == (9, 1)
    assert source.positions[("c", "d", "after")] == (11, 1)
    assert ("c", "d", "line") not in source.positions


def test_unreadable_and_non_utf8_files_are_spec_errors(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.toml"
    bad.write_bytes(b'[experiment]\nid = "caf\xe9"\n')
    for path in (tmp_path / "missing.toml", bad):  # one error about the whole file, with a fix
        with pytest.raises(SpecError) as info:
            compile_spec(path)
        (diagnostic,) = info.value.diagnostics
        assert (diagnostic.file, diagnostic.key, diagnostic.line, diagnostic.severity) == (str(path), "", None, "error")
        assert diagnostic.hint
