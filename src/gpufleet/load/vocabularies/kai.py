"""Read KAI Scheduler's Queue and PodGroup into gpufleet's queues and gangs.

KAI's ``scheduling.run.ai/v2`` Queue is the shape gpufleet's own Queue took, with other
units and defaults, all as KAI's scheduler reads them:

* ``spec.resources.{gpu,cpu,memory}.{quota,limit,overQuotaWeight}`` are plain numbers: GPUs,
  millicores, and megabytes (10^6 bytes, which gpufleet keeps in MiB, rounded down);
* a field not written is 0 — a ``limit`` of 0 admits nothing of that resource, an
  ``overQuotaWeight`` of 0 takes no share of the surplus (KAI's docs, "Special Values");
* ``-1`` is unlimited: as a limit, none; as a quota, gpufleet sets none (no guarantee, so
  non-preemptible work is not held to a quota there) — the queue still shares the surplus
  by its weight, up to its limit;
* a quota above a limit is cut to the limit (KAI never lets a queue past its limit).

``spec.priority`` (default 100), ``spec.parentQueue`` and the two minimum runtimes mean
what gpufleet's do. ``spec.displayName`` is a label for people, not the queue's name.

KAI's ``scheduling.run.ai/v2alpha2`` PodGroup, as KAI's scheduler reads it
(``pkg/scheduler/api/podgroup_info/subgroup_info``, docs/topology/multilevel.md):

* ``spec.minMember`` (0 or absent: 1) and ``spec.queue``;
* ``spec.topologyConstraint``: ``requiredTopologyLevel`` (every pod of the gang in one
  domain of that node-label key) and ``preferredTopologyLevel`` (one domain if any holds
  it), gpufleet's required and preferred levels; ``topology`` names KAI's Topology object,
  whose levels are the same node-label keys;
* ``spec.subGroups``: each ``name`` (unique), ``minMember`` (0 or absent: 1), ``parent``
  (another subgroup; none: the PodGroup) and ``topologyConstraint`` (confining every pod
  under the subgroup). Pods name their subgroup with the label
  ``kai.scheduler/subgroup-name``. A subgroup no other names as parent is a leaf: at least
  its ``minMember`` pods start together with the rest of the gang, or none does; the gang
  needs the sum of its leaves' ``minMember`` (KAI reads no ``spec.minMember`` of a gang
  with subgroups). Pods that name no leaf subgroup are never scheduled, as in KAI. A parent
  that does not exist, or a cycle of parents, is refused as KAI refuses it; so are more
  than 16 levels.

``spec.priorityClassName`` is not read: each pod's own priority class orders and preempts.
``spec.preemptibility`` is a warning (load/objects/checks.py).
"""

from __future__ import annotations

import math

from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.vocabulary import MIB
from gpufleet.model.workload import DEFAULT_QUEUE, GroupSpec, QueueSpec, SubGroup, vector

RESOURCES = ("gpu", "cpu", "memory")
MEGABYTE = 10**6
UNLIMITED = -1


def _number(r: Reader, field: str) -> float:
    raw = r.get(field, 0)
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise r.fail(field, "a number (-1: unlimited)", raw)
    if raw < 0 and raw != UNLIMITED:
        raise r.fail(field, "0 or more, or -1 for unlimited", raw)
    return float(raw)


def _in_gpufleet_units(resource: str, value: float) -> float:
    """GPUs as GPUs, millicores as millicores, megabytes as MiB (rounded down)."""
    if resource == "memory":
        return float(math.floor(value * MEGABYTE / MIB))
    return value


def read_kai_queue(r: Reader) -> tuple[QueueSpec, tuple[bool, ...]]:
    """A KAI Queue as gpufleet's queue (see the module's docstring for the units)."""
    r.mapping("spec.resources")
    quotas, limits, weights, given = [], [], [], []
    for resource in RESOURCES:
        base = f"spec.resources.{resource}"
        r.mapping(base)
        quota = _number(r, f"{base}.quota")
        limit = _number(r, f"{base}.limit")
        weight = _number(r, f"{base}.overQuotaWeight")
        if weight == UNLIMITED:
            raise r.fail(f"{base}.overQuotaWeight", "a weight of 0 or more", weight)
        limit = math.inf if limit == UNLIMITED else _in_gpufleet_units(resource, limit)
        quota = -1.0 if quota == UNLIMITED else min(_in_gpufleet_units(resource, quota), limit)
        given.append(quota >= 0 and r.get(f"{base}.quota") is not None)
        quotas.append(max(quota, 0.0))
        limits.append(limit)
        weights.append(weight)
    parent = r.string("spec.parentQueue")
    uid, version = r.identity()
    flags = tuple(given)
    spec = QueueSpec(
        r.name,
        parent or None,
        r.integer("spec.priority", 100),
        vector(*quotas),
        vector(*limits),
        vector(*weights),
        r.duration("spec.preemptMinRuntime"),
        r.duration("spec.reclaimMinRuntime"),
        flags,
        uid=uid,
        resource_version=version,
    )
    return spec, flags


