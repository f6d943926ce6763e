"""Builders for test objects, in kube-scheduler's wrapper style.

``pod("p").cpu(4).gpus(2).obj()`` is a pod asking for 4 CPUs and 2 whole GPUs;
``info("ns/a").gpus(2).queue("team").on("n0", 0, 1).obj()`` the same pod as a cycle reads
it, bound to GPUs 0 and 1 of node n0; ``cycle_of(nodes, pods)`` a cycle over them.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpufleet.compose import COMPONENTS
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, Snapshot
from gpufleet.scheduler.api.job import Job
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.cycle.session import snapshot_session
from gpufleet.scheduler.state.claims import ClaimBook
from gpufleet.scheduler.state.ledger import Ledger


@dataclass
class PodBuilder:
    spec: PodSpec

    def cpu(self, cores: float) -> PodBuilder:
        self.spec = replace(self.spec, cpu_milli=round(cores * 1000))
        return self

    def mem(self, mib: int) -> PodBuilder:
        self.spec = replace(self.spec, memory_mib=mib)
        return self

    def gpus(self, count: int) -> PodBuilder:
        self.spec = replace(self.spec, num_gpu=count, gpu_milli=1000 if count else 0)
        return self

    def share(self, milli: int) -> PodBuilder:
        self.spec = replace(self.spec, num_gpu=1, gpu_milli=milli)
        return self

    def gpu_memory(self, mib: int) -> PodBuilder:
        """A share of one GPU sized by GPU memory (``gpufleet.io/gpu-memory``)."""
        self.spec = replace(self.spec, num_gpu=1, gpu_milli=0, gpu_memory_mib=mib)
        return self

    def models(self, *names: str) -> PodBuilder:
        self.spec = replace(self.spec, gpu_models=frozenset(names))
        return self

    def obj(self) -> PodSpec:
        return self.spec


def pod(name: str = "p") -> PodBuilder:
    return PodBuilder(PodSpec(name, cpu_milli=1000, memory_mib=1024))


def node(
    name: str,
    cpu: float = 96,
    gpus: int = 8,
    model: str | None = "G2",
    mem: int = 393216,
    *,
    gpu_mem: int | None = None,
) -> NodeSpec:
    """A node; ``gpu_mem``: MiB of each GPU (label ``nvidia.com/gpu.memory``)."""
    return NodeSpec(
        name, round(cpu * 1000), mem, gpus, model if gpus else None, gpu_memory_mib=gpu_mem
    )


@dataclass
class InfoBuilder:
    """A pod as the cycle reads it (:class:`PodInfo`): its request, queue, gang, priority,
    and where it runs if it is bound."""

    info: PodInfo

    def _spec(self, spec: PodSpec) -> InfoBuilder:
        self.info = replace(self.info, spec=spec)
        return self

    def cpu(self, cores: float) -> InfoBuilder:
        return self._spec(replace(self.info.spec, cpu_milli=round(cores * 1000)))

    def mem(self, mib: int) -> InfoBuilder:
        return self._spec(replace(self.info.spec, memory_mib=mib))

    def gpus_only(self, count: int) -> InfoBuilder:
        """``count`` whole GPUs and no CPU or memory: GPUs are its only resource."""
        return self._spec(
            replace(self.info.spec, cpu_milli=0, memory_mib=0, num_gpu=count, gpu_milli=1000)
        )

    def gpus(self, count: int) -> InfoBuilder:
        return self._spec(replace(self.info.spec, num_gpu=count, gpu_milli=1000 if count else 0))

    def share(self, milli: int) -> InfoBuilder:
        return self._spec(replace(self.info.spec, num_gpu=1, gpu_milli=milli))

    def gpu_memory(self, mib: int, demand_milli: int = 0) -> InfoBuilder:
        """A share sized by GPU memory; ``demand_milli``: what its queue counts it at while
        it waits (the cycle sets it from the cluster)."""
        self._spec(replace(self.info.spec, num_gpu=1, gpu_milli=0, gpu_memory_mib=mib))
        self.info = replace(self.info, demand_milli=demand_milli)
        return self

    def models(self, *names: str) -> InfoBuilder:
        return self._spec(replace(self.info.spec, gpu_models=frozenset(names)))

    def queue(self, name: str) -> InfoBuilder:
        self.info = replace(self.info, queue=name)
        return self

    def priority(self, value: int) -> InfoBuilder:
        self.info = replace(self.info, priority=value)
        return self

    def gang(self, key: str) -> InfoBuilder:
        self.info = replace(self.info, group=key)
        return self

    def created(self, at: float) -> InfoBuilder:
        self.info = replace(self.info, created=at)
        return self

    def progress(self, **fields: Any) -> InfoBuilder:
        """Its expected duration, checkpoints or moves (``model/progress.py``)."""
        self.info = replace(self.info, progress=replace(self.info.progress, **fields))
        return self

    def owner(self, uid: str) -> InfoBuilder:
        """Created by the controller of uid ``uid``."""
        self.info = replace(self.info, owner=uid)
        return self

    def never_preempts(self) -> InfoBuilder:
        self.info = replace(self.info, can_preempt=False)
        return self

    def claims(self, *keys: str) -> InfoBuilder:
        self.info = replace(self.info, claims=keys)
        return self

    def on(self, node_name: str, *gpus: int, started: float = 0.0) -> InfoBuilder:
        """Bound to ``node_name`` (on GPUs ``gpus``, if given), running since ``started``."""
        self.info = replace(self.info, node=node_name, gpus=gpus, started=started)
        return self

    def obj(self) -> PodInfo:
        return self.info


def info(key: str) -> InfoBuilder:
    """A pending pod of the default queue asking for 1 CPU and 1 GiB."""
    return InfoBuilder(PodInfo(key, PodSpec(key, cpu_milli=1000, memory_mib=1024)))


def cycle_of(
    nodes: list[NodeSpec] | tuple[NodeSpec, ...],
    pods: list[PodInfo] | tuple[PodInfo, ...] = (),
    *,
    queues: tuple[QueueSpec, ...] = (),
    groups: tuple[GroupSpec, ...] = (),
    now: float = 100.0,
    config: CycleConfig | None = None,
) -> Cycle:
    """A cycle at ``now`` over a snapshot of ``nodes``, ``pods``, ``queues`` and ``groups``
    (not run: a test calls the step it is about). FGD's workload is the snapshot's pods,
    or one pod of 1 GPU if it has none."""
    snapshot = Snapshot(tuple(nodes), tuple(pods), tuple(groups), tuple(queues))
    workload = None if pods else [pod("w").gpus(1).obj()]
    return snapshot_session(
        snapshot, config or CycleConfig(), now, workload=workload, components=COMPONENTS
    ).cycle


def ledger_of(
    nodes: list[NodeSpec] | tuple[NodeSpec, ...],
    running: list[PodInfo] | tuple[PodInfo, ...] = (),
    *,
    queues: tuple[QueueSpec, ...] = (),
    groups: tuple[GroupSpec, ...] = (),
    non_preemptible_priority: int = 100,
) -> Ledger:
    """A ledger of ``nodes`` with the bound pods of ``running`` on them (no DRA objects)."""
    ledger = Ledger(
        nodes,
        queues,
        {g.key: g for g in groups},
        ClaimBook(Snapshot(tuple(nodes))),
        non_preemptible_priority,
    )
    ledger.bind_all(running)
    return ledger


def job(*pods: PodInfo, min_member: int | None = None, running: int = 0) -> Job:
    """A pending job of ``pods`` (a PodGroup's key if they have one, else the pod's): the
    first pod's queue, their highest priority, the oldest creation; ``min_member`` every
    pod by default."""
    first = pods[0]
    return Job(
        first.gang,
        first.queue,
        max(p.priority for p in pods),
        min(p.created for p in pods),
        len(pods) + running if min_member is None else min_member,
        pods,
        running,
        all(p.can_preempt for p in pods),
    )


def job_of(cycle: Cycle, key: str) -> Job:
    """The pending job ``key`` (a PodGroup's key, or a pod's on its own) of ``cycle``."""
    return next(j for j in cycle.backlog.jobs() if j.key == key)


@dataclass
class ClusterBuilder:
    nodes: list[NodeSpec] = field(default_factory=list)

    def add(self, *nodes: NodeSpec) -> ClusterBuilder:
        self.nodes.extend(nodes)
        return self

    def obj(self) -> ClusterState:
        return ClusterState(self.nodes)


def cluster(*nodes: NodeSpec) -> ClusterState:
    return ClusterState(list(nodes))


def free_of(state: ClusterState) -> tuple[list[int], list[int], list[list[int]], list[int]]:
    """What every node has free (CPU, memory, each GPU, pod slots): to compare a state before
    and after a step that must leave it as it found it."""
    return (
        state.cpu_free.tolist(),
        state.memory_free.tolist(),
        state.gpu_free.tolist(),
        state.pods_free.tolist(),
    )


def with_gpu_free(state: ClusterState, node_index: int, free: list[int]) -> ClusterState:
    """Set a node's GPUs' free milli directly (a state after some placements)."""
    state.gpu_free[node_index, : len(free)] = free
    state.refresh_gpu_totals(node_index)
    state.generation[node_index] += 1
    return state


def write_pods_csv(path: Path, pods: list[PodSpec]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli", "gpu_spec"])
        for p in pods:
            spec = "|".join(sorted(p.gpu_models)) if p.gpu_models else ""
            writer.writerow([p.name, p.cpu_milli, p.memory_mib, p.num_gpu, p.gpu_milli, spec])
    return path


def write_nodes_csv(path: Path, nodes: list[NodeSpec]) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sn", "cpu_milli", "memory_mib", "gpu", "model"])
        for n in nodes:
            writer.writerow([n.name, n.cpu_milli, n.memory_mib, n.gpus, n.gpu_model or ""])
    return path
