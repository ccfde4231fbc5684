"""What can be checked of a spec that does not structure: every error at once.

A spec with a type error, an unknown key or a missing table still holds keys that are right. The refused keys (and
the keys an unknown key was probably meant to be, compiler/_pipeline/suggest.py) are taken out, each takes its default
(or a placeholder, for a required key), and the rest is structured into a Spec: the *partial* spec. A refused path,
name or function is of the right type and stays as written. The compile runs
on it every rule that reads none of the refused keys (validate/engine.py: a rule declares the keys it reads), so a
misspelled key, an unknown model type and eval.interval without datasets are three errors of one compile. Nothing of
a partial spec is ever rendered or written: its errors are always reported.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args, get_origin

import attrs

from .._spec import profiles
from .._spec.tables import Spec, table_class
from ..errors import Diagnostic
from .parse import KeyPath, SpecSource
from .structure import converter, is_set, leaves, problems

ROUNDS = 4  # structurings of the rest at most: each takes out what the previous one refused


@attrs.frozen
class Structured:
    """A spec as far as it structures. ``spec``: the whole spec (no ``diagnostics``), a partial one (the keys in
    ``failed`` at their defaults or placeholders), or None when not even that could be built; ``failed``: the keys
    whose values the spec does not hold as written."""

    spec: Spec | None
    diagnostics: tuple[Diagnostic, ...] = ()
    failed: frozenset[KeyPath] = frozenset()
    # every failed key's value is in ``spec`` as written (a name, a path or a function refused, nothing else): the
    # spec is what the user wrote, to draw (`acrl layout` of an invalid spec)
    as_written: bool = False


def structure_all(source: SpecSource) -> Structured:
    """Structure ``source``; on errors, the partial spec of what is right (see the module's docstring)."""
    spec, found, kept = problems(source)
    if not found:
        return Structured(spec, as_written=True)
    failed = {path for paths, _ in found for path in paths}
    diagnostics = tuple(d for _, d in found)
    for _ in range(ROUNDS):
        data = _filled(_without(source.data, failed - kept), Spec)
        try:
            partial = converter().structure(data, Spec)
        except Exception as exc:  # what taking keys out did not cure (a table that must be one)
            more = {path for paths, _ in leaves(source, exc, (), Spec) for path in paths} - failed
            if not more:
                break
            failed |= more
            continue
        spec = profiles.apply(partial, partial.experiment.integration, functools.partial(is_set, data))
        return Structured(spec, diagnostics, frozenset(failed), as_written=failed <= kept)
    return Structured(None, diagnostics, frozenset(failed))


def _without(data: Mapping[str, Any], paths: Iterable[KeyPath]) -> dict[str, Any]:
    """``data`` without the keys at ``paths`` (an item of an array: the whole array), each table copied once."""
    gone: dict[Any, Any] = {}  # the paths as a tree; None marks a key taken out with all below it
    for path in paths:
        cut = next((i for i, step in enumerate(path) if isinstance(step, int)), len(path))
        node: dict[Any, Any] | None = gone
        for step in path[:cut - 1]:
            node = node.setdefault(step, {}) if node is not None else None
        if node is not None and cut:
            node[path[cut - 1]] = None
    return _pruned(data, gone)


def _pruned(data: Mapping[str, Any], gone: Mapping[Any, Any]) -> dict[str, Any]:
    out = dict(data)
    for step, below in gone.items():
        if below is None:
            out.pop(step, None)
        elif isinstance(out.get(step), Mapping):
            out[step] = _pruned(out[step], below)
    return out


def _filled(data: dict[str, Any], cl: Any) -> dict[str, Any]:
    """``data`` with a placeholder for each required key it lacks, in every table (a required table: a table of
    placeholders). Only keys that failed are missing: no rule that reads them runs."""
    out = dict(data)
    for field in attrs.fields(cl):
        inner = None if get_origin(field.type) in (dict, list) else table_class(field.type)
        if field.name not in out:
            if field.default is attrs.NOTHING:
                out[field.name] = _filled({}, inner) if inner is not None else _placeholder(field.type)
        elif inner is not None and isinstance(out[field.name], Mapping):
            out[field.name] = _filled(dict(out[field.name]), inner)
        elif get_origin(field.type) in (dict, list):
            out[field.name] = _items(out[field.name], field.type)
    return out


def _items(value: Any, tp: Any) -> Any:
    """A table of tables or an array of tables, each table filled."""
    args = get_args(tp)
    item = table_class(args[-1]) if args else None
    if item is None:
        return value
    if isinstance(value, Mapping):
        return {k: _filled(dict(v), item) if isinstance(v, Mapping) else v for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(dict(v), item) if isinstance(v, Mapping) else v for v in value]
    return value


def _placeholder(tp: Any) -> Any:
    """A value of the required key's type ``tp`` that structures."""
    if get_origin(tp) is Literal:
        return get_args(tp)[0]
    if get_origin(tp) in (dict, list):
        return get_origin(tp)()
    return {str: "", int: 1, float: 1.0, bool: False}.get(tp, "")
