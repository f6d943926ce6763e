"""What a snapshot's objects are checked for beyond the fields each translator reads.

Each object's fields and name against its kind (:mod:`gpufleet.load.objects.schema`): an error in
gpufleet's own kinds, one warning per unknown field in Kubernetes'. And what no object can
be judged on alone: an object that appears twice, a Queue whose parents are missing or form
a cycle, a PodGroup asking for a topology level the cluster does not have, a pod naming a
ResourceClaim or template the snapshot lacks, and pending pods of other schedulers (one
warning: they are not scheduled).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from gpufleet.load.errors import InputError
from gpufleet.load.foreign import KAI_POD_GROUP, VOLCANO_POD_GROUP, VOLCANO_QUEUE
from gpufleet.load.objects.devices import allocation, claim_spec
from gpufleet.load.objects.kinds import Warn
from gpufleet.load.objects.pod_fields import PREFERENCES, REFUSED, used_fields
from gpufleet.load.objects.reader import Reader, each
from gpufleet.load.objects.schema import LENIENT, STRICT, name_problem, unknown_fields
from gpufleet.load.objects.vocabulary import (
    DEFAULT_SCHEDULER,
    TOPOLOGY_PREFERRED,
    TOPOLOGY_REQUIRED,
)
from gpufleet.model.devices import Claim, DeviceAllocation
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, queue_problems

T = TypeVar("T")


def check_fields(by_kind: Mapping[str, list[Reader]], warn: Warn) -> None:
    """Unknown fields: an error in gpufleet's own kinds, a warning in Kubernetes' (see
    :mod:`gpufleet.load.objects.schema`)."""
    unknown: dict[tuple[str, str], list[Reader]] = {}
    for kind, readers in by_kind.items():
        strict = STRICT.get(kind)
        schema = strict or LENIENT.get(kind)
        if schema is None:
            continue
        for r in readers:
            _check_names(r, kind, strict=strict is not None, warn=warn)
            for field in unknown_fields(r.obj, schema):
                if strict is not None:
                    raise InputError(
                        r.where,
                        f"unknown field (gpufleet's {kind} has no such field: misspelt?)",
                        field=field,
                    )
                unknown.setdefault((kind, field), []).append(r)
    for (kind, field), readers in unknown.items():  # one line per field, not per object
        also = f" (and {len(readers) - 1} more {kind}s)" if len(readers) > 1 else ""
        warn(
            f'{readers[0].where}{also}: unknown field "{field}" '
            "(gpufleet does not read it: misspelt?)"
        )


MIN_SUBGROUP = "every subgroup must start: the gang starts only once all of them fit"
HIERARCHY = "its levels are not Queues; gpufleet builds the tree from spec.parent"
UNREAD: Mapping[str, tuple[tuple[tuple[str, ...], str], ...]] = {
    VOLCANO_QUEUE.key: (
        (("metadata", "annotations", "volcano.sh/hierarchy"), HIERARCHY),
        (("metadata", "annotations", "volcano.sh/hierarchy-weights"), HIERARCHY),
    ),
    VOLCANO_POD_GROUP.key: (
        (("spec", "minTaskMember"), "the gang needs spec.minMember pods, of any task"),
        (("spec", "subGroupPolicy"), "the gang needs spec.minMember pods, of any task"),
        (("spec", "networkTopology"), "use gpufleet.io/topology-required or -preferred"),
    ),
    KAI_POD_GROUP.key: (
        (("spec", "preemptibility"), "preemptible is a priority below the non-preemptible one"),
        (("spec", "minSubGroup"), MIN_SUBGROUP),
        (("spec", "subGroups", "*", "minSubGroup"), MIN_SUBGROUP),
    ),
}
"""Fields of other schedulers' objects that change what those schedulers decide and that
gpufleet does not read, each with what gpufleet does instead: a warning where they are set."""


def foreign_fields(by_kind: Mapping[str, list[Reader]], warn: Warn) -> None:
    """One warning per field of :data:`UNREAD` set on any object (naming the first)."""
    for kind, fields in UNREAD.items():
        for path, instead in fields:
            setting = [r for r in by_kind.get(kind, []) if _found(r.obj, path)]
            if setting:
                also = f" (and {len(setting) - 1} more)" if len(setting) > 1 else ""
                warn(
                    f'{setting[0].where}{also}: field "{".".join(path)}" is not read by '
                    f"gpufleet: {instead}"
                )


def _found(obj: object, path: tuple[str, ...]) -> bool:
    """Whether ``obj`` has a value at ``path`` (``*``: in any item of a list)."""
    if not path:
        return obj not in (None, "", [], {})
    part, rest = path[0], path[1:]
    if part == "*":
        return isinstance(obj, list) and any(_found(item, rest) for item in obj)
    return isinstance(obj, Mapping) and part in obj and _found(obj[part], rest)


def _check_names(r: Reader, kind: str, *, strict: bool, warn: Warn) -> None:
    """Object names Kubernetes would refuse: an error in gpufleet's own kinds (a Queue's name
    is also a label value, so at most 63 characters), a warning elsewhere."""
    checks = [("metadata.name", name_problem(r.name, limit=63 if kind == "Queue" else 253))]
    if "namespace" in r.meta:
        checks.append(("metadata.namespace", name_problem(r.namespace, label=True)))
    for field, problem in checks:
        if problem is None:
            continue
        if strict:
            raise InputError(r.where, problem, field=field)
        warn(f"{r.where}: field '{field}': {problem} (Kubernetes would refuse it)")


def other_schedulers(
    readers: list[Reader], pods: list[PodInfo | None], source: str, warn: Warn
) -> None:
    """Say how many pending pods belong to other schedulers: they are not in the result."""
    others = Counter(
        str(r.get("spec.schedulerName", DEFAULT_SCHEDULER))
        for r, pod in zip(readers, pods, strict=True)
        if pod is not None and not pod.managed and not pod.bound
    )
    if others:
        names = ", ".join(f"{name}: {n}" for name, n in sorted(others.items()))
        total = sum(others.values())
        warn(
            f"{source}: {total} pending pod{'s' * (total != 1)} belong{'s' * (total == 1)} "
            f"to other schedulers ({names}) and {'are' if total != 1 else 'is'} not scheduled "
            "(--scheduler-name NAME schedules that scheduler's pods too)"
        )


def placement_fields(
    readers: list[Reader], pods: list[PodInfo | None], source: str, warn: Warn
) -> None:
    """One warning per field that pending pods gpufleet schedules set and that it does not
    place by (they wait) or only a preference of (they are placed without weighing it),
    with the count of pods (:mod:`gpufleet.load.objects.pod_fields`)."""
    refused: Counter[str] = Counter()
    preferred: Counter[str] = Counter()
    for r, pod in zip(readers, pods, strict=True):
        if pod is None or pod.bound or not pod.managed:
            continue
        refused.update({field for field in REFUSED if any(used_fields(r.obj, field))})
        preferred.update({field for field in PREFERENCES if any(used_fields(r.obj, field))})
    for field, n in refused.items():
        warn(
            f"{source}: {n} pending pod{'s' * (n != 1)} set{'s' * (n == 1)} {field} "
            f"({REFUSED[field]}), which gpufleet does not implement: "
            f"{'they wait' if n != 1 else 'it waits'}, with a reason naming it"
        )
    for field, n in preferred.items():
        what = PREFERENCES[field]
        warn(
            f"{source}: {n} pending pod{'s' * (n != 1)} set{'s' * (n == 1)} {field}, a "
            f"preference ({what}) gpufleet does not weigh: "
            f"{'they are' if n != 1 else 'it is'} placed on any node the rules allow"
        )


def missing_classes(
    readers: list[Reader], classes: Mapping[str, object], source: str, warn: Warn
) -> None:
    """One warning for the pods whose PriorityClass the snapshot lacks: their own
    ``spec.priority`` (which the admission controller wrote from the class) is used."""
    missing = Counter(
        str(r.get("spec.priorityClassName"))
        for r in readers
        if r.get("spec.priorityClassName") is not None
        and r.get("spec.priorityClassName") not in classes
        and r.get("spec.priority") is not None
    )
    if missing:
        n = sum(missing.values())
        names = ", ".join(sorted(missing))
        warn(
            f"{source}: {n} pod{'s' * (n != 1)} name{'s' * (n == 1)} a PriorityClass the "
            f"snapshot lacks ({names}): {'their' if n != 1 else 'its'} spec.priority is used "
            "(add `kubectl get priorityclasses -o yaml` to the snapshot)"
        )


def namespace_labels(pods: list[PodInfo], namespaces: int, source: str, warn: Warn) -> None:
    """One warning when pods' terms select namespaces by label and the snapshot holds no
    Namespace: only each namespace's ``kubernetes.io/metadata.name`` is known then."""
    if namespaces:
        return
    selecting = sum(
        1
        for p in pods
        if p.spec.placement is not None
        and any(
            t.namespace_selector is not None
            for t in (
                *p.spec.placement.affinity,
                *p.spec.placement.anti_affinity,
                *(w.term for w in p.spec.placement.preferred),
            )
        )
    )
    if selecting:
        warn(
            f"{source}: {selecting} pod{'s' * (selecting != 1)} select{'s' * (selecting == 1)} "
            "namespaces by label (namespaceSelector) but the snapshot holds no Namespace: "
            "only kubernetes.io/metadata.name is known (add the output of "
            "`kubectl get namespaces -o yaml`)"
        )


