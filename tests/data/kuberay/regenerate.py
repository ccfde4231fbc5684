"""Regenerate rayjob.schema.json: KubeRay's RayJob CRD (ray-operator/config/crd/bases/ray.io_rayjobs.yaml, version v1's
openAPIV3Schema) as a JSON Schema (draft 2020-12) that tests/test_kuberay_schema.py validates every generated RayJob
against.

    python tests/data/kuberay/regenerate.py --kuberay PATH [--tag v1.7.0]

PATH is a clone of github.com/ray-project/kuberay (a bare mirror works: the file is read with ``git show TAG:...``).
The conversion is mechanical and keeps every constraint jsonschema can check:

- an object with ``properties`` gets ``additionalProperties: false`` unless it has
  ``x-kubernetes-preserve-unknown-fields: true``: the API server prunes (or, with strict field validation, refuses)
  unknown fields of a structural schema, so a field KubeRay does not know is a bug of acrl's;
- ``format: int32`` / ``int64`` become the bounds of those integers; ``nullable: true`` allows null;
- ``x-kubernetes-int-or-string`` keeps its ``anyOf`` (integer or string, with the quantity ``pattern``);
- a subschema repeated verbatim (the pod template of the head, the workers and the submitter) is written once under
  ``$defs`` and referenced, to keep the file small;
- the other ``x-kubernetes-*`` markers (list and map types, list-map keys) say how the API server merges, not what
  it accepts, and are dropped; ``x-kubernetes-validations`` (CEL, which jsonschema cannot run) are dropped and listed
  under ``x-acrl-dropped-validations`` with their JSON pointers, so that the tests can assert acrl writes none of
  the fields they constrain.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

CRD = "ray-operator/config/crd/bases/ray.io_rayjobs.yaml"
OUT = Path(__file__).with_name("rayjob.schema.json")
BOUNDS = {"int32": (-(2 ** 31), 2 ** 31 - 1), "int64": (-(2 ** 63), 2 ** 63 - 1)}
DROPPED = ("x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
           "x-kubernetes-int-or-string", "x-kubernetes-embedded-resource", "description")


def convert(node: Any, pointer: str, dropped: list[dict[str, Any]]) -> Any:
    """One openAPIV3Schema node as JSON Schema (see the module's docstring)."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in DROPPED:
            continue
        if key == "x-kubernetes-validations":
            dropped += [{"pointer": pointer, **rule} for rule in value]
        elif key == "x-kubernetes-preserve-unknown-fields":
            out["x-preserve-unknown-fields"] = value
        elif key == "properties":
            out[key] = {name: convert(sub, f"{pointer}/properties/{name}", dropped) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not"):
            out[key] = convert(value, f"{pointer}/{key}", dropped)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [convert(sub, f"{pointer}/{key}/{i}", dropped) for i, sub in enumerate(value)]
        elif key == "nullable":
            continue
        else:
            out[key] = value
    if node.get("format") in BOUNDS and node.get("type") == "integer":
        low, high = BOUNDS[node["format"]]
        out.setdefault("minimum", low)
        out.setdefault("maximum", high)
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    if "properties" in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        out.setdefault("additionalProperties", False)
    out.pop("x-preserve-unknown-fields", None)
    return out


_SCHEMA_MAPS = ("properties", "$defs")  # maps of name -> schema (the map itself is not a schema)
_SHARED_MIN = 2000  # characters of JSON a repeated subschema must have to be shared


def _text(node: Any) -> str:
    return json.dumps(node, sort_keys=True)


def dedupe(root: dict[str, Any]) -> dict[str, Any]:
    """``root`` with each subschema that appears more than once (and is not small) written once under ``$defs``."""
    seen: Counter[str] = Counter()

    def count(node: Any) -> None:
        if isinstance(node, dict):
            if len(text := _text(node)) >= _SHARED_MIN:
                seen[text] += 1
            for key, value in node.items():
                for sub in (value.values() if key in _SCHEMA_MAPS else [value]):
                    count(sub)
        elif isinstance(node, list):
            for item in node:
                count(item)

    defs: dict[str, Any] = {}

    def children(node: dict[str, Any]) -> dict[str, Any]:
        return {key: {name: share(sub) for name, sub in value.items()} if key in _SCHEMA_MAPS else share(value)
                for key, value in node.items()}

    def share(node: Any) -> Any:
        if isinstance(node, list):
            return [share(item) for item in node]
        if not isinstance(node, dict):
            return node
        text = _text(node)
        if seen[text] < 2:
            return children(node)
        name = hashlib.sha256(text.encode()).hexdigest()[:12]
        if name not in defs:
            defs[name] = {}
            defs[name] = children(node)
        return {"$ref": f"#/$defs/{name}"}

    count(root)
    out = children(root)
    return {**out, "$defs": dict(sorted(defs.items()))} if defs else out


def read_crd(kuberay: Path, tag: str) -> tuple[str, str]:
    """(the CRD's text at ``tag``, the commit ``tag`` names)."""
    git = ["git", f"--git-dir={kuberay / '.git'}" if (kuberay / ".git").exists() else f"--git-dir={kuberay}"]
    commit = subprocess.run([*git, "rev-parse", f"{tag}^{{commit}}"], capture_output=True, text=True,
                            check=True).stdout.strip()
    text = subprocess.run([*git, "show", f"{commit}:{CRD}"], capture_output=True, text=True, check=True).stdout
    return text, commit


def schema(text: str, tag: str, commit: str) -> dict[str, Any]:
    crd = yaml.safe_load(text)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    dropped: list[dict[str, Any]] = []
    body = dedupe(convert(version["schema"]["openAPIV3Schema"], "", dropped))
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$comment": f"Generated by tests/data/kuberay/regenerate.py from KubeRay {tag} ({commit}) {CRD}, version "
                        "v1; do not edit.",
            "x-kuberay-version": tag, "x-kuberay-commit": commit, "x-acrl-dropped-validations": dropped, **body}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kuberay", type=Path, required=True, help="a clone (or bare mirror) of ray-project/kuberay")
    parser.add_argument("--tag", default="v1.7.0", help="the KubeRay release to read (default: %(default)s)")
    args = parser.parse_args()
    text, commit = read_crd(args.kuberay, args.tag)
    OUT.write_text(json.dumps(schema(text, args.tag, commit), indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {OUT} from KubeRay {args.tag} ({commit})")


if __name__ == "__main__":
    main()
