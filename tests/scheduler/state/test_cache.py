"""The cluster cache: events change only what they touch, bindings are assumed, confirmed
and forgotten, and after any sequence of events the cache equals one built from scratch
from the same objects — its state and the decisions of a cycle over it (Hypothesis); a
Scheduler running cycle after cycle over it keeps the pending jobs its pods make."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from gpufleet.compose import COMPONENTS
from gpufleet.model.arrays import MILLI
from gpufleet.model.cluster import NodeSpec
from gpufleet.model.interpod import HostPort, LabelSelector, PodPlacement, PodTerm
from gpufleet.model.pod import PodSpec
from gpufleet.model.selectors import Requirement, Taint
from gpufleet.model.workload import GroupSpec, PodInfo, QueueSpec, Snapshot, vector
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.api.job import Job, build_jobs, order_key
from gpufleet.scheduler.api.outcome import Binding, CycleResult, Eviction
from gpufleet.scheduler.api.transaction import Running
from gpufleet.scheduler.cycle.config import CycleConfig
from gpufleet.scheduler.cycle.session import Scheduler, Session
from gpufleet.scheduler.state.cache import ClusterCache
from gpufleet.scheduler.state.changes import Event, snapshot_events
from gpufleet.scheduler.state.ledger import Ledger, SnapshotError

if TYPE_CHECKING:
    from gpufleet.scheduler.cycle.components import Components

NP = 100
CONFIG = CycleConfig(records=False)
ZONE_A = Requirement("zone", "In", ("a",))


def gpu_node(name: str, gpus: int = 4, zone: str = "a", *, tainted: bool = False) -> NodeSpec:
    taints = (Taint("maintenance", "true"),) if tainted else ()
    return NodeSpec(name, 32_000, 131_072, gpus, "H100", {"zone": zone}, taints)


def spec(name: str, gpus: int = 1, milli: int = MILLI, cpu: int = 1000) -> PodSpec:
    return PodSpec(name, cpu, 1024, gpus, milli if gpus else 0)


def pending(key: str, gpus: int = 1, queue: str = "default", **kw: object) -> PodInfo:
    return PodInfo(key, spec(key, gpus), queue=queue, **kw)  # type: ignore[arg-type]


def bound(key: str, node: str, gpus: tuple[int, ...], **kw: object) -> PodInfo:
    return PodInfo(key, spec(key, len(gpus)), node=node, gpus=gpus, **kw)  # type: ignore[arg-type]


def fresh(
    cache: ClusterCache[Components], placed: Mapping[str, PodInfo] | None = None
) -> ClusterCache[Components]:
    """A cache built from scratch from ``cache``'s objects, its assumptions as facts (and
    FGD's workload, if it has one of its own); ``placed``: where the assumed pods were put,
    as whoever made the cycles recorded it (default: as the cache's ledger holds them)."""
    other = ClusterCache(NP, components=COMPONENTS, workload=cache.workload)
    other.apply_all(snapshot_events(effective(cache, placed)))
    return other


def effective(
    cache: ClusterCache[Components], placed: Mapping[str, PodInfo] | None = None
) -> Snapshot:
    """The cache's objects with assumed pods bound where they were placed (by default where
    the ledger holds them) and evicted pods gone."""
    snap = cache.snapshot()
    ledger = cache.ledger()
    pods = []
    for pod in snap.pods:
        if pod.key in cache.evicted:
            continue
        running = ledger.running.get(pod.key)
        if placed is not None and pod.key in placed:
            pods.append(placed[pod.key])
        elif placed is None and pod.key in cache.assumed and running is not None:
            names = ledger.state.names
            started = running.pod.started
            pods.append(replace(pod, node=names[running.node], gpus=running.gpus, started=started))
        else:
            pods.append(pod)
    return replace(snap, pods=tuple(pods))


def guessed(cache: ClusterCache[Components]) -> set[int]:
    """Nodes running a pod whose object, bound, does not name its GPUs: which GPUs it has
    was guessed, and depends on the order the cache learnt of the pods (from scratch: those
    that name theirs first), so only how many GPUs are free there is compared."""
    ledger, pods = cache.ledger(), cache.pods
    return {
        r.node
        for k, r in ledger.running.items()
        if r.gpus and k in pods and pods[k].bound and not pods[k].gpus
    }


def assert_same_ledger(a: Ledger, b: Ledger, loose: set[int] | None = None) -> None:
    assert a.state.names == b.state.names
    for name in ("cpu_free", "memory_free", "pods_free", "gpu_pod_kinds", "gpu_idle"):
        np.testing.assert_array_equal(getattr(a.state, name), getattr(b.state, name), name)
    rows = sorted(loose or ())
    exact = np.setdiff1d(np.arange(a.state.size), rows)
    np.testing.assert_array_equal(a.state.gpu_free[exact], b.state.gpu_free[exact], "gpu_free")
    np.testing.assert_array_equal(
        np.sort(a.state.gpu_free[rows], axis=1), np.sort(b.state.gpu_free[rows], axis=1)
    )

    def where(ledger: Ledger) -> dict[str, tuple[int, object]]:
        return {
            k: (r.node, len(r.gpus) if r.node in rows else r.gpus)
            for k, r in ledger.running.items()
        }

    assert where(a) == where(b)
    assert a.partial == b.partial
    assert set(a.alloc) == set(b.alloc)
    for q in a.alloc:
        np.testing.assert_allclose(a.alloc[q], b.alloc[q], err_msg=q)
        np.testing.assert_allclose(a.alloc_np[q], b.alloc_np[q], err_msg=q)
    np.testing.assert_array_equal(
        a.state.node_labels.requirement_mask(ZONE_A), b.state.node_labels.requirement_mask(ZONE_A)
    )


def victims(cache: ClusterCache[Components], loose: set[int]) -> list[tuple[str, int, object]]:
    pool = cache.pool()
    alive = [pool.items[i] for i in np.flatnonzero(pool.alive)]
    return sorted((r.pod.key, r.node, len(r.gpus) if r.node in loose else r.gpus) for r in alive)


def decisions(
    cache: ClusterCache[Components], now: float, loose: set[int] | None = None
) -> tuple[object, ...]:
    names = cache.ledger().state.names
    loose_names = {names[n] for n in loose or ()}
    result = Session(cache, CONFIG, now, assume=False).run()
    return (
        sorted((b.pod, b.node, None if b.node in loose_names else b.gpus) for b in result.bindings),
        sorted((e.pod, e.action) for e in result.evictions),
        sorted((p.pod, why_text(p.why)) for p in result.pending),
    )


def pending_jobs(cache: ClusterCache[Components]) -> list[Job]:
    """The jobs the cache's pending pods make, queue by queue, in order (as a backlog lists
    them)."""
    ledger = cache.ledger()
    jobs = build_jobs(cache.pending(), ledger.groups, ledger.gang_running, ledger.state)
    return sorted(jobs, key=lambda j: (j.queue, order_key(j)))


def cache_of(*events: Event) -> ClusterCache[Components]:
    cache = ClusterCache(NP, components=COMPONENTS)
    cache.apply_all(events)
    cache.ledger()
    return cache


# -- one event at a time -------------------------------------------------------------------


def test_a_bound_pod_changes_only_its_node_row() -> None:
    cache = cache_of(*(Event("ADDED", "Node", gpu_node(f"n{i}")) for i in range(3)))
    before = cache.ledger().state.generation.copy()
    cache.apply(Event("ADDED", "Pod", bound("ns/a", "n1", (0, 1))))
    after = cache.ledger().state.generation
    assert list(after - before) == [0, 1, 0]
    assert cache.ledger().state.gpu_whole_free.tolist() == [4, 2, 4]
    cache.apply(Event("DELETED", "Pod", bound("ns/a", "n1", (0, 1))))
    assert cache.ledger().state.gpu_whole_free.tolist() == [4, 4, 4]
    assert "ns/a" not in cache.ledger().running


def test_a_pod_seen_before_its_node_takes_capacity_when_the_node_arrives() -> None:
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0")))
    cache.apply(Event("ADDED", "Pod", bound("ns/a", "n9", (0,))))
    assert "ns/a" not in cache.ledger().running
    cache.apply(Event("ADDED", "Node", gpu_node("n9")))
    ledger = cache.ledger()
    assert ledger.running["ns/a"].node == ledger.node_index["n9"]


def test_nodes_joining_and_leaving_carry_the_other_rows_without_binding_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An autoscaled cluster adds and removes nodes all day: the ledger copies the rows of
    the nodes that stay (pods, inter-pod index, NUMA zones, other resources) instead of
    reserving every running pod again, and equals one built from scratch."""
    web = LabelSelector((Requirement("app", "In", ("web",)),))
    placement = PodPlacement(
        "ns",
        {"app": "web"},
        anti_affinity=(PodTerm(web, None, "kubernetes.io/hostname"),),
        host_ports=(HostPort("TCP", 8080),),
    )
    numa = replace(gpu_node("n0"), gpu_zones=(0, 0, 1, 1), zone_cpu_milli=(16_000, 16_000))
    fpga = replace(gpu_node("n1"), extended={"example.com/fpga": 2})
    web_pod = replace(
        bound("ns/web", "n0", (1,)), spec=replace(spec("ns/web"), placement=placement)
    )
    fpga_pod = replace(
        bound("ns/f", "n1", (0, 1)),
        spec=replace(spec("ns/f", 2), extended=(("example.com/fpga", 1),)),
    )
    cache = cache_of(
        *(Event("ADDED", "Node", n) for n in (numa, fpga, gpu_node("n3"))),
        *(Event("ADDED", "Pod", p) for p in (web_pod, fpga_pod, bound("ns/gone", "n3", (0,)))),
        Event("ADDED", "Pod", bound("ns/early", "n2", (0, 1, 2))),  # before its node
    )
    old = cache.ledger()
    reserved: list[str] = []
    real_bind = Ledger.bind

    def bind(self: Ledger, pod: PodInfo) -> Running:
        reserved.append(pod.key)
        return real_bind(self, pod)

    monkeypatch.setattr(Ledger, "bind", bind)
    cache.apply(Event("ADDED", "Node", gpu_node("n2", gpus=8)))  # more GPU slots than before
    cache.apply(Event("DELETED", "Node", gpu_node("n3")))  # its pod not deleted yet
    ledger = cache.ledger()
    assert ledger is not old
    assert reserved == ["ns/early"]  # only the pod of the node that joined
    assert set(ledger.running) == {"ns/web", "ns/f", "ns/early"}
    scratch = fresh(cache).ledger()
    assert_same_ledger(ledger, scratch)
    for name in ("gpu_whole_free", "zone_cpu_free", "extended_free", "generation"):
        assert getattr(ledger.state, name).shape == getattr(scratch.state, name).shape, name
    for name in ("gpu_whole_free", "zone_cpu_free", "extended_free"):
        np.testing.assert_array_equal(getattr(ledger.state, name), getattr(scratch.state, name))
    a, b = ledger.state.pod_index, scratch.state.pod_index
    np.testing.assert_array_equal(
        a.ports_in_use(HostPort("TCP", 8080)), b.ports_in_use(HostPort("TCP", 8080))
    )
    np.testing.assert_array_equal(
        a.matching(placement.anti_affinity[0]), b.matching(placement.anti_affinity[0])
    )
    assert a.ports_in_use(HostPort("TCP", 8080)).tolist() == [1, 0, 0]
    cache.apply(Event("ADDED", "Pod", pending("ns/web2")))
    twin = replace(pending("ns/web2"), spec=replace(spec("ns/web2"), placement=placement))
    cache.apply(Event("MODIFIED", "Pod", twin))
    result = Session(cache, CONFIG, 10.0).run()
    assert [(b.pod, b.node) for b in result.bindings] == [("ns/web2", "n1")]  # not beside ns/web


def test_a_node_that_left_and_came_back_between_sessions_is_read_anew() -> None:
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0")), Event("ADDED", "Node", gpu_node("n1")))
    cache.apply(Event("ADDED", "Pod", bound("ns/a", "n1", (0,))))
    cache.ledger()
    cache.apply(Event("DELETED", "Pod", bound("ns/a", "n1", (0,))))
    cache.apply(Event("DELETED", "Node", gpu_node("n1")))
    cache.apply(Event("ADDED", "Node", gpu_node("n1", gpus=8)))
    assert cache.ledger().state.gpu_whole_free.tolist() == [4, 8]
    assert_same_ledger(cache.ledger(), fresh(cache).ledger())


@pytest.mark.parametrize("strict", [True, False])
def test_a_pod_seen_on_a_node_that_left_before_the_next_session_counts_nowhere(
    strict: bool,
) -> None:
    """Between a node leaving and the next session the ledger still has its row: a pod
    bound there (over-committing it) is not counted, as a ledger built anew would not."""
    cache = ClusterCache(NP, components=COMPONENTS, strict=strict)
    cache.apply_all(Event("ADDED", "Node", gpu_node(n)) for n in ("n0", "n3"))
    cache.apply(Event("ADDED", "Pod", bound("ns/full", "n3", (0, 1, 2, 3))))
    cache.ledger()
    cache.apply(Event("DELETED", "Node", gpu_node("n3")))
    cache.apply(Event("ADDED", "Pod", bound("ns/late", "n3", (0, 1))))
    ledger = cache.ledger()
    assert set(ledger.running) == set()
    assert not cache.conflicts
    assert_same_ledger(ledger, fresh(cache).ledger())


def test_a_resource_only_a_joining_node_lists_is_counted_on_the_others_as_anew() -> None:
    """A running pod asks for a resource its node does not list (a scheduler extender's):
    nothing is taken while no node lists it; once one that does joins, the ledger is built
    anew, so the pod's request counts where a fresh ledger counts it."""
    fpga = (("example.com/fpga", 1),)
    pod = replace(bound("ns/p", "n0", (0,)), spec=replace(spec("ns/p"), extended=fpga))
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0")), Event("ADDED", "Pod", pod))
    cache.apply(Event("ADDED", "Node", replace(gpu_node("n2"), extended={"example.com/fpga": 2})))
    cache.ledger()
    cache.apply(Event("DELETED", "Pod", pod))
    ledger, scratch = cache.ledger(), fresh(cache).ledger()
    np.testing.assert_array_equal(ledger.state.extended_free, scratch.state.extended_free)


def test_a_bind_confirmed_on_a_node_that_left_and_came_back_counts_once() -> None:
    """A cycle assumes a pod on n0; n0 leaves (a session runs without it) and comes back,
    and then the bind is seen: the pod holds its GPU once, not as the assumption and as
    the event both."""
    cache = cache_of(
        Event("ADDED", "Node", gpu_node("n0")), Event("ADDED", "Node", gpu_node("n1", tainted=True))
    )
    cache.apply(Event("ADDED", "Pod", pending("ns/p")))
    (binding,) = Session(cache, CONFIG, 10.0).run().bindings
    assert binding.node == "n0"
    cache.apply(Event("DELETED", "Node", gpu_node("n0")))
    cache.ledger()
    cache.apply(Event("ADDED", "Node", gpu_node("n0")))
    seen = replace(cache.pods["ns/p"], node="n0", gpus=binding.gpus or (), started=10.0)
    cache.apply(Event("MODIFIED", "Pod", seen))
    assert cache.ledger().state.gpu_whole_free.tolist() == [3, 4]


def test_a_label_change_rejudges_one_row_of_the_cached_masks() -> None:
    cache = cache_of(*(Event("ADDED", "Node", gpu_node(f"n{i}")) for i in range(3)))
    ledger = cache.ledger()
    assert ledger.state.node_labels.requirement_mask(ZONE_A).tolist() == [True] * 3
    cache.apply(Event("MODIFIED", "Node", gpu_node("n2", zone="b")))
    assert cache.ledger() is ledger  # no rebuild: only the row changed
    assert ledger.state.node_labels.requirement_mask(ZONE_A).tolist() == [True, True, False]


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        pytest.param("Node", gpu_node("n1", gpus=8), id="node-capacity"),
        pytest.param("Node", gpu_node("n7"), id="node-joins"),
        pytest.param("Queue", QueueSpec("team", quota=vector(2)), id="queue"),
    ],
)
def test_structural_changes_rebuild_the_ledger_at_the_next_session(
    kind: str, obj: NodeSpec | QueueSpec
) -> None:
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0")), Event("ADDED", "Node", gpu_node("n1")))
    cache.apply(Event("ADDED", "Pod", bound("ns/a", "n0", (0,))))
    old = cache.ledger()
    generation = cache.generations[kind]
    cache.apply(Event("MODIFIED", kind, obj) if kind == "Node" else Event("ADDED", kind, obj))
    assert cache.generations[kind] == generation + 1
    assert cache.ledger() is not old
    assert_same_ledger(cache.ledger(), fresh(cache).ledger())


