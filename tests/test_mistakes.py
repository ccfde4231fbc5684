"""The mistakes a newcomer makes writing a first spec, and what acrl says about each (issue 17).

Each mistake is one edit of a spec that compiles (BASE: Qwen3-8B GRPO on one 8-GPU node, as docs/spec.md has a
newcomer write it). What acrl says is held here word for word, and graded by a rubric, which says what a good error
message is:

  1. it says where: the spec's file, and the line and column of the mistake itself;
  2. it names what was written wrong: the key (or the table, or the quote) the user wrote;
  3. it says what is wrong in the user's terms, never in Python's ("'list' object has no attribute 'items'");
  4. it says how to fix it, with the user's own value written right, or the values that would be valid.

The rest of the suite asserts rule ids, keys and positions; this file is where the words are kept.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import attrs
import pytest

from acrl.compiler import SpecError, compile_spec
from acrl.compiler._spec.aliases import SHORT_NAMES, SLIME_RUNNER, TABLE_NAMES
from acrl.compiler._spec.tables import table_types
from acrl.compiler.errors import Diagnostic

BASE = """\
[experiment]
id = "gsm8k-qwen3-8b"
num_rollout = 10

[agentcore]
runtime_arn = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/math_agent-a1B2c3D4e5"
s3_bucket = "acrl-rollouts"

[model]
type = "qwen3-8B"
dir = "/data/models/Qwen3-8B"

[data]
path = "/data/gsm8k/train.jsonl"

[cluster]
gpus_per_node = 8

[parallel]
tensor = 2

[rollout]
batch_size = 32
n_samples_per_prompt = 8

[train]
lr = 1e-6

[eval]
interval = 5

