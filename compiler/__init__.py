"""acrl.compiler: spec -> bundle, pure. Never imports ray, boto3, torch or acrl.runtime.

    bundle = compile_spec(Path("spec.toml"))
    write(bundle, Path("bundles") / bundle.exp_id)

The names below are imported on first use (PEP 562), so that the command line can start
without loading Jinja and cattrs for `acrl --help`. They are all of the compiler that other code
uses: the executor (acrl.runtime) imports these names from here and never a module acrl.compiler._x
(tests/test_layering.py holds it to that). Besides the compile API, that is what the executor
shares with the compiler (marked in _WHERE): reading inputs and bundles, redacting secrets, the
model checks and the command line.
"""

from __future__ import annotations

import sys

from ._version import __version__

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (~4 ms); mypy treats it the same
if TYPE_CHECKING:
    from typing import Any

    from ._bundle import _kind as file_kind
    from ._bundle import read_input
    from ._bundle_view import bash_arrays, derived_from_spec
    from ._cli import _HelpFormatter as HelpFormatter
    from ._cli import acrl_main
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
    from ._hf_config import compare as compare_model_args
    from ._hf_config import derive_model_args
    from ._rules import RULES, Rule
    from ._secrets import address_has_credentials, redact, without_credentials
    from ._slime_source import read_git_commit
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
    # shared with acrl.runtime; "module:name" where the compiler's own name differs
    "file_kind": "_bundle:_kind", "read_input": "_bundle", "bash_arrays": "_bundle_view",
    "derived_from_spec": "_bundle_view", "HelpFormatter": "_cli:_HelpFormatter", "acrl_main": "_cli",
    "compare_model_args": "_hf_config:compare", "derive_model_args": "_hf_config",
    "address_has_credentials": "_secrets", "redact": "_secrets", "without_credentials": "_secrets",
    "read_git_commit": "_slime_source",
}

__all__ = [
    "RULES", "AcrlError", "Bundle", "BundleDiff", "BundleExistsError", "BundleReadError", "BundleWriteError",
    "CheckResult", "Diagnostic", "HelpFormatter", "Rule", "Spec", "SpecError", "SpecSource", "UsageError",
    "Verification", "__version__", "acrl_main", "address_has_credentials", "bash_arrays", "check_bundle",
    "compare_model_args", "compile_source", "compile_spec", "derive_model_args", "derived_from_spec", "diff_paths",
    "file_kind", "parse_spec_text", "read_git_commit", "read_input", "read_spec", "redact", "resolved_spec",
    "verify_bundle", "without_credentials", "write",
]


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = where.partition(":")
    __import__(f"{__name__}.{module}")  # importlib itself would cost an import
    value = getattr(sys.modules[f"{__name__}.{module}"], attribute or name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
