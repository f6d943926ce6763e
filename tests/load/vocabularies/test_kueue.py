"""Kueue's objects, read as gpufleet's queues.

A ClusterQueue's nominal quotas summed over its flavors as the quota; its cohort as a parent
holding what its members hold, which bounds their borrowing; ``borrowingLimit`` as the
member's own bound; no cohort, no borrowing; hierarchical Cohorts; the fair-sharing weight;
a pod's LocalQueue naming its ClusterQueue; and what bad input says.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpufleet.compose import schedule_snapshot
from gpufleet.load.errors import InputError
from gpufleet.load.foreign import ALL, VOLCANO
from gpufleet.load.snapshot import parse_snapshot
from gpufleet.model.workload import QueueSpec, Snapshot
from gpufleet.report.reasons import why_text

NODE = {
    "apiVersion": "v1",
    "kind": "Node",
    "metadata": {"name": "n1"},
    "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}},
}
KUEUE = "kueue.x-k8s.io/v1beta2"
INF = math.inf


def flavor(name: str, **quotas: Any) -> dict[str, Any]:
    """A flavor's quotas: ``cpu=9`` or ``cpu=(9, 1)`` (nominal quota, borrowing limit);
    ``gpu`` is ``nvidia.com/gpu``."""
    resources = []
    for res, quota in quotas.items():
        nominal, borrow = quota if isinstance(quota, tuple) else (quota, None)
        entry = {"name": "nvidia.com/gpu" if res == "gpu" else res, "nominalQuota": nominal}
        if borrow is not None:
            entry["borrowingLimit"] = borrow
        resources.append(entry)
    return {"name": name, "resources": resources}


def group(*flavors: dict[str, Any]) -> dict[str, Any]:
    """A resource group covering the resources of its first flavor."""
    covered = [r["name"] for r in flavors[0]["resources"]]
    return {"coveredResources": covered, "flavors": list(flavors)}


def cluster_queue(
    name: str = "team-a-cq", *groups: dict[str, Any], api: str = KUEUE, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": list(groups), **spec},
    }


def cohort(name: str, *groups: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "Cohort",
        "metadata": {"name": name},
        "spec": {"resourceGroups": list(groups), **spec} if groups else spec,
    }


def local_queue(name: str, cluster: str, namespace: str = "team-a") -> dict[str, Any]:
    return {
        "apiVersion": KUEUE,
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cluster},
    }


def pod(
    name: str = "p",
    namespace: str = "team-a",
    *,
    node: str | None = None,
    scheduler: str = "default-scheduler",
    **labels: str,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler,
        "containers": [{"name": "main", "resources": {"requests": {"cpu": "3"}}}],
    }
    if node is not None:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": labels,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
    }


def queue_label(local: str) -> dict[str, str]:
    return {"kueue.x-k8s.io/queue-name": local}


def read(*objects: dict[str, Any], vocabularies: frozenset[str] = ALL) -> Snapshot:
    """The snapshot of ``objects`` and a node; with every vocabulary read, nothing is
    skipped."""
    warned: list[str] = []
    snap = parse_snapshot(
        [NODE, *objects],
        "s.yaml",
        warn=warned.append,
        schedulers=("gpufleet", "default-scheduler"),
        vocabularies=vocabularies,
    )
    if vocabularies == ALL:
        assert warned == []
    return snap


def queues(*objects: dict[str, Any]) -> dict[str, QueueSpec]:
    return {q.name: q for q in read(*objects).queues}


def test_the_quota_is_the_nominal_quota_summed_over_flavors() -> None:
    cq = cluster_queue(
        "cq",
        group(
            flavor("spot", cpu=9, memory="36Gi", gpu=2, pods=5),
            flavor("on-demand", cpu="18", memory="72Gi", gpu=4, pods=5),
        ),
    )
    (q,) = read(cq).queues
    assert (q.name, q.parent, q.priority) == ("cq", None, 100)
    assert list(q.quota) == [6, 27_000, 108 * 1024]
    assert list(q.limit) == [6, 27_000, 108 * 1024]  # no cohort: no borrowing
    assert list(q.weight) == [1, 1, 1]
    assert q.quota_set == (True, True, True)


def test_a_resource_no_group_covers_is_one_the_queue_admits_none_of() -> None:
    cq = cluster_queue(
        "cq",
        group(flavor("default", cpu=9)),
        group(flavor("licenses", **{"example.com/license": 10})),
    )
    (q,) = read(cq).queues
    assert list(q.quota) == [0, 9000, 0]
    assert list(q.limit) == [0, 9000, 0]
    assert q.quota_set == (False, True, False)


def test_the_cohort_holds_its_members_quotas_and_bounds_their_borrowing() -> None:
    """Kueue's docs ("Cluster Queue", "Borrowing example"): with team-b-cq idle, team-a-cq
    may admit up to 9 + 12 CPUs and no more."""
    found = queues(
        cluster_queue(
            "team-a-cq", group(flavor("default-flavor", cpu=9, memory="36Gi")), cohortName="team-ab"
        ),
        cluster_queue(
            "team-b-cq",
            group(flavor("default-flavor", cpu=12, memory="48Gi")),
            cohortName="team-ab",
        ),
    )
    a, b, ab = found["team-a-cq"], found["team-b-cq"], found["team-ab"]
    assert (a.parent, b.parent, ab.parent) == ("team-ab", "team-ab", None)
    assert list(ab.quota) == [0, 21_000, 84 * 1024]
    assert list(ab.limit) == [0, 21_000, 84 * 1024]
    assert list(a.quota) == [0, 9000, 36 * 1024]
    assert list(a.limit) == [0, INF, INF]  # no borrowingLimit: up to what the cohort holds
    assert ab.quota_set == (False, True, True)


def test_a_borrowing_limit_bounds_the_members_borrowing() -> None:
    """Kueue's docs ("BorrowingLimit"): team-a-cq may admit up to 9 + 1 CPUs. Over two
    flavors the limits add up; a flavor without one leaves no bound of the queue's own."""
    found = queues(
        cluster_queue(
            "team-a-cq", group(flavor("default-flavor", cpu=(9, 1))), cohortName="team-ab"
        ),
        cluster_queue(
            "team-b-cq",
            group(
                flavor("spot", cpu=(4, 2), memory=("8Gi", "1Gi")),
                flavor("on-demand", cpu=(4, 2), memory="8Gi"),
            ),
            cohortName="team-ab",
        ),
    )
    assert found["team-a-cq"].limit[1] == 10_000
    assert list(found["team-b-cq"].limit) == [0, 12_000, INF]


