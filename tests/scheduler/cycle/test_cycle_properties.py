"""Invariants of the scheduling cycle over random snapshots (Hypothesis).

Whatever the snapshot: no node or GPU is over-committed, gangs are all-or-nothing,
queue limits hold, non-preemptible pods are never evicted, and reclaim never takes a
queue below its fair share except by evicting a whole gang. Nodes have GPUs of different
memory (or none known), and some pods ask for a share by GPU memory: each takes, and its
queue is charged, its share on the node it runs on.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.compose import run_cycle
from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import (
    GroupSpec,
    PodInfo,
    QueueSpec,
    Snapshot,
    request_vector,
    vector,
)
from gpufleet.scheduler.api.outcome import CycleResult
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.state.fairshare import EPS, QueueTree, share_ratio

NOW = 10_000.0
QUEUES = ("team-a", "team-b", "team-c")
GIB = 1024


@st.composite
def snapshots(draw: st.DrawFn) -> Snapshot:
    n_nodes = draw(st.integers(1, 4))
    nodes = tuple(
        NodeSpec(
            f"n{i}",
            draw(st.sampled_from([8000, 32000])),
            65536,
            draw(st.sampled_from([2, 4, 8])),
            "G",
            gpu_memory_mib=draw(st.sampled_from([None, 40 * GIB, 80 * GIB])),
        )
        for i in range(n_nodes)
    )
    memory = {n.name: n.gpu_memory_mib or 0 for n in nodes}
    queues = [QueueSpec("default")]
    nested = draw(st.booleans())
    if nested:
        queues.append(
            QueueSpec(
                "dept", quota=vector(draw(st.sampled_from([0, 4]))), quota_set=(True, False, False)
            )
        )
    for name in QUEUES:
        quota = draw(st.sampled_from([0, 2, 4]))
        limit = draw(st.sampled_from([np.inf, 4, 6, 12]))
        queues.append(
            QueueSpec(
                name,
                "dept" if nested and name != "team-c" else None,
                quota=vector(quota),
                limit=vector(max(limit, quota), np.inf, np.inf),
                weight=vector(draw(st.sampled_from([0, 1, 2])), 1, 1),
                quota_set=(True, False, False),
            )
        )

    def request(name: str) -> PodSpec:
        kind = draw(st.sampled_from(["whole", "share", "memory", "cpu"]))
        cpu = draw(st.sampled_from([0, 1000, 4000]))
        if kind == "whole":
            return PodSpec(name, cpu, 1024, draw(st.integers(1, 4)), MILLI)
        if kind == "share":
            return PodSpec(name, cpu, 1024, 1, draw(st.sampled_from([250, 500, 700])))
        if kind == "memory":
            asked = draw(st.sampled_from([10 * GIB, 20 * GIB, 60 * GIB]))
            return PodSpec(name, cpu, 1024, 1, 0, gpu_memory_mib=asked)
        return PodSpec(name, max(cpu, 500), 1024)

    # Running pods: placed greedily where they fit, so the snapshot is consistent.
    free_cpu = {n.name: n.cpu_milli for n in nodes}
    free_gpus = {n.name: [MILLI] * n.gpus for n in nodes}
    pods: list[PodInfo] = []
    groups: list[GroupSpec] = []
    for i in range(draw(st.integers(0, 10))):
        asked = request(f"r{i}")
        for name, gpus in free_gpus.items():
            spec = asked.sized_for(memory[name])
            if spec is None:
                continue
            fitting = [g for g, f in enumerate(gpus) if f >= spec.gpu_milli]
            if free_cpu[name] >= spec.cpu_milli and len(fitting) >= spec.num_gpu:
                chosen = tuple(fitting[: spec.num_gpu])
                free_cpu[name] -= spec.cpu_milli
                for g in chosen:
                    gpus[g] -= spec.gpu_milli
                pods.append(
                    PodInfo(
                        f"run/r{i}",
                        replace(asked, name=f"run/r{i}"),
                        draw(st.sampled_from(QUEUES)),
                        priority=draw(st.sampled_from([0, 10, 100])),
                        node=name,
                        gpus=chosen,
                        started=draw(st.sampled_from([0.0, NOW - 10])),
                    )
                )
                break
    for j in range(draw(st.integers(1, 5))):
        size = draw(st.integers(1, 3))
        queue = draw(st.sampled_from(QUEUES))
        priority = draw(st.sampled_from([0, 10, 50, 100]))
        key = f"ml/g{j}"
        if size > 1:
            groups.append(GroupSpec(key, draw(st.integers(1, size)), queue))
        for k in range(size):
            name = f"ml/g{j}-{k}"
            pods.append(
                PodInfo(
                    name,
                    replace(request(name), name=name),
                    queue,
                    key if size > 1 else "",
                    priority,
                    created=float(j),
                )
            )
    return Snapshot(nodes, tuple(pods), tuple(groups), tuple(queues))


def final_pods(
    snapshot: Snapshot, result: CycleResult
) -> dict[str, tuple[PodInfo, str, tuple[int, ...]]]:
    evicted = {e.pod for e in result.evictions}
    by_key = {p.key: p for p in snapshot.pods}
    out = {
        p.key: (p, p.node, p.gpus)
        for p in snapshot.pods
        if p.node is not None and p.key not in evicted
    }
    for b in result.bindings:
        out[b.pod] = (by_key[b.pod], b.node, b.gpus or ())
    return out


def held(snapshot: Snapshot, pod: PodInfo, node: str) -> PodSpec:
    """What ``pod`` takes on ``node``: a share sized by GPU memory, sized for its GPUs."""
    memory = {n.name: n.gpu_memory_mib or 0 for n in snapshot.nodes}
    spec = pod.spec.sized_for(memory[node])
    assert spec is not None, f"{pod.key} runs on {node}, whose GPUs cannot hold it"
    return spec


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snapshots())
def test_cycle_invariants(snapshot: Snapshot) -> None:
    result = run_cycle(snapshot, NOW, CycleConfig())
    placed = final_pods(snapshot, result)

    # No over-commit: CPU and memory per node, milli-GPU per GPU.
    cpu: dict[str, int] = defaultdict(int)
    memory: dict[str, int] = defaultdict(int)
    gpu: dict[tuple[str, int], int] = defaultdict(int)
    taken = {key: held(snapshot, pod, node) for key, (pod, node, _) in placed.items()}
    for key, (_, node, gpus) in placed.items():
        spec = taken[key]
        cpu[node] += spec.cpu_milli
        memory[node] += spec.memory_mib
        assert len(gpus) == spec.num_gpu
        for g in gpus:
            gpu[node, g] += spec.gpu_milli
    capacity = {n.name: n for n in snapshot.nodes}
    for node, used in cpu.items():
        assert used <= capacity[node].cpu_milli
        assert memory[node] <= capacity[node].memory_mib
    for (node, g), used in gpu.items():
        assert 0 <= g < capacity[node].gpus
        assert used <= MILLI

    # Gangs all-or-nothing: a gang that got a new binding has at least minMember placed.
    new = {b.pod for b in result.bindings}
    for group in snapshot.groups:
        members = [p for p in snapshot.pods if p.group == group.key]
        if any(p.key in new for p in members):
            assert sum(p.key in placed for p in members) >= group.min_member

    # Non-preemptible pods are never evicted.
    by_key = {p.key: p for p in snapshot.pods}
    for e in result.evictions:
        assert by_key[e.pod].priority < 100

    # Limits hold for every queue that received new pods (moved pods are not new).
    bound_before = {p.key for p in snapshot.pods if p.node is not None}
    tree = QueueTree.of(snapshot.queues)
    alloc = tree.subtree_sum(
        {
            q: sum(
                (request_vector(taken[k]) for k, (p, _, _) in placed.items() if p.queue == q),
                vector(),
            )
            for q in tree.queues
        }
    )
    for key in new - bound_before:
        for q in tree.paths[by_key[key].queue]:
            assert np.all(alloc[q] <= tree.queues[q].limit + EPS)

    # Reclaim (Volcano's rule): victims are taken one by one while their queue is above its
    # fair share, so a queue that lost pods to reclaim was above it before its last victim
    # (a pod, or a gang taken whole) went: with some victim back it is above its share.
    reclaimed = [by_key[e.pod] for e in result.evictions if e.action == "reclaim"]
    other_evictions = {by_key[e.pod].queue for e in result.evictions if e.action != "reclaim"}
    units: dict[str, dict[str, np.ndarray]] = defaultdict(dict)
    for victim in reclaimed:
        unit = units[victim.queue]
        assert victim.node is not None
        share = request_vector(held(snapshot, victim, victim.node))
        unit[victim.gang] = unit.get(victim.gang, vector()) + share
    for q, victims in units.items():
        if q in other_evictions:
            continue
        fair = result.fair_shares[q]
        assert any(share_ratio(alloc[q] + v, fair) > 1 + EPS for v in victims.values())


@settings(max_examples=30, deadline=None)
@given(snapshots())
def test_cycle_is_deterministic(snapshot: Snapshot) -> None:
    first = run_cycle(snapshot, NOW, CycleConfig())
    second = run_cycle(snapshot, NOW, CycleConfig())
    assert (first.bindings, first.evictions, first.pending) == (
        second.bindings,
        second.evictions,
        second.pending,
    )
