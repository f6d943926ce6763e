"""Elastic jobs in the replay, and training beside a serving load (``sim/balance.py``)."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import ReplayJob
from gpufleet.plugins.registry import REPLAY_POLICIES
from gpufleet.sim.balance import (
    BALANCE_POLICIES,
    POOL_LABEL,
    BalanceReplay,
    elastic_jobs,
    forecast,
    training_nodes,
)
from gpufleet.sim.replay import Replay, elastic_rate

POLICY = {p.name: p for p in BALANCE_POLICIES}


def node(name: str, pool: str = "") -> NodeSpec:
    labels = {POOL_LABEL: pool} if pool else {}
    return NodeSpec(name, 64_000, 512 * 1024, 8, "V100", labels=labels)


def job(
    name: str, pods: int, gpus: int, duration: float, *, at: float = 0.0, least: int = 0
) -> ReplayJob:
    spec = PodSpec(name, 1000 * gpus, 1024 * gpus, gpus, 1000)
    return ReplayJob(name, "t", at, duration, spec, pods, min_pods=least)


def test_an_elastic_job_runs_at_the_speed_of_its_pods() -> None:
    assert elastic_rate(4, 4) == 1.0
    assert elastic_rate(2, 4) == pytest.approx(1 / 1.8)  # twice the pods, 1.8 times as fast
    assert elastic_rate(1, 4) == pytest.approx(1 / 1.8**2)


def test_an_elastic_job_starts_at_its_minimum_and_grows_when_room_frees() -> None:
    """``b`` (4 pods of 4 GPUs, at least 2) starts on the node ``a`` leaves free at half its
    speed, grows to all four pods when ``a`` ends at 1,000 s, pauses 60 s for the resize and
    ends at 1,060 + (3,000 - 1,000 x 0.556) s."""
    jobs = [job("a", 1, 8, 1000.0), job("b", 4, 4, 3000.0, least=2)]
    replay = Replay(
        [node("n0"), node("n1")], jobs, REPLAY_POLICIES["gang-backfill"], restart_s=60.0
    )
    run = replay.run()
    half = elastic_rate(2, 4)
    end = 1060.0 + (3000.0 - 1000.0 * half)
    assert run.finished_jobs == 2
    assert run.mean_jct_s == pytest.approx((1000.0 + end) / 2)
    assert run.preemptions == 0


def test_a_job_of_all_its_pods_is_not_elastic() -> None:
    jobs = [job("a", 1, 8, 1000.0), job("b", 4, 4, 3000.0)]
    run = Replay([node("n0"), node("n1")], jobs, REPLAY_POLICIES["gang-backfill"]).run()
    assert run.mean_jct_s == pytest.approx((1000.0 + 4000.0) / 2)  # b waits for a, then runs


def test_jobs_of_a_node_or_more_become_elastic() -> None:
    small, one, big = job("s", 1, 4, 10.0), job("o", 1, 8, 10.0), job("b", 3, 8, 10.0)
    out = elastic_jobs([small, one, big], 8)
    assert [j.core_pods for j in out] == [1, 1, 2]


def test_the_forecast_is_the_most_the_same_windows_asked_on_earlier_days() -> None:
    per_day = 4
    wanted = np.array([1, 5, 2, 1, 1, 1, 1, 1, 9, 1, 1, 1])
    # window 4 (day 1, 0) looks at windows 0 and 1 of day 0 (one window ahead): 5
    assert forecast(wanted, 1, per_day, days=1).tolist() == [1, 5, 2, 1, 5, 5, 2, 1, 9, 1, 1, 9]
    assert forecast(wanted, 0, per_day, days=2).tolist() == [1, 5, 2, 1, 1, 5, 2, 1, 9, 5, 2, 1]


def test_the_training_pool_is_sized_to_the_work_offered_in_the_span() -> None:
    jobs = [job("a", 1, 8, 3600.0 * 100, at=0.0)]  # runs past the span: counted within it
    assert training_nodes(jobs, 3600.0 * 11, 8) == round(8 * 11 / (1.1 * 11 * 8))


def _balance(policy: str, replicas: list[int]) -> BalanceReplay:
    """Two serving nodes, one training node, one elastic-sized job of three whole nodes."""
    serving = [node("s0", "serving"), node("s1", "serving")]
    training = [node("t0", "training")]
    jobs = [job("big", 3, 8, 20_000.0)]
    return BalanceReplay(
        serving,
        training,
        jobs,
        POLICY[policy],
        replicas=np.array(replicas),
        rate=[float(r) for r in replicas],
        window_s=600.0,
    )


@pytest.mark.parametrize("policy", ["lyra-greedy", "gpufleet"])
def test_a_serving_replica_shrinks_an_elastic_borrower_first(policy: str) -> None:
    """The job borrows both serving nodes; a replica at 600 s takes one back by shrinking it
    (it runs on with two pods), and when the replica goes at 1,200 s the job grows again."""
    run = _balance(policy, [0, 1, 0, 0]).replay()
    assert run.shrinks == 1
    assert run.training.preemptions == 0
    assert run.serving.short_windows == 0
    assert run.serving.latencies_s == [30.0]  # bound at once, started after the grace
    assert run.evicted_gpus == 8
    assert run.training.lost_gpu_hours == pytest.approx(2 * 8 * 120 / 3600)  # two pods paused


def test_naive_loaning_stops_the_whole_borrower() -> None:
    run = _balance("naive-loaning", [0, 1, 0, 0]).replay()
    assert (run.shrinks, run.training.preemptions) == (0, 1)
    assert run.evicted_gpus == 24
    assert run.serving.short_windows == 0


def test_static_partition_lends_nothing() -> None:
    run = _balance("static", [0, 1, 0, 0]).replay()
    assert run.training.never_started_jobs == 1  # three nodes' job, one training node
    assert run.serving.lent_gpus == [0.0, 0.0, 0.0, 0.0]
    assert run.evicted_gpus == 0


def test_the_balance_replay_is_deterministic() -> None:
    first, second = (
        _balance("gpufleet", [0, 2, 1, 0]).replay(),
        _balance("gpufleet", [0, 2, 1, 0]).replay(),
    )
    assert replace(first.training, elapsed_s=0) == replace(second.training, elapsed_s=0)
    assert first.serving == second.serving
    assert math.isclose(first.work_gpu_hours, second.work_gpu_hours)


def test_an_elastic_job_stopped_loses_the_time_since_its_checkpoint() -> None:
    """``b`` runs 2 of its 4 pods (at 0.56 of its speed) from 0 s, checkpoints at 3,600 s and
    is stopped at 4,000 s: its two pods lose 400 s each, whatever its speed."""
    jobs = [job("a", 1, 8, 1e6), job("b", 4, 4, 1e6, least=2)]
    replay = Replay(
        [node("n0"), node("n1")],
        jobs,
        REPLAY_POLICIES["gang-backfill"],
        checkpoint_interval_s=3600.0,
    )
    replay.run(until=4000.0)
    replay._evicted("b/0", 4000.0, frozenset(), "reclaim")
    reading = replay.meter.reading(4000.0)
    assert reading.lost_gpu_hours == pytest.approx(2 * 4 * 400 / 3600)
    assert replay.progress[replay.index["b"]].saved_s == pytest.approx(3600 * elastic_rate(2, 4))
