"""Seconds read from the environment: how long acrl waits for kubectl, Ray, a stop or a status (ACRL_KUBECTL_TIMEOUT,
ACRL_RAY_TIMEOUT, ACRL_STOP_GRACE, ACRL_STATUS_GRACE, ACRL_KUBE_POLL). One parser, so that every such variable takes
the same numbers and refuses the rest the same way: a usage of the environment acrl cannot read is an AcrlError
naming the variable, never a traceback."""

from __future__ import annotations

import os

from acrl.compiler import AcrlError

MAX_SECONDS = 86400.0  # a day: more is a typo (a value in milliseconds)


def env_seconds(name: str, default: float, hint: str = "", *, zero: bool = True) -> float:
    """``name``'s value as seconds, ``default`` when it is unset or empty; 0 is allowed where ``zero``. AcrlError
    with ``hint`` (default: unset it, or give seconds) for anything else."""
    value = os.environ.get(name, "")
    if not value:
        return default
    try:
        seconds = float(value)
        if not (seconds >= 0 if zero else seconds > 0) or not seconds <= MAX_SECONDS:
            raise ValueError
    except ValueError:
        raise AcrlError(f"{name}={value!r}: not a number of seconds",
                        hint=hint or f"unset {name}, or give seconds") from None
    return seconds
