"""The run log: each pod's runs on nodes, recorded from the facts a meter is told, in the
shape the cost layer charges."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.cost.allocation import Nodes, Runs, allocate
from gpufleet.metering.runs import EVICTED, FINISHED, RUNNING, RunLog

HOUR = 3600.0


def test_the_run_log_records_runs_from_facts() -> None:
    log = RunLog()
    log.started("p", 1, 10.0, 0.5, 2.0, 8.0, 7)
    log.started("q", 0, 10.0, 1.0, 1.0, 1.0, 8)
    log.stopped("waiting-pod", 12.0)  # never started: no run
    log.stopped("p", 20.0, evicted=True)
    log.started("p", 0, 20.0, 0.5, 2.0, 8.0, 7)  # restarted elsewhere
    log.stopped("q", 30.0)
    columns = log.columns()
    assert columns.pods == ("p", "q", "p")
    assert columns.node.tolist() == [1, 0, 0]
    assert columns.end.tolist() == [20.0, 30.0, np.inf]
    assert columns.outcome.tolist() == [EVICTED, FINISHED, RUNNING]
    assert columns.request.tolist()[0] == [0.5, 2.0, 8.0]
    assert columns.owner.tolist() == [7, 8, 7]
    with pytest.raises(ValueError, match="started twice"):
        log.started("p", 0, 40.0, 0.5, 2.0, 8.0, 7)
    log.started("r", 0, 50.0, 1.0, 1.0, 1.0, 9)  # the log goes on after a read-out
    assert len(log) == 4


def test_a_run_log_costs_like_the_allocation_it_feeds() -> None:
    log = RunLog()
    log.started("p", 0, 0.0, 1.0, 2.0, 4.0, 0)
    log.stopped("p", HOUR)
    columns = log.columns()
    runs = Runs.of(
        columns.pods, node=columns.node, start=columns.start, end=columns.end,
        request=columns.request,
    )  # fmt: skip
    nodes = Nodes.of(
        ["n"], types=["t"], categories=["spot"], capacity=[(1, 2, 4)], prices=[(2, 1, 0.5)]
    )
    assert allocate(runs, nodes, (0.0, HOUR)).idle.sum() == pytest.approx(0.0)
