"""`acrl import slime-runner CONFIG.yaml`: SlimeRunner's keyword arguments, as `SlimeRunner.from_yaml` reads them,
turned into a spec whose train.sh passes slime the same flags and values.

The facts come from agentcore-rl-toolkit's ``src/agentcore_rl_toolkit/backends/slime/runner.py`` at commit
45509ca1e1053a479181d5d3aa2cbef3671d76b5 (the newest read; 5c0f244 lacks only ``sglang_data_parallel_size``):
``from_yaml`` passes the mapping to ``SlimeRunner(**data)``, so a key that is not a field is an error, and
``train(num_rollout=1)`` takes the rollout count. What acrl passes differently on purpose is reported as a note.
"""

from __future__ import annotations

import difflib
import math
import re
import typing
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, Literal

import attrs
import yaml

from .._pipeline.bundle import YAML_LIMIT, read_input
from .._pipeline.parse import unreadable_hint
from .._pipeline.placement import node_size_matters
from .._secrets import drop_secret_values, is_credential_flag, looks_secret_value
from .._spec.aliases import SLIME_RUNNER
from .._spec.flag_index import key_of
from .._spec.flags import is_number, known_absent_flags
from .._spec.tables import TOOLKIT_SLIME_COMMIT, table_types
from ..errors import UsageError
from .base import Imported, ImportInputError, Note, load_yaml
from .slime_runner_model import model_args
from .target import for_slime_runner

Kind = Literal["str", "int", "float", "bool", "str?", "int?", "flags"]

# SlimeRunner field -> its type here. Fields SlimeRunner tests for truth (``if self.cuda_home``) are "str?": an empty
# string there means "not set", as it did for SlimeRunner. Where each field goes: compiler/_spec/aliases.py.
_KINDS: dict[str, Kind] = {
    "exp_id": "str", "agent_runtime_arn": "str", "s3_bucket": "str", "model_dir": "str", "data_path": "str",
    "model_type": "str", "num_gpus": "int", "tp_size": "int", "rollout_gpus_per_engine": "int", "slime_dir": "str",
    "megatron_dir": "str", "cuda_home": "str?", "model_id": "str", "acr_timeout": "int", "acr_tps_limit": "int",
    "max_concurrent": "int", "max_pool_connections": "int", "gateway_port": "int", "reward_postprocessing": "str",
    "sglang_tool_call_parser": "str", "sglang_reasoning_parser": "str?", "sglang_data_parallel_size": "int",
    "cumulative_token_mode": "bool", "renderer_family": "str", "gateway_log_level": "str",
    "rollout_batch_size": "int", "n_samples_per_prompt": "int", "rollout_max_response_len": "int",
    "rollout_temperature": "float", "lr": "float", "eps_clip": "float", "eps_clip_high": "float",
    "weight_decay": "float", "adam_beta2": "float", "sglang_mem_fraction_static": "float",
    "sglang_context_length": "int?", "max_tokens_per_gpu": "int", "wandb_project": "str?", "wandb_group": "str?",
    "extra_flags": "flags",
}
# SlimeRunner field -> (spec table, spec key, type).
FIELDS: dict[str, tuple[str, str, Kind]] = {
    name: (*SLIME_RUNNER[name].split(".", 1), kind) for name, kind in _KINDS.items()}  # type: ignore[misc]
REQUIRED = ("exp_id", "agent_runtime_arn", "s3_bucket", "model_dir", "data_path", "model_type")
# Not SlimeRunner fields, accepted all the same: train()'s argument, and a W&B key (never copied).
NUM_ROLLOUT_KEY = "num_rollout"
_WANDB_KEY_NAMES = frozenset({"wandb_api_key", "wandb_key", "WANDB_API_KEY"})
DEFAULT_NUM_ROLLOUT = 1  # SlimeRunner.train(num_rollout=1)
# Flags SlimeRunner always passed that the targeted slime may lack (acrl passes --megatron-to-hf-mode itself
# where the commit has it, and never --use-dynamic-global-batch-size).
_HARD_CODED_VERSIONED = ("--megatron-to-hf-mode", "--use-dynamic-global-batch-size")


