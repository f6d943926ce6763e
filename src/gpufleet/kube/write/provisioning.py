"""Capacity asked of the cluster's own autoscaler, and the marks gpufleet puts on pods and
nodes for it (``kube/process/provision.py`` decides when).

**ProvisioningRequest** (``autoscaling.x-k8s.io/v1``, Cluster Autoscaler's API for a group
of pods that must get capacity together, as Kueue's provisioning admission check uses it):
one per job, of class ``best-effort-atomic-scale-up.autoscaling.x-k8s.io`` — all of the
job's nodes or none — whose one pod set points at a ``PodTemplate`` of the same name holding
the job's pod spec with the chosen node type's labels as a ``nodeSelector``, so the
autoscaler adds nodes of the type gpufleet priced. The job's pending pods carry
``autoscaling.x-k8s.io/consume-provisioning-request`` and
``autoscaling.x-k8s.io/provisioning-class-name``: the autoscaler counts them as the
request's, not as pods to scale up for once more. Request and template carry the label
``gpufleet.io/provisioned-for`` naming the job, so that a later leader finds them.

**A node held for a job** gets the label ``gpufleet.io/provisioned-for`` (the scheduling
core keeps every other job off it, ``scheduler/queues/holds.py``) until the job runs or its
request fails.

**Scale-down protection**: ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"``
(Cluster Autoscaler does not remove the node) and ``karpenter.sh/do-not-disrupt: "true"``
(Karpenter does not disrupt it), with ``gpufleet.io/protected`` listing which of the two
gpufleet set, so that it only ever removes its own and never a user's.

Every write is a JSON merge patch or a create; a reply is ``True`` when the server took it
(404 on a delete or an unmark counts: the object is gone), else the reason, for the log.
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Mapping
from typing import Any

import httpx

from gpufleet.kube.write.bind import message_of
from gpufleet.model.supply import HOSTNAME_LABEL, PROVISIONED_FOR_LABEL, provisioned_for

JSON = dict[str, Any]
GROUP_VERSION = "autoscaling.x-k8s.io/v1"
ATOMIC_CLASS = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
PROTECTED_ANNOTATION = "gpufleet.io/protected"
PROTECTION = {SAFE_TO_EVICT: "false", DO_NOT_DISRUPT: "true"}
MAX_NAME = 253
MERGE = {"Content-Type": "application/merge-patch+json"}


def request_name(job: str, attempt: int) -> str:
    """``gpufleet-<job's name>-<attempt>`` (as Kueue names its requests per attempt), its
    name part cut with a digest of the whole where the name would pass a DNS subdomain's
    253 characters."""
    base, suffix = f"gpufleet-{job.rpartition('/')[2]}", f"-{attempt}"
    if len(base) + len(suffix) <= MAX_NAME:
        return base + suffix
    digest = hashlib.sha256(base.encode()).hexdigest()[:10]
    return f"{base[: MAX_NAME - len(suffix) - 11].rstrip('.-')}-{digest}{suffix}"


def attempt_of(name: str) -> int:
    """The attempt a request's name ends with (0: none)."""
    tail = name.rpartition("-")[2]
    return int(tail) if tail.isdigit() else 0


def pool_selector(labels: Mapping[str, str]) -> dict[str, str]:
    """What a node of a pool is known by: its template's labels but the hostname, which
    each node has its own of."""
    return {k: v for k, v in labels.items() if k != HOSTNAME_LABEL}


def requests_path(namespace: str) -> str:
    return f"/apis/{GROUP_VERSION}/namespaces/{namespace}/provisioningrequests"


def templates_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/podtemplates"


def template_body(name: str, job: str, pod: Mapping[str, Any], selector: Mapping[str, str]) -> JSON:
    """The PodTemplate ``name`` of job ``job``: ``pod``'s labels and spec (the pod as read),
    not bound, with ``selector`` (the node type's labels, its hostname aside) added to its
    ``nodeSelector``."""
    meta = pod.get("metadata") or {}
    spec = copy.deepcopy(dict(pod.get("spec") or {}))
    for field in ("nodeName", "schedulerName"):
        spec.pop(field, None)
    spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **pool_selector(selector)}
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "labels": {PROVISIONED_FOR_LABEL: provisioned_for(job)}},
        "template": {"metadata": {"labels": dict(meta.get("labels") or {})}, "spec": spec},
    }


JOB_ANNOTATION = "gpufleet.io/job"
POOL_ANNOTATION = "gpufleet.io/node-pool"
NODES_ANNOTATION = "gpufleet.io/nodes"
"""On a request: the job it is for, the pool and the number of nodes gpufleet priced, so that
a new leader takes it over (``kube/process/provision.py``)."""


