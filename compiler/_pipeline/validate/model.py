"""ACRL-M*: the model architecture. MODEL_ARGS against the parallel sizes (heads, query groups, layers,
experts), against the checkpoint's config.json and acrl's catalog, the static GPU-memory estimate (memory.py),
and the [model] type checked before slime's model script is sourced (M009).
"""

from __future__ import annotations

from collections.abc import Iterator

from ..model_args.catalog import entry
from ..model_args.resolve import model_type_problem
from ..placement import GroupShape
from .engine import MODEL_ARGS, PLACEMENT, Context, Finding, divisors, one_of, rule
from .memory import estimate_memory, expert_tensor_parallel, memory_problems


@rule("ACRL-M009", "error", ["model.type"], "model type is a slime model name", before_sourcing=True)
def _model_type(ctx: Context) -> Iterator[Finding]:
    """[model] type names slime's scripts/models/<type>.sh and is written into model_args.sh: letters, digits, '.',
    '_' and '-' only (qwen2.5-3B, glm4-32B), never a path or a line break. Checked before anything is sourced."""
    problem = model_type_problem(ctx.spec.model.type)
    if problem is not None:
        yield Finding(f"this [model] type {problem}",
                      "use the file name of slime's scripts/models/<type>.sh without .sh (e.g. qwen2.5-3B); see "
                      "`acrl models`")



@rule("ACRL-M001", "error", ["parallel.tensor", "model.args"], "attention heads divisible by TP",
      reads=(PLACEMENT, MODEL_ARGS, "model.dir"))
def _heads_tp(ctx: Context) -> Iterator[Finding]:
    """Attention heads must be divisible by the training tensor parallel size and by the tensor parallel size the
    rollout engine's attention runs with; query groups must divide or be a multiple of them. The engine's sizes are
    the placement model's (compiler/_pipeline/placement.py: EngineParallel): its tensor size is gpus_per_engine,
    divided by an sglang pipeline size given in [extra]; with --sglang-enable-dp-attention and an sglang
    data-parallel size dp > 1, SGLang shards the attention over tensor size / dp (its
    compute_dp_attention_world_info), e.g. slime's run-glm4.7-30B-A3B.sh: 20 heads, engines of 8 GPUs with DP
    attention 8, attention tensor size 1. Only for local engines (none under --debug-train-only or with external
    engines)."""
    heads, groups = ctx.model_int("--num-attention-heads"), ctx.model_int("--num-query-groups")
    if "--group-query-attention" not in ctx.model:
        groups = None
    sizes = [(ctx.spec.parallel.tensor, "tensor parallel size", "parallel.tensor")]
    for group, e in ctx.placement.group_parallel():
        if not _serves_policy(ctx, group):
            continue  # another checkpoint ([sglang.models] with its own model_path): not these model args
        pp = f" / sglang pipeline size {e.pp}" if e.pp > 1 else ""
        which = f" ({group.worker_type} group of model {group.model!r})" if ctx.placement.args.server_groups else ""
        engine = f"the rollout engine's tensor parallel size (gpus_per_engine{pp}){which}" if e.attention_dp == 1 \
            else f"the rollout engine's attention tensor parallel size (gpus_per_engine{pp} / sglang dp size " \
            f"{e.attention_dp}, with DP attention){which}"
        if (e.attention_tp, engine) not in [(tp, what) for tp, what, _ in sizes]:
            sizes.append((e.attention_tp, engine, "sglang.models" if which else "rollout.gpus_per_engine"))
    for tp, what, key in sizes:
        fix = _tp_choices(ctx, heads, groups) if key == "parallel.tensor" else None
        if heads and heads % tp:
            yield Finding(f"{heads} attention heads are not divisible by {what} {tp}",
                          fix or f"choose a {what} dividing {heads}: one of {one_of(divisors(heads, 64))}", keys=(key,))
        if groups and groups % tp and tp % groups:
            yield Finding(f"{groups} query groups (KV heads) are neither a multiple nor a divisor of {what} "
                          f"{tp}", fix or f"choose a {what} that divides or is a multiple of {groups}", keys=(key,))


def _tp_choices(ctx: Context, heads: int | None, groups: int | None) -> str | None:
    """The training tensor sizes that fit the heads, the query groups and the actor's GPUs, as a fix."""
    p = ctx.spec.parallel
    gpus = ctx.actor_gpus // (p.pipeline * p.context) if ctx.actor_gpus % (p.pipeline * p.context) == 0 else 0
    fits = [t for t in divisors(gpus) if (not heads or heads % t == 0) and
            (not groups or groups % t == 0 or t % groups == 0)]
    if not fits or not heads:
        return None
    kv = f", the {groups} query groups" if groups else ""
    return (f"set tensor to one of {one_of(fits)}: it divides the {heads} heads{kv} and the actor's {ctx.actor_gpus} "
            f"GPUs{' / (pipeline x context)' if p.pipeline * p.context > 1 else ''}")


