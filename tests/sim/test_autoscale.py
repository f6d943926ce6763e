"""Elastic supply in the replay (``sim/autoscale.py``): nodes bought whole for a gang,
billed from Ready to gone, spot interruptions losing work, and the baselines' habits."""

from __future__ import annotations

import math

import pytest

from gpufleet.cost.prices import NodeType, PriceSheet, UnitPrices
from gpufleet.model.node import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.supply import CAPACITY_TYPE_LABEL, NodeOffer
from gpufleet.model.workload import ReplayJob
from gpufleet.sim.autoscale import GRACE_S, SUPPLY_POLICIES, SupplyReplay, peak_nodes

POLICY = {p.name: p for p in SUPPLY_POLICIES}
SHEET = PriceSheet(
    "test",
    "USD",
    "test prices",
    (
        NodeType(
            "od",
            ("node.kubernetes.io/instance-type", "x8"),
            "on-demand",
            components=UnitPrices(1.0, 0.0, 0.0),
        ),
        NodeType(
            "spot",
            ("node.kubernetes.io/instance-type", "x8"),
            "spot",
            components=UnitPrices(0.4, 0.0, 0.0),
        ),
    ),
    default=NodeType("default", None, "on-demand", components=UnitPrices(0.0, 0.0, 0.0)),
)
SYSTEM = NodeSpec("system", 8000, 32 * 1024, 0, None)


def offer(pool: str = "x8", *, spot: bool = False, most: int = 10, rate: float = 0.0) -> NodeOffer:
    labels = {
        "node.kubernetes.io/instance-type": "x8",
        CAPACITY_TYPE_LABEL: "spot" if spot else "on-demand",
    }
    template = NodeSpec(pool, 64_000, 512 * 1024, 8, "P100", labels=labels)
    return NodeOffer(
        pool, template, max_nodes=most, delay_s=300.0, spot=spot, interruptions_per_hour=rate
    )


def job(name: str, pods: int, gpus: int, duration: float, at: float = 0.0) -> ReplayJob:
    spec = PodSpec(name, 1000 * gpus, 1024 * gpus, gpus, 1000)
    return ReplayJob(name, "t", at, duration, spec, pods)


def replay(
    jobs: list[ReplayJob], offers: list[NodeOffer], policy: str, seed: int = 0
) -> SupplyReplay:
    return SupplyReplay(
        jobs,
        offers,
        POLICY[policy],
        sheet=SHEET,
        system=SYSTEM,
        seed=seed,
        static_nodes=peak_nodes(jobs, 8),
    )


def test_gpufleet_buys_a_gang_whole_and_lets_the_nodes_go_when_it_ends() -> None:
    """A gang of four 8-GPU pods on an empty cluster: one request of four nodes at gpufleet's
    first look after the cycle (1 s), Ready 300 s later; the gang starts then and ends an hour
    later, when the replay ends and the nodes go: four nodes of $8 an hour for an hour."""
    sim = replay([job("g", 4, 8, 3600.0)], [offer()], "gpufleet")
    run = sim.replay()
    assert run.requests == 1
    assert run.replay.finished_jobs == 1
    assert run.replay.mean_wait_s == pytest.approx(301.0)
    assert run.incomplete_node_hours == 0
    assert run.node_hours == pytest.approx(4.0)
    assert run.spend == pytest.approx(4 * 8.0)
    assert run.scale_down_evictions == 0


def test_no_node_is_bought_for_a_gang_the_pool_cannot_hold_whole() -> None:
    """The pool may have 3 nodes; the gang needs 4. gpufleet buys nothing (it could never
    start); Cluster Autoscaler, pod by pod, buys 3 and the pods bound there wait, paid for."""
    jobs = [job("g", 4, 8, 3600.0)]
    ours = replay(jobs, [offer(most=3)], "gpufleet").replay()
    assert ours.requests == 0
    assert ours.spend == 0
    assert ours.replay.never_started_jobs == 1
    theirs = replay(jobs, [offer(most=3)], "ca-price").replay()
    assert theirs.requests >= 1
    assert theirs.spend > 0
    assert theirs.incomplete_node_hours > 0
    assert theirs.incomplete_spend > 0


