"""AcrlError: the fix and the exit status are fields, formatted in one place.

Every error acrl reports is an AcrlError whose ``message`` says what is wrong, ``hint`` how to fix
it and ``exit_code`` the CLI's exit status. ``str()`` (what the CLI prints) and ``as_json()`` (what
``--json`` prints) are the only places that turn them into text. A source test keeps it that way:
no code writes "fix:" into a message, parses a formatted error or changes an error once raised.
"""

from __future__ import annotations

import argparse
import ast
import importlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest

from acrl.compiler._cli import main as _cli
from acrl.compiler._review.verify import Verification
from acrl.compiler.errors import (
    AcrlError,
    BundleExistsError,
    BundleReadError,
    BundleWriteError,
    Diagnostic,
    SpecError,
    UsageError,
)
from conftest import REPO, SpecWriter

SOURCES = sorted([*(REPO / "compiler").rglob("*.py"), *(REPO / "runtime").rglob("*.py")])


def _modified_verification(**changes: object) -> Verification:
    fields: dict[str, object] = {"path": "b", "acrl_version": "0", "bundle_format": 2, "bundle_hash": "0" * 64,
                                 "modified": ("train.sh",)}
    return Verification(**{**fields, **changes})  # type: ignore[arg-type]


def _sweep_spec_error() -> AcrlError:
    from acrl.compiler._pipeline.compile import SweepSpecError
    from acrl.compiler._pipeline.parse import parse_spec_text

    return SweepSpecError(parse_spec_text('[sweep]\n"train.lr" = [1e-6]\n', "s.toml"))


def _sweep_key_error() -> AcrlError:
    from acrl.compiler._pipeline.parse import parse_spec_text
    from acrl.compiler._pipeline.sweep_points import SweepKeyError, sweep_points

    try:
        sweep_points(parse_spec_text('[sweep]\ngrid = { "train.lrr" = [1e-6], "rollout.batch_size" = [8] }\n',
                                     "s.toml"))
    except SweepKeyError as exc:
        return exc
    raise AssertionError("an unknown key in a grid is a SweepKeyError")


def _import_input_error() -> AcrlError:
    from acrl.compiler._importers.base import ImportInputError

    return ImportInputError(path="r.yaml:3", reason="lr: not a number", fix="write a number")


def _modified_bundle_error() -> AcrlError:
    from acrl.runtime._run import ModifiedBundleError

    return ModifiedBundleError(_modified_verification())


def _preflight_failed() -> AcrlError:
    from acrl.runtime._run import PreflightFailed

    return PreflightFailed("preflight failed (gpu): nothing was run", hint="skip it with --skip gpu")


def _init_refused() -> AcrlError:
    from acrl.compiler._cli.init_fit import InitRefused

    return InitRefused("acrl init: kimi-k2 does not fit 1 node x 8 GPUs of 80 GiB: no SGLang engine of these GPUs "
                       "holds it; with the largest engine tried:\n  weights ... (ACRL-M007)\nnothing was written",
                       hint="more GPUs (--nodes 2), or a smaller model (`acrl models`)")


def _runtime(module: str) -> ModuleType:
    return importlib.import_module(f"acrl.runtime.{module}")


# Each AcrlError class, an instance built as its raise sites build it, and the exit status it has.
EXAMPLES: dict[str, tuple[Callable[[], AcrlError], int]] = {
    "AcrlError": (lambda: AcrlError("x: broken", hint="mend it"), 1),
    "UsageError": (lambda: UsageError("--skip nope: no such check", hint="use one of gpu"), 2),
    "SpecError": (lambda: SpecError([Diagnostic("error", "bad", file="s.toml", hint="good")]), 1),
    "SweepSpecError": (_sweep_spec_error, 1),
    "SweepKeyError": (_sweep_key_error, 1),
    "BundleExistsError": (lambda: BundleExistsError(path="out", reason="differs"), 3),
    "BundleWriteError": (lambda: BundleWriteError(path="out", reason="disk full"), 1),
    "BundleReadError": (lambda: BundleReadError(path="m.json", reason="not JSON", fix="compile again"), 2),
    "ImportInputError": (_import_input_error, 1),
    "ModifiedBundleError": (_modified_bundle_error, 1),
    "PreflightFailed": (_preflight_failed, 1),
    "InitRefused": (_init_refused, 1),
    "RecordReadError": (lambda: _runtime("_run_ref").RecordReadError("runs/e/r/run.json: not a run record: not JSON",
                                                                    hint="give the run.json acrl run wrote"), 2),
    "RayUnavailable": (lambda: _runtime("_ray_jobs").RayUnavailable("http://head:8265", "nothing answers there"), 1),
    "KubectlError": (lambda: _runtime("_kube").KubectlError(
        "kubectl --context c get rayjob x -o json: Unable to connect to the server", "check the context's cluster",
        "unreachable"), 1),
    "KubeUnavailable": (lambda: _runtime("_kube_status").KubeUnavailable(_runtime("_kube").KubectlError(
        "kubectl --context c get rayjob x -o json: no answer in 60 s", "raise ACRL_KUBECTL_TIMEOUT", "timeout")), 1),
}


