"""What a bundle is to the executor (:class:`BundleInfo`): its directory, resolved spec, manifest and
MODEL_ARGS, read once by :func:`read_bundle_info` and handed to every preflight check (runtime/_preflight/checks.py,
runtime/_preflight/python.py): the module below both, so neither imports the other."""

from __future__ import annotations

import json
import os
import threading
import tomllib
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

import attrs

from acrl.compiler import AcrlError, Derived, Manifest, bash_arrays, derived_from_spec


@attrs.frozen
class BundleInfo:
    """What the checks read from a bundle: its directory, resolved spec, derived quantities and MODEL_ARGS."""

    path: Path
    spec: Mapping[str, Any]
    derived: Derived | None  # the verified manifest's, else computed from spec.toml; None when it is not a spec
    model_args: tuple[str, ...]
    address: str | None = None  # --address, which wins over the spec's [cluster] address
    modified: tuple[str, ...] = ()  # files that differ from the manifest (run with --allow-modified)
    # the Megatron-LM commit and SGLang version the bundle targets (the verified manifest's slime section; None when
    # unverified, or where acrl had no facts of the slime commit when it compiled)
    megatron_commit: str | None = None
    sglang_version: str | None = None
    resume: bool = False  # `acrl run --resume`: train.sh gets ACRL_RESUME=required (refuses to start from scratch)
    runs_dir: Path | None = None  # where run records are (the checkpoint check finds the run that saved there)
    # what the checks compute once and share (train.sh's argv, the datasets' fingerprints), under its own lock
    memo: dict[str, Any] = attrs.field(factory=dict, eq=False, repr=False)
    memo_lock: threading.Lock = attrs.field(factory=threading.Lock, eq=False, repr=False)

    def get(self, dotted: str, default: Any = None) -> Any:
        """A value of the resolved spec by dotted key (``slime.dir``), or ``default``."""
        node: Any = self.spec
        for part in dotted.split("."):
            if not isinstance(node, Mapping) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def cluster_address(self) -> str | None:
        """The existing Ray cluster the job goes to, or None for a local head."""
        return self.address or self.get("cluster.address")

    @property
    def other_nodes(self) -> str:
        """For a local head that other nodes join (the manifest's node_gpus over several nodes): what the gpus
        check adds to its message, that the GPUs counted here are this node's and how the others join; else ""."""
        nodes = self.derived.node_gpus if self.derived is not None else None
        if not nodes or len(nodes) < 2 or self.cluster_address:
            return ""
        return (f" on this node (the head); the other {len(nodes) - 1} node(s) join it with join.sh, each checked "
                "against [cluster] gpus_per_node when it joins")


def read_bundle_info(path: str | os.PathLike[str], *, address: str | None = None,
                     modified: Collection[str] = (), files: Mapping[str, bytes] | None = None,
                     manifest: Manifest | None = None, resume: bool = False,
                     runs_dir: str | os.PathLike[str] | None = None) -> BundleInfo:
    """Read spec.toml, manifest.json and model_args.sh of the bundle directory ``path``.

    ``files``: the bundle's files as acrl.compiler.read_bundle read them, so that
    the checks see the bytes that were verified, not whatever is on disk a moment later.
    ``manifest``: the manifest as verified, when the bundle is intact (its bundle hash covers
    every field). Without it the manifest is not trusted: its derived section (the GPUs the
    job needs) is computed from spec.toml instead, and left out when spec.toml is not a spec.
    ``resume``: `acrl run --resume`; ``runs_dir``: where the run records are."""
    where = Path(path)

    def text(name: str) -> str:
        if files is None:
            return (where / name).read_text(encoding="utf-8")
        if name not in files:
            raise OSError(f"{name} is missing or not a regular file")
        return files[name].decode("utf-8")

    try:
        spec = tomllib.loads(text("spec.toml"))
        # An unverified manifest's fields are never used, but a bundle without a readable one is refused.
        unverified = json.loads(text("manifest.json")) if manifest is None else {}
        segments, _ = bash_arrays(text("model_args.sh"), "MODEL_ARGS")
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:  # tomllib and json: ValueErrors
        raise AcrlError(f"{where}: cannot read the bundle: {exc}",
                        hint="compile the spec again (acrl-compile SPEC -o DIR --force)") from None
    if not isinstance(unverified, dict):
        raise AcrlError(f"{where / 'manifest.json'}: cannot read the bundle: not a JSON object",
                        hint="compile the spec again (acrl-compile SPEC -o DIR --force)")
    if manifest is not None:
        derived: Derived | None = manifest.derived
    else:
        computed = derived_from_spec(text("spec.toml").encode("utf-8"))
        derived = None if computed is None else Derived(**computed)
    tokens = tuple(token for _, words in segments for token in words)
    stack = (manifest.slime.megatron_commit, manifest.slime.sglang_version) if manifest is not None else (None, None)
    return BundleInfo(where, spec, derived, tokens, address, tuple(sorted(modified)), *stack, resume=resume,
                      runs_dir=None if runs_dir is None else Path(runs_dir))
