"""Bindings and evictions written to the API server, and what each reply means.

**Bind** — ``POST pods/{name}/binding`` with a ``Binding`` that carries the pod's
``metadata.uid`` (the API server refuses it, 409, when the pod was deleted and created again
under the same name: a recreated pod is never bound by mistake) and, for GPU pods, the
annotation ``gpufleet.io/gpu-index`` (the API server copies a Binding's annotations onto the
pod in the same write, so the GPU indexes and the node can never be read apart after a
restart). The reply decides (:class:`Outcome`):

* 201 — bound;
* 409 "already assigned to node X" — bound, if X is the node chosen (a retry of a bind whose
  reply was lost); otherwise a race lost to another scheduler: the watch will say where it
  runs;
* 409 on the uid, 404 — the pod is gone;
* 5xx, 429, a timeout or a broken connection — *unknown*: the bind may have been applied.
  It is never blindly sent again: the pod is read, and the bind counts as done if the pod
  runs on the chosen node, as lost if elsewhere, and is retried only if the pod is still
  unbound; when the pod cannot be read either, the outcome stays unknown (the watch will
  tell);
* other 4xx — refused (RBAC, an admission webhook): the pod backs off.

**Evict** — ``POST pods/{name}/eviction`` (``policy/v1``): 201/200 evicted; 429 (a
PodDisruptionBudget) refused — the victim stays and the plan that needed it is dropped; 404
already gone.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

from gpufleet.kube.transport import Replied, send_json
from gpufleet.load.objects.vocabulary import GPU_INDEX_ANNOTATION


class Outcome(enum.Enum):
    BOUND = "Bound"
    """The pod runs on the chosen node (this bind, or an earlier one whose reply was lost)."""
    LOST = "Lost"
    """Another scheduler bound it elsewhere first."""
    GONE = "Gone"
    """The pod was deleted (or deleted and created again)."""
    FAILED = "Failed"
    """The server refused or could not take the bind: the pod is pending, and backs off."""
    UNKNOWN = "Unknown"
    """No reply, and the pod could not be read to say whether the bind was applied: nothing
    it wrote may be taken back, and its watch event settles it."""
    EVICTED = "Evicted"
    REFUSED = "Refused"
    """An eviction a disruption budget does not allow now."""


@dataclass(frozen=True, slots=True)
class Reply:
    outcome: Outcome
    detail: str = ""


@dataclass(frozen=True, slots=True)
class PodRef:
    namespace: str
    name: str
    uid: str

    @property
    def path(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/pods/{self.name}"


def binding_body(pod: PodRef, node: str, gpus: Sequence[int] | None) -> dict[str, Any]:
    """The ``Binding`` kube-scheduler would post, with gpufleet's GPU indexes."""
    meta: dict[str, Any] = {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid}
    if gpus:
        meta["annotations"] = {GPU_INDEX_ANNOTATION: ",".join(str(g) for g in gpus)}
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


async def bind(
    http: httpx.AsyncClient, pod: PodRef, node: str, gpus: Sequence[int] | None
) -> Reply:
    """Bind ``pod`` to ``node`` (see the module docstring for what each reply means)."""
    try:
        response = await send_json(
            http, "POST", f"{pod.path}/binding", binding_body(pod, node, gpus)
        )
    except httpx.HTTPError as exc:
        return await _settle(http, pod, node, f"no reply: {exc}")
    code = response.status_code
    if code in (200, 201):
        return Reply(Outcome.BOUND)
    message = message_of(response)
    if code == 404:
        return Reply(Outcome.GONE, message)
    if code == 409:
        return await _settle(http, pod, node, message)
    if code == 429 or code >= 500:
        return await _settle(http, pod, node, f"{code}: {message}")
    return Reply(Outcome.FAILED, f"{code}: {message}")


async def _settle(http: httpx.AsyncClient, pod: PodRef, node: str, why: str) -> Reply:
    """A 409, or a reply that says nothing of whether the bind was applied: the pod says
    which — bound here (our own bind), elsewhere (a race lost), recreated or gone, or still
    unbound (the bind failed)."""
    try:
        current = await _read(http, pod)
    except httpx.HTTPError as exc:
        return Reply(Outcome.UNKNOWN, f"{why}; reading the pod: {exc}")
    if current is None:
        return Reply(Outcome.GONE, why)
    return _judge(current, pod, node, why)


def _judge(current: Mapping[str, Any], pod: PodRef, node: str, why: str) -> Reply:
    meta = current.get("metadata") or {}
    if pod.uid and meta.get("uid") not in (None, pod.uid):
        return Reply(Outcome.GONE, f"{why} (the pod was created again)")
    where = (current.get("spec") or {}).get("nodeName")
    if where == node:
        return Reply(Outcome.BOUND, why)
    if where:
        return Reply(Outcome.LOST, f"bound to {where} by another scheduler")
    return Reply(Outcome.FAILED, why)


async def _read(http: httpx.AsyncClient, pod: PodRef) -> Mapping[str, Any] | None:
    response = await http.get(pod.path)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    body: Mapping[str, Any] = response.json()
    return body


async def evict(http: httpx.AsyncClient, pod: PodRef) -> Reply:
    """Evict ``pod`` through the Eviction API (never a DELETE)."""
    body = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
        "deleteOptions": {"preconditions": {"uid": pod.uid}} if pod.uid else {},
    }
    try:
        response = await http.post(f"{pod.path}/eviction", json=body)
    except httpx.HTTPError as exc:
        return Reply(Outcome.FAILED, f"no reply: {exc}")
    code = response.status_code
    if code in (200, 201):
        return Reply(Outcome.EVICTED)
    if code == 404:
        return Reply(Outcome.GONE, message_of(response))
    if code == 429:
        return Reply(Outcome.REFUSED, message_of(response))
    return Reply(Outcome.FAILED, f"{code}: {message_of(response)}")


def message_of(response: Replied) -> str:
    try:
        body = response.json()
    except (json.JSONDecodeError, ValueError):
        return response.text
    if isinstance(body, Mapping):
        return str(body.get("message", body))
    return str(body)
