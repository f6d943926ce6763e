"""What a scheduling cycle reads besides nodes: pods with their queue and gang, queues.

These are the value types that ``load/`` builds from a cluster snapshot (and the simulator
from a trace); raw Kubernetes objects never reach the core. Resources are vectors over
:data:`RESOURCES` — GPUs (fractional for shares), milli-CPU and MiB of memory — so that
quotas, limits and fair shares are numpy arithmetic.

Time is seconds since the epoch, as floats; the cycle is handed ``now``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from gpufleet.model.arrays import FloatArray
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.devices import Claim, DeviceAllocation, DeviceClass, Pool
from gpufleet.model.pod import PodSpec
from gpufleet.model.progress import NO_PROGRESS, Progress
from gpufleet.model.supply import NodeOffer
from gpufleet.model.values import EMPTY, ArrayValue, frozen_map, read_only
from gpufleet.model.volumes import NO_STORAGE, Storage

RESOURCES = ("gpu", "cpu", "memory")
"""Order of the resource vectors: GPUs, milli-CPU, MiB."""

UNITS = ("GPUs", "milli-CPU", "MiB")

DEFAULT_QUEUE = "default"

NON_PREEMPTIBLE_PRIORITY = 100
"""Work at or above this priority is non-preemptible unless configured otherwise."""


def vector(gpu: float = 0.0, cpu: float = 0.0, memory: float = 0.0) -> FloatArray:
    return np.array([gpu, cpu, memory], dtype=np.float64)


def request_vector(pod: PodSpec) -> FloatArray:
    """What ``pod`` takes from its queue: GPUs (a share or MIG slice as its fraction), CPU,
    memory."""
    return vector(pod.gpu_equivalent, pod.cpu_milli, pod.memory_mib)


def pods_request(pods: Iterable[PodInfo]) -> FloatArray:
    """What pending ``pods`` ask of their queue together (see :func:`request_vector`): each
    its ``demand``, with the GPUs their ResourceClaims count as (``claim_gpus``)."""
    total = vector()
    for p in pods:
        total += request_vector(p.demand)
        total[0] += p.claim_gpus
    return total


def with_demand(pod: PodInfo, state: ClusterState) -> PodInfo:
    """Pending ``pod`` with the milli-GPU its queue counts a share sized by GPU memory at
    (:meth:`ClusterState.demand`), or what its advertised GPUs count as where some nodes'
    are not whole ones (:meth:`ClusterState.demand_unit`); other pods as they are."""
    if pod.spec.sized_by_memory:
        return replace(pod, demand_milli=state.demand(pod.spec).gpu_milli)
    if state.divided_gpus and pod.spec.advertised_gpus:
        return replace(pod, demand_unit=state.demand_unit(pod.spec))
    return pod  # demand_unit 1: nvidia.com/gpu.shared counts whole (PodSpec.charged)


UNKNOWN_AGE = math.inf
"""``created`` of an object without ``metadata.creationTimestamp`` (every object the API
server serves has one; a hand-written snapshot may not): its age is unknown, not 56 years —
it never counts as starving and sorts after every object of its priority whose age is known."""


@dataclass(frozen=True, slots=True, eq=False)
class QueueSpec(ArrayValue):
    """A queue: guaranteed ``quota``, hard ``limit`` (inf: none), ``weight`` for the surplus.

    ``quota``, ``limit`` and ``weight`` are vectors over :data:`RESOURCES`, stored as
    read-only copies; queues compare and hash by their values (:class:`ArrayValue`).
    """

    name: str
    parent: str | None = None
    priority: int = 100
    quota: FloatArray = field(default_factory=vector)
    limit: FloatArray = field(default_factory=lambda: vector(np.inf, np.inf, np.inf))
    weight: FloatArray = field(default_factory=lambda: vector(1.0, 1.0, 1.0))
    preempt_min_runtime_s: float = 0.0
    reclaim_min_runtime_s: float = 0.0
    quota_set: tuple[bool, ...] = (False, False, False)
    """Per resource: was a quota given? Only those bound non-preemptible work."""
    serving: bool = False
    """A serving queue (``spec.serving``): its unused GPU quota is lent to other queues, less
    the GPUs it is forecast to need (``forecast_gpus``), which are kept free for it
    (``scheduler/queues/admission.py``)."""
    forecast_gpus: float = 0.0
    """GPUs a serving queue's services are forecast to need over the reclaim horizon
    (``spec.serving.forecastGPUs``): lending keeps ``min(quota, forecast)`` within its reach."""
    forecast_query: str = ""
    """A PromQL query of the GPUs it will need (``spec.serving.forecastQuery``), which the live
    scheduler asks its forecast Prometheus (``kube/process/forecast.py``); empty: none."""
    uid: str = field(default="", compare=False)
    """``metadata.uid`` and ``resource_version`` its ``metadata.resourceVersion`` (empty: not
    read from a cluster): which object and which write of it, not what it holds, so neither
    takes part in ``==`` or ``hash`` (likewise for pods, PodGroups and nodes)."""
    resource_version: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "quota", read_only(self.quota))
        object.__setattr__(self, "limit", read_only(self.limit))
        object.__setattr__(self, "weight", read_only(self.weight))


@dataclass(frozen=True, slots=True)
class PodInfo:
    """One pod of the snapshot: its request and everything the cycle orders and judges by.

    ``node``/``gpus`` say where a bound pod runs (GPU indexes on that node); ``started`` is
    when it started running (for min-runtime protection). ``managed`` pods are gpufleet's to
    schedule; the others only take capacity.
    """

    key: str
    spec: PodSpec
    queue: str = DEFAULT_QUEUE
    group: str = ""
    """Gang key (``namespace/podgroup``); a pod without a PodGroup is its own gang."""
    priority: int = 0
    can_preempt: bool = True
    """False for ``preemptionPolicy: Never``: the pod waits rather than evict anyone."""
    created: float = 0.0
    node: str | None = None
    gpus: tuple[int, ...] = ()
    started: float | None = None
    managed: bool = True
    claims: tuple[str, ...] = ()
    """Keys (``namespace/name``) of the ResourceClaims the pod uses."""
    blocked: str = ""
    """Why the pod may not be scheduled whatever the cluster holds (its scheduling gates, its
    deletion, a PodGroup that does not exist); empty: it may. Only pending pods are blocked."""
    claim_gpus: float = 0.0
    """For a pending pod: the most GPUs its claims may count as toward its queue, beyond
    its container requests (scheduler/state/claims.py; a claim its queue already holds, or an
    earlier pending pod of its queue counts, is not counted again). Set by the cycle."""
    uid: str = field(default="", compare=False)
    """``metadata.uid`` (empty: not read from a cluster); not compared, as for queues."""
    resource_version: str = field(default="", compare=False)
    """``metadata.resourceVersion``; not compared."""
    demand_milli: int = 0
    """For a pending pod whose share is sized by GPU memory: the milli-GPU its queue counts
    it at (:func:`with_demand`; set by the cycle). A bound pod counts the share it takes on
    its node instead."""
    subgroup: str = ""
    """The gang's subgroup the pod belongs to (:class:`SubGroup`; empty: none)."""
    demand_unit: float = 1.0
    """For a pending pod asking advertised GPUs: what one counts as toward its queue
    (:func:`with_demand`; set by the cycle). A bound pod counts its node's worth instead."""
    progress: Progress = NO_PROGRESS
    """Its expected duration, checkpoints and moves (``model/progress.py``)."""
    owner: str = field(default="", compare=False)
    """The uid of its controller (the ``metadata.ownerReferences`` entry with ``controller:
    true``; empty: none), which recreates it when it is evicted; not compared."""
    daemon: bool = field(default=False, compare=False)
    """A DaemonSet's pod or a static (mirror) pod: it runs on its node for the node's sake and
    goes with it, so it does not keep a node from being emptied (Cluster Autoscaler's rule);
    not compared."""

    @property
    def demand(self) -> PodSpec:
        """What the pod asks of its queue while it waits: its spec, with a share sized by GPU
        memory at ``demand_milli`` (an error if the cycle did not set it) and advertised GPUs
        at ``demand_unit``."""
        if self.spec.sized_by_memory:
            return self.spec.with_share(self.demand_milli)
        return self.spec.charged(self.demand_unit)

    @property
    def gang(self) -> str:
        return self.group or self.key

    @property
    def bound(self) -> bool:
        return self.node is not None

    def placed(self, node: str | None, gpus: tuple[int, ...], started: float) -> PodInfo:
        """The pod running on ``node`` on ``gpus`` since ``started``: ``replace(self, node=,
        gpus=, started=)`` spelt out, as a scheduler makes one per binding and a generic copy
        costs twice as much (``tests/model/test_values.py`` checks that every field is copied)."""
        return PodInfo(
            self.key,
            self.spec,
            self.queue,
            self.group,
            self.priority,
            self.can_preempt,
            self.created,
            node,
            gpus,
            started,
            self.managed,
            self.claims,
            self.blocked,
            self.claim_gpus,
            self.uid,
            self.resource_version,
            self.demand_milli,
            self.subgroup,
            self.demand_unit,
            self.progress,
            self.owner,
            self.daemon,
        )


