"""Provenance as data and the run-time arguments computed once (issue 12, items 2 and 4).

A flag's origin is an :class:`ArgOrigin` (the spec key, or the keys a derivation read), so `acrl explain`
lists a derived flag's inputs from data; the run-time arguments (W&B, the custom config, the train env
vars) come from one function that train.sh, rayjob.yaml and `acrl explain` all use."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest
import yaml

from acrl.compiler._pipeline.argv import ArgOrigin, build_argv, runtime_args
from acrl.compiler._pipeline.compile import compile_source
from acrl.compiler._pipeline.parse import read_spec
from acrl.compiler._review.explain import explain_path
from conftest import KUBERAY_TABLE, SpecWriter

SPECS = sorted((Path(__file__).parent.parent / "specs").glob("*.toml"))
RUNTIME_GROUP = "added by train.sh at run time"


@pytest.mark.parametrize("spec", SPECS, ids=lambda p: p.stem)
def test_every_flag_origin_is_data_and_explain_reads_it(spec: Path) -> None:
    bundle = compile_source(read_spec(spec))
    explained = explain_path(spec)
    keys = {item.name for item in explained.keys}
    flags = {item.name: item for item in explained.flags}
    seen_derived = 0
    for group in build_argv(bundle.spec):
        for arg in group.args:
            assert isinstance(arg.source, ArgOrigin)
            assert arg.origin == arg.source.text
            if arg.source.kind == "derived":
                seen_derived += 1
                assert arg.source.keys and set(arg.source.keys) <= keys, arg  # every input is a real key
                assert flags[arg.flag].related == arg.source.keys  # explain's inputs are the declared ones
                assert flags[arg.flag].origin.kind == "derived"
            else:
                (key,) = arg.source.keys
                assert key in keys or any(k.startswith(f"{key}.") for k in keys), arg
                assert key in flags[arg.flag].related or flags[arg.flag].related[0].startswith(f"{key}.")
    assert seen_derived  # --global-batch-size at least


@pytest.mark.parametrize("project", [None, "my project"])  # "" is refused: a name is needed
@pytest.mark.parametrize("group", [None, "g-1"])
@pytest.mark.parametrize("cuda_home", [None, "/usr/local/cuda-12.4"])
def test_run_time_args_are_the_same_in_train_sh_rayjob_and_explain(
        write_spec: SpecWriter, project: str | None, group: str | None, cuda_home: str | None) -> None:
    wandb: dict[str, Any] = {"key_env": "MY_WANDB_KEY"}
    wandb.update({k: v for k, v in (("project", project), ("group", group)) if v is not None})
    overrides: dict[str, Any] = {"wandb": wandb, "kuberay": KUBERAY_TABLE}
    if cuda_home:
        overrides["cuda"] = {"home": cuda_home}
    path = write_spec(overrides)
    source = read_spec(path)
    bundle = compile_source(source)
    expected = runtime_args(bundle.spec)
    tokens = [t for name, value in (("project", project), ("group", group)) if value
              for t in (f"--wandb-{name}", value)]
    assert expected.wandb_tokens == tokens and expected.key_env == "MY_WANDB_KEY"
    assert expected.train_env_vars is (cuda_home is not None)

    train_sh = bundle.files["train.sh"].decode()
    assert f"SLIME_ARGS+=({shlex.join(['--use-wandb', *tokens])})" in train_sh
    assert f"SLIME_ARGS+=(--custom-config-path {expected.custom_config})" in train_sh
    assert ("--train-env-vars" in train_sh) is expected.train_env_vars

    from acrl.compiler import compile_spec

    kuberay = compile_spec(path, target="kuberay")
    job = list(yaml.safe_load_all(kuberay.files["rayjob.yaml"]))[1]
    entrypoint = shlex.split(job["spec"]["entrypoint"])
    assert shlex.join(["--use-wandb", *tokens]) in entrypoint[2]  # the bash -c body
    assert entrypoint[entrypoint.index("--custom-config-path") + 1].endswith(f"/{expected.custom_config}")

    explained = {i.name: i for i in explain_path(path).flags if i.group == RUNTIME_GROUP}
    wanted = {"--custom-config-path", "--use-wandb", *tokens[::2]}
    if expected.train_env_vars:
        wanted.add("--train-env-vars")
    assert set(explained) == wanted
    for arg in expected.wandb:
        assert explained[arg.flag].value == arg.values and arg.origin in explained[arg.flag].related
    assert explained["--custom-config-path"].value == (expected.custom_config,)


def test_who_wrote_a_key_is_data_from_the_layers_to_explain(tmp_path: Path) -> None:
    """A key's writer is a typed Written (file, --set or [sweep] point), made where the layer is
    made: explain and the messages read it, never a file name or a position sentinel."""
    from acrl.compiler._pipeline.layers import apply_overrides, load_spec
    from acrl.compiler._pipeline.parse import Written
    from acrl.compiler._pipeline.sweep import point_source
    from acrl.compiler._pipeline.sweep_points import sweep_points

    base = tmp_path / "base.toml"
    base.write_text((SPECS[0]).read_text(), encoding="utf-8")
    spec = tmp_path / "spec.toml"
    spec.write_text('extends = "base.toml"\n[rollout]\nbatch_size = 64\n'
                    '[sweep]\ngrid = { "train.lr" = [1e-6, 3e-6] }\n', encoding="utf-8")
    source = apply_overrides(load_spec(spec), ["rollout.temperature=0.5"])
    assert source.written_by(("rollout", "batch_size")) == Written(source.name)
    assert source.line_of(("rollout", "batch_size")) == (3, 1)
    assert source.written_by(("experiment", "id")) == Written(source.bases[0][2]) != Written(source.name)
    assert source.written_by(("rollout", "temperature")) == Written("--set rollout.temperature=0.5", "set")
    assert source.line_of(("rollout", "temperature")) is None
    assert source.locate(("rollout", "temperature")) == ("--set rollout.temperature=0.5", None)

    base_source, points = sweep_points(source)
    point = point_source(base_source, points[0])
    assert point.written_by(("train", "lr")) == Written(source.name)
    assert (point.line_of(("train", "lr")) or (0, 0))[0] == 5
    assert point.written_by(("experiment", "id")) == Written(f"[sweep] point {points[0].name}", "sweep")
    assert point.line_of(("experiment", "id")) is None