MAX_SUBGROUPS = 1024
"""Subgroups one PodGroup may have: more is a typo."""
MAX_DEPTH = 16
"""Levels of subgroups one PodGroup may nest (rack in spine in zone... is a handful): each is
a level of the gang's placement."""


def read_kai_group(r: Reader) -> GroupSpec:
    """A KAI PodGroup as a gang (see the module's docstring)."""
    queue = r.string("spec.queue")
    uid, version = r.identity()
    required, preferred = _constraint(
        r, "spec.topologyConstraint", r.get("spec.topologyConstraint")
    )
    subgroups = _subgroups(r)
    members = max(1, r.integer("spec.minMember", 1, minimum=0))  # 0: KAI's "not set"
    if subgroups:  # KAI needs each leaf's minMember, and reads no minMember of the gang
        members = sum(s.min_member for s in GroupSpec("", subgroups=subgroups).leaves)
    return GroupSpec(
        r.key,
        members,
        queue or DEFAULT_QUEUE,
        r.created(),
        topology_required=required,
        topology_preferred=preferred,
        subgroups=subgroups,
        uid=uid,
        resource_version=version,
    )


def _constraint(r: Reader, path: str, raw: object) -> tuple[str | None, str | None]:
    """The required and preferred levels of a ``topologyConstraint`` (absent: none)."""
    if raw is None:
        return None, None
    if not isinstance(raw, dict):
        raise r.fail(path, "a topologyConstraint mapping", raw)
    out = []
    for name in ("requiredTopologyLevel", "preferredTopologyLevel"):
        value = raw.get(name)
        if value is not None and not isinstance(value, str):
            raise r.fail(f"{path}.{name}", "a node label key", value)
        out.append(value or None)
    return out[0], out[1]


def _subgroups(r: Reader) -> tuple[SubGroup, ...]:
    """``spec.subGroups``, parents before children (refused: a duplicate name, a parent that
    does not exist, a cycle)."""
    raw = r.sequence("spec.subGroups")
    if len(raw) > MAX_SUBGROUPS:
        raise r.fail("spec.subGroups", f"at most {MAX_SUBGROUPS} subgroups", f"{len(raw)}")
    found: dict[str, SubGroup] = {}
    for i, item in enumerate(raw):
        path = f"spec.subGroups[{i}]"
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"]:
            raise r.fail(f"{path}.name", "a subgroup name", item)
        name = item["name"]
        if name in found:
            raise r.fail(f"{path}.name", "a name no other subgroup has", name)
        members = item.get("minMember", 0)
        if isinstance(members, bool) or not isinstance(members, int) or members < 0:
            raise r.fail(f"{path}.minMember", "an integer >= 0", members)
        parent = item.get("parent")
        if parent is not None and (not isinstance(parent, str) or not parent):
            raise r.fail(f"{path}.parent", "the name of another subgroup", parent)
        required, preferred = _constraint(
            r, f"{path}.topologyConstraint", item.get("topologyConstraint")
        )
        found[name] = SubGroup(name, max(1, members), parent, required, preferred)
    ordered: list[SubGroup] = []
    placed: set[str] = set()
    depth: dict[str, int] = {}
    for i, sub in enumerate(found.values()):
        chain: list[str] = []
        at: SubGroup | None = sub
        while at is not None and at.name not in placed:
            if at.name in chain:
                raise r.fail(f"spec.subGroups[{i}].parent", "parents without a cycle", at.name)
            chain.append(at.name)
            if at.parent is not None and at.parent not in found:
                j = list(found).index(at.name)
                raise r.fail(
                    f"spec.subGroups[{j}].parent", "the name of another subgroup", at.parent
                )
            at = found.get(at.parent) if at.parent is not None else None
        for name in reversed(chain):
            ordered.append(found[name])
            placed.add(name)
            depth[name] = 1 + depth.get(found[name].parent or "", 0)
            if depth[name] > MAX_DEPTH:
                j = list(found).index(name)
                raise r.fail(
                    f"spec.subGroups[{j}].parent", f"at most {MAX_DEPTH} levels of subgroups", name
                )
    return tuple(ordered)
