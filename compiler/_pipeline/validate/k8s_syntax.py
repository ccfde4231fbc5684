"""Kubernetes' syntax for names, labels, annotations and quantities, as its API server checks them, for the ACRL-K
rules: a value the API server would refuse when rayjob.yaml is applied is refused when the spec compiles.

The patterns and limits are Kubernetes' own: k8s.io/apimachinery/pkg/util/validation/validation.go (IsQualifiedName,
IsValidLabelValue, IsDNS1123Label, IsDNS1123Subdomain, IsDNS1035Label) and the Quantity grammar of
apimachinery/pkg/api/resource/quantity.go, whose pattern is the one KubeRay's CRD carries for every resource
(ray-operator/config/crd/bases/ray.io_rayjobs.yaml at v1.7.0, ``x-kubernetes-int-or-string`` quantities).
"""

from __future__ import annotations

import re
from decimal import Decimal

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")  # DNS-1123 label, at most 63
DNS_1035_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")  # what KubeRay asks of a RayJob's name
DNS_SUBDOMAIN = re.compile(r"(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")  # a qualified name's name part, a label value
NAME_MAX = 63
QUANTITY = re.compile(r"(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
                      r"(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?")
_SUFFIX: dict[str, Decimal] = {
    **{suffix: Decimal(2) ** (10 * power) for power, suffix in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"), 1)},
    **{suffix: Decimal(10) ** exponent for suffix, exponent in (("n", -9), ("u", -6), ("m", -3), ("", 0), ("k", 3),
                                                                ("M", 6), ("G", 9), ("T", 12), ("P", 15), ("E", 18))}}
# Resource names a container may ask for besides extended resources (domain/name): core/v1's standard container
# resources (pkg/apis/core/helper: IsStandardContainerResourceName) and hugepages-<size>.
STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")


def qualified_name_problem(key: str) -> str | None:
    """Why ``key`` is not a Kubernetes qualified name (a label, annotation, node-selector or taint key), or None:
    an optional DNS-1123 subdomain prefix and '/', then a name of at most 63 letters, digits, '-', '_' and '.'
    that starts and ends with a letter or digit."""
    prefix, slash, name = key.rpartition("/")
    if slash and not DNS_SUBDOMAIN.fullmatch(prefix):
        return (f"its prefix {prefix!r} is not a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', at most "
                "253)")
    if not name:
        return "it has no name after its prefix" if slash else "it is empty"
    if len(name) > NAME_MAX:
        return f"its name is {len(name)} characters (at most {NAME_MAX})"
    if not _NAME.fullmatch(name):
        return ("its name must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit")
    return None


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a label value (empty, or at most 63 of the name characters), or None."""
    if len(value) > NAME_MAX:
        return f"it is {len(value)} characters (at most {NAME_MAX})"
    if value and not _NAME.fullmatch(value):
        return "it must be letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
    return None


def quantity(text: str) -> Decimal | None:
    """The value of a Kubernetes quantity ("16Gi" -> 17179869184, "500m" -> 0.5), or None when ``text`` is not
    one."""
    if not QUANTITY.fullmatch(text):
        return None
    match = re.fullmatch(r"([+-]?[0-9.]+)(.*)", text)
    assert match is not None  # the grammar starts with a number
    number, suffix = match.groups()
    try:
        if suffix not in _SUFFIX:  # a decimal exponent (the grammar allows nothing else): "1e3"
            return Decimal(number) * Decimal(10) ** Decimal(suffix[1:])
        return Decimal(number) * _SUFFIX[suffix]
    except (ArithmeticError, KeyError):  # decimal's Overflow and InvalidOperation are ArithmeticErrors
        return None


def ray_count(value: Decimal) -> int:
    """What KubeRay gives Ray for a CPU quantity (``ray start --num-cpus``): ``Quantity.Value()``, rounded up
    (ray-operator/controllers/ray/common/pod.go:1394-1404 at v1.7.0)."""
    whole = int(value)
    return whole + (1 if value > whole else 0)


def resource_name_problem(name: str) -> str | None:
    """Why ``name`` is not a resource a container may ask for: cpu, memory, ephemeral-storage, hugepages-<size>, or
    an extended resource named domain/name."""
    if name in STANDARD_RESOURCES or (name.startswith("hugepages-") and quantity(name[len("hugepages-"):])):
        return None
    if "/" not in name:
        return ("it is not cpu, memory, ephemeral-storage or hugepages-<size>, and an extended resource is named "
                "domain/name (e.g. vpc.amazonaws.com/efa)")
    return qualified_name_problem(name)
