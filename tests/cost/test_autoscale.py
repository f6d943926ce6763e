"""The autoscaling planner's scenarios: the cheapest feasible set over node types, buying
capped by queue limits, a gang that must share a rack, and no buying where a running job's
end serves the pending one sooner than new nodes would come."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.cost.autoscale import (
    FITS_NOW,
    FITS_SOON,
    NO_TYPE,
    NodeUse,
    Room,
    Stock,
    Want,
    expected_hourly,
    plan_drain,
    plan_scale_down,
    plan_scale_up,
)
from gpufleet.model.node import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.selectors import NodeConstraint, Requirement
from gpufleet.model.supply import CAPACITY_TYPE_LABEL, NodeOffer

RACK = "topology.gpufleet.io/rack"


def offer(
    pool: str,
    gpus: int,
    *,
    most: int = 100,
    rack: int = 0,
    spot: bool = False,
    rate: float = 0.0,
    model: str = "H100",
) -> NodeOffer:
    labels = {"nvidia.com/gpu.product": model, CAPACITY_TYPE_LABEL: "spot" if spot else "on-demand"}
    template = NodeSpec(pool, 8000 * gpus, 64 * 1024 * gpus, gpus, model, labels=labels)
    return NodeOffer(
        pool,
        template,
        domains=((RACK, rack),) if rack else (),
        max_nodes=most,
        spot=spot,
        interruptions_per_hour=rate,
    )


def want(key: str, pods: int, gpus: int, *, queue: str = "q", **kw: object) -> Want:
    spec = PodSpec(key, 4000 * gpus, 32 * 1024 * gpus, gpus, 1000)
    return Want(key, queue, pods, spec, 3600.0, **kw)  # type: ignore[arg-type]


def test_the_cheapest_set_over_types_is_bought() -> None:
    # a 12-GPU gang of 3 pods of 4: three 4-GPU nodes ($12) beat two 8-GPU nodes ($20)
    stock = [Stock(offer("big", 8), 10.0), Stock(offer("small", 4), 4.0)]
    plan = plan_scale_up([want("g", 3, 4)], stock, Room.empty(), {})
    assert [(p.pool, len(p.numbers)) for p in plan.purchases] == [("small", 3)]
    assert plan.hourly == pytest.approx(12.0)
    # a pod of 8 GPUs fits only the big type
    plan = plan_scale_up([want("h", 1, 8)], stock, Room.empty(), {})
    assert [(p.pool, p.numbers) for p in plan.purchases] == [("big", (0,))]


def test_pending_work_is_packed_onto_the_nodes_bought_before_it() -> None:
    stock = [Stock(offer("big", 8), 8.0)]
    plan = plan_scale_up(
        [want("a", 1, 4), want("b", 1, 2), want("c", 1, 2), want("d", 1, 1)],
        stock,
        Room.empty(),
        {},
    )
    assert [(p.key, p.numbers) for p in plan.purchases] == [("a", (0,)), ("d", (1,))]
    assert plan.purchases[0].also == ("b", "c")
    assert {w.key: w.reason for w in plan.waiting} == {"b": FITS_NOW, "c": FITS_NOW}


def test_buying_is_capped_by_the_queue_limit() -> None:
    stock = [Stock(offer("big", 8), 8.0)]
    plan = plan_scale_up(
        [want("a", 1, 8, queue="team"), want("b", 1, 8, queue="team"), want("c", 1, 8)],
        stock,
        Room.empty(),
        {"team": 12.0},
    )
    assert [p.key for p in plan.purchases] == ["a", "c"]
    assert plan.waiting[0].key == "b"
    assert "queue team's limit leaves it 4 GPUs" in plan.waiting[0].reason


def test_a_gang_that_must_share_a_rack_gets_nodes_of_one_rack() -> None:
    stock = Stock(offer("big", 8, rack=4), 8.0, used={0, 1, 4})
    plan = plan_scale_up([want("g", 3, 8, domain=RACK)], [stock], Room.empty(), {})
    (purchase,) = plan.purchases
    assert purchase.numbers == (5, 6, 7)  # rack 0 has 2 free numbers, rack 1 has 3
    racks = {stock.offer.node(n).labels[RACK] for n in purchase.numbers}
    assert racks == {"big-rack-01"}
    # a gang larger than a rack cannot be bought whole
    plan = plan_scale_up([want("h", 5, 8, domain=RACK)], [stock], Room.empty(), {})
    assert plan.purchases == ()
    assert plan.waiting[0].reason == NO_TYPE


def test_no_node_is_bought_for_a_job_a_running_job_will_serve_sooner() -> None:
    stock = [Stock(offer("big", 8), 8.0)]
    node = NodeSpec("n0", 64000, 512 * 1024, 8, "H100")
    zero = np.zeros(1)
    full = (np.array([8.0]), np.array([64000.0]), np.array([512.0 * 1024]))
    room = Room.of([node], (zero, zero, zero), full)  # busy now, free within the delay
    plan = plan_scale_up([want("a", 1, 8)], stock, room, {})
    assert plan.purchases == ()
    assert plan.waiting[0].reason == FITS_SOON
    # a second job finds nothing freeing: it is bought for
    room = Room.of([node], (zero, zero, zero), full)
    plan = plan_scale_up([want("a", 1, 8), want("b", 1, 8)], stock, room, {})
    assert [p.key for p in plan.purchases] == ["b"]


def test_max_nodes_and_affinity_are_respected() -> None:
    stock = [Stock(offer("h100", 8, most=1), 20.0), Stock(offer("a100", 8, model="A100"), 10.0)]
    only_h100 = NodeConstraint(terms=((Requirement("nvidia.com/gpu.product", "In", ("H100",)),),))
    spec = PodSpec("p", 1000, 1024, 8, 1000, constraint=only_h100)
    wants = [Want("a", "q", 1, spec, 3600.0), Want("b", "q", 1, spec, 3600.0)]
    plan = plan_scale_up(wants, stock, Room.empty(), {})
    assert [(p.key, p.pool) for p in plan.purchases] == [("a", "h100")]
    assert plan.waiting[0].reason == NO_TYPE


def test_spot_is_priced_with_the_work_interruptions_lose() -> None:
    spot = Stock(offer("spot", 8, spot=True, rate=0.05), 4.0)
    on_demand = Stock(offer("od", 8), 8.0)
    checkpointed = want("a", 1, 8, checkpoint_s=1800.0)
    assert expected_hourly(spot, checkpointed, 1) == pytest.approx(4.0 * (1 + 0.05 * 0.25))
    plan = plan_scale_up([checkpointed], [spot, on_demand], Room.empty(), {})
    assert plan.purchases[0].pool == "spot"
    # a 64-node job without checkpoints that runs 100 hours would lose far more than it saves
    long = Want("b", "q", 64, checkpointed.spec, 100 * 3600.0)
    spot.used.clear()
    on_demand.used.clear()
    plan = plan_scale_up([long], [spot, on_demand], Room.empty(), {})
    assert plan.purchases[0].pool == "od"


def test_scale_down_takes_empty_nodes_dearest_first_and_keeps_the_forecast() -> None:
    nodes = [
        NodeUse("cheap", 8, 8.0, empty_since=0.0),
        NodeUse("dear", 8, 16.0, empty_since=0.0),
        NodeUse("busy", 8, 16.0, empty_since=None),
        NodeUse("fresh", 8, 16.0, empty_since=90.0),
        NodeUse("floor", 8, 16.0, empty_since=0.0, floor=True),
    ]
    gone = plan_scale_down(nodes, now=100.0, grace_s=60.0, keep_gpus=0.0, free_gpus=40.0)
    assert gone == ("dear", "cheap")
    gone = plan_scale_down(nodes, now=100.0, grace_s=60.0, keep_gpus=30.0, free_gpus=40.0)
    assert gone == ("dear",)


def test_drain_empties_only_movable_nodes_whose_pods_fit_elsewhere_dearest_first() -> None:
    def spec(name: str) -> NodeSpec:
        return NodeSpec(name, 64_000, 512 * 1024, 8, "H100")

    one = PodSpec("p", 1000, 1024, 1, 1000)
    specs = [spec("dear"), spec("cheap"), spec("stuck"), spec("full")]
    free = np.array([7.0, 6.0, 7.0, 1.0])
    room = Room.of(specs, (free, np.full(4, 60_000.0), np.full(4, 500.0 * 1024)))
    nodes = [
        NodeUse("dear", 8, 16.0, None, used=1, pods=(one,), movable=True),
        NodeUse("cheap", 8, 8.0, None, used=2, pods=(one, one), movable=True),
        NodeUse("stuck", 8, 8.0, None, used=1, pods=(one,), movable=False),
    ]
    assert plan_drain(nodes, room, keep_gpus=0.0, limit=1) == ("dear",)
    room = Room.of(specs, (free, np.full(4, 60_000.0), np.full(4, 500.0 * 1024)))
    assert plan_drain(nodes, room, keep_gpus=0.0, limit=3) == ("dear", "cheap")
    # the forecast keeps the free GPUs the drain would take
    room = Room.of(specs, (free, np.full(4, 60_000.0), np.full(4, 500.0 * 1024)))
    assert plan_drain(nodes, room, keep_gpus=20.0, limit=3) == ()


def test_drain_never_empties_a_node_it_moved_another_nodes_pods_onto() -> None:
    """``a``'s pods fit only on ``b``: ``a`` is emptied onto ``b``, so ``b`` stays, though
    it too is movable and the limit would allow it."""
    specs = [NodeSpec(name, 64_000, 512 * 1024, 8, "H100") for name in ("a", "b", "c")]
    one = PodSpec("p", 1000, 1024, 1, 1000)
    room = Room.of(
        specs, (np.array([6.0, 6.0, 0.0]), np.full(3, 60_000.0), np.full(3, 500.0 * 1024))
    )
    nodes = [
        NodeUse(name, 8, 8.0, None, used=2, pods=(one, one), movable=True) for name in ("a", "b")
    ]
    assert plan_drain(nodes, room, keep_gpus=0.0, limit=2) == ("a",)
