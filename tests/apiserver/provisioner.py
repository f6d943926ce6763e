"""A small stand-in for Cluster Autoscaler's ProvisioningRequest controller, for the live
autoscaling tests (``kube/process/provision.py``).

``Provisioner(store, ...).start()`` watches the store for ProvisioningRequests
(``autoscaling.x-k8s.io/v1``). ``delay_s`` after a request appears it answers it, as the
``best-effort-atomic-scale-up`` class does — all the capacity or none:

* ``fail=True`` — ``Failed=True`` (reason ``CapacityIsNotFound``) after adding ``partial``
  of its nodes (default none: a stockout part way through, whose nodes the autoscaler
  would remove later);
* else it reads the request's PodTemplate and adds, ``step_s`` apart, one node per
  ``max(1, node GPUs // pod GPUs)`` pods of its pod set, each labelled with the template's
  ``nodeSelector`` (the node type asked for) and ``kubernetes.io/hostname``, with
  ``allocatable`` and a ``Ready`` condition, then sets ``Accepted`` and ``Provisioned``.

``expire=True`` sets ``Provisioned`` before adding the nodes and ``BookingExpired`` at once,
as Cluster Autoscaler does when a booking ends before the pods use the capacity: the nodes
still come.

A request is answered once; one deleted before its time is not.
"""

from __future__ import annotations

import math
import threading
from typing import TYPE_CHECKING, Any

from tests.apiserver import errors

if TYPE_CHECKING:
    from tests.apiserver.store import Store

JSON = dict[str, Any]
NODE = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}


class Provisioner:
    """See the module docstring."""

    def __init__(
        self,
        store: Store,
        *,
        delay_s: float = 0.5,
        step_s: float = 0.3,
        fail: bool = False,
        partial: int = 0,
        expire: bool = False,
        allocatable: JSON | None = None,
    ) -> None:
        self.store, self.delay_s, self.step_s, self.fail = store, delay_s, step_s, fail
        self.partial, self.expire = partial, expire
        self.allocatable = dict(allocatable or NODE)
        self.requests = store.resource("autoscaling.x-k8s.io", "v1", "provisioningrequests")
        self.templates = store.resource("", "v1", "podtemplates")
        self.nodes = store.resource("", "v1", "nodes")
        self.seen: set[tuple[str, str]] = set()
        self.added: list[str] = []
        self.answered: list[tuple[str, str]] = []
        self._timers: list[threading.Timer] = []
        self._stopped = threading.Event()

    def start(self) -> Provisioner:
        self.store.subscribe(self._changed)
        return self

    def stop(self) -> None:
        self._stopped.set()
        self.store.unsubscribe(self._changed)
        for timer in self._timers:
            timer.cancel()

    def _changed(self) -> None:
        for request in list(self.store.objects(self.requests)):
            meta = request["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if key in self.seen:
                continue
            self.seen.add(key)
            timer = threading.Timer(self.delay_s, self._answer, key)
            timer.daemon = True
            self._timers.append(timer)
            timer.start()

    def _answer(self, namespace: str, name: str) -> None:
        try:
            request = self.store.get(self.requests, namespace, name)
        except errors.ApiError:
            return  # deleted before its time
        (pod_set,) = request["spec"]["podSets"]
        template = self.store.get(self.templates, namespace, pod_set["podTemplateRef"]["name"])
        spec = template["template"]["spec"]
        selector = dict(spec.get("nodeSelector") or {})
        pod_gpus = sum(
            int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
            for c in spec.get("containers") or ()
        )
        per_node = max(1, int(self.allocatable["nvidia.com/gpu"]) // max(pod_gpus, 1))
        count = math.ceil(int(pod_set["count"]) / per_node)
        if self.expire:
            self._condition(namespace, name, "Provisioned", "BookingExpired")
        for i in range(min(count, self.partial) if self.fail else count):
            if self._stopped.wait(self.step_s if i else 0.0):
                return
            node = f"{name}-node-{i}"
            labels = {**selector, "kubernetes.io/hostname": node}
            status = {
                "allocatable": dict(self.allocatable),
                "conditions": [{"type": "Ready", "status": "True"}],
            }
            body = {"metadata": {"name": node, "labels": labels}, "status": status}
            self.store.create(self.nodes, "", body)
            self.added.append(node)
        if self.fail:
            self._condition(namespace, name, "Failed")
        elif not self.expire:
            self._condition(namespace, name, "Provisioned")

    def _condition(self, namespace: str, name: str, *kinds: str) -> None:
        reasons = {
            "Failed": "CapacityIsNotFound",
            "Provisioned": "CapacityIsProvisioned",
            "BookingExpired": "CapacityReservationTimeExpired",
        }
        conditions = [{"type": "Accepted", "status": "True", "reason": "Accepted"}]
        conditions += [
            {"type": k, "status": "True", "reason": reasons[k], "message": reasons[k]}
            for k in kinds
        ]

        def write(current: JSON) -> JSON:
            return {**current, "status": {"conditions": conditions}}

        try:
            self.store.mutate(self.requests, namespace, name, write, subresource="status")
        except errors.ApiError:
            return
        self.answered.append((name, kinds[-1]))
