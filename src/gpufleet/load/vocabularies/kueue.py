"""Read Kueue's ClusterQueues, Cohorts and LocalQueues into gpufleet's queues.

Kueue admits workloads against quotas, never against nodes: a ClusterQueue holds nominal
quotas per resource and flavor, the ClusterQueues of one cohort borrow each other's unused
quota, and a namespaced LocalQueue is the name a workload gives its ClusterQueue. gpufleet
reads them in ``kueue.x-k8s.io/v1beta2`` (Kueue's storage version) and ``v1beta1``, as Kueue's
API types and its docs ("Cluster Queue", "Cohort", "Local Queue") define them:

* a ClusterQueue is the queue of its name. For each resource gpufleet counts
  (``nvidia.com/gpu``, ``cpu``, ``memory``; ``pods`` and other resources are not read), its
  quota is ``nominalQuota`` summed over the flavors of ``spec.resourceGroups``: a flavor is
  not a node selector in gpufleet, so its quota counts on any node;
* a resource none of its resource groups covers is one Kueue admits no workload asking
  for: its quota and limit are 0;
* its cohort (``spec.cohortName``; ``spec.cohort`` in v1beta1) is its parent: a queue named as
  the cohort, whose quota *and* limit are the nominal quotas of everything in the cohort
  summed — what the cohort's ClusterQueues may use together, borrowing or not;
* in a cohort, a ClusterQueue may use its nominal quota plus its ``borrowingLimit`` (summed
  over its flavors); where a flavor sets none, it borrows without a bound of its own, up to
  what the cohort holds. Without a cohort it cannot borrow: its limit is its nominal quota
  (and a ``borrowingLimit`` there is refused, as Kueue's validation refuses it);
* a Cohort object (hierarchical cohorts) adds its own ``nominalQuota`` to its cohort and
  names its parent cohort in ``spec.parentName``. A cohort with a parent may use what its
  subtree holds plus its ``borrowingLimit`` (none: no bound of its own); a cohort without one
  what its subtree holds. A cohort that only ClusterQueues (or a child's ``parentName``)
  name has no quota of its own and no parent, as in Kueue; parents in a cycle are refused;
* ``spec.fairSharing.weight`` (a quantity, default 1; 0 takes no share of what is left) is
  the queue's weight for every resource. Kueue's queues have no priority: gpufleet's default
  (100) is theirs;
* a LocalQueue names its ClusterQueue in ``spec.clusterQueue``; a pod labelled
  ``kueue.x-k8s.io/queue-name: NAME`` belongs to the ClusterQueue of LocalQueue ``NAME`` of the
  pod's namespace (:func:`gpufleet.load.objects.pods.read_pod`).

What Kueue's validation refuses is refused here, naming the object and field: a negative
quantity, a flavor whose resources are not the group's covered resources in their order, a
resource or flavor in two groups. ResourceFlavors,
``lendingLimit``, preemption, admission checks, ``namespaceSelector``, ``stopPolicy``,
``queueingStrategy`` and ``flavorFungibility`` are not read (docs/migration.md says what
gpufleet does instead).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal

from gpufleet.load.errors import InputError
from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.vocabulary import LIST_RESOURCES, in_units
from gpufleet.model.workload import QueueSpec, vector

V1BETA1 = "kueue.x-k8s.io/v1beta1"
"""The deprecated version: it names a ClusterQueue's cohort ``spec.cohort``."""


@dataclass(frozen=True, slots=True)
class Quotas:
    """What a ClusterQueue's or Cohort's resource groups give, per resource of
    :data:`LIST_RESOURCES` in gpufleet's units, flavors summed: ``nominal`` quota,
    ``borrowing`` limit (None: none, where a flavor sets none) and whether it is ``covered``."""

    nominal: tuple[float, ...] = (0.0, 0.0, 0.0)
    borrowing: tuple[float | None, ...] = (None, None, None)
    covered: tuple[bool, ...] = (False, False, False)


@dataclass(frozen=True, slots=True)
class QuotaNode:
    """A ClusterQueue or Cohort as read: its name, its cohort (a Cohort's parent) and the
    field that names it, its quotas and its weight."""

    name: str
    parent: str | None
    quotas: Quotas
    weight: float = 1.0
    parent_field: str = "spec.parentName"
    uid: str = ""
    resource_version: str = ""


@dataclass(frozen=True, slots=True)
class NamedBy:
    """A cohort no Cohort object defines, and the object and field that name it (to say
    where a queue of that name came from if another object defines one too)."""

    cohort: str
    field: str
    reader: Reader


def _cohort_field(r: Reader) -> str:
    """Where the ClusterQueue's version writes its cohort; the other version's name for it
    is refused rather than silently dropped."""
    field, other = ("spec.cohort", "spec.cohortName")
    if r.obj.get("apiVersion") != V1BETA1:
        field, other = other, field
    if r.get(other) is not None:
        raise r.fail(
            other, f"{field} (the cohort's field in {r.obj.get('apiVersion')})", r.get(other)
        )
    return field


