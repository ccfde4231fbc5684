"""Integration profiles ([experiment] integration, compiler/_spec/profiles.py): the profile table against slime's own
defaults (tests/data/slime/<commit>/slime_defaults.json), each profile's argv as train.sh passes it, the notes,
the [agentcore] rules, spec-set keys winning over the profile, the bundle without a custom config, explain, the
schema and the train-sh importer's choice."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import attrs
import jsonschema
import pytest
import yaml

from acrl.compiler import SpecError, compile_spec, write
from acrl.compiler._importers.base import render_spec
from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler._pipeline.layers import load_spec
from acrl.compiler._pipeline.sweep import compile_points, sweep_points
from acrl.compiler._review.explain import explain_bundle, explain_path
from acrl.compiler._slime import default_facts
from acrl.compiler._spec import profiles
from acrl.compiler._spec.schema import spec_schema
from acrl.compiler._spec.tables import table_types
from conftest import KUBERAY_TABLE, MINIMAL, SLIME_DATA, SLIME_HEAD, SLIME_PIN, SpecWriter, merge

# overrides of MINIMAL (write_spec merges them; None removes [agentcore])
SLIME: dict[str, Any] = {"agentcore": None, "experiment": {"integration": "slime"}, "cluster": {"colocate": True}}
TOOLKIT_FLAGS = ("--rollout-function-path", "--custom-reward-post-process-path", "--custom-config-path",
                 "--sglang-tool-call-parser", "--eps-clip-high", "--attention-backend", "--sglang-log-level",
                 "--sglang-log-level-http", "--use-kl-loss", "--kl-loss-type", "--optimizer-cpu-offload",
                 "--megatron-to-hf-mode", "--sglang-mem-fraction-static", "--sglang-cuda-graph-max-bs",
                 "--use-dynamic-batch-size", "--max-tokens-per-gpu", "--input-key", "--sequence-parallel")


def defaults(commit: str) -> dict[str, dict[str, Any]]:
    return json.loads((SLIME_DATA / commit / "slime_defaults.json").read_text(encoding="utf-8"))["flags"]


def field(key: str) -> attrs.Attribute[Any]:
    table, name = key.split(".")
    return attrs.fields_dict(table_types()[table])[name]


def printed_argv(out: Path) -> list[str]:
    proc = subprocess.run(["bash", str(out / "train.sh")], cwd=out, capture_output=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "ACRL_PRINT_ARGV": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.decode().split("\0")


def compiled(write_spec: SpecWriter, data: dict[str, Any], out: Path, **kwargs: Any) -> tuple[Any, list[str]]:
    bundle = compile_spec(write_spec(data), **kwargs)
    write(bundle, out)
    return bundle, printed_argv(out)


def rules_of(write_spec: SpecWriter, data: dict[str, Any]) -> list[tuple[str, str, int | None]]:
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec(data))
    return [(d.rule, d.key, d.line) for d in info.value.diagnostics]


# --- the table against slime's code ---------------------------------------------------------------------------

@pytest.mark.parametrize("row", profiles.PROFILE, ids=lambda r: r.key)
def test_agentcore_values_are_the_field_defaults(row: profiles.ProfileValue) -> None:
    assert field(row.key).default == row.agentcore
    assert row.slime != row.agentcore


SLIME_ROWS = [r for r in profiles.PROFILE if r.owner == "slime" and r.key != "model.megatron_to_hf_mode"]


@pytest.mark.parametrize("row", SLIME_ROWS, ids=lambda r: r.key)
def test_slime_values_are_slimes_defaults_at_the_targeted_commit(row: profiles.ProfileValue) -> None:
    flag = field(row.key).metadata["flag"]
    fact = defaults(SLIME_HEAD)[flag]
    assert row.where.startswith(f"slime/utils/arguments.py:{fact['line']} ")  # the cited line is the add_argument
    if row.slime is None or row.slime is False:  # left out of the argv: slime's own default applies
        assert fact["default"] != row.agentcore and fact.get("action") in (None, "store_true")
        assert (row.slime is False) == (fact.get("action") == "store_true")
    else:
        assert fact["default"] == row.slime


def test_hf_mode_exists_only_at_the_pin_with_default_raw() -> None:
    assert "--megatron-to-hf-mode" not in defaults(SLIME_HEAD)
    fact = defaults(SLIME_PIN)["--megatron-to-hf-mode"]
    assert fact["default"] == "raw" and f"arguments.py:{fact['line']} " in profiles.by_key()[
        "model.megatron_to_hf_mode"].where


def test_every_other_slime_flag_key_agrees_with_slime_or_is_kept_on_purpose() -> None:
    """Every spec key with a slime-owned flag: acrl's default is slime's (or leaves the flag out), or the profile
    table or KEPT says why not."""
    facts, table = defaults(SLIME_HEAD), profiles.by_key()
    for name, cl in table_types().items():
        for f in attrs.fields(cl):
            flag, key = f.metadata.get("flag"), f"{name}.{f.name}"
            if not flag or flag not in facts or key in table or key in profiles.KEPT:
                continue
            default = f.default
            left_out = default is None or default is False or default == f.metadata.get("omit_if") or \
                isinstance(default, attrs.Factory)  # type: ignore[arg-type]
            assert left_out or default == facts[flag]["default"], (key, default, facts[flag]["default"])


def test_generated_defaults_name_their_commit() -> None:
    for commit in (SLIME_HEAD, SLIME_PIN):
        provenance = json.loads((SLIME_DATA / commit / "slime_defaults.json").read_text())["provenance"]
        assert provenance["commit"] == commit
        assert provenance["generator"] == (f"{default_facts.GENERATOR} SLIME_DIR --commit {commit} -o "
                                           f"tests/data/slime/{commit}")


def test_parse_defaults_reads_literals_actions_and_lines() -> None:
    source = ('p.add_argument("--a", type=int, default=3)\n'
              'p.add_argument("--b", action="store_true")\n'
              'p.add_argument("--c", "--cc", default=os.environ.get("X"))\n'
              'p.add_argument("--a", default=4)\n'
              'p.add_argument("positional")\n'
              # slime resets Megatron's defaults (624b824 slime/utils/arguments.py:19-32, --lr at :880)
              'reset_arg(p, "--lr", type=float, default=1e-6)\n'
              'reset_arg(\n    p,\n    "--async-save",\n    action="store_true",\n)\n')
    assert default_facts.parse_defaults(source) == {
        "--a": {"line": 1, "aliases": [], "default": 3, "type": "int", "also": [4]},
        "--b": {"line": 2, "aliases": [], "action": "store_true", "default": False},
        "--c": {"line": 3, "aliases": ["--cc"], "expression": "os.environ.get('X')"},
        "--lr": {"line": 6, "aliases": [], "via": "reset_arg", "default": 1e-6, "type": "float"},
        "--async-save": {"line": 7, "aliases": [], "via": "reset_arg", "action": "store_true", "default": False},
    }


def test_slimes_resets_of_megatron_defaults_are_read() -> None:
    """slime 624b824 slime/utils/arguments.py:880 reset_arg(parser, "--lr", type=float, default=1e-6), :877 --seed."""
    facts = defaults(SLIME_HEAD)
    assert (facts["--lr"]["line"], facts["--lr"]["default"], facts["--lr"]["via"]) == (880, 1e-6, "reset_arg")
    assert (facts["--seed"]["line"], facts["--seed"]["default"]) == (877, 1234)
    assert facts["--micro-batch-size"]["default"] == 1 and facts["--custom-config-path"]["default"] is None


# --- each profile's argv -----------------------------------------------------------------------------------------

def test_slime_profile_passes_none_of_the_toolkit_defaults(write_spec: SpecWriter, tmp_path: Path) -> None:
    bundle, argv = compiled(write_spec, SLIME, tmp_path / "b")
    assert not [f for f in TOOLKIT_FLAGS if f in argv]
    for flag, value in (("--tensor-model-parallel-size", "1"), ("--rollout-num-gpus-per-engine", "1"),
                        ("--n-samples-per-prompt", "1")):
        assert argv[argv.index(flag) + 1] == value
    assert "custom_config.yaml" not in bundle.files and not (tmp_path / "b" / "custom_config.yaml").exists()
    assert "custom-config" not in bundle.files["train.sh"].decode()
    spec_toml = tomllib.loads(bundle.files["spec.toml"].decode())
    assert spec_toml["experiment"]["integration"] == "slime" and "agentcore" not in spec_toml


def test_agentcore_profile_is_the_toolkits_recipe(write_spec: SpecWriter, tmp_path: Path) -> None:
    bundle, argv = compiled(write_spec, {}, tmp_path / "b")
    assert set(TOOLKIT_FLAGS) <= set(argv)
    assert argv[argv.index("--custom-config-path") + 1] == "custom_config.yaml"
    assert "integration" not in tomllib.loads(bundle.files["spec.toml"].decode())["experiment"]  # as before profiles


def test_custom_profile_passes_only_the_users_functions(write_spec: SpecWriter, tmp_path: Path) -> None:
    data = merge(SLIME, {"experiment": {"integration": "custom"}, "rollout": {"custom_rm_path": "my.rm.score"}})
    _, argv = compiled(write_spec, data, tmp_path / "b")
    assert argv[argv.index("--custom-rm-path") + 1] == "my.rm.score"
    assert not [f for f in TOOLKIT_FLAGS if f in argv]


# --- notes, and keys the spec sets -------------------------------------------------------------------------------

def test_notes_list_every_value_the_profile_supplied(write_spec: SpecWriter) -> None:
    bundle = compile_spec(write_spec(merge(SLIME, {"sglang": {"tool_call_parser": "glm45"}})))
    noted = [n.split(" = ", 1)[0] for n in bundle.notes if "integration profile's default" in n]
    supplied = [r.key for r in profiles.PROFILE if r.key not in ("cluster.colocate", "sglang.tool_call_parser")]
    assert noted == supplied
    custom = compile_spec(write_spec(merge(SLIME, {"experiment": {"integration": "custom"},
                                                   "rollout": {"custom_rm_path": "my.rm.score"}})))
    assert [n.split(" = ", 1)[0] for n in custom.notes if "custom integration profile's default" in n] == \
        [r.key for r in profiles.PROFILE if r.key != "cluster.colocate"]


def test_agentcore_is_the_baseline_no_note_and_documented_defaults(write_spec: SpecWriter) -> None:
    """The agentcore profile's values are the keys' documented defaults: the compile notes none of them (an existing
    spec's output is unchanged), explain shows them as "default" and the argv origin is the key."""
    path = write_spec({})
    bundle = compile_spec(path)
    assert not [n for n in bundle.notes if "integration profile" in n]
    keys = {i.name: i for i in explain_path(path).keys}
    kinds = {r.key: keys[r.key].origin.kind for r in profiles.PROFILE}
    assert "profile" not in kinds.values() and kinds["sglang.tool_call_parser"] == kinds["parallel.tensor"] == "default"
    assert keys["sglang.tool_call_parser"].origin.text == "default"
    origins = {a.flag: a.source for g in bundle.groups for a in g.args}
    assert origins["--tensor-model-parallel-size"].kind == "key"
    assert origins["--sglang-tool-call-parser"].text == "sglang.tool_call_parser"


def test_a_key_the_spec_sets_wins_over_the_profile(write_spec: SpecWriter, tmp_path: Path) -> None:
    base = tmp_path / "base.toml"
    base.write_text('[train]\nattention_backend = "fused"\n', encoding="utf-8")
    data = merge(SLIME, {"extends": str(base), "sglang": {"tool_call_parser": "glm45"}})
    bundle = compile_spec(write_spec(data), overrides=("algorithm.eps_clip_high=0.3",))
    argv = bundle.argv()
    assert argv[argv.index("--sglang-tool-call-parser") + 1] == "glm45"  # the file
    assert argv[argv.index("--attention-backend") + 1] == "fused"  # through extends
    assert argv[argv.index("--eps-clip-high") + 1] == "0.3"  # --set
    origins = {a.flag: a.source.kind for g in bundle.groups for a in g.args}
    assert origins["--sglang-tool-call-parser"] == "key" and origins["--tensor-model-parallel-size"] == "profile"


# --- [agentcore] and the rules -----------------------------------------------------------------------------------

def test_agentcore_table_is_refused_with_slime_at_its_line(write_spec: SpecWriter) -> None:
    data = merge(SLIME, {"agentcore": MINIMAL["agentcore"]})
    path = write_spec(data)
    line = path.read_text().splitlines().index("[agentcore]") + 1
    found = rules_of(write_spec, data)
    assert [(rule, line) for rule, _, line in found] == [("ACRL-I002", line)]


def test_agentcore_table_is_required_by_default(write_spec: SpecWriter) -> None:
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec({"agentcore": None}))
    (d,) = info.value.diagnostics
    assert d.rule == "ACRL-I001" and 'integration = "slime"' in d.hint


