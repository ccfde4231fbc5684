"""What a bundle's files say, read back from the files themselves, for `acrl diff` and `--check`.

A bundle's truth is its files, whoever wrote them: the slime argv is read from train.sh's bash
array assignments (``SLIME_ARGS=( ... )``, ``SLIME_ARGS+=( ... )``, tokenized with shlex, group
titles from the ``# title`` lines acrl writes inside the array), MODEL_ARGS from model_args.sh,
the custom config with yaml.safe_load, the resolved spec with tomllib, the Ray job's environment
and the launch settings from train.sh's assignments, and the derived quantities computed from
spec.toml (the manifest's copy is used only when spec.toml is not a valid spec). Compile warnings
come from the manifest, whose every field the bundle hash covers. A spec is compiled in memory and
its files are read the same way, so both kinds of input go through :func:`read_view`.

Every line of a shell file that is not a comment is kept as a "script line", so a hand edit
anywhere (an added command, say) still shows in a diff. A line whose meaning is read into one of
the parts above is kept as a placeholder that names the part (``ray start --head <launch
setting>``, ``SLIME_ARGS+=( ... )``), so that moving it (into another branch, out of its ``if``)
shows too, while a changed value shows once, in its own part. The shebang is kept as it is.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from typing import Any

import attrs

from .._pipeline.bundle import MANIFEST, NOT_REGULAR, sha256
from .._spec.flags import is_number

TRAIN_SH, MODEL_ARGS_SH, CUSTOM_CONFIG, SPEC_TOML = "train.sh", "model_args.sh", "custom_config.yaml", "spec.toml"
KNOWN_FILES = (TRAIN_SH, MODEL_ARGS_SH, CUSTOM_CONFIG, SPEC_TOML, MANIFEST)


@attrs.frozen
class Flag:
    """One slime flag as train.sh passes it, and the array comment (acrl's group title) above it."""

    flag: str
    values: tuple[str, ...]
    title: str | None


@attrs.frozen
class BundleView:
    """The meaning of one bundle's files. Mappings are keyed so that order never matters."""

    label: str
    flags: Mapping[str, Flag]  # SLIME_ARGS, the run-time additions included; a repeated flag: its last value
    model_args: Mapping[str, tuple[str, ...]]
    custom_config: Mapping[str, Any]  # dotted keys
    spec: Mapping[str, Any]  # dotted keys of the resolved spec.toml
    runtime_env: Mapping[str, str]  # the Ray job's env_vars
    launch: Mapping[str, str]  # train.sh's settings: its variables, the Ray address, ...
    derived: Mapping[str, Any]  # computed from spec.toml as the manifest's derived section is; the model-args source
    warnings: tuple[str, ...]
    script_lines: Mapping[str, tuple[str, ...]]  # per shell file: lines none of the above explains
    file_status: Mapping[str, str]  # "present", "missing", "unreadable: ...", or an unknown file's sha256
    manifest: Mapping[str, Any] | None
    notes: tuple[str, ...]
    integrity: tuple[str, ...] = ()  # why this bundle does not match its own manifest (set by the diff's load)


class _Unreadable(ValueError):
    """A file that cannot be read as what it should be; the message says why."""


def read_view(label: str, files: Mapping[str, bytes]) -> BundleView:
    """Read every part of the bundle ``files`` (name -> bytes) that a diff compares. Never raises on
    a broken file: it is marked unreadable, and its parts are empty."""
    status: dict[str, str] = {}
    notes: list[str] = []

    def text(name: str) -> str | None:
        if name not in files:
            status[name] = "missing"
            return None
        try:
            status[name] = "present"
            return files[name].decode("utf-8")
        except UnicodeDecodeError as exc:
            status[name] = f"unreadable: not UTF-8 text (byte {exc.start})"
            return None

    def parse(name: str, reader: Any) -> Any:
        source = text(name)
        if source is None:
            return None
        try:
            return reader(source)
        except (_Unreadable, ValueError) as exc:  # tomllib, json and shlex errors are ValueErrors
            status[name] = f"unreadable: {exc}"
            notes.append(f"{label}: {name} cannot be read ({exc}); its contents are left out of the comparison")
            return None
        except Exception as exc:  # yaml.YAMLError and kin
            status[name] = f"unreadable: {type(exc).__name__}"
            notes.append(f"{label}: {name} cannot be read ({' '.join(str(exc).split())}); its contents are left out "
                         "of the comparison")
            return None

    train = parse(TRAIN_SH, _read_train_sh) or _TrainSh()
    model: tuple[dict[str, tuple[str, ...]], tuple[str, ...]] = parse(MODEL_ARGS_SH, _read_model_args_sh) or ({}, ())
    custom = parse(CUSTOM_CONFIG, _read_yaml) or {}
    spec = parse(SPEC_TOML, _read_toml) or {}
    manifest = parse(MANIFEST, _read_json)
    for name in sorted(files):
        if name.endswith(NOT_REGULAR):  # a link or special file, never followed (see read_bundle)
            status[name.removesuffix(NOT_REGULAR)] = f"not a regular file ({files[name].decode()})"
        elif name not in KNOWN_FILES:
            status[name] = "folder" if name.endswith("/") else f"sha256:{sha256(files[name])[:16]}"
    derived: dict[str, Any] = {}
    warnings: tuple[str, ...] = ()
    computed = derived_from_spec(files[SPEC_TOML]) if spec else None
    if computed is not None:  # what the files say, not the manifest's copy
        derived = dict(computed)
        if "model.args_source" in spec:
            derived["model_args_source"] = spec["model.args_source"]
    elif manifest is not None:
        derived = dict(manifest.get("derived") or {}) if isinstance(manifest.get("derived"), dict) else {}
        provenance = manifest.get("model_args")
        if isinstance(provenance, dict) and "source" in provenance:
            derived["model_args_source"] = provenance["source"]
        if derived:
            notes.append(f"{label}: the derived quantities are manifest.json's: spec.toml cannot be read as a "
                         "spec, so they cannot be computed from it")
    if manifest is not None:
        warnings = tuple(sorted(_warning_text(w) for w in manifest.get("warnings") or () if isinstance(w, dict)))
    script = {name: lines for name, lines in ((TRAIN_SH, train.script), (MODEL_ARGS_SH, model[1])) if lines}
    return BundleView(label, train.flags, model[0], custom, spec, train.runtime_env, train.launch, derived,
                      warnings, script, status, manifest, (*notes, *(f"{label}: {n}" for n in train.notes)))


def derived_from_spec(data: bytes) -> dict[str, Any] | None:
    """The manifest's derived section computed from a bundle's resolved spec.toml, the way
    acrl.compiler._pipeline.compile._manifest computes it (a test keeps the two the same); None when
    ``data`` is not a valid spec (a spec made by another acrl, say)."""
    from .._pipeline.argv import derived
    from .._pipeline.parse import decode_spec
    from .._pipeline.structure import structure
    from ..errors import SpecError

    try:
        spec, _ = structure(decode_spec(data, SPEC_TOML))
    except SpecError:
        return None
    if spec is None:
        return None
    try:
        return derived(spec).as_json()
    except ArithmeticError:  # num_steps_per_rollout = 0 in a hand-edited spec.toml
        return None


def _warning_text(warning: Mapping[str, Any]) -> str:
    rule = f" ({warning['rule']})" if warning.get("rule") else ""
    key = f"{warning['key']}: " if warning.get("key") else ""
    return f"{key}{warning.get('message', '')}{rule}"


def _read_yaml(source: str) -> dict[str, Any]:
    import yaml

    data = yaml.safe_load(source)
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise _Unreadable(f"a mapping of keys was expected, found {type(data).__name__}")
    return flatten(data)


def _read_toml(source: str) -> dict[str, Any]:
    import tomllib

    return flatten(tomllib.loads(source))


def _read_json(source: str) -> dict[str, Any]:
    data = json.loads(source)
    if not isinstance(data, dict):
        raise _Unreadable("a JSON object was expected")
    return data


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested tables as dotted keys; an empty table has no keys (so it is the same as no table).
    Values are made JSON values (see :func:`json_value`)."""
    out: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, name + "."))
        else:
            out[name] = json_value(value)
    return out


TYPE_TAG = "$type"


def json_value(value: Any) -> Any:
    """``value`` as a JSON value. A TOML or YAML date, time or datetime, YAML binary (bytes) and
    set, which JSON has no type for, become ``{"$type": "date", "value": "2001-01-01"}`` (ISO text,
    binary as base64, a set as a sorted list), so the date 2001-01-01 and the string "2001-01-01"
    stay different values; lists and tables inside them are converted too."""
    import datetime

    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return {TYPE_TAG: type(value).__name__, "value": value.isoformat()}
    if isinstance(value, (bytes, bytearray)):
        import base64

        return {TYPE_TAG: "binary", "value": base64.b64encode(value).decode("ascii")}
    if isinstance(value, (set, frozenset)):
        items = [json_value(v) for v in value]
        return {TYPE_TAG: "set", "value": sorted(items, key=lambda v: json.dumps(v, sort_keys=True))}
    if isinstance(value, (list, tuple)):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float)):
        return value
    return {TYPE_TAG: type(value).__name__, "value": str(value)}


# --- bash ------------------------------------------------------------------------------------

_ARRAY = re.compile(r"^[ \t]*(?P<name>[A-Za-z_]\w*)(?P<op>\+?)=\(", re.M)
_DECLARE = re.compile(r"^[ \t]*(?:readonly|export)[ \t]+(?P<name>[A-Za-z_]\w*)=")
_WANDB_IF = re.compile(r"^\s*if \[\[ -n \$\{(\w+):-\} \]\]; then$")
_WANDB_OFF = re.compile(r'^\s*log "W&B off: (\w+) is not set"$')
_RAY_ADDRESS = re.compile(r"^\s*CLUSTER_ADDRESS=(.*)$")
_RAY_START = re.compile(r"^\s*ray start --head (.*)$")
_DEADLINE = re.compile(r"^\s*deadline=\$\(\(SECONDS \+ (\d+)\)\)$")
_DEADLINE_DIE = re.compile(r'^\s*\(\(SECONDS < deadline\)\) \|\| die "[^"$`\\]*"$')
_ENV_PREFIX = re.compile(r"RUNTIME_ENV_JSON=\$\((?P<prefix>.*?)\bpython3 -c", re.S)
_BASE_ENV = re.compile(r'^env = \{(.*)\}$', re.M)
_BASE_ENV_PAIR = re.compile(r'"(\w+)": (?:"([^"\\]*)"|os\.environ\["(\w+)"\])')
_ENV_ASSIGNMENTS = frozenset({"ACRL_ENV_VARS", "ACRL_FORWARD", "ACRL_PIN_CUDA"})
PINNED_AT_LAUNCH = "(pinned by train.sh at launch)"
FORWARDED = "(forwarded from the launching shell when set)"


@attrs.frozen
class _TrainSh:
    flags: Mapping[str, Flag] = attrs.Factory(dict)
    runtime_env: Mapping[str, str] = attrs.Factory(dict)
    launch: Mapping[str, str] = attrs.Factory(dict)
    script: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def _read_train_sh(source: str) -> _TrainSh:
    segments, spans = bash_arrays(source, "SLIME_ARGS")
    flags: dict[str, Flag] = {}
    repeated: list[str] = []
    for flag, values, title in _flag_occurrences(segments):
        if flag in flags and flag not in repeated:
            repeated.append(flag)
        flags.pop(flag, None)  # a later occurrence wins in slime's argparse, and takes the later place
        flags[flag] = Flag(flag, values, title)
    notes = [f"train.sh gives {flag} more than once; slime keeps the last value" for flag in repeated]
    launch: dict[str, str] = {}
    # A line whose meaning is read into launch / runtime_env stays in the script lines as a
    # placeholder naming what it holds (its value is compared in its own section), so that moving
    # it (into another branch, out of an `if`) is still a difference.
    placeholders: dict[int, str] = {}
    lines = _without_spans(source, spans, "SLIME_ARGS").split("\n")
    for number, line in enumerate(lines):
        value = _launch_setting(line)
        if value is not None:
            key, setting, label = value
            placeholders[number] = _indent(line) + label
            if not key:
                continue
            launch[key] = setting if key not in launch or launch[key] == setting else f"{launch[key]} | {setting}"
    runtime_env, env_lines = _runtime_env(source, launch)
    for number, line in enumerate(lines):
        if line in env_lines:
            names = " ".join(w.partition("=")[0] for w in _words(line.rstrip().removesuffix("\\")) or ())
            placeholders[number] = f"{_indent(line)}<runtime env: {names}>"
    return _TrainSh(flags, runtime_env, launch, _script_lines(lines, placeholders), tuple(notes))


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def _script_lines(lines: list[str], placeholders: Mapping[int, str] | None = None) -> tuple[str, ...]:
    """The non-blank lines, placeholders in place of the lines read elsewhere; comments are left
    out, but not the shebang (``#!`` on the first line), which picks the interpreter."""
    placeholders = placeholders or {}
    return tuple(placeholders.get(n, line).rstrip() for n, line in enumerate(lines)
                 if line.strip() and (not line.lstrip().startswith("#") or (n == 0 and line.startswith("#!"))))


def _launch_setting(line: str) -> tuple[str, str, str] | None:
    """(key, value, placeholder) when ``line`` is exactly one of the settings train.sh writes, else
    None. The placeholder stands for the line among the script lines: it names the setting, not
    its value (a changed value shows once, under launch settings)."""
    if _DECLARE.match(line):
        words = _words(line)
        if words is not None and len(words) == 2 and words[0] in ("readonly", "export"):
            name, _, value = words[1].partition("=")
            return name, value, f"{words[0]} {name}=<launch setting {name}>"
        return None
    for pattern, key, label in ((_WANDB_IF, "W&B key variable", "if <W&B key variable is set>; then"),
                                (_WANDB_OFF, "W&B key variable", "log <W&B off>"),
                                (_DEADLINE, "Ray stop timeout (s)", "deadline=<Ray stop timeout>")):
        match = pattern.match(line)
        if match:
            return key, match.group(1), label
    if _DEADLINE_DIE.match(line):  # its message repeats the timeout read from the line before
        return "", "", "((SECONDS < deadline)) || die <Ray stop timeout>"
    match = _RAY_ADDRESS.match(line)
    if match:
        words = _words(match.group(1))
        if words is None or len(words) != 1:
            return None
        found = re.fullmatch(r"\$\{ACRL_RAY_ADDRESS:-(.*)\}", words[0], re.S)
        if found:
            return ("Ray address (unless ACRL_RAY_ADDRESS is set)", found.group(1) or "(none: a local Ray head)",
                    "CLUSTER_ADDRESS=${ACRL_RAY_ADDRESS:-<launch setting Ray address>}")
        return "Ray address of the local head", words[0], "CLUSTER_ADDRESS=<launch setting Ray address>"
    match = _RAY_START.match(line)
    if match:
        words = _words(match.group(1))
        return ("ray start --head", shlex.join(words), "ray start --head <launch setting>") if words is not None \
            else None
    return None


def _runtime_env(source: str, launch: Mapping[str, str]) -> tuple[dict[str, str], set[str]]:
    """The Ray job's env_vars as train.sh builds them, and the lines that hold the spec's part."""
    match = _ENV_PREFIX.search(source)
    if match is None:
        return {}, set()
    prefix = match.group("prefix").replace("\\\n", " ")
    assigned = dict(w.partition("=")[::2] for w in _words(prefix) or () if re.match(r"[A-Za-z_]\w*=", w))
    env: dict[str, str] = {}
    base = _BASE_ENV.search(source[match.end():])
    for name, literal, variable in _BASE_ENV_PAIR.findall(base.group(1) if base else ""):
        value = literal if not variable else assigned.get(variable, f"${variable}")
        env[name] = launch.get(value[1:], value) if value.startswith("$") else value
    try:
        extra = json.loads(assigned.get("ACRL_ENV_VARS", "{}"))
    except json.JSONDecodeError:
        extra = {"(ACRL_ENV_VARS)": assigned.get("ACRL_ENV_VARS", "")}
    if isinstance(extra, dict):
        env.update({str(k): str(v) for k, v in extra.items()})
    for name in assigned.get("ACRL_FORWARD", "").split():
        env.setdefault(name, FORWARDED)
    if assigned.get("ACRL_PIN_CUDA"):
        env["CUDA_HOME"] = launch.get("CUDA_HOME", PINNED_AT_LAUNCH)
        env["LD_LIBRARY_PATH"] = PINNED_AT_LAUNCH
    env_lines = set()
    for line in match.group("prefix").split("\n"):
        line_words = _words(line.rstrip().removesuffix("\\"))
        if line_words and all(w.partition("=")[0] in _ENV_ASSIGNMENTS and "=" in w for w in line_words):
            env_lines.add(line)
    return env, env_lines


def _words(text: str) -> list[str] | None:
    try:
        return shlex.split(text)
    except ValueError:
        return None


def _read_model_args_sh(source: str) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    segments, spans = bash_arrays(source, "MODEL_ARGS")
    args = {flag: values for flag, values, _ in _flag_occurrences(segments)}
    return args, _script_lines(_without_spans(source, spans, "MODEL_ARGS").split("\n"))


NO_FLAG = "(before any flag)"


def _flag_occurrences(segments: list[tuple[str | None, list[str]]]) -> list[tuple[str, tuple[str, ...], str | None]]:
    """``--a 1 --b --c x y`` -> (--a, (1,)), (--b, ()), (--c, (x, y)); tokens before the first flag
    are kept under NO_FLAG. A negative number is a value, not a flag."""
    out: list[tuple[str, list[str], str | None]] = []
    for title, tokens in segments:
        for token in tokens:
            if token.startswith("--") and len(token) > 2 and not is_number(token):
                out.append((token, [], title))
            elif out:
                out[-1][1].append(token)
            else:
                out.append((NO_FLAG, [token], title))
    return [(flag, tuple(values), title) for flag, values, title in out]


def _without_spans(source: str, spans: list[tuple[int, int]], name: str) -> str:
    """``source`` with each array assignment replaced by a one-line placeholder, ``name=( ... )``
    or ``name+=( ... )`` (its words are compared as flags), so that moving one still shows."""
    parts, start = [], 0
    for begin, end in spans:
        parts.append(source[start:begin])
        statement = source[begin:end]
        op = "+=" if re.match(rf"\s*{name}\+=", statement) else "="
        parts.append(f"{_indent(statement)}{name}{op}( ... )")
        start = end
    parts.append(source[start:])
    return "".join(parts)


def bash_arrays(source: str, name: str) -> tuple[list[tuple[str | None, list[str]]], list[tuple[int, int]]]:
    """Every assignment to the bash array ``name`` (``name=( ... )`` replaces, ``name+=( ... )``
    appends), in order: its words, cut into segments at each comment line (the segment's title),
    and the spans of the assignment statements in ``source``. Raises ValueError on an array
    whose quotes or parenthesis are not closed."""
    segments: list[tuple[str | None, list[str]]] = []
    spans: list[tuple[int, int]] = []
    for match in _ARRAY.finditer(source):
        if match.group("name") != name or (spans and match.start() < spans[-1][1]):
            continue
        body, end = _array_body(source, match.end())
        if not match.group("op"):
            segments = []
        segments += body
        spans.append((match.start(), end))
    return segments, spans


def _array_body(source: str, i: int) -> tuple[list[tuple[str | None, list[str]]], int]:
    """The words of an array body starting at ``source[i]``, up to its unquoted closing ')'.

    Quoting is left to shlex; this only finds where the array ends and which comments it holds,
    the way bash does: '#' starts a comment at the start of a word; quotes and backslashes hide
    ')' and '#'; a backslash before a newline joins the lines."""
    out: list[tuple[str | None, list[str]]] = []
    title: str | None = None
    buf: list[str] = []
    blank_line = word_start = True

    def flush() -> None:
        words = shlex.split("".join(buf))
        if words or title is not None:
            out.append((title, words))
        buf.clear()

    while i < len(source):
        c = source[i]
        if c in "'\"":
            end = source.find("'", i + 1) if c == "'" else _closing_double_quote(source, i + 1)
            if end < 0:
                kind = "single" if c == "'" else "double"
                raise _Unreadable(f"a {kind} quote in an array is not closed")
            buf.append(source[i:end + 1])
            i, blank_line, word_start = end + 1, False, False
            continue
        if c == "\\":
            if source[i + 1:i + 2] != "\n":
                buf.append(source[i:i + 2])
                blank_line = False
            i, word_start = i + 2, False
            continue
        if c == "#" and word_start:
            end = source.find("\n", i)
            end = len(source) if end < 0 else end
            if blank_line:
                flush()
                title = source[i + 1:end].strip()
            i = end
            continue
        if c == ")":
            flush()
            return out, i + 1
        buf.append(c)
        blank_line = c == "\n" or (blank_line and c in " \t")
        word_start = c in " \t\n"
        i += 1
    raise _Unreadable("an array's closing ')' is missing")


def _closing_double_quote(source: str, i: int) -> int:
    while i < len(source):
        if source[i] == "\\":
            i += 2
        elif source[i] == '"':
            return i
        else:
            i += 1
    return -1
