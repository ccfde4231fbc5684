"""`acrl init`'s spec: the answers (a catalog model, the machines, the data, the integration) and the commented TOML
written from them with the layout init_fit.py chose. Every value goes through tomli-w, so a path or a dataset name
cannot break out of its string; every comment is acrl's own text.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Literal

import attrs
import tomli_w

from .._pipeline.model_args.catalog import CatalogEntry
from .._version import __version__
from .init_choices import DEFAULT_RM_TYPE, RM_TYPES

Integration = Literal["agentcore", "slime"]

ROLLOUT_BATCH = 32  # prompts per rollout, as SlimeRunner's default (docs/spec.md)
SAMPLES_PER_PROMPT = 8
NUM_ROLLOUT = 100
EVAL_INTERVAL = 10
_EXP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # what ACRL-T005 accepts


@attrs.frozen
class Answers:
    """What `acrl init` asked (or was given as flags)."""

    model: CatalogEntry
    data: str
    output: str = "spec.toml"
    gpus_per_node: int = 8
    nodes: int = 1
    gpu_memory_gib: float = 80.0
    model_dir: str | None = None  # default: default_model_dir(model)
    eval: Mapping[str, str] = attrs.field(factory=dict)
    integration: Integration = "agentcore"
    runtime_arn: str | None = None
    s3_bucket: str | None = None
    rm_type: str = DEFAULT_RM_TYPE
    exp_id: str | None = None  # default: default_exp_id(output, model)

    @property
    def gpus(self) -> int:
        return self.nodes * self.gpus_per_node


@attrs.frozen
class Layout:
    """The parallel sizes chosen for the answers (init_fit.py), and the rollout batch that fits their DP size."""

    tensor: int = 1
    pipeline: int = 1
    expert: int = 1
    gpus_per_engine: int = 1
    batch_size: int = ROLLOUT_BATCH

    def shown(self) -> str:
        ep = f", EP {self.expert}" if self.expert > 1 else ""
        return (f"TP {self.tensor}, PP {self.pipeline}{ep}, rollout engines of {self.gpus_per_engine} "
                f"GPU{'s' if self.gpus_per_engine > 1 else ''}")


def batch_for(data_parallel: int) -> int:
    """The fewest prompts per rollout, from ROLLOUT_BATCH up, whose samples split over the data-parallel ranks
    (ACRL-B002: the global batch, prompts x SAMPLES_PER_PROMPT in one step, divisible by the DP size)."""
    step = data_parallel // math.gcd(data_parallel, SAMPLES_PER_PROMPT)
    return -(-ROLLOUT_BATCH // step) * step


def default_model_dir(model: CatalogEntry) -> str:
    """/data/models/<the Hugging Face repository's name>, or the catalog name for a slime-script entry."""
    name = model.source.rsplit("/", 1)[-1] if model.script_args is None else model.name
    return f"/data/models/{name}"


def default_exp_id(output: str, model: CatalogEntry) -> str:
    """The output file's stem when it is a fit experiment id and not the generic "spec", else the model's name."""
    stem = PurePath(output).stem
    return stem if stem != "spec" and _EXP_ID.fullmatch(stem) and ".." not in stem else model.name


def _value(value: object) -> str:
    """``value`` as TOML (tomli-w's quoting and escapes)."""
    return tomli_w.dumps({"v": value})[len("v = "):].rstrip("\n")


def _key(name: str) -> str:
    return tomli_w.dumps({name: 0}).rsplit(" = ", 1)[0]


def _line(key: str, value: object, comment: str = "") -> str:
    text = f"{_key(key)} = {_value(value)}"
    return f"{text:<30} # {comment}" if comment else text


def _table(name: str, comment: str = "") -> str:
    return f"{'[' + name + ']':<30} # {comment}" if comment else f"[{name}]"