def test_optional_agentcore_is_still_a_table_to_ranges_set_and_sweeps(write_spec: SpecWriter, tmp_path: Path) -> None:
    """[agentcore] is ``AgentCore | None`` now: its keys keep their bounds, --set, a sweep and did-you-mean."""
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec({"agentcore": {"timeout": 0}}))
    assert [(d.key, d.line is not None) for d in info.value.diagnostics] == [("agentcore.timeout", True)]
    bundle = compile_spec(write_spec({}), overrides=("agentcore.timeout=901",))
    assert bundle.spec.agentcore is not None and bundle.spec.agentcore.timeout == 901
    with pytest.raises(SpecError) as info:
        compile_spec(write_spec({}), overrides=("agentcore.timout=901",))
    assert 'did you mean "timeout"' in info.value.diagnostics[0].hint
    source, points = sweep_points(load_spec(write_spec({"sweep": {"grid": {"agentcore.max_concurrent": [10, 20]}}})))
    swept = [r.bundle for r in compile_points(source, points)]
    assert [b.spec.agentcore.max_concurrent for b in swept] == [10, 20]  # type: ignore[union-attr]


def test_custom_needs_one_of_its_functions(write_spec: SpecWriter) -> None:
    assert [r for r, _, _ in rules_of(write_spec, merge(SLIME, {"experiment": {"integration": "custom"}}))] == \
        ["ACRL-I003"]


