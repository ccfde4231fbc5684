"""The layering of acrl's modules, read from their source the way import-linter contracts read it:
every ``import`` and ``from ... import`` of every module, at the top, in a function or under
``if TYPE_CHECKING``, counts.

- acrl.compiler never imports acrl.runtime (the executor depends on the compiler, never the reverse);
- acrl.compiler never imports ray, boto3, botocore, torch or sglang, on any code path (the
  compile path stays light; tests/test_packaging.py checks what one import and compile load);
- no import cycles among acrl's modules;
- acrl.runtime uses only what acrl.compiler declares public: names in ``acrl.compiler.__all__``,
  imported from ``acrl.compiler`` itself, never a module ``acrl.compiler._x``;
- a module imports at the top; an import in a function says why it is lazy, in a ``# lazy: why``
  comment on its line or above its group of imports (modules in LAZY_UNEXPLAINED are not there yet).

A failure names the file, the line and the import.
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import attrs
import pytest
from test_packaging import HEAVY

from conftest import REPO

COMPILER, RUNTIME = "acrl.compiler", "acrl.runtime"


@attrs.frozen
class Import:
    """One import statement's target: ``module`` imports ``target`` at ``path``:``line``."""

    module: str
    path: str
    line: int
    target: str  # the module imported (for acrl's own: the most specific module that exists)
    names: tuple[str, ...]  # `from target import names`; () for `import target`
    statement: str
    in_function: bool = False
    reason: str | None = None  # the `# lazy:` comment of an import in a function

    def where(self) -> str:
        return f"{self.path}:{self.line}: {self.statement}"


