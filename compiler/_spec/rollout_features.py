"""slime's newer rollout features as spec keys (issue 15): external rollout engines, rollout sample hooks,
balance-by-flops, and what acrl knows of slime's fully-async rollout.

The keys themselves are fields of the tables they belong to (compiler/_spec/tables.py): ``[rollout]
external_engine_addrs`` (--rollout-external-engine-addrs) and, at v0.3.0, ``[rollout] external``
(--rollout-external), ``[rollout] sample_hook_paths``
(--rollout-sample-hook-path, once per path) and ``[train] balance_by_flops`` (--balance-by-flops). A key whose
flag the targeted slime commit lacks is refused by ACRL-F003 at that key, naming the commits that have it (the
per-commit flag facts, compiler/_slime/commits). Their rules are ACRL-R* (compiler/_pipeline/validate/
rollout_features.py). This module holds what those keys and rules share: slime's function paths, the flags slime
parses with ``action="append"``, and the address forms slime accepts for an external engine.

Fully-async rollout is not a flag nor a mode of slime at 624b824: it is the rollout function
:data:`FULLY_ASYNC_ROLLOUT` (slime/rollout/fully_async_rollout.py, at fa3c990, v0.3.0, v0.3.1 and 624b824), run by
train_async.py (examples/fully_async/README.md: "Two pieces flip the standard pipeline into fully-async"). A
spec writes it as ``[rollout] function_path`` with ``[train] mode = "async"``.
"""

from __future__ import annotations

import re
from urllib.parse import urlparse

from .._slime.commit_facts import commit_facts

# slime's own rollout functions (slime/utils/arguments.py:329-331 at 624b824: --rollout-function-path's default)
SLIME_ROLLOUT = "slime.rollout.sglang_rollout.generate_rollout"
FULLY_ASYNC_ROLLOUT = "slime.rollout.fully_async_rollout.generate_rollout_fully_async"

# Flags slime parses with action="append": the flag is passed once per value of its list key
# (--rollout-sample-hook-path: slime/utils/arguments.py:485-494 at 624b824, 474-483 at v0.3.1).
APPEND_FLAGS = frozenset({"--rollout-sample-hook-path"})

# v0.3.0 used the external engines only with this switch too (slime/utils/arguments.py:509-520 at v0.3.0); from
# fa3c990 on slime derives it from the addresses (``args.rollout_external = args.rollout_external_engine_addrs is
# not None``: arguments.py:1904 at 624b824, 1881 at fa3c990, 1842 at v0.3.1) and has no such flag.
EXTERNAL_SWITCH = "--rollout-external"
EXTERNAL_ADDRS = "--rollout-external-engine-addrs"


def needs_external_switch(commit: str) -> bool:
    """Whether slime at ``commit`` uses external engines only with --rollout-external (v0.3.0), as its flag facts
    say; False for a commit acrl has no facts for (slime HEAD's behaviour)."""
    facts = commit_facts(commit)
    return facts is not None and EXTERNAL_SWITCH in facts.flags


_HOST_PORT = re.compile(r"[^:/\s]+:\d+")


def address_problem(addr: str, commit: str) -> str | None:
    """Why slime at ``commit`` refuses the external engine address ``addr``, or None.

    From fa3c990 on: ``normalize_external_engine_addr`` (slime/backends/sglang_utils/external.py:48-59 at 624b824,
    the same at fa3c990 and v0.3.1) accepts ``host:port`` or ``http://host:port`` (an IPv6 host in brackets) and
    raises ValueError at parse time otherwise. v0.3.0 splits the address at ':' into host and port and reads the
    port as an int (slime/ray/rollout.py:848-856 at v0.3.0): ``host:port`` only."""
    if needs_external_switch(commit):
        return None if _HOST_PORT.fullmatch(addr) else "v0.3.0 reads host:port only (no scheme, no IPv6)"
    url = addr if "://" in addr else f"http://{addr}"
    try:
        parsed = urlparse(url.rstrip("/"))
        ok = parsed.scheme == "http" and parsed.hostname is not None and parsed.port is not None
    except ValueError:  # a port out of range or not a number
        ok = False
    return None if ok else "slime accepts host:port or http://host:port (IPv6 in brackets)"
