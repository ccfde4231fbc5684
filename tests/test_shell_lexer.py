"""The one shell lexer (acrl.compiler._shell.lexer), on its own: quoting, escapes, continuations,
comments, arrays and their titles, here-documents, unterminated input; and the property the bundle
readers rest on: whatever strings the templates quote (the ``sh``/``shwords`` filters) lex back to
exactly those strings, as literal text, never an expansion, and bash agrees."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from acrl.compiler._pipeline.render import _sh, _shwords
from acrl.compiler._shell.lexer import ShellSyntaxError, Word, lex, lex_loose


def words(text: str) -> list[list[str]]:
    """Each command's words as their text (quotes removed, expansions as written)."""
    return [[w.text for w in command.words] for command in lex(text)]


def only(text: str) -> Word:
    (command,) = lex(text)
    (word,) = command.words
    return word


@pytest.mark.parametrize(("source", "expected"), [
    ("a 'b c' d", [["a", "b c", "d"]]),
    ("'it'\\''s'", [["it's"]]),  # shlex.quote's way of writing a single quote
    ('"a \\"b\\" \\$c \\\\ \\x"', [['a "b" $c \\ \\x']]),  # inside "...": only \\ \" \$ \` escape
    ("a\\ b \\'c", [["a b", "'c"]]),
    ("$'a\\nb\\tc\\'d'", [["a\nb\tc'd"]]),
    ("a \\\n  b", [["a", "b"]]),  # a line continuation joins the lines
    ('"a\\\nb"', [["ab"]]),
    ("a # b 'c\nd#e", [["a"], ["d#e"]]),  # '#' starts a comment only at the start of a word
    ("a; b && c | d\ne", [["a"], ["b"], ["c"], ["d"], ["e"]]),
    ('x="$A"\'$B\'${C:-d}', [["x=$A$B${C:-d}"]]),
    ("echo $(a 'b)' c) `d` $((1 + 2))", [["echo", "$(a 'b)' c)", "`d`", "$((1 + 2))"]]),
    ("cat <<'EOF' >out\n$(not run) 'unclosed\nEOF\nnext", [["cat"], ["next"]]),  # here-document skipped
    ("cat <<-END\n\t'unclosed\n\tEND\nnext", [["cat"], ["next"]]),
    ("a 2>/dev/null b", [["a", "b"]]),
])
def test_words_and_commands(source: str, expected: list[list[str]]) -> None:
    assert words(source) == expected


def test_parts_say_what_is_literal_and_what_expands() -> None:
    word = only('a"$B"\'$C\'${D}$(e)')
    assert word.parts == (("lit", "a", False), ("var", "B", True), ("lit", "$C", True), ("var", "D", False),
                          ("cmd", "e", False))
    assert word.literal is None
    assert only("plain").literal == "plain"


def test_a_single_quote_protects_a_brace_in_an_unquoted_default_only() -> None:
    assert only("${X:-'a}b'}").parts == (("var", "X:-'a}b'", False),)
    assert lex_loose("'a}b'", 1).text == "a}b"
    # inside double quotes, bash takes the single quote literally: the first '}' closes
    assert only("\"${X:-'a}\"").parts == (("var", "X:-'a", True),)


def test_arrays_assign_append_and_keep_titles_and_offsets() -> None:
    source = "  X=(\n  # first\n  --a 1 \\\n    2 # not a title\n  # second\n  --b \"q\"\n)\nX+=(--c ')')\n"
    first, second = (command.words[0] for command in lex(source))
    assert first.array is not None and second.array is not None
    assert (first.text, [w.text for w in first.array]) == ("X=", ["--a", "1", "2", "--b", "q"])
    assert first.titles == ((0, "first"), (3, "second"))
    assert (second.text, [w.text for w in second.array], second.titles) == ("X+=", ["--c", ")"], ())
    assert source[first.start:first.start + len(first.raw)].startswith("X=(") and first.raw.endswith(")")
    assert (first.line, second.line) == (1, 8)


@pytest.mark.parametrize(("source", "line"), [
    ("a\nb 'c\nd", 2),
    ('a "b', 1),
    ("\n\nX=(a b\n", 3),
    ("a $'b", 1),
    ("a `b", 1),
    ("a ${b", 1),
    ("a $(b 'c)' d", 1),
])
def test_unterminated_input_is_a_syntax_error_with_its_line(source: str, line: int) -> None:
    with pytest.raises(ShellSyntaxError) as caught:
        lex(source)
    assert caught.value.line == line
    assert isinstance(caught.value, ValueError)  # what the bundle readers catch


def test_unterminated_wording() -> None:  # the one golden wording test of the lexer's messages
    with pytest.raises(ShellSyntaxError, match=r"^unterminated single quote$"):
        lex("a 'b")
    with pytest.raises(ShellSyntaxError, match=r"^unterminated array: no '\)' closes the '\(' opened here$"):
        lex("X=(a")


def test_an_unexpected_operator_inside_an_array_is_refused() -> None:
    with pytest.raises(ShellSyntaxError) as caught:
        lex("X=(a\n b; c)")
    assert caught.value.line == 2


values = st.text(st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=12)


@given(st.lists(values, max_size=6))
def test_quoted_words_lex_back_to_exactly_the_values(items: list[str]) -> None:
    """What ``shwords`` writes is read back as the values, each one word of literal parts only:
    a `$`, backtick, quote, '#', blank or newline in a value is never code or a word break."""
    line = _shwords(items)
    commands = lex(f"X=( {line} )\n") if items else []
    got = commands[0].words[0].array if commands else ()
    assert [w.text for w in got or ()] == items
    assert all(part[0] == "lit" for w in got or () for part in w.parts)
    for item in items:  # one value on its own, as `readonly NAME={{ value | sh }}` writes it
        word = only(f"NAME={_sh(item)}")
        assert (word.text, word.array) == (f"NAME={item}", None)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@settings(max_examples=25, deadline=None)
@given(st.lists(values, min_size=1, max_size=4))
def test_bash_reads_the_quoted_words_as_the_lexer_does(items: list[str]) -> None:
    script = f"X=( {_shwords(items)} )\nprintf '%s\\0' \"${{X[@]}}\"\n"
    out = subprocess.run(["bash", "-c", script], capture_output=True, check=True).stdout
    assert out.decode("utf-8", "surrogateescape").split("\0")[:-1] == items
    assert [w.text for w in lex(script)[0].words[0].array or ()] == items
