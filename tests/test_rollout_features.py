"""slime's newer rollout features as spec keys (issue 15): [rollout] external_engine_addrs, [rollout]
sample_hook_paths, [train] balance_by_flops, and the fully-async rollout function. What train.sh passes slime
(train.sh run with ACRL_PRINT_ARGV=1), where slime places things then, each key refused at a commit that lacks its
flag (ACRL-F003, naming the first commit that has it), the ACRL-R* rules on both sides of each condition, the
importers' mapping and `acrl run`'s import check of the hooks. Every script and spec here is written for these
tests (none is slime's)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import tomli_w
import yaml
from test_run import acrl, make_project

from acrl.compiler import Bundle, SpecError, compile_spec, write
from acrl.compiler._importers.slime_runner import import_slime_runner
from acrl.compiler._importers.train_sh import import_train_sh
from acrl.compiler._spec.flag_index import coerce, flag_index
from conftest import merge

HEAD = "624b824a898ab0ec1fcb4d373004c7f3852bf515"
V030 = "bf14dc21f9500746447f2572d0692e981c4d2a7e"
FULLY_ASYNC = "slime.rollout.fully_async_rollout.generate_rollout_fully_async"
# slime's own rollout, no toolkit (colocated, as MINIMAL's GPUs are; the slime profile's default is not)
SLIME = {"experiment": {"integration": "slime"}, "agentcore": None, "cluster": {"colocate": True}}


def slime(*overrides: dict[str, Any]) -> dict[str, Any]:
    """MINIMAL's overrides for slime's own rollout, then ``overrides`` (merged in order)."""
    out: dict[str, Any] = dict(SLIME)
    for more in overrides:
        out = merge(out, {k: v for k, v in more.items() if k != "agentcore"})
    return out

Compile = Callable[..., Bundle]


def argv(bundle: Bundle, out: Path) -> list[str]:
    """The argv train.sh submits (python3 ENTRYPOINT FLAGS...), as it prints it with ACRL_PRINT_ARGV=1."""
    write(bundle, out)
    done = subprocess.run(["bash", str(out / "train.sh")], cwd=out, capture_output=True, timeout=60, check=False,
                          env={"PATH": "/usr/bin:/bin", "ACRL_PRINT_ARGV": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return [w.decode() for w in done.stdout.split(b"\0")[:-1]]


def derived(bundle: Bundle) -> dict[str, Any]:
    """The manifest's derived section: slime's placement group (placement_gpus) and the rollout's first slot."""
    section: dict[str, Any] = json.loads(bundle.files["manifest.json"])["derived"]
    return section


def after(words: list[str], flag: str, n: int) -> list[str]:
    """The ``n`` words that follow each occurrence of ``flag``, flattened."""
    return [w for i, word in enumerate(words) if word == flag for w in words[i + 1:i + 1 + n]]


