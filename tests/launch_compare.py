"""The comparison half of the import-fidelity harness (tests/launch_fidelity.py, issue 14 "Result"): two recorded
launches, the original script's and its imported bundle's, compared as slime and Ray would see them.

A launch is what the recording stand-ins saw: the `ray start --head` argv and the `ray job submit` argv (with its
--runtime-env-json). The comparison is pure (no files, no processes), so tests/test_launch_fidelity.py checks it
directly. Every difference is a Mismatch with a category from CATEGORIES; the Result criterion holds when there is
none in RESULT_CATEGORIES.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from acrl.compiler._secrets import is_secret_name
from acrl.compiler._spec import profiles
from acrl.compiler._spec.flag_index import flag_index

# The categories, in report order, with what each means.
CATEGORIES = {
    "run": "a side did not launch (no `ray job submit` recorded, or the script failed before it)",
    "entrypoint": "the program after `--`: interpreter, train.py vs train_async.py, its directory",
    "flag-value": "a flag both sides pass, with other values (after argparse's last-wins)",
    "flag-original-only": "a flag only the original passes, not restating slime's default",
    "flag-bundle-only": "a flag only the bundle passes, not restating slime's default",
    "custom-config": "a key of the original's --custom-config-path file that the bundle's lacks or sets otherwise "
                     "(the paths differ by design: the bundle writes its own file)",
    "sglang-config": "the --sglang-config file's YAML differs, as slime reads it (the paths differ by design: the "
                     "original writes a file of its own, often a mktemp one; the bundle passes its sglang_config.yaml)",
    "runtime-env": "a runtime-env variable the original sets that the bundle lacks or sets otherwise",
    "pythonpath": "a PYTHONPATH entry of the original's runtime env that the bundle's lacks",
    "runtime-env-key": "a --runtime-env-json key other than env_vars (working_dir, pip, ...) that differs",
    "ray-start": "`ray start --head`: --num-gpus or an address option (node ip, port, dashboard host/port)",
    "start-env": "a variable the original exported before `ray start --head` that the bundle's head lacks or sets "
                 "otherwise (Ray's processes, the job's included, inherit it)",
    "allowed": "a difference the criterion allows, listed with why and not counted: a one-sided flag restating "
               "slime's or Megatron-LM's default, --megatron-to-hf-mode, the global batch said the other way, the "
               "bundle as the job's working_dir, a runtime-env value the original passes unexpanded (`${NAME}`), the "
               "127.0.0.1 acrl's train.sh puts first in no_proxy, an sglang flag the bundle passes by another name of "
               "its argument (a deprecated alias's replacement, --dp-size's --data-parallel-size)",
}
ALLOWED = "allowed"
RESULT_CATEGORIES = frozenset(CATEGORIES) - {ALLOWED}
# The runtime-env keys other than env_vars that differ by design: acrl's job runs in its bundle (train.sh submits
# with --working-dir set to the bundle folder); the criterion compares the runtime env's variables.
ALLOWED_RUNTIME_ENV_KEYS = {"working_dir": "the bundle is the job's working_dir (acrl's job runs in its bundle)"}
# One-sided flags the criterion allows whatever their value: acrl's --megatron-to-hf-mode (slime 624b824 has no
# such flag any more; the toolkit's pinned slime does), and --num-steps-per-rollout where it agrees with the batch.
ALWAYS_ALLOWED = frozenset({"--megatron-to-hf-mode"})
RAY_START_OPTIONS = ("--num-gpus", "--node-ip-address", "--port", "--dashboard-host", "--dashboard-port")
# Ray's own defaults of those options (ray/python/ray/scripts/scripts.py, `ray start`): an option given on one
# side only restates them when it has this value.
RAY_START_DEFAULTS = {"--port": "6379", "--dashboard-port": "8265", "--dashboard-host": "127.0.0.1"}
# A variable's reference as text, not expanded (`${NAME}` or `$NAME`).
UNEXPANDED = re.compile(r"\$\{[A-Za-z_]\w*\}|\$[A-Za-z_]\w*")
_NEGATIVE_NUMBER = re.compile(r"^-\.?\d")
# LD_LIBRARY_PATH's empty entries (a leading, trailing or doubled ':', as `...:${LD_LIBRARY_PATH}` makes of an unset
# variable) tell the dynamic loader to search the current directory (ld.so(8): as in PATH, an empty entry is the
# working directory); acrl's [cuda] home value leaves them out on purpose: the same folders, without searching
# whatever directory a process runs in.
EMPTY_ENTRIES = ("the same LD_LIBRARY_PATH folders without empty entries, which make the dynamic loader search "
                 "the working directory (acrl's [cuda] home leaves them out on purpose)")


@attrs.frozen
class Mismatch:
    category: str
    subject: str  # the flag, variable or option
    original: Any
    bundle: Any
    why: str = ""  # for "allowed": why; for a one-sided flag: why its default did not allow it

    def as_json(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Launch:
    """What the stand-ins recorded of one run; None where the command was never run."""

    start: tuple[str, ...] | None = None  # `ray start --head ...` argv, without "ray"
    submit: tuple[str, ...] | None = None  # `ray job submit ...` argv, without "ray"
    # the variables `ray start --head` saw that the script exported (not the environment it was given)
    exported: tuple[tuple[str, str], ...] = ()
    start_env: tuple[tuple[str, str], ...] = ()  # all that `ray start --head` saw
    custom_config: Mapping[str, Any] | None = None  # the --custom-config-path file, read (None: none or unreadable)
    sglang_config: tuple[Any] | None = None  # (the --sglang-config file's YAML data,); None: no flag, or unreadable

    @property
    def program(self) -> list[str]:
        """What `ray job submit` runs: everything after its `--`."""
        if self.submit is None or "--" not in self.submit:
            return []
        return list(self.submit[self.submit.index("--") + 1:])

    @property
    def runtime_env(self) -> dict[str, Any]:
        value = options(list(self.submit[:self.submit.index("--")] if self.submit and "--" in self.submit
                             else self.submit or ())).get("--runtime-env-json")
        if not value:
            return {}
        parsed = json.loads(value[-1])
        return parsed if isinstance(parsed, dict) else {}


@attrs.frozen
class Default:
    """A slime flag's default as argparse keeps it: ``value`` when absent; ``flag`` is True for a flag taking no
    value (store_true/store_false), whose presence stores ``not value``."""

    value: Any
    bare: bool = False
    kind: str | None = None  # "int", "float", "str" where add_argument names its type
    known: bool = True  # False: the default is an expression (os.environ..., 2 ** 32) that was not evaluated
    source: str = ""  # "slime" or "Megatron-LM": whose parser defines the default
    where: str = ""  # the fact's file:line or dataclass field


def options(tokens: Sequence[str]) -> dict[str, list[str]]:
    """Tokens as argparse reads them: ``--flag v1 v2`` and ``--flag=v``; a repeated flag keeps its last values.
    A token starting with '-' followed by a digit is a value (a negative number), as argparse reads it when no
    option looks like a number."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for token in tokens:
        if token.startswith("-") and not _NEGATIVE_NUMBER.match(token) and token not in ("-", "--"):
            name, eq, value = token.partition("=")
            current = [value] if eq else []
            out.pop(name, None)  # last wins, and the dict keeps the last position
            out[name] = current
        elif current is not None:
            current.append(token)
    return out


