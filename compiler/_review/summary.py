"""The edit loop's one paragraph: what a recompile changed in the bundle it replaced, in `acrl diff`'s terms.

    replaced bundles/exp/  bundle sha256:...
      5 differences from the bundle it replaced. Spec: parallel.tensor 2 -> 4; train.lr 1e-06 -> 2e-06.
      Placement: actor 8 ranks: TP 2 x CP 1 x PP 1 x DP 4 -> 8 ranks: TP 4 x CP 1 x PP 1 x DP 2. Slime
      flags: --tensor-model-parallel-size 2 -> 4; --lr 1e-06 -> 2e-06.

The old and the new files are read and compared exactly as `acrl diff OLD NEW` compares two bundles
(view.read_view, changes.diff_views); this is that diff's headline: the count, then each section that
changed, what the user edited (the resolved spec) first and then what followed from it (derived
quantities, placement, slime flags, ...), a few changes each with their values (separated by semicolons:
a value may hold commas), the rest counted.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping

from .changes import BundleDiff, Change, diff_views
from .diff_format import _plain
from .text import printable
from .view import read_view

# The sections in the order the paragraph names them, each with its short name: the edit, then its consequences.
ORDER = (("spec", "Spec"), ("derived", "Derived"), ("placement", "Placement"), ("flags", "Slime flags"),
         ("model_args", "Model args"), ("custom_config", "Custom config"), ("runtime_env", "Ray job env"),
         ("launch", "Launch settings"), ("warnings", "Warnings"), ("script", "Script lines"), ("files", "Files"))
SHOWN = 4  # changes shown per section, then "and N more"
VALUE_WIDTH = 48  # a longer value is cut, with an ellipsis
WIDTH = 100  # the paragraph's lines, indent included: the same on every terminal, as the README shows it


def summary(old: Mapping[str, bytes], new: Mapping[str, bytes]) -> str:
    """What changed from the bundle files ``old`` to ``new``, as one sentence (unwrapped)."""
    diff = diff_views(read_view("old", old), read_view("new", new))
    if not diff.count:
        differing = sorted(n for n in set(old) | set(new) if old.get(n) != new.get(n))
        if not differing:
            return "no differences: only the files' modes were restored"
        return f"no semantic differences (byte differences in {', '.join(printable(n) for n in differing)})"
    return headline(diff)


def headline(diff: BundleDiff) -> str:
    """The count of ``diff``'s differences, then each section that has any, in ORDER."""
    sections = {s.id: s for s in diff.sections}
    parts = []
    for section_id, name in ORDER:
        section = sections.get(section_id)
        if section is None or not section.changes:
            continue
        items = [_item(section_id, c) for c in section.changes]
        if section_id == "warnings":
            added = sum(c.kind == "added" for c in section.changes)
            items = [w for w in (f"{added} new" if added else "",
                                 f"{len(items) - added} gone" if len(items) > added else "") if w]
        elif section_id == "script":
            items = [f"{len(items)} file{'s' if len(items) != 1 else ''}"]
        more = len(items) - SHOWN
        shown = "; ".join(items[:SHOWN]) + (f"; and {more} more" if more > 0 else "")
        parts.append(f"{name}: {shown}.")
    noun = "difference" if diff.count == 1 else "differences"
    return printable(" ".join([f"{diff.count} {noun} from the bundle it replaced.", *parts]))


def wrapped(text: str, indent: str = "  ") -> str:
    """``text`` as a paragraph of lines of at most WIDTH characters (a word longer than that stays whole),
    never broken inside "before -> after"."""
    glued = text.replace(" -> ", f"{_GLUE}->{_GLUE}")
    return textwrap.fill(glued, WIDTH, initial_indent=indent, subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False).replace(_GLUE, " ")


_GLUE = "\u00a0"  # a space textwrap does not break at; never in a summary's text (printable escapes it)


def _item(section: str, change: Change) -> str:
    """One change in a few words; keys as `acrl diff --format json` names them (a derived quantity's label has
    commas, which a list of changes separated by commas cannot hold)."""
    key = change.key
    if section == "files":  # a known file's status is "missing" where the bundle has none
        added = change.kind == "added" or change.before == "missing"
        removed = change.kind == "removed" or change.after == "missing"
        return f"{'+' if added else '-' if removed else '~'}{key}"
    if change.kind == "changed":
        return f"{key} {_value(change.before)} -> {_value(change.after)}"
    if change.kind == "added":
        if change.after == ():  # a flag without a value
            return f"{key} (added)"
        return f"{key} {'' if section in _ARGV else '= '}{_value(change.after)} (added)"
    return f"{key} (removed)"


_ARGV = frozenset({"flags", "model_args"})  # a flag and its values, as the argv has them: no "="


def _value(value: object) -> str:
    text = _plain(value)
    return text if len(text) <= VALUE_WIDTH else text[:VALUE_WIDTH - 1] + "…"
