"""Read where a pod may go by the pods already there: its labels, required pod affinity and
anti-affinity, ``DoNotSchedule`` topology spread constraints and host ports, into a
:class:`~gpufleet.model.interpod.PodPlacement`; and say which fields it uses that gpufleet
does not place by (:data:`gpufleet.load.objects.pod_fields.REFUSED`), so that the pod waits with a
reason naming them rather than land where Kubernetes would not put it.

Kubernetes' semantics, as its API documents them:

* a term's namespaces are those it lists, or — no list and no ``namespaceSelector`` — the
  pod's own; an empty ``namespaceSelector`` (``{}``) selects every namespace;
* ``matchLabelKeys`` adds ``key In (the pod's value)`` to the selector, ``mismatchLabelKeys``
  ``key NotIn (the pod's value)``, for each key the pod has (the API server merges them the
  same way; merging twice changes nothing);
* a null label selector selects no pod, an empty one every pod;
* a container port's ``hostIP`` defaults to ``0.0.0.0`` and ``protocol`` to TCP; under
  ``hostNetwork`` a port without ``hostPort`` takes its ``containerPort`` (API defaulting).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gpufleet.load.objects.pod_fields import REFUSED, used_fields_of
from gpufleet.load.objects.reader import Reader
from gpufleet.model.interpod import (
    WILDCARD_IP,
    HostPort,
    LabelSelector,
    PodPlacement,
    PodTerm,
    SpreadConstraint,
    WeightedTerm,
)
from gpufleet.model.selectors import Requirement

SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
"""Operators of a ``metav1.LabelSelectorRequirement``."""
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
PROTOCOLS = ("TCP", "UDP", "SCTP")


def read_placement(r: Reader, labels: Mapping[str, str]) -> PodPlacement:
    """Pod ``r``'s namespace, ``labels`` and required inter-pod terms, spread and ports."""
    hard, soft = _spread(r, labels)
    return PodPlacement(
        r.namespace,
        labels,
        _terms(r, f"spec.affinity.podAffinity.{REQUIRED}", labels),
        _terms(r, f"spec.affinity.podAntiAffinity.{REQUIRED}", labels),
        hard,
        _host_ports(r),
        _preferred(r, labels),
        soft,
    )


REFUSED_PATHS = tuple(REFUSED)


def refused_fields(r: Reader) -> list[str]:
    """The fields pod ``r`` sets that change where it may go and that gpufleet does not
    implement (``spec.volumes[0].persistentVolumeClaim``), in the order of the table."""
    return used_fields_of(r.obj, REFUSED_PATHS)


def refusal(fields: list[str]) -> str:
    """Why a pending pod with ``fields`` is not scheduled."""
    named = "; ".join(f"{path} ({REFUSED[_generic(path)]})" for path in fields)
    return (
        f"gpufleet does not implement {named}: the pod waits rather than be placed where "
        "Kubernetes would not place it"
    )


def _generic(path: str) -> str:
    """``spec.volumes[0].ephemeral`` -> ``spec.volumes[].ephemeral``."""
    out, depth = [], 0
    for ch in path:
        if ch == "[":
            depth += 1
            out.append("[]")
        elif ch == "]":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out)


def selector(r: Reader, path: str, raw: object) -> LabelSelector:
    """A ``metav1.LabelSelector`` at ``path`` (None: selects nothing)."""
    if raw is None:
        return LabelSelector(nothing=True)
    if not isinstance(raw, Mapping):
        raise r.fail(path, "a label selector (matchLabels, matchExpressions)", raw)
    match_labels = raw.get("matchLabels") or {}
    if not isinstance(match_labels, Mapping):
        raise r.fail(f"{path}.matchLabels", "a mapping of label to value", match_labels)
    reqs = [
        Requirement(str(k), "In", (label_value(r, f"{path}.matchLabels.{k}", v),))
        for k, v in sorted(match_labels.items(), key=lambda kv: str(kv[0]))
    ]
    exprs = raw.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise r.fail(f"{path}.matchExpressions", "a list", exprs)
    for n, expr in enumerate(exprs):
        where = f"{path}.matchExpressions[{n}]"
        if not isinstance(expr, Mapping) or expr.get("operator") not in SELECTOR_OPERATORS:
            got = expr.get("operator") if isinstance(expr, Mapping) else expr
            raise r.fail(f"{where}.operator", " | ".join(SELECTOR_OPERATORS), got)
        key = expr.get("key")
        if not isinstance(key, str) or not key:
            raise r.fail(f"{where}.key", "a label key", key)
        values = expr.get("values") or []
        if not isinstance(values, list):
            raise r.fail(f"{where}.values", "a list of strings", values)
        op = str(expr["operator"])
        if (op in {"In", "NotIn"}) != bool(values):
            raise r.fail(
                f"{where}.values",
                "values for In and NotIn, none for Exists and DoesNotExist",
                values,
            )
        reqs.append(
            Requirement(
                key,
                op,
                tuple(label_value(r, f"{where}.values[{j}]", v) for j, v in enumerate(values)),
            )
        )
    return LabelSelector(tuple(reqs))


