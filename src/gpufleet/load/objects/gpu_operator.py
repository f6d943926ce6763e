"""What one advertised GPU of a node is, read from the labels NVIDIA's GPU feature discovery
(GFD, part of the GPU operator) writes.

Three of the GPU operator's conventions advertise as ``nvidia.com/gpu`` something less than
a physical GPU; Kubernetes places a pod asking ``nvidia.com/gpu`` on any of them, so gpufleet
places by what is advertised and counts — in queues, fair shares and cost — what it is:

* **MIG, single strategy** (``nvidia.com/mig.strategy: single``): every GPU of the node is
  cut into slices of one profile, each advertised as one ``nvidia.com/gpu``; GFD appends the
  profile to the product label (``NVIDIA-A100-SXM4-40GB-MIG-1g.5gb``) and overrides
  ``nvidia.com/gpu.count`` and ``nvidia.com/gpu.memory`` with the slices'. One slice counts
  its compute slices out of 7 (``1g.5gb``: 1/7, as a ``nvidia.com/mig-1g.5gb`` slice of the
  mixed strategy and a MIG device of DRA count). The node has as many physical GPUs as its
  slices fill at the profile's most instances per GPU (56 ``1g.5gb`` slices: 8 GPUs; 16
  ``3g.20gb``: 8).
* **Time-slicing and MPS** (``nvidia.com/gpu.replicas: "<n>"`` with ``n > 1``; GFD writes
  ``0`` or ``1`` where nothing is shared;
  ``nvidia.com/gpu.sharing-strategy: time-slicing`` or ``mps``, which older GFD releases do
  not write): every GPU is advertised ``n`` times and GFD appends ``-SHARED`` to the product
  label — unless the device plugin renames the resource (``renameByDefault``): then the
  replicas are ``nvidia.com/gpu.shared`` and ``nvidia.com/gpu`` is 0. One replica counts
  ``1/n`` of a GPU; ``nvidia.com/gpu.count`` stays the physical GPUs.
* both at once (product ``...-MIG-1g.5gb-SHARED``): a MIG slice shared ``n`` ways counts its
  compute fraction over ``n``. MPS gives a pod at most one replica: a pod asking more never
  runs there (GpuFit says so).

The product is read without the suffixes, so a price sheet's ``gpuProduct`` entry for the
GPU matches the node. MIG's ``mixed`` strategy advertises slices under their own names
(``nvidia.com/mig-1g.5gb``, read by ``load/objects/nodes.py``) and leaves whole GPUs whole: nothing
here changes for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from gpufleet.load.objects.reader import Reader
from gpufleet.load.objects.vocabulary import GPU_PRODUCT_LABEL, INTEGER
from gpufleet.model.devices import MIG_COMPUTE_SLICES
from gpufleet.model.mig import table_for
from gpufleet.model.rows import MAX_GPUS_PER_NODE

MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"
SHARED_SUFFIX = "-SHARED"
SINGLE_MIG_PRODUCT = re.compile(
    r"^(?P<gpu>.+)-MIG-(?P<profile>(?:(?P<ci>[1-7])c\.)?(?P<c>[1-7])g\.[0-9]+gb(?P<me>\.me)?)$"
)
"""GFD's product under the single strategy: the GPU, then the slice's profile — a GPU
instance (``1g.5gb``), a compute instance of one (``1c.3g.20gb``: 1 of its 3 compute
slices), with media extensions (``1g.5gb.me``: GFD writes ``+me`` as ``.me``)."""
MAX_REPLICAS = 1024
"""Replicas of one GPU gpufleet accepts: more is a typo."""
MAX_ADVERTISED = 1024
"""Devices one node may advertise when they are slices or replicas (the cluster state has a
column per advertised device: whole GPUs are capped lower, by MAX_GPUS_PER_NODE)."""
SHARING_NAMES = {"time-slicing": "time-sliced", "mps": "MPS"}
"""GFD's ``nvidia.com/gpu.sharing-strategy`` values that share a GPU, as messages name them
(``none``: not shared)."""


@dataclass(frozen=True, slots=True)
class GpuDevices:
    """What the node's advertised GPUs are."""

    product: str | None
    """The physical GPU's product label, without GFD's ``-MIG-<profile>``/``-SHARED``."""
    unit: Fraction = Fraction(1)
    """Physical GPUs one advertised GPU counts as (1: a whole GPU)."""
    physical: int | None = None
    """Physical GPUs of the node (None: one per advertised GPU)."""
    kind: str = ""
    """What one advertised GPU is, for messages (empty: a whole GPU)."""
    one_per_pod: bool = False
    """The device plugin gives a pod at most one of them (MPS replicas: from release 0.15 on
    it refuses a request for more, whatever ``failRequestsGreaterThanOne`` says)."""


