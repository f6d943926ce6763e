"""The ledger (``scheduler/state/ledger.py``): what runs where, and what each queue holds.

A bound pod takes its capacity on its node and is charged to every queue on its path (its
own queue's ``own`` only), non-preemptible work also to ``alloc_np``; a pod that ends gives
all of it back. Gangs below their ``minMember`` are ``partial``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec
from gpufleet.scheduler.state.ledger import Ledger, SnapshotError
from tests.builders import info, ledger_of, node

QUEUES = (QueueSpec("dept"), QueueSpec("a", "dept"), QueueSpec("b", "dept"), QueueSpec("c"))
ALL = ("a", "b", "c", "dept", "default")


def ledger(*running: PodInfo, groups: tuple[GroupSpec, ...] = ()) -> Ledger:
    nodes = [node("n0", gpus=4, gpu_mem=81_920), node("n1", gpus=2, gpu_mem=40_960)]
    return ledger_of(nodes, running, queues=QUEUES, groups=groups)


def gpus_by_queue(amounts: dict[str, np.ndarray]) -> dict[str, float]:
    return {q: float(amounts[q][0]) for q in ALL if amounts[q][0]}


@pytest.mark.parametrize(
    ("pod", "alloc", "alloc_np", "own"),
    [
        pytest.param(
            info("a/p").gpus(2).queue("a").on("n0").obj(),
            {"a": 2, "dept": 2},
            {},
            {"a": 2},
            id="preemptible-on-its-path",
        ),
        pytest.param(
            info("a/p").gpus(2).queue("a").priority(100).on("n0").obj(),
            {"a": 2, "dept": 2},
            {"a": 2, "dept": 2},
            {"a": 2},
            id="non-preemptible-also-in-alloc-np",
        ),
        pytest.param(
            info("c/p").share(500).queue("c").on("n0").obj(),
            {"c": 0.5},
            {},
            {"c": 0.5},
            id="share-as-its-fraction",
        ),
        pytest.param(
            info("c/p").gpu_memory(20_480).queue("c").on("n0").obj(),
            {"c": 0.25},
            {},
            {"c": 0.25},
            id="memory-share-sized-on-a-large-gpu",
        ),
        pytest.param(
            info("c/p").gpu_memory(20_480).queue("c").on("n1").obj(),
            {"c": 0.5},
            {},
            {"c": 0.5},
            id="memory-share-sized-on-a-small-gpu",
        ),
        pytest.param(
            info("x/p").gpus(1).queue("gone").on("n0").obj(), {}, {}, {}, id="unknown-queue"
        ),
        pytest.param(
            info("d/p").gpus(1).on("n0").obj(), {"default": 1}, {}, {"default": 1}, id="default"
        ),
    ],
)
def test_bind_charges_the_queues_on_the_path_and_finish_gives_it_back(
    pod: PodInfo, alloc: dict[str, float], alloc_np: dict[str, float], own: dict[str, float]
) -> None:
    books = ledger()
    versions = dict(books.versions)
    books.bind(pod)
    assert gpus_by_queue(books.alloc) == alloc
    assert gpus_by_queue(books.alloc_np) == alloc_np
    assert gpus_by_queue(books.own) == own
    assert {q for q in ALL if books.versions[q] != versions[q]} == set(alloc)
    assert books.released == 0
    books.finish(pod.key)
    assert gpus_by_queue(books.alloc) == gpus_by_queue(books.alloc_np) == {}
    assert gpus_by_queue(books.own) == {}
    assert books.released == 1
    assert books.state.gpu_idle.tolist() == [4000, 2000]


def test_cpu_and_memory_are_charged_too() -> None:
    books = ledger(info("a/p").cpu(4).mem(8192).gpus(1).queue("a").on("n0").obj())
    assert books.alloc["dept"].tolist() == [1, 4000, 8192]
    assert books.own["dept"].tolist() == [0, 0, 0]


def test_pods_of_unknown_queues_are_counted_apart() -> None:
    books = ledger(info("x/p").cpu(2).gpus(1).queue("gone").on("n0").obj())
    assert books.unqueued.tolist() == [1, 2000, 1024]
    assert not books.evictable(books.running["x/p"].pod)
    books.finish("x/p")
    assert books.unqueued.tolist() == [0, 0, 0]


@pytest.mark.parametrize(
    ("pod", "gpus"),
    [
        pytest.param(info("a/p").gpus(2).on("n0", 2, 3).obj(), (2, 3), id="as-named"),
        pytest.param(info("a/p").gpus(2).on("n0").obj(), (1, 2), id="first-free"),
        pytest.param(info("a/p").share(300).on("n0").obj(), (0,), id="tightest-share"),
    ],
)
def test_bind_takes_the_named_gpus_else_chooses_them(pod: PodInfo, gpus: tuple[int, ...]) -> None:
    # GPU 0 has 400 milli free, the others are free
    books = ledger(info("s/p").share(600).on("n0", 0).obj())
    assert books.bind(pod).gpus == gpus


def test_pods_with_named_gpus_are_bound_first() -> None:
    # sorted by key, "a" would take GPU 0 first and leave "b" no room where it runs
    books = ledger(info("a").gpus(1).on("n1").obj(), info("b").gpus(1).on("n1", 0).obj())
    assert {k: r.gpus for k, r in books.running.items()} == {"a": (1,), "b": (0,)}


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        pytest.param(
            info("a/p").gpus(1).on("n9").obj(), "node n9, which does not exist", id="no-node"
        ),
        pytest.param(info("a/p").gpus(3).on("n1").obj(), "over-commit", id="over-commit"),
        pytest.param(info("a/p").gpus(1).on("n1", 0).obj(), "over-commit", id="gpu-taken"),
    ],
)
def test_a_pod_that_cannot_run_where_it_is_bound_is_a_snapshot_error(
    pod: PodInfo, message: str
) -> None:
    books = ledger(info("x").gpus(1).on("n1", 0).obj())
    with pytest.raises(SnapshotError, match=message):
        books.bind(pod)


def test_a_memory_share_on_a_node_of_unknown_gpu_memory_is_a_snapshot_error() -> None:
    books = ledger_of([node("n0", gpus=2)])
    with pytest.raises(SnapshotError, match="its share cannot be sized"):
        books.bind(info("a/p").gpu_memory(10_240).on("n0").obj())


def member(i: int) -> PodInfo:
    return info(f"ns/g-{i}").gpus(1).gang("ns/g").on("n0").obj()


def test_a_gang_below_its_min_member_is_partial() -> None:
    books = ledger(groups=(GroupSpec("ns/g", min_member=3),))
    seen = []
    for i in range(3):
        books.bind(member(i))
        seen.append("ns/g" in books.partial)
    assert seen == [True, True, False]
    assert sorted(books.gang_running["ns/g"]) == ["ns/g-0", "ns/g-1", "ns/g-2"]
    books.finish("ns/g-1")
    assert books.partial == {"ns/g"}
    books.set_group(GroupSpec("ns/g", min_member=2))
    assert books.partial == set()
    books.set_group(GroupSpec("ns/g", min_member=4))
    assert books.partial == {"ns/g"}
    books.drop_group("ns/g")
    assert books.partial == set()
    books.finish("ns/g-0")
    books.finish("ns/g-2")
    assert "ns/g" not in books.gang_running


@pytest.mark.parametrize(
    ("pod", "evictable"),
    [
        pytest.param(info("a/p").queue("a").obj(), True, id="preemptible"),
        pytest.param(info("a/p").queue("a").priority(99).obj(), True, id="just-below"),
        pytest.param(info("a/p").queue("a").priority(100).obj(), False, id="non-preemptible"),
        pytest.param(info("a/p").queue("gone").obj(), False, id="unknown-queue"),
    ],
)
def test_evictable(pod: PodInfo, evictable: bool) -> None:
    assert ledger().evictable(pod) is evictable


def test_a_pod_of_another_scheduler_is_never_evictable() -> None:
    assert not ledger().evictable(replace(info("a/p").queue("a").obj(), managed=False))


def test_capacity_and_the_default_queue() -> None:
    books = ledger()
    assert books.capacity.tolist() == [6, 192_000, 2 * 393_216]
    assert "default" in books.tree.queues


def test_a_claim_counts_each_running_pod_once_as_its_consumer() -> None:
    """``Ledger.consumers`` is whom the claim's ``status.reservedFor`` lists: each running
    pod once (a pod naming the claim twice too), of any queue or none, until it ends."""
    pods = [
        info("ns/a").on("n1").claims("ns/c", "ns/c").obj(),
        info("ns/b").queue("unknown").on("n1").claims("ns/c").obj(),
    ]
    ledger = ledger_of([node("n1")], pods)
    assert ledger.claim_consumers("ns/c") == 2
    ledger.finish("ns/a")
    assert ledger.claim_consumers("ns/c") == 1
    ledger.finish("ns/b")
    assert ledger.claim_consumers("ns/c") == 0
    assert not ledger.consumers
