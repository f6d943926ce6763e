"""Watch events per second through the live scheduler's translation (``kube/read/objects.py``).

Before an event reaches the cluster cache, the live scheduler reads the raw object with the
snapshot's readers and translates again whatever reads it. The cluster here: ``--nodes``
nodes (1,000 and 5,000 by default) of 8 GPUs, each running 8 pods of one GPU that name
their GPUs (``gpufleet.io/gpu-index``). The streams, ``--events`` each (20,000 by default):

* node status updates: kubelet's status of a node, its heartbeat time and resourceVersion
  changed, nothing gpufleet reads (the commonest event of a real cluster: every node, every
  few seconds to minutes);
* node label changes: a label no pool selects on, added and removed in turn;
* pod status updates: a running pod's status changed (its conditions), nothing gpufleet
  reads;
* pending pod conditions: the ``PodScheduled`` condition of one of ``--pending`` pending
  pods (1,000) written again with a new message, as a scheduler writes why a pod waits.

It prints each stream's events per second and how many objects each event translated, and
the time to list the cluster (every node and pod applied once).

    python -m bench.watch [--nodes 1000 --nodes 5000] [--events 20000] [--pending 1000]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.docs import publish_table
from gpufleet.kube.read.objects import ObjectStore

SECTION = "watch"
GPUS = 8
PODS_PER_NODE = 8

Obj = dict[str, Any]


def node(i: int, version: int, *, label: str = "", beat: int = 0) -> Obj:
    labels = {"topology.kubernetes.io/rack": f"rack-{i // 16:04d}"}
    if label:
        labels["example.com/pool"] = label
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"node-{i:05d}", "resourceVersion": str(version), "labels": labels},
        "status": {
            "allocatable": {"cpu": "128", "memory": "1Ti", "nvidia.com/gpu": str(GPUS)},
            "conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": f"2026-01-01T00:{beat}Z"}
            ],
        },
    }


def _gpu_pod(name: str, version: int, queue: str) -> Obj:
    """A pod of one GPU of ``queue``, not yet bound, at ``version``."""
    limits = {"nvidia.com/gpu": "1", "cpu": "4", "memory": "32Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": "ml",
            "resourceVersion": str(version),
            "labels": {"gpufleet.io/queue": queue},
        },
        "spec": {
            "schedulerName": "gpufleet",
            "containers": [{"name": "main", "resources": {"requests": limits, "limits": limits}}],
        },
    }


def pod(i: int, k: int, version: int) -> Obj:
    """Pod ``k`` of node ``i``, running on its GPU ``k``, its status written at ``version``."""
    obj = _gpu_pod(f"p{i:05d}-{k}", version, f"team-{(i + k) % 10}")
    obj["metadata"]["annotations"] = {"gpufleet.io/gpu-index": str(k)}
    obj["spec"]["nodeName"] = f"node-{i:05d}"
    obj["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": str(version)}]}
    return obj


def pending(j: int, version: int) -> Obj:
    """Pending pod ``j``, its condition written at ``version``."""
    obj = _gpu_pod(f"waiting-{j:05d}", version, f"team-{j % 10}")
    message = f"0/{version} nodes are available: Insufficient nvidia.com/gpu."
    condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
    obj["status"] = {"phase": "Pending", "conditions": [{**condition, "message": message}]}
    return obj


def counting(store: ObjectStore) -> list[int]:
    """Count the store's translations (one per object read again)."""
    count = [0]
    translate = store._translate  # the figure is how often it runs

    def counted(*args: Any, **keywords: Any) -> None:
        count[0] += 1
        translate(*args, **keywords)

    store._translate = counted  # type: ignore[method-assign]
    return count


def stream(
    store: ObjectStore, count: list[int], events: int, make: Callable[[int], tuple[str, Obj]]
) -> tuple[float, float]:
    """Events per second and translations per event of ``events`` events ``make`` gives."""
    count[0] = 0
    started = time.perf_counter()
    for e in range(events):
        kind, obj = make(e)
        store.apply("MODIFIED", kind, obj)
    elapsed = time.perf_counter() - started
    return events / elapsed, count[0] / events


def measure(nodes: int, events: int, waiting: int) -> list[str]:
    store = ObjectStore()
    started = time.perf_counter()
    for i in range(nodes):
        store.apply("ADDED", "Node", node(i, 1))
        for k in range(PODS_PER_NODE):
            store.apply("ADDED", "Pod", pod(i, k, 1))
    listed = time.perf_counter() - started
    for j in range(waiting):
        store.apply("ADDED", "Pod", pending(j, 1))
    count = counting(store)
    version = 2
    rows = []

    def status(e: int) -> tuple[str, Obj]:
        return "Node", node(e % nodes, version + e, beat=e % 60)

    def relabel(e: int) -> tuple[str, Obj]:
        return "Node", node(e % nodes, version + e, label="" if (e // nodes) % 2 else "a")

    def pod_status(e: int) -> tuple[str, Obj]:
        return "Pod", pod(e % nodes, (e // nodes) % PODS_PER_NODE, version + e)

    def condition(e: int) -> tuple[str, Obj]:
        return "Pod", pending(e % waiting, version + e)

    for name, make in (
        ("node status update", status),
        ("node label change", relabel),
        ("pod status update", pod_status),
        ("pending pod condition", condition),
    ):
        rate, per_event = stream(store, count, events, make)
        rows.append(f"| {nodes:,} | {name} | {rate:,.0f} | {per_event:.2f} |")
    objects = nodes * (1 + PODS_PER_NODE)
    rows.append(f"| {nodes:,} | list ({objects:,} objects) | {objects / listed:,.0f} | 1.00 |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, action="append")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--pending", type=int, default=1_000)
    parser.add_argument("--no-docs", action="store_true", help="print only")
    args = parser.parse_args(argv)
    lines = [
        f"Python {platform.python_version()} on {platform.machine()}; {PODS_PER_NODE} pods "
        f"of one GPU per node of {GPUS} GPUs; {args.events:,} events per stream.",
        "",
        "| nodes | event | events/s | objects translated per event |",
        "|---|---|---|---|",
    ]
    for nodes in args.nodes or [1_000, 5_000]:
        lines += measure(nodes, args.events, args.pending)
    return publish_table("bench.watch", SECTION, lines, write_docs=not args.no_docs)


if __name__ == "__main__":
    sys.exit(main())
