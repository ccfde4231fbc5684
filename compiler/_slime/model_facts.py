"""Facts about a slime commit that acrl's tests compare against, generated from slime itself.

``python -m acrl.compiler._slime.model_facts SLIME_DIR [--commit REV] -o DIR`` writes, for a slime
checkout (a work tree, or a git directory such as a bare mirror, read at ``--commit``):

* ``DIR/model_args.json``: each ``scripts/models/*.sh`` resolved to its literal MODEL_ARGS list,
  sourced exactly as ``args_source = "script"`` sources it at compile time (the same function:
  env-less bash, an empty working directory);
* ``DIR/hf_checks.json``: the (config.json field, Megatron argument) pairs slime compares at launch
  in ``_hf_validate_args`` (slime/backends/megatron_utils/arguments.py), read with ``ast``;
* ``DIR/placement_layout.json``: what slime's ``_get_placement_group_layout``
  (slime/ray/placement_group.py) returns for a table of layouts: that one function, taken out of the
  file with ``ast`` and run alone (the module itself imports ray);
* ``DIR/engine_layout.json``: what slime's rollout-engine code (slime/ray/rollout.py: the engine count,
  ``ServerGroup.start_engines`` with ``validate_server_group_gpu_indices`` and
  ``_allocate_rollout_engine_addr_and_ports_normal``) does with a table of layouts, run by
  :mod:`.engine_facts` with a stand-in for ``ray``; one layout a line;
* ``DIR/engine_groups_layout.json``: what slime's whole rollout start-up (``start_rollout_servers`` with
  ``--sglang-config``: its server groups, slime/backends/sglang_utils/sglang_config.py) does with a table of
  server-group layouts, run by :mod:`.group_facts` the same way; one layout a line.

All carry their provenance: slime's repository URL, the commit and its date, and the command line
(the local checkout written as ``SLIME_DIR``, so that regenerating anywhere gives the same bytes).
Never imported by the compile path; tests/data/slime/README.md says how the project's copies are made.
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from .._pipeline.model_args.script import ModelArgsError
from .._pipeline.model_args.script import from_script as _from_script
from .._spec.tables import Spec
from . import engine_facts, group_facts
from .checkout import Checkout

SLIME_URL = "https://github.com/THUDM/slime"
ARGUMENTS_PY = "slime/backends/megatron_utils/arguments.py"
_VALIDATOR = "_hf_validate_args"
PLACEMENT_PY = "slime/ray/placement_group.py"
_LAYOUT = "_get_placement_group_layout"
LAYOUT_FLAGS = ("colocate", "debug_train_only", "debug_rollout_only", "rollout_external")


class FactsError(Exception):
    """The checkout cannot give a fact; the message names the file and what is missing."""


def _git(git_dir: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", f"--git-dir={git_dir}", *args], capture_output=True, check=False)
    if proc.returncode != 0:
        raise FactsError(f"git {' '.join(args)} in {git_dir}: {proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def _git_dir(slime_dir: Path) -> Path:
    """The git directory of a work tree or of a (bare) git directory."""
    out = subprocess.run(["git", "-C", str(slime_dir), "rev-parse", "--absolute-git-dir"], capture_output=True,
                         check=False)
    if out.returncode != 0:
        raise FactsError(f"{slime_dir} is not a slime git checkout or git directory")
    return Path(out.stdout.decode().strip())


def model_args(scripts_dir: Path) -> dict[str, list[str]]:
    """Each ``*.sh`` of ``scripts_dir`` (slime's scripts/models) resolved to MODEL_ARGS, by name."""
    slime_dir = scripts_dir.parent.parent
    out: dict[str, list[str]] = {}
    for script in sorted(scripts_dir.glob("*.sh")):
        # The compile-time resolver reads only [model] type, args_source and script_env, and the checkout given.
        spec = SimpleNamespace(model=SimpleNamespace(type=script.stem, script_env={}, args_source="script"),
                               slime=SimpleNamespace(dir=str(slime_dir)))
        try:
            out[script.stem] = list(_from_script(cast(Spec, spec), Checkout(str(slime_dir), "SLIME_DIR")).args)
        except ModelArgsError as exc:
            raise FactsError(f"{script}: {exc.message}") from None
    return out


def _constant(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _getattr_names(tree: ast.AST, obj: str) -> Iterator[str]:
    """The constant attribute names of ``getattr(obj, "name", ...)`` calls under ``tree``."""
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr"
                and len(node.args) >= 2 and isinstance(node.args[0], ast.Name) and node.args[0].id == obj):
            name = _constant(node.args[1])
            if name is not None:
                yield name


def hf_checks(source: str, shown: str = ARGUMENTS_PY) -> list[dict[str, Any]]:
    """The pairs ``_hf_validate_args`` compares: each ``("hf_field", "megatron_arg", fn)`` tuple of the list its
    loop walks, and the rope_theta check written apart (``getattr(hf_config, ...)`` against ``getattr(args, ...)``
    outside the loop). Each with the line it is on."""
    tree = ast.parse(source, filename=shown)
    funcs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == _VALIDATOR]
    if len(funcs) != 1:
        raise FactsError(f"{shown}: expected one {_VALIDATOR} function, found {len(funcs)}")
    func = funcs[0]
    pairs: list[dict[str, Any]] = []
    loop_nodes: set[int] = set()
    for loop in (n for n in ast.walk(func) if isinstance(n, ast.For)):
        for item in loop.iter.elts if isinstance(loop.iter, ast.List) else ():
            if isinstance(item, ast.Tuple) and len(item.elts) >= 2:
                hf, megatron = _constant(item.elts[0]), _constant(item.elts[1])
                if hf is not None and megatron is not None:
                    pairs.append({"hf": hf, "megatron": megatron, "line": item.lineno})
        loop_nodes |= {id(n) for n in ast.walk(loop)}
    if not pairs:
        raise FactsError(f"{shown}:{func.lineno}: {_VALIDATOR} has no loop over (hf, megatron, compare) tuples")
    # Outside the loop: a statement that reads one field of each side is one more compared pair.
    for statement in func.body:
        if id(statement) in loop_nodes or isinstance(statement, ast.FunctionDef):
            continue
        megatron_names = sorted(set(_getattr_names(statement, "args")))
        if len(megatron_names) == 1:
            hf_names = sorted(set(_hf_names(func, statement)))
            pairs += [{"hf": hf, "megatron": megatron_names[0], "line": statement.lineno} for hf in hf_names]
    return pairs


