"""A static estimate of GPU memory per GPU: the training actor (Megatron) and the rollout engines (SGLang).

Pure arithmetic over the frozen MODEL_ARGS and the spec (the architecture and its parameter count:
parameters.py); no I/O. It counts what stays allocated for the whole run
(weights, gradients, optimizer states, SGLang's static pool, one CUDA context per process) and leaves out what
depends on the batch (activations, SGLang's CUDA graphs, allocator fragmentation). docs/memory.md gives the formula,
its assumptions and its limits.
"""

from __future__ import annotations

import math

import attrs

from ..._spec.tables import Spec
from .. import placement_spec
from ..placement import EngineParallel, Placement
from ..placement_spec import SpecPlacement
from .parameters import Architecture, Flags, ParameterCount, architecture, count_parameters, flag_int

GIB = float(1 << 30)
PROCESS_OVERHEAD_GIB = 1.0  # one process on one GPU: CUDA context, NCCL communicators, cuBLAS workspace
_DTYPE_BYTES = {"fp32": 4.0, "bf16": 2.0, "bfloat16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp8_e4m3": 1.0,
                "fp8_e5m2": 1.0, "fp4_e2m1": 0.5}
_OPTIMIZER_NAMES = {"adam": "Adam", "sgd": "SGD", "muon": "Muon", "dist_muon": "distributed Muon"}

def _fraction(flags: Flags, flag: str, default: float) -> float:
    values = flags.get(flag)
    try:
        value = float(values[0]) if values else default
    except ValueError:
        return default
    return min(1.0, max(0.0, value)) if math.isfinite(value) else default



@attrs.frozen
class ActorMemory:
    """GiB per GPU on the fullest pipeline stage of the training actor."""

    weights: float
    gradients: float
    optimizer: float  # on the GPU (0 when fully offloaded to the CPU)
    parameters_per_gpu: int
    grad_dtype: str
    optimizer_bytes: float  # per parameter: master weights + moments
    optimizer_name: str
    offload_fraction: float  # of the optimizer states on the CPU
    data_parallel: int  # ranks the distributed optimizer shards the dense states over
    expert_data_parallel: int

    @property
    def total(self) -> float:
        return self.weights + self.gradients + self.optimizer


def _dtype_bytes(flags: Flags, flag: str, default: str) -> float:
    return _DTYPE_BYTES.get((flags.get(flag) or [default])[0], _DTYPE_BYTES[default])


def _optimizer_bytes(spec: Spec, extra: Flags) -> tuple[str, float]:
    """Bytes of optimizer state per parameter: fp32 master weights and Adam's two moments, 12 by default. Only the
    precision-aware optimizer honours --main-params-dtype / --exp-avg-dtype / --exp-avg-sq-dtype."""
    name = (extra.get("--optimizer") or ["adam"])[0]
    aware = spec.train.precision_aware_optimizer
    master = _dtype_bytes(extra, "--main-params-dtype", "fp32") if aware else 4.0
    first = _dtype_bytes(extra, "--exp-avg-dtype", "fp32") if aware else 4.0
    second = _dtype_bytes(extra, "--exp-avg-sq-dtype", "fp32") if aware else 4.0
    return name, master + first + (second if name == "adam" else 0.0)  # sgd and muon keep one momentum


