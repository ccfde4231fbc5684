"""Stage 5, render: the bundle's files as bytes.

Shell files come from Jinja templates (StrictUndefined). No value reaches them unescaped: the environment's
``finalize`` hook refuses every ``{{ }}`` whose value did not come out of one of the escaping filters below
(``sh``/``shwords`` for shell words, ``comment`` for comment lines, ``envname``/``name``/``num`` re-check a value
that was validated before), so a template line that forgets a filter fails to render instead of emitting raw
spec text. YAML, JSON and TOML files are data serialized by their libraries, never assembled by hand.
"""

from __future__ import annotations

import functools
import json
import re
import shlex
import unicodedata
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._secrets import ENV_NAME, RUNTIME_FORWARD_CHECK, runtime_policy
from .._spec.flags import parse_flags
from .._spec.tables import Spec
from .._version import __version__
from . import placement_spec
from .argv import ArgGroup, runtime_args
from .model_args.resolve import ModelArgs
from .resume import resume_block

if TYPE_CHECKING:
    import jinja2

TEMPLATE_VARIABLES = {
    "train.sh.jinja": frozenset({
        "acrl_version", "exp_id", "slime_dir", "megatron_dir", "entrypoint", "groups", "extra_args",
        "cuda_home", "fix_torch_memory_saver", "wandb_key_env", "wandb_args", "wandb_enabled", "ray_address",
        "stop_stale_processes", "ray_stop_timeout", "start_ray_head", "head_gpus", "dashboard_port",
        "env_vars_json", "forward", "secret_policy_json", "forward_check", "dashboard_host", "head_port", "join",
        "num_nodes", "group_gpus", "node_ip_address", "ray_start_args", "node_env", "pythonpath_before",
        "pythonpath_after", "custom_config", "sglang_config", "resume",
    }),
    "join.sh.jinja": frozenset({
        "acrl_version", "exp_id", "num_nodes", "gpus_per_node", "head_port", "stop_stale_processes",
        "ray_stop_timeout", "node_env",
    }),
    "checkpoint.sh.jinja": frozenset({"acrl_version", "exp_id", "resume"}),
    "model_args.sh.jinja": frozenset({
        "acrl_version", "model_type", "provenance_source", "provenance_from", "provenance_sha256",
        "provenance_env", "provenance_overrides", "lines",
    }),
}

# Keys the toolkit's rollout integration reads from --custom-config-path (SlimeArtConfig.from_args).
def custom_config(spec: Spec) -> dict[str, Any]:
    """The custom-config YAML's data (integration "agentcore": the spec has [agentcore])."""
    a = spec.agentcore
    if a is None:
        raise ValueError("no custom config without [agentcore] (integration \"slime\" or \"custom\")")
    return {
        "agent_runtime_arn": a.runtime_arn,
        "s3_bucket": a.s3_bucket,
        "exp_id": spec.experiment.id,
        "gateway_port": a.gateway_port,
        "acr_timeout": a.timeout,
        "model_id": a.model_id,
        "acr_tps_limit": a.tps_limit,
        "max_concurrent": a.max_concurrent,
        "max_pool_connections": a.max_pool_connections,
        "reward_postprocessing": a.reward_postprocessing,
        "cumulative_token_mode": a.cumulative_token_mode,
        "renderer_family": a.renderer_family,
        "gateway_log_level": a.gateway_log_level,
    }


class Escaped(str):
    """Text an escaping filter produced: the only kind of value the templates may emit."""

    __slots__ = ()


class UnescapedValueError(Exception):
    """A template emitted a value that did not go through an escaping filter (a bug in a template)."""


def _finalize(value: object) -> str:
    if type(value) is not Escaped:
        raise UnescapedValueError(f"template emits {type(value).__name__} without an escaping filter "
                                  "(sh, shwords, comment, envname, name, num or sqbody)")
    return value