def _hf_names(func: ast.FunctionDef, statement: ast.stmt) -> Iterator[str]:
    """The config.json fields ``statement`` compares: read directly, or through a local variable assigned
    from ``getattr(hf_config, "field")`` / ``some_dict["field"]`` earlier in ``func``."""
    yield from _getattr_names(statement, "hf_config")
    used = {n.id for n in ast.walk(statement) if isinstance(n, ast.Name)}
    for node in ast.walk(func):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in used for t in node.targets):
            yield from _getattr_names(node, "hf_config")
            for sub in ast.walk(node):
                if isinstance(sub, ast.Subscript) and (key := _constant(sub.slice)) is not None:
                    yield key


def placement_layouts(source: str, shown: str = PLACEMENT_PY) -> list[dict[str, Any]]:
    """slime's ``_get_placement_group_layout`` of ``source``, run on every combination of 1-2 actor
    nodes of 4 or 8 GPUs, 0/4/8/16 rollout GPUs and the four flags it reads: each row the arguments
    and what it returned (num_gpus, rollout_offset)."""
    found = [n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef) and n.name == _LAYOUT]
    if not found:
        raise FactsError(f"{shown}: no function {_LAYOUT}")
    func = found[0]
    func.returns = None  # its annotation names nothing the function needs
    for arg in func.args.args:
        arg.annotation = None
    namespace: dict[str, Any] = {"__builtins__": {"max": max}}  # all it may use: arithmetic on args
    exec(compile(ast.Module(body=[func], type_ignores=[]), shown, "exec"), namespace)
    layout = namespace[_LAYOUT]
    rows = []
    for nodes, per_node, rollout in itertools.product((1, 2), (4, 8), (0, 4, 8, 16)):
        for flags in itertools.product((False, True), repeat=len(LAYOUT_FLAGS)):
            args = {"actor_num_nodes": nodes, "actor_num_gpus_per_node": per_node, "rollout_num_gpus": rollout,
                    **dict(zip(LAYOUT_FLAGS, flags, strict=True))}
            num_gpus, offset = layout(SimpleNamespace(**args))
            rows.append({"args": args, "num_gpus": num_gpus, "rollout_offset": offset})
    return rows


def _provenance(git_dir: Path, commit: str, argv: Sequence[str]) -> dict[str, str]:
    url = subprocess.run(["git", f"--git-dir={git_dir}", "config", "--get", "remote.origin.url"],
                         capture_output=True, check=False).stdout.decode().strip().removesuffix(".git")
    date = _git(git_dir, "show", "-s", "--format=%cI", commit).decode().strip()
    return {"repository": url if url.startswith("https://") else SLIME_URL, "commit": commit, "commit_date": date,
            "generator": " ".join(["python -m acrl.compiler._slime.model_facts", *argv])}


def _dumps(data: dict[str, Any]) -> str:
    """JSON, indented; a ``"layouts"`` list of engine rows is written one row a line (thousands of rows)."""
    if "columns" not in data:
        return json.dumps(data, indent=1, ensure_ascii=False)
    head = json.dumps({"provenance": data["provenance"]}, indent=1, ensure_ascii=False)
    rows = ",\n".join("  " + json.dumps(row, ensure_ascii=False) for row in data["layouts"])
    columns = json.dumps(data["columns"], ensure_ascii=False)
    return f'{head[:-2]},\n "columns": {columns},\n "layouts": [\n{rows}\n ]\n}}'


