"""The flags a slime commit accepts, with the Megatron-LM it runs with, generated from their code (issue 15).

``python -m acrl.compiler._slime.flag_facts SLIME_GIT MEGATRON_GIT --commit REV [--commit REV ...] -o DIR`` writes
``DIR/<commit>.json`` for each slime commit: every flag slime's parsers define and every flag of the Megatron-LM its
docker image builds (``ARG MEGATRON_COMMIT`` of slime's docker/Dockerfile, with slime's patches of
``docker/patch/<PATCH_VERSION>/megatron*.patch`` applied as the Dockerfile applies them), read with acrl's own
flag reader (:mod:`.source`, the one that checks a checkout at compile time) from the committed files; the SGLang
version the image is built on (``ARG SGLANG_IMAGE_TAG``); and the model scripts present (``scripts/models/*.sh``).
A reader gap is an error: the facts say what exists, so they must be complete. ``--sglang-*`` flags other than
slime's own are generated from SGLang's ServerArgs at run time and are not in these facts.

Next to it, ``DIR/argparse/<commit>.json`` says what slime's parse does with each of those flags
(:mod:`.argparse_facts`: owner, definition file:line, action, type, nargs, choices, default, aliases, deprecation),
one flag a line; it is a file of its own so that a compile reads it only when an escape-hatch flag is checked.

The compile path reads the committed files through :mod:`.commit_facts`; this generator is never imported by it.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .argparse_facts import flag_details
from .model_facts import SLIME_URL, FactsError, _git, _git_dir
from .parser_facts import parsers
from .source import read_accepted_flags

MEGATRON_URL = "https://github.com/NVIDIA/Megatron-LM"
DOCKERFILE = "docker/Dockerfile"
ARGPARSE = "argparse"  # the folder of the per-flag facts, next to the commit files
_ARG = r"^ARG[ \t]+{}=(\S+)[ \t]*$"


def _dockerfile_arg(text: str, name: str, commit: str) -> str:
    found = re.search(_ARG.format(name), text, re.M)
    if found is None:
        raise FactsError(f"{DOCKERFILE} at {commit[:12]} has no `ARG {name}=...`")
    return found.group(1)


def _extract(git_dir: Path, commit: str, paths: Sequence[str], into: Path) -> None:
    archive = _git(git_dir, "archive", "--format=tar", commit, *paths)
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def commit_flags(slime_git: Path, megatron_git: Path, commit: str,
                 argv: Sequence[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The facts of one slime commit (a full hash), and what its parse does with each flag."""
    dockerfile = _git(slime_git, "show", f"{commit}:{DOCKERFILE}").decode()
    megatron_commit = _dockerfile_arg(dockerfile, "MEGATRON_COMMIT", commit)
    patch_version = _dockerfile_arg(dockerfile, "PATCH_VERSION", commit)
    image = _dockerfile_arg(dockerfile, "SGLANG_IMAGE_TAG", commit)
    patch_dir = f"docker/patch/{patch_version}"
    names = _git(slime_git, "ls-tree", "--name-only", f"{commit}:{patch_dir}").decode().split()
    # the Dockerfile applies megatron.patch, then megatron-sglang-aligned.patch when present
    patches = [n for n in ("megatron.patch", "megatron-sglang-aligned.patch") if n in names]
    with tempfile.TemporaryDirectory(prefix="acrl-flag-facts-") as tmp:
        slime, megatron = Path(tmp, "slime"), Path(tmp, "megatron")
        _extract(slime_git, commit, ["slime", "scripts/models"], slime)
        _extract(megatron_git, megatron_commit, ["megatron"], megatron)
        applied = []
        for name in patches:
            data = _git(slime_git, "show", f"{commit}:{patch_dir}/{name}")
            proc = subprocess.run(["git", "apply", "--whitespace=nowarn", "-"], cwd=megatron, input=data,
                                  capture_output=True, check=False)
            if proc.returncode:
                raise FactsError(f"{patch_dir}/{name} of slime {commit[:12]} does not apply to Megatron-LM "
                                 f"{megatron_commit[:12]}: {proc.stderr.decode(errors='replace').strip()[:300]}")
            applied.append({"path": f"{patch_dir}/{name}", "sha256": hashlib.sha256(data).hexdigest()})
        slime_only = read_accepted_flags(slime, None)
        both = read_accepted_flags(slime, megatron)
        if slime_only is None or both is None:
            raise FactsError(f"slime {commit[:12]} has no slime/utils/arguments.py")
        if both.gaps:
            raise FactsError(f"the flags of slime {commit[:12]} + Megatron-LM {megatron_commit[:12]} could not all be "
                             "read: " + "; ".join(both.gaps))
        scripts = sorted(p.name.removesuffix(".sh") for p in (slime / "scripts" / "models").glob("*.sh"))
        parser_facts = parsers(slime, megatron)
        slime_files = dict(slime_only.files)
        details = flag_details(slime, slime_files, megatron, [f for f, _ in both.files if f not in slime_files],
                               set(both.flags))
    date = _git(slime_git, "show", "-s", "--format=%cI", commit).decode().strip()
    tags = sorted(_git(slime_git, "tag", "--points-at", commit).decode().split())
    provenance = {"repository": SLIME_URL, "commit": commit, "commit_date": date, "tags": tags,
                  "megatron": {"repository": MEGATRON_URL, "commit": megatron_commit, "patches": applied},
                  "generator": " ".join(["python -m acrl.compiler._slime.flag_facts", *argv])}
    facts = {
        "provenance": provenance,
        "sglang_version": re.sub(r"-cu\d+$", "", image).removeprefix("v"),
        "flags": {"slime": sorted(slime_only.flags), "megatron": sorted(both.flags - slime_only.flags)},
        "model_scripts": scripts,
        "parsers": parser_facts,
    }
    return facts, {"provenance": {**provenance, "read": READ}, "flags": details}


