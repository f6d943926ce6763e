"""Restart safety: the live scheduler killed at random points of a burst of pods, and
started again, never gives a GPU, a MIG slice or a DRA device twice, and binds every pod
that fits in the end. All it knows after a restart comes from a fresh list (node names,
GPU-index annotations and claim allocations the API server stores); a bind whose reply was
lost is either visible there or was never made."""

from __future__ import annotations

import asyncio
import time

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.kube.process.live import LiveScheduler
from gpufleet.kube.process.options import ServeOptions
from tests.apiserver.server import Emulator
from tests.kube.process.test_dra_live import (
    add_claim,
    add_claim_pod,
    add_class,
    add_slice,
    claims,
    devices_given,
)
from tests.kube.process.test_serve import add_group, add_node, add_pod, bound, double_booked, pods

SIZES = (1, 2, 4, 1, 2, 1, 1, 4)
"""GPUs per pod of the burst: 16, with a gang of 2 x 2 below: 20 on 3 nodes of 8."""
MIG = "nvidia.com/mig-1g.10gb"
SLICES, CLAIMS = 3, 3
"""MIG slices of one node, asked for by one pod more than there are (one slice each); DRA
devices of one node's slice, each claimed by one pod."""
PODS = len(SIZES) + 2 + SLICES + CLAIMS
"""The pods bound in the end: all but the MIG pod that finds no slice."""


def add_mig_node(emulator: Emulator, name: str) -> None:
    allocatable = {"cpu": "64", "memory": "256Gi", MIG: str(SLICES)}
    node = {"metadata": {"name": name}, "status": {"allocatable": allocatable}}
    emulator.store.create(emulator.store.resource("", "v1", "nodes"), "", node)


def add_mig_pod(emulator: Emulator, name: str) -> None:
    container = {"name": "c", "image": "x", "resources": {"limits": {MIG: "1"}}}
    pod = {
        "metadata": {"name": name},
        "spec": {"schedulerName": "gpufleet", "containers": [container]},
    }
    emulator.store.create(emulator.store.resource("", "v1", "pods"), "default", pod)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kills=st.lists(st.floats(min_value=0.0, max_value=0.4), min_size=1, max_size=4),
    drops=st.integers(min_value=0, max_value=3),
)
def test_kills_and_restarts_never_give_a_gpu_twice(kills: list[float], drops: int) -> None:
    emulator = Emulator(seed=11, bookmark_interval=0.2).start()
    try:
        for n in range(3):
            add_node(emulator, f"n{n}", gpus=8)
        for i, gpus in enumerate(SIZES):
            add_pod(emulator, f"p{i}", gpus)
        add_group(emulator, "g", 2)
        for i in range(2):
            add_pod(emulator, f"g-{i}", 2, group="g")
        add_mig_node(emulator, "m0")
        for i in range(SLICES + 1):  # one too many: a slice given twice would show
            add_mig_pod(emulator, f"mig-{i}")
        add_class(emulator)
        add_slice(emulator, "n2", devices=CLAIMS)
        for i in range(CLAIMS):
            add_claim(emulator, f"claim-{i}")
            add_claim_pod(emulator, f"dra-{i}", f"claim-{i}")
        emulator.faults.drop_reply(drops)  # binds applied, replies lost
        options = ServeOptions(period_s=0.05, batch_s=0.0)

        async def life(seconds: float | None) -> None:
            """One process lifetime: killed after ``seconds`` (None: until all is bound)."""
            async with httpx.AsyncClient(base_url=emulator.url, timeout=5) as http:
                live = LiveScheduler(http, options)
                task = asyncio.create_task(live.run(asyncio.Event()))
                if seconds is not None:
                    await asyncio.sleep(seconds)
                else:
                    deadline = time.monotonic() + 15
                    while len(bound(emulator)) < PODS:
                        assert time.monotonic() < deadline, bound(emulator)
                        await asyncio.sleep(0.05)
                task.cancel()  # killed: no clean stop
                await asyncio.gather(task, return_exceptions=True)

        async def main() -> None:
            for seconds in kills:
                await life(seconds)
                given_once(emulator)
            await life(None)

        asyncio.run(main())
        given_once(emulator)
        assert len(bound(emulator)) == PODS
        per_node: dict[str, int] = {}
        for name, pod in pods(emulator).items():
            if not name.startswith(("p", "g-")):
                continue
            indexes = (pod["metadata"].get("annotations") or {}).get("gpufleet.io/gpu-index")
            assert indexes, f"{name} is bound without its GPU indexes"
            node = pod["spec"]["nodeName"]
            per_node[node] = per_node.get(node, 0) + len(str(indexes).split(","))
        assert max(per_node.values()) <= 8
    finally:
        emulator.stop()


def given_once(emulator: Emulator) -> None:
    """No GPU index, MIG slice or DRA device is held by two bound pods, and every bound pod
    holds the claims it names: allocated, and reserved for it (by uid)."""
    assert double_booked(emulator) == []
    on_mig = [p for p in pods(emulator).values() if p["spec"].get("nodeName") == "m0"]
    assert len(on_mig) <= SLICES
    assert all(count == 1 for count in devices_given(emulator).values()), devices_given(emulator)
    by_name = claims(emulator)
    for name, pod in pods(emulator).items():
        if not pod["spec"].get("nodeName"):
            continue
        for ref in pod["spec"].get("resourceClaims") or ():
            status = by_name[ref["resourceClaimName"]].get("status") or {}
            assert status.get("allocation"), f"{name} is bound, its claim is not allocated"
            reserved = {r.get("uid") for r in status.get("reservedFor") or ()}
            assert pod["metadata"]["uid"] in reserved, f"{name} is bound, not reserved"
