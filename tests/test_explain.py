"""`acrl explain SPEC|BUNDLE [KEY]`: the origin and documentation of every resolved value and every
slime flag, on the example specs, their golden bundles, and broken bundles."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from acrl.compiler import UsageError, read_spec
from acrl.compiler._cli.main import acrl_main
from acrl.compiler._pipeline.compile import WRITTEN_WHEN_SET
from acrl.compiler._review.explain import Explanation, Item, explain_bundle, explain_path, explain_spec
from acrl.compiler._review.view import read_view
from acrl.compiler._spec import profiles
from conftest import EXAMPLE_SPECS, REPO, SpecWriter

GOLDEN = REPO / "tests" / "golden"
PAIRS = [(spec, GOLDEN / spec.stem) for spec in EXAMPLE_SPECS]
MULTITURN = REPO / "specs" / "qwen3-4b-multiturn.toml"
ids = [spec.stem for spec in EXAMPLE_SPECS]


def flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Dotted keys of spec.toml; a table of the spec is always a prefix, an empty [model.args] a value."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and (value or not prefix):
            out.update(flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def by_name(items: tuple[Item, ...]) -> dict[str, Item]:
    return {i.name: i for i in items}


def train_sh_flags(bundle: Path) -> dict[str, tuple[str, ...]]:
    """Every flag train.sh gives slime (MODEL_ARGS and SLIME_ARGS), read as `acrl diff` reads it."""
    view = read_view(str(bundle), {p.name: p.read_bytes() for p in bundle.iterdir()})
    return {**dict(view.model_args), **{flag: f.values for flag, f in view.flags.items()}}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = acrl_main(["explain", *argv])
    out, err = capsys.readouterr()
    return code, out, err


# --- every value of the resolved spec ------------------------------------------------------------


@pytest.mark.parametrize(("spec", "bundle"), PAIRS, ids=ids)
def test_every_resolved_value_is_explained(spec: Path, bundle: Path) -> None:
    explained = explain_path(spec)
    resolved = flatten(tomllib.loads((bundle / "spec.toml").read_text(encoding="utf-8")))
    keys = by_name(explained.keys)
    # spec.toml leaves out the keys added since the first bundles while they hold their default (integration =
    # "agentcore", an empty [cluster] env, ...): a bundle compiled before they existed reads the same
    for table, defaults in WRITTEN_WHEN_SET.items():
        for key, default in defaults.items():
            assert (f"{table}.{key}" in resolved) == (keys[f"{table}.{key}"].value != default)
            resolved.setdefault(f"{table}.{key}", default)
    assert {name: item.value for name, item in keys.items() if item.value is not None} == resolved
    assert all(item.doc for item in explained.keys)


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=ids)
def test_a_written_value_points_at_its_line_and_the_others_are_defaults_or_derived(spec: Path) -> None:
    source = read_spec(spec)
    lines = source.text.splitlines()
    explained = explain_spec(source).keys
    integration = by_name(explained)["experiment.integration"].value
    supplied = {key for key in profiles.by_key() if tuple(key.split(".")) not in source.positions}
    for item in explained:
        path = tuple(item.name.split(".", 2)) if item.name.startswith(("model.args.", "model.overrides.")) \
            else tuple(item.name.split("."))
        if path in source.positions and item.origin.kind == "spec":
            assert item.origin.file == str(spec) and item.origin.text == f"{spec} line {item.origin.line}"
            assert item.origin.line is not None
            assert lines[item.origin.line - 1].lstrip().startswith((path[-1], f'"{path[-1]}"', "["))
        elif integration != "agentcore" and item.name in supplied:  # the slime or custom profile's value
            assert item.origin.kind == "profile", item
            assert item.origin.text.startswith(f"default of the {integration} integration profile (")
        else:  # agentcore's values are the keys' documented defaults
            assert item.origin.kind in ("default", "derived"), item
            assert path not in source.positions or item.origin.kind == "derived"


def test_origins_on_the_multiturn_example() -> None:
    keys = by_name(explain_path(MULTITURN).keys)
    assert keys["rollout.batch_size"].origin.text == f"{MULTITURN} line 45"
    assert keys["rollout.batch_size"].related == ("--rollout-batch-size", "--global-batch-size")
    assert keys["rollout.gpus_per_engine"].origin.kind == "default"
    assert keys["model.args.num-layers"].origin.line == 25
    assert keys["eval.datasets.tools"].origin.line == 67
    assert keys["model.ref_load"].origin.text == "derived by the compiler: defaults to model.dir"
    assert keys["model.args_source"].value == "args" and keys["model.args_source"].origin.kind == "derived"
    assert keys["model.megatron_to_hf_mode"].value == "bridge"
    assert keys["agentcore.timeout"].note == "written to custom_config.yaml as acr_timeout"
    assert keys["rollout.top_p"].value is None and keys["rollout.top_p"].origin.text == "default: unset"
    assert keys["rollout.top_p"].note == "--rollout-top-p is not passed while the key is unset: slime's own default " \
                                         "applies"
    assert keys["parallel.pipeline"].note == "--pipeline-model-parallel-size is not passed: 1 is what slime does " \
                                             "without it"
    assert keys["algorithm.use_tis"].note == "--use-tis is not passed: false leaves a store-true flag out"


def test_a_value_written_as_auto_says_where_and_what_it_resolved_to(write_spec: SpecWriter) -> None:
    path = write_spec({"model": {"args_source": "auto", "megatron_to_hf_mode": "auto"}})
    keys = by_name(explain_path(path).keys)
    origin = keys["model.args_source"].origin
    assert origin.kind == "derived" and origin.line is not None
    assert origin.text.endswith(f"({path} line {origin.line} wrote \"auto\")")


@pytest.mark.parametrize("bundle", [b for _, b in PAIRS], ids=ids)
def test_every_custom_config_key_is_named_by_the_key_it_comes_from(bundle: Path) -> None:
    explained = explain_bundle(bundle)
    keys = explained.keys
    if by_name(keys)["experiment.integration"].value != "agentcore":  # no custom config: no key is written to one
        assert not (bundle / "custom_config.yaml").exists() and "--custom-config-path" not in by_name(explained.flags)
        assert not [i for i in keys if "custom_config.yaml" in i.note]
        return
    config = yaml.safe_load((bundle / "custom_config.yaml").read_text(encoding="utf-8"))
    written = {i.note.removeprefix("written to custom_config.yaml as "): i.value for i in keys
               if i.note.startswith("written to custom_config.yaml")}
    assert written == config


# --- every slime flag of train.sh ------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "bundle"), PAIRS, ids=ids)
def test_every_flag_in_train_sh_is_explained_with_its_value(spec: Path, bundle: Path) -> None:
    for explained in (explain_path(spec), explain_path(bundle)):
        flags = {i.name: i.value for i in explained.flags}
        assert flags == train_sh_flags(bundle)
        assert all(i.doc and i.origin.text for i in explained.flags)


def test_global_batch_size_is_derived_from_the_batch_keys_and_their_lines() -> None:
    (item,) = explain_path(MULTITURN).select("--global-batch-size").flags
    assert item.value == ("64",) and item.origin.kind == "derived"
    assert item.related == ("rollout.batch_size", "rollout.n_samples_per_prompt", "train.num_steps_per_rollout")
    assert item.sources == (f"rollout.batch_size = 16 ({MULTITURN} line 45)",
                            f"rollout.n_samples_per_prompt = 8 ({MULTITURN} line 46)",
                            f"train.num_steps_per_rollout = 2 ({MULTITURN} line 56)")
    assert item.doc.startswith("Samples per optimizer step")


def test_flag_origins_name_their_key_and_its_origin() -> None:
    flags = by_name(explain_path(MULTITURN).flags)
    assert flags["--rollout-batch-size"].origin.text == f"rollout.batch_size ({MULTITURN} line 45)"
    assert flags["--colocate"].origin.text == "cluster.colocate (default)"
    assert flags["--num-layers"].origin.text == f"model args source 'args': model.args.num-layers ({MULTITURN} line 25)"
    assert flags["--eval-prompt-data"].related == ("eval.datasets.gsm8k", "eval.datasets.tools")
    assert flags["--wandb-project"].origin.kind == "runtime" and "only when $WANDB_API_KEY is set" in \
        flags["--wandb-project"].origin.text
    assert flags["--custom-config-path"].group == "added by train.sh at run time"


def test_catalog_model_args_and_overrides(write_spec: SpecWriter) -> None:
    model = {"type": "qwen3-4B", "dir": "/models/Qwen3-4B", "args": None, "overrides": {"rotary-base": 500000}}
    path = write_spec({"model": model, "parallel": {"tensor": 4}})
    explained = explain_path(path)
    flags = by_name(explained.flags)
    assert flags["--num-layers"].origin.text == "model args source 'catalog': acrl catalog: qwen3-4B (Qwen/Qwen3-4B)"
    assert "config.json field num_hidden_layers" in flags["--num-layers"].doc
    assert flags["--rotary-base"].value == ("500000",)
    assert flags["--rotary-base"].origin.text.startswith("model.overrides.rotary-base (" + str(path) + " line ")
    assert by_name(explained.keys)["model.args_source"].value == "catalog"


def test_extra_flags_and_args(write_spec: SpecWriter) -> None:
    path = write_spec({"extra": {"flags": {"--sglang-enable-metrics": True}, "args": ["--log-interval", "1"]}})
    flags = by_name(explain_path(path).flags)
    assert flags["--sglang-enable-metrics"].related == ("extra.flags.--sglang-enable-metrics",)
    assert "escape hatch" in flags["--sglang-enable-metrics"].doc
    assert flags["--log-interval"].value == ("1",) and flags["--log-interval"].related == ("extra.args",)


# --- a bundle: its resolved spec.toml ----------------------------------------------------------------


@pytest.mark.parametrize("bundle", [b for _, b in PAIRS], ids=ids)
def test_a_bundle_is_explained_from_its_resolved_spec_toml(bundle: Path) -> None:
    explained = explain_bundle(bundle)
    lines = (bundle / "spec.toml").read_text(encoding="utf-8").splitlines()
    assert explained.kind == "bundle"
    assert explained.notes[0] == f"values are those of {bundle}/spec.toml, the spec as acrl resolved it when it " \
                                 f"compiled {bundle.name}.toml"
    integration = by_name(explained.keys)["experiment.integration"].value
    for item in explained.keys:
        if item.value is None and integration != "agentcore" and item.name in profiles.by_key():
            assert item.origin.kind == "profile", item  # the slime or custom profile left it unset
            continue
        if item.value is None:  # TOML has no null: an unset key is not in spec.toml
            assert item.origin.text == "default: unset"
            continue
        table, _, key = item.name.partition(".")
        if item.value == WRITTEN_WHEN_SET.get(table, {}).get(key, ...):  # spec.toml leaves these defaults out
            assert item.origin.text == "default"
            continue
        assert item.origin.kind == "bundle", item
        assert item.origin.text == f"bundle {bundle}/spec.toml line {item.origin.line}"
        assert item.origin.line is not None
        leaf = item.name.split(".")[-1] if not item.name.startswith(("model.args.", "extra.flags.")) \
            else item.name.split(".", 2)[-1]
        assert lines[item.origin.line - 1].startswith((leaf, f'"{leaf}"', "[")), (item.name, item.origin.line)


@pytest.mark.parametrize(("spec", "bundle"), PAIRS, ids=ids)
def test_a_spec_and_its_bundle_explain_the_same_values(spec: Path, bundle: Path) -> None:
    a, b = explain_path(spec), explain_path(bundle)
    assert [(i.name, i.value) for i in a.keys] == [(i.name, i.value) for i in b.keys]
    assert [(i.name, i.value) for i in a.flags] == [(i.name, i.value) for i in b.flags]


@pytest.fixture
def bundle_copy(tmp_path: Path) -> Path:
    out = tmp_path / "qwen3-4b-multiturn"
    shutil.copytree(GOLDEN / "qwen3-4b-multiturn", out)
    return out


def test_a_hand_edited_train_sh_is_explained_as_it_is(bundle_copy: Path) -> None:
    train = bundle_copy / "train.sh"
    text = train.read_text(encoding="utf-8")
    text = text.replace("  --rollout-batch-size 16\n", "  --rollout-batch-size 17\n  --foo bar\n")
    train.write_text(text.replace("  --eps-clip-high 0.28\n", ""), encoding="utf-8")
    explained = explain_bundle(bundle_copy)
    flags = by_name(explained.flags)
    assert flags["--rollout-batch-size"].value == ("17",) and flags["--rollout-batch-size"].origin.kind == "unknown"
    assert flags["--foo"].origin.text == f"{train} only: not from spec.toml"
    assert "--eps-clip-high" not in flags
    assert f"{bundle_copy} does not match its manifest (train.sh): it was changed after it was compiled" in \
        explained.notes
    assert f"{train} passes --rollout-batch-size 17, spec.toml gives --rollout-batch-size 16" in explained.notes
    assert f"{train} does not pass --eps-clip-high, which spec.toml gives" in explained.notes
    assert explained.notes[-1].startswith("so train.sh is not what spec.toml compiles to: hand-edited?")


def test_missing_files_are_noted_or_refused(bundle_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (bundle_copy / "model_args.sh").unlink()
    (bundle_copy / "train.sh").unlink()
    explained = explain_bundle(bundle_copy)
    assert not [i for i in explained.flags if i.group.startswith("model architecture")]
    assert any(n.startswith(f"{bundle_copy}/model_args.sh is missing: no MODEL_ARGS") for n in explained.notes)
    assert any(n.startswith(f"{bundle_copy}/train.sh is missing: its flags are shown as spec.toml gives them")
               for n in explained.notes)
    (bundle_copy / "spec.toml").unlink()
    code, out, err = run(capsys, str(bundle_copy))
    assert (code, out) == (2, "")
    assert err == f"{bundle_copy}: is not an acrl bundle: it has no spec.toml\n  fix: give a bundle directory " \
                  "written by acrl-compile (e.g. bundles/<exp_id>) or a spec file (.toml)\n"


def test_a_truncated_spec_toml_is_an_invalid_spec(bundle_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = bundle_copy / "spec.toml"
    spec.write_bytes(spec.read_bytes()[:200])
    code, out, err = run(capsys, str(bundle_copy))
    assert (code, out) == (1, "")
    assert err.startswith(f"{spec}:") and "Nothing after a syntax error is read" in err and "Traceback" not in err


def test_a_bundle_made_by_another_acrl_version_says_so(bundle_copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = bundle_copy / "manifest.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["acrl_version"] = "0.0.1"
    manifest.write_text(json.dumps(data), encoding="utf-8")
    assert "the bundle was made by acrl 0.0.1; this is acrl 0.1.0, which explains its spec.toml as it compiles it " \
           "now" in explain_bundle(bundle_copy).notes
    spec = bundle_copy / "spec.toml"
    spec.write_text(spec.read_text(encoding="utf-8").replace("[train]", "[train]\nold_key = 1"), encoding="utf-8")
    code, _, err = run(capsys, str(bundle_copy))
    assert code == 1 and "the bundle was made by acrl 0.0.1; this is acrl 0.1.0" in err  # the golden wording
    code, out, _ = run(capsys, str(bundle_copy), "--json")
    diagnostics = json.loads(out)["error"]["diagnostics"]
    assert code == 1 and [(d["file"], d["key"]) for d in diagnostics] == [(str(spec), "train.old_key"), (str(spec), "")]
    assert diagnostics[0]["line"] is not None and diagnostics[1]["line"] is None


# --- KEY ---------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def multiturn() -> Explanation:
    return explain_path(MULTITURN)


@pytest.mark.parametrize(("key", "keys", "flags"), [
    ("rollout.batch_size", ["rollout.batch_size"], []),
    ("--global-batch-size", [], ["--global-batch-size"]),
    ("global-batch-size", [], ["--global-batch-size"]),
    ("lr", [], ["--lr"]),
    ("eval.datasets", ["eval.datasets.gsm8k", "eval.datasets.tools"], []),
    ("model.args.num-layers", ["model.args.num-layers"], []),
    ("wandb", ["wandb.enabled", "wandb.project", "wandb.group", "wandb.key_env"], []),
])
def test_select_one_key_table_or_flag(multiturn: Explanation, key: str, keys: list[str], flags: list[str]) -> None:
    selected = multiturn.select(key)
    assert [i.name for i in selected.keys] == keys and [i.name for i in selected.flags] == flags


@pytest.mark.parametrize(("key", "suggestion"), [
    ("rollout.batch_sise", "did you mean rollout.batch_size"),
    ("batch_size", "did you mean rollout.batch_size?"),
    ("n_samples_per_prompt", "did you mean eval.n_samples_per_prompt or rollout.n_samples_per_prompt?"),
    ("--global-batch-sise", "did you mean --global-batch-size"),
    ("zzz", "run `acrl explain"),
])
def test_an_unknown_key_is_a_usage_error_with_a_suggestion(multiturn: Explanation, key: str, suggestion: str) -> None:
    with pytest.raises(UsageError) as info:
        multiturn.select(key)
    assert info.value.exit_code == 2 and suggestion in str(info.value)
    assert str(info.value).startswith(f"{MULTITURN}: {key!r} is not a ")


# --- the command -------------------------------------------------------------------------------------


def test_cli_prints_every_value_and_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(MULTITURN))
    assert (code, err) == (0, "")
    first = out.splitlines()[0]
    assert first.startswith(f"# acrl explain {MULTITURN}: ") and first.endswith(" slime flags of the spec")
    assert "\nrollout.batch_size = 16\n    origin: " + f"{MULTITURN} line 45\n" in out
    assert "\n--global-batch-size 64\n    origin: derived by the compiler: rollout.batch_size x " in out


def test_cli_one_flag_as_key_and_json_anywhere(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(MULTITURN), "--global-batch-size")
    assert code == 0 and "    from: rollout.batch_size = 16" in out and "## spec values" not in out
    for argv in ([str(MULTITURN), "--global-batch-size", "--json"], ["--json", str(MULTITURN), "--global-batch-size"],
                 [str(MULTITURN), "--", "--global-batch-size", "--json"]):
        code, out, _ = run(capsys, *argv)
        data = json.loads(out)
        assert code == 0 and data["ok"] and data["kind"] == "spec" and data["keys"] == []
        (flag,) = data["flags"]
        assert flag["name"] == "--global-batch-size" and flag["value"] == ["64"] and flag["origin"]["kind"] == "derived"


def test_cli_unknown_key_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(MULTITURN), "rollout.batch_sise")
    assert (code, out) == (2, "") and "fix: did you mean rollout.batch_size" in err  # the golden wording
    code, out, _ = run(capsys, str(MULTITURN), "rollout.batch_sise", "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["kind"] == "UsageError" and "rollout.batch_size" in error["hint"]
    assert err == f"{error['message']}\n" and error["message"].endswith(f"\n  fix: {error['hint']}")


def test_cli_two_keys_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(MULTITURN), "rollout.batch_size", "train.lr", "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["kind"] == "UsageError" and error["hint"] and "diagnostics" not in error


def test_cli_invalid_spec_exits_1_and_a_missing_one_2(write_spec: SpecWriter, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec({"rollout": {"batch_size": 0}})
    code, out, err = run(capsys, str(spec))
    assert (code, out) == (1, "") and err.startswith(f"{spec}:") and ": error: [rollout] batch_size: " in err
    code, out, _ = run(capsys, str(spec), "--json")
    assert code == 1 and [d["key"] for d in json.loads(out)["error"]["diagnostics"]] == ["rollout.batch_size"]
    code, out, _ = run(capsys, str(tmp_path / "nope.toml"), "--json")
    error = json.loads(out)["error"]  # the command line names no file: a usage error
    assert (code, error["kind"]) == (2, "UsageError")
    assert error["message"].startswith(f"{tmp_path / 'nope.toml'}: no such spec file or bundle directory\n")


def test_cli_bundle_json(capsys: pytest.CaptureFixture[str]) -> None:
    bundle = GOLDEN / "gsm8k-qwen2.5-3b-smoke"
    code, out, _ = run(capsys, str(bundle), "rollout.batch_size", "--json")
    data = json.loads(out)
    assert code == 0 and data["kind"] == "bundle" and data["subject"] == str(bundle)
    (key,) = data["keys"]
    assert key["value"] == 32 and key["origin"]["kind"] == "bundle" and key["origin"]["file"] == f"{bundle}/spec.toml"
    assert key["flags"] == ["--rollout-batch-size", "--global-batch-size"]


def test_warnings_are_noted(write_spec: SpecWriter) -> None:
    assert explain_path(write_spec()).notes == ()
    notes = explain_path(write_spec({"agentcore": {"max_concurrent": 200}})).notes
    assert any(n.startswith("warning: [agentcore] max_concurrent: max_pool_connections 100 < max_concurrent 200")
               for n in notes)


@pytest.mark.parametrize("fraction", [0.0, 0.3, 0.7])
@pytest.mark.parametrize("name", ["spec.toml", "train.sh", "model_args.sh", "manifest.json", "custom_config.yaml"])
def test_a_truncated_file_never_makes_an_internal_error(bundle_copy: Path, capsys: pytest.CaptureFixture[str],
                                                       name: str, fraction: float) -> None:
    path = bundle_copy / name
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * fraction)])
    code, out, err = run(capsys, str(bundle_copy))
    assert code in (0, 1), err
    assert "internal error" not in err and "Traceback" not in err
    if code == 0:
        assert f"{bundle_copy} does not match its manifest ({name})" in out or \
            f"{bundle_copy} cannot be verified" in out
    else:
        assert name == "spec.toml" and err.startswith(f"{bundle_copy}/spec.toml")


def test_a_forged_derived_section_is_noted(bundle_copy: Path) -> None:
    """The manifest's derived section is not covered by a file hash: explain checks it against spec.toml."""
    manifest_path = bundle_copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    manifest["derived"]["global_batch_size"] = 999
    manifest_path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    explained = explain_bundle(bundle_copy)
    assert f"{bundle_copy} does not match its manifest (its derived section): it was changed after it was " \
        "compiled" in explained.notes


