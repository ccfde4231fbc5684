"""Hostile spec values: no value of a spec runs code, at compile time or when the bundle's scripts are sourced and
run. The reproductions of the holes found by attacking acrl come first, then a table and a property test over every
string field and free-form key of the spec, found by walking its attrs classes (a field added later is covered)."""

from __future__ import annotations

import codecs
import json
import subprocess
import sys
import tempfile
import tomllib
import types
import typing
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli_w
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_train_sh import (
    Toolbox,
    expected_slime_argv,
    make_env,
    make_toolbox,
    parsed_slime_argv,
    run_train_sh,
)

from acrl.compiler import SpecError, compile_spec, write
from acrl.compiler._pipeline.kuberay import rayjob_documents
from acrl.compiler._pipeline.render import custom_config, environment
from acrl.compiler._pipeline.values import keys_of_kind
from acrl.compiler._spec.tables import table_types
from conftest import KUBERAY_TABLE, MINIMAL, NO_FACTS, merge

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
    """ACRL-M009, or, for what no name holds (empty, a line break), the name check of every name key: one error."""
    spec = write_toml(tmp_path / "spec.toml", merge(MINIMAL, {"model": {"type": model_type}}))
    with pytest.raises(SpecError) as info:
        compile_spec(spec)
    (d,) = [d for d in info.value.diagnostics if d.key == "model.type"]
    assert d.rule == ("" if not model_type.strip() or "\n" in model_type or "\u2028" in model_type else "ACRL-M009")
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
    # refused before the format rule is asked: no name holds a line break (compiler/_pipeline/values.py)
    assert [(d.key, d.rule) for d in info.value.diagnostics] == [(f"{table}.{key}", "")]
    with pytest.raises(SpecError) as info:  # the format rule on its own matches the whole value too
        compile_spec(write_toml(tmp_path / "spec.toml", merge(MINIMAL, {table: {key: MINIMAL[table][key] + "#"}})))
    assert [d.rule for d in info.value.diagnostics] == [rule]


@pytest.mark.parametrize("key_env", ["sk-live-0123456789abcdef", "A" * 129, "1KEY", "KEY NAME"])
def test_wandb_key_env_must_be_a_short_name_and_is_never_echoed(key_env: str, tmp_path: Path) -> None:
    """A 100 KB name made the KubeRay entrypoint too long to run; a key pasted in place of the name is not
    repeated in the message."""
    spec = write_toml(tmp_path / "spec.toml", merge(MINIMAL, {"wandb": {"key_env": key_env}}))
    with pytest.raises(SpecError) as info:
        compile_spec(spec)
    (d,) = info.value.diagnostics
    assert d.rule == "ACRL-S002" and key_env not in d.message and key_env not in (d.hint or "")


def test_wandb_key_env_of_64_characters_is_a_name(tmp_path: Path) -> None:
    """ACRL-S004 takes upper-case names of up to 64 characters; a longer one is refused, unechoed."""
    compile_spec(write_toml(tmp_path / "spec.toml", merge(MINIMAL, {"wandb": {"key_env": "K" * 64}})))
    with pytest.raises(SpecError) as raised:
        compile_spec(write_toml(tmp_path / "spec.toml", merge(MINIMAL, {"wandb": {"key_env": "K" * 65}})))
    assert [d.rule for d in raised.value.diagnostics] == ["ACRL-S004"]


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
    from acrl.compiler._importers.slime_runner import import_slime_runner

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
    from acrl.compiler._pipeline.render import UnescapedValueError

    with pytest.raises(UnescapedValueError):
        environment().from_string(expression).render(x="a", n=3)


@pytest.mark.parametrize(("expression", "value"), [("{{ x | num }}", "3"), ("{{ x | num }}", True),
                                                   ("{{ x | envname }}", "A-B"), ("{{ x | envname }}", "1A"),
                                                   ("{{ x | name }}", "a/b"), ("{{ x | name }}", ".."),
                                                   ("{{ x | name }}", "a\n"), ("{{ x | sh }}", "a\0"),
                                                   ("{{ x | shwords }}", "ab"), ("{{ x | sh }}", None)])