class _Problems:
    """Every problem of the file, reported at once."""

    def __init__(self, path: Path, lines: Mapping[str, int]) -> None:
        self.path, self.lines, self.found = path, lines, list[tuple[str, str, str]]()
        self.stops = False  # a problem after which the spec cannot be made (a field of the wrong type, missing)

    def add(self, key: str, reason: str, fix: str, *, stops: bool = True) -> None:
        """``stops``: False for a key the spec is made without (a field SlimeRunner does not have), whose spec is
        still compiled in memory, to report its errors with this one (base.run_import)."""
        line = self.lines.get(key)
        self.found.append((f"{self.path}:{line}" if line else str(self.path), f"{key}: {reason}", fix))
        self.stops |= stops

    def raise_any(self, *, partial: Imported | None = None) -> None:
        """Raise ImportInputError listing every problem; ``partial``: the spec made without the keys refused."""
        if not self.found:
            return
        # each problem followed by its own fix
        *before, (where, reason, fix) = self.found
        raise ImportInputError(path=where, reason=reason, fix=fix, partial=partial,
                               before=[ImportInputError(path=w, reason=r, fix=f) for w, r, f in before])


def import_slime_runner(path: Path, *, num_rollout: int | None = None, target_commit: str | None = None) -> Imported:
    """Convert the YAML file ``path`` of SlimeRunner keyword arguments into spec data and notes.
    ``num_rollout`` is what ``SlimeRunner.train()`` was called with; without it, the YAML's ``num_rollout``
    key, else SlimeRunner's default, 1. ``target_commit``: --target-commit, else the toolkit's pin (:mod:`.target`)."""
    commit = for_slime_runner(target_commit).commit
    data, lines = _load(path)
    problems = _Problems(path, lines)
    spec: dict[str, dict[str, Any]] = {}
    notes: list[Note] = []
    where = {key: f"{path}:{line}" for key, line in lines.items()}
    for key, value in data.items():
        if key in _WANDB_KEY_NAMES:
            notes.append(Note("difference", "the W&B key in the YAML was not copied: a spec never holds a "
                              "secret. [wandb] key_env names the variable instead: export WANDB_API_KEY where "
                              "train.sh runs, and delete the key from the YAML (SlimeRunner.from_yaml rejects it "
                              "too: SlimeRunner reads the key only from the environment)", where.get(key, key)))
            spec.setdefault("wandb", {})["key_env"] = "WANDB_API_KEY"
        elif key == NUM_ROLLOUT_KEY:
            if (rollouts := _checked(problems, key, value, "int")) is not None:
                spec.setdefault("experiment", {})["num_rollout"] = rollouts
        elif key not in FIELDS:
            close = difflib.get_close_matches(key, [*FIELDS, NUM_ROLLOUT_KEY], n=1, cutoff=0.6)
            problems.add(key, "not a SlimeRunner field (SlimeRunner(**data) would raise TypeError)",
                         f'did you mean "{close[0]}"?' if close else
                         "remove it; SlimeRunner's fields are listed in docs/migration-slime-runner.md", stops=False)
        else:
            table, name, kind = FIELDS[key]
            converted = _checked(problems, key, value, kind)
            if converted is not None and key != "extra_flags":
                spec.setdefault(table, {})[name] = converted
            if isinstance(converted, int) and isinstance(value, str):
                how = "into the custom config as a string" if table == "agentcore" else "(slime reads the same number)"
                notes.append(Note("difference", f"{key}: the YAML gives the string {value!r}; SlimeRunner passed it "
                                  f"as written {how}; the spec holds the integer {converted}", where.get(key, key)))
    missing = [k for k in REQUIRED if k not in data]
    if missing:
        problems.add(", ".join(missing), "required by SlimeRunner but missing",
                     "add " + ", ".join(f"{k}: ..." for k in missing) + " to the YAML")
    if problems.stops:
        problems.raise_any()
    if spec.get("slime", {}).get("dir"):  # SlimeRunner used Path(slime_dir): "/root/slime/" meant "/root/slime"
        spec["slime"]["dir"] = str(PurePosixPath(spec["slime"]["dir"]))
    experiment = spec.setdefault("experiment", {})
    if num_rollout is not None:
        if num_rollout < 1:
            raise UsageError(f"--num-rollout {num_rollout}: not a number of rollouts",
                             hint="give a positive number, e.g. --num-rollout 100")
        experiment["num_rollout"] = num_rollout
    elif "num_rollout" not in experiment:
        experiment["num_rollout"] = DEFAULT_NUM_ROLLOUT
        notes.append(Note("default", f"num_rollout: neither --num-rollout nor the YAML gives it; "
                          f"[experiment] num_rollout = {DEFAULT_NUM_ROLLOUT}, the default of SlimeRunner.train(). "
                          "Pass --num-rollout N with the N your script gave train()", "experiment.num_rollout"))
    script_notes, model_flags = model_args(spec, data)
    notes += script_notes
    notes += _extra_flags(spec, data.get("extra_flags") or [], model_flags, where.get("extra_flags", "extra_flags"),
                          commit)
    notes += _differences(spec, commit)
    if commit != TOOLKIT_SLIME_COMMIT:
        spec.setdefault("slime", {})["commit"] = commit
    notes += [Note("difference", f"{key}: its value looks like a secret (a token, or a URL with user:password): "
                   "it is not copied into the spec; give it on the cluster, in the environment", key)
              for key in drop_secret_values(spec)]  # type: ignore[arg-type]
    imported = Imported(spec=spec, notes=tuple(notes), source=str(path))
    problems.raise_any(partial=imported)  # only fields SlimeRunner lacks: the spec made without them is compiled
    return imported


