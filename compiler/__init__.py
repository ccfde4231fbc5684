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

    from ._cli.help import HelpFormatter
    from ._cli.main import acrl_main
    from ._pipeline.argv import Derived
    from ._pipeline.compile import Bundle, compile_source, compile_spec, resolved_spec, write
    from ._pipeline.manifest import Manifest, ManifestShapeError, structure_json
    from ._pipeline.manifest import converter as json_converter
    from ._pipeline.model_args.hf_config import compare as compare_model_args
    from ._pipeline.model_args.hf_config import derive_model_args
    from ._pipeline.parse import SpecSource, parse_spec_text, read_spec
    from ._pipeline.reading import _kind as file_kind
    from ._pipeline.reading import read_input
    from ._pipeline.validate import RULES, Rule
    from ._review.diff import BundleDiff, CheckResult, check_bundle, diff_paths
    from ._review.ran import Launch, Part, argv_flags, diff_parts, format_diff, launch_of
    from ._review.shell_files import job_env_vars
    from ._review.verify import BundleDir, Verification, read_bundle, verify_bundle
    from ._review.view import bash_arrays, derived_from_spec
    from ._secrets import (
        address_has_credentials,
        is_secret_name,
        looks_secret_value,
        redact,
        without_credentials,
        without_secret_flags,
    )
    from ._slime.source import read_git_commit
    from ._spec.launch import GPU_CAPABILITY
    from ._spec.tables import RUNTIME_ARN, Spec
    from .errors import (
        AcrlError,
        BundleExistsError,
        BundleReadError,
        BundleWriteError,
        Diagnostic,
        SpecError,
        UsageError,
    )

_WHERE = {
    "Bundle": "_pipeline.compile", "compile_source": "_pipeline.compile", "compile_spec": "_pipeline.compile",
    "resolved_spec": "_pipeline.compile", "write": "_pipeline.compile",
    "AcrlError": "errors", "BundleExistsError": "errors", "BundleWriteError": "errors",
    "Diagnostic": "errors", "SpecError": "errors", "UsageError": "errors",
    "RULES": "_pipeline.validate", "Rule": "_pipeline.validate",
    "SpecSource": "_pipeline.parse", "parse_spec_text": "_pipeline.parse", "read_spec": "_pipeline.parse",
    "Spec": "_spec.tables", "RUNTIME_ARN": "_spec.tables",
    "BundleDiff": "_review.diff", "CheckResult": "_review.diff", "check_bundle": "_review.diff",
    "diff_paths": "_review.diff",
    "BundleReadError": "errors", "Verification": "_review.verify", "verify_bundle": "_review.verify",
    "BundleDir": "_review.verify", "read_bundle": "_review.verify", "Manifest": "_pipeline.manifest",
    "Derived": "_pipeline.argv", "json_converter": "_pipeline.manifest:converter",
    "ManifestShapeError": "_pipeline.manifest", "structure_json": "_pipeline.manifest",
    # shared with acrl.runtime; "module:name" where the compiler's own name differs
    "file_kind": "_pipeline.reading:_kind", "read_input": "_pipeline.reading", "bash_arrays": "_review.view",
    "derived_from_spec": "_review.view", "HelpFormatter": "_cli.help", "acrl_main": "_cli.main",
    "compare_model_args": "_pipeline.model_args.hf_config:compare",
    "derive_model_args": "_pipeline.model_args.hf_config",
    "address_has_credentials": "_secrets", "redact": "_secrets", "without_credentials": "_secrets",
    "is_secret_name": "_secrets", "looks_secret_value": "_secrets", "without_secret_flags": "_secrets",
    "read_git_commit": "_slime.source", "job_env_vars": "_review.shell_files", "GPU_CAPABILITY": "_spec.launch",
    # what a bundle runs, for acrl.runtime's comparison with run records (`acrl diff RUN BUNDLE`)
    "Launch": "_review.ran", "Part": "_review.ran", "argv_flags": "_review.ran", "diff_parts": "_review.ran",
    "format_diff": "_review.ran", "launch_of": "_review.ran",
}

__all__ = [
    "GPU_CAPABILITY", "RULES", "RUNTIME_ARN", "AcrlError", "Bundle", "BundleDiff", "BundleDir", "BundleExistsError",
    "BundleReadError", "BundleWriteError", "CheckResult", "Derived", "Diagnostic", "HelpFormatter", "Launch",
    "Manifest", "ManifestShapeError", "Part", "Rule", "Spec", "SpecError", "SpecSource", "UsageError", "Verification",
    "__version__", "acrl_main", "address_has_credentials", "argv_flags", "bash_arrays", "check_bundle",
    "compare_model_args", "compile_source", "compile_spec", "derive_model_args", "derived_from_spec", "diff_parts",
    "diff_paths", "file_kind", "format_diff", "is_secret_name", "job_env_vars", "json_converter", "launch_of",
    "looks_secret_value", "parse_spec_text", "read_bundle", "read_git_commit", "read_input", "read_spec", "redact",
    "resolved_spec", "structure_json", "verify_bundle", "without_credentials", "without_secret_flags", "write",
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