MAX_QUEUE_DEPTH = 64
"""Levels of parent queues a queue may have under it (organisations nest a handful): a
deeper one is not valid, so no walk over the tree is longer."""


@dataclass(frozen=True, slots=True)
class QueueProblem:
    """Why a queue is not valid: its chain of parents breaks (``missing``: its parent
    ``parent`` does not exist; ``cycle``: it is in ``chain``, which comes back to itself;
    ``under``: it is under ``parent``, which is not valid; ``deep``: more than
    :data:`MAX_QUEUE_DEPTH` levels are above it)."""

    kind: str
    parent: str = ""
    chain: tuple[str, ...] = ()

    def text(self, missing: str = "which does not exist") -> str:
        if self.kind == "missing":
            return f"names parent queue {self.parent!r}, {missing}"
        if self.kind == "cycle":
            return f"is in a cycle of parent queues: {' → '.join(self.chain)}"
        if self.kind == "under":
            return f"is under queue {self.parent!r}, which is not valid"
        return f"has more than {MAX_QUEUE_DEPTH} levels of parent queues above it"


def queue_problems(queues: Iterable[QueueSpec]) -> dict[str, QueueProblem]:
    """The queues whose chain of parents does not end at a top-level queue within
    :data:`MAX_QUEUE_DEPTH` levels, and why. Each queue is walked once (what a walk finds
    is kept for the queues below): no recursion, linear in the queues whatever they say."""
    by_name = {q.name: q for q in queues}
    depth: dict[str, int] = {}
    """Valid queues: how many parents are above each."""
    bad: dict[str, QueueProblem] = {}
    for name in by_name:
        chain, found, above, at = _walk(name, by_name, depth, bad)
        if found is not None:
            _blame(chain, found, at if at in bad else None, bad)
            continue
        for i, queue_name in enumerate(reversed(chain)):  # the top of the chain first
            if above + 1 + i > MAX_QUEUE_DEPTH:
                bad[queue_name] = QueueProblem("deep")
            else:
                depth[queue_name] = above + 1 + i
    return bad


