"""MIG: NVIDIA's profile tables, valid layouts, and the partition of dynamic MIG GPUs.

A MIG-capable GPU (A100, H100, H200) has 7 compute slices and 8 memory slices. A GPU
instance of profile ``<c>g.<m>gb`` takes ``c`` compute slices and a run of memory slices
starting at one of the profile's allowed positions (``nvidia-smi mig -lgipp``):

=========  ===========  =================  =============
profile    memory size  start positions    max instances
=========  ===========  =================  =============
1g small   1            0, 1, 2, 3, 4, 5, 6  7
1g large   2            0, 2, 4, 6         4
2g         2            0, 2, 4            3
3g         4            0, 4               2
4g         4            0                  1
7g         8            0                  1
=========  ===========  =================  =============

A *layout* is valid when every instance starts at an allowed position, memory runs do not
overlap, compute slices add up to at most 7 and no profile exceeds its maximum. The names
follow the GPU's memory (A100 40GB: ``1g.5gb``, ``1g.10gb``, ``2g.10gb``, ``3g.20gb``,
``4g.20gb``, ``7g.40gb``; A100 80GB and H100 80GB: ``1g.10gb``, ``1g.20gb``, ``2g.20gb``,
``3g.40gb``, ``4g.40gb``, ``7g.80gb``; H200 141GB: ``1g.18gb``, ``1g.35gb``, ``2g.35gb``,
``3g.71gb``, ``4g.71gb``, ``7g.141gb``).

:class:`MigLayouts` keeps, for the GPUs of nodes whose partition gpufleet chooses (dynamic
MIG), the instances each GPU has and which are in use; it places a request on the GPU and
at the start that keep the most room, and re-partitions a GPU none of whose instances runs
anything.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

COMPUTE_SLICES = 7
MEMORY_SLICES = 8


@dataclass(frozen=True, slots=True)
class MigProfile:
    name: str
    compute: int
    memory_slices: int
    starts: tuple[int, ...]
    max_instances: int


def _table(small: int, large: int, half: int, total: int) -> dict[str, MigProfile]:
    """A GPU's table from the memory (GB) of its 1-, 2-, 4- and 8-memory-slice instances."""
    profiles = (
        MigProfile(f"1g.{small}gb", 1, 1, (0, 1, 2, 3, 4, 5, 6), 7),
        MigProfile(f"1g.{large}gb", 1, 2, (0, 2, 4, 6), 4),
        MigProfile(f"2g.{large}gb", 2, 2, (0, 2, 4), 3),
        MigProfile(f"3g.{half}gb", 3, 4, (0, 4), 2),
        MigProfile(f"4g.{half}gb", 4, 4, (0,), 1),
        MigProfile(f"7g.{total}gb", 7, 8, (0,), 1),
    )
    return {p.name: p for p in profiles}


TABLES: dict[str, dict[str, MigProfile]] = {
    "A100-40GB": _table(5, 10, 20, 40),
    "A100-80GB": _table(10, 20, 40, 80),
    "H100-80GB": _table(10, 20, 40, 80),
    "H200-141GB": _table(18, 35, 71, 141),
}


def table_for(product: str | None) -> dict[str, MigProfile] | None:
    """The profile table of a GPU product label (``NVIDIA-H100-80GB-HBM3``), or None."""
    if not product:
        return None
    text = product.upper()
    if "H200" in text:
        return TABLES["H200-141GB"]
    if "H100" in text:
        return TABLES["H100-80GB"]
    if "A100" in text:
        return TABLES["A100-80GB" if "80GB" in text else "A100-40GB"]
    return None


@dataclass(frozen=True, slots=True)
class Instance:
    profile: MigProfile
    start: int

    @property
    def memory(self) -> range:
        return range(self.start, self.start + self.profile.memory_slices)


def valid_layout(instances: list[Instance] | tuple[Instance, ...]) -> bool:
    """Whether the instances can coexist on one GPU (the module's rules)."""
    used = [False] * MEMORY_SLICES
    compute = 0
    counts: dict[str, int] = {}
    for inst in instances:
        p = inst.profile
        if inst.start not in p.starts or inst.start + p.memory_slices > MEMORY_SLICES:
            return False
        for slot in inst.memory:
            if used[slot]:
                return False
            used[slot] = True
        compute += p.compute
        counts[p.name] = counts.get(p.name, 0) + 1
        if counts[p.name] > p.max_instances:
            return False
    return compute <= COMPUTE_SLICES


