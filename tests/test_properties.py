"""Property tests (hypothesis): any string survives the trip through train.sh exactly; no input makes
the compiler print a traceback; compiling is deterministic; the resolved spec round-trips."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli_w
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st
from test_train_sh import Toolbox, make_toolbox, run_train_sh

from acrl.compiler import SpecError, compile_spec, write
from acrl.compiler._cli.main import compile_main
from acrl.compiler._pipeline.values import kind_problems
from acrl.compiler._spec.tables import table_types
from conftest import EXAMPLE_SPECS, MINIMAL, NO_FACTS, REPO, merge

BUNDLE_FILES = ("train.sh", "model_args.sh", "custom_config.yaml", "spec.toml", "manifest.json")


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Toolbox:
    return make_toolbox(tmp_path_factory.mktemp("toolbox"))


def files_of(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


# --- any string reaches slime exactly --------------------------------------------------------

# Shell and argv hazards first, so that hypothesis tries them early; then arbitrary text.
NASTY = [
    "", " ", "  two  spaces ", "'", '"', "'\"'\"'", "\\", "$(touch pwned)", "`touch pwned`", "$HOME", "${x:-y}",
    "$'\\n'", "!!", "*", "?", "[a]", "{a,b}", "~", "~root/x", "a\nb", "\n", "trailing\n", "\r\n", "\t", "-", "--",
    "-n", "-e", "--flag", "--x=y", "-- ", ";", "&&", "|", ">x", "<x", "#c", "%s%d", "é中🙂", "\u2028", "\x7f",
    "\x1b[31m", "\u200b", "a=b", "\"$(id)\"",
]
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=30)
ANY_STRING = st.one_of(st.sampled_from(NASTY), TEXT, st.builds(str.__add__, st.sampled_from(NASTY), TEXT),
                       st.builds(lambda t: "-" + t, TEXT), st.builds(lambda t: "--" + t, TEXT))
# What a path or a name (or a function) accepts (compiler/_pipeline/values.py: one line of visible characters, no blank
# around it): any such string reaches slime exactly; any other is refused with a located error (test_hostile_values.py).
PATH_OR_NAME = ANY_STRING.filter(lambda s: not list(kind_problems(s, "path", None)) and
                                 not list(kind_problems(s, "name", None)))
NON_EMPTY = PATH_OR_NAME
FUNCTION = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}(\.[A-Za-z_][A-Za-z0-9_]{0,6}){1,3}", fullmatch=True)

STRING_FIELDS = st.fixed_dictionaries({
    "data.path": PATH_OR_NAME, "data.input_key": PATH_OR_NAME, "model.dir": PATH_OR_NAME,
    "tool_call_parser": PATH_OR_NAME, "flag_value": ANY_STRING, "flag_list": st.lists(ANY_STRING, max_size=3),
    "eval_name": PATH_OR_NAME, "eval_path": PATH_OR_NAME, "wandb_project": NON_EMPTY, "wandb_group": NON_EMPTY,
    "extra_args": st.lists(ANY_STRING, max_size=4), "env_value": ANY_STRING,
    "function_path": FUNCTION,
})


def string_spec(v: Mapping[str, Any]) -> dict[str, Any]:
    return merge(MINIMAL, {
        "data": {"path": v["data.path"], "input_key": v["data.input_key"]},
        "model": {"dir": v["model.dir"]},
        "sglang": {"tool_call_parser": v["tool_call_parser"]},
        "rollout": {"function_path": v["function_path"]},
        "slime": {"commit": NO_FACTS},  # made-up escape-hatch flags: no flag facts apply
        "extra": {"flags": {"--acrl-test-flag": v["flag_value"], "--acrl-test-list": v["flag_list"]},
                  "args": ["--acrl-test-raw", *v["extra_args"]]},
        "eval": {"interval": 1, "datasets": {v["eval_name"]: v["eval_path"]}},
        "wandb": {"project": v["wandb_project"], "group": v["wandb_group"]},
        "env": {"vars": {"ACRL_TEST_VALUE": v["env_value"]}},
    })


def contains(argv: list[str], *window: str) -> bool:
    return any(argv[i:i + len(window)] == list(window) for i in range(len(argv) - len(window) + 1))


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values=STRING_FIELDS)
def test_any_string_reaches_slime_exactly(values: dict[str, Any], tools: Toolbox) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        spec_path = root / "spec.toml"
        spec_path.write_text(tomli_w.dumps(string_spec(values)), encoding="utf-8")
        bundle = compile_spec(spec_path)
        write(bundle, root / "bundle")
        run = run_train_sh(root / "bundle" / "train.sh", tools, root / "work", {"WANDB_API_KEY": "k"})
        assert run.returncode == 0, run.stderr
        argv = run.slime_argv
        assert argv == ["python3", "/root/slime/train.py", *bundle.argv(), "--custom-config-path",
                        "custom_config.yaml", "--use-wandb", "--wandb-project", values["wandb_project"],
                        "--wandb-group", values["wandb_group"]]
        # each value is where the spec put it, independently of the compiler's own argv
        assert contains(argv, "--prompt-data", values["data.path"])
        assert contains(argv, "--input-key", values["data.input_key"])
        assert contains(argv, "--hf-checkpoint", values["model.dir"], "--ref-load", values["model.dir"])
        assert contains(argv, "--sglang-tool-call-parser", values["tool_call_parser"])
        assert contains(argv, "--rollout-function-path", values["function_path"])
        assert contains(argv, "--acrl-test-flag", values["flag_value"])
        assert contains(argv, "--acrl-test-list", *values["flag_list"])
        assert contains(argv, "--eval-prompt-data", values["eval_name"], values["eval_path"])
        raw = ["--acrl-test-raw", *values["extra_args"]]
        assert argv[len(argv) - len(raw) - 7:len(argv) - 7] == raw  # [extra.args] verbatim, last
        assert run.runtime_env["env_vars"]["ACRL_TEST_VALUE"] == values["env_value"]
        assert not any(p.name == "pwned" for d in (root, root / "work", root / "bundle") for p in d.iterdir())


NUL_SPECS = {
    "data.path": {"data": {"path": "a\0b"}},
    "model.dir": {"model": {"dir": "/m\0"}},
    "sglang.tool_call_parser": {"sglang": {"tool_call_parser": "\0"}},
    "extra.flags value": {"extra": {"flags": {"--x": "a\0"}}},
    "extra.flags list": {"extra": {"flags": {"--x": ["ok", "a\0"]}}},
    "extra.args": {"extra": {"args": ["--x", "\0y"]}},
    "eval dataset path": {"eval": {"interval": 1, "datasets": {"d": "/e\0.jsonl"}}},
    "eval dataset name": {"eval": {"interval": 1, "datasets": {"d\0": "/e.jsonl"}}},
    "env.vars value": {"env": {"vars": {"X": "a\0b"}}},
    "wandb.project": {"wandb": {"project": "p\0"}},
}


@pytest.mark.parametrize("overrides", NUL_SPECS.values(), ids=NUL_SPECS.keys())
def test_nul_is_rejected(overrides: dict[str, Any], tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(tomli_w.dumps(merge(MINIMAL, overrides)), encoding="utf-8")
    assert "\\u0000" in path.read_text(encoding="utf-8")
    with pytest.raises(SpecError) as info:
        compile_spec(path)
    assert "NUL" in str(info.value)
    assert not (tmp_path / "bundle").exists()


# --- no input makes the compiler print a traceback -------------------------------------------

def known_fields() -> dict[str, dict[str, Any]]:
    """Table name -> field name -> the field's type, for every table of a spec."""
    out = {}
    for name, table in table_types().items():
        out[name] = {f.name: f.type for f in attrs.fields(table)}
    return out


