"""`acrl diff`'s formats: text for a terminal and GitHub-flavoured markdown (JSON is ``BundleDiff.as_json``)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from typing import Any

from .changes import ABSENT, DERIVED_LABELS, BundleDiff, Change, Section
from .text import printable
from .view import TYPE_TAG


def _plain(value: Any) -> str:
    if isinstance(value, tuple):
        return shlex.join(value) if value else "(set)"
    if isinstance(value, str):
        return value if value and value.strip() == value else json.dumps(value)
    if isinstance(value, dict) and set(value) == {TYPE_TAG, "value"} and isinstance(value["value"], str):
        return f"{value[TYPE_TAG]} {value['value']}"  # a date, not the string "2001-01-01" (see json_value)
    return json.dumps(value, default=str)


def format_text(diff: BundleDiff) -> str:
    """The diff for a terminal: one line per change, grouped by section (and flag group)."""
    if diff.equivalent:
        lines = [f"{diff.a} and {diff.b} are equivalent (no semantic differences)", *(f"note: {n}" for n in diff.notes)]
        return "\n".join(printable(line) for line in lines)
    noun = "difference" if diff.count == 1 else "differences"
    out = [f"--- {diff.a}", f"+++ {diff.b}", f"{diff.count} {noun}"]
    for section in diff.sections:
        if not section.changes:
            continue
        out.append(f"{section.title}:")
        group = None
        for change in section.changes:
            if change.group is not None and change.group != group:
                group = change.group
                out.append(f"  [{group}]")
            out += [("    " if group else "  ") + line for line in _text_lines(section.id, change)]
    out += [f"not equivalent: {line}" for line in diff.unverified]
    # spec values reach these lines: a control character (a terminal escape) is shown, never sent to the terminal
    return "\n".join(printable(line) for line in out + [f"note: {n}" for n in diff.notes])


def _text_lines(section: str, change: Change) -> list[str]:
    key = DERIVED_LABELS.get(change.key, change.key) if section == "derived" else change.key
    if section == "script":
        return [f"{key}:", *(f"  - {line}" for line in change.before), *(f"  + {line}" for line in change.after)]
    if section == "warnings":
        return [f"{'+' if change.kind == 'added' else '-'} {key}"]
    if change.kind == "changed":
        return [f"~ {key}: {_plain(change.before)} -> {_plain(change.after)}"]
    value = change.after if change.kind == "added" else change.before
    shown = "" if value == () else f": {_plain(value)}"
    return [f"{'+' if change.kind == 'added' else '-'} {key}{shown}"]


def _code(text: str) -> str:
    """A markdown code span that survives a table cell: pipes escaped, newlines shown as \\n."""
    text = text.replace("\n", "\\n").replace("|", "\\|")
    run = max((len(r) for r in _backtick_runs(text)), default=0)
    fence = "`" * (run + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _backtick_runs(text: str) -> list[str]:
    runs, current = [], ""
    for c in text:
        if c == "`":
            current += c
        elif current:
            runs.append(current)
            current = ""
    return [*runs, current] if current else runs


def _cell(section: str, value: Any) -> str:
    if value is ABSENT:
        return "_absent_"
    if value == ():
        return "_set_"
    return _code(_plain(value))


def format_markdown(diff: BundleDiff) -> str:
    """The diff as GitHub-flavoured markdown, ready to paste into a pull request."""
    out = [f"### `acrl diff` {_code(diff.a)} → {_code(diff.b)}", ""]
    if diff.equivalent:
        out.append("No semantic differences.")
    elif not diff.count:
        out.append("**0 semantic differences**, but a bundle that does not match its manifest is equivalent to "
                   "nothing.")
    else:
        counts = ", ".join(f"{s.title} ({len(s.changes)})" for s in diff.sections if s.changes)
        out.append(f"**{diff.count} difference{'s' if diff.count != 1 else ''}**: {counts}.")
    for section in diff.sections:
        if not section.changes:
            continue
        title = f"{section.title[0].upper()}{section.title[1:]}"
        if section.id == "spec" or (section.id == "script" and _lines(section) > 12):  # long; said above
            out += ["", f"<details><summary><b>{title}</b> ({len(section.changes)})</summary>", "",
                    *_md_section(section), "", "</details>"]
        else:
            out += ["", f"#### {title}", "", *_md_section(section)]
    if diff.unverified or diff.notes:
        out.append("")
        out += [f"> **Not equivalent:** {line}  " for line in diff.unverified]
        out += [f"> **Note:** {note}  " for note in diff.notes]
    return "\n".join(printable(line) for line in out).rstrip() + "\n"


def _lines(section: Section) -> int:
    return sum(len(c.before) + len(c.after) for c in section.changes)


def _md_section(section: Section) -> list[str]:
    if section.id == "script":
        out = []
        for change in section.changes:
            lines = [f"- {line}" for line in change.before] + [f"+ {line}" for line in change.after]
            fence = "`" * max(3, 1 + max((len(r) for line in lines for r in _backtick_runs(line)), default=0))
            out += [f"{_code(change.key)}: {len(change.before)} removed, {len(change.after)} added", "",
                    f"{fence}diff", *lines, fence, ""]
        return out[:-1]
    if section.id == "warnings":
        return [f"- {'added' if c.kind == 'added' else 'removed'}: {_code(c.key)}" for c in section.changes]
    label: Callable[[Change], str] = (lambda c: DERIVED_LABELS.get(c.key, _code(c.key))) \
        if section.id == "derived" else (lambda c: _code(c.key))
    group = section.id == "flags"
    head = "| group | flag | before | after |" if group else \
        f"| {'quantity' if section.id == 'derived' else 'key'} | before | after |"
    out = [head,
           "|---|---|---|---|" if group else "|---|---|---|"]
    for change in section.changes:
        cells = [label(change), _cell(section.id, change.before), _cell(section.id, change.after)]
        out.append("| " + " | ".join([change.group or "", *cells] if group else cells) + " |")
    return out


