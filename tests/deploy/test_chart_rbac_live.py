"""The chart's RBAC, enforced: the live scheduler runs against the emulator as the chart's
ServiceAccount, with only what the rendered ClusterRole and Role grant (``tests/apiserver/
rbac.py``), through every path that writes — binds with GPU indexes, a bind whose reply is
lost and is read back, a bind retried, an event that becomes a series, a DRA claim's
allocation, a preemption, a PodGroup's and a Queue's status, a stale gang's mark on its
PodGroup, events, the Lease — and no
request is refused; every permission the chart grants is used. Without one rule, the
scheduler is refused, says so and goes on."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpufleet.kube.process import endpoints
from gpufleet.kube.process.certs import server_context
from gpufleet.kube.process.leader import LeaseConfig
from gpufleet.kube.process.live import LiveScheduler, Replica
from gpufleet.kube.process.options import ServeOptions
from gpufleet.kube.read.kinds import LIVE_VOCABULARIES
from gpufleet.load.objects.config import read_configuration
from gpufleet.plugins.registry import POLICIES
from tests.apiserver.rbac import Identity, expand, unused
from tests.apiserver.server import Emulator
from tests.deploy.chart import authorizer
from tests.deploy.conftest import NAMESPACE, Render
from tests.kube.process.test_dra_live import add_claim, add_claim_pod, claims, cluster, reserved_for
from tests.kube.process.test_serve import (
    add_group,
    add_node,
    add_pod,
    bound,
    events,
    pods,
    run_until,
)
from tests.kube.process.test_serve_placement import node
from tests.kube.process.test_serve_queues import add_pod as add_queued_pod
from tests.kube.process.test_serve_queues import add_queue, status
from tests.kube.process.test_serve_stale import add_bound, stale_since
from tests.kube.process.test_serve_volumes import mounting, storage

JSON = dict[str, Any]
TOKEN = "service-account-token"
SCRAPER = Identity.service_account("monitoring", "prometheus-k8s")
SCRAPER_TOKEN = "prometheus-token"
READER = "metrics.reader.subjects[0]"
WITH_SCRAPER = (
    f"{READER}.kind=ServiceAccount",
    f"{READER}.name=prometheus-k8s",
    f"{READER}.namespace=monitoring",
)
"""The chart's metrics-reader ClusterRole bound to a Prometheus' ServiceAccount."""
INTENTIONALLY_UNUSED: set[tuple[str, str, str, str]] = set()
"""Permissions the chart grants that no path of the scheduler exercises here: none."""


@contextmanager
def secured(objects: list[JSON]) -> Iterator[Emulator]:
    """An emulator that grants the ServiceAccount's token what ``objects`` bind to it."""
    rbac = authorizer(objects, TOKEN, {SCRAPER_TOKEN: SCRAPER})
    server = Emulator(seed=7, bookmark_interval=0.2, rbac=rbac).start()
    namespaces = server.store.resource("", "v1", "namespaces")
    server.store.create(namespaces, "", {"metadata": {"name": NAMESPACE}})
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def chart(render: Render) -> list[JSON]:
    return render(*WITH_SCRAPER)


@pytest.fixture
def emulator(chart: list[JSON]) -> Iterator[Emulator]:
    with secured(chart) as server:
        yield server


class Scraped:
    """A replica with its endpoints, served as ``gpufleet serve`` serves them, whose
    ``/metrics`` is scraped with the scraper's token once it runs."""

    def __init__(self, http: httpx.AsyncClient, replica: Replica) -> None:
        self.http, self.replica = http, replica
        self.scrapes: list[int] = []

    async def run(self, stop: asyncio.Event) -> None:
        tls = server_context(None, None, None, ["127.0.0.1"])
        serving = endpoints.Serving("127.0.0.1", 0, tls)
        async with endpoints.served(self.replica, self.http, serving) as (host, port):
            task = asyncio.create_task(self.replica.run(stop))
            async with httpx.AsyncClient(verify=False) as scraper:
                for token in (SCRAPER_TOKEN, TOKEN):  # the scheduler's own may not read it
                    headers = {"Authorization": f"Bearer {token}"}
                    reply = await scraper.get(f"https://{host}:{port}/metrics", headers=headers)
                    self.scrapes.append(reply.status_code)
            await task


