"""The spec: one frozen attrs class per TOML table.

Field metadata is the single description of a key: its documentation (``doc``), the slime flag it
maps to (``flag``), numeric ranges (``ge``/``gt``/``le``/``lt``) and, for flags slime would default
the same way, the value at which the flag is left out (``omit_if``). Validation, the reference
docs and the argv builder all read it; nothing else restates it.
"""


import re
import typing
from typing import Any, Literal

import attrs

from .checkpoint import Checkpoint
from .kuberay import KubeRay
from .launch import MAX_NODE_GPUS, MAX_NODES, TOOLKIT_SLIME_COMMIT, Cluster, Cuda, Env, Slime, Wandb
from .profiles import DEFAULT_INTEGRATION, TOOLKIT_REWARDS, TOOLKIT_ROLLOUT, Integration
from .server_groups import SglangModel
from .setting import (
    AdvantageEstimator,
    AttentionBackend,
    FlagValue,
    HfMode,
    KlLossType,
    LogLevel,
    LrDecayStyle,
    ModelArgsSource,
    TrainMode,
    setting,
)
from .training import Opd, WeightSync

# The launch-side tables live in .launch; every table of the spec is read from here.
__all__ = ["MAX_NODES", "MAX_NODE_GPUS", "RUNTIME_ARN", "TOOLKIT_SLIME_COMMIT", "AgentCore", "Algorithm", "Checkpoint",
           "Cluster", "Cuda", "Data", "Env", "Eval", "Experiment", "Extra", "KubeRay", "Model", "Parallel",
           "Rollout", "Sglang", "Slime", "Spec", "Train", "Wandb"]
__all__ += ["Opd", "WeightSync"]  # .training's tables (.checkpoint's: Checkpoint)

DEFAULT_ROLLOUT_FUNCTION = TOOLKIT_ROLLOUT  # the agentcore profile's (profiles.py)
DEFAULT_REWARD_POST_PROCESS = TOOLKIT_REWARDS


def _one_unless_epochs(experiment: Any) -> int | None:  # num_rollout's default (None: given to the factory alone)
    return 1 if experiment is None or experiment.num_epoch is None else None


@attrs.frozen(kw_only=True)
class Experiment:
    """[experiment]: what this run is called and how long it trains."""

    id: str = setting(kind="name", doc="Experiment id: names the bundle directory, the Ray submission id and the "
                          "toolkit's S3 prefix. Letters, digits, '.', '_' and '-'.")
    num_epoch: int | None = setting(None, doc="Epochs over the dataset, not num_rollout.", flag="--num-epoch", ge=1)
    num_rollout: int | None = setting(attrs.Factory(_one_unless_epochs, takes_self=True), flag="--num-rollout", ge=1,
                                      doc="Number of rollout/train iterations (default 1; none when num_epoch is set).")
    seed: int | None = setting(None, doc="Random seed (slime's default is 1234).", flag="--seed", ge=0)
    integration: Integration = setting(
        DEFAULT_INTEGRATION, doc="The rollout integration and its defaults (docs/spec.md, Integration profiles): "
                                 "'agentcore', the toolkit's rollout and reward with [agentcore] (its recipe's "
                                 "defaults); 'slime', slime's own rollout and reward with slime's defaults; 'custom', "
                                 "your own [rollout] function paths, otherwise like 'slime'.")


# An AgentCore Runtime ARN, matched with fullmatch (a `$` would let a trailing newline through): the one
# pattern ACRL-T003 checks at compile time and the executor parses the region from. The runtime id is
# NAME-SUFFIX, and the name starts with a letter (what `agentcore launch` creates).
RUNTIME_ARN = re.compile(
    r"arn:(?P<partition>aws(?:-[a-z]+)*):bedrock-agentcore:(?P<region>[a-z]{2}(?:-[a-z]+)+-\d+):"
    r"(?P<account>\d{12}):runtime/(?P<runtime_id>[A-Za-z][A-Za-z0-9_-]{0,99})")


