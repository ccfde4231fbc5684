"""An honest evaluator of the bash subset launch scripts use, for `acrl import train-sh`.

It runs nothing. It follows top-level assignments (``X=v``, ``X+=v``, arrays, ``export``,
``readonly``, ``declare``), the environment it is given (``acrl import train-sh --env``), the defaults of
``${X:-v}`` / ``${X:=v}`` (noted: the environment may override them), ``${X:?msg}``, ``$(dirname "$0")``
and acrl's ``$(cd -- "$(dirname ...)" && pwd -P)``, ``$(seq ...)``, ``$(basename ...)`` and
``$(dirname ...)`` (computed by :mod:`acrl.compiler._shell.substitution`), integer ``$((...))`` of known
numbers (in bash's 64-bit arithmetic), and ``source`` of files it can read. Anything else
(another command substitution, a variable the script never sets, a parameter expansion with a
pattern) becomes a :class:`Text` with a ``problem``: the caller reports it and guesses nothing.
``if`` / loop / function bodies are not evaluated, with one exception: ``if [[ -n $KEY ]]`` and
``${KEY:+...}`` on a secret-named variable (W&B's idiom) are followed, their words marked
``only_if=KEY``, because acrl's own W&B switch has exactly that meaning.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from pathlib import Path

import attrs

from .._importers.base import Note
from .._secrets import looks_secret_value
from .._spec.flags import is_secret_env_name
from .lexer import Part, ShellSyntaxError, Word, lex, lex_loose
from .substitution import COMMANDS, Refused

_PARAM = re.compile(r"(#?)([A-Za-z_]\w*|[0-9]+|[@*#?$!-])(\[[^\]]*\])?(.*)", re.DOTALL)
_SCRIPT_DIR = re.compile(r"(cd (-- )?\$\()?dirname (-- )?\$(0|\{0\}|\{BASH_SOURCE(\[0\])?\}|BASH_SOURCE)\)?"
                         r"( &>/dev/null| >/dev/null( 2>&1)?| 2>/dev/null)?( && pwd( -P)?)?")
_ASSIGN = re.compile(r"([A-Za-z_]\w*)(\+?)=")
MARK = "\x00"  # stands for an unresolved part in partial expansions
MAX_CHARS = 1 << 20  # the most characters one expansion or one variable may hold
MAX_WORDS = 100_000  # the most words one expansion or one array may hold
MAX_ARITH = 4096  # the longest $((...)) evaluated, its variables' values in (slime's own: under 40 characters)
MAX_STEPS = 20_000  # the most commands one import evaluates, sourced files included (slime's own: under 100)


def _too_large(line: int, *, words: bool) -> TooLarge:
    return TooLarge(line, f"an expansion of over {MAX_WORDS:,} words (the limit)" if words else
                    f"an expansion of over {MAX_CHARS >> 20} MiB of text (the limit)")


class TooLarge(Exception):
    """The script's expansions grow past MAX_CHARS / MAX_WORDS, or its evaluation past MAX_STEPS
    commands (a doubling chain ``A="$A$A"``, a file sourcing itself): ``line`` is where."""

    def __init__(self, line: int, what: str) -> None:
        super().__init__(what)
        self.line = line
        self.what = what


@attrs.frozen
class Text:
    """One expanded word: its text (its source text when unresolved) and what it depended on."""

    text: str
    line: int
    problem: str | None = None  # why it cannot be resolved
    notes: tuple[Note, ...] = ()  # defaults taken on the way
    secret: str | None = None  # the secret-named variable it came from
    origin: str | None = None  # the array it came from ("MODEL_ARGS", ...)
    only_if: str | None = None  # passed only when this (secret) variable is set at run time


@attrs.define
class Value:
    texts: list[Text]
    line: int
    is_array: bool = False
    exported: bool = False


def _merge(texts: list[Text], text: str, line: int, origin: str | None = None) -> Text:
    problem = next((t.problem for t in texts if t.problem), None)
    notes = tuple(n for t in texts for n in t.notes)
    secret = next((t.secret for t in texts if t.secret), None)
    only_if = next((t.only_if for t in texts if t.only_if), None)
    return Text(text, line, problem, notes, secret, origin, only_if)


class Shell:
    """Variables of one script as far as they can be known without running it."""

    def __init__(self, script: Path, where: Callable[[int], str], environment: Mapping[str, str] | None = None) -> None:
        """``environment``: what the script would read from its environment (``acrl import train-sh --env``):
        exported variables, set before its first line (a secret-named or secret-looking one is marked secret)."""
        self.script = script
        self.where = where
        self.env: dict[str, Value] = {}
        for name, text in (environment or {}).items():
            secret = name if is_secret_env_name(name) or looks_secret_value(text, name) else None
            self.env[name] = Value([Text(text, 0, secret=secret)], 0, exported=True)
        self.only_if: str | None = None  # set while inside `if [[ -n $KEY ]]`
        self.steps = 0  # commands evaluated (see step)
        self.relexed = 0  # characters of nested expansions lexed (see _lex)

    def _lex(self, argument: str, line: int) -> Word:
        """The word of a nested expansion's argument (``${X:-ARG}``), lexed again at each level of
        nesting: their total is bounded by MAX_CHARS, so that deep nesting costs no quadratic time."""
        self.relexed += len(argument)
        if self.relexed > MAX_CHARS:
            raise TooLarge(line, f"expansions nested in expansions (${{X:-${{Y:-...}}}}) over {MAX_CHARS >> 20} MiB "
                                 "of text in all (the limit)")
        return lex_loose(argument, line)

    def step(self, line: int) -> None:
        """Count one command evaluated; raise TooLarge past MAX_STEPS."""
        self.steps += 1
        if self.steps > MAX_STEPS:
            raise TooLarge(line, f"over {MAX_STEPS:,} commands evaluated (the limit), with the files it sources")

    @staticmethod
    def bounded(texts: list[Text], line: int) -> list[Text]:
        """``texts``, when they hold at most MAX_WORDS words of MAX_CHARS characters in all."""
        if len(texts) > MAX_WORDS or sum(len(t.text) for t in texts) > MAX_CHARS:
            raise _too_large(line, words=len(texts) > MAX_WORDS)
        return texts

    # --- expansion ------------------------------------------------------------------------------

    def expand(self, word: Word, *, split: bool = True, partial: bool = False) -> list[Text]:
        """The fields ``word`` expands to. An unresolved word is one Text holding its source text
        and the problem (with ``partial``, its resolved parts, and MARK for the others)."""
        if len(word.parts) == 1 and word.parts[0][0] == "var":
            whole = re.fullmatch(r"([A-Za-z_]\w*)\[[@*]\]", word.parts[0][1])
            if whole and (value := self.env.get(whole.group(1))) is not None:
                return [attrs.evolve(t, origin=t.origin or whole.group(1)) for t in value.texts]
        fields: list[list[str]] = [[]]
        kept: list[bool] = [False]
        seen: list[Text] = []
        size = 0
        for kind, text, quoted in word.parts:
            if kind == "lit":
                fields[-1].append(text)
                kept[-1] = True
                continue
            texts = self._part(kind, text, word.line)
            size += sum(len(t.text) for t in texts) + len(texts)
            if size > MAX_CHARS or len(fields) > MAX_WORDS:
                raise _too_large(word.line, words=len(fields) > MAX_WORDS)
            seen += texts
            joined = MARK if any(t.problem for t in texts) else " ".join(t.text for t in texts)
            if quoted or not split:
                fields[-1].append(joined)
                kept[-1] = kept[-1] or quoted or bool(joined)
                continue
            for i, piece in enumerate(re.split(r"[ \t\n]+", joined)):
                if i:
                    fields.append([])
                    kept.append(False)
                fields[-1].append(piece)
                kept[-1] = kept[-1] or bool(piece)
        meta = _merge(seen, "", word.line)
        if meta.problem and not partial:
            return [attrs.evolve(meta, text=word.raw)]
        return [attrs.evolve(meta, text="".join(f)) for f, keep in zip(fields, kept, strict=True) if keep]

    def scalar(self, word: Word) -> Text:
        """``word`` as the right-hand side of an assignment: one Text, never split."""
        texts = self.expand(word, split=False)
        return texts[0] if len(texts) == 1 else _merge(texts, "".join(t.text for t in texts), word.line)

    def _part(self, kind: str, text: str, line: int) -> list[Text]:
        short = " ".join(text.split())
        short = short if len(short) <= 60 else short[:57] + "..."
        if kind == "cmd":
            if _SCRIPT_DIR.fullmatch(" ".join(text.replace('"', "").split())):
                return [Text(str(self.script.resolve().parent), line)]
            return [self._substitute(text, short, line)]
        if kind == "arith":
            return [self._arith(text, line)]
        if kind == "tick":
            return [Text("", line, f"line {line}: `{short}` is a command substitution; the importer runs no "
                                   "commands")]
        return self._param(text, line)

    def _substitute(self, text: str, short: str, line: int) -> Text:
        """The output of ``$(seq ...)``, ``$(basename ...)`` or ``$(dirname ...)``, computed here (nothing runs);
        any other command is unresolved."""
        self.relexed += len(text)
        if self.relexed > MAX_CHARS:
            raise TooLarge(line, f"expansions nested in expansions over {MAX_CHARS >> 20} MiB of text in all "
                                 "(the limit)")
        try:
            commands = lex(text)
        except ShellSyntaxError:
            commands = []
        name = commands[0].words[0].literal if len(commands) == 1 else None
        if name not in COMMANDS:
            return Text("", line, f"line {line}: $({short}) is a command substitution; the importer runs no "
                                  "commands")
        words = [t for w in commands[0].words[1:] for t in self.expand(attrs.evolve(w, line=line))]
        meta = _merge(words, "", line)
        if meta.problem:
            return meta
        try:
            return attrs.evolve(meta, text=COMMANDS[name]([t.text for t in words]))
        except Refused as exc:
            return Text("", line, f"line {line}: $({short}) is not evaluated: {exc}")

    def _param(self, text: str, line: int) -> list[Text]:
        try:
            return self._parameter(text, line)
        except ShellSyntaxError as exc:
            return [Text("", line, f"line {line}: ${{{text}}} cannot be read: {exc}")]

    def _parameter(self, text: str, line: int) -> list[Text]:
        match = _PARAM.fullmatch(text)
        if match is None:
            return [Text("", line, f"line {line}: ${{{text}}} is not a parameter expansion the importer reads")]
        length, name, index, rest = match.groups()
        value = self._lookup(name, index, line)
        if isinstance(value, Text) and value.problem and not rest:
            return [value]
        if length:
            if isinstance(value, Text) and not rest:
                return [attrs.evolve(value, text=str(len(value.text)))]
            return [Text("", line, f"line {line}: ${{{text}}} is not evaluated")]
        if not rest:
            return value if isinstance(value, list) else [Text("", line, f"line {line}: ${name} is never set "
                                                          "in the script (it would come from the environment: give "
                                                          f"it with --env {name}=VALUE)")]
        op = re.match(r":?[-=+?]", rest)
        if op is None:
            return [Text("", line, f"line {line}: ${{{text}}}: the importer does not evaluate this expansion")]
        operator, argument = op.group(), rest[op.end():]
        is_set = isinstance(value, list) and (":" not in operator or any(t.text or t.problem for t in value))
        if operator.endswith("+"):
            if is_set:
                return self.expand(self._lex(argument, line), split=False) if argument else []
            if is_secret_env_name(name):
                return [attrs.evolve(t, only_if=name) for t in self.expand(self._lex(argument, line))]
            return [Text("", line, f"line {line}: ${{{name}{operator}...}} depends on whether {name} is set at "
                                   "run time, which the importer cannot know")]
        if is_set:
            assert isinstance(value, list)
            return value
        if operator.endswith("?"):
            message = f" (the script says: {argument})" if argument else ""
            return [Text("", line, f"line {line}: {name} must come from the environment{message}")]
        texts = self.expand(self._lex(argument, line), split=False) if argument else [Text("", line)]
        resolved = _merge(texts, "".join(t.text for t in texts), line)
        if resolved.problem:
            return [resolved]
        shown = "(a secret: not shown)" if is_secret_env_name(name) or resolved.secret or \
            looks_secret_value(resolved.text) else repr(resolved.text)
        note = Note("default", f"{name} is not set in the script: its default {shown} is used (the environment may "
                               "override it)", self.where(line))
        secret = name if is_secret_env_name(name) else resolved.secret
        result = attrs.evolve(resolved, notes=(*resolved.notes, note), secret=secret)
        if operator.endswith("="):
            self.env[name] = Value([result], line)
        return [result]

    def _lookup(self, name: str, index: str | None, line: int) -> list[Text] | Text | None:
        """The variable's Texts, or a Text with a problem, or None when it is unset."""
        if name == "0" or (name == "BASH_SOURCE" and index in (None, "[0]")):
            return [Text(str(self.script), line)]
        if not re.fullmatch(r"[A-Za-z_]\w*", name):
            return Text("", line, f"line {line}: ${name} is only known when the script runs")
        value = self.env.get(name)
        if value is None:
            return None
        if index in ("[@]", "[*]") or (index is None and not value.is_array):
            return value.texts
        if index is None or index == "[0]":
            return value.texts[:1]
        position = index[1:-1]
        if position.isdigit():
            return value.texts[int(position):int(position) + 1]
        return Text("", line, f"line {line}: ${{{name}{index}}} is not evaluated")

    def _arith(self, text: str, line: int) -> Text:
        def number(match: re.Match[str]) -> str:
            value = self.env.get(match.group(1) or match.group(2))
            if value is None or len(value.texts) != 1 or not re.fullmatch(r"-?\d+", value.texts[0].text):
                raise ValueError(match.group())
            return value.texts[0].text

        try:
            expression = re.sub(r"\$\{?([A-Za-z_]\w*)\}?|\b([A-Za-z_]\w*)\b", number, text)
            if len(expression) > MAX_ARITH:
                raise ValueError("too long")
            return Text(str(_integer(ast.parse(expression.strip(), mode="eval").body)), line)
        except (ValueError, SyntaxError, ZeroDivisionError, RecursionError, MemoryError):  # MemoryError: the
            # parser's own stack overflowing (a chain of thousands of **)
            shown = " ".join(text.split())
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            return Text("", line, f"line {line}: $(({shown})) cannot be evaluated here")

    # --- assignments ----------------------------------------------------------------------------

    def assign(self, word: Word, *, export: bool = False) -> tuple[str, Value] | None:
        """Perform the assignment ``word`` (``X=v``, ``X+=v``, ``X=( ... )``); returns the variable."""
        first = word.parts[0] if word.parts else ("", "", False)
        match = _ASSIGN.match(first[1]) if first[0] == "lit" and not first[2] else None
        if match is None:
            return None
        name, append = match.group(1), bool(match.group(2))
        if word.array is not None:
            texts = []
            for w in word.array:
                texts += self.expand(w)
                self.bounded(texts, word.line)
            is_array = True
        else:
            rest: tuple[Part, ...] = (("lit", first[1][match.end():], False), *word.parts[1:])
            texts = [self.scalar(Word(rest, word.raw, word.line))]
            is_array = False
        if self.only_if:
            texts = [attrs.evolve(t, only_if=t.only_if or self.only_if) for t in texts]
        if is_secret_env_name(name):
            texts = [attrs.evolve(t, secret=name) for t in texts]
        old = self.env.get(name)
        if append and old is not None:
            if is_array or old.is_array:
                texts = old.texts + texts
                is_array = True
            else:
                texts = [_merge([*old.texts, *texts], old.texts[0].text + texts[0].text, word.line)]
        value = Value(self.bounded(texts, word.line), word.line, is_array, export or bool(old and old.exported))
        self.env[name] = value
        return name, value


def _wrap(value: int) -> int:
    """``value`` as bash's 64-bit signed arithmetic leaves it (it wraps around)."""
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


def _integer(node: ast.expr) -> int:
    """A bash integer expression (+ - * / % ** and parentheses) of literal numbers, in 64-bit arithmetic."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return _wrap(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _integer(node.operand)
        return _wrap(-value) if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        a, b = _integer(node.left), _integer(node.right)
        if isinstance(node.op, ast.Add):
            return _wrap(a + b)
        if isinstance(node.op, ast.Sub):
            return _wrap(a - b)
        if isinstance(node.op, ast.Mult):
            return _wrap(a * b)
        if isinstance(node.op, ast.Pow) and b >= 0:  # bash refuses a negative exponent
            return _wrap(pow(a, b, 1 << 64))
        if isinstance(node.op, ast.Div | ast.FloorDiv | ast.Mod):
            quotient = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)  # bash truncates toward zero
            return _wrap(quotient) if not isinstance(node.op, ast.Mod) else _wrap(a - b * quotient)
    raise ValueError("not an integer expression")
