"""What runs where, and what each queue holds: the state every cycle starts from.

The ledger owns the cluster state with every running pod reserved on it, the running pods
by key and by gang, the gangs running below their ``minMember``, and each queue's
allocation (its subtree's, its own pods', its non-preemptible work's), claims included.
It changes one pod at a time — :meth:`Ledger.bind` a pod that runs, :meth:`Ledger.finish`
one that ended — and each change touches only that pod's node row and the queues on its
path. The cluster cache (:mod:`gpufleet.scheduler.state.cache`) keeps one ledger up to date from
events; a cycle works on it (or on an independent one, a session without assume) and
reads and changes it through
these methods (the cache also replaces a running pod's record when an event shows it
unchanged where it runs).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import ClusterState
from gpufleet.model.devices import MAX_CONSUMERS
from gpufleet.model.values import EMPTY
from gpufleet.model.volumes import NO_STORAGE, Storage, VolumeCatalog, VolumeState
from gpufleet.model.workload import (
    DEFAULT_QUEUE,
    QueueSpec,
    queue_problems,
    request_vector,
    vector,
)
from gpufleet.plugins.gpu_pick import first_free_gpus, tightest_gpu
from gpufleet.scheduler.api.job import Job, order_key
from gpufleet.scheduler.api.outcome import Why, WhyCode, why
from gpufleet.scheduler.api.transaction import Running
from gpufleet.scheduler.state.claims import ClaimBook
from gpufleet.scheduler.state.fairshare import QueueTree

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from gpufleet.model.arrays import FloatArray, IntArray
    from gpufleet.model.cluster import NodeSpec
    from gpufleet.model.pod import PodSpec
    from gpufleet.model.workload import GroupSpec, PodInfo, Snapshot


class SnapshotError(ValueError):
    """The cluster contradicts itself (e.g. bound pods over-commit a node)."""


def ledger_order(pods: Sequence[PodInfo]) -> list[PodInfo]:
    """The bound pods of ``pods`` in the order they are reserved: those whose GPUs are known
    first, then by CPU, largest first (a pinned pod without GPU indexes takes the fullest
    zone)."""
    bound = [p for p in pods if p.node is not None]
    return sorted(bound, key=lambda p: (not p.gpus, -p.spec.cpu_milli, p.key))


def queue_tree(queues: Sequence[QueueSpec], bad: Mapping[str, object] | None = None) -> QueueTree:
    """The valid queues (:func:`~gpufleet.model.workload.queue_problems`: one whose parents
    are missing, in a cycle or too deep is left out, and its pods wait), with ``default``
    added where missing (pods without a queue go there)."""
    bad = queue_problems(queues) if bad is None else bad
    valid = [q for q in queues if q.name not in bad]
    if DEFAULT_QUEUE not in {q.name for q in valid}:
        valid.append(QueueSpec(DEFAULT_QUEUE))
    return QueueTree.of(valid)


class Ledger:
    """Running pods on the cluster state and per-queue accounting (see the module doc).

    Attributes:
        state: the cluster with every running pod reserved; ``empty`` the same nodes empty.
        node_index: node name -> row of the state.
        tree: the queues; ``groups`` the PodGroups by gang key.
        running: pod key -> :class:`Running`; ``gang_running`` gang -> its running pod keys.
        partial: gangs with some pods running, fewer than their ``minMember``.
        alloc, alloc_np, own: per queue, what its subtree's pods, its subtree's
            non-preemptible pods and its own pods hold (GPUs, milli-CPU, MiB).
        versions: per queue, bumped when its allocation changes.
        released: pods whose capacity went back to the cluster (finished or evicted), ever.
        unqueued: what running pods of queues that do not exist hold.
    """

    def __init__(
        self,
        nodes: Sequence[NodeSpec],
        queues: Sequence[QueueSpec],
        groups: Mapping[str, GroupSpec],
        book: ClaimBook,
        non_preemptible_priority: int,
        *,
        storage: Storage = NO_STORAGE,
        namespaces: Mapping[str, Mapping[str, str]] = EMPTY,
    ) -> None:
        ordered = sorted(nodes, key=lambda n: n.name)
        self.state = ClusterState(ordered)
        self.state.pod_index.namespace_labels = namespaces
        self.empty = self.state.copy()  # copying arrays beats reading the nodes again
        if storage != NO_STORAGE:
            catalog = VolumeCatalog.of(storage)
            self.state.volumes = VolumeState(self.state.size, catalog)
            self.empty.volumes = VolumeState(self.state.size, catalog)
        self.node_index = {name: i for i, name in enumerate(self.state.names)}
        self.invalid_queues = queue_problems(queues)
        """Queues left out of the tree, and why (their pods wait, told so)."""
        self.tree = queue_tree(queues, self.invalid_queues)
        self.groups = dict(groups)
        self.book = book
        self.non_preemptible_priority = non_preemptible_priority
        self.running: dict[str, Running] = {}
        self.gang_running: dict[str, list[str]] = defaultdict(list)
        self.partial: set[str] = set()
        self.alloc: dict[str, FloatArray] = {q: vector() for q in self.tree.queues}
        self.alloc_np: dict[str, FloatArray] = {q: vector() for q in self.tree.queues}
        self.own: dict[str, FloatArray] = {q: vector() for q in self.tree.queues}
        self.versions: dict[str, int] = dict.fromkeys(self.tree.queues, 0)
        self.released = 0
        self.started = 0
        """Pods counted as running, ever (a binding may let a pod with pod affinity or a
        spread constraint fit where it did not)."""
        self.unqueued = vector()
        self.claim_users: dict[str, dict[str, int]] = defaultdict(dict)
        """Per queue: its running pods per ResourceClaim they use."""
        self.consumers: Counter[str] = Counter()
        """Per claim, the running pods that use it."""
        self.claim_charged: dict[str, dict[str, float]] = defaultdict(dict)
        """Per queue: the GPUs each claim its running pods use counts in its allocation
        (counted once however many pods share it; taken when its first pod started)."""

    @staticmethod
    def of(snapshot: Snapshot, non_preemptible_priority: int) -> Ledger:
        """The ledger of ``snapshot``'s nodes, queues (by name), PodGroups and claims, with
        no pod running yet (:meth:`bind_all` them)."""
        return Ledger(
            snapshot.nodes,
            sorted(snapshot.queues, key=lambda q: q.name),
            {g.key: g for g in snapshot.groups},
            ClaimBook(snapshot),
            non_preemptible_priority,
            storage=snapshot.storage,
            namespaces=snapshot.namespaces,
        )

    def on_nodes(self, snapshot: Snapshot) -> tuple[Ledger, IntArray] | None:
        """This ledger on ``snapshot``'s nodes, which differ from its own only by nodes that
        joined or left (each node in both has the same capacity in both): every pod it runs
        on a node that stays, counted as before, by copying node rows instead of reserving
        pod by pod; pods on nodes that left stop counting, as a ledger built from
        ``snapshot`` does not count them. The caller binds pods that run on nodes that
        joined. None where rows cannot be copied (dynamic MIG, DRA claims, volumes, an
        index with pods forgotten, a resource that only nodes that joined list, which the
        running pods asking for it now take): the caller builds the ledger anew. Also
        returns where each node of this ledger is in the new one (:meth:`rows_in`). Spends
        this ledger.
        """
        state = self.state
        if (
            state.mig is not None
            or snapshot.claims
            or snapshot.pools
            or snapshot.storage != NO_STORAGE
            or not state.pod_index.movable
        ):
            return None
        new = Ledger.of(snapshot, self.non_preemptible_priority)
        if new.state.mig is not None or not set(new.state.extended) <= set(state.extended):
            return None  # a resource no node had: pods of the others asking for it count now
        to = self.rows_in(new)
        for key in [k for k, r in self.running.items() if to[r.node] < 0]:
            self.finish(key)
        new.state.carry(state, to)
        new.running = {
            key: Running(r.pod, int(to[r.node]), r.gpus, r.spec) for key, r in self.running.items()
        }
        new.gang_running, new.partial, new.groups = self.gang_running, self.partial, self.groups
        new.alloc, new.alloc_np, new.own = self.alloc, self.alloc_np, self.own
        new.versions, new.unqueued = self.versions, self.unqueued
        new.started, new.released = self.started, self.released + 1  # capacity changed
        new.claim_users, new.consumers = self.claim_users, self.consumers
        new.claim_charged = self.claim_charged
        return new, to

    def rows_in(self, other: Ledger) -> IntArray:
        """Per node of this ledger, its row in ``other`` (-1: it has none there)."""
        index = other.node_index
        return np.array([index.get(name, -1) for name in self.state.names], dtype=np.int64)

    def bind_all(self, pods: Sequence[PodInfo]) -> None:
        """Reserve every bound pod of ``pods`` in :func:`ledger_order`."""
        for pod in ledger_order(pods):
            self.bind(pod)

    @property
    def capacity(self) -> FloatArray:
        """The cluster's GPUs (devices of DRA claims included), milli-CPU and MiB."""
        return vector(
            self.state.chargeable_gpus + self.book.gpu_capacity(),
            float(self.state.cpu_capacity.sum()),
            float(self.state.memory_capacity.sum()),
        )

    def subgroup_of(self, key: str) -> str:
        """The subgroup of running pod ``key`` (``""``: none)."""
        return self.running[key].pod.subgroup

    def preemptible(self, pod: PodInfo) -> bool:
        return pod.priority < self.non_preemptible_priority

    def evictable(self, pod: PodInfo) -> bool:
        """Whether running ``pod`` may ever be a victim: gpufleet's, of a known queue,
        preemptible."""
        return pod.managed and pod.queue in self.tree.queues and self.preemptible(pod)

    # -- pods in and out ----------------------------------------------------------------

    def bind(self, pod: PodInfo) -> Running:
        """Reserve bound ``pod`` where it runs: on the GPUs it names, else as gpufleet
        would have chosen them. Raises :class:`SnapshotError` if it does not fit there."""
        assert pod.node is not None
        node = self.node_index.get(pod.node)
        if node is None:
            raise SnapshotError(f"Pod {pod.key} is bound to node {pod.node}, which does not exist")
        state = self.state
        spec = state.as_run(pod.spec, node)
        if spec is None:
            raise SnapshotError(
                f"Pod {pod.key} asks for {pod.spec.gpu_memory_mib} MiB of one GPU and runs on "
                f"node {pod.node}, whose GPUs have {int(state.gpu_memory[node])} MiB "
                "(0: no label nvidia.com/gpu.memory): its share cannot be sized"
            )
        gpus = pod.gpus
        if spec.mig_profile is not None:
            dynamic = state.mig is not None and state.mig.is_dynamic(node)
            if not dynamic:
                gpus = ()
            elif not gpus:
                gpus = state.mig_gpu(node, spec) or ()
        elif not gpus and spec.num_gpu:
            if spec.is_gpu_share:
                free = state.node_gpu_free(node)
                gpus = (tightest_gpu(state, spec, node),) if free.max() >= spec.gpu_milli else ()
            elif state.pins_cpu(node, spec):
                gpus = self._pinned_gpus(node, spec)
            else:
                gpus = first_free_gpus(state, spec, node)
        try:
            state.reserve(node, spec, gpus, running=True)
        except ValueError as exc:
            raise SnapshotError(
                f"Pod {pod.key} cannot run on node {pod.node} as the snapshot says ({exc}); "
                "bound pods over-commit the node or ask for what it does not have"
            ) from None
        running = Running(pod, node, gpus, spec)
        self.add(running)
        return running

    def bind_naming(self, pod: PodInfo) -> tuple[list[Running], list[Running]]:
        """:meth:`bind` ``pod``; if the GPUs its object names are held by pods of its node
        whose GPUs were guessed (their objects name none), those give way and are bound
        again around it. The pods that stopped, and those that started (``pod`` first)."""
        try:
            return [], [self.bind(pod)]
        except SnapshotError:
            node = self.node_index.get(pod.node or "")
            guessed = [
                r for r in self.running.values() if r.node == node and r.gpus and not r.pod.gpus
            ]
            if not pod.gpus or not guessed:
                raise
        for r in guessed:
            self.finish(r.pod.key)
        started = [self.bind(pod)]
        self.bind_all([r.pod for r in guessed])
        return guessed, started + [self.running[r.pod.key] for r in guessed]

    def _pinned_gpus(self, node: int, spec: PodSpec) -> tuple[int, ...]:
        """GPUs for a running pinned pod whose GPUs the snapshot does not name: the zone
        with the most free pinned CPU that has the GPUs."""
        state = self.state
        free = np.flatnonzero(state.node_gpu_free(node) == MILLI)
        zones = state.gpu_zone[node, free]
        fitting = [
            int(z)
            for z in np.unique(zones)
            if np.count_nonzero(zones == z) >= spec.num_gpu
            and state.zone_cpu_free[node, z] >= spec.cpu_milli
        ]
        if not fitting:
            return ()
        zone = max(fitting, key=lambda z: (int(state.zone_cpu_free[node, z]), -z))
        return tuple(int(g) for g in free[zones == zone][: spec.num_gpu])

    def add(self, running: Running) -> None:
        """Count ``running`` (its capacity is already reserved on the state)."""
        pod = running.pod
        self.started += 1
        self.running[pod.key] = running
        self.gang_running[pod.gang].append(pod.key)
        self._partial(pod.gang)
        self._account(pod, running.spec, +1)
        if pod.queue not in self.tree.queues:
            self.unqueued = self.unqueued + request_vector(running.spec)

    def remove(self, key: str) -> Running:
        """Stop counting pod ``key`` (the caller releases or keeps its capacity)."""
        running = self.running.pop(key)
        self.released += 1
        keys = self.gang_running[running.pod.gang]
        keys.remove(key)
        if not keys:
            del self.gang_running[running.pod.gang]
        self._partial(running.pod.gang)
        self._account(running.pod, running.spec, -1)
        if running.pod.queue not in self.tree.queues:
            self.unqueued = self.unqueued - request_vector(running.spec)
        return running

    def finish(self, key: str) -> Running:
        """Pod ``key`` ended: free what it held."""
        running = self.remove(key)
        self.state.release(running.node, running.spec, running.gpus)
        return running

    def set_group(self, group: GroupSpec) -> None:
        self.groups[group.key] = group
        self._partial(group.key)

    def drop_group(self, key: str) -> None:
        self.groups.pop(key, None)
        self._partial(key)

    def _partial(self, gang: str) -> None:
        group = self.groups.get(gang)
        if group is not None and 0 < len(self.gang_running.get(gang, ())) < group.min_member:
            self.partial.add(gang)
        else:
            self.partial.discard(gang)

    # -- queue accounting ---------------------------------------------------------------

    def _account(self, pod: PodInfo, spec: PodSpec, sign: int) -> None:
        for key in set(pod.claims):  # a pod is reserved once, however often it names it
            self.consumers[key] += sign
            if not self.consumers[key]:
                del self.consumers[key]
        if pod.queue not in self.tree.queues:
            return
        amount = sign * request_vector(spec)
        if pod.claims:
            amount[0] += self._account_claims(pod, sign)
        self.own[pod.queue] = self.own[pod.queue] + amount
        for q in self.tree.paths[pod.queue]:
            self.versions[q] += 1
            self.alloc[q] = self.alloc[q] + amount
            if not self.preemptible(pod):
                self.alloc_np[q] = self.alloc_np[q] + amount

    def _account_claims(self, pod: PodInfo, sign: int) -> float:
        """GPUs that ``pod`` starting (+1) or ending (-1) adds to its queue's allocation
        through its claims: a claim counts when the queue's first pod using it starts, as
        its allocation then counts (scheduler/state/claims.py), until the last one ends."""
        users, charged = self.claim_users[pod.queue], self.claim_charged[pod.queue]
        change = 0.0
        for key in pod.claims:
            count = users.get(key, 0) + sign
            if sign > 0 and count == 1:
                charged[key] = self.book.allocated_gpus(key)
                change += charged[key]
            if count > 0:
                users[key] = count
            else:
                users.pop(key, None)
                change -= charged.pop(key, 0.0)
        return change

    def claim_consumers(self, key: str) -> int:
        """Running pods (of any queue, or none) that use claim ``key``: whom its
        ``status.reservedFor`` lists."""
        return self.consumers.get(key, 0)

    def claims_full(self, pods: Sequence[PodInfo]) -> Why | None:
        """Why ``pods`` wait if they would reserve a claim for more pods than Kubernetes
        allows (:data:`~gpufleet.model.devices.MAX_CONSUMERS`; None: they would not). They
        are not tried, nor room made for them: as in kube-scheduler's DRA plugin, no
        eviction helps."""
        wanted = Counter(key for pod in pods for key in set(pod.claims))
        for key, more in sorted(wanted.items()):
            if self.claim_consumers(key) + more > MAX_CONSUMERS:
                pod = next(p for p in pods if key in p.claims)
                detail = (
                    f"ResourceClaim {key} has reached its maximum number of consumers "
                    f"({MAX_CONSUMERS}, the most its status.reservedFor may hold)"
                )
                return why(WhyCode.CLAIMS, pod=pod.key, detail=detail)
        return None

    def claims_freed(self, pods: Sequence[PodInfo]) -> FloatArray:
        """GPUs (as a resource vector) that the claims of ``pods`` give back to their
        queues if all of them end: the claims no other running pod of the queue uses."""
        if not any(p.claims for p in pods):
            return vector()
        gone: dict[tuple[str, str], int] = defaultdict(int)
        for p in pods:
            for key in p.claims:
                gone[p.queue, key] += 1
        freed = 0.0
        for (queue, key), count in gone.items():
            if self.claim_users[queue].get(key, 0) <= count:
                freed += self.claim_charged[queue].get(key, 0.0)
        return vector(freed)


def with_claim_gpus(jobs: list[Job], ledger: Ledger) -> list[Job]:
    """``jobs`` with their pending pods' ``claim_gpus``: what their claims may count as,
    each claim once per queue — not where the queue's running pods hold it already, and,
    among pending pods, only for the first that uses it (jobs in serving order)."""
    book = ledger.book
    if book.allocator is None:
        return jobs
    counted = {q: set(users) for q, users in ledger.claim_users.items()}
    out = []
    for job in sorted(jobs, key=order_key):
        pods = []
        for pod in job.pods:
            seen = counted.setdefault(pod.queue, set())
            fresh = [k for k in pod.claims if k not in seen]
            seen.update(fresh)
            gpus = sum(book.most_gpus(k) for k in fresh)
            pods.append(replace(pod, claim_gpus=gpus) if gpus else pod)
        out.append(replace(job, pods=tuple(pods)))
    return out
