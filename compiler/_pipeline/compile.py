"""compile_spec: the pipeline, a short chain of pure stages.

parse -> structure -> resolve (model args, slime flags) -> validate -> render -> hash.
Only :func:`write` touches the output directory.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs

from .._slime.checkout import SLIME_OPTION, SPEC_SLIME, Asked, CheckoutError, locate
from .._slime.commit_facts import commit_facts
from .._slime.verify_flags import verify_flags
from .._spec import profiles
from .._spec.flags import flags_in
from .._spec.kuberay import written_when_set
from .._spec.profiles import DEFAULT_INTEGRATION
from .._spec.server_groups import SGLANG_CONFIG
from .._spec.tables import Spec
from .._version import __version__
from ..errors import Diagnostic, SpecError, UsageError
from . import placement_spec
from . import render as _render
from .argv import (
    ArgGroup,
    build_argv,
    derived,
    flat_argv,
    hf_mode,
)
from .bundle import MANIFEST, manifest_hash, sha256, write_bundle
from .kuberay import rayjob_yaml
from .layers import EXTENDS, SWEEP, load_spec, resolve_extends
from .manifest import BaseSpec, Checkout, Manifest, ManifestWarning, ModelArgsProvenance, Override, SlimeRef, SpecFile
from .model_args.resolve import ModelArgs, ModelArgsError, resolve_model_args
from .model_args.resolve import _config_path as config_path
from .parse import KeyPath, SpecSource
from .partial import structure_all
from .structure import is_set, unstructure
from .validate import RULES, Context, recorded, validate
from .validate.engine import MODEL_ARGS, blocked, key_path

# 2: the bundle hash covers every manifest field (_bundle.manifest_hash); 1: only the file list.
BUNDLE_FORMAT = 2
_NO_MODEL_ARGS = ModelArgs((), "args", "not resolved yet", "")  # for the rules checked before they are
Target = Literal["ray", "kuberay"]
TARGETS: tuple[Target, ...] = ("ray", "kuberay")


class SweepSpecError(SpecError):
    """The spec has a [sweep] table: it compiles to a bundle per point (acrl.compiler._pipeline.sweep), not to
    one bundle. ``source`` is the spec, parsed and resolved, for the caller that compiles sweeps."""

    def __init__(self, source: SpecSource) -> None:
        super().__init__([source.diagnostic((SWEEP,), "a spec with a [sweep] table compiles to one bundle per point",
                                            hint="compile it with acrl-compile SPEC -o DIR (a bundle per point "
                                                 "under DIR, and DIR/sweep.json); explain or diff a point's bundle")])
        self.source = source


@attrs.frozen
class Bundle:
    """A compiled bundle in memory: its files, hash and everything the compiler learned."""

    spec: Spec
    files: Mapping[str, bytes]
    bundle_hash: str
    warnings: tuple[Diagnostic, ...]
    notes: tuple[str, ...]
    model_args: ModelArgs
    groups: tuple[ArgGroup, ...]
    spec_sha256: str = ""  # of the spec's bytes as read
    base_paths: tuple[str, ...] = ()  # the base specs read for ``extends``, as opened
    read_checkout: bool = False  # a slime checkout on this machine was read (flags, a model script)

    @property
    def exp_id(self) -> str:
        return self.spec.experiment.id

    def argv(self) -> list[str]:
        """The slime argv without the run-time arguments train.sh adds."""
        return flat_argv(self.model_args, self.groups, self.spec)


def compile_spec(path: Path, *, strict: bool = False, display_name: str | None = None,
                 target: Target = "ray", data: bytes | None = None, overrides: Sequence[str] = (),
                 checkouts: tuple[Asked, Asked] | None = None) -> Bundle:
    """Compile the spec at ``path`` into an in-memory bundle. Raises SpecError listing every
    problem; with ``strict``, warnings are errors too. ``target="kuberay"`` adds rayjob.yaml.
    ``data``: the file's bytes, if already read (a pipe cannot be read twice). ``overrides``:
    ``KEY=VALUE`` strings (``--set``), applied on top of the spec and its bases. ``checkouts``: this
    machine's (slime, Megatron-LM) checkouts, each (path, how it was given) or None (default: the
    ``--slime-checkout`` / ``--megatron-checkout`` options, else ACRL_SLIME_CHECKOUT / ACRL_MEGATRON_CHECKOUT)."""
    source = load_spec(path, data=data, display_name=display_name, overrides=overrides)
    return compile_source(source, strict=strict, target=target, checkouts=checkouts)


def compile_source(source: SpecSource, *, strict: bool = False, target: Target = "ray",
                   checkouts: tuple[Asked, Asked] | None = None) -> Bundle:
    """Compile an already parsed spec (see :func:`compile_spec`); its ``extends`` is resolved here
    if it was not yet. A spec with a [sweep] table is compiled by
    :func:`acrl.compiler._pipeline.sweep.compile_points`. For --target kuberay the Ray cluster is the RayJob's,
    made for the job (placement_spec.RAYJOB): no local head, and [cluster] num_nodes defaults to what the job needs."""
    token = placement_spec.RAYJOB.set(target == "kuberay")
    try:
        return _compile_source(source, strict, target, checkouts)
    finally:
        placement_spec.RAYJOB.reset(token)


def _compile_source(source: SpecSource, strict: bool, target: Target, checkouts: tuple[Asked, Asked] | None) -> Bundle:
    if EXTENDS in source.data:
        source = resolve_extends(source)
    if SWEEP in source.data:
        raise SweepSpecError(source)
    structured = structure_all(source)
    if structured.spec is None:
        raise SpecError(structured.diagnostics, unchecked="No check of the rest of the spec ran")
    spec, failed = structured.spec, structured.failed
    # The rules on the spec alone ([model] type, [model.script_env], NUL bytes) come first: a spec they refuse
    # never has a script sourced (or a template rendered) with its values.
    early = validate(source, Context(spec, _NO_MODEL_ARGS, ()), before_sourcing=True, failed=failed)
    diagnostics = [*structured.diagnostics, *early]
    failed |= {key_path(d.key) for d in early if d.severity == "error" and d.key}  # refused: not read again
    try:
        slime, megatron = locate(spec.slime.dir, spec.slime.megatron_dir, checkouts)
    except CheckoutError as exc:
        raise UsageError(exc.message, hint=exc.hint) from None
    resolution = None
    if not any(d.severity == "error" for d in early) and not _touches(failed, RESOLUTION_READS):
        try:
            resolution = resolve_model_args(spec, Path(source.name).parent, slime)
        except ModelArgsError as exc:
            key = ("model", exc.key) if ("model", exc.key) in source.positions else ("model", "type")
            diagnostics.append(source.diagnostic(key, exc.message, hint=exc.hint))
    if resolution is None:  # the rules that read MODEL_ARGS wait for the errors above to be fixed
        failed |= {(MODEL_ARGS,)}
    model_args = resolution.model_args if resolution is not None else _NO_MODEL_ARGS
    groups = build_argv(spec, supplied_keys(source, spec))
    verification = verify_flags(spec, slime, megatron, {a.flag for g in groups for a in g.args} |
                                set(flags_in(model_args.args)))
    diagnostics += validate(source, Context(spec, model_args, groups, verification.check, resolution,
                                            verification.where), before_sourcing=False, failed=failed)
    if strict:
        diagnostics = [attrs.evolve(d, severity="error") if d.severity == "warning" else d for d in diagnostics]
    if target == "kuberay" and spec.kuberay.image is None and not _touches(failed, (("kuberay", "image"),)):
        diagnostics.append(source.diagnostic(
            ("kuberay", "image"),
            "--target kuberay needs the container image of the Ray pods",
            hint='set [kuberay] image = "REGISTRY/IMAGE:TAG" (slime, Megatron-LM, sglang and the rollout '
                 "integration installed)"))
    if any(d.severity == "error" for d in diagnostics):
        raise SpecError(diagnostics, unchecked=_unchecked(failed))
    assert resolution is not None  # no error: MODEL_ARGS were resolved
    supplied = profiles.notes(spec.experiment.integration, functools.partial(is_set, source.data))
    notes = (*supplied, *resolution.notes, *verification.notes, *placement_spec.read(spec).defaults)
    if model_args.source == "script" and slime is not None:
        how = (f"{SPEC_SLIME}, the cluster's path, which exists on this machine ({SLIME_OPTION} DIR reads another "
               "checkout)" if slime.via == SPEC_SLIME else slime.shown())
        notes = (f"MODEL_ARGS read from {model_args.description}: the slime checkout of {how}; train.sh runs slime at "
                 f"{SPEC_SLIME} {spec.slime.dir}", *notes)
    if target == "kuberay" and spec.cuda.home is not None:
        notes += ("[cuda] home is applied by train.sh only: the pods of rayjob.yaml use the image's CUDA "
                  "(set CUDA_HOME, PATH and LD_LIBRARY_PATH in the image)",)
    bundle = _assemble(source, spec, model_args, groups, tuple(diagnostics), notes, target)
    return attrs.evolve(bundle, read_checkout=slime is not None)


# The keys model args resolution reads: [model] (its type, sources and overrides) and [slime] (the checkout a script
# is read from). When one failed, MODEL_ARGS are not resolved (a script is never sourced with a refused value).
RESOLUTION_READS = (("model",), ("slime",))


def _unchecked(failed: frozenset[KeyPath]) -> str:
    """The closing line's "what was not checked", or "" when every check ran."""
    skipped = len(blocked(failed))
    if not skipped:
        return ""
    what = "keys with errors" if (MODEL_ARGS,) not in failed else "keys with errors or MODEL_ARGS (not resolved)"
    return f"{skipped} of the {len(RULES)} checks did not run, as they read {what}"


