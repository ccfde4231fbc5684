"""Stage 4, validate: the catalog of cross-field rules.

Each rule has a stable id, a severity, the spec keys it concerns (the message points at the first
one the spec wrote), and a check that yields findings with a fix hint. Sources: what slime,
Megatron and sglang reject at launch, the mistakes nothing rejects until the GPUs fail, and the
toolkit's own pitfalls. docs/rules.md is generated from this catalog.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, cast

import attrs

from ..._secrets import (
    address_has_credentials,
    has_credentials_in_url,
    is_credential_flag,
    is_env_name,
    is_secret_name,
    looks_secret_value,
    redact,
    refuse_forward,
)
from ..._spec.flags import flags_in, known_absent_flags, normalize_flag, parse_flags
from ..._spec.tables import Spec
from ...errors import Diagnostic
from ..argv import ArgGroup, actor_gpus, global_batch_size, rollout_gpus, samples_per_rollout
from ..model_args.catalog import entry
from ..model_args.resolve import ENV_NAME, ModelArgs, Resolution, model_type_problem, script_env_problems
from ..parse import SpecSource
from .memory import engine_parallel, estimate_memory, expert_tensor_parallel, extra_flags, memory_problems


@attrs.frozen
class Finding:
    message: str
    hint: str
    keys: tuple[str, ...] = ()  # overrides the rule's keys for pointing at the spec


@attrs.frozen
class Context:
    spec: Spec
    model_args: ModelArgs
    groups: tuple[ArgGroup, ...]
    accepted: Callable[[str], tuple[str, Sequence[str]]] | None = None  # flag -> (status, suggestions)
    resolution: Resolution | None = None  # how MODEL_ARGS were resolved, with the config.json check
    model: Mapping[str, list[str]] = attrs.field(init=False)  # MODEL_ARGS as flag -> values, parsed once
    extra: Mapping[str, list[str]] = attrs.field(init=False)  # [extra.flags] and [extra] args as flag -> values

    @model.default
    def _parse_model_args(self) -> Mapping[str, list[str]]:
        return parse_flags(self.model_args.args)

    @extra.default
    def _parse_extra(self) -> Mapping[str, list[str]]:
        return extra_flags(self.spec)

    def model_int(self, flag: str) -> int | None:
        values = self.model.get(flag)
        try:
            return int(values[0]) if values else None
        except ValueError:
            return None

    @property
    def actor_gpus(self) -> int:
        return actor_gpus(self.spec)

    @property
    def rollout_gpus(self) -> int | None:
        return rollout_gpus(self.spec)

    @property
    def data_parallel(self) -> int:
        p = self.spec.parallel
        return max(1, self.actor_gpus // (p.tensor * p.pipeline * p.context))

    def passes(self, flag: str) -> bool:
        """Whether the slime argv (escape hatch included) carries ``flag``."""
        return flag in set(flags_in([t for g in self.groups for a in g.args for t in a.tokens] +
                                    list(self.spec.extra.args)))


Check = Callable[[Context], Iterator[Finding]]


@attrs.frozen
class Rule:
    id: str
    severity: str
    keys: tuple[str, ...]
    title: str
    check: Check
    # Checked on the spec alone, before MODEL_ARGS are resolved (a model script sourced): the compile stops on its
    # errors, so no value these rules refuse reaches a shell, a file name or a template.
    before_sourcing: bool = False


RULES: list[Rule] = []


def rule(rule_id: str, severity: str, keys: Sequence[str], title: str, *,
         before_sourcing: bool = False) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        RULES.append(Rule(rule_id, severity, tuple(keys), title, check, before_sourcing))
        return check
    return register


# --- cluster and parallelism -------------------------------------------------------------------

@rule("ACRL-P001", "error", ["cluster.gpus_per_node", "parallel.tensor", "parallel.pipeline",
                             "parallel.context"], "actor GPUs divisible by TP x PP x CP")
def _actor_world(ctx: Context) -> Iterator[Finding]:
    """The actor's GPUs (num_nodes x gpus_per_node) must be divisible by tensor x pipeline x context parallel sizes;
    Megatron stops at launch otherwise."""
    p = ctx.spec.parallel
    size = p.tensor * p.pipeline * p.context
    if ctx.actor_gpus % size:
        yield Finding(f"the actor's {ctx.actor_gpus} GPUs (num_nodes x gpus_per_node) are not divisible by "
                      f"tensor x pipeline x context = {size}; Megatron stops at launch",
                      f"choose parallel sizes whose product divides {ctx.actor_gpus}")


@rule("ACRL-P002", "error", ["cluster.colocate", "cluster.rollout_num_gpus"],
      "disaggregated rollout needs rollout_num_gpus")
def _disaggregated(ctx: Context) -> Iterator[Finding]:
    """Without colocate, rollout_num_gpus is required; slime otherwise crashes with a TypeError building the placement
    group."""
    c = ctx.spec.cluster
    if not c.colocate and c.rollout_num_gpus is None:
        yield Finding("colocate = false without rollout_num_gpus: slime crashes with a TypeError when it "
                      "builds the placement group", "set [cluster] rollout_num_gpus to the GPUs for SGLang")


@rule("ACRL-P003", "error", ["train.mode", "cluster.colocate"], "async training cannot colocate")
def _async_colocate(ctx: Context) -> Iterator[Finding]:
    """train_async.py rejects --colocate."""
    if ctx.spec.train.mode == "async" and ctx.spec.cluster.colocate:
        yield Finding("train_async.py rejects --colocate ('Colocation is not supported for async training')",
                      "set [cluster] colocate = false and rollout_num_gpus")


@rule("ACRL-P004", "warning", ["cluster.rollout_num_gpus", "rollout.gpus_per_engine"],
      "rollout GPUs divisible by GPUs per engine")
def _rollout_engines(ctx: Context) -> Iterator[Finding]:
    """Rollout GPUs should be a multiple of GPUs per engine; slime floors the engine count and leaves GPUs idle."""
    gpus, per = ctx.rollout_gpus, ctx.spec.rollout.gpus_per_engine
    if gpus is not None and gpus % min(per, ctx.spec.cluster.gpus_per_node):
        yield Finding(f"{gpus} rollout GPUs are not divisible by {per} GPUs per engine: slime floors the "
                      "engine count and leaves GPUs idle", "make rollout GPUs a multiple of gpus_per_engine")


@rule("ACRL-P005", "error", ["rollout.gpus_per_engine", "cluster.gpus_per_node"],
      "multi-node engines span whole nodes")
def _engine_nodes(ctx: Context) -> Iterator[Finding]:
    """An engine larger than a node must span whole nodes; otherwise the multi-node SGLang engine gets a floored node
    count."""
    per, node = ctx.spec.rollout.gpus_per_engine, ctx.spec.cluster.gpus_per_node
    if per > node and per % node:
        yield Finding(f"an engine of {per} GPUs spans nodes of {node} GPUs but is not a multiple of it: the "
                      "multi-node SGLang engine is built with a floored node count",
                      f"use a multiple of {node} or at most {node}")


@rule("ACRL-P006", "error", ["rollout.gpus_per_engine", "cluster.rollout_num_gpus"],
      "rollout GPUs hold at least one engine")
def _engine_fits(ctx: Context) -> Iterator[Finding]:
    """The rollout GPUs must hold at least one engine."""
    gpus = ctx.rollout_gpus
    if gpus is not None and gpus < ctx.spec.rollout.gpus_per_engine:
        yield Finding(f"one engine needs {ctx.spec.rollout.gpus_per_engine} GPUs but rollout has {gpus}",
                      "lower gpus_per_engine or give rollout more GPUs")


@rule("ACRL-P007", "error", ["sglang.data_parallel_size", "extra.flags"],
      "SGLang data parallelism needs DP attention")
def _sglang_dp(ctx: Context) -> Iterator[Finding]:
    """SGLang data parallelism > 1 needs --sglang-enable-dp-attention (slime asserts without a message)."""
    if ctx.spec.sglang.data_parallel_size > 1 and not ctx.passes("--sglang-enable-dp-attention"):
        yield Finding("sglang data_parallel_size > 1 without --sglang-enable-dp-attention fails slime's "
                      "sglang validation with a bare AssertionError",
                      'add "--sglang-enable-dp-attention" = true to [extra.flags]')


@rule("ACRL-P008", "warning", ["parallel.sequence_parallel", "parallel.tensor"],
      "sequence parallelism needs tensor parallelism")
def _sp_without_tp(ctx: Context) -> Iterator[Finding]:
    """Sequence parallelism with tensor = 1 is silently turned off by Megatron."""
    if ctx.spec.parallel.sequence_parallel and ctx.spec.parallel.tensor == 1:
        yield Finding("Megatron silently turns sequence parallelism off when tensor = 1",
                      "set sequence_parallel = false to say what runs")


@rule("ACRL-P009", "error", ["parallel.context"], "context parallelism divides the sequence length")
def _cp_seq_length(ctx: Context) -> Iterator[Finding]:
    """slime sets Megatron's seq_length to a 4096 placeholder, which must be a multiple of 2 x context parallel
    size; Megatron stops at launch otherwise."""
    cp = ctx.spec.parallel.context
    if cp > 1 and 4096 % (2 * cp):
        yield Finding(f"context parallel size {cp}: Megatron needs seq-length (slime's placeholder 4096) to be "
                      f"a multiple of 2 x {cp}", "use a power of two for [parallel] context")


# --- batch arithmetic --------------------------------------------------------------------------

@rule("ACRL-B001", "error", ["train.num_steps_per_rollout", "rollout.batch_size", "rollout.n_samples_per_prompt"],
      "rollout samples split evenly into optimizer steps")
def _steps_divide(ctx: Context) -> Iterator[Finding]:
    """The rollout's samples (batch_size x n_samples_per_prompt) must split evenly into num_steps_per_rollout optimizer
    steps; leftovers are dropped silently."""
    steps = ctx.spec.train.num_steps_per_rollout
    samples = samples_per_rollout(ctx.spec)
    if samples < steps:
        yield Finding(f"{samples} samples per rollout cannot make {steps} optimizer steps",
                      f"set num_steps_per_rollout to at most {samples}")
    elif samples % steps:
        yield Finding(f"{samples} samples per rollout (batch_size x n_samples_per_prompt) are not divisible "
                      f"by num_steps_per_rollout = {steps}: trailing samples would be dropped silently",
                      "choose num_steps_per_rollout dividing the samples per rollout")


@rule("ACRL-B002", "error", ["train.num_steps_per_rollout", "train.micro_batch_size", "parallel.tensor"],
      "global batch divisible by micro-batch x data-parallel size")
def _gbs_microbatch(ctx: Context) -> Iterator[Finding]:
    """The global batch must be divisible by micro_batch_size x data-parallel size; Megatron's micro-batch calculator
    fails in the actors otherwise."""
    mbs = ctx.spec.train.micro_batch_size or 1
    gbs = global_batch_size(ctx.spec)
    if gbs and gbs % (mbs * ctx.data_parallel):
        yield Finding(f"global batch {gbs} is not divisible by micro_batch_size x data-parallel size = "
                      f"{mbs} x {ctx.data_parallel}: Megatron's micro-batch calculator fails in the actors",
                      "adjust num_steps_per_rollout, micro_batch_size or the parallel sizes")


@rule("ACRL-B003", "warning", ["train.max_tokens_per_gpu", "rollout.max_response_len",
                               "rollout.max_context_len"], "a sample fits in max_tokens_per_gpu")
def _tokens_per_gpu(ctx: Context) -> Iterator[Finding]:
    """With dynamic batching, the longest sample should fit in max_tokens_per_gpu x context; an oversize sample gets
    its own micro-batch and risks OOM."""
    r, t = ctx.spec.rollout, ctx.spec.train
    longest = r.max_context_len or ((r.max_prompt_len + r.max_response_len) if r.max_prompt_len else None)
    budget = t.max_tokens_per_gpu * ctx.spec.parallel.context
    known = longest if longest is not None else r.max_response_len
    if t.use_dynamic_batch_size and known > budget:
        what = "the longest sample" if longest is not None else "max_response_len alone"
        yield Finding(f"{what} ({known} tokens) exceeds max_tokens_per_gpu x context = {budget}: such a "
                      "sample gets a micro-batch of its own and risks running out of memory",
                      f"raise max_tokens_per_gpu to at least {known}")


@rule("ACRL-B004", "error", ["rollout.over_sampling_batch_size", "rollout.batch_size"],
      "over-sampling batch at least the rollout batch")
def _oversampling(ctx: Context) -> Iterator[Finding]:
    """over_sampling_batch_size must be at least batch_size (slime checks at launch)."""
    r = ctx.spec.rollout
    if r.over_sampling_batch_size is not None and r.over_sampling_batch_size < r.batch_size:
        yield Finding(f"over_sampling_batch_size {r.over_sampling_batch_size} < batch_size {r.batch_size}",
                      "set it to at least batch_size or remove it")


@rule("ACRL-B005", "error", ["rollout.max_prompt_len", "rollout.max_context_len"],
      "prompt shorter than the context")
def _prompt_context(ctx: Context) -> Iterator[Finding]:
    """max_prompt_len must be smaller than max_context_len (slime checks at launch)."""
    r = ctx.spec.rollout
    if r.max_prompt_len is not None and r.max_context_len is not None and r.max_prompt_len >= r.max_context_len:
        yield Finding(f"max_prompt_len {r.max_prompt_len} must be smaller than max_context_len "
                      f"{r.max_context_len}", "lower max_prompt_len")


# --- algorithm -----------------------------------------------------------------------------------

@rule("ACRL-A001", "error", ["algorithm.kl_coef", "algorithm.kl_loss_coef"], "only one KL coefficient")
def _two_kl(ctx: Context) -> Iterator[Finding]:
    """kl_coef and kl_loss_coef cannot both be non-zero (slime checks at launch)."""
    a = ctx.spec.algorithm
    if a.kl_coef and a.kl_loss_coef:
        yield Finding("slime rejects kl_coef and kl_loss_coef both non-zero", "keep one of them")


@rule("ACRL-A002", "error", ["algorithm.advantage_estimator", "algorithm.normalize_advantages"],
      "REINFORCE++ needs advantage normalization")
def _rpp_norm(ctx: Context) -> Iterator[Finding]:
    """reinforce_plus_plus and reinforce_plus_plus_baseline need normalize_advantages (slime checks at launch)."""
    a = ctx.spec.algorithm
    if a.advantage_estimator.startswith("reinforce_plus_plus") and not a.normalize_advantages:
        yield Finding(f"{a.advantage_estimator} requires advantage normalization; slime stops at launch",
                      "set [algorithm] normalize_advantages = true")


@rule("ACRL-A003", "error", ["algorithm.use_tis", "extra.flags"], "TIS excludes rollout log-probs")
def _tis(ctx: Context) -> Iterator[Finding]:
    """use_tis and --use-rollout-logprobs are mutually exclusive (slime checks at launch)."""
    if ctx.spec.algorithm.use_tis and ctx.passes("--use-rollout-logprobs"):
        yield Finding("use_tis and --use-rollout-logprobs cannot be set together",
                      "drop --use-rollout-logprobs or use_tis")


@rule("ACRL-A004", "warning", ["algorithm.use_kl_loss", "algorithm.kl_loss_coef"],
      "a KL loss with a zero coefficient")
def _kl_zero(ctx: Context) -> Iterator[Finding]:
    """use_kl_loss with an explicit kl_loss_coef of 0 loads the reference model for nothing."""
    a = ctx.spec.algorithm
    if a.use_kl_loss and not a.kl_loss_coef and ctx.spec.algorithm.kl_loss_coef is not None:
        yield Finding("use_kl_loss with kl_loss_coef = 0 loads the reference model for a zero-weight loss",
                      "set kl_loss_coef > 0, or use_kl_loss = false")


# --- evaluation and checkpoints ------------------------------------------------------------------

@rule("ACRL-E001", "error", ["eval.interval", "eval.datasets"], "eval interval needs datasets")
def _eval_datasets(ctx: Context) -> Iterator[Finding]:
    """eval.interval needs eval datasets (slime checks at launch); datasets without an interval are never evaluated."""
    e = ctx.spec.eval
    if e.interval is not None and not e.datasets:
        yield Finding("eval.interval is set but no eval datasets are configured; slime stops at launch",
                      'add [eval.datasets] name = "/path/to/eval.jsonl"')
    if e.datasets and e.interval is None:
        yield Finding("eval datasets are configured but eval.interval is not: they are never evaluated",
                      "set [eval] interval", keys=("eval.datasets",))


@rule("ACRL-E002", "error", ["checkpoint.save_interval", "checkpoint.save"], "save interval needs a save dir")
def _save_interval(ctx: Context) -> Iterator[Finding]:
    """checkpoint.save_interval needs checkpoint.save (slime checks at launch)."""
    c = ctx.spec.checkpoint
    if c.save_interval is not None and not c.save:
        yield Finding("'--save' is required when save_interval is set", "set [checkpoint] save")


@rule("ACRL-E003", "error", ["checkpoint.save_hf", "checkpoint.save", "model.dir"],
      "checkpoints never overwrite the source model")
def _save_paths(ctx: Context) -> Iterator[Finding]:
    """Checkpoints (save, save_hf) must not be written into the Hugging Face checkpoint being trained."""
    c, model = ctx.spec.checkpoint, ctx.spec.model.dir.rstrip("/")
    for key, path in (("checkpoint.save_hf", c.save_hf), ("checkpoint.save", c.save)):
        if path is not None and path.rstrip("/") == model:
            yield Finding(f"{key} is the Hugging Face checkpoint ({model}): saving would overwrite the model "
                          "being trained", "save to another directory", keys=(key,))


# --- the toolkit ---------------------------------------------------------------------------------

_LOCAL_PATH = re.compile(r"^(/|\.|~)")


@rule("ACRL-T001", "error", ["agentcore.renderer_family", "agentcore.cumulative_token_mode", "model.dir"],
      "cumulative token mode needs an explicit renderer family")
def _renderer(ctx: Context) -> Iterator[Finding]:
    """Cumulative token mode with renderer_family 'auto' and a local checkpoint path fails at gateway start: 'auto'
    only matches Hugging Face model ids."""
    a = ctx.spec.agentcore
    if a.cumulative_token_mode and a.renderer_family == "auto" and _LOCAL_PATH.match(ctx.spec.model.dir):
        yield Finding("renderer_family 'auto' matches the served model name exactly, and a local checkpoint "
                      "path never matches: the gateway fails at startup in cumulative token mode",
                      'set [agentcore] renderer_family to the model family, e.g. "qwen3"')


@rule("ACRL-T002", "warning", ["agentcore.max_pool_connections", "agentcore.max_concurrent"],
      "connection pool at least the concurrency")
def _pool(ctx: Context) -> Iterator[Finding]:
    """max_pool_connections below max_concurrent makes boto3 discard connections and flood the log."""
    a = ctx.spec.agentcore
    if a.max_pool_connections < a.max_concurrent:
        yield Finding(f"max_pool_connections {a.max_pool_connections} < max_concurrent {a.max_concurrent}: "
                      "boto3 discards connections and floods the log with pool warnings",
                      f"set max_pool_connections to at least {a.max_concurrent}")


_ARN = re.compile(r"^arn:aws(-[a-z]+)*:bedrock-agentcore:[a-z]{2}(-[a-z]+)+-\d:\d{12}:runtime/[A-Za-z][A-Za-z0-9_-]*$")


@rule("ACRL-T003", "error", ["agentcore.runtime_arn"], "AgentCore Runtime ARN format")
def _arn(ctx: Context) -> Iterator[Finding]:
    """agentcore.runtime_arn must be an AgentCore Runtime ARN."""
    if not _ARN.fullmatch(ctx.spec.agentcore.runtime_arn):
        yield Finding(f"{ctx.spec.agentcore.runtime_arn!r} is not an AgentCore Runtime ARN",
                      "copy it from `bedrock-agentcore-starter-toolkit launch`: "
                      "arn:aws:bedrock-agentcore:REGION:ACCOUNT_ID:runtime/NAME-ID")


_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@rule("ACRL-T004", "error", ["agentcore.s3_bucket"], "S3 bucket name format")
def _bucket(ctx: Context) -> Iterator[Finding]:
    """agentcore.s3_bucket must be a valid S3 bucket name (not a URL)."""
    b = ctx.spec.agentcore.s3_bucket
    bad = (not _BUCKET.fullmatch(b) or ".." in b or ".-" in b or "-." in b
           or re.fullmatch(r"\d+\.\d+\.\d+\.\d+", b) or b.startswith(("xn--", "sthree-"))
           or b.endswith(("-s3alias", "--ol-s3")))
    if bad:
        yield Finding(f"{b!r} is not a valid S3 bucket name",
                      "3-63 characters: lowercase letters, digits, '.' and '-', starting and ending with a "
                      "letter or digit (a name, not an s3:// URL)")


_EXP_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@rule("ACRL-T005", "error", ["experiment.id"], "experiment id safe for paths and Ray ids")
def _exp_id(ctx: Context) -> Iterator[Finding]:
    """experiment.id must be safe as a directory name and a Ray submission id."""
    if not _EXP_ID.fullmatch(ctx.spec.experiment.id) or ".." in ctx.spec.experiment.id:
        yield Finding(f"{ctx.spec.experiment.id!r} cannot name a directory and a Ray submission id",
                      "use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")


@rule("ACRL-M009", "error", ["model.type"], "model type is a slime model name", before_sourcing=True)
def _model_type(ctx: Context) -> Iterator[Finding]:
    """[model] type names slime's scripts/models/<type>.sh and is written into model_args.sh: letters, digits, '.',
    '_' and '-' only (qwen2.5-3B, glm4-32B), never a path or a line break. Checked before anything is sourced."""
    problem = model_type_problem(ctx.spec.model.type)
    if problem is not None:
        yield Finding(f"this [model] type {problem}",
                      "use the file name of slime's scripts/models/<type>.sh without .sh (e.g. qwen2.5-3B); see "
                      "`acrl models`")


# --- flags ---------------------------------------------------------------------------------------

def _escape_hatch(ctx: Context) -> Iterator[tuple[str, str]]:
    """(flag, spec key) of every flag in [extra.flags] and [extra.args]."""
    for name in ctx.spec.extra.flags:
        yield normalize_flag(name), f"extra.flags.{name}"
    for i, token in enumerate(ctx.spec.extra.args):
        if token.startswith("--"):
            yield token.split("=", 1)[0], f"extra.args.{i}"


_SCANNED: list[Any] = [None, ()]  # the last spec scanned and its strings: three rules read them per compile


def _spec_strings(spec: Spec) -> tuple[tuple[str, str, str], ...]:
    """(dotted key, key name, string) of every string the spec holds: values, list items, and the
    names of the free-form tables ([extra.flags], [model.args], [env] vars, ...)."""
    if _SCANNED[0] is not spec:
        _SCANNED[:] = [spec, tuple(_walk_strings(spec))]
    strings: tuple[tuple[str, str, str], ...] = _SCANNED[1]
    return strings


def _walk_strings(spec: Spec) -> Iterator[tuple[str, str, str]]:
    def walk(node: object, key: str, name: str) -> Iterator[tuple[str, str, str]]:
        if isinstance(node, str):
            yield key, name, node
        elif isinstance(node, list | tuple):
            for i, item in enumerate(node):
                yield from walk(item, f"{key}.{i}", name)
        elif isinstance(node, dict):
            for k, v in node.items():
                yield f"{key}.{k}", str(k), str(k)  # a table's own key can be a flag: "--wandb-key" = ...
                yield from walk(v, f"{key}.{k}", str(k))
        elif attrs.has(type(node)):
            for field in attrs.fields(cast(Any, type(node))):
                yield from walk(getattr(node, field.name), f"{key}.{field.name}".lstrip("."), field.name)
    return walk(spec, "", "")


_FLAG_TABLES = ("extra.flags.", "extra.args.", "model.args.", "model.overrides.")


@rule("ACRL-F001", "error", ["extra.flags", "extra.args", "model.args", "model.overrides"],
      "no credentials in flags")
def _credentials(ctx: Context) -> Iterator[Finding]:
    """No argv token may pass a credential (--wandb-key, --sglang-api-key, --*-password, ...), in any case, with
    '_', as --flag=value or as an argparse abbreviation (--wandb-k), as a table key or inside a list value: slime
    logs its whole argument namespace to W&B."""
    seen = set()
    for key, _, text in _spec_strings(ctx.spec):
        if not key.startswith(_FLAG_TABLES):
            continue
        token = normalize_flag(text) if key.count(".") == 2 and text == key.split(".", 2)[2] else text
        if is_credential_flag(token) and key not in seen:
            seen.add(key)
            yield Finding(f"{token.split('=', 1)[0]} passes a credential: it would be written into train.sh, the "
                          "process list and W&B (slime logs its whole argument namespace)",
                          "remove it and export the secret in the cluster's environment (for W&B: "
                          "WANDB_API_KEY, named by [wandb] key_env)", keys=(key,))


@rule("ACRL-F002", "error", ["extra.flags", "extra.args"], "escape hatch does not repeat a spec key")
def _duplicates(ctx: Context) -> Iterator[Finding]:
    """An escape-hatch flag must not repeat a flag a spec key already sets."""
    owned = {a.flag: a.origin for g in ctx.groups for a in g.args if not a.origin.startswith("extra.")}
    owned.update({f: "model args" for f in ctx.model})
    for flag, key in _escape_hatch(ctx):
        if flag in owned:
            origin = owned[flag]
            where = f"[{origin.rsplit('.', 1)[0]}] {origin.rsplit('.', 1)[1]}" if "." in origin and \
                not origin.startswith("derived") else origin
            yield Finding(f"{flag} is already set by {where}; slime would see it twice",
                          f"set {where} instead" if not origin.startswith("derived") else
                          "remove it: acrl derives this flag", keys=(key,))


@rule("ACRL-F003", "error", ["slime.commit", "extra.flags", "model.megatron_to_hf_mode"],
      "flags exist at the targeted slime commit")
def _absent_at_commit(ctx: Context) -> Iterator[Finding]:
    """Flags must exist at the targeted slime commit (for the commits acrl knows); slime ignores unknown flags
    silently."""
    absent = known_absent_flags(ctx.spec.slime.commit)
    if absent is None:
        return
    origins = {a.flag: a.origin for g in ctx.groups for a in g.args}
    for flag, key in [*((f, origins[f]) for f in origins), *_escape_hatch(ctx)]:
        if flag in absent:
            spec_key = key if not key.startswith("derived") else "slime.commit"
            yield Finding(f"{flag} does not exist at slime {ctx.spec.slime.commit[:9]} ({absent[flag]}); "
                          "slime would ignore it silently", "remove it, or target a slime commit that has it",
                          keys=(spec_key,))


@rule("ACRL-F004", "error", ["extra.flags", "extra.args"], "escape-hatch flags are known to slime")
def _unknown_flags(ctx: Context) -> Iterator[Finding]:
    """When the slime checkout is on the compiling machine, escape-hatch flags must be accepted by its parsers (did-
    you-mean suggested)."""
    if ctx.accepted is None:
        return
    for flag, key in _escape_hatch(ctx):
        status, close = ctx.accepted(flag)
        if status == "unknown":
            yield Finding(f"{flag} is not accepted by slime or Megatron at {ctx.spec.slime.dir} (slime would "
                          "ignore it silently)", f"did you mean {close[0]}?" if close else
                          "check the flag's spelling against slime's arguments", keys=(key,))


@rule("ACRL-F005", "error", ["extra.flags", "extra.args"], "no abbreviated sglang flags")
def _abbreviations(ctx: Context) -> Iterator[Finding]:
    """slime's sglang parser accepts abbreviations: --sglang-mem-fraction silently means
    --sglang-mem-fraction-static. An escape-hatch flag that abbreviates a flag acrl passes is an error."""
    emitted = {a.flag for g in ctx.groups for a in g.args if not a.origin.startswith("extra.")}
    for flag, key in _escape_hatch(ctx):
        if not flag.startswith("--sglang-") or flag in emitted:
            continue
        longer = sorted(f for f in emitted if f.startswith(flag))
        if longer:
            yield Finding(f"{flag} is an abbreviation of {longer[0]}: slime's sglang parser expands it silently",
                          f"write the full flag through its spec key ({longer[0]})", keys=(key,))


# --- security ------------------------------------------------------------------------------------

@rule("ACRL-S001", "error", ["env.vars", "env.forward", "model.script_env"], "no secrets in the job environment")
def _secret_env(ctx: Context) -> Iterator[Finding]:
    """[env] vars and [model] script_env names must not look like secrets (they are written into train.sh, the Ray
    job's metadata and the model script's environment); [env] forward must not name a secret, the W&B key's
    variable ([wandb] key_env), ACRL_RAY_ADDRESS / RAY_ADDRESS (which may hold user:password) or AWS_*: train.sh
    would copy its value into the Ray job's metadata."""
    key_env = ctx.spec.wandb.key_env
    for table, names in (("env.vars", ctx.spec.env.vars), ("model.script_env", ctx.spec.model.script_env)):
        for name in names:
            if is_secret_name(name) or name.upper() == key_env.upper():
                yield Finding(f"{name} looks like a secret: [{table.split('.')[0]}] {table.split('.')[1]} are "
                              "written into train.sh, the bundle and the job's environment (visible in the Ray "
                              "dashboard)", "export it in the cluster's environment instead",
                              keys=(f"{table}.{name}",))
    for i, name in enumerate(ctx.spec.env.forward):
        why = refuse_forward(name, key_env)
        if why is not None:
            yield Finding(f"forwarding {name} would copy its value into the Ray job's metadata "
                          f"(--runtime-env-json): {why}",
                          "remove it from [env] forward and export it on the cluster (a local head started by "
                          "train.sh inherits the launching shell's environment)", keys=(f"env.forward.{i}",))
    yield from _env_names_valid([*((n, f"env.vars.{n}") for n in ctx.spec.env.vars),
                                 *((n, f"env.forward.{i}") for i, n in enumerate(ctx.spec.env.forward))])


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _env_names_valid(names: Iterable[tuple[str, str]], hint: str = "use letters, digits and '_'") -> Iterator[Finding]:
    for name, key in names:
        if not _ENV_NAME.fullmatch(name):
            yield Finding(f"{name!r} is not an environment variable name", hint, keys=(key,))