@attrs.frozen(kw_only=True)
class AgentCore:
    """[agentcore]: the deployed agent and the toolkit's gateway; written to custom_config.yaml."""

    runtime_arn: str = setting(kind="name", doc="ARN of the agent's AgentCore Runtime "
                                   "(arn:aws:bedrock-agentcore:REGION:ACCOUNT:runtime/NAME).")
    s3_bucket: str = setting(kind="name", doc="S3 bucket the agent writes its rollout results to.")
    model_id: str = setting("default", kind="name", doc="OpenAI model id the gateway serves to the agent.")
    timeout: int = setting(900, doc="Per-session ACR invocation timeout, in seconds (acr_timeout).", ge=1)
    tps_limit: int = setting(25, doc="ACR invocations per second quota (acr_tps_limit).", ge=1)
    max_concurrent: int = setting(100, doc="Maximum concurrent ACR sessions.", ge=1)
    max_pool_connections: int = setting(100, doc="boto3 connection pool size; keep >= max_concurrent.", ge=1)
    gateway_port: int = setting(9090, doc="Port of the rllm-model-gateway.", ge=1, le=65535)
    gateway_log_level: LogLevel = setting("warning", doc="Gateway log level.")
    reward_postprocessing: Literal["grpo", "identity"] = setting(
        "grpo", doc="How episode rewards are post-processed by the toolkit.")
    cumulative_token_mode: bool = setting(False, doc="Gateway cumulative token mode (multi-turn agents).")
    renderer_family: str = setting("auto", kind="name", doc="renderers model family for cumulative token mode "
                                               "(e.g. 'qwen3'); 'auto' matches the served model name.")


@attrs.frozen(kw_only=True)
class Model:
    """[model]: the checkpoint and its architecture arguments (MODEL_ARGS)."""

    type: str = setting(kind="name", doc="slime model type: the name of scripts/models/<type>.sh (e.g. qwen2.5-3B).")
    dir: str = setting(doc="Hugging Face checkpoint directory on the cluster.", flag="--hf-checkpoint", kind="path")
    ref_load: str | None = setting(None, doc="Reference model checkpoint; defaults to dir.",
                                   flag="--ref-load", kind="path")
    args_source: ModelArgsSource = setting(
        "auto", doc="Where MODEL_ARGS come from: 'args' (the [model.args] table), 'catalog' (acrl's built-in "
                    "catalog, `acrl models`), 'hf' (the checkpoint's config.json), 'script' (slime's "
                    "scripts/models/<type>.sh sourced at compile time); 'auto': args if given, else the catalog "
                    "entry named type, else the script.")
    args: dict[str, FlagValue] = setting(
        factory=dict, doc="Literal MODEL_ARGS as flag = value; true means a store-true flag.")
    hf_config: str | None = setting(
        None, kind="path", doc="config.json to derive from or check against, on the compiling machine (relative to "
                               "the spec); default: <dir>/config.json when it exists here.")
    overrides: dict[str, FlagValue] = setting(
        factory=dict, doc="MODEL_ARGS flags that win over the source and the config.json check; recorded.")
    script_env: dict[str, str] = setting(
        factory=dict, doc="Environment variables the model script reads (e.g. MODEL_ARGS_ROTARY_BASE).")
    megatron_to_hf_mode: HfMode | None = setting(
        "auto", doc="--megatron-to-hf-mode; 'auto' passes 'bridge' when the targeted slime has the flag "
                    "(the slime and custom profiles leave it out: slime's 'raw').")


@attrs.frozen(kw_only=True)
class Data:
    """[data]: the training prompts."""

    path: str = setting(doc="Training prompt JSONL on the cluster.", flag="--prompt-data", kind="path")
    input_key: str | None = setting("prompt", doc="JSON key of the prompt.", flag="--input-key", kind="name")
    label_key: str | None = setting(None, doc="JSON key of the label.", flag="--label-key", kind="name")
    metadata_key: str | None = setting(None, doc="JSON key of the metadata object.", flag="--metadata-key",
                                       kind="name")


@attrs.frozen(kw_only=True)
class Parallel:
    """[parallel]: Megatron model parallelism of the training actor."""

    tensor: int = setting(2, doc="Tensor parallel size.", flag="--tensor-model-parallel-size", ge=1)
    pipeline: int = setting(1, doc="Pipeline parallel size.", flag="--pipeline-model-parallel-size",
                            ge=1, omit_if=1)
    context: int = setting(1, doc="Context parallel size.", flag="--context-parallel-size", ge=1,
                           omit_if=1)
    expert: int = setting(1, doc="Expert parallel size.", flag="--expert-model-parallel-size", ge=1,
                          omit_if=1)
    sequence_parallel: bool = setting(True, doc="Megatron sequence parallelism (needs tensor > 1).",
                                      flag="--sequence-parallel")


