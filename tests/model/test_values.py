"""Every frozen dataclass of ``model/`` and ``framework/`` compares by value and hashes.

A cluster cache fed by watch events stores these values, diffs the old one against the new
one on update and keys dictionaries by them. The table below builds each type twice,
separately: the two must be equal, hash equal and find each other in a dict or set; a
copy with any one compared field changed must not be equal. Fields are changed by
``bumped`` (an int plus one, a string with a suffix, ...) unless the case says how.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pickle
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from decimal import Decimal
from typing import Any

import numpy as np
import pytest

import gpufleet.framework
import gpufleet.model
from gpufleet.framework.profile import Profile
from gpufleet.framework.protocols import FilterVerdict, Handle
from gpufleet.framework.runtime import Exclusion, FilterResult, GpuMemory
from gpufleet.framework.status import Code, Reason, Status
from gpufleet.model.autoscale import SupplyRun
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.costs import (
    CostTimeline,
    CycleCost,
    HourlyCost,
    JobCost,
    QueueCost,
    ReplayCost,
    Sheet,
    Split,
)
from gpufleet.model.devices import (
    Claim,
    Constraint,
    Device,
    DeviceAllocation,
    DeviceClass,
    DeviceResult,
    OpaqueConfig,
    Pool,
    Request,
    Subrequest,
)
from gpufleet.model.fragmentation import FragmentIndex, TypicalPods, typical_pods
from gpufleet.model.interpod import (
    HostPort,
    LabelSelector,
    PodPlacement,
    PodTerm,
    SpreadConstraint,
    WeightedTerm,
)
from gpufleet.model.mig import TABLES, Instance, MigProfile
from gpufleet.model.pod import PodSpec
from gpufleet.model.progress import Progress
from gpufleet.model.results import (
    ActionTally,
    FillRun,
    QueueUsage,
    ReplayRun,
    SizeWaits,
    Timeline,
)
from gpufleet.model.selectors import NodeConstraint, Requirement, Taint, Toleration
from gpufleet.model.study import InputFile, Study, StudyRun
from gpufleet.model.supply import NodeOffer
from gpufleet.model.values import FrozenMap
from gpufleet.model.volumes import CsiNode, PersistentVolume, Storage, StorageClass, VolumeClaim
from gpufleet.model.workload import (
    GroupSpec,
    PodInfo,
    QueueProblem,
    QueueSpec,
    ReplayJob,
    Snapshot,
    SubGroup,
    vector,
)

RNG = np.random.default_rng(0)
FRAGMENTS = FragmentIndex(typical_pods([PodSpec("p", 1000, 1024, 1, 1000)]))
"""A handle's generator and fragment index are objects with state, compared by identity:
equal handles share them."""


def requirement() -> Requirement:
    return Requirement("zone", "In", ("a", "b"))


def constraint() -> NodeConstraint:
    return NodeConstraint(((requirement(),),), (Toleration("gpu", "Exists"),))


def node_spec() -> NodeSpec:
    return NodeSpec(
        "node-1",
        96_000,
        393_216,
        8,
        "A100",
        {"zone": "a", "rack": "r1"},
        (Taint("gpu", "yes"),),
        {"1g.10gb": 7},
        False,
        (0, 0, 1, 1),
        (48_000, 48_000),
        True,
        {"vpc.amazonaws.com/efa": 4},
        110,
    )


def pod_spec() -> PodSpec:
    return PodSpec(
        "ns/p",
        4000,
        8192,
        1,
        1000,
        frozenset({"A100"}),
        constraint(),
        extended=(("vpc.amazonaws.com/efa", 1),),
        placement=placement(),
    )


def selector() -> LabelSelector:
    return LabelSelector((Requirement("app", "In", ("web",)),))


def term() -> PodTerm:
    return PodTerm(selector(), frozenset({"ml"}), "kubernetes.io/hostname")


def spread() -> SpreadConstraint:
    return SpreadConstraint(1, "zone", selector(), 2, honor_node_affinity=True)


def placement() -> PodPlacement:
    return PodPlacement(
        "ml",
        {"app": "web"},
        (term(),),
        (term(),),
        (spread(),),
        (HostPort("TCP", 8080),),
        (WeightedTerm(term(), -50),),
        (spread(),),
    )


def queue_spec() -> QueueSpec:
    return QueueSpec(
        "team-a",
        "dept",
        50,
        vector(4, 8000, 4096),
        vector(8, np.inf, np.inf),
        vector(2, 1, 1),
        60.0,
        30.0,
        (True, False, False),
    )


def pod_info() -> PodInfo:
    return PodInfo(
        "ns/p",
        pod_spec(),
        "team-a",
        "ns/gang",
        10,
        True,
        100.0,
        "node-1",
        (3,),
        150.0,
        True,
        ("ns/claim",),
        "",
        0.5,
    )


def group_spec() -> GroupSpec:
    return GroupSpec(
        "ns/gang", 4, "team-a", 100.0, 200.0, "rack", "zone", "clique", (8.0, 0.0, 0.0), True, 10.0
    )


def device() -> Device:
    return Device(
        "gpu.example.com",
        "pool-1",
        "gpu-0",
        "node-1",
        False,
        frozenset({"node-1"}),
        {"gpu.example.com/model": "A100", "gpu.example.com/numa": 0},
        {"gpu.example.com/memory": Decimal(80)},
        (Taint("broken"),),
        (("set-1", (("memory", Decimal(40)),)),),
        True,
    )


def pool() -> Pool:
    return Pool(
        "gpu.example.com", "pool-1", 1, 1, 1, (device(),), {"set-1": {"memory": Decimal(80)}}
    )


def opaque() -> OpaqueConfig:
    return OpaqueConfig("gpu.example.com", '{"sharing": "mps"}', ("gpu",))


def subrequest() -> Subrequest:
    return Subrequest(
        "gpu",
        "gpu.example.com",
        ("device.driver == 'gpu.example.com'",),
        2,
        False,
        False,
        (Toleration("broken", "Exists"),),
        (("gpu.example.com/memory", Decimal(20)),),
    )


def request() -> Request:
    return Request("gpu", (subrequest(),), True)


def claim() -> Claim:
    return Claim("ns/claim", (request(),), (Constraint(("gpu",), "numa", None),), (opaque(),))


def device_result() -> DeviceResult:
    return DeviceResult(
        "gpu",
        "gpu.example.com",
        "pool-1",
        "gpu-0",
        False,
        (("gpu.example.com/memory", Decimal(20)),),
        (Toleration("broken", "Exists"),),
        "gpu.example.com",
    )


def allocation() -> DeviceAllocation:
    return DeviceAllocation((device_result(),), "node-1")


def typical() -> TypicalPods:
    return TypicalPods(
        np.array([4000, 8000], dtype=np.int64),
        np.array([500, 1000], dtype=np.int64),
        np.array([1, 2], dtype=np.int64),
        (None, frozenset({"A100"})),
        np.array([0.25, 0.75]),
        np.array([1024.0, 2048.0]),
    )


def timeline() -> Timeline:
    return Timeline((0.0, 60.0), {"team-a": (1.0, 2.0)}, (0.0, 1.0))


def replay_run() -> ReplayRun:
    return ReplayRun(
        "trace", "gpufleet", 42, 10, 8, 1, 1, 5.0, 4.0, 9.0, 50.0, 70.0, 3600.0, 2, 0.5,
        12.0, 24.0, 7200.0, 100, (QueueUsage("team-a", 10, 12.0, 10.0),), (0.0, 5.0, 9.0),
        timeline(), 1.5, 1, (SizeWaits("1", 10, 1, 5.0, 4.0, 9.0),),
    )  # fmt: skip


def input_file() -> InputFile:
    return InputFile("trace", "pods.csv", "/data/pods.csv", "a" * 64)


def study_run() -> StudyRun:
    return StudyRun(
        "fills", "fill", input_file(), None, None, None, None, (0.0, None),
        (("policy", "fgd"), ("inflate", 1.3)), 42,
    )  # fmt: skip


def cost_timeline() -> CostTimeline:
    return CostTimeline((0.0, 60.0), {"team-a": (0.0, 1.5), "__idle__": (0.0, 0.5)})


def hourly_cost() -> HourlyCost:
    return HourlyCost(
        Split(3.0, 1.0, 0.5), Split(2.0, 0.5, 0.25), Split(1.0, 0.5, 0.25),
        (QueueCost("team-a", "org", Split(2.0, 0.5, 0.25), 2.75, 1.0),),
    )  # fmt: skip


def replay_cost() -> ReplayCost:
    return ReplayCost(
        Sheet("sheet", "list prices", "USD"), (0.0, 3600.0), Split(3.0, 1.0, 0.5),
        Split(2.0, 0.5, 0.25), Split(1.0, 0.5, 0.25), 0.5, 2, 1.5,
        (QueueCost("team-a", "org", Split(2.0, 0.5, 0.25), 2.75, 1.0),),
        (JobCost("job-1", "team-a", 1.0, Split(2.0, 0.5, 0.25)),), cost_timeline(), 0.1,
    )  # fmt: skip


def verdict() -> FilterVerdict:
    return FilterVerdict(
        np.array([True, False, True]), (("Insufficient GPU", np.array([False, True, False])),)
    )


def status() -> Status:
    return Status(Code.UNSCHEDULABLE, (Reason("GpuFit", "Insufficient GPU", 1),), "GpuFit", 3)


def snapshot() -> Snapshot:
    return Snapshot(
        (node_spec(),),
        (pod_info(),),
        (group_spec(),),
        (queue_spec(),),
        ("rack",),
        (DeviceClass("gpu.example.com", ("true",), (opaque(),), 1.0),),
        (pool(),),
        (claim(),),
        {"ns/claim": allocation()},
        storage(),
    )


def node_offer() -> NodeOffer:
    return NodeOffer("gpu", node_spec(), (("rack", 4),), 1, 8, 300.0, True, 0.01, 0.9, 3)


def supply_run() -> SupplyRun:
    return SupplyRun(
        "gpufleet", 1, replay_run(), 100.0, 10.0, 80.0, 60.0, 1.0, 0.5, 2.0, 70.0, 1, 0.5, 3,
        2, 4, 1.5, 9, 1, 5, 86400.0, ((0.0, 8.0, 4.0, 2.0),),
    )  # fmt: skip


def volume_claim() -> VolumeClaim:
    return VolumeClaim(
        "ml/data", "fast", "", 50 << 30, frozenset({"ReadWriteOnce"}), "Filesystem", selector()
    )


def persistent_volume() -> PersistentVolume:
    return PersistentVolume(
        "pv-1",
        "fast",
        100 << 30,
        frozenset({"ReadWriteOnce"}),
        "Filesystem",
        ((requirement(),),),
        {"topology.kubernetes.io/zone": "a"},
        "ml/data",
        "ebs.csi.aws.com",
        "vol-1",
    )


def storage() -> Storage:
    return Storage(
        (StorageClass("fast", "ebs.csi.aws.com", True, ((requirement(),),)),),
        (persistent_volume(),),
        (volume_claim(),),
        (CsiNode("n1", {"ebs.csi.aws.com": 25}),),
    )


@dataclass(frozen=True)
class Also:
    """A change of one field that is valid only with others changed too."""

    value: object
    others: dict[str, object]


@dataclass(frozen=True)
class Case:
    make: Callable[[], object]
    changes: dict[str, object] = field(default_factory=dict)
    """How to change the fields ``bumped`` cannot (or would make invalid)."""


CASES: dict[type, Case] = {
    NodeSpec: Case(
        node_spec,
        {
            "gpu_model": "H100",
            "labels": {"zone": "b", "rack": "r1"},
            "mig_slices": {"1g.10gb": 6},
            "extended": {},
            "gpu_memory_mib": 81_920,
            "gpu_unit": 0.25,
            "physical_gpus": 2,
        },
    ),
    GpuMemory: Case(GpuMemory),
    Requirement: Case(requirement),
    Taint: Case(lambda: Taint("gpu", "yes", "NoExecute")),
    Toleration: Case(lambda: Toleration("gpu", "Equal", "yes", "NoSchedule")),
    NodeConstraint: Case(constraint),
    MigProfile: Case(lambda: MigProfile("3g.40gb", 3, 4, (0, 4), 2)),
    Instance: Case(
        lambda: Instance(MigProfile("3g.40gb", 3, 4, (0, 4), 2), 4),
        {"profile": TABLES["A100-80GB"]["4g.40gb"]},
    ),
    PodSpec: Case(
        pod_spec,
        {
            "gpu_milli": 500,
            "gpu_models": None,
            "constraint": None,
            "mig_profile": Also("3g.40gb", {"num_gpu": 0, "gpu_milli": 0}),
            "placement": None,
            "volumes": ("ml/data",),
            "gpu_charge": 0.5,
        },
    ),
    LabelSelector: Case(selector),
    PodTerm: Case(
        term,
        {"namespaces": None, "selector": LabelSelector(), "namespace_selector": selector()},
    ),
    SpreadConstraint: Case(spread, {"selector": LabelSelector()}),
    HostPort: Case(lambda: HostPort("UDP", 53, "10.0.0.1")),
    PodPlacement: Case(placement, {"labels": {"app": "db"}}),
    WeightedTerm: Case(
        lambda: WeightedTerm(term(), 20), {"term": replace(term(), namespaces=None)}
    ),
    QueueSpec: Case(queue_spec, {"parent": None, "quota_set": (True, True, False)}),
    PodInfo: Case(
        pod_info,
        {"spec": replace(pod_spec(), cpu_milli=1), "node": None, "progress": Progress(moves=1)},
    ),
    Progress: Case(lambda: Progress(3600.0, 600.0, 30.0, 1, 40.0), {"last_checkpoint": None}),
    GroupSpec: Case(group_spec, {"subgroups": (SubGroup("workers", 2),)}),
    SubGroup: Case(lambda: SubGroup("workers", 2, "job", "rack", "zone")),
    QueueProblem: Case(lambda: QueueProblem("cycle", "a", ("a", "b", "a"))),
    ReplayJob: Case(
        lambda: ReplayJob("job-1", "team-a", 10.0, 600.0, pod_spec(), 2),
        {"spec": replace(pod_spec(), memory_mib=1)},
    ),
    Snapshot: Case(
        snapshot,
        {
            "allocations": {},
            "storage": Storage(),
            "namespaces": {"ml": {"a": "b"}},
            "offers": (node_offer(),),
        },
    ),
    NodeOffer: Case(node_offer, {"template": replace(node_spec(), gpus=4)}),
    SupplyRun: Case(supply_run, {"replay": replace(replay_run(), seed=7)}),
    StorageClass: Case(lambda: StorageClass("fast", "ebs.csi.aws.com", True, ((requirement(),),))),
    PersistentVolume: Case(
        persistent_volume,
        {
            "access_modes": frozenset({"ReadWriteMany"}),
            "labels": {"topology.kubernetes.io/zone": "b"},
        },
    ),
    VolumeClaim: Case(
        volume_claim,
        {"storage_class": None, "access_modes": frozenset(), "selector": None},
    ),
    CsiNode: Case(lambda: CsiNode("n1", {"ebs.csi.aws.com": 25}), {"limits": {}}),
    Storage: Case(storage),
    Device: Case(
        device,
        {
            "node": None,
            "nodes": None,
            "attributes": {"gpu.example.com/model": "H100", "gpu.example.com/numa": 0},
            "capacity": {},
        },
    ),
    Pool: Case(pool, {"invalid": "a device in two slices", "counters": {}}),
    OpaqueConfig: Case(opaque),
    DeviceClass: Case(lambda: DeviceClass("gpu.example.com", ("true",), (opaque(),), 1.0)),
    Subrequest: Case(subrequest),
    Request: Case(request),
    Constraint: Case(lambda: Constraint(("gpu",), "numa", "pcie")),
    Claim: Case(claim),
    DeviceAllocation: Case(allocation),
    DeviceResult: Case(device_result),
    TypicalPods: Case(typical, {"gpu_models": (frozenset({"V100"}), None)}),
    FillRun: Case(lambda: FillRun("default", "fgd", 42, (None, 50.0), (None, 10.0), 3, 100, 2.5)),
    QueueUsage: Case(lambda: QueueUsage("team-a", 10, 12.0, 10.0)),
    SizeWaits: Case(lambda: SizeWaits("1", 10, 1, 5.0, 4.0, 9.0)),
    ActionTally: Case(lambda: ActionTally("consolidate", 3, 1.5, 2, 40.0)),
    Timeline: Case(timeline, {"allocated": {"team-b": (1.0, 2.0)}}),
    ReplayRun: Case(
        replay_run,
        {
            "mean_wait_s": None,
            "queues": (),
            "timeline": replace(timeline(), pending_gpus=()),
            "cost": replay_cost(),
            "actions": (ActionTally("consolidate", 3, 1.5, 2, 40.0),),
            "all_waits": SizeWaits("all", 10, 1, 5.0, 4.0, 9.0),
        },
    ),
    InputFile: Case(input_file),
    StudyRun: Case(
        study_run,
        {
            "trace": replace(input_file(), digest="b" * 64),
            "trace_format": "philly",
            "cluster": replace(input_file(), role="cluster"),
            "queues": replace(input_file(), role="queues"),
            "prices": replace(input_file(), role="prices"),
            "serving": replace(input_file(), role="serving"),
        },
    ),
    Study: Case(lambda: Study("study", "study.yaml", (study_run(),))),
    Sheet: Case(lambda: Sheet("sheet", "list prices", "USD")),
    Split: Case(lambda: Split(2.0, 0.5, 0.25)),
    QueueCost: Case(
        lambda: QueueCost("team-a", "org", Split(2.0, 0.5, 0.25), 2.75, 1.0),
        {"cost": Split(2.0, 0.5, 0.5)},
    ),
    JobCost: Case(
        lambda: JobCost("job-1", "team-a", 1.0, Split(2.0, 0.5, 0.25)),
        {"cost": Split(2.0, 0.5, 0.5)},
    ),
    CostTimeline: Case(cost_timeline, {"cumulative": {"team-a": (0.0, 1.0)}}),
    HourlyCost: Case(
        hourly_cost,
        {
            "cluster": Split(3.0, 1.0, 0.0),
            "allocated": Split(2.0, 0.5, 0.0),
            "idle": Split(1.0, 0.5, 0.0),
            "queues": (),
        },
    ),
    CycleCost: Case(
        lambda: CycleCost(Sheet("sheet", "list prices", "USD"), hourly_cost(), hourly_cost()),
        {
            "sheet": Sheet("other", "list prices", "USD"),
            "before": replace(hourly_cost(), queues=()),
            "after": replace(hourly_cost(), queues=()),
        },
    ),
    ReplayCost: Case(
        replay_cost,
        {
            "sheet": Sheet("other", "list prices", "USD"),
            "cluster": Split(3.0, 1.0, 0.0),
            "allocated": Split(2.0, 0.5, 0.0),
            "idle": Split(1.0, 0.5, 0.0),
            "timeline": CostTimeline((0.0,), {}),
        },
    ),
    Profile: Case(lambda: Profile("fgd", ("GpuFit",), (("FGDScore", 1),), "FGDGpu", False, "")),
    FilterVerdict: Case(verdict, {"failures": ()}),
    Handle: Case(
        lambda: Handle(RNG, FRAGMENTS, np.array([2, 0, 1])),
        {
            "rng": np.random.default_rng(0),
            "fragments": FragmentIndex(FRAGMENTS.typical),
            "tie_rank": None,
        },
    ),
    FilterResult: Case(
        lambda: FilterResult(np.array([0, 2]), status()), {"status": Status(Code.SUCCESS)}
    ),
    Exclusion: Case(lambda: Exclusion(np.array([True, False]), "held for ns/big")),
    Reason: Case(lambda: Reason("GpuFit", "Insufficient GPU", 1)),
    Status: Case(status, {"code": Code.SUCCESS}),
}


def bumped(value: object) -> object:
    """A different value of the same kind."""
    if isinstance(value, bool | np.bool_):
        return not value
    if isinstance(value, int | float | Decimal):
        return value + 1
    if isinstance(value, str):
        return f"{value}-changed"
    if isinstance(value, np.ndarray):
        return ~value if value.dtype == np.bool_ else value + 1
    if isinstance(value, tuple) and value:
        return (*value, value[-1])
    raise AssertionError(f"say in the case how to change {value!r}")


def compared_fields(value: object) -> list[str]:
    assert dataclasses.is_dataclass(value)
    return [f.name for f in fields(value) if f.compare]


def frozen_dataclasses(package: Any) -> set[type]:
    found = set()
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                cls.__module__ == module.__name__
                and dataclasses.is_dataclass(cls)
                and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
            ):
                found.add(cls)
    return found


def test_the_table_covers_every_frozen_dataclass() -> None:
    expected = frozen_dataclasses(gpufleet.model) | frozen_dataclasses(gpufleet.framework)
    assert {cls.__name__ for cls in expected - set(CASES)} == set()
    assert {cls.__name__ for cls in set(CASES) - expected} == set()


@pytest.mark.parametrize("cls", list(CASES), ids=lambda cls: cls.__name__)
def test_values_built_apart_are_equal_and_hash_equal(cls: type) -> None:
    a, b = CASES[cls].make(), CASES[cls].make()
    assert type(a) is cls
    assert a is not b
    assert a == b
    assert not a != b  # noqa: SIM202 (!= is its own operator)
    assert hash(a) == hash(b)
    assert {a: "found"}[b] == "found"
    assert len({a, b}) == 1


@pytest.mark.parametrize("cls", list(CASES), ids=lambda cls: cls.__name__)
def test_a_changed_field_makes_a_different_value(cls: type) -> None:
    case = CASES[cls]
    value = case.make()
    assert set(case.changes) <= set(compared_fields(value))
    for name in compared_fields(value):
        change = case.changes[name] if name in case.changes else bumped(getattr(value, name))
        others = change.others if isinstance(change, Also) else {}
        new = change.value if isinstance(change, Also) else change
        changed = replace(value, **{name: new}, **others)  # type: ignore[type-var]
        assert changed != value, name
        assert value != changed, name
        assert {value: "found"}.get(changed) is None, name


@pytest.mark.parametrize(
    "make", [node_spec, pod_info, group_spec, queue_spec], ids=lambda make: make.__name__
)
def test_uid_and_resource_version_take_no_part_in_equality(make: Callable[[], Any]) -> None:
    # Identity, not content: an object read again after a write that changed nothing the
    # scheduler reads is the same value, and a cache diffing old against new sees no change.
    value = make()
    assert (value.uid, value.resource_version) == ("", "")
    other = replace(value, uid="7d1e", resource_version="102")
    assert other.uid == "7d1e"
    assert other == value
    assert hash(other) == hash(value)
    assert {value: "found"}[other] == "found"


def test_values_survive_pickling() -> None:
    # The fill runs its tasks in processes.
    for case in CASES.values():
        value = case.make()
        if not isinstance(value, Handle):  # its generator would come back as a copy
            assert pickle.loads(pickle.dumps(value)) == value


def test_a_node_keeps_its_own_copy_of_the_maps_it_is_given() -> None:
    labels = {"zone": "a"}
    node = NodeSpec("n", 1000, 1024, 0, None, labels)
    labels["zone"] = "b"
    assert node.labels == {"zone": "a"}
    assert isinstance(node.labels, FrozenMap)
    with pytest.raises(TypeError, match="cannot be changed"):
        node.labels["zone"] = "c"
    assert node == NodeSpec("n", 1000, 1024, 0, None, {"zone": "a"})


def test_a_queue_keeps_read_only_copies_of_its_vectors() -> None:
    quota = vector(1, 2, 3)
    queue = QueueSpec("q", quota=quota)
    quota[0] = 9
    assert queue == QueueSpec("q", quota=vector(1, 2, 3))
    with pytest.raises(ValueError, match="read-only"):
        queue.quota[0] = 5


def test_array_fields_compare_by_value_not_by_dtype_and_shape_counts() -> None:
    held = Exclusion(np.array([1, 0], dtype=np.int64), "m")
    assert held == Exclusion(np.array([1.0, 0.0]), "m")
    assert hash(held) == hash(Exclusion(np.array([1.0, 0.0]), "m"))
    assert held != Exclusion(np.array([[1, 0]]), "m")
    assert held != Exclusion(np.array([1, 0, 0]), "m")


def test_a_frozen_map_is_a_dict_that_cannot_change() -> None:
    items = FrozenMap({"a": 1, "b": 2})
    assert items == {"b": 2, "a": 1}
    assert hash(items) == hash(FrozenMap({"b": 2, "a": 1}))  # order does not count
    assert items.get("a") == 1
    assert "b" in items
    assert FrozenMap(items) == items
    changes: list[Callable[[], object]] = [
        lambda: items.update(c=3),
        lambda: items.pop("a"),
        items.popitem,
        lambda: items.setdefault("c", 3),
        items.clear,
        lambda: items.__setitem__("a", 2),
        lambda: items.__delitem__("a"),
        lambda: items.__ior__({"c": 3}),
    ]
    for change in changes:
        with pytest.raises(TypeError, match="cannot be changed"):
            change()
    assert items == {"a": 1, "b": 2}
    assert repr(items) == "FrozenMap({'a': 1, 'b': 2})"


def test_a_placed_pod_copies_every_field() -> None:
    pod = PodInfo(
        "ns/p",
        PodSpec("p", 1000, 1024, 1, 500),
        queue="q",
        group="ns/g",
        priority=7,
        can_preempt=False,
        created=3.0,
        managed=False,
        claims=("ns/c",),
        blocked="gated",
        claim_gpus=2.0,
        uid="u",
        resource_version="9",
        demand_milli=400,
        demand_unit=0.25,
        subgroup="workers",
        progress=Progress(1800.0, 600.0, None, 1, 2.0),
        owner="rs-1",
        daemon=True,
    )
    copied = {"key", "spec", "queue", "group", "priority", "can_preempt", "created", "managed"}
    copied |= {"claims", "blocked", "claim_gpus", "uid", "resource_version", "demand_milli"}
    copied |= {"demand_unit", "subgroup", "progress", "owner", "daemon"}
    assert {f.name for f in fields(PodInfo)} == copied | {"node", "gpus", "started"}
    bound = pod.placed("n1", (3,), 42.0)
    expected = replace(pod, node="n1", gpus=(3,), started=42.0)
    assert [getattr(bound, f.name) for f in fields(PodInfo)] == [
        getattr(expected, f.name) for f in fields(PodInfo)
    ]
