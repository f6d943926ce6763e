"""A minimal Deployment and ReplicaSet controller for the emulator (kube-controller-manager's
part that lending tests need).

``Controllers(store).start()`` subscribes to the store and, after every write, brings the
objects to their specs, as the two controllers of kube-controller-manager do ("Deployments",
"ReplicaSet" in the Kubernetes documentation), in the parts a scheduler sees:

* a Deployment owns one ReplicaSet (``<deployment>-<hash of its template>``, its
  ``ownerReferences`` naming the Deployment as controller) whose ``spec.replicas`` follows the
  Deployment's (default 1); rollouts of a changed template are not modelled;
* a ReplicaSet keeps ``spec.replicas`` pods of its template that are not being deleted:
  missing ones are created (``generateName: <replicaset>-``, owned by it, pending), surplus
  ones deleted as the ReplicaSet controller ranks them ("ReplicaSet" in the Kubernetes
  documentation: "Scaling a ReplicaSet"): unscheduled before scheduled, a lower
  ``controller.kubernetes.io/pod-deletion-cost`` first, pods on nodes with more replicas
  first, then the newest (by the second; Kubernetes buckets ages on a log scale and breaks
  ties at random, which this does not); ``status.replicas`` and ``status.readyReplicas``
  (pods bound to a node, there being no kubelet) are written to both kinds.

A pod evicted or deleted is replaced at once, as its ReplicaSet would replace it. Writes made
while bringing objects to their specs do not recurse: the controller runs again until
nothing changes.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tests.apiserver.store import Store

JSON = dict[str, Any]


def _owned_by(obj: JSON, owner: JSON) -> bool:
    return any(
        ref.get("uid") == owner["metadata"]["uid"] and ref.get("controller")
        for ref in obj["metadata"].get("ownerReferences") or ()
    )


def _owner_ref(owner: JSON) -> JSON:
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": owner["metadata"]["name"],
        "uid": owner["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


class Controllers:
    """See the module docstring."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._running = False
        self._lock = threading.RLock()
        self.deployments = store.resource("apps", "v1", "deployments")
        self.replicasets = store.resource("apps", "v1", "replicasets")
        self.pods = store.resource("", "v1", "pods")

    def start(self) -> Controllers:
        with self.store._lock:  # the store's lock before ours, as every write takes them
            self.store.subscribe(self._changed)
            self._changed()
        return self

    def stop(self) -> None:
        self.store.unsubscribe(self._changed)

    def _changed(self) -> None:
        with self._lock:
            if self._running:
                return  # our own write: the loop below runs again
            self._running = True
            try:
                for _ in range(100):
                    if not self._reconcile():
                        break
            finally:
                self._running = False

    def _reconcile(self) -> bool:
        """One pass over every Deployment and ReplicaSet; True if it wrote anything."""
        wrote = False
        for deployment in list(self.store.objects(self.deployments)):
            wrote |= self._deployment(deployment)
        for replicaset in list(self.store.objects(self.replicasets)):
            wrote |= self._replicaset(replicaset)
        return wrote

    def _deployment(self, deployment: JSON) -> bool:
        meta, spec = deployment["metadata"], deployment.get("spec") or {}
        namespace = meta.get("namespace", "default")
        replicas = int(spec.get("replicas", 1))
        template = spec.get("template") or {}
        digest = hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]
        name = f"{meta['name']}-{digest}"
        owned = [
            rs
            for rs in self.store.objects(self.replicasets)
            if rs["metadata"].get("namespace") == namespace and _owned_by(rs, deployment)
        ]
        mine = next((rs for rs in owned if rs["metadata"]["name"] == name), None)
        if mine is None:
            self.store.create(
                self.replicasets,
                namespace,
                {
                    "metadata": {
                        "name": name,
                        "labels": dict((template.get("metadata") or {}).get("labels") or {}),
                        "ownerReferences": [_owner_ref(deployment)],
                    },
                    "spec": {
                        "replicas": replicas,
                        "selector": spec.get("selector") or {},
                        "template": copy.deepcopy(template),
                    },
                },
            )
            return True
        if int(mine["spec"].get("replicas", 1)) != replicas:
            self.store.mutate(
                self.replicasets,
                namespace,
                name,
                lambda rs: {**rs, "spec": {**rs["spec"], "replicas": replicas}},
            )
            return True
        return self._status(self.deployments, deployment, self._ready(mine))

    def _ready(self, replicaset: JSON) -> tuple[int, int]:
        pods = self._pods(replicaset)
        return len(pods), sum(1 for p in pods if (p.get("spec") or {}).get("nodeName"))

    def _pods(self, replicaset: JSON) -> list[JSON]:
        namespace = replicaset["metadata"].get("namespace", "default")
        return [
            p
            for p in self.store.list(self.pods, namespace)[0]
            if _owned_by(p, replicaset) and not p["metadata"].get("deletionTimestamp")
        ]

    def _replicaset(self, replicaset: JSON) -> bool:
        meta, spec = replicaset["metadata"], replicaset.get("spec") or {}
        namespace = meta.get("namespace", "default")
        replicas = int(spec.get("replicas", 1))
        pods = self._pods(replicaset)
        if len(pods) < replicas:
            template = copy.deepcopy(spec.get("template") or {})
            pod_meta = template.get("metadata") or {}
            pod_meta["generateName"] = f"{meta['name']}-"
            pod_meta["ownerReferences"] = [_owner_ref(replicaset)]
            pod_meta.pop("name", None)
            self.store.create(
                self.pods, namespace, {"metadata": pod_meta, "spec": template.get("spec") or {}}
            )
            return True
        if len(pods) > replicas:
            on_node: dict[str, int] = {}
            for pod in pods:
                node = (pod.get("spec") or {}).get("nodeName") or ""
                on_node[node] = on_node.get(node, 0) + 1

            def rank(pod: JSON) -> tuple[bool, int, int, str]:
                node = (pod.get("spec") or {}).get("nodeName") or ""
                annotations = pod["metadata"].get("annotations") or {}
                cost = int(annotations.get("controller.kubernetes.io/pod-deletion-cost", 0))
                stamp = _negated(pod["metadata"]["creationTimestamp"])
                return bool(node), cost, -on_node[node], stamp

            victim = min(pods, key=rank)
            self.store.delete(self.pods, namespace, victim["metadata"]["name"])
            return True
        return self._status(self.replicasets, replicaset, self._ready(replicaset))

    def _status(self, resource: Any, obj: JSON, counts: tuple[int, int]) -> bool:
        replicas, ready = counts
        status = obj.get("status") or {}
        if status.get("replicas") == replicas and status.get("readyReplicas") == ready:
            return False
        meta = obj["metadata"]

        def write(current: JSON) -> JSON:
            return {**current, "status": {"replicas": replicas, "readyReplicas": ready}}

        self.store.mutate(
            resource, meta.get("namespace", ""), meta["name"], write, subresource="status"
        )
        return True


def _negated(stamp: str) -> str:
    """A sort key that puts later RFC 3339 times first."""
    return "".join(chr(0x10FFFF - ord(c)) for c in stamp)