@attrs.frozen(kw_only=True)
class Rollout:
    """[rollout]: sampling and the rollout integration."""

    batch_size: int = setting(32, doc="Prompts per rollout.", flag="--rollout-batch-size", ge=1)
    n_samples_per_prompt: int = setting(8, doc="Samples per prompt.", flag="--n-samples-per-prompt", ge=1)
    max_response_len: int | None = setting(1024, doc="Maximum response tokens.", flag="--rollout-max-response-len",
                                    ge=1)
    max_prompt_len: int | None = setting(None, doc="Maximum prompt tokens.", flag="--rollout-max-prompt-len",
                                         ge=1)
    max_context_len: int | None = setting(None, doc="Maximum prompt + response tokens.",
                                          flag="--rollout-max-context-len", ge=1)
    temperature: float = setting(1.0, doc="Sampling temperature (> 0).", flag="--rollout-temperature", gt=0)
    top_p: float | None = setting(None, doc="Nucleus sampling top-p.", flag="--rollout-top-p", gt=0, le=1)
    over_sampling_batch_size: int | None = setting(None, doc="Prompts sampled per rollout before "
                                                   "filtering.", flag="--over-sampling-batch-size", ge=1)
    gpus_per_engine: int = setting(2, doc="GPUs per SGLang engine.", flag="--rollout-num-gpus-per-engine",
                                   ge=1)
    function_path: str | None = setting(DEFAULT_ROLLOUT_FUNCTION, doc="Rollout function (dotted path).",
                                 flag="--rollout-function-path", kind="function")
    reward_post_process_path: str | None = setting(DEFAULT_REWARD_POST_PROCESS,
                                            doc="Reward post-processing function (dotted path).",
                                            flag="--custom-reward-post-process-path", kind="function")
    custom_generate_function_path: str | None = setting(
        None, doc="Custom generate function (dotted path).", flag="--custom-generate-function-path", kind="function")
    custom_rm_path: str | None = setting(None, doc="Custom reward function (dotted path).",
                                         flag="--custom-rm-path", kind="function")
    # issue 15: slime's newer features (compiler/_spec/rollout_features.py; rules ACRL-R*)
    external_engine_addrs: list[str] = setting(factory=list, flag="--rollout-external-engine-addrs", omit_if=[], doc=(
        "Pre-launched SGLang engines the rollout uses instead of its own, as host:port or http://host:port: no local "
        "rollout GPUs (slime reads the engines' GPUs from their /server_info at launch). At v0.3.0 slime also needs "
        "external = true, and still places one engine actor per address on the rollout GPUs."))
    external: bool = setting(False, flag="--rollout-external", doc=(
        "v0.3.0 only: use external_engine_addrs (later commits have no such flag: the addresses alone say it)."))
    sample_hook_paths: list[str] = setting(factory=list, flag="--rollout-sample-hook-path", omit_if=[],
                                           kind="function", doc=(
        "Hooks applied to each generated Sample before its reward (dotted paths, in order; the flag is passed once "
        "per path): hook(args, sample, *, rollout_id=None, evaluation=False) -> Sample | None. Applied by slime's "
        "own generate_and_rm (slime.rollout.sglang_rollout, fully-async), not by the toolkit's rollout. From v0.3.1."))


@attrs.frozen(kw_only=True)
class Sglang:
    """[sglang]: the rollout engines."""

    mem_fraction_static: float | None = setting(0.7, doc="Fraction of GPU memory for weights and KV cache.",
                                         flag="--sglang-mem-fraction-static", gt=0, lt=1)
    context_length: int | None = setting(None, doc="Context length cap.", flag="--sglang-context-length",
                                         ge=1)
    tool_call_parser: str | None = setting("qwen", doc="Tool-call parser; must match the served model.",
                                    flag="--sglang-tool-call-parser", kind="name")
    reasoning_parser: str | None = setting(None, doc="Reasoning parser (splits <think> blocks).",
                                           flag="--sglang-reasoning-parser", kind="name")
    data_parallel_size: int | None = setting(1, doc="SGLang data parallel size.",
                                      flag="--sglang-data-parallel-size", ge=1)
    cuda_graph_max_bs: int | None = setting(32, doc=(
        "Largest (decode) batch captured in a CUDA graph. Passed as --sglang-cuda-graph-max-bs-decode where the "
        "targeted slime's SGLang keeps --cuda-graph-max-bs only as a deprecated alias (624b824)."),
        flag="--sglang-cuda-graph-max-bs", ge=1)
    log_level: LogLevel | None = setting("warning", doc="SGLang log level.", flag="--sglang-log-level")
    log_level_http: LogLevel | None = setting("warning", doc="SGLang HTTP log level.", flag="--sglang-log-level-http")
    models: dict[str, SglangModel] = setting(factory=dict, key_kind="name", doc=(
        "slime's --sglang-config: the rollout's SGLang models and their server groups (PD disaggregation, "
        "several models), one table per model named by its key; written to the bundle's sglang_config.yaml. "
        "Default: slime's one regular group of --rollout-num-gpus GPUs."))