def entrypoint(program: Sequence[str]) -> tuple[str, str]:
    """(interpreter, script) of the program after `--`: ``python3 /root/slime/train.py ...``."""
    for i, word in enumerate(program):
        if word.endswith(".py"):
            return (Path(program[i - 1]).name if i else "", word)
    return ("", "")


def flags_of(program: Sequence[str]) -> dict[str, list[str]]:
    """The flags after the entry script, MODEL_ARGS included: what slime's parsers see."""
    _, script = entrypoint(program)
    rest = list(program)[list(program).index(script) + 1:] if script else list(program)
    return options(rest)


def defaults_from(*tables: Mapping[str, Mapping[str, Any]], sources: Sequence[str] = ()) -> dict[str, Default]:
    """{flag: Default} of fact tables as acrl's readers write them (slime's: acrl.compiler._slime.default_facts,
    tests/data/slime/<commit>/slime_defaults.json; Megatron-LM's: acrl.compiler._slime.megatron_defaults,
    tests/data/megatron/<commit>/megatron_defaults.json), a later table's flag winning (give Megatron's first:
    slime's reset_arg sets the default of a Megatron flag, slime 624b824 slime/utils/arguments.py:19-32). A fact
    with an "expression" (a default that is not a literal) becomes a Default that is not ``known``."""
    out: dict[str, Default] = {}
    for i, table in enumerate(tables):
        source = sources[i] if i < len(sources) else ""
        for flag, fact in table.items():
            action = fact.get("action")
            kind = fact.get("type") if fact.get("type") in ("int", "float", "str") else None
            default = Default(fact.get("default"), action in ("store_true", "store_false"), kind,
                              known="expression" not in fact, source=source,
                              where=str(fact.get("via") or fact.get("line") or ""))
            for name in (flag, *(a for a in fact.get("aliases", ()) if str(a).startswith("--"))):
                out[name] = default
    return out