def _error_classes() -> dict[str, str]:
    """Every subclass of AcrlError defined in compiler/ or runtime/ (name -> module), found in the
    source so that a new one cannot be missed by the table above."""
    known = {"AcrlError": "acrl.compiler.errors"}
    defined = [(node, "acrl." + ".".join(path.relative_to(REPO).with_suffix("").parts)) for path in SOURCES
               for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)]
    grew = True
    while grew:
        grew = False
        for node, module in defined:
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            if node.name not in known and bases & set(known):
                known[node.name] = module
                grew = True
    return known


def test_every_error_class_has_an_example() -> None:
    classes = _error_classes()
    assert set(classes) == set(EXAMPLES)
    for name, module in classes.items():
        assert type(EXAMPLES[name][0]()) is getattr(importlib.import_module(module), name)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_error_formats_hint_and_exit_code_through_one_path(name: str) -> None:
    make, exit_code = EXAMPLES[name]
    error = make()
    assert error.exit_code == exit_code
    # one formatting path: no subclass has its own __str__, and --json's text is str()
    assert type(error).__str__ is AcrlError.__str__
    expected = error.message if error.hint is None else f"{error.message}\n  fix: {error.hint}"
    assert str(error) == expected
    data = error.as_json()
    assert data["message"] == str(error) and data["hint"] == error.hint
    assert data["kind"] == ("SpecError" if isinstance(error, SpecError) else name)
    if not isinstance(error, SpecError):  # (a SpecError's message is its diagnostics, each with its fix)
        assert "\n  fix:" not in error.message  # the fix is a field, not in the message
    if not isinstance(error, (SpecError, BundleWriteError)):
        assert error.hint  # each of the others says how to fix it


@pytest.mark.parametrize("name", sorted(EXAMPLES))
@pytest.mark.parametrize("as_json", [False, True])
def test_cli_prints_and_exits_from_the_fields(name: str, as_json: bool, capsys: pytest.CaptureFixture[str]) -> None:
    error = EXAMPLES[name][0]()

    def run(_: argparse.Namespace) -> int:
        raise error

    assert _cli._handle(run, argparse.Namespace(json=as_json)) == error.exit_code
    out, err = capsys.readouterr()
    if as_json:
        assert (json.loads(out), err) == ({"ok": False, "error": json.loads(json.dumps(error.as_json()))}, "")
    else:
        assert (out, err) == ("", f"{error}\n")


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_evolve_copies_instead_of_mutating(name: str) -> None:
    error = EXAMPLES[name][0]()
    before = (str(error), error.exit_code, error.hint, dict(vars(error)))
    graded = error.evolve(exit_code=2)
    added = error.evolve(message=error.message + "\nmore")
    assert before == (str(error), error.exit_code, error.hint, dict(vars(error)))  # the original is untouched
    assert type(graded) is type(error) is type(added)
    assert (str(graded), graded.exit_code, graded.as_json()) == (str(error), 2, error.as_json())
    assert (added.message, added.hint, added.exit_code) == (error.message + "\nmore", error.hint, error.exit_code)
    assert str(added).startswith(error.message + "\nmore")
    assert error.evolve(hint="other").hint == "other" and error.evolve(hint="").hint is None


def test_exit_code_given_at_construction_wins_over_the_class() -> None:
    assert UsageError("x").exit_code == 2
    assert UsageError("x", exit_code=1).exit_code == 1 and AcrlError("x", exit_code=2).exit_code == 2
    assert AcrlError("x", hint="").hint is None and str(AcrlError("x", hint="")) == "x"