def test_checking_filters_refuse_what_they_do_not_check(expression: str, value: object) -> None:
    from acrl.compiler._pipeline.render import UnescapedValueError

    with pytest.raises(UnescapedValueError):
        environment().from_string(expression).render(x=value)


CONTROLS = [chr(c) for c in (*range(0x20), 0x7F, *range(0x80, 0xA0))] + ["\u2028", "\u2029", "\u202e", "\ufeff"]


@pytest.mark.parametrize("char", CONTROLS, ids=[f"U+{ord(c):04X}" for c in CONTROLS])
def test_comment_escapes_every_control_character(char: str) -> None:
    from acrl.compiler._pipeline.render import comment_text

    text = comment_text(f"a{char}b\\")
    assert char not in text and text.isprintable() and text.startswith("a\\") and text.endswith("b\\\\")
    assert codecs.decode(text, "unicode_escape") == f"a{char}b\\"  # Python's escapes: the value can be read back


# --- every string field and free-form key of the spec, with hostile values ------------------------------------------

@attrs.frozen
class Slot:
    """Where a string goes in a spec: a field's value, a free-form table's key or value, or a list's item."""

    table: str
    field: str
    kind: str  # "value", "key", "table-value", "item", "table-item" (an item of a list value in a table)

    @property
    def id(self) -> str:
        return f"{self.table}.{self.field}:{self.kind}"

    def value(self, text: str) -> str:
        """What this slot holds for ``text``: the text itself, or the path made of it where only an absolute path is
        a value ([checkpoint] save, load and save_hf: ACRL-H013; save_hf a format string too: ACRL-H006)."""
        if f"{self.table}.{self.field}" in PATHS and self.kind == "value":
            if self.field == "save_hf":
                return "/" + text.replace("{", "{{").replace("}", "}}") + "/{rollout_id}"
            return "/" + text
        return text

    def place(self, text: str) -> dict[str, Any]:
        """Spec overrides putting ``text`` in this slot (with the keys it needs to be used)."""
        text = self.value(text)
        if self.kind.startswith(("model-", "override-")):  # [sglang.models.NAME] and its server group
            # an override key must be a ServerArgs field where acrl knows the commit's sglang (ACRL-G008): any text
            # is one only at a commit it has no sglang facts for
            commit = {"slime": {"commit": NO_SGLANG_FACTS}} if self.kind == "override-key" else {}
            return {**commit, self.table: {self.field: _models(self.kind, text)}}
        value: Any = {"value": text, "item": [text], "key": {text: "v"}, "table-value": {SAMPLE_KEY: text},
                      "table-item": {SAMPLE_KEY: ["a", text]}}[self.kind]
        return merge(COMPANIONS.get(f"{self.table}.{self.field}", {}), {self.table: {self.field: value}})

    def read(self, data: Any) -> Any:
        """The slot's text in ``data`` (a spec as a TOML mapping)."""
        node = data[self.table][self.field]
        if self.kind == "model-key":
            return next(iter(node))
        if self.kind == "model-value":
            return node["default"]["model_path"]
        if self.kind.startswith("override-"):
            overrides = node["default"]["server_groups"][0]["overrides"]
            return next(iter(overrides)) if self.kind == "override-key" else overrides[OVERRIDE_KEY]
        return {"value": lambda: node, "item": lambda: node[0],
                "key": lambda: next(k for k, v in node.items() if v == "v"),
                "table-value": lambda: node[SAMPLE_KEY], "table-item": lambda: node[SAMPLE_KEY][1]}[self.kind]()


