"""Whatever the watches deliver, the live cache never gives out GPUs a bound pod holds.

Random sequences of watch events — pods bound (by gpufleet or another scheduler, on whole
GPUs or MIG slices) with readable requests, readable shares beside them, the same pods later
annotated with what gpufleet cannot read (or first seen so), pods whose spec is the wrong
shape, pending pods, invalid Queues, deletions, a restart that reads everything afresh — go
through the live translation (``kube/read/objects.py``) into the cache, as ``gpufleet serve``
feeds them. An independent oracle keeps every bound pod fed in, counted by its container
requests at bind time; after each event the cache's free milli-GPU (whole GPUs and shares)
and free MIG slices on each node are never more than the oracle's, and no event raises (the
watch goes on)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.compose import new_cache
from gpufleet.kube.read.objects import ObjectStore
from gpufleet.scheduler.cycle.config import CycleConfig

Obj = dict[str, Any]
MIG = "nvidia.com/mig-1g.10gb"
NODES = {"n0": 8, "n1": 4, "m0": 7}
"""Devices per node: n0 and n1 whole GPUs, m0 static MIG slices (``MIG``)."""
RESOURCE = {"n0": "nvidia.com/gpu", "n1": "nvidia.com/gpu", "m0": MIG}
NAMES = [f"p{i}" for i in range(6)]
UNREADABLE = [
    {"gpufleet.io/gpu-fraction": "oops"},
    {"gpufleet.io/gpu-memory": "lots"},
    {"gpufleet.io/gpu-index": "99"},
    {"gpufleet.io/gpu-index": "abc"},
    {"gpufleet.io/gpu-fraction": "0.5"},  # readable, but not what the pod was bound with
]
READABLE_SHARES = [
    {"gpufleet.io/gpu-fraction": "0.1"},  # beside whole GPUs: frees none of them
    {"gpufleet.io/gpu-memory": "1Gi"},
]
"""Without gpufleet's ``gpu-index``: a share with one is what gpufleet bound (its record)."""


def node(name: str, gpus: int) -> Obj:
    allocatable = {"cpu": "64", "memory": "256Gi", RESOURCE[name]: str(gpus)}
    meta = {"name": name, "uid": f"uid-{name}", "resourceVersion": "1"}
    return {"kind": "Node", "metadata": meta, "status": {"allocatable": allocatable}}


def pod(
    name: str,
    version: int,
    *,
    gpus: int,
    node_name: str | None,
    notes: Obj,
    scheduler: str = "gpufleet",
) -> Obj:
    resource = RESOURCE[node_name] if node_name is not None else "nvidia.com/gpu"
    spec: Obj = {
        "schedulerName": scheduler,
        "containers": [{"name": "c", "resources": {"limits": {resource: str(gpus)}}}],
    }
    if node_name is not None:
        spec["nodeName"] = node_name
    meta = {
        "name": name,
        "namespace": "ml",
        "uid": f"uid-{name}-{version}",
        "resourceVersion": str(version),
        "annotations": notes,
    }
    status = {"phase": "Running"} if node_name else {"phase": "Pending"}
    return {"kind": "Pod", "metadata": meta, "spec": spec, "status": status}


OPS = st.one_of(
    st.tuples(st.just("bind"), st.sampled_from(NAMES), st.sampled_from(sorted(NODES)),
              st.integers(1, 4), st.sampled_from([{}, *UNREADABLE, *READABLE_SHARES]),
              st.sampled_from(["gpufleet", "default-scheduler"])),
    st.tuples(st.just("restart"), st.just("")),
    st.tuples(st.just("annotate"), st.sampled_from(NAMES), st.sampled_from(UNREADABLE)),
    st.tuples(st.just("misshape"), st.sampled_from(NAMES), st.sampled_from(["nope", [1], 3])),
    st.tuples(st.just("pending"), st.sampled_from(NAMES), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.sampled_from(NAMES)),
    st.tuples(st.just("queue"), st.sampled_from(["qa", "qb", "qc"]),
              st.sampled_from([None, "qa", "qb", "qc", "ghost"])),
)  # fmt: skip