def layer_pattern(word: str) -> list[int] | None:
    """A Megatron layer pattern such as --moe-layer-freq's "[1]*48" or "([0]*3+[1]*58)" as the list Megatron makes of
    it (Megatron-LM 1dcf0daf megatron/training/arguments.py moe_freq_type: a string with '[' is eval'ed); only
    lists of integers, '*' and '+' are read, anything else is None."""
    def value(node: ast.expr) -> list[int] | int:
        if isinstance(node, ast.List) and all(isinstance(e, ast.Constant) and type(e.value) is int for e in node.elts):
            return [int(e.value) for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, int)]
        if isinstance(node, ast.Constant) and type(node.value) is int and node.value <= 100_000:
            return int(node.value)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult | ast.Add):
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Add) and isinstance(left, list) and isinstance(right, list):
                return left + right
            if isinstance(node.op, ast.Mult) and isinstance(left, list) and isinstance(right, int) and right <= 10_000:
                return left * right
        raise ValueError(word)
    if "[" not in word:
        return None
    try:
        out = value(ast.parse(word.strip(), mode="eval").body)
    except (SyntaxError, ValueError):
        return None
    return out if isinstance(out, list) else None


def _normal(words: Sequence[str], kind: str | None = None) -> list[Any]:
    """Words as argparse's type converts them: a number-looking word compares as a number ("1" == "1.0"), unless
    the flag's type is str; a layer pattern ("[1]*4") as the list it makes."""
    out: list[Any] = []
    for word in words:
        if (pattern := layer_pattern(word)) is not None:
            out.append(pattern)
            continue
        if kind == "str":
            out.append(word)
            continue
        try:
            out.append(float(word))
        except ValueError:
            out.append(word)
    return out


def restates_default(flag: str, words: Sequence[str], defaults: Mapping[str, Default]) -> bool:
    """Whether passing ``flag words`` leaves slime's args as leaving it out would."""
    default = defaults.get(flag)
    if default is None or not default.known or default.bare or default.value is None:
        return False  # bare: present stores the opposite of the default
    value = default.value if isinstance(default.value, list) else [default.value]
    if isinstance(default.value, bool) or not all(isinstance(v, int | float | str) for v in value):
        return False
    return _normal(list(words), default.kind) == _normal([str(v) for v in value], default.kind)


def not_restated(flag: str, words: Sequence[str], defaults: Mapping[str, Default]) -> str:
    """Why ``flag words`` given on one side only is not allowed as a restated default."""
    default = defaults.get(flag)
    if default is None:
        return "no default known: neither slime's nor Megatron-LM's parser (as read) defines it"
    if not default.known:
        return f"default not known: {default.source} {default.where} computes it"
    if default.bare:
        return f"a switch: present, it stores {not default.value!r} ({default.source} default {default.value!r})"
    return f"{default.source} default {default.value!r} ({default.where})"


