"""The DRA allocator on Kubernetes' own allocator test cases, re-expressed (bench/dra.py
times the unsatisfiable case).

Each case names the upstream case it mirrors (k8s.io/dynamic-resource-allocation/structured,
allocator_test.go). Where gpufleet deliberately picks a better device than the first fit —
the smallest sufficient one — the case says so.
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.compose import schedule_snapshot
from gpufleet.dra import cel
from gpufleet.dra.allocator import Allocator, Unsatisfiable
from gpufleet.dra.cel import (
    MAX_EXPRESSION_LENGTH,
    CostLimitError,
    SelectorError,
    compile_selector,
)
from gpufleet.load.errors import InputError
from gpufleet.load.snapshot import load_snapshot
from gpufleet.model.devices import (
    Claim,
    Constraint,
    Device,
    DeviceClass,
    DeviceResult,
    DeviceTaint,
    DeviceToleration,
    Pool,
    Request,
    Subrequest,
    consumed_share,
    device_gpus,
)
from gpufleet.model.workload import Snapshot
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.state.claims import ClaimBook

DRIVER = "gpu.example.com"
CLASSES = {
    "gpu": DeviceClass("gpu", (f'device.driver == "{DRIVER}"',)),
    "big": DeviceClass(
        "big", ('device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) >= 0',)
    ),
}


def gpu(name: str, node: str | None = "n1", memory: str = "80Gi", **attrs: object) -> Device:
    return Device(
        DRIVER,
        node or "net",
        name,
        node,
        all_nodes=node is None,
        attributes={f"{DRIVER}/{k}": v for k, v in attrs.items()},
        capacity={f"{DRIVER}/memory": Decimal(_bytes(memory))},
    )


def _bytes(q: str) -> int:
    return int(q[:-2]) * 2**30


def pool(
    *devices: Device,
    name: str = "n1",
    complete: bool = True,
    counters: dict[str, dict[str, Decimal]] | None = None,
) -> Pool:
    return Pool(DRIVER, name, 1, 1, 1 if complete else 0, devices, counters or {})


def claim(*requests: Request, constraints: tuple[Constraint, ...] = (), key: str = "ns/c") -> Claim:
    return Claim(key, requests, constraints)


def req(
    name: str = "r", count: int = 1, cls: str = "gpu", *selectors: str, **kw: object
) -> Request:
    return Request(name, (Subrequest(name, cls, selectors, count, **kw),))  # type: ignore[arg-type]


def names(results: object) -> list[list[str]]:
    assert not isinstance(results, Unsatisfiable), results
    return [[r.device for r in claim_results] for claim_results in results]  # type: ignore[attr-defined]


def test_simple() -> None:
    allocator = Allocator([pool(gpu("g0"))], CLASSES)
    assert names(allocator.allocate([claim(req())], "n1")) == [["g0"]]


def test_other_node_devices_are_not_used() -> None:
    allocator = Allocator([pool(gpu("g0", node="n2"), name="n2")], CLASSES)
    assert isinstance(allocator.allocate([claim(req())], "n1"), Unsatisfiable)


def test_network_attached_devices_serve_every_node() -> None:
    allocator = Allocator([pool(gpu("nas", node=None), name="net")], CLASSES)
    assert names(allocator.allocate([claim(req())], "n7")) == [["nas"]]


def test_smallest_sufficient_device_first() -> None:
    # Upstream takes the first device in slice order (g-large); gpufleet takes the smallest
    # that satisfies the selectors, keeping the large one free.
    allocator = Allocator(
        [pool(gpu("g-large", memory="80Gi"), gpu("g-small", memory="48Gi"))], CLASSES
    )
    assert names(allocator.allocate([claim(req(cls="big"))], "n1")) == [["g-small"]]


def test_backtracking_between_requests() -> None:
    # r1 could take either device, r2 only g1: r1 must not keep g1.
    allocator = Allocator([pool(gpu("g0", index=0), gpu("g1", index=1))], CLASSES)
    result = allocator.allocate(
        [claim(req("r1"), req("r2", 1, "gpu", 'device.attributes["gpu.example.com"].index == 0'))],
        "n1",
    )
    assert names(result) == [["g1", "g0"]]


def test_backtracking_between_claims() -> None:
    allocator = Allocator([pool(gpu("g0", index=0), gpu("g1", index=1))], CLASSES)
    first = claim(req("r"), key="ns/a")
    second = claim(
        req("r", 1, "gpu", 'device.attributes["gpu.example.com"].index == 0'), key="ns/b"
    )
    assert names(allocator.allocate([first, second], "n1")) == [["g1"], ["g0"]]


def test_too_many_devices() -> None:
    allocator = Allocator([pool(*(gpu(f"g{i}") for i in range(40)))], CLASSES)
    result = allocator.allocate([claim(req(count=33))], "n1")
    assert isinstance(result, Unsatisfiable)
    assert "more than 32" in result.reason


def test_incomplete_pool_is_not_used() -> None:
    allocator = Allocator([pool(gpu("g0"), complete=False)], CLASSES)
    assert isinstance(allocator.allocate([claim(req())], "n1"), Unsatisfiable)


def test_all_mode_takes_every_matching_device() -> None:
    allocator = Allocator([pool(gpu("g0"), gpu("g1"))], CLASSES)
    assert names(allocator.allocate([claim(req(all_devices=True))], "n1")) == [["g0", "g1"]]


def test_all_mode_fails_if_one_is_taken() -> None:
    allocator = Allocator([pool(gpu("g0"), gpu("g1"))], CLASSES)
    allocator.inventory.commit([[DeviceResult("r", DRIVER, "n1", "g0")]])
    assert isinstance(allocator.allocate([claim(req(all_devices=True))], "n1"), Unsatisfiable)


def test_admin_access_ignores_allocations() -> None:
    allocator = Allocator([pool(gpu("g0"))], CLASSES)
    allocator.inventory.commit([[DeviceResult("r", DRIVER, "n1", "g0")]])
    assert isinstance(allocator.allocate([claim(req())], "n1"), Unsatisfiable)
    assert names(allocator.allocate([claim(req(admin_access=True))], "n1")) == [["g0"]]


def test_match_attribute() -> None:
    devices = [gpu("a0", numa=0), gpu("b1", numa=1), gpu("c1", numa=1)]
    allocator = Allocator([pool(*devices)], CLASSES)
    result = allocator.allocate(
        [claim(req(count=2), constraints=(Constraint(match_attribute=f"{DRIVER}/numa"),))], "n1"
    )
    assert names(result) == [["b1", "c1"]]


def test_distinct_attribute() -> None:
    devices = [gpu("a0", numa=0), gpu("b0", numa=0), gpu("c1", numa=1)]
    allocator = Allocator([pool(*devices)], CLASSES)
    result = allocator.allocate(
        [claim(req(count=2), constraints=(Constraint(distinct_attribute=f"{DRIVER}/numa"),))], "n1"
    )
    assert names(result) == [["a0", "c1"]]


def test_prioritized_list_falls_back() -> None:
    allocator = Allocator([pool(gpu("small", memory="16Gi"))], CLASSES)
    request = Request(
        "r",
        (Subrequest("large", "big"), Subrequest("any", "gpu")),
        first_available=True,
    )
    result = allocator.allocate([claim(request)], "n1")
    assert not isinstance(result, Unsatisfiable)
    assert [(r.request, r.device) for r in result[0]] == [("r/any", "small")]


def test_shared_counters() -> None:
    counters = {"memory": {"slices": Decimal(8)}}
    slices = [
        Device(DRIVER, "n1", f"mig-{i}", "n1", consumes=(("memory", (("slices", Decimal(4)),)),))
        for i in range(3)
    ]
    allocator = Allocator([pool(*slices, counters=counters)], {"gpu": DeviceClass("gpu")})
    assert names(allocator.allocate([claim(req(count=2))], "n1")) == [["mig-0", "mig-1"]]
    assert isinstance(allocator.allocate([claim(req(count=3))], "n1"), Unsatisfiable)


def test_taints_and_tolerations() -> None:
    tainted = Device(DRIVER, "n1", "g0", "n1", taints=(DeviceTaint("health", "bad", "NoSchedule"),))
    allocator = Allocator([pool(tainted)], CLASSES)
    assert isinstance(allocator.allocate([claim(req())], "n1"), Unsatisfiable)
    tolerant = req(tolerations=(DeviceToleration("health", "Exists"),))
    assert names(allocator.allocate([claim(tolerant)], "n1")) == [["g0"]]


def test_broken_selector_fails_the_claim_not_the_call() -> None:
    allocator = Allocator([pool(gpu("g0"))], CLASSES)
    result = allocator.allocate([claim(req("r", 1, "gpu", "device.driver =="))], "n1")
    assert isinstance(result, Unsatisfiable)
    assert "selector error: claim ns/c request r: 'device.driver =='" in result.reason
    broken_class = {"gpu": DeviceClass("gpu", ("device.nope(",))}
    result = Allocator([pool(gpu("g0"))], broken_class).allocate([claim(req())], "n1")
    assert isinstance(result, Unsatisfiable)
    assert "selector error: DeviceClass gpu:" in result.reason
    with pytest.raises(SelectorError):
        compile_selector("device.driver ==")


def test_semver_and_quantity_functions() -> None:
    device = Device(
        DRIVER,
        "n1",
        "g0",
        "n1",
        attributes={"driverVersion": _semver("550.54.15")},
        capacity={f"{DRIVER}/memory": Decimal(80 * 2**30)},
    )
    for expression in (
        'device.attributes["gpu.example.com"].driverVersion.isGreaterThan(semver("535.0.0"))',
        'device.capacity["gpu.example.com"].memory.isGreaterThan(quantity("40Gi"))',
        'device.capacity["gpu.example.com"].memory.asInteger() == 85899345920',
    ):
        assert compile_selector(expression).matches(device), expression


def _semver(text: str) -> object:
    from gpufleet.dra.cel import Semver

    return Semver(text)


def test_unsatisfiable_match_is_rejected_fast() -> None:
    """9 devices sharing a NUMA node where each has 8: the counting argument says no at once."""
    devices = [gpu(f"g{i:02d}", numa=i // 8) for i in range(64)]
    allocator = Allocator([pool(*devices)], CLASSES)
    result = allocator.allocate(
        [claim(req(count=9), constraints=(Constraint(match_attribute=f"{DRIVER}/numa"),))], "n1"
    )
    assert isinstance(result, Unsatisfiable)
    assert "no combination" in result.reason


@pytest.mark.parametrize("driver", [DRIVER, "other.example.com"])
def test_driver_fast_path_agrees_with_cel(driver: str) -> None:
    fast = compile_selector(f'device.driver == "{driver}"')
    slow = compile_selector(f'device.driver == "{driver}" && true')
    assert fast.driver == driver
    assert slow.driver is None
    device = gpu("g0")
    assert fast.matches(device) is slow.matches(device) is (driver == DRIVER)


def test_the_selector_caches_are_bounded() -> None:
    """A process that meets ever new expressions and devices keeps only the latest ones."""
    compile_selector.cache_clear()
    drivers = [DRIVER, *(f"d{i}.example.com" for i in range(cel.COMPILED_SELECTORS))]
    for driver in drivers:
        compile_selector(f'device.driver == "{driver}" && true')
    compiled = compile_selector.cache_info()
    assert compiled.maxsize == cel.COMPILED_SELECTORS
    assert compiled.currsize == cel.COMPILED_SELECTORS
    # The first was dropped: it is compiled again, and still right.
    assert compile_selector(f'device.driver == "{DRIVER}" && true').matches(gpu("g0"))
    assert compile_selector.cache_info().misses == compiled.misses + 1

    cel._domain_map.cache_clear()
    for i in range(cel.DEVICE_MAPS + 1):
        cel.activation(gpu(f"g{i}", serial=i))  # one attribute map per device, one capacity map
    maps = cel._domain_map.cache_info()
    assert maps.maxsize == cel.DEVICE_MAPS
    assert maps.currsize == cel.DEVICE_MAPS
    assert maps.misses == cel.DEVICE_MAPS + 2


@st.composite
def cluster_and_claims(draw: st.DrawFn) -> tuple[list[Pool], list[list[Claim]]]:
    pools = []
    for n in range(draw(st.integers(1, 3))):
        node = f"n{n}"
        devices = tuple(
            Device(
                DRIVER,
                node,
                f"g{g}",
                node,
                attributes={f"{DRIVER}/numa": draw(st.integers(0, 1)), f"{DRIVER}/index": g},
                capacity={f"{DRIVER}/memory": Decimal(draw(st.sampled_from([16, 48, 80])) * 2**30)},
                consumes=(("slots", (("units", Decimal(draw(st.integers(1, 3)))),)),),
            )
            for g in range(draw(st.integers(1, 6)))
        )
        pools.append(Pool(DRIVER, node, 1, 1, 1, devices, {"slots": {"units": Decimal(8)}}))
    pods = []
    for p in range(draw(st.integers(1, 8))):
        constraint = draw(st.sampled_from([None, "match", "distinct"]))
        constraints: tuple[Constraint, ...] = ()
        if constraint == "match":
            constraints = (Constraint(match_attribute=f"{DRIVER}/numa"),)
        elif constraint == "distinct":
            constraints = (Constraint(distinct_attribute=f"{DRIVER}/numa"),)
        selector = draw(st.sampled_from([(), (CLASSES["big"].selectors[0],)]))
        request = Request("r", (Subrequest("r", "gpu", selector, draw(st.integers(1, 3))),))
        pods.append([Claim(f"ns/c{p}", (request,), constraints)])
    return pools, pods


@settings(max_examples=150, deadline=None)
@given(cluster_and_claims())
def test_allocations_are_valid(data: tuple[list[Pool], list[list[Claim]]]) -> None:
    """No device twice, counters never exceeded, selectors and constraints always hold."""
    pools, pods = data
    allocator = Allocator(pools, CLASSES)
    devices = {d.key: d for p in pools for d in p.devices}
    used: set[tuple[str, str, str]] = set()
    units: dict[str, Decimal] = {}
    for claims in pods:
        for node in sorted({p.name for p in pools}):
            result = allocator.allocate(claims, node)
            if isinstance(result, Unsatisfiable):
                continue
            allocator.inventory.commit(result)
            for claim, claim_results in zip(claims, result, strict=True):
                chosen = [devices[DRIVER, r.pool, r.device] for r in claim_results]
                assert len(chosen) == claim.requests[0].alternatives[0].count
                for d in chosen:
                    assert d.key not in used
                    used.add(d.key)
                    assert d.node == node
                    for expression in (
                        *CLASSES["gpu"].selectors,
                        *claim.requests[0].alternatives[0].selectors,
                    ):
                        assert compile_selector(expression).matches(d)
                    units[d.pool] = units.get(d.pool, Decimal(0)) + d.consumes[0][1][0][1]
                    assert units[d.pool] <= 8
                numa = [d.attribute(f"{DRIVER}/numa") for d in chosen]
                for constraint in claim.constraints:
                    if constraint.match_attribute:
                        assert len(set(numa)) == 1
                    if constraint.distinct_attribute:
                        assert len(set(numa)) == len(numa)
            break


def test_invalid_pool_is_reported_only_when_nothing_else_fits() -> None:
    broken = Pool(DRIVER, "bad", 1, 1, 1, (gpu("x", node="n1"),), invalid="device x twice")
    good = pool(gpu("g0"))
    allocator = Allocator([broken, good], CLASSES)
    assert names(allocator.allocate([claim(req())], "n1")) == [["g0"]]
    result = allocator.allocate([claim(req(count=2))], "n1")
    assert isinstance(result, Unsatisfiable)
    assert "pool gpu.example.com/bad is invalid: device x twice" in result.reason


def test_consumable_capacity_shares_a_device() -> None:
    shared = Device(
        DRIVER, "n1", "big", "n1", capacity={f"{DRIVER}/memory": Decimal(80)}, multi=True
    )
    allocator = Allocator([pool(shared)], CLASSES)
    third = Request("r", (Subrequest("r", "gpu", capacity=(("memory", Decimal(30)),)),))
    for key in ("ns/a", "ns/b"):
        result = allocator.allocate([Claim(key, (third,))], "n1")
        assert not isinstance(result, Unsatisfiable)
        assert result[0][0].consumed == ((f"{DRIVER}/memory", Decimal(30)),)
        allocator.inventory.commit(result)
    assert isinstance(allocator.allocate([Claim("ns/c", (third,))], "n1"), Unsatisfiable)
    allocator.inventory.release(
        [[DeviceResult("r", DRIVER, "n1", "big", consumed=((f"{DRIVER}/memory", Decimal(30)),))]]
    )
    assert not isinstance(allocator.allocate([Claim("ns/c", (third,))], "n1"), Unsatisfiable)


@pytest.mark.parametrize(
    "expression",
    [
        'device.attributes["gpu.example.com"].product.lowerAscii() == "nvidia h100"',
        'device.attributes["gpu.example.com"].product.upperAscii().startsWith("NVIDIA")',
        'device.attributes["gpu.example.com"].product.split(" ")[1] == "H100"',
        '["a", "b"].join("-") == "a-b"',
        'device.attributes["gpu.example.com"].product.replace("H100", "H200") == "NVIDIA H200"',
        'device.attributes["gpu.example.com"].product.indexOf("H") == 7',
        'device.attributes["gpu.example.com"].product.substring(0, 6) == "NVIDIA"',
        '"  x ".trim() == "x"',
    ],
)
def test_kubernetes_string_library(expression: str) -> None:
    assert compile_selector(expression).matches(gpu("g0", product="NVIDIA H100"))


# -- what devices count as toward queues (model/devices.py, scheduler/state/claims.py) -----------

NVIDIA = "gpu.nvidia.com"


def nvidia(name: str, *, counters: str | None = None, **attrs: str) -> Device:
    return Device(
        NVIDIA,
        "n1",
        name,
        "n1",
        attributes={f"{NVIDIA}/{k}": v for k, v in attrs.items()},
        consumes=((counters, (("slices", Decimal(1)),)),) if counters else (),
    )


@pytest.mark.parametrize(
    ("driver", "attrs", "annotation", "gpus"),
    [
        pytest.param(NVIDIA, {"type": "gpu"}, None, 1.0, id="nvidia-whole-gpu"),
        pytest.param(DRIVER, {}, None, 1.0, id="dra-example-driver-gpu"),
        pytest.param(NVIDIA, {"type": "mig", "profile": "3g.40gb"}, None, 3 / 7, id="mig-3g"),
        pytest.param(NVIDIA, {"type": "mig", "profile": "1g.10gb"}, None, 1 / 7, id="mig-1g"),
        pytest.param("dra.net", {}, None, 0.0, id="nic-is-no-gpu"),
        pytest.param("gpudirect.example.com", {}, None, 0.0, id="first-label-must-be-gpu"),
        pytest.param("accel.example.com", {}, 2.0, 2.0, id="class-annotation-counts"),
        pytest.param(NVIDIA, {"type": "gpu"}, 0.0, 0.0, id="class-annotation-excludes"),
    ],
)
def test_what_a_device_counts_as(
    driver: str, attrs: dict[str, str], annotation: float | None, gpus: float
) -> None:
    device = Device(
        driver, "p", "d", "n1", attributes={f"{driver}/{k}": v for k, v in attrs.items()}
    )
    assert device_gpus(driver, device, annotation) == pytest.approx(gpus)


def test_a_claim_on_a_shared_device_counts_the_part_it_consumes() -> None:
    shared = replace(gpu("g0"), multi=True)
    memory = f"{DRIVER}/memory"
    assert consumed_share(shared, ((memory, Decimal(_bytes("20Gi"))),)) == pytest.approx(0.25)
    assert consumed_share(gpu("g0"), ((memory, Decimal(_bytes("20Gi"))),)) == 1.0


def book(
    *devices: Device, claims: tuple[Claim, ...] = (), classes: tuple[DeviceClass, ...] = ()
) -> ClaimBook:
    nvidia_class = DeviceClass("gpu.nvidia.com", (f'device.driver == "{NVIDIA}"',))
    mig_class = DeviceClass(
        "mig.nvidia.com",
        (f'device.driver == "{NVIDIA}" && device.attributes["{NVIDIA}"].type == "mig"',),
    )
    pools = (
        Pool(
            NVIDIA, "n1", 1, 1, 1, devices, {f"gpu-{i}": {"slices": Decimal(7)} for i in range(4)}
        ),
    )
    return ClaimBook(
        Snapshot(
            (),
            pools=pools,
            claims=claims or (claim(req()),),
            device_classes=(nvidia_class, mig_class, *classes),
        )
    )


def test_a_gpu_and_the_mig_devices_carved_from_it_count_once_in_the_cluster() -> None:
    devices = (
        nvidia("gpu-0", counters="gpu-0", type="gpu"),
        nvidia("gpu-0-mig-0", counters="gpu-0", type="mig", profile="3g.40gb"),
        nvidia("gpu-0-mig-4", counters="gpu-0", type="mig", profile="3g.40gb"),
        nvidia("gpu-1", type="gpu"),
    )
    assert book(*devices).gpu_capacity() == pytest.approx(2.0)


def test_a_pending_claim_counts_the_most_it_may_be_allocated() -> None:
    devices = (
        nvidia("gpu-0", type="gpu"),
        nvidia("gpu-1", type="gpu"),
        nvidia("gpu-2", type="gpu"),
        nvidia("mig-0", type="mig", profile="1g.10gb"),
    )
    prioritized = Claim(
        "ns/fa",
        (
            Request(
                "r",
                (Subrequest("mig", "mig.nvidia.com"), Subrequest("two", "gpu.nvidia.com", count=2)),
                first_available=True,
            ),
        ),
    )
    every = Claim("ns/all", (Request("r", (Subrequest("r", "gpu.nvidia.com", all_devices=True),)),))
    claims = book(*devices, claims=(prioritized, every))
    # Kubernetes' ResourceQuota charges a prioritized list its largest alternative.
    assert claims.most_gpus("ns/fa") == pytest.approx(2.0)
    # allocationMode All takes every matching device of a node: three GPUs and the MIG device.
    assert claims.most_gpus("ns/all") == pytest.approx(3 + 1 / 7)


def test_a_bad_gpus_per_device_annotation_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "snapshot.yaml"
    path.write_text(
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\n"
        "metadata: {name: c, annotations: {gpufleet.io/gpus-per-device: lots}}\nspec: {}\n"
    )
    with pytest.raises(InputError) as caught:
        load_snapshot(path)
    assert "DeviceClass c" in str(caught.value)
    assert "metadata.annotations.gpufleet.io/gpus-per-device" in str(caught.value)


def test_explain_shows_the_claimed_gpus_a_queue_holds(tmp_path: Path) -> None:
    scenario = Path(__file__).parents[1] / "scenarios" / "dra-claims-count-toward-limit.yaml"
    command = [sys.executable, "-m", "gpufleet", "explain", "-f", str(scenario), "ml/b"]
    done = subprocess.run(
        [*command, "--now", "2026-01-01T01:00:00Z"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "queue ml: fair share 1 GPUs, 2 CPU, 0 GiB; allocated 1 GPUs" in done.stdout
    assert "pending: queue ml is at its limit of 1 GPU (1 GPU in use" in done.stdout


def consumers_snapshot(tmp_path: Path, running: int, gang: int = 0) -> Path:
    """A claim of one GPU, allocated, that ``running`` running pods use, and one more pod
    waiting to use it — or, with ``gang``, that many pods of an elastic gang (minMember 1)."""
    docs = [
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        "status:\n  allocatable: {cpu: '512', memory: 2Ti, pods: '1000'}",
        "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.nvidia.com}\n"
        'spec:\n  selectors:\n  - cel: {expression: device.driver == "gpu.nvidia.com"}',
        "apiVersion: resource.k8s.io/v1\nkind: ResourceSlice\nmetadata: {name: n1-gpus}\n"
        "spec:\n  driver: gpu.nvidia.com\n  nodeName: n1\n"
        "  pool: {name: n1, generation: 1, resourceSliceCount: 1}\n  devices:\n  - name: gpu-0",
        "apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\n"
        "metadata: {name: shared, namespace: ml}\nspec:\n  devices:\n    requests:\n"
        "    - name: gpu\n      exactly: {deviceClassName: gpu.nvidia.com}\n"
        "status:\n  allocation:\n    devices:\n      results:\n"
        "      - {request: gpu, driver: gpu.nvidia.com, pool: n1, device: gpu-0}",
    ]

    def pod(name: str, bound: bool, group: str = "") -> str:
        node = "  nodeName: n1\n" if bound else ""
        phase = "status: {phase: Running, startTime: '2026-01-01T00:00:00Z'}\n" if bound else ""
        labels = f", labels: {{scheduling.x-k8s.io/pod-group: {group}}}" if group else ""
        return (
            f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, namespace: ml, "
            f"creationTimestamp: '2026-01-01T00:00:00Z'{labels}}}\n"
            f"spec:\n  schedulerName: gpufleet\n{node}"
            "  containers: [{name: main, image: x}]\n"
            "  resourceClaims: [{name: gpu, resourceClaimName: shared}]\n" + phase
        )

    docs += [pod(f"r{i:03d}", bound=True) for i in range(running)]
    if gang:
        docs.append(
            "apiVersion: scheduling.x-k8s.io/v1alpha1\nkind: PodGroup\n"
            "metadata: {name: g, namespace: ml, creationTimestamp: '2026-01-01T00:00:00Z'}\n"
            "spec: {minMember: 1}"
        )
        docs += [pod(f"e{i}", bound=False, group="g") for i in range(gang)]
    else:
        docs.append(pod("extra", bound=False))
    path = tmp_path / "snapshot.yaml"
    path.write_text("\n---\n".join(docs))
    return path


@pytest.mark.parametrize("running", [255, 256])
def test_a_claim_is_reserved_for_256_pods_at_most(tmp_path: Path, running: int) -> None:
    """Kubernetes caps ``status.reservedFor`` at 256: the 256th pod of a shared claim is
    placed, a 257th waits (and says why), as kube-scheduler's DRA plugin has it wait."""
    snapshot = load_snapshot(consumers_snapshot(tmp_path, running), warn=lambda _w: None)
    result = schedule_snapshot(snapshot, 1_767_229_200.0)
    if running < 256:
        assert [b.pod for b in result.bindings] == ["ml/extra"]
        return
    assert result.bindings == ()
    [waiting] = result.pending
    assert waiting.pod == "ml/extra"
    assert "ResourceClaim ml/shared has reached its maximum number of consumers (256" in why_text(
        waiting.why
    )