@rule("ACRL-S002", "error", ["wandb.key_env", "model.script_env"], "environment names are names",
      before_sourcing=True)
def _env_names(ctx: Context) -> Iterator[Finding]:
    """wandb.key_env and model.script_env must be environment variable names (never the key itself). The model
    script is sourced with [model.script_env] as its environment, so none of its names may change how bash, the
    loader or libc behave (BASH_ENV, ENV, BASH_FUNC_*, SHELLOPTS, PS4, IFS, PATH, LD_*, ...) and no value may hold a
    NUL byte. Checked before anything is sourced."""
    if not ENV_NAME.fullmatch(ctx.spec.wandb.key_env):  # never shown: it may be the key itself
        yield Finding("[wandb] key_env is not the name of an environment variable (1-128 letters, digits and '_', "
                      "not starting with a digit)", "name the variable, e.g. WANDB_API_KEY; never the key itself",
                      keys=("wandb.key_env",))
    for name, message, hint in script_env_problems(ctx.spec.model.script_env):
        yield Finding(message, hint, keys=(f"model.script_env.{name}",))


@rule("ACRL-S003", "error", ["cluster.address", "env.vars", "model.script_env", "extra.flags", "extra.args"],
      "no credentials in spec values")
def _value_credentials(ctx: Context) -> Iterator[Finding]:
    """No string value of the spec may hold a credential: a URL or address with user:password@ ([cluster] address,
    an [env] vars HTTPS_PROXY, a flag value), or a token-shaped value (a W&B key, sk-..., AKIA..., hf_..., a JWT).
    Every value reaches train.sh, spec.toml, an argv or the Ray job's metadata."""
    address = ctx.spec.cluster.address or ""
    if address_has_credentials(address):
        yield Finding("the Ray address carries credentials (user:password@), which would be written into the "
                      "bundle", "give the address without them in the spec, and the authenticated one at run time "
                      "in the environment: ACRL_RAY_ADDRESS=... bash train.sh (or acrl run with ACRL_RAY_ADDRESS "
                      "exported)", keys=("cluster.address",))
    for key, name, text in _spec_strings(ctx.spec):
        if (key == "cluster.address" and address_has_credentials(text)) or key == "wandb.key_env" or \
                (key.startswith(_FLAG_TABLES) and is_credential_flag(text)):
            continue  # reported above, by ACRL-S004 or by ACRL-F001
        if has_credentials_in_url(text):
            yield Finding("the value holds a URL with user:password@, which would be written into the bundle "
                          "and the job's environment", "remove the credentials from the spec: export the "
                          "authenticated URL in the cluster's environment", keys=(key,))
        elif looks_secret_value(text, name):
            yield Finding("the value looks like a secret (an API key or token), which would be written into the "
                          "bundle", "remove it from the spec and export it in the cluster's environment; name its "
                          "variable where acrl asks for one ([wandb] key_env)", keys=(key,))