def _load(path: Path) -> tuple[dict[str, Any], dict[str, int]]:
    """The YAML mapping and the line of each top-level key."""
    try:
        text = read_input(path, limit=YAML_LIMIT).decode("utf-8")
    except FileNotFoundError:
        raise ImportInputError(path=str(path), reason="no such file", fix="give the path of the YAML file "
                               "SlimeRunner.from_yaml read") from None
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ImportInputError(path=str(path), reason=f"cannot read it: {reason}",
                               fix=unreadable_hint(exc, "check that it is a readable UTF-8 text file")
                               if isinstance(exc, OSError) else "check that it is a UTF-8 text file") from None
    try:
        node, data = load_yaml(text, str(path))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ImportInputError(path=where, reason=f"not valid YAML: {problem}",
                               fix="correct the YAML syntax at that line") from None
    if data is None:
        data = {}  # SlimeRunner.from_yaml: yaml.safe_load(f) or {}
    if not isinstance(data, dict):
        raise ImportInputError(path=str(path), reason=f"holds a YAML {type(data).__name__}, not a mapping of "
                               "SlimeRunner keyword arguments", fix="write one `field: value` per line, e.g. "
                               "`exp_id: my-run`")
    lines: dict[str, int] = {}
    if isinstance(node, yaml.MappingNode):
        for key_node, _ in node.value:  # a repeated key: PyYAML (and so SlimeRunner) kept the last
            lines[str(key_node.value)] = key_node.start_mark.line + 1
    return {str(k): v for k, v in data.items()}, lines


def _checked(problems: _Problems, key: str, value: Any, kind: str) -> Any:
    """``value`` as the spec holds it, or None (with a problem added, unless None means "not set")."""
    optional = kind.endswith("?")
    if value is None or (optional and value == ""):
        if not optional:
            problems.add(key, "has no value", "give it a value, or delete the line to use SlimeRunner's default")
        return None
    base = kind.rstrip("?")
    if base == "str" and isinstance(value, str):
        return value
    if base == "int" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if base == "int" and isinstance(value, str) and re.fullmatch(r"[+-]?[0-9]+", value.strip()):
        return int(value)  # quoted: SlimeRunner passed str(value), the same argv word
    if base == "bool" and isinstance(value, bool):
        return value
    if base == "float" and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) else _bad(problems, key, value, "a finite number")
    if base == "float" and isinstance(value, str):  # YAML 1.1 reads 1e-6 (no dot) as a string
        try:
            number = float(value)
        except ValueError:
            return _bad(problems, key, value, "a number")
        return number if math.isfinite(number) else _bad(problems, key, value, "a finite number")
    if base == "flags" and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    wanted = {"str": "a string", "int": "an integer", "bool": "true or false", "float": "a number",
              "flags": "a list of strings (argv words, e.g. [\"--num-epoch\", \"3\"])"}[base]
    return _bad(problems, key, value, wanted)


def _bad(problems: _Problems, key: str, value: Any, wanted: str) -> None:
    kind = type(value).__name__
    # extra_flags may hold a credential: its values are never echoed
    got = f"a {kind}" if isinstance(value, dict | list) or key not in _ECHOED else f"{kind} {value!r}"
    problems.add(key, f"must be {wanted}, got {got}", "quote it" if wanted.startswith(("a string", "a list"))
                 else f"write {wanted}")


