"""A bound pod's ResourceClaims written before its binding, as kube-scheduler's DRA plugin
does in PreBind.

For each of the pod's claims, the claim's ``status`` is written through its ``/status``
subresource (``PUT``, with the ``metadata.resourceVersion`` just read: optimistic
concurrency): ``status.allocation`` — the devices the cycle chose (``devices.results[]``
with ``request``, ``driver``, ``pool``, ``device``, and ``adminAccess``,
``consumedCapacity`` and ``tolerations`` where they apply), the configuration Kubernetes
copies in (``devices.config[]``) and, for devices of one node, the ``nodeSelector`` that
ties the claim's pods to it — and the pod in ``status.reservedFor`` (``{resource: pods,
name, uid}``). A claim already allocated (by an earlier cycle, for another pod sharing
it) only gets the pod added to ``reservedFor``, provided its devices are the ones the
cycle counted on; otherwise the bind fails and the watch tells the truth.

A claim whose ``metadata.uid`` is not the one the cycle saw (deleted and made again under
its name) is not written, and fails the pod's bind. A 409 (the claim changed since it was
read) is read again and tried once more; a second 409, or any other refusal, fails the
pod's bind (it backs off like any failed bind). What
a failed bind had written is taken back (:func:`release`): the pod leaves ``reservedFor``,
and a claim it allocated that no other pod reserves loses its allocation again — what the
resourceclaim controller does with an allocated claim that nobody reserves.

``allocation`` of ``load/objects/devices.py`` reads back exactly what :func:`allocation_body`
writes, so that a restart knows every device that was given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from gpufleet.kube.read.kinds import object_path
from gpufleet.kube.write.bind import PodRef, message_of
from gpufleet.kube.write.recorder import rfc3339
from gpufleet.model.devices import MAX_CONSUMERS

if TYPE_CHECKING:
    from gpufleet.model.devices import DeviceResult, OpaqueConfig

TRIES = 2
"""Writes of one claim's status: the first, and one more after a 409."""


@dataclass(frozen=True, slots=True)
class ClaimWrite:
    """What one claim of a bound pod must read: its devices, the node they tie it to (None:
    any), and the configuration of its allocation (empty where the claim was allocated
    before this cycle: then only ``reservedFor`` is written)."""

    key: str
    """``namespace/name``."""
    results: tuple[DeviceResult, ...]
    node: str | None
    config: tuple[tuple[str, OpaqueConfig], ...] = ()
    uid: str = ""
    """The claim's ``metadata.uid`` as the cycle saw it (empty: not known): a claim of
    another uid under the name was made again since, and is not written."""


@dataclass(frozen=True, slots=True)
class Reserved:
    """A claim the pod was added to, and whether this write allocated it."""

    key: str
    allocated: bool


def allocation_body(write: ClaimWrite, now: float) -> dict[str, Any]:
    """``status.allocation`` (``resource.k8s.io/v1`` ``AllocationResult``) of ``write``."""
    results = []
    for r in write.results:
        result: dict[str, Any] = {
            "request": r.request,
            "driver": r.driver,
            "pool": r.pool,
            "device": r.device,
        }
        if r.admin_access:
            result["adminAccess"] = True
        if r.consumed:
            result["consumedCapacity"] = {name: str(amount) for name, amount in r.consumed}
        if r.tolerations:
            result["tolerations"] = [t.fields() for t in r.tolerations]
        results.append(result)
    devices: dict[str, Any] = {"results": results}
    if write.config:
        devices["config"] = [
            {
                "source": source,
                **({"requests": list(c.requests)} if c.requests else {}),
                "opaque": {"driver": c.driver, "parameters": json.loads(c.parameters)},
            }
            for source, c in write.config
        ]
    body: dict[str, Any] = {
        "devices": devices,
        "allocationTimestamp": rfc3339(now),
    }
    if write.node is not None:
        term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [write.node]}]}
        body["nodeSelector"] = {"nodeSelectorTerms": [term]}
    return body