[eval.datasets]
gsm8k = "/data/gsm8k/test.jsonl"
"""


@attrs.frozen
class Mistake:
    """``edit``: (old, new) replaced once in BASE, or ("under", header, lines) to add lines below a table's header.
    ``at``: text on the line the first error must point at; ``wrote``: what the user wrote wrong, which the error must
    name; ``fix_shows``: what the fix must show (the user's value written right, or the valid values);
    ``said``: the errors, word for word, each as "line:column [table] key: message (rule) | fix"."""

    name: str
    edit: tuple[str, ...]
    at: str
    wrote: str
    fix_shows: str
    said: tuple[str, ...]

    def text(self) -> str:
        if self.edit[0] == "under":
            _, header, lines = self.edit
            assert f"{header}\n" in BASE
            return BASE.replace(f"{header}\n", f"{header}\n{lines}\n", 1)
        old, new = self.edit
        assert old in BASE, old
        return BASE.replace(old, new, 1)


def under(header: str, lines: str) -> tuple[str, ...]:
    return ("under", header, lines)


END = "<end of the file>"  # a Mistake's ``at`` where the error points after the last line (a missing table)

MISTAKES = [
    # --- TOML syntax: tomllib's errors, in plain words
    Mistake("a key written twice", under("[rollout]", "batch_size = 64"), "batch_size = 32", "batch_size",
            "keep one of them", (
                "24:1 [rollout] batch_size: duplicate key: written twice, at line 23 and at line 24 "
                "| keep one of them: TOML allows a key once in its table",)),
    Mistake("a table declared twice", ("[train]\n", "[rollout]\nn_samples_per_prompt = 4\n\n[train]\n"),
            "[rollout]\nn_samples_per_prompt = 4", "[rollout]", "merge", (
                "26:1 duplicate table: [rollout] is declared twice, at line 22 and at line 26 "
                "| merge the two into one [rollout] table",)),
    Mistake("a string left open", ('dir = "/data/models/Qwen3-8B"', 'dir = "/data/models/Qwen3-8B'),
            'dir = "/data/models/Qwen3-8B', "dir", '"""', (
                "11:7 [model] dir: unterminated string: the string that starts here has no closing quote "
                "| close it with the same quote on this line; a string of several lines is written between triple "
                'quotes ("""...""")',)),
    Mistake("a word without quotes", ('type = "qwen3-8B"', "type = qwen3-8B"), "type = qwen3-8B", "type",
            'type = "qwen3-8B"', (
                "10:8 [model] type: qwen3-8B is not a TOML value: text must be quoted, numbers and booleans are "
                'written bare | write type = "qwen3-8B" if it is text',)),
    Mistake("True with a capital", under("[cluster]", "colocate = True"), "colocate = True", "colocate",
            "colocate = true", (
                "17:12 [cluster] colocate: True is not a TOML value: booleans are true and false, in lowercase "
                "| write colocate = true",)),
    Mistake("no '=' after a key", under("[rollout]", "temperature 0.8"), "temperature 0.8", "temperature",
            "temperature = 0.8", (
                "23:13 [rollout] temperature: expected '=' after the key temperature: each line is key = value, a "
                "[table] header or a # comment | write temperature = 0.8; a key with spaces is quoted (\"a key\" = 1), "
                "a comment starts with #",)),
    Mistake("a Windows path in double quotes", ('path = "/data/gsm8k/train.jsonl"', 'path = "D:\\data\\train.jsonl"'),
            "D:\\data", "path", "'D:\\data\\train.jsonl'", (
                '14:13 [data] path: a backslash in a "..." string starts an escape (\\n, \\t, \\u0041), and \\d is '
                "none | write the value in single quotes, where a backslash is itself ('D:\\data\\train.jsonl'), or "
                "double each backslash",)),
    Mistake("a thousands separator", ("num_rollout = 10", "num_rollout = 1,000"), "num_rollout = 1,000",
            "num_rollout", "num_rollout = 1000", (
                "3:16 [experiment] num_rollout: 1,000 is not a TOML number: ',' does not separate thousands "
                "| write num_rollout = 1000 (or 1_000)",)),
    # --- names of keys and tables: the same table's, SlimeRunner's, slime's, the other tables'
    Mistake("a misspelled key", under("[rollout]", "batch_sise = 64"), "batch_sise", "batch_sise", '"batch_size"', (
        "23:1 [rollout] batch_sise: unknown key 'batch_sise' | did you mean \"batch_size\"?",)),
    Mistake("a misspelled table", ("[rollout]", "[rollouts]"), "[rollouts]", "rollouts", '"rollout"', (
        "22:1 rollouts: unknown key 'rollouts' | did you mean \"rollout\"?",)),
    Mistake("another trainer's table name", ("[train]", "[training]"), "[training]", "training", '"train"', (
        "26:1 training: unknown key 'training' | did you mean \"train\"?",)),
    Mistake("SlimeRunner's num_gpus", ("gpus_per_node = 8", "num_gpus = 8"), "num_gpus = 8", "num_gpus",
            "gpus_per_node = 8", (
                "17:1 [cluster] num_gpus: unknown key 'num_gpus' | did you mean \"gpus_per_node\"? SlimeRunner's "
                "num_gpus, the GPUs `ray start --num-gpus` gives its one node (not the training actor's "
                "actor_num_gpus_per_node, nor the rollout's rollout_num_gpus), is gpus_per_node here: write "
                "gpus_per_node = 8",)),
    Mistake("SlimeRunner's tp_size", ("tensor = 2", "tp_size = 2"), "tp_size = 2", "tp_size", "tensor = 2", (
        "20:1 [parallel] tp_size: unknown key 'tp_size' | did you mean \"tensor\"? SlimeRunner's tp_size is tensor "
        "here: write tensor = 2",)),
    Mistake("slime's rollout_batch_size", ("batch_size = 32", "rollout_batch_size = 32"), "rollout_batch_size",
            "rollout_batch_size", "batch_size = 32", (
                "23:1 [rollout] rollout_batch_size: unknown key 'rollout_batch_size' | did you mean \"batch_size\"? "
                "SlimeRunner's rollout_batch_size is batch_size here: write batch_size = 32",)),
    Mistake("lr under [rollout]", under("[rollout]", "lr = 2e-6"), "lr = 2e-6", "lr", "lr = 2e-06 under [train]", (
        "23:1 [rollout] lr: unknown key 'lr' | lr is a key of [train], not of [rollout]: write lr = 2e-06 under "
        "[train]",)),
    Mistake("tp under [cluster]", under("[cluster]", "tp = 4"), "tp = 4", "tp", "tensor = 4 under [parallel]", (
        "17:1 [cluster] tp: unknown key 'tp' | tp is [parallel] tensor in a spec: write tensor = 4 under "
        "[parallel]",)),
    Mistake("learning_rate", ("lr = 1e-6", "learning_rate = 1e-6"), "learning_rate", "learning_rate", "lr = 1e-06", (
        "27:1 [train] learning_rate: unknown key 'learning_rate' | did you mean \"lr\"? learning_rate is lr here: "
        "write lr = 1e-06",)),
    Mistake("a slime flag as a key", ("[train]\n", "[algorithm]\nuse_rollout_logprobs = true\n\n[train]\n"),
            "use_rollout_logprobs", "use_rollout_logprobs", '"--use-rollout-logprobs" = true', (
                "27:1 [algorithm] use_rollout_logprobs: unknown key 'use_rollout_logprobs' | no spec key sets "
                "slime's --use-rollout-logprobs: pass it in the escape hatch, as \"--use-rollout-logprobs\" = true "
                "under [extra.flags]",)),
    Mistake("a key above every table", ("[experiment]", "lr = 1e-6\n\n[experiment]"), "lr = 1e-6", "lr",
            "lr = 1e-06 under [train]", (
                "1:1 lr: unknown key 'lr' | lr is a key of [train], not a top-level key: write lr = 1e-06 under "
                "[train]",)),
    Mistake("temperature under [train]", under("[train]", "temperature = 0.7"), "temperature = 0.7", "temperature",
            "temperature = 0.7", (
                "27:1 [train] temperature: unknown key 'temperature' | temperature is a key of [rollout] and [eval]: "
                "write temperature = 0.7 under the table you mean",)),
    Mistake("no [data] table", ('[data]\npath = "/data/gsm8k/train.jsonl"\n', ""), END,
            "[data]", "path = ...", (
                "32:1 missing required table [data] | add a [data] table with path = ... (Training prompt JSONL on "
                "the cluster)",)),
    Mistake("no model dir", ('dir = "/data/models/Qwen3-8B"\n', ""), "[model]", "dir", "dir = ...", (
        "9:1 [model] dir: missing required key 'dir' in [model] | add dir = ... under [model] (Hugging Face "
        "checkpoint directory on the cluster)",)),
    # --- types: the user's value, written right
    Mistake("a number in quotes", ("n_samples_per_prompt = 8", 'n_samples_per_prompt = "8"'),
            'n_samples_per_prompt = "8"', "n_samples_per_prompt", "n_samples_per_prompt = 8", (
                "24:1 [rollout] n_samples_per_prompt: expected an integer, got a string ('8') | write it as "
                "n_samples_per_prompt = 8",)),
    Mistake("a float in quotes", ("lr = 1e-6", 'lr = "1e-6"'), 'lr = "1e-6"', "lr", "lr = 1e-6", (
        "27:1 [train] lr: expected a number, got a string ('1e-6') | write it as lr = 1e-6",)),
    Mistake("a boolean in quotes", under("[cluster]", 'colocate = "false"'), 'colocate = "false"', "colocate",
            "colocate = false", (
                "17:1 [cluster] colocate: expected a boolean, got a string ('false') | write it as colocate = false",)),
    Mistake("a boolean as 0", under("[cluster]", "colocate = 0"), "colocate = 0", "colocate", "colocate = false", (
        "17:1 [cluster] colocate: expected a boolean, got an integer (0) | write it as colocate = false",)),
    Mistake("eval datasets as a list", ('[eval.datasets]\ngsm8k = "/data/gsm8k/test.jsonl"',
                                        'datasets = ["/data/gsm8k/test.jsonl"]'),
            "datasets = [", "datasets", 'datasets = { gsm8k = "/data/gsm8k/test.jsonl" }', (
                "32:1 [eval] datasets: expected a table of name = value pairs, got an array "
                "(['/data/gsm8k/test.jsonl']) | write it as datasets = { gsm8k = \"/data/gsm8k/test.jsonl\" }",)),
    Mistake("environment variables as NAME=VALUE strings", ("[eval]", '[env]\nvars = ["HF_HOME=/cache/hf"]\n\n[eval]'),
            "vars = [", "vars", 'vars = { HF_HOME = "/cache/hf" }', (
                "30:1 [env] vars: expected a table of name = value pairs, got an array (['HF_HOME=/cache/hf']) "
                '| write it as vars = { HF_HOME = "/cache/hf" }',)),
    Mistake("a fractional batch size", ("batch_size = 32", "batch_size = 32.5"), "batch_size = 32.5", "batch_size",
            "32 or 33", (
                "23:1 [rollout] batch_size: expected an integer, got a float (32.5) | write it as a whole number: 32 "
                "or 33",)),
    Mistake("one extra argument as a string",
            ("[eval]", '[extra]\nargs = "--no-gradient-accumulation-fusion"\n\n[eval]'),
            "args = ", "args", 'args = ["--no-gradient-accumulation-fusion"]', (
                "30:1 [extra] args: expected an array, got a string ('--no-gradient-accumulation-fusion') | write it "
                "as args = [\"--no-gradient-accumulation-fusion\"]",)),
    Mistake("a choice in capitals", ("[train]\n", '[algorithm]\nadvantage_estimator = "GRPO"\n\n[train]\n'),
            "advantage_estimator", "advantage_estimator", '"grpo"', (
                '27:1 [algorithm] advantage_estimator: "GRPO" is not one of "grpo", "gspo", "cispo", '
                '"reinforce_plus_plus", "reinforce_plus_plus_baseline", "ppo" | did you mean "grpo"?',)),
    Mistake("a choice misspelled", ('s3_bucket = "acrl-rollouts"', 's3_bucket = "acrl-rollouts"\n'
                                                                   'gateway_log_level = "warn"'),
            "gateway_log_level", "gateway_log_level", '"warning"', (
                '8:1 [agentcore] gateway_log_level: "warn" is not one of "debug", "info", "warning", "error", '
                '"critical" | did you mean "warning"?',)),
    Mistake("an integration misspelled", ("num_rollout = 10", 'num_rollout = 10\nintegration = "slim"'),
            "integration", "integration", '"slime"', (
                '4:1 [experiment] integration: "slim" is not one of "agentcore", "slime", "custom" | did you mean '
                '"slime"?',)),
    Mistake("a temperature of 0", under("[rollout]", "temperature = 0"), "temperature = 0", "temperature",
            "greater than 0", (
                "23:1 [rollout] temperature: must be greater than 0, got 0 | set temperature to a value greater "
                "than 0",)),
    Mistake("no rollouts", ("num_rollout = 10", "num_rollout = 0"), "num_rollout = 0", "num_rollout", "at least 1", (
        "3:1 [experiment] num_rollout: must be at least 1, got 0 | set num_rollout to a value at least 1",)),
    # --- paths, names and functions: never empty, blank around, broken over lines or absurdly long
    Mistake("an empty eval dataset path", ('gsm8k = "/data/gsm8k/test.jsonl"', 'gsm8k = ""'), 'gsm8k = ""', "gsm8k",
            "gsm8k's path", (
                "33:1 [eval.datasets] gsm8k: is empty: a path is needed here (slime would be passed "
                "--eval-prompt-data gsm8k '') | give gsm8k's path, or remove the line",)),
    Mistake("a path with a space before it", ('path = "/data/gsm8k/train.jsonl"', 'path = " /data/gsm8k/train.jsonl"'),
            'path = " /data', "path", "'/data/gsm8k/train.jsonl'", (
                "14:1 [data] path: starts with blank space: ' /data/gsm8k/train.jsonl' | write it without: "
                "'/data/gsm8k/train.jsonl'",)),
    Mistake("a line break in a path", ('dir = "/data/models/Qwen3-8B"', 'dir = "/data/models/Qwen3-8B\\n"'),
            'dir = "/data/models/Qwen3-8B\\n"', "dir", "remove it", (
                "11:1 [model] dir: holds the control character U+000A (a line break), which no path has: "
                "'/data/models/Qwen3-8B\\n' | remove it: a path is one line of visible characters",)),
    Mistake("a function without its module", under("[rollout]", 'custom_rm_path = "score"'), "custom_rm_path",
            "custom_rm_path", '"my_module.score"', (
                "23:1 [rollout] custom_rm_path: 'score' is not a Python function as module.function: slime imports "
                "the module before the last '.' and takes the function after it | name its module too: "
                '"my_module.score"',)),
    Mistake("a function as file:name", under("[rollout]", 'custom_rm_path = "rewards.py:score"'), "custom_rm_path",
            "custom_rm_path", '"rewards.score"', (
                "23:1 [rollout] custom_rm_path: 'rewards.py:score' is not a Python function as module.function: "
                "slime imports the module before the last '.' and takes the function after it | write it as "
                '"rewards.score"',)),
    Mistake("an empty W&B project", ("[eval]", '[wandb]\nproject = ""\n\n[eval]'), 'project = ""', "project",
            "give a name", (
                "30:1 [wandb] project: is empty: a name is needed here | give a name, or remove the line to leave "
                "it unset",)),
    Mistake("a 100 KB path", ('path = "/data/gsm8k/train.jsonl"', 'path = "/' + "a" * 100_000 + '"'), 'path = "/aaaa',
            "path", "shorter path", (
                "14:1 [data] path: path too long: 100,001 bytes (the limit is 4,095) | give a shorter path",)),
    Mistake("an empty experiment id", ('id = "gsm8k-qwen3-8b"', 'id = ""'), 'id = ""', "id", "give a name", (
        "2:1 [experiment] id: is empty: a name is needed here | give a name",)),
    # --- the model
    Mistake("a model the catalog lacks", ('type = "qwen3-8B"', 'type = "qwen3-9B"'), 'type = "qwen3-9B"', "type",
            "`acrl models`", (
                "10:1 [model] type: 'qwen3-9B' is not in acrl's model catalog (did you mean 'qwen3.5-9B', "
                "'qwen3-8B' or 'qwen3-4B'?), and no slime checkout is on this machine to read "
                "scripts/models/qwen3-9B.sh from | write type = \"qwen3.5-9B\" (`acrl models` lists the catalog); "
                "for a model it lacks, give the architecture in [model.args], or read slime's "
                "scripts/models/<type>.sh with --slime-checkout DIR",)),
    # --- the rules across keys: the fix lists the valid choices, in the user's own numbers
    Mistake("a tensor size the GPUs and heads refuse", ("tensor = 2", "tensor = 3"), "tensor = 3", "tensor",
            "{1, 2, 4, 8}", (
                "20:1 [parallel] tensor: the actor's 8 GPUs (actor_num_nodes x actor_num_gpus_per_node) are not "
                "divisible by tensor x pipeline x context = 3; Megatron stops at launch (ACRL-P001) | with pipeline "
                "1 and context 1, set tensor to one of {1, 2, 4, 8}",
                "20:1 [parallel] tensor: 32 attention heads are not divisible by tensor parallel size 3 (ACRL-M001) "
                "| set tensor to one of {1, 2, 4, 8}: it divides the 32 heads, the 8 query groups and the actor's 8 "
                "GPUs",
                "20:1 [parallel] tensor: 8 query groups (KV heads) are neither a multiple nor a divisor of tensor "
                "parallel size 3 (ACRL-M001) | set tensor to one of {1, 2, 4, 8}: it divides the 32 heads, the 8 "
                "query groups and the actor's 8 GPUs")),
    Mistake("a pipeline size the layers refuse", ("tensor = 2", "tensor = 2\npipeline = 5"), "pipeline = 5",
            "pipeline", "{1, 2, 4}", (
                "21:1 [parallel] pipeline: the actor's 8 GPUs (actor_num_nodes x actor_num_gpus_per_node) are not "
                "divisible by tensor x pipeline x context = 10; Megatron stops at launch (ACRL-P001) | with tensor 2 "
                "and context 1, set pipeline to one of {1, 2, 4}",
                "21:1 [parallel] pipeline: 36 layers are not divisible by pipeline size 5 (ACRL-M002) | set pipeline "
                "to a size dividing 36: one of {1, 2, 3, 4, 6, 9, 12, 18, 36}")),
    Mistake("a context size that is not a power of two", ("tensor = 2", "tensor = 2\ncontext = 3"), "context = 3",
            "context", "{1, 2, 4}", (
                "21:1 [parallel] context: the actor's 8 GPUs (actor_num_nodes x actor_num_gpus_per_node) are not "
                "divisible by tensor x pipeline x context = 6; Megatron stops at launch (ACRL-P001) | with tensor 2 "
                "and pipeline 1, set context to one of {1, 2, 4}",
                "21:1 [parallel] context: context parallel size 3: Megatron needs seq-length (slime's placeholder "
                "4096) to be a multiple of 2 x 3 (ACRL-P009) | set context to a power of two: one of {1, 2, 4, 8, "
                "16, 32, 64, 128, ...}")),
    Mistake("steps that do not divide the samples", ("lr = 1e-6", "lr = 1e-6\nnum_steps_per_rollout = 3"),
            "num_steps_per_rollout = 3", "num_steps_per_rollout", "{1, 2, 4, 8, 16, 32, 64, 128, 256}", (
                "28:1 [train] num_steps_per_rollout: 256 samples per rollout (batch_size x n_samples_per_prompt) are "
                "not divisible by num_steps_per_rollout = 3: trailing samples would be dropped silently (ACRL-B001) "
                "| set num_steps_per_rollout to a divisor of 256: one of {1, 2, 4, 8, 16, 32, 64, 128, 256}",
                "28:1 [train] num_steps_per_rollout: global batch 85 is not divisible by micro_batch_size x "
                "data-parallel size = 1 x 4: Megatron's micro-batch calculator fails in the actors (ACRL-B002) | set "
                "num_steps_per_rollout to one of {1, 2, 4, 8, 16, 32, 64}")),
    Mistake("an over-sampling batch below the batch", under("[rollout]", "over_sampling_batch_size = 16"),
            "over_sampling_batch_size", "over_sampling_batch_size", "at least 32", (
                "23:1 [rollout] over_sampling_batch_size: over_sampling_batch_size 16 < batch_size 32 (ACRL-B004) | "
                "set over_sampling_batch_size to at least 32, or remove it",)),
    Mistake("a prompt as long as the context", under("[rollout]", "max_prompt_len = 4096\nmax_context_len = 4096"),
            "max_prompt_len = 4096", "max_prompt_len", "below 4096", (
                "23:1 [rollout] max_prompt_len: max_prompt_len 4096 must be smaller than max_context_len 4096 "
                "(ACRL-B005) | set max_prompt_len below 4096, or max_context_len above 4096",)),
    Mistake("disaggregated without rollout GPUs", under("[cluster]", "colocate = false"), "colocate = false",
            "colocate", "{2, 4, 6}", (
                "17:1 [cluster] colocate: colocate = false without rollout_num_gpus: slime crashes with a TypeError "
                "when it builds the placement group (ACRL-P002) | set [cluster] rollout_num_gpus to the rollout "
                "engines' GPUs: a multiple of gpus_per_engine 2 below the cluster's 8, one of {2, 4, 6} (the actor "
                "takes the rest)",)),
    Mistake("async training colocated", ("lr = 1e-6", 'lr = 1e-6\nmode = "async"'), 'mode = "async"', "mode",
            "colocate = false", (
                "28:1 [train] mode: train_async.py rejects --colocate ('Colocation is not supported for async "
                "training') (ACRL-P003) | set [cluster] colocate = false and rollout_num_gpus",)),
    Mistake("eval interval without datasets", ('[eval.datasets]\ngsm8k = "/data/gsm8k/test.jsonl"\n', ""),
            "interval = 5", "interval", "interval = 5", (
                "30:1 [eval] interval: eval.interval is set but no eval datasets are configured; slime stops at "
                "launch (ACRL-E001) | add an [eval.datasets] table of name = \"/path/to/eval.jsonl\", or remove "
                "interval = 5",)),
    Mistake("a save interval without a save dir", ("[eval]", "[checkpoint]\nsave_interval = 5\n\n[eval]"),
            "save_interval = 5", "save_interval", "save = ", (
                "30:1 [checkpoint] save_interval: save_interval = 5 saves to no directory: slime requires --save "
                "with --save-interval (ACRL-E002) | set [checkpoint] save = \"/path/to/checkpoints\" (a directory on "
                "the cluster), or remove save_interval",)),
    Mistake("a bucket given as a URL", ('s3_bucket = "acrl-rollouts"', 's3_bucket = "s3://acrl-rollouts"'), "s3_bucket",
            "s3_bucket", 's3_bucket = "acrl-rollouts"', (
                "7:1 [agentcore] s3_bucket: 's3://acrl-rollouts' is not a valid S3 bucket name (ACRL-T004) | write "
                "s3_bucket = \"acrl-rollouts\": the bucket's name, not a URL",)),
]

