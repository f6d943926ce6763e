"""PodGroup status: how far each gang gpufleet schedules has got, and why it waits.

After each cycle the live scheduler writes ``status`` of each PodGroup one of whose pods is
its own (``spec.schedulerName``), in the fields of scheduler-plugins'
``scheduling.x-k8s.io/v1alpha1`` API, which its coscheduling controller keeps otherwise:

* ``scheduled`` — the gang's pods bound to a node (or whose bind this replica posted and
  the watch has not shown yet); ``running``, ``succeeded``, ``failed`` — its pods in that
  ``status.phase``, as the pods' objects say (kubelet writes it; the cluster cache does not
  keep it, so it is read from the pods' last objects);
* ``phase``, one of the API's ``PodGroupPhase`` values, from those counts and
  ``spec.minMember`` (``min``), the first that holds: ``Finished`` (``succeeded ≥ min``),
  ``Failed`` (a pod failed and ``failed + running + succeeded ≥ min``), ``Running``
  (``running + succeeded ≥ min``) — the controller's own rules —, ``Scheduling``
  (``scheduled ≥ min`` but ``running + succeeded < min``: placed, not yet running, as the
  API defines it), ``Unknown`` (some pods are bound, fewer than ``min``: the rest cannot be
  placed, as the API defines it), else ``Pending`` (none bound: the scheduler cannot find
  the gang room);
* ``scheduleStartTime`` — when gpufleet first wrote the group's status (kept from the
  object's status where it has one);
* a condition of type ``Scheduled``: ``True`` once ``min`` pods are bound, else ``False``,
  reason ``Unschedulable``, with why the gang waits in the words of its pods'
  ``PodScheduled`` condition (``gpufleet explain``'s). ``conditions`` and ``scheduled`` are
  not in scheduler-plugins' current CRD schema (older versions had ``scheduled``): an API
  server whose CRD prunes unknown fields drops them, and the pods' conditions and events
  still say why.

A status is written as a merge patch of ``/status`` only when it differs from the one last
written (or, after a restart, from the object's), and remembered once the server took it.

The same PodGroups also carry the annotation ``gpufleet.io/stale-since`` while their gang
runs below ``minMember``: since when the scheduler has seen it so (``Scheduler.stale``), in
RFC 3339. It is written (a merge patch of the object's metadata) when the gang becomes so
and taken away once it is whole again or has no pod running, so that a restarted or new
leader releases the gang at the end of the same grace, and a what-if over a snapshot of the
cluster knows it too. A gang read from another scheduler's PodGroup keeps its time in the
leader's memory only.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import httpx

from gpufleet.kube.read.kinds import API
from gpufleet.kube.write.recorder import rfc3339
from gpufleet.kube.write.status import JSON, StatusWriter
from gpufleet.load.objects.vocabulary import STALE_ANNOTATION
from gpufleet.model.workload import GroupSpec

if TYPE_CHECKING:
    from gpufleet.kube.read.objects import ObjectStore
    from gpufleet.scheduler.cycle.components import Components
    from gpufleet.scheduler.state.cache import ClusterCache

log = logging.getLogger("gpufleet.serve")

MARK_WAIT_S = 30.0
"""How long a stale-since mark written is waited for on the watch before it is written
again: another writer (an old leader's last patch, a ``kubectl apply``) may have changed it
meanwhile, and then the watch never shows it."""

Raw = Mapping[str, Any]


def counts(pods: Collection[Raw], posted: Collection[str]) -> dict[str, int]:
    """``scheduled``, ``running``, ``succeeded`` and ``failed`` of a gang's raw pods;
    ``posted`` the keys of pods bound but not yet shown so (module docstring)."""
    found = {"scheduled": 0, "running": 0, "succeeded": 0, "failed": 0}
    for pod in pods:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace') or 'default'}/{meta.get('name', '')}"
        if (pod.get("spec") or {}).get("nodeName") or key in posted:
            found["scheduled"] += 1
        phase = str((pod.get("status") or {}).get("phase", "")).lower()
        if phase in found:
            found[phase] += 1
    return found


def phase(min_member: int, found: Mapping[str, int]) -> str:
    """The group's phase from its counts (module docstring)."""
    running, succeeded, failed = found["running"], found["succeeded"], found["failed"]
    if succeeded >= min_member:
        return "Finished"
    if failed and failed + running + succeeded >= min_member:
        return "Failed"
    if running + succeeded >= min_member:
        return "Running"
    if found["scheduled"] >= min_member:
        return "Scheduling"
    if found["scheduled"]:
        return "Unknown"
    return "Pending"


def condition(min_member: int, found: Mapping[str, int], why: str) -> JSON:
    """The ``Scheduled`` condition, without its transition time."""
    if found["scheduled"] >= min_member:
        return {
            "type": "Scheduled",
            "status": "True",
            "reason": "Scheduled",
            "message": f"{found['scheduled']} pods bound, minMember {min_member}",
        }
    message = why or f"{found['scheduled']} of minMember {min_member} pods bound"
    return {"type": "Scheduled", "status": "False", "reason": "Unschedulable", "message": message}


class PodGroupStatus(StatusWriter):
    """Writes the status of gpufleet's PodGroups (module docstring)."""

    def __init__(self, http: httpx.AsyncClient, clock: Callable[[], float]) -> None:
        super().__init__(http, "PodGroup")
        self.clock = clock
        self.marked: dict[str, tuple[str | None, float]] = {}
        """The stale-since annotation last written per PodGroup (None: taken away) that the
        watch has not shown yet, and when it was written."""

    async def write(
        self,
        store: ObjectStore,
        cache: ClusterCache[Components],
        reasons: Mapping[str, str],
        may_act: Callable[[], bool],
    ) -> None:
        """Write each changed status; ``reasons`` why each waiting gang waits (by gang)."""
        groups = store.raw["PodGroup"]
        self.keep_only(groups)
        for key, spec, pods in _own_groups(store):
            found = counts(pods, cache.assumed)
            own = groups[key].get("status") or {}
            before = self.written.get(key) or own
            status = self._status(spec.min_member, found, reasons.get(key, ""), before)
            mine = {f: own.get(f) for f in status}  # what others write of it is theirs
            if not await self.put(key, status, mine, may_act):
                return
            if self.written.get(key) is status:
                log.info(
                    "PodGroup %s is %s (%d scheduled)", key, status["phase"], found["scheduled"]
                )

    def _status(self, min_member: int, found: Mapping[str, int], why: str, before: JSON) -> JSON:
        now = rfc3339(self.clock())
        then: JSON = next(
            (c for c in before.get("conditions") or () if c.get("type") == "Scheduled"), {}
        )
        if not why and then.get("status") == "False":
            why = str(then.get("message", ""))  # no pod said why this cycle: as before
        wanted = condition(min_member, found, why)
        wanted["lastTransitionTime"] = (
            then.get("lastTransitionTime", now) if then.get("status") == wanted["status"] else now
        )
        return {
            "phase": phase(min_member, found),
            **found,
            "scheduleStartTime": before.get("scheduleStartTime") or now,
            "conditions": [wanted],
        }

    async def mark_stale(
        self, store: ObjectStore, stale: Mapping[str, float], may_act: Callable[[], bool]
    ) -> None:
        """Write or take away each gang's ``gpufleet.io/stale-since`` (module docstring);
        ``stale``: since when each gang below ``minMember`` has been so, by gang."""
        groups = store.raw["PodGroup"]
        for key in [k for k in self.marked if k not in groups]:
            del self.marked[key]
        for key, _, _ in _own_groups(store):
            annotations = (groups[key].get("metadata") or {}).get("annotations") or {}
            have = annotations.get(STALE_ANNOTATION)
            want = rfc3339(stale[key]) if key in stale else None
            if have == want:
                self.marked.pop(key, None)  # the object says so: nothing is on its way
                continue
            written, when = self.marked.get(key, (have, -math.inf))
            if written == want and self.clock() - when < MARK_WAIT_S:
                continue  # written; the watch has not shown it yet
            if not may_act():
                return
            if await self._annotate(key, want):
                self.marked[key] = (want, self.clock())
                log.info("PodGroup %s: %s %s", key, STALE_ANNOTATION, want or "removed")

    async def _annotate(self, key: str, value: str | None) -> bool:
        version, plural = API["PodGroup"]
        namespace, _, name = key.rpartition("/")
        patch = {"metadata": {"annotations": {STALE_ANNOTATION: value}}}
        try:
            response = await self.http.patch(
                f"/apis/{version}/namespaces/{namespace}/{plural}/{name}",
                json=patch,
                headers={"Content-Type": "application/merge-patch+json"},
            )
        except httpx.HTTPError as exc:
            log.warning("%s of PodGroup %s: %s", STALE_ANNOTATION, key, exc)
            return False
        if response.status_code >= 300:
            log.warning("%s of PodGroup %s: %s", STALE_ANNOTATION, key, response.status_code)
            return False
        self.patches += 1
        return True


def _own_groups(store: ObjectStore) -> Iterator[tuple[str, GroupSpec, list[Raw]]]:
    """gpufleet's PodGroups, by key: those of scheduler-plugins' API that define their gang
    and can be read, one of whose pods is gpufleet's; each with its spec and raw pods."""
    for key in sorted(store.raw["PodGroup"]):
        spec = store.made["PodGroup"].get(key)
        if not isinstance(spec, GroupSpec) or store.defined_by("PodGroup", key) != "PodGroup":
            continue  # it cannot be read (reported as such), or another object defines it
        pods = [store.raw["Pod"][p] for p in store.dependents.pods_reading("PodGroup", key)]
        if any(_scheduler(p) in store.schedulers for p in pods):
            yield key, spec, pods


def _scheduler(pod: Raw) -> str:
    return str((pod.get("spec") or {}).get("schedulerName", "default-scheduler"))
