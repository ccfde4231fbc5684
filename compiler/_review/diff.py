"""`acrl diff`: a semantic diff of two bundles or specs, and `acrl-compile --check`.

Both inputs are read by :func:`acrl.compiler._review.view.read_view` (a spec is compiled in memory
first), then compared part by part by :mod:`.changes` (slime flags grouped by :mod:`.flag_groups`) and
printed by :mod:`.diff_format`; this module reads the inputs and holds ``--check``.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from .._pipeline.bundle import DIR_MODE, MANIFEST, NOT_REGULAR, mode_differs, read_bundle, written_mode
from .._pipeline.compile import compile_spec
from ..errors import BundleReadError
from .changes import ABSENT, DERIVED_LABELS, SECTIONS, BundleDiff, Change, Section, _compare, diff_views
from .diff_format import format_markdown, format_text
from .flag_groups import GROUPS, flag_group
from .verify import verify_files
from .view import KNOWN_FILES, BundleView, flatten, read_view

__all__ = ["ABSENT", "DERIVED_LABELS", "GROUPS", "SECTIONS", "BundleDiff", "Change", "CheckResult", "Section",
           "check_bundle", "diff_paths", "diff_views", "flag_group", "format_check", "format_markdown",
           "format_text", "load"]


# --- inputs ----------------------------------------------------------------------------------

def load(path: str, overrides: Sequence[str] = ()) -> BundleView:
    """Read a bundle directory, or compile a spec (.toml) in memory (with ``overrides``, ``KEY=VALUE``
    as `--set` gives them), into a view. A bundle that does not match its own manifest is read as it
    is, with a note saying so."""
    if os.path.isdir(path):
        files = read_bundle(path) or {}
        if not set(files) & set(KNOWN_FILES):
            raise BundleReadError(path=path, reason=f"is not an acrl bundle: none of {', '.join(KNOWN_FILES)} is in it",
                                  fix="give a bundle directory (e.g. bundles/<exp_id>) or a spec file (.toml)")
        return attrs.evolve(read_view(path, files), integrity=tuple(_integrity_notes(path, files)))
    if os.path.isfile(path) and path.endswith(".toml"):
        return read_view(path, compile_spec(Path(path), overrides=overrides).files)
    reason = "no such file or directory"
    if os.path.lexists(path):
        reason = "is neither a bundle directory nor a spec (.toml)"
    raise BundleReadError(path=path, reason=reason,
                          fix="give a bundle directory (e.g. bundles/<exp_id>) or a spec file (.toml)")


def _integrity_notes(path: str, files: Mapping[str, bytes]) -> list[str]:
    try:
        result = verify_files(files, where=path, check_derived=True)
    except BundleReadError as exc:
        return [f"{path} cannot be verified: {exc.message}"]
    if result.intact:
        return []
    what = [f"{kind} {', '.join(names)}" for kind, names in (("modified", result.modified),
            ("removed", result.removed), ("added", result.added), ("not a regular file", result.not_regular)) if names]
    if result.recomputed_hash is not None:
        what.append("a bundle_hash that does not match its own contents")
    if result.derived_mismatch:
        what.append("a derived section that does not match spec.toml")
    return [f"{path} does not match its manifest ({'; '.join(what)}): it was changed after it was compiled "
            f"(see `acrl verify {path}`)"]


def diff_paths(a: str, b: str, overrides: Sequence[str] = ()) -> BundleDiff:
    """The semantic diff of two bundles or specs (see :func:`load`); ``overrides`` apply to each spec."""
    return diff_views(load(a, overrides), load(b, overrides))


# --- --check ---------------------------------------------------------------------------------

@attrs.frozen
class CheckResult:
    """Whether directory ``out`` holds exactly the bundle ``spec`` compiles to."""

    spec: str
    out: str
    byte_differences: tuple[str, ...]  # one line per file that differs byte for byte (or by mode)
    diff: BundleDiff | None  # None when ``out`` is not a directory

    @property
    def up_to_date(self) -> bool:
        return not self.byte_differences

    def as_json(self) -> dict[str, Any]:
        return {"spec": self.spec, "bundle": self.out, "up_to_date": self.up_to_date,
                "byte_differences": list(self.byte_differences),
                "diff": self.diff.as_json() if self.diff is not None else None}


def check_bundle(spec: str, compiled: Mapping[str, bytes], out: str) -> CheckResult:
    """Compare the directory ``out`` with the files ``compiled`` from ``spec``. Reads, never writes."""
    existing = read_bundle(out)
    if existing is None:
        why = "does not exist" if not os.path.lexists(out) else "is not a directory"
        return CheckResult(spec, out, (f"{out} {why}",), None)
    lines = []
    for name in sorted(set(existing) | set(compiled)):
        if name not in existing:
            lines.append(f"{name}: missing from {out}")
        elif name not in compiled:
            lines.append(f"{name}: in {out}, not in the compiled bundle")
        elif existing[name] != compiled[name]:
            lines.append(f"{name}: differs{_manifest_keys(existing, compiled) if name == MANIFEST else ''}")
    lines += _mode_differences(out, [name for name in compiled if name in existing and not name.endswith(NOT_REGULAR)])
    if not lines:
        return CheckResult(spec, out, (), None)
    view = attrs.evolve(read_view(out, existing), integrity=tuple(_integrity_notes(out, existing)))
    return CheckResult(spec, out, tuple(lines), diff_views(view, read_view(f"{spec} (compiled)", compiled)))


def _mode_differences(out: str, names: list[str]) -> list[str]:
    """``name: mode 0775, the compile writes 0755`` for the directory ``out`` (``./``) and each file
    of ``names`` in it whose mode :func:`_bundle.mode_differs` from what acrl-compile writes: unsafe
    bits, or the wrong owner-execute bit."""
    lines = []
    for name, wanted in [("./", DIR_MODE), *((name, written_mode(name)) for name in sorted(names))]:
        try:
            st = os.lstat(os.path.join(out, name))
        except OSError:
            continue
        if mode_differs(name, st):
            lines.append(f"{name}: mode {stat.S_IMODE(st.st_mode):04o}, the compile writes {wanted:04o}")
    return lines


def _manifest_keys(existing: Mapping[str, bytes], compiled: Mapping[str, bytes]) -> str:
    try:
        old, new = (json.loads(files[MANIFEST]) for files in (existing, compiled))
    except ValueError:  # not UTF-8, not JSON
        return " (not valid JSON)"
    except RecursionError:  # nested thousands deep
        return " (nested too deeply to read)"
    if not isinstance(old, dict):
        kind = {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(old), "number")
        return f" (a JSON {kind}, not an object)"
    old, new = flatten(old), flatten(new)
    keys = [c.key for c in _compare(old, new) if not c.key.startswith("files.")]
    return f" ({', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''})" if keys else ""


def format_check(result: CheckResult) -> str:
    """What `acrl-compile --check` prints: the semantic diff (committed -> compiled) and the files
    that differ byte for byte, or that the bundle is up to date."""
    spec, out = shlex.quote(result.spec), shlex.quote(result.out)
    if result.up_to_date:
        return f"{result.out} is up to date with {result.spec}"
    if result.diff is None:
        return (f"{result.byte_differences[0]}: it should hold the bundle {result.spec} compiles to\n"
                f"fix: acrl-compile {spec} -o {out} (and commit the result)")
    force = " --force" if result.diff.unverified else ""  # a stale bundle of the spec is replaced without it
    return "\n\n".join([
        format_text(result.diff),
        "\n".join([f"{result.out} is not what {result.spec} compiles to; files that differ byte for byte:",
                   *(f"  {line}" for line in result.byte_differences)]),
        f"fix: acrl-compile {spec} -o {out}{force} (and commit the result), or undo the edit in {out}",
    ])