def global_batch(flags: Mapping[str, list[str]]) -> int | None:
    """The global batch size slime trains with: --global-batch-size, or with --num-steps-per-rollout
    rollout_batch_size * n_samples_per_prompt // num_steps_per_rollout (slime 624b824
    slime/utils/arguments.py:1971-1979, which asserts the two agree when both are given)."""
    def number(flag: str, default: int | None = None) -> int | None:
        words = flags.get(flag)
        try:
            return int(float(words[-1])) if words else default
        except ValueError:
            return None
    steps, batch, samples = (number("--num-steps-per-rollout"), number("--rollout-batch-size"),
                             number("--n-samples-per-prompt", 1))
    if steps and batch is not None and samples is not None:
        return batch * samples // steps
    return number("--global-batch-size")


def counted(differences: Sequence[Mismatch]) -> list[Mismatch]:
    """The differences the Result criterion does not allow (all but the ALLOWED ones)."""
    return [m for m in differences if m.category != ALLOWED]


def compare(original: Launch, bundle: Launch, defaults: Mapping[str, Default],
            alias: Callable[[str], Sequence[str]] | None = None) -> list[Mismatch]:
    """Every difference between the two launches, in category order: the mismatches, then the differences the
    Result criterion allows (category ALLOWED, each with why). ``alias``: a flag's other names of the same dest at
    the bundle's targeted slime commit (:func:`same_dest`)."""
    out: list[Mismatch] = []
    for side, launch in (("original", original), ("bundle", bundle)):
        if not launch.program:
            out.append(Mismatch("run", "ray job submit", side == "bundle" or None, side == "original" or None))
    if out:
        return out
    theirs_entry, ours_entry = entrypoint(original.program), entrypoint(bundle.program)
    if theirs_entry[0] != ours_entry[0]:
        out.append(Mismatch("entrypoint", "interpreter", theirs_entry[0], ours_entry[0]))
    same_script = Path(theirs_entry[1]).name == Path(ours_entry[1]).name
    if not same_script or ("/" in theirs_entry[1] and theirs_entry[1] != ours_entry[1]):
        out.append(Mismatch("entrypoint", "script", theirs_entry[1], ours_entry[1]))
    theirs, ours = flags_of(original.program), flags_of(bundle.program)
    if alias is not None:
        theirs, renamed = same_dest(theirs, ours, alias)
        out += renamed
    theirs, unloaded = _load_without_checkpoint(theirs, ours)
    out += unloaded
    out += _compare_flags(theirs, ours, defaults, (original.custom_config, bundle.custom_config),
                          (original.sglang_config, bundle.sglang_config))
    out += _compare_env(original.runtime_env, bundle.runtime_env, dict(bundle.start_env))
    out += _compare_start(original.start, bundle.start)
    ours_env = dict(bundle.start_env)
    for name, value in original.exported:
        if ours_env.get(name) == value:
            continue
        if name == "LD_LIBRARY_PATH" and ours_env.get(name) is not None and \
                _library_path(ours_env.get(name)) == _library_path(value):
            out.append(Mismatch(ALLOWED, f"start-env {name}", value, ours_env.get(name), EMPTY_ENTRIES))
        else:
            out.append(Mismatch("start-env", name, value, ours_env.get(name)))
    order = list(CATEGORIES)
    return sorted(out, key=lambda m: order.index(m.category))


def _load_without_checkpoint(theirs: Mapping[str, list[str]],
                             ours: Mapping[str, list[str]]) -> tuple[dict[str, list[str]], list[Mismatch]]:
    """The original's --load where the bundle passes none because no checkpoint is there: train.sh decides --load at
    launch (templates/train.sh.jinja's checkpoint block) and passes it only for a checkpoint to resume from. slime
    reads a --load with neither latest_checkpointed_iteration.txt nor an HF config.json in it as no --load: it loads
    --ref-load instead, without the optimizer and RNG (slime/utils/arguments.py:1817-1830 at 624b824), as it does
    when --load is not given. Allowed only where the original's directory has neither, here."""
    words = theirs.get("--load")
    if words is None or "--load" in ours or len(words) != 1 or \
            any(Path(words[0], name).exists() for name in ("latest_checkpointed_iteration.txt", "config.json")):
        return dict(theirs), []
    why = ("no checkpoint there: slime loads --ref-load as without --load (arguments.py:1817-1830 at 624b824); "
           "train.sh passes --load only to resume")
    return {k: v for k, v in theirs.items() if k != "--load"}, [Mismatch(ALLOWED, "--load", words, None, why)]