KNOWN = known_fields()
KEY = st.one_of(st.sampled_from([*KNOWN, *(k for fields in KNOWN.values() for k in fields)]),
                st.text(max_size=8), st.sampled_from(["--num-layers", "swiglu", "0", "", " ", "a.b", "é"]))
SCALAR = st.one_of(
    st.booleans(), st.integers(-(2**63), 2**63 - 1), st.floats(), TEXT, st.sampled_from(NASTY),
    st.datetimes(), st.dates(), st.times(),
    st.sampled_from([0, 1, -1, 8, 65536, 1e-6, 0.5, "8", "true", "auto", "async", "/x", "qwen3"]),
)
JUNK = st.recursive(SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                    st.dictionaries(KEY, inner, max_size=4)), max_leaves=12)


def as_toml(value: Any) -> Any:
    """A value hypothesis built for a field's type, as a spec writes it: a table's attrs instance (a [kuberay.head]
    Head, each of [[kuberay.volumes]]) as its table, None left out."""
    if attrs.has(type(value)):
        return attrs.asdict(value, filter=lambda _, v: v is not None)
    if isinstance(value, (list, tuple)):  # [[kuberay.volumes]]: an array of tables
        return [as_toml(v) for v in value if v is not None]
    if isinstance(value, dict):
        return {k: as_toml(v) for k, v in value.items() if v is not None}
    return value