def test_v1beta1_names_the_cohort_spec_cohort() -> None:
    old = "kueue.x-k8s.io/v1beta1"
    snap = read(
        cluster_queue("cq", group(flavor("f", cpu=(1, 1))), api=old, cohort="c"),
        {**local_queue("user-queue", "cq"), "apiVersion": old},
        pod(**queue_label("user-queue")),
    )
    found = {q.name: q for q in snap.queues}
    assert (found["cq"].parent, list(found["c"].quota)) == ("c", [0, 1000, 0])
    assert [p.queue for p in snap.pods] == ["cq"]


def test_hierarchical_cohorts_add_their_own_quota_and_borrow_from_their_parent() -> None:
    """A Cohort's nominal quota is a pool on top of its members'; a cohort with a parent
    borrows up to its borrowingLimit, the root holds what the whole tree holds."""
    found = queues(
        cohort("root-cohort"),
        cohort(
            "important-org",
            group(flavor("default-flavor", cpu=(12, 2))),
            parentName="root-cohort",
            fairSharing={"weight": "0.75"},
        ),
        cohort("regular-org", parentName="root-cohort"),
        cluster_queue(
            "research", group(flavor("default-flavor", cpu=4)), cohortName="important-org"
        ),
        cluster_queue("batch", group(flavor("default-flavor", cpu=6)), cohortName="regular-org"),
        cluster_queue("adhoc", group(flavor("default-flavor", cpu=1)), cohortName="unnamed"),
    )
    important, regular, root = found["important-org"], found["regular-org"], found["root-cohort"]
    assert (important.parent, regular.parent, root.parent) == ("root-cohort",) * 2 + (None,)
    assert (important.quota[1], important.limit[1], important.weight[1]) == (16_000, 18_000, 0.75)
    assert (regular.quota[1], regular.limit[1]) == (
        6000,
        INF,
    )  # no borrowingLimit: its parent's bound
    assert (root.quota[1], root.limit[1]) == (22_000, 22_000)
    # A cohort no Cohort object defines has no quota of its own and no parent.
    assert (found["unnamed"].parent, found["unnamed"].limit[1]) == (None, 1000)