def same_dest(theirs: Mapping[str, list[str]], ours: Mapping[str, list[str]],
              alias: Callable[[str], Sequence[str]]) -> tuple[dict[str, list[str]], list[Mismatch]]:
    """The original's flags with each one the bundle passes under another name of the same dest renamed to that name
    (its values are then compared as that flag's), and an allowed difference for each. ``alias``: a flag's other
    names at the bundle's targeted slime commit: the flag a deprecated alias stands for (sglang 0.5.15.post1, slime
    624b824's image, keeps --cuda-graph-max-bs as a deprecated alias of --cuda-graph-max-bs-decode; acrl passes the
    replacement, compiler/_slime/sglang_stack.py), or another option of the same sglang argument (--dp-size and
    --data-parallel-size; acrl passes the key's)."""
    out: dict[str, list[str]] = {}
    allowed = []
    for flag, words in theirs.items():
        new = next((n for n in alias(flag) if n in ours and n not in theirs and flag not in ours), None)
        if new is not None:
            allowed.append(Mismatch(ALLOWED, flag, words, None, f"the same sglang argument as {new}, which the "
                                    "bundle passes (the targeted sglang stores both in one dest)"))
            flag = new
        out[flag] = words
    return out, allowed


def _compare_flags(theirs: Mapping[str, list[str]], ours: Mapping[str, list[str]], defaults: Mapping[str, Default],
                   configs: tuple[Mapping[str, Any] | None, Mapping[str, Any] | None] = (None, None),
                   sglang: tuple[tuple[Any] | None, tuple[Any] | None] = (None, None)) -> list[Mismatch]:
    out = []
    for flag in [*theirs, *(f for f in ours if f not in theirs)]:
        if flag == "--sglang-config" and flag in theirs and flag in ours and sglang[0] and sglang[1]:
            out += compare_sglang_config(sglang[0][0], sglang[1][0])  # the files' YAML, not their paths
            continue
        if flag == "--custom-config-path" and flag in theirs and flag in ours and configs[0] is not None \
                and configs[1] is not None:
            out += [Mismatch("custom-config", key, value, configs[1].get(key))
                    for key, value in configs[0].items() if configs[1].get(key) != value]
            continue
        if flag in theirs and flag in ours:
            kind = defaults[flag].kind if flag in defaults else None
            if flag == "--train-env-vars" and _train_env_vars(theirs[flag]) == _train_env_vars(ours[flag]) \
                    and theirs[flag] != ours[flag]:
                out.append(Mismatch(ALLOWED, flag, theirs[flag], ours[flag], EMPTY_ENTRIES))
            elif _normal(theirs[flag], kind) != _normal(ours[flag], kind):
                out.append(Mismatch("flag-value", flag, theirs[flag], ours[flag]))
            continue
        words = theirs.get(flag, ours.get(flag, []))
        pair = (theirs.get(flag), ours.get(flag))
        if flag in ALWAYS_ALLOWED:
            out.append(Mismatch(ALLOWED, flag, *pair, "acrl's --megatron-to-hf-mode (the criterion allows it)"))
        elif restates_default(flag, words, defaults):
            default = defaults[flag]
            out.append(Mismatch(ALLOWED, flag, *pair, f"restates {default.source}'s default ({default.where})"))
        elif (why := sglang_default(flag, words)) is not None:
            out.append(Mismatch(ALLOWED, flag, *pair, why))
        elif flag in ("--num-steps-per-rollout", "--global-batch-size") and global_batch(theirs) is not None \
                and global_batch(theirs) == global_batch(ours):
            out.append(Mismatch(ALLOWED, flag, *pair, f"the same global batch ({global_batch(theirs)}), said the "
                                                      "other way"))
        elif flag in theirs:
            out.append(Mismatch("flag-original-only", flag, theirs[flag], None, not_restated(flag, words, defaults)))
        else:
            out.append(Mismatch("flag-bundle-only", flag, None, ours[flag], not_restated(flag, words, defaults)))
    return out


