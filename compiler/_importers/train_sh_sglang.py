"""``--sglang-config FILE`` in `acrl import train-sh`: where a here-document of the script writes FILE (slime's
run-glm5.2-744B-A40B.sh: ``cat > "${SGLANG_CONFIG_FILE}" <<CFG``), its YAML is mapped to ``[sglang.models]``
(compiler/_spec/server_groups.py), which the bundle writes to its own sglang_config.yaml and passes as
--sglang-config: the flag itself is not kept. The YAML is read as slime reads it (``SglangConfig.from_yaml``,
slime/backends/sglang_utils/sglang_config.py:158-180 at 624b824). What the spec cannot hold (a value of another
type, an unknown key, two models of one name, a body that is not YAML) leaves the flag unmapped, with a note naming
the line and why. A FILE the script does not write is never read (it is the cluster's; the user did not give it)."""

from __future__ import annotations

import typing
from typing import Any

from .._secrets import looks_secret_value
from .._shell.eval import Text
from .._spec.launch import MAX_NODE_GPUS, MAX_NODES
from .._spec.server_groups import SGLANG_CONFIG, WorkerType
from .base import ImportInputError, load_yaml
from .train_sh_files import HereFile, HereFiles
from .train_sh_launch import HEREDOC_NOTE
from .train_sh_map import Occurrence, SpecBuilder

FLAG = "--sglang-config"
_AT = "sglang_config.py at 624b824"
_MODEL_KEYS = ("name", "model_path", "update_weights", "num_gpus_per_engine", "server_groups", "engine_groups")
_GROUP_KEYS = ("worker_type", "num_gpus", "num_gpus_per_engine", "overrides")  # ServerGroupConfig's fields, :31-34
_WORKER_TYPES = typing.get_args(WorkerType)
_MAX_GPUS = MAX_NODES * MAX_NODE_GPUS


class _Refused(Exception):
    def __init__(self, line: int, why: str) -> None:
        super().__init__(why)
        self.line, self.why = line, why


def sglang_config(builder: SpecBuilder, files: HereFiles, occurrences: list[Occurrence]) -> list[Occurrence]:
    """Map the last --sglang-config of ``occurrences`` (argparse keeps the last) and return the others."""
    given = [o for o in occurrences if o.flag == FLAG]
    if not given:
        return occurrences
    if len(given) > 1:
        builder.note("difference", f"{FLAG} is given {len(given)} times (lines "
                     f"{', '.join(str(o.token.line) for o in given)}): the last one counts, as in slime's parser",
                     given[-1].token)
    _map(builder, files, given[-1])
    return [o for o in occurrences if o.flag != FLAG]


def _map(builder: SpecBuilder, files: HereFiles, occurrence: Occurrence) -> None:
    token = occurrence.token
    writes = files.writing(occurrence.values[0]) if len(occurrence.values) == 1 else []
    if not writes:
        value = " ".join(v.text for v in occurrence.values) or "without a value"
        why = "; ".join(dict.fromkeys(v.problem for v in occurrence.values if v.problem)) or "a file on the cluster"
        builder.note("unresolved", f"{FLAG} {value}: no here-document of the script writes that file ({why}); the "
                                   "importer reads no file the script only names: write its content as [sglang.models] "
                                   "(docs/spec.md)", token)
        return
    file = writes[-1]
    where = f"{builder.path}:{file.line}"
    builder.notes = [n for n in builder.notes if not (n.where == where and n.message == HEREDOC_NOTE)]
    try:
        appended = next((w for w in writes if w.append), None)
        if appended is not None:
            raise _Refused(appended.line, "the script appends to the file (>> or tee -a), which may hold more")
        if file.secret:
            raise _Refused(file.body_line, f"it holds the value of the secret {file.secret}, which a spec never holds")
        if file.problem:
            raise _Refused(file.body_line, f"its text cannot be resolved: {file.problem}")
        models, notes = _Reader(file).models()
    except _Refused as refused:
        builder.note("difference", f"{FLAG} (line {token.line}) is not imported: the here-document at line "
                                   f"{file.line} writes it: {refused.why}; write [sglang.models] by hand "
                                   "(docs/spec.md)", Text("", refused.line))
        return
    builder.spec["sglang"]["models"] = models
    for line, message in notes:
        builder.note("difference", message, Text("", line))
    builder.note("difference", f"{FLAG}: the YAML the here-document at line {file.line} writes is imported as "
                               f"[sglang.models] ({', '.join(models)}); the bundle writes it to {SGLANG_CONFIG} and "
                               f"passes {FLAG} {SGLANG_CONFIG} itself", token)


