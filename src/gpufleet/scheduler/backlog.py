"""The pending jobs a cycle serves: per queue, in order, grouped by shape.

A what-if cycle reads its backlog from the snapshot and throws it away. A replay keeps one
backlog for the whole trace: arrivals join it, bound jobs leave it, evicted jobs come back
in their old place. Its point is to make a saturated cluster cheap to schedule:

* Jobs of one *class* (queue, priority, preemption policy, the pods' requests and the
  gang's topology) are interchangeable to the placement: once the oldest of a class fails,
  the ones behind it fail too, as long as no capacity was freed since (later bindings only
  take capacity). With ``skip_failed`` the cycle drops the rest of the class in one step
  instead of trying thousands of identical jobs.
* A class's failure is remembered across cycles under a *token* (what was freed, the
  queue's fair share); a later cycle skips the class without trying it until the token
  changes. :meth:`forget` clears the memory (the replay's periodic cycle, which lets
  min-runtime protection expire into reclaim).

Each queue's next job is the oldest head among its live classes, by (-priority, created,
key), the order the cycle serves a queue in.
"""

from __future__ import annotations

import bisect
from collections.abc import Hashable
from dataclasses import replace
from typing import TYPE_CHECKING

from gpufleet.model.workload import request_vector, vector

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from gpufleet.model.cluster import FloatArray
    from gpufleet.scheduler.cycle import Job


def order_key(job: Job) -> tuple[int, float, str]:
    return (-job.priority, job.created, job.key)


def job_shape(job: Job, topology: object = None) -> Hashable:
    """What makes two jobs interchangeable to the placement."""
    return (
        job.priority,
        job.can_preempt,
        job.min_member,
        tuple(replace(p.spec, name="") for p in job.pods),
        tuple(k for p in job.pods for k in p.claims),
        topology,
    )


class Backlog:
    """Pending jobs per queue and class; per-cycle cursors over them."""

    def __init__(self, skip_failed: bool = False) -> None:
        self.skip_failed = skip_failed
        self._classes: dict[str, dict[Hashable, list[Job]]] = {}
        self._shape: dict[str, Hashable] = {}
        self.demand: dict[str, FloatArray] = {}
        """Per queue: what its pending jobs ask for."""
        self._failed: dict[tuple[str, Hashable], Hashable] = {}
        self._cursor: dict[tuple[str, Hashable], int] = {}
        self._dropped: dict[tuple[str, Hashable], int] = {}
        self._blocked: set[str] = set()

    @staticmethod
    def of(jobs: Iterable[Job], shape: Callable[[Job], Hashable] = job_shape) -> Backlog:
        backlog = Backlog()
        for job in sorted(jobs, key=order_key):
            backlog.add(job, shape(job))
        return backlog

    def __len__(self) -> int:
        return len(self._shape)

    def __contains__(self, key: str) -> bool:
        return key in self._shape

    def jobs(self) -> list[Job]:
        """Every pending job, queue by queue, in order."""
        return [
            job
            for queue in sorted(self._classes)
            for job in sorted(
                (j for jobs in self._classes[queue].values() for j in jobs), key=order_key
            )
        ]

    def add(self, job: Job, shape: Hashable) -> None:
        """``job`` waits, in its place by (-priority, created, key) within its class."""
        jobs = self._classes.setdefault(job.queue, {}).setdefault(shape, [])
        if not jobs or order_key(jobs[-1]) < order_key(job):
            jobs.append(job)
        else:
            bisect.insort(jobs, job, key=order_key)
        self._shape[job.key] = shape
        self.demand[job.queue] = self.demand.get(job.queue, vector()) + _request(job)

    def remove(self, job: Job) -> None:
        shape = self._shape.pop(job.key)
        classes = self._classes[job.queue]
        jobs = classes[shape]
        i = 0 if jobs[0].key == job.key else next(i for i, j in enumerate(jobs) if j.key == job.key)
        del jobs[i]
        if not jobs:
            del classes[shape]
            if not classes:
                del self._classes[job.queue]
        self.demand[job.queue] = self.demand[job.queue] - _request(job)
        cursor = self._cursor.get((job.queue, shape))
        if cursor is not None and i < cursor:
            self._cursor[job.queue, shape] = cursor - 1

    # -- one cycle's walk ---------------------------------------------------------------

    def start(self) -> None:
        """Begin a cycle's walk: every class from its oldest job."""
        self._cursor = {(q, s): 0 for q, classes in self._classes.items() for s in classes}
        self._dropped = {}
        self._blocked = set()

    def queues(self) -> list[str]:
        return sorted(q for q in self._classes if q not in self._blocked)

    def head(self, queue: str, epoch: int, token: Callable[[Job], Hashable]) -> Job | None:
        """The next job of ``queue`` in this walk (None: the queue is done)."""
        if queue in self._blocked:
            return None
        best: Job | None = None
        for shape, jobs in self._classes.get(queue, {}).items():
            where = (queue, shape)
            i = self._cursor[where]
            if i >= len(jobs) or self._dropped.get(where) == epoch:
                continue
            if self.skip_failed and self._failed.get(where) == token(jobs[i]):
                continue
            if best is None or order_key(jobs[i]) < order_key(best):
                best = jobs[i]
        return best

    def passed(self, job: Job) -> None:
        """The walk is past ``job`` (bound, or left pending)."""
        if job.key in self._shape:
            where = (job.queue, self._shape[job.key])
            self._cursor[where] += 1

    def failed(self, job: Job, epoch: int, token: Hashable) -> None:
        """``job`` stays pending; with ``skip_failed`` the rest of its class does too."""
        if self.skip_failed and job.key in self._shape:
            where = (job.queue, self._shape[job.key])
            self._dropped[where] = epoch
            self._failed[where] = token

    def block(self, queue: str) -> None:
        """Strict FIFO: nothing of ``queue`` passes its first pending job this cycle."""
        self._blocked.add(queue)

    def behind(self, queue: str) -> list[Job]:
        """The jobs of ``queue`` this walk did not reach (after :meth:`block`)."""
        return sorted(
            (
                job
                for shape, jobs in self._classes.get(queue, {}).items()
                for job in jobs[self._cursor.get((queue, shape), 0) :]
            ),
            key=order_key,
        )

    def forget(self) -> None:
        """Try every class again, whatever failed before."""
        self._failed.clear()


def _request(job: Job) -> FloatArray:
    return sum((request_vector(p.spec) for p in job.pods), vector())