def _devices(allocation: Mapping[str, Any]) -> set[tuple[str, str, str, str]]:
    results = (allocation.get("devices") or {}).get("results") or []
    return {
        (str(r.get("request")), str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
        for r in results
        if isinstance(r, Mapping)
    }


def _reference(pod: PodRef) -> dict[str, str]:
    return {"resource": "pods", "name": pod.name, "uid": pod.uid}


async def reserve(
    http: httpx.AsyncClient, pod: PodRef, writes: Sequence[ClaimWrite], now: float
) -> tuple[list[Reserved], str]:
    """Write each claim of ``writes`` for ``pod`` (module docstring), in order, stopping at
    the first that fails. The claims written, and why the writes failed (empty: they did
    not)."""
    done: list[Reserved] = []
    for write in writes:
        why = ""
        for _ in range(TRIES):
            reserved, why, conflict = await _reserve_one(http, pod, write, now)
            if reserved is not None:
                done.append(reserved)
            if not conflict:
                break
        if why:
            return done, f"ResourceClaim {write.key}: {why}"
    return done, ""


def reserved_status(
    status: Mapping[str, Any], pod: PodRef, write: ClaimWrite, now: float, uid: object = None
) -> tuple[dict[str, Any] | None, bool, str]:
    """A claim's ``status`` with ``write`` for ``pod``: (the new status, None when it needs
    no write; whether it allocates the claim; why it cannot be written, empty if it can).
    ``uid``: the claim's as read now, which must be the one the cycle saw."""
    if write.uid and uid != write.uid:
        return None, False, "it was deleted and made again since the cycle read it"
    new = dict(status)
    reserved = [dict(r) for r in new.get("reservedFor") or [] if isinstance(r, Mapping)]
    current = new.get("allocation")
    allocated = current is None
    if current is None:
        new["allocation"] = allocation_body(write, now)
    elif _devices(current) != {(r.request, r.driver, r.pool, r.device) for r in write.results}:
        return None, False, "it is allocated other devices than the cycle counted on"
    if any(r.get("uid") == pod.uid for r in reserved):
        return (new if allocated else None), allocated, ""
    if len(reserved) >= MAX_CONSUMERS:
        return None, False, f"it has reached its maximum number of consumers ({MAX_CONSUMERS})"
    new["reservedFor"] = [*reserved, _reference(pod)]
    return new, allocated, ""


async def _reserve_one(
    http: httpx.AsyncClient, pod: PodRef, write: ClaimWrite, now: float
) -> tuple[Reserved | None, str, bool]:
    """One try: (the claim reserved, or None; why not; whether a 409 calls for another)."""
    try:
        response = await http.get(object_path("ResourceClaim", write.key))
        if response.status_code != 200:
            return None, f"reading it: {response.status_code} {message_of(response)}", False
        claim: dict[str, Any] = response.json()
        uid = (claim.get("metadata") or {}).get("uid")
        status, allocated, why = reserved_status(claim.get("status") or {}, pod, write, now, uid)
        if why or status is None:
            return (None if why else Reserved(write.key, allocated=False)), why, False
        response = await http.put(
            f"{object_path('ResourceClaim', write.key)}/status", json={**claim, "status": status}
        )
    except httpx.HTTPError as exc:
        return None, f"no reply: {exc}", False
    if response.status_code == 409:
        return None, f"409: {message_of(response)}", True
    if response.status_code >= 300:
        return None, f"{response.status_code}: {message_of(response)}", False
    return Reserved(write.key, allocated), "", False


async def release(http: httpx.AsyncClient, pod: PodRef, reserved: Sequence[Reserved]) -> list[str]:
    """Take back what :func:`reserve` wrote for ``pod`` whose bind failed; the claims that
    could not be taken back (the resourceclaim controller does it in a cluster), with why."""
    failed = []
    for claim in reserved:
        why = ""
        for _ in range(TRIES):
            why, conflict = await _release_one(http, pod, claim)
            if not conflict:
                break
        if why:
            failed.append(f"ResourceClaim {claim.key}: {why}")
    return failed


async def _release_one(http: httpx.AsyncClient, pod: PodRef, claim: Reserved) -> tuple[str, bool]:
    try:
        response = await http.get(object_path("ResourceClaim", claim.key))
        if response.status_code == 404:
            return "", False
        if response.status_code != 200:
            return f"reading it: {response.status_code} {message_of(response)}", False
        body: dict[str, Any] = response.json()
        status = dict(body.get("status") or {})
        reserved = [r for r in status.get("reservedFor") or [] if r.get("uid") != pod.uid]
        status["reservedFor"] = reserved
        if claim.allocated and not reserved:
            status.pop("allocation", None)
        body["status"] = status
        response = await http.put(f"{object_path('ResourceClaim', claim.key)}/status", json=body)
    except httpx.HTTPError as exc:
        return f"no reply: {exc}", False
    if response.status_code == 409:
        return f"409: {message_of(response)}", True
    if response.status_code >= 300:
        return f"{response.status_code}: {message_of(response)}", False
    return "", False