def _walk(
    name: str,
    by_name: Mapping[str, QueueSpec],
    depth: Mapping[str, int],
    bad: Mapping[str, QueueProblem],
) -> tuple[list[str], QueueProblem | None, int, str | None]:
    """From ``name`` up to a queue judged already, the top or a break: the queues walked,
    the problem found (None: none), the parents above the last one walked (valid chains)
    and where the walk stopped."""
    chain: list[str] = []
    walked: set[str] = set()  # chain's members: a list's "in" would make the walk quadratic
    at: str | None = name
    while at is not None:
        if at in depth:
            return chain, None, depth[at], at
        if at in bad:
            return chain, bad[at], 0, at
        if at in walked:
            return chain, QueueProblem("cycle", at, (*chain[chain.index(at) :], at)), 0, at
        queue = by_name.get(at)
        if queue is None:
            return chain, QueueProblem("missing", at, tuple(chain)), 0, at
        chain.append(at)
        walked.add(at)
        at = queue.parent
    return chain, None, -1, None


def _blame(
    chain: list[str], found: QueueProblem, judged: str | None, bad: dict[str, QueueProblem]
) -> None:
    """Give the queues of ``chain`` their problem: the queue naming a missing parent and
    the members of a cycle have it; those below them (or below ``judged``, a queue found
    invalid before) are under it; below a queue too deep, all are too deep."""
    if judged is not None:
        own: set[str] = set()
        root = judged
    elif found.kind == "cycle":
        own, root = set(found.chain[:-1]), found.parent
    else:
        own, root = {chain[-1]}, chain[-1]
    for queue_name in chain:
        if found.kind == "deep" or queue_name in own:
            bad[queue_name] = found
        else:
            bad[queue_name] = QueueProblem("under", root)