# Python's words for its own failures: a message that shows one is a bug in acrl, not a message.
PYTHONS_WORDS = re.compile(r"has no attribute|Traceback|<class '|object is not|unhashable type|invalid value: "
                           r"|NoneType|KeyError|IndexError")


def said(diagnostic: Diagnostic) -> str:
    where = f"{diagnostic.line}:{diagnostic.column}"
    key = f" {diagnostic.table_and_key}:" if diagnostic.key else ""
    rule = f" ({diagnostic.rule})" if diagnostic.rule else ""
    return f"{where}{key} {diagnostic.message}{rule} | {diagnostic.hint}"


def errors_of(text: str, tmp_path: Path) -> SpecError:
    path = tmp_path / "spec.toml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        compile_spec(path, display_name="spec.toml")
    return caught.value


def grade(mistake: Mistake, text: str, first: Diagnostic) -> list[str]:
    """Where the first error falls short of the rubric (the module's docstring), in words; [] when it does not."""
    shortcomings = []
    # END: after the last line, where a missing table is added (no line of the spec is wrong)
    line = text.count("\n") + 1 if mistake.at == END else text.count("\n", 0, text.index(mistake.at)) + 1
    if first.file != "spec.toml" or first.line != line or not first.column:
        shortcomings.append(f"1: it does not point at spec.toml line {line} with a column "
                            f"({first.file}:{first.line}:{first.column})")
    head = first.format().splitlines()[0]
    if mistake.wrote not in head:
        shortcomings.append(f"2: it does not name {mistake.wrote!r}: {head}")
    if not first.message or PYTHONS_WORDS.search(first.message):
        shortcomings.append(f"3: it does not say what is wrong in the user's terms: {first.message!r}")
    if not first.hint or mistake.fix_shows not in first.hint:
        shortcomings.append(f"4: its fix does not show {mistake.fix_shows!r}: {first.hint!r}")
    return shortcomings


