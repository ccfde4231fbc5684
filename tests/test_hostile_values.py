"""Hostile spec values: no value of a spec runs code, at compile time or when the bundle's scripts are sourced and
run. The reproductions of the holes found by attacking acrl come first, then a table and a property test over every
string field and free-form key of the spec, found by walking its attrs classes (a field added later is covered)."""

from __future__ import annotations

import codecs
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w

from acrl.compiler import SpecError, compile_spec, write
from acrl.compiler._render import environment
from conftest import MINIMAL, merge

BIN = Path(sys.executable).parent


def ran(folder: Path) -> list[str]:
    """The marker files a payload created (`env -S` appends '=VALUE' to the command it reads from a name)."""
    return sorted(p.name for p in folder.glob("MARKER*"))


def marker_payload(marker: Path) -> str:
    return f"\ntouch {marker}\n#"


def source_model_args(bundle_dir: Path) -> list[str]:
    """MODEL_ARGS as bash sees them after sourcing model_args.sh (set -u, as train.sh does)."""
    out = subprocess.run(["bash", "-euc", 'source "$1"; printf "%s\\0" "${MODEL_ARGS[@]}"', "t",
                          str(bundle_dir / "model_args.sh")], capture_output=True, timeout=30, check=True)
    return out.stdout.decode("utf-8").split("\0")[:-1]


def write_toml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


# --- the holes, reproduced -----------------------------------------------------------------------------------------

def test_a_newline_in_model_overrides_runs_nothing_when_model_args_sh_is_sourced(tmp_path: Path) -> None:
    marker = tmp_path / "MARKER"
    key, value = f"x{marker_payload(marker)}", f"1{marker_payload(marker)}\r\x1b[2K\u2028"
    spec = write_toml(tmp_path / "spec.toml", merge(MINIMAL, {"model": {"overrides": {"rotary-base": value,
                                                                                      key: 3}}}))
    write(compile_spec(spec), tmp_path / "b")
    args = source_model_args(tmp_path / "b")
    assert not ran(tmp_path)
    assert args[args.index("--rotary-base") + 1] == value
    assert args[args.index(f"--{key}") + 1] == "3"
    text = (tmp_path / "b" / "model_args.sh").read_text(encoding="utf-8")
    comments = [line for line in text.splitlines() if line.startswith("# overridden")]
    assert len(comments) == 2 and all("touch" in line for line in comments)  # on the comment line, escaped


@pytest.mark.parametrize("model_type", ["qwen\ntouch MARKER", "../../tmp/evil", "a/b", "-x", "x y", "q$(id)",
                                        "qwen2.5-3B\n", "", "a" * 129, "..", "qwen\u2028"])
def test_model_type_must_be_a_slime_model_name(model_type: str, tmp_path: Path) -> None:
    spec = write_toml(tmp_path / "spec.toml", merge(MINIMAL, {"model": {"type": model_type}}))
    with pytest.raises(SpecError) as info:
        compile_spec(spec)
    (d,) = [d for d in info.value.diagnostics if d.rule == "ACRL-M009"]
    assert (d.severity, d.line, d.hint is not None) == ("error", spec.read_text().splitlines().index("[model]") + 2,
                                                        True)


@pytest.mark.parametrize("model_type", ["qwen2.5-3B", "glm4-32B", "deepseek-v3", "Qwen3-30B-A3B", "kimi_k2"])
def test_slime_model_names_are_model_types(model_type: str, tmp_path: Path) -> None:
    spec = write_toml(tmp_path / "spec.toml", merge(MINIMAL, {"model": {"type": model_type}}))
    compile_spec(spec)


@pytest.mark.parametrize(("table", "key", "rule"), [("experiment", "id", "ACRL-T005"),
                                                    ("agentcore", "runtime_arn", "ACRL-T003"),
                                                    ("agentcore", "s3_bucket", "ACRL-T004")])
def test_a_trailing_newline_does_not_pass_a_format_rule(table: str, key: str, rule: str, tmp_path: Path) -> None:
    """Python's `$` matches before a final newline: the format rules match the whole value."""
    spec = write_toml(tmp_path / "spec.toml", merge(MINIMAL, {table: {key: MINIMAL[table][key] + "\n"}}))
    with pytest.raises(SpecError) as info:
        compile_spec(spec)
    assert [d.rule for d in info.value.diagnostics] == [rule]


@pytest.fixture
def slime_dir(tmp_path: Path) -> Path:
    models = tmp_path / "slime" / "scripts" / "models"
    models.mkdir(parents=True)
    (models / "m.sh").write_text('MODEL_ARGS=(--num-layers "${MODEL_ARGS_NUM_LAYERS:-2}" --set-by-env)\n'
                                 '[[ -z ${SET_BY_ENV:-} ]] || MODEL_ARGS+=("$SET_BY_ENV")\n', encoding="utf-8")
    (tmp_path / "evil.sh").write_text(f"touch {tmp_path / 'MARKER'}\nMODEL_ARGS=(--num-layers 2)\n")
    return tmp_path / "slime"


def script_spec(tmp_path: Path, slime: Path, script_env: dict[str, str], model_type: str = "m") -> Path:
    return write_toml(tmp_path / "spec.toml", merge(MINIMAL, {
        "slime": {"dir": str(slime)}, "model": {"type": model_type, "args": None, "args_source": "script",
                                                 "script_env": script_env}}))