def test_unknown_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="does not keep Secret"):
        ClusterCache(NP, components=COMPONENTS).apply(Event("ADDED", "Secret", gpu_node("n0")))


# -- assume, confirm, forget ------------------------------------------------------------


def one_node_cache() -> ClusterCache[Components]:
    return cache_of(
        Event("ADDED", "Node", gpu_node("n0", gpus=2)),
        Event("ADDED", "Pod", pending("ns/a", 2)),
        Event("ADDED", "Pod", pending("ns/b", 2)),
    )


def test_a_decided_binding_is_assumed_and_holds_its_capacity() -> None:
    cache = one_node_cache()
    result = Session(cache, CONFIG, 100.0).run()
    assert [(b.pod, b.node) for b in result.bindings] == [("ns/a", "n0")]
    assert cache.assumed == {"ns/a": 100.0 + cache.assumed_ttl_s}
    again = Session(cache, CONFIG, 101.0).run()
    assert not again.bindings  # ns/a still holds both GPUs: ns/b cannot have them
    assert [p.pod for p in again.pending] == ["ns/b"]


def test_confirmation_keeps_the_capacity_and_ends_the_assumption() -> None:
    cache = one_node_cache()
    Session(cache, CONFIG, 100.0).run()
    cache.apply(Event("MODIFIED", "Pod", bound("ns/a", "n0", (0, 1))))
    assert cache.assumed == {}
    assert cache.expire(1e9) == []
    assert cache.ledger().state.gpu_whole_free.tolist() == [0]
    assert cache.ledger().running["ns/a"].pod.started == 100.0