@dataclass(frozen=True, slots=True)
class SubGroup:
    """A named part of a gang (KAI's PodGroup ``spec.subGroups``): pods name theirs (KAI's
    label ``kai.scheduler/subgroup-name``). A subgroup no other names as ``parent`` is a
    leaf: at least ``min_member`` of its pods run together or the gang does not start. A
    subgroup's topology levels (node-label keys) confine all pods under it, its
    descendants' included, as a PodGroup's confine the whole gang."""

    name: str
    min_member: int = 1
    parent: str | None = None
    required: str | None = None
    preferred: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    """A PodGroup: ``min_member`` pods together or none; ``stale_since`` see the cycle."""

    key: str
    min_member: int = 1
    queue: str = DEFAULT_QUEUE
    created: float = 0.0
    stale_since: float | None = None
    topology_required: str | None = None
    """Node-label key of the level whose one domain must hold the whole gang."""
    topology_preferred: str | None = None
    """Node-label key of the level whose one domain should hold the gang, if any can."""
    device_match: str | None = None
    """A device attribute (``gpu.nvidia.com/clique``) every device of the gang's claims must
    share: the gang's claims are allocated as one problem."""
    min_resources: tuple[float, ...] | None = None
    """What the gang needs to start, over :data:`RESOURCES` (PodGroup ``spec.minResources``;
    None: not written): it is not tried while the cluster's free resources, with what its own
    running pods hold, fall short of a resource it asks for (0: asks nothing of it)."""
    min_resources_in_queue: bool = False
    """``min_resources`` must also fit each of its queues' room under their limits (Volcano's
    enqueue), with what its own running pods hold counted as room."""
    stale_grace_s: float | None = None
    """How long the gang may run below ``min_member`` before its running pods are released
    (PodGroup ``spec.scheduleTimeoutSeconds``); None: the cycle's grace."""
    succeeded: int = 0
    """Pods of the gang that succeeded (``status.phase``). A gang one of whose pods finished
    is never stale: its other members finish at their own pace (KAI's rule)."""
    subgroups: tuple[SubGroup, ...] = ()
    """The gang's parts (:class:`SubGroup`), parents before children; ``min_member`` is at
    least the sum of its leaves'."""
    uid: str = field(default="", compare=False)
    """``metadata.uid`` (empty: not read from a cluster); not compared, as for queues."""
    resource_version: str = field(default="", compare=False)
    """``metadata.resourceVersion``; not compared."""

    def placement_order(
        self,
    ) -> tuple[dict[str | None, tuple[SubGroup, ...]], tuple[SubGroup, ...]]:
        """The subgroups under each parent (None: the gang) in the order they are placed —
        those confined to a domain (or with a confined one below) first, then the larger
        (more pods needed below), then as listed — and the leaves depth first in that
        order (one pass each way over the subgroups, which come parents first; no
        recursion). A walk of the tree asks this once."""
        under: dict[str | None, list[SubGroup]] = {}
        for sub in self.subgroups:
            under.setdefault(sub.parent, []).append(sub)
        size: dict[str, int] = {}
        confined: dict[str, bool] = {}
        for sub in reversed(self.subgroups):  # children before their parents
            below = under.get(sub.name, [])
            size[sub.name] = sum(size[c.name] for c in below) if below else sub.min_member
            confined[sub.name] = bool(sub.required or sub.preferred) or any(
                confined[c.name] for c in below
            )
        order = {s.name: i for i, s in enumerate(self.subgroups)}
        ordered = {
            parent: tuple(
                sorted(subs, key=lambda s: (not confined[s.name], -size[s.name], order[s.name]))
            )
            for parent, subs in under.items()
        }
        leaves: list[SubGroup] = []
        stack = list(reversed(ordered.get(None, ())))
        while stack:
            sub = stack.pop()
            if sub.name in ordered:
                stack.extend(reversed(ordered[sub.name]))
            else:
                leaves.append(sub)
        return ordered, tuple(leaves)

    @property
    def leaves(self) -> tuple[SubGroup, ...]:
        """The subgroups no other one names as its parent, in placement order (depth first
        by :meth:`placement_order`): the leaves under any one subgroup are next to one
        another."""
        return self.placement_order()[1]

    @property
    def sub_constrained(self) -> bool:
        """Whether a subgroup confines its pods to a topology domain."""
        return any(s.required or s.preferred for s in self.subgroups)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything one cycle needs, as read from a cluster (or a trace)."""

    nodes: tuple[NodeSpec, ...]
    pods: tuple[PodInfo, ...] = ()
    groups: tuple[GroupSpec, ...] = ()
    queues: tuple[QueueSpec, ...] = ()
    topology: tuple[str, ...] = ()
    """Node-label keys of the topology levels, widest first (the Topology object)."""
    device_classes: tuple[DeviceClass, ...] = ()
    pools: tuple[Pool, ...] = ()
    claims: tuple[Claim, ...] = ()
    allocations: Mapping[str, DeviceAllocation] = EMPTY
    """Claims already allocated (by key)."""
    storage: Storage = NO_STORAGE
    """StorageClasses, PersistentVolumes and their claims, CSINodes."""
    namespaces: Mapping[str, Mapping[str, str]] = EMPTY
    """Per Namespace object, its labels (what pod affinity's namespace selectors read)."""
    offers: tuple[NodeOffer, ...] = ()
    """The node types the cluster may buy (NodePools with ``spec.autoscaling``)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "allocations", frozen_map(self.allocations))
        object.__setattr__(
            self, "namespaces", frozen_map({k: frozen_map(v) for k, v in self.namespaces.items()})
        )


@dataclass(frozen=True, slots=True)
class ReplayJob:
    """One job of a trace: ``pods`` identical pods of ``spec``, from ``queue`` (the tenant)."""

    name: str
    queue: str
    arrival_s: float
    duration_s: float
    spec: PodSpec
    pods: int = 1
    min_pods: int = 0
    """The pods it needs to run (its PodGroup's ``minMember``; 0: all of them). An elastic
    job (fewer than ``pods``) starts with ``min_pods`` and grows as its other pods bind."""

    @property
    def gpus(self) -> float:
        return self.pods * self.spec.gpu_equivalent

    @property
    def core_pods(self) -> int:
        """How many of its pods must run together: ``min_pods``, else all."""
        return self.min_pods or self.pods
