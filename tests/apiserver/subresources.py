"""The pod subresources a scheduler writes through: ``binding`` and ``eviction``.

* ``POST pods/<name>/binding`` ("Binding v1 core" API reference; apiserver's
  ``BindingREST``): the body is a ``Binding`` whose ``target`` names a ``Node``. It sets
  ``spec.nodeName``, adds the Binding's annotations to the pod's, sets the pod's
  ``PodScheduled`` condition to ``True`` and answers ``201`` with a ``Status`` of success.
  A Binding whose ``metadata.uid`` is not the pod's, a pod already bound (``pod <name> is
  already assigned to node "<node>"``) or being deleted are 409 Conflicts on
  ``pods/binding``.
* ``POST pods/<name>/eviction`` ("Eviction v1 policy" API reference; "API-initiated
  Eviction"): deletes the pod unless a PodDisruptionBudget of its namespace that selects it
  allows no disruption; then 429 ``TooManyRequests``, ``Cannot evict pod as it would violate
  the pod's disruption budget.``, with a ``DisruptionBudget`` cause. A pod that is not
  running (``Pending``, ``Succeeded``, ``Failed``) or already being deleted is evicted
  whatever the budgets say, and more than one budget for a pod is a 500, as in apiserver.
  Success is ``201`` with a ``Status`` of success. ``deleteOptions.preconditions`` apply.

  The budget's allowance is its ``status.disruptionsAllowed`` when its status has one (what
  the disruption controller computes), decremented by each eviction as apiserver does;
  otherwise it is computed here, as that controller would: the healthy pods it selects (phase
  ``Running`` and not ``Ready=False``) less ``minAvailable``, or less the pods it selects
  minus ``maxUnavailable`` (a percentage of the selected pods, rounded up).
"""

from __future__ import annotations

import math
from typing import Any

from tests.apiserver import errors
from tests.apiserver.selectors import object_selector
from tests.apiserver.store import Store

JSON = dict[str, Any]


def bind(store: Store, namespace: str, name: str, binding: JSON) -> JSON:
    """Apply a Binding (see the module docstring)."""
    pods = store.resource("", "v1", "pods")
    meta = binding.get("metadata") or {}
    if meta.get("name", name) != name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    if target.get("kind", "Node") not in {"", "Node"}:
        raise errors.invalid(pods, name, "target.kind", "must be empty or 'Node'")
    node = target.get("name") or ""
    if not node:
        raise errors.invalid(pods, name, "target.name", "Required value")

    def assign(pod: JSON) -> JSON:
        if meta.get("uid") and meta["uid"] != pod["metadata"]["uid"]:
            raise errors.conflict(
                "pods/binding",
                name,
                f"Precondition failed: UID in precondition: {meta['uid']}, "
                f"UID in object meta: {pod['metadata']['uid']}",
            )
        if pod["metadata"].get("deletionTimestamp"):
            raise errors.conflict(
                "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host"
            )
        bound = pod.get("spec", {}).get("nodeName")
        if bound:
            raise errors.conflict(
                "pods/binding", name, f'pod {name} is already assigned to node "{bound}"'
            )
        pod.setdefault("spec", {})["nodeName"] = node
        if meta.get("annotations"):
            pod["metadata"].setdefault("annotations", {}).update(meta["annotations"])
        conditions = pod.setdefault("status", {}).setdefault("conditions", [])
        scheduled = {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": pod["metadata"]["creationTimestamp"],
        }
        for i, condition in enumerate(conditions):
            if condition.get("type") == "PodScheduled":
                if condition.get("status") != "True":
                    conditions[i] = {**condition, **scheduled}
                break
        else:
            conditions.append(scheduled)
        pod["metadata"].pop("resourceVersion", None)
        return pod

    store.mutate(pods, namespace, name, assign, subresource="binding", verb="bind")
    return errors.success(201)


def _running(pod: JSON) -> bool:
    status = pod.get("status") or {}
    ready = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return status.get("phase") == "Running" and ready.get("Ready") != "False"


def _scaled(value: int | str, total: int) -> int:
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def allowed(pdb: JSON, selected: list[JSON]) -> int:
    """The disruptions a budget allows now (see the module docstring)."""
    status = pdb.get("status") or {}
    if "disruptionsAllowed" in status:
        return int(status["disruptionsAllowed"])
    spec = pdb.get("spec") or {}
    healthy = sum(1 for pod in selected if _running(pod))
    if "minAvailable" in spec:
        return healthy - _scaled(spec["minAvailable"], len(selected))
    if "maxUnavailable" in spec:
        return healthy - (len(selected) - _scaled(spec["maxUnavailable"], len(selected)))
    return healthy  # a budget of neither allows everything it can count


def evict(store: Store, namespace: str, name: str, eviction: JSON) -> JSON:
    """Apply an Eviction (see the module docstring)."""
    pods = store.resource("", "v1", "pods")
    budgets = store.resource("policy", "v1", "poddisruptionbudgets")
    if (eviction.get("metadata") or {}).get("name", name) != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    preconditions = (eviction.get("deleteOptions") or {}).get("preconditions") or {}
    pod = store.get(pods, namespace, name)
    phase = (pod.get("status") or {}).get("phase")
    if phase in {"Running", "Unknown", None} and not pod["metadata"].get("deletionTimestamp"):
        items, _ = store.list(budgets, namespace)
        matching = [pdb for pdb in items if object_selector(pdb["spec"].get("selector"))(pod)]
        if len(matching) > 1:
            raise errors.ApiError(
                500,
                "InternalError",
                "This pod has more than one PodDisruptionBudget, which the eviction "
                "subresource does not support.",
            )
        if matching:
            pdb = matching[0]
            selected = [
                p
                for p in store.list(pods, namespace)[0]
                if object_selector(pdb["spec"].get("selector"))(p)
            ]
            if allowed(pdb, selected) <= 0:
                need = pdb["spec"].get("minAvailable", "?")
                healthy = sum(1 for p in selected if _running(p))
                cause = {
                    "reason": "DisruptionBudget",
                    "message": f"The disruption budget {pdb['metadata']['name']} needs "
                    f"{need} healthy pods and has {healthy} currently",
                }
                raise errors.ApiError(
                    429,
                    "TooManyRequests",
                    "Cannot evict pod as it would violate the pod's disruption budget.",
                    {"causes": [cause]},
                )
            if "disruptionsAllowed" in (pdb.get("status") or {}):
                spend = dict(
                    pdb,
                    status={
                        **pdb["status"],
                        "disruptionsAllowed": pdb["status"]["disruptionsAllowed"] - 1,
                    },
                )
                store.update(
                    budgets,
                    namespace,
                    pdb["metadata"]["name"],
                    spend,
                    subresource="status",
                    verb="evict",
                )
    store.delete(
        pods,
        namespace,
        name,
        uid=preconditions.get("uid"),
        resource_version=preconditions.get("resourceVersion"),
        verb="evict",
    )
    return errors.success(201)