@st.composite
def mutated_specs(draw: st.DrawFn) -> dict[str, Any]:
    """MINIMAL (or nothing) with values set, replaced or deleted at known and unknown key paths."""
    data: dict[str, Any] = merge(MINIMAL, {}) if draw(st.integers(0, 3)) else {}
    for _ in range(draw(st.integers(0, 6))):
        table = draw(st.one_of(st.sampled_from(list(KNOWN)), KEY))
        path = [table]
        typed = None
        if draw(st.integers(0, 4)):
            path.append(draw(st.one_of(st.sampled_from(list(KNOWN.get(table, {})) or ["x"]), KEY)))
            if draw(st.integers(0, 3)) == 0:
                path.append(draw(KEY))
            elif path[-1] in KNOWN.get(table, {}) and draw(st.booleans()):  # a value of the right type
                typed = as_toml(draw(st.from_type(KNOWN[table][path[-1]]).filter(lambda v: v is not None)))
        node = data
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        if draw(st.integers(0, 5)) == 0:
            node.pop(path[-1], None)
        else:
            node[path[-1]] = typed if typed is not None else draw(JUNK)
    return data


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """compile_main in this process: exit status, stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = compile_main(argv)
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue(), err.getvalue()


def assert_clean_exit(code: int, stdout: str, stderr: str) -> None:
    output = stdout + stderr
    if currently_in_test_context():  # statistics: --hypothesis-show-statistics
        event(f"exit status {code}")
        if code == 1:
            event("TOML syntax error" if "after a syntax error" in output else "spec error")
    assert code in {0, 1, 2}, output
    assert "Traceback" not in output, output
    assert "internal error" not in output, output


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scratch")


@settings(max_examples=250, deadline=None)
@given(data=mutated_specs(), as_json=st.booleans())
def test_random_specs_never_crash(data: dict[str, Any], as_json: bool, scratch: Path) -> None:
    spec = scratch / "random.toml"
    spec.write_bytes(tomli_w.dumps(data).encode("utf-8", "surrogatepass"))
    code, stdout, stderr = run_cli([str(spec), "-o", str(scratch / "out"), "--force",
                                    *(["--json"] if as_json else [])])
    assert_clean_exit(code, stdout, stderr)
    if as_json:
        assert json.loads(stdout)["ok"] is (code == 0)


@st.composite
def toml_texts(draw: st.DrawFn) -> str:
    """Valid-looking TOML in every syntax tomli_w never writes: dotted and quoted keys, inline tables,
    arrays of tables, literal and multi-line strings, comments, odd spacing."""
    def key() -> str:
        name = draw(st.one_of(st.sampled_from([*KNOWN, *(k for ks in KNOWN.values() for k in ks)]),
                              st.from_regex(r"[A-Za-z0-9_-]{1,6}", fullmatch=True)))
        style = draw(st.integers(0, 3))
        if style == 1:
            return json.dumps(name)
        if style == 2:
            return f"'{name}'"
        if style == 3:
            return name + " . " + draw(st.sampled_from(["a", '"b.c"', "args", "vars"]))
        return name

    def value(depth: int = 0) -> str:
        choices = [
            lambda: json.dumps(draw(TEXT)),
            lambda: "'" + draw(st.text(st.characters(exclude_categories=("Cs", "Cc")).filter(
                lambda c: c != "'"), max_size=10)) + "'",
            lambda: '"""\n' + draw(st.sampled_from(['a\\"""b', "x\ny", '""', "\\\n  z", ""])) + '"""',
            lambda: "'''" + draw(st.sampled_from(["a''b", "x\ny", "'", ""])) + "'''",
            lambda: draw(st.sampled_from(["0x1F", "1_000", "+5", "-0", "0o17", "0b101", "1e3", "inf", "-nan",
                                          "true", "false", "1979-05-27T07:32:00Z", "07:32:00", "1979-05-27",
                                          "3.14", "8"])),
        ]
        if depth < 2:
            choices.append(lambda: "[" + draw(st.sampled_from(["", "\n", " "])) + ", ".join(
                value(depth + 1) for _ in range(draw(st.integers(0, 3)))) + draw(st.sampled_from(
                    ["", ",", ", # c\n", "\n"])) + "]")
            choices.append(lambda: "{ " + ", ".join(
                f"{k} = {value(depth + 1)}" for k in dict.fromkeys(
                    draw(st.from_regex(r"[a-z]{1,4}", fullmatch=True)) for _ in range(draw(st.integers(0, 3))))
            ) + " }")
        return choices[draw(st.integers(0, len(choices) - 1))]()

    lines = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.integers(0, 5))
        if kind == 0:
            lines.append(f"[{draw(st.sampled_from(['', ' ']))}{key()}{draw(st.sampled_from(['', ' ']))}]")
        elif kind == 1:
            lines.append(f"[[{key()}]]")
        elif kind == 2:
            lines.append("# " + draw(TEXT).replace("\n", " ").replace("\r", " "))
        else:
            comment = draw(st.sampled_from(["", "  # note", "#"]))
            lines.append(f"{key()}{draw(st.sampled_from([' = ', '=', '  =  ']))}{value()}{comment}")
    return "\n".join(lines) + draw(st.sampled_from(["", "\n", "\r\n"]))


