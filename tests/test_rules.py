"""The rule catalog: each rule fires on the mistake it describes, points at the right key,
and stays quiet on the example specs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from acrl.compiler import RULES, Bundle, SpecError, compile_spec
from conftest import EXAMPLE_SPECS, NO_FACTS, SpecWriter


# rule id -> spec overrides that must trigger it (and only rules of this severity or weaker)
def _groups(*groups: dict[str, Any]) -> dict[str, Any]:
    """[sglang.models.default] with these server groups."""
    return {"sglang": {"models": {"default": {"server_groups": list(groups)}}}}


HEAD = "624b824a898ab0ec1fcb4d373004c7f3852bf515"  # slime HEAD: v0.3.1's weight-sync rules
OPD_REWARDS = {"reward_post_process_path": "slime.rollout.on_policy_distillation.post_process_rewards",
               "custom_rm_path": "slime.rollout.on_policy_distillation.reward_func"}
SPLIT = {"colocate": False, "actor_num_gpus_per_node": 4, "rollout_num_gpus": 4}  # 4 + 4 GPUs, not colocated
# [opd] and [weight_sync] (compiler/_pipeline/validate/training.py); MINIMAL targets fa3c990, colocated
TRAINING_TRIGGERS: dict[str, list[dict[str, Any]]] = {
    "ACRL-N001": [{"opd": {"enabled": True}}],
    "ACRL-N002": [{"opd": {"enabled": True, "type": "megatron"}}],
    "ACRL-N003": [{"opd": {"enabled": True, "type": "sglang", "teacher_load": "/ckpt/teacher"}}],
    "ACRL-N004": [{"opd": {"teacher_load": "/ckpt/teacher"}}],
    "ACRL-N005": [{"opd": {"kl_coef": 0.5}}, {"opd": {"type": "sglang"}},
                  {"opd": {"enabled": True, "type": "megatron", "teacher_load": "/t", "kl_coef": 0.0}},
                  {"opd": {"enabled": True, "type": "sglang", "teacher_ckpt_step": 3}, "rollout": OPD_REWARDS,
                   "extra": {"flags": {"--rm-url": "http://teacher:30000/generate"}}}],
    "ACRL-N006": [{"opd": {"enabled": True, "type": "sglang"}},
                  {"opd": {"enabled": True, "type": "sglang"}, "rollout": OPD_REWARDS}],  # no --rm-url
    "ACRL-N007": [{"weight_sync": {"transport": "disk"}},
                  {"slime": {"commit": HEAD}, "weight_sync": {"transport": "disk"}}],
    "ACRL-N008": [{"weight_sync": {"mode": "delta"}}],
    "ACRL-N009": [{"slime": {"commit": HEAD}, "cluster": SPLIT, "weight_sync": {"mode": "delta"}},
                  {"slime": {"commit": HEAD}, "cluster": SPLIT,
                   "weight_sync": {"mode": "delta", "transport": "disk", "disk_dir": "/shared/w"}}],
    "ACRL-N010": [{"cluster": SPLIT, "weight_sync": {"transport": "disk", "disk_dir": "/a"},
                   "extra": {"flags": {"--update-weight-delta-dir": "/b"}}}],
    "ACRL-N011": [{"slime": {"commit": HEAD}, "weight_sync": {"release_train": True}},
                  {"slime": {"commit": HEAD}, "checkpoint": {"save": "/ckpt"}, "algorithm": {"advantage_estimator":
                   "ppo"}, "weight_sync": {"release_train": True, "transport": "disk", "disk_dir": "/shared/w"}}],
    "ACRL-N012": [{"slime": {"commit": HEAD}, "checkpoint": {"save": "/ckpt"},
                   "weight_sync": {"release_train": True, "transport": "disk", "disk_dir": "/shared/w"}}],
    "ACRL-N013": [{"weight_sync": {"disk_dir": "/shared/w"}},
                  {"slime": {"commit": HEAD}, "weight_sync": {"delta_checksum": "blake3"}},
                  {"weight_sync": {"transport": "disk", "disk_dir": "/shared/w"}}],  # colocated at fa3c990
}
# [checkpoint] (compiler/_pipeline/validate/checkpoint.py; tests/test_checkpoint.py for keys and quiet cases)
SAVING = {"save": "/ckpt/run", "save_interval": 1}
CHECKPOINT_TRIGGERS: dict[str, list[dict[str, Any]]] = {
    "ACRL-H001": [{"experiment": {"num_rollout": 5}, "checkpoint": {**SAVING, "start_rollout_id": 5}},
                  {"experiment": {"num_rollout": 5}, "checkpoint": {**SAVING, "ckpt_step": 4}}],
    "ACRL-H002": [{"checkpoint": {"load": "/ckpt/run/iter_0000010"}}, {"checkpoint": {"load": "/ckpt/conv/release/"}}],
    "ACRL-H003": [{"checkpoint": {"load": "/models/Qwen2.5-3B-Instruct"}},
                  {"model": {"ref_load": "/models/ref"}, "checkpoint": {"load": "/models/Qwen2.5-3B-Instruct/"}},
                  {"model": {"ref_load": "/models/ref"}, "checkpoint": {"save": "/models/ref/", "save_interval": 1}}],
    "ACRL-H004": [{"experiment": {"num_rollout": 10}, "checkpoint": {**SAVING, "start_rollout_id": 3}},
                  {"experiment": {"num_rollout": 10}, "checkpoint": {"start_rollout_id": 3}}],
    "ACRL-H005": [{"checkpoint": {"save": "/ckpt/run"}}],
    "ACRL-H006": [{"checkpoint": {**SAVING, "save_hf": "/hf/{step}"}}, {"checkpoint": {**SAVING, "save_hf": "/hf/{}"}},
                  {"checkpoint": {**SAVING, "save_hf": "/hf/{rollout_id"}}],
    "ACRL-H007": [{"checkpoint": {**SAVING, "save_hf": "/hf"}}],
    "ACRL-H008": [{"checkpoint": {**SAVING, "scheduler": "override", "load_optimizer": False}}],
    "ACRL-H009": [{"checkpoint": {"format": "torch_dcp"}}, {"checkpoint": {"format": "fsdp_dtensor"}}],
    "ACRL-H010": [{"checkpoint": {"resume": "required"}},
                  {"checkpoint": {**SAVING, "resume": "never", "load": "/ckpt/other"}}],
    "ACRL-H011": [{"checkpoint": {"load_optimizer": False}},
                  {"checkpoint": {**SAVING, "resume": "never", "ckpt_step": 3}}],
    "ACRL-H012": [{"slime": {"commit": "bf14dc21f"}, "checkpoint": SAVING, "extra": {"flags": {"--async-save": True}}}],
    "ACRL-H013": [{"checkpoint": {"save": "ckpt/run", "save_interval": 1}}, {"checkpoint": {"load": "~/ckpt"}}],
}
TRIGGERS: dict[str, list[dict[str, Any]]] = {
    "ACRL-P001": [{"cluster": {"gpus_per_node": 6}, "parallel": {"tensor": 4}}],
    "ACRL-P002": [{"cluster": {"colocate": False}}],
    "ACRL-P003": [{"train": {"mode": "async"}}],
    "ACRL-P004": [{"cluster": {"num_nodes": 2, "colocate": False, "rollout_num_gpus": 5},
                   "rollout": {"gpus_per_engine": 2}}],
    "ACRL-P005": [{"rollout": {"gpus_per_engine": 12}, "cluster": {"num_nodes": 2, "gpus_per_node": 8}}],
    "ACRL-P006": [{"cluster": {"colocate": False, "rollout_num_gpus": 1}, "rollout": {"gpus_per_engine": 2}}],
    "ACRL-P007": [{"sglang": {"data_parallel_size": 2}}],
    "ACRL-P008": [{"parallel": {"tensor": 1}}],
    "ACRL-C001": [{"cluster": {"colocate": False, "rollout_num_gpus": 16}},  # 8 + 16 on one local node
                  {"cluster": {"address": "http://head:8265", "num_nodes": 1, "colocate": False,
                               "rollout_num_gpus": 8}}],
    # engines of 3 GPUs on 8-GPU nodes: engine 2 runs on GPUs 6, 7 of node 0 and 0 of node 1
    "ACRL-C002": [{"cluster": {"num_nodes": 2}, "parallel": {"tensor": 1}, "rollout": {"gpus_per_engine": 3}}],
    # slime PR #2373: actor 4 + rollout 12 on two 8-GPU nodes, engines 2 and 3 get node 0's address
    "ACRL-C003": [{"cluster": {"num_nodes": 2, "actor_num_gpus_per_node": 4, "colocate": False,
                               "rollout_num_gpus": 12}}],
    "ACRL-C004": [{"cluster": {"num_nodes": 3, "actor_num_nodes": 1, "actor_num_gpus_per_node": 4, "colocate": False,
                               "rollout_num_gpus": 16}, "rollout": {"gpus_per_engine": 16}},
                  {"cluster": {"num_nodes": 3, "colocate": False, "rollout_num_gpus": 8},
                   "rollout": {"gpus_per_engine": 16}}],
    "ACRL-C005": [{"extra": {"flags": {"--sglang-pp-size": 3}}},
                  # a size below 1 passes slime's divisibility assertion, then is divided by
                  {"extra": {"flags": {"--sglang-pp-size": 0}}}, {"extra": {"flags": {"--sglang-pp-size": -2}}},
                  {"extra": {"flags": {"--sglang-pipeline-parallel-size": 0}}},
                  # SGLang's DP attention of 3 in an engine of tensor size 4: SGLang asserts tp % dp == 0
                  {"rollout": {"gpus_per_engine": 4}, "sglang": {"data_parallel_size": 3},
                   "extra": {"flags": {"--sglang-enable-dp-attention": True}}}],
    "ACRL-C006": [{"extra": {"flags": {"--num-gpus-per-node": 4}}}],
    "ACRL-C007": [{"cluster": {"num_nodes": 2, "actor_num_nodes": 1}}],
    "ACRL-C008": [{"extra": {"flags": {"--debug-rollout-only": True, "--debug-train-only": True}}}],
    "ACRL-P009": [{"parallel": {"context": 3}, "cluster": {"gpus_per_node": 6}, "rollout": {"gpus_per_engine": 1}}],
    "ACRL-B001": [{"train": {"num_steps_per_rollout": 3}}, {"train": {"num_steps_per_rollout": 512}}],
    "ACRL-B002": [{"train": {"num_steps_per_rollout": 128}}],
    "ACRL-B003": [{"rollout": {"max_response_len": 20000}}, {"rollout": {"max_context_len": 10000}}],
    "ACRL-B004": [{"rollout": {"over_sampling_batch_size": 16}}],
    "ACRL-B005": [{"rollout": {"max_prompt_len": 4096, "max_context_len": 4096}}],
    "ACRL-B006": [{"experiment": {"num_epoch": 3, "num_rollout": 5}}],
    "ACRL-A001": [{"algorithm": {"kl_coef": 0.1, "kl_loss_coef": 0.1}}],
    "ACRL-A002": [{"algorithm": {"advantage_estimator": "reinforce_plus_plus"}}],
    "ACRL-A003": [{"algorithm": {"use_tis": True}, "extra": {"flags": {"--use-rollout-logprobs": True}}}],
    "ACRL-A004": [{"algorithm": {"kl_loss_coef": 0.0}}],
    "ACRL-E001": [{"eval": {"interval": 5}}],
    "ACRL-E004": [{"eval": {"datasets": {"gsm8k": "/e.jsonl"}}}],
    "ACRL-E002": [{"checkpoint": {"save_interval": 5}}],
    "ACRL-E003": [{"checkpoint": {"save_hf": "/models/Qwen2.5-3B-Instruct/"}}],
    "ACRL-T001": [{"agentcore": {"cumulative_token_mode": True}}],
    "ACRL-T002": [{"agentcore": {"max_concurrent": 200}}],
    "ACRL-T003": [{"agentcore": {"runtime_arn": "arn:aws:bedrock:us-west-2:123456789012:agent/x"}},
                  {"agentcore": {"runtime_arn": "arn:aws:bedrock-agentcore:us-west-2:1234:runtime/x"}}],
    "ACRL-T004": [{"agentcore": {"s3_bucket": "s3://my-bucket"}}, {"agentcore": {"s3_bucket": "My_Bucket"}},
                  {"agentcore": {"s3_bucket": "192.168.1.1"}}, {"agentcore": {"s3_bucket": "ab"}}],
    "ACRL-T005": [{"experiment": {"id": "my exp"}}, {"experiment": {"id": "../escape"}},
                  {"experiment": {"id": "x" * 65}}],
    "ACRL-F001": [{"extra": {"flags": {"--wandb-key": "abc"}}}, {"extra": {"args": ["--sglang-api-key", "k"]}},
                  {"extra": {"flags": {"router-oracle-password": "p"}}}],
    "ACRL-F002": [{"extra": {"flags": {"--lr": 1e-5}}}, {"extra": {"args": ["--num-layers", "3"]}},
                  {"extra": {"flags": {"--global-batch-size": 64}}}, {"extra": {"flags": {"--use-opd": True}}}],
    "ACRL-F003": [{"extra": {"flags": {"--use-dynamic-global-batch-size": True}}},
                  {"slime": {"commit": "624b824a8"}, "model": {"megatron_to_hf_mode": "bridge"}},
                  {"extra": {"flags": {"--release-train": True}}},
                  {"extra": {"flags": {"--use-ti": True}}}, {"extra": {"args": ["--sglang"]}},  # abbreviations
                  {"slime": {"commit": "bf14dc21f"}, "extra": {"flags": {"--router-policy": "random"}}}],  # v0.3.0
    "ACRL-F005": [{"extra": {"flags": {"--sglang-mem-fraction": 0.5}}},
                  {"extra": {"args": ["--sglang-cuda-graph", "8"]}}],
    # sglang 0.5.15.post1 (slime 624b824's image) deprecates --disable-cuda-graph for --cuda-graph-backend-*;
    # sglang 0.5.13 (the pin's) keeps --enable-piecewise-cuda-graph as a DeprecatedAction that does nothing
    "ACRL-F006": [{"slime": {"commit": "624b824a8"}, "extra": {"flags": {"--sglang-disable-cuda-graph": True}}},
                  {"extra": {"args": ["--sglang-enable-piecewise-cuda-graph"]}}],
    "ACRL-F007": [{"extra": {"flags": {"--sglang-mem-fracton-static": 0.5}}},
                  {"slime": {"commit": "624b824a8"}, "extra": {"args": ["--sglang-tp-size", "2"]}},  # slime skips it
                  {"extra": {"flags": {"--sglang-chunked-prefill": 4096}}}],  # an abbreviation
    # escape-hatch flags nothing could check: no facts of the commit (nor a checkout here), sglang_router's flags,
    # in both escape-hatch forms
    "ACRL-F008": [{"slime": {"commit": NO_FACTS}, "extra": {"flags": {"--use-routing-replay": True}}},
                  {"extra": {"flags": {"--router-policy": "random"}}},
                  {"slime": {"commit": "624b824a8"}, "extra": {"args": ["--router-policy", "random"]}}],
    # what slime's argparse does with each flag at the target (compiler/_slime/commits/argparse; test_flag_values.py)
    "ACRL-F009": [{"extra": {"flags": {"--ckpt-format": "torch_dst"}}}, {"extra": {"args": ["--ci-test=1"]}},
                  {"extra": {"flags": {"--exit-interval": "soon"}}}],
    "ACRL-F010": [{"extra": {"flags": {"--enable-cuda-graph": True}}}, {"extra": {"args": ["--use-dist-ckpt"]}}],
    "ACRL-F011": [{"extra": {"flags": {"--batch-size": 4}}}],
    "ACRL-M004": [{"model": {"args": {"group-query-attention": False}}}],
    "ACRL-S001": [{"env": {"vars": {"HF_TOKEN": "x"}}}, {"env": {"forward": ["AWS_SECRET_ACCESS_KEY"]}},
                  {"env": {"vars": {"bad name": "x"}}}, {"cluster": {"env": {"HF_TOKEN": "x"}}},
                  {"cluster": {"env": {"1BAD": "x"}}}],
    "ACRL-S002": [{"wandb": {"key_env": "sk-abc123"}}, {"model": {"script_env": {"-Sx": "1"}}},
                  {"model": {"script_env": {"BASH_ENV": "/tmp/x"}}}],
    # (a line break in it is every name's error: compiler/_pipeline/values.py)
    "ACRL-M009": [{"model": {"type": "../qwen2.5-3B"}}, {"model": {"type": "qwen;touch x"}}],
    "ACRL-S003": [{"cluster": {"address": "http://admin:hunter2@head:8265"}}],
    "ACRL-S004": [{"wandb": {"key_env": "a3f9c1e7b5d24f6a8c0e1b3d5f7a9c2e4b6d8f0a"}},
                  {"wandb": {"key_env": "wandb_key"}},
                  {"wandb": {"key_env": "AKIAZ7Q2EXAMPLE4KJ3M"}}],
    "ACRL-K001": [{"kuberay": {"namespace": "RL_Team"}}, {"kuberay": {"secret": "team secrets"}}],
    "ACRL-L001": [{"cluster": {"ray_start_args": ["--num-gpus", "4"]}}, {"cluster": {"ray_start_args": ["64"]}},
                  {"cluster": {"ray_start_args": ["--dashboard-agent-grpc-port=1"]}},
                  {"cluster": {"ray_start_args": ["--block"]}},
                  {"cluster": {"node_ip_address": "10.0.0.1; reboot"}}, {"cluster": {"env": {"MASTER_ADDR": "x"}}},
                  {"cluster": {"env": {"RAY_ADDRESS": "http://h:8265"}}}, {"env": {"pythonpath": ["relative/dir"]}},
                  {"env": {"pythonpath_before_megatron": ["/a:/b"]}}],
    "ACRL-L002": [{"cluster": {"address": "http://head:8265", "node_ip_address": "10.0.0.1"}},
                  {"cluster": {"start_ray_head": False, "ray_start_args": ["--num-cpus", "4"]}},
                  {"cluster": {"address": "http://head:8265", "env": {"HIP_VISIBLE_DEVICES": "0"}}},
                  {"wandb": {"enabled": False, "project": "p"}}, {"wandb": {"enabled": False, "group": "g"}}],
    # [sglang.models] on MINIMAL's 8 colocated GPUs, engines of 2
    "ACRL-G001": [_groups({"worker_type": "regular", "num_gpus": 4})],
    "ACRL-G002": [{**_groups({"worker_type": "regular", "num_gpus": 8}),
                   "extra": {"flags": {"--prefill-num-servers": 1}}}],
    "ACRL-G003": [_groups({"worker_type": "regular", "num_gpus": 4},
                          {"worker_type": "regular", "num_gpus": 4, "overrides": {"model_path": "/models/other"}})],
    "ACRL-G004": [_groups({"worker_type": "regular", "num_gpus": 1}, {"worker_type": "regular", "num_gpus": 7}),
                  _groups({"worker_type": "regular", "num_gpus": 8, "num_gpus_per_engine": 12})],
    "ACRL-G005": [_groups({"worker_type": "regular", "num_gpus": 3}, {"worker_type": "regular", "num_gpus": 5})],
    "ACRL-G006": [_groups({"worker_type": "regular", "num_gpus": 8, "overrides": {"port": 30000}}),
                  _groups({"worker_type": "regular", "num_gpus": 8, "overrides": {"base-gpu-id": 0}})],
    "ACRL-G007": [_groups({"worker_type": "prefill", "num_gpus": 8}),
                  {"sglang": {"models": {"default": {"server_groups": [{"worker_type": "regular", "num_gpus": 8}]},
                                         "ref": {"model_path": "/models/ref"}}}}],
    "ACRL-G008": [_groups({"worker_type": "regular", "num_gpus": 8, "overrides": {"dp_sise": 2}}),
                  {"slime": {"commit": "624b824a8"}, **_groups({"worker_type": "regular", "num_gpus": 8,
                                                                "overrides": {"cuda_graph_max_bs": 8}})}],
    # slime's newer rollout features (compiler/_pipeline/validate/rollout_features.py; tests/test_rollout_features.py)
    "ACRL-R001": [{"rollout": {"external_engine_addrs": ["10.0.0.9"]}},
                  {"extra": {"flags": {"--rollout-external-engine-addrs": "https://h:30000"}}}],
    "ACRL-R002": [{"slime": {"commit": "bf14dc21f"}, "rollout": {"external_engine_addrs": ["h:1"]}}],
    "ACRL-R003": [{"rollout": {"function_path": "slime.rollout.fully_async_rollout.generate_rollout_fully_async"},
                   "eval": {"interval": 5, "datasets": {"a": "/e.jsonl"}}}],
    "ACRL-R004": [{"rollout": {"function_path": "slime.rollout.fully_async_rollout.generate_rollout_fully_async"}}],
    "ACRL-R005": [{"slime": {"commit": "624b824a8"}, "rollout": {"sample_hook_paths": ["my.hook"]}}],
    "ACRL-R006": [{"train": {"balance_by_flops": True, "use_dynamic_batch_size": False}}],
    "ACRL-R007": [{"slime": {"commit": "624b824a8"}, "rollout": {"external_engine_addrs": ["10.0.0.5:30000"]}}],
    "ACRL-M001": [{"parallel": {"tensor": 3}, "cluster": {"gpus_per_node": 6}},
                  {"rollout": {"gpus_per_engine": 4}, "model": {"args": {"num-query-groups": 3}}},
                  # DP attention 2 in engines of 6: the attention runs with tensor size 3, which 16 heads refuse
                  {"cluster": {"gpus_per_node": 6}, "rollout": {"gpus_per_engine": 6, "batch_size": 24},
                   "sglang": {"data_parallel_size": 2}, "extra": {"flags": {"--sglang-enable-dp-attention": True}}}],
    "ACRL-M002": [{"parallel": {"pipeline": 5}, "cluster": {"gpus_per_node": 10}}],
    "ACRL-M003": [{"parallel": {"expert": 2}},
                  {"model": {"args": {"num-experts": 6}}, "parallel": {"expert": 4}},
                  {"model": {"args": {"num-experts": 8}}, "parallel": {"expert": 8}}],  # EP 8 x ETP 2 > 8 GPUs
    # Qwen3-4B's hidden / heads is 80, its head_dim 128 (the catalog entry named by type says so)
    "ACRL-M006": [{"model": {"type": "qwen3-4B", "args": {"hidden-size": 2560, "num-attention-heads": 32}}},
                  {"model": {"args": {"num-attention-heads": 24}}}],  # 2048 / 24 is not whole
    "ACRL-M007": [{"cluster": {"gpu_memory_gib": 8}}, {"sglang": {"mem_fraction_static": 0.99}}],
    # the integration profile's tables (compiler/_spec/profiles.py): MINIMAL is an agentcore spec
    "ACRL-I001": [{"agentcore": None, "experiment": {"integration": "agentcore"}}],  # the missing table: below
    "ACRL-I002": [{"experiment": {"integration": "slime"}},
                  {"experiment": {"integration": "custom"}, "rollout": {"custom_rm_path": "my.rm.score"}}],
    "ACRL-I003": [{"experiment": {"integration": "custom"}, "agentcore": None}],
    **TRAINING_TRIGGERS,
    **CHECKPOINT_TRIGGERS,
}
# F004 needs a slime checkout on disk; it is tested in test_verify_flags.py.
# M005 needs a config.json and M008 a slime model script: tests/test_model_sources.py.
UNTESTED_HERE = {"ACRL-F004", "ACRL-M005", "ACRL-M008"}
# The [kuberay] table's rules, several of them about --target kuberay's job: tests/test_kuberay_rules.py.
UNTESTED_HERE |= {f"ACRL-K0{n:02d}" for n in range(2, 13)}


def test_every_rule_has_a_trigger_and_ids_are_unique() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert set(ids) - UNTESTED_HERE == set(TRIGGERS)


@pytest.mark.parametrize(("rule_id", "overrides"),
                         [(rid, o) for rid, cases in TRIGGERS.items() for o in cases])
def test_rule_fires(rule_id: str, overrides: dict[str, Any], compile_overrides) -> None:  # type: ignore[no-untyped-def]
    rule = next(r for r in RULES if r.id == rule_id)
    if rule.severity == "error":
        with pytest.raises(SpecError) as info:
            compile_overrides(overrides)
        diagnostics = info.value.diagnostics
    else:
        diagnostics = compile_overrides(overrides).warnings
    fired = [d for d in diagnostics if d.rule == rule_id]
    assert fired, [d.format() for d in diagnostics]
    assert all(d.severity == rule.severity and d.hint and d.line for d in fired)


def test_a_missing_agentcore_table_is_reported_as_the_other_missing_tables(write_spec: SpecWriter) -> None:
    """Without integration written, ACRL-I001 points where the table can be added, after the spec's last line, as a
    missing [data] does (quoting none of the spec's lines: none is wrong)."""
    path = write_spec({"agentcore": None, "data": None})
    with pytest.raises(SpecError) as info:
        compile_spec(path)
    after = len(path.read_text().splitlines()) + 1
    assert sorted((d.rule, d.key, d.line, d.column) for d in info.value.diagnostics) == [
        ("", "", after, 1), ("ACRL-I001", "", after, 1)]
    assert all(d.source_line == "" for d in info.value.diagnostics)


def test_warnings_are_errors_with_strict(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    bundle = compile_overrides({"agentcore": {"max_concurrent": 200}})
    assert [w.rule for w in bundle.warnings] == ["ACRL-T002"]
    assert b'"rule": "ACRL-T002"' in bundle.files["manifest.json"]
    with pytest.raises(SpecError) as info:
        compile_overrides({"agentcore": {"max_concurrent": 200}}, strict=True)
    assert [d.rule for d in info.value.diagnostics] == ["ACRL-T002"]


def test_message_points_at_the_key_that_was_written(write_spec) -> None:  # type: ignore[no-untyped-def]
    path = write_spec({"extra": {"flags": {"--lr": 1e-5}}})
    with pytest.raises(SpecError) as info:
        compile_spec(path, display_name="spec.toml")
    (diag,) = info.value.diagnostics
    assert diag.key == "extra.flags.--lr"
    assert diag.source_line.startswith('--lr = ')
    assert diag.hint == "set [train] lr = 1e-05 instead"  # the user's value, as the key's line


def test_optimizer_steps_are_explicit(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    # SlimeRunner's defaults left the step count to Megatron's micro-batch x DP fallback (64 steps).
    text = compile_overrides().files["train.sh"].decode()
    assert "  --num-steps-per-rollout 1\n  --global-batch-size 256\n" in text


@pytest.mark.parametrize("spec", EXAMPLE_SPECS, ids=lambda p: p.stem)
def test_example_specs_compile_strict(spec) -> None:  # type: ignore[no-untyped-def]
    from acrl.compiler import compile_spec

    assert compile_spec(spec, strict=True).warnings == ()


def test_the_rollout_engines_tensor_size_divides_out_an_sglang_pipeline(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    six = {"rollout": {"gpus_per_engine": 6, "batch_size": 24}, "cluster": {"gpus_per_node": 6}}  # DP 3
    with pytest.raises(SpecError) as info:
        compile_overrides(six)
    (diag,) = [d for d in info.value.diagnostics if d.rule == "ACRL-M001"]
    assert diag.message == "16 attention heads are not divisible by the rollout engine's tensor parallel size " \
                           "(gpus_per_engine) 6" and diag.key == "rollout.gpus_per_engine"
    bundle = compile_overrides({**six, "extra": {"flags": {"--sglang-pp-size": 3}}})  # tensor size 2
    assert not [w for w in bundle.warnings if w.rule == "ACRL-M001"]


def test_an_uneven_pipeline_split_in_extra_flags_is_allowed(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    five = {"parallel": {"pipeline": 5}, "cluster": {"gpus_per_node": 10}}
    with pytest.raises(SpecError) as info:
        compile_overrides(five)
    assert [(d.rule, d.key) for d in info.value.diagnostics] == [("ACRL-M002", "parallel.pipeline")]
    compile_overrides({**five, "extra": {"flags": {"--decoder-first-pipeline-num-layers": 8}}})


def test_expert_parallel_times_expert_tensor_parallel_must_divide_the_actor(compile_overrides) -> None:  # type: ignore[no-untyped-def]
    moe = {"model": {"args": {"num-experts": 8}}, "parallel": {"expert": 8}}
    with pytest.raises(SpecError) as info:
        compile_overrides(moe)
    (diag,) = info.value.diagnostics
    assert diag.rule == "ACRL-M003" and "expert parallel 8 x expert tensor parallel 2 x pipeline 1 = 16" in \
        diag.message and "actor's 8 GPUs" in diag.message
    compile_overrides({**moe, "extra": {"flags": {"--expert-tensor-parallel-size": 1}}})


@pytest.mark.parametrize("overrides", [
    {"model": {"args": {"num-experts": 8, "moe-layer-freq": "²"}}},  # "²".isdigit() is true; int("²") fails
    {"model": {"args": {"num-experts": 8, "moe-layer-freq": "[1]*" + "9" * 5000}}},  # past int()'s digit limit
    {"extra": {"flags": {"expert-tensor-parallel-size": "²"}}},
    {"parallel": {"pipeline": 10**9}},  # the memory estimate must not walk a stage per rank
])
def test_odd_numbers_are_diagnosed_never_an_internal_error(compile_overrides: Callable[..., Bundle],
                                                           overrides: dict[str, Any]) -> None:
    try:
        compile_overrides(overrides)
    except SpecError as exc:
        assert exc.diagnostics


@pytest.mark.parametrize("address", ["http://user:secret@head:8265", "https://token@ray.example.com"])
def test_a_ray_address_with_credentials_never_reaches_the_bundle(compile_overrides: Callable[..., Bundle],
                                                                 address: str) -> None:
    with pytest.raises(SpecError) as exc:
        compile_overrides({"cluster": {"address": address}})
    (diag,) = [d for d in exc.value.diagnostics if d.rule == "ACRL-S003"]
    assert diag.key == "cluster.address" and "secret" not in diag.message and "ACRL_RAY_ADDRESS" in diag.hint
    assert compile_overrides({"cluster": {"address": "http://head:8265/path@x"}}).spec.cluster.address


DP_ATTENTION = {"--sglang-enable-dp-attention": True}
# slime's scripts/run-glm4.7-30B-A3B.sh shape: 20 heads, engines of 8 GPUs with --sglang-enable-dp-attention
# --sglang-dp-size 8 (so the attention runs with tensor size 1)
TWENTY_HEADS = {"model": {"args": {"num-attention-heads": 20, "kv-channels": 128}}, "rollout": {"gpus_per_engine": 8}}


def m001(compile_overrides: Callable[..., Bundle], overrides: dict[str, Any]) -> list[str]:
    try:
        compile_overrides(overrides)
    except SpecError as exc:
        return [d.message for d in exc.diagnostics if d.rule == "ACRL-M001"]
    return []


def test_m001_shards_the_engines_heads_over_the_attention_tensor_size_with_dp_attention(
        compile_overrides: Callable[..., Bundle]) -> None:
    assert m001(compile_overrides, TWENTY_HEADS) == [
        "20 attention heads are not divisible by the rollout engine's tensor parallel size (gpus_per_engine) 8"]
    for dp in (4, 8):  # attention tensor size 2, 1
        assert m001(compile_overrides, {**TWENTY_HEADS, "sglang": {"data_parallel_size": dp},
                                        "extra": {"flags": DP_ATTENTION}}) == []
    # the escape hatch's --sglang-dp-size is read the same way (slime's script passes it so), though ACRL-F002 refuses
    # it: it is sglang's other name for [sglang] data_parallel_size's flag
    assert m001(compile_overrides, {**TWENTY_HEADS, "extra": {"flags": {**DP_ATTENTION, "--sglang-dp-size": 8}}}) == []
    # a DP size of 1 turns SGLang's DP attention off: the engine's whole tensor size shards the heads
    assert m001(compile_overrides, {**TWENTY_HEADS, "extra": {"flags": DP_ATTENTION}}) != []
    six = {"cluster": {"gpus_per_node": 6}, "rollout": {"gpus_per_engine": 6, "batch_size": 24},
           "sglang": {"data_parallel_size": 2}, "extra": {"flags": DP_ATTENTION}}
    assert m001(compile_overrides, six)[0] == (
        "16 attention heads are not divisible by the rollout engine's attention tensor parallel size "
        "(gpus_per_engine / sglang dp size 2, with DP attention) 3")


def test_m001_checks_no_engine_where_none_runs(compile_overrides: Callable[..., Bundle]) -> None:
    # engines of 6 GPUs would refuse 16 heads, but no local engine runs: debug-train-only, or external engines
    six = {"cluster": {"gpus_per_node": 6, "colocate": False}, "rollout": {"gpus_per_engine": 6, "batch_size": 24}}
    assert m001(compile_overrides, {**six, "cluster": {"gpus_per_node": 6, "colocate": False, "rollout_num_gpus": 6,
                                                       "num_nodes": 2}})
    assert m001(compile_overrides, {**six, "extra": {"flags": {"--debug-train-only": True}}}) == []
    assert m001(compile_overrides, {**six, "rollout": {**six["rollout"], "external_engine_addrs": ["h:30000"]}}) == []


@pytest.mark.parametrize("overrides", [{"extra": {"flags": {"--debug-train-only": True}}},
                                       {"extra": {"flags": {"--load-debug-rollout-data": "/d/{rollout_id}.pt"}}},
                                       {"rollout": {"external_engine_addrs": ["10.0.0.9:30000"]}}])
def test_p002_does_not_fire_when_slime_sizes_the_group_without_rollout_gpus(
        compile_overrides: Callable[..., Bundle], overrides: dict[str, Any]) -> None:
    bundle = compile_overrides({"cluster": {"colocate": False}, **overrides})
    assert not [w for w in bundle.warnings if w.rule.startswith("ACRL-P")]


@pytest.mark.parametrize("overrides", [
    {"rollout": {"gpus_per_engine": 4}, "extra": {"flags": {"--sglang-pp-size": 2}}},
    {"rollout": {"gpus_per_engine": 4}, "extra": {"flags": {"--sglang-pp-size": 4}}},
    {"rollout": {"gpus_per_engine": 4}, "sglang": {"data_parallel_size": 4}, "extra": {"flags": DP_ATTENTION}},
    {"rollout": {"gpus_per_engine": 8}, "sglang": {"data_parallel_size": 2},
     "extra": {"flags": {**DP_ATTENTION, "--sglang-pp-size": 2}}},  # tensor size 4, dp 2
    # DP 3 would not divide tensor size 2, but no local engine runs
    {"cluster": {"colocate": False}, "sglang": {"data_parallel_size": 3},
     "extra": {"flags": {**DP_ATTENTION, "--debug-train-only": True}}},
    # pp 0 where no local engine runs, at 624b824 (which divides by it only when an engine starts)
    {"cluster": {"colocate": False}, "slime": {"commit": "624b824a898ab0ec1fcb4d373004c7f3852bf515"},
     "extra": {"flags": {"--sglang-pp-size": 0, "--debug-train-only": True}}},
])
def test_c005_is_quiet_when_the_sglang_sizes_divide_the_engine(compile_overrides: Callable[..., Bundle],
                                                               overrides: dict[str, Any]) -> None:
    try:
        compile_overrides(overrides)
    except SpecError as exc:
        assert "ACRL-C005" not in {d.rule for d in exc.diagnostics}, [d.format() for d in exc.diagnostics]
