"""The kinds the emulator serves: one row of ``RESOURCES`` per resource.

Every handler, the discovery documents and the storage read this table, so adding a kind is
one line. A row says what the API reference says of its resource: its group, version, plural
and kind, whether it is namespaced, which subresources it has and whether it is a custom
resource (API concepts, "Standard API terminology": resource types, collections, scopes).

Behaviour that differs between kinds is a column, never a branch on a name elsewhere:

* ``status`` — the resource has a ``/status`` subresource. Then, as for every built-in kind
  with one and for custom resources with ``subresources.status`` ("Extend the Kubernetes API
  with CustomResourceDefinitions: Status subresource"), writes to the main resource ignore
  ``status`` and writes to ``/status`` change only ``status``; a create drops the status it is
  sent and starts from ``initial_status`` (a new pod is ``Pending``), except where that is
  None: a node is created with its status, as the kubelet registers it.
* ``custom`` — a custom resource: no strategic merge patch (415, as for CRDs: "kubectl patch:
  strategic merge patch is not supported for custom resources"), and list items carry their
  ``kind`` and ``apiVersion``.
* ``returns_object_on_delete`` — DELETE answers with the deleted object rather than a
  ``Status`` of success (pods and namespaces do; most kinds answer with a Status).
* ``storage`` — two resources that are views of one stored collection (``events.k8s.io/v1``
  Events are ``v1`` Events, "Event v1 events.k8s.io" API reference); see ``events.py``.
* ``review`` — a review (TokenReview, SubjectAccessReview): ``create`` only, answered and
  never stored (``reviews.py``).
* ``short_names`` and ``categories`` — what discovery lists for ``kubectl get po`` and
  ``kubectl get all``. A custom resource whose CRD gpufleet generates (``tools/crds``)
  takes them from that CRD's ``spec.names``, as apiserver serves a CRD's, so ``kubectl get
  gfq`` works here exactly when it works in a cluster with the chart installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tools.crds.kinds import definitions

VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]


@dataclass(frozen=True, slots=True)
class Resource:
    """One REST resource: ``/api/v1/...`` when ``group`` is empty, else ``/apis/group/v/...``."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    custom: bool = False
    returns_object_on_delete: bool = False
    initial_status: dict[str, Any] | None = field(default_factory=dict)
    storage: str = ""
    review: bool = False
    """Create-only and never stored: the object comes back with its status (``reviews.py``)."""

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """The name apiserver's messages use: ``pods``, ``leases.coordination.k8s.io``."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def storage_key(self) -> str:
        return self.storage or f"{self.group}/{self.plural}"

    @property
    def status(self) -> bool:
        return "status" in self.subresources

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"


def _names(crd: str) -> dict[str, Any]:
    """``short_names`` and ``categories`` of the CRD named ``crd`` that gpufleet generates."""
    (names,) = [d["spec"]["names"] for d in definitions() if d["metadata"]["name"] == crd]
    return {
        "short_names": tuple(names.get("shortNames", ())),
        "categories": tuple(names.get("categories", ())),
    }


RESOURCES: tuple[Resource, ...] = (
    Resource("", "v1", "pods", "Pod", True, ("binding", "eviction", "status"), ("po",), ("all",),
             returns_object_on_delete=True, initial_status={"phase": "Pending"}),
    Resource("", "v1", "nodes", "Node", False, ("status",), ("no",), initial_status=None),
    Resource("", "v1", "namespaces", "Namespace", False, ("status",), ("ns",),
             returns_object_on_delete=True, initial_status={"phase": "Active"}),
    Resource("", "v1", "events", "Event", True, (), ("ev",)),
    Resource("", "v1", "podtemplates", "PodTemplate", True),
    Resource("", "v1", "persistentvolumes", "PersistentVolume", False, ("status",), ("pv",),
             initial_status={"phase": "Pending"}),
    Resource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("status",),
             ("pvc",), initial_status={"phase": "Pending"}),
    Resource("storage.k8s.io", "v1", "storageclasses", "StorageClass", False, (), ("sc",)),
    Resource("storage.k8s.io", "v1", "csinodes", "CSINode", False),
    Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, ("status",),
             ("pdb",)),
    Resource("apps", "v1", "deployments", "Deployment", True, ("status",), ("deploy",),
             ("all",)),
    Resource("apps", "v1", "replicasets", "ReplicaSet", True, ("status",), ("rs",), ("all",)),
    Resource("apps", "v1", "statefulsets", "StatefulSet", True, ("status",), ("sts",), ("all",)),
    Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet", True,
             ("status",), ("lws",), custom=True),
    Resource("authentication.k8s.io", "v1", "tokenreviews", "TokenReview", False,
             review=True),
    Resource("authorization.k8s.io", "v1", "subjectaccessreviews", "SubjectAccessReview",
             False, review=True),
    Resource("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, (), ("pc",)),
    Resource("coordination.k8s.io", "v1", "leases", "Lease", True),
    Resource("events.k8s.io", "v1", "events", "Event", True, (), ("ev",), storage="/events"),
    Resource("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    Resource("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    Resource("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, ("status",)),
    Resource("resource.k8s.io", "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
    Resource("gpufleet.io", "v1alpha1", "queues", "Queue", False, ("status",), custom=True,
             **_names("queues.gpufleet.io")),
    Resource("gpufleet.io", "v1alpha1", "topologies", "Topology", False, custom=True,
             **_names("topologies.gpufleet.io")),
    Resource("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True, ("status",),
             custom=True, **_names("podgroups.scheduling.x-k8s.io")),
    Resource("autoscaling.x-k8s.io", "v1", "provisioningrequests", "ProvisioningRequest", True,
             ("status",), ("provreq", "provreqs"), custom=True),
    Resource("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies",
             "NodeResourceTopology", False, (), ("nrt",), custom=True),
    # Other schedulers' kinds, which gpufleet serve reads in their vocabularies.
    Resource("scheduling.run.ai", "v2", "queues", "Queue", False, ("status",), custom=True),
    Resource("scheduling.run.ai", "v2alpha2", "podgroups", "PodGroup", True, ("status",),
             custom=True),
    Resource("scheduling.volcano.sh", "v1beta1", "queues", "Queue", False, ("status",),
             ("q", "queue-v1beta1"), custom=True),
    Resource("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True, ("status",),
             ("pg", "podgroup-v1beta1"), custom=True),
    Resource("scheduling.x-k8s.io", "v1alpha1", "elasticquotas", "ElasticQuota", True,
             ("status",), ("eq", "eqs"), custom=True),
)  # fmt: skip


def find(group: str, version: str, plural: str) -> Resource | None:
    """The resource served at that group, version and plural, if any."""
    for resource in RESOURCES:
        if (resource.group, resource.version, resource.plural) == (group, version, plural):
            return resource
    return None


def by_kind(api_version: str, kind: str) -> Resource | None:
    """The resource of objects of that apiVersion and kind (for a binding's target and such)."""
    for resource in RESOURCES:
        if (resource.api_version, resource.kind) == (api_version, kind):
            return resource
    return None
