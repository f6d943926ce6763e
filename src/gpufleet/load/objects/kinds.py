"""Which objects of a snapshot gpufleet reads: by kind *and* API group and version.

A ``kind`` alone says little: Volcano's ``scheduling.volcano.sh`` and KAI's
``scheduling.run.ai`` both define a ``Queue``, with other fields and other meanings (KAI's
``quota: -1`` is "unlimited", not 0), and Volcano has a ``PodGroup`` of its own. So an
object is read only when its ``apiVersion`` is one gpufleet supports for its kind
(:data:`SUPPORTED`):

* another version of a supported group (``resource.k8s.io/v1beta1``) is an error: the
  fields differ between versions, and guessing would misread them;
* another scheduler's kind that gpufleet translates (KAI's ``scheduling.run.ai/v2 Queue``,
  Volcano's ``scheduling.volcano.sh/v1beta1 Queue``, :mod:`gpufleet.load.foreign`) is read,
  under the key ``Kind apiVersion``, when its vocabulary is one of those asked for;
* another group (``example.com/v1 Queue``), another version of a translated kind
  (``scheduling.run.ai/v1 Queue``) or a vocabulary that is off is skipped,
  with one warning per kind and group;
* kinds gpufleet does not read (Services, Deployments — a ``kubectl get all -o yaml`` dump)
  and documents without a ``kind`` are skipped, counted in one summary warning.

Nothing is dropped without a word.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from gpufleet.load.errors import InputError
from gpufleet.load.foreign import FOREIGN, NONE
from gpufleet.load.objects.reader import Obj

GPUFLEET = "gpufleet.io/v1alpha1"
SUPPORTED: Mapping[str, tuple[str, ...]] = {
    "Node": ("v1",),
    "Pod": ("v1",),
    "PriorityClass": ("scheduling.k8s.io/v1",),
    "PodGroup": ("scheduling.x-k8s.io/v1alpha1",),
    "Queue": (GPUFLEET,),
    "Topology": (GPUFLEET,),
    "NodePool": (GPUFLEET,),
    "NodeResourceTopology": ("topology.node.k8s.io/v1alpha2", "topology.node.k8s.io/v1alpha1"),
    "DeviceClass": ("resource.k8s.io/v1",),
    "ResourceSlice": ("resource.k8s.io/v1",),
    "ResourceClaim": ("resource.k8s.io/v1",),
    "ResourceClaimTemplate": ("resource.k8s.io/v1",),
    "StorageClass": ("storage.k8s.io/v1",),
    "PersistentVolume": ("v1",),
    "PersistentVolumeClaim": ("v1",),
    "CSINode": ("storage.k8s.io/v1",),
    "Namespace": ("v1",),
}
"""Per kind, the ``apiVersion`` values gpufleet reads (the first is the one to write)."""

OWN_KINDS = frozenset(k for k, versions in SUPPORTED.items() if versions[0] == GPUFLEET)
"""gpufleet's own kinds: their fields are checked strictly."""

Warn = Callable[[str], None]


def _group(api_version: str) -> str:
    """``scheduling.k8s.io`` of ``scheduling.k8s.io/v1``; the core group is ``""``."""
    return api_version.rpartition("/")[0]


def sort_objects(
    objects: Iterable[Obj], source: str, warn: Warn, vocabularies: frozenset[str] = NONE
) -> dict[str, list[Obj]]:
    """The objects gpufleet reads, by kind (another scheduler's by ``Kind apiVersion``); the
    others skipped with a warning (see above)."""
    by_kind: dict[str, list[Obj]] = {}
    foreign: Counter[tuple[str, str]] = Counter()
    unread: Counter[str] = Counter()
    for obj in objects:
        kind = obj.get("kind")
        if not isinstance(kind, str) or not kind:
            unread["(no kind)"] += 1
            continue
        api_version = obj.get("apiVersion")
        foreign_kind = FOREIGN.get((kind, api_version)) if isinstance(api_version, str) else None
        if foreign_kind is not None and foreign_kind.vocabulary in vocabularies:
            by_kind.setdefault(foreign_kind.key, []).append(obj)
            continue
        versions = SUPPORTED.get(kind)
        if versions is None:
            if foreign_kind is not None:
                foreign[kind, str(api_version)] += 1
            else:
                unread[kind] += 1
            continue
        if api_version in versions:
            by_kind.setdefault(kind, []).append(obj)
            continue
        if not isinstance(api_version, str) or not api_version:
            raise InputError(
                f"{source}: {kind} {_name(obj)}",
                f"expected {' or '.join(versions)}, got {api_version!r}",
                field="apiVersion",
            )
        if _group(api_version) in {_group(v) for v in versions}:
            raise InputError(
                f"{source}: {kind} {_name(obj)}",
                f"{api_version} is not supported: gpufleet reads {kind} of "
                f"{' or '.join(versions)} only (the API server converts between the versions "
                f"it serves: kubectl get {_resource(kind, versions[0])} -o yaml)",
                field="apiVersion",
            )
        foreign[kind, api_version] += 1
    for (kind, api_version), count in sorted(foreign.items()):
        off = FOREIGN.get((kind, api_version))
        why = (
            f"the {off.vocabulary} vocabulary is not read"
            if off is not None
            else f"gpufleet reads {kind} of {' or '.join(SUPPORTED.get(kind, ()))} only"
        )
        warn(
            f"{source}: skipped {count} {kind} object{'s' * (count != 1)} of API group "
            f"{_group(api_version) or 'core'} ({api_version}): {why}"
        )
    if unread:
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(unread.items()))
        total = sum(unread.values())
        warn(
            f"{source}: skipped {total} object{'s' * (total != 1)} gpufleet does not read: {counts}"
        )
    return by_kind


def _resource(kind: str, api_version: str) -> str:
    """What ``kubectl get`` takes for ``kind`` in ``api_version``:
    ``resourceclaims.v1.resource.k8s.io``."""
    plural = kind.lower() + ("es" if kind.endswith("s") else "s")
    group, _, version = api_version.rpartition("/")
    return f"{plural}.{version}.{group}" if group else plural


def _name(obj: Obj) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    if not isinstance(name, str):
        return "<unnamed>"
    return f"{namespace}/{name}" if isinstance(namespace, str) else name
