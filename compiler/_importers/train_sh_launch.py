"""The job's environment and launch in `acrl import train-sh`: the ``--runtime-env-json`` of ``ray job submit``
(its ``env_vars`` -> ``[env] vars``; its PYTHONPATH -> ``[slime] megatron_dir`` and ``[env] pythonpath`` /
``pythonpath_before_megatron``, in the script's order), the options of ``ray start --head`` (``[cluster]`` keys,
``node_ip_address``, the others ``ray_start_args``), the exports before it (``[cluster] env``), and a note naming
the line for what the spec cannot hold (an ssh loop starting workers, a here-document, an ``if``/``case`` holding
flags or ray commands, a value only the running script knows). Nothing is dropped silently."""

from __future__ import annotations

import json
import re
from typing import Any

import attrs

from .._pipeline.validate.launch import COMPUTED_OPTIONS, LAUNCH_VARIABLES, NODE_ADDRESS
from .._secrets import ENV_NAME, looks_secret_value
from .._shell.eval import MARK, Shell, Text
from .._shell.lexer import Command, Word
from .._spec.flags import is_secret_env_name
from .._spec.launch import Env
from .._spec.tables import MAX_NODE_GPUS
from .train_sh_env import more_no_proxy, pythonpath
from .train_sh_files import HereFiles
from .train_sh_map import SpecBuilder

# what acrl's train.sh puts in the job's runtime env itself (templates/train.sh.jinja, RUNTIME_ENV_JSON)
ACRL_RUNTIME_ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
# variables acrl's train.sh exports itself before its Ray head starts (templates/train.sh.jinja)
ACRL_EXPORTS = frozenset({"PYTHONUNBUFFERED", "no_proxy"})
_HEREDOC = re.compile(r"(?<![<\w])<<-?[ \t]*(['\"]?)([A-Za-z_][\w-]*)\1")
_CAT_HEREDOC = re.compile(r"\$\(\s*cat\s*<<-?[ \t]*(['\"]?)([A-Za-z_][\w-]*)\1[ \t]*\n(.*?)\n[ \t]*\2[ \t]*\n\s*\)$",
                          re.DOTALL)
_ACRL_ENV_VARS = re.compile(r"ACRL_ENV_VARS='([^']*)'")
_HEAD_KEYS = {"--num-gpus": ("cluster.gpus_per_node", 8), "--port": ("cluster.head_port", 6379),
              "--dashboard-port": ("cluster.dashboard_port", 8265), "--dashboard-host": ("cluster.dashboard_host",
                                                                                         "127.0.0.1")}
_HEAD_ACRL = frozenset({"--head", "--disable-usage-stats", "--block"})
HEREDOC_NOTE = ("a here-document (a file written or fed by the script): the importer does not read it; carry what it "
                "holds over by hand")


def heredoc_lines(text: str) -> list[int]:
    """The lines of the script that open a here-document (``<<EOF``, not the ``<<<`` here-string), comments
    left out."""
    out = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.lstrip().startswith("#") and _HEREDOC.search(line):
            out.append(number)
    return out


def _value_word(word: Word) -> Word | None:
    """The value part of the assignment word ``NAME=VALUE``."""
    head = word.parts[0] if word.parts else ("", "", True)
    match = re.match(r"[A-Za-z_]\w*=", head[1]) if head[0] == "lit" else None
    if match is None:
        return None
    return Word((("lit", head[1][match.end():], head[2]), *word.parts[1:]), word.raw[match.end():], word.line)