def test_a_failed_bind_is_forgotten_and_the_pod_pends_again() -> None:
    cache = one_node_cache()
    Session(cache, CONFIG, 100.0).run()
    cache.forget("ns/a")
    assert cache.ledger().state.gpu_whole_free.tolist() == [2]
    assert [p.key for p in cache.pending()] == ["ns/a", "ns/b"]


def test_an_unconfirmed_binding_expires_after_its_ttl() -> None:
    cache = one_node_cache()
    Session(cache, CONFIG, 100.0).run()
    assert cache.expire(100.0 + cache.assumed_ttl_s - 1) == []
    assert cache.expire(100.0 + cache.assumed_ttl_s) == ["ns/a"]
    assert cache.ledger().state.gpu_whole_free.tolist() == [2]


def test_a_bind_seen_on_another_node_replaces_the_assumption() -> None:
    cache = cache_of(
        Event("ADDED", "Node", gpu_node("n0", gpus=2)),
        Event("ADDED", "Node", gpu_node("n1", gpus=2)),
        Event("ADDED", "Pod", pending("ns/a", 2)),
    )
    result = Session(cache, CONFIG, 100.0).run()
    other = "n1" if result.bindings[0].node == "n0" else "n0"
    cache.apply(Event("MODIFIED", "Pod", bound("ns/a", other, (0, 1))))
    ledger = cache.ledger()
    assert ledger.state.names[ledger.running["ns/a"].node] == other
    assert int(ledger.state.gpu_whole_free.sum()) == 2