@pytest.mark.parametrize(
    ("fair_sharing", "weight"),
    [({}, 1.0), ({"weight": "0.5"}, 0.5), ({"weight": 3}, 3.0), ({"weight": 0}, 0.0)],
    ids=["default-1", "fraction", "integer", "zero-takes-no-surplus"],
)
def test_the_fair_sharing_weight_weighs_every_resource(
    fair_sharing: dict[str, Any], weight: float
) -> None:
    (q,) = read(cluster_queue("cq", group(flavor("f", cpu=1)), fairSharing=fair_sharing)).queues
    assert list(q.weight) == [weight] * 3


def test_a_pod_belongs_to_the_cluster_queue_its_local_queue_names() -> None:
    snap = read(
        cluster_queue("cq", group(flavor("f", cpu=9))),
        local_queue("user-queue", "cq"),
        {"apiVersion": "gpufleet.io/v1alpha1", "kind": "Queue", "metadata": {"name": "own"}},
        pod("a", **queue_label("user-queue")),
        pod("b", **queue_label("user-queue"), **{"gpufleet.io/queue": "own"}),
        pod("c", "other", **queue_label("user-queue")),  # the LocalQueue of another namespace
        pod("d", node="n1", scheduler="kueue-less", **queue_label("user-queue")),
    )
    found = {p.key: (p.queue, p.blocked) for p in snap.pods}
    assert found["team-a/a"] == ("cq", "")
    assert found["team-a/b"] == ("own", "")  # the pod's own queue label wins
    assert found["other/c"][0] == ""
    assert (
        "LocalQueue other/user-queue (label kueue.x-k8s.io/queue-name) does not exist"
        in (found["other/c"][1])
    )
    assert found["team-a/d"] == ("cq", "")  # another scheduler's pod counts towards it too


def test_a_missing_local_queue_or_cluster_queue_keeps_the_pod_pending_and_says_why() -> None:
    """Kueue leaves such a workload inadmissible; gpufleet leaves the pod pending, as a pod
    whose queue does not exist."""
    snap = read(
        local_queue("orphan", "gone-cq"),
        pod("lost", **queue_label("no-such-queue")),
        pod("orphaned", **queue_label("orphan")),
        pod("ran", node="n1", **queue_label("no-such-queue")),
    )
    result = schedule_snapshot(snap, 0.0)
    assert result.bindings == ()
    pending = {p.pod: why_text(p.why) for p in result.pending}
    assert pending == {
        "team-a/lost": "LocalQueue team-a/no-such-queue (label kueue.x-k8s.io/queue-name) "
        "does not exist: the pod waits for it to be created",
        "team-a/orphaned": "queue gone-cq does not exist",
    }
    ran = next(p for p in snap.pods if p.key == "team-a/ran")
    assert ran.queue == ""  # Kueue admitted it to a ClusterQueue gpufleet cannot know


def test_a_pod_held_by_kueues_admission_gate_stays_unscheduled() -> None:
    gated = pod("gated", scheduler="gpufleet", **queue_label("user-queue"))
    gated["spec"]["schedulingGates"] = [{"name": "kueue.x-k8s.io/admission"}]
    snap = read(
        cluster_queue("cq", group(flavor("f", cpu=9))), local_queue("user-queue", "cq"), gated
    )
    (pending,) = schedule_snapshot(snap, 0.0).pending
    assert why_text(pending.why).startswith("SchedulingGated:")


def test_with_kueue_off_its_objects_and_label_are_not_read() -> None:
    warned: list[str] = []
    snap = parse_snapshot(
        [
            NODE,
            cluster_queue("cq"),
            local_queue("user-queue", "cq"),
            pod(scheduler="gpufleet", **queue_label("user-queue")),
        ],
        "s.yaml",
        warn=warned.append,
        vocabularies=frozenset({VOLCANO}),
    )
    assert snap.queues == ()
    assert [p.queue for p in snap.pods] == ["default"]
    assert warned == [
        "s.yaml: skipped 1 ClusterQueue object of API group kueue.x-k8s.io "
        f"({KUEUE}): the kueue vocabulary is not read",
        "s.yaml: skipped 1 LocalQueue object of API group kueue.x-k8s.io "
        f"({KUEUE}): the kueue vocabulary is not read",
    ]


