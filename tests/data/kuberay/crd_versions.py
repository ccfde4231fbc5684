"""Regenerate crd_versions.json: per KubeRay release, the versions its RayJob CRD serves and the fields each version's
spec knows (ray-operator/config/crd/bases/ray.io_rayjobs.yaml), for the stand-in kubectl (tests/shims/kubectl), which
answers `kubectl get crd rayjobs.ray.io -o json` with a CRD of that shape.

    python tests/data/kuberay/crd_versions.py --kuberay PATH [--tag v1.7.0 --tag v1.5.1]

PATH is a clone of github.com/ray-project/kuberay (a bare mirror works: the file is read with ``git show TAG:...``).
v1.5.1 is the last release before preRunningDeadlineSeconds (v1.6.0).
"""

from __future__ import annotations

import argparse
import json
import subprocess
from pathlib import Path

import yaml

CRD = "ray-operator/config/crd/bases/ray.io_rayjobs.yaml"
OUT = Path(__file__).with_name("crd_versions.json")


def versions(kuberay: str, tag: str) -> dict[str, object]:
    text = subprocess.run(["git", "-C", kuberay, "show", f"{tag}:{CRD}"], capture_output=True, text=True,
                          check=True).stdout
    crd = yaml.safe_load(text)
    commit = subprocess.run(["git", "-C", kuberay, "rev-parse", f"{tag}^{{commit}}"], capture_output=True, text=True,
                            check=True).stdout.strip()
    return {"commit": commit, "versions": [
        {"name": v["name"], "served": v.get("served", False), "storage": v.get("storage", False),
         "spec_fields": sorted(v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])}
        for v in crd["spec"]["versions"]]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kuberay", required=True)
    parser.add_argument("--tag", action="append", default=[])
    args = parser.parse_args()
    data = {tag: versions(args.kuberay, tag) for tag in args.tag or ["v1.7.0", "v1.5.1"]}
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
