"""Render, then read: every name that acrl.templates.train_sh_structure declares readable in train.sh
and model_args.sh reads back (through acrl.compiler._review.view, the one shell lexer underneath) as
exactly what the compiler put into the template, over the template's branches (colocate or not, W&B
key variable and flags, custom config, KubeRay or local, CUDA pinned, model args from the catalog or
frozen in the spec, extends, a cluster address, no local head, [extra] args, [env]) and every example
spec, with hostile text in the free-form values."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs
import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acrl.compiler import compile_spec
from acrl.compiler._pipeline import render
from acrl.compiler._pipeline.compile import Bundle
from acrl.compiler._review.shell_files import FORWARDED, flag_occurrences
from acrl.compiler._review.view import SOURCE_CHECKPOINT, bash_arrays, read_view, with_checkpoint_sh
from acrl.templates import train_sh_structure as structure
from conftest import KUBERAY_TABLE, MINIMAL, NO_FACTS, merge

REPO = Path(__file__).resolve().parent.parent


def compile_and_capture(path: Path, target: str = "ray") -> tuple[Bundle, dict[str, dict[str, Any]]]:
    """The compiled bundle and the variables each template was rendered with."""
    seen: dict[str, dict[str, Any]] = {}
    original = render._render

    def recording(name: str, variables: Mapping[str, Any]) -> bytes:
        seen[name] = dict(variables)
        return original(name, variables)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(render, "_render", recording)
        bundle = compile_spec(path, target=target)  # type: ignore[arg-type]
    return bundle, seen


def expected_arrays(seen: Mapping[str, Mapping[str, Any]]) -> dict[str, list[tuple[str | None, list[str]]]]:
    """Each declared array's segments as the templates write them: (title, words)."""
    t = seen["train.sh.jinja"]
    slime: list[tuple[str | None, list[str]]] = [(g.title, [tok for a in g.args for tok in a.tokens])
                                                 for g in t["groups"]]
    custom_config = ["--custom-config-path", t["custom_config"]] if t["custom_config"] else []  # agentcore only
    appended = [list(t["extra_args"]), custom_config, ["--use-wandb", *t["wandb_args"]]]
    if t["cuda_home"]:
        appended.append(["--train-env-vars", "$TRAIN_ENV_VARS"])
    resume = t["resume"]  # the checkpoint block: --load, the first launch's flags, a start rollout without a load
    if resume is not None:
        appended.append(["--load", "$FROM"])
        if resume.ckpt_step is not None:
            appended.append(["--ckpt-step", "$CKPT_STEP"])
        if resume.start_rollout_id is not None:
            appended += [["--start-rollout-id", "$START_ROLLOUT_ID"]] * 2
    slime += [(None, words) for words in appended if words]
    model = [(None, [tok for line in seen["model_args.sh.jinja"]["lines"] for tok in line])]
    return {"SLIME_ARGS": slime, "MODEL_ARGS": model}


def check_read_back(bundle: Bundle, seen: Mapping[str, Mapping[str, Any]]) -> None:
    t = seen["train.sh.jinja"]
    files = {name: data for name, data in bundle.files.items()}
    view = read_view("bundle", files)
    assert {n: s for n, s in view.file_status.items() if n in ("train.sh", "model_args.sh")} == \
        {"train.sh": "present", "model_args.sh": "present"}

    # the arrays: every declared one, word for word and title for title
    expected = expected_arrays(seen)
    assert set(expected) == set(structure.ARRAYS)
    for name, array in structure.ARRAYS.items():
        source = files[array.file].decode()
        if array.file == "train.sh":  # checkpoint.sh's appends, read in place of the line that sources it
            assert ("checkpoint.sh" in files) == (t["resume"] is not None)
            assert (SOURCE_CHECKPOINT in source.split("\n")) == ("checkpoint.sh" in files)
            source = with_checkpoint_sh(source, files["checkpoint.sh"].decode() if "checkpoint.sh" in files else None)
        segments, spans = bash_arrays(source, name)
        assert segments == expected[name], name
        assert spans and all(source[b:e].lstrip().startswith(name) for b, e in spans)
    slime = flag_occurrences(expected["SLIME_ARGS"])
    assert {flag: (values, title) for flag, values, title in slime} == \
        {flag: (f.values, f.title) for flag, f in view.flags.items()}
    assert list(view.flags) == list(dict.fromkeys(reversed([flag for flag, _, _ in slime])))[::-1]
    assert view.model_args == {line[0]: tuple(line[1:]) for line in seen["model_args.sh.jinja"]["lines"]}

    # the scalars and launch lines
    for name, variable in structure.SCALARS.items():
        if t[variable]:
            assert view.launch[name] == str(t[variable]), name
        else:
            assert name not in view.launch, name
    assert view.launch[structure.WANDB_KEY] == t["wandb_key_env"]
    assert view.launch[f"Ray address (unless {structure.RAY_ADDRESS_OVERRIDE} is set)"] == \
        (t["ray_address"] or "(none: a local Ray head)")
    if t["start_ray_head"]:
        options = f"--num-gpus {t['head_gpus']} --dashboard-port {t['dashboard_port']}"
        if t["join"] or t["head_port"] != 6379:
            options += f" --port {t['head_port']}"
        if t["dashboard_host"] != "127.0.0.1":
            options += f" --dashboard-host {t['dashboard_host']}"
        options += " --disable-usage-stats" + (" '${HEAD_OPTIONS[@]}'" if t["join"] else "")
        assert view.launch["ray start --head"] == options
    else:
        assert "ray start --head" not in view.launch
    assert view.launch["Ray address of the local head"] == f"http://127.0.0.1:{t['dashboard_port']}"
    if t["stop_stale_processes"]:
        assert view.launch[structure.RAY_STOP_TIMEOUT] == str(t["ray_stop_timeout"])
    else:
        assert structure.RAY_STOP_TIMEOUT not in view.launch

    # the Ray job's environment
    env = {"PYTHONPATH": t["megatron_dir"], "CUDA_DEVICE_MAX_CONNECTIONS": "1",
           **json.loads(t["env_vars_json"])}
    for name in t["forward"]:
        env.setdefault(name, FORWARDED)
    if t["cuda_home"]:
        env["CUDA_HOME"] = t["cuda_home"]
    assert {k: v for k, v in view.runtime_env.items() if k != "LD_LIBRARY_PATH"} == env
    assert ("LD_LIBRARY_PATH" in view.runtime_env) == bool(t["cuda_home"])