def serve_as_the_chart(
    emulator: Emulator, done: Callable[[LiveScheduler], bool], timeout: float = 30.0
) -> LiveScheduler:
    """Run one replica, electing itself on the chart's Lease, with the ServiceAccount's token,
    until ``done`` holds of the scheduler it runs while it leads; its endpoints are scraped
    once, by the chart's metrics reader and by the scheduler's own account."""
    options = ServeOptions(period_s=0.2, batch_s=0.01)
    lease = LeaseConfig(NAMESPACE, "gpufleet", "replica-0", 2.0, 1.5, 0.1)
    made: list[Scraped] = []

    def make(http: httpx.AsyncClient) -> Scraped:
        made.append(Scraped(http, Replica(http, options, lease)))
        return made[-1]

    headers = {"Authorization": f"Bearer {TOKEN}"}
    live = run_until(
        emulator,
        make,
        lambda scraped: scraped.replica.live,
        lambda live: done(live) and len(made[0].scrapes) == 2,
        timeout=timeout,
        headers=headers,
    )
    assert made[0].scrapes == [200, 403]
    return live


def add_preemption(emulator: Emulator) -> None:
    """A node of 2 GPUs held by a low-priority pod, and a high-priority pod that needs them."""
    add_node(emulator, "victims", gpus=2)
    store = emulator.store
    classes = store.resource("scheduling.k8s.io", "v1", "priorityclasses")
    for name, value in (("low", -10), ("high", 50)):
        store.create(classes, "", {"metadata": {"name": name}, "value": value})
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    store.create(
        store.resource("", "v1", "pods"),
        "default",
        {
            "metadata": {"name": "low", "annotations": {"gpufleet.io/gpu-index": "0,1"}},
            "spec": {
                "schedulerName": "gpufleet",
                "nodeName": "victims",
                "priorityClassName": "low",
                "containers": [container],
            },
            "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"},
        },
        keep_status=True,
    )


def add_preemptor(emulator: Emulator) -> None:
    container = {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "2"}}}
    emulator.store.create(
        emulator.store.resource("", "v1", "pods"),
        "default",
        {
            "metadata": {"name": "high"},
            "spec": {
                "schedulerName": "gpufleet",
                "priorityClassName": "high",
                "containers": [container],
            },
        },
    )


def test_the_scheduler_needs_every_permission_of_the_chart_and_no_other(
    emulator: Emulator, chart: list[JSON]
) -> None:
    cluster(emulator)  # n0: 2 DRA devices, no GPUs
    add_claim(emulator, "c0")
    add_claim_pod(emulator, "claims", "c0")
    add_node(emulator, "gpus", gpus=4)
    add_pod(emulator, "lost-reply", 1)
    add_pod(emulator, "retried", 1)
    add_group(emulator, "gang", 2)
    for i in range(2):
        add_pod(emulator, f"gang-{i}", 1, group="gang")
    add_queue(emulator, "team-a", 4)
    add_queued_pod(emulator, "waits", 16, "team-a")  # fits nowhere: told why
    add_preemption(emulator)
    add_node(emulator, "half", gpus=2)  # gang "stale" runs 2 of its 3 pods; the third fits
    add_group(emulator, "stale", 3)  # nowhere: the gang is marked stale on its PodGroup
    for i in range(2):
        add_bound(emulator, f"stale-{i}", "stale", i, node="half")
    add_pod(emulator, "stale-2", 8, group="stale")
    for name, zone in (("a2", "a"), ("b1", "b")):  # volumes: one provisioned, one static
        node(emulator, name, zone, gpus=0)
    storage(emulator)
    mounting(emulator, "provisioned", "fast-data", gpus=0)
    mounting(emulator, "local", "local-data", gpus=0)
    emulator.faults.drop_reply(1, path="/pods/lost-reply/binding$")
    emulator.faults.fail(2, code=500, path="/pods/retried/binding$")
    # Its condition not taken, the pod is told again: the event's series is patched.
    emulator.faults.fail(1, code=500, method="PATCH", path="/pods/waits/status$")
    expected = {"claims", "lost-reply", "retried", "gang-0", "gang-1", "provisioned", "local"}

    def settled(live: LiveScheduler) -> bool:
        if expected <= set(bound(emulator)) and "high" not in pods(emulator):
            add_preemptor(emulator)
        return (
            bound(emulator).get("high") == "victims"
            and status(emulator, "team-a").get("pendingPods") == 1
            and live.stats.evicted == 1
            and stale_since(emulator, "stale") is not None
        )

    live = serve_as_the_chart(emulator, settled)
    assert emulator.rbac is not None
    assert emulator.rbac.denied == []
    assert live.stats.bind_failures == 2
    assert all(
        (pods(emulator)[p]["metadata"].get("annotations") or {}).get("gpufleet.io/gpu-index")
        for p in expected - {"claims", "provisioned", "local"} | {"high"}
    )
    assert bound(emulator)["local"] == "a2"
    assert reserved_for(claims(emulator)["c0"]) == {"claims"}
    assert any(e.get("series") for e in events(emulator))
    granted = {
        permission
        for o in chart
        if o["kind"] in {"ClusterRole", "Role"}
        for permission in expand(o)
    }
    assert unused(granted, emulator.rbac.used) == INTENTIONALLY_UNUSED