def render(a: Answers, layout: Layout) -> str:
    """The spec's text, commented key by key."""
    m = a.model
    exp_id = a.exp_id or default_exp_id(a.output, m)
    shown = "SPEC" if a.output == "-" else a.output  # printed (-o -): the user names the file
    out = [f"# Written by `acrl init` (acrl {__version__}): {m.name}, GRPO, integration \"{a.integration}\", on "
           f"{a.nodes} node{'s' if a.nodes > 1 else ''} x {a.gpus_per_node} GPUs.",
           f"# Compile it:  acrl-compile {shown}    Draw its GPUs:  acrl layout {shown}",
           "# Writing a spec, table by table: docs/spec.md; every key, its default and slime flag: docs/reference.md;",
           "# the rules a compile checks: docs/rules.md.",
           "# The parallel sizes below were chosen by compiling this spec in memory: the smallest tensor parallel size",
           "# whose layout slime can place and whose static memory estimate fits the GPUs (docs/cluster.md,",
           "# docs/memory.md).", "",
           "[experiment]",
           _line("id", exp_id, "names the bundle (bundles/<id>/), the Ray submission id and the S3 prefix"),
           "# The rollout and reward: \"agentcore\", the toolkit's, with [agentcore] below; \"slime\", slime's own "
           "(docs/spec.md, Integration profiles)",
           _line("integration", a.integration),
           _line("num_rollout", NUM_ROLLOUT, "rollout/train iterations"), ""]
    if a.integration == "agentcore":
        out += [_table("agentcore", "the deployed agent; written to the bundle's custom_config.yaml"),
                _line("runtime_arn", a.runtime_arn, "the agent's AgentCore Runtime"),
                _line("s3_bucket", a.s3_bucket, "where the agent writes its rollout results"), ""]
    out += ["[model]",
            _line("type", m.name, f"acrl's catalog (`acrl models show {m.name}`): {m.source}"),
            _line("args_source", "catalog", "MODEL_ARGS from the catalog, frozen into the bundle's model_args.sh"),
            _line("dir", a.model_dir or default_model_dir(m), "the Hugging Face checkpoint, on the cluster"), "",
            "[data]",
            _line("path", a.data, "training prompts: JSONL on the cluster"),
            _line("input_key", "prompt", "the JSON key of each line's prompt")]
    if a.integration == "slime":
        out.append(_line("label_key", "label", "the JSON key of the answer the reward compares with"))
    out += ["",
            _table("cluster", "the machines (docs/cluster.md)"),
            _line("num_nodes", a.nodes, "nodes; more than one: the others join with the bundle's join.sh"),
            _line("gpus_per_node", a.gpus_per_node, "GPUs of each node"),
            _line("gpu_memory_gib", a.gpu_memory_gib, "one GPU's memory: 80 for an A100/H100 80GB, 141 for an H200"),
            _line("colocate", True, "training and rollout take turns on every GPU"), "",
            _table("parallel", "Megatron's sizes for the training actor"),
            _line("tensor", layout.tensor, "tensor parallel: divides the attention heads"),
            _line("pipeline", layout.pipeline, "pipeline parallel: divides the layers")]
    if layout.expert > 1:
        out.append(_line("expert", layout.expert, "expert parallel: divides the experts"))
    out += [_line("sequence_parallel", layout.tensor > 1, "Megatron's sequence parallelism (needs tensor > 1)"), "",
            "[rollout]",
            _line("batch_size", layout.batch_size, "prompts per rollout"),
            _line("n_samples_per_prompt", SAMPLES_PER_PROMPT, "samples per prompt: the group GRPO compares"),
            _line("max_response_len", 1024, "tokens per response"),
            _line("gpus_per_engine", layout.gpus_per_engine, "GPUs per SGLang engine: it must hold the model"), "",
            "[train]",
            _line("num_steps_per_rollout", 1, "optimizer steps per rollout (global batch = samples / steps)"),
            _line("lr", 1e-6, "learning rate"), ""]
    if a.eval:
        out += ["[eval]", _line("interval", EVAL_INTERVAL, "evaluate every N rollouts"), "",
                _table("eval.datasets", "name = JSONL path on the cluster")]
        out += [_line(name, path, "evaluated every interval") for name, path in a.eval.items()]
        out.append("")
    if a.integration == "slime":
        out += [_table("extra.flags", "slime flags the spec has no key for"),
                _line("rm-type", a.rm_type, "slime's rule-based reward: " + ", ".join(RM_TYPES)), ""]
    out += ["# To keep checkpoints (and resume from them when train.sh is run again):",
            "# [checkpoint]",
            f"# save = {_value('/checkpoints/' + exp_id)}",
            "# save_interval = 20"]
    return "\n".join(out) + "\n"