def slime_reads(data: Any) -> list[dict[str, Any]] | None:
    """An --sglang-config file's YAML data as slime reads it (slime 624b824 sglang_config.py:158-180,
    SglangConfig.from_yaml): each model's name, model_path, num_gpus_per_engine, update_weights (None where absent)
    and server groups (``server_groups``, else the legacy ``engine_groups``; a group's absent num_gpus_per_engine
    None, its overrides {}); None where slime would fail to read it."""
    models = data.get("sglang") if isinstance(data, dict) else None
    if not isinstance(models, list):
        return None
    out = []
    for model in models:
        groups = (model.get("server_groups") or model.get("engine_groups") or []) if isinstance(model, dict) else None
        if not isinstance(model, dict) or "name" not in model or not isinstance(groups, list) or \
                not all(isinstance(g, dict) for g in groups):
            return None
        out.append({"name": model["name"], **{k: model.get(k) for k in ("model_path", "num_gpus_per_engine",
                                                                        "update_weights")},
                    "server_groups": [{"num_gpus_per_engine": None, "overrides": {}, **g} for g in groups]})
    return out


def first_difference(theirs: Any, ours: Any, path: str = "") -> tuple[str, Any, Any]:
    """Where two YAML values first differ (``sglang[0].server_groups[1].overrides.dp_size``), and their values there
    (None where one side lacks the key)."""
    if isinstance(theirs, dict) and isinstance(ours, dict):
        for key in [*theirs, *(k for k in ours if k not in theirs)]:
            if key not in theirs or key not in ours or theirs[key] != ours[key]:
                return first_difference(theirs.get(key), ours.get(key), f"{path}.{key}" if path else str(key))
    if isinstance(theirs, list) and isinstance(ours, list) and len(theirs) == len(ours):
        for i, (a, b) in enumerate(zip(theirs, ours, strict=True)):
            if a != b:
                return first_difference(a, b, f"{path}[{i}]")
    return path or "(the whole file)", theirs, ours


def compare_sglang_config(theirs: Any, ours: Any) -> list[Mismatch]:
    """The two --sglang-config files' YAML (read with yaml.safe_load): equal data match; data slime reads the same
    (legacy engine_groups, a null key) is allowed; anything else is one mismatch at the first difference."""
    if theirs == ours:
        return []
    read = slime_reads(theirs)
    if read is not None and read == slime_reads(ours):
        return [Mismatch(ALLOWED, "--sglang-config", theirs, ours, "the same models and server groups as slime reads "
                         "them (sglang_config.py:158-180 at 624b824: engine_groups is server_groups, null is absent)")]
    return [Mismatch("sglang-config", *first_difference(theirs, ours))]


def sglang_default(flag: str, words: Sequence[str]) -> str | None:
    """Why a one-sided --sglang-* flag restates sglang's own default, where acrl's profile table
    (compiler/_spec/profiles.py) cites that default as the value slime ends up with (``native``); else None.
    slime's parser gets these flags from sglang's ServerArgs at run time, so no parser acrl reads defines them."""
    key = flag_index().get(flag) if flag.startswith("--sglang-") else None
    row = profiles.by_key().get(key.path) if key is not None else None
    if row is None or row.owner != "sglang" or row.native is None or _normal(list(words)) != [row.native]:
        return None
    return f"restates sglang's default {row.native!r} ({row.where}; acrl's profile table)"


def _library_path(value: Any) -> Any:
    return [e for e in value.split(":") if e] if isinstance(value, str) else value


def _train_env_vars(words: Sequence[str]) -> Any:
    try:
        found = json.loads(words[-1]) if len(words) == 1 else None
    except ValueError:
        return None
    return {k: _library_path(v) if k == "LD_LIBRARY_PATH" else v for k, v in found.items()} \
        if isinstance(found, dict) else None


def _entries(pythonpath: str) -> list[str]:
    """PYTHONPATH's entries; a trailing '/' names the same folder."""
    return [e.rstrip("/") or "/" for e in pythonpath.split(":") if e]