BRANCHES: dict[str, Any] = {
    "colocate": st.booleans(),
    "async": st.booleans(),
    "wandb": st.sampled_from([None, "project", "project+group", "key_env"]),
    "cuda": st.booleans(),
    "fix_tms": st.booleans(),
    "catalog": st.booleans(),
    "address": st.booleans(),
    "start_head": st.booleans(),
    "stop_stale": st.booleans(),
    "extra": st.booleans(),
    "env": st.booleans(),
    "kuberay": st.booleans(),
    "extends": st.booleans(),
    "nodes": st.booleans(),  # two: with a local head, join.sh, and train.sh waits for the other node
    "head": st.booleans(),  # dashboard_host 0.0.0.0, head_port 6380
    # [checkpoint]: none, save alone (train.sh's checkpoint block), a continuation with the first launch's flags
    "checkpoint": st.sampled_from([None, "save", "continuation"]),
}
# Text with every character that means something to bash or to the readers, and a letter or two.
HOSTILE = st.text(st.sampled_from(list("a b'\"$`\\#(){};|&<>*?~!=\n\t-é")), min_size=1, max_size=10)


def overrides_for(choice: Mapping[str, Any], text: str) -> dict[str, Any]:
    # a path or a name holds no line break or tab and ends in no blank (compiler/_pipeline/values.py): the text goes
    # there with its shell characters and spaces, and as it is in [env] vars and [extra] args
    named = text.replace("\n", "n").replace("\t", "t") + "x"
    out: dict[str, Any] = {"cluster": {}, "train": {}, "cuda": {}, "slime": {"dir": f"/slime/{named}"}}
    if not choice["colocate"]:
        out["cluster"].update(colocate=False, rollout_num_gpus=4)
    if choice["async"]:
        out["train"].update(mode="async")
        out["cluster"].update(colocate=False, rollout_num_gpus=4)
    wandb = choice["wandb"]
    if wandb:
        out["wandb"] = {"project": f"p {named}"}
        if wandb == "project+group":
            out["wandb"]["group"] = "g"
        if wandb == "key_env":
            out["wandb"]["key_env"] = "MY_WANDB_KEY"
    if choice["cuda"]:
        out["cuda"]["home"] = f"/usr/local/cuda {named}"
    out["cuda"]["fix_torch_memory_saver"] = choice["fix_tms"]
    if choice["catalog"]:
        out["model"] = {"args": None, "args_source": "catalog"}
    if choice["address"]:
        out["cluster"]["address"] = "http://10.0.0.1:8265/'}"
    out["cluster"]["start_ray_head"] = choice["start_head"]
    if choice["nodes"]:
        out["cluster"]["num_nodes"] = 2
    if choice["head"]:
        out["cluster"].update(dashboard_host="0.0.0.0", head_port=6380)
    out["cluster"]["stop_stale_processes"] = choice["stop_stale"]
    if choice["extra"]:
        out["extra"] = {"args": ["--extra-flag", text, "--other"]}
        out.setdefault("slime", {})["commit"] = NO_FACTS  # made-up flags: no flag facts apply
    if choice["kuberay"]:  # and a volume for the checkpoints (every path the RayJob uses is mounted: ACRL-K006)
        out["kuberay"] = {**KUBERAY_TABLE, "volumes": [*KUBERAY_TABLE["volumes"],
                                                       {"name": "ckpt", "mount_path": "/ckpt", "claim": "ckpt"},
                                                       {"name": "other", "mount_path": "/other", "claim": "o"}]}
    if choice["env"]:
        out["env"] = {"vars": {"MY_VAR": text}, "forward": ["HF_HOME"]}
    if choice["checkpoint"]:
        out["checkpoint"] = {"save": f"/ckpt/{named}", "save_interval": 2}
    if choice["checkpoint"] == "continuation":
        out["experiment"] = {"num_rollout": 20}
        out["checkpoint"].update(load=f"/other/{named}", ckpt_step=3, start_rollout_id=4, scheduler="override")
    return out


