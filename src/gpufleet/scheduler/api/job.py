"""The unit a cycle schedules: a job, the pending pods of a PodGroup or one pod on its own.

A job needs ``minMember`` minus its running pods placed together (its *core*); pods beyond
that are elastic extras, placed if they fit. :func:`build_jobs` groups a snapshot's pending
gpufleet pods into jobs; a replay builds its own as its trace's jobs arrive.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from gpufleet.model.cluster import ClusterState
from gpufleet.model.workload import GroupSpec, PodInfo, Snapshot, with_demand


@dataclass(frozen=True, slots=True)
class Job:
    key: str
    queue: str
    priority: int
    created: float
    min_member: int
    pods: tuple[PodInfo, ...]
    """Pending pods, core first."""
    running: int
    can_preempt: bool
    short: tuple[str, int, int] | None = None
    """A subgroup of the gang with fewer pods than its ``minMember``: (name, pods, minMember)."""
    core_size: int | None = None
    """How many of ``pods`` (first) are the core, where the gang's subgroups say it (what each
    leaf lacks of its ``minMember``); None: what the gang lacks of ``min_member``."""
    strays: frozenset[str] = frozenset()
    """Pods of a gang with subgroups that name no leaf subgroup of it: never placed."""
    need: int = field(init=False, repr=False, compare=False)
    """How many of ``pods`` are its core: what it lacks of ``min_member``, or ``core_size``."""
    core: tuple[PodInfo, ...] = field(init=False, repr=False, compare=False)
    """The pods that must be placed together (``pods``' first ``need``)."""
    order: tuple[int, float, str] = field(init=False, repr=False, compare=False)
    """Where it stands in its queue (:func:`order_key`)."""

    def __post_init__(self) -> None:
        # A cycle asks these of each waiting job many times over: found once (frozen).
        need = self.core_size
        if need is None:
            need = min(len(self.pods), max(0, self.min_member - self.running))
        object.__setattr__(self, "need", need)
        object.__setattr__(self, "core", self.pods[:need])
        object.__setattr__(self, "order", (-self.priority, self.created, self.key))

    @property
    def incomplete(self) -> bool:
        """Fewer pods exist (running and pending) than ``minMember``, or than a subgroup's:
        it cannot start."""
        return self.running + len(self.pods) < self.min_member or self.short is not None

    @property
    def extras(self) -> tuple[PodInfo, ...]:
        return self.pods[self.need :]


def order_key(job: Job) -> tuple[int, float, str]:
    """The order a queue serves its jobs in: priority, then age, then name."""
    return job.order


def job_gpus(job: Job) -> float:
    """GPUs the job's core asks for (what starvation protection compares)."""
    return sum(p.demand.total_gpu_milli for p in job.core) / 1000


def build_jobs(
    pods: Iterable[PodInfo],
    groups: Mapping[str, GroupSpec],
    running: Mapping[str, Sequence[str]],
    state: ClusterState,
    subgroup_of: Callable[[str], str] | None = None,
) -> list[Job]:
    """The jobs of the pending gpufleet pods among ``pods``: one per PodGroup (or pod on its
    own), its pods by priority, then age; ``running`` has each gang's running pods (and
    ``subgroup_of`` the subgroup of a running pod, by key); a share sized by GPU memory
    counts as its least share on ``state`` (:func:`with_demand`)."""
    pending: dict[str, list[PodInfo]] = defaultdict(list)
    for pod in pods:
        if not pod.bound and pod.managed and not pod.blocked:
            pending[pod.gang].append(with_demand(pod, state))
    jobs = []
    for key, found in pending.items():
        group = groups.get(key)
        members = sorted(found, key=lambda p: (-p.priority, p.created, p.key))
        first = members[0]
        job = Job(
            key,
            group.queue if group is not None and first.queue == "" else first.queue,
            max(p.priority for p in members),
            group.created if group is not None else min(p.created for p in members),
            group.min_member if group is not None else 1,
            tuple(members),
            len(running.get(key, ())),
            all(p.can_preempt for p in members),
        )
        if group is not None and group.subgroups:
            ran = running.get(key, ())
            job = by_subgroup(job, group, [subgroup_of(k) for k in ran] if subgroup_of else [])
        jobs.append(job)
    return jobs


def by_subgroup(job: Job, group: GroupSpec, running: Sequence[str]) -> Job:
    """``job`` of a gang with subgroups, as KAI reads it: each leaf subgroup lacks what its
    running pods (``running``: their subgroups) fall short of its ``minMember``; the core is
    that many of each leaf's pending pods, leaf after leaf in the order the gang is placed
    (:func:`~gpufleet.scheduler.placement.topology.gang_tree`), then the leaves' other
    pods as elastic ones. A leaf with too few pods makes the job ``short``; pods that name
    no leaf subgroup are ``strays`` (last, never placed: KAI does not schedule them)."""
    leaves = group.leaves
    mine: dict[str, list[PodInfo]] = {leaf.name: [] for leaf in leaves}
    strays: list[PodInfo] = []
    for pod in job.pods:
        mine.get(pod.subgroup, strays).append(pod)
    core: list[PodInfo] = []
    extras: list[PodInfo] = []
    short = None
    for leaf in leaves:
        lacking = max(0, leaf.min_member - sum(1 for s in running if s == leaf.name))
        pods = mine[leaf.name]
        if len(pods) < lacking and short is None:
            short = (leaf.name, leaf.min_member - lacking + len(pods), leaf.min_member)
        core.extend(pods[:lacking])
        extras.extend(pods[lacking:])
    return replace(
        job,
        min_member=sum(leaf.min_member for leaf in leaves),
        pods=(*core, *extras, *strays),
        short=short,
        core_size=len(core),
        strays=frozenset(p.key for p in strays),
    )


def snapshot_jobs(snapshot: Snapshot, state: ClusterState) -> list[Job]:
    """The jobs of a snapshot's pending pods (see :func:`build_jobs`)."""
    running: dict[str, list[str]] = defaultdict(list)
    subgroups: dict[str, str] = {}
    for pod in snapshot.pods:
        if pod.bound:
            running[pod.gang].append(pod.key)
            subgroups[pod.key] = pod.subgroup
    groups = {g.key: g for g in snapshot.groups}
    return build_jobs(snapshot.pods, groups, running, state, subgroups.__getitem__)