def preempted() -> ClusterCache[Components]:
    """A cache in which a session evicted ns/low (both GPUs of n0) for ns/high, assumed."""
    cache = cache_of(
        Event("ADDED", "Node", gpu_node("n0", gpus=2)),
        Event("ADDED", "Pod", bound("ns/low", "n0", (0, 1), priority=1, started=0.0)),
        Event("ADDED", "Pod", pending("ns/high", 2, priority=50)),
    )
    result = Session(cache, CONFIG, 100.0).run()
    assert [(e.pod, e.action) for e in result.evictions] == [("ns/low", "preempt")]
    return cache


def test_a_refused_eviction_keeps_the_victim() -> None:
    cache = preempted()
    assert cache.evicted == {"ns/low"}
    cache.forget("ns/high")
    cache.keep("ns/low")
    ledger = cache.ledger()
    assert set(ledger.running) == {"ns/low"}
    assert ledger.state.gpu_whole_free.tolist() == [0]


def test_a_session_without_assume_leaves_the_cache_as_it_was() -> None:
    cache = one_node_cache()
    result = Session(cache, CONFIG, 100.0, assume=False).run()
    assert result.bindings
    assert cache.assumed == {}
    assert cache.ledger().state.gpu_whole_free.tolist() == [2]


# -- cycle after cycle ------------------------------------------------------------------


