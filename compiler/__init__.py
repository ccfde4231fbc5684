"""acrl.compiler: spec -> bundle, pure. Never imports ray, boto3, torch or acrl.runtime.

    bundle = compile_spec(Path("spec.toml"))
    write(bundle, Path("bundles") / bundle.exp_id)

The names below are imported on first use (PEP 562), so that the command line can start
without loading Jinja and cattrs for `acrl --help`.
"""

from __future__ import annotations

import sys

from ._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~4 ms); mypy treats it the same
if TYPE_CHECKING:
    from typing import Any

    from ._compile import Bundle, compile_source, compile_spec, resolved_spec, write
    from ._diff import BundleDiff, CheckResult, check_bundle, diff_paths
    from ._errors import (
        AcrlError,
        BundleExistsError,
        BundleReadError,
        BundleWriteError,
        Diagnostic,
        SpecError,
        UsageError,
    )
    from ._rules import RULES, Rule
    from ._source import SpecSource, parse_spec_text, read_spec
    from ._spec import Spec
    from ._verify import Verification, verify_bundle

_WHERE = {
    "Bundle": "_compile", "compile_source": "_compile", "compile_spec": "_compile",
    "resolved_spec": "_compile", "write": "_compile",
    "AcrlError": "_errors", "BundleExistsError": "_errors", "BundleWriteError": "_errors",
    "Diagnostic": "_errors", "SpecError": "_errors", "UsageError": "_errors",
    "RULES": "_rules", "Rule": "_rules",
    "SpecSource": "_source", "parse_spec_text": "_source", "read_spec": "_source",
    "Spec": "_spec",
    "BundleDiff": "_diff", "CheckResult": "_diff", "check_bundle": "_diff", "diff_paths": "_diff",
    "BundleReadError": "_errors", "Verification": "_verify", "verify_bundle": "_verify",
}

__all__ = [
    "RULES", "AcrlError", "Bundle", "BundleDiff", "BundleExistsError", "BundleReadError", "BundleWriteError",
    "CheckResult", "Diagnostic", "Rule", "Spec", "SpecError", "SpecSource", "UsageError", "Verification",
    "__version__", "check_bundle", "compile_source", "compile_spec", "diff_paths", "parse_spec_text", "read_spec",
    "resolved_spec", "verify_bundle", "write",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    __import__(f"{__name__}.{module}")  # importlib itself would cost an import
    value = getattr(sys.modules[f"{__name__}.{module}"], name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