def _models(kind: str, text: str) -> dict[str, Any]:
    """[sglang.models] holding ``text`` as a model's name, its model_path, or a server group's override key or value
    (one regular group of MINIMAL's 8 rollout GPUs)."""
    group: dict[str, Any] = {"worker_type": "regular", "num_gpus": 8}
    if kind.startswith("override-"):
        group["overrides"] = {text: "v"} if kind == "override-key" else {OVERRIDE_KEY: text}
    model: dict[str, Any] = {"server_groups": [group]}
    if kind == "model-value":
        model["model_path"] = text
    return {text if kind == "model-key" else "default": model}


SAMPLE_KEY = "ACRL_TEST_NAME"  # a name every free-form table accepts: a variable name, a flag, a dataset name
PATHS = ("checkpoint.save", "checkpoint.load", "checkpoint.save_hf")  # absolute paths on the cluster (Slot.value)
OVERRIDE_KEY = "tokenizer_path"  # a string field of sglang's ServerArgs at every commit acrl knows
NO_SGLANG_FACTS = "0123456789abcdef0123456789abcdef01234567"  # a slime commit acrl has no sglang facts for
# made-up escape-hatch flags: a slime commit with no flag facts (ACRL-F003 would refuse them; test_commit_facts)
COMPANIONS: dict[str, dict[str, Any]] = {"eval.datasets": {"eval": {"interval": 5}},
                                         "extra.flags": {"slime": {"commit": NO_FACTS}},
                                         "extra.args": {"slime": {"commit": NO_FACTS}},
                                         # --rollout-sample-hook-path is slime's from v0.3.1 (ACRL-F003 at the pin)
                                         "rollout.sample_hook_paths": {"slime": {"commit": "624b824a8"}}}
# [opd] and [weight_sync] strings read only where the table's other keys say so (ACRL-N004) or at v0.3.1 and later
_HEAD_DISK = {"slime": {"commit": "624b824a898ab0ec1fcb4d373004c7f3852bf515"},
              "weight_sync": {"transport": "disk", "disk_dir": "/w"}}
COMPANIONS |= {"opd.teacher_load": {"opd": {"enabled": True, "type": "megatron"}},
               "weight_sync.local_checkpoint_dir": _HEAD_DISK, "weight_sync.custom_post_write_path": _HEAD_DISK}


def _admits(tp: Any, wanted: type) -> bool:
    if tp is wanted:
        return True
    if typing.get_origin(tp) is typing.Literal:
        return any(type(a) is wanted for a in typing.get_args(tp))
    return typing.get_origin(tp) in (types.UnionType, typing.Union) and any(_admits(a, wanted)
                                                                           for a in typing.get_args(tp))


def _list_of_str(tp: Any) -> bool:
    options = typing.get_args(tp) if typing.get_origin(tp) in (types.UnionType, typing.Union) else (tp,)
    return any(typing.get_origin(o) is list and any(_admits(a, str) for a in typing.get_args(o)) for o in options)


def string_slots() -> list[Slot]:
    """Every place of the spec a string can go, from its attrs classes: a field added later is here too."""
    slots = []
    for table_name, table in table_types().items():
        for field in attrs.fields(table):
            tp = field.type
            if typing.get_origin(tp) is dict and attrs.has(typing.get_args(tp)[1]):  # [sglang.models.NAME]
                slots += [Slot(table_name, field.name, kind) for kind in ("model-key", "model-value", "override-key",
                                                                          "override-value")]
            elif typing.get_origin(tp) is dict:
                value_type = typing.get_args(tp)[1]
                slots.append(Slot(table_name, field.name, "key"))
                if _admits(value_type, str):
                    slots.append(Slot(table_name, field.name, "table-value"))
                if _list_of_str(value_type):
                    slots.append(Slot(table_name, field.name, "table-item"))
            elif _list_of_str(tp):
                slots.append(Slot(table_name, field.name, "item"))
            elif _admits(tp, str):
                slots.append(Slot(table_name, field.name, "value"))
    return slots