@attrs.frozen(kw_only=True)
class Algorithm:
    """[algorithm]: the RL objective."""

    advantage_estimator: AdvantageEstimator = setting("grpo", doc="Advantage estimator.",
                                                      flag="--advantage-estimator")
    use_kl_loss: bool = setting(True, doc="Add a KL loss against the reference model.", flag="--use-kl-loss")
    kl_loss_type: KlLossType | None = setting("low_var_kl", doc="KL loss estimator.", flag="--kl-loss-type")
    kl_loss_coef: float | None = setting(None, doc="KL loss coefficient (slime's default is 0.0).",
                                         flag="--kl-loss-coef", ge=0)
    kl_coef: float | None = setting(None, doc="KL penalty in the reward (slime's default is 0.0).",
                                    flag="--kl-coef", ge=0)
    entropy_coef: float | None = setting(None, doc="Entropy bonus coefficient.", flag="--entropy-coef", ge=0)
    eps_clip: float = setting(0.2, doc="PPO clip range (lower).", flag="--eps-clip", gt=0)
    eps_clip_high: float | None = setting(0.28, doc="PPO clip range (upper).", flag="--eps-clip-high", gt=0)
    normalize_advantages: bool = setting(False, doc="Normalize advantages.", flag="--normalize-advantages")
    use_tis: bool = setting(False, doc="Truncated importance sampling for off-policy rollouts.",
                            flag="--use-tis")


@attrs.frozen(kw_only=True)
class Train:
    """[train]: optimizer, batching and training-loop settings."""

    mode: TrainMode = setting("sync", doc="'sync' runs train.py; 'async' runs train_async.py "
                                          "(needs colocate = false). slime's fully-async rollout is 'async' with "
                                          "[rollout] function_path = \"slime.rollout.fully_async_rollout."
                                          "generate_rollout_fully_async\" (no evaluation: ACRL-R003).")
    num_steps_per_rollout: int = setting(1, doc="Optimizer steps per rollout; global batch = "
                                                "rollout samples / steps.", flag="--num-steps-per-rollout",
                                         ge=1)
    micro_batch_size: int | None = setting(None, doc="Micro-batch size (slime's default is 1).",
                                           flag="--micro-batch-size", ge=1)
    use_dynamic_batch_size: bool = setting(True, doc="Pack micro-batches by token count.",
                                           flag="--use-dynamic-batch-size")
    max_tokens_per_gpu: int | None = setting(9216, doc="Token budget per GPU per micro-batch.",
                                      flag="--max-tokens-per-gpu", ge=1)
    balance_by_flops: bool = setting(False, flag="--balance-by-flops", doc=(
        "Partition micro-batches by estimated FLOPs (Karmarkar-Karp) instead of first-fit token packing; implies "
        "slime's --balance-data. Needs use_dynamic_batch_size (slime asserts it). From fa3c990."))
    lr: float = setting(1e-6, doc="Learning rate.", flag="--lr", gt=0)
    lr_decay_style: LrDecayStyle | None = setting("constant", doc="Learning-rate schedule.", flag="--lr-decay-style")
    weight_decay: float | None = setting(0.1, doc="Weight decay.", flag="--weight-decay", ge=0)
    adam_beta1: float | None = setting(None, doc="Adam beta1.", flag="--adam-beta1", gt=0, lt=1)
    adam_beta2: float | None = setting(0.98, doc="Adam beta2.", flag="--adam-beta2", gt=0, lt=1)
    optimizer_cpu_offload: bool = setting(True, doc="Keep optimizer states on the CPU.",
                                          flag="--optimizer-cpu-offload")
    overlap_cpu_optimizer_d2h_h2d: bool = setting(True, doc="Overlap CPU-optimizer transfers.",
                                                  flag="--overlap-cpu-optimizer-d2h-h2d")
    precision_aware_optimizer: bool = setting(True, doc="Precision-aware optimizer.",
                                              flag="--use-precision-aware-optimizer")
    attention_backend: AttentionBackend | None = setting("flash", doc="Attention kernel backend.",
                                                  flag="--attention-backend")
    attention_dropout: float | None = setting(0.0, doc="Attention dropout.", flag="--attention-dropout", ge=0, lt=1)
    hidden_dropout: float | None = setting(0.0, doc="Hidden dropout.", flag="--hidden-dropout", ge=0, lt=1)
    accumulate_allreduce_grads_in_fp32: bool = setting(True, doc="All-reduce gradients in fp32.",
                                                       flag="--accumulate-allreduce-grads-in-fp32")
    attention_softmax_in_fp32: bool = setting(True, doc="Attention softmax in fp32.",
                                              flag="--attention-softmax-in-fp32")


