"""Each value of a spec against its own key's metadata (compiler/_spec/setting.py), on the raw TOML data, so that
these errors come with the type errors of the same compile: numeric ranges (``ge``/``gt``/``le``/``lt``) and what a
string key holds (``kind``: a path, a name, a Python function), for values, table values, array items and table
keys alike. The declaration is made once, on the key; nothing here names a key.

Every check yields ``(path, message, fix)``; the structure stage (structure.py) turns it into a located diagnostic.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator, Mapping
from typing import Any

import attrs

from .._spec.setting import FUNCTION, LONGEST, VISIBLE, Kind
from .._spec.tables import Spec, table_class
from .parse import KeyPath

NAME_MAX = 255  # bytes of one path component (Linux, and most file systems)
PATH_MAX = LONGEST["path"]  # bytes of a whole path (Linux's 4096 with the terminating NUL)
SHOWN = 60  # the most characters of a value a message shows
_VISIBLE, _FUNCTION = re.compile(VISIBLE), re.compile(FUNCTION)

# (where, what is wrong, the fix, kept): a kind's problem is kept, its value of the right type held as written by a
# partial spec (compiler/_pipeline/partial.py); a number out of its range is taken out (a rule could divide by it)
Problem = tuple[KeyPath, str, str, bool]

_WHAT = {"path": "a path", "name": "a name", "function": "a Python function as module.function"}


def shown_value(value: object) -> str:
    """``value`` as a message shows it: repr, cut to SHOWN characters (an integer of any size, a
    string of a megabyte: the message stays a line)."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10 ** SHOWN:
        digits = len(str(abs(value))) if abs(value).bit_length() < 14_000 else "over 4,000"
        return f"{'a negative' if value < 0 else 'an'} integer of {digits} digits"
    text = repr(value) if not isinstance(value, float) else f"{value:g}"
    return text if len(text) <= SHOWN else text[:SHOWN - 3] + "..."


def check_values(data: Mapping[str, Any], cl: Any, path: KeyPath = ()) -> Iterator[Problem]:
    """Every range and kind problem of the raw ``data`` of the attrs class ``cl`` (the spec, a table, a server
    group), depth first in the class's field order. Values of the wrong type are left to structuring."""
    for field in attrs.fields(cl):
        if field.name not in data:
            continue
        value, here = data[field.name], (*path, field.name)
        inner = _table(field.type)
        if inner is not None:
            if isinstance(value, Mapping):
                yield from check_values(value, inner, here)
            continue
        yield from _bounds(value, field, here)
        yield from _kinds(value, field, here)
        item = _item_class(field.type)
        if item is not None and isinstance(value, Mapping):  # [sglang.models.NAME]: a table of tables
            for name, sub in value.items():
                if isinstance(sub, Mapping):
                    yield from check_values(sub, item, (*here, name))
        elif item is not None and isinstance(value, list):  # server_groups: an array of tables
            for i, sub in enumerate(value):
                if isinstance(sub, Mapping):
                    yield from check_values(sub, item, (*here, i))


def _table(tp: Any) -> Any:
    """The attrs class of a table key (``Cluster``, ``AgentCore | None``); None for a table of tables."""
    return None if typing.get_origin(tp) in (dict, list) else table_class(tp)


def _item_class(tp: Any) -> Any:
    """The attrs class of a table's values or an array's items (dict[str, SglangModel], list[ServerGroup])."""
    args = typing.get_args(tp)
    return table_class(args[-1]) if typing.get_origin(tp) in (dict, list) and args else None


def _bounds(value: Any, field: Any, here: KeyPath) -> Iterator[Problem]:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return
    for bound, test, word in (("ge", value.__ge__, "at least"), ("gt", value.__gt__, "greater than"),
                              ("le", value.__le__, "at most"), ("lt", value.__lt__, "less than")):
        limit = field.metadata.get(bound)
        if limit is not None and not test(limit):
            yield here, f"must be {word} {limit:g}, got {shown_value(value)}", \
                f"set {field.name} to a value {word} {limit:g}", False


def _kinds(value: Any, field: Any, here: KeyPath) -> Iterator[Problem]:
    kind, key_kind = field.metadata.get("kind"), field.metadata.get("key_kind")
    flag = field.metadata.get("flag")
    if key_kind is not None and isinstance(value, Mapping):
        for name in value:
            if isinstance(name, str):
                yield from (((*here, name), f"the name {m}", fix, True)
                            for m, fix in kind_problems(name, key_kind, None))
    if kind is None:
        return
    if isinstance(value, str):
        required = field.default is attrs.NOTHING
        yield from ((here, m, fix, True) for m, fix in kind_problems(value, kind, flag, required=required))
    elif isinstance(value, Mapping):
        for name, item in value.items():
            if isinstance(item, str):
                yield from (((*here, name), m, fix, True) for m, fix in kind_problems(item, kind, flag, name))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            if isinstance(item, str):
                yield from (((*here, i), m, fix, True) for m, fix in kind_problems(item, kind, flag))