def write_spec(folder: Path, choice: Mapping[str, Any], text: str) -> Path:
    spec = merge(MINIMAL, overrides_for(choice, text))
    path = folder / "spec.toml"
    if choice["extends"]:  # the same spec, through a base file
        base = {k: v for k, v in spec.items() if k not in ("experiment", "cluster")}
        (folder / "base.toml").write_text(tomli_w.dumps(base), encoding="utf-8")
        spec = {"extends": "base.toml", "experiment": spec["experiment"], "cluster": spec["cluster"]}
    path.write_text(tomli_w.dumps(spec), encoding="utf-8")
    return path


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(choice=st.fixed_dictionaries(BRANCHES), text=HOSTILE)
def test_every_declared_name_reads_back_over_the_template_branches(choice: dict[str, Any], text: str,
                                                                   tmp_path_factory: pytest.TempPathFactory) -> None:
    folder = tmp_path_factory.mktemp("branch")
    # the RayJob resumes and continues as train.sh does: it sources the same checkpoint.sh
    bundle, seen = compile_and_capture(write_spec(folder, choice, text), "kuberay" if choice["kuberay"] else "ray")
    check_read_back(bundle, seen)


def examples() -> Iterator[Path]:
    yield from sorted((REPO / "specs").glob("*.toml"))


@pytest.mark.parametrize("spec", list(examples()), ids=lambda p: p.stem)
def test_every_example_spec_reads_back(spec: Path) -> None:
    bundle, seen = compile_and_capture(spec)
    check_read_back(bundle, seen)


def test_the_checks_see_a_changed_file(tmp_path: Path) -> None:
    """The read-back check is not vacuous: a train.sh whose array lost a word, or whose scalar
    changed, fails it."""
    choice = dict.fromkeys(BRANCHES, False) | {"wandb": None, "colocate": True, "checkpoint": None}
    bundle, seen = compile_and_capture(write_spec(tmp_path, choice, "x"))
    train = bundle.files["train.sh"].decode()
    for old, new in (("--custom-config-path custom_config.yaml", "--custom-config-path other.yaml"),
                     ("readonly EXP_ID=test-exp", "readonly EXP_ID=other")):
        assert old in train
        edited = attrs.evolve(bundle, files={**bundle.files, "train.sh": train.replace(old, new).encode()})
        with pytest.raises(AssertionError):
            check_read_back(edited, seen)



def test_a_declared_scalar_is_read_as_bash_reads_it_and_only_when_alone() -> None:
    """A quoted value may span lines (read whole, its further lines not script lines); a second
    command or a comment beside the declaration keeps the line a script line, whole."""
    source = ("#!/usr/bin/env bash\nreadonly SLIME_DIR='/a\nb'\nreadonly EXP_ID=x; rm -rf ~\n"
              "export MEGATRON_DIR=/m  # note\nexport CUDA_HOME=\"/c\"'d'\n")
    view = read_view("b", {"train.sh": source.encode()})
    assert {k: view.launch[k] for k in ("SLIME_DIR", "CUDA_HOME")} == {"SLIME_DIR": "/a\nb", "CUDA_HOME": "/cd"}
    assert "EXP_ID" not in view.launch and "MEGATRON_DIR" not in view.launch
    assert view.script_lines["train.sh"] == (
        "#!/usr/bin/env bash", "readonly SLIME_DIR=<launch setting SLIME_DIR>", "readonly EXP_ID=x; rm -rf ~",
        "export MEGATRON_DIR=/m  # note", "export CUDA_HOME=<launch setting CUDA_HOME>")


def test_every_spec_valued_scalar_of_the_template_is_declared() -> None:
    """A `readonly NAME={{ variable | sh }}` or `export NAME=...` line added to train.sh.jinja is a
    launch setting the review tools read: it must be declared in train_sh_structure.SCALARS."""
    template = (REPO / "templates" / "train.sh.jinja").read_text(encoding="utf-8")
    found = dict(re.findall(r"^[ \t]*(?:readonly|export) (\w+)=\{\{ (\w+) \| sh \}\}$", template, re.M))
    assert found == structure.SCALARS
    for name, array in structure.ARRAYS.items():
        assert f"\n{name}=(\n" in (REPO / "templates" / f"{array.file}.jinja").read_text(encoding="utf-8")
