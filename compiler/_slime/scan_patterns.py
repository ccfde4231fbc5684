"""The regular expressions of the source scanner (:mod:`.scan`, :mod:`.scan_fields`): each consumes strings and
comments whole, so that nothing inside them matches, and reads Python source text without parsing it."""

from __future__ import annotations

import re

_SQ = r'"[^"\\\n]*(?:\\.[^"\\\n]*)*"|' + r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'"
_TQ = r'"""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""|' + r"'''[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''"
_SKIP = rf"{_TQ}|{_SQ}|#[^\n]*"  # strings and comments, consumed whole so nothing inside them matches
_LIT = rf"[rRuU]?(?:{_SQ})"
_GAP = r"(?:\s|#[^\n]*|\\\n)*"
# The leading lookaheads let the regex engine skip uninteresting characters in C (~4x faster).
CALLS = re.compile(
    rf"(?=[\"'#aAr])(?:{_SKIP}|(?P<head>add_argument|reset_arg|ArgumentGroupFactory)\s*\()", re.S
)
POSITIONAL = re.compile(
    rf"{_GAP}(?:(?P<lits>{_LIT}(?:{_GAP}{_LIT})*)|[A-Za-z_][\w.]*){_GAP}(?P<end>[,)])", re.S
)
PIECE = re.compile(_LIT, re.S)
BRACKETS = re.compile(rf"(?=[\"'#(\[{{)\]}}])(?:{_SKIP}|(?P<open>[(\[{{])|(?P<close>[)\]}}]))", re.S)
BOOL_ACTION = re.compile(r"\baction\s*=\s*(?:\w+\s*\.\s*)*BooleanOptionalAction\b")
LINES = re.compile(
    rf"(?=[\"'#\n])(?:{_SKIP}|\n(?P<ind>[ \t]*)(?=(?P<field>[A-Za-z_]\w*)[ \t]*:(?!=)|[^\s#)\]}}]))", re.S
)
CLASS = r"class[ \t]+{}\b[ \t]*(?:\((?P<bases>[^()]*(?:\([^()]*\)[^()]*)*)\))?[ \t]*:"
IMPORT = re.compile(r"from[ \t]+(?P<mod>\.*[\w.]*)[ \t]+import[ \t]+(?P<names>\([^)]*\)|[^\n]*)")
ADD_ARGS_FUNC = re.compile(r"_?add_\w*arg")
