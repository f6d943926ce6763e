"""A PodGroup's phase and counts, as pure functions: each phase of scheduler-plugins'
``scheduling.x-k8s.io/v1alpha1`` API from the counts that mean it; and how its stale-since
mark is written (``kube/write/podgroups.py``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from gpufleet.kube.read.objects import ObjectStore
from gpufleet.kube.write.podgroups import MARK_WAIT_S, PodGroupStatus, condition, counts, phase
from gpufleet.kube.write.recorder import rfc3339
from gpufleet.load.objects.vocabulary import STALE_ANNOTATION
from tests.kube.read.test_objects import group, pod

PHASES = {"Pending", "Scheduling", "Running", "Unknown", "Finished", "Failed"}
"""``PodGroupPhase``'s values in the API; no other phase is written."""


def found(
    scheduled: int = 0, running: int = 0, succeeded: int = 0, failed: int = 0
) -> dict[str, int]:
    return {"scheduled": scheduled, "running": running, "succeeded": succeeded, "failed": failed}


@pytest.mark.parametrize(
    ("min_member", "counted", "expected"),
    [
        pytest.param(3, found(), "Pending", id="none-bound"),
        pytest.param(3, found(scheduled=2), "Unknown", id="some-bound-fewer-than-min"),
        pytest.param(3, found(scheduled=2, running=2), "Unknown", id="some-running-fewer-than-min"),
        pytest.param(3, found(scheduled=3), "Scheduling", id="min-bound-none-running"),
        pytest.param(3, found(scheduled=4, running=2), "Scheduling", id="min-bound-fewer-running"),
        pytest.param(3, found(scheduled=3, running=3), "Running", id="min-running"),
        pytest.param(
            3, found(scheduled=3, running=2, succeeded=1), "Running", id="running-and-succeeded"
        ),
        pytest.param(3, found(scheduled=3, succeeded=3), "Finished", id="min-succeeded"),
        pytest.param(
            3, found(scheduled=4, succeeded=3, failed=1), "Finished", id="finished-before-failed"
        ),
        pytest.param(
            3, found(scheduled=3, running=2, failed=1), "Failed", id="a-pod-failed-at-min"
        ),
        pytest.param(
            3, found(scheduled=3, running=1, failed=1), "Scheduling", id="a-pod-failed-below-min"
        ),
        pytest.param(1, found(scheduled=1), "Scheduling", id="gang-of-one-bound"),
    ],
)
def test_the_phase_of_a_gang(min_member: int, counted: dict[str, int], expected: str) -> None:
    assert expected in PHASES
    assert phase(min_member, counted) == expected


def raw(name: str, node: str = "", pod_phase: str = "Pending") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ml"},
        "spec": {"nodeName": node} if node else {},
        "status": {"phase": pod_phase},
    }


def test_counts_read_the_pods_and_the_binds_not_yet_seen() -> None:
    pods = [
        raw("a", "n0", "Running"),
        raw("b", "n0", "Succeeded"),
        raw("c", "n1", "Failed"),
        raw("d"),  # bound by this replica, the watch has not shown it yet
        raw("e"),  # waiting
    ]
    assert counts(pods, posted={"ml/d"}) == found(scheduled=4, running=1, succeeded=1, failed=1)


def test_the_condition_keeps_why_a_gang_waits() -> None:
    waiting = condition(3, found(scheduled=1), "0/4 nodes are available: 4 Insufficient gpu.")
    assert (waiting["status"], waiting["reason"]) == ("False", "Unschedulable")
    assert waiting["message"] == "0/4 nodes are available: 4 Insufficient gpu."
    assert condition(3, found(scheduled=1), "")["message"] == "1 of minMember 3 pods bound"
    assert condition(3, found(scheduled=3), "")["status"] == "True"


def test_a_stale_mark_is_written_once_then_again_if_the_watch_never_shows_it() -> None:
    """``gpufleet.io/stale-since`` is patched once and waited for on the watch; if another
    writer changed it meanwhile (the watch never shows ours), it is written again after
    ``MARK_WAIT_S``; once the object says so, nothing more is written."""
    store = ObjectStore()
    store.apply("ADDED", "PodGroup", group())
    store.apply("ADDED", "Pod", pod("w", group="g"))
    patches: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        assert request.method == "PATCH"
        assert request.headers["content-type"] == "application/merge-patch+json"
        assert request.url.path == "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/ml/podgroups/g"
        patches.append(json.loads(request.content))
        return httpx.Response(200, json={})

    now = [5000.0]
    mark_1000 = {"metadata": {"annotations": {STALE_ANNOTATION: rfc3339(1000.0)}}}

    def annotated(value: str) -> dict[str, Any]:
        obj = group()
        obj["metadata"]["annotations"] = {STALE_ANNOTATION: value}
        return obj

    async def steps() -> None:
        transport = httpx.MockTransport(handler)
        async with httpx.AsyncClient(transport=transport, base_url="http://api") as http:
            writer = PodGroupStatus(http, lambda: now[0])

            async def mark(stale: dict[str, float]) -> None:
                await writer.mark_stale(store, stale, lambda: True)

            await mark({"ml/g": 1000.0})
            assert patches == [mark_1000]
            await mark({"ml/g": 1000.0})  # on its way: not written again
            store.apply("MODIFIED", "PodGroup", annotated("2026-01-01T00:00:00Z"))
            now[0] += MARK_WAIT_S - 1
            await mark({"ml/g": 1000.0})
            assert len(patches) == 1
            now[0] += 2
            await mark({"ml/g": 1000.0})  # never shown: written again
            assert patches == [mark_1000, mark_1000]
            store.apply("MODIFIED", "PodGroup", annotated(rfc3339(1000.0)))
            now[0] += 60
            await mark({"ml/g": 1000.0})
            assert len(patches) == 2
            await mark({})  # whole again: the mark is taken away, with a null

    asyncio.run(steps())
    assert patches[-1] == {"metadata": {"annotations": {STALE_ANNOTATION: None}}}