SLOTS = string_slots()
# Slots whose every value but a few is refused (a choice, an ARN, a file read at compile time, a variable name):
# for them the property is "a located error"; every other slot must also accept a plain value.
CONSTRAINED = {"agentcore.runtime_arn:value", "agentcore.gateway_log_level:value",
               "agentcore.reward_postprocessing:value", "model.args_source:value", "model.hf_config:value",
               "model.megatron_to_hf_mode:value", "sglang.log_level:value", "sglang.log_level_http:value",
               "algorithm.advantage_estimator:value", "algorithm.kl_loss_type:value", "train.mode:value",
               "train.lr_decay_style:value", "train.attention_backend:value", "cluster.dashboard_host:value",
               "cluster.gpu:value",
               # absolute paths only (ACRL-L001): "acrl-plain" is refused
               "env.pythonpath:item", "env.pythonpath_before_megatron:item",
               # options only (ACRL-L001): "acrl-plain" would be a positional argument of `ray start`
               "cluster.ray_start_args:item",
               # host:port or http://host:port only (ACRL-R001, slime's normalize_external_engine_addr)
               "rollout.external_engine_addrs:item",
               "experiment.integration:value",
               # [kuberay]: the Secret's variables by name and "required"/"optional" (ACRL-K004), absolute paths
               # (ACRL-K005), a Ray release number (ACRL-K007)
               "kuberay.secrets:key", "kuberay.secrets:table-value", "kuberay.image_paths:item",
               "kuberay.ray_version:value",
               "opd.type:value", "weight_sync.mode:value", "weight_sync.transport:value",
               "weight_sync.delta_encoding:value", "weight_sync.delta_checksum:value", "weight_sync.encoding:value",
               "checkpoint.resume:value", "checkpoint.scheduler:value", "checkpoint.format:value"}
# a Python function as module.function (kind="function", compiler/_pipeline/values.py): "acrl-plain" is none
CONSTRAINED |= {f"{'.'.join(map(str, key[:2]))}:{'item' if key[-1] == 0 else 'value'}"
                for key in keys_of_kind("function") if key[0] != "sglang"}
@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Toolbox:
    return make_toolbox(tmp_path_factory.mktemp("toolbox"))


def test_the_slots_cover_the_spec() -> None:
    ids = {s.id for s in SLOTS}
    assert {"model.type:value", "model.overrides:key", "model.overrides:table-value", "model.overrides:table-item",
            "model.script_env:key", "model.script_env:table-value", "env.vars:key", "env.forward:item",
            "extra.flags:key", "extra.args:item", "eval.datasets:key", "eval.datasets:table-value",
            "cluster.address:value", "cuda.home:value", "wandb.key_env:value", "kuberay.image:value"} <= ids
    assert ids >= CONSTRAINED


@pytest.mark.parametrize("slot", SLOTS, ids=[s.id for s in SLOTS])
def test_a_plain_value_compiles_in_every_unconstrained_slot(slot: Slot, tmp_path: Path) -> None:
    """The property below is only as strong as the slots where values are accepted: all but the constrained."""
    results = []
    for plain in ("acrl-plain", "ACRL_PLAIN"):
        try:
            compile_spec(write_toml(tmp_path / "spec.toml", merge(MINIMAL, slot.place(plain))))
            results.append(True)
        except SpecError:
            results.append(False)
    assert any(results) is (slot.id not in CONSTRAINED)


def run_bash(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, timeout=60, check=False)


