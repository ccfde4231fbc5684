"""tomllib's syntax errors, said in plain words: what is wrong, where, and the fix.

tomllib says ``Cannot overwrite a value`` for a key written twice, ``Illegal character '\\n'`` for a string left open
and ``Invalid value`` for a word without quotes. Each message it raises (CPython 3.11-3.13 Lib/tomllib/_parser.py:
suffixed_err) is recognised here and rewritten with the key, the table, and for a duplicate both lines: the text up
to the faulty line is valid TOML (tomllib stops at the first error), so it is parsed and scanned for where the key
was first written. A message not recognised keeps tomllib's words.
"""

from __future__ import annotations

import re
import tomllib

import attrs

from .key_positions import scan_positions

_AT = re.compile(r"\s*\((?:at line (\d+), column (\d+)|at end of document)\)")
_KEY = re.compile(r"""\s*((?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"\n]*"|'[^'\n]*'))*)""")
_HEADER = re.compile(r"""\s*\[(\[?)\s*([^\]\n]+?)\s*\]""")
_TOML = "https://toml.io/en/v1.0.0"


@attrs.frozen
class Said:
    """A syntax error in plain words; ``line`` and ``column`` are 1-based, None where tomllib gave no place."""

    message: str
    hint: str
    line: int | None
    column: int | None
    key: tuple[str, ...] = ()  # the key the faulty line writes, in its table (none for a table header)


def plain(text: str, error: str) -> Said:
    """tomllib's ``error`` about ``text``, rewritten (see the module's docstring), with the key of the faulty line."""
    said = _plain(text, error)
    lines = text.split("\n")
    here = lines[said.line - 1] if said.line is not None and 0 < said.line <= len(lines) else ""
    key = _KEY.match(here)
    if key is None or said.message.startswith(("duplicate table", "a table header")) or \
            (not here[key.end():].lstrip().startswith("=") and "expected '='" not in said.message):
        return said
    assert said.line is not None
    return attrs.evolve(said, key=(*_table_at(lines, said.line), *_key_parts(key.group(1))))


def _plain(text: str, error: str) -> Said:
    at = _AT.search(error)
    reason = _AT.sub("", error).strip()
    line = int(at.group(1)) if at and at.group(1) else None
    column = int(at.group(2)) if at and at.group(2) else None
    lines = text.split("\n")
    here = lines[line - 1] if line is not None and 0 < line <= len(lines) else ""
    if reason == "Unterminated string" or (reason == "Illegal character '\\n'" and _open_string(here) is not None):
        if line is None:
            line, column = _last_open_string(lines)
        else:
            column = _open_string(here)
        return Said("unterminated string: the string that starts here has no closing quote", (
            'close it with the same quote on this line; a string of several lines is written between triple quotes '
            '("""...""")'), line, column)
    if reason.startswith("Illegal character"):
        char = reason.removeprefix("Illegal character ").strip("'")
        return Said(f"a string holds the control character {char}, which TOML does not allow in one",
                    f"write it as an escape: \\u{_code(char):04X}", line, column)
    if reason == "Cannot overwrite a value" and line is not None:
        return _duplicate_key(lines, line)
    declared = re.fullmatch(r"Cannot declare \((.*)\) twice", reason)
    if declared and line is not None:
        return _duplicate_table(lines, line, column, _tuple_path(declared.group(1)))
    inline = re.fullmatch(r"Duplicate inline table key '(.*)'", reason)
    if inline:
        return Said(f"duplicate key: {inline.group(1)} is written twice in the same {{ ... }}", "keep one of them",
                    line, column)
    return Said(*_other(reason, here, column), line, column)


