"""What the live scheduler tells besides bindings, against the API emulator over real HTTP:
a PodGroup's status (its phase, counts and why it waits), written once per change;
``scheduler_pod_scheduling_sli_duration_seconds`` by attempts; and one structured log line
per decision (``kube/write/podgroups.py``, ``kube/process/metrics.py``,
``kube/process/logs.py``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from gpufleet.kube.process.live import LiveScheduler
from gpufleet.kube.process.logs import LineFormatter
from gpufleet.kube.process.options import ServeOptions
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_group, add_node, add_pod, bound, pods, serve

JSON = dict[str, Any]


def podgroup(emulator: Emulator, name: str) -> JSON:
    groups = emulator.store.resource("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    [group] = [g for g in emulator.store.objects(groups) if g["metadata"]["name"] == name]
    return group


def status_writes(emulator: Emulator) -> int:
    return sum(
        1 for w in emulator.store.writes if w.resource == "podgroups.scheduling.x-k8s.io/status"
    )


def test_a_podgroup_says_why_it_waits_then_that_it_is_placed(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=2)
    add_node(emulator, "n1", gpus=2)
    add_group(emulator, "g", 3)
    for i in range(3):
        add_pod(emulator, f"g-{i}", 2, group="g")
    seen: list[JSON] = []

    def phases(live: LiveScheduler) -> bool:
        status = podgroup(emulator, "g").get("status") or {}
        if status.get("phase") == "Pending" and not seen:
            seen.append(status)
            assert live.stats.cycles >= 1
            add_node(emulator, "n2", gpus=2)  # room for the third pod
        return status.get("phase") == "Scheduling" and len(bound(emulator)) == 3

    serve(emulator, phases)
    [waiting] = seen
    assert (waiting["scheduled"], waiting["running"], waiting["failed"]) == (0, 0, 0)
    [why] = waiting["conditions"]
    assert (why["type"], why["status"], why["reason"]) == ("Scheduled", "False", "Unschedulable")
    told = {
        c["message"]
        for p in pods(emulator).values()
        for c in (p.get("status") or {}).get("conditions") or ()
        if c["type"] == "PodScheduled"
    }
    assert why["message"] in told  # the pods' own words
    status = podgroup(emulator, "g")["status"]
    assert status["phase"] == "Scheduling"  # bound; no kubelet runs them
    assert status["scheduled"] == 3
    assert status["conditions"][0]["status"] == "True"
    assert status["scheduleStartTime"] == waiting["scheduleStartTime"]
    assert status_writes(emulator) == 2  # once per change, however many cycles ran


def test_a_podgroup_of_another_scheduler_is_left_alone(emulator: Emulator) -> None:
    add_node(emulator, "n0")
    add_group(emulator, "theirs", 1)
    add_pod(emulator, "t", 1, group="theirs", scheduler="default-scheduler")
    add_pod(emulator, "mine", 1)
    serve(emulator, lambda live: "mine" in bound(emulator) and live.stats.cycles >= 3)
    assert not podgroup(emulator, "theirs").get("status")
    assert status_writes(emulator) == 0


def test_dry_run_writes_no_podgroup_status(emulator: Emulator) -> None:
    add_node(emulator, "n0")
    add_group(emulator, "g", 1)
    add_pod(emulator, "g-0", 1, group="g")
    options = ServeOptions(period_s=0.1, batch_s=0.01, dry_run=True)
    serve(emulator, lambda live: live.stats.cycles >= 3, options)
    assert status_writes(emulator) == 0


def test_the_sli_counts_the_attempts_until_the_bind(emulator: Emulator) -> None:
    add_node(emulator, "n0")
    add_pod(emulator, "a", 1)
    emulator.faults.fail(1, code=500, path="/pods/a/binding$")  # the first bind fails
    live = serve(emulator, lambda live: live.stats.bound == 1)
    assert live.stats.bind_failures == 1
    sample = live.metrics.registry.get_sample_value
    name = "scheduler_pod_scheduling_sli_duration_seconds_count"
    # tried, failed, backed off (not an attempt), tried again and bound
    assert sample(name, {"attempts": "2"}) == 1.0
    assert sample(name, {"attempts": "1"}) is None


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(LineFormatter(as_json=True))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))

    def decisions(self) -> list[JSON]:
        return [d for d in map(json.loads, self.lines) if "action" in d]


@pytest.fixture
def logged() -> Iterator[Lines]:
    logger = logging.getLogger("gpufleet.serve")
    handler, level = Lines(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def add_running(emulator: Emulator, name: str, priority_class: str) -> None:
    pods_resource = emulator.store.resource("", "v1", "pods")
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    emulator.store.create(
        pods_resource,
        "default",
        {
            "metadata": {"name": name, "annotations": {"gpufleet.io/gpu-index": "0,1"}},
            "spec": {
                "schedulerName": "gpufleet",
                "nodeName": "n0",
                "priorityClassName": priority_class,
                "containers": [container],
            },
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
        },
        keep_status=True,
    )


def test_each_decision_is_one_line_with_its_fields(emulator: Emulator, logged: Lines) -> None:
    add_node(emulator, "n0", gpus=2)
    classes = emulator.store.resource("scheduling.k8s.io", "v1", "priorityclasses")
    for name, value in (("low", 0), ("high", 50)):
        emulator.store.create(classes, "", {"metadata": {"name": name}, "value": value})
    add_running(emulator, "low", "low")
    pods_resource = emulator.store.resource("", "v1", "pods")
    limits = {"nvidia.com/gpu": "2"}
    container = {"name": "c", "image": "x", "resources": {"limits": limits}}
    spec = {"schedulerName": "gpufleet", "priorityClassName": "high", "containers": [container]}
    emulator.store.create(pods_resource, "default", {"metadata": {"name": "high"}, "spec": spec})
    add_pod(emulator, "big", 4)
    serve(emulator, lambda live: "high" in bound(emulator) and live.stats.cycles >= 5)

    by_action: dict[str, list[JSON]] = {}
    for decision in logged.decisions():
        by_action.setdefault(decision["action"], []).append(decision)
    [evicted] = by_action["preempt"]
    assert (evicted["pod"], evicted["node"], evicted["for"]) == (
        "default/low",
        "n0",
        "default/high",
    )
    assert evicted["reason"] == "preempt for default/high"
    [bind] = by_action["bind"]
    assert (bind["pod"], bind["node"], bind["reason"]) == ("default/high", "n0", "bound")
    assert bind["msg"] == "bound default/high to n0"
    big = [d for d in by_action["unschedulable"] if d["pod"] == "default/big"]
    assert [d["reason"] for d in big] == [
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
    ]  # once, though every cycle found it so
    assert "node" not in big[0]


def test_a_dry_run_logs_what_it_would_do(emulator: Emulator, logged: Lines) -> None:
    add_node(emulator, "n0")
    add_pod(emulator, "a", 1)
    options = ServeOptions(period_s=0.1, batch_s=0.01, dry_run=True)
    serve(emulator, lambda live: live.stats.cycles >= 2, options)
    would = [d for d in logged.decisions() if d["action"] == "would-bind"]
    assert would
    assert {(d["pod"], d["node"]) for d in would} == {("default/a", "n0")}
    assert not [d for d in logged.decisions() if d["action"] == "bind"]


def test_text_lines_carry_the_fields_as_key_value_pairs() -> None:
    record = logging.LogRecord("gpufleet.serve", logging.INFO, "", 0, "bound a to n0", (), None)
    record.decision = {"action": "bind", "pod": "default/a", "node": "n0", "reason": "bound"}
    line = LineFormatter(as_json=False).format(record)
    assert line.endswith(
        'msg="bound a to n0" action="bind" pod="default/a" node="n0" reason="bound"'
    )