def unique(items: list[T], key: Any, kind: str, source: str) -> list[T]:
    seen: set[str] = set()
    for item in items:
        name = key(item)
        if name in seen:
            raise InputError(f"{source}: {kind} {name}", "appears twice in the snapshot")
        seen.add(name)
    return items


def queue_tree(
    specs: list[tuple[QueueSpec, tuple[bool, ...]]],
    source: str,
    parent_fields: Mapping[str, str] | None = None,
) -> tuple[QueueSpec, ...]:
    """The queues, each once, every parent among them and no cycle. ``parent_fields``: per
    queue whose vocabulary names its parent otherwise (Volcano's ``spec.parent``), that
    field, for the error to name."""
    queues = {spec.name: spec for spec, _ in unique(specs, lambda s: s[0].name, "Queue", source)}
    for name, problem in sorted(queue_problems(queues.values()).items()):
        raise InputError(
            f"{source}: Queue {name}",
            problem.text("which is not in the snapshot"),
            field=(parent_fields or {}).get(name, "spec.parentQueue"),
        )
    return tuple(queues[name] for name in sorted(queues))


def check_levels(groups: list[GroupSpec], levels: tuple[str, ...], source: str) -> None:
    """Every topology a PodGroup asks for is one of the cluster's levels (if it has any)."""
    for group in groups:
        asked = [
            (f"metadata.annotations.{TOPOLOGY_REQUIRED}", group.topology_required),
            (f"metadata.annotations.{TOPOLOGY_PREFERRED}", group.topology_preferred),
        ]
        for sub in group.subgroups:
            at = f"spec.subGroups[{sub.name}].topologyConstraint"
            asked += [
                (f"{at}.requiredTopologyLevel", sub.required),
                (f"{at}.preferredTopologyLevel", sub.preferred),
            ]
        for field, key in asked:
            if key is not None and levels and key not in levels:
                raise InputError(
                    f"{source}: PodGroup {group.key}",
                    f"expected one of the Topology's levels ({', '.join(levels)}), got {key!r}",
                    field=field,
                )