@pytest.mark.parametrize("word", ["--help", "-h"])
def test_help_after_the_target_is_help_not_a_key(word: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(GOLDEN / "gsm8k-qwen2.5-3b-smoke"), word)
    assert code == 0 and out.startswith("usage: acrl explain") and err == ""


# --- slime's placement, with the [cluster] keys ------------------------------------------------------


@pytest.mark.parametrize(("spec", "bundle"), PAIRS, ids=ids)
def test_the_placement_is_summarised_with_the_cluster_keys(spec: Path, bundle: Path) -> None:
    a, b = explain_path(spec), explain_path(bundle)
    assert a.placement == b.placement and a.placement
    assert any(line.startswith("slime's placement group: ") and "(rollout offset " in line for line in a.placement)
    assert any(line.startswith("head: ") for line in a.placement)
    text = a.format()
    cluster = text.split("\n[cluster]\n", 1)[1]
    assert cluster.startswith("# slime's placement of these keys (`acrl layout` draws it per GPU):\n#   cluster: ")
    assert explain_path(spec).select("cluster.rollout_num_gpus").placement == a.placement
    selected = a.select("rollout.batch_size")
    assert selected.placement == () and "slime's placement" not in selected.format()


def test_the_placement_names_the_defaults_acrl_supplied(write_spec: SpecWriter,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec({"cluster": {"num_nodes": 2, "colocate": False, "rollout_num_gpus": 8}})
    code, out, _ = run(capsys, str(spec), "cluster", "--json")
    placement = json.loads(out)["placement"]
    assert code == 0
    assert "head: node 0, a local Ray head: ray start --head --num-gpus 8" in placement
    assert "node 1: joins the head with ray start --num-gpus 8" in placement
    assert "default: [cluster] actor_num_nodes = 1, actor_num_gpus_per_node = 8: the nodes the rollout leaves" \
        in placement