@settings(max_examples=150, deadline=None)
@given(text=toml_texts())
def test_toml_syntax_never_crashes(text: str, scratch: Path) -> None:
    spec = scratch / "syntax.toml"
    spec.write_bytes(text.encode("utf-8", "surrogatepass"))
    assert_clean_exit(*run_cli([str(spec), "-o", str(scratch / "out2"), "--force"]))


@settings(max_examples=100, deadline=None)
@given(text=st.one_of(st.text(), st.builds(lambda base, t: base + t, st.sampled_from(
    [tomli_w.dumps(MINIMAL), "[model]\n", "[experiment]\nid = ", 'a = """', "[[x]]\n"]), st.text())))
def test_arbitrary_text_never_crashes(text: str, scratch: Path) -> None:
    spec = scratch / "text.toml"
    spec.write_bytes(text.encode("utf-8", "surrogatepass"))
    assert_clean_exit(*run_cli([str(spec), "-o", str(scratch / "out3"), "--force"]))


@settings(max_examples=50, deadline=None)
@given(raw=st.binary(max_size=200))
def test_arbitrary_bytes_never_crash(raw: bytes, scratch: Path) -> None:
    spec = scratch / "bytes.toml"
    spec.write_bytes(raw)
    assert_clean_exit(*run_cli([str(spec), "-o", str(scratch / "out4"), "--force"]))