@rule("ACRL-S004", "error", ["wandb.key_env"], "wandb.key_env names a variable, not a key")
def _key_env_shape(ctx: Context) -> Iterator[Finding]:
    """[wandb] key_env must be an environment-variable-shaped name (upper case letters, digits and '_', at most 64)
    that is not itself token-shaped: train.sh prints it on every run without W&B. The value is never echoed."""
    if _ENV_NAME.fullmatch(ctx.spec.wandb.key_env) and not is_env_name(ctx.spec.wandb.key_env):
        yield Finding("[wandb] key_env must name the environment variable that holds the key (upper case letters, "
                      "digits and '_'); the value given looks like a key, or is not such a name",
                      "write key_env = \"WANDB_API_KEY\" and export the key itself in that variable on the cluster; "
                      "if a real key was written here, revoke it")


_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@rule("ACRL-K001", "error", ["kuberay.namespace", "kuberay.service_account", "kuberay.secret"],
      "Kubernetes names are names")
def _kubernetes_names(ctx: Context) -> Iterator[Finding]:
    """[kuberay] namespace must be a DNS-1123 label, service_account and secret DNS-1123 subdomains: the API server
    rejects anything else, only when the RayJob is applied."""
    k = ctx.spec.kuberay
    for key, value, pattern, what in (("namespace", k.namespace, _DNS_LABEL, "a DNS-1123 label (at most 63)"),
                                      ("service_account", k.service_account, _DNS_SUBDOMAIN,
                                       "a DNS-1123 subdomain (at most 253)"),
                                      ("secret", k.secret, _DNS_SUBDOMAIN, "a DNS-1123 subdomain (at most 253)")):
        if value is not None and not pattern.fullmatch(value):
            yield Finding(f"{value!r} is not a Kubernetes name: it must be {what} lowercase letters, digits and "
                          f"'-'{', and dots' if pattern is _DNS_SUBDOMAIN else ''}, starting and ending with a "
                          "letter or digit", f"rename it, e.g. {_k8s_example(value)!r}", keys=(f"kuberay.{key}",))


