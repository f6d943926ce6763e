"""Bindings and evictions over real HTTP against the emulator (``kube/write/bind.py``): a bind
carries the pod's uid and GPU indexes; a 409 of our own earlier bind counts as bound, one of
another scheduler as lost; a recreated pod is never bound; a reply that was lost is settled
by reading the pod, never by sending the bind again; an eviction a budget refuses is 429."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx

from gpufleet.kube.write.bind import Outcome, PodRef, Reply, bind, evict
from tests.apiserver.server import Emulator

T = TypeVar("T")
JSON = dict[str, Any]


def add_pod(emulator: Emulator, name: str, *, node: str | None = None, **labels: str) -> PodRef:
    pods = emulator.store.resource("", "v1", "pods")
    spec: JSON = {"containers": [{"name": "c", "image": "x"}]}
    if node:
        spec["nodeName"] = node
    body = {"metadata": {"name": name, "labels": labels}, "spec": spec}
    if node:
        body["status"] = {"phase": "Running"}
    made = emulator.store.create(pods, "default", body, keep_status=node is not None)
    return PodRef("default", name, made["metadata"]["uid"])


def run(emulator: Emulator, call: Callable[[httpx.AsyncClient], Awaitable[T]]) -> T:
    async def main() -> T:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=2) as http:
            return await call(http)

    return asyncio.run(main())


def pod_json(emulator: Emulator, name: str) -> JSON:
    return emulator.store.get(emulator.store.resource("", "v1", "pods"), "default", name)


def binds(emulator: Emulator) -> int:
    return sum(1 for w in emulator.store.writes if w.verb == "bind")


def test_a_bind_carries_the_uid_and_the_gpu_indexes(emulator: Emulator) -> None:
    ref = add_pod(emulator, "a")
    assert run(emulator, lambda http: bind(http, ref, "n1", (0, 3))) == Reply(Outcome.BOUND)
    pod = pod_json(emulator, "a")
    assert pod["spec"]["nodeName"] == "n1"
    assert pod["metadata"]["annotations"]["gpufleet.io/gpu-index"] == "0,3"


def test_our_own_earlier_bind_is_bound_another_schedulers_is_lost(emulator: Emulator) -> None:
    ref = add_pod(emulator, "a")
    run(emulator, lambda http: bind(http, ref, "n1", None))
    assert run(emulator, lambda http: bind(http, ref, "n1", None)).outcome is Outcome.BOUND
    lost = run(emulator, lambda http: bind(http, ref, "n2", None))
    assert lost.outcome is Outcome.LOST
    assert "n1" in lost.detail
    assert binds(emulator) == 1


def test_a_pod_created_again_under_the_same_name_is_not_bound(emulator: Emulator) -> None:
    old = add_pod(emulator, "a")
    emulator.store.delete(emulator.store.resource("", "v1", "pods"), "default", "a")
    add_pod(emulator, "a")
    assert run(emulator, lambda http: bind(http, old, "n1", None)).outcome is Outcome.GONE
    assert "nodeName" not in pod_json(emulator, "a")["spec"]
    gone = PodRef("default", "never", "x")
    assert run(emulator, lambda http: bind(http, gone, "n1", None)).outcome is Outcome.GONE


def test_a_bind_whose_reply_is_lost_is_settled_by_reading_the_pod(emulator: Emulator) -> None:
    ref = add_pod(emulator, "a")
    emulator.faults.drop_reply()
    assert run(emulator, lambda http: bind(http, ref, "n1", None)).outcome is Outcome.BOUND
    assert binds(emulator) == 1  # read back, never sent again


def test_a_bind_the_server_failed_leaves_the_pod_pending(emulator: Emulator) -> None:
    ref = add_pod(emulator, "a")
    emulator.faults.fail(1, code=503, path="/binding$")
    reply = run(emulator, lambda http: bind(http, ref, "n1", None))
    assert reply.outcome is Outcome.FAILED
    assert "503" in reply.detail
    emulator.faults.fail(1, code=403, path="/binding$")
    assert run(emulator, lambda http: bind(http, ref, "n1", None)).outcome is Outcome.FAILED
    assert binds(emulator) == 0


def test_evictions_go_through_the_eviction_api(emulator: Emulator) -> None:
    a = add_pod(emulator, "a", node="n1", app="web")
    b = add_pod(emulator, "b", node="n1", app="web")
    budgets = emulator.store.resource("policy", "v1", "poddisruptionbudgets")
    emulator.store.create(
        budgets,
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "web"}}},
        },
    )
    assert run(emulator, lambda http: evict(http, a)).outcome is Outcome.EVICTED
    refused = run(emulator, lambda http: evict(http, b))
    assert refused.outcome is Outcome.REFUSED
    assert "disruption budget" in refused.detail
    assert run(emulator, lambda http: evict(http, a)).outcome is Outcome.GONE