def _touches(failed: frozenset[KeyPath], keys: Sequence[KeyPath]) -> bool:
    """Whether a failed key is one of ``keys``, under one, or holds one."""
    return any(f[:len(k)] == k or k[:len(f)] == f for f in failed for k in keys)


def _assemble(source: SpecSource, spec: Spec, model_args: ModelArgs, groups: tuple[ArgGroup, ...],
              warnings: tuple[Diagnostic, ...], notes: tuple[str, ...], target: Target = "ray") -> Bundle:
    custom_config = _render.custom_config_yaml(spec)  # integration "agentcore" only
    sglang_config = _render.sglang_config_yaml(spec)  # [sglang.models] only
    files = {
        "train.sh": _render.train_sh(spec, groups),
        "model_args.sh": _render.model_args_sh(spec, model_args),
        **({"custom_config.yaml": custom_config} if custom_config is not None else {}),
        **({SGLANG_CONFIG: sglang_config} if sglang_config is not None else {}),
        "spec.toml": _render.resolved_spec_toml(resolved_spec_data(spec, model_args)),
    }
    checkpoint = _render.checkpoint_sh(spec)  # [checkpoint] save or load: the launch-time checkpoint decision
    if checkpoint is not None:
        files[_render.CHECKPOINT_SH] = checkpoint
    if _render.joins(spec):  # other nodes join the local head: the script they run
        files["join.sh"] = _render.join_sh(spec)
    if target == "kuberay":
        files["rayjob.yaml"] = rayjob_yaml(spec, flat_argv(model_args, groups, spec), custom_config, sglang_config,
                                           checkpoint)
    hashes = {name: sha256(data) for name, data in sorted(files.items())}
    manifest = _manifest(source, spec, model_args, warnings, hashes)
    manifest = attrs.evolve(manifest, bundle_hash=manifest_hash(manifest.as_json()))
    files[MANIFEST] = _render.manifest_json(manifest.as_json())
    return Bundle(spec, files, manifest.bundle_hash, warnings, notes, model_args, groups, manifest.spec.sha256,
                  source.base_paths)