def _k8s_example(value: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:63] or "acrl"


# --- model architecture --------------------------------------------------------------------------

@rule("ACRL-M001", "error", ["parallel.tensor", "model.args"], "attention heads divisible by TP")
def _heads_tp(ctx: Context) -> Iterator[Finding]:
    """Attention heads must be divisible by the training and the rollout engine's tensor parallel sizes (the engine's
    is gpus_per_engine, divided by an sglang pipeline size given in [extra]); query groups must divide or be a
    multiple of them."""
    heads, groups = ctx.model_int("--num-attention-heads"), ctx.model_int("--num-query-groups")
    if "--group-query-attention" not in ctx.model:
        groups = None
    engine_tp, engine_pp = engine_parallel(ctx.spec, ctx.extra)
    engine = "the rollout engine's tensor parallel size (gpus_per_engine" + \
        (f" / sglang pipeline size {engine_pp})" if engine_pp > 1 else ")")
    for tp, what, key in ((ctx.spec.parallel.tensor, "tensor parallel size", "parallel.tensor"),
                          (engine_tp, engine, "rollout.gpus_per_engine")):
        if heads and heads % tp:
            yield Finding(f"{heads} attention heads are not divisible by {what} {tp}",
                          f"choose a {what} dividing {heads}", keys=(key,))
        if groups and groups % tp and tp % groups:
            yield Finding(f"{groups} query groups (KV heads) are neither a multiple nor a divisor of {what} "
                          f"{tp}", f"choose a {what} that divides or is a multiple of {groups}", keys=(key,))