def _names(r: Reader, field: str, value: object) -> list[str]:
    """A non-empty list of resource names."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise r.fail(field, "a list of resource names, such as [cpu, nvidia.com/gpu]", value)
    return value


def _quotas(r: Reader, *, may_borrow: str) -> Quotas:
    """The resource groups of ``r``, flavors summed. ``may_borrow`` is empty where the object
    may set a ``borrowingLimit``, else why it may not."""
    nominal = dict.fromkeys(LIST_RESOURCES, Decimal(0))
    borrowing: dict[str, Decimal | None] = dict.fromkeys(LIST_RESOURCES, Decimal(0))
    covered_by: dict[str, str] = {}
    flavors_seen: dict[str, str] = {}
    for i, group in enumerate(r.sequence("spec.resourceGroups")):
        base = f"spec.resourceGroups[{i}]"
        if not isinstance(group, Mapping):
            raise r.fail(base, "a resource group (coveredResources, flavors)", group)
        covered = _names(r, f"{base}.coveredResources", group.get("coveredResources"))
        for j, res in enumerate(covered):
            field = f"{base}.coveredResources[{j}]"
            if res in covered_by:
                raise r.fail(field, f"a resource of one group ({covered_by[res]} has it)", res)
            covered_by[res] = field
        flavors = group.get("flavors")
        if not isinstance(flavors, list) or not flavors:
            raise r.fail(f"{base}.flavors", "a list of flavors (name, resources)", flavors)
        for j, flavor in enumerate(flavors):
            at = f"{base}.flavors[{j}]"
            if not isinstance(flavor, Mapping):
                raise r.fail(at, "a flavor (name, resources)", flavor)
            name = flavor.get("name")
            if not isinstance(name, str) or not name:
                raise r.fail(f"{at}.name", "the name of a ResourceFlavor", name)
            if name in flavors_seen:
                raise r.fail(f"{at}.name", f"a flavor of one group ({flavors_seen[name]})", name)
            flavors_seen[name] = f"{at}.name"
            for res, amount, limit in _flavor(r, at, flavor, covered, may_borrow):
                nominal[res] += amount
                so_far = borrowing[res]
                borrowing[res] = None if so_far is None or limit is None else so_far + limit
    return Quotas(
        tuple(in_units(res, nominal[res]) for res in LIST_RESOURCES),
        tuple(
            None if (b := borrowing[res]) is None or res not in covered_by else in_units(res, b)
            for res in LIST_RESOURCES
        ),
        tuple(res in covered_by for res in LIST_RESOURCES),
    )


def _flavor(
    r: Reader, at: str, flavor: Mapping[str, object], covered: list[str], may_borrow: str
) -> list[tuple[str, Decimal, Decimal | None]]:
    """(resource, nominal quota, borrowing limit or None) of the flavor at ``at``, for each
    resource gpufleet counts; every resource's quota is checked."""
    quotas = flavor.get("resources")
    if not isinstance(quotas, list) or len(quotas) != len(covered):
        raise r.fail(
            f"{at}.resources",
            f"a quota for each covered resource ({', '.join(covered)}), in that order",
            quotas,
        )
    out = []
    for k, (quota, res) in enumerate(zip(quotas, covered, strict=True)):
        at_k = f"{at}.resources[{k}]"
        if not isinstance(quota, Mapping) or quota.get("name") != res:
            got = quota.get("name") if isinstance(quota, Mapping) else quota
            raise r.fail(f"{at_k}.name", f"{res!r} (coveredResources[{k}])", got)
        amount = r.quantity(f"{at_k}.nominalQuota", quota.get("nominalQuota"))
        limit = quota.get("borrowingLimit")
        if limit is not None and may_borrow:
            raise r.fail(f"{at_k}.borrowingLimit", may_borrow, limit)
        borrow = None if limit is None else r.quantity(f"{at_k}.borrowingLimit", limit)
        if res in LIST_RESOURCES:
            out.append((res, amount, borrow))
    return out


def _weight(r: Reader) -> float:
    """``spec.fairSharing.weight``: a quantity, 1 where not written."""
    r.mapping("spec.fairSharing")
    raw = r.get("spec.fairSharing.weight")
    if raw is None:
        return 1.0
    return float(r.quantity("spec.fairSharing.weight", raw))


def read_cluster_queue(r: Reader) -> QuotaNode:
    """A ClusterQueue: its cohort, quotas and weight (the limits need its cohort's other
    members: :func:`kueue_queues`)."""
    field = _cohort_field(r)
    cohort = r.string(field) or None
    may_borrow = "" if cohort else f"no borrowingLimit in a ClusterQueue without a cohort ({field})"
    uid, version = r.identity()
    quotas = _quotas(r, may_borrow=may_borrow)
    return QuotaNode(r.name, cohort, quotas, _weight(r), field, uid, version)