READ = ("slime's add_argument / reset_arg calls of every slime/**/arguments*.py (acrl.compiler._slime.default_facts); "
        "Megatron-LM's add_argument calls and ArgumentGroupFactory dataclass fields (acrl.compiler._slime."
        "megatron_defaults); deprecations from their help, dest and validation messages (acrl.compiler._slime."
        "deprecations)")


def dumps_details(data: dict[str, Any]) -> str:
    """The argparse facts as JSON, one flag a line (compact, and a diff shows which flags changed)."""
    lines = [f"  {json.dumps(flag)}: {json.dumps(record, ensure_ascii=False, separators=(',', ':'))}"
             for flag, record in data["flags"].items()]
    return ("{\n \"provenance\": " + json.dumps(data["provenance"], ensure_ascii=False) + ",\n \"flags\": {\n"
            + ",\n".join(lines) + "\n }\n}\n")


def generate(slime_dir: Path, megatron_dir: Path, revs: Sequence[str], out_dir: Path,
             argv: Sequence[str]) -> list[Path]:
    slime_git, megatron_git = _git_dir(slime_dir), _git_dir(megatron_dir)
    (out_dir / ARGPARSE).mkdir(parents=True, exist_ok=True)
    written = []
    for rev in revs:
        commit = _git(slime_git, "rev-parse", "--verify", f"{rev}^{{commit}}").decode().strip()
        facts, details = commit_flags(slime_git, megatron_git, commit, argv)
        path = out_dir / f"{commit}.json"
        path.write_text(json.dumps(facts, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        detail_path = out_dir / ARGPARSE / f"{commit}.json"
        detail_path.write_text(dumps_details(details), encoding="utf-8")
        written += [path, detail_path]
    return written


def main(argv: Sequence[str] | None = None) -> int:
    import argparse  # lazy: only the command line needs it

    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="python -m acrl.compiler._slime.flag_facts", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("slime", metavar="SLIME_GIT", type=Path, help="slime work tree or git directory")
    parser.add_argument("megatron", metavar="MEGATRON_GIT", type=Path, help="Megatron-LM work tree or git directory")
    parser.add_argument("--commit", action="append", required=True, help="a slime commit or tag (repeatable)")
    parser.add_argument("-o", "--out", type=Path, required=True, help="directory to write <commit>.json into")
    parsed = parser.parse_args(args)
    shown = ["SLIME_GIT" if a == str(parsed.slime) else "MEGATRON_GIT" if a == str(parsed.megatron) else a
             for a in args]
    try:
        written = generate(parsed.slime, parsed.megatron, parsed.commit, parsed.out, shown)
    except FactsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in written:
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