@rule("ACRL-M002", "error", ["parallel.pipeline", "model.args"], "layers divisible by PP")
def _layers_pp(ctx: Context) -> Iterator[Finding]:
    """Layers must be divisible by the pipeline parallel size (unless --decoder-first/last-pipeline-num-layers set an
    uneven split)."""
    layers, pp = ctx.model_int("--num-layers"), ctx.spec.parallel.pipeline
    uneven = {"--decoder-first-pipeline-num-layers", "--decoder-last-pipeline-num-layers"}
    if layers and pp > 1 and layers % pp and not uneven & (set(ctx.model) | set(ctx.extra)):
        yield Finding(f"{layers} layers are not divisible by pipeline size {pp}",
                      f"choose a pipeline size dividing {layers}", keys=("parallel.pipeline",))


@rule("ACRL-M003", "error", ["parallel.expert", "model.args"], "experts divisible by EP")
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
                      f"choose an expert parallel size dividing {experts}", keys=("parallel.expert",))
    etp = expert_tensor_parallel(ctx.spec, ctx.extra)
    size = ep * etp * ctx.spec.parallel.pipeline
    if experts and ctx.actor_gpus % size:
        yield Finding(f"expert parallel {ep} x expert tensor parallel {etp} x pipeline {ctx.spec.parallel.pipeline} "
                      f"= {size} does not divide the actor's {ctx.actor_gpus} GPUs: Megatron's "
                      "initialize_model_parallel fails in the actors",
                      "choose [parallel] expert so that the product divides the actor's GPUs (or pass "
                      "--expert-tensor-parallel-size 1 in [extra.flags])", keys=("parallel.expert",))