def _integer(r: Reader, labels: Mapping[str, str], label: str, low: int, high: int) -> int | None:
    raw = labels.get(label)
    if raw is None:
        return None
    if not INTEGER.fullmatch(raw) or not low <= int(raw) <= high:
        raise r.fail(f"metadata.labels.{label}", f"an integer from {low} to {high}", raw)
    return int(raw)


def _article(word: str) -> str:
    return "an" if word[:1].upper() in "AEFHILMNORSX" else "a"


def _per_gpu(product: str, single: re.Match[str]) -> int:
    """Slices of the profile one GPU holds (the profile table's most instances; a compute
    instance's share of its GPU instance's; one media-extension slice per GPU)."""
    if single["me"]:
        return 1
    gi = single["profile"].split(".", 1)[1] if single["ci"] else single["profile"]
    table = table_for(product)
    known = table.get(gi) if table is not None else None
    c = int(single["c"])
    instances = known.max_instances if known is not None else MIG_COMPUTE_SLICES // c
    return instances * (c // int(single["ci"]) if single["ci"] else 1)


def gpu_devices(r: Reader, labels: Mapping[str, str], advertised: int) -> GpuDevices:
    """What each of the node's ``advertised`` GPUs (``nvidia.com/gpu``, or
    ``nvidia.com/gpu.shared`` when the device plugin renames replicas) is, by the module's
    rules. A label that is no number, a sharing strategy GFD does not write, or a
    ``nvidia.com/gpu.count`` that cannot be the node's GPUs is an error naming the label."""
    product = labels.get(GPU_PRODUCT_LABEL)
    # 0 is what GFD writes where MIG devices are not replicated (mixed or none strategy).
    replicas = _integer(r, labels, REPLICAS_LABEL, 0, MAX_REPLICAS) or 1
    strategy = labels.get(SHARING_LABEL, "none" if replicas == 1 else "time-slicing")
    if strategy != "none" and strategy not in SHARING_NAMES:
        raise r.fail(f"metadata.labels.{SHARING_LABEL}", "none, time-slicing or mps", strategy)
    if product is not None and product.endswith(SHARED_SUFFIX):
        product = product[: -len(SHARED_SUFFIX)]
    unit, kind, physical = Fraction(1), "", None
    single = SINGLE_MIG_PRODUCT.match(product or "")
    if labels.get(MIG_STRATEGY_LABEL) == "single" and single is not None:
        product = single["gpu"]
        ci = int(single["ci"] or single["c"])
        unit = Fraction(ci, MIG_COMPUTE_SLICES)
        physical = math.ceil(Fraction(advertised, replicas * _per_gpu(product, single)))
        kind = f"MIG {single['profile']} slice"
    if replicas > 1:
        unit /= replicas
        if physical is None:
            physical = math.ceil(Fraction(advertised, replicas))
            count = _integer(r, labels, GPU_COUNT_LABEL, 1, MAX_GPUS_PER_NODE)
            if count is not None:
                if count * replicas < advertised:
                    raise r.fail(
                        f"metadata.labels.{GPU_COUNT_LABEL}",
                        f"the node's GPUs: at least {physical} for {advertised} advertised "
                        f"at {replicas} replicas each",
                        count,
                    )
                physical = count
        name = SHARING_NAMES[strategy] if strategy != "none" else "time-sliced"
        kind = f"{kind}, {name} {replicas} ways" if kind else f"{name} replica"
    if not kind:
        return GpuDevices(product)
    of = f"1/{unit.denominator}" if unit.numerator == 1 else str(unit)
    gpu = product or "GPU"
    return GpuDevices(
        product,
        unit,
        physical,
        f"{kind} ({of} of {_article(gpu)} {gpu})",
        one_per_pod=strategy == "mps" and replicas > 1,
    )
