"""`acrl import KIND FILE -o spec.toml`: turn what people launch slime with today (SlimeRunner's
YAML, a hand-written train.sh) into a spec, and say plainly what did not carry over.

Each importer is a function ``(path, **options) -> Imported`` in its own module, registered by
name in :data:`IMPORTERS`. This module writes the spec (never over an existing file without
``--force``, atomically), then compiles it in memory, so the user learns at once whether the
result is a valid spec, and where it is not.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import attrs
import tomli_w

from .._pipeline.bundle import _writer_gone, read_input
from .._pipeline.compile import compile_spec
from ..errors import AcrlError, SpecError, UsageError

NoteKind = Literal["difference", "unresolved", "escape-hatch", "default"]


@attrs.frozen
class Note:
    """One thing the user should know about an import: a deliberate difference from what the old
    launcher did, a value that could not be resolved (left for the user), a flag put in the escape
    hatch, or a default acrl filled in. ``where`` is the input's location (``file:line``) or key."""

    kind: NoteKind
    message: str
    where: str = ""

    def format(self) -> str:
        return f"{self.where + ': ' if self.where else ''}{self.kind}: {self.message}"

    def as_json(self) -> dict[str, str]:
        return {"kind": self.kind, "message": self.message, "where": self.where}


@attrs.frozen
class Imported:
    """What an importer made: the spec as TOML data (tables of plain values), and the notes."""

    spec: Mapping[str, Any]
    notes: tuple[Note, ...] = ()
    source: str = ""  # what it was imported from, for the spec's header comment


class ImportInputError(AcrlError):
    """The input cannot be imported: unreadable, not the expected shape, an unknown key."""

    def __init__(self, *, path: str, reason: str, fix: str, before: Sequence[ImportInputError] = (),
                 partial: Imported | None = None) -> None:
        """``before``: other problems of the same input, printed first, each with its own fix. ``partial``: the
        spec made without the keys refused (ones the input's program does not have), when one could be made:
        run_import compiles it in memory and reports its errors with these."""
        super().__init__("".join(f"{problem}\n" for problem in before) + f"{path}: {reason}", hint=fix)
        self.path, self.reason, self.partial = path, reason, partial


YAML_NODES = 100_000  # the most values a YAML may expand to, its aliases (*name) counted at each use
YAML_DEPTH = 64  # the most mappings and sequences inside each other


def load_yaml(text: str, path: str) -> tuple[Any, Any]:
    """The composed node and the data of the YAML ``text`` (of the file ``path``), parsed once.
    Raises yaml.YAMLError for bad syntax, and ImportInputError when its aliases expand to more than
    YAML_NODES values or refer to themselves ("billion laughs"): what PyYAML builds from it is
    small, but every later walk over it would not be."""
    import yaml  # lazy: PyYAML is for YAML inputs; a train.sh import (_shell.eval uses this module) skips it

    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        _expanded_size(node, path)
        return node, loader.construct_document(node)
    except RecursionError:  # PyYAML composes and constructs recursively
        raise ImportInputError(path=path, reason="too large: values nested too deeply for PyYAML to read",
                               fix="flatten the nesting") from None
    finally:
        loader.dispose()


