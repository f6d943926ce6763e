"""One check of a queue tree for every edge (model/workload.py ``queue_problems``): a queue
is valid when its chain of parents reaches a top-level queue within MAX_QUEUE_DEPTH levels;
the linear walk agrees with the definition on any tree, and says why in words."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from gpufleet.model.workload import MAX_QUEUE_DEPTH, QueueSpec, queue_problems


def by_definition(queues: list[QueueSpec]) -> set[str]:
    """The queues the definition calls invalid, each walked on its own."""
    by_name = {q.name: q for q in queues}
    bad = set()
    for queue in queues:
        seen, parent = [queue.name], queue.parent
        while parent is not None:
            if parent not in by_name or parent in seen or len(seen) > MAX_QUEUE_DEPTH:
                bad.add(queue.name)
                break
            seen.append(parent)
            parent = by_name[parent].parent
    return bad


@st.composite
def trees(draw: st.DrawFn) -> list[QueueSpec]:
    names = [f"q{i}" for i in range(draw(st.integers(1, 12)))]
    parents = st.sampled_from([None, *names, "missing"])
    return [QueueSpec(name, draw(parents)) for name in names]


@given(trees())
def test_the_walk_agrees_with_the_definition(queues: list[QueueSpec]) -> None:
    assert set(queue_problems(queues)) == by_definition(queues)


def test_a_chain_longer_than_the_limit_in_either_order() -> None:
    chain = [QueueSpec("q0")] + [QueueSpec(f"q{i}", f"q{i - 1}") for i in range(1, 1000)]
    for order in (chain, chain[::-1]):
        bad = queue_problems(order)
        assert set(bad) == {f"q{i}" for i in range(MAX_QUEUE_DEPTH + 1, 1000)}
        assert bad["q999"].text() == "has more than 64 levels of parent queues above it"


def test_each_problem_in_words() -> None:
    queues = [
        QueueSpec("c", "missing"),
        QueueSpec("d", "c"),
        QueueSpec("x", "y"),
        QueueSpec("y", "x"),
        QueueSpec("z", "x"),
        QueueSpec("fine"),
    ]
    words = {name: problem.text() for name, problem in queue_problems(queues).items()}
    assert words == {
        "c": "names parent queue 'missing', which does not exist",
        "d": "is under queue 'c', which is not valid",
        "x": "is in a cycle of parent queues: x → y → x",
        "y": "is in a cycle of parent queues: x → y → x",
        "z": "is under queue 'x', which is not valid",
    }