def read_cohort(r: Reader) -> QuotaNode:
    """A Cohort: its parent cohort, its own quotas and its weight."""
    parent = r.string("spec.parentName") or None
    may_borrow = (
        "" if parent else "no borrowingLimit in a Cohort without a parent (spec.parentName)"
    )
    uid, version = r.identity()
    quotas = _quotas(r, may_borrow=may_borrow)
    return QuotaNode(r.name, parent, quotas, _weight(r), uid=uid, resource_version=version)


def read_local_queue(r: Reader) -> tuple[str, str]:
    """A LocalQueue: its ``namespace/name`` and the ClusterQueue it names."""
    cluster_queue = r.string("spec.clusterQueue")
    if not cluster_queue:
        raise r.fail("spec.clusterQueue", "the name of a ClusterQueue", cluster_queue)
    return r.key, cluster_queue


QueueOrigin = tuple[tuple[QueueSpec, tuple[bool, ...]], Reader | NamedBy]


def kueue_queues(
    cluster_queues: Sequence[tuple[QuotaNode, Reader]], cohorts: Sequence[tuple[QuotaNode, Reader]]
) -> list[QueueOrigin]:
    """Every ClusterQueue and every cohort as gpufleet's queue (with its quota flags), and
    what defined it: its object, or for a cohort no Cohort object defines, the first object
    that names it. Two objects of one name are left for the caller to refuse."""
    nodes: dict[str, QuotaNode] = {}
    named: dict[str, NamedBy] = {}
    for node, _ in cohorts:
        nodes.setdefault(node.name, node)
    for node, r in [*cluster_queues, *cohorts]:
        if node.parent is not None and node.parent not in nodes:
            nodes[node.parent] = QuotaNode(node.parent, None, Quotas())
            named[node.parent] = NamedBy(node.parent, node.parent_field, r)
    members: dict[str, list[QuotaNode]] = {}
    for node in [*(n for n, _ in cluster_queues), *nodes.values()]:
        if node.parent is not None:
            members.setdefault(node.parent, []).append(node)
    readers = {node.name: r for node, r in cohorts}
    held: dict[str, tuple[tuple[float, ...], tuple[bool, ...]]] = {}

    def subtree(name: str, path: tuple[str, ...]) -> tuple[tuple[float, ...], tuple[bool, ...]]:
        """What cohort ``name`` and everything in it hold, and which resources they cover."""
        if name in path:
            cycle = " -> ".join(reversed((*path[path.index(name) :], name)))
            raise InputError(
                readers[name].where,
                f"parent cohorts form a cycle: {cycle} (each names the next as its parent)",
                field="spec.parentName",
            )
        if name not in held:
            own = nodes[name].quotas
            amounts, covered = list(own.nominal), list(own.covered)
            for member in members.get(name, []):
                more, also = (
                    subtree(member.name, (*path, name))
                    if member.name in nodes and member is nodes[member.name]
                    else (member.quotas.nominal, member.quotas.covered)
                )
                amounts = [a + m for a, m in zip(amounts, more, strict=True)]
                covered = [c or m for c, m in zip(covered, also, strict=True)]
            held[name] = (tuple(amounts), tuple(covered))
        return held[name]

    out: list[QueueOrigin] = [
        (_queue(node, node.quotas.nominal, node.quotas.covered), r) for node, r in cluster_queues
    ]
    for node, r in cohorts:
        out.append((_queue(nodes[node.name], *subtree(node.name, ())), r))
    for name, origin in named.items():
        out.append((_queue(nodes[name], *subtree(name, ())), origin))
    return out


def _queue(
    node: QuotaNode, quota: tuple[float, ...], covered: tuple[bool, ...]
) -> tuple[QueueSpec, tuple[bool, ...]]:
    """gpufleet's queue of a ClusterQueue or cohort holding ``quota`` (a cohort: its
    subtree's), with its limits (see the module's docstring)."""
    limits = [
        _limit(amount, borrow, cover, can_borrow=node.parent is not None)
        for amount, borrow, cover in zip(quota, node.quotas.borrowing, covered, strict=True)
    ]
    spec = QueueSpec(
        node.name,
        node.parent,
        quota=vector(*quota),
        limit=vector(*limits),
        weight=vector(*([node.weight] * len(LIST_RESOURCES))),
        quota_set=covered,
        uid=node.uid,
        resource_version=node.resource_version,
    )
    return spec, covered


def _limit(amount: float, borrow: float | None, covered: bool, *, can_borrow: bool) -> float:
    """The most a queue holding ``amount`` of a resource may use: nothing of a resource it
    does not cover, ``amount`` without a cohort to borrow from, else ``amount`` and its
    ``borrowingLimit`` (none: no bound of its own, its cohort's limit holds it)."""
    if not covered:
        return 0.0
    if not can_borrow:
        return amount
    return math.inf if borrow is None else amount + borrow
