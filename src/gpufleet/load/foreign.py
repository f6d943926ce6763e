"""Other schedulers' vocabularies: which gpufleet reads, and the names each one uses.

Teams moving to gpufleet already have queues and gangs written for another scheduler. A
what-if reads them as they are, translated into gpufleet's model (the tables are in
docs/migration.md):

* ``kai`` — NVIDIA KAI Scheduler: ``scheduling.run.ai/v2`` Queue,
  ``scheduling.run.ai/v2alpha2`` PodGroup, the pod label ``kai.scheduler/queue`` (and the
  older ``runai/queue``), the annotations ``pod-group-name``, ``gpu-fraction`` and
  ``gpu-memory`` (MiB), the pod label ``priorityClassName`` and KAI's predefined priority
  classes (``train`` 50, ``build-preemptible`` 75, ``build`` 100, ``inference`` 125) where the
  snapshot has no PriorityClass of that name;
* ``volcano`` — Volcano: ``scheduling.volcano.sh/v1beta1`` Queue and PodGroup, the pod
  annotations ``scheduling.k8s.io/group-name`` (and ``scheduling.volcano.sh/group-name``)
  and ``scheduling.volcano.sh/queue-name`` (and the ``volcano.sh/queue-name`` Volcano's jobs
  write);
* ``capacityscheduling`` — scheduler-plugins' capacity scheduling plugin:
  ``scheduling.x-k8s.io/v1alpha1`` ElasticQuota, the queue of the pods of its namespace
  (:mod:`gpufleet.load.vocabularies.elasticquota`);
* ``kueue`` — Kueue: ``kueue.x-k8s.io/v1beta2`` (and ``v1beta1``) ClusterQueue, Cohort and
  LocalQueue, and the pod label ``kueue.x-k8s.io/queue-name`` that names a LocalQueue of the
  pod's namespace (:mod:`gpufleet.load.vocabularies.kueue`).

Which vocabularies are read is a setting (:data:`ALL` by default in a what-if; the live
scheduler reads gpufleet's own only, and may pass a set later). gpufleet's own objects and
scheduler-plugins' ``PodGroup`` are always read. An object of a vocabulary that is off is
skipped with a warning, as any other API group gpufleet does not read.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

KAI = "kai"
VOLCANO = "volcano"
CAPACITY = "capacityscheduling"
KUEUE = "kueue"

ALL: frozenset[str] = frozenset({KAI, VOLCANO, CAPACITY, KUEUE})
"""Every vocabulary gpufleet can read: the default of a what-if."""
NONE: frozenset[str] = frozenset()
"""gpufleet's own vocabulary only (and scheduler-plugins' PodGroup)."""


@dataclass(frozen=True, slots=True)
class ForeignKind:
    """One kind of another scheduler: its vocabulary and the key its objects are sorted under
    (``Queue scheduling.run.ai/v2``), which names the reader."""

    vocabulary: str
    kind: str
    api_version: str
    plural: str
    """The resource the API serves it under (``queues``)."""
    becomes: str
    """What it is read as: gpufleet's ``Queue`` or ``PodGroup`` (a Kueue Cohort: a parent
    ``Queue``; a LocalQueue: the name of a ``Queue`` for the pods of its namespace)."""

    @property
    def key(self) -> str:
        return f"{self.kind} {self.api_version}"


KAI_QUEUE = ForeignKind(KAI, "Queue", "scheduling.run.ai/v2", "queues", "Queue")
KAI_POD_GROUP = ForeignKind(KAI, "PodGroup", "scheduling.run.ai/v2alpha2", "podgroups", "PodGroup")
VOLCANO_QUEUE = ForeignKind(VOLCANO, "Queue", "scheduling.volcano.sh/v1beta1", "queues", "Queue")
VOLCANO_POD_GROUP = ForeignKind(
    VOLCANO, "PodGroup", "scheduling.volcano.sh/v1beta1", "podgroups", "PodGroup"
)
ELASTIC_QUOTA = ForeignKind(
    CAPACITY, "ElasticQuota", "scheduling.x-k8s.io/v1alpha1", "elasticquotas", "Queue"
)
KUEUE_VERSIONS = ("kueue.x-k8s.io/v1beta2", "kueue.x-k8s.io/v1beta1")
"""Kueue's API versions whose queues gpufleet reads: v1beta2 (Kueue's storage version) and
the deprecated v1beta1, which names a ClusterQueue's cohort ``spec.cohort``."""
KUEUE_CLUSTER_QUEUES = tuple(
    ForeignKind(KUEUE, "ClusterQueue", v, "clusterqueues", "Queue") for v in KUEUE_VERSIONS
)
KUEUE_COHORTS = tuple(ForeignKind(KUEUE, "Cohort", v, "cohorts", "Queue") for v in KUEUE_VERSIONS)
KUEUE_LOCAL_QUEUES = tuple(
    ForeignKind(KUEUE, "LocalQueue", v, "localqueues", "Queue") for v in KUEUE_VERSIONS
)