@rule("ACRL-M004", "error", ["model.args"], "query groups need grouped-query attention")
def _gqa_flag(ctx: Context) -> Iterator[Finding]:
    """--num-query-groups without --group-query-attention is silently ignored by Megatron (the model is built with
    multi-head attention and its weights do not load)."""
    if "--num-query-groups" in ctx.model and "--group-query-attention" not in ctx.model:
        yield Finding("MODEL_ARGS set --num-query-groups without --group-query-attention: Megatron ignores the "
                      "groups and builds multi-head attention", "add group-query-attention = true to [model.args]")


@rule("ACRL-M005", "error", ["model.type", "model.args_source", "model.overrides"],
      "MODEL_ARGS agree with the checkpoint's config.json")
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
      "kv_channels explicit when head_dim differs from hidden / heads")
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
    reported = (*r.mismatches, *r.catalog_mismatches) if r is not None else ()
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
      "the static memory estimate fits the GPUs")
def _memory(ctx: Context) -> Iterator[Finding]:
    """A static estimate per GPU (docs/memory.md) must fit [cluster] gpu_memory_gib: the actor's bf16 weights,
    gradients and optimizer states (sharded by TP, PP, EP and the distributed optimizer; off the GPU with
    optimizer_cpu_offload), the rollout engine's weights and KV cache under mem_fraction_static, and one CUDA
    context per process; activations are not counted, so a setup over the limit cannot run."""
    estimate = estimate_memory(ctx.spec, ctx.model)
    if not isinstance(estimate, str):
        for problem in memory_problems(estimate, ctx.spec):
            yield Finding(problem.message, problem.hint, problem.keys)