def hostile_script_envs(tmp_path: Path) -> list[dict[str, str]]:
    marker = tmp_path / "MARKER"
    return [
        {f"-Ssh -c 'touch {marker}'": "x"},  # read by `env -i` as its -S option
        {"-u": "PATH", f"-Ssh -c 'touch {marker}'": "x"},
        {"BASH_ENV": str(tmp_path / "evil.sh")},  # read by every non-interactive bash
        {"SHELLOPTS": "xtrace", "PS4": f"$(touch {marker})"},
        {"BASH_FUNC_source%%": f"() {{ touch {marker}; }}"},
        {"ENV": str(tmp_path / "evil.sh")},
        {"PATH": str(tmp_path)},
        {"LD_PRELOAD": str(tmp_path / "evil.so")},
        {"IFS": "/"},
        {"PROMPT_COMMAND": f"touch {marker}"},
        {"GLOBIGNORE": "*"},
        {"PYTHONSTARTUP": str(tmp_path / "evil.sh")},
    ]


@pytest.mark.parametrize("case", range(12))
def test_script_env_that_would_run_code_is_refused_before_the_script_is_sourced(
        case: int, tmp_path: Path, slime_dir: Path) -> None:
    script_env = hostile_script_envs(tmp_path)[case]
    spec = script_spec(tmp_path, slime_dir, script_env)
    with pytest.raises(SpecError) as info:
        compile_spec(spec)
    assert not ran(tmp_path)
    rules = {d.rule for d in info.value.diagnostics}
    assert rules == {"ACRL-S002"}, [d.format() for d in info.value.diagnostics]
    lines = spec.read_text().splitlines()
    assert {d.line for d in info.value.diagnostics} <= {
        i + 1 for i, line in enumerate(lines) if any(line.startswith((name, f'"{name}', f"'{name}"))
                                                     for name in script_env)}


def test_evil_script_is_what_the_marker_tests_detect(tmp_path: Path, slime_dir: Path) -> None:
    """The payloads above are live: the same script, sourced through a name that is allowed, does run."""
    (slime_dir / "scripts" / "models" / "evil.sh").write_bytes((tmp_path / "evil.sh").read_bytes())
    compile_spec(script_spec(tmp_path, slime_dir, {}, "evil"))
    assert ran(tmp_path) == ["MARKER"]


def test_script_env_knobs_reach_the_script_as_its_environment(tmp_path: Path, slime_dir: Path) -> None:
    value = "a b\n'$(touch MARKER)'\"`x`\\"
    bundle = compile_spec(script_spec(tmp_path, slime_dir, {"MODEL_ARGS_NUM_LAYERS": "7", "SET_BY_ENV": value}))
    assert list(bundle.model_args.args) == ["--num-layers", "7", "--set-by-env", value]
    assert not ran(tmp_path)


@pytest.mark.parametrize("command", ["explain", "diff"])
def test_explain_and_diff_source_nothing_for_a_refused_spec(command: str, tmp_path: Path, slime_dir: Path) -> None:
    spec = script_spec(tmp_path, slime_dir, hostile_script_envs(tmp_path)[0])
    args = [str(spec)] if command == "explain" else [str(spec), str(spec)]
    proc = subprocess.run([str(BIN / "acrl"), command, *args], capture_output=True, text=True, timeout=60,
                          check=False, cwd=tmp_path)
    assert not ran(tmp_path)
    assert proc.returncode in (1, 2) and "ACRL-S002" in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_import_slime_runner_never_sources_a_model_type_that_is_a_path(tmp_path: Path, slime_dir: Path) -> None:
    from acrl.compiler._import_slime_runner import import_slime_runner

    config = tmp_path / "runner.yaml"
    config.write_text(json.dumps({
        "exp_id": "x", "agent_runtime_arn": "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/a",
        "s3_bucket": "my-bucket", "model_dir": "/m", "data_path": "/d.jsonl", "model_type": "../../../evil",
        "slime_dir": str(slime_dir)}), encoding="utf-8")
    import_slime_runner(config)
    assert not ran(tmp_path)


# --- the templates: no value is emitted unescaped --------------------------------------------------------------

@pytest.mark.parametrize("expression", ["{{ x }}", "{{ x | join(' ') }}", "{{ x ~ '' }}", "{{ x | upper }}",
                                        "{{ n }}", "{{ '{' }}", "{{ x | sh ~ 'a' }}"])
def test_a_template_value_without_an_escaping_filter_does_not_render(expression: str) -> None:
    from acrl.compiler._render import UnescapedValueError

    with pytest.raises(UnescapedValueError):
        environment().from_string(expression).render(x="a", n=3)


@pytest.mark.parametrize(("expression", "value"), [("{{ x | num }}", "3"), ("{{ x | num }}", True),
                                                   ("{{ x | envname }}", "A-B"), ("{{ x | envname }}", "1A"),
                                                   ("{{ x | name }}", "a/b"), ("{{ x | name }}", ".."),
                                                   ("{{ x | name }}", "a\n"), ("{{ x | sh }}", "a\0"),
                                                   ("{{ x | shwords }}", "ab"), ("{{ x | sh }}", None)])
def test_checking_filters_refuse_what_they_do_not_check(expression: str, value: object) -> None:
    from acrl.compiler._render import UnescapedValueError

    with pytest.raises(UnescapedValueError):
        environment().from_string(expression).render(x=value)


CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))] + ["\u2028", "\u2029", "\u202e", "\ufeff"]


@pytest.mark.parametrize("char", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
def test_comment_escapes_every_control_character(char: str) -> None:
    from acrl.compiler._render import comment_text

    text = comment_text(f"a{char}b\\")
    assert char not in text and text.isprintable() and text.startswith("a\\") and text.endswith("b\\\\")
    assert codecs.decode(text, "unicode_escape") == f"a{char}b\\"  # Python's escapes: the value can be read back