def test_without_the_binding_permission_the_pod_stays_pending_and_is_reported(
    chart: list[JSON], caplog: pytest.LogCaptureFixture
) -> None:
    crippled = [
        {**o, "rules": [without(rule, "pods/binding") for rule in o["rules"]]}
        if o["kind"] == "ClusterRole"
        else o
        for o in chart
    ]
    with secured(crippled) as emulator:
        add_node(emulator, "n0")
        add_pod(emulator, "p", 1)
        live = serve_as_the_chart(emulator, lambda live: live.stats.bind_failures >= 1)
        assert bound(emulator) == {}
        assert emulator.rbac is not None
        [(_, refused)] = emulator.rbac.denied
        assert (refused.verb, refused.resource, refused.name) == ("create", "pods/binding", "p")
        assert live.stats.cycle_errors == 0
        assert any('403: pods "p" is forbidden' in r.getMessage() for r in caplog.records), (
            caplog.text
        )


def test_a_cluster_role_without_the_serving_workloads_still_schedules(
    chart: list[JSON], caplog: pytest.LogCaptureFixture
) -> None:
    """Serving workloads only inform the forecast: with their list and watch refused (an
    older ClusterRole), the scheduler says so once per kind and binds all the same."""
    crippled = [
        {
            **o,
            "rules": [
                without(without(without(rule, "deployments"), "statefulsets"), "leaderworkersets")
                for rule in o["rules"]
            ],
        }
        if o["kind"] == "ClusterRole"
        else o
        for o in chart
    ]
    with secured(crippled) as emulator:
        add_node(emulator, "n0")
        add_pod(emulator, "p", 1)
        serve_as_the_chart(emulator, lambda _live: bound(emulator) == {"p": "n0"})
    said = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert {m.split(":")[0] for m in said} == {"Deployment", "StatefulSet", "LeaderWorkerSet"}


def without(rule: JSON, resource: str) -> JSON:
    if "resources" not in rule:
        return rule  # a non-resource URL's
    return {**rule, "resources": [r for r in rule["resources"] if r != resource]}


VOCABULARIES = ("kai", "volcano", "capacityscheduling")


def chart_settings(chart: list[JSON], tmp_path: Path) -> dict[str, Any]:
    """What ``gpufleet serve --config`` reads of the chart's ConfigMap."""
    [config_map] = [o for o in chart if o["kind"] == "ConfigMap"]
    path = tmp_path / "config.yaml"
    path.write_text(config_map["data"]["config.yaml"])
    return read_configuration(path, POLICIES, LIVE_VOCABULARIES)


def add_foreign(emulator: Emulator, group: str, version: str, plural: str, obj: JSON) -> None:
    namespace = obj["metadata"].get("namespace", "")
    emulator.store.create(emulator.store.resource(group, version, plural), namespace, obj)


