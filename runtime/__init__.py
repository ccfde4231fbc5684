"""acrl.runtime: the executor that runs a compiled bundle (see issue 5).

    code = run_bundle(RunOptions("bundles/my-exp", skip=("gpus",)))

Depends on acrl.compiler, never the reverse; imports ray and boto3 lazily. The names below are
imported on first use (PEP 562): the `acrl` console script imports this package, and its help
must not pay for the executor.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing
if TYPE_CHECKING:
    from typing import Any

    from ._preflight.bundle_info import BundleInfo, read_bundle_info
    from ._preflight.checks import CHECKS, Check, Result, register, run_preflight
    from ._preflight.outcome import CheckFailed, CheckSkipped, CheckWarning
    from ._records import list_records
    from ._run import RunOptions, run_bundle

_WHERE = {
    "CheckFailed": "_preflight.outcome", "CheckSkipped": "_preflight.outcome",
    "CheckWarning": "_preflight.outcome",
    "CHECKS": "_preflight.checks", "BundleInfo": "_preflight.bundle_info", "Check": "_preflight.checks",
    "Result": "_preflight.checks",
    "read_bundle_info": "_preflight.bundle_info", "register": "_preflight.checks", "run_preflight": "_preflight.checks",
    "list_records": "_records", "RunOptions": "_run", "run_bundle": "_run",
}

__all__ = ["CHECKS", "BundleInfo", "Check", "CheckFailed", "CheckSkipped", "CheckWarning", "Result", "RunOptions",
           "list_records", "read_bundle_info", "register", "run_bundle", "run_preflight"]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    __import__(f"{__name__}.{module}")
    return getattr(sys.modules[f"{__name__}.{module}"], name)
