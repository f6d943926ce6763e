"""Dynamic Resource Allocation and NUMA zones in the live scheduler, against the API emulator
over real HTTP: a pod's claims are allocated and reserved for it before it is bound; a
restart reads the allocations back and never gives a device twice; a pod whose claim is
made from a template waits for the resourceclaim controller; a DeviceClass that does not
compile is reported and the others go on; a deleted ResourceSlice takes its devices away;
a claim write that loses a race fails the bind, which backs off; a NodeResourceTopology
gives its node NUMA zones, and taking it away takes them away."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from gpufleet.kube.process.live import LiveScheduler
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_node, bound, events, pods, serve

JSON = dict[str, Any]
DRIVER = "gpu.example.com"
CLAIM_STATUS = "resourceclaims.resource.k8s.io/status"


def store_of(emulator: Emulator, plural: str) -> Any:
    return emulator.store.resource("resource.k8s.io", "v1", plural)


def add_class(emulator: Emulator, name: str = "gpu", expression: str = "") -> None:
    expression = expression or f'device.driver == "{DRIVER}"'
    spec = {"selectors": [{"cel": {"expression": expression}}]}
    emulator.store.create(
        store_of(emulator, "deviceclasses"), "", {"metadata": {"name": name}, "spec": spec}
    )


def add_slice(emulator: Emulator, node: str, devices: int = 2) -> None:
    spec = {
        "driver": DRIVER,
        "nodeName": node,
        "pool": {"name": node, "generation": 0, "resourceSliceCount": 1},
        "devices": [{"name": f"gpu-{i}"} for i in range(devices)],
    }
    emulator.store.create(
        store_of(emulator, "resourceslices"), "", {"metadata": {"name": node}, "spec": spec}
    )


def claim_spec(device_class: str = "gpu") -> JSON:
    request = {"name": "gpu", "exactly": {"deviceClassName": device_class, "count": 1}}
    return {"devices": {"requests": [request]}}


def add_claim(emulator: Emulator, name: str, device_class: str = "gpu") -> None:
    emulator.store.create(
        store_of(emulator, "resourceclaims"),
        "default",
        {"metadata": {"name": name}, "spec": claim_spec(device_class)},
    )


def add_claim_pod(emulator: Emulator, name: str, claim: str, *, template: bool = False) -> None:
    ref = {"name": "gpu", ("resourceClaimTemplateName" if template else "resourceClaimName"): claim}
    spec = {
        "schedulerName": "gpufleet",
        "containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": "1"}}}],
        "resourceClaims": [ref],
    }
    emulator.store.create(
        emulator.store.resource("", "v1", "pods"),
        "default",
        {"metadata": {"name": name}, "spec": spec},
    )


def claims(emulator: Emulator) -> dict[str, JSON]:
    return {
        c["metadata"]["name"]: c
        for c in emulator.store.objects(store_of(emulator, "resourceclaims"))
    }


def devices_given(emulator: Emulator) -> Counter[tuple[str, str, str]]:
    """Each device, and how many claims' allocations hold it (the API's own record)."""
    held: Counter[tuple[str, str, str]] = Counter()
    for claim in claims(emulator).values():
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for r in allocation.get("devices", {}).get("results", []):
            held[r["driver"], r["pool"], r["device"]] += 1
    return held


def reserved_for(claim: JSON) -> set[str]:
    return {r["name"] for r in (claim.get("status") or {}).get("reservedFor") or []}


def cluster(emulator: Emulator, nodes: int = 1, devices: int = 2) -> None:
    add_class(emulator)
    for n in range(nodes):
        add_node(emulator, f"n{n}", gpus=0)
        add_slice(emulator, f"n{n}", devices)


def test_claims_are_allocated_and_reserved_before_the_pod_is_bound(emulator: Emulator) -> None:
    cluster(emulator)
    for name in ("c0", "c1"):
        add_claim(emulator, name)
    add_claim_pod(emulator, "p0", "c0")
    add_claim_pod(emulator, "p1", "c1")
    add_claim_pod(emulator, "shares", "c0")  # one claim, two pods
    serve(emulator, lambda _live: len(bound(emulator)) == 3)
    found = claims(emulator)
    assert reserved_for(found["c0"]) == {"p0", "shares"}
    assert reserved_for(found["c1"]) == {"p1"}
    uids = {r["uid"] for r in found["c0"]["status"]["reservedFor"]}
    assert uids == {pods(emulator)[p]["metadata"]["uid"] for p in ("p0", "shares")}
    assert set(devices_given(emulator).values()) == {1}
    assert len(devices_given(emulator)) == 2
    allocation = found["c0"]["status"]["allocation"]
    [result] = allocation["devices"]["results"]
    assert result["request"] == "gpu"
    assert (result["driver"], result["pool"]) == (DRIVER, "n0")
    [term] = allocation["nodeSelector"]["nodeSelectorTerms"]
    assert term["matchFields"] == [{"key": "metadata.name", "operator": "In", "values": ["n0"]}]
    # Each pod's claim is written before its binding (kube-scheduler's PreBind).
    writes = emulator.store.writes
    for pod, claim in (("p0", "c0"), ("p1", "c1"), ("shares", "c0")):
        binding = next(i for i, w in enumerate(writes) if w.verb == "bind" and w.name == pod)
        assert any(w.resource == CLAIM_STATUS and w.name == claim for w in writes[:binding])


def test_a_restart_reads_allocations_back_and_never_gives_a_device_twice(
    emulator: Emulator,
) -> None:
    cluster(emulator, nodes=2, devices=2)
    for i in range(2):
        add_claim(emulator, f"first-{i}")
        add_claim_pod(emulator, f"first-{i}", f"first-{i}")
    serve(emulator, lambda _live: len(bound(emulator)) == 2)
    for i in range(3):  # 2 devices left for 3 claims
        add_claim(emulator, f"then-{i}")
        add_claim_pod(emulator, f"then-{i}", f"then-{i}")
    live = serve(emulator, lambda live: len(bound(emulator)) == 4 and live.stats.cycles > 5)
    assert live.stats.bound == 2  # the new life bound only the new pods
    given = devices_given(emulator)
    assert len(given) == 4
    assert set(given.values()) == {1}
    allocated = {
        n for n, c in claims(emulator).items() if (c.get("status") or {}).get("allocation")
    }
    assert allocated == set(bound(emulator))


def test_a_bind_of_unknown_outcome_keeps_its_claims(emulator: Emulator) -> None:
    """The bind is applied but its reply lost, and the pod cannot be read to tell: the claim
    the bind wrote is not taken back (the pod may run with it), so a later pod never gets
    its device, not even after a restart."""
    cluster(emulator, devices=1)
    add_claim(emulator, "c0")
    add_claim_pod(emulator, "p0", "c0")
    emulator.faults.drop_reply(1)
    emulator.faults.fail(1, code=503, method="GET", path="/pods/p0$")
    live = serve(emulator, lambda _live: bound(emulator) == {"p0": "n0"})
    assert live.stats.unknown == 1
    uid = pods(emulator)["p0"]["metadata"]["uid"]
    [reservation] = claims(emulator)["c0"]["status"]["reservedFor"]
    assert reservation["uid"] == uid
    add_claim(emulator, "c1")
    add_claim_pod(emulator, "p1", "c1")
    serve(emulator, lambda live: live.stats.cycles > 5)  # a new life: a fresh list
    assert bound(emulator) == {"p0": "n0"}
    assert set(devices_given(emulator).values()) == {1}


def test_a_claim_made_from_a_template_waits_for_the_resourceclaim_controller(
    emulator: Emulator,
) -> None:
    cluster(emulator)
    templates = store_of(emulator, "resourceclaimtemplates")
    emulator.store.create(
        templates, "default", {"metadata": {"name": "one-gpu"}, "spec": {"spec": claim_spec()}}
    )
    add_claim_pod(emulator, "p", "one-gpu", template=True)

    def waiting(live: LiveScheduler) -> bool:
        pod = live.cache.pods.get("default/p")
        return (
            pod is not None and "resourceclaim controller" in pod.blocked and live.stats.cycles > 3
        )

    serve(emulator, waiting)
    assert bound(emulator) == {}
    # The resourceclaim controller: the claim from the template, its name in the pod's status.
    add_claim(emulator, "p-gpu-x7k2q")
    pod = pods(emulator)["p"]
    status = {
        **pod["status"],
        "resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": "p-gpu-x7k2q"}],
    }
    emulator.store.update(
        emulator.store.resource("", "v1", "pods"),
        "default",
        "p",
        {**pod, "status": status},
        subresource="status",
    )
    serve(emulator, lambda _live: bound(emulator) == {"p": "n0"})
    assert reserved_for(claims(emulator)["p-gpu-x7k2q"]) == {"p"}


def test_a_device_class_that_does_not_compile_is_reported_and_others_go_on(
    emulator: Emulator,
) -> None:
    cluster(emulator)
    add_class(emulator, "broken", "device.driver ==")
    add_claim(emulator, "fine")
    add_claim(emulator, "doomed", "broken")
    add_claim_pod(emulator, "fine", "fine")
    add_claim_pod(emulator, "doomed", "doomed")

    def told(live: LiveScheduler) -> bool:
        reasons = {e["reason"] for e in events(emulator)}
        return "FailedToRead" in reasons and "fine" in bound(emulator) and live.stats.cycles > 3

    serve(emulator, told)
    assert bound(emulator) == {"fine": "n0"}
    [unreadable] = [e for e in events(emulator) if e["reason"] == "FailedToRead"]
    assert unreadable["regarding"]["kind"] == "DeviceClass"
    assert unreadable["regarding"]["name"] == "broken"
    assert "DeviceClass broken: field 'spec.selectors[0].cel.expression'" in unreadable["note"]


def test_a_deleted_resource_slice_takes_its_devices_away(emulator: Emulator) -> None:
    cluster(emulator, devices=1)
    slices = store_of(emulator, "resourceslices")
    steps: list[str] = []

    def story(live: LiveScheduler) -> bool:
        pools = live.cache.objects["ResourcePool"]
        if not steps and f"{DRIVER}/n0" in pools:
            emulator.store.delete(slices, "", "n0")
            steps.append("deleted")
        elif steps == ["deleted"] and not pools:
            add_claim(emulator, "c")
            add_claim_pod(emulator, "p", "c")
            steps.append("asked")
            asked.append(live.stats.cycles)
        return steps[-1:] == ["asked"] and live.stats.cycles > asked[0] + 5

    asked: list[int] = []
    serve(emulator, story)
    assert bound(emulator) == {}
    assert devices_given(emulator) == Counter()
    add_slice(emulator, "n0", devices=1)  # the driver publishes it again
    serve(emulator, lambda _live: bound(emulator) == {"p": "n0"})


def test_a_claim_write_that_loses_a_race_fails_the_bind_which_backs_off(
    emulator: Emulator,
) -> None:
    cluster(emulator)
    for name in ("c0", "c1"):
        add_claim(emulator, name)
        add_claim_pod(emulator, name, name)
    emulator.faults.fail(2, code=409, method="PUT", path="/resourceclaims/c0/status$")
    live = serve(emulator, lambda _live: len(bound(emulator)) == 2)
    assert live.stats.bind_failures == 1
    assert sum(1 for w in emulator.store.writes if w.verb == "bind") == 2
    given = devices_given(emulator)
    assert len(given) == 2
    assert set(given.values()) == {1}


def nrt(emulator: Emulator, node: str, zones: list[tuple[int, int]]) -> JSON:
    resource = emulator.store.resource("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies")
    body = {
        "metadata": {"name": node},
        "zones": [
            {
                "name": f"node-{i}",
                "type": "Node",
                "resources": [
                    {"name": "cpu", "allocatable": str(cpu)},
                    {"name": "nvidia.com/gpu", "allocatable": str(gpus)},
                ],
            }
            for i, (cpu, gpus) in enumerate(zones)
        ],
        "attributes": [{"name": "topologyManagerPolicy", "value": "single-numa-node"}],
    }
    created: JSON = emulator.store.create(resource, "", body)
    return created


def add_pinned_pod(emulator: Emulator, name: str) -> None:
    limits = {"nvidia.com/gpu": "2", "cpu": "8", "memory": "16Gi"}
    spec = {
        "schedulerName": "gpufleet",
        "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
    }
    emulator.store.create(
        emulator.store.resource("", "v1", "pods"),
        "default",
        {"metadata": {"name": name}, "spec": spec},
    )


def test_a_node_resource_topology_gives_its_node_numa_zones_live(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=8)  # 32 CPUs; NUMA node 1 has only 2 of them
    nrt(emulator, "n0", [(16, 4), (2, 4)])
    for i in range(3):
        add_pinned_pod(emulator, f"g-{i}")

    def settled(live: LiveScheduler) -> bool:
        conditions = (pods(emulator)["g-2"].get("status") or {}).get("conditions") or []
        told = any("NUMA" in c.get("message", "") for c in conditions)
        return len(bound(emulator)) == 2 and told and live.stats.cycles > 3

    serve(emulator, settled)
    assert set(bound(emulator)) == {"g-0", "g-1"}
    resource = emulator.store.resource("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies")
    emulator.store.delete(resource, "", "n0")  # no zones: the node's CPUs are one pool again
    serve(emulator, lambda _live: len(bound(emulator)) == 3)


@pytest.mark.parametrize(
    "group",
    ["topology.node.k8s.io", "gpufleet.io", "scheduling.x-k8s.io", "resource.k8s.io"],
)
def test_a_cluster_without_an_optional_api_is_still_scheduled(
    emulator: Emulator, group: str
) -> None:
    """A cluster without a CRD gpufleet reads (or without DRA) becomes ready and schedules;
    only pods that need an object of the missing API wait."""
    emulator.faults.fail(None, code=404, path=f"/apis/{group}/")  # no such API
    add_node(emulator, "n0")
    add_pinned_pod(emulator, "p")
    live = serve(emulator, lambda _live: bound(emulator) == {"p": "n0"})
    assert live.ready
