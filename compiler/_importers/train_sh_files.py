"""The files a launch script writes with a here-document (``cat > FILE <<TAG``, ``cat <<TAG > FILE``, ``tee FILE
<<TAG``, ``cat <<TAG | tee FILE``), as `acrl import train-sh` reads them: each one's file name and text as bash
would make them at that point of the script (an unquoted TAG: the body expanded as in "...", with the script's
variables; ``<<-``: leading tabs removed). :mod:`acrl.compiler._importers.train_sh_sglang` maps the one
``--sglang-config`` names. Nothing is run, and no file is read."""

from __future__ import annotations

import re

import attrs

from .._shell.eval import MARK, Shell, Text
from .._shell.lexer import Command, Redirect, Word, lex_loose

_QUOTE_IN_BODY = re.compile(r'\\(.)|"', re.DOTALL)


@attrs.frozen
class HereFile:
    """One write of a here-document to a file."""

    target: Text  # the file's name, as evaluated where the here-document is written
    text: str  # what is written (MARK where a part could not be resolved)
    problem: str | None  # why a part of the text cannot be resolved
    line: int  # the line of the command (where `<<TAG` is)
    body_line: int  # the line of the body's first line
    append: bool  # `>>` or `tee -a`: added to what the file held
    secret: str | None = None  # the secret-named variable whose value is in the text


def as_double_quoted(body: str) -> str:
    """A here-document's body as a "..." word meaning the same text: a `"` is literal in the body, and a backslash
    before it stays (bash removes a backslash only before ``$``, a backtick, a backslash or a newline there)."""
    def escape(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return '\\"'
        return '\\\\\\"' if match.group(1) == '"' else match.group(0)

    return '"' + _QUOTE_IN_BODY.sub(escape, body) + '"'


def _heredoc(command: Command) -> Redirect | None:
    return next((r for r in command.redirects if r.op in ("<<", "<<-")), None)


@attrs.define
class HereFiles:
    """The here-documents written to files, in the script's order."""

    files: list[HereFile] = attrs.Factory(list)
    previous: Command | None = None  # the command before, for `cat <<TAG | tee FILE`

    def see(self, command: Command, shell: Shell) -> None:
        """A top-level command: keep the files its here-document writes."""
        previous, self.previous = self.previous, command
        name = command.words[0].literal
        heredoc = _heredoc(command)
        if heredoc is None and name == "tee" and command.piped and previous is not None and \
                previous.words[0].literal == "cat" and len(previous.words) == 1 and \
                not any(r.op in (">", ">>", "&>") for r in previous.redirects):
            heredoc = _heredoc(previous)  # cat's output goes through the pipe
        if heredoc is None or name not in ("cat", "tee") or (name == "cat" and len(command.words) > 1):
            return
        targets: list[tuple[Word, bool]] = [(r.target, r.op == ">>") for r in command.redirects
                                            if r.op in (">", ">>", "&>")]
        if name == "tee":
            options = [w.text for w in command.words[1:] if w.text.startswith("-") and w.text != "-"]
            append = any(o in ("-a", "--append") or (not o.startswith("--") and "a" in o) for o in options)
            targets += [(w, append) for w in command.words[1:] if not w.text.startswith("-")]
        if not targets:
            return
        text, problem, secret = heredoc.body, None, None
        if not any(part[2] for part in heredoc.target.parts) and "\\" not in heredoc.target.raw:  # unquoted TAG
            (expanded, *_) = shell.expand(lex_loose(as_double_quoted(heredoc.body), heredoc.body_line), split=False,
                                          partial=True) or [Text("", heredoc.body_line)]
            text = expanded.text
            problem = expanded.problem or ("a part of it cannot be resolved" if MARK in text else None)
            secret = expanded.secret
        for word, append in targets:
            self.files.append(HereFile(shell.scalar(word), text, problem, command.line, heredoc.body_line, append,
                                       secret))

    def writing(self, name: Text) -> list[HereFile]:
        """The writes to the file ``name`` (a flag's value): the same text; for a name that cannot be resolved, the
        same words as written (quotes and braces aside) for the same reason (a mktemp call's, an unset variable's)
        -- said at the same line, else at any."""
        def key(text: Text, lined: bool) -> tuple[str, str | None]:
            if text.problem is None:
                return text.text, None
            written = re.sub(r"\$\{(\w+)\}", r"$\1", re.sub("[\"']", "", text.text))
            return written, text.problem if lined else re.sub(r"^line \d+: ", "", text.problem)

        exact = [f for f in self.files if key(f.target, True) == key(name, True)]
        return exact or [f for f in self.files if key(f.target, False) == key(name, False)]