def _expanded_size(root: Any, path: str) -> int:
    """How many values ``root`` stands for with every alias expanded (memoized: linear in the nodes)."""
    import yaml  # lazy: PyYAML is for YAML inputs; a train.sh import (_shell.eval uses this module) skips it

    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    open_nodes: set[int] = set()
    stack: list[tuple[Any, bool]] = [(root, False)]

    def children(node: Any) -> list[Any]:
        if isinstance(node, yaml.MappingNode):
            return [n for pair in node.value for n in pair]
        return list(node.value) if isinstance(node, yaml.SequenceNode) else []

    while stack:
        node, done = stack.pop()
        if id(node) in sizes:
            continue
        if done:
            open_nodes.discard(id(node))
            size = 1 + sum(sizes[id(c)] for c in children(node))
            depths[id(node)] = 1 + max((depths[id(c)] for c in children(node)), default=0)
            if depths[id(node)] > YAML_DEPTH:
                raise ImportInputError(path=f"{path}:{node.start_mark.line + 1}", reason=f"too large: values nested "
                                       f"over {YAML_DEPTH} deep (the limit)", fix="flatten the nesting")
            if size > YAML_NODES:
                line = node.start_mark.line + 1
                raise ImportInputError(path=f"{path}:{line}", reason=f"too large: its aliases expand to over "
                                       f"{YAML_NODES:,} values (the limit)", fix="write the values out, or "
                                       "use fewer aliases (*name)")
            sizes[id(node)] = size
            continue
        if id(node) in open_nodes:
            raise ImportInputError(path=f"{path}:{node.start_mark.line + 1}", reason="too large: a value "
                                   "contains itself through an alias (*name), which expands without end",
                                   fix="remove the alias to its own anchor")
        open_nodes.add(id(node))
        stack.append((node, True))
        stack.extend((c, False) for c in children(node) if id(c) not in sizes)
    return sizes[id(root)]


Importer = Callable[..., Imported]

# name -> (module, function), imported only when used
IMPORTERS: dict[str, tuple[str, str]] = {
    "slime-runner": ("acrl.compiler._importers.slime_runner", "import_slime_runner"),
    "train-sh": ("acrl.compiler._importers.train_sh", "import_train_sh"),
}


def importer(kind: str) -> Importer:
    if kind not in IMPORTERS:
        raise UsageError(f"acrl import {kind}: no such importer", hint=f"use one of {', '.join(sorted(IMPORTERS))}")
    module, function = IMPORTERS[kind]
    found: Importer = getattr(importlib.import_module(module), function)
    return found


def render_spec(imported: Imported) -> str:
    """The spec file: a header naming the source and every note, then the TOML."""
    origin = f" from {_comment_text(imported.source)}" if imported.source else ""
    header = [f"# Imported by `acrl import`{origin}.", "# Review it, then compile: acrl-compile THIS_FILE"]
    if imported.notes:
        header.append("#")
        header.append("# What did not carry over as it was (see also `acrl import`'s output):")
        for note in imported.notes:
            for i, line in enumerate(note.format().splitlines()):
                header.append(("# - " if i == 0 else "#   ") + _comment_text(line))
    body = tomli_w.dumps(_plain(imported.spec))
    return "\n".join(header) + "\n\n" + body


def _comment_text(text: str) -> str:
    """``text`` fit for one TOML comment line: a file name or script text may hold a newline (which would end the
    comment and let the rest be read as TOML) or a control character (which TOML forbids in comments)."""
    return "".join(c if c == "\t" or (c.isprintable() and c not in "\u2028\u2029")
                   else ascii(c)[1:-1] for c in text)


def printable(text: str) -> str:
    """``text`` with its lines kept and every other control character escaped (for a terminal)."""
    return "\n".join(_comment_text(line) for line in text.split("\n"))


