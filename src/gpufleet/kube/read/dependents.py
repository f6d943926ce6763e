"""Which objects read which: when an object changes, the objects whose translation reads it
are translated again (:mod:`gpufleet.kube.read.objects`).

A pod reads its PodGroup, its node and its ResourceClaims and templates, as its raw form
names them (whether or not it can be read); a gang counts its pods that succeeded; a pool
of ResourceSlices reads its slices, and the labels of the nodes they select; a node reads its
NodeResourceTopology; every pod reads the PriorityClasses and the ElasticQuota of its
namespace. Watches of different kinds arrive in any order: what an object reads is indexed
from its raw form, so a pod seen before its node is translated when the node arrives.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from gpufleet.kube.read.devices import claim_reads, pool_key, selects_nodes
from gpufleet.kube.read.kinds import becomes
from gpufleet.kube.read.translated import key_of, mapping, meta
from gpufleet.load.foreign import ELASTIC_QUOTA, PodNames
from gpufleet.load.objects.reader import Obj, is_mapping
from gpufleet.load.objects.vocabulary import POD_GROUP_LABEL

Ref = tuple[str, str]
"""An object, as its kind and its store key."""


class Dependents:
    """The index of which raw object reads which, over the store's raw objects."""

    def __init__(
        self, raw: Mapping[str, Mapping[str, Obj]], names: PodNames, group_kinds: tuple[str, ...]
    ) -> None:
        self.raw = raw
        """The store's raw objects, per kind and key (read, never changed here)."""
        self.names = names
        self.group_kinds = group_kinds
        self.readers: dict[Ref, set[str]] = defaultdict(set)
        """Per object pods read, the pods that read it."""
        self._reads: dict[str, tuple[Ref, ...]] = {}
        """Per pod: the objects its translation reads."""
        self.slices_of_pool: dict[str, set[str]] = defaultdict(set)
        self._pools: dict[str, str] = {}
        """Per slice: its pool's key."""

    def pods_reading(self, kind: str, key: str) -> list[str]:
        """The pods that read object ``key`` of ``kind``, by key."""
        return sorted(self.readers.get((kind, key), ()))

    def index(self, key: str, obj: Obj, *, deleted: bool) -> None:
        """Remember which objects pod ``key`` reads (from the raw pod, whether or not it
        can be read): its PodGroup, node, claims and templates."""
        for read in self._reads.pop(key, ()):
            self.readers[read].discard(key)
        if deleted:
            return
        reads: list[Ref] = []
        group = self.group_name(meta(obj))
        if group is not None:
            reads.append(("PodGroup", f"{key.split('/', 1)[0]}/{group}"))
        node = mapping(obj, "spec").get("nodeName")
        if isinstance(node, str):
            reads.append(("Node", node))
        try:
            claims, templates = claim_reads(obj)
        except (TypeError, ValueError, AttributeError, KeyError):  # the pod's problem says why
            claims, templates = set(), set()
        reads += [("ResourceClaim", c) for c in sorted(claims)]
        reads += [("ResourceClaimTemplate", t) for t in sorted(templates)]
        for read in reads:
            self.readers[read].add(key)
        self._reads[key] = tuple(reads)

    def finished(self, raw: Obj | None) -> str:
        """The gang of raw pod ``raw`` if it succeeded (empty: it did not, or names none)."""
        if raw is None or mapping(raw, "status").get("phase") != "Succeeded":
            return ""
        group = self.group_name(meta(raw))
        return "" if group is None else f"{key_of('Pod', raw).split('/', 1)[0]}/{group}"

    def succeeded(self, gang: str) -> int:
        """How many pods of ``gang`` succeeded, as their raw objects say."""
        pods = self.raw["Pod"]
        readers = self.readers.get(("PodGroup", gang), ())
        return sum(1 for key in readers if self.finished(pods.get(key)) == gang)

    def group_name(self, metadata: Mapping[str, object]) -> str | None:
        """The PodGroup a pod names, where ``read_pod`` looks: the label, then the
        annotations of the vocabularies read."""
        labels = metadata.get("labels")
        label = labels.get(POD_GROUP_LABEL) if is_mapping(labels) else None
        if isinstance(label, str):
            return label
        annotations = metadata.get("annotations")
        if is_mapping(annotations):
            for name in self.names.group_annotations:
                value = annotations.get(name)
                if isinstance(value, str):
                    return value
        return None

    def slice_moved(self, key: str, obj: Obj, *, deleted: bool) -> set[str]:
        """Keep slice ``key`` filed under its pool; the pools it was and is in."""
        touched = set()
        before = self._pools.pop(key, None)
        if before is not None:
            self.slices_of_pool[before].discard(key)
            touched.add(before)
        after = None if deleted else pool_key(obj)
        if after is not None:
            self._pools[key] = after
            self.slices_of_pool[after].add(key)
            touched.add(after)
        return touched

    def slices(self, pool: str) -> list[str]:
        """The slices of ``pool``, by key."""
        return sorted(self.slices_of_pool.get(pool, ()))

    def of(
        self,
        kind: str,
        key: str,
        *,
        relabelled: bool = False,
        resized: bool = False,
        finished: str = "",
        regrouped: bool = True,
    ) -> list[Ref]:
        """The objects whose translation reads object ``key`` of ``kind``; for a node,
        ``relabelled``: its labels, as pools read them, changed, and ``resized``: whether it
        can be read and how many GPUs it has, as its pods read it, changed (either: it
        appeared or left). For a pod, ``finished``: the gang it had succeeded in before this
        event (empty: none); a gang counts its pods that succeeded, so the objects that
        define a gang it now succeeded in, or no longer did, are read again.

        Pools whose slices select nodes by label read only the nodes' labels, and a bound
        pod reads only its node's GPUs, so a node event that leaves them as they were (a
        status update, every few seconds to minutes per node) reads nothing again. Pods
        read of their PodGroup only whether it defines their gang and in which queue, so a
        PodGroup event that leaves those (``regrouped`` false: its status written, once
        per gang and change) reads none of them again."""
        if kind == "Pod":
            now = self.finished(self.raw["Pod"].get(key))
            gangs = sorted({finished, now} - {""}) if now != finished else []
            return [(k, gang) for gang in gangs for k in self.group_kinds if gang in self.raw[k]]
        if kind == "PriorityClass":
            return [("Pod", pod) for pod in sorted(self.raw["Pod"])]
        if kind == ELASTIC_QUOTA.key:  # the pods of its namespace read its queue
            prefix = f"{key.split('/', 1)[0]}/"
            return [("Pod", pod) for pod in sorted(self.raw["Pod"]) if pod.startswith(prefix)]
        kind = becomes(kind)  # a KAI or Volcano PodGroup is read where pods read PodGroups
        if kind == "NodeResourceTopology":
            return [("Node", key)] if key in self.raw["Node"] else []
        if (kind == "Node" and not resized) or (kind == "PodGroup" and not regrouped):
            out = []
        else:
            out = [("Pod", pod) for pod in sorted(self.readers.get((kind, key), ()))]
        if relabelled:
            out += [
                ("ResourcePool", pool)
                for pool, slices in sorted(self.slices_of_pool.items())
                if any(selects_nodes(self.raw["ResourceSlice"][s]) for s in slices)
            ]
        return out