def request_body(name: str, job: str, count: int, pool: str, nodes: int) -> JSON:
    """The ProvisioningRequest ``name`` for ``count`` pods of job ``job``, on ``nodes`` nodes
    of pool ``pool``."""
    return {
        "apiVersion": GROUP_VERSION,
        "kind": "ProvisioningRequest",
        "metadata": {
            "name": name,
            "labels": {PROVISIONED_FOR_LABEL: provisioned_for(job)},
            "annotations": {
                JOB_ANNOTATION: job,
                POOL_ANNOTATION: pool,
                NODES_ANNOTATION: str(nodes),
            },
        },
        "spec": {
            "provisioningClassName": ATOMIC_CLASS,
            "podSets": [{"count": count, "podTemplateRef": {"name": name}}],
        },
    }


async def create(
    http: httpx.AsyncClient, path: str, body: JSON, *, read_back: bool = True
) -> JSON | str:
    """POST ``body`` to ``path``: the object created, or why not. One of the same name, left
    by an earlier leader, is read instead (``read_back``) or taken as ``body``."""
    try:
        reply = await http.post(path, json=body)
        if reply.status_code == httpx.codes.CONFLICT:
            if not read_back:
                return body
            reply = await http.get(f"{path}/{body['metadata']['name']}")
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if reply.status_code >= 300:
        return f"{reply.status_code} {message_of(reply)}"
    return _object(reply)


async def read(http: httpx.AsyncClient, path: str) -> JSON | str | None:
    """The object at ``path``; None when it is gone; a string when it could not be read."""
    try:
        reply = await http.get(path)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if reply.status_code == httpx.codes.NOT_FOUND:
        return None
    if reply.status_code >= 300:
        return f"{reply.status_code} {message_of(reply)}"
    return _object(reply)


def _object(reply: httpx.Response) -> JSON | str:
    """The JSON object of a 2xx reply, or why it is none."""
    try:
        body = reply.json()
    except ValueError as exc:
        return f"{reply.status_code} with a body that is no JSON: {exc}"
    return body if isinstance(body, dict) else f"{reply.status_code} with no object"


async def unlabel(http: httpx.AsyncClient, node: str, value: str) -> bool | str:
    """Take ``gpufleet.io/provisioned-for`` off ``node`` if it still reads ``value`` (a JSON
    patch whose ``test`` fails changes nothing: the node is held for another job now, or
    for none)."""
    pointer = "/metadata/labels/" + PROVISIONED_FOR_LABEL.replace("~", "~0").replace("/", "~1")
    body = [{"op": "test", "path": pointer, "value": value}, {"op": "remove", "path": pointer}]
    headers = {"Content-Type": "application/json-patch+json"}
    try:
        reply = await http.patch(f"/api/v1/nodes/{node}", json=body, headers=headers)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if reply.status_code < 300 or reply.status_code in GONE_OR_NOT_OURS:
        return True
    return f"{reply.status_code} {message_of(reply)}"


GONE_OR_NOT_OURS = {httpx.codes.NOT_FOUND, httpx.codes.CONFLICT, httpx.codes.UNPROCESSABLE_ENTITY}
"""Replies to an unlabel that leave nothing to do: the node is gone, or its label is not the
one to take off."""


async def delete(http: httpx.AsyncClient, path: str) -> bool | str:
    try:
        reply = await http.delete(path)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if reply.status_code < 300 or reply.status_code == httpx.codes.NOT_FOUND:
        return True
    return f"{reply.status_code} {message_of(reply)}"


async def merge(
    http: httpx.AsyncClient, path: str, section: str, values: Mapping[str, str | None]
) -> bool | str:
    """Merge ``values`` into ``metadata.<section>`` (labels, annotations) of the object at
    ``path``; a None value removes the key. A gone object counts as done."""
    body = {"metadata": {section: dict(values)}}
    try:
        reply = await http.patch(path, json=body, headers=MERGE)
    except httpx.HTTPError as exc:
        return f"{type(exc).__name__}: {exc}"
    if reply.status_code < 300 or reply.status_code == httpx.codes.NOT_FOUND:
        return True
    return f"{reply.status_code} {message_of(reply)}"


def condition(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    """The condition of type ``kind`` of ``obj``'s status when it is ``True``."""
    status = obj.get("status")
    conditions = status.get("conditions") if isinstance(status, dict) else None
    for item in conditions if isinstance(conditions, list) else ():
        if isinstance(item, dict) and item.get("type") == kind and item.get("status") == "True":
            return item
    return None