def _other(reason: str, here: str, column: int | None) -> tuple[str, str]:
    """Message and fix of the other errors."""
    key = _KEY.match(here)
    value = here.split("=", 1)[1].strip() if "=" in here else ""  # where tomllib gave no column
    if reason == "Invalid value":
        word = re.match(r"[^\s,\]}#]+", here[column - 1:] if column else value)
        shown = word.group()[:40] if word else ""
        name = key.group(1) if key else "key"
        if not any(c.isalnum() for c in shown):
            return ("expected a value here: a number, true or false, a \"quoted string\", an [array] or an "
                    "{ inline table }", f"write {name} = VALUE, one '=' and one value")
        if shown.lower() in ("true", "false", "yes", "no", "on", "off"):
            truth = "true" if shown.lower() in ("true", "yes", "on") else "false"
            return f"{shown} is not a TOML value: booleans are true and false, in lowercase", f"write {name} = {truth}"
        return (f"{shown} is not a TOML value: text must be quoted, numbers and booleans are written bare",
                f'write {name} = "{shown}" if it is text')
    if reason == "Expected '=' after a key in a key/value pair":
        name = key.group(1) if key else here.strip()
        rest = here[key.end():].strip() if key else ""
        return (f"expected '=' after the key {name}: each line is key = value, a [table] header or a # comment",
                f"write {name} = {rest or 'VALUE'}; a key with spaces is quoted (\"a key\" = 1), a comment starts "
                "with #")
    if reason == "Expected newline or end of document after a statement":
        number = re.search(r"\d{1,3}(?:,\d{3})+(?![\d,])", here)
        if number:
            plain_number = number.group().replace(",", "")
            return (f"{number.group()} is not a TOML number: ',' does not separate thousands",
                    f"write {key.group(1) if key else 'key'} = {plain_number} (or {number.group().replace(',', '_')})")
        return ("expected the end of the line after the value: one key = value per line",
                "put the next key on its own line; a comment starts with #")
    if reason == "Unclosed array":
        return ("an array is not closed: its items are separated by commas, and ] ends it",
                "close the array with ] (an array may span lines; a comma after the last item is allowed)")
    if reason == "Unclosed inline table":
        return ("an inline table is not closed: { key = value, ... } is written on one line and ended by }",
                "close it with } on the same line, or write it as a [table] with a key per line")
    if reason.startswith("Expected ']"):
        header = re.match(r"\s*(\[\[?)\s*([^\]\s#]*)", here)
        opened, name = (header.group(1), header.group(2)) if header else ("[", "table")
        return ("a table header is not closed", f"write it as {opened}{name or 'table'}{']' * len(opened)}")
    if reason == "Unescaped '\\' in a string":
        quoted = re.search(r'"([^"\n]*)"?', here)
        content = quoted.group(1) if quoted else "C:\\data"
        at = here.rfind("\\", 0, column) if column else -1  # tomllib points just after the escape
        bad = here[at:at + 2] if at >= 0 else "this one"
        return (f"a backslash in a \"...\" string starts an escape (\\n, \\t, \\u0041), and {bad} is none",
                f"write the value in single quotes, where a backslash is itself ('{content}'), or double each "
                "backslash")
    if reason == "Invalid initial character for a key part":
        return ("a key starts with a character keys cannot start with",
                "a bare key is letters, digits, '_' and '-'; any other key is quoted: \"my key\" = 1")
    if reason.startswith("Cannot mutate immutable namespace"):
        return ("this table was written whole above (inline { ... } or as an array) and cannot be extended here",
                "add the keys to the table where it is written")
    return f"TOML syntax error: {reason}", f"see {_TOML} for the syntax"


def _code(char: str) -> int:
    try:
        return ord(char.encode().decode("unicode_escape"))
    except (UnicodeDecodeError, TypeError):
        return 0


def _open_string(line: str) -> int | None:
    """The 1-based column of the quote that opens a string not closed on ``line``, or None."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "#":
            return None
        if c in "\"'":
            if line.startswith(c * 3, i):
                return None  # a multi-line string: may close on a later line
            j = i + 1
            while j < len(line) and line[j] != c:
                j += 2 if c == '"' and line[j] == "\\" else 1
            if j >= len(line):
                return i + 1
            i = j + 1
            continue
        i += 1
    return None


def _last_open_string(lines: list[str]) -> tuple[int | None, int | None]:
    """Where the string left open at the end of the document starts (the last line that opens one)."""
    for number in range(len(lines), 0, -1):
        text = lines[number - 1]
        column = _open_string(text)
        if column is None and ('"""' in text or "'''" in text):
            column = max(text.rfind('"""'), text.rfind("'''")) + 1
        if column is not None:
            return number, column
    return None, None


def _tuple_path(text: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("'\"") for part in text.split(",") if part.strip())


def _table_at(lines: list[str], line: int) -> tuple[str, ...]:
    """The table whose keys line ``line`` writes: the last [header] above it."""
    for number in range(line - 1, 0, -1):
        header = _HEADER.match(lines[number - 1])
        if header and not lines[number - 1].lstrip().startswith("#"):
            return tuple(p.strip().strip("'\"") for p in header.group(2).split("."))
    return ()


def _key_parts(key: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("'\"") for p in re.findall(r"""(?:"[^"]*"|'[^']*'|[^.]+)""", key))


def _first_line(lines: list[str], line: int, path: tuple[str, ...]) -> int | None:
    """Where ``path`` was written before line ``line`` (the text above it is valid TOML)."""
    above = "\n".join(lines[:line - 1])
    try:
        tomllib.loads(above)
    except tomllib.TOMLDecodeError:
        return None
    positions = scan_positions(above)
    found = positions.get(path)
    if found is None:  # in an array of tables: the last entry's
        found = next((at for p, at in reversed(list(positions.items()))
                      if len(p) == len(path) + 1 and p[-1] == path[-1]), None)
    return found[0] if found else None


def _duplicate_key(lines: list[str], line: int) -> Said:
    here = lines[line - 1]
    key = _KEY.match(here)
    if key is None:
        return Said("a value is written twice for the same key", "keep one of them", line, 1)
    path = (*_table_at(lines, line), *_key_parts(key.group(1)))
    first = _first_line(lines, line, path)
    also = f", at line {first} and at line {line}" if first else " (first above this line)"
    return Said(f"duplicate key: written twice{also}", "keep one of them: TOML allows a key once in its table",
                line, len(here) - len(here.lstrip()) + 1)


def _duplicate_table(lines: list[str], line: int, column: int | None, path: tuple[str, ...]) -> Said:
    name = ".".join(path)
    first = next((n for n in range(1, line) if (h := _HEADER.match(lines[n - 1])) and not h.group(1) and
                  tuple(p.strip().strip("'\"") for p in h.group(2).split(".")) == path), None)
    also = f", at line {first} and at line {line}" if first else ""
    return Said(f"duplicate table: [{name}] is declared twice{also}",
                f"merge the two into one [{name}] table", line, 1)
