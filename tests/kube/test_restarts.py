"""Restart safety: the live scheduler killed at random points of a burst of pods, and
started again, never gives a GPU twice, and binds every pod that fits in the end. All it
knows after a restart comes from a fresh list (node names and GPU-index annotations the API
server stores); a bind whose reply was lost is either visible there or was never made."""

from __future__ import annotations

import asyncio
import time

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpufleet.kube.options import ServeOptions
from gpufleet.kube.serve import LiveScheduler
from tests.apiserver.server import Emulator
from tests.kube.test_serve import add_group, add_node, add_pod, bound, double_booked, pods

SIZES = (1, 2, 4, 1, 2, 1, 1, 4)
"""GPUs per pod of the burst: 16, with a gang of 2 x 2 below: 20 on 3 nodes of 8."""


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
                    while len(bound(emulator)) < len(SIZES) + 2:
                        assert time.monotonic() < deadline, bound(emulator)
                        await asyncio.sleep(0.05)
                task.cancel()  # killed: no clean stop
                await asyncio.gather(task, return_exceptions=True)

        async def main() -> None:
            for seconds in kills:
                await life(seconds)
                assert double_booked(emulator) == []
            await life(None)

        asyncio.run(main())
        assert double_booked(emulator) == []
        assert len(bound(emulator)) == len(SIZES) + 2
        per_node: dict[str, int] = {}
        for pod in pods(emulator).values():
            indexes = (pod["metadata"].get("annotations") or {}).get("gpufleet.io/gpu-index")
            assert indexes, f"{pod['metadata']['name']} is bound without its GPU indexes"
            node = pod["spec"]["nodeName"]
            per_node[node] = per_node.get(node, 0) + len(str(indexes).split(","))
        assert max(per_node.values()) <= 8
    finally:
        emulator.stop()
