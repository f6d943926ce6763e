"""The kinds the live scheduler reads from a cluster: which, in what order, where the API
serves them, and which a cluster may lack."""

from __future__ import annotations

KINDS = (
    "NodeResourceTopology",
    "Node",
    "PriorityClass",
    "Queue",
    "PodGroup",
    "Topology",
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "Pod",
)
"""The kinds the live scheduler watches and translates (``objects.py``), in the order a
first list applies them (what a pod reads first)."""

CONTEXT = frozenset({"PriorityClass", "NodeResourceTopology", "ResourceClaimTemplate"})
"""Kinds read where other objects are translated (a pod's priority, a node's NUMA zones,
why a pod waits for its claims), not kept by the cache."""

REQUIRED = frozenset({"Node", "Pod", "PriorityClass"})
"""Kinds every cluster serves. The others a cluster may not serve — a CustomResourceDefinition
not installed (gpufleet's Queue and Topology before its chart, scheduler-plugins' PodGroup,
NodeResourceTopology) or ``resource.k8s.io/v1`` before Kubernetes 1.34 — and then it has
none of them: a pod that needs one (its PodGroup, its claims) waits, every other pod is
scheduled."""

OPTIONAL = frozenset(KINDS) - REQUIRED

API = {
    "NodeResourceTopology": ("topology.node.k8s.io/v1alpha2", "noderesourcetopologies"),
    "Node": ("v1", "nodes"),
    "PriorityClass": ("scheduling.k8s.io/v1", "priorityclasses"),
    "Queue": ("gpufleet.io/v1alpha1", "queues"),
    "PodGroup": ("scheduling.x-k8s.io/v1alpha1", "podgroups"),
    "Topology": ("gpufleet.io/v1alpha1", "topologies"),
    "DeviceClass": ("resource.k8s.io/v1", "deviceclasses"),
    "ResourceSlice": ("resource.k8s.io/v1", "resourceslices"),
    "ResourceClaimTemplate": ("resource.k8s.io/v1", "resourceclaimtemplates"),
    "ResourceClaim": ("resource.k8s.io/v1", "resourceclaims"),
    "Pod": ("v1", "pods"),
}
"""Each kind of :data:`KINDS`: its apiVersion and resource."""

PATHS = {
    kind: f"/api/{version}/{plural}" if "/" not in version else f"/apis/{version}/{plural}"
    for kind, (version, plural) in API.items()
}
"""Where each kind is listed and watched (all namespaces)."""
