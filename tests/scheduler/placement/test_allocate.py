"""The placer (``scheduler/placement/allocate.py``): a job's core is placed all or nothing in
one transaction — the first pod that does not fit comes back and the caller rolls back — a
gang of one plain spec is counted first (GangFit) and fails without a placement when the
cluster has fewer slots than pods, and a gang whose devices must share an attribute value
is tried value by value."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

import numpy as np
import pytest

from gpufleet.compose import COMPONENTS
from gpufleet.framework.runtime import Exclusion
from gpufleet.framework.status import Code
from gpufleet.model.cluster import ClusterState
from gpufleet.model.devices import Claim, Device, DeviceClass, Pool, Request, Subrequest
from gpufleet.model.values import EMPTY
from gpufleet.model.workload import GroupSpec, PodInfo, Snapshot
from gpufleet.report.reasons import status_text, why_text
from gpufleet.scheduler.api.transaction import Transaction
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.cycle import Cycle
from gpufleet.scheduler.cycle.session import snapshot_session
from gpufleet.scheduler.placement.allocate import Placer
from gpufleet.scheduler.placement.domains import Failure, PlaceAll, Where, restrict
from gpufleet.scheduler.placement.rules import TopologyRule
from gpufleet.scheduler.placement.topology import DomainTopology
from tests.builders import InfoBuilder, cycle_of, free_of, info, job_of, node


def gang_cycle(*members: InfoBuilder) -> Cycle:
    """A gang ``ns/g`` of ``members`` (all of them its minMember) on n0 (4 GPUs) and n1 (2)."""
    pods = [m.gang("ns/g").obj() for m in members]
    group = GroupSpec("ns/g", len(pods))
    return cycle_of([node("n0", gpus=4), node("n1", gpus=2)], pods, groups=(group,))


def member(i: int, gpus: int) -> InfoBuilder:
    return info(f"ns/g-{i}").gpus(gpus)


def test_a_gang_that_fits_is_reserved_pod_by_pod() -> None:
    cycle = gang_cycle(member(0, 4), member(1, 2))
    txn = Transaction(cycle.ledger.state)
    assert cycle.placer.job(job_of(cycle, "ns/g"), txn, None) is None
    assert [(n, gpus) for n, _, gpus in txn.reserved()] == [(0, (0, 1, 2, 3)), (1, (0, 1))]
    assert cycle.ledger.state.gpu_whole_free.tolist() == [0, 0]


def test_a_gang_that_does_not_fit_names_its_first_pod_that_did_not_and_rolls_back() -> None:
    cycle = gang_cycle(member(0, 4), member(1, 3))  # two specs: no count, placed in turn
    before = free_of(cycle.ledger.state)
    txn = Transaction(cycle.ledger.state)
    failure = cycle.placer.job(job_of(cycle, "ns/g"), txn, None)
    assert failure is not None
    assert (failure.pod.key, failure.fitted) == ("ns/g-1", 1)
    assert status_text(failure.status) == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    assert [(n, gpus) for n, _, gpus in txn.reserved()] == [(0, (0, 1, 2, 3))]
    txn.rollback()
    assert free_of(cycle.ledger.state) == before


@pytest.mark.parametrize(
    ("members", "pod", "fitted", "code", "message"),
    [
        pytest.param(
            [member(i, 2) for i in range(4)],
            "ns/g-3",
            3,
            Code.UNSCHEDULABLE,
            "0/2 nodes are available: 2 node(s) had no room left for another pod of the gang.",
            id="fewer-slots-than-pods",
        ),
        pytest.param(
            [member(i, 2).models("H100") for i in range(2)],
            "ns/g-0",
            0,
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "0/2 nodes are available: 2 node(s) didn't match Pod's GPU model (H100).",
            id="no-node-for-any-pod",
        ),
    ],
)
def test_a_gang_of_one_plain_spec_is_counted_before_any_placement(
    members: list[InfoBuilder], pod: str, fitted: int, code: Code, message: str
) -> None:
    cycle = gang_cycle(*members)
    before = free_of(cycle.ledger.state)
    txn = Transaction(cycle.ledger.state)
    failure = cycle.placer.job(job_of(cycle, "ns/g"), txn, None)
    assert failure is not None
    assert (failure.pod.key, failure.fitted, failure.status.code) == (pod, fitted, code)
    assert status_text(failure.status) == message
    assert txn.reserved() == []
    assert free_of(cycle.ledger.state) == before


def test_a_gang_that_the_count_lets_through_is_placed() -> None:
    cycle = gang_cycle(*(member(i, 2) for i in range(3)))  # exactly three slots
    txn = Transaction(cycle.ledger.state)
    assert cycle.placer.job(job_of(cycle, "ns/g"), txn, None) is None
    assert sorted(n for n, _, _ in txn.reserved()) == [0, 0, 1]


# -- topology ---------------------------------------------------------------------------


def racked(kind: str) -> tuple[Cycle, Placer]:
    """Two racks of two 2-GPU nodes, one GPU of n0 in use; a gang of two 2-GPU pods."""
    nodes = [replace(node(f"n{i}", gpus=2), labels={"rack": f"r{i // 2}"}) for i in range(4)]
    pods = [info("ns/x").gpus(1).on("n0", 0).obj()]
    pods += [member(i, 2).gang("ns/g").obj() for i in range(2)]
    group = GroupSpec("ns/g", 2, **{f"topology_{kind}": "rack"})  # type: ignore[arg-type]
    cycle = cycle_of(nodes, pods, groups=(group,))
    return cycle, Placer(cycle.ledger, lambda: cycle.framework, (), DomainTopology(("rack",)))


def test_a_gang_that_requires_a_rack_is_placed_in_one() -> None:
    cycle, allocation = racked("required")
    txn = Transaction(cycle.ledger.state)
    assert allocation.job(job_of(cycle, "ns/g"), txn, None) is None
    assert sorted(n for n, _, _ in txn.reserved()) == [2, 3]


def test_elastic_pods_of_a_gang_that_requires_a_rack_stay_in_it() -> None:
    cycle, allocation = racked("required")
    cycle.ledger.bind(info("ns/g-9").gpus(1).gang("ns/g").on("n3", 0).obj())
    held = allocation.extras_held(job_of(cycle, "ns/g"), None, info("ns/g-8").obj())
    assert held is not None
    assert held.mask.tolist() == [True, True, False, False]
    assert held.message == "node(s) outside the gang's rack"


# -- shares capped by what the queue's limit leaves -------------------------------------


def test_a_capped_share_is_kept_off_nodes_where_it_would_take_more() -> None:
    share = info("ns/s").gpu_memory(30 * 1024).obj()
    cycle = cycle_of(
        [node("n0", gpus=2, gpu_mem=80 * 1024), node("n1", gpus=2, gpu_mem=40 * 1024)], [share]
    )
    allocation = cycle.placer
    assert allocation.capped(share, None) is None  # no cap: every node
    allocation.caps = {"ns/s": 500}  # 30 GiB is 375m of an 80 GiB GPU, 750m of a 40 GiB one
    held = allocation.capped(share, None)
    assert held is not None
    assert held.mask.tolist() == [False, True]
    assert "over the 500m its queue's limit or quota leaves it" in held.message


# -- devices that must share one attribute value ----------------------------------------

DRIVER = "gpu.nvidia.com"


def clique_pool(name: str, cliques: str) -> Pool:
    """A node's GPUs, of the cliques named by the letters of ``cliques`` ("-": none)."""
    devices = tuple(
        Device(DRIVER, name, f"g{i}", name, attributes={f"{DRIVER}/clique": c} if c != "-" else {})
        for i, c in enumerate(cliques)
    )
    return Pool(DRIVER, name, 1, 1, 1, devices)