def test_an_empty_node_goes_after_the_grace_unless_the_forecast_needs_it() -> None:
    """``a`` ends at 3,910 s while ``b`` (arrived later, on its own node) runs on: ``a``'s
    node is empty from the scan after, and goes a grace later."""
    jobs = [job("a", 1, 8, 3600.0), job("b", 1, 8, 20_000.0, at=1000.0)]
    run = replay(jobs, [offer()], "gpufleet").replay()
    a_up = 3600.0 + 10.0 + GRACE_S
    b_up = 20_000.0
    assert run.node_hours == pytest.approx((a_up + b_up) / 3600.0, abs=20 / 3600)


def test_small_jobs_are_packed_onto_one_node() -> None:
    """Eight 1-GPU jobs arriving together fit one 8-GPU node: gpufleet buys one."""
    jobs = [job(f"j{k}", 1, 1, 3600.0) for k in range(8)]
    run = replay(jobs, [offer()], "gpufleet").replay()
    assert run.peak_nodes == 1
    assert run.replay.finished_jobs == 8


def test_spot_interruptions_lose_work_and_the_job_runs_again() -> None:
    """Spot nodes interrupted about every 6 minutes: a 2-hour job without room elsewhere
    is stopped, loses its work since its last checkpoint, and finishes later."""
    run = replay([job("a", 1, 8, 7200.0)], [offer(spot=True, rate=10.0)], "gpufleet").replay()
    assert run.interruptions >= 1
    assert run.interrupted_jobs >= 1
    assert run.interruption_lost_gpu_hours > 0
    assert run.replay.finished_jobs == 1
    assert (run.replay.mean_jct_s or 0.0) > 7200.0 + 300.0


def test_the_same_seed_gives_the_same_run() -> None:
    jobs = [job(f"j{k}", 1, 4, 3600.0, at=600.0 * k) for k in range(12)]
    offers = [offer(spot=True, rate=2.0), offer("od")]
    a = replay(jobs, offers, "gpufleet", seed=3).replay()
    b = replay(jobs, offers, "gpufleet", seed=3).replay()
    assert (a.spend, a.interruptions, a.replay.mean_jct_s) == (
        b.spend,
        b.interruptions,
        b.replay.mean_jct_s,
    )


def test_the_static_peak_holds_the_peak_from_the_start() -> None:
    jobs = [job("a", 1, 8, 3600.0), job("b", 1, 8, 3600.0), job("c", 1, 8, 3600.0, at=7200.0)]
    assert peak_nodes(jobs, 8) == 2
    run = replay(jobs, [offer()], "static-peak").replay()
    assert run.peak_nodes == 2
    assert run.replay.mean_wait_s == 0
    assert run.node_hours == pytest.approx(2 * run.end_s / 3600.0)


def test_cluster_autoscaler_evicts_running_work_to_scale_down_and_gpufleet_does_not() -> None:
    """Two 4-GPU jobs land on two nodes (kube-scheduler spreads them); when the first
    ends the other runs alone below half its node. Cluster Autoscaler removes a node
    under half used after 10 minutes, evicting what runs there if it fits elsewhere."""
    jobs = [
        job("a", 1, 4, 3600.0),
        job("b", 1, 4, 3600.0, at=1.0),
        job("c", 1, 2, 20_000.0, at=2.0),
        job("d", 1, 2, 20_000.0, at=400.0),
    ]
    theirs = replay(jobs, [offer()], "ca-price").replay()
    ours = replay(jobs, [offer()], "gpufleet").replay()
    assert ours.scale_down_evictions == 0
    assert theirs.replay.finished_jobs == ours.replay.finished_jobs == 4
    assert math.isfinite(theirs.spend)
    assert theirs.scale_down_evictions >= 1


@pytest.mark.parametrize("policy", ["gpufleet", "ca-price", "karpenter-like"])
def test_a_failed_spot_request_is_asked_again_once_the_pool_may_be(policy: str) -> None:
    """Spot capacity filled three times in ten: a failed request avoids the pool a while,
    then the job asks again, and nothing else happening does not end the replay early."""
    scarce = NodeOffer(
        "x8",
        offer(spot=True).template,
        max_nodes=4,
        delay_s=300.0,
        spot=True,
        availability=0.3,
    )
    run = replay([job("a", 1, 8, 3600.0)], [scarce], policy).replay()
    assert run.failed_requests >= 1
    assert run.replay.finished_jobs == 1


