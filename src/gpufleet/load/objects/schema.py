"""Which fields each kind has, to catch a misspelt one (``nodeSelecter``) before it is lost.

A field gpufleet does not know is a field it does not read: a pod whose ``nodeSelecter``
is ignored lands anywhere. So every object is walked against the fields of its kind:

* in gpufleet's own kinds (Queue, Topology, NodePool) an unknown field is an error — the
  schema is gpufleet's, so an unknown field can only be a mistake;
* in Kubernetes' kinds it is a warning naming the object and field, as ``kubectl`` warns
  (``unknown field "spec.nodeSelecter"``), and only in the parts gpufleet reads: a field a
  newer Kubernetes added elsewhere is no reason to stop.

A schema is a mapping from field name to the schema of its value: ``ANY`` for a value not
checked further, a one-element list ``[schema]`` for a list of such items, a mapping for
an object. Label and annotation maps are ``ANY``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

ANY: Mapping[str, Any] = {"*": None}
"""A value whose contents are not checked."""

Schema = Mapping[str, Any]

META: Schema = dict.fromkeys(
    (
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    ),
    ANY,
)
_OBJECT: Schema = {"apiVersion": ANY, "kind": ANY, "metadata": META, "status": ANY}

_REQUIREMENT: Schema = dict.fromkeys(("key", "operator", "values"), ANY)
_NODE_SELECTOR: Schema = {
    "nodeSelectorTerms": [{"matchExpressions": [_REQUIREMENT], "matchFields": [_REQUIREMENT]}]
}
_AFFINITY: Schema = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": _NODE_SELECTOR,
        "preferredDuringSchedulingIgnoredDuringExecution": ANY,
    },
    "podAffinity": ANY,
    "podAntiAffinity": ANY,
}
_CONTAINER: Schema = {
    **dict.fromkeys(
        (
            "name",
            "image",
            "command",
            "args",
            "workingDir",
            "ports",
            "envFrom",
            "env",
            "resizePolicy",
            "restartPolicy",
            "restartPolicyRules",
            "volumeMounts",
            "volumeDevices",
            "livenessProbe",
            "readinessProbe",
            "startupProbe",
            "lifecycle",
            "terminationMessagePath",
            "terminationMessagePolicy",
            "imagePullPolicy",
            "securityContext",
            "stdin",
            "stdinOnce",
            "tty",
            "targetContainerName",
        ),
        ANY,
    ),
    "resources": dict.fromkeys(("limits", "requests", "claims"), ANY),
}
_TOLERATION: Schema = dict.fromkeys(
    ("key", "operator", "value", "effect", "tolerationSeconds"), ANY
)
POD: Schema = {
    **_OBJECT,
    "spec": {
        **dict.fromkeys(
            (
                "volumes",
                "ephemeralContainers",
                "restartPolicy",
                "terminationGracePeriodSeconds",
                "activeDeadlineSeconds",
                "dnsPolicy",
                "nodeSelector",
                "serviceAccountName",
                "serviceAccount",
                "automountServiceAccountToken",
                "nodeName",
                "hostNetwork",
                "hostPID",
                "hostIPC",
                "shareProcessNamespace",
                "securityContext",
                "imagePullSecrets",
                "hostname",
                "hostnameOverride",
                "subdomain",
                "schedulerName",
                "hostAliases",
                "priorityClassName",
                "priority",
                "dnsConfig",
                "readinessGates",
                "runtimeClassName",
                "enableServiceLinks",
                "preemptionPolicy",
                "overhead",
                "topologySpreadConstraints",
                "setHostnameAsFQDN",
                "os",
                "hostUsers",
                "schedulingGates",
                "resourceClaims",
                "resources",
                "workloadRef",
                "schedulingGroup",
                "evictionResponders",
            ),
            ANY,
        ),
        "containers": [_CONTAINER],
        "initContainers": [_CONTAINER],
        "affinity": _AFFINITY,
        "tolerations": [_TOLERATION],
    },
}
NODE: Schema = {
    **_OBJECT,
    "spec": {
        **dict.fromkeys(
            ("podCIDR", "podCIDRs", "providerID", "unschedulable", "configSource", "externalID"),
            ANY,
        ),
        "taints": [dict.fromkeys(("key", "value", "effect", "timeAdded"), ANY)],
    },
}
POD_GROUP: Schema = {
    **_OBJECT,
    "spec": dict.fromkeys(("minMember", "minResources", "scheduleTimeoutSeconds"), ANY),
}
PRIORITY_CLASS: Schema = {
    **_OBJECT,
    **dict.fromkeys(("value", "globalDefault", "description", "preemptionPolicy"), ANY),
}

_QUEUE_RESOURCE: Schema = dict.fromkeys(("quota", "limit", "overQuotaWeight"), ANY)
QUEUE: Schema = {
    **_OBJECT,
    "spec": {
        **dict.fromkeys(("parentQueue", "priority", "preemptMinRuntime", "reclaimMinRuntime"), ANY),
        "resources": dict.fromkeys(("gpu", "cpu", "memory"), _QUEUE_RESOURCE),
        "serving": {"forecastGPUs": ANY, "forecastQuery": ANY},
    },
}
TOPOLOGY: Schema = {**_OBJECT, "spec": {"levels": [{"nodeLabel": ANY}]}}
NODE_POOL: Schema = {
    **_OBJECT,
    "spec": {
        "count": ANY,
        "template": {"metadata": META, "spec": NODE["spec"], "status": ANY},
        "domains": [dict.fromkeys(("label", "size"), ANY)],
        "autoscaling": dict.fromkeys(
            (
                "minNodes",
                "maxNodes",
                "provisioningDelay",
                "interruptionsPerHour",
                "availability",
            ),
            ANY,
        ),
    },
}

STRICT: Mapping[str, Schema] = {"Queue": QUEUE, "Topology": TOPOLOGY, "NodePool": NODE_POOL}
"""gpufleet's own kinds: an unknown field is an error."""
LENIENT: Mapping[str, Schema] = {
    "Pod": POD,
    "Node": NODE,
    "PodGroup": POD_GROUP,
    "PriorityClass": PRIORITY_CLASS,
}
"""Kubernetes' kinds, in the parts gpufleet reads: an unknown field is a warning."""