def _sh(value: object) -> Escaped:
    """One shell word: single-quoted unless it is plain. A NUL byte cannot be in an argument: refused."""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise UnescapedValueError(f"sh: {type(value).__name__} is not a string or an integer")
    text = str(value)
    if "\0" in text:
        raise UnescapedValueError("sh: a value holds a NUL byte, which no shell word or argument can hold")
    return Escaped(shlex.quote(text))


def _shwords(values: object) -> Escaped:
    """A list of shell words, each quoted by ``sh``, joined by spaces."""
    if isinstance(values, str) or not isinstance(values, list | tuple):
        raise UnescapedValueError(f"shwords: {type(values).__name__} is not a list of words")
    return Escaped(" ".join(_sh(v) for v in values))


# Characters that end or disturb a line in a shell file, an editor or a terminal: the C0 and C1 controls, DEL,
# the Unicode line and paragraph separators, and format characters (bidirectional overrides among them).
_UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})


def comment_text(value: object) -> str:
    """``value`` as text fit for one comment line: a backslash and every control, format or separator character
    is written as its Python escape (``\\n``, ``\\x00``, ``\\u2028``), so no value can end the comment."""
    if not isinstance(value, str | int) or isinstance(value, bool):
        raise UnescapedValueError(f"comment: {type(value).__name__} is not a string or an integer")
    return "".join("\\\\" if c == "\\" else ascii(c)[1:-1] if unicodedata.category(c) in _UNSAFE_CATEGORIES else c
                   for c in str(value))


def _comment(value: object) -> Escaped:
    return Escaped(comment_text(value))


_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _envname(value: object, width: int = 0) -> Escaped:
    """An environment variable name, checked again (the rules checked it), padded with spaces to ``width``."""
    if not isinstance(value, str) or not ENV_NAME.fullmatch(value):
        raise UnescapedValueError(f"envname: a {type(value).__name__} is not an environment variable name")
    return Escaped(value.ljust(width))


def _name(value: object) -> Escaped:
    """A plain name (letters, digits, '.', '_', '-'; no '..'), checked again: safe unquoted anywhere in a script."""
    if not isinstance(value, str) or not _NAME.fullmatch(value) or ".." in value:
        raise UnescapedValueError(f"name: a {type(value).__name__} is not a plain name")
    return Escaped(value)


def _sqbody(value: object) -> Escaped:
    """acrl's own text (never a spec value) for the inside of a single-quoted shell string, e.g. Python
    code for ``python3 -c '...'``: refused if it holds a single quote, which would end the string."""
    if not isinstance(value, str) or "'" in value or "\0" in value:
        raise UnescapedValueError("sqbody: not text that a single-quoted shell string can hold")
    return Escaped(value)


def _num(value: object) -> Escaped:
    """An integer (never a bool or a string that looks like one)."""
    if type(value) is not int:
        raise UnescapedValueError(f"num: {type(value).__name__} is not an integer")
    return Escaped(str(value))


@functools.cache
def environment() -> jinja2.Environment:
    """The Jinja environment of the bundle templates, with compiled templates cached between runs
    (acrl.compiler._fast.template_cache). Jinja is imported here, not with this module: a spec with
    errors is never rendered, and importing Jinja would be ~25 ms of reporting them."""
    # lazy: a spec with errors is never rendered, and Jinja and the template cache cost ~25 ms to import
    import jinja2

    from .._fast.template_cache import TemplateCache  # lazy: used only with Jinja, above

    env = jinja2.Environment(
        loader=jinja2.PackageLoader("acrl.templates", "."),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
        finalize=_finalize,
    )
    env.filters.update(sh=_sh, shwords=_shwords, comment=_comment, envname=_envname, name=_name, num=_num,
                       sqbody=_sqbody)
    env.bytecode_cache = TemplateCache.open(env)
    return env


def _render(name: str, variables: Mapping[str, Any]) -> bytes:
    assert set(variables) == TEMPLATE_VARIABLES[name], set(variables) ^ TEMPLATE_VARIABLES[name]
    return environment().get_template(name).render(**variables).encode("utf-8")


