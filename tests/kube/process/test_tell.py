"""The PodScheduled condition the live scheduler writes (``kube/process/tell.py``): it keeps
the time its status turned false, and a pod whose status is not as the API writes one is
told anyway, from now."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from gpufleet.kube.process.tell import Teller
from gpufleet.kube.write.bind import PodRef

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def told(status: Any) -> list[dict[str, Any]]:
    """The conditions written for a pending pod whose status is ``status``."""
    teller = object.__new__(Teller)  # the condition reads only the store and the clock
    teller.store = type("Store", (), {"raw": {"Pod": {"ml/p": {"status": status}}}})()
    teller.clock = lambda: NOW
    teller.conditions = {}
    written: list[dict[str, Any]] = []

    async def patch_status(ref: PodRef, patch: dict[str, Any], kind: str) -> bool:
        written.extend(patch["status"]["conditions"])
        return True

    teller.patch_status = patch_status  # type: ignore[method-assign]
    asyncio.run(teller.condition(PodRef("ml", "p", "uid-p"), "0/1 nodes are available"))
    return written


def test_a_condition_false_already_keeps_its_transition_time() -> None:
    earlier = {
        "type": "PodScheduled",
        "status": "False",
        "lastTransitionTime": "2025-12-31T00:00:00Z",
    }
    [condition] = told({"conditions": [earlier]})
    assert condition["lastTransitionTime"] == "2025-12-31T00:00:00Z"
    assert condition["message"] == "0/1 nodes are available"


@pytest.mark.parametrize(
    "status",
    [
        "Pending",
        ["junk"],
        {"conditions": "PodScheduled"},
        {"conditions": ["PodScheduled", 3, None]},
        {"conditions": [{"type": "PodScheduled", "status": "False", "lastTransitionTime": 5}]},
    ],
)
def test_a_status_not_as_the_api_writes_one_is_told_from_now(status: Any) -> None:
    [condition] = told(status)
    assert condition["lastTransitionTime"] == "2026-01-01T00:00:00Z"