def test_the_base_spec_compiles(tmp_path: Path) -> None:
    path = tmp_path / "spec.toml"
    path.write_text(BASE, encoding="utf-8")
    assert compile_spec(path).warnings == ()


def test_at_least_forty_typical_mistakes_each_its_own() -> None:
    assert len(MISTAKES) >= 40
    assert len({m.name for m in MISTAKES}) == len({m.text() for m in MISTAKES}) == len(MISTAKES)


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_a_mistake_gets_its_message_word_for_word(mistake: Mistake, tmp_path: Path) -> None:
    error = errors_of(mistake.text(), tmp_path)
    assert tuple(said(d) for d in error.diagnostics) == mistake.said


@pytest.mark.parametrize("mistake", MISTAKES, ids=[m.name for m in MISTAKES])
def test_a_mistake_s_message_passes_the_rubric(mistake: Mistake, tmp_path: Path) -> None:
    text = mistake.text()
    error = errors_of(text, tmp_path)
    assert grade(mistake, text, error.diagnostics[0]) == []
    assert "Traceback" not in str(error)
    assert max(len(line) for line in str(error).splitlines()) <= 600  # a 100 KB line is shown cut


def test_the_rubric_fails_a_message_in_python_s_words(tmp_path: Path) -> None:
    """The rubric is no rubber stamp: a message as acrl once gave it for eval datasets written as a list fails."""
    mistake = next(m for m in MISTAKES if m.name == "eval datasets as a list")
    text = mistake.text()
    old = Diagnostic("error", "expected a table, got 'list' object has no attribute 'items'", file="spec.toml",
                     key="eval.datasets", line=32, column=1, hint="write it as a [table]")
    assert [s[0] for s in grade(mistake, text, old)] == ["3", "4"]
    assert [s[0] for s in grade(mistake, text, attrs.evolve(old, line=None))] == ["1", "3", "4"]


