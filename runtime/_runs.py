"""`acrl runs`: the recorded runs, per experiment, with their chains: a run that resumed from the checkpoint
another run saved (its record's ``resumed_from.run_id``, found when it ran: _preflight/checkpoint_layout.find_saver)
is listed right under that run, indented, with ``<- RUN_ID``.

Records of any shape are listed (written by an older acrl, without ``resumed_from`` or ``argv``: then a run
with no chain); a chain that loops (a hand-edited record) is cut where it would repeat.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from ._records import list_records

Key = tuple[str, str]  # (exp_id, run_id)


def _key(record: Mapping[str, Any]) -> Key:
    return str(record.get("exp_id", "")), str(record.get("run_id", ""))


def _parent(record: Mapping[str, Any], keys: set[Key], by_run: Mapping[str, list[Key]]) -> Key | None:
    """The listed record this one resumed from: its resumed_from's exp_id/run_id (a record without exp_id
    there: the run id in the same experiment, else the one run of that id)."""
    resumed = record.get("resumed_from")
    if not isinstance(resumed, Mapping) or not isinstance(resumed.get("run_id"), str):
        return None
    run_id = resumed["run_id"]
    exp_id = resumed.get("exp_id")
    for candidate in ((exp_id, run_id) if isinstance(exp_id, str) else None, (_key(record)[0], run_id)):
        if candidate in keys:
            return candidate
    same = by_run.get(run_id, [])
    return same[0] if len(same) == 1 else None


def with_chains(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """``records`` (oldest first) in chain order, per experiment (in order of its first run): each run, then the
    runs that resumed from it; each gains ``chain`` (the run ids from the first run of its chain to it) and
    ``resumed_by`` (the run ids that resumed from it)."""
    keys = {_key(r) for r in records}
    by_run: dict[str, list[Key]] = {}
    for r in records:
        by_run.setdefault(_key(r)[1], []).append(_key(r))
    parent = {_key(r): _parent(r, keys, by_run) for r in records}
    children: dict[Key, list[dict[str, Any]]] = {}
    for r in records:
        up = parent[_key(r)]
        if up is not None and up[0] == _key(r)[0] and up != _key(r):  # shown under its parent: same experiment
            children.setdefault(up, []).append(r)
    ordered: list[dict[str, Any]] = []
    placed: set[Key] = set()

    def place(record: dict[str, Any], chain: list[str]) -> None:
        key = _key(record)
        if key in placed:
            return
        placed.add(key)
        ordered.append(dict(record, chain=[*chain, key[1]], resumed_by=[_key(c)[1] for c in children.get(key, [])]))
        for child in children.get(key, []):
            place(child, [*chain, key[1]])

    experiments = list(dict.fromkeys(_key(r)[0] for r in records))
    for exp in experiments:
        for r in records:
            up = parent[_key(r)]
            if _key(r)[0] == exp and (up is None or up[0] != exp or up == _key(r)):
                chain = [f"{up[0]}/{up[1]}"] if up is not None and up != _key(r) else []
                place(r, chain)
        for r in records:  # the rest of a loop of records naming each other: listed once each
            if _key(r)[0] == exp:
                place(r, [])
    return ordered


def _from(record: Mapping[str, Any]) -> str:
    resumed = record.get("resumed_from")
    if not isinstance(resumed, Mapping):
        return ""
    at = f" @ iteration {resumed['iteration']}" if isinstance(resumed.get("iteration"), int) else ""
    if isinstance(resumed.get("run_id"), str):
        exp = resumed.get("exp_id")
        other = f"{exp}/" if isinstance(exp, str) and exp != record.get("exp_id") else ""
        return f"<- {other}{resumed['run_id']}{at}"
    return f"<- {resumed.get('checkpoint_dir', '?')}{at} (no record of the run that saved it)"


def _depth(chain: Any) -> int:
    """How many runs of the same experiment come before a run in its chain (another experiment's, "EXP/RUN",
    is not counted: the run is not listed under it)."""
    if not isinstance(chain, list) or not chain:
        return 0
    return len(chain) - 1 - (1 if "/" in str(chain[0]) else 0)


def format_records(records: Sequence[Mapping[str, Any]]) -> str:
    """`acrl runs`: one line per run, in :func:`with_chains` order, a resumed run indented under the run whose
    checkpoint it loaded."""
    if not records:
        return "no runs recorded"
    rows = [("started (UTC)", "exp_id", "run_id", "status", "exit", "seconds", "submission id", "resumed from")]
    for r in records:
        seconds = r.get("duration_s")
        rows.append((str(r.get("started_at", "-")), str(r.get("exp_id", "-")),
                     "  " * _depth(r.get("chain")) + str(r.get("run_id", "-")), str(r.get("status", "-")),
                     str(r.get("exit_status") if r.get("exit_status") is not None else "-"),
                     f"{seconds:.1f}" if isinstance(seconds, int | float) else "-", str(r.get("submission_id", "-")),
                     _from(r)))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    notes = [f"{r.get('run_id', '-')}: {r['note']}" for r in records if r.get("note")]
    return "\n".join(lines + (["", *notes] if notes else []))


def runs(runs_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every record under ``runs_dir`` in chain order (what `acrl runs` and `acrl runs --json` show)."""
    return with_chains(list_records(runs_dir))