@rule("ACRL-M008", "error", ["model.type", "model.args_source", "model.overrides"],
      "slime's model script agrees with the published config")
def _script_vs_catalog(ctx: Context) -> Iterator[Finding]:
    """When MODEL_ARGS come from slime's model script and the checkpoint's config.json is not on the compiling
    machine, the script is compared field by field with acrl's catalog entry of the same name, written from the
    model's published config.json (e.g. slime's glm4-32B.sh has 64 layers and 8 query groups, GLM-4-32B-0414 61
    and 2). A flag set in [model.overrides] is not compared."""
    r = ctx.resolution
    if r is None or not r.catalog_mismatches:
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


def validate(source: SpecSource, ctx: Context, *, before_sourcing: bool | None = None) -> list[Diagnostic]:
    """Run every rule (``before_sourcing``: only the rules that are, or are not, checked before MODEL_ARGS are
    resolved). A diagnostic points at the first of its keys the spec wrote, else at the nearest written table of
    one of them."""
    out: list[Diagnostic] = []
    for r in RULES:
        if before_sourcing is not None and r.before_sourcing != before_sourcing:
            continue
        for finding in r.check(ctx):
            keys = [_path(k) for k in (*finding.keys, *r.keys)]
            path = next((k for k in keys if k in source.positions), None) or \
                next((k for k in keys if source.position(k) is not None), keys[0])
            out.append(source.diagnostic(path, finding.message, hint=finding.hint, severity=r.severity,
                                         rule=r.id))
    secrets = spec_secrets(ctx.spec) if out else set()
    if secrets:  # whatever a rule says, a value the spec holds that looks secret is shown as ***
        out = [attrs.evolve(d, message=redact(d.message, secrets, code=False), hint=redact(d.hint, secrets, code=False),
                            source_line=redact(d.source_line, secrets)) for d in out]
    return out