def package_dirs(repo: Path = REPO) -> dict[str, Path]:
    """acrl's packages and their directories, as pyproject.toml tells setuptools."""
    config = tomllib.loads((repo / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    return {package: repo / config["package-dir"][package] for package in config["packages"]}


def modules(packages: Mapping[str, Path]) -> dict[str, Path]:
    """Every module of ``packages``, by dotted name (a package is its __init__.py)."""
    found: dict[str, Path] = {}
    for package, directory in packages.items():
        for path in sorted(directory.glob("*.py")):
            found[package if path.stem == "__init__" else f"{package}.{path.stem}"] = path
    return found


def imports_of(module: str, path: Path, known: Mapping[str, Path], repo: Path = REPO) -> Iterator[Import]:
    """Every import in the source of ``module``, wherever it stands in the file."""
    source = path.read_text(encoding="utf-8")
    is_package = path.stem == "__init__"
    shown = path.relative_to(repo).as_posix() if path.is_relative_to(repo) else str(path)
    lines = source.splitlines()
    tree = ast.parse(source, filename=str(path))
    in_function = {id(inner) for outer in ast.walk(tree) if isinstance(outer, ast.FunctionDef | ast.AsyncFunctionDef)
                   for inner in ast.walk(outer) if inner is not outer}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Import | ast.ImportFrom):
            continue
        statement = lines[node.lineno - 1].strip()
        lazy = id(node) in in_function
        extra = {"in_function": lazy, "reason": _lazy_reason(lines, node.lineno) if lazy else None}
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield Import(module, shown, node.lineno, _most_specific(alias.name, known), (), statement, **extra)
        else:
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                parts = parts if is_package else parts[:-1]
                parts = parts[:len(parts) - (node.level - 1)]
                base = ".".join(parts + ([node.module] if node.module else []))
            names = tuple(alias.name for alias in node.names)
            submodules = [f"{base}.{name}" for name in names if f"{base}.{name}" in known]
            for target in submodules:  # `from . import _cache`: the module _cache
                yield Import(module, shown, node.lineno, target, (), statement, **extra)
            others = tuple(name for name in names if f"{base}.{name}" not in known)
            if others or not submodules:
                yield Import(module, shown, node.lineno, _most_specific(base, known), others, statement, **extra)


def _lazy_reason(lines: list[str], line: int) -> str | None:
    """The ``# lazy: why`` comment on the import at ``line`` (1-based), or above its group of imports."""
    if "# lazy:" in lines[line - 1]:
        return lines[line - 1].split("# lazy:", 1)[1].strip()
    for above in reversed(lines[:line - 1]):
        text = above.strip()
        if text.startswith("# lazy:"):
            return text.removeprefix("# lazy:").strip()
        if not text.startswith(("import ", "from ")):
            return None
    return None


def _most_specific(name: str, known: Mapping[str, Path]) -> str:
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in known:
            return ".".join(parts[:end])
    return name


def all_imports(repo: Path = REPO) -> list[Import]:
    known = modules(package_dirs(repo))
    return [found for module, path in known.items() for found in imports_of(module, path, known, repo)]


def _inside(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def compiler_importing_runtime(imports: list[Import]) -> list[str]:
    return [i.where() for i in imports if _inside(i.module, COMPILER) and _inside(i.target, RUNTIME)]


def compiler_importing_heavy(imports: list[Import], heavy: tuple[str, ...]) -> list[str]:
    return [i.where() for i in imports if _inside(i.module, COMPILER)
            and any(_inside(i.target, name) for name in heavy)]


def runtime_using_compiler_internals(imports: list[Import], public: set[str]) -> list[str]:
    bad = []
    for i in imports:
        if not _inside(i.module, RUNTIME) or not _inside(i.target, COMPILER):
            continue
        if i.target != COMPILER:
            bad.append(f"{i.where()}: {i.target} is internal to the compiler")
        elif private := [name for name in i.names if name not in public]:
            bad.append(f"{i.where()}: {', '.join(private)} not in acrl.compiler.__all__")
    return bad


def cycles(imports: list[Import]) -> list[list[Import]]:
    """One cycle per strongly connected component of acrl's import graph, each as its imports."""
    known = {i.module for i in imports}
    edges: dict[str, dict[str, Import]] = {}
    for i in imports:
        if i.target in known and i.target != i.module:
            edges.setdefault(i.module, {}).setdefault(i.target, i)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    components: list[list[str]] = []

    def connect(node: str) -> None:  # Tarjan's algorithm
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(edges.get(node, {})):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            connect(node)
    found = []
    for component in components:  # a shortest path from the first module back to itself, inside the component
        start, members = component[0], set(component)
        paths: dict[str, list[Import]] = {start: []}
        queue = [start]
        while queue:
            node = queue.pop(0)
            for nxt, edge in sorted(edges.get(node, {}).items()):
                if nxt == start:
                    found.append(paths[node] + [edge])
                    queue = []
                    break
                if nxt in members and nxt not in paths:
                    paths[nxt] = paths[node] + [edge]
                    queue.append(nxt)
    return found


def public_names(init: Path) -> set[str]:
    """``__all__`` of a package's __init__.py, read from its source."""
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def unexplained_lazy_imports(imports: list[Import], pending: set[str]) -> list[str]:
    return [i.where() for i in imports if i.in_function and not i.reason and i.module not in pending]


def _report(what: str, offenders: list[str]) -> str:
    return what + ":\n  " + "\n  ".join(offenders)


# --- the contracts, on acrl's source ----------------------------------------------------------------

IMPORTS = all_imports()


def test_the_import_graph_is_read() -> None:
    """The reader sees the imports it must (a reader that saw nothing would pass every contract)."""
    targets = {(i.module, i.target) for i in IMPORTS}
    assert (RUNTIME + "._preflight.checks", "attrs") in targets  # at the top
    assert (RUNTIME + "._preflight.aws", "boto3") in targets  # in a function
    assert (COMPILER, COMPILER + "._pipeline.compile") in targets  # under if TYPE_CHECKING
    assert (COMPILER + "._cli.front", COMPILER + "._fast.cache") in targets  # `from .._fast import cache as _cache`
    assert (COMPILER + "._cli.help", COMPILER + "._fast.cache") in targets  # in a function
    assert {i.module for i in IMPORTS} >= {COMPILER, RUNTIME, COMPILER + "._cli.main", RUNTIME + "._run"}


def test_compiler_never_imports_runtime() -> None:
    offenders = compiler_importing_runtime(IMPORTS)
    assert not offenders, _report("acrl.compiler imports acrl.runtime (the executor depends on the compiler, "
                                  "never the reverse)", offenders)


def test_compiler_never_imports_heavy_dependencies() -> None:
    heavy = tuple(name for name in HEAVY if not _inside(name, "acrl"))
    offenders = compiler_importing_heavy(IMPORTS, heavy)
    assert not offenders, _report(f"acrl.compiler imports {', '.join(heavy)} (the compile path stays light)",
                                  offenders)


def test_no_import_cycles() -> None:
    found = cycles(IMPORTS)
    assert not found, "import cycles among acrl's modules (move the shared piece to the lower module):\n" + \
        "\n".join(" -> ".join([c[0].module, *(i.target for i in c)]) + "\n  " +
                  "\n  ".join(i.where() for i in c) for c in found)


def test_runtime_uses_only_the_compilers_public_names() -> None:
    public = public_names(package_dirs()[COMPILER] / "__init__.py")
    offenders = runtime_using_compiler_internals(IMPORTS, public)
    assert not offenders, _report("acrl.runtime reaches into acrl.compiler's internals (import the name from "
                                  "acrl.compiler, declared in its __all__)", offenders)


def test_every_public_name_of_the_compiler_resolves() -> None:
    import acrl.compiler

    public = public_names(package_dirs()[COMPILER] / "__init__.py")
    assert public == set(acrl.compiler.__all__)
    assert [name for name in sorted(public) if getattr(acrl.compiler, name, None) is None] == []


# Modules whose imports in functions do not say why yet: empty since issue 12, and it stays so (a module
# is listed here only while it is being moved; every lazy import keeps `acrl --help` or the compile path
# from loading what a command does not use: docs/performance.md).
LAZY_UNEXPLAINED: set[str] = set()


def test_imports_in_functions_say_why_they_are_lazy() -> None:
    offenders = unexplained_lazy_imports(IMPORTS, LAZY_UNEXPLAINED)
    assert not offenders, _report("imports in a function without a reason (import at the top, or say why it must "
                                  "be lazy in a `# lazy: why` comment)", offenders)
    gone = sorted(LAZY_UNEXPLAINED - {i.module for i in IMPORTS})
    assert not gone, f"LAZY_UNEXPLAINED names modules that do not exist (moved or renamed?): {gone}"
    explained = sorted(LAZY_UNEXPLAINED - {i.module for i in IMPORTS if i.in_function and not i.reason})
    assert not explained, f"every import in a function of {explained} says why: take them off LAZY_UNEXPLAINED"


# --- the checker itself, on a made-up tree that breaks every contract ---------------------------------

@pytest.fixture
def broken(tmp_path: Path) -> list[Import]:
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools]\npackage-dir = { "acrl.compiler" = "c", "acrl.runtime" = "r" }\n'
        'packages = ["acrl.compiler", "acrl.runtime"]\n', encoding="utf-8")
    files = {
        "c/__init__.py": "__all__ = ['public']\nTYPE_CHECKING = False\nif TYPE_CHECKING:\n    from ._a import public\n",
        "c/_a.py": "import os\n\ndef f():\n    from ._b import g\n\ndef k():\n    # lazy: slow\n    import json\n"
                   "    import csv\n\n    import re\n",
        "c/_b.py": "from . import _a\n\ndef h():\n    import torch.nn\n    from acrl.runtime import _y\n",
        "r/__init__.py": "",
        "r/_x.py": "from acrl.compiler import public, private\nfrom acrl.compiler._a import f\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    return all_imports(tmp_path)


def test_the_checker_finds_each_kind_of_violation(broken: list[Import]) -> None:
    assert compiler_importing_runtime(broken) == ["c/_b.py:5: from acrl.runtime import _y"]
    assert compiler_importing_heavy(broken, ("torch",)) == ["c/_b.py:4: import torch.nn"]
    [cycle] = cycles(broken)
    assert [(i.path, i.line, i.target) for i in cycle] == [("c/_a.py", 4, "acrl.compiler._b"),
                                                           ("c/_b.py", 1, "acrl.compiler._a")]
    assert [line.split(": ", 1)[0] for line in runtime_using_compiler_internals(broken, {"public"})] == \
        ["r/_x.py:1", "r/_x.py:2"]
    assert "private" in runtime_using_compiler_internals(broken, {"public"})[0]
    assert unexplained_lazy_imports(broken, set()) == \
        ["c/_a.py:4: from ._b import g", "c/_a.py:11: import re", "c/_b.py:4: import torch.nn",
         "c/_b.py:5: from acrl.runtime import _y"]
    assert unexplained_lazy_imports(broken, {"acrl.compiler._a", "acrl.compiler._b"}) == []


MAX_LINES = 400  # issue 12: a module a reader can hold in their head; split by what the parts do


def test_no_module_is_over_400_lines() -> None:
    modules = [p for folder in ("compiler", "runtime", "templates") for p in (REPO / folder).rglob("*.py")]
    sizes = {str(p.relative_to(REPO)): len(p.read_text(encoding="utf-8").splitlines()) for p in modules}
    assert len(sizes) > 60
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}