def external_inputs(bundle: Bundle, spec_dir: Path) -> tuple[Path, ...] | None:
    """The paths outside the spec that compiling it read or looked for, where a change could change
    the result (used by the compile cache); None when they cannot all be named: a model script
    sourced by bash may read anything, and a slime checkout was read file by file. The checkouts asked for
    (--slime-checkout, ACRL_SLIME_CHECKOUT) are in the cache's key; [slime] dir, watched, decides the rest."""
    spec = bundle.spec
    if bundle.model_args.source == "script" or bundle.read_checkout:
        return None
    return (config_path(spec, spec_dir), Path(spec.slime.dir),  # Megatron's is read only with slime's
            *(Path(base) for base in bundle.base_paths))


def resolved_spec(spec: Spec, model_args: ModelArgs) -> Spec:
    """The spec with every "auto" and implicit default replaced by what it resolved to."""
    mode = hf_mode(spec)
    model = attrs.evolve(spec.model, args_source=model_args.source, ref_load=spec.model.ref_load or spec.model.dir,
                         megatron_to_hf_mode=mode if mode is not None else spec.model.megatron_to_hf_mode)
    return attrs.evolve(spec, model=model)


def supplied_keys(source: SpecSource, spec: Spec) -> frozenset[str]:
    """The keys whose value ``spec``'s integration profile supplied: those its source does not set; none for
    "agentcore", whose values are the keys' documented defaults."""
    if spec.experiment.integration == DEFAULT_INTEGRATION:
        return frozenset()
    return frozenset(key for key, _ in profiles.supplied(spec.experiment.integration,
                                                         functools.partial(is_set, source.data)))