def _plain(value: Any) -> Any:
    """tomli-w writes dicts, lists and scalars; importers may hand over any Mapping or Sequence."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [_plain(v) for v in value]
    return value


def write_new_file(path: Path, text: str, *, force: bool, what: str = "the spec", example: str = "spec.toml") -> None:
    """Write ``text`` to ``path`` atomically; an existing file is replaced only with ``force``. ``what`` and
    ``example`` name the file in messages (`acrl import` writes a spec, `acrl layout -o` a picture). A
    directory given as the file is a usage error (exit 2); a file that is there is refused with exit 3, as
    acrl-compile refuses a bundle it would not replace."""
    if path.is_dir():
        raise AcrlError(f"{path}: is a directory", hint=f"give the file to write with -o, e.g. -o {example}",
                        exit_code=2)
    if path.exists() and not path.is_file():  # /dev/null, a FIFO: --force would rename a file over it
        raise AcrlError(f"{path}: exists and is not a regular file; not replaced, even with --force.",
                        hint="choose another file with -o", exit_code=3)
    if path.exists() and not force:
        try:
            same = read_input(path).decode("utf-8", errors="replace") == text
        except OSError:
            same = False
        if same:
            return
        raise AcrlError(f"{path}: exists; not overwritten.",
                        hint="pass --force to replace it, or choose another file with -o.", exit_code=3)
    folder = path.parent if str(path.parent) else Path(".")
    _remove_stale_temporaries(folder, path.name)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=folder)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                out.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
    except OSError as exc:
        raise AcrlError(f"{path}: cannot write {what}: {exc.strerror or exc}; nothing was changed.",
                        hint=f"check that the folder {folder} exists and is writable, or choose another file with -o"
                        ) from None


def _remove_stale_temporaries(folder: Path, name: str) -> None:
    """Remove the ``.<name>.<pid>.<random>.tmp`` files of importers killed before their rename."""
    prefix = f".{name}."
    try:
        entries = [e for e in os.listdir(folder) if e.startswith(prefix) and e.endswith(".tmp")]
    except OSError:
        return
    for entry in entries:
        pid = entry[len(prefix):].split(".", 1)[0]
        if pid.isdigit() and entry.count(".") == name.count(".") + 4 and _writer_gone(str(folder / entry), int(pid)):
            with contextlib.suppress(OSError):
                os.unlink(folder / entry)


@attrs.frozen
class Report:
    """The outcome of `acrl import`: the file written, the notes, and what compiling it found."""

    output: str
    notes: tuple[Note, ...]
    compiled: bool
    problems: str = ""  # the compiler's messages when the spec does not compile yet

    def as_json(self) -> dict[str, object]:
        return {"ok": self.compiled, "spec": self.output, "notes": [n.as_json() for n in self.notes],
                "problems": self.problems or None}


def run_import(kind: str, source: str, output: str, *, force: bool = False, **options: Any) -> Report:
    """Import ``source`` with the importer ``kind``, write the spec to ``output``, compile it in memory."""
    target = Path(output)
    if target.exists() and Path(source).exists() and target.resolve() == Path(source).resolve():
        raise UsageError(f"{output}: is the file being imported; --force or not, it is not overwritten.",
                         hint="write the spec to another file, e.g. -o spec.toml")
    try:
        imported = importer(kind)(Path(source), **options)
    except ImportInputError as exc:
        raise _with_compile_errors(exc, target) from None
    text = render_spec(imported)
    write_new_file(target, text, force=force)

    try:
        compile_spec(target, data=text.encode("utf-8"))
    except SpecError as exc:  # every problem at once, as acrl-compile reports them, and what was not checked
        closing = f"\n{exc.unchecked}: fixing these may reveal more." if exc.unchecked else ""
        return Report(output, imported.notes, False, "\n".join(d.format() for d in exc.diagnostics) + closing)
    return Report(output, imported.notes, True)


def _with_compile_errors(exc: ImportInputError, target: Path) -> AcrlError:
    """``exc`` followed by the errors of the in-memory compile of the spec made without the refused keys (nothing
    is written), and the closing line: the refused keys were not checked, and their fix may reveal more."""
    if exc.partial is None:
        return exc
    try:
        compile_spec(target, data=render_spec(exc.partial).encode("utf-8"))
    except SpecError as compiled:
        found = "\n".join(d.format() for d in compiled.diagnostics)
        errors = sum(d.severity == "error" for d in compiled.diagnostics)
        return exc.evolve(message=f"{exc}\n{found}\n{errors} more error{'s' if errors != 1 else ''} in the {target} "
                          "it would write, compiled in memory without the keys refused above; nothing was written.\n"
                          f"{compiled.unchecked or 'The refused keys were not checked'}: fixing these may reveal "
                          "more.", hint="")
    return exc


def experiment_id(file_name: str) -> str:
    """An experiment id made from a script's file name (``run-qwen3-4B.sh`` -> ``run-qwen3-4B``): what ACRL-T005
    accepts (a letter or digit, then letters, digits, '.', '_' and '-', at most 64), or "" when nothing is left."""
    stem = file_name[:-3] if file_name.endswith(".sh") else file_name
    name = re.sub(r"\.{2,}", ".", re.sub(r"[^A-Za-z0-9._-]+", "-", stem))
    return name.lstrip("._-")[:64]