@pytest.mark.parametrize(
    ("objects", "message"),
    [
        pytest.param(
            [
                {
                    "apiVersion": "gpufleet.io/v1alpha1",
                    "kind": "Queue",
                    "metadata": {"name": "team-a"},
                },
                cluster_queue("team-a"),
            ],
            "s.yaml: Queue team-a: defined twice: by Queue gpufleet.io/v1alpha1 team-a and by "
            f"ClusterQueue {KUEUE} team-a; keep one, or leave one vocabulary out",
            id="gpufleet-queue-and-cluster-queue",
        ),
        pytest.param(
            [
                {
                    "apiVersion": "scheduling.run.ai/v2",
                    "kind": "Queue",
                    "metadata": {"name": "team-ab"},
                },
                cluster_queue("team-a-cq", cohortName="team-ab"),
            ],
            "s.yaml: Queue team-ab: defined twice: by Queue scheduling.run.ai/v2 team-ab and by "
            f"cohort team-ab (spec.cohortName of ClusterQueue {KUEUE} team-a-cq); keep one, or "
            "leave one vocabulary out",
            id="kai-queue-and-cohort",
        ),
        pytest.param(
            [cluster_queue("org"), cohort("org")],
            f"s.yaml: Queue org: defined twice: by ClusterQueue {KUEUE} org and by Cohort "
            f"{KUEUE} org; keep one, or leave one vocabulary out",
            id="cluster-queue-and-cohort",
        ),
        pytest.param(
            [cluster_queue("cq"), cluster_queue("cq", api="kueue.x-k8s.io/v1beta1")],
            f"s.yaml: Queue cq: defined twice: by ClusterQueue {KUEUE} cq and by ClusterQueue "
            "kueue.x-k8s.io/v1beta1 cq; keep one, or leave one vocabulary out",
            id="two-versions-of-one-cluster-queue",
        ),
        pytest.param(
            [cohort("a", parentName="b"), cohort("b", parentName="c"), cohort("c", parentName="a")],
            "s.yaml: Cohort a: field 'spec.parentName': parent cohorts form a cycle: "
            "a -> b -> c -> a (each names the next as its parent)",
            id="parent-cohorts-in-a-cycle",
        ),
        pytest.param(
            [local_queue("q", "cq"), local_queue("q", "other")],
            "s.yaml: LocalQueue team-a/q: appears twice in the snapshot",
            id="one-local-queue-twice",
        ),
    ],
)
def test_objects_that_contradict_each_other_are_refused_naming_them(
    objects: list[dict[str, Any]], message: str
) -> None:
    with pytest.raises(InputError) as caught:
        read(*objects)
    assert str(caught.value) == message


def groups_of(**quota: Any) -> dict[str, Any]:
    return {
        "coveredResources": ["cpu"],
        "flavors": [{"name": "f", "resources": [{"name": "cpu", **quota}]}],
    }


