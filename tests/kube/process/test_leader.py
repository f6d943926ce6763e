"""Leader election on a Lease (``kube/process/leader.py``) and replicas that schedule only while
they lead (``kube/process/live.py`` Replica), against the emulator: one leader at a time; a frozen
leader stops acting before another may take over; a replica that stops hands over, and no
pod is ever bound twice."""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import httpx

from gpufleet.kube.process.leader import LeaderElector, LeaseConfig
from gpufleet.kube.process.live import Replica
from gpufleet.kube.process.options import ServeOptions
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_node, add_pod, bound, double_booked

FAST = {"lease_s": 1.0, "renew_deadline_s": 0.6, "retry_s": 0.1}


def lease(identity: str) -> LeaseConfig:
    return LeaseConfig("kube-system", "gpufleet", identity, **FAST)


def test_one_leader_and_a_frozen_one_stops_before_it_is_replaced(emulator: Emulator) -> None:
    async def main() -> None:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=5) as http:
            a, b = LeaderElector(http, lease("a")), LeaderElector(http, lease("b"))
            stop_a, stop_b, lost = asyncio.Event(), asyncio.Event(), asyncio.Event()
            assert await a.acquire(stop_a)
            holding = asyncio.create_task(a.hold(stop_a, lost))
            b_wins = asyncio.create_task(b.acquire(stop_b))
            await asyncio.sleep(1.5)
            assert not b_wins.done()  # a renews: b waits
            assert a.may_act()
            holding.cancel()  # a freezes: it renews no more, and releases nothing
            frozen = time.monotonic()
            assert await asyncio.wait_for(b_wins, 5)
            took_over = time.monotonic() - frozen
            # b counts the lease from when it saw a's last renewal, which may precede the
            # freeze by up to one of a's retry periods (a renews that often)
            assert took_over >= FAST["lease_s"] - FAST["retry_s"]
            assert not a.may_act()  # a stopped acting before b could take over
            assert b.may_act()
            stop_b.set()

    asyncio.run(main())


def test_replicas_hand_over_and_nothing_is_bound_twice(emulator: Emulator) -> None:
    add_node(emulator, "n0", gpus=8)
    for i in range(3):
        add_pod(emulator, f"early-{i}", 1)
    options = ServeOptions(period_s=0.1, batch_s=0.01)

    async def main() -> None:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=5) as http:
            first, second = Replica(http, options, lease("a")), Replica(http, options, lease("b"))
            stop_first, stop_second = asyncio.Event(), asyncio.Event()
            running_first = asyncio.create_task(first.run(stop_first))
            await asyncio.sleep(0.3)
            running_second = asyncio.create_task(second.run(stop_second))
            deadline = time.monotonic() + 10
            while len(bound(emulator)) < 3:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert (first.terms, second.terms) == (1, 0)
            stop_first.set()  # the leader stops: it releases the Lease
            await asyncio.wait_for(running_first, 10)
            for i in range(3):
                add_pod(emulator, f"late-{i}", 1)
            while len(bound(emulator)) < 6:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            assert second.terms == 1
            stop_second.set()
            await asyncio.wait_for(running_second, 10)

    asyncio.run(main())
    binds = Counter(w.name for w in emulator.store.writes if w.verb == "bind")
    assert set(binds.values()) == {1}
    assert len(binds) == 6
    assert double_booked(emulator) == []


def test_a_killed_replica_writes_nothing_more_and_keeps_its_lease(emulator: Emulator) -> None:
    """Killed (its task cancelled), nothing of it goes on — no cycle, no renewal — and it
    does not give the Lease up: the next leader waits the lease out, as after a crash."""
    add_node(emulator, "n0", gpus=8)
    options = ServeOptions(period_s=0.1, batch_s=0.01)

    async def main() -> None:
        async with httpx.AsyncClient(base_url=emulator.url, timeout=5) as http:
            replica = Replica(http, options, lease("a"))
            task = asyncio.create_task(replica.run(asyncio.Event()))
            deadline = time.monotonic() + 10
            while replica.live is None or not replica.live.ready:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            writes = len(emulator.store.writes)
            add_pod(emulator, "late", 1)
            await asyncio.sleep(1.0)
            assert len(emulator.store.writes) == writes + 1  # the pod's creation, nothing else
            leases = emulator.store.resource("coordination.k8s.io", "v1", "leases")
            held = emulator.store.get(leases, "kube-system", "gpufleet")
            assert held["spec"]["holderIdentity"] == "a"

    asyncio.run(main())
