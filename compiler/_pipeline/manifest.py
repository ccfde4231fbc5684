"""manifest.json as attrs classes: :class:`Manifest` and its parts, built by the compile and read back
by verify, the review tools and the executor.

The manifest goes to and from JSON through the spec's one cattrs converter
(:func:`acrl.compiler._pipeline.structure.converter`, strict: an int is not a string, no unknown
key), with the hooks below for the two keys that are not Python names (``from``) and the two
sections written only when there is something in them (``extends``, ``overrides``). The bytes a
Manifest is written as are the ones acrl always wrote (render.manifest_json: sorted keys, two-space
indent); the bundle hash is taken over the JSON object as read (reading.manifest_hash), never over a
re-serialised Manifest, so a field this acrl does not know still counts.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import attrs

TYPE_CHECKING = False
if TYPE_CHECKING:
    import cattrs

    from .argv import Derived


@attrs.frozen
class SpecFile:
    """The spec compiled: its file name (no directory of the compiling machine) and sha256."""

    name: str
    sha256: str


@attrs.frozen
class SlimeRef:
    commit: str | None  # the slime commit the spec targets, as written in [slime] commit
    # The stack that commit runs, from acrl's facts of it (compiler/_slime/commits: its docker/Dockerfile's Megatron-LM
    # commit and SGLang image); None where acrl has no facts of the commit, and in bundles made before issue 15.
    megatron_commit: str | None = None
    sglang_version: str | None = None


@attrs.frozen
class Checkout:
    """The slime checkout on the compiling machine a model script was read from (_slime/checkout.py): its path
    as given (--slime-checkout, ACRL_SLIME_CHECKOUT or [slime] dir: which one is said in the compile's notes,
    not here, so that the two ways of giving it give the same bytes) and its git commit (None when it could not
    be read). Not where train.sh runs slime: that is [slime] dir."""

    path: str
    commit: str | None


@attrs.frozen
class ModelArgsProvenance:
    """Where MODEL_ARGS came from (model_args.resolve.ModelArgs.provenance); ``from`` in JSON. ``checkout`` only
    for a script (written only then)."""

    source: str
    from_: str
    sha256: str
    env: dict[str, str | None]
    overrides: dict[str, str]
    checkout: Checkout | None = None


@attrs.frozen
class ManifestWarning:
    """A warning of the compile, as errors.Diagnostic.as_json writes it."""

    severity: str
    rule: str | None
    file: str
    key: str
    line: int | None
    column: int | None
    message: str
    hint: str | None


@attrs.frozen
class BaseSpec:
    """One ``extends`` base: as written (relative to the spec naming it), its sha256, the keys it set."""

    path: str
    sha256: str
    keys: list[str]


@attrs.frozen
class Override:
    """One ``--set KEY=VALUE`` (or sweep point value); ``from`` in JSON."""

    key: str
    value: Any
    from_: str


@attrs.frozen
class Manifest:
    """manifest.json. ``bundle_hash`` is "" until the hash of everything else is known."""

    acrl_version: str
    bundle_format: int
    exp_id: str
    files: dict[str, str]  # file name -> sha256, every file of the bundle but the manifest
    spec: SpecFile
    slime: SlimeRef
    model_args: ModelArgsProvenance
    derived: Derived
    warnings: list[ManifestWarning]
    bundle_hash: str = ""
    extends: list[BaseSpec] | None = None  # only when the spec extends a base
    overrides: list[Override] | None = None  # only when the compile had overrides

    def as_json(self) -> dict[str, Any]:
        """The manifest as a JSON object (unordered: render.manifest_json sorts the keys)."""
        return _as_dict(converter().unstructure(self))

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Manifest:
        """``data`` (a parsed manifest.json) as a Manifest. Raises ManifestShapeError naming the
        first key whose value does not have the shape acrl writes (``derived.actor_gpus``)."""
        return structure_json(data, cls)


T = TypeVar("T")


def structure_json(data: Mapping[str, Any], cls: type[T]) -> T:
    """``data`` (parsed JSON) as ``cls`` through the one converter (manifest, run record, sweep
    index). Raises ManifestShapeError naming the first key whose value has another shape."""
    try:
        return converter().structure(data, cls)
    except Exception as exc:  # cattrs raises exception groups; name the first leaf's key
        key, reason = next(_leaves(exc, ()), ("", str(exc)))
        raise ManifestShapeError(key, reason) from None


def _as_dict(value: object) -> dict[str, Any]:
    assert isinstance(value, dict)
    return value


class ManifestShapeError(ValueError):
    """A field of a manifest (or run record, sweep index) has a value acrl never writes there: ``key``
    (dotted; "" for the whole) and why."""

    def __init__(self, key: str, reason: str) -> None:
        super().__init__(f"{key}: {reason}" if key else reason)
        self.key = key
        self.reason = reason


def _leaves(exc: BaseException, path: tuple[str, ...]) -> Iterator[tuple[str, str]]:
    """(dotted key, reason) of every leaf error cattrs collected in ``exc``."""
    # lazy: cattrs (~19 ms) is loaded when a manifest is read or written, never to import verify
    from cattrs.errors import AttributeValidationNote, ForbiddenExtraKeysError, IterableValidationNote

    from .structure import _MAPPING_NOTE, _Mismatch  # lazy: structure imports cattrs

    if isinstance(exc, ForbiddenExtraKeysError):
        for extra in sorted(exc.extra_fields):
            yield ".".join((*path, str(extra))), "is not a key acrl writes there"
        return
    if isinstance(exc, BaseExceptionGroup):
        for sub in exc.exceptions:
            step: tuple[str, ...] = ()
            for note in getattr(sub, "__notes__", ()):
                if isinstance(note, AttributeValidationNote):
                    step = (note.name.removesuffix("_"),)  # from_: the JSON key from
                elif isinstance(note, IterableValidationNote):
                    step = (str(note.index),)
                elif isinstance(note, str) and note.startswith(_MAPPING_NOTE):
                    step = (note.removeprefix(_MAPPING_NOTE),)
            yield from _leaves(sub, (*path, *step))
        return
    if isinstance(exc, KeyError):
        yield ".".join(path), "is missing"
        return
    reason = exc.message if isinstance(exc, _Mismatch) else f"{type(exc).__name__}: {exc}"
    yield ".".join(path), reason


def _renamed(cls: type, conv: cattrs.Converter) -> None:
    """Hooks for a class whose field ``from_`` is the JSON key ``from``."""
    from cattrs.gen import make_dict_structure_fn, override  # lazy: see converter

    @functools.cache
    def generated() -> Any:  # on the first read: generating it (~1 ms) is not the compile's business
        return make_dict_structure_fn(cls, conv, from_=override(rename="from"))

    conv.register_structure_hook(cls, lambda data, _: generated()(data, cls))

    def unstructure(obj: Any) -> dict[str, Any]:
        out = _as_dict(conv.unstructure_attrs_asdict(obj))
        out["from"] = out.pop("from_")
        if out.get("checkout", False) is None:  # written only when there is one (ModelArgsProvenance)
            del out["checkout"]
        return out

    conv.register_unstructure_hook(cls, unstructure)


@functools.cache
def converter() -> cattrs.Converter:
    """The converter of acrl's persistent formats (manifest, run record, sweep index): the spec's
    converter, copied with every hook and rule it has, plus the manifest's hooks. A copy, because
    registering a hook on the spec's own converter once it has structured a spec clears cattrs' cache
    of generated functions, and the next compile in the process generated them all again (~13 ms)."""
    # lazy: cattrs (~19 ms) is loaded when a manifest is read or written; the executor imports verify,
    # and with it these classes, before every run without it (tests/test_verify.py)
    from .argv import Derived  # lazy: argv's imports (~60 ms) are the compile's, not verify's
    from .structure import converter as spec_converter  # lazy: structure imports cattrs

    for cls in (SpecFile, SlimeRef, Checkout, ModelArgsProvenance, ManifestWarning, BaseSpec, Override, Manifest,
                Derived):
        attrs.resolve_types(cls, localns={"Derived": Derived})  # the converter dispatches on field types
    conv = spec_converter().copy()
    _renamed(ModelArgsProvenance, conv)
    _renamed(Override, conv)

    def unstructure_manifest(manifest: Manifest) -> dict[str, Any]:
        out = _as_dict(conv.unstructure_attrs_asdict(manifest))
        for optional in ("extends", "overrides"):
            if out[optional] is None:
                del out[optional]
        return out

    conv.register_unstructure_hook(Manifest, unstructure_manifest)
    return conv