def generate(slime_dir: Path, rev: str | None, out_dir: Path, argv: Sequence[str]) -> list[Path]:
    """Write ``model_args.json``, ``hf_checks.json``, ``placement_layout.json``, ``engine_layout.json`` and
    ``engine_groups_layout.json`` for ``rev`` (default: the checkout's HEAD) into ``out_dir``; returns the files
    written."""
    git_dir = _git_dir(slime_dir)
    commit = _git(git_dir, "rev-parse", "--verify", f"{rev or 'HEAD'}^{{commit}}").decode().strip()
    provenance = _provenance(git_dir, commit, argv)
    with tempfile.TemporaryDirectory(prefix="acrl-slime-facts-") as tmp:
        # Always the committed files, never a work tree's uncommitted edits: the facts name a commit.
        archive = _git(git_dir, "archive", "--format=tar", commit, "scripts/models")
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        scripts = model_args(Path(tmp) / "scripts" / "models")
    source = _git(git_dir, "show", f"{commit}:{ARGUMENTS_PY}").decode()
    placement = _git(git_dir, "show", f"{commit}:{PLACEMENT_PY}").decode()
    rollout = _git(git_dir, "show", f"{commit}:{engine_facts.ROLLOUT_PY}").decode()
    has_validation = subprocess.run(["git", f"--git-dir={git_dir}", "cat-file", "-e",
                                     f"{commit}:{engine_facts.VALIDATION_PY}"], capture_output=True).returncode == 0
    validation = _git(git_dir, "show", f"{commit}:{engine_facts.VALIDATION_PY}").decode() if has_validation else None
    read = f"{engine_facts.ROLLOUT_PY}: _make_group's engine count, ServerGroup.start_engines, " \
        "_allocate_rollout_engine_addr_and_ports_normal" + \
        (f"; {engine_facts.VALIDATION_PY}: validate_server_group_gpu_indices" if has_validation else "") + \
        "; run with a stand-in for ray (engine_facts.py)"
    sglang_config = _git(git_dir, "show", f"{commit}:{group_facts.SGLANG_CONFIG_PY}").decode()
    read_groups = f"{engine_facts.ROLLOUT_PY}: start_rollout_servers, _resolve_sglang_config, ServerGroup, " \
        "RolloutServer, _allocate_rollout_engine_addr_and_ports_normal" + \
        (f"; {engine_facts.VALIDATION_PY}: validate_server_group_gpu_indices" if has_validation else "") + \
        f"; {group_facts.SGLANG_CONFIG_PY}: SglangConfig, ModelConfig, ServerGroupConfig" + \
        "; run with a stand-in for ray and _start_router (group_facts.py)"
    facts: dict[str, dict[str, Any]] = {
        "model_args.json": {"provenance": {**provenance, "from": "scripts/models/*.sh, sourced by acrl's "
                                           "args_source = \"script\" resolver"}, "scripts": scripts},
        "hf_checks.json": {"provenance": {**provenance, "from": f"{ARGUMENTS_PY}: {_VALIDATOR}"},
                           "pairs": hf_checks(source)},
        "placement_layout.json": {"provenance": {**provenance, "from": f"{PLACEMENT_PY}: {_LAYOUT}, run alone"},
                                  "layouts": placement_layouts(placement)},
        "engine_layout.json": {"provenance": {**provenance, "from": read},
                               "columns": {"engines": list(engine_facts.COLUMNS)},
                               "layouts": engine_facts.engine_layouts(rollout, validation)},
        "engine_groups_layout.json": {"provenance": {**provenance, "from": read_groups},
                                      "columns": {"engines": list(group_facts.ENGINE_COLUMNS),
                                                  "groups": list(group_facts.GROUP_COLUMNS)},
                                      "layouts": group_facts.engine_group_layouts(rollout, validation, sglang_config)},
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in facts.items():
        path = out_dir / name
        path.write_text(_dumps(data) + "\n", encoding="utf-8")
        written.append(path)
    return written


def facts_main(argv: Sequence[str] | None, *, prog: str, doc: str | None, checkout: str, checkout_help: str,
               commit_help: str, out_help: str, generate: Callable[[Path, str | None, Path, list[str]], Any]) -> int:
    """The command line of the facts generators: CHECKOUT [--commit REV] -o DIR; prints the files written (one path,
    or each of a list), or the FactsError and exit status 1. The checkout's path is recorded as its placeholder."""
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog=prog, description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkout", metavar=checkout, type=Path, help=checkout_help)
    parser.add_argument("--commit", help=commit_help)
    parser.add_argument("-o", "--out", type=Path, required=True, help=out_help)
    parsed = parser.parse_args(args)
    shown = [checkout if a == str(parsed.checkout) else a for a in args]
    try:
        written = generate(parsed.checkout, parsed.commit, parsed.out, shown)
    except FactsError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    for path in written if isinstance(written, list | tuple) else [written]:
        print(path)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    return facts_main(argv, prog="python -m acrl.compiler._slime.model_facts", doc=__doc__, checkout="SLIME_DIR",
                      checkout_help="slime work tree or git directory",
                      commit_help="the commit to read (default: HEAD)",
                      out_help="directory to write the facts into", generate=generate)


if __name__ == "__main__":
    sys.exit(main())