def free_starts(instances: list[Instance], profile: MigProfile) -> list[int]:
    """Starts at which one more instance of ``profile`` keeps the layout valid."""
    return [s for s in profile.starts if valid_layout([*instances, Instance(profile, s)])]


def room(instances: list[Instance]) -> int:
    """Compute slices still free on a GPU."""
    return COMPUTE_SLICES - sum(i.profile.compute for i in instances)


@dataclass(slots=True)
class GpuPartition:
    """One dynamic-MIG GPU: its instances, and for each the pod using it (or None)."""

    instances: list[Instance]
    users: list[str | None]

    @property
    def idle(self) -> bool:
        return all(u is None for u in self.users)


Candidate = tuple[tuple[int, ...], int, int | None]
"""(preference key, gpu, start or None) — see :meth:`MigLayouts.candidates`."""


class MigLayouts:
    """The partitions of the dynamic-MIG GPUs of a cluster, changed as pods are placed.

    Instances created since :meth:`mark_baseline` disappear again when their pod is
    released (a rolled-back placement leaves the layout as it was, a re-partitioned idle
    GPU gets its old layout back); :meth:`reconfigurations` lists the GPUs whose layout now
    differs from the baseline.
    """

    def __init__(self, tables: dict[int, dict[str, MigProfile]], gpus: dict[int, int]) -> None:
        self.tables = tables
        """Per dynamic node index: its GPU's profile table."""
        self.gpus = dict(gpus)
        self.parts: dict[tuple[int, int], GpuPartition] = {
            (node, g): GpuPartition([], []) for node, count in gpus.items() for g in range(count)
        }
        self.version: dict[int, int] = dict.fromkeys(gpus, 0)
        """Per node, bumped on every change (the candidates cache keys on it)."""
        self._cache: dict[tuple[int, str, int, tuple[bool, ...]], list[Candidate]] = {}
        self.baseline: dict[tuple[int, int], list[str]] = {}
        self.created: set[tuple[int, int, Instance]] = set()
        self.replaced: dict[tuple[int, int], GpuPartition] = {}

    def mark_baseline(self) -> None:
        """The layouts as they are now are the cluster's own (not this run's changes)."""
        self.baseline = {key: self.layout(*key) for key in self.parts}
        self.created.clear()
        self.replaced.clear()

    def reconfigurations(self) -> list[tuple[int, int, list[str]]]:
        """(node, gpu, new layout) for every GPU whose layout differs from the baseline."""
        return [
            (node, gpu, self.layout(node, gpu))
            for (node, gpu) in sorted(self.parts)
            if self.layout(node, gpu) != self.baseline.get((node, gpu), [])
        ]

    def copy(self) -> MigLayouts:
        cache, self._cache = self._cache, {}
        try:
            return copy.deepcopy(self)
        finally:
            self._cache = cache

    def node_copy(self, node: int) -> MigLayouts:
        """An independent copy of ``node``'s partitions alone (to try placements on)."""
        other = MigLayouts({node: self.tables[node]}, {node: self.gpus[node]})
        for g in range(self.gpus[node]):
            part = self.parts[node, g]
            other.parts[node, g] = GpuPartition(list(part.instances), list(part.users))
        return other

    def clear_idle(self, node: int, gpu: int) -> bool:
        """Take the idle partition off ``gpu`` so that slices can be laid out anew (as
        :meth:`place` re-partitions an idle GPU); False if the GPU has none."""
        part = self.parts[node, gpu]
        if not part.instances or not part.idle:
            return False
        self.replaced.setdefault((node, gpu), GpuPartition(part.instances, part.users))
        part.instances, part.users = [], []
        self.version[node] += 1
        return True

    def fits(self, node: int, gpus: Sequence[int], profile_name: str, pod: str) -> bool:
        """Whether slices of ``profile_name`` placed on ``gpus`` in turn fit as they are."""
        trial = self.node_copy(node)
        try:
            for g in gpus:
                trial.place(node, g, profile_name, pod)
        except ValueError:
            return False
        return True

    def is_dynamic(self, node: int) -> bool:
        return node in self.tables

    def candidates(self, node: int, profile_name: str, whole_free: list[bool]) -> list[Candidate]:
        """Where ``profile_name`` could go on ``node``: (preference key, gpu, start or None).

        A free instance of the profile comes first (no change), then a partitioned GPU with
        room, tightest first, then a re-partition of an idle GPU, then a whole free GPU —
        which keeps whole GPUs for whole-GPU pods as long as slices can be packed.
        """
        table = self.tables.get(node)
        if table is None or profile_name not in table:
            return []
        key = (node, profile_name, self.version[node], tuple(whole_free))
        cached = self._cache.get(key)
        if cached is None:
            cached = self._cache[key] = self._candidates(node, table[profile_name], whole_free)
        return cached

    def _candidates(
        self, node: int, profile: MigProfile, whole_free: list[bool]
    ) -> list[Candidate]:
        profile_name = profile.name
        out: list[Candidate] = []
        for g in range(self.gpus[node]):
            part = self.parts[node, g]
            free = [
                i
                for i, (inst, user) in enumerate(zip(part.instances, part.users, strict=True))
                if user is None and inst.profile.name == profile_name
            ]
            if free:
                out.append(((0, 0, g), g, None))
                continue
            if part.instances:
                if free_starts(part.instances, profile):
                    out.append(((1, room(part.instances), g), g, None))
                elif part.idle:
                    out.append(((2, 0, g), g, None))
            elif whole_free[g]:
                out.append(((3, 0, g), g, None))
        return sorted(out)

    def place(self, node: int, gpu: int, profile_name: str, pod: str) -> Instance:
        """Give ``pod`` an instance of ``profile_name`` on ``gpu``, creating one if needed."""
        part = self.parts[node, gpu]
        profile = self.tables[node].get(profile_name)
        if profile is None:
            raise ValueError(f"no MIG profile {profile_name} on the GPUs of node {node}")
        self.version[node] += 1
        for i, (inst, user) in enumerate(zip(part.instances, part.users, strict=True)):
            if user is None and inst.profile.name == profile_name:
                part.users[i] = pod
                return inst
        starts = free_starts(part.instances, profile)
        if not starts:
            if not part.idle:
                raise ValueError(f"no room for {profile_name} on GPU {gpu} of node {node}")
            self.replaced.setdefault((node, gpu), GpuPartition(part.instances, part.users))
            part.instances, part.users = [], []  # re-partition an idle GPU
            starts = free_starts([], profile)
        start = self._best_start(part.instances, profile, starts)
        inst = Instance(profile, start)
        part.instances.append(inst)
        part.users.append(pod)
        self.created.add((node, gpu, inst))
        return inst

    @staticmethod
    def _best_start(instances: list[Instance], profile: MigProfile, starts: list[int]) -> int:
        """The start that leaves the most compute placeable for the largest profiles."""

        def left(start: int) -> tuple[int, int]:
            after = [*instances, Instance(profile, start)]
            largest = max(
                (p.compute for p in _profiles_like(profile) if free_starts(after, p)), default=0
            )
            return (largest, -start)

        return max(starts, key=left)

    def release(self, node: int, gpu: int, pod: str) -> None:
        """``pod`` no longer uses its instance (the instance stays, idle)."""
        part = self.parts[node, gpu]
        self.version[node] += 1
        for i, user in enumerate(part.users):
            if user == pod:
                part.users[i] = None
                inst = part.instances[i]
                if (node, gpu, inst) in self.created:
                    self.created.discard((node, gpu, inst))
                    del part.instances[i], part.users[i]
                    if not part.instances and (node, gpu) in self.replaced:
                        old = self.replaced.pop((node, gpu))
                        part.instances, part.users = old.instances, old.users
                return
        raise ValueError(f"pod {pod} has no MIG instance on GPU {gpu} of node {node}")

    def layout(self, node: int, gpu: int) -> list[str]:
        part = self.parts[node, gpu]
        return [i.profile.name for i in sorted(part.instances, key=lambda i: i.start)]

    def partitioned(self, node: int, gpu: int) -> bool:
        return bool(self.parts[node, gpu].instances)


def _profiles_like(profile: MigProfile) -> list[MigProfile]:
    """Every profile of the table ``profile`` belongs to (same memory naming)."""
    for table in TABLES.values():
        if table.get(profile.name) == profile:
            return list(table.values())
    return [profile]