def test_elastic_pods_left_pending_stay_in_the_schedulers_backlog() -> None:
    """A gang whose minMember runs is bound once its elastic pods are tried; one that found
    no room still waits, and runs when room is made."""
    cache = ClusterCache(
        NP, components=COMPONENTS, workload=(spec("w"),)
    )  # fixed: the Scheduler keeps its cycle
    cache.apply_all(
        [
            Event("ADDED", "Node", gpu_node("n0", gpus=2)),
            Event("ADDED", "PodGroup", GroupSpec("ns/g", 1)),
            Event("ADDED", "Pod", bound("ns/g0", "n0", (0, 1), group="ns/g", started=0.0)),
            Event("ADDED", "Pod", pending("ns/g1", group="ns/g", created=1.0)),
        ]
    )
    scheduler = Scheduler(cache, CONFIG)
    first = scheduler.run(10.0)
    assert [p.pod for p in first.pending] == ["ns/g1"]
    assert [j.key for j in scheduler.jobs()] == ["ns/g"]
    assert scheduler.jobs() == pending_jobs(cache)
    cache.apply(Event("DELETED", "Pod", cache.pods["ns/g0"]))
    assert [b.pod for b in scheduler.run(20.0).bindings] == ["ns/g1"]
    assert scheduler.jobs() == []


# -- any sequence of events ------------------------------------------------------------

NODES = tuple(f"n{i}" for i in range(5))
QUEUES = ("team-a", "team-b")