def test_golden_wording() -> None:
    """Two texts as users see them, byte for byte: one with a hint, one listing several problems."""
    assert str(BundleExistsError(path="out/a", reason="holds another bundle")) == (
        "out/a: holds another bundle; not overwritten.\n"
        "  fix: pass --force to replace it, or choose another directory with -o.")
    from acrl.compiler._importers.base import ImportInputError

    first = ImportInputError(path="r.yaml:2", reason="a: not a number", fix="write a number")
    error = ImportInputError(path="r.yaml:5", reason="b: unknown key", fix="remove it", before=[first])
    assert str(error) == ("r.yaml:2: a: not a number\n  fix: write a number\n"
                          "r.yaml:5: b: unknown key\n  fix: remove it")
    assert (error.path, error.reason, error.hint) == ("r.yaml:5", "b: unknown key", "remove it")


def test_modified_bundle_error_and_verify_report_share_the_fix() -> None:
    """acrl verify's report and acrl run's refusal both end with the same fix, taken from the field."""
    from acrl.runtime._run import ModifiedBundleError

    chmod_only = _modified_verification(modified=(), unsafe_modes=("train.sh 0777",))
    for verification in (_modified_verification(), chmod_only):
        error = ModifiedBundleError(verification)
        assert error.message == verification.report()
        assert verification.format() == f"{verification.report()}\n  fix: {verification.fix()}"
        allow = "\n  or run it as it is with --allow-modified (recorded in run.json)"
        assert str(error) == verification.format() + allow
    assert _modified_verification(modified=()).fix() == ""


# --- the rule, enforced over the source --------------------------------------------------------

# The functions that turn a fix field into text, and nothing else may write "fix:".
FORMATTERS = {
    ("compiler/errors.py", "AcrlError.__str__"),  # every AcrlError
    ("compiler/errors.py", "Diagnostic.format"),  # a located problem in a spec
    ("compiler/_review/verify.py", "Verification.format"),  # acrl verify's report: report() and fix()
    ("compiler/_pipeline/model_args/hf_config.py", "Mismatch.message"),  # a MODEL_ARGS note: problem and fix
    ("runtime/_preflight/checks.py", "format_table"),  # the preflight table: a CheckFailed's hint under its row
    ("compiler/_review/diff.py", "format_check"),  # acrl-compile --check's report (not an error)
    ("compiler/_cli/colour.py", "paint"),  # colours the printed text's "fix:" on a terminal (reads no field)
}
_FIX = re.compile(r"\bfix:", re.IGNORECASE)
_PARSERS = {"split", "rsplit", "splitlines", "partition", "rpartition", "removesuffix", "removeprefix", "index",
            "find", "rfind", "replace"}
_FIELDS = {"message", "hint", "exit_code", "args"}