def test_cli_errors_are_clean(tmp_path: Path) -> None:
    (tmp_path / "dir.toml").mkdir()
    for argv in ([str(tmp_path / "missing.toml")], [str(tmp_path / "dir.toml")], ["--no-such-option"], []):
        code, stdout, stderr = run_cli(argv)
        assert_clean_exit(code, stdout, stderr)
        assert code != 0


# --- deterministic -------------------------------------------------------------------------

@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=[p.stem for p in EXAMPLE_SPECS])
def test_compiling_twice_gives_identical_bytes(spec: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = compile_spec(spec)
    write(first, tmp_path / "one")
    monkeypatch.chdir(tmp_path)  # another cwd, and the spec named by a relative path
    second = compile_spec(Path(os.path.relpath(spec, tmp_path)))
    write(second, tmp_path / "two")
    # custom_config.yaml only for integration "agentcore" (the default): slime and custom runs have none
    agentcore = tomllib.loads(spec.read_text(encoding="utf-8"))["experiment"].get("integration", "agentcore") \
        == "agentcore"
    # checkpoint.sh only for a spec that names a checkpoint directory ([checkpoint] save or load)
    checkpoints = bool(tomllib.loads(spec.read_text(encoding="utf-8")).get("checkpoint", {}).keys() & {"save", "load"})
    assert set(first.files) == (set(BUNDLE_FILES) - (set() if agentcore else {"custom_config.yaml"})
                                | ({"checkpoint.sh"} if checkpoints else set()))
    assert dict(first.files) == dict(second.files)
    assert files_of(tmp_path / "one") == files_of(tmp_path / "two") == dict(first.files)
    assert first.bundle_hash == second.bundle_hash
    for data in first.files.values():
        assert str(tmp_path).encode() not in data and str(REPO).encode() not in data


def test_warnings_do_not_record_the_compiling_machine(write_spec: Any, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    spec = write_spec({"rollout": {"max_response_len": 9217}})  # warns: above max_tokens_per_gpu
    absolute = compile_spec(spec)
    assert absolute.warnings
    monkeypatch.chdir(spec.parent)
    relative = compile_spec(Path(spec.name))
    assert str(tmp_path).encode() not in absolute.files["manifest.json"]
    assert absolute.files == relative.files


def test_deterministic_across_processes(tmp_path: Path) -> None:
    """Hash seed, time zone, locale, umask-independent bytes and working directory make no difference."""
    outputs = []
    for i, (seed, tz, cwd) in enumerate([("0", "UTC", REPO), ("4242", "Asia/Kolkata", tmp_path)]):
        out = tmp_path / f"run{i}"
        env = {**os.environ, "PYTHONHASHSEED": seed, "TZ": tz, "LC_ALL": "C.UTF-8" if i else "C"}
        for spec in EXAMPLE_SPECS:
            subprocess.run([sys.executable, "-c", "import sys; from acrl.compiler._cli.main import compile_main; "
                            "sys.exit(compile_main(sys.argv[1:]))", str(spec), "-o", str(out / spec.stem)],
                           env=env, cwd=cwd, check=True, capture_output=True, timeout=60)
        outputs.append({spec.stem: files_of(out / spec.stem) for spec in EXAMPLE_SPECS})
    assert outputs[0] == outputs[1]


# --- the resolved spec round-trips ---------------------------------------------------------

def assert_round_trip(spec_path: Path, tmp_path: Path) -> None:
    first = compile_spec(spec_path)
    write(first, tmp_path / "first")
    # compiled again under the original file name: the name is written into train.sh's header
    second = compile_spec(tmp_path / "first" / "spec.toml", display_name=spec_path.name)
    assert set(second.files) == set(first.files)
    for name in set(first.files) - {"manifest.json"}:  # custom_config.yaml only with integration "agentcore"
        assert second.files[name] == first.files[name], name
    one, two = (json.loads(b.files["manifest.json"]) for b in (first, second))
    assert one["files"] == two["files"]  # the same files; the bundle hash covers the source's sha256 too
    assert one["spec"]["name"] == two["spec"]["name"] == spec_path.name
    del one["spec"]["sha256"], two["spec"]["sha256"], one["bundle_hash"], two["bundle_hash"]
    for manifest in (one, two):  # a warning points at a line of its own source file
        for warning in manifest["warnings"]:
            for location in ("file", "line", "column", "key"):
                del warning[location]
    assert one == two


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=[p.stem for p in EXAMPLE_SPECS])
def test_resolved_spec_round_trips(spec: Path, tmp_path: Path) -> None:
    assert_round_trip(spec, tmp_path)


VALID_OVERRIDES = st.fixed_dictionaries({}, optional={
    "experiment": st.fixed_dictionaries({"num_rollout": st.integers(1, 10**6)},
                                        optional={"seed": st.integers(0, 2**31)}),
    "data": st.fixed_dictionaries({"path": PATH_OR_NAME}, optional={"label_key": PATH_OR_NAME,
                                                                     "metadata_key": PATH_OR_NAME}),
    "rollout": st.fixed_dictionaries({}, optional={
        "temperature": st.floats(0.01, 2.0), "top_p": st.floats(0.01, 1.0),
        "max_response_len": st.integers(1, 10**5)}),
    "train": st.fixed_dictionaries({}, optional={"lr": st.floats(1e-9, 1e-2), "weight_decay": st.floats(0, 1),
                                                 "use_dynamic_batch_size": st.booleans()}),
    "sglang": st.fixed_dictionaries({}, optional={"tool_call_parser": PATH_OR_NAME,
                                                  "mem_fraction_static": st.floats(0.05, 0.95)}),
    "wandb": st.fixed_dictionaries({}, optional={"project": PATH_OR_NAME, "group": PATH_OR_NAME}),
    "extra": st.fixed_dictionaries({}, optional={
        "args": st.lists(ANY_STRING.filter(lambda s: not s.startswith("--")), max_size=3),
        "flags": st.dictionaries(st.from_regex(r"--acrl-[a-z]{1,8}", fullmatch=True), st.one_of(
            st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), ANY_STRING,
            st.lists(st.one_of(st.integers(), ANY_STRING), max_size=3)), max_size=3)}),
    "env": st.fixed_dictionaries({}, optional={"vars": st.dictionaries(
        st.from_regex(r"ACRL_[A-Z]{1,6}", fullmatch=True), ANY_STRING, max_size=3)}),
})