def _serves_policy(ctx: Context, group: GroupShape) -> bool:
    """Whether a server group serves the policy's checkpoint (the model args acrl resolved): slime's default group
    does; a [sglang.models] group does unless its model or an override names another model_path."""
    models = ctx.spec.sglang.models
    if group.model not in models:
        return True
    path = dict(group.overrides).get("model_path", models[group.model].model_path)
    return path is None or path == ctx.spec.model.dir


@rule("ACRL-M002", "error", ["parallel.pipeline", "model.args"], "layers divisible by PP",
      reads=(MODEL_ARGS, "extra.flags", "extra.args"))
def _layers_pp(ctx: Context) -> Iterator[Finding]:
    """Layers must be divisible by the pipeline parallel size (unless --decoder-first/last-pipeline-num-layers set an
    uneven split)."""
    layers, pp = ctx.model_int("--num-layers"), ctx.spec.parallel.pipeline
    uneven = {"--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"}
    if layers and pp > 1 and layers % pp and not uneven & (set(ctx.model) | set(ctx.extra)):
        yield Finding(f"{layers} layers are not divisible by pipeline size {pp}",
                      f"set pipeline to a size dividing {layers}: one of {one_of(divisors(layers, 64))}",
                      keys=("parallel.pipeline",))


@rule("ACRL-M003", "error", ["parallel.expert", "model.args"], "experts divisible by EP",
      reads=(MODEL_ARGS, "parallel.tensor", "parallel.pipeline", "extra.flags", "extra.args"))
def _experts_ep(ctx: Context) -> Iterator[Finding]:
    """Experts must be divisible by the expert parallel size; expert parallelism needs experts; expert parallel x
    expert tensor parallel (default: the tensor size) x pipeline sizes must divide the actor's GPUs (Megatron's
    initialize_model_parallel fails in the actors otherwise)."""
    experts, ep = ctx.model_int("--num-experts"), ctx.spec.parallel.expert
    if ep > 1 and not experts:
        yield Finding(f"expert parallel size {ep} on a model without experts", "set [parallel] expert = 1",
                      keys=("parallel.expert",))
    elif experts and experts % ep:
        yield Finding(f"{experts} experts are not divisible by expert parallel size {ep}",
                      f"set expert to a size dividing {experts}: one of {one_of(divisors(experts, 256))}",
                      keys=("parallel.expert",))
    etp = expert_tensor_parallel(ctx.spec, ctx.extra)
    size = ep * etp * ctx.spec.parallel.pipeline
    if experts and ctx.actor_gpus % size:
        yield Finding(f"expert parallel {ep} x expert tensor parallel {etp} x pipeline {ctx.spec.parallel.pipeline} "
                      f"= {size} does not divide the actor's {ctx.actor_gpus} GPUs: Megatron's "
                      "initialize_model_parallel fails in the actors",
                      "choose [parallel] expert so that the product divides the actor's GPUs (or pass "
                      "--expert-tensor-parallel-size 1 in [extra.flags])", keys=("parallel.expert",))


@rule("ACRL-M004", "error", ["model.args"], "query groups need grouped-query attention", reads=(MODEL_ARGS,))
def _gqa_flag(ctx: Context) -> Iterator[Finding]:
    """--num-query-groups without --group-query-attention is silently ignored by Megatron (the model is built with
    multi-head attention and its weights do not load)."""
    if "--num-query-groups" in ctx.model and "--group-query-attention" not in ctx.model:
        yield Finding("MODEL_ARGS set --num-query-groups without --group-query-attention: Megatron ignores the "
                      "groups and builds multi-head attention", "add group-query-attention = true to [model.args]")


@rule("ACRL-M005", "error", ["model.type", "model.args_source", "model.overrides"],
      "MODEL_ARGS agree with the checkpoint's config.json", reads=(MODEL_ARGS,))
def _config_mismatch(ctx: Context) -> Iterator[Finding]:
    """When the checkpoint's config.json is on the compiling machine (or [model] hf_config names a copy), the frozen
    MODEL_ARGS must agree with it on every field of the Hugging Face <-> Megatron mapping, not only the few slime
    compares at launch (e.g. slime's qwen2.5-32B script has --norm-epsilon 1e-5; the Instruct model uses 1e-6).
    A flag set in [model.overrides] is not compared."""
    resolution = ctx.resolution
    if resolution is None:
        return
    match = resolution.matching_catalog
    better = "" if match is None else f'; or set [model] type = "{match}"' if match != ctx.spec.model.type else \
        '; or use the catalog entry of this type: args_source = "catalog"'
    for m in resolution.mismatches:
        yield Finding(m.problem, f"{m.fix}: in the spec, {m.override_hint}{better}")


@rule("ACRL-M006", "error", ["model.args", "model.type", "model.overrides"],
      "kv_channels explicit when head_dim differs from hidden / heads", reads=(MODEL_ARGS,))