@attrs.define
class Launch:
    """Maps the launch of one script onto the spec being built."""

    builder: SpecBuilder
    shell: Shell
    assigned: dict[str, Word]  # the last top-level assignment word of each variable
    names: set[str] = attrs.Factory(set)  # the variables of the runtime env
    raw: str = ""  # the runtime env's JSON as the script writes it
    master_addr: tuple[str, int, bool] | None = None  # its MASTER_ADDR: value, line, the launching shell's own

    def note(self, kind: Any, message: str, line: int) -> None:
        self.builder.note(kind, message, Text("", line))

    def runtime_env(self, launcher: list[Word]) -> None:
        """``--runtime-env-json[=]X`` of ``ray job submit`` (X written inline, or a variable assigned in the
        script); ``--runtime-env FILE`` and ``--working-dir`` are noted."""
        end = next((i for i, w in enumerate(launcher) if w.literal == "--"), len(launcher))
        for i, word in enumerate(launcher[:end]):
            head = word.parts[0][1] if word.parts and word.parts[0][0] == "lit" else ""
            if word.literal == "--runtime-env-json":
                if i + 1 < end:
                    self._json(launcher[i + 1])
                else:
                    self.note("unresolved", "--runtime-env-json without a value: set [env] vars by hand", word.line)
            elif head.startswith("--runtime-env-json="):
                prefix = ("--runtime-env-json=", "X=", 1)
                value = _value_word(Word((("lit", head.replace(*prefix), False), *word.parts[1:]),
                                         word.raw.replace(*prefix), word.line))
                if value is not None:
                    self._json(value)
            elif head.split("=", 1)[0] in ("--runtime-env", "--working-dir", "--entrypoint-num-gpus",
                                           "--entrypoint-num-cpus", "--entrypoint-resources", "--metadata-json"):
                self.note("difference", f"ray job submit {head.split('=', 1)[0]}: the spec has no key for it; "
                                        "acrl's train.sh submits the bundle as the working dir: set it by hand "
                                        "if the job needs it", word.line)

    def _json(self, word: Word) -> None:
        variable = re.fullmatch(r'"?\$\{?([A-Za-z_]\w*)\}?"?', word.raw)
        line = word.line
        source = word
        if variable is not None and variable.group(1) in self.assigned:
            assigned = self.assigned[variable.group(1)]
            line = assigned.line
            if (acrl := _ACRL_ENV_VARS.search(assigned.raw)) is not None:  # acrl's own train.sh
                self._acrl_env(acrl.group(1), line)
                return
            source = _value_word(assigned) or assigned
            heredoc = _CAT_HEREDOC.search(source.raw)
            if heredoc is not None:
                body = heredoc.group(3)
                line += 1
                if not heredoc.group(1):  # an unquoted delimiter: the body is expanded, as in "..."
                    from .._shell.lexer import lex_loose  # lazy: only for a here-document runtime env

                    source = lex_loose('"' + body.replace('"', '\\"') + '"', line)  # `"` is literal in it
                else:
                    self.raw = body
                    self._env_vars(body, line, None)
                    return
        self.raw = source.raw
        (text, *_) = self.shell.expand(source, split=False, partial=True) or [Text("", line)]
        self._env_vars(text.text, line, text)

    def _acrl_env(self, raw: str, line: int) -> None:
        try:
            env = json.loads(raw)
        except ValueError:
            return
        if isinstance(env, dict):
            for name, value in env.items():
                self.builder.spec.setdefault("env", {}).setdefault("vars", {})[name] = value

    def _env_vars(self, source: str, line: int, text: Text | None) -> None:
        try:
            env = json.loads(source, strict=False)
        except ValueError:
            why = text.problem if text is not None and text.problem else "it is not JSON"
            self.note("unresolved", f"--runtime-env-json: {why}; the job's environment is not imported: set "
                                    "[env] vars by hand", line)
            return
        if not isinstance(env, dict):
            self.note("unresolved", "--runtime-env-json: not a JSON object; set [env] vars by hand", line)
            return

        def at(key: str) -> int:
            found = source.find(f'"{key}"')
            return line + source[:found].count("\n") if found >= 0 else line

        for key in env:
            if key != "env_vars":
                self.note("difference", f"--runtime-env-json {key!r}: the spec has no key for it (acrl's train.sh "
                                        "sends the bundle as working_dir and [env] vars as env_vars); set it up "
                                        "on the cluster", at(key))
        if text is not None:
            self.builder.notes += text.notes  # the defaults taken on the way
        variables = env.get("env_vars", {})
        if not isinstance(variables, dict):
            self.note("unresolved", "--runtime-env-json env_vars: not a JSON object; set [env] vars by hand", line)
            return
        for name, value in variables.items():
            self._variable(str(name), value, at(str(name)), text)

    def _variable(self, name: str, value: Any, line: int, text: Text | None) -> None:
        if not ENV_NAME.fullmatch(name):
            self.note("difference", f"env_vars {name!r}: not a variable name; not imported", line)
            return
        if not isinstance(value, str):
            self.note("difference", f"env_vars {name}: {value!r} is not a string (Ray wants strings); set [env] "
                                    "vars by hand", line)
            return
        secret = text.secret if text is not None else None
        secret_value = self.shell.env[secret].texts[0].text if secret and secret in self.shell.env and \
            self.shell.env[secret].texts else None
        if is_secret_env_name(name) or looks_secret_value(value, name) or (secret_value and secret_value in value):
            self.note("difference", f"env_vars {name}: it looks secret: its value is not copied into the spec; "
                                    "export it on the cluster instead", line)
            return
        self.names.add(name)
        if name in ("CUDA_HOME", "LD_LIBRARY_PATH") and "home" in self.builder.spec["cuda"]:
            self.note("default", f"env_vars {name}: acrl sets it from [cuda] home (train.sh's runtime env)", line)
        elif name == "MASTER_ADDR":  # mapped once the head's options are known (master_addr_env)
            self.master_addr = (value, line, self._own(name, value))
        elif self._own(name, value):
            self._forward(name, line)
        elif MARK in value:
            why = text.problem if text is not None and text.problem else "a part of it cannot be resolved"
            self.note("unresolved", f"env_vars {name}: {why}; set [env] vars {name} by hand", line)
        elif name == "PYTHONPATH":
            pythonpath(self.builder, value, line)
        elif ACRL_RUNTIME_ENV.get(name) == value:
            self.note("default", f"env_vars {name}={value}: acrl sets it (train.sh's runtime env)", line)
        else:
            self.builder.spec.setdefault("env", {}).setdefault("vars", {})[name] = value

    def _own(self, name: str, value: str) -> bool:
        """Whether the runtime env passes the launching shell's own variable of that name (``"NAME": "${NAME}"``,
        expanded at run time: the script does not set it)."""
        own = rf'\\?"{name}\\?"\s*:\s*\\?"\$(\{{{name}\}}|{name}\b)\\?"'
        return value == MARK and re.search(own, self.raw) is not None

    def _forward(self, name: str, line: int) -> None:
        """``"NAME": "${NAME}"`` -> [env] forward: train.sh copies the launching shell's NAME into the job's runtime
        env when it is set (templates/train.sh.jinja, RUNTIME_ENV_JSON)."""
        forward = self.builder.spec.setdefault("env", {}).setdefault("forward", list(Env().forward))
        if name not in forward:
            forward.append(name)
        extra = "; acrl's train.sh puts 127.0.0.1 first" if name == "no_proxy" else ""
        self.note("difference", f"env_vars {name}: the launching shell's {name}: [env] forward {name} (train.sh copies "
                                f"it when it is set{extra}; unset, the script passes an empty value)", line)

    def master_addr_env(self) -> None:
        """The runtime env's MASTER_ADDR: with [cluster] node_ip_address train.sh puts it there itself; else the
        launching shell's -> [env] forward, a value the script gives -> [env] vars."""
        if self.master_addr is None:
            return
        value, line, own = self.master_addr
        if "node_ip_address" in self.builder.spec["cluster"]:
            self.note("default", "env_vars MASTER_ADDR: not copied: with [cluster] node_ip_address, train.sh puts "
                                 "MASTER_ADDR's run-time value (else node_ip_address) in the runtime env", line)
        elif own:
            self._forward("MASTER_ADDR", line)
        elif MARK in value:
            self.note("unresolved", "env_vars MASTER_ADDR: a part of it cannot be resolved; set [env] vars "
                                    "MASTER_ADDR by hand", line)
        else:
            self.builder.spec.setdefault("env", {}).setdefault("vars", {})["MASTER_ADDR"] = value

    def ray_start(self, words: list[Word], line: int) -> None:
        """A top-level ``ray start``: the head's options that [cluster] has keys for, --node-ip-address ->
        node_ip_address, the others -> ray_start_args as written (``--x=v`` or ``--x v``), a note for a value only
        the running script knows and for the options acrl computes without a key."""
        options: list[tuple[str, Text | None, bool]] = []  # flag, value, written as --flag=value
        for word in words[2:]:
            text = self.shell.scalar(word)
            if text.problem and word.raw.startswith("--") and word.literal is None:  # --flag=$UNKNOWN
                options.append((word.raw.split("=", 1)[0], text, True))
            elif text.text.startswith("--") and not text.problem:
                name, equals, inline = text.text.partition("=")
                options.append((name, attrs.evolve(text, text=inline) if equals else None, bool(equals)))
            elif options and options[-1][1] is None:
                options[-1] = (options[-1][0], text, False)
            else:
                self.note("difference", f"ray start: {text.text or word.raw!r} is not an option; not imported", line)
        if not any(flag == "--head" for flag, _, _ in options):
            self.note("difference", "ray start without --head (a node joining a cluster): the spec has no key for "
                                    "it; join nodes with the bundle's join.sh", line)
            return
        extra: list[str] = []
        for flag, value, joined in options:
            if flag in _HEAD_ACRL and flag != "--block":
                continue
            if flag in _HEAD_KEYS and value is not None:
                self._head_key(flag, value, line)
            elif flag in _HEAD_KEYS:
                self.note("difference", f"ray start {flag} without a value: not imported", line)
            elif flag == "--node-ip-address":
                self._node_ip_address(value, line)
            elif value is not None and value.problem:
                self.builder.note("unresolved", f"ray start {flag}: {value.problem}; set [cluster] ray_start_args "
                                                "by hand", attrs.evolve(value, line=line))
            elif flag in COMPUTED_OPTIONS or flag.startswith("--dashboard"):
                self.note("difference", f"ray start {flag}: acrl computes the head's options itself "
                                        "([cluster] ray_start_args cannot hold it); not imported", line)
            else:
                if value is not None:
                    self.builder.notes += value.notes
                extra += [flag] if value is None else [f"{flag}={value.text}"] if joined else [flag, value.text]
        if extra:
            self.builder.set("cluster.ray_start_args", extra)

    def _node_ip_address(self, value: Text | None, line: int) -> None:
        if value is None or value.problem or not NODE_ADDRESS.fullmatch(value.text):
            why = value.problem if value is not None and value.problem else "not an IP address or a host name"
            self.note("unresolved", f"ray start --node-ip-address: {why}; train.sh passes MASTER_ADDR at run time "
                                    "when it is set, or set [cluster] node_ip_address", line)
            return
        self.builder.set("cluster.node_ip_address", value.text, value)
        self.note("default", f"ray start --node-ip-address {value.text}: [cluster] node_ip_address; MASTER_ADDR at "
                             "run time overrides it", line)

    def _head_key(self, flag: str, value: Text, line: int) -> None:
        path, default = _HEAD_KEYS[flag]
        if value.problem:
            key = path.replace(".", "] ", 1)
            self.builder.note("unresolved", f"ray start {flag}: {value.problem}; the default of [{key} applies",
                              attrs.evolve(value, line=line))
            return
        if isinstance(default, int):
            top = MAX_NODE_GPUS if flag == "--num-gpus" else 65535
            if not value.text.isdigit() or not 1 <= int(value.text) <= top:
                self.note("difference", f"ray start {flag} {value.text!r}: not a number the spec takes "
                                        f"([{path.replace('.', '] ', 1)}); not imported", line)
            elif int(value.text) != default:
                self.builder.set(path, int(value.text), value)
        elif value.text in ("127.0.0.1", "0.0.0.0"):
            if value.text != default:
                self.builder.set(path, value.text, value)
        else:
            self.note("difference", f"ray start {flag} {value.text}: [cluster] dashboard_host is 127.0.0.1 or "
                                    "0.0.0.0; not imported", line)


