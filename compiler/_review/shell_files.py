"""What a bundle's train.sh and model_args.sh say, read through the one shell lexer
(:mod:`acrl.compiler._shell.lexer`) by the structure declared beside the templates
(:mod:`acrl.templates.train_sh_structure`): the slime argv (the ``SLIME_ARGS`` array assignments,
group titles from the comment lines inside them), ``MODEL_ARGS``, the launch settings and the Ray
job's environment. Every other non-comment line is a "script line", compared as text.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping

import attrs

from acrl.templates import train_sh_structure as structure

from .._shell.lexer import Command, ShellSyntaxError, Word, lex, lex_loose
from .._spec.flags import is_number
from .._spec.rollout_features import APPEND_FLAGS

PINNED_AT_LAUNCH = "(pinned by train.sh at launch)"
FORWARDED = "(forwarded from the launching shell when set)"
NO_FLAG = "(before any flag)"


@attrs.frozen
class Flag:
    """One slime flag as train.sh passes it, and the array comment (acrl's group title) above it."""

    flag: str
    values: tuple[str, ...]
    title: str | None


@attrs.frozen
class TrainSh:
    flags: Mapping[str, Flag] = attrs.Factory(dict)
    runtime_env: Mapping[str, str] = attrs.Factory(dict)
    launch: Mapping[str, str] = attrs.Factory(dict)
    script: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def bash_arrays(source: str, name: str) -> tuple[list[tuple[str | None, list[str]]], list[tuple[int, int]]]:
    """Every assignment to the bash array ``name`` (``name=( ... )`` replaces, ``name+=( ... )``
    appends), in order: its words, cut into segments at each comment line (the segment's title),
    and the spans of the assignment statements in ``source`` (from the start of their line when
    only blanks precede them). Raises ValueError (ShellSyntaxError) on a script the lexer cannot
    read, an array whose quotes or parenthesis are not closed among them."""
    return _arrays(source, lex(source), name)


def _arrays(source: str, commands: list[Command],
            name: str) -> tuple[list[tuple[str | None, list[str]]], list[tuple[int, int]]]:
    segments: list[tuple[str | None, list[str]]] = []
    spans: list[tuple[int, int]] = []
    for command in commands:
        for word in command.words:
            if word.array is None or word.text.removesuffix("=").removesuffix("+") != name:
                continue
            if not word.text.endswith("+="):
                segments = []
            segments += _segments(word)
            begin = word.start
            while begin > 0 and source[begin - 1] in " \t":
                begin -= 1
            spans.append((begin if begin == 0 or source[begin - 1] == "\n" else word.start,
                          word.start + len(word.raw)))
    return segments, spans


def _segments(word: Word) -> list[tuple[str | None, list[str]]]:
    items = word.array or ()
    cuts: list[tuple[int, str | None]] = [(0, None), *word.titles]
    out: list[tuple[str | None, list[str]]] = []
    for i, (begin, title) in enumerate(cuts):
        end = cuts[i + 1][0] if i + 1 < len(cuts) else len(items)
        words = [w.text for w in items[begin:end]]
        if words or title is not None:
            out.append((title, words))
    return out


def read_train_sh(source: str) -> TrainSh:
    commands = lex(source)
    segments, spans = _arrays(source, commands, "SLIME_ARGS")
    flags: dict[str, Flag] = {}
    repeated: list[str] = []
    for flag, values, title in flag_occurrences(segments):
        if flag in APPEND_FLAGS and flag in flags:  # action="append": slime keeps every occurrence's value, in order
            flags[flag] = Flag(flag, (*flags[flag].values, *values), flags[flag].title)
            continue
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
    text = _without_spans(source, spans, "SLIME_ARGS")
    lines = text.split("\n")
    for number, (key, setting, label, last) in _declarations(source, commands, spans).items():
        placeholders.update(dict.fromkeys(range(number + 1, last + 1), ""))  # a value's further lines
        placeholders[number] = _indent(lines[number]) + label
        launch[key] = setting if key not in launch or launch[key] == setting else f"{launch[key]} | {setting}"
    for number, line in enumerate(lines):
        value = None if number in placeholders else _launch_setting(line)
        if value is not None:
            key, setting, label = value
            placeholders[number] = _indent(line) + label
            if not key:
                continue
            launch[key] = setting if key not in launch or launch[key] == setting else f"{launch[key]} | {setting}"
    _node_env(lines, launch, placeholders)
    runtime_env, env_lines = _runtime_env(source, launch)
    for number, line in enumerate(lines):
        if structure.BASE_ENV.fullmatch(line):  # read into runtime_env; which variable holds PYTHONPATH is not a change
            placeholders[number] = "env = {<runtime env base>}"
        if line in env_lines:
            names = " ".join(w.partition("=")[0] for w in _texts(line.rstrip().removesuffix("\\")) or ())
            placeholders[number] = f"{_indent(line)}<runtime env: {names}>"
    return TrainSh(flags, runtime_env, launch, script_lines(lines, placeholders), tuple(notes))


def read_model_args_sh(source: str) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    segments, spans = bash_arrays(source, "MODEL_ARGS")
    args = {flag: values for flag, values, _ in flag_occurrences(segments)}
    return args, script_lines(_without_spans(source, spans, "MODEL_ARGS").split("\n"))


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def script_lines(lines: list[str], placeholders: Mapping[int, str] | None = None) -> tuple[str, ...]:
    """The non-blank lines, placeholders in place of the lines read elsewhere; comments are left
    out, but not the shebang (``#!`` on the first line), which picks the interpreter."""
    placeholders = placeholders or {}
    return tuple(placeholders.get(n, line).rstrip() for n, line in enumerate(lines)
                 if line.strip() and (not line.lstrip().startswith("#") or (n == 0 and line.startswith("#!")))
                 and placeholders.get(n) != "")


def _declarations(source: str, commands: list[Command],
                  spans: list[tuple[int, int]]) -> dict[int, tuple[str, str, str, int]]:
    """The ``readonly NAME=value`` / ``export NAME=value`` commands alone on their lines, by their
    first line (0-based, counted once the array ``spans`` are one line each): (NAME, value,
    placeholder, last line). A quoted value may span lines."""
    out: dict[int, tuple[str, str, str, int]] = {}
    for command in commands:
        words = command.words
        if len(words) != 2 or words[0].literal not in ("readonly", "export") or words[1].array is not None \
                or not _alone_on_its_lines(source, words[0].start, words[1].start + len(words[1].raw)) \
                or not re.fullmatch(r"[A-Za-z_]\w*=.*", words[1].text, re.S):
            continue
        name, _, value = words[1].text.partition("=")
        shift = sum(source.count("\n", begin, end) for begin, end in spans if end <= words[0].start)
        first = words[0].line - 1 - shift
        out[first] = (name, value, f"{words[0].literal} {name}=<launch setting {name}>",
                      first + source.count("\n", words[0].start, words[1].start + len(words[1].raw)))
    return out


def _alone_on_its_lines(source: str, begin: int, end: int) -> bool:
    """Whether only blanks share the lines of ``source[begin:end]`` with it (no second command, no comment)."""
    after = source.find("\n", end)
    return not source[source.rfind("\n", 0, begin) + 1:begin].strip(" \t") \
        and not source[end:len(source) if after < 0 else after].strip(" \t")


def _words(text: str) -> list[Word] | None:
    """``text`` as the words of one simple command, or None (not one command, or not readable)."""
    try:
        commands = lex(text)
    except ShellSyntaxError:
        return None
    return list(commands[0].words) if len(commands) == 1 else [] if not commands else None


def _texts(text: str) -> list[str] | None:
    words = _words(text)
    return None if words is None else [w.text for w in words]


def _launch_setting(line: str) -> tuple[str, str, str] | None:
    """(key, value, placeholder) when ``line`` is exactly one of the settings train.sh writes, else
    None. The placeholder stands for the line among the script lines: it names the setting, not
    its value (a changed value shows once, under launch settings)."""
    if structure.DECLARE.match(line):  # read by _declarations when it is one
        return None
    for pattern, key, label in structure.LAUNCH_LINES:
        match = pattern.match(line)
        if match:
            return key, match.group(1), label
    if structure.DEADLINE_DIE.match(line):  # its message repeats the timeout read from the line before
        return "", "", structure.DEADLINE_DIE_PLACEHOLDER
    match = structure.RAY_ADDRESS.match(line)
    if match:
        words = _words(match.group(1))
        if words is None or len(words) != 1:
            return None
        default = _default_of(words[0], structure.RAY_ADDRESS_OVERRIDE)
        if default is not None:
            return (f"Ray address (unless {structure.RAY_ADDRESS_OVERRIDE} is set)",
                    default or "(none: a local Ray head)",
                    f"CLUSTER_ADDRESS=${{{structure.RAY_ADDRESS_OVERRIDE}:-<launch setting Ray address>}}")
        return "Ray address of the local head", words[0].text, "CLUSTER_ADDRESS=<launch setting Ray address>"
    match = structure.RAY_START.match(line)
    if match:
        texts = _texts(match.group(1))
        return ("ray start --head", shlex.join(texts), "ray start --head <launch setting>") if texts is not None \
            else None
    return None


def _node_env(lines: list[str], launch: dict[str, str], placeholders: dict[int, str]) -> None:
    """[cluster] env's ``NODE_ENV=(`` ... ``)`` block: each ``NAME=value`` a launch setting, the block one
    placeholder line."""
    for number, line in enumerate(lines):
        if not structure.NODE_ENV_OPEN.match(line) or number in placeholders:
            continue
        end = next((n for n in range(number + 1, len(lines)) if structure.NODE_ENV_CLOSE.match(lines[n])), None)
        if end is None:
            return
        for inner in range(number + 1, end):
            words = _texts(lines[inner])
            if not words or len(words) != 1 or "=" not in words[0]:
                return  # not the shape train.sh writes: the lines stay script lines
        for inner in range(number + 1, end):
            name, _, value = (_texts(lines[inner]) or [""])[0].partition("=")
            launch[structure.NODE_ENV_SETTING + name] = value
            placeholders[inner] = ""
        placeholders[number] = f"{_indent(line)}NODE_ENV=(<launch setting Ray nodes' env>)"
        placeholders[end] = ""


def _default_of(word: Word, variable: str) -> str | None:
    """The default of a word that is exactly ``${variable:-default}`` (its quotes removed), else None."""
    if len(word.parts) != 1 or word.parts[0][0] != "var" or not word.parts[0][1].startswith(f"{variable}:-"):
        return None
    try:
        return lex_loose(word.parts[0][1][len(variable) + 2:], word.line).text
    except ShellSyntaxError:
        return None


def _runtime_env(source: str, launch: Mapping[str, str]) -> tuple[dict[str, str], set[str]]:
    """The Ray job's env_vars as train.sh builds them, and the lines that hold the spec's part."""
    match = re.search(rf"{structure.RUNTIME_ENV}=\$\((?P<prefix>.*?)\bpython3 -c", source, re.S)
    if match is None:
        return {}, set()
    assigned = dict(w.partition("=")[::2] for w in _texts(match.group("prefix")) or ()
                    if re.match(r"[A-Za-z_]\w*=", w))
    env: dict[str, str] = {}
    base = structure.BASE_ENV.search(source[match.end():])
    for name, literal, variable in structure.BASE_ENV_PAIR.findall(base.group(1) if base else ""):
        value = literal if not variable else assigned.get(variable, f"${variable}")
        # a $NAME inside (ACRL_PYTHONPATH's "$MEGATRON_DIR") is the launch setting NAME
        env[name] = re.sub(r"\$(\w+)", lambda m: launch.get(m.group(1), m.group(0)), value)
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
        line_words = _texts(line.rstrip().removesuffix("\\"))
        if line_words and all(w.partition("=")[0] in structure.ENV_ASSIGNMENTS and "=" in w for w in line_words):
            env_lines.add(line)
    return env, env_lines


def flag_occurrences(segments: list[tuple[str | None, list[str]]]) -> list[tuple[str, tuple[str, ...], str | None]]:
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


def job_env_vars(train_sh: str) -> dict[str, str]:
    """The Ray job's env_vars a bundle's train.sh sets from the spec (PYTHONPATH, CUDA_DEVICE_MAX_CONNECTIONS,
    [env] vars), without the ones it takes from the launching shell at launch (forwarded, pinned CUDA)."""
    return {name: value for name, value in read_train_sh(train_sh).runtime_env.items()
            if value not in (FORWARDED, PINNED_AT_LAUNCH)}