def clique_cycle(
    per_pod: int,
    match: str | None = f"{DRIVER}/clique",
    cliques: tuple[str, str] = ("aabb", "bbcc"),
) -> Cycle:
    """n1's GPUs are of cliques a, a, b, b; n2's b, b, c, c (by default); a gang of two pods,
    each with a claim for ``per_pod`` GPUs."""
    pods = tuple(info(f"ml/g-{i}").gang("ml/g").claims(f"ml/g-{i}-gpu").obj() for i in range(2))
    claims = tuple(
        Claim(p.claims[0], (Request("gpu", (Subrequest("gpu", DRIVER, count=per_pod),)),))
        for p in pods
    )
    snapshot = Snapshot(
        (node("n1", gpus=0), node("n2", gpus=0)),
        pods,
        (GroupSpec("ml/g", 2, device_match=match),),
        device_classes=(DeviceClass(DRIVER, (f'device.driver == "{DRIVER}"',)),),
        pools=(clique_pool("n1", cliques[0]), clique_pool("n2", cliques[1])),
        claims=claims,
    )
    return snapshot_session(snapshot, CycleConfig(), 100.0, components=COMPONENTS).cycle


def devices(cycle: Cycle) -> dict[str, list[str]]:
    return {
        pod: [f"{r.pool}/{r.device}" for results in claims.values() for r in results]
        for pod, claims in sorted(cycle.ledger.book.pod_claims.items())
    }


def test_a_device_matched_gang_takes_devices_of_one_value() -> None:
    cycle = clique_cycle(2)
    assert cycle.placer.job(job_of(cycle, "ml/g"), Transaction(cycle.ledger.state), None) is None
    # only clique b has four devices
    assert devices(cycle) == {"ml/g-0": ["n1/g2", "n1/g3"], "ml/g-1": ["n2/g0", "n2/g1"]}
    assert cycle.ledger.book.device_match is None


def test_without_the_annotation_the_devices_are_not_matched() -> None:
    cycle = clique_cycle(2, match=None)
    assert cycle.placer.job(job_of(cycle, "ml/g"), Transaction(cycle.ledger.state), None) is None
    assert devices(cycle) == {"ml/g-0": ["n1/g0", "n1/g1"], "ml/g-1": ["n1/g2", "n1/g3"]}


