"""What a cycle has decided (``scheduler/cycle/commit.py``): bindings recorded on the ledger at
once, evictions taking their pods out of the ledger and the victim pool, and a binding onto
what an eviction of the same cycle frees marked pipelined."""

from __future__ import annotations

from gpufleet.model.workload import QueueSpec
from gpufleet.scheduler.api.outcome import Eviction
from gpufleet.scheduler.cycle.commit import Commit
from gpufleet.scheduler.room.protocols import Plan
from gpufleet.scheduler.state.pool import VictimPool
from tests.builders import info, ledger_of, node

NOW = 100.0


def commit_of() -> Commit:
    """n0 (4 GPUs) runs a/low on GPUs 0-1; n1 (4 GPUs) is empty."""
    running = [info("a/low").queue("a").gpus(2).on("n0", 0, 1).obj()]
    ledger = ledger_of([node("n0", gpus=4), node("n1", gpus=4)], running, queues=(QueueSpec("a"),))
    return Commit(ledger, VictimPool.of(ledger, NOW), NOW)


def test_a_binding_is_on_the_ledger_at_once_and_never_a_victim_of_the_cycle() -> None:
    commit = commit_of()
    pod = info("a/new").queue("a").gpus(1).obj()
    commit.ledger.state.reserve(1, pod.spec, (0,))
    commit.bind(pod, 1, pod.spec, (0,))
    assert commit.ledger.running["a/new"].node == 1
    assert commit.ledger.running["a/new"].pod.started == NOW
    assert commit.bound_now == {"a/new"}
    [binding] = commit.bindings
    assert (binding.pod, binding.node, binding.gpus, binding.pipelined) == (
        "a/new",
        "n1",
        (0,),
        False,
    )


def test_an_eviction_leaves_the_ledger_and_the_pool_and_pipelines_what_lands_on_it() -> None:
    commit = commit_of()
    victim = commit.ledger.running["a/low"]
    job = info("a/job").queue("a").gpus(2).obj()
    plan = Plan("preempt", (victim,), ((0, job.spec, (0, 1)),))
    commit.ledger.state.release(victim.node, victim.spec, victim.gpus)
    commit.ledger.state.reserve(0, job.spec, (0, 1))
    assert commit.apply("a/job", (job,), plan) == [job]
    assert "a/low" not in commit.ledger.running
    assert "a/low" not in commit.pool.index
    assert commit.evictions == [Eviction("a/low", "preempt", "a/job")]
    assert [(b.pod, b.gpus, b.pipelined) for b in commit.bindings] == [("a/job", (0, 1), True)]


def test_a_binding_beside_what_an_eviction_freed_is_not_pipelined() -> None:
    commit = commit_of()
    commit.evict("a/low", "preempt", "a/job")
    pod = info("a/other").queue("a").gpus(1).obj()
    commit.ledger.state.reserve(0, pod.spec, (3,))
    commit.bind(pod, 0, pod.spec, (3,))
    assert not commit.bindings[0].pipelined
