"""Properties of gpufleet's replay over random small traces: no job is moved by
consolidation more than ``MAX_MOVES`` times, and big gangs do not starve behind a stream of
small jobs — each starts within the bound the reservation gives (``queues/holds.py``):
once no older starving job waits (an older job's reservation comes first), it waits at
most for the jobs on its reserved nodes to end (twice the longest expected run, as a run
past half its estimate is expected to last as long again as it ran) and for the jobs that
backfilled them, each at most the longest run."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import ReplayJob
from gpufleet.plugins.registry import REPLAY_POLICIES
from gpufleet.scheduler.queues.holds import DEFAULT_EXPECTED_S
from gpufleet.scheduler.room.consolidate import MAX_MOVES
from gpufleet.sim.replay import Replay

STARVING_AFTER = 1800.0
PERIOD = 300.0
NODES = [NodeSpec(f"n{i}", 64_000, 512 * 1024, 8, "V100") for i in range(2)]
POLICY = replace(REPLAY_POLICIES["gpufleet"], starvation_after_s=STARVING_AFTER)


def job(name: str, arrival: float, duration: float, pods: int, gpus: int) -> ReplayJob:
    spec = PodSpec(name, 1000 * gpus, 1024 * gpus, gpus, 1000)
    return ReplayJob(name, "t", arrival, duration, spec, pods)


def trace(seed: int, gang_arrivals: list[float]) -> list[ReplayJob]:
    """A stream of 1- and 2-GPU jobs loading the 16 GPUs about 65% for a day (from a
    generator seeded with ``seed``), and gangs of both whole nodes arriving in it."""
    rng = np.random.default_rng(seed)
    jobs, at, i = [], 0.0, 0
    while at < 86_400:
        at += float(rng.uniform(100.0, 400.0))
        gpus = int(rng.choice((1, 1, 2)))
        jobs.append(job(f"s{i:04d}", at, float(rng.uniform(300.0, 3600.0)), 1, gpus))
        i += 1
    for k, arrival in enumerate(gang_arrivals):
        jobs.append(job(f"gang{k}", arrival, float(rng.uniform(600.0, 3600.0)), 2, 8))
    return jobs


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.lists(st.floats(0.0, 43_200.0), min_size=1, max_size=3))
def test_no_job_moves_too_often_and_gangs_start_within_the_bound(
    seed: int, gang_arrivals: list[float]
) -> None:
    jobs = trace(seed, gang_arrivals)
    run = Replay(NODES, jobs, POLICY, period_s=PERIOD).run()
    assert run.most_moves <= MAX_MOVES
    assert run.never_started_jobs == 0
    longest = max(*(j.duration_s for j in jobs), DEFAULT_EXPECTED_S)
    gangs = sum(1 for j in jobs if j.pods > 1)
    bound = STARVING_AFTER + 2 * PERIOD + gangs * (3 * longest + 2 * PERIOD)
    (big,) = [s for s in run.sizes if s.size == ">8"]
    assert big.jobs == gangs
    assert big.p95_wait_s is not None
    assert big.p95_wait_s <= bound, (big, bound)
