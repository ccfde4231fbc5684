"""sweep.json, the index of a compiled sweep, as a typed :class:`SweepIndex` through the one converter
(:func:`acrl.compiler._pipeline.manifest.converter`): every point's name, directory, experiment id,
overrides and bundle hash, and the errors of the points that did not compile (only when there are)."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import attrs

from .manifest import ManifestWarning, structure_json
from .manifest import converter as _converter

TYPE_CHECKING = False
if TYPE_CHECKING:
    import cattrs


@attrs.frozen
class PointValue:
    """One swept key's value at a point (a value JSON has no literal for, as TOML writes it)."""

    key: str
    value: Any


@attrs.frozen
class IndexPoint:
    name: str
    directory: str  # below the sweep's folder
    exp_id: str
    bundle_hash: str
    overrides: list[PointValue]


@attrs.frozen
class InvalidPoint:
    """A point that did not compile: its name and values (secrets masked) and its errors."""

    name: str
    overrides: list[PointValue]
    errors: list[ManifestWarning]  # diagnostics as errors.Diagnostic.as_json writes them


@attrs.frozen
class SweepIndex:
    spec: str  # the sweep spec's file name
    points: list[IndexPoint]
    invalid: list[InvalidPoint] | None = None  # written only when there are

    def as_json(self) -> dict[str, Any]:
        value = converter().unstructure(self)
        assert isinstance(value, dict)
        return value

    def to_bytes(self) -> bytes:
        """sweep.json's bytes: sorted keys, two-space indent, strict JSON (no NaN), UTF-8."""
        return (json.dumps(self.as_json(), indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False)
                + "\n").encode("utf-8")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SweepIndex:
        """``data`` (a parsed sweep.json); ManifestShapeError naming the key of a value of another shape."""
        converter()
        return structure_json(data, cls)


@functools.cache
def converter() -> cattrs.Converter:
    """The one converter, with SweepIndex's hook (``invalid`` left out when there is none)."""
    conv = _converter()
    for cls in (PointValue, IndexPoint, InvalidPoint, SweepIndex):
        attrs.resolve_types(cls)

    def unstructure(index: SweepIndex) -> dict[str, Any]:
        out: dict[str, Any] = conv.unstructure_attrs_asdict(index)
        if out["invalid"] is None:
            del out["invalid"]
        return out

    conv.register_unstructure_hook(SweepIndex, unstructure)
    return conv