# --- kuberay, explain, schema ------------------------------------------------------------------------------------

def test_kuberay_bundle_of_a_slime_run_has_no_config_map(write_spec: SpecWriter) -> None:
    bundle = compile_spec(write_spec(merge(SLIME, {"kuberay": KUBERAY_TABLE})), target="kuberay")
    docs = list(yaml.safe_load_all(bundle.files["rayjob.yaml"]))
    assert [d["kind"] for d in docs] == ["RayJob"]
    job = docs[0]["spec"]
    assert "--custom-config-path" not in job["entrypoint"]
    head = job["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    assert [v["name"] for v in head["volumes"]] == ["dshm", "models", "data"]


def test_explain_shows_profile_values(write_spec: SpecWriter, tmp_path: Path) -> None:
    path = write_spec(SLIME)
    item = explain_path(path).select("sglang.tool_call_parser").keys[0]
    assert item.origin.kind == "profile" and "slime integration profile" in item.origin.text
    write(compile_spec(path), tmp_path / "b")
    explained = explain_bundle(tmp_path / "b")
    assert explained.select("sglang.tool_call_parser").keys[0].origin.kind == "profile"
    assert not [f for f in explained.flags if f.name == "--custom-config-path"]
    tp = explained.select("--tensor-model-parallel-size").flags[0]
    assert tp.origin.kind == "bundle"  # spec.toml writes the profile's 1, so the bundle holds it


def test_schema_requires_agentcore_only_for_agentcore() -> None:
    validator = jsonschema.Draft202012Validator(spec_schema())
    slime = merge(MINIMAL, SLIME)
    assert not list(validator.iter_errors(slime))
    assert list(validator.iter_errors(merge(slime, {"agentcore": MINIMAL["agentcore"]})))
    assert list(validator.iter_errors(merge(MINIMAL, {"agentcore": None})))
    assert not list(validator.iter_errors(MINIMAL))
    assert not list(validator.iter_errors(merge(MINIMAL, {"extends": "base.toml", "agentcore": None})))


# --- acrl import train-sh ----------------------------------------------------------------------------------------

SUBMIT = "ray job submit --address=http://127.0.0.1:8265 -- python3 /root/slime/train.py --hf-checkpoint /m " \
         "--prompt-data /d.jsonl --rollout-batch-size 4 --n-samples-per-prompt 2 --global-batch-size 8 "


@pytest.mark.parametrize(("flags", "integration"), [
    ("", "slime"),
    ("--rollout-function-path my.rollout.generate", "custom"),
    ("--custom-rm-path my.rm.score", "custom"),
    (f"--rollout-function-path {profiles.TOOLKIT_ROLLOUT}", "agentcore"),
])
def test_import_chooses_the_profile(flags: str, integration: str, tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(f"source scripts/models/qwen3-4B.sh\n{SUBMIT}{flags}\n", encoding="utf-8")
    imported = import_train_sh(path)
    assert imported.spec.get("experiment", {}).get("integration", "agentcore") == integration
    assert "agentcore" not in imported.spec
    passes = {n.message.split()[5].rstrip(":") for n in imported.notes
              if n.message.startswith("the script does not pass")}
    if integration == "agentcore":
        assert {"--sglang-tool-call-parser", "--eps-clip-high", "--attention-backend"} <= passes
    else:
        assert not passes & {"--sglang-tool-call-parser", "--eps-clip-high", "--attention-backend", "--lr-decay-style"}
        assert tomllib.loads(render_spec(imported))["experiment"]["integration"] == integration


def test_spec_md_lists_every_key_of_the_profile_table() -> None:
    text = (Path(__file__).parent.parent / "docs" / "spec.md").read_text(encoding="utf-8")
    section = text.split("## Integration profiles", 1)[1].split("\n## ", 1)[0]
    for row in profiles.PROFILE:
        assert f"| `{row.key}` |" in section, row.key
    for key in profiles.KEPT:
        assert f"- `{key}`:" in section, key
