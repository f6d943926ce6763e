"""The pending jobs a cycle serves: per queue, in order, grouped by shape.

A what-if cycle reads its backlog from the snapshot and throws it away. A scheduler that
runs cycle after cycle over the cluster cache (:class:`~gpufleet.scheduler.cycle.session.Scheduler`,
the replay's) keeps one: jobs join it when their pods arrive, leave it when the cycle binds
them or their pods are deleted, and evicted jobs come back in their old place. Its point is
to make a saturated cluster cheap to schedule:

* Jobs of one *class* (queue, priority, preemption policy, the pods' requests and the
  gang's topology) are interchangeable to the placement: once the oldest of a class fails,
  the ones behind it fail too, as long as no capacity was freed since (later bindings only
  take capacity). With ``skip_failed`` the cycle drops the rest of the class in one step
  instead of trying thousands of identical jobs.
* A class's failure is remembered across cycles under a *token* (what was freed, which
  nodes are held); a later cycle skips the class without trying it until the token
  changes — in strict FIFO, the queue waits while its oldest job's class is so failed.
  When the token changed, a ``viable`` judge (the cycle's) says whether the class's next
  job is worth trying at all; :meth:`settled` tells that a cycle now would try nothing.

Each queue's next job is the oldest head among its live classes, by (-priority, created,
key), the order the cycle serves a queue in.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from typing import TYPE_CHECKING

from gpufleet.model.workload import pods_request, vector
from gpufleet.scheduler.api.job import order_key

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from gpufleet.model.arrays import FloatArray
    from gpufleet.scheduler.api.job import Job


def job_shape(job: Job, topology: object = None) -> Hashable:
    """What makes two jobs interchangeable to the placement."""
    return (
        job.priority,
        job.can_preempt,
        job.min_member,
        tuple(p.spec.request_key for p in job.pods),
        tuple(k for p in job.pods for k in p.claims),
        topology,
    )


class _Class:
    """The jobs of one class in one queue, in order, and this walk's place among them."""

    __slots__ = ("cursor", "dropped", "failed", "jobs", "shape", "viable", "walk")

    def __init__(self, shape: Hashable) -> None:
        self.shape = shape
        self.jobs: list[Job] = []
        self.walk = -1
        """The walk ``cursor`` and ``dropped`` belong to (older ones read as 0 and None)."""
        self.cursor = 0
        self.dropped: int | None = None
        self.failed: Hashable = _NEVER
        """The token the class last failed under."""
        self.viable: Hashable = _NEVER
        """The token under which its next job was last found viable (see head)."""

    def at(self, walk: int) -> int:
        """The cursor in walk ``walk`` (a new walk starts from the oldest job)."""
        if self.walk != walk:
            self.walk, self.cursor, self.dropped = walk, 0, None
        return self.cursor


_NEVER = object()
_BOUND = object()
"""A class whose job was just bound (no failure yet, but judged again like one)."""


