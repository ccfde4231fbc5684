"""`acrl import train-sh FILE`: a hand-written launch script of slime's example shape -> a spec.

The script is read, never run (:mod:`acrl.compiler._shell.lexer`, :mod:`acrl.compiler._shell.eval`): its top-level
variables,
arrays and ``source`` lines are followed, then the one ``ray job submit ... -- python3
.../train.py FLAGS`` command (or a bare ``python3 .../train.py``) is read flag by flag. Each flag
a spec key sets goes to that key (:mod:`acrl.compiler._spec.flag_index`), the others to ``[extra.flags]``; what
cannot be resolved without running the script is reported as an "unresolved" note and left out.
Secrets are never copied: only the name of their variable.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence
from pathlib import Path

import attrs

from .._pipeline.bundle import read_input
from .._pipeline.parse import unreadable_hint
from .._secrets import drop_secret_values, looks_secret_value
from .._shell.eval import Shell, Text, TooLarge, Value
from .._shell.lexer import Command, ShellSyntaxError, Word, lex
from .._spec.flags import is_number, is_secret_env_name
from .base import Imported, ImportInputError, Note
from .target import Target, for_script
from .train_sh_env import environment
from .train_sh_launch import Launched, heredoc_lines
from .train_sh_map import INLINE_FLAG, Occurrence, SpecBuilder
from .train_sh_model import known_model_flags
from .train_sh_nodes import head_outside, size_cluster, writes_head
from .train_sh_sglang import sglang_config

_ENTRY = re.compile(r"(?:^|/)(train|train_async)\.py$")
# slime's scripts/models/<type>.sh, also as its own scripts/run-*.sh source it: "${SCRIPT_DIR}/models/<type>.sh"
_MODEL_SCRIPT = re.compile(r"(?:^|/)models/([^/\x00]+)\.sh$")
_WHOLE_ARRAY = re.compile(r'"?\$\{([A-Za-z_]\w*)\[[@*]\]\}"?')
_MODEL_ARGS_WORD = re.compile(r'"?\$\{MODEL_ARGS\[[@*]\]\}"?')
_ACRL_MODEL_ARGS = re.compile(r"^# MODEL_ARGS of (\S+), frozen", re.MULTILINE)
_OPENERS = frozenset({"if", "while", "until", "for", "case", "select"})
_CLOSERS = frozenset({"fi", "done", "esac", "}"})
_SHAPE = ("acrl import train-sh reads scripts of slime's example shape: variables, arrays, `source` of the "
          "model script, and one top-level `ray job submit ... -- python3 $SLIME_DIR/train.py FLAGS`; move the "
          "command to the top level, or write the spec by hand (docs/migration-train-sh.md)")


@attrs.define
class _Frame:
    live: bool
    only_if: str | None = None
    line: int = 0  # where the if/loop/case opens
    head: str = ""


@attrs.define
class _Reader:
    """Walks a script's commands, keeping what the spec needs."""

    path: Path
    shell: Shell
    notes: list[Note] = attrs.Factory(list)
    train: tuple[Command, int] | None = None
    hidden_train: int | None = None  # a line mentioning train.py inside a block not evaluated
    model_type: Text | None = None
    model_script: Path | None = None  # the slime model script sourced, where it is on this machine
    model_args_file: bool = False
    frames: list[_Frame] = attrs.Factory(list)
    depth: int = 0
    launcher: Command | None = None  # the whole command that runs train.py (`VAR=... ray job submit ...`)
    just_found: Command | None = None  # the train.py command, until the command after it is read
    launch: Launched = attrs.Factory(Launched)  # what the launch around the train.py command does

    def where(self, line: int) -> str:
        return f"{self.path}:{line}"

    def run(self, commands: list[Command]) -> None:
        for command in commands:
            self.shell.step(command.line)
            if self.just_found is not None:
                found, self.just_found = self.just_found, None
                if self._continued(found, command):
                    continue
            self.command(command)

    def _continued(self, train: Command, command: Command) -> bool:
        """A command right after the train.py command that starts with a flag or a *_ARGS array: the line before
        it lacks its trailing backslash, so bash ran the flags as a command of their own and slime never saw them.
        The spec takes them as the script means them (True: the command is joined to the train.py command): the
        launch as written cannot train (without MODEL_ARGS Megatron stops at its required --num-layers,
        megatron/training/arguments.py:795 at 1dcf0daf), so its own argv is no launch to reproduce."""
        end = train.words[-1].line + train.words[-1].raw.count("\n")
        first = command.words[0]
        if self.train is None or command.line != end + 1 or not (
                first.text.startswith("-") or _WHOLE_ARRAY.fullmatch(first.raw)):
            return False
        lost = " ".join(w.raw for w in command.words[:4]) + (" ..." if len(command.words) > 4 else "")
        self.notes.append(Note("difference", f"broken line continuation: line {end} ends without '\\', so the "
                               f"train.py command ends there and bash runs line {command.line} ({lost}) as a command "
                               "of its own: slime never gets those flags, and the script's launch cannot train; the "
                               "spec takes them as the script means them, so the bundle passes them (add the '\\' "
                               f"at the end of line {end} to make the script do the same)", self.where(end)))
        whole, index = self.train
        self.train = (Command(whole.words + command.words, whole.line), index)
        self.just_found = command  # a next line may lack its backslash too
        return True

    def command(self, command: Command) -> None:
        words = list(command.words)
        while words and words[0].literal in ("then", "do", "else", "elif", "{", "!"):
            head = words.pop(0).literal
            if head in ("else", "elif") and self.frames:
                self.frames[-1].live = False
            if head == "{":
                self.frames.append(_Frame(self.live))
        if not words:
            return
        head = words[0].literal
        if head in _CLOSERS:
            if self.frames:
                self.frames.pop()
            self._restore_only_if()
            return
        if head in _OPENERS:
            secret = self._secret_test(words) if head == "if" and self.live else None
            self.frames.append(_Frame(secret is not None, secret, command.line, head))
            self._restore_only_if()
            return
        if head == "function" or (len(words) >= 3 and words[1].literal == "(" and words[2].literal == ")"):
            self.frames.append(_Frame(False))
            if words[-1].literal == "}":
                self.frames.pop()
            return
        if not self.live:
            if any(_ENTRY.search(w.raw.strip("\"'")) for w in words):
                self.hidden_train = self.hidden_train or command.line
            openers = [(f.head, f.line) for f in self.frames if f.line]
            if openers:
                self.launch.hidden(openers, [w.raw for w in words])
            return
        self.simple(words, command)
        if words[-1].literal == "}" and self.frames:
            self.frames.pop()

    @property
    def live(self) -> bool:
        return all(f.live for f in self.frames)

    def _restore_only_if(self) -> None:
        self.shell.only_if = next((f.only_if for f in reversed(self.frames) if f.only_if), None)

    def _secret_test(self, words: list[Word]) -> str | None:
        """KEY when the condition is ``[[ -n $KEY ]]`` (or ``[ -n "${KEY:-}" ]``) on a secret name."""
        raws = [w.raw for w in words[1:]]
        if len(raws) >= 3 and raws[0] in ("[[", "[") and raws[1] == "-n" and raws[3:4] in (["]]"], ["]"]):
            match = re.fullmatch(r'"?\$\{?([A-Za-z_]\w*)(:-)?\}?"?', raws[2])
            if match and is_secret_env_name(match.group(1)):
                return match.group(1)
        return None

    def simple(self, words: list[Word], command: Command) -> None:
        assignments = 0
        while assignments < len(words) and self._is_assignment(words[assignments]):
            assignments += 1
        if assignments == len(words):
            for word in words:
                self._assign(word)
            return
        words = words[assignments:]
        name = words[0].literal
        if name in ("export", "readonly", "declare", "typeset", "local"):
            export = name == "export" or any(w.literal and re.fullmatch(r"-\w*x\w*", w.literal) for w in words)
            for word in words[1:]:
                if self._is_assignment(word):
                    self._assign(word, export=export)
                    if export:
                        self._exported(word.raw.split("=", 1)[0].rstrip("+"), word.line)
                elif export and word.literal in self.shell.env:  # `export NAME` of a variable set earlier
                    self.shell.env[word.literal].exported = True
                    self._exported(word.literal, word.line)
        elif name == "unset":
            for word in words[1:]:
                self.shell.env.pop(word.literal or "", None)
        elif name in ("source", ".") and len(words) > 1:
            self._source(words[1])
        else:
            self._maybe_train(words, command)
            if self.launcher is not command:
                self.launch.top_level(words, command, self.shell)

    def _exported(self, name: str, line: int) -> None:
        """An export the launch maps (before `ray start --head`: [cluster] env), with its value as one string."""
        value = self.shell.env.get(name)
        self.launch.exports.append((name, line, value.texts[0] if value is not None and not value.is_array
                                    and len(value.texts) == 1 else None))

    @staticmethod
    def _is_assignment(word: Word) -> bool:
        first = word.parts[0] if word.parts else ("", "", True)
        return first[0] == "lit" and not first[2] and re.match(r"[A-Za-z_]\w*\+?=", first[1]) is not None

    def _assign(self, word: Word, *, export: bool = False) -> None:
        assigned = self.shell.assign(word, export=export)
        if assigned is None:
            return
        name, value = assigned
        self.launch.assigned[name] = word
        if is_secret_env_name(name) and any(t.text and not t.problem and not t.notes for t in value.texts):
            self.notes.append(Note("difference", f"the script sets {name} itself: its value is not copied into the "
                                   f"spec; provide {name} in the environment of train.sh instead",
                                   self.where(word.line)))

    def _source(self, word: Word) -> None:
        (text, *_) = self.shell.expand(word, split=False, partial=True) or [Text("", word.line)]
        model = _MODEL_SCRIPT.search(text.text)
        if model is not None:
            self.model_type = attrs.evolve(text, text=model.group(1), problem=None)
            self.model_script = None if text.problem else self.path.resolve().parent / text.text
            self.shell.env["MODEL_ARGS"] = _empty_array(word.line)
            return
        file = Path(text.text) if not text.problem else None
        if file is not None and not file.is_absolute():
            file = self.path.resolve().parent / file
        if file is None or not file.is_file() or self.depth >= 3:
            why = text.problem or f"{text.text} is not a file here"
            self.notes.append(Note("unresolved", f"`source {word.raw}`: {why}; the variables it sets are unknown",
                                   self.where(word.line)))
            return
        try:
            body = read_input(file).decode("utf-8")
            commands = lex(body)
        except (OSError, UnicodeDecodeError, ShellSyntaxError) as exc:
            self.notes.append(Note("unresolved", f"`source {word.raw}`: cannot read {file}: {exc}",
                                   self.where(word.line)))
            return
        header = _ACRL_MODEL_ARGS.search(body)
        if header and "MODEL_ARGS" in body:
            self.model_type = Text(header.group(1), word.line)
        self.model_args_file = self.model_args_file or "MODEL_ARGS" in body
        inner = _Reader(file, self.shell, depth=self.depth + 1)
        inner.run(commands)
        self.notes += inner.notes

    def _maybe_train(self, words: list[Word], command: Command) -> None:
        for i, word in enumerate(words[1:], start=1):
            entry = self.shell.expand(word, split=False, partial=True)
            if len(entry) == 1 and _ENTRY.search(entry[0].text):
                before = self.shell.expand(words[i - 1], split=False, partial=True)
                if before and re.search(r"(^|/)python[0-9.]*$", before[0].text):
                    if self.train is None:
                        self.train = (Command(tuple(words), command.line), i)
                        self.launcher = command
                        self.just_found = command
                    else:
                        self.notes.append(Note("difference", "a second train.py command is not imported",
                                               self.where(command.line)))
                    return