def _tables() -> tuple[str, ...]:
    """"table.key." of every free-form table of the spec ([model.overrides], [env.vars], ...): a name after it is
    one key, whatever dots it holds."""
    from ..._spec.tables import Spec

    tables = [table for table in attrs.fields(Spec) if isinstance(table.type, type) and attrs.has(table.type)]
    return tuple(f"{table.name}.{field.name}." for table in tables
                 for field in attrs.fields(typing.cast(type, table.type)) if typing.get_origin(field.type) is dict)


_TABLES = _tables()


def spec_secrets(spec: Spec) -> set[str]:
    """The strings of ``spec`` that look secret (ACRL-S003's, and a [wandb] key_env that is not a name), for
    redacting every message about the spec."""
    found = {text for key, name, text in _spec_strings(spec) if looks_secret_value(text, name)}
    if not is_env_name(spec.wandb.key_env):
        found.add(spec.wandb.key_env)
    for names in (spec.env.vars, spec.model.script_env):  # the value of a secret-named variable
        found |= {v for k, v in names.items() if is_secret_name(k) or k.upper() == spec.wandb.key_env.upper()}
    tokens: list[str] = [*spec.extra.args]
    for table in (spec.extra.flags, spec.model.args, spec.model.overrides):
        for flag, value in table.items():
            tokens += [normalize_flag(flag), *(map(str, value) if isinstance(value, list) else [str(value)])]
    for i, token in enumerate(tokens):  # what follows a credential flag, or its =value
        if is_credential_flag(token):
            found.add(token.split("=", 1)[1] if "=" in token else tokens[i + 1] if i + 1 < len(tokens) else "")
    return {f for f in found if f}


def _path(key: str) -> tuple[str | int, ...]:
    parts: list[str | int] = []
    if key.startswith(_TABLES):
        head, table, name = key.split(".", 2)
        if item := re.fullmatch(r"(.+)\.(\d+)", name):  # a list item of a table key
            return (head, table, item.group(1), int(item.group(2)))
        return (head, table, name)  # a table's key is a string, even one made of digits
    for p in key.split("."):
        parts.append(int(p) if p.isdigit() else p)
    return tuple(parts)