def _functions(tree: ast.AST) -> dict[ast.AST, str]:
    """Each node -> the qualified name of the function (or class body) it is in."""
    owner: dict[ast.AST, str] = {}

    def visit(node: ast.AST, name: str) -> None:
        for child in ast.iter_child_nodes(node):
            here = f"{name}.{child.name}".lstrip(".") if isinstance(
                child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else name
            owner[child] = here
            visit(child, here)

    visit(tree, "")
    return owner


def _docstrings(tree: ast.AST) -> set[ast.AST]:
    return {node.body[0].value for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body
            and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}


def _fix_writers(source: str, where: str) -> set[tuple[str, str]]:
    tree = ast.parse(source)
    owner, docstrings = _functions(tree), _docstrings(tree)
    return {(where, owner.get(node, "")) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node not in docstrings
            and _FIX.search(node.value)}


def _error_text_uses(source: str, error_names: set[str]) -> list[str]:
    """Parsing an error's text (split/replace/... of a message or hint, of str() of a caught error, or
    of any text on "fix:")
    and changing an error after it was made (assigning its message, hint, exit_code or args)."""
    tree = ast.parse(source)
    owner = _functions(tree)
    found = []
    caught: set[str] = set()  # names bound by `except <an AcrlError class> as name`
    for node in ast.walk(tree):
        if isinstance(node, ast.ExceptHandler) and node.name and node.type is not None:
            types = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            if {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in types} & error_names:
                caught.add(node.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _PARSERS:
            text = node.func.value
            on_fix = any(isinstance(a, ast.Constant) and isinstance(a.value, str) and _FIX.search(a.value)
                         for a in node.args)  # text.split("\n  fix:"), whatever the text
            if on_fix or (isinstance(text, ast.Attribute) and text.attr in {"message", "hint"}) or (
                    isinstance(text, ast.Call) and isinstance(text.func, ast.Name) and text.func.id == "str"
                    and len(text.args) == 1 and isinstance(text.args[0], ast.Name) and text.args[0].id in caught):
                found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else []
        for target in targets:
            if isinstance(target, ast.Attribute) and target.attr in _FIELDS and not (
                    isinstance(target.value, ast.Name) and (target.value.id == "self" or (
                        target.value.id == "new" and owner.get(node) == "AcrlError.evolve"))):
                found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
            if isinstance(target, ast.Attribute) and target.attr in _FIELDS and isinstance(target.value, ast.Name) \
                    and target.value.id in caught:
                found.append(f"{node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_only_the_formatters_write_fix() -> None:
    writers = set().union(*(_fix_writers(p.read_text(encoding="utf-8"), str(p.relative_to(REPO))) for p in SOURCES))
    assert writers == FORMATTERS


def test_no_code_parses_or_mutates_an_error() -> None:
    names = set(_error_classes())
    found = {str(p.relative_to(REPO)): _error_text_uses(p.read_text(encoding="utf-8"), names) for p in SOURCES}
    assert {path: uses for path, uses in found.items() if uses} == {}


@pytest.mark.parametrize("code", [
    'raise UsageError("bad\\n  fix: do better")',
    'raise AcrlError(f"{x}: bad\\n  Fix: " "do better")',
    'def f():\n    return "a. Fix: b"',
])
def test_the_fix_rule_catches_a_fix_in_a_message(code: str) -> None:
    assert _fix_writers(code, "x.py")


@pytest.mark.parametrize("code", [
    'try:\n    pass\nexcept AcrlError as exc:\n    exc.exit_code = 2\n    raise',
    'try:\n    pass\nexcept (OSError, SpecError) as e:\n    e.message += "more"',
    'error = SpecError([])\nerror.message += "x"',
    'v.format().rsplit("\\n  fix:", 1)[0]',
    'text.partition("fix: ")',
    'm.message.split(". Fix: ")[0]',
    'try:\n    pass\nexcept ImportInputError as exc:\n    why = str(exc).split(": ", 1)[-1]',
    'exc.message.splitlines()[0]',
])
def test_the_parse_rule_catches_parsing_and_mutating(code: str) -> None:
    assert _error_text_uses(code, set(_error_classes()))


def test_the_parse_rule_allows_fields_and_other_exceptions() -> None:
    assert not _error_text_uses('try:\n    pass\nexcept OSError as exc:\n    why = str(exc).split()\n'
                                'class E(AcrlError):\n    def __init__(self):\n        self.message = "x"\n'
                                'raise error.evolve(exit_code=2)', set(_error_classes()))


def test_json_errors_carry_the_hint_end_to_end(write_spec: SpecWriter, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """Through the real command lines: the hint in its own field, the text and exit status as before."""
    from acrl.compiler._cli.main import acrl_main

    spec = write_spec()
    assert acrl_main(["compile", str(spec), "--check", "--force", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error == {"kind": "UsageError", "hint": "drop --force",
                     "message": "--check writes nothing, so --force has nothing to replace\n  fix: drop --force"}
    assert acrl_main(["verify", str(tmp_path / "missing"), "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "BundleReadError" and error["hint"]
    assert error["message"].endswith(f"\n  fix: {error['hint']}")
    # acrl diff re-grades an invalid spec to exit 2 (a copy of the error, not the error changed)
    bad = write_spec({"rollout": {"batch_size": 0}}, name="b.toml")
    assert acrl_main(["diff", str(spec), str(bad), "--format", "json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert (error["kind"], error["hint"]) == ("SpecError", None)
    (diagnostic,) = error["diagnostics"]
    assert diagnostic["key"] == "rollout.batch_size" and isinstance(diagnostic["line"], int)
