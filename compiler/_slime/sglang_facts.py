"""Facts about the sglang a slime commit runs, generated from sglang's wheel and slime's docker/ folder.

``python -m acrl.compiler._slime.sglang_facts WHEEL_OR_DIR [--version V] [--slime SLIME_DIR --commit REV] -o OUT``
reads ``sglang/srt/server_args.py`` of an sglang wheel (a zip; or a directory holding an unpacked wheel or an sglang
checkout) with ``ast`` (:mod:`.sglang_args`; sglang is never imported) and writes OUT (JSON):

* ``fields``: the ServerArgs dataclass's field names (what a ``--sglang-config`` server group may override:
  slime drops any other key, slime/backends/sglang_utils/sglang_engine.py:585-612 at 624b824);
* ``arguments``: every argument ``ServerArgs.add_cli_args`` registers (options, dest, nargs/type/choices/action
  where literal, the deprecation and its replacement);
* with ``--slime``: what slime's Dockerfile (``docker/Dockerfile`` at REV) builds: the image's sglang version
  (``ARG SGLANG_IMAGE_TAG``, checked against the wheel's), slime's patches of server_args.py
  (``docker/patch/<PATCH_VERSION>/sglang*.patch``) applied in the order their ``index`` lines chain from the wheel's
  file (the wheel's git blob id must be the first patch's base: the same source as the image's), and ``slime``: the
  ``skipped_args`` and slime's own ``--sglang-*`` flags of slime/backends/sglang_utils/arguments.py.

The patches are slime's, so the facts belong to a slime commit, not to an sglang version (v0.3.1 and 624b824 run
the same wheel, patched differently). With ``--slime``, OUT may be a directory: the facts go to
``OUT/<slime commit>.json`` and ``OUT/index.json`` is rewritten from every such file there (:func:`index_text`:
per commit its sglang version and the deprecated aliases the compiler renames, so that a compile reads the small
index and not the big files). ``--index DIR`` only rewrites DIR's index.

The provenance names the version, the wheel's file name and sha256, the git blob ids, the slime commit and the
command (the wheel as ``WHEELS/<file name>``, the checkout as ``SLIME_DIR``). The project's copies are
compiler/_slime/sglang/<slime commit>.json and index.json (docs/spec.md, "The SGLang slime runs"); the compiler
reads them through :mod:`.sglang_stack`. Never imported by the compile path.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .model_facts import SLIME_URL, FactsError, _git, _git_dir
from .sglang_args import SlimeSglangError, read_server_args, read_slime_side
from .sglang_stack import INDEX, SglangFile

GENERATOR = "python -m acrl.compiler._slime.sglang_facts"
SERVER_ARGS = "sglang/srt/server_args.py"
PATCHED = "python/" + SERVER_ARGS  # the path slime's patches name (sglang's repository layout)
DOCKERFILE = "docker/Dockerfile"
SLIME_SGLANG_ARGUMENTS = "slime/backends/sglang_utils/arguments.py"
_TAG = re.compile(r"^ARG SGLANG_IMAGE_TAG=v(?P<version>[0-9][^\s-]*)(?:-\S*)?\s*$", re.M)
_PATCH_VERSION = re.compile(r"^ARG PATCH_VERSION=(\S+)\s*$", re.M)


def blob_id(data: bytes) -> str:
    """git's blob id of ``data`` (what a patch's ``index`` line names)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def read_wheel(path: Path, version: str | None) -> tuple[bytes, str, dict[str, str]]:
    """(server_args.py's bytes, the sglang version, the source's provenance) of a wheel or a directory."""
    if path.is_file():
        try:
            with zipfile.ZipFile(path) as wheel:
                data = wheel.read(SERVER_ARGS)
                metadata = [n for n in wheel.namelist() if n.endswith(".dist-info/METADATA")]
                meta = wheel.read(metadata[0]).decode() if metadata else ""
        except (zipfile.BadZipFile, KeyError) as exc:
            raise FactsError(f"{path}: not an sglang wheel ({exc})") from None
        found = re.search(r"^Version: (\S+)$", meta, re.M)
        version = version or (found.group(1) if found else None)
        source = {"wheel": path.name, "wheel_sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
    elif path.is_dir():
        candidates = [path / SERVER_ARGS, path / PATCHED]
        file = next((c for c in candidates if c.is_file()), None)
        if file is None:
            raise FactsError(f"{path}: no {SERVER_ARGS} or {PATCHED}")
        data = file.read_bytes()
        source = {"directory": path.name}
    else:
        raise FactsError(f"{path}: no such wheel or directory")
    if not version:
        raise FactsError(f"{path}: the sglang version is not in its metadata; give --version")
    return data, version, source


def _server_args_index(patch: str) -> tuple[str, str] | None:
    """(base blob, result blob) of the patch's server_args.py diff, or None when it does not touch the file."""
    found = re.search(rf"^diff --git a/{re.escape(PATCHED)} b/{re.escape(PATCHED)}\n(?:(?!diff --git).*\n)*?"
                      r"index ([0-9a-f]+)\.\.([0-9a-f]+)", patch, re.M)
    return (found.group(1), found.group(2)) if found else None


def apply_patches(data: bytes, patches: dict[str, str]) -> tuple[bytes, list[dict[str, str]]]:
    """``data`` with the server_args.py part of each patch that touches it applied (``git apply``, as slime's
    Dockerfile does), in the order their index lines chain from ``data``'s blob id; the patches applied."""
    pending = {name: index for name, text in patches.items() if (index := _server_args_index(text)) is not None}
    applied = []
    while pending:
        current = blob_id(data)
        name = next((n for n, (base, _) in sorted(pending.items()) if current.startswith(base)), None)
        if name is None:
            raise FactsError(f"no patch of server_args.py applies to blob {current[:11]} (patches based on "
                             f"{', '.join(sorted(b for b, _ in pending.values()))}): this sglang is not the one "
                             "slime's image patches")
        with tempfile.TemporaryDirectory(prefix="acrl-sglang-") as tmp:
            target = Path(tmp, "tree", PATCHED)
            target.parent.mkdir(parents=True)
            target.write_bytes(data)
            Path(tmp, "p.patch").write_text(patches[name], encoding="utf-8")
            proc = subprocess.run(["git", "apply", f"--include={PATCHED}", "../p.patch"], cwd=Path(tmp, "tree"),
                                  capture_output=True, check=False,
                                  env={**os.environ, "GIT_CEILING_DIRECTORIES": tmp})
            if proc.returncode != 0:
                raise FactsError(f"{name} does not apply: {proc.stderr.decode(errors='replace').strip()}")
            data = target.read_bytes()
        if not blob_id(data).startswith(pending[name][1]):
            raise FactsError(f"{name}: the patched server_args.py is not the patch's {pending[name][1]}")
        applied.append({"path": name, "blob_before": current, "blob_after": blob_id(data)})
        del pending[name]
    return data, applied


def slime_stack(slime_dir: Path, rev: str, version: str) -> tuple[dict[str, Any], dict[str, str], str]:
    """(slime's provenance, its sglang patches by path, its sglang arguments.py) at ``rev``."""
    git_dir = _git_dir(slime_dir)
    commit = _git(git_dir, "rev-parse", "--verify", f"{rev}^{{commit}}").decode().strip()
    dockerfile = _git(git_dir, "show", f"{commit}:{DOCKERFILE}").decode()
    tag = _TAG.search(dockerfile)
    if tag is None:
        raise FactsError(f"{DOCKERFILE} at {commit[:9]} has no ARG SGLANG_IMAGE_TAG=v<version>")
    if tag.group("version") != version:
        raise FactsError(f"{DOCKERFILE} at {commit[:9]} builds sglang {tag.group('version')}, the wheel is {version}")
    patch_version = _PATCH_VERSION.search(dockerfile)
    folder = f"docker/patch/{patch_version.group(1) if patch_version else 'latest'}"
    names = _git(git_dir, "ls-tree", "--name-only", f"{commit}:{folder}").decode().split()
    patches = {f"{folder}/{n}": _git(git_dir, "show", f"{commit}:{folder}/{n}").decode()
               for n in names if n.startswith("sglang") and n.endswith(".patch")}
    line = dockerfile[:tag.start()].count("\n") + 1
    provenance = {"repository": SLIME_URL, "commit": commit, "image": f"{DOCKERFILE}:{line}: {tag.group(0).strip()}"}
    return provenance, patches, _git(git_dir, "show", f"{commit}:{SLIME_SGLANG_ARGUMENTS}").decode()


def generate(source: Path, version: str | None, slime_dir: Path | None, rev: str | None,
             argv: Sequence[str]) -> dict[str, Any]:
    data, version, origin = read_wheel(source, version)
    provenance: dict[str, Any] = {"sglang_version": version, **origin, "server_args": SERVER_ARGS,
                                  "server_args_blob": blob_id(data)}
    slime: dict[str, Any] | None = None
    if slime_dir is not None:
        slime_provenance, patches, arguments_py = slime_stack(slime_dir, rev or "HEAD", version)
        data, applied = apply_patches(data, patches)
        provenance["slime"] = {**slime_provenance, "patches": applied}
        try:
            skipped, own = read_slime_side(arguments_py)
        except SlimeSglangError as exc:
            raise FactsError(str(exc)) from None
        slime = {"arguments": SLIME_SGLANG_ARGUMENTS, "skipped": skipped, "own": own}
    provenance["generator"] = " ".join([GENERATOR, *argv])
    try:
        fields, arguments = read_server_args(data.decode("utf-8"))
    except (SlimeSglangError, UnicodeDecodeError) as exc:
        raise FactsError(str(exc)) from None
    out: dict[str, Any] = {"provenance": provenance, "fields": fields, "arguments": arguments}
    if slime is not None:
        out["slime"] = slime
    return out


def dumps(data: dict[str, Any]) -> str:
    """The file's text: indented, one argument a line."""
    head = {k: v for k, v in data.items() if k != "arguments"}
    text = json.dumps(head, indent=1, ensure_ascii=False)
    rows = ",\n".join("  " + json.dumps(a, ensure_ascii=False) for a in data["arguments"])
    return f'{text[:-2]},\n "arguments": [\n{rows}\n ]\n}}\n'


def index_text(folder: Path) -> str:
    """The index of ``folder``'s facts files (each ``<slime commit>.json``, named by its provenance): per commit, the
    sglang version and :meth:`.SglangFile.aliases`."""
    commits: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.json")):
        if path.name == INDEX:
            continue
        data = json.loads(path.read_text(encoding="utf-8"))
        commit = data.get("provenance", {}).get("slime", {}).get("commit")
        if not commit:
            raise FactsError(f"{path}: facts made without --slime belong to no slime commit; move it out of {folder}")
        if commit != path.stem:
            raise FactsError(f"{path}: the facts of slime commit {commit} must be named {commit}.json (the compiler "
                             "looks them up by that name); regenerate them with -o FOLDER")
        commits[commit] = {"sglang_version": data["provenance"]["sglang_version"],
                           "aliases": SglangFile(data).aliases()}
    about = (f"made by {GENERATOR} (-o DIR, or --index DIR) from the <slime commit>.json files next to it: per slime "
             "commit, the sglang version its image runs and the --sglang-* flags that sglang keeps only as "
             "deprecated aliases of another (what acrl passes instead)")
    return json.dumps({"about": about, "commits": commits}, indent=1, ensure_ascii=False) + "\n"


def _write(data: dict[str, Any], out: Path) -> Path:
    """Write ``data`` to ``out``, or into the folder ``out`` as <slime commit>.json and rewrite its index."""
    if not out.is_dir():
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dumps(data), encoding="utf-8")
        return out
    if "slime" not in data["provenance"]:
        raise FactsError(f"{out} is a folder: its files are named by slime commit, so give --slime SLIME_DIR "
                         "--commit REV (or -o FILE)")
    path = out / f"{data['provenance']['slime']['commit']}.json"
    path.write_text(dumps(data), encoding="utf-8")
    (out / INDEX).write_text(index_text(out), encoding="utf-8")
    return path


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=GENERATOR, description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source", metavar="WHEEL_OR_DIR", type=Path, nargs="?", help="an sglang wheel, or a directory")
    parser.add_argument("--version", help="the sglang version (default: the wheel's metadata)")
    parser.add_argument("--slime", type=Path, metavar="SLIME_DIR", help="slime work tree or git directory")
    parser.add_argument("--commit", help="the slime commit whose Dockerfile and patches to read (default: HEAD)")
    parser.add_argument("-o", "--out", type=Path, help="the JSON file to write, or a folder (with --slime): "
                        "FOLDER/<slime commit>.json, and FOLDER/index.json rewritten")
    parser.add_argument("--index", type=Path, metavar="DIR", help="only rewrite DIR/index.json from DIR's files")
    parsed = parser.parse_args(args)
    if (parsed.index is None) == (parsed.source is None or parsed.out is None):
        parser.error("give WHEEL_OR_DIR and -o OUT, or --index DIR alone")
    shown = [f"WHEELS/{parsed.source.name}" if parsed.source is not None and a == str(parsed.source) else
             "SLIME_DIR" if parsed.slime is not None and a == str(parsed.slime) else a for a in args]
    try:
        if parsed.index is not None:
            (parsed.index / INDEX).write_text(index_text(parsed.index), encoding="utf-8")
            print(parsed.index / INDEX)
            return 0
        data = generate(parsed.source, parsed.version, parsed.slime, parsed.commit, shown)
        print(_write(data, parsed.out))
    except FactsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