def test_an_elastic_gang_s_extras_keep_the_256_limit(tmp_path: Path) -> None:
    """Three pods of a gang of minMember 1 on a claim 255 running pods use: the core pod
    takes the 256th place, the two extras wait and say why."""
    path = consumers_snapshot(tmp_path, 255, gang=3)
    result = schedule_snapshot(load_snapshot(path, warn=lambda _w: None), 1_767_229_200.0)
    assert [b.pod for b in result.bindings] == ["ml/e0"]
    assert sorted(p.pod for p in result.pending) == ["ml/e1", "ml/e2"]
    for waiting in result.pending:
        assert "has reached its maximum number of consumers" in why_text(waiting.why)


LIST = '"' + ",".join(["x"] * 100) + '".split(",")'
NESTED = f"{LIST}.exists(a, {LIST}.exists(b, {LIST}.exists(c, a + b + c == 'zzz')))"
"""A million evaluations of the innermost body: cut off by the cost limit."""
REPLACED = '"aaaaaaaaaa"' + '.replace("a", "aaaaaaaaaa")' * 12 + ".size() > 0"
"""A string of 10**13 characters, were it built."""


@pytest.mark.parametrize("expression", [NESTED, REPLACED], ids=["nested-macros", "replace-chain"])
def test_a_selector_stops_at_the_cost_limit_and_is_refused_after(expression: str) -> None:
    selector = compile_selector(expression)
    device = Device("gpu.nvidia.com", "p", "g0")
    with pytest.raises(CostLimitError, match="exceeded the cost limit of 1,000,000 units"):
        selector.matches(device)
    with pytest.raises(CostLimitError):  # at once: the budget is not spent again
        selector.matches(Device("gpu.nvidia.com", "p", "g1"))


def test_a_selector_within_the_limit_evaluates() -> None:
    square = f"{LIST}.map(a, {LIST}.map(b, a + b)).size() == 100"
    assert compile_selector(square).matches(Device("gpu.nvidia.com", "p", "g0"))


def test_a_selector_longer_than_kubernetes_allows_is_refused() -> None:
    expression = 'device.driver == "' + "x" * (MAX_EXPRESSION_LENGTH) + '"'
    with pytest.raises(SelectorError, match="longer than 10240 characters") as error:
        compile_selector(expression)
    assert len(str(error.value)) < 200


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ('"abc".split("") == ["a", "b", "c"]', True),
        ('"abc".split("", 2) == ["a", "bc"]', True),
        ('"a,b,c".split(",", 2) == ["a", "b,c"]', True),
        ('"abc".split("", 0) == []', True),
        ('["a", "b"].join("-") == "a-b"', True),
        ('"aXbX".replace("X", "") == "ab"', True),
        ('"ab".replace("", "-") == "-a-b-"', True),
    ],
)
def test_string_functions_keep_cel_semantics_under_the_meter(
    expression: str, expected: bool
) -> None:
    assert compile_selector(expression).matches(Device("d", "p", "g")) is expected