_ECHOED = frozenset(FIELDS) - {"extra_flags"} | {NUM_ROLLOUT_KEY}


def _flag_keys() -> dict[str, tuple[str, str, Any]]:
    """slime flag -> (spec table, key, type), from the spec's own field metadata."""
    out: dict[str, tuple[str, str, Any]] = {}
    for table_name, table in table_types().items():
        for field in attrs.fields(table):
            flag = field.metadata.get("flag")
            # W&B flags are passed only when the key is set: they stay verbatim (ACRL-F002 lets an unset [wandb]
            # key's flag through); the eval datasets are a table, read apart; --num-epoch is left out (noted).
            if flag and table_name != "wandb" and field.name not in ("datasets", "num_epoch"):
                out[flag] = (table_name, field.name, field.type)
            for value, switch in (field.metadata.get("switches") or {}).items():  # --no-load-optim: load_optimizer
                out[switch] = (table_name, field.name, Literal[value])
    return out


def _typed(kind: Any, values: list[str]) -> Any:
    """The spec value of a flag's argv words, or None when they do not fit its key."""
    if typing.get_origin(kind) is Literal and len(typing.get_args(kind)) == 1:  # one of a key's switches
        return typing.get_args(kind)[0] if not values else None
    if kind is bool:
        return True if not values else None
    if typing.get_origin(kind) is list:  # nargs="+" ([rollout] external_engine_addrs)
        return list(values) or None
    if len(values) != 1:
        return None
    options = typing.get_args(kind) or (kind,)
    for wanted in (int, float):
        if wanted in options:
            try:
                return wanted(values[0])
            except ValueError:
                return None
    return values[0]


def _extra_flags(spec: dict[str, dict[str, Any]], extra: list[str], model_flags: set[str], where: str,
                 commit: str) -> list[Note]:
    """extra_flags came last in SlimeRunner's argv, so each won over the flag it repeated (argparse keeps the last):
    a flag a spec key owns sets that key, one of MODEL_ARGS goes to [model.overrides]; credentials are never copied;
    flags the targeted slime (``commit``) lacks are left out (slime ignored them); the rest go verbatim into [extra]
    args."""
    notes: list[Note] = []
    absent = known_absent_flags(commit) or {}
    owned = _flag_keys()
    segments: list[list[str]] = [[]]
    for token in extra:  # each segment: a flag (or --flag=value) and the words up to the next flag
        if token.startswith("--") and len(token) > 2 and not is_number(token):
            segments.append([])
        segments[-1].append(token)
    kept: list[str] = list(segments[0])
    datasets: dict[str, str] = {}
    for segment in segments[1:]:
        flag, _, inline = segment[0].partition("=")
        values = [inline, *segment[1:]] if "=" in segment[0] else segment[1:]
        other = key_of(flag, commit) if flag not in owned else None  # a key's flag by sglang's other name
        key_flag = other[1] if other is not None and other[1] in owned else flag
        if is_credential_flag(flag) or any(looks_secret_value(v) for v in values):
            notes.append(Note("difference", f"extra_flags: {flag} carries a credential; neither it nor its value was "
                              "copied (slime logs its whole argument namespace). Export the secret where train.sh "
                              "runs" + (" as WANDB_API_KEY ([wandb] key_env)" if "wandb" in flag.lower() else ""),
                              where))
        elif flag == "--num-epoch":  # the rollout count wins: slime/utils/arguments.py:1963-1965 at fa3c990
            notes.append(Note("difference", "extra_flags: --num-epoch is left out: SlimeRunner always passed the "
                              "rollout count too, with which slime ignores the epochs (ACRL-B006 refuses both); to "
                              "train epochs instead, set [experiment] num_epoch and remove num_rollout", where))
        elif flag in absent:
            notes.append(Note("difference", f"extra_flags: {flag} is left out: it does not exist at the targeted "
                              f"slime {commit[:7]} ({absent[flag]}), so slime ignored it", where))
        elif flag == "--global-batch-size" and len(values) == 1 and values[0].isdigit() and int(values[0]) > 0:
            rollout = spec.get("rollout", {})
            samples = rollout.get("batch_size", 32) * rollout.get("n_samples_per_prompt", 8)
            if samples % int(values[0]):
                kept += segment
            else:
                spec.setdefault("train", {})["num_steps_per_rollout"] = samples // int(values[0])
        elif flag == "--eval-prompt-data" and values and len(values) % 2 == 0:  # NAME PATH pairs: [eval] datasets
            datasets = dict(zip(values[::2], values[1::2], strict=True))  # argparse keeps the last occurrence
        elif flag in model_flags:
            spec["model"].setdefault("overrides", {})[flag[2:]] = values[0] if len(values) == 1 else values or True
        elif key_flag in owned and (value := _typed(owned[key_flag][2], values)) is not None:
            table, key, _ = owned[key_flag]
            if (table, key) == ("model", "dir"):  # SlimeRunner's --ref-load stays the YAML's model_dir
                spec["model"].setdefault("ref_load", spec["model"]["dir"])
            spec.setdefault(table, {})[key] = value
        else:
            kept += segment
    if datasets:
        spec.setdefault("eval", {})["datasets"] = datasets
    if datasets and spec["eval"].get("interval") is None:
        notes.append(Note("difference", "extra_flags: --eval-prompt-data without --eval-interval: slime accepts the "
                          "datasets and never evaluates them; [eval.datasets] keeps them, so train.sh passes them as "
                          "SlimeRunner did (warning ACRL-E004); set [eval] interval to evaluate them",
                          "--eval-prompt-data"))
    if kept:
        spec.setdefault("extra", {})["args"] = kept
    return notes