class Backlog:
    """Pending jobs per queue and class; per-cycle cursors over them."""

    def __init__(self, skip_failed: bool = False) -> None:
        self.helped_by_bindings = 0
        """Waiting jobs with pod affinity or spread terms: another pod's binding may let
        them fit (``scheduler/cycle/dispatch.py`` ``failure_token``)."""
        self.skip_failed = skip_failed
        self._classes: dict[str, dict[Hashable, _Class]] = {}
        self._class_of: dict[str, _Class] = {}
        self._job_of: dict[str, Job] = {}
        self.demand: dict[str, FloatArray] = {}
        """Per queue: what its pending jobs ask for."""
        self._walk = 0
        self._blocked: set[str] = set()

    @staticmethod
    def of(jobs: Iterable[Job], shape: Callable[[Job], Hashable] = job_shape) -> Backlog:
        backlog = Backlog()
        for job in sorted(jobs, key=order_key):
            backlog.add(job, shape(job))
        return backlog

    def __len__(self) -> int:
        return len(self._class_of)

    def __contains__(self, key: str) -> bool:
        return key in self._class_of

    def entry(self, key: str) -> tuple[Job, Hashable] | None:
        """Pending job ``key`` and the shape it was added with (None: not pending)."""
        job = self._job_of.get(key)
        return None if job is None else (job, self._class_of[key].shape)

    def jobs(self) -> list[Job]:
        """Every pending job, queue by queue, in order."""
        return [
            job
            for queue in sorted(self._classes)
            for job in sorted(
                (j for c in self._classes[queue].values() for j in c.jobs), key=order_key
            )
        ]

    def add(self, job: Job, shape: Hashable) -> None:
        """``job`` waits, in its place by (-priority, created, key) within its class."""
        classes = self._classes.setdefault(job.queue, {})
        cls = classes.get(shape)
        if cls is None:
            cls = classes[shape] = _Class(shape)
        jobs = cls.jobs
        if not jobs or order_key(jobs[-1]) < order_key(job):
            jobs.append(job)
        else:
            bisect.insort(jobs, job, key=order_key)
        self._class_of[job.key] = cls
        self._job_of[job.key] = job
        self.demand[job.queue] = self.demand.get(job.queue, vector()) + _request(job)
        if _helped_by_bindings(job):
            self.helped_by_bindings += 1

    def remove(self, job: Job) -> None:
        if _helped_by_bindings(job):
            self.helped_by_bindings -= 1
        cls = self._class_of.pop(job.key)
        del self._job_of[job.key]
        jobs = cls.jobs
        i = 0 if jobs[0].key == job.key else next(i for i, j in enumerate(jobs) if j.key == job.key)
        del jobs[i]
        if not jobs:
            classes = self._classes[job.queue]
            del classes[cls.shape]
            if not classes:
                del self._classes[job.queue]
        self.demand[job.queue] = self.demand[job.queue] - _request(job)
        if cls.walk == self._walk and i < cls.cursor:
            cls.cursor -= 1

    # -- one cycle's walk ---------------------------------------------------------------

    def start(self) -> None:
        """Begin a cycle's walk: every class from its oldest job."""
        self._walk += 1
        self._blocked = set()

    def queues(self) -> list[str]:
        return sorted(q for q in self._classes if q not in self._blocked)

    def head(
        self,
        queue: str,
        epoch: int,
        token: Hashable,
        *,
        strict: bool = False,
        viable: Callable[[Job], bool] | None = None,
    ) -> Job | None:
        """The next job of ``queue`` in this walk (None: the queue is done). With
        ``strict`` (strict FIFO) the queue is done as soon as its oldest job's class failed
        under ``token``: the jobs behind it must not pass it. A class that failed under an
        older token is tried again only if ``viable`` says its next job may fit now (else
        it counts as failed under ``token``)."""
        if queue in self._blocked:
            return None
        best: Job | None = None
        best_key: tuple[int, float, str] | None = None
        best_failed = False
        walk = self._walk
        for cls in self._classes.get(queue, {}).values():
            i = cls.at(walk)
            if i >= len(cls.jobs) or cls.dropped == epoch:
                continue
            job = cls.jobs[i]
            if (
                self.skip_failed
                and viable is not None
                and cls.failed is not _NEVER
                and token not in {cls.failed, cls.viable}
            ):
                if viable(job):
                    cls.viable = token
                else:
                    cls.failed = token
            failed = self.skip_failed and cls.failed == token
            if failed and not strict:
                continue
            key = job.order
            if best_key is None or key < best_key:
                best, best_key, best_failed = job, key, failed
        return None if best_failed else best

    def passed(self, job: Job) -> None:
        """The walk is past ``job`` (bound, or left pending)."""
        cls = self._class_of.get(job.key)
        if cls is not None:
            cls.cursor = cls.at(self._walk) + 1

    def bound(self, job: Job) -> None:
        """``job`` was bound: the capacity it took may leave none for the next job of its
        class, so that one is judged (``viable``) before it is tried."""
        cls = self._class_of.get(job.key)
        if self.skip_failed and cls is not None:
            cls.viable = _NEVER
            if cls.failed is _NEVER:
                cls.failed = _BOUND

    def failed(self, job: Job, epoch: int, token: Hashable) -> None:
        """``job`` stays pending; with ``skip_failed`` the rest of its class does too, and
        later walks skip the class while the token is the same."""
        cls = self._class_of.get(job.key)
        if self.skip_failed and cls is not None:
            cls.at(self._walk)
            cls.dropped = epoch
            cls.failed = token

    def rest_of_class(self, job: Job) -> list[Job]:
        """The jobs of ``job``'s class behind it in this walk: with ``skip_failed`` they
        stay pending with it when it fails."""
        cls = self._class_of.get(job.key)
        return [] if cls is None else cls.jobs[cls.at(self._walk) :]

    def block(self, queue: str) -> None:
        """Strict FIFO: nothing of ``queue`` passes its first pending job this cycle."""
        self._blocked.add(queue)

    def behind(self, queue: str) -> list[Job]:
        """The jobs of ``queue`` this walk did not reach (after :meth:`block`)."""
        walk = self._walk
        return sorted(
            (
                job
                for cls in self._classes.get(queue, {}).values()
                for job in cls.jobs[cls.at(walk) :]
            ),
            key=order_key,
        )

    def settled(
        self,
        token: Hashable,
        *,
        strict: bool = False,
        viable: Callable[[Job], bool] | None = None,
    ) -> bool:
        """Whether a walk now would find nothing to try: every class failed under
        ``token`` (with ``strict``, every queue's oldest job's class did)."""
        self.start()
        return all(
            self.head(q, 0, token, strict=strict, viable=viable) is None for q in self._classes
        )


def _request(job: Job) -> FloatArray:
    return pods_request(job.pods)


def _helped_by_bindings(job: Job) -> bool:
    """Whether another pod's binding may let ``job`` fit: its pods have required pod
    affinity or topology spread constraints."""
    return any(
        p.spec.placement is not None and bool(p.spec.placement.affinity or p.spec.placement.spread)
        for p in job.pods
    )
