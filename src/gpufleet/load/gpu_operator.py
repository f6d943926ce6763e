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
* **Time-slicing and MPS** (``nvidia.com/gpu.replicas: "<n>"`` with ``n > 1``;
  ``nvidia.com/gpu.sharing-strategy: time-slicing`` or ``mps``, which older GFD releases do
  not write): every GPU is advertised ``n`` times and GFD appends ``-SHARED`` to the product
  label — unless the device plugin renames the resource (``renameByDefault``): then the
  replicas are ``nvidia.com/gpu.shared`` and ``nvidia.com/gpu`` is 0. One replica counts
  ``1/n`` of a GPU; ``nvidia.com/gpu.count`` stays the physical GPUs.
* both at once: a MIG slice shared ``n`` ways counts its compute fraction over ``n``.

The product is read without the suffixes, so a price sheet's ``gpuProduct`` entry for the
GPU matches the node. MIG's ``mixed`` strategy advertises slices under their own names
(``nvidia.com/mig-1g.5gb``, read by ``load/nodes.py``) and leaves whole GPUs whole: nothing
here changes for it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from gpufleet.load.reader import Reader
from gpufleet.load.vocabulary import GPU_PRODUCT_LABEL, INTEGER
from gpufleet.model.devices import MIG_COMPUTE_SLICES
from gpufleet.model.mig import table_for

MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"
GPU_COUNT_LABEL = "nvidia.com/gpu.count"
REPLICAS_LABEL = "nvidia.com/gpu.replicas"
SHARING_LABEL = "nvidia.com/gpu.sharing-strategy"
SHARED_SUFFIX = "-SHARED"
SINGLE_MIG_PRODUCT = re.compile(r"^(?P<gpu>.+)-MIG-(?P<profile>(?P<c>[1-7])g\.[0-9]+gb(\+me)?)$")
MAX_REPLICAS = 1024
"""Replicas of one GPU gpufleet accepts: more is a typo, and each replica is a column of the
cluster state."""
SHARING_NAMES = {"time-slicing": "time-sliced", "mps": "MPS"}


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


def _positive(r: Reader, labels: Mapping[str, str], label: str) -> int | None:
    raw = labels.get(label)
    if raw is None:
        return None
    if not INTEGER.fullmatch(raw) or not 0 < int(raw) <= MAX_REPLICAS:
        raise r.fail(f"metadata.labels.{label}", f"an integer from 1 to {MAX_REPLICAS}", raw)
    return int(raw)


def _article(word: str) -> str:
    return "an" if word[:1].upper() in "AEFHILMNORSX" else "a"


def gpu_devices(r: Reader, labels: Mapping[str, str], advertised: int) -> GpuDevices:
    """What each of the node's ``advertised`` GPUs (``nvidia.com/gpu``, or
    ``nvidia.com/gpu.shared`` when the device plugin renames replicas) is, by the module's
    rules. Labels that contradict one another (replicas without a product, a count that is
    not a number) are an error naming the label."""
    product = labels.get(GPU_PRODUCT_LABEL)
    replicas = _positive(r, labels, REPLICAS_LABEL) or 1
    count = _positive(r, labels, GPU_COUNT_LABEL) if replicas > 1 else None
    unit, kind, physical = Fraction(1), "", None
    single = SINGLE_MIG_PRODUCT.match(product or "")
    if labels.get(MIG_STRATEGY_LABEL) == "single" and single is not None:
        product = single["gpu"]
        profile = single["profile"]
        unit = Fraction(int(single["c"]), MIG_COMPUTE_SLICES)
        table = table_for(product)
        known = table.get(profile) if table is not None else None
        if "+me" in profile:
            per_gpu = 1  # a media-extension slice is one per GPU
        elif known is not None:
            per_gpu = known.max_instances
        else:
            per_gpu = MIG_COMPUTE_SLICES // int(single["c"])
        physical = math.ceil(Fraction(advertised, replicas * per_gpu))
        kind = f"MIG {profile} slice"
    if replicas > 1:
        if product is not None and product.endswith(SHARED_SUFFIX):
            product = product[: -len(SHARED_SUFFIX)]
        strategy = labels.get(SHARING_LABEL, "time-slicing")
        name = SHARING_NAMES.get(strategy, strategy)
        unit /= replicas
        if physical is None:
            physical = count if count is not None else math.ceil(Fraction(advertised, replicas))
        kind = f"{kind}, {name} {replicas} ways" if kind else f"{name} replica"
    if not kind:
        return GpuDevices(product)
    of = f"1/{unit.denominator}" if unit.numerator == 1 else str(unit)
    gpu = product or "GPU"
    return GpuDevices(product, unit, physical, f"{kind} ({of} of {_article(gpu)} {gpu})")