def check_hostile(slot: Slot, text: str, root: Path, toolbox: Toolbox, *, full_run: bool = False,
                  join: bool = False) -> str:
    """Compile a spec with ``text`` in ``slot``; a spec that compiles must keep the text verbatim and run no code
    when its scripts are sourced and run; one that does not must get located errors. Returns what happened."""
    canary = root / "canary"
    canary.mkdir(parents=True, exist_ok=True)
    data = merge(MINIMAL, slot.place(text.replace("MARKER", str(canary / "M"))))
    spec_path = write_toml(root / "spec.toml", data)
    text = text.replace("MARKER", str(canary / "M"))
    try:
        bundle = compile_spec(spec_path)
    except SpecError as exc:
        assert exc.diagnostics and all(d.line and d.file == str(spec_path) and d.severity == "error" and d.hint
                                       for d in exc.diagnostics if d.severity == "error"), exc
        assert not list(canary.iterdir())
        return "refused"
    out = root / "bundle"
    write(bundle, out)
    # the resolved spec keeps the value verbatim; the custom config is the data the compiler meant
    if text:  # an empty optional value may resolve to its default (ref_load = "" is dir)
        assert slot.read(tomllib.loads((out / "spec.toml").read_text(encoding="utf-8"))) == slot.value(text)
    assert yaml.safe_load((out / "custom_config.yaml").read_text(encoding="utf-8")) == custom_config(bundle.spec)
    if bundle.spec.sglang.models:  # sglang_config.yaml reads back as the spec's models, each value verbatim
        read = yaml.safe_load((out / "sglang_config.yaml").read_text(encoding="utf-8"))["sglang"]
        assert [m["name"] for m in read] == list(bundle.spec.sglang.models)
        assert [m.get("model_path") for m in read] == [m.model_path for m in bundle.spec.sglang.models.values()]
        assert [g.get("overrides", {}) for m in read for g in m["server_groups"]] == \
            [g.overrides for m in bundle.spec.sglang.models.values() for g in m.server_groups]
    json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    # model_args.sh sourced as train.sh does: the MODEL_ARGS the compiler froze, word for word
    env = {"PATH": toolbox.path, "HOME": str(root), "LANG": "C.UTF-8"}
    sourced = run_bash(["bash", "-euc", 'source "$1"; printf "%s\\0" "${MODEL_ARGS[@]}"', "t",
                        str(out / "model_args.sh")], root, env)
    assert sourced.returncode == 0, sourced.stderr[-2000:]
    assert sourced.stdout.decode("utf-8").split("\0")[:-1] == list(bundle.model_args.args)
    # train.sh with ACRL_PRINT_ARGV=1 (acrl run's preflight): the entrypoint's argv, word for word
    run_env = {"WANDB_API_KEY": "k", **({bundle.spec.wandb.key_env: "k"} if bundle.spec.wandb.key_env else {})}
    (root / "w1").mkdir()
    log = root / "w1" / "calls.jsonl"
    printed = run_bash(["bash", str(out / "train.sh")], root / "w1",  # bytes: a \r stays a \r
                       make_env(toolbox, log, root / "w1", {**run_env, "ACRL_PRINT_ARGV": "1"}))
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert not log.exists()  # nothing stopped, started or submitted
    expected = expected_slime_argv(bundle, run_env, toolbox)
    words: list[Any] = printed.stdout.decode("utf-8").split("\0")[:-1]
    if "--train-env-vars" in words:
        words[words.index("--train-env-vars") + 1] = json.loads(words[words.index("--train-env-vars") + 1])
    assert words == expected
    check_kuberay(data, root, run_env)
    if join:  # the bundle of other nodes too (join.sh): once per slot, with every hostile value in one
        check_join_sh(data, root, toolbox)
    if full_run:  # submitted to the ray shim: the same argv, the spec's environment for the job
        run = run_train_sh(out / "train.sh", toolbox, root / "w2", run_env)
        assert run.returncode == 0, run.stderr[-2000:]
        assert parsed_slime_argv(run) == expected
        assert run.runtime_env["env_vars"].items() >= bundle.spec.env.vars.items()
        for start in run.find("ray", "start"):  # the local head: [cluster] ray_start_args and env, verbatim
            assert start["argv"][len(start["argv"]) - len(bundle.spec.cluster.ray_start_args):] == \
                bundle.spec.cluster.ray_start_args
            assert start["env"]["ACRL_TEST_NAME"] == bundle.spec.cluster.env.get(SAMPLE_KEY)
        assert len(run.find("ray", "start")) == (bundle.spec.cluster.address is None)
    assert not list(canary.iterdir()), "a spec value ran a command"
    return "compiled"


