"""ACRL-K*: KubeRay (--target kuberay). The [kuberay] namespace, service account and secret are
Kubernetes names, which the API server would otherwise reject only when the RayJob is applied.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from .engine import Context, Finding, rule

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


@rule("ACRL-K001", "error", ["kuberay.namespace", "kuberay.service_account", "kuberay.secret"],
      "Kubernetes names are names")
def _kubernetes_names(ctx: Context) -> Iterator[Finding]:
    """[kuberay] namespace must be a DNS-1123 label, service_account and secret DNS-1123 subdomains: the API server
    rejects anything else, only when the RayJob is applied."""
    k = ctx.spec.kuberay
    for key, value, pattern, what in (("namespace", k.namespace, _DNS_LABEL, "a DNS-1123 label (at most 63)"),
                                      ("service_account", k.service_account, _DNS_SUBDOMAIN,
                                       "a DNS-1123 subdomain (at most 253)"),
                                      ("secret", k.secret, _DNS_SUBDOMAIN, "a DNS-1123 subdomain (at most 253)")):
        if value is not None and not pattern.fullmatch(value):
            yield Finding(f"{value!r} is not a Kubernetes name: it must be {what} lowercase letters, digits and "
                          f"'-'{', and dots' if pattern is _DNS_SUBDOMAIN else ''}, starting and ending with a "
                          "letter or digit", f"rename it, e.g. {_k8s_example(value)!r}", keys=(f"kuberay.{key}",))


def _k8s_example(value: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:63] or "acrl"