def pod_claims(
    by_kind: dict[str, list[Reader]], pods: list[PodInfo]
) -> tuple[list[Claim], dict[str, DeviceAllocation]]:
    """Every claim pods use: the ResourceClaims, and the claims made from templates."""
    claims = {}
    allocations = {}
    for r in by_kind.get("ResourceClaim", []):
        claims[r.key] = each([r], lambda r: claim_spec(r, "spec", r.key))[0]
        found = allocation(r)
        if found is not None:
            allocations[r.key] = found
    templates = {r.key: r for r in by_kind.get("ResourceClaimTemplate", [])}
    pod_readers = {r.key: r for r in by_kind.get("Pod", [])}
    for pod in pods:
        r = pod_readers[pod.key]
        for i, ref in enumerate(r.sequence("spec.resourceClaims")):
            key = pod.claims[i]
            name = ref.get("resourceClaimTemplateName")
            if name is None:
                if key not in claims:
                    raise r.fail(
                        f"spec.resourceClaims[{i}].resourceClaimName",
                        "a ResourceClaim of the snapshot",
                        ref.get("resourceClaimName"),
                    )
                continue
            template = templates.get(f"{r.namespace}/{name}")
            if template is None:
                raise r.fail(
                    f"spec.resourceClaims[{i}].resourceClaimTemplateName",
                    "a ResourceClaimTemplate of the snapshot",
                    name,
                )
            claims.setdefault(key, claim_spec(template, "spec.spec", key))
    return list(claims.values()), allocations


def serving_queries(queues: Sequence[QueueSpec], source: str, warn: Warn) -> None:
    """One warning per Queue whose ``spec.serving.forecastQuery`` a snapshot cannot ask: only
    the live scheduler asks Prometheus; here the queue keeps its ``forecastGPUs``."""
    for q in queues:
        if q.forecast_query:
            warn(
                f"{source}: Queue {q.name}: spec.serving.forecastQuery is asked only by "
                f"gpufleet serve --forecast-prometheus; here it keeps its forecastGPUs "
                f"({q.forecast_gpus:g})"
            )