def unknown_fields(value: object, schema: Schema | list[Any], path: str = "") -> Iterator[str]:
    """The paths (``spec.containers[0].resources.request``) of fields ``schema`` lacks."""
    if schema is ANY:
        return
    if isinstance(schema, list):
        if isinstance(value, list):
            for i, item in enumerate(value):
                yield from unknown_fields(item, schema[0], f"{path}[{i}]")
        return
    if not isinstance(value, Mapping):
        return  # a wrong type is the reader's to report, with what it expected
    for key, item in value.items():
        field = f"{path}.{key}" if path else str(key)
        if key not in schema:
            yield field
        else:
            yield from unknown_fields(item, schema[key], field)


_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
DNS_LABEL = re.compile(_LABEL)


def name_problem(name: str, *, label: bool = False, limit: int = 253) -> str | None:
    """Why ``name`` is not a valid Kubernetes object name (None: it is): a DNS-1123
    subdomain of at most ``limit`` characters (253), or with ``label`` a DNS-1123 label of at
    most 63 (namespaces)."""
    limit, pattern, what = (
        (63, DNS_LABEL, "DNS-1123 label") if label else (limit, DNS_SUBDOMAIN, "DNS-1123 subdomain")
    )
    if len(name) > limit:
        return f"expected a {what} of at most {limit} characters, got {len(name)}"
    if not pattern.fullmatch(name):
        return (
            f"expected a {what} (lower-case letters, digits and '-'"
            f"{'' if label else ', dot-separated'}, starting and ending with a letter or "
            f"digit), got {name!r}"
        )
    return None