def label_value(r: Reader, path: str, value: object) -> str:
    """A label value as YAML may write it (``"1"``, ``1``, ``true``): a string, number or
    boolean, never null, a list or a mapping; read as the labels of objects are
    (:meth:`Reader.strings`), so that a selector and the labels it selects agree."""
    if not isinstance(value, str | int | float | bool):
        raise r.fail(path, "a label value (a string)", value)
    return str(value)


def _with_label_keys(
    r: Reader, path: str, base: LabelSelector, item: Mapping[str, Any], labels: Mapping[str, str]
) -> LabelSelector:
    """``base`` with ``matchLabelKeys`` (``In``) and ``mismatchLabelKeys`` (``NotIn``) of
    ``item`` merged in for the keys the pod has."""
    extra: list[Requirement] = []
    for field, op in (("matchLabelKeys", "In"), ("mismatchLabelKeys", "NotIn")):
        keys = item.get(field) or []
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            raise r.fail(f"{path}.{field}", "a list of label keys", keys)
        if keys and base.nothing:
            raise r.fail(f"{path}.labelSelector", f"a label selector to go with {field}", None)
        extra += [Requirement(k, op, (labels[k],)) for k in keys if k in labels]
    if not extra:
        return base
    merged = base.requirements + tuple(e for e in extra if e not in base.requirements)
    return LabelSelector(merged)


def _preferred(r: Reader, labels: Mapping[str, str]) -> tuple[WeightedTerm, ...]:
    """Preferred pod affinity terms with their weights, anti-affinity ones negated."""
    out = []
    for kind, sign in (("podAffinity", 1), ("podAntiAffinity", -1)):
        path = f"spec.affinity.{kind}.{PREFERRED}"
        for i, raw in enumerate(r.sequence(path)):
            where = f"{path}[{i}]"
            if not isinstance(raw, Mapping):
                raise r.fail(where, "a weighted pod affinity term", raw)
            weight = raw.get("weight")
            if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= 100:
                raise r.fail(f"{where}.weight", "an integer in 1..100", weight)
            term = _term(r, f"{where}.podAffinityTerm", raw.get("podAffinityTerm"), labels)
            out.append(WeightedTerm(term, sign * weight))
    return tuple(out)


def _terms(r: Reader, path: str, labels: Mapping[str, str]) -> tuple[PodTerm, ...]:
    return tuple(_term(r, f"{path}[{i}]", raw, labels) for i, raw in enumerate(r.sequence(path)))


def _term(r: Reader, where: str, raw: object, labels: Mapping[str, str]) -> PodTerm:
    """One pod affinity term at ``where``: its selector (``matchLabelKeys`` and
    ``mismatchLabelKeys`` merged in), namespaces and topology key."""
    if not isinstance(raw, Mapping):
        raise r.fail(where, "a pod affinity term", raw)
    key = _topology_key(r, where, raw)
    chosen = selector(r, f"{where}.labelSelector", raw.get("labelSelector"))
    chosen = _with_label_keys(r, where, chosen, raw, labels)
    listed = raw.get("namespaces") or []
    if not isinstance(listed, list) or not all(isinstance(n, str) for n in listed):
        raise r.fail(f"{where}.namespaces", "a list of namespace names", listed)
    raw_selector = raw.get("namespaceSelector")
    if raw_selector is None:  # the namespaces listed, else the pod's own
        return PodTerm(chosen, frozenset(listed) if listed else frozenset((r.namespace,)), key)
    by_labels = selector(r, f"{where}.namespaceSelector", raw_selector)
    if by_labels.empty:  # {}: every namespace
        return PodTerm(chosen, None, key)
    return PodTerm(chosen, frozenset(listed), key, by_labels)


def _topology_key(r: Reader, where: str, raw: Mapping[str, Any]) -> str:
    key = raw.get("topologyKey")
    if not isinstance(key, str) or not key:
        raise r.fail(f"{where}.topologyKey", "a node label key", key)
    return key