def test_cluster_autoscaler_grows_the_next_group_at_the_next_scan() -> None:
    """Pool ``a`` may have one node: if Cluster Autoscaler grows it for the first job, one
    loop later it grows ``b`` for the second (both start within a scan of each other, not a
    provisioning delay apart)."""
    cheap = offer("a", most=1)
    dear = NodeOffer("b", offer("b").template, max_nodes=4, delay_s=300.0)
    sheet_nodes = [job("j0", 1, 8, 3600.0), job("j1", 1, 8, 3600.0)]
    run = replay(sheet_nodes, [cheap, dear], "ca-price").replay()
    assert run.replay.finished_jobs == 2
    assert (run.replay.mean_wait_s or 0.0) <= (310.0 + 320.0) / 2


def test_an_on_demand_node_bought_while_spot_was_refused_is_replaced_by_spot() -> None:
    """Spot is refused at first (the pool avoided for ten minutes), so the long job starts
    on an on-demand node; once spot may be asked again, a spot node is bought for it, the
    job moves there right after its next checkpoint and the on-demand node goes. The same
    run without spot keeps the on-demand node to the end and costs more."""
    jobs = [job("long", 1, 8, 6 * 3600.0)]
    offers = [offer("od"), offer("spot", spot=True)]
    swapped = replay(jobs, offers, "gpufleet")
    swapped.avoid["spot"] = 600.0
    run = swapped.replay()
    assert run.checkpoint_moves == 1
    assert run.replay.finished_jobs == 1
    assert run.scale_down_evictions == 0
    od = [n for n in swapped.gone if n.stock.pool == "od"]
    assert len(od) == 1
    # moved right after a checkpoint once it was expected to run on for an hour (having run
    # an hour: no history), the node gone a grace later, hours before the job ends
    assert od[0].down < 2 * 3600.0
    kept = replay(jobs, [offer("od")], "gpufleet").replay()
    assert kept.checkpoint_moves == 0
    assert run.spend < kept.spend


@pytest.mark.parametrize("beside", [0, 1, 2])
def test_a_gang_on_on_demand_nodes_moves_to_spot_whole(beside: int) -> None:
    """A gang of three pods starts on three on-demand nodes while spot is refused; once spot
    may be asked, spot nodes are bought and the whole gang moves after its next checkpoint
    (with a job beside it on one of its nodes, that job too: no other job runs on those
    nodes), and the on-demand nodes go. With a second job beside it that started later,
    on another of its nodes, none is replaced: its checkpoints are not the gang's."""
    jobs = [job("gang", 3, 8 if not beside else 6, 6 * 3600.0)]
    jobs += [job("small", 1, 2, 6 * 3600.0)] if beside else []
    jobs += [job("late", 1, 2, 6 * 3600.0, at=900.0)] if beside == 2 else []
    swapped = replay(jobs, [offer("od"), offer("spot", spot=True)], "gpufleet")
    swapped.avoid["spot"] = 600.0
    run = swapped.replay()
    assert run.replay.finished_jobs == len(jobs)
    assert run.scale_down_evictions == 0
    od = [n for n in swapped.gone if n.stock.pool == "od"]
    assert len(od) == 3
    if beside == 2:
        assert run.checkpoint_moves == 0
        assert all(n.down >= 6 * 3600.0 for n in od)
    else:
        assert run.checkpoint_moves == len(jobs)
        assert all(n.down < 2 * 3600.0 for n in od)


def test_a_job_about_to_end_is_not_moved_to_spot() -> None:
    """A job expected to end within the hour is left where it runs."""
    jobs = [job("short", 1, 8, 1800.0)]
    swapped = replay(jobs, [offer("od"), offer("spot", spot=True)], "gpufleet")
    swapped.avoid["spot"] = 600.0
    run = swapped.replay()
    assert run.checkpoint_moves == 0
    assert run.requests == 1  # no spot node bought for it