def test_three_mistakes_of_different_stages_are_three_errors_of_one_compile(tmp_path: Path) -> None:
    """A misspelled key (structure), an unknown model type (MODEL_ARGS) and eval.interval without datasets (a rule)
    once took three compiles: each stage stopped the next."""
    text = BASE.replace("batch_size = 32", "batch_sise = 32").replace('type = "qwen3-8B"', 'type = "qwen3-9B"')
    text = text.replace('[eval.datasets]\ngsm8k = "/data/gsm8k/test.jsonl"\n', "")
    error = errors_of(text, tmp_path)
    assert [(d.key, d.line, d.rule) for d in error.diagnostics] == [
        ("rollout.batch_sise", 23, ""), ("model.type", 10, ""), ("eval.interval", 30, "ACRL-E001")]
    assert str(error).splitlines()[-2:] == [
        "3 errors; nothing was written.",
        f"{error.unchecked}: fixing these may reveal more."]
    assert re.fullmatch(r"\d+ of the \d+ checks did not run, as they read keys with errors or MODEL_ARGS "
                        r"\(not resolved\)", error.unchecked)


def test_a_compile_with_every_check_run_has_no_closing_line(tmp_path: Path) -> None:
    error = errors_of(BASE.replace('[eval.datasets]\ngsm8k = "/data/gsm8k/test.jsonl"\n', ""), tmp_path)
    assert error.unchecked == "" and str(error).endswith("1 error; nothing was written.")
    assert error.as_json()["unchecked"] is None