def _spread(
    r: Reader, labels: Mapping[str, str]
) -> tuple[tuple[SpreadConstraint, ...], tuple[SpreadConstraint, ...]]:
    """The pod's ``DoNotSchedule`` constraints (filters) and ``ScheduleAnyway`` ones
    (scores)."""
    hard: list[SpreadConstraint] = []
    soft: list[SpreadConstraint] = []
    for i, raw in enumerate(r.sequence("spec.topologySpreadConstraints")):
        where = f"spec.topologySpreadConstraints[{i}]"
        if not isinstance(raw, Mapping):
            raise r.fail(where, "a topology spread constraint", raw)
        skew = raw.get("maxSkew")
        if isinstance(skew, bool) or not isinstance(skew, int) or skew < 1:
            raise r.fail(f"{where}.maxSkew", "an integer >= 1", skew)
        key = _topology_key(r, where, raw)
        when = raw.get("whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            raise r.fail(f"{where}.whenUnsatisfiable", "DoNotSchedule | ScheduleAnyway", when)
        domains = raw.get("minDomains", 1)
        if domains is None:
            domains = 1
        if isinstance(domains, bool) or not isinstance(domains, int) or domains < 1:
            raise r.fail(f"{where}.minDomains", "an integer >= 1", domains)
        if domains != 1 and when != "DoNotSchedule":
            raise r.fail(f"{where}.minDomains", "minDomains only with DoNotSchedule", domains)
        policies = []
        for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            value = raw.get(field)
            if value is not None and value not in ("Honor", "Ignore"):
                raise r.fail(f"{where}.{field}", "Honor | Ignore", value)
            policies.append(value)
        chosen = selector(r, f"{where}.labelSelector", raw.get("labelSelector"))
        chosen = _with_label_keys(r, where, chosen, {**raw, "mismatchLabelKeys": None}, labels)
        (hard if when == "DoNotSchedule" else soft).append(
            SpreadConstraint(
                skew,
                key,
                chosen,
                domains,
                honor_node_affinity=policies[0] != "Ignore",
                honor_taints=policies[1] == "Honor",
            )
        )
    return tuple(hard), tuple(soft)


def _host_ports(r: Reader) -> tuple[HostPort, ...]:
    """The host ports of the containers and of the sidecars (init containers that run
    beside them, ``restartPolicy: Always``), as kube-scheduler's ``GetHostPorts``."""
    host_network = r.get("spec.hostNetwork") is True
    ports = []
    running = [("spec.containers", i, c) for i, c in enumerate(r.sequence("spec.containers"))]
    running += [
        ("spec.initContainers", i, c)
        for i, c in enumerate(r.sequence("spec.initContainers"))
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always"
    ]
    for part, i, container in running:
        raw_ports = container.get("ports") if isinstance(container, Mapping) else None
        if raw_ports is None:
            continue
        if not isinstance(raw_ports, list):
            raise r.fail(f"{part}[{i}].ports", "a list of container ports", raw_ports)
        for j, port in enumerate(raw_ports):
            where = f"{part}[{i}].ports[{j}]"
            if not isinstance(port, Mapping):
                raise r.fail(where, "a container port", port)
            number = port.get("hostPort")
            if number is None and host_network:
                number = port.get("containerPort")
            if number is None or number == 0:
                continue
            if isinstance(number, bool) or not isinstance(number, int) or not 0 < number < 65536:
                raise r.fail(f"{where}.hostPort", "a port number in 1..65535", number)
            protocol = port.get("protocol") or "TCP"
            if protocol not in PROTOCOLS:
                raise r.fail(f"{where}.protocol", " | ".join(PROTOCOLS), protocol)
            ip = port.get("hostIP") or WILDCARD_IP
            if not isinstance(ip, str):
                raise r.fail(f"{where}.hostIP", "an IP address", ip)
            ports.append(HostPort(str(protocol), number, ip))
    return tuple(dict.fromkeys(ports))


def pod_volumes(r: Reader) -> tuple[str, ...]:
    """Keys of the PersistentVolumeClaims pod ``r`` mounts: each ``persistentVolumeClaim``'s
    ``claimName``, and for a generic ephemeral volume the claim its controller makes,
    ``<pod>-<volume>`` (Kubernetes' naming of it)."""
    keys = []
    for i, volume in enumerate(r.sequence("spec.volumes")):
        where = f"spec.volumes[{i}]"
        if not isinstance(volume, Mapping):
            raise r.fail(where, "a volume", volume)
        claim = volume.get("persistentVolumeClaim")
        if claim is not None:
            name = claim.get("claimName") if isinstance(claim, Mapping) else None
            if not isinstance(name, str) or not name:
                raise r.fail(f"{where}.persistentVolumeClaim.claimName", "a claim name", name)
            keys.append(f"{r.namespace}/{name}")
        elif volume.get("ephemeral") is not None:
            name = volume.get("name")
            if not isinstance(name, str) or not name:
                raise r.fail(f"{where}.name", "a volume name", name)
            keys.append(f"{r.namespace}/{r.name}-{name}")
    return tuple(dict.fromkeys(keys))
