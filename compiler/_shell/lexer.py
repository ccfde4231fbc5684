"""A lexer for the subset of bash that launch scripts are written in: the one bash reader of acrl,
used by `acrl import train-sh` (through :mod:`acrl.compiler._shell.eval`) and by the review tools
(:mod:`acrl.compiler._review.view` reads a bundle's train.sh and model_args.sh back through it).

It never runs anything. It splits a script into commands of words (quotes, backslashes, line
continuations, ``$VAR``, ``${...}``, ``$(...)``, ``$((...))``, backticks and ``NAME=( ... )``
arrays kept apart), drops comments, and keeps redirections and here-documents apart (:class:`Redirect`). A comment
line inside an array is kept as the array's title at that point (acrl writes its flag groups so). What the
words mean is decided by :mod:`acrl.compiler._shell.eval`; anything the lexer cannot read is a
:class:`ShellSyntaxError` with its line.
"""

from __future__ import annotations

import re

import attrs

# (kind, text, quoted): kind is "lit", "var" (a name or the inside of ${...}), "cmd" ($(...)),
# "arith" ($((...))) or "tick" (`...`)
Part = tuple[str, str, bool]
_ASSIGN_HEAD = re.compile(r"[A-Za-z_]\w*\+?=")
_DELIMITERS = frozenset(" \t\r\n;&|<>()")
# runs of characters that are literal text as they stand: in a word, in a loose word, inside "..."
_RUN = re.compile(r"[^ \t\r\n;&|<>()\\'\"$`]+")
_LOOSE_RUN = re.compile(r"[^\\'\"$`]+")
_DOUBLE_RUN = re.compile(r"[^\\\"$`]+")
_BLANKS = re.compile(r"[ \t\r]*")
_SPECIAL_IN = {"(": re.compile(r"[\\'\"()]|\Z"), "{": re.compile(r"[\\'\"{}]|\Z")}  # what balanced() looks at
_ANSI_C = {"n": "\n", "t": "\t", "r": "\r", "e": "\x1b", "E": "\x1b", "a": "\a", "b": "\b", "\\": "\\",
           "'": "'", '"': '"', "0": "\0"}


class ShellSyntaxError(ValueError):
    """The script is not bash the lexer can read (an unterminated quote, say)."""

    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.line = line


@attrs.frozen
class Word:
    """One shell word: its parts, its source text and line; ``array`` for ``NAME=( ... )``.

    ``start`` is the offset of ``raw`` in the lexed text; ``text`` is the word with its quotes
    removed and its expansions kept as written (``"$A"'b c'`` -> ``$Ab c``; ``$'\\n'`` decoded);
    ``titles`` are an array's comment lines, each with the number of words before it."""

    parts: tuple[Part, ...]
    raw: str
    line: int
    array: tuple[Word, ...] | None = None
    start: int = -1
    text: str = ""
    titles: tuple[tuple[int, str], ...] = ()

    @property
    def literal(self) -> str | None:
        """The word's text when it is one unquoted literal (a command name, a keyword)."""
        if self.array is None and len(self.parts) == 1 and self.parts[0][0] == "lit" and not self.parts[0][2]:
            return self.parts[0][1]
        return None


@attrs.frozen
class Redirect:
    """A redirection of a command: ``>``, ``>>``, ``>|`` or ``&>`` with the file's word, or a here-document (``<<``,
    ``<<-``) with its delimiter's word, its body (``<<-``: leading tabs removed) and the line where the body starts."""

    op: str
    target: Word
    body: str = ""
    body_line: int = 0
    start: int = -1  # the offset of the operator in the lexed text


@attrs.frozen
class Command:
    words: tuple[Word, ...]
    line: int
    redirects: tuple[Redirect, ...] = ()
    piped: bool = False  # its input is the output of the command before it (``a | b``)


def lex(text: str) -> list[Command]:
    """The script's simple commands, in order (``a && b`` and ``a | b`` are two commands)."""
    return _Lexer(text).commands()