@settings(max_examples=40, deadline=None)
@given(overrides=VALID_OVERRIDES)
def test_random_specs_round_trip(overrides: dict[str, Any], scratch: Path) -> None:
    with tempfile.TemporaryDirectory(dir=scratch) as tmp:
        spec = Path(tmp) / "random-spec.toml"
        # made-up --acrl-* escape-hatch flags: a slime commit with no flag facts (ACRL-F003 would refuse them)
        spec.write_text(tomli_w.dumps(merge(merge(MINIMAL, {"slime": {"commit": NO_FACTS}}), overrides)),
                        encoding="utf-8")
        assert tomllib.loads(spec.read_text(encoding="utf-8"))
        assert_round_trip(spec, Path(tmp))


@pytest.mark.parametrize("spec", EXAMPLE_SPECS[:1], ids=[p.stem for p in EXAMPLE_SPECS[:1]])
def test_round_trip_through_the_cli(spec: Path, tmp_path: Path) -> None:
    assert run_cli([str(spec), "-o", str(tmp_path / "first")])[0] == 0
    assert run_cli([str(tmp_path / "first" / "spec.toml"), "-o", str(tmp_path / "second")])[0] == 0
    first, second = files_of(tmp_path / "first"), files_of(tmp_path / "second")
    for name in ("train.sh", "model_args.sh", "custom_config.yaml", "spec.toml"):
        assert first[name] == second[name], name