class CacheMachine(RuleBasedStateMachine):
    """Random events into one cache; after each, it equals a cache built from scratch."""

    workload: tuple[PodSpec, ...] | None = None
    """FGD's workload (None: the cache's pods)."""

    def __init__(self) -> None:
        super().__init__()
        self.cache = ClusterCache(NP, components=COMPONENTS, workload=self.workload)
        self.now = 1000.0
        self.serial = 0
        self.placed: dict[str, PodInfo] = {}
        """The bindings the cycles made that no event confirmed yet, as they were made:
        the oracle's own record (a cache that loses one differs from it)."""
        self.cache.apply(Event("ADDED", "Node", gpu_node("n0")))
        for q in QUEUES:
            self.cache.apply(Event("ADDED", "Queue", QueueSpec(q, quota=vector(4))))

    def _key(self) -> str:
        self.serial += 1
        return f"ns/p{self.serial}"

    def _nodes(self) -> list[str]:
        return sorted(self.cache.objects["Node"])

    def _pods_on(self, node: str) -> list[PodInfo]:
        ledger = self.cache.ledger()
        i = ledger.node_index.get(node)
        return [r.pod for r in ledger.running.values() if r.node == i]

    @rule(
        name=st.sampled_from(NODES),
        gpus=st.sampled_from([2, 4, 8]),
        zone=st.sampled_from("ab"),
        tainted=st.booleans(),
    )
    def node_joins_or_changes(self, name: str, gpus: int, zone: str, tainted: bool) -> None:
        old = self.cache.objects["Node"].get(name)
        if isinstance(old, NodeSpec) and old.gpus != gpus and self._pods_on(name):
            gpus = old.gpus  # a node with pods keeps its GPUs
        node = gpu_node(name, gpus, zone, tainted=tainted)
        self.cache.apply(Event("MODIFIED", "Node", node) if old else Event("ADDED", "Node", node))

    @rule(name=st.sampled_from(NODES[1:]))
    def node_leaves(self, name: str) -> None:
        node = self.cache.objects["Node"].get(name)
        if node is None:
            return
        for pod in self._pods_on(name):  # the pod garbage collector deletes them first
            self.placed.pop(pod.key, None)  # a bind on its way ends with its pod
            self.cache.apply(Event("DELETED", "Pod", self.cache.pods[pod.key]))
        self.cache.apply(Event("DELETED", "Node", node))

    @rule(
        gpus=st.sampled_from([0, 1, 2, 4]),
        queue=st.sampled_from(QUEUES),
        priority=st.sampled_from([0, 10, 200]),
        gang=st.booleans(),
    )
    def pod_created(self, gpus: int, queue: str, priority: int, gang: bool) -> None:
        key = self._key()
        group = "ns/g" if gang else ""
        pod = PodInfo(
            key, spec(key, gpus), queue=queue, priority=priority, created=self.now, group=group
        )
        self.cache.apply(Event("ADDED", "Pod", pod))

    @rule(min_member=st.integers(1, 3), queue=st.sampled_from(QUEUES))
    def podgroup_changed(self, min_member: int, queue: str) -> None:
        group = GroupSpec("ns/g", min_member, queue, 0.0, stale_since=0.0)
        known = "ns/g" in self.cache.objects["PodGroup"]
        self.cache.apply(Event("MODIFIED" if known else "ADDED", "PodGroup", group))

    @rule(name=st.sampled_from(NODES), gpus=st.integers(1, 2))
    def foreign_pod_bound(self, name: str, gpus: int) -> None:
        """A pod of another scheduler, bound where it has free GPUs."""
        ledger = self.cache.ledger()
        i = ledger.node_index.get(name)
        if i is None:
            return
        free = np.flatnonzero(ledger.state.node_gpu_free(i) == MILLI)[:gpus]
        if free.size < gpus or ledger.state.cpu_free[i] < 1000:
            return
        key = self._key()
        pod = bound(key, name, tuple(int(g) for g in free), managed=False, started=self.now)
        self.cache.apply(Event("ADDED", "Pod", pod))

    @rule(name=st.sampled_from(NODES), gpus=st.integers(1, 2))
    def foreign_pod_without_gpu_indexes(self, name: str, gpus: int) -> None:
        """A pod of another scheduler whose object does not say which GPUs it has."""
        ledger = self.cache.ledger()
        i = ledger.node_index.get(name)
        if i is None or ledger.state.gpu_whole_free[i] < gpus or ledger.state.cpu_free[i] < 1000:
            return
        key = self._key()
        pod = PodInfo(key, spec(key, gpus), node=name, managed=False, started=self.now)
        self.cache.apply(Event("ADDED", "Pod", pod))

    @precondition(lambda self: bool(self.cache.ledger().running))
    @rule(pick=st.integers(0, 1_000), priority=st.sampled_from([None, 5]))
    def running_pod_updated(self, pick: int, priority: int | None) -> None:
        """A running pod's object changes: its status only, or its priority."""
        keys = sorted(k for k in self.cache.ledger().running if k in self.cache.pods)
        if not keys:
            return
        pod = self.cache.pods[keys[pick % len(keys)]]
        if pod.key in self.cache.assumed:
            return  # its bind is on its way
        new = pod if priority is None else replace(pod, priority=priority)
        self.cache.apply(Event("MODIFIED", "Pod", new))

    @rule(quota=st.sampled_from([0, 2, 8]), queue=st.sampled_from(QUEUES))
    def queue_changed(self, quota: int, queue: str) -> None:
        self.cache.apply(Event("MODIFIED", "Queue", QueueSpec(queue, quota=vector(quota))))

    @rule(confirm=st.floats(0, 1), fail=st.floats(0, 1), refuse=st.booleans())
    def cycle(self, confirm: float, fail: float, refuse: bool) -> None:
        """A cycle decides; some bindings are confirmed, some fail; evictions happen, or the
        first is refused (a disruption budget)."""
        self.now += 60
        result = self.decide()
        for eviction in result.evictions:
            self.placed.pop(eviction.pod, None)
        for binding in result.bindings:
            pod = self.cache.pods[binding.pod]
            self.placed[binding.pod] = replace(
                pod, node=binding.node, gpus=binding.gpus or (), started=self.now
            )
        for i, eviction in enumerate(result.evictions):
            if eviction.pod not in self.cache.evicted or eviction.pod not in self.cache.pods:
                continue
            if refuse and i == 0:
                self.cache.keep(eviction.pod)  # the plan is dropped: its bindings forgotten
                self.placed = {k: p for k, p in self.placed.items() if k in self.cache.assumed}
            else:
                self.cache.apply(Event("DELETED", "Pod", self.cache.pods[eviction.pod]))
        for i, binding in enumerate(result.bindings):
            if binding.pod not in self.placed:
                continue
            share = (i + 0.5) / len(result.bindings)
            if share < confirm:
                event = self.placed.pop(binding.pod)
                self.cache.apply(Event("MODIFIED", "Pod", event))
            elif share < confirm + fail:
                self.placed.pop(binding.pod)
                self.cache.forget(binding.pod)

    def decide(self) -> CycleResult:
        return Session(self.cache, CONFIG, self.now).run()

    @precondition(lambda self: bool(self.cache.ledger().running))
    @rule(pick=st.integers(0, 1_000))
    def pod_finished(self, pick: int) -> None:
        keys = sorted(self.cache.ledger().running)
        key = keys[pick % len(keys)]
        if key in self.cache.pods:
            self.placed.pop(key, None)
            self.cache.apply(Event("DELETED", "Pod", self.cache.pods[key]))

    @rule()
    def time_passes(self) -> None:
        self.now += self.cache.assumed_ttl_s
        for key in self.cache.expire(self.now):
            self.placed.pop(key, None)

    @invariant()
    def equals_a_cache_built_from_scratch(self) -> None:
        assert set(self.cache.assumed) == set(self.placed)
        scratch = fresh(self.cache, self.placed)
        loose = guessed(self.cache) | guessed(scratch)
        assert_same_ledger(self.cache.ledger(), scratch.ledger(), loose)
        assert victims(self.cache, loose) == victims(scratch, loose)
        now = self.now + 1
        assert decisions(self.cache, now, loose) == decisions(scratch, now, loose)