@attrs.frozen(kw_only=True)
class Eval:
    """[eval]: periodic evaluation."""

    interval: int | None = setting(None, doc="Evaluate every N rollouts.", flag="--eval-interval", ge=1)
    datasets: dict[str, str] = setting(factory=dict, doc="Evaluation datasets: name = JSONL path.",
                                       flag="--eval-prompt-data", kind="path", key_kind="name")
    n_samples_per_prompt: int | None = setting(None, doc="Samples per eval prompt.",
                                               flag="--n-samples-per-eval-prompt", ge=1)
    temperature: float | None = setting(None, doc="Eval sampling temperature.", flag="--eval-temperature",
                                        ge=0)
    max_response_len: int | None = setting(None, doc="Eval maximum response tokens.",
                                           flag="--eval-max-response-len", ge=1)


@attrs.frozen(kw_only=True)
class Extra:
    """[extra]: escape hatch for any other slime / Megatron / sglang flag."""

    flags: dict[str, FlagValue] = setting(factory=dict, doc="flag = value; true is a store-true flag, false "
                                                            "leaves it out, a list passes several values.")
    args: list[str] = setting(factory=list, doc="Raw arguments appended last, verbatim.")


@attrs.frozen(kw_only=True)
class Spec:
    """A whole experiment spec."""

    experiment: Experiment = setting(doc="What this run is called and how long it trains.")
    agentcore: AgentCore | None = setting(None, doc="The deployed agent and the toolkit's gateway (required, and "
                                                   "only allowed, with integration = \"agentcore\").")
    model: Model = setting(doc="The checkpoint and its architecture.")
    data: Data = setting(doc="The training prompts.")
    slime: Slime = setting(factory=Slime, doc="The slime checkout the bundle targets.")
    cluster: Cluster = setting(factory=Cluster, doc="GPUs, placement and the Ray cluster.")
    parallel: Parallel = setting(factory=Parallel, doc="Megatron model parallelism.")
    rollout: Rollout = setting(factory=Rollout, doc="Sampling and the rollout integration.")
    sglang: Sglang = setting(factory=Sglang, doc="The rollout engines.")
    algorithm: Algorithm = setting(factory=Algorithm, doc="The RL objective.")
    train: Train = setting(factory=Train, doc="Optimizer and batching.")
    opd: Opd = setting(factory=Opd, doc="On-policy distillation.")
    weight_sync: WeightSync = setting(factory=WeightSync, doc="Weight sync to the rollout engines; releasing the "
                                                              "training actors.")
    eval: Eval = setting(factory=Eval, doc="Periodic evaluation.")
    checkpoint: Checkpoint = setting(factory=Checkpoint, doc="Saving, resuming and continuing.")
    cuda: Cuda = setting(factory=Cuda, doc="CUDA toolkit pinning.")
    wandb: Wandb = setting(factory=Wandb, doc="Weights & Biases logging.")
    env: Env = setting(factory=Env, doc="Environment of the Ray job.")
    kuberay: KubeRay = setting(factory=KubeRay, doc="The KubeRay RayJob (--target kuberay).")
    extra: Extra = setting(factory=Extra, doc="Escape hatch for other flags.")


def table_class(tp: Any) -> type | None:
    """The attrs class of a field's type: the class itself, or ``T`` of ``T | None`` (a table a profile may leave
    out, as [agentcore]); None for any other type."""
    if isinstance(tp, type) and attrs.has(tp):
        return tp
    return next((a for a in typing.get_args(tp) if isinstance(a, type) and attrs.has(a)), None)


def table_types() -> dict[str, type]:
    """Each top-level table's name and attrs class, in the spec's order ([agentcore]'s too, whose field is
    ``AgentCore | None``)."""
    out: dict[str, type] = {}
    for field in attrs.fields(Spec):
        args = [a for a in typing.get_args(field.type) if a is not type(None)]
        out[field.name] = typing.cast(type, args[0] if args else field.type)
    return out