def lex_loose(text: str, line: int) -> Word:
    """``text`` read as one word in which blanks are literal (the ``word`` of ``${X:-word}``)."""
    lexer = _Lexer(text, line)
    return lexer.word(loose=True)


class _Lexer:
    def __init__(self, text: str, line: int = 1) -> None:
        self.s, self.i, self.line = text, 0, line
        self.heredocs: list[tuple[str, bool, int]] = []  # pending here-documents: delimiter, `<<-`, offset
        self.redirects: list[Redirect] = []  # the redirections of the command being read
        self.bodies: dict[int, tuple[str, int]] = {}  # here-document offset -> its body and first line
        self.piped = False  # the command being read follows a `|`

    def peek(self, k: int = 0) -> str:
        return self.s[self.i + k] if self.i + k < len(self.s) else ""

    def advance(self, n: int = 1) -> None:
        end = min(self.i + n, len(self.s))
        self.line += self.s.count("\n", self.i, end)
        self.i = end

    def advance_to(self, end: int) -> None:
        """Move to ``end`` (the end of the text when it is negative: a ``find`` that failed)."""
        self.advance((len(self.s) if end < 0 else end) - self.i)

    def commands(self) -> list[Command]:
        out: list[Command] = []
        words: list[Word] = []
        while self.i < len(self.s):
            c = self.peek()
            if c == "\\" and self.peek(1) == "\n":
                self.advance(2)
            elif c in " \t\r":
                self.advance_to(_BLANKS.match(self.s, self.i).end())  # type: ignore[union-attr]
            elif c == "#":
                self.advance_to(self.s.find("\n", self.i))
            elif c == "&" and self.peek(1) == ">":
                self.advance()
                self.redirect(words)
            elif c in "\n;&|":
                self.advance()
                pipe = c == "|" and self.peek() != "|"
                if c != "\n" and self.peek() in (c, "&" if c == "|" else c):
                    self.advance()
                if c == "\n" and self.heredocs:
                    self.skip_heredocs()
                if words:
                    out.append(Command(tuple(words), words[0].line, tuple(self.redirects), self.piped))
                    words, self.redirects, self.piped = [], [], False
                self.piped = self.piped or pipe
            elif c in "<>":
                if words and words[-1].literal is not None and words[-1].literal.isdigit() \
                        and self.s[self.i - 1].isdigit():
                    words.pop()  # the file descriptor of 2>...
                self.redirect(words)
            elif c in "()":
                words.append(Word((("lit", c, False),), c, self.line, start=self.i, text=c))
                self.advance()
            else:
                words.append(self.word())
        if words:
            out.append(Command(tuple(words), words[0].line, tuple(self.redirects), self.piped))
        bodies = self.bodies  # the here-documents' bodies, read after their command ended
        return [attrs.evolve(c, redirects=tuple(attrs.evolve(r, body=bodies[r.start][0], body_line=bodies[r.start][1])
                                                 if r.start in bodies else r for r in c.redirects))
                if any(r.start in bodies for r in c.redirects) else c for c in out]

    def redirect(self, words: list[Word]) -> None:
        start = self.i
        while self.peek() in ("<", ">"):
            self.advance()
        op = self.s[start:self.i]
        if start > 0 and self.s[start - 1] == "&":
            op = "&" + op  # &>
        duplicate = self.peek() == "&"  # 2>&1: no file
        if duplicate or (op == ">" and self.peek() == "|"):
            self.advance()
        while self.peek() in (" ", "\t"):
            self.advance()
        if op == "<<":
            dash = self.peek() == "-"
            if dash:
                self.advance()
            while self.peek() in (" ", "\t"):
                self.advance()
            target = self.word()
            self.heredocs.append(("".join(p[1] for p in target.parts), dash, start))
            self.redirects.append(Redirect("<<-" if dash else "<<", target, start=start))
            return
        if self.peek() and self.peek() not in "\n;&|":
            target = self.word()  # the target of the redirection: not part of the command
            if op in (">", ">>", "&>") and not duplicate:
                self.redirects.append(Redirect(op, target, start=start))

    def skip_heredocs(self) -> None:
        for delimiter, dash, start in self.heredocs:
            first, lines = self.line, []
            while self.i < len(self.s):
                end = self.s.find("\n", self.i)
                end = len(self.s) if end < 0 else end
                body = self.s[self.i:end]
                self.advance(end - self.i + 1)
                if (body.lstrip("\t") if dash else body) == delimiter:
                    break
                lines.append(body.lstrip("\t") if dash else body)
            self.bodies[start] = ("".join(line + "\n" for line in lines), first)
        self.heredocs = []

    def word(self, *, loose: bool = False) -> Word:
        start, line = self.i, self.line
        parts: list[Part] = []
        lit: list[str] = []
        plain: list[str] = []  # Word.text
        written: list[str] = []  # an expansion's text, added to plain after the literal text before it

        def flush() -> None:
            if lit:
                parts.append(("lit", "".join(lit), False))
                plain.extend(lit)
                lit.clear()

        while self.i < len(self.s):
            c = self.peek()
            if not loose and c in _DELIMITERS:
                if c == "(" and not parts and _ASSIGN_HEAD.fullmatch("".join(lit)):
                    flush()
                    self.advance()
                    items, titles = self.array()
                    return Word(tuple(parts), self.s[start:self.i], line, items, start, "".join(plain), titles)
                break
            if c == "\\":
                if self.peek(1) != "\n":
                    lit.append(self.peek(1))
                self.advance(2)
            elif c == "'":
                flush()
                parts.append(("lit", self.single(), True))
                plain.append(parts[-1][1])
            elif c == '"':
                flush()
                parts.extend(self.double(plain))
            elif c == "$" and self.peek(1) == '"':
                self.advance()
            elif c in "$`" and (part := self.dollar(quoted=False, plain=written)) is not None:
                flush()
                parts.append(part)
                plain.extend(written)
                written.clear()
            else:
                run = (_LOOSE_RUN if loose else _RUN).match(self.s, self.i)
                lit.append(run.group() if run else c)
                self.advance(len(lit[-1]))
        flush()
        return Word(tuple(parts), self.s[start:self.i], line, start=start, text="".join(plain))

    def array(self) -> tuple[tuple[Word, ...], tuple[tuple[int, str], ...]]:
        """The words of an array body up to its ``)``, and its titles: the comments that are alone
        on their line (after blanks), each with the number of words before it."""
        line = self.line
        out: list[Word] = []
        titles: list[tuple[int, str]] = []
        alone = True  # only blanks since the '(' or the last newline
        while True:
            c = self.peek()
            if not c:
                raise ShellSyntaxError("unterminated array: no ')' closes the '(' opened here", line)
            if c == ")":
                self.advance()
                return tuple(out), tuple(titles)
            if c in " \t\r\n" or (c == "\\" and self.peek(1) == "\n"):
                alone = c == "\n" or alone
                self.advance(2 if c == "\\" else 1)
            elif c == "#":
                begin = self.i + 1
                while self.peek() and self.peek() != "\n":
                    self.advance()
                if alone:
                    titles.append((len(out), self.s[begin:self.i].strip()))
            elif c in _DELIMITERS:
                raise ShellSyntaxError(f"unexpected {c!r} inside an array", self.line)
            else:
                out.append(self.word())
                alone = False

    def single(self) -> str:
        line = self.line
        end = self.s.find("'", self.i + 1)
        if end < 0:
            raise ShellSyntaxError("unterminated single quote", line)
        text = self.s[self.i + 1:end]
        self.advance(end + 1 - self.i)
        return text

    def double(self, plain: list[str] | None = None) -> list[Part]:
        """The parts of a double-quoted string; its text (expansions as written) goes to ``plain``."""
        line = self.line
        self.advance()
        parts: list[Part] = []
        lit: list[str] = []
        while True:
            c = self.peek()
            if not c:
                raise ShellSyntaxError("unterminated double quote", line)
            if c == '"':
                self.advance()
                break
            if c == "\\" and self.peek(1) in '$`"\\\n':
                if self.peek(1) != "\n":
                    lit.append(self.peek(1))
                self.advance(2)
            elif c in "$`" and (part := self.dollar(quoted=True, plain=plain, before=lit)) is not None:
                if lit:
                    parts.append(("lit", "".join(lit), True))
                    lit.clear()
                parts.append(part)
            else:
                run = _DOUBLE_RUN.match(self.s, self.i)
                lit.append(run.group() if run else c)
                self.advance(len(lit[-1]))
        if lit or not parts:
            parts.append(("lit", "".join(lit), True))
        if plain is not None:
            plain.extend(lit)
        return parts

    def dollar(self, *, quoted: bool, plain: list[str] | None = None, before: list[str] | None = None) -> Part | None:
        """The expansion at ``$`` or a backtick, or None for a literal ``$``. Its text as written
        (an ANSI-C quote decoded) goes to ``plain``, after the literal text ``before`` it."""
        start = self.i
        part = self._expansion(quoted=quoted)
        if part is not None and plain is not None:
            plain.extend(before or ())
            plain.append(part[1] if part[0] == "lit" else self.s[start:self.i])
        return part

    def _expansion(self, *, quoted: bool) -> Part | None:
        if self.peek() == "`":
            line = self.line
            end = self.s.find("`", self.i + 1)
            if end < 0:
                raise ShellSyntaxError("unterminated backtick", line)
            text = self.s[self.i + 1:end]
            self.advance(end + 1 - self.i)
            return ("tick", text, quoted)
        nxt = self.peek(1)
        if nxt == "(":
            self.advance()
            inner = self.balanced("(", ")")
            if inner.startswith("(") and inner.endswith(")"):
                return ("arith", inner[1:-1], quoted)
            return ("cmd", inner, quoted)
        if nxt == "{":
            self.advance()
            return ("var", self.balanced("{", "}", quoted=quoted), quoted)
        if nxt == "'" and not quoted:
            return ("lit", self.ansi_c(), True)
        match = re.compile(r"[A-Za-z_]\w*|[0-9@*#?$!-]").match(self.s, self.i + 1)
        if match is None:
            return None
        self.advance(1 + len(match.group()))
        return ("var", match.group(), quoted)

    def balanced(self, open_: str, close: str, *, quoted: bool = False) -> str:
        """The text between the bracket at the cursor and its match (quotes respected: single quotes
        too, except in a ``${...}`` inside double quotes, where bash takes them literally)."""
        line, start, depth = self.line, self.i + 1, 0
        special = _SPECIAL_IN[open_]
        while self.i < len(self.s):
            self.advance_to(special.search(self.s, self.i).start())  # type: ignore[union-attr]
            c = self.peek()
            if not c:
                break
            if c == "\\":
                self.advance(2)
                continue
            if c == "'" and (open_ == "(" or not quoted):
                self.single()
                continue
            if c == '"':
                self.double()
                continue
            if c == open_:
                depth += 1
            elif c == close:
                depth -= 1
                if depth == 0:
                    self.advance()
                    return self.s[start:self.i - 1]
            self.advance()
        raise ShellSyntaxError(f"unterminated '{open_}': no '{close}' closes it", line)

    def ansi_c(self) -> str:
        line = self.line
        self.advance(2)
        out: list[str] = []
        while True:
            c = self.peek()
            if not c:
                raise ShellSyntaxError("unterminated $'...' quote", line)
            self.advance()
            if c == "'":
                return "".join(out)
            if c == "\\":
                out.append(_ANSI_C.get(self.peek(), "\\" + self.peek()))
                self.advance()
            else:
                out.append(c)
