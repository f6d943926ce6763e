"""Fair-share order (``scheduler/queues/order.py``): at each level of a queue's path, the higher
queue priority first, then the lower dominant share ratio with the queue's head job
counted; the queue's name breaks ties.

The pods here ask for GPUs only, so that a share ratio is the GPU ratio; the cluster has 8
GPUs, fewer than the queues ask for, so that fair shares are below demand.
"""

from __future__ import annotations

import pytest

from gpufleet.model.workload import PodInfo, QueueSpec, vector
from gpufleet.scheduler.queues.order import QueueOrder
from gpufleet.scheduler.state.ledger import Ledger
from tests.builders import info, job, ledger_of, node

CAPACITY = 8


def running(queue: str, gpus: int) -> list[PodInfo]:
    """``gpus`` one-GPU pods of ``queue`` (on node n0, GPUs taken first free)."""
    return [info(f"{queue}/r{i}").gpus_only(1).queue(queue).on("n0").obj() for i in range(gpus)]


def started(
    queues: tuple[QueueSpec, ...], holds: dict[str, int], waits: dict[str, int]
) -> tuple[Ledger, QueueOrder]:
    """An order over one 8-GPU node where each queue ``holds`` running GPUs and ``waits``
    for more (its pending demand), at the start of a cycle."""
    pods = [p for q, n in holds.items() for p in running(q, n)]
    ledger = ledger_of([node("n0", gpus=CAPACITY)], pods, queues=queues)
    order = QueueOrder(ledger)
    order.start({q: vector(n) for q, n in waits.items()}, ledger.capacity)
    return ledger, order


def head(queue: str, gpus: int = 1) -> PodInfo:
    return info(f"{queue}/head").gpus_only(gpus).queue(queue).obj()


def serving_order(order: QueueOrder, heads: dict[str, PodInfo]) -> list[str]:
    return sorted(heads, key=lambda q: order.key(q, job(heads[q])))


FLAT = (QueueSpec("a"), QueueSpec("b"))
TREE = (
    QueueSpec("dept-1"),
    QueueSpec("dept-2"),
    QueueSpec("a", "dept-1"),
    QueueSpec("b", "dept-1"),
    QueueSpec("c", "dept-2"),
)


@pytest.mark.parametrize(
    ("queues", "holds", "waits", "heads", "expected"),
    [
        pytest.param(
            FLAT,
            {"a": 4},
            {"a": 4, "b": 8},
            {"a": head("a"), "b": head("b")},
            ["b", "a"],
            id="furthest-below-its-share-first",
        ),
        pytest.param(
            FLAT,
            {"b": 2},
            {"a": 6, "b": 1},
            {"a": head("a", 6), "b": head("b", 1)},
            # a holds nothing, but with its 6-GPU head it would be at 6/5 of its share;
            # b with its head at 3/3.
            ["b", "a"],
            id="head-job-counted",
        ),
        pytest.param(
            (QueueSpec("a", priority=200), QueueSpec("b")),
            {"a": 4},
            {"a": 4, "b": 8},
            {"a": head("a"), "b": head("b")},
            ["a", "b"],
            id="queue-priority-before-share",
        ),
        pytest.param(
            (QueueSpec("a", weight=vector(0, 1, 1)), QueueSpec("b")),
            {"b": 8},
            {"a": 1, "b": 1},
            {"a": head("a"), "b": head("b")},
            # b would be above its share (9/8), a has none at all (infinitely over).
            ["b", "a"],
            id="no-fair-share-waits-behind-all",
        ),
        pytest.param(
            (QueueSpec("b"), QueueSpec("a")),
            {},
            {"a": 8, "b": 8},
            {"b": head("b"), "a": head("a")},
            ["a", "b"],
            id="name-breaks-ties",
        ),
        pytest.param(
            TREE,
            {"b": 2, "c": 3},
            {"a": 8, "b": 6, "c": 5},
            {"a": head("a"), "b": head("b"), "c": head("c")},
            # dept-1 is at 3/4 of its share, dept-2 at 4/4: b (3/2 of its own share) goes
            # before c (4/4 of its own), because its department is further below.
            ["a", "b", "c"],
            id="parents-compare-before-children",
        ),
    ],
)
def test_key_orders_the_queues(
    queues: tuple[QueueSpec, ...],
    holds: dict[str, int],
    waits: dict[str, int],
    heads: dict[str, PodInfo],
    expected: list[str],
) -> None:
    _, order = started(queues, holds, waits)
    assert serving_order(order, heads) == expected


def test_the_key_is_priority_and_ratio_at_each_level_of_the_path() -> None:
    _, order = started(TREE, {"b": 2, "c": 3}, {"a": 8, "b": 6, "c": 5})
    assert order.fair["dept-1"][0] == pytest.approx(4)
    assert order.fair["b"][0] == pytest.approx(2)
    assert order.key("b", job(head("b"))) == (
        ((-100, pytest.approx(3 / 4)), (-100, pytest.approx(3 / 2))),
        "b",
    )


def test_the_key_follows_the_queues_allocation() -> None:
    ledger, order = started(FLAT, {"a": 2}, {"a": 6, "b": 6})
    heads = {"a": head("a"), "b": head("b")}
    assert serving_order(order, heads) == ["b", "a"]
    for pod in running("b", 4):
        ledger.bind(pod)
    assert serving_order(order, heads) == ["a", "b"]
    ledger.finish("b/r0")
    ledger.finish("b/r1")
    ledger.finish("b/r2")
    assert serving_order(order, heads) == ["b", "a"]


def test_fair_shares_are_divided_again_only_when_demands_change() -> None:
    ledger, order = started(FLAT, {"a": 2}, {"a": 6, "b": 6})
    first = order.fair
    assert first["a"][0] == pytest.approx(4)
    order.start({"a": vector(6), "b": vector(6)}, ledger.capacity)
    assert order.fair is first
    order.start({"a": vector(6), "b": vector(1)}, ledger.capacity)
    assert order.fair is not first
    assert order.fair["a"][0] == pytest.approx(7)
    assert order.fair["b"][0] == pytest.approx(1)


def test_capacity_held_by_pods_of_unknown_queues_is_not_divided() -> None:
    ghost = info("x/r").gpus_only(2).queue("gone").on("n0").obj()
    ledger = ledger_of([node("n0", gpus=CAPACITY)], [ghost], queues=FLAT)
    order = QueueOrder(ledger)
    order.start({"a": vector(8), "b": vector(8)}, ledger.capacity)
    assert order.fair["a"][0] == pytest.approx(3)
    assert order.fair["b"][0] == pytest.approx(3)
