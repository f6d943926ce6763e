"""The emulator against the API conventions it claims, over real HTTP."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx
import pytest
from tools.crds.kinds import definitions

from tests.apiserver.fixtures import watch_events
from tests.apiserver.server import Emulator

JSON = dict[str, Any]
PODS = "/api/v1/namespaces/default/pods"
LEASES = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
PDBS = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": {"containers": [{"name": "c", "image": "x"}], **spec},
    }


def create(
    client: httpx.Client, name: str, labels: dict[str, str] | None = None, **spec: Any
) -> JSON:
    response = client.post(PODS, json=pod(name, labels, **spec))
    assert response.status_code == 201, response.text
    body: JSON = response.json()
    return body


def running(emulator: Emulator, name: str, labels: dict[str, str]) -> None:
    pods = emulator.store.resource("", "v1", "pods")
    obj = {**pod(name, labels, nodeName="n1"), "status": {"phase": "Running"}}
    emulator.store.create(pods, "default", obj, keep_status=True)


# -- storage, list, get, create ----------------------------------------------------------------


def test_create_sets_server_fields_and_one_counter(client: httpx.Client) -> None:
    a, b = create(client, "a"), create(client, "b")
    assert int(b["metadata"]["resourceVersion"]) == int(a["metadata"]["resourceVersion"]) + 1
    assert a["metadata"]["uid"] != b["metadata"]["uid"]
    assert a["metadata"]["creationTimestamp"].endswith("Z")
    assert a["status"] == {"phase": "Pending"}  # a created pod's status is the server's
    listed = client.get(PODS).json()
    assert listed["kind"] == "PodList"
    assert listed["metadata"]["resourceVersion"] == b["metadata"]["resourceVersion"]
    assert [p["metadata"]["name"] for p in listed["items"]] == ["a", "b"]


def test_uids_are_seeded() -> None:
    def uids() -> list[str]:
        server = Emulator(seed=3)
        pods = server.store.resource("", "v1", "pods")
        return [server.store.create(pods, "default", pod(n))["metadata"]["uid"] for n in "xy"]

    assert uids() == uids()


@pytest.mark.parametrize(
    ("path", "code", "reason", "message"),
    [
        (PODS, 409, "AlreadyExists", 'pods "a" already exists'),
        ("/api/v1/namespaces/nowhere/pods", 404, "NotFound", 'namespaces "nowhere" not found'),
    ],
    ids=["name-taken", "no-namespace"],
)
def test_create_refusals(
    client: httpx.Client, path: str, code: int, reason: str, message: str
) -> None:
    create(client, "a")
    response = client.post(path, json=pod("a"))
    assert response.status_code == code
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", reason, code)
    assert status["message"] == message


def test_get_missing_is_not_found(client: httpx.Client) -> None:
    response = client.get(f"{PODS}/ghost")
    assert response.status_code == 404
    assert response.json()["message"] == 'pods "ghost" not found'


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ({"labelSelector": "app=web"}, ["a", "b"]),
        ({"labelSelector": "app!=web"}, ["c", "d"]),
        ({"labelSelector": "tier in (gpu,cpu)"}, ["a", "c"]),
        ({"labelSelector": "tier notin (gpu)"}, ["b", "c", "d"]),
        ({"labelSelector": "tier"}, ["a", "c"]),
        ({"labelSelector": "!tier"}, ["b", "d"]),
        ({"labelSelector": "app=web,tier=gpu"}, ["a"]),
        ({"fieldSelector": "spec.nodeName=n1"}, ["b"]),
        ({"fieldSelector": "spec.nodeName="}, ["a", "c", "d"]),
        ({"fieldSelector": "spec.schedulerName==gpufleet"}, ["d"]),
        ({"fieldSelector": "metadata.name!=a,status.phase=Pending"}, ["b", "c", "d"]),
    ],
    ids=lambda v: str(v) if isinstance(v, dict) else "",
)
def test_selectors(client: httpx.Client, selector: dict[str, str], expected: list[str]) -> None:
    create(client, "a", {"app": "web", "tier": "gpu"})
    create(client, "b", {"app": "web"}, nodeName="n1")
    create(client, "c", {"tier": "cpu"})
    create(client, "d", {}, schedulerName="gpufleet")
    items = client.get("/api/v1/pods", params=selector).json()["items"]
    assert [p["metadata"]["name"] for p in items] == expected


def test_unsupported_field_is_bad_request(client: httpx.Client) -> None:
    response = client.get(PODS, params={"fieldSelector": "spec.priority=3"})
    assert response.status_code == 400
    assert response.json()["message"] == "field label not supported: spec.priority"


CORE_EVENTS = "/api/v1/namespaces/default/events"
NEW_EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


@pytest.mark.parametrize(
    ("path", "selector", "expected"),
    [
        (CORE_EVENTS, "involvedObject.name=web", ["e1", "e2"]),
        (CORE_EVENTS, "involvedObject.name=web,involvedObject.uid=u1", ["e1"]),
        (
            CORE_EVENTS,
            "involvedObject.name=web,involvedObject.namespace=default,involvedObject.kind=Pod",
            ["e1", "e2"],
        ),
        (CORE_EVENTS, "reportingComponent=gpufleet,type!=Normal", ["e2"]),
        (CORE_EVENTS, "source=kubelet", ["e3"]),
        (NEW_EVENTS, "regarding.name=web,regarding.uid=u2", ["e2"]),
        (NEW_EVENTS, "reportingController=gpufleet,reason=Scheduled", ["e1"]),
        (NEW_EVENTS, "source=kubelet", ["e3"]),
    ],
    ids=lambda v: (
        {CORE_EVENTS: "v1", NEW_EVENTS: "events.k8s.io"}.get(v, v) if isinstance(v, str) else ""
    ),
)
def test_event_field_selectors_by_each_versions_names(
    client: httpx.Client, path: str, selector: str, expected: list[str]
) -> None:
    """One stored collection, two spellings of its fields: ``kubectl describe`` selects v1
    Events on ``involvedObject.*``; events.k8s.io/v1 names the same fields ``regarding.*``."""
    pod = {"kind": "Pod", "namespace": "default", "name": "web", "apiVersion": "v1"}
    for name, uid, reason, kind, by in (
        ("e1", "u1", "Scheduled", "Normal", "gpufleet"),
        ("e2", "u2", "FailedScheduling", "Warning", "gpufleet"),
    ):
        event = {
            "metadata": {"name": name},
            "regarding": {**pod, "uid": uid},
            "reason": reason,
            "type": kind,
            "reportingController": by,
            "reportingInstance": f"{by}-0",
            "action": "Scheduling",
        }
        assert client.post(NEW_EVENTS, json=event).status_code == 201
    pulled = {
        "metadata": {"name": "e3"},
        "involvedObject": {**pod, "name": "db", "uid": "u3"},
        "reason": "Pulled",
        "type": "Normal",
        "source": {"component": "kubelet"},
    }
    assert client.post(CORE_EVENTS, json=pulled).status_code == 201
    items = client.get(path, params={"fieldSelector": selector}).json()["items"]
    assert [e["metadata"]["name"] for e in items] == expected


@pytest.mark.parametrize(
    ("path", "label"),
    [(CORE_EVENTS, "regarding.name"), (NEW_EVENTS, "involvedObject.name")],
    ids=["v1-regarding", "events.k8s.io-involvedObject"],
)
def test_an_event_field_by_the_other_versions_name_is_bad_request(
    client: httpx.Client, path: str, label: str
) -> None:
    response = client.get(path, params={"fieldSelector": f"{label}=web"})
    assert response.status_code == 400
    assert response.json()["message"] == f"field label not supported: {label}"


def test_list_pages_a_consistent_snapshot(client: httpx.Client) -> None:
    for name in "abc":
        create(client, name)
    first = client.get(PODS, params={"limit": "2"}).json()
    create(client, "aa")  # after the snapshot: not in its pages
    second = client.get(PODS, params={"limit": "2", "continue": first["metadata"]["continue"]})
    names = [p["metadata"]["name"] for p in first["items"] + second.json()["items"]]
    assert names == ["a", "b", "c"]
    assert first["metadata"]["remainingItemCount"] == 1


def test_exact_list_reads_the_past_and_410_outside_the_window() -> None:
    server = Emulator(window=10).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            first = create(client, "a")["metadata"]["resourceVersion"]
            create(client, "b")
            exact = {"resourceVersion": first, "resourceVersionMatch": "Exact"}
            assert [
                p["metadata"]["name"] for p in client.get(PODS, params=exact).json()["items"]
            ] == ["a"]
            for i in range(12):
                create(client, f"p{i}")
            response = client.get(PODS, params=exact)
            assert response.status_code == 410
            assert response.json()["reason"] == "Gone"
            ahead = client.get(PODS, params={"resourceVersion": "999"})
            assert ahead.status_code == 504
    finally:
        server.stop()


def test_discovery_serves_each_crds_short_names_and_categories(client: httpx.Client) -> None:
    """As apiserver serves a CRD's ``spec.names``: what ``kubectl get gfq`` and ``kubectl get
    gpufleet`` resolve through. Only kinds in ``all`` (pods here) are listed in it."""
    served = 0
    for crd in definitions():
        spec = crd["spec"]
        for version in spec["versions"]:
            found = client.get(f"/apis/{spec['group']}/{version['name']}")
            entries = [e for e in found.json()["resources"] if e["name"] == spec["names"]["plural"]]
            if not entries:
                continue  # a kind the emulator does not serve (NodePool: no API reads it)
            served += 1
            assert entries[0]["shortNames"] == spec["names"]["shortNames"]
            assert entries[0].get("categories", []) == spec["names"].get("categories", [])
    assert served >= 2
    core = client.get("/api/v1").json()["resources"]
    assert {e["name"] for e in core if "all" in e.get("categories", [])} == {"pods"}


# -- watch -----------------------------------------------------------------------------------


def test_watch_from_a_version_sends_later_changes(client: httpx.Client) -> None:
    version = create(client, "a")["metadata"]["resourceVersion"]
    create(client, "b")
    client.delete(f"{PODS}/a")
    events = watch_events(client, PODS, resourceVersion=version, timeoutSeconds="1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "b"),
        ("DELETED", "a"),
    ]
    assert events[0]["object"]["kind"] == "Pod"


def test_watch_without_version_starts_with_the_state(
    client: httpx.Client, emulator: Emulator
) -> None:
    create(client, "a")

    def later() -> None:
        time.sleep(0.3)
        pods = emulator.store.resource("", "v1", "pods")
        emulator.store.create(pods, "default", pod("b"))

    threading.Thread(target=later).start()
    events = watch_events(client, PODS, timeoutSeconds="1")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [
        ("ADDED", "a"),
        ("ADDED", "b"),
    ]


def test_watch_selector_turns_unmatching_into_deleted(client: httpx.Client) -> None:
    version = create(client, "a", {"app": "web"})["metadata"]["resourceVersion"]
    client.patch(f"{PODS}/a", json={"metadata": {"labels": {"app": "db"}}}, headers=MERGE)
    events = watch_events(
        client, PODS, resourceVersion=version, labelSelector="app=web", timeoutSeconds="1"
    )
    assert [e["type"] for e in events] == ["DELETED"]


def test_watch_outside_the_window_gets_410() -> None:
    server = Emulator(window=5).start()
    try:
        with httpx.Client(base_url=server.url) as client:
            for i in range(8):
                create(client, f"p{i}")
            events = watch_events(client, PODS, resourceVersion="1", timeoutSeconds="5")
    finally:
        server.stop()
    assert len(events) == 1
    status = events[0]["object"]
    assert (events[0]["type"], status["code"], status["reason"]) == ("ERROR", 410, "Expired")
    assert status["message"].startswith("too old resource version: 1")


def test_bookmarks_carry_only_the_version(client: httpx.Client) -> None:
    version = create(client, "a")["metadata"]["resourceVersion"]
    events = watch_events(
        client, PODS, resourceVersion=version, allowWatchBookmarks="true", timeoutSeconds="1"
    )
    bookmarks = [e["object"] for e in events if e["type"] == "BOOKMARK"]
    assert len(bookmarks) >= 2
    assert bookmarks[0] == {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": version},
    }


def test_streaming_list_ends_initial_events_with_a_bookmark(client: httpx.Client) -> None:
    create(client, "a")
    events = watch_events(
        client,
        PODS,
        sendInitialEvents="true",
        allowWatchBookmarks="true",
        resourceVersionMatch="NotOlderThan",
        timeoutSeconds="0.1",
    )
    assert events[0]["type"] == "ADDED"
    assert events[1]["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


# -- binding, eviction, status ---------------------------------------------------------------


def binding(name: str, node: str, uid: str | None = None) -> JSON:
    meta: JSON = {"name": name, **({"uid": uid} if uid else {})}
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": meta,
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }


def test_binding(client: httpx.Client, emulator: Emulator) -> None:
    uid = create(client, "a")["metadata"]["uid"]
    response = client.post(f"{PODS}/a/binding", json=binding("a", "n1", uid))
    assert response.status_code == 201
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    bound = client.get(f"{PODS}/a").json()
    assert bound["spec"]["nodeName"] == "n1"
    assert bound["status"]["conditions"][0]["type"] == "PodScheduled"
    again = client.post(f"{PODS}/a/binding", json=binding("a", "n2"))
    assert again.status_code == 409
    assert again.json()["message"] == (
        'Operation cannot be fulfilled on pods/binding "a": pod a is already assigned to node "n1"'
    )
    assert [w.verb for w in emulator.store.writes if w.name == "a"] == ["create", "bind"]


def test_binding_with_another_uid_is_a_conflict(client: httpx.Client) -> None:
    create(client, "a")
    response = client.post(f"{PODS}/a/binding", json=binding("a", "n1", "not-the-uid"))
    assert response.status_code == 409
    assert "Precondition failed: UID in precondition: not-the-uid" in response.json()["message"]
    assert "nodeName" not in client.get(f"{PODS}/a").json()["spec"]


def eviction(name: str) -> JSON:
    return {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}


def budget(**spec: Any) -> JSON:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}, **spec},
    }


def test_eviction_under_a_budget_is_429(client: httpx.Client, emulator: Emulator) -> None:
    running(emulator, "a", {"app": "web"})
    running(emulator, "b", {"app": "web"})
    assert client.post(PDBS, json=budget(minAvailable=2)).status_code == 201
    response = client.post(f"{PODS}/a/eviction", json=eviction("a"))
    assert response.status_code == 429
    status = response.json()
    assert (status["reason"], status["message"]) == (
        "TooManyRequests",
        "Cannot evict pod as it would violate the pod's disruption budget.",
    )
    assert status["details"]["causes"][0]["reason"] == "DisruptionBudget"
    assert client.get(f"{PODS}/a").status_code == 200


def test_eviction_within_a_budget_deletes(client: httpx.Client, emulator: Emulator) -> None:
    running(emulator, "a", {"app": "web"})
    running(emulator, "b", {"app": "web"})
    client.post(PDBS, json=budget(minAvailable=1))
    response = client.post(f"{PODS}/a/eviction", json=eviction("a"))
    assert (response.status_code, response.json()["status"]) == (201, "Success")
    assert client.get(f"{PODS}/a").status_code == 404
    assert client.post(f"{PODS}/b/eviction", json=eviction("b")).status_code == 429


def test_eviction_with_max_unavailable(client: httpx.Client, emulator: Emulator) -> None:
    for name in "abc":
        running(emulator, name, {"app": "web"})
    create(client, "pending", {"app": "web"})  # counted, not healthy, and always evictable
    client.post(PDBS, json=budget(maxUnavailable="25%"))  # of 4 pods: 1, and 1 is down
    assert client.post(f"{PODS}/a/eviction", json=eviction("a")).status_code == 429
    client.patch(f"{PDBS}/b", json={"spec": {"maxUnavailable": "26%"}}, headers=MERGE)  # 2
    assert client.post(f"{PODS}/a/eviction", json=eviction("a")).status_code == 201
    assert client.post(f"{PODS}/pending/eviction", json=eviction("pending")).status_code == 201


def test_eviction_spends_the_budgets_status(client: httpx.Client) -> None:
    create(client, "a", {"app": "web"})
    client.put(
        f"{PODS}/a/status", json={**client.get(f"{PODS}/a").json(), "status": {"phase": "Running"}}
    )
    client.post(PDBS, json=budget(minAvailable=0))
    client.patch(f"{PDBS}/b/status", json={"status": {"disruptionsAllowed": 0}}, headers=MERGE)
    assert client.post(f"{PODS}/a/eviction", json=eviction("a")).status_code == 429


def test_status_subresource_isolation(client: httpx.Client) -> None:
    created = create(client, "a")
    changed = {
        **created,
        "spec": {**created["spec"], "priority": 5},
        "status": {"phase": "Running"},
    }
    main = client.put(f"{PODS}/a", json=changed).json()
    assert (main["spec"]["priority"], main["status"]["phase"]) == (5, "Pending")
    status = client.put(
        f"{PODS}/a/status", json={**changed, "metadata": main["metadata"], "spec": {}}
    ).json()
    assert (status["spec"]["priority"], status["status"]["phase"]) == (5, "Running")


def test_resourceclaim_status(client: httpx.Client) -> None:
    path = "/apis/resource.k8s.io/v1/namespaces/default/resourceclaims"
    claim = {
        "metadata": {"name": "c"},
        "spec": {"devices": {"requests": []}},
        "status": {"allocation": {"devices": {"results": []}}},
    }
    assert "allocation" not in client.post(path, json=claim).json()["status"]
    allocated = client.patch(f"{path}/c/status", json={"status": claim["status"]}, headers=MERGE)
    assert allocated.json()["status"] == claim["status"]


# -- concurrency and patches -----------------------------------------------------------------


def test_stale_lease_update_is_a_conflict(client: httpx.Client) -> None:
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "gpufleet"},
        "spec": {"holderIdentity": "a"},
    }
    created = client.post(LEASES, json=lease).json()
    taken = {**created, "spec": {"holderIdentity": "b", "leaseDurationSeconds": 15}}
    assert client.put(f"{LEASES}/gpufleet", json=taken).status_code == 200
    stale = client.put(f"{LEASES}/gpufleet", json={**created, "spec": {"holderIdentity": "c"}})
    assert stale.status_code == 409
    assert stale.json()["message"] == (
        'Operation cannot be fulfilled on leases.coordination.k8s.io "gpufleet": the object has '
        "been modified; please apply your changes to the latest version and try again"
    )


def test_unchanged_update_writes_nothing(client: httpx.Client) -> None:
    created = create(client, "a")
    again = client.put(f"{PODS}/a", json=created).json()
    assert again["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    ("headers", "conditions"),
    [
        (
            STRATEGIC,
            [
                {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                {"type": "Ready", "status": "False"},
            ],
        ),
        (MERGE, [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]),
    ],
    ids=["strategic-merges-by-type", "merge-replaces"],
)
def test_patch_conditions(
    client: httpx.Client, headers: dict[str, str], conditions: list[JSON]
) -> None:
    create(client, "a")
    client.patch(
        f"{PODS}/a/status",
        headers=MERGE,
        json={
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "False"},
                    {"type": "Ready", "status": "False"},
                ]
            }
        },
    )
    patch = {
        "status": {
            "nominatedNodeName": "n1",
            "conditions": [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
        }
    }
    patched = client.patch(f"{PODS}/a/status", json=patch, headers=headers).json()
    assert patched["status"]["conditions"] == conditions
    assert patched["status"]["nominatedNodeName"] == "n1"


def test_json_patch_and_custom_resources(client: httpx.Client) -> None:
    create(client, "a")
    ops = [{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}]
    patched = client.patch(
        f"{PODS}/a", json=ops, headers={"Content-Type": "application/json-patch+json"}
    )
    assert patched.json()["metadata"]["annotations"] == {"k": "v"}
    queues = "/apis/gpufleet.io/v1alpha1/queues"
    client.post(
        queues,
        json={
            "apiVersion": "gpufleet.io/v1alpha1",
            "kind": "Queue",
            "metadata": {"name": "q"},
            "spec": {},
        },
    )
    refused = client.patch(f"{queues}/q", json={"spec": {"priority": 1}}, headers=STRATEGIC)
    assert refused.status_code == 415
    assert client.get(queues).json()["items"][0]["kind"] == "Queue"


def test_delete_preconditions_and_finalizers(client: httpx.Client) -> None:
    create(client, "a")
    wrong = client.request("DELETE", f"{PODS}/a", json={"preconditions": {"uid": "x"}})
    assert wrong.status_code == 409
    queues = "/apis/gpufleet.io/v1alpha1/queues"
    client.post(queues, json={"metadata": {"name": "q", "finalizers": ["gpufleet.io/x"]}})
    held = client.delete(f"{queues}/q")
    assert held.status_code == 202
    assert held.json()["metadata"]["deletionTimestamp"]
    client.patch(f"{queues}/q", json={"metadata": {"finalizers": None}}, headers=MERGE)
    assert client.get(f"{queues}/q").status_code == 404


def test_events_are_one_collection_in_two_versions(client: httpx.Client) -> None:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "regarding": {"kind": "Pod", "name": "a"},
        "note": "bound",
        "reason": "Scheduled",
        "type": "Normal",
        "reportingController": "gpufleet",
        "action": "Binding",
    }
    client.post("/apis/events.k8s.io/v1/namespaces/default/events", json=event)
    core = client.get("/api/v1/namespaces/default/events").json()["items"][0]
    assert (core["involvedObject"]["name"], core["message"]) == ("a", "bound")


# -- faults ----------------------------------------------------------------------------------


def test_fail_and_throttle(client: httpx.Client, emulator: Emulator) -> None:
    emulator.faults.fail(2, code=503, method="GET")
    emulator.faults.throttle(1, retry_after=3, method="POST")
    assert [client.get(PODS).status_code for _ in range(3)] == [503, 503, 200]
    throttled = client.post(PODS, json=pod("a"))
    assert (throttled.status_code, throttled.headers["Retry-After"]) == (429, "3")
    assert throttled.json()["reason"] == "TooManyRequests"
    assert client.post(PODS, json=pod("a")).status_code == 201
    assert emulator.faults.taken == {"fail": 2, "throttle": 1}


def test_control_endpoint(client: httpx.Client) -> None:
    client.post("/_emulator/faults", json={"fault": "fail", "n": 1, "code": 500, "path": "/pods$"})
    assert client.get(PODS).status_code == 500
    assert client.get(PODS).status_code == 200
    create(client, "a")
    writes = client.get("/_emulator/writes").json()
    assert writes[-1]["verb"] == "create"
    assert writes[-1]["name"] == "a"


def test_delay_and_freeze(client: httpx.Client, emulator: Emulator) -> None:
    emulator.faults.delay(0.3, 1)
    start = time.monotonic()
    client.get(PODS)
    assert time.monotonic() - start >= 0.3
    emulator.faults.freeze(0.3)
    start = time.monotonic()
    client.get(PODS)
    assert time.monotonic() - start >= 0.25


def test_drop_reply_applies_the_bind(client: httpx.Client) -> None:
    create(client, "a")
    client.post("/_emulator/faults", json={"fault": "drop_reply"})
    with pytest.raises(httpx.RemoteProtocolError):
        client.post(f"{PODS}/a/binding", json=binding("a", "n1"))
    assert client.get(f"{PODS}/a").json()["spec"]["nodeName"] == "n1"


def test_forced_410_and_dropped_watches(client: httpx.Client, emulator: Emulator) -> None:
    emulator.faults.expire_next_watch()
    (event,) = watch_events(client, PODS, resourceVersion="1", timeoutSeconds="5")
    assert (event["type"], event["object"]["code"]) == ("ERROR", 410)
    assert emulator.faults.taken["expire_watch"] == 1
    threading.Timer(0.3, emulator.faults.drop_watches).start()
    start = time.monotonic()
    with pytest.raises(httpx.RemoteProtocolError):
        watch_events(client, PODS, resourceVersion="1", timeoutSeconds="5")
    assert time.monotonic() - start < 4