def check_join_sh(data: dict[str, Any], root: Path, toolbox: Toolbox) -> None:
    """The same spec on two nodes that join its local head: its join.sh, run with the shims, starts the worker node
    with the spec's values and runs nothing else."""
    if data.get("cluster", {}).get("address") is not None:
        return  # an existing cluster: no join.sh
    if data.get("sglang", {}).get("models"):
        return  # join.sh holds nothing of [sglang.models] (and its groups are sized for one node)
    bundle = compile_spec(write_toml(root / "nodes.toml", merge(data, {"cluster": {"num_nodes": 2}})))
    out = root / "nodes"
    write(bundle, out)
    (root / "w4").mkdir()
    log = root / "w4" / "calls.jsonl"
    joined = run_bash(["bash", str(out / "join.sh"), "10.0.0.1"], root / "w4",
                      make_env(toolbox, log, root / "w4", {"ACRL_NODE_GPUS": str(bundle.spec.cluster.gpus_per_node)}))
    assert joined.returncode == 0, joined.stderr[-2000:]
    starts = [c for c in map(json.loads, log.read_text(encoding="utf-8").splitlines())
              if c["argv"][:2] == ["ray", "start"]]
    assert [c["argv"] for c in starts] == [["ray", "start", "--address=10.0.0.1:6379", "--num-gpus",
                                           str(bundle.spec.cluster.gpus_per_node), "--disable-usage-stats"]]
    assert starts[0]["env"]["ACRL_TEST_NAME"] == bundle.spec.cluster.env.get(SAMPLE_KEY)  # [cluster] env, verbatim


# The rules about --target kuberay's job (a path no volume mounts, a checkpoint to load, ...): what a spec the default
# target compiles may still be refused for, with located errors.
KUBERAY_JOB_RULES = {"ACRL-K006", "ACRL-K008", "ACRL-K009", "ACRL-K010", "ACRL-K012"}


def check_kuberay(data: dict[str, Any], root: Path, run_env: dict[str, str]) -> None:
    """rayjob.yaml reads back as the documents the compiler built, and its entrypoint, run by a shell as Ray runs
    it, starts python3 with exactly the bundle's argv."""
    spec_path = write_toml(root / "kuberay.toml", merge({"kuberay": KUBERAY_TABLE}, data))
    try:
        kuberay = compile_spec(spec_path, target="kuberay")
    except SpecError as exc:  # e.g. a hostile [model] dir is a relative path: no volume holds it
        errors = [d for d in exc.diagnostics if d.severity == "error"]
        assert errors and all(d.rule in KUBERAY_JOB_RULES and d.line and d.hint for d in errors), exc
        return
    documents = list(yaml.safe_load_all(kuberay.files["rayjob.yaml"].decode("utf-8")))
    assert documents == rayjob_documents(kuberay.spec, kuberay.argv(), kuberay.files["custom_config.yaml"],
                                         kuberay.files.get("sglang_config.yaml"), kuberay.files.get("checkpoint.sh"))
    # the ConfigMap as the pods mount it (CONFIG_MOUNT), here: checkpoint.sh is sourced from it
    config = root / "config"
    config.mkdir(exist_ok=True)
    for name, content in documents[0]["data"].items():
        (config / name).write_text(content, encoding="utf-8")
    entrypoint = documents[1]["spec"]["entrypoint"].replace("source /acrl/config/checkpoint.sh",
                                                            f"source {config}/checkpoint.sh")
    fake = root / "fake-python"
    fake.mkdir(exist_ok=True)
    (fake / "python3").write_text("#!/bin/sh\nprintf '%s\\0' \"$@\"\n", encoding="utf-8")
    (fake / "python3").chmod(0o755)
    (root / "w3").mkdir(exist_ok=True)
    ran_job = run_bash(["sh", "-c", entrypoint], root / "w3",
                       {"PATH": f"{fake}:/usr/bin:/bin", "HOME": str(root), **run_env})
    assert ran_job.returncode == 0, ran_job.stderr[-2000:]
    spec = kuberay.spec
    train = "train_async.py" if spec.train.mode == "async" else "train.py"
    assert ran_job.stdout.decode("utf-8").split("\0")[:-1] == [
        f"{spec.slime.dir.rstrip('/')}/{train}", *kuberay.argv(), "--custom-config-path",
        "/acrl/config/custom_config.yaml",
        *(["--sglang-config", "/acrl/config/sglang_config.yaml"] if spec.sglang.models else []), "--use-wandb",
        *(["--wandb-project", spec.wandb.project] if spec.wandb.project else []),
        *(["--wandb-group", spec.wandb.group] if spec.wandb.group else [])]


