"""Lending keeps a serving queue's forecast back, as whole free nodes: a property over
random clusters, and the rule's edges."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.compose import run_cycle
from gpufleet.framework.runtime import Exclusion
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import PodInfo, QueueSpec, Snapshot, vector

NODE_GPUS = 8


def _pod(key: str, queue: str, gpus: int, *, node: str | None = None, at: float = 0.0) -> PodInfo:
    spec = PodSpec(key, 1000 * gpus, 1024 * gpus, gpus, 1000)
    return PodInfo(
        key,
        spec,
        queue=queue,
        created=at,
        node=node,
        gpus=tuple(range(gpus)) if node else (),
        started=0.0 if node else None,
    )


def _whole_free(nodes: int, pods: list[PodInfo], bound: dict[str, str]) -> int:
    """GPUs of the nodes no pod uses, running or just bound."""
    used = {p.node for p in pods if p.node} | set(bound.values())
    return NODE_GPUS * sum(1 for k in range(nodes) if f"n{k}" not in used)


@settings(max_examples=60, deadline=None)
@given(
    nodes=st.integers(1, 8),
    serving_running=st.integers(0, 4),
    forecast=st.integers(0, 64),
    quota_nodes=st.integers(0, 8),
    running=st.lists(st.integers(1, NODE_GPUS), max_size=8),
    pending=st.lists(st.sampled_from((1, 2, 4, 8)), min_size=1, max_size=12),
)
def test_serving_running_plus_kept_never_below_its_forecast(
    *,
    nodes: int,
    serving_running: int,
    forecast: int,
    quota_nodes: int,
    running: list[int],
    pending: list[int],
) -> None:
    """Whatever training asks, a cycle leaves the serving queue's running GPUs plus the whole
    free nodes at least ``min(quota, forecast)``, or, where the cluster had fewer than that
    to start with, takes none of the whole free nodes it had."""
    cluster = tuple(NodeSpec(f"n{k}", 64_000, 512 * 1024, NODE_GPUS, "V100") for k in range(nodes))
    pods: list[PodInfo] = []
    k = 0
    for _ in range(min(serving_running, nodes)):
        pods.append(_pod(f"serving/r{k}", "serving", NODE_GPUS, node=f"n{k}"))
        k += 1
    for j, gpus in enumerate(running):  # training pods on the next nodes, one each
        if k >= nodes:
            break
        pods.append(_pod(f"train/run{j}", "train", gpus, node=f"n{k}"))
        k += 1
    pods += [_pod(f"train/p{j}", "train", g, at=float(j)) for j, g in enumerate(pending)]
    quota = float(quota_nodes * NODE_GPUS)
    queues = (
        QueueSpec("serving", quota=vector(quota), serving=True, forecast_gpus=float(forecast)),
        QueueSpec("train"),
    )
    result = run_cycle(Snapshot(cluster, tuple(pods), queues=queues), now=100.0)
    bound = {b.pod: b.node for b in result.bindings}
    serving = NODE_GPUS * min(serving_running, nodes)
    keep = min(quota, float(forecast))
    before = _whole_free(nodes, pods, {})
    after = _whole_free(nodes, pods, bound)
    assert serving + after >= min(keep, serving + before)


def test_a_serving_queue_without_forecast_lends_everything() -> None:
    cluster = tuple(NodeSpec(f"n{k}", 64_000, 512 * 1024, NODE_GPUS, "V100") for k in range(2))
    pods = (_pod("train/a", "train", 8), _pod("train/b", "train", 8, at=1.0))
    queues = (QueueSpec("serving", quota=vector(16.0), serving=True), QueueSpec("train"))
    result = run_cycle(Snapshot(cluster, pods, queues=queues), now=10.0)
    assert sorted(b.pod for b in result.bindings) == ["train/a", "train/b"]


def test_the_forecast_keeps_no_more_than_the_quota() -> None:
    """Forecast 24 GPUs on a quota of 8: one node kept, the other lent."""
    cluster = tuple(NodeSpec(f"n{k}", 64_000, 512 * 1024, NODE_GPUS, "V100") for k in range(2))
    pods = (_pod("train/a", "train", 8), _pod("train/b", "train", 8, at=1.0))
    queues = (
        QueueSpec("serving", quota=vector(8.0), serving=True, forecast_gpus=24.0),
        QueueSpec("train"),
    )
    result = run_cycle(Snapshot(cluster, pods, queues=queues), now=10.0)
    assert [b.pod for b in result.bindings] == ["train/a"]
    assert np.isclose(len(result.pending), 1)


def test_nodes_kept_for_two_reasons_each_keep_their_own() -> None:
    held = Exclusion(np.array([True, True, False, False]), "reserved")
    kept = Exclusion(np.array([False, True, True, False]), "kept")
    verdict = held.joined(kept).filter(None, None)  # type: ignore[arg-type]
    assert verdict.feasible.tolist() == [False, False, False, True]
    assert [(m, n.tolist()) for m, n in verdict.failures] == [
        ("reserved", [True, True, False, False]),
        ("kept", [False, False, True, False]),
    ]