def _kv_channels(ctx: Context) -> Iterator[Finding]:
    """Without --kv-channels Megatron uses hidden size / attention heads as the head dimension (and stops at launch
    when it is not a whole number). When the model's head_dim (in the checkpoint's config.json, else in the catalog
    entry named by [model] type, for the same hidden size and heads) differs, e.g. Qwen3-4B: 2560 / 32 = 80 but
    head_dim 128, MODEL_ARGS must pass --kv-channels, or the attention is built with the wrong shape."""
    hidden, heads = ctx.model_int("--hidden-size"), ctx.model_int("--num-attention-heads")
    if "--kv-channels" in ctx.model or "--multi-latent-attention" in ctx.model or not hidden or not heads:
        return
    where = "[model.args]" if ctx.model_args.source == "args" else "[model.overrides]"
    keys = ("model.args",) if ctx.model_args.source == "args" else ("model.overrides", "model.type")
    if hidden % heads:
        yield Finding(f"MODEL_ARGS have no --kv-channels and hidden size {hidden} is not divisible by {heads} "
                      "attention heads: Megatron stops at launch", f'add "kv-channels" = <head_dim> to {where}',
                      keys=keys)
        return
    r = ctx.resolution
    ref = r.reference if r is not None else None
    reported = (*r.mismatches, *r.catalog_mismatches, *r.script_differences) if r is not None else ()
    if r is None or ref is None or any(m.flag == "--kv-channels" for m in reported):  # M005 or M008 said it
        return
    head_dim = ref.fields.get("head_dim")
    same_model = (ref.fields.get("hidden_size"), ref.fields.get("num_attention_heads")) == (hidden, heads)
    if type(head_dim) is int and same_model and head_dim != hidden // heads:
        yield Finding(f"MODEL_ARGS have no --kv-channels, so Megatron uses hidden size / attention heads = "
                      f"{hidden} / {heads} = {hidden // heads} as the head dimension, but {ref.shown} has head_dim "
                      f"{head_dim}: the attention is built with the wrong shape and the checkpoint does not load",
                      f'add "kv-channels" = {head_dim} to {where}', keys=keys)


@rule("ACRL-M007", "warning", ["cluster.gpu_memory_gib", "parallel.tensor", "parallel.pipeline", "parallel.expert",
                               "train.optimizer_cpu_offload", "rollout.gpus_per_engine", "sglang.mem_fraction_static"],
      "the static memory estimate fits the GPUs",
      reads=(PLACEMENT, MODEL_ARGS, "rollout.max_prompt_len", "rollout.max_response_len", "rollout.max_context_len",
             "sglang.context_length", "train.precision_aware_optimizer", "train.accumulate_allreduce_grads_in_fp32"))
def _memory(ctx: Context) -> Iterator[Finding]:
    """A static estimate per GPU (docs/memory.md) must fit [cluster] gpu_memory_gib: the actor's bf16 weights,
    gradients and optimizer states (sharded by TP, PP, EP and the distributed optimizer; off the GPU with
    optimizer_cpu_offload), the rollout engine's weights and KV cache under mem_fraction_static, and one CUDA
    context per process; activations are not counted, so a setup over the limit cannot run."""
    estimate = estimate_memory(ctx.spec, ctx.model, ctx.placed)
    if not isinstance(estimate, str):
        for problem in memory_problems(estimate, ctx.spec):
            yield Finding(problem.message, problem.hint, problem.keys)


@rule("ACRL-M008", "error", ["model.type", "model.args_source", "model.overrides"],
      "slime's model script agrees with the published config", reads=(MODEL_ARGS,))
def _script_vs_catalog(ctx: Context) -> Iterator[Finding]:
    """When MODEL_ARGS come from slime's model script and the checkpoint's config.json is not on the compiling
    machine, the script is compared field by field with acrl's catalog entry of the same name, written from the
    model's published config.json (e.g. slime's glm4-32B.sh has 64 layers and 8 query groups, GLM-4-32B-0414 61
    and 2). Whatever the source, whenever slime's script of the entry's architecture is readable on the compiling
    machine, the catalog entry is compared with it flag by flag, performance settings included (e.g. Qwen3 MoE's
    --moe-token-dispatcher-type alltoall, --moe-grouped-gemm, --moe-permute-fusion): a difference the catalog
    documents (catalog.CORRECTIONS, e.g. the Instruct model's norm epsilon) is a note, any other is this error when
    MODEL_ARGS come from the catalog, and a note otherwise. A flag set in [model.overrides] is not compared."""
    r = ctx.resolution
    if r is None:
        return
    for m in r.script_differences:
        yield Finding(f"{m.problem}: the catalog entry does not launch what slime's script launches",
                      f"{m.fix}: in the spec, {m.override_hint}, or args_source = \"script\" to use slime's script")
    if not r.catalog_mismatches:
        return
    found = entry(ctx.spec.model.type)
    known = dict(found.slime_differences) if found is not None else {}
    other = (f'; if the checkpoint is the model the script describes, set [model] type = "{r.script_matches}" '
             'and args_source = "catalog"') if r.script_matches else ""
    for m in r.catalog_mismatches:
        note = f" (a known difference: {known[m.flag]})" if m.flag in known else ""
        yield Finding(f"{m.problem}{note}: if the checkpoint is the published model, MODEL_ARGS "
                      "do not describe it",
                      f"{m.fix}: in the spec, {m.override_hint}, or args_source = \"catalog\"; to keep the script's "
                      f"value, set it in [model.overrides] (or compile where the checkpoint's config.json is, or "
                      f"name a copy in [model] hf_config){other}")