def add_named_pod(
    emulator: Emulator,
    name: str,
    *,
    namespace: str = "default",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> None:
    limits = {"nvidia.com/gpu": "1"}
    emulator.store.create(
        emulator.store.resource("", "v1", "pods"),
        namespace,
        {
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {
                "schedulerName": "gpufleet",
                "containers": [{"name": "c", "image": "x", "resources": {"limits": limits}}],
            },
        },
    )


def namespaced_pods(emulator: Emulator, namespace: str) -> list[JSON]:
    listed, _ = emulator.store.list(emulator.store.resource("", "v1", "pods"), namespace)
    return listed


def test_the_chart_s_vocabularies_are_read_live_with_only_the_permissions_they_add(
    render: Render, tmp_path: Path
) -> None:
    chart = render("config.vocabularies={" + ",".join(VOCABULARIES) + "}")
    settings = chart_settings(chart, tmp_path)
    assert settings["vocabulary"] == list(VOCABULARIES)
    with secured(chart) as emulator:
        namespaces = emulator.store.resource("", "v1", "namespaces")
        emulator.store.create(namespaces, "", {"metadata": {"name": "team-eq"}})
        add_node(emulator, "n0", gpus=8)
        # KAI: a queue of at most 2 GPUs, three pods of one GPU in it.
        gpu = {"quota": 2, "limit": 2, "overQuotaWeight": 1}
        unlimited = {"quota": -1, "limit": -1, "overQuotaWeight": 1}
        add_foreign(emulator, "scheduling.run.ai", "v2", "queues", {
            "metadata": {"name": "kai-team"},
            "spec": {"resources": {"gpu": gpu, "cpu": unlimited, "memory": unlimited}},
        })  # fmt: skip
        for i in range(3):
            add_named_pod(emulator, f"kai-{i}", labels={"kai.scheduler/queue": "kai-team"})
        # Volcano: a gang of two that its PodGroup holds together.
        add_foreign(emulator, "scheduling.volcano.sh", "v1beta1", "podgroups", {
            "metadata": {"name": "vc-job", "namespace": "default"},
            "spec": {"minMember": 2},
        })  # fmt: skip
        for i in range(2):
            add_named_pod(
                emulator, f"vc-{i}", annotations={"scheduling.k8s.io/group-name": "vc-job"}
            )
        # scheduler-plugins: the ElasticQuota of namespace team-eq, at most 1 GPU.
        add_foreign(emulator, "scheduling.x-k8s.io", "v1alpha1", "elasticquotas", {
            "metadata": {"name": "quota", "namespace": "team-eq"},
            "spec": {"max": {"nvidia.com/gpu": 1}},
        })  # fmt: skip
        for i in range(2):
            add_named_pod(emulator, f"eq-{i}", namespace="team-eq")
        options = ServeOptions(
            period_s=0.2, batch_s=0.01, vocabularies=frozenset(settings["vocabulary"])
        )
        lease = LeaseConfig(NAMESPACE, "gpufleet", "replica-0", 2.0, 1.5, 0.1)

        def placed() -> dict[str, int]:
            listed = [p for ns in ("default", "team-eq") for p in namespaced_pods(emulator, ns)]
            counts: dict[str, int] = {}
            for pod in listed:
                if pod["spec"].get("nodeName"):
                    prefix = pod["metadata"]["name"].split("-")[0]
                    counts[prefix] = counts.get(prefix, 0) + 1
            return counts

        expected = {"kai": 2, "vc": 2, "eq": 1}  # a KAI queue's and an ElasticQuota's limits
        run_until(
            emulator,
            lambda http: Replica(http, options, lease),
            lambda replica: replica.live,
            lambda live: placed() == expected and live.stats.cycles >= 5,
            timeout=30.0,
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
        assert placed() == expected
        assert emulator.rbac is not None
        assert emulator.rbac.denied == []
        granted = {p for o in chart if o["kind"] == "ClusterRole" for p in expand(o)}
        foreign = {p for p in granted if p[0] in {"scheduling.run.ai", "scheduling.volcano.sh"}}
        foreign |= {p for p in granted if p[1] == "elasticquotas"}
        assert len(foreign) == 10
        assert unused(foreign, emulator.rbac.used) == set()


def test_the_default_chart_grants_no_other_scheduler_s_objects(chart: list[JSON]) -> None:
    granted = {p for o in chart if o["kind"] == "ClusterRole" for p in expand(o)}
    assert {p for p in granted if p[0] in {"scheduling.run.ai", "scheduling.volcano.sh"}} == set()
    assert {p for p in granted if p[1] == "elasticquotas"} == set()