@attrs.define
class Launched:
    """What the reader saw of the launch while walking the script; mapped by :meth:`finish`."""

    assigned: dict[str, Word] = attrs.Factory(dict)
    exports: list[tuple[str, int, Text | None]] = attrs.Factory(list)  # live exports: name, line, its value
    heredocs: list[int] = attrs.Factory(list)
    head_written: bool = False  # the script runs `ray start --head` somewhere (train_sh_nodes.writes_head)
    starts: list[tuple[list[Word], int]] = attrs.Factory(list)  # top-level `ray start`
    notes: list[tuple[str, str, int]] = attrs.Factory(list)  # kind, message, line
    hidden_at: set[int] = attrs.Factory(set)
    ssh_loop: int | None = None  # the line of a `for` loop starting Ray workers over ssh
    files: HereFiles = attrs.Factory(HereFiles)  # the files here-documents write (--sglang-config's)

    def hidden(self, openers: list[tuple[str, int]], raws: list[str]) -> None:
        """A command inside if/loop/case bodies the importer does not evaluate (``openers``: their heads and
        lines, outermost first)."""
        if raws[0] in ("echo", "printf", ":"):
            return
        joined = " ".join(raws)
        ray = raws[0] == "ray" or (raws[0] == "ssh" and re.search(r"\bray\s+(start|job|stop)\b", joined))
        loop = next((o for o in reversed(openers) if o[0] == "for"), None) if raws[0] == "ssh" and ray else None
        head, line = loop or openers[0]
        if line in self.hidden_at or not (ray or raws[0] == "ssh" or re.search(r"(^|[\s(])--[A-Za-z]", joined)):
            return
        self.hidden_at.add(line)
        if head == "for" and raws[0] == "ssh" and ray:
            self.ssh_loop = self.ssh_loop or line  # noted with [cluster] num_nodes (train_sh_nodes.py)
            return
        what = f"an `{head}` whose body holds {'a ray command' if ray else 'flags or a command'}: the importer " \
               "does not evaluate it; add what it does to the spec by hand"
        self.notes.append(("difference", what, line))

    def top_level(self, words: list[Word], command: Command, shell: Shell) -> None:
        self.files.see(attrs.evolve(command, words=tuple(words)), shell)
        name, line = words[0].literal, command.line
        if name == "ray" and len(words) > 1 and words[1].literal == "start":
            self.starts.append((words, line))
        elif name == "ssh":
            self.notes.append(("difference", "ssh: a command run on another node: the spec has no key for it; "
                                             "acrl's bundle has join.sh for the other nodes", line))

    def finish(self, builder: SpecBuilder, shell: Shell, launcher: list[Word], acrl_made: bool) -> None:
        launch = Launch(builder, shell, self.assigned)
        launch.runtime_env(launcher)
        if acrl_made:  # acrl's own train.sh: its launch is what the spec compiles to
            return
        for words, line in self.starts:
            launch.ray_start(words, line)
        launch.master_addr_env()
        first_start = min((line for words, line in self.starts if any(w.literal == "--head" for w in words)),
                          default=None)
        for name, line, value in self.exports:
            cuda = name in ("LD_LIBRARY_PATH", "CUDA_HOME", "PATH") and "home" in builder.spec["cuda"]
            if cuda or is_secret_env_name(name):
                continue
            if name in ACRL_EXPORTS and not (first_start and line < first_start and more_no_proxy(builder, name, value,
                                                                                                  line)):
                launch.note("default", f"export {name}: acrl's train.sh exports it itself", line)
            elif name == "MASTER_ADDR":
                launch.note("default", "export MASTER_ADDR: with [cluster] node_ip_address, train.sh exports "
                                       "MASTER_ADDR's run-time value (else node_ip_address) before `ray start`", line)
            elif first_start and line < first_start:
                self._node_env(launch, name, value, line)
            elif name not in launch.names:
                launch.note("difference", f"export {name}: the shell that submits the job has it, not the job; the "
                                          "spec has no key for it: export it where train.sh runs, or put it in [env] "
                                          "vars if the job needs it", line)
        json_lines = {w.line for name, w in self.assigned.items() if _CAT_HEREDOC.search(w.raw)}
        for line in self.heredocs:
            if line not in json_lines:
                launch.note("difference", HEREDOC_NOTE, line)
        for kind, message, line in self.notes:
            launch.note(kind, message, line)

    @staticmethod
    def _node_env(launch: Launch, name: str, value: Text | None, line: int) -> None:
        """An export before the script's `ray start --head`: the head's Ray processes inherit it -> [cluster] env."""
        why = LAUNCH_VARIABLES.get(name)
        if why is not None:
            launch.note("difference", f"export {name} before `ray start`: the launch reads it itself ({why}); "
                                      "not imported", line)
        elif value is None or value.problem or MARK in value.text:
            problem = value.problem if value is not None and value.problem else "its value is not one string"
            launch.note("unresolved", f"export {name} before `ray start`: {problem}; set [cluster] env {name} "
                                      "by hand", line)
        elif value.secret or looks_secret_value(value.text, name):
            launch.note("difference", f"export {name} before `ray start`: it looks secret: its value is not copied "
                                      "into the spec; export it on the cluster's nodes instead", line)
        else:
            launch.builder.spec["cluster"].setdefault("env", {})[name] = value.text
            launch.builder.notes += value.notes