# Keys added after bundles were first committed, written to spec.toml only when they differ from their default: a
# spec that does not use them compiles to the same bundle, byte for byte, as before they existed (`acrl
# check-bundles` keeps passing across the upgrade). Table -> key -> the default it is left out at.
WRITTEN_WHEN_SET: dict[str, dict[str, Any]] = {
    "experiment": {"integration": DEFAULT_INTEGRATION},
    "cluster": {"env": {}, "ray_start_args": []},
    "env": {"pythonpath": [], "pythonpath_before_megatron": []},
    "wandb": {"enabled": True},
    "sglang": {"models": {}},
    "opd": {"enabled": False},
    "weight_sync": {"disk_keep_files": False, "delta_keep_files": False, "release_train": False},
    "rollout": {"external_engine_addrs": [], "external": False, "sample_hook_paths": []},
    "train": {"balance_by_flops": False},
    "checkpoint": {"resume": "auto", "load_optimizer": True, "load_rng": True},  # issue 16 (None-valued keys: unset)
    "kuberay": written_when_set(),  # its pods, volumes and job settings (issue 18), by dotted key: "head.cpu"
}
# Tables added after bundles were first committed: left out of spec.toml while none of their keys is set.
TABLES_WRITTEN_WHEN_SET = ("opd", "weight_sync")


def resolved_spec_data(spec: Spec, model_args: ModelArgs) -> dict[str, Any]:
    """spec.toml's data: the resolved spec, without the keys of :data:`WRITTEN_WHEN_SET` at their default."""
    data = unstructure(resolved_spec(spec, model_args))
    for table, keys in WRITTEN_WHEN_SET.items():
        for key, default in keys.items():
            *inner, leaf = key.split(".")  # a key of a table inside the table ([kuberay.head] cpu)
            nodes = [data[table]]
            for name in inner:
                nodes.append(nodes[-1].get(name, {}))
            if nodes[-1].get(leaf, default) == default:
                nodes[-1].pop(leaf, None)
            for parent, name, node in reversed(list(zip(nodes[:-1], inner, nodes[1:], strict=True))):
                if not node:  # a table left empty is left out
                    parent.pop(name, None)
    for table in TABLES_WRITTEN_WHEN_SET:
        if not data.get(table, True):
            del data[table]
    return data


def _slime_ref(commit: str) -> SlimeRef:
    """The targeted slime commit and, where acrl has facts of it, the Megatron-LM and SGLang it runs."""
    facts = commit_facts(commit)
    return SlimeRef(commit=commit, megatron_commit=facts.megatron_commit if facts else None,
                    sglang_version=facts.sglang_version if facts else None)


def _manifest(source: SpecSource, spec: Spec, model_args: ModelArgs, warnings: tuple[Diagnostic, ...],
              hashes: Mapping[str, str]) -> Manifest:
    """The manifest without its bundle_hash, which is the hash of all of this (reading.manifest_hash)."""
    return Manifest(
        acrl_version=__version__, bundle_format=BUNDLE_FORMAT, exp_id=spec.experiment.id, files=dict(hashes),
        spec=SpecFile(name=Path(source.name).name, sha256=sha256(source.text.encode("utf-8"))),
        slime=_slime_ref(spec.slime.commit),
        model_args=ModelArgsProvenance(source=model_args.source, from_=model_args.description,
                                       sha256=model_args.sha256, env=dict(model_args.env),
                                       overrides=dict(model_args.overrides),
                                       checkout=None if model_args.checkout is None else
                                       Checkout(*model_args.checkout)),
        derived=derived(spec),
        warnings=[ManifestWarning(**attrs.evolve(d, file=manifest_file_name(d.file)).as_json())  # type: ignore[arg-type]
                  for d in recorded(warnings)],  # a rule about this machine's checkout: shown, not kept
        extends=_extends_entries(source) if source.bases else None,
        overrides=[Override(key=key, value=value, from_=origin) for key, value, origin in source.overrides]
        if source.overrides else None,
    )


def _extends_entries(source: SpecSource) -> list[BaseSpec]:
    """Each base spec as written in ``extends`` (relative to the spec that names it), its sha256 and
    the keys whose value it set, so that `acrl explain BUNDLE` can say where a value came from."""
    set_by: dict[str, list[str]] = {}
    for path, written in source.files.items():
        node: Any = source.data
        for step in path:
            node = node.get(step) if isinstance(node, Mapping) else None
        if all(isinstance(step, str) for step in path) and node is not None and not isinstance(node, Mapping):
            set_by.setdefault(written.name, []).append(".".join(map(str, path)))
    return [BaseSpec(path=ref, sha256=digest, keys=sorted(set_by.get(name, [])))
            for ref, digest, name in source.bases]


def manifest_file_name(file: str) -> str:
    """A diagnostic's file as the manifest records it: no directory of the compiling machine."""
    return file if file.startswith(("--", "[sweep]")) else Path(file).name  # --set a="/x/y": not a path


def write(bundle: Bundle, out: Path, *, force: bool = False) -> str:
    """Write ``bundle`` into ``out`` atomically; see :func:`acrl.compiler._pipeline.bundle.write_bundle`."""
    return write_bundle(out, bundle.files, force=force)