def test_a_device_matched_gang_that_no_value_holds_fails_and_leaves_no_claim() -> None:
    cycle = clique_cycle(3)  # six devices of one clique: no clique has them
    txn = Transaction(cycle.ledger.state)
    failure = cycle.placer.job(job_of(cycle, "ml/g"), txn, None)
    assert failure is not None
    assert failure.pod.key == "ml/g-0"
    assert failure.why is not None
    assert "needs 3" in why_text(failure.why)
    assert cycle.ledger.book.device_match is None
    assert cycle.ledger.book.allocations == {}
    assert txn.reserved() == []


def test_a_device_matched_gang_takes_no_device_without_the_attribute() -> None:
    # No GPU has a clique: no value can be shared by every device of the gang (README,
    # "every device of the gang shares one value of the attribute"), so it must wait.
    cycle = clique_cycle(2, cliques=("----", "----"))
    failure = cycle.placer.job(job_of(cycle, "ml/g"), Transaction(cycle.ledger.state), None)
    assert failure is not None
    assert devices(cycle) == {}


def test_nodes_that_cannot_allocate_a_pods_claims_are_held_for_it() -> None:
    cycle = clique_cycle(5)  # each node has four devices
    pod = job_of(cycle, "ml/g").pods[0]
    held = cycle.placer.for_claims(pod, None)
    assert held is not None
    assert held.mask.tolist() == [True, True]
    assert held.message == "node(s) cannot allocate the pod's ResourceClaims"
    assert not cycle.placer.claims_fit(pod, 0)
    fitting = clique_cycle(2)
    pod = job_of(fitting, "ml/g").pods[0]
    assert fitting.placer.claims_fit(pod, 0)
    held = fitting.placer.for_claims(pod, None)
    assert held is None or not held.mask.any()


def test_devices_without_the_attribute_are_passed_over_not_an_error() -> None:
    # n1: a, a, -, -; n2: a, a, -, -: the gang of two pods of two GPUs takes the four of
    # clique a; a device without the attribute matches no value (and breaks no selector).
    cycle = clique_cycle(2, cliques=("aa--", "aa--"))
    assert cycle.placer.job(job_of(cycle, "ml/g"), Transaction(cycle.ledger.state), None) is None
    assert devices(cycle) == {"ml/g-0": ["n1/g0", "n1/g1"], "ml/g-1": ["n2/g0", "n2/g1"]}


def test_a_gang_that_devices_without_the_attribute_would_complete_waits() -> None:
    cycle = clique_cycle(3, cliques=("aa--", "aa--"))  # four of clique a, six needed
    failure = cycle.placer.job(job_of(cycle, "ml/g"), Transaction(cycle.ledger.state), None)
    assert failure is not None
    assert failure.why is not None
    text = why_text(failure.why)
    assert "no such member" not in text
    assert "device.attributes" not in text


class OneNode:
    """A topology rule of another scheduler's (``rules.TopologyRule``): every gang's pods
    share one node. It plugs into the cycle through the components, no edit of the cycle."""

    def constrains(self, group: GroupSpec | None) -> bool:
        return group is not None

    def place_gang(
        self,
        place_all: PlaceAll,
        group: GroupSpec,
        pods: tuple[PodInfo, ...],
        txn: Transaction,
        *,
        held: Exclusion | None,
        running: Sequence[int],
        placed: Mapping[str, Sequence[int]] = EMPTY,
    ) -> Failure | None:
        last = None
        for n in range(txn.state.size):
            mark = txn.mark()
            others = np.arange(txn.state.size) != n
            failure = place_all(pods, txn, restrict(held, others, "node(s) not the gang's"))
            if failure is None:
                return None
            txn.rollback(mark)
            last = failure
        return last

    def room_scopes(
        self,
        state: ClusterState,
        group: GroupSpec | None,
        held: Exclusion | None,
    ) -> list[tuple[Where, Exclusion | None]]:
        return [((None, False), held)]

    def extras_scope(
        self,
        state: ClusterState,
        group: GroupSpec | None,
        running: Sequence[int],
        held: Exclusion | None,
        *,
        subgroup: str = "",
        placed: Mapping[str, Sequence[int]] = EMPTY,
    ) -> Exclusion | None:
        return held


@pytest.mark.parametrize(("rule", "bound"), [(DomainTopology, 2), (lambda _: OneNode(), 0)])
def test_the_topology_rule_is_the_components(
    rule: Callable[[tuple[str, ...]], TopologyRule], bound: int
) -> None:
    """Two nodes with 2 free GPUs each: gpufleet's rule lets a gang of 2 x 2 GPUs span them;
    a rule that keeps a gang on one node leaves it pending."""
    pods = (
        info("ns/busy-0").gpus(2).on("n0", 0, 1).obj(),
        info("ns/busy-1").gpus(2).on("n1", 0, 1).obj(),
        *(member(i, 2).gang("ns/g").obj() for i in range(2)),
    )
    snapshot = Snapshot((node("n0", gpus=4), node("n1", gpus=4)), pods, (GroupSpec("ns/g", 2),))
    components = replace(COMPONENTS, topology_rule=rule)
    result = snapshot_session(
        snapshot, CycleConfig(actions=()), 100.0, components=components
    ).cycle.run()
    assert len(result.bindings) == bound