def _differences(spec: Mapping[str, Mapping[str, Any]], commit: str) -> list[Note]:
    """What acrl passes differently on purpose, as notes naming the flag and why."""
    absent = known_absent_flags(commit) or {}
    notes = [Note("difference", f"{flag} is not passed: SlimeRunner always passed it, but it does not exist at the "
                  f"targeted slime {commit[:7]} ({absent[flag]}), so slime ignored it", flag)
             for flag in _HARD_CODED_VERSIONED if flag in absent]
    node = spec.get("cluster", {}).get("gpus_per_node", 8)
    per_engine = spec.get("rollout", {}).get("gpus_per_engine", 2)  # the agentcore profile's default
    engines = node // max(1, min(per_engine, node))  # colocated on one node: the rollout has the node's GPUs
    distributed_post = "--use-distributed-post" in spec.get("extra", {}).get("args", [])
    if node_size_matters(node, nodes=1, gpus_per_engine=per_engine, engine_actors=engines,
                         distributed_post=distributed_post):
        notes.append(Note("difference", f"--num-gpus-per-node {node} is passed: the node has {node} GPUs, and without "
                          "it slime maps rollout engines to nodes of 8 (slime PR #2012)", "--num-gpus-per-node"))
    if spec.get("cluster", {}).get("num_nodes") is None:
        notes.append(Note("difference", "--actor-num-nodes 1 is passed: SlimeRunner left it to slime's default, "
                          "which is also 1 (same value, one more flag)", "--actor-num-nodes"))
    if "num_steps_per_rollout" in spec.get("train", {}):
        implicit = "extra_flags set them"
    else:
        samples = spec.get("rollout", {}).get("batch_size", 32) * spec.get("rollout", {}).get("n_samples_per_prompt", 8)
        micro = spec.get("train", {}).get("micro_batch_size") or 1
        dp = max(spec.get("cluster", {}).get("gpus_per_node", 8) // spec.get("parallel", {}).get("tensor", 2), 1)
        implicit = f"here {samples} samples / ({micro} x {dp}) = {max(samples // (micro * dp), 1)} steps"
    notes.append(Note("difference", "--num-steps-per-rollout and --global-batch-size are passed: SlimeRunner passed "
                      "neither, so Megatron's fallback (micro-batch x data-parallel size) decided the optimizer "
                      f"steps per rollout ({implicit}). acrl passes [train] num_steps_per_rollout (default 1) and "
                      "the global batch it implies; set num_steps_per_rollout to keep the old count",
                      "train.num_steps_per_rollout"))
    notes.append(Note("difference", "--custom-config-path names the bundle's custom_config.yaml (same keys and "
                      "values) instead of a temporary file deleted after the run", "--custom-config-path"))
    return notes
