"""What the live scheduler tells besides bindings, against the API emulator over real HTTP:
one structured log line per decision (``kube/logs.py``)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from gpufleet.kube.logs import LineFormatter
from gpufleet.kube.serve import ServeOptions
from tests.apiserver.server import Emulator
from tests.kube.test_serve import add_node, add_pod, bound, serve

JSON = dict[str, Any]


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