HOSTILE = [
    "\ntouch MARKER\n#", "x\r\ntouch MARKER\r", "$(touch MARKER)", "`touch MARKER`", "';touch MARKER;'",
    "\";touch MARKER;\"", "${IFS}$(touch${IFS}MARKER)", "\x1b]0;x\x07\x1b[2K", "\x01\x7f\x85\u2028\u2029\u202e",
    "-Stouch MARKER", "--lr", "-", "~/*", "\\", "a\0b", "", " ", "plain-name-1\n", "x" * 100_000,
]
# one value holding all of them (but the NUL and the size, which are refused or slow on their own)
ALL_IN_ONE = "-S" + "".join(h for h in HOSTILE if "\0" not in h and len(h) < 1000)


@pytest.mark.parametrize("slot", SLOTS, ids=[s.id for s in SLOTS])
def test_hostile_value_in_every_slot(slot: Slot, tmp_path: Path, tools: Toolbox) -> None:
    check_hostile(slot, ALL_IN_ONE, tmp_path, tools, join=True)


@pytest.mark.slow
@pytest.mark.parametrize("slot", SLOTS, ids=[s.id for s in SLOTS])
def test_every_hostile_value_in_every_slot_compiled_sourced_and_run(slot: Slot, tmp_path: Path,
                                                                   tools: Toolbox) -> None:
    outcomes = {}
    for i, text in enumerate(HOSTILE):
        if len(text) > 4096 and slot.id in PATH_LIKE:
            continue  # over PATH_MAX: see PATH_LIKE
        outcomes[i] = check_hostile(slot, text, tmp_path / str(i), tools, full_run=i == 0)
    if slot.id not in CONSTRAINED and slot.kind not in ("key", "item"):  # names may be refused; values must pass
        assert outcomes[0] == outcomes[2] == "compiled" or slot.id in VALIDATED, outcomes


# [cuda] home goes into PATH and LD_LIBRARY_PATH, where a 100 KB entry makes python3 fail to start (not a shell
# injection; a bound on path lengths is left to the input-size checks).
PATH_LIKE = {"cuda.home:value"}
# Values the rules check against a format (names, ARNs, addresses, paths the compile reads): a hostile one is
# refused with a located error, which check_hostile asserts.
VALIDATED = {"experiment.id:value", "agentcore.s3_bucket:value", "model.type:value", "wandb.key_env:value",
             "kuberay.secret:value", "kuberay.namespace:value", "kuberay.service_account:value",
             "kuberay.labels:table-value", "kuberay.image:value",
             "cluster.address:value", "slime.commit:value", "cluster.node_ip_address:value"}