def errors(compile_overrides: Compile, overrides: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(SpecError) as info:
        compile_overrides(overrides)
    return [(d.rule, d.key) for d in info.value.diagnostics if d.severity == "error"]


def warnings(compile_overrides: Compile, overrides: dict[str, Any]) -> list[tuple[str, str]]:
    return [(w.rule, w.key) for w in compile_overrides(overrides).warnings]


def test_the_keys_pass_their_flags_and_external_engines_take_no_local_gpus(compile_overrides: Compile,
                                                                           tmp_path: Path) -> None:
    addrs = ["10.0.0.9:30000", "http://10.0.0.10:30000"]
    bundle = compile_overrides(slime({"slime": {"commit": HEAD},
                                      "train": {"balance_by_flops": True, "use_dynamic_batch_size": True},
                                      "rollout": {"external_engine_addrs": addrs,
                                                  "sample_hook_paths": ["h.one", "h.two"]}}))
    words = argv(bundle, tmp_path / "b")
    assert after(words, "--rollout-external-engine-addrs", 3)[:2] == addrs  # nargs="+": one flag, both addresses
    assert words.count("--rollout-sample-hook-path") == 2  # action="append": once per hook, in order
    assert after(words, "--rollout-sample-hook-path", 1) == ["h.one", "h.two"]
    assert "--balance-by-flops" in words and "--rollout-external" not in words  # 624b824 derives it
    # slime's placement group for an external rollout is the actor's alone (placement_group.py:106-109 at 624b824)
    assert (derived(bundle)["placement_gpus"], derived(bundle)["rollout_offset"]) == (8, 8)
    spec_toml = (tmp_path / "b" / "spec.toml").read_text()
    assert "external_engine_addrs" in spec_toml and "sample_hook_paths" in spec_toml and "balance_by_flops" in spec_toml


def test_unset_keys_pass_nothing_and_stay_out_of_spec_toml(compile_overrides: Compile, tmp_path: Path) -> None:
    words = argv(compile_overrides({"slime": {"commit": HEAD}}), tmp_path / "b")
    assert not {"--rollout-external-engine-addrs", "--rollout-sample-hook-path", "--balance-by-flops"} & set(words)
    spec_toml = (tmp_path / "b" / "spec.toml").read_text()
    assert not re.search(r"external_engine_addrs|sample_hook_paths|balance_by_flops", spec_toml)


def test_v030_needs_rollout_external_too_and_keeps_its_engine_actors_local(compile_overrides: Compile,
                                                                            tmp_path: Path) -> None:
    """v0.3.0 uses the addresses only with --rollout-external ([rollout] external; arguments.py:509-520 at v0.3.0),
    and its placement group has no external case (placement_group.py:80-96): the 8 colocated GPUs hold 4 engine
    actors, one per address."""
    four = {"slime": {"commit": V030}, "rollout": {"external_engine_addrs": [f"h{i}:1" for i in range(4)]}}
    bundle = compile_overrides(merge(four, {"rollout": {"external": True}}))
    words = argv(bundle, tmp_path / "b")
    assert "--rollout-external" in words and after(words, "--rollout-external-engine-addrs", 4)[-1] == "h3:1"
    assert derived(bundle)["placement_gpus"] == 8 and derived(bundle)["rollout_offset"] == 0
    one = merge(four, {"rollout": {"external": True, "external_engine_addrs": ["h0:1"]}})
    assert errors(compile_overrides, one) == [("ACRL-R002", "rollout.external_engine_addrs")]  # rank 1 has none
    assert errors(compile_overrides, four) == [("ACRL-R002", "rollout.external_engine_addrs")]  # no switch
    # the escape hatch's addresses are read the same way by R002, and refused by F002: the keys say them
    hatch = {"slime": {"commit": V030}, "extra": {"flags": {"--rollout-external-engine-addrs": ["h0:1"] * 4}}}
    assert errors(compile_overrides, hatch) == [("ACRL-R002", "extra.flags.--rollout-external-engine-addrs"),
                                                ("ACRL-F002", "extra.flags.--rollout-external-engine-addrs")]


def test_the_v030_switch_is_refused_where_the_addresses_alone_say_it(compile_overrides: Compile) -> None:
    with pytest.raises(SpecError) as info:
        compile_overrides({"rollout": {"external": True, "external_engine_addrs": ["h:1"]}})
    (d,) = [d for d in info.value.diagnostics if d.severity == "error"]
    assert (d.rule, d.key) == ("ACRL-F003", "rollout.external") and "removed from slime after v0.3.0" in d.message


@pytest.mark.parametrize(("overrides", "key", "first"), [
    (slime({"rollout": {"sample_hook_paths": ["h.one"]}}), "rollout.sample_hook_paths", "v0.3.1"),  # at fa3c990
    ({"train": {"balance_by_flops": True}, "slime": {"commit": V030}}, "train.balance_by_flops", "fa3c990"),
])
def test_a_key_is_refused_at_a_commit_without_its_flag(compile_overrides: Compile, overrides: dict[str, Any],
                                                       key: str, first: str) -> None:
    with pytest.raises(SpecError) as info:
        compile_overrides(overrides)
    (d,) = info.value.diagnostics
    assert (d.rule, d.key) == ("ACRL-F003", key) and f"present at {first}" in d.message


def test_the_escape_hatch_may_not_pass_the_keys_flags(compile_overrides: Compile) -> None:
    """ACRL-F002: [rollout] external_engine_addrs owns --rollout-external-engine-addrs, set or not (the R rules and
    the placement model read the key)."""
    def refused(overrides: dict[str, Any]) -> list[tuple[str, str, str | None]]:
        with pytest.raises(SpecError) as info:
            compile_overrides(overrides)
        return [(d.rule, d.key, d.hint) for d in info.value.diagnostics if d.severity == "error"]

    hatch = {"extra": {"flags": {"--rollout-external-engine-addrs": "10.0.0.9:30000"}}}
    assert refused(hatch) == [("ACRL-F002", "extra.flags.--rollout-external-engine-addrs",
                               'set [rollout] external_engine_addrs = ["10.0.0.9:30000"] instead')]
    both = {"rollout": {"external_engine_addrs": ["10.0.0.9:30000"]},
            "extra": {"flags": {"--rollout-external-engine-addrs": "10.0.0.9:30000"}}}
    assert [d[:2] for d in refused(both)] == [("ACRL-F002", "extra.flags.--rollout-external-engine-addrs")]
    assert [d[:2] for d in refused({"train": {"balance_by_flops": True}, "extra": {"args": ["--balance-by-flops"]}})] \
        == [("ACRL-F002", "extra.args.0")]


@pytest.mark.parametrize(("addr", "commit"), [("10.0.0.9", HEAD), ("https://h:30000", HEAD), ("h:99999", HEAD),
                                              ("h:port", HEAD), ("http://h:1", V030), ("[fe80::1]:30000", V030)])
def test_r001_refuses_an_address_slime_cannot_read(compile_overrides: Compile, addr: str, commit: str) -> None:
    found = errors(compile_overrides, {"slime": {"commit": commit},
                                       "rollout": {"external_engine_addrs": [addr] * 4, "external": commit == V030}})
    assert ("ACRL-R001", "rollout.external_engine_addrs") in found


def test_an_address_slime_accepts_reaches_slime_verbatim_and_runs_nothing(compile_overrides: Compile,
                                                                          tmp_path: Path) -> None:
    """R001 is slime's check, not a shell-safety one: a host slime would accept may hold shell syntax, and train.sh
    passes it as one word (the hostile-value tests cannot place their texts here: they are not host:port)."""
    hostile = ["h$(touch${IFS}PWNED):1", "`touch${IFS}PWNED`:2", "h;touch${IFS}PWNED:3"]
    words = argv(compile_overrides({"rollout": {"external_engine_addrs": hostile}}), tmp_path / "b")
    assert after(words, "--rollout-external-engine-addrs", 3) == hostile
    assert not list(tmp_path.rglob("PWNED"))


@pytest.mark.parametrize("addr", ["h:1", "http://h:1/", "[fe80::1]:30000", "http://[fe80::1]:30000"])
def test_r001_accepts_what_normalize_external_engine_addr_accepts(compile_overrides: Compile, addr: str) -> None:
    compile_overrides({"slime": {"commit": HEAD}, "rollout": {"external_engine_addrs": [addr]}})


def test_external_engines_with_sglang_models_are_refused_at_the_key(compile_overrides: Compile) -> None:
    groups = {"sglang": {"models": {"default": {"server_groups": [{"worker_type": "regular", "num_gpus": 8}]}}},
              "rollout": {"external_engine_addrs": ["h:1"]}}
    assert ("ACRL-G002", "rollout.external_engine_addrs") in errors(compile_overrides, groups)


ASYNC = {"train": {"mode": "async"}, "cluster": {"colocate": False, "rollout_num_gpus": 4, "gpus_per_node": 8,
                                                  "actor_num_gpus_per_node": 4}}
EVAL = {"eval": {"interval": 5, "datasets": {"a": "/e.jsonl"}}}


def test_r003_no_evaluation_with_the_fully_async_rollout(compile_overrides: Compile) -> None:
    fully_async = slime(ASYNC, {"experiment": {"integration": "custom"}, "rollout": {"function_path": FULLY_ASYNC}})
    assert warnings(compile_overrides, fully_async) == []
    assert errors(compile_overrides, merge(fully_async, EVAL)) == [("ACRL-R003", "eval.interval")]
    # evaluation with another function is what slime allows (--eval-function-path: arguments.py:1968-1969)
    other = merge(fully_async, {**EVAL, "extra": {"flags": {"--eval-function-path": "slime.rollout.sglang_rollout."
                                                                                      "generate_rollout"}}})
    assert warnings(compile_overrides, other) == []
    # slime's own rollout under train_async.py evaluates (train_async.py:72-73)
    assert warnings(compile_overrides, slime(ASYNC, EVAL)) == []


def test_r004_the_fully_async_rollout_with_train_py_is_a_warning(compile_overrides: Compile) -> None:
    sync = slime({"experiment": {"integration": "custom"}, "rollout": {"function_path": FULLY_ASYNC}})
    assert warnings(compile_overrides, sync) == [("ACRL-R004", "rollout.function_path")]


def test_r005_hooks_with_the_toolkits_rollout_never_run(compile_overrides: Compile) -> None:
    hooks = {"slime": {"commit": HEAD}, "rollout": {"sample_hook_paths": ["h.one"]}}
    assert warnings(compile_overrides, hooks) == [("ACRL-R005", "rollout.sample_hook_paths")]
    assert warnings(compile_overrides, slime(hooks)) == []  # slime's generate_and_rm applies them


def test_r006_balance_by_flops_needs_dynamic_batch_size(compile_overrides: Compile) -> None:
    assert warnings(compile_overrides, {"train": {"balance_by_flops": True}}) == []
    off = {"train": {"balance_by_flops": True, "use_dynamic_batch_size": False}}
    assert errors(compile_overrides, off) == [("ACRL-R006", "train.balance_by_flops")]
    hatch = {"train": {"use_dynamic_batch_size": False}, "extra": {"flags": {"--balance-by-flops": True}}}
    assert [rule for rule, _ in errors(compile_overrides, hatch)] == ["ACRL-R006", "ACRL-F002"]  # F002: the key


def test_r007_colocated_external_engines_are_a_warning_at_both_keys(compile_overrides: Compile) -> None:
    external = {"slime": {"commit": HEAD}, "rollout": {"external_engine_addrs": ["10.0.0.5:30000"]}}
    assert ("ACRL-R007", "rollout.external_engine_addrs") in warnings(compile_overrides, external)
    hatch = {"slime": {"commit": HEAD}, "extra": {"args": ["--rollout-external-engine-addrs", "10.0.0.5:30000"]}}
    # the escape hatch's addresses are read too, though ACRL-F002 refuses them there (the key says them)
    with pytest.raises(SpecError) as info:
        compile_overrides(hatch)
    assert [(d.rule, d.key, d.severity) for d in info.value.diagnostics] == [
        ("ACRL-R007", "extra.args", "warning"), ("ACRL-F002", "extra.args.0", "error")]
    apart = {**external, "cluster": {"colocate": False}}
    assert [w for w in warnings(compile_overrides, apart) if w[0] == "ACRL-R007"] == []
    assert [w for w in warnings(compile_overrides, {"slime": {"commit": HEAD}}) if w[0] == "ACRL-R007"] == []


def test_the_flag_index_reads_the_list_keys_back() -> None:
    index = flag_index()
    addrs, hooks = index["--rollout-external-engine-addrs"], index["--rollout-sample-hook-path"]
    assert (addrs.path, addrs.kind, addrs.optional) == ("rollout.external_engine_addrs", "list", True)
    assert (hooks.path, hooks.kind, hooks.optional) == ("rollout.sample_hook_paths", "list", True)
    assert index["--balance-by-flops"].path == "train.balance_by_flops"
    assert coerce(addrs, ["h:1", "h:2"]) == ["h:1", "h:2"]


SCRIPT = """#!/bin/bash
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
source "${SCRIPT_DIR}/models/qwen3-4B.sh"
ARGS=(
   --hf-checkpoint /root/Qwen3-4B
   --prompt-data /root/dapo-math-17k.jsonl
   --num-rollout 100
   --rollout-batch-size 32
   --n-samples-per-prompt 8
   --global-batch-size 256
   --rollout-num-gpus-per-engine 2
   --use-dynamic-batch-size
   --max-tokens-per-gpu 4096
   --balance-by-flops
   --rollout-external-engine-addrs 10.0.0.9:30000 10.0.0.10:30000
   --rollout-sample-hook-path my.hook
)
ray start --head --node-ip-address 127.0.0.1 --num-gpus 8 --disable-usage-stats
ray job submit --address="http://127.0.0.1:8265" \\
   --runtime-env-json='{"env_vars": {"PYTHONPATH": "/root/Megatron-LM/"}}' \\
   -- python3 train.py --actor-num-nodes 1 --actor-num-gpus-per-node 8 --colocate \\
   ${MODEL_ARGS[@]} ${ARGS[@]}
"""


def test_import_train_sh_maps_the_flags_to_their_keys(tmp_path: Path) -> None:
    path = tmp_path / "run.sh"
    path.write_text(SCRIPT, encoding="utf-8")
    imported = import_train_sh(path)
    assert imported.spec["rollout"]["external_engine_addrs"] == ["10.0.0.9:30000", "10.0.0.10:30000"]
    assert imported.spec["train"]["balance_by_flops"] is True
    # the importer targets the toolkit's pin, which has no hooks: the flag is left out with a note naming it
    assert "sample_hook_paths" not in imported.spec["rollout"]
    assert [n for n in imported.notes if n.message.startswith("--rollout-sample-hook-path is left out")]
    assert "extra" not in imported.spec


def test_import_slime_runner_maps_extra_flags_to_the_keys(tmp_path: Path) -> None:
    config = tmp_path / "runner.yaml"
    config.write_text(yaml.safe_dump({
        "exp_id": "smoke-1", "agent_runtime_arn": "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/agent-a1",
        "s3_bucket": "my-bucket", "model_dir": "/models/Qwen2.5-3B-Instruct", "data_path": "/data/train.jsonl",
        "model_type": "qwen2.5-3B", "extra_flags": ["--rollout-external-engine-addrs", "h:1", "h:2",
                                                    "--balance-by-flops"]}), encoding="utf-8")
    imported = import_slime_runner(config)
    assert imported.spec["rollout"]["external_engine_addrs"] == ["h:1", "h:2"]
    assert imported.spec["train"]["balance_by_flops"] is True
    assert "args" not in imported.spec.get("extra", {})


def test_acrl_run_import_checks_each_sample_hook(tmp_path: Path) -> None:
    """`acrl run`'s rollout-module check loads each hook as slime's load_function would (sample_hooks.py:24-26 at
    624b824), with the job's import path (slime's dir is on it)."""
    project = make_project(tmp_path)
    (tmp_path / "slime" / "my_hooks.py").write_text("def keep(args, sample, **kwargs):\n    return sample\n")
    spec = merge(project.spec, {**SLIME, "cluster": {"colocate": True}, "slime": {"commit": HEAD},
                                "rollout": {"sample_hook_paths": ["my_hooks.keep", "my_hooks.drop"]}})
    (tmp_path / "spec.toml").write_text(tomli_w.dumps(spec), encoding="utf-8")
    write(compile_spec(tmp_path / "spec.toml"), project.bundle, force=True)
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--dry-run")
    assert proc.returncode == 1
    assert re.search(r"^rollout-module +failed +\d+ms +rollout.sample_hook_paths.1 \(--rollout-sample-hook-path\) = "
                     r"my_hooks.drop: my_hooks has no function 'drop'", proc.stdout, re.M), proc.stdout
    (tmp_path / "slime" / "my_hooks.py").write_text("def keep(args, sample):\n    return sample\n\n\ndrop = keep\n")
    proc = acrl("run", str(project.bundle), "--skip", "gpus", "--dry-run")
    assert re.search(r"^rollout-module +passed +\d+ms +2 functions import in ", proc.stdout, re.M), proc.stdout


def test_diff_and_explain_read_the_repeated_hook_flag_as_one_list(compile_overrides: Compile, tmp_path: Path) -> None:
    """train.sh passes --rollout-sample-hook-path once per hook and slime appends them (action="append"): `acrl diff`
    and `acrl explain` read all of them, not the last one as for any other repeated flag."""
    hooks = slime({"slime": {"commit": HEAD}, "rollout": {"sample_hook_paths": ["h.one", "h.two"]}})
    write(compile_overrides(hooks), tmp_path / "a")
    write(compile_overrides(merge(hooks, {"rollout": {"sample_hook_paths": ["h.one", "h.three"]}})), tmp_path / "b")
    proc = acrl("diff", str(tmp_path / "a"), str(tmp_path / "b"))
    assert "--rollout-sample-hook-path: h.one h.two -> h.one h.three" in proc.stdout, proc.stdout
    assert "more than once" not in proc.stdout + proc.stderr
    proc = acrl("explain", str(tmp_path / "a"))
    assert proc.returncode == 0 and "--rollout-sample-hook-path h.one h.two\n" in proc.stdout, proc.stdout
    assert "is not what spec.toml compiles to" not in proc.stdout + proc.stderr