@pytest.mark.parametrize(
    ("obj", "field", "expected"),
    [
        pytest.param(
            cluster_queue("cq", groups_of(nominalQuota=-1)),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "expected a non-negative quantity such as '500m', '4' or '80Gi', got -1",
            id="negative-nominal-quota",
        ),
        pytest.param(
            cluster_queue("cq", groups_of(nominalQuota="nine")),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "expected a non-negative quantity such as '500m', '4' or '80Gi', got 'nine'",
            id="nominal-quota-not-a-quantity",
        ),
        pytest.param(
            cluster_queue("cq", groups_of()),
            "spec.resourceGroups[0].flavors[0].resources[0].nominalQuota",
            "expected a quantity such as '500m', '4' or '80Gi', got nothing",
            id="nominal-quota-missing",
        ),
        pytest.param(
            cluster_queue("cq", groups_of(nominalQuota=1, borrowingLimit="-2"), cohortName="c"),
            "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
            "expected a non-negative quantity such as '500m', '4' or '80Gi', got '-2'",
            id="negative-borrowing-limit",
        ),
        pytest.param(
            cluster_queue("cq", groups_of(nominalQuota=1, borrowingLimit=1)),
            "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
            "expected no borrowingLimit in a ClusterQueue without a cohort (spec.cohortName), "
            "got 1",
            id="borrowing-without-a-cohort",
        ),
        pytest.param(
            cohort("root", groups_of(nominalQuota=1, borrowingLimit=1)),
            "spec.resourceGroups[0].flavors[0].resources[0].borrowingLimit",
            "expected no borrowingLimit in a Cohort without a parent (spec.parentName), got 1",
            id="borrowing-without-a-parent-cohort",
        ),
        pytest.param(
            cluster_queue("cq", group(flavor("a", cpu=1)), group(flavor("b", cpu=1))),
            "spec.resourceGroups[1].coveredResources[0]",
            "expected a resource of one group (spec.resourceGroups[0].coveredResources[0] has "
            "it), got 'cpu'",
            id="resource-in-two-groups",
        ),
        pytest.param(
            cluster_queue("cq", group(flavor("a", cpu=1)), group(flavor("a", memory=1))),
            "spec.resourceGroups[1].flavors[0].name",
            "expected a flavor of one group (spec.resourceGroups[0].flavors[0].name), got 'a'",
            id="flavor-in-two-groups",
        ),
        pytest.param(
            cluster_queue("cq", group(flavor("a", cpu=1, memory=1), flavor("b", memory=1, cpu=1))),
            "spec.resourceGroups[0].flavors[1].resources[0].name",
            "expected 'cpu' (coveredResources[0]), got 'memory'",
            id="flavor-resources-out-of-order",
        ),
        pytest.param(
            cluster_queue(
                "cq", {"coveredResources": ["cpu", "memory"], "flavors": [flavor("a", cpu=1)]}
            ),
            "spec.resourceGroups[0].flavors[0].resources",
            "expected a quota for each covered resource (cpu, memory), in that order",
            id="flavor-missing-a-covered-resource",
        ),
        pytest.param(
            cluster_queue("cq", {"coveredResources": "cpu", "flavors": [flavor("a", cpu=1)]}),
            "spec.resourceGroups[0].coveredResources",
            "expected a list of resource names, such as [cpu, nvidia.com/gpu], got 'cpu'",
            id="covered-resources-not-a-list",
        ),
        pytest.param(
            cluster_queue("cq", {"coveredResources": ["cpu"], "flavors": []}),
            "spec.resourceGroups[0].flavors",
            "expected a list of flavors (name, resources), got []",
            id="no-flavors",
        ),
        pytest.param(
            cluster_queue("cq", {"coveredResources": ["cpu"], "flavors": ["f"]}),
            "spec.resourceGroups[0].flavors[0]",
            "expected a flavor (name, resources), got 'f'",
            id="flavor-not-a-mapping",
        ),
        pytest.param(
            {**cluster_queue("cq"), "spec": {"resourceGroups": {"cpu": 1}}},
            "spec.resourceGroups",
            "expected a list, got {cpu: 1}",
            id="resource-groups-not-a-list",
        ),
        pytest.param(
            cluster_queue("cq", fairSharing={"weight": "-1"}),
            "spec.fairSharing.weight",
            "expected a non-negative quantity such as '500m', '4' or '80Gi', got '-1'",
            id="negative-weight",
        ),
        pytest.param(
            cluster_queue("cq", fairSharing={"weight": "heavy"}),
            "spec.fairSharing.weight",
            "expected a non-negative quantity such as '500m', '4' or '80Gi', got 'heavy'",
            id="weight-not-a-quantity",
        ),
        pytest.param(
            cluster_queue("cq", cohortName=["team-ab"]),
            "spec.cohortName",
            "expected a string, got ['team-ab']",
            id="cohort-not-a-name",
        ),
        pytest.param(
            cluster_queue("cq", cohort="team-ab"),
            "spec.cohort",
            f"expected spec.cohortName (the cohort's field in {KUEUE}), got 'team-ab'",
            id="v1beta1-field-in-v1beta2",
        ),
        pytest.param(
            {**local_queue("q", "cq"), "spec": {}},
            "spec.clusterQueue",
            "expected the name of a ClusterQueue, got nothing",
            id="local-queue-without-a-cluster-queue",
        ),
    ],
)
def test_bad_input_names_object_field_and_expectation(
    obj: dict[str, Any], field: str, expected: str
) -> None:
    with pytest.raises(InputError) as caught:
        read(obj)
    assert caught.value.field == field
    assert expected in str(caught.value)
    assert f"s.yaml: {obj['kind']} " in caught.value.source
    assert "\n" not in str(caught.value)