def actor_memory(spec: Spec, a: Architecture, extra: Flags, gpus: int) -> ActorMemory:
    """Weights (bf16), gradients (fp32 with accumulate_allreduce_grads_in_fp32, else bf16) and optimizer states
    (sharded over data parallel ranks by the distributed optimizer, which slime always uses) on the fullest stage
    of an actor of ``gpus`` GPUs."""
    p = spec.parallel
    etp = expert_tensor_parallel(spec, extra)
    dp = max(1, gpus // (p.tensor * p.pipeline))  # the optimizer's data-parallel group includes context parallel
    edp = max(1, gpus // (etp * p.expert * p.pipeline))
    count = count_parameters(a, p.tensor)
    grad_bytes = 4.0 if spec.train.accumulate_allreduce_grads_in_fp32 else 2.0
    name, state_bytes = _optimizer_bytes(spec, extra)
    offload = 0.0
    if spec.train.optimizer_cpu_offload:
        offload = _fraction(extra, "--optimizer-offload-fraction", 1.0)  # Megatron's default: all of them
    best: ActorMemory | None = None
    for dense, expert in _stages(count, p.pipeline, a.tied):
        on_gpu = dense / p.tensor + expert / (etp * p.expert)
        states = state_bytes * (dense / p.tensor / dp + expert / (etp * p.expert) / edp) * (1 - offload)
        memory = ActorMemory(2 * on_gpu / GIB, grad_bytes * on_gpu / GIB, states / GIB, round(on_gpu),
                             "fp32" if grad_bytes == 4 else "bf16", state_bytes, name, offload, dp, edp)
        if best is None or memory.total > best.total:
            best = memory
    assert best is not None
    return best


def expert_tensor_parallel(spec: Spec, extra: Flags) -> int:
    """Megatron's --expert-tensor-parallel-size: as given in [extra], else the tensor size (its default)."""
    return flag_int(extra, "--expert-tensor-parallel-size") or spec.parallel.tensor


def _stages(count: ParameterCount, pipeline: int, tied: bool) -> list[tuple[int, int]]:
    """(dense, expert) parameters of each pipeline stage: the first holds the embedding, the last the final norm and
    the output layer (with tied embeddings and more than one stage, its own copy of the embedding)."""
    per = math.ceil(len(count.layers) / pipeline)
    used = min(pipeline, max(1, math.ceil(len(count.layers) / max(1, per))))  # stages that hold layers
    stages = [[sum(d for d, _ in chunk), sum(e for _, e in chunk)]
              for chunk in (count.layers[s * per:(s + 1) * per] for s in range(used))]
    if pipeline > used:  # more stages than layers (an error of its own): the last holds only the output layer
        stages.append([0, 0])
    stages[0][0] += count.embedding
    stages[-1][0] += count.final_norm + (count.output if not tied else count.embedding if pipeline > 1 else 0)
    return [(d, e) for d, e in stages]


# --- the rollout engines -------------------------------------------------------------------------------------

@attrs.frozen
class RolloutMemory:
    """GiB per GPU of one SGLang engine."""

    engine_gpus: int
    engine_tp: int
    weights: float
    static: float  # mem_fraction_static x GPU memory: weights + KV cache
    kv_bytes_per_token: float  # per GPU
    longest_sequence: int  # tokens: the longest sequence the spec allows, or at least max_response_len
    longest_from: str  # the spec keys that bound it

    @property
    def kv_cache(self) -> float:
        return self.static - self.weights

    @property
    def kv_tokens(self) -> int:
        return max(0, int(self.kv_cache * GIB / self.kv_bytes_per_token)) if self.kv_bytes_per_token else 0


def _smallest_engine(placement: Placement) -> EngineParallel:
    """The engine whose GPUs hold the most weights each: the one of fewest GPUs over the server groups
    ([sglang.models]), else slime's default group's."""
    engines = [e for _, e in placement.group_parallel()]
    return min(engines, key=lambda e: e.gpus) if engines else placement.engine_parallel


def rollout_memory(spec: Spec, a: Architecture, extra: Flags, engine: EngineParallel) -> RolloutMemory:
    """bf16 weights sharded over the engine's GPUs, and what mem_fraction_static leaves for the KV cache (the KV
    heads sharded over the tensor size the attention runs with: ``engine.attention_tp``, smaller with DP attention)."""
    tp, pp = engine.attention_tp, engine.pp
    gpus = engine.gpus
    weights = 2 * count_parameters(a).total / gpus / GIB
    kv_dtype = (extra.get("--sglang-kv-cache-dtype") or ["auto"])[0]
    element = _DTYPE_BYTES.get(kv_dtype, 2.0)
    layers = math.ceil(a.layers / pp)
    if a.mla is not None:  # the compressed latent and the RoPE key, the same on every TP rank
        per_token = layers * (a.mla.kv_lora_rank + a.mla.qk_pos_dim) * element
    else:  # K and V of the KV heads on this rank; heads are replicated when TP exceeds them
        per_token = 2 * layers * math.ceil(a.query_groups / tp) * a.kv_channels * element
    r = spec.rollout
    longest, where = ((r.max_context_len, "[rollout] max_context_len") if r.max_context_len else
                      (r.max_prompt_len + r.max_response_len, "[rollout] max_prompt_len + max_response_len")
                      if r.max_prompt_len and r.max_response_len else
                      (spec.sglang.context_length, "[sglang] context_length") if spec.sglang.context_length else
                      (r.max_response_len, "[rollout] max_response_len, without the prompt") if r.max_response_len
                      else (0, "no length bound in the spec"))
    return RolloutMemory(gpus, engine.tp, weights, mem_fraction(spec) * spec.cluster.gpu_memory_gib,
                         per_token, longest, where)


# sglang chooses mem_fraction_static itself when it is not passed (the slime profile): from the GPU's memory and
# the engine's parallel sizes, not modelled here; the estimate then takes this typical value and says so.
SGLANG_AUTO_FRACTION = 0.8


def mem_fraction(spec: Spec) -> float:
    """[sglang] mem_fraction_static, or :data:`SGLANG_AUTO_FRACTION` when it is unset (sglang's own choice)."""
    frac = spec.sglang.mem_fraction_static
    return SGLANG_AUTO_FRACTION if frac is None else frac


# --- the estimate ----------------------------------------------------------------------------------------------

@attrs.frozen
class MemoryEstimate:
    """What one GPU holds in each phase, in GiB, against the spec's GPU memory."""

    gpu: float
    colocated: bool
    parameters: int  # of the whole model (vocabulary padded as for TP 1)
    expert_parameters: int
    actor: ActorMemory
    rollout: RolloutMemory
    offload_train: bool  # colocated: the actor's GPU memory is released while SGLang generates
    offload_rollout: bool  # colocated: SGLang's weights and KV cache are released while the actor trains
    unmodeled: tuple[str, ...]

    @property
    def processes(self) -> int:
        """Processes holding a CUDA context on one GPU."""
        return 2 if self.colocated else 1

    @property
    def overhead(self) -> float:
        return self.processes * PROCESS_OVERHEAD_GIB

    @property
    def training_phase(self) -> float:
        """The actor's GPUs while it trains (before activations)."""
        resident_rollout = self.rollout.static if self.colocated and not self.offload_rollout else 0.0
        return self.actor.total + self.overhead + resident_rollout

    @property
    def rollout_phase(self) -> float:
        """The rollout GPUs while SGLang generates."""
        resident_actor = self.actor.total if self.colocated and not self.offload_train else 0.0
        return self.rollout.static + self.overhead + resident_actor


def estimate_memory(spec: Spec, model: Flags, placed: SpecPlacement | None = None) -> MemoryEstimate | str:
    """The static memory estimate for ``spec`` with MODEL_ARGS ``model`` (flag -> values), or why there is none.
    The actor's GPUs and the engine's sizes are the placement model's (``placed``: the spec's, read when not given)."""
    a = architecture(model)
    if isinstance(a, str):
        return a
    placed = placed if placed is not None else placement_spec.read(spec)
    extra = placed.extra
    colocated = spec.cluster.colocate
    # slime: --colocate turns --offload-train and --offload-rollout on unless the spec says otherwise.
    given = set(extra)
    offload_train = (colocated and "--no-offload-train" not in given) or bool({"--offload-train", "--offload"} & given)
    offload_rollout = (colocated and "--no-offload-rollout" not in given) or bool({"--offload-rollout", "--offload"} &
                                                                                   given)
    count = count_parameters(a)
    return MemoryEstimate(spec.cluster.gpu_memory_gib, colocated, count.total, count.experts,
                          actor_memory(spec, a, extra, placed.actor.num_nodes * placed.actor.gpus_per_node),
                          rollout_memory(spec, a, extra, _smallest_engine(placed.placement)), offload_train,
                          offload_rollout, a.unmodeled)


# --- what does not fit ---------------------------------------------------------------------------------------

@attrs.frozen
class Problem:
    """One way the estimate does not fit: a message with the numbers, a fix hint, the spec keys concerned."""

    message: str
    hint: str
    keys: tuple[str, ...]


def _gib(value: float) -> str:
    return f"{value:.1f} GiB"


def _billions(count: float) -> str:
    return f"{count / 1e9:.2f}B"


def memory_problems(e: MemoryEstimate, spec: Spec) -> list[Problem]:
    """What cannot fit in [cluster] gpu_memory_gib, phase by phase, with the numbers and a fix."""
    out: list[Problem] = []
    approx = f" (approximate: {'; '.join(e.unmodeled)})" if e.unmodeled else ""
    limit = f"[cluster] gpu_memory_gib = {e.gpu:g}"
    contexts = "the actor and the colocated SGLang engine" if e.colocated else "the actor"
    if e.training_phase > e.gpu:
        out.append(_actor_problem(e, spec, limit, contexts, approx))
    r, frac = e.rollout, mem_fraction(spec)
    chosen = "" if spec.sglang.mem_fraction_static is not None else " (unset: sglang chooses it; taken as)"
    static = f"mem_fraction_static{chosen} {frac:g} x {e.gpu:g} GiB = {_gib(r.static)}"
    fix = (f"raise [rollout] gpus_per_engine (the engine's GPUs, now {r.engine_gpus}) or [sglang] mem_fraction_static "
           f"(now {frac:g})")
    rollout_keys = ("rollout.gpus_per_engine", "sglang.mem_fraction_static", "cluster.gpu_memory_gib", "model.type")
    if r.weights >= r.static:
        gpus = f"{r.engine_gpus} GPU" + ("s" if r.engine_gpus > 1 else "")
        out.append(Problem(f"an SGLang engine of {gpus} holds about {_gib(r.weights)} of bf16 weights "
                           f"per GPU ({_billions(e.parameters)} parameters / {r.engine_gpus}), not less than "
                           f"{static}: nothing is left for the KV cache and SGLang stops at start-up{approx}",
                           fix, rollout_keys))
    elif r.kv_tokens < r.longest_sequence:
        out.append(Problem(f"SGLang's KV cache gets about {_gib(r.kv_cache)} per GPU ({static}, less "
                           f"{_gib(r.weights)} of weights): {r.kv_tokens:,} tokens at "
                           f"{r.kv_bytes_per_token / 1024:.0f} KiB per token, fewer than one sequence of "
                           f"{r.longest_sequence:,} tokens ({r.longest_from}){approx}", fix, rollout_keys))
    if e.rollout_phase > e.gpu:
        rest = e.rollout_phase - r.static
        resident = [f"CUDA contexts {_gib(e.overhead)} ({contexts if e.colocated else 'the engine'})"]
        if e.colocated and not e.offload_train:
            resident.append(f"the actor's {_gib(e.actor.total)} kept on the GPU by --no-offload-train")
        most = math.floor((e.gpu - rest) / e.gpu * 100) / 100
        out.append(Problem(f"while SGLang generates, its static pool ({static}) and {' and '.join(resident)} need "
                           f"{_gib(e.rollout_phase)} per GPU, more than {limit}",
                           f"lower [sglang] mem_fraction_static to at most {most:.2f}" if most > 0 else
                           "free the rollout GPUs: remove --no-offload-train", rollout_keys))
    return out


def _actor_problem(e: MemoryEstimate, spec: Spec, limit: str, contexts: str, approx: str) -> Problem:
    a, p = e.actor, spec.parallel
    moe = e.expert_parameters > 0
    shard = f"TP {p.tensor}, PP {p.pipeline}" + (f", EP {p.expert} for the experts" if p.expert > 1 else "")
    name = _OPTIMIZER_NAMES.get(a.optimizer_name, a.optimizer_name)
    if a.offload_fraction >= 1:
        states = f"{name}, on the CPU with optimizer_cpu_offload"
    else:
        states = (f"{name}, {a.optimizer_bytes:g} bytes per parameter sharded over {a.data_parallel} "
                  "data-parallel ranks by the distributed optimizer")
        if a.offload_fraction:
            states += f", {a.offload_fraction:.0%} of them on the CPU"
    parts = [f"weights {_gib(a.weights)} ({_billions(a.parameters_per_gpu)} of {_billions(e.parameters)} parameters "
             f"per GPU with {shard}, bf16)", f"gradients {_gib(a.gradients)} ({a.grad_dtype})",
             f"optimizer states {_gib(a.optimizer)} ({states})", f"CUDA contexts {_gib(e.overhead)} ({contexts})"]
    if e.colocated and not e.offload_rollout:
        parts.append(f"SGLang's static pool {_gib(e.rollout.static)}, kept on the GPU by --no-offload-rollout")
    hints = [f"raise [parallel] tensor (now {p.tensor}) or pipeline (now {p.pipeline})" +
             (f" or expert (now {p.expert})" if moe else "")]
    if not spec.train.optimizer_cpu_offload:
        hints.append(f"set [train] optimizer_cpu_offload = true (moves the {_gib(a.optimizer)} of optimizer states "
                     "to the CPU)")
    elif a.offload_fraction < 1:
        hints.append("raise --optimizer-offload-fraction to 1.0")
    if a.grad_dtype == "fp32":
        hints.append("[train] accumulate_allreduce_grads_in_fp32 = false halves the gradients")
    hints.append(f"or set [cluster] gpu_memory_gib if your GPUs have more than {e.gpu:g} GiB")
    return Problem(f"the training actor needs about {_gib(e.training_phase)} per GPU before activations, more than "
                   f"{limit}: {', '.join(parts)}{approx}", "; ".join(hints),
                   ("parallel.tensor", "parallel.pipeline", "train.optimizer_cpu_offload", "cluster.gpu_memory_gib",
                    "model.type"))