class _Reader:
    """The YAML of one here-document, checked value by value against what the spec holds; ``line`` of a node is its
    line in the script."""

    def __init__(self, file: HereFile) -> None:
        self.file = file
        self.notes: list[tuple[int, str]] = []

    def line(self, node: Any) -> int:
        return self.file.body_line + node.start_mark.line if node is not None else self.file.line

    @staticmethod
    def child(node: Any, key: object) -> Any:
        """The value node of ``key`` in a mapping node, of an index in a sequence node; the node itself where there
        is none (a key a merge ``<<`` brings)."""
        import yaml  # lazy: PyYAML only for a here-document that --sglang-config names

        if isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
            return node.value[key]
        if isinstance(node, yaml.MappingNode):
            return next((v for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(key)), node)
        return node

    def key_line(self, node: Any, key: object) -> int:
        import yaml  # lazy: PyYAML only for a here-document that --sglang-config names

        if isinstance(node, yaml.MappingNode):
            return next((self.line(k) for k, _ in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(key)),
                        self.line(node))
        return self.line(node)

    def models(self) -> tuple[dict[str, Any], list[tuple[int, str]]]:
        import yaml  # lazy: PyYAML only for a here-document that --sglang-config names

        try:
            node, data = load_yaml(self.file.text, f"the here-document at line {self.file.line}")
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            line = self.file.body_line + mark.line if mark is not None else self.file.line
            raise _Refused(line, f"it is not YAML ({getattr(exc, 'problem', None) or type(exc).__name__})") from None
        except ImportInputError as exc:
            raise _Refused(self.file.line, exc.reason) from None
        if not isinstance(data, dict) or "sglang" not in data:
            raise _Refused(self.file.line, f"no top-level `sglang:` key (slime asserts one, {_AT}:162)")
        self.known(data, node, ("sglang",), "slime reads only `sglang:`")
        listed, at = data["sglang"], self.child(node, "sglang")
        if not isinstance(listed, list) or not listed:
            raise _Refused(self.line(at), "`sglang:` is not a list of models (slime reads a non-empty list, "
                                          f"{_AT}:167)")
        out: dict[str, Any] = {}
        for index, model in enumerate(listed):
            name, table = self.model(model, self.child(at, index))
            if name in out:
                raise _Refused(self.line(self.child(self.child(at, index), "name")), (
                    f"a second model named {name!r}: slime starts both, but keeps only the last in its servers by name "
                    "(slime/ray/rollout.py:1115); the spec holds one table per name"))
            out[name] = table
        return out, self.notes

    def known(self, data: dict[Any, Any], node: Any, keys: tuple[str, ...], why: str) -> None:
        unknown = next((k for k in data if k not in keys), None)
        if unknown is not None:
            raise _Refused(self.key_line(node, unknown), f"the key {unknown!r}: {why}; the spec has no key for it")

    def model(self, model: Any, node: Any) -> tuple[str, dict[str, Any]]:
        if not isinstance(model, dict):
            raise _Refused(self.line(node), "a model is not a mapping")
        self.known(model, node, _MODEL_KEYS, f"not a field of slime's ModelConfig ({_AT}:62-66)")
        name = model.get("name")
        if not isinstance(name, str) or not name:
            raise _Refused(self.line(self.child(node, "name")), f"the model's name {name!r} is not a string (slime "
                                                                f"reads m['name'], {_AT}:173)")
        table: dict[str, Any] = {}
        self.value(table, "model_path", model, node, str)
        self.value(table, "update_weights", model, node, bool)
        self.value(table, "num_gpus_per_engine", model, node, int)
        key = "server_groups" if model.get("server_groups") or not model.get("engine_groups") else "engine_groups"
        if key == "engine_groups":
            self.notes.append((self.key_line(node, key), f"{FLAG}: model {name!r}: the legacy engine_groups is "
                               f"imported as server_groups (slime reads it so, {_AT}:169)"))
        groups, at = model.get(key) or [], self.child(node, key)
        if not isinstance(groups, list):
            raise _Refused(self.line(at), f"{key} is not a list")
        table["server_groups"] = [self.group(g, self.child(at, i)) for i, g in enumerate(groups)]
        return name, table

    def group(self, group: Any, node: Any) -> dict[str, Any]:
        if not isinstance(group, dict):
            raise _Refused(self.line(node), "a server group is not a mapping")
        self.known(group, node, _GROUP_KEYS, f"ServerGroupConfig has no such field (slime fails, {_AT}:170)")
        if group.get("worker_type") not in _WORKER_TYPES:
            raise _Refused(self.line(self.child(node, "worker_type")), f"worker_type {group.get('worker_type')!r} is "
                           f"not one of {', '.join(_WORKER_TYPES)} ({_AT}:37-40)")
        table = {"worker_type": group["worker_type"]}
        if "num_gpus" not in group:
            raise _Refused(self.line(node), "a server group without num_gpus (slime fails)")
        self.value(table, "num_gpus", group, node, int)
        self.value(table, "num_gpus_per_engine", group, node, int)
        overrides, at = group.get("overrides", {}), self.child(node, "overrides")
        if not isinstance(overrides, dict):
            raise _Refused(self.line(at), "overrides is not a mapping of SGLang ServerArgs fields")
        for key, value in overrides.items():
            scalar = isinstance(value, bool | int | float | str)
            listed = isinstance(value, list) and all(isinstance(v, int | float | str) and not isinstance(v, bool)
                                                     for v in value)
            if not isinstance(key, str) or not (scalar or listed):
                raise _Refused(self.line(self.child(at, key)), f"the override {key!r} is {type(value).__name__}: the "
                                                               "spec holds a string, number, boolean or a list of them")
            if looks_secret_value(str(value), key):
                raise _Refused(self.line(self.child(at, key)), f"the override {key!r} looks like a secret, which a "
                                                               "spec never holds")
        if overrides:
            table["overrides"] = overrides
        return table

    def value(self, table: dict[str, Any], key: str, data: dict[str, Any], node: Any, kind: type) -> None:
        """``data[key]`` into ``table`` when it is of ``kind`` (an int: from 1 to the spec's bound); None (slime's
        default) is left out."""
        value: Any = data.get(key)
        if value is None:
            return
        good = isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= _MAX_GPUS if kind is int \
            else isinstance(value, kind)
        if not good:
            what = f"a number of GPUs from 1 to {_MAX_GPUS}" if kind is int else kind.__name__
            raise _Refused(self.line(self.child(node, key)), f"{key} {value!r} is not {what}")
        table[key] = value