def joins(spec: Spec) -> bool:
    """Whether other nodes join the local head train.sh starts (num_nodes > 1, no [cluster] address): then the
    bundle has join.sh, and train.sh waits for the nodes before it submits the job."""
    placement = placement_spec.read(spec).placement
    return placement.local_head and placement.nodes > 1


def train_sh(spec: Spec, groups: tuple[ArgGroup, ...]) -> bytes:
    """The launch script."""
    c = spec.cluster
    placement = placement_spec.read(spec).placement
    return _render("train.sh.jinja", {
        "acrl_version": __version__,
        "exp_id": spec.experiment.id,
        "slime_dir": spec.slime.dir,
        "megatron_dir": spec.slime.megatron_dir,
        "entrypoint": "train_async.py" if spec.train.mode == "async" else "train.py",
        "groups": groups,
        "extra_args": spec.extra.args,
        "cuda_home": spec.cuda.home,
        "fix_torch_memory_saver": spec.cuda.fix_torch_memory_saver,
        "wandb_key_env": spec.wandb.key_env,
        "wandb_args": runtime_args(spec).wandb_tokens,
        "wandb_enabled": spec.wandb.enabled,
        "custom_config": runtime_args(spec).custom_config,
        "sglang_config": runtime_args(spec).sglang_config,
        "ray_address": c.address or "",
        "stop_stale_processes": c.stop_stale_processes,
        "ray_stop_timeout": c.ray_stop_timeout,
        "start_ray_head": c.start_ray_head,
        # what slime's placement group takes on the head node (compiler/_pipeline/placement.py)
        "head_gpus": placement.node_gpus[0],
        "dashboard_port": c.dashboard_port,
        "dashboard_host": c.dashboard_host,
        "head_port": c.head_port,
        "join": joins(spec),
        "num_nodes": placement.nodes,
        "group_gpus": placement.group.num_gpus,
        "env_vars_json": json.dumps(spec.env.vars, sort_keys=True),
        "forward": spec.env.forward,
        "secret_policy_json": json.dumps(runtime_policy(spec.wandb.key_env), sort_keys=True),
        "forward_check": RUNTIME_FORWARD_CHECK.rstrip("\n"),
        "node_ip_address": c.node_ip_address or "",
        "ray_start_args": c.ray_start_args,
        "node_env": list(c.env.items()),
        "pythonpath_before": spec.env.pythonpath_before_megatron,
        "pythonpath_after": spec.env.pythonpath,
        "resume": resume_block(spec),  # None: no checkpoint directory, no checkpoint block
    })


CHECKPOINT_SH = "checkpoint.sh"


def checkpoint_sh(spec: Spec) -> bytes | None:
    """checkpoint.sh: the launch-time decision whether slime loads a checkpoint ([checkpoint] resume), sourced by
    train.sh and by the RayJob's entrypoint (compiler/_pipeline/kuberay.py), so that both launchers share one
    implementation; None when the spec names no checkpoint directory (resume.py: then slime never loads one)."""
    block = resume_block(spec)
    if block is None:
        return None
    return _render("checkpoint.sh.jinja", {"acrl_version": __version__, "exp_id": spec.experiment.id,
                                           "resume": block})


def join_sh(spec: Spec) -> bytes:
    """join.sh: run on each other node of a multi-node local head (see :func:`joins`)."""
    c = spec.cluster
    return _render("join.sh.jinja", {
        "acrl_version": __version__,
        "exp_id": spec.experiment.id,
        "num_nodes": placement_spec.read(spec).placement.nodes,
        "gpus_per_node": c.gpus_per_node,
        "head_port": c.head_port,
        "stop_stale_processes": c.stop_stale_processes,
        "ray_stop_timeout": c.ray_stop_timeout,
        "node_env": list(c.env.items()),
    })