def _empty_array(line: int) -> Value:
    return Value([], line, is_array=True)


def import_train_sh(path: Path, *, env: Sequence[str] = (), target_commit: str | None = None) -> Imported:
    """Read the launch script at ``path`` into a spec, with notes for what did not carry over. ``env``: NAME=VALUE
    strings, the values the script would read from its environment (``acrl import train-sh --env``);
    ``target_commit``: --target-commit, else the commit of the slime checkout the script is in (:mod:`.target`)."""
    variables = environment(env)
    target = for_script(path, target_commit)
    try:
        text = read_input(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise ImportInputError(path=str(path), reason=f"cannot read the script: {why}",
                               fix=unreadable_hint(exc, "give the path of a bash launch script (UTF-8 text)")
                               if isinstance(exc, OSError) else "give the path of a bash launch script (UTF-8 text)"
                               ) from None
    try:
        commands = lex(text)
    except ShellSyntaxError as exc:
        raise ImportInputError(path=f"{path}:{exc.line}", reason=f"cannot read the script: {exc}",
                               fix="check that `bash -n` accepts the script; " + _SHAPE) from None
    reader = _Reader(path, Shell(path, lambda line: f"{path}:{line}", variables))
    try:
        reader.run(commands)
        reader.launch.heredocs = heredoc_lines(text)
        reader.launch.head_written = writes_head(text)
        return _build(reader, target, "torch_memory_saver" in text, "ACRL_ENV_VARS=" in text,
                      bool(re.search(r"^[^#\n]*--(use-)?wandb", text, re.MULTILINE)))
    except RecursionError:
        raise ImportInputError(path=str(path), reason="cannot read the script: expansions nested too deeply",
                               fix=_SHAPE) from None
    except TooLarge as exc:
        raise ImportInputError(path=f"{path}:{exc.line}", reason=f"too large: {exc.what}",
                               fix="remove what repeats without bound (a variable doubling itself, a file "
                                   "sourcing itself): " + _SHAPE) from None


def _build(reader: _Reader, target: Target, torch_memory_saver: bool, acrl_made: bool, mentions_wandb: bool
           ) -> Imported:
    path = reader.path
    if reader.train is None:
        hidden = (f" (line {reader.hidden_train} names train.py inside an if/loop/function body, which the importer "
                  "does not evaluate)") if reader.hidden_train else ""
        raise ImportInputError(path=str(path), reason="expected a `ray job submit ... -- python3 .../train.py FLAGS` "
                               f"command (or train_async.py), found none{hidden}", fix=_SHAPE)
    command, index = reader.train
    builder = SpecBuilder(path, reader.shell, [*target.notes, *reader.notes], torch_memory_saver=torch_memory_saver,
                          commit=target.commit)
    builder.entry(reader.shell.scalar(command.words[index]))
    address = _address(reader.shell, reader.launcher) if reader.launcher is not None else None
    if address is not None:
        builder.address(address)
    launcher = list(reader.launcher.words if reader.launcher else ())
    reader.launch.finish(builder, reader.shell, launcher, acrl_made)
    if not acrl_made:
        head_outside(builder, launcher, address, reader.launch.head_written)
    argv: list[Text] = []
    model_at: int | None = None  # where ${MODEL_ARGS[@]} is on the command line
    for word in command.words[index + 1:]:
        if model_at is None and _MODEL_ARGS_WORD.fullmatch(word.raw):
            model_at = len(argv)
        argv += reader.shell.expand(word)
    model_tokens = [t for t in argv if t.origin == "MODEL_ARGS"]
    builder.model(reader.model_type, model_tokens, reader.model_args_file)
    before = _occurrences([t for t in argv[:model_at or 0] if t.origin != "MODEL_ARGS"], builder)
    after = _occurrences([t for t in argv[model_at or 0:] if t.origin != "MODEL_ARGS"], builder)
    model_type = reader.model_type
    inline = {t.text.split("=", 1)[0]: t.line for t in model_tokens if t.text.startswith("--")}
    known = known_model_flags(model_type.text if model_type is not None and not model_type.problem else None,
                              reader.model_script, model_type.line if model_type is not None else 0, inline,
                              builder.spec["slime"].get("dir", "/root/slime"),
                              builder.spec["slime"].get("megatron_dir", "/root/Megatron-LM"))
    occurrences = [*(attrs.evolve(o, before_model=True) for o in before), *after]
    builder.flags(sglang_config(builder, reader.launch.files, occurrences), known)
    if not acrl_made and not mentions_wandb and not any(f.startswith(("--use-wandb", "--wandb")) for f in
                                                        builder.given):
        builder.wandb_off()  # a W&B flag the importer did not evaluate (an `if` body) is noted, not turned off
    size_cluster(builder, reader.launch.ssh_loop)
    target.write(builder.spec)
    spec = builder.finish()
    spec = copy.deepcopy(spec)
    left_out = [Note("difference", f"{key}: its value looks like a secret (a token, or a URL with user:password): "
                     "it is not copied into the spec; give it on the cluster, in the environment", key)
                for key in drop_secret_values(spec)]
    return Imported(spec, (*builder.unique_notes(), *left_out), str(path))


def _address(shell: Shell, command: Command) -> Text | None:
    """The Ray address `ray job submit` gets: --address[=]X, or RAY_ADDRESS / RAY_API_SERVER_ADDRESS
    assigned for the command."""
    words = list(command.words)
    end = next((i for i, w in enumerate(words) if w.literal == "--"), len(words))
    for i, word in enumerate(words[:end]):
        head = word.parts[0][1] if word.parts and word.parts[0][0] == "lit" else ""
        if word.literal == "--address" and i + 1 < end:
            return shell.scalar(words[i + 1])
        for prefix in ("--address=", "RAY_ADDRESS=", "RAY_API_SERVER_ADDRESS="):
            if head.startswith(prefix):
                rest = (("lit", head[len(prefix):], False), *word.parts[1:])
                return shell.scalar(Word(rest, word.raw, word.line))
    return None


def _occurrences(argv: list[Text], builder: SpecBuilder) -> list[Occurrence]:
    """``--a 1 --b --c x y`` -> occurrences; an unresolved word outside a flag's values is noted."""
    out: list[Occurrence] = []
    for token in argv:
        inline = INLINE_FLAG.match(token.text)
        if inline is not None:  # --flag=value, as argparse reads it (the value may be unresolved)
            flag = attrs.evolve(token, text=inline.group(1), problem=None)
            out.append(Occurrence(flag.text, [attrs.evolve(token, text=inline.group(2))], flag))
        elif not token.problem and token.text.startswith("--") and not is_number(token.text):
            out.append(Occurrence(token.text, [], token))
        elif token.problem and (array := _WHOLE_ARRAY.fullmatch(token.text)):
            # unknown words, flags most likely: not the values of the flag before them
            builder.note("unresolved", f"{token.problem}; the flags of {array.group(1)} are not imported", token)
        elif out:
            out[-1].values.append(token)
        else:
            shown = f"a word from the secret {token.secret}" if token.secret else \
                "a word that looks secret (not shown)" if looks_secret_value(token.text) else repr(token.text)
            builder.note("unresolved" if token.problem else "difference",
                         f"{shown} before any flag: {token.problem or 'not a flag'}; left out", token)
    return out

