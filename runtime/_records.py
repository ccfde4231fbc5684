"""Run records: ``runs/<exp_id>/<run_id>/run.json`` (and train.log beside it), written atomically.

A record is written when the run starts (status "running") and rewritten when it ends, so a run
whose executor died still leaves a trace. It holds no secret: no environment, only the command.
"""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from acrl.compiler._errors import AcrlError

RECORD, LOG = "run.json", "train.log"
STATUSES = ("running", "succeeded", "failed", "cancelled")


def new_run_id(now: float | None = None) -> str:
    """A run id train.sh accepts in ACRL_RUN_ID: the UTC start time and 4 random hex digits."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{stamp}-{secrets.token_hex(2)}"


def utc(seconds: float) -> str:
    """ISO 8601 UTC with milliseconds: 2026-11-21T16:10:00.123Z."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{int(seconds % 1 * 1000):03d}Z"


def public_address(address: str | None) -> str | None:
    """``address`` without a user:password part, which never goes into a record."""
    from acrl.compiler._secrets import without_credentials

    return without_credentials(address) if address else address


def write_record(run_dir: Path, record: Mapping[str, Any]) -> Path:
    """Write ``run_dir/run.json`` atomically (a temporary file in the same folder, then a rename)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    target = run_dir / RECORD
    fd, temporary = tempfile.mkstemp(prefix=".run.", suffix=".json", dir=run_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(record, out, indent=2, sort_keys=True)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target


def list_records(runs_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """Every readable ``<exp_id>/<run_id>/run.json`` under ``runs_dir``, oldest first; an unreadable
    record is listed with status "unreadable" and the reason."""
    root = Path(runs_dir)
    if not root.is_dir():
        return []
    records = []
    for path in sorted(root.glob(f"*/*/{RECORD}")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(data, dict):
                raise ValueError("not a JSON object")
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            data = {"exp_id": path.parent.parent.name, "run_id": path.parent.name, "status": "unreadable",
                    "error": str(exc)}
        data["record"] = str(path)
        records.append(data)
    records.sort(key=lambda r: (str(r.get("started_at", "")), str(r.get("run_id", ""))))
    return records


def format_records(records: Sequence[Mapping[str, Any]]) -> str:
    """`acrl runs`: one line per run."""
    if not records:
        return "no runs recorded"
    rows = [("started (UTC)", "exp_id", "run_id", "status", "exit", "seconds", "submission id")]
    for r in records:
        seconds = r.get("duration_s")
        rows.append((str(r.get("started_at", "-")), str(r.get("exp_id", "-")), str(r.get("run_id", "-")),
                     str(r.get("status", "-")), str(r.get("exit_status", "-") if r.get("exit_status") is not None
                                                    else "-"),
                     f"{seconds:.1f}" if isinstance(seconds, int | float) else "-", str(r.get("submission_id", "-"))))
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def runs_dir_error(runs_dir: str, exc: OSError) -> AcrlError:
    return AcrlError(f"{runs_dir}: cannot write the run record: {exc.strerror or exc}\n"
                     "  fix: choose a writable folder with --runs-dir")