def kind_problems(value: str, kind: Kind, flag: str | None, name: str | None = None, *,
                  required: bool = False) -> Iterator[tuple[str, str]]:
    """(what is wrong, the fix) for ``value`` as a ``kind``: at most one, the first that applies. ``flag``: the slime
    flag the value is passed with, to say what slime would be given; ``name``: the value's table key, if any;
    ``required``: the key has no default (leaving it out is no fix)."""
    what = _WHAT[kind]
    if not value.strip():
        # an eval dataset's pair reaches slime as it is: --eval-prompt-data NAME '' (a scalar key's may be left out)
        given = f" (slime would be passed {flag} {name} {value!r})" if flag and name is not None else ""
        fix = f"give {name}'s {'path' if kind == 'path' else kind}, or remove the line" if name is not None else \
            f"give {what}" if required else f"give {what}, or remove the line to leave it unset"
        yield (f"is empty: {what} is needed here{given}" if not value else
               f"is only blank space ({shown_value(value)}): {what} is needed here{given}", fix)
        return
    if not _VISIBLE.search(value):  # a hidden character, or blank space around the value
        bad = next((c for c in value if not _VISIBLE.search("x" + c + "x")), None)
        if bad is not None:
            named = {"\n": " (a line break)", "\r": " (a line break)", "\t": " (a tab)", "\0": " (NUL)"}.get(bad, "")
            yield (f"holds the control character U+{ord(bad):04X}{named}, which no {kind} has: {shown_value(value)}",
                   f"remove it: {what} is one line of visible characters")
        else:
            where = "starts" if value[:1].isspace() or not _VISIBLE.search(value[:1] + "x") else "ends"
            yield (f"{where} with blank space: {shown_value(value)}", f"write it without: {shown_value(value.strip())}")
        return
    if kind == "path":
        yield from _path_problems(value)
        return
    if len(value) > LONGEST[kind]:
        yield (f"too long for {what}: {len(value):,} characters (the limit is {LONGEST[kind]})",
               f"give {what} of at most {LONGEST[kind]} characters")
        return
    if kind == "function" and not _FUNCTION.search(value):
        yield (f"{shown_value(value)} is not {what}: slime imports the module before the last '.' and takes the "
               "function after it", _function_fix(value))


def _path_problems(value: str) -> Iterator[tuple[str, str]]:
    """A path no file system can name ("File name too long" in an os call, later)."""
    size = len(value.encode("utf-8", "surrogatepass"))
    longest = max((len(part.encode("utf-8", "surrogatepass")) for part in value.split("/")), default=0)
    if size > PATH_MAX:
        yield f"path too long: {size:,} bytes (the limit is {PATH_MAX:,})", "give a shorter path"
    elif longest > NAME_MAX:
        yield (f"path component too long: {longest:,} bytes between two '/' (the limit is {NAME_MAX})",
               f"give a path whose every name is at most {NAME_MAX} bytes")


def _function_fix(value: str) -> str:
    """The fix of a function path, in the user's own words where they are a file path or module:function."""
    candidate = re.sub(r"\.py(?=[:.]|$)", "", value.strip("/")).replace("/", ".").replace(":", ".")
    if candidate != value and _FUNCTION.search(candidate):
        return f'write it as "{candidate}"'
    if value.isidentifier():
        return f'name its module too: "my_module.{value}"'
    return 'write the module and the function, separated by dots: "my_package.my_module.my_function"'


def field_at(path: KeyPath) -> Any:
    """The attrs field of the key at ``path`` (through tables, tables of tables and arrays of tables), or None."""
    cl: Any = Spec
    skip = False
    field = None
    for step in path:
        if skip:  # a name of a table of tables, an index of an array of tables
            skip = False
            continue
        fields = attrs.fields_dict(cl) if cl is not None and attrs.has(cl) else {}
        field = fields.get(step) if isinstance(step, str) else None
        if field is None:
            return None
        cl = _table(field.type)
        if cl is None:
            cl, skip = _item_class(field.type), True
    return field


def keys_of_kind(kind: Kind, cl: Any = None, path: KeyPath = ()) -> list[KeyPath]:
    """The keys whose values are of ``kind``: "*" stands for any name of a table's keys, 0 for an array's items."""
    out: list[KeyPath] = []
    for field in attrs.fields(Spec if cl is None else cl):
        here = (*path, field.name)
        inner = _table(field.type)
        if inner is not None:
            out += keys_of_kind(kind, inner, here)
            continue
        each: str | int = "*" if typing.get_origin(field.type) is dict else 0  # any name; an item of an array
        if field.metadata.get("kind") == kind:
            out.append((*here, each) if typing.get_origin(field.type) in (dict, list) else here)
        item = _item_class(field.type)
        if item is not None:
            out += keys_of_kind(kind, item, (*here, each))
    return out
