"""Other names of spec keys: agentcore-rl-toolkit's SlimeRunner fields, and the short names people write for them.

``SLIME_RUNNER`` is the one table of what each SlimeRunner keyword argument is in a spec: `acrl import slime-runner`
converts a YAML file by it (compiler/_importers/slime_runner.py adds each field's type), and an unknown key of a spec
named like a field gets that key as its fix (compiler/_pipeline/suggest.py). The facts are agentcore-rl-toolkit's
``src/agentcore_rl_toolkit/backends/slime/runner.py`` at commit 7bdd415 (the ``SlimeRunner`` dataclass's fields):
``num_gpus`` is the ``--num-gpus`` of the one ``ray start --head`` it runs (``_start_ray``), the GPUs of its node.
"""

SLIME_RUNNER: dict[str, str] = {
    "exp_id": "experiment.id",
    "agent_runtime_arn": "agentcore.runtime_arn",
    "s3_bucket": "agentcore.s3_bucket",
    "model_dir": "model.dir",
    "data_path": "data.path",
    "model_type": "model.type",
    "num_gpus": "cluster.gpus_per_node",
    "tp_size": "parallel.tensor",
    "rollout_gpus_per_engine": "rollout.gpus_per_engine",
    "slime_dir": "slime.dir",
    "megatron_dir": "slime.megatron_dir",
    "cuda_home": "cuda.home",
    "model_id": "agentcore.model_id",
    "acr_timeout": "agentcore.timeout",
    "acr_tps_limit": "agentcore.tps_limit",
    "max_concurrent": "agentcore.max_concurrent",
    "max_pool_connections": "agentcore.max_pool_connections",
    "gateway_port": "agentcore.gateway_port",
    "reward_postprocessing": "agentcore.reward_postprocessing",
    "sglang_tool_call_parser": "sglang.tool_call_parser",
    "sglang_reasoning_parser": "sglang.reasoning_parser",
    "sglang_data_parallel_size": "sglang.data_parallel_size",
    "cumulative_token_mode": "agentcore.cumulative_token_mode",
    "renderer_family": "agentcore.renderer_family",
    "gateway_log_level": "agentcore.gateway_log_level",
    "rollout_batch_size": "rollout.batch_size",
    "n_samples_per_prompt": "rollout.n_samples_per_prompt",
    "rollout_max_response_len": "rollout.max_response_len",
    "rollout_temperature": "rollout.temperature",
    "lr": "train.lr",
    "eps_clip": "algorithm.eps_clip",
    "eps_clip_high": "algorithm.eps_clip_high",
    "weight_decay": "train.weight_decay",
    "adam_beta2": "train.adam_beta2",
    "sglang_mem_fraction_static": "sglang.mem_fraction_static",
    "sglang_context_length": "sglang.context_length",
    "max_tokens_per_gpu": "train.max_tokens_per_gpu",
    "wandb_project": "wandb.project",
    "wandb_group": "wandb.group",
    "extra_flags": "extra.args",
}

# What a SlimeRunner field meant, where its name alone could mislead (num_gpus is not the rollout's GPUs).
SLIME_RUNNER_MEANING: dict[str, str] = {
    "num_gpus": "SlimeRunner's num_gpus, the GPUs `ray start --num-gpus` gives its one node (not the training actor's "
                "actor_num_gpus_per_node, nor the rollout's rollout_num_gpus),",
    "extra_flags": "SlimeRunner's extra_flags, raw arguments appended to slime's,",
}

# Short or common names of keys (Megatron's and SGLang's abbreviations, other trainers' words). A name here is
# matched after lower-casing and '-' -> '_'.
SHORT_NAMES: dict[str, str] = {
    "tp": "parallel.tensor", "tensor_parallel": "parallel.tensor", "tensor_parallel_size": "parallel.tensor",
    "pp": "parallel.pipeline", "pp_size": "parallel.pipeline", "pipeline_parallel_size": "parallel.pipeline",
    "cp": "parallel.context", "cp_size": "parallel.context", "context_parallel_size": "parallel.context",
    "ep": "parallel.expert", "ep_size": "parallel.expert", "expert_parallel_size": "parallel.expert",
    "sp": "parallel.sequence_parallel",
    "learning_rate": "train.lr", "epochs": "experiment.num_epoch", "num_epochs": "experiment.num_epoch",
    "model_path": "model.dir", "hf_checkpoint": "model.dir", "train_data": "data.path", "prompt_data": "data.path",
    "num_gpus_per_node": "cluster.gpus_per_node", "nodes": "cluster.num_nodes",
    "num_rollouts": "experiment.num_rollout",
    "n_samples": "rollout.n_samples_per_prompt", "num_samples_per_prompt": "rollout.n_samples_per_prompt",
    "mem_fraction": "sglang.mem_fraction_static",
    "actor_num_gpus": "cluster.actor_num_gpus_per_node", "actor_gpus": "cluster.actor_num_gpus_per_node",
    "rollout_gpus": "cluster.rollout_num_gpus", "num_gpus_per_engine": "rollout.gpus_per_engine",
}

# slime flags the compiler derives from keys, which no key sets and the escape hatch may not (ACRL-F002): the name
# people write for each, and how to get the value they meant (compiler/_pipeline/argv.py's derived_from).
DERIVED: dict[str, str] = {
    "global_batch_size": "slime's --global-batch-size is derived here: rollout.batch_size x "
                         "rollout.n_samples_per_prompt / train.num_steps_per_rollout; for a global batch of {value}, "
                         "set [train] num_steps_per_rollout = batch_size x n_samples_per_prompt / {value}",
}

# Tables people name otherwise.
TABLE_NAMES: dict[str, str] = {
    "optimizer": "train", "training": "train", "trainer": "train", "evaluation": "eval", "sampling": "rollout",
    "generation": "rollout", "ray": "cluster", "parallelism": "parallel", "agent": "agentcore",
    "toolkit": "agentcore", "checkpoints": "checkpoint", "environment": "env", "dataset": "data",
    "engine": "sglang", "engines": "sglang",
}