TestCacheMachine = CacheMachine.TestCase
TestCacheMachine.settings = settings(
    max_examples=30,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class SchedulerMachine(CacheMachine):
    """The same events, the cycles run by one Scheduler that keeps its backlog across them:
    after each event its pending jobs are those the cache's pending pods make. FGD's
    workload is fixed, as in a replay, so that the Scheduler keeps its cycle (a workload
    that changes builds the cycle and its backlog anew)."""

    workload = tuple(spec(f"w{g}", g) for g in (0, 1, 2, 4))

    def __init__(self) -> None:
        super().__init__()
        self.scheduler = Scheduler(self.cache, CONFIG, self.now)

    def decide(self) -> CycleResult:
        return self.scheduler.run(self.now)

    @invariant()
    def keeps_the_pending_jobs_of_the_cache(self) -> None:
        assert self.scheduler.jobs() == pending_jobs(self.cache)

    @invariant()
    def is_settled_only_when_nothing_fits(self) -> None:
        """What the Scheduler remembers of failures ends when what they depended on changed
        (capacity freed, a node's labels or taints)."""
        placing = CycleConfig(records=False, actions=())
        if Session(self.cache, placing, self.now + 1, assume=False).run().bindings:
            assert not self.scheduler.settled()


TestSchedulerMachine = SchedulerMachine.TestCase
TestSchedulerMachine.settings = TestCacheMachine.settings


def test_a_scheduler_tries_again_when_a_node_is_untainted() -> None:
    cache = ClusterCache(NP, components=COMPONENTS, workload=(spec("w"),))
    cache.apply(Event("ADDED", "Node", gpu_node("n0", tainted=True)))
    cache.apply(Event("ADDED", "Pod", pending("ns/a", 1)))
    scheduler = Scheduler(cache, CONFIG)
    assert not scheduler.run(100.0).bindings  # the taint keeps it off the only node
    assert scheduler.settled()
    cache.apply(Event("MODIFIED", "Node", gpu_node("n0")))
    assert not scheduler.settled()
    assert [b.pod for b in scheduler.run(101.0).bindings] == ["ns/a"]


def test_assumed_bindings_survive_a_rebuild_of_the_ledger() -> None:
    cache = one_node_cache()
    Session(cache, CONFIG, 100.0).run()
    cache.apply(Event("ADDED", "Queue", QueueSpec("team")))  # the ledger is rebuilt
    assert set(cache.ledger().running) == {"ns/a"}
    assert [p.key for p in cache.pending()] == ["ns/b"]
    assert not Session(cache, CONFIG, 101.0).run().bindings  # ns/a still holds both GPUs


def test_a_refused_eviction_drops_the_plan_that_made_it() -> None:
    cache = preempted()
    cache.keep("ns/low")  # the preemptor is still assumed on the victim's GPUs
    assert cache.assumed == {}
    assert set(cache.ledger().running) == {"ns/low"}
    assert [p.key for p in cache.pending()] == ["ns/high"]


def test_a_status_update_of_a_running_pod_changes_nothing_it_holds() -> None:
    pod = bound("ns/a", "n0", (0,), started=5.0)
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0")), Event("ADDED", "Pod", pod))
    released = cache.ledger().released
    cache.apply(Event("MODIFIED", "Pod", pod))
    cache.apply(Event("ADDED", "Pod", pod))  # a relist sees it again
    assert cache.ledger().released == released
    assert cache.ledger().running["ns/a"].pod.started == 5.0


def test_a_running_pod_that_changes_queue_is_counted_in_its_new_queue() -> None:
    pod = bound("ns/a", "n0", (0,), queue="team-a")
    cache = cache_of(
        Event("ADDED", "Node", gpu_node("n0")),
        *(Event("ADDED", "Queue", QueueSpec(q)) for q in QUEUES),
        Event("ADDED", "Pod", pod),
    )
    cache.apply(Event("MODIFIED", "Pod", replace(pod, queue="team-b")))
    cache.apply(Event("DELETED", "Pod", replace(pod, queue="team-b")))
    alloc = cache.ledger().alloc
    assert alloc["team-a"][0] == alloc["team-b"][0] == 0


def test_a_pod_naming_its_gpus_displaces_a_guess() -> None:
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0", gpus=2)))
    guessed = PodInfo("ns/g", spec("ns/g", 1), node="n0", managed=False)
    cache.apply(Event("ADDED", "Pod", guessed))  # takes GPU 0, as gpufleet would pick
    cache.apply(Event("ADDED", "Pod", bound("ns/k", "n0", (0,), managed=False)))
    ledger = cache.ledger()
    assert ledger.running["ns/k"].gpus == (0,)
    assert ledger.running["ns/g"].gpus == (1,)


def test_a_node_labelled_with_its_gpu_memory_later_sizes_shares_by_it() -> None:
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0")))
    labelled = replace(gpu_node("n0"), gpu_memory_mib=81_920)
    cache.apply(Event("MODIFIED", "Node", labelled))
    assert int(cache.ledger().state.gpu_memory[0]) == 81_920


def test_deleting_an_object_the_cache_never_saw_changes_nothing() -> None:
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0")))
    ledger, generations = cache.ledger(), dict(cache.generations)
    cache.apply(Event("DELETED", "Queue", QueueSpec("ghost")))
    assert cache.ledger() is ledger
    assert cache.generations == generations


# -- a cluster that contradicts itself ------------------------------------------------------


def test_a_strict_cache_refuses_bound_pods_that_share_a_gpu() -> None:
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0")))
    cache.apply(Event("ADDED", "Pod", bound("ns/a", "n0", (0, 1))))
    with pytest.raises(SnapshotError, match="ns/b"):
        cache.apply(Event("ADDED", "Pod", bound("ns/b", "n0", (1, 2))))


def test_a_strict_cache_refuses_them_when_their_node_joins_and_again_after() -> None:
    """Pods seen before their node that share a GPU: the node joining is refused, and the
    next read is refused again; once one goes, the ledger counts the other once (it is
    built anew, not left half moved)."""
    cache = cache_of(Event("ADDED", "Node", gpu_node("n0")))
    cache.apply(Event("ADDED", "Pod", bound("ns/a", "n1", (0, 1))))
    cache.apply(Event("ADDED", "Pod", bound("ns/b", "n1", (1, 2))))
    cache.apply(Event("ADDED", "Node", gpu_node("n1")))
    for _ in range(2):
        with pytest.raises(SnapshotError, match="ns/b"):
            cache.ledger()
    cache.apply(Event("DELETED", "Pod", bound("ns/b", "n1", (1, 2))))
    ledger = cache.ledger()
    assert set(ledger.running) == {"ns/a"}
    assert ledger.alloc["default"][0] == 2  # ns/a counted once
    assert_same_ledger(ledger, fresh(cache).ledger())


@pytest.mark.parametrize("rebuilt", [False, True], ids=["event", "rebuild"])
def test_a_live_cache_fences_the_node_and_goes_on(rebuilt: bool) -> None:
    """Not strict: the pod that contradicts its node is reported, the node is tainted so
    nothing more lands there, and the fence goes when the pods' objects agree again."""
    cache = ClusterCache(NP, components=COMPONENTS, strict=False)
    events = [Event("ADDED", "Node", gpu_node(n)) for n in ("n0", "n1")]
    events += [
        Event("ADDED", "Pod", bound("ns/a", "n0", (0, 1))),
        Event("ADDED", "Pod", bound("ns/b", "n0", (1, 2))),
    ]
    if rebuilt:
        cache.apply_all(events)
        cache.ledger()
    else:
        cache.apply_all(events[:2])
        cache.ledger()
        cache.apply_all(events[2:])
    assert list(cache.conflicts) == ["ns/b"]
    cache.apply(Event("ADDED", "Pod", pending("ns/new", 1)))
    result = Session(cache, CycleConfig(), 100.0, assume=False).run()
    assert [(b.pod, b.node) for b in result.bindings] == [("ns/new", "n1")]
    cache.apply(Event("DELETED", "Pod", bound("ns/b", "n0", (1, 2))))
    cache.ledger()
    assert cache.conflicts == {}
    result = Session(cache, CycleConfig(policy="best-fit"), 100.0, assume=False).run()
    assert [(b.pod, b.node) for b in result.bindings] == [("ns/new", "n0")]


def test_a_refused_eviction_takes_back_the_bindings_pipelined_onto_its_node() -> None:
    """Found by the state machine: a preemptor's plan evicts a 4-GPU pod, and a later pod of
    the same cycle is placed on the capacity the eviction frees. The eviction is refused:
    the victim counts again, so the later pod's binding must be taken back with the plan
    (it held GPUs the victim still has; keeping the victim crashed the cache)."""
    machine = CacheMachine()
    machine.cycle(confirm=0.0, fail=0.0, refuse=False)
    machine.pod_created(gang=False, gpus=4, priority=0, queue="team-a")
    machine.podgroup_changed(min_member=1, queue="team-a")
    machine.cycle(confirm=1.0, fail=0.0, refuse=False)
    machine.pod_created(gang=False, gpus=1, priority=0, queue="team-a")
    machine.pod_created(gang=False, gpus=1, priority=10, queue="team-a")
    machine.cycle(confirm=0.0, fail=0.0, refuse=True)
    machine.equals_a_cache_built_from_scratch()


def test_moved_pods_taken_back_together_each_return_to_their_own_gpus() -> None:
    """A cycle moved a onto n1's GPU and b onto n0's, each onto the GPU the other freed;
    live, both are evicted and never bound again: taken back together, each counts on its
    old GPU again, and no node is found contradicting itself."""
    cache = cache_of(
        Event("ADDED", "Node", gpu_node("n0", gpus=1)),
        Event("ADDED", "Node", gpu_node("n1", gpus=1)),
        Event("ADDED", "Pod", bound("ns/a", "n0", (0,), started=0.0)),
        Event("ADDED", "Pod", bound("ns/b", "n1", (0,), started=0.0)),
    )
    ledger = cache.ledger()
    a, b = ledger.running["ns/a"].pod, ledger.running["ns/b"].pod
    ledger.finish("ns/a")
    ledger.finish("ns/b")
    ledger.bind(a.placed("n1", (0,), 100.0))
    ledger.bind(b.placed("n0", (0,), 100.0))
    moves = (
        Eviction("ns/a", "consolidate", "ns/x", True),
        Eviction("ns/b", "consolidate", "ns/x", True),
    )
    cache.assume(
        CycleResult((Binding("ns/a", "n1", (0,)), Binding("ns/b", "n0", (0,))), moves, ()), 100.0
    )
    cache.forget("ns/a", "ns/b")
    ledger = cache.ledger()
    assert cache.conflicts == {}
    where = {key: ledger.state.names[r.node] for key, r in ledger.running.items()}
    assert where == {"ns/a": "n0", "ns/b": "n1"}
