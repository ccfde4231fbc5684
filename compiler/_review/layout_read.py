"""`acrl layout`'s inputs: a spec file, compiled in memory (nothing is written; an invalid spec is still drawn
when its tables read as a spec), or a bundle directory, read from its resolved spec.toml as `acrl explain`
reads it, with a note when the bundle no longer matches its manifest."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .._pipeline.compile import SweepSpecError, compile_source
from .._pipeline.layers import EXTENDS, SWEEP, load_spec, resolve_extends
from .._pipeline.parse import SpecSource, parse_spec_text
from .._pipeline.partial import structure_all
from .._pipeline.structure import structure
from ..errors import BundleReadError, SpecError, UsageError
from .layout import Layout, layout_of
from .verify import verify_files
from .view import SPEC_TOML, legacy_cluster, manifest_of, read_bundle_spec


def layout_path(path: Path, overrides: Sequence[str] = ()) -> tuple[Layout | None, SpecError | None]:
    """The picture of a spec file (compiled in memory: nothing is written) or a bundle directory, and the
    SpecError of an invalid spec. The picture is None when the spec does not even read as a spec."""
    if path.is_dir():
        if overrides:
            raise UsageError(f"acrl layout: --set applies to a spec, and {path} is a bundle",
                             hint="draw the spec with --set, or the bundle without it")
        return _bundle_layout(path), None
    source = load_spec(path, overrides=overrides)
    try:
        bundle = compile_source(source)
    except SweepSpecError:
        raise
    except SpecError as error:
        return _structured(source), error
    notes = tuple(f"warning: {w.table_and_key}: {w.message}" + (f" ({w.rule})" if w.rule else "")
                  for w in bundle.warnings)
    return layout_of(source.name, bundle.spec, notes), None


def _structured(source: SpecSource) -> Layout | None:
    """The picture of a spec the rules refuse, if its tables read as a spec."""
    try:
        if EXTENDS in source.data:
            source = resolve_extends(source)
        if SWEEP in source.data:
            return None
        structured = structure_all(source)
    except SpecError:
        return None
    spec = structured.spec
    if spec is None or not structured.as_written:  # a key taken out: the picture would not be the spec's
        return None
    return layout_of(source.name, spec, ("the spec is invalid (its diagnostics are on stderr): slime would not "
                                         "start with this placement",))


def _bundle_layout(directory: Path) -> Layout:
    """A bundle's picture, from its resolved spec.toml (read as `acrl explain` reads it)."""
    bundle = read_bundle_spec(directory)
    shown, files, text = bundle.shown, bundle.files, bundle.spec_text
    spec, diagnostics = structure(legacy_cluster(parse_spec_text(text, f"{shown}/{SPEC_TOML}"), manifest_of(files)))
    if spec is None:
        raise SpecError(diagnostics)
    notes = []
    try:
        result = verify_files(files, where=shown, check_derived=True)
        if not result.intact:
            notes.append(f"{shown} does not match its manifest: it was changed after it was compiled "
                         f"(see `acrl verify {shown}`)")
    except BundleReadError as exc:
        notes.append(f"{shown} cannot be verified: {exc.message}")
    return layout_of(shown, spec, notes)