def model_args_sh(spec: Spec, model_args: ModelArgs) -> bytes:
    """model_args.sh: the literal MODEL_ARGS array, one flag and its values per line."""
    lines = [[flag, *values] for flag, values in parse_flags(model_args.args).items()]
    if sum(len(line) for line in lines) != len(model_args.args):  # stray values: keep them verbatim
        lines = [[token] for token in model_args.args]
    return _render("model_args.sh.jinja", {
        "acrl_version": __version__,
        "model_type": spec.model.type,
        "provenance_source": model_args.source,
        "provenance_from": model_args.description,
        "provenance_sha256": model_args.sha256,
        "provenance_env": model_args.env,
        "provenance_overrides": model_args.overrides,
        "lines": lines,
    })


# Line breaks YAML 1.1 knows besides \n: PyYAML writes them raw in a plain or block scalar and reads them back
# folded (U+0085 became a space), so a string holding one (or \r) is written double-quoted, where it is escaped.
_OTHER_LINE_BREAKS = frozenset("\r\x85\u2028\u2029")


def yaml_dumper(block_multiline: bool = False) -> Any:
    """A SafeDumper whose strings read back as they were written (``block_multiline``: text with newlines as a
    readable ``|`` block, as rayjob.yaml writes its entrypoint)."""
    import yaml  # lazy: PyYAML is needed only to render a spec that compiled without errors

    class Dumper(yaml.SafeDumper):
        pass

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        style = '"' if _OTHER_LINE_BREAKS.intersection(value) else \
            "|" if block_multiline and "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    Dumper.add_representer(str, text)
    return Dumper


def custom_config_yaml(spec: Spec) -> bytes | None:
    """custom_config.yaml, or None without [agentcore] (integration "slime" or "custom": no file, no flag)."""
    if spec.agentcore is None:
        return None
    import yaml  # lazy: PyYAML is needed only to render a spec that compiled without errors

    header = f"# --custom-config-path of {comment_text(spec.experiment.id)}: read by the rollout integration.\n"
    body = yaml.dump(custom_config(spec), Dumper=yaml_dumper(), sort_keys=False, allow_unicode=True,
                     default_flow_style=False)
    return (header + body).encode("utf-8")


def sglang_config_yaml(spec: Spec) -> bytes | None:
    """sglang_config.yaml (slime's --sglang-config) from [sglang.models], or None without it. The layout is what
    slime's SglangConfig.from_yaml reads (slime/backends/sglang_utils/sglang_config.py:148-171 at 624b824): a list
    ``sglang`` of models, each its ``name`` and the keys the spec gives (unset ones left out: slime's defaults)."""
    if not spec.sglang.models:
        return None
    import yaml  # lazy: PyYAML is needed only to render a spec that compiled without errors

    models = []
    for name, model in spec.sglang.models.items():
        entry: dict[str, Any] = {"name": name}
        entry.update({key: value for key in ("model_path", "update_weights", "num_gpus_per_engine")
                      if (value := getattr(model, key)) is not None})
        entry["server_groups"] = [
            {"worker_type": g.worker_type, "num_gpus": g.num_gpus,
             **({"num_gpus_per_engine": g.num_gpus_per_engine} if g.num_gpus_per_engine is not None else {}),
             **({"overrides": dict(g.overrides)} if g.overrides else {})}
            for g in model.server_groups]
        models.append(entry)
    header = f"# --sglang-config of {comment_text(spec.experiment.id)}: slime's SGLang server groups.\n"
    body = yaml.dump({"sglang": models}, Dumper=yaml_dumper(), sort_keys=False, allow_unicode=True,
                     default_flow_style=False)
    return (header + body).encode("utf-8")


def resolved_spec_toml(data: Mapping[str, Any]) -> bytes:
    import tomli_w  # lazy: needed only to render a spec that compiled without errors

    return tomli_w.dumps(dict(data)).encode("utf-8")


def manifest_json(manifest: Mapping[str, Any]) -> bytes:
    return (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")
