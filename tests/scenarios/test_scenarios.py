"""Scenario suite: cluster snapshots in the YAML users write, with the outcome they expect.

Each ``*.yaml`` here is a snapshot (the objects ``kubectl get -o yaml`` prints) plus one
document of ``kind: Expectation`` that gpufleet's loader skips:

* ``now``: the time of the cycle;
* ``bindings``: every pod that must be bound, with its node (``"*"``: any node, a list: one
  of those) or a mapping of ``node``/``gpus``/``pipelined``/``device`` (text of what each
  GPU it takes is, where the node's are MIG slices or time-sliced replicas);
* ``evictions``: every evicted pod and the action;
* ``pending``: every pending pod and a piece of text its reason must contain;
* ``warnings``: a piece of text of each warning the loader must give (none may be given that
  is not named, but the one that says the Expectation itself was skipped);
* ``hourly_cost``: what the cluster and each named queue cost per hour after the cycle
  under the bundled price sheet (``cluster``, ``queues: {name: amount}``), to the cent;
* ``schedulers``: the ``spec.schedulerName`` values whose pods are scheduled (default:
  gpufleet's own), as ``--scheduler-name`` gives them.

Nothing else may happen: a pod bound, evicted or pending that the expectation does not name
fails the scenario.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpufleet.compose import schedule_snapshot, schedule_snapshot_costed
from gpufleet.load.costs.prices import DEFAULT_SHEET, load_price_sheet
from gpufleet.load.snapshot import load_snapshot
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.cycle.config import CycleConfig

HERE = Path(__file__).parent
SCENARIOS = sorted(HERE.glob("*.yaml"))


def expectation(path: Path) -> dict[str, Any]:
    docs: list[dict[str, Any]] = [d for d in yaml.safe_load_all(path.read_text()) if d]
    found = [d for d in docs if d.get("kind") == "Expectation"]
    assert len(found) == 1, f"{path.name}: needs exactly one Expectation document"
    return found[0]


def when(value: object) -> float:
    stamp = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)).timestamp()


def test_suite_is_large_enough() -> None:
    assert len(SCENARIOS) >= 40


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_scenario(path: Path) -> None:
    expect = expectation(path)
    config = CycleConfig(**expect.get("config", {}))
    warned: list[str] = []
    schedulers = expect.get("schedulers") or ["gpufleet"]
    snapshot = load_snapshot(path, warn=warned.append, schedulers=schedulers)
    result = schedule_snapshot(snapshot, when(expect["now"]), config)
    if "hourly_cost" in expect:
        sheet = load_price_sheet(DEFAULT_SHEET)
        costed, cost = schedule_snapshot_costed(snapshot, when(expect["now"]), config, sheet)
        assert costed.bindings == result.bindings  # the costed cycle decides as the plain one
        want_cost = expect["hourly_cost"]
        assert cost.after.cluster.total == pytest.approx(want_cost["cluster"], abs=0.005)
        queues = {q.name: q.cost.total for q in cost.after.queues}
        for queue, amount in (want_cost.get("queues") or {}).items():
            assert queues[queue] == pytest.approx(amount, abs=0.005), queue

    warned = [w for w in warned if not w.endswith("does not read: 1 Expectation")]
    want_warned: list[str] = expect.get("warnings") or []
    assert len(warned) == len(want_warned), warned
    for text in want_warned:
        assert any(text in w for w in warned), (text, warned)

    bound = {b.pod: b for b in result.bindings}
    want_bound: dict[str, Any] = expect.get("bindings") or {}
    assert sorted(bound) == sorted(want_bound), (
        f"bound {sorted(bound)}; pending {[(p.pod, why_text(p.why)) for p in result.pending]}"
    )
    for pod, want in want_bound.items():
        got = bound[pod]
        if isinstance(want, dict):
            assert got.node == want.get("node", got.node), pod
            if "gpus" in want:
                assert list(got.gpus or ()) == want["gpus"], pod
            assert got.pipelined == want.get("pipelined", got.pipelined), pod
            assert want.get("device", "") in got.device, (pod, got.device)
        elif isinstance(want, list):
            assert got.node in want, (pod, got.node)
        elif want != "*":
            assert got.node == want, (pod, got.node)

    for pod, got in bound.items():  # a slice or a replica is never taken unannounced
        want = want_bound[pod]
        assert bool(got.device) == (isinstance(want, dict) and "device" in want), (pod, got.device)

    evicted = {e.pod: e.action for e in result.evictions}
    assert evicted == (expect.get("evictions") or {})

    pending = {p.pod: why_text(p.why) for p in result.pending}
    want_pending: dict[str, str] = expect.get("pending") or {}
    assert sorted(pending) == sorted(want_pending), pending
    for pod, text in want_pending.items():
        assert text in pending[pod], (pod, pending[pod])