class Feed:
    """The watches of one run: the store and cache as ``serve`` has them, and the oracle."""

    def __init__(self) -> None:
        self.store = ObjectStore(schedulers=("gpufleet",))
        self.cache = new_cache(CycleConfig(), strict=False)
        for name, gpus in NODES.items():
            self.tell("ADDED", "Node", node(name, gpus))
        self.oracle: dict[str, tuple[str, int]] = {}
        """Bound pods as fed in: node and GPUs at bind time."""
        self.live: dict[str, Obj] = {}
        self.version = 1

    def tell(self, type_: str, kind: str, obj: Obj) -> None:
        self.cache.apply_all(self.store.apply(type_, kind, obj).events)  # type: ignore[arg-type]

    def pod(self, name: str, obj: Obj) -> None:
        self.tell("MODIFIED" if name in self.live else "ADDED", "Pod", obj)
        self.live[name] = obj

    def step(self, op: tuple[Any, ...]) -> None:
        self.version += 1
        kind, name = op[0], op[1]
        before = self.live.get(name)
        if kind == "queue":
            meta = {"name": name, "resourceVersion": str(self.version)}
            spec = {"parentQueue": op[2]} if op[2] else {}
            self.tell("ADDED", "Queue", {"kind": "Queue", "metadata": meta, "spec": spec})
        elif kind == "bind" and before is None:
            self.bind(name, op[2], op[3], op[4], op[5])
        elif kind == "restart":  # a new scheduler lists what is there: each pod read first
            self.store = ObjectStore(schedulers=("gpufleet",))
            self.cache = new_cache(CycleConfig(), strict=False)
            for node_name, gpus in NODES.items():
                self.tell("ADDED", "Node", node(node_name, gpus))
            for obj in self.live.values():
                self.tell("ADDED", "Pod", obj)
        elif kind == "annotate" and before is not None:
            meta = {
                **before["metadata"],
                "annotations": op[2],
                "resourceVersion": str(self.version),
            }
            self.pod(name, {**before, "metadata": meta})
        elif kind == "misshape" and before is None:  # the API validates specs: new pods only
            self.pod(
                name, {**pod(name, self.version, gpus=1, node_name=None, notes={}), "spec": op[2]}
            )
        elif kind == "pending" and before is None:
            self.pod(name, pod(name, self.version, gpus=op[2], node_name=None, notes={}))
        elif kind == "delete" and before is not None:
            self.tell("DELETED", "Pod", before)
            self.live.pop(name)
            self.oracle.pop(name, None)

    def bind(self, name: str, node_name: str, gpus: int, notes: Obj, scheduler: str) -> None:
        """A pod bound by ``scheduler`` (the kubelet never over-commits a node's devices: a
        pod asking whole GPUs holds them, whatever share its annotations name)."""
        held = sum(g for n, g in self.oracle.values() if n == node_name)
        if held + gpus > NODES[node_name]:
            return
        self.oracle[name] = (node_name, gpus)  # held by its requests, whatever it says
        made = pod(
            name, self.version, gpus=gpus, node_name=node_name, notes=notes, scheduler=scheduler
        )
        self.pod(name, made)

    def check(self, op: tuple[Any, ...]) -> None:
        """Free milli-GPU (whole GPUs and shares) and free MIG slices, node by node, never
        more than what the oracle's bound pods leave."""
        state = self.cache.ledger().state
        for i, node_name in enumerate(state.names):
            taken = sum(g for n, g in self.oracle.values() if n == node_name)
            left = NODES[node_name] - taken
            if RESOURCE[node_name] == MIG:
                free = int(state.mig_free[i].sum())
                assert free <= left, (op, node_name, self.oracle)
            else:
                free_milli = int(state.gpu_idle[i])
                assert free_milli <= left * 1000, (op, node_name, self.oracle)


@settings(max_examples=150, deadline=None)
@given(st.lists(OPS, max_size=40))
def test_the_cache_never_frees_what_a_bound_pod_holds(ops: list[tuple[Any, ...]]) -> None:
    feed = Feed()
    for op in ops:
        feed.step(op)  # never raises: the watch goes on
        feed.check(op)
