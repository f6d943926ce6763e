"""A PodGroup's phase and counts, as pure functions: each phase of scheduler-plugins'
``scheduling.x-k8s.io/v1alpha1`` API from the counts that mean it (``kube/podgroups.py``)."""

from __future__ import annotations

from typing import Any

import pytest

from gpufleet.kube.podgroups import condition, counts, phase

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
