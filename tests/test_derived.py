"""The derived quantities have one home: acrl.compiler._pipeline.argv.derived (issue 12, item 4)."""
from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from acrl.compiler._pipeline.argv import Derived, derived
from acrl.compiler._pipeline.parse import decode_spec
from acrl.compiler._pipeline.structure import structure

GOLDEN = sorted((Path(__file__).parent / "golden").iterdir())


@pytest.mark.parametrize("bundle", GOLDEN, ids=lambda p: p.name)
def test_derived_is_the_manifest_section_field_for_field(bundle: Path) -> None:
    """Every key of the manifest's derived section is a Derived field and the one
    function reproduces each value from the bundle's spec.toml."""
    manifest = json.loads((bundle / "manifest.json").read_text())
    spec, _ = structure(decode_spec((bundle / "spec.toml").read_bytes(), "spec.toml"))
    assert spec is not None
    value = derived(spec)
    assert {f.name for f in attrs.fields(Derived)} == set(manifest["derived"])
    for name, expected in manifest["derived"].items():
        assert value.as_json()[name] == expected, name
    assert value.as_json() == manifest["derived"]