# The spec of README.md's sample: a misspelled key at line 17, a tensor size the 16 heads of Qwen2.5-3B refuse at 31.
README_SPEC = """\
[experiment]
id = "readme-sample"
num_rollout = 1

[agentcore]
runtime_arn = "arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/math_agent-a1B2c3D4e5"
s3_bucket = "acrl-example-rollouts"

[model]
type = "qwen2.5-3B"
dir = "/data/models/Qwen2.5-3B-Instruct"

[data]
path = "/data/gsm8k/train.jsonl"

[rollout]
batch_sise = 3
n_samples_per_prompt = 8
max_response_len = 1024
temperature = 1.0

[cluster]
gpus_per_node = 6

[train]
lr = 1e-6
num_steps_per_rollout = 1

# tensor parallelism within the node
[parallel]
tensor = 3
"""


def test_the_readme_sample_output(tmp_path: Path) -> None:
    """README.md's "Mistakes, before any GPU is touched": its two errors, in one compile, word for word."""
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    sample = readme.split("$ acrl-compile spec.toml\n", 1)[1].split("\n…\n", 1)[0]
    text = README_SPEC
    assert text.splitlines()[16] == "batch_sise = 3" and text.splitlines()[30] == "tensor = 3"
    path = tmp_path / "spec.toml"
    path.write_text(text, encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "compile", "spec.toml", "-o", "out"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and proc.stderr.startswith(sample + "\n"), proc.stderr


def test_every_other_name_of_a_key_names_a_key_of_the_spec() -> None:
    keys = {f"{t}.{f.name}" for t, cls in table_types().items() for f in attrs.fields(cls)}
    assert {v for v in (*SLIME_RUNNER.values(), *SHORT_NAMES.values()) if v not in keys} == set()
    assert set(TABLE_NAMES.values()) <= set(table_types())
    assert not set(SHORT_NAMES) & set(SLIME_RUNNER)  # one meaning a name


def test_num_gpus_never_suggests_the_rollout_s_gpus(tmp_path: Path) -> None:
    """SlimeRunner's num_gpus is the node's GPUs: "did you mean rollout_num_gpus?" led into a GPU mistake."""
    error = errors_of(BASE.replace("gpus_per_node = 8", "num_gpus = 8"), tmp_path)
    (first, *_) = error.diagnostics
    assert first.hint.startswith('did you mean "gpus_per_node"?')
    assert "rollout_num_gpus = " not in first.hint and "actor_num_gpus_per_node = " not in first.hint


def test_the_importers_compile_reports_every_error_at_once(tmp_path: Path) -> None:
    """`acrl import` compiles the spec it wrote in memory: its problems are all there, with the closing line."""
    config = tmp_path / "runner.yaml"
    config.write_text("exp_id: x\nagent_runtime_arn: arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/a-b1\n"
                      "s3_bucket: acrl-rollouts\nmodel_dir: /m\ndata_path: /d.jsonl\nmodel_type: qwen3-9B\n"
                      "tp_size: 3\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "import", "slime-runner", "runner.yaml", "-o",
                           "spec.toml"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "[model] args_source: args_source is 'script' but no slime checkout" in proc.stderr  # what it wrote
    assert "'qwen3-9B' is not in acrl's catalog either; did you mean 'qwen3.5-9B'?" in proc.stderr
    assert "(ACRL-P001)" in proc.stderr  # tensor 3 on 8 GPUs: checked although MODEL_ARGS are not resolved
    assert "fixing these may reveal more." in proc.stderr


def test_an_unknown_slime_runner_field_still_reports_the_in_memory_compiles_errors(tmp_path: Path) -> None:
    """A field SlimeRunner does not have is refused, and the spec made without it is still compiled in memory: its
    errors come in the same run, with the closing line, and nothing is written."""
    config = tmp_path / "runner.yaml"
    config.write_text("exp_id: x\nagent_runtime_arn: arn:aws:bedrock-agentcore:us-west-2:123456789012:runtime/a-b1\n"
                      "s3_bucket: acrl-rollouts\nmodel_dir: /m\ndata_path: /d.jsonl\nmodel_type: qwen3-9B\n"
                      "tp_size: 3\neval_interval: 5\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "acrl.runtime._cli", "import", "slime-runner", "runner.yaml", "-o",
                           "spec.toml"], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("runner.yaml:8: eval_interval: not a SlimeRunner field")
    assert "[model] args_source: " in proc.stderr and "(ACRL-P001)" in proc.stderr  # the in-memory compile's
    assert proc.stderr.rstrip().endswith("fixing these may reveal more.")
    assert not (tmp_path / "spec.toml").exists()