def _compare_env(theirs: Mapping[str, Any], ours: Mapping[str, Any],
                 our_head_env: Mapping[str, str] | None = None) -> list[Mismatch]:
    """The runtime env's variables and PYTHONPATH entries; a secret the original passes in its runtime env (so in
    `ray job submit`'s argv) is allowed where the bundle's head was started with it: acrl's job gets secrets only
    through the cluster's own environment (Ray's workers inherit the head's), never through argv."""
    out = []
    their_vars, our_vars = theirs.get("env_vars") or {}, ours.get("env_vars") or {}
    for name, value in their_vars.items():
        if name == "PYTHONPATH":
            have = _entries(str(our_vars.get(name, "")))
            out += [Mismatch("pythonpath", entry, entry, our_vars.get(name))
                    for entry in _entries(str(value)) if entry not in have]
        elif name not in our_vars and is_secret_name(name) and (our_head_env or {}).get(name) == str(value):
            out.append(Mismatch(ALLOWED, f"runtime-env {name}", "(secret)", None, "a secret: the bundle's job "
                                "inherits it from `ray start --head`'s environment, never through argv"))
        elif name == "LD_LIBRARY_PATH" and name in our_vars and str(our_vars[name]) != str(value) and \
                _library_path(str(our_vars[name])) == _library_path(str(value)):
            out.append(Mismatch(ALLOWED, f"runtime-env {name}", value, our_vars[name], EMPTY_ENTRIES))
        elif name not in our_vars or str(our_vars[name]) != str(value):
            out.append(_env_difference(name, value, our_vars.get(name)))
    for key in sorted(set(theirs) | set(ours)):
        if key == "env_vars" or theirs.get(key) == ours.get(key):
            continue
        if key in ALLOWED_RUNTIME_ENV_KEYS and key not in theirs:
            out.append(Mismatch(ALLOWED, f"runtime-env {key}", None, ours.get(key), ALLOWED_RUNTIME_ENV_KEYS[key]))
        else:
            out.append(Mismatch("runtime-env-key", key, theirs.get(key), ours.get(key)))
    return out


def _env_difference(name: str, theirs: Any, ours: Any) -> Mismatch:
    """A runtime-env variable the two sides set otherwise: allowed where the original passes a variable's unexpanded
    text (a single-quoted JSON: `"MASTER_ADDR": "${MASTER_ADDR}"` reaches the job as those characters), or its
    no_proxy entries after the 127.0.0.1 acrl's train.sh puts first (templates/train.sh.jinja, `export no_proxy`)."""
    if isinstance(theirs, str) and UNEXPANDED.fullmatch(theirs):
        return Mismatch(ALLOWED, f"runtime-env {name}", theirs, ours, "the original passes the unexpanded text")
    if name == "no_proxy" and isinstance(theirs, str) and isinstance(ours, str) and \
            ours.split(",") == ["127.0.0.1", *filter(None, theirs.split(","))]:
        return Mismatch(ALLOWED, f"runtime-env {name}", theirs, ours, "acrl's train.sh puts 127.0.0.1 first in "
                                                                      "no_proxy (its local Ray dashboard)")
    return Mismatch("runtime-env", name, theirs, ours)


def _compare_start(theirs: Sequence[str] | None, ours: Sequence[str] | None) -> list[Mismatch]:
    def head(argv: Sequence[str] | None) -> dict[str, list[str]] | None:
        return options(argv) if argv is not None else None
    their_opts, our_opts = head(theirs), head(ours)
    if their_opts is None or our_opts is None:
        if (their_opts is None) != (our_opts is None):
            return [Mismatch("ray-start", "ray start --head", theirs and list(theirs), ours and list(ours))]
        return []
    out = []
    for option in RAY_START_OPTIONS:
        a, b = their_opts.get(option), our_opts.get(option)
        if a == b:
            continue
        default = RAY_START_DEFAULTS.get(option)
        if default is not None and (a or [default]) == (b or [default]):
            continue
        out.append(Mismatch("ray-start", option, a, b))
    return out
