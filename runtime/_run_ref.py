"""RUN on the command line of `acrl status`, `acrl logs` and `acrl diff`: a run id (searched under --runs-dir,
default runs/; its beginning, or its end (the random part), is enough when no other run's matches), an
``EXP_ID/RUN_ID`` under it, a ``runs/<exp_id>/<run_id>`` folder, or the path of a run.json. An id that names
no run, or several, is a usage error (exit 2) that lists the candidates or the closest ids.
"""

from __future__ import annotations

import difflib
import json
import os
from pathlib import Path
from typing import Any

from acrl.compiler import AcrlError, UsageError, read_input

from ._records import RECORD, RECORD_LIMIT

SHOWN = 10  # candidates listed at most


class RecordReadError(AcrlError):
    """A run.json that cannot be read as a record (exit 2: trouble with the input, as acrl diff's)."""

    exit_code = 2


def looks_like_record(ref: str) -> bool:
    """Whether ``ref`` names a run record rather than a bundle or spec: a run.json (any .json file), a folder
    holding run.json, or something that is no path here and no spec (a run id)."""
    path = Path(ref)
    if path.is_dir():
        return (path / RECORD).is_file()
    if path.exists():
        return path.suffix == ".json"
    return not ref.endswith(".toml") and not ref.endswith("/")


def find_record(ref: str, runs_dir: str | os.PathLike[str] = "runs") -> Path:
    """The run.json ``ref`` names (see the module's docstring); UsageError when it names none or several."""
    path = Path(ref)
    if path.is_dir():
        if (path / RECORD).is_file():
            return path / RECORD
        raise UsageError(f"{ref}: not a run folder: it holds no {RECORD}",
                         hint=f"give a run id, a {Path(runs_dir) / '<exp_id>' / '<run_id>'} folder or its {RECORD} "
                         "(`acrl runs` lists them)")
    if path.exists():
        return path
    root = Path(runs_dir)
    if ref.count("/") == 1 and (root / ref / RECORD).is_file():  # EXP_ID/RUN_ID
        return root / ref / RECORD
    if "/" in ref or not ref:
        raise UsageError(f"{ref}: no such file or directory",
                         hint=f"give a run id, a {root / '<exp_id>' / '<run_id>'} folder or its {RECORD} "
                         "(`acrl runs` lists them)")
    records = sorted(root.glob(f"*/*/{RECORD}")) if root.is_dir() else []
    if not records:
        raise UsageError(f"{ref}: no such file or directory, and no run is recorded under {root}/ (no "
                         f"{root}/<exp_id>/<run_id>/{RECORD})", hint="give --runs-dir DIR where the records are "
                         "(acrl run --runs-dir), or the run's folder")
    exact = [p for p in records if p.parent.name == ref]
    found = exact or [p for p in records if p.parent.name.startswith(ref) or p.parent.name.endswith(ref)]
    if len(found) == 1:
        return found[0]
    if found:
        names = [f"{p.parent.parent.name}/{p.parent.name}" for p in found]
        listed = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
        raise UsageError(f"{ref}: {len(found)} runs under {root}/ match: {listed}",
                         hint="give more of the run id, or EXP_ID/RUN_ID")
    ids = sorted({p.parent.name for p in records})
    close = difflib.get_close_matches(ref, ids, n=3, cutoff=0.6)
    raise UsageError(f"{ref}: no such file or directory, and no run with this id under {root}/"
                     + (f"; did you mean {', '.join(close)}?" if close else ""),
                     hint="`acrl runs" + (f" --runs-dir {root}" if str(root) != "runs" else "") +
                     "` lists the recorded runs")


# What a record keeps of what ran since issue 16 (null where it could not be seen); a record without any of them
# was written before.
WHAT_RAN = ("argv", "runtime_env", "stack", "target", "inputs", "wandb")


def recorded_what_ran(record: dict[str, Any] | Any) -> bool:
    """Whether ``record`` keeps what ran (argv, env, stack, ...): one written since issue 16. In such a record
    a null resumed_from means the run started from the model; in an older one, it was not recorded."""
    return any(record.get(field) is not None for field in WHAT_RAN)


FIXED = "finished by `acrl status --fix-record`"  # how a record finished from Ray's state begins its note


def resume_known(record: dict[str, Any] | Any) -> bool:
    """Whether a null resumed_from says the run started from the model: a record that keeps what ran and that
    its `acrl run` finished (it writes what train.sh decided when the run ends; --fix-record cannot know it)."""
    note = record.get("note")
    return recorded_what_ran(record) and record.get("status") != "running" and not (
        isinstance(note, str) and note.startswith(FIXED))


def read_record(path: Path) -> dict[str, Any]:
    """run.json as a JSON object with its run_id, exp_id and submission_id; RecordReadError naming the file."""
    try:
        data = json.loads(read_input(path, limit=RECORD_LIMIT).decode("utf-8"))
    except OSError as exc:
        raise RecordReadError(f"{path}: cannot read the run record: {exc.strerror or exc}",
                              hint="give the run.json acrl run wrote (`acrl runs` lists them)") from None
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RecordReadError(f"{path}: not a run record: not JSON ({str(exc)[:200]})",
                              hint="give the run.json acrl run wrote (`acrl runs` lists them)") from None
    if not isinstance(data, dict):
        raise RecordReadError(f"{path}: not a run record: not a JSON object",
                              hint="give the run.json acrl run wrote (`acrl runs` lists them)")
    missing = [k for k in ("exp_id", "run_id", "submission_id") if not isinstance(data.get(k), str)]
    if missing:
        raise RecordReadError(f"{path}: not a run record: it has no {', '.join(missing)}",
                              hint="give the run.json acrl run wrote (`acrl runs` lists them)")
    return data