# A path, a name or a function (their setting() says kind=): a line break, blank space around it, an empty value are
# refused with a located error (compiler/_pipeline/values.py).
VALIDATED |= {f"{'.'.join(map(str, key[:2]))}:{'table-value' if key[-1] == '*' else 'value'}"
              for kind in ("path", "name", "function") for key in keys_of_kind(kind) if len(key) <= 3}
VALIDATED |= {"sglang.models:model-value", "sglang.models:model-key"}  # a path, and the name of a model


FRAGMENTS = [*HOSTILE[:-1], "'", '"', "$", "`", "\n", "\r", "\x00", "\t", "#", ";", "|", "&", "(", ")", "{", "}",
             "=", "--", "-", "MARKER", " ", "*", "?", "[", "!"]


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(slot=st.sampled_from(SLOTS),
       text=st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(st.characters(exclude_categories=["Cs"]),
                                                                    max_size=8)), max_size=6).map("".join))
def test_any_text_in_any_slot(slot: Slot, text: str, tools: Toolbox) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        event(check_hostile(slot, text, Path(tmp), tools))


# --- the writers escape even values that did not pass the rules (defence in depth) ---------------------------------

def test_writers_escape_values_the_rules_would_have_refused(tmp_path: Path) -> None:
    from acrl.compiler._pipeline import render as _render
    from acrl.compiler._pipeline.kuberay import rayjob_yaml
    from acrl.compiler._pipeline.render import UnescapedValueError

    bundle = compile_spec(write_toml(tmp_path / "spec.toml", merge(MINIMAL, {"kuberay": {"image": "r/i:1"}})))
    payload = f"x\ntouch {tmp_path / 'MARKER'}\r\u2028#"
    spec = attrs.evolve(bundle.spec, experiment=attrs.evolve(bundle.spec.experiment, id=payload),
                        model=attrs.evolve(bundle.spec.model, type=payload),
                        kuberay=attrs.evolve(bundle.spec.kuberay, secret=payload))
    out = tmp_path / "b"
    out.mkdir()
    files = {"train.sh": _render.train_sh(spec, bundle.groups), "join.sh": _render.join_sh(spec),
             "model_args.sh": _render.model_args_sh(spec, bundle.model_args),
             "custom_config.yaml": _render.custom_config_yaml(spec),
             "rayjob.yaml": rayjob_yaml(spec, bundle.argv(), b"x: 1\n")}
    for name, data in files.items():
        (out / name).write_bytes(data)
        comments = [line for line in data.decode("utf-8").split("\n") if line.startswith("#")]
        assert comments and not any(c in line for line in comments for c in "\r\u2028"), name
    for name in ("custom_config.yaml", "rayjob.yaml"):  # the header is two comment lines, then the data
        text = files[name].decode("utf-8")
        assert [line.startswith("#") for line in text.split("\n")[:2]] == [True, name == "rayjob.yaml"]
        list(yaml.safe_load_all(text))
    assert source_model_args(out) == list(bundle.model_args.args)
    printed = run_bash(["bash", str(out / "train.sh")], out, {"PATH": "/usr/bin:/bin", "ACRL_PRINT_ARGV": "1"})
    assert printed.returncode == 0, printed.stderr[-2000:]
    joined = run_bash(["bash", str(out / "join.sh"), "10.0.0.1"], out,
                      {"PATH": "/usr/bin:/bin", "ACRL_NODE_GPUS": "0", "ACRL_RAY_START_TIMEOUT": "1"})
    assert "this node has 0 GPUs (ACRL_NODE_GPUS), the spec's [cluster] gpus_per_node is 8" in joined.stderr.decode()
    assert not ran(tmp_path)
    for key_env in ("A}; touch MARKER; #", "1A", "A-B"):
        with pytest.raises(UnescapedValueError):
            _render.train_sh(attrs.evolve(spec, wandb=attrs.evolve(spec.wandb, key_env=key_env)), bundle.groups)