FOREIGN: Mapping[tuple[str, str], ForeignKind] = {
    (k.kind, k.api_version): k
    for k in (
        KAI_QUEUE,
        KAI_POD_GROUP,
        VOLCANO_QUEUE,
        VOLCANO_POD_GROUP,
        ELASTIC_QUOTA,
        *KUEUE_CLUSTER_QUEUES,
        *KUEUE_COHORTS,
        *KUEUE_LOCAL_QUEUES,
    )
}
"""Per (kind, apiVersion), the other schedulers' kinds gpufleet can read."""

KAI_QUEUE_LABELS = ("kai.scheduler/queue", "runai/queue")
"""A pod's queue in KAI: the label, then the one older releases used."""
KAI_GROUP_ANNOTATION = "pod-group-name"
KAI_SUBGROUP_LABEL = "kai.scheduler/subgroup-name"
"""The subgroup of its PodGroup (``spec.subGroups``) a pod belongs to in KAI."""
KAI_FRACTION_ANNOTATION = "gpu-fraction"
KAI_GPU_MEMORY_ANNOTATION = "gpu-memory"
"""A share of one GPU in KAI: a fraction (``"0.5"``) or MiB of GPU memory (``"2000"``)."""
KAI_PRIORITY_LABEL = "priorityClassName"
"""KAI reads a pod's priority class from this label too, where ``spec`` names none."""
KAI_PRIORITY_CLASSES: Mapping[str, int] = {
    "train": 50,
    "build-preemptible": 75,
    "build": 100,
    "inference": 125,
}
"""The PriorityClasses KAI installs (its docs, "Workload Priority"); at 100 and above work is
non-preemptible in KAI, as in gpufleet by default."""

BUILTIN_PRIORITY_CLASSES: Mapping[str, int] = {
    "system-node-critical": 2_000_001_000,
    "system-cluster-critical": 2_000_000_000,
}
"""The PriorityClasses every Kubernetes cluster has (the API server makes them): a dump of a
cluster's PriorityClasses may leave them out, and its device-plugin pods name them."""


def installed_classes(vocabularies: Collection[str]) -> dict[str, tuple[int, bool, bool]]:
    """PriorityClasses a cluster has without their objects in a snapshot: Kubernetes'
    built-in ones, and those a vocabulary's scheduler installs (KAI's), as ``(value,
    preempts, global default)``; the cluster's own objects of the same name win."""
    classes = dict(BUILTIN_PRIORITY_CLASSES)
    if KAI in vocabularies:
        classes |= KAI_PRIORITY_CLASSES
    return {n: (v, True, False) for n, v in classes.items()}


VOLCANO_GROUP_ANNOTATIONS = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")
"""A pod's PodGroup in Volcano: the annotation its job controller writes, then Volcano's own."""
VOLCANO_QUEUE_ANNOTATIONS = ("scheduling.volcano.sh/queue-name", "volcano.sh/queue-name")
"""A pod's queue in Volcano: the annotation of a pod without a job (a Deployment's), then
the one Volcano's jobs write on their pods."""
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
"""A pod's LocalQueue in Kueue (of the pod's namespace), which names its ClusterQueue."""


@dataclass(frozen=True, slots=True)
class PodNames:
    """Where a pod's queue, gang and GPU share are written, in the vocabularies read: each
    list in the order looked at (gpufleet's own names first)."""

    queue_labels: tuple[str, ...] = ()
    queue_annotations: tuple[str, ...] = ()
    local_queue_labels: tuple[str, ...] = ()
    """Labels that name a queue of the pod's namespace (Kueue's LocalQueue), which names
    the pod's queue; read where the pod names no queue itself."""
    group_annotations: tuple[str, ...] = ()
    fraction_annotations: tuple[str, ...] = ()
    memory_mib_annotations: tuple[str, ...] = ()
    priority_labels: tuple[str, ...] = ()
    subgroup_labels: tuple[str, ...] = ()
    """Labels naming the part of its gang a pod belongs to (KAI's subgroups)."""


def pod_names(vocabularies: frozenset[str]) -> PodNames:
    """The pod labels and annotations of ``vocabularies`` (beyond gpufleet's own)."""
    kai = KAI in vocabularies
    volcano = VOLCANO in vocabularies
    return PodNames(
        queue_labels=KAI_QUEUE_LABELS if kai else (),
        queue_annotations=VOLCANO_QUEUE_ANNOTATIONS if volcano else (),
        local_queue_labels=(KUEUE_QUEUE_LABEL,) if KUEUE in vocabularies else (),
        group_annotations=((KAI_GROUP_ANNOTATION,) if kai else ())
        + (VOLCANO_GROUP_ANNOTATIONS if volcano else ()),
        fraction_annotations=(KAI_FRACTION_ANNOTATION,) if kai else (),
        memory_mib_annotations=(KAI_GPU_MEMORY_ANNOTATION,) if kai else (),
        priority_labels=(KAI_PRIORITY_LABEL,) if kai else (),
        subgroup_labels=(KAI_SUBGROUP_LABEL,) if kai else (),
    )


def check_vocabularies(names: frozenset[str]) -> None:
    """Refuse a vocabulary gpufleet does not know (a setting's typo)."""
    unknown = sorted(names - ALL)
    if unknown:
        raise ValueError(
            f"unknown vocabulary {', '.join(unknown)}; known: {', '.join(sorted(ALL))}"
        )
