"""Autoscaling live, against the emulator's ProvisioningRequest controller over real HTTP
(``kube/process/provision.py``, ``tests/apiserver/provisioner.py``): a gang that fits
nowhere gets one ProvisioningRequest for all its nodes, is bound only once they are all
there, on them, and no other pod is placed on them meanwhile; a failed request leaves
nothing held; running pods whose eviction would lose all their work carry the scale-down
protection, and lose it when they finish."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpufleet.kube.process.live import LiveScheduler
from gpufleet.kube.process.options import ServeOptions
from gpufleet.kube.write import provisioning as pr
from gpufleet.load.snapshot import load_snapshot
from gpufleet.model.supply import PROVISIONED_FOR_LABEL
from tests.apiserver.provisioner import Provisioner
from tests.apiserver.server import Emulator
from tests.kube.process.test_serve import add_group, add_node, bound, events, pods, serve

JSON = dict[str, Any]
POOLS = Path(__file__).with_name("autoscale-pools.yaml")
OPTIONS = ServeOptions(
    period_s=0.2, batch_s=0.01, offers=load_snapshot(POOLS, need_nodes=False).offers
)


def add(
    emulator: Emulator,
    name: str,
    gpus: int,
    *,
    group: str = "",
    on: str = "",
    index: str = "",
    annotations: dict[str, str] | None = None,
    started: datetime | None = None,
) -> None:
    meta: JSON = {"name": name, "annotations": dict(annotations or {})}
    if group:
        meta["labels"] = {"scheduling.x-k8s.io/pod-group": group}
    requests = {"cpu": "4", "memory": "32Gi", "nvidia.com/gpu": str(gpus)}
    spec: JSON = {
        "schedulerName": "gpufleet",
        "containers": [
            {
                "name": "c",
                "image": "x",
                "resources": {"requests": requests, "limits": {"nvidia.com/gpu": str(gpus)}},
            }
        ],
    }
    body: JSON = {"metadata": meta, "spec": spec}
    if on:
        meta["annotations"]["gpufleet.io/gpu-index"] = index
        spec["nodeName"] = on
        start = (started or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        body["status"] = {"phase": "Running", "startTime": start}
    emulator.store.create(
        emulator.store.resource("", "v1", "pods"), "default", body, keep_status=bool(on)
    )


def listed(emulator: Emulator, group: str, version: str, plural: str) -> list[JSON]:
    objects, _ = emulator.store.list(emulator.store.resource(group, version, plural))
    return objects


def held_nodes(emulator: Emulator) -> dict[str, str]:
    return {
        n["metadata"]["name"]: n["metadata"]["labels"][PROVISIONED_FOR_LABEL]
        for n in listed(emulator, "", "v1", "nodes")
        if PROVISIONED_FOR_LABEL in (n["metadata"].get("labels") or {})
    }


def marks(emulator: Emulator, name: str) -> dict[str, str]:
    return pods(emulator)[name]["metadata"].get("annotations") or {}


@pytest.fixture
def provisioner(emulator: Emulator) -> Iterator[Provisioner]:
    made = Provisioner(emulator.store, delay_s=0.3, step_s=0.4).start()
    try:
        yield made
    finally:
        made.stop()


def test_a_gang_that_fits_nowhere_gets_one_request_and_starts_whole_on_its_nodes(
    emulator: Emulator, provisioner: Provisioner
) -> None:
    add_node(emulator, "system", gpus=0)
    add_group(emulator, "train", 4)
    for i in range(4):
        add(emulator, f"train-{i}", 8, group="train")
    gang = {f"train-{i}" for i in range(4)}
    seen: dict[str, JSON] = {}

    def started(live: LiveScheduler) -> bool:
        for template in listed(emulator, "", "v1", "podtemplates"):
            seen.setdefault(template["metadata"]["name"], template)
        if provisioner.added and "small" not in pods(emulator):
            add(emulator, "small", 1)  # comes while the gang's nodes do: must not take one
        placed = bound(emulator)
        if gang & placed.keys():
            assert len(provisioner.added) >= 4, "bound before its whole capacity was there"
        return (
            gang <= placed.keys()
            and "small" in placed
            and not listed(emulator, "autoscaling.x-k8s.io", "v1", "provisioningrequests")
            and not held_nodes(emulator)
            and all(pr.SAFE_TO_EVICT in marks(emulator, p) for p in gang)
        )

    live = serve(emulator, started, OPTIONS, timeout=20)
    assert live.stats.cycle_errors == 0
    placed = bound(emulator)
    mine = {placed[p] for p in gang}
    # One pod per node that came; nodes of one type serve the request asked first, whichever
    # request they came for, as an autoscaler's nodes are not named for a request either.
    assert len(mine) == 4
    assert mine <= set(provisioner.added)
    assert placed["small"] in provisioner.added
    assert placed["small"] not in mine  # held for the gang while it waited
    assert sorted(seen) == ["gpufleet-small-1", "gpufleet-train-1"]  # one request per job
    template = seen["gpufleet-train-1"]["template"]["spec"]
    assert template["nodeSelector"]["node.kubernetes.io/instance-type"] == "p100x8"
    assert "nodeName" not in template
    notes = [e["note"] for e in events(emulator) if e["reason"] == "TriggeredScaleUp"]
    assert any("4 node(s) of pool p100x8 for 4 pod(s)" in n for n in notes), notes
    # the gang runs without a checkpoint: it must not be disrupted, and says so
    assert marks(emulator, "train-0")[pr.SAFE_TO_EVICT] == "false"
    assert marks(emulator, "train-0")[pr.DO_NOT_DISRUPT] == "true"
    assert marks(emulator, "train-0")[pr.CONSUME_ANNOTATION] == "gpufleet-train-1"


def test_a_failed_request_leaves_nothing_held_even_when_the_first_release_is_refused(
    emulator: Emulator,
) -> None:
    failing = Provisioner(emulator.store, delay_s=0.3, step_s=0.2, fail=True, partial=2)
    failing.start()
    add_node(emulator, "system", gpus=0)
    add_group(emulator, "train", 4)
    for i in range(4):
        add(emulator, f"train-{i}", 8, group="train")
    refused: list[dict[str, str]] = []

    def released(live: LiveScheduler) -> bool:
        assert live.autoscaler is not None
        if not refused and len(held_nodes(emulator)) == 2:
            # both nodes that came are held: the label's removal is refused for a while
            emulator.faults.fail(None, code=500, method="PATCH", path="/api/v1/nodes/")
            refused.append({})
        if refused and len(refused) == 1 and "default/train" in live.autoscaler.backoff:
            refused.append(held_nodes(emulator))  # failed, its release refused: still held
            emulator.faults.clear()
        return len(refused) == 2 and not held_nodes(emulator)

    try:
        live = serve(emulator, released, OPTIONS, timeout=20)
    finally:
        failing.stop()
    assert failing.answered == [("gpufleet-train-1", "Failed")]
    assert len(refused[1]) == 2  # kept, and let go once the server took it
    assert live.autoscaler is not None
    assert live.autoscaler.releases == {}
    assert bound(emulator) == {}
    assert not listed(emulator, "autoscaling.x-k8s.io", "v1", "provisioningrequests")
    assert not listed(emulator, "", "v1", "podtemplates")
    # still the request's while the job backs off, so no one scales up for its pods alone
    assert marks(emulator, "train-0")[pr.CONSUME_ANNOTATION] == "gpufleet-train-1"
    notes = [e["note"] for e in events(emulator) if e["reason"] == "FailedScaleUp"]
    assert len(notes) == 1
    assert "asking again in 60s" in notes[0]
    assert live.metrics.provisioning.labels("p100x8", "failed")._value.get() == 1


def test_a_booking_that_expires_after_provisioned_does_not_fail_the_request(
    emulator: Emulator,
) -> None:
    expiring = Provisioner(emulator.store, delay_s=0.3, step_s=0.3, expire=True).start()
    add_node(emulator, "system", gpus=0)
    add_group(emulator, "train", 2)
    for i in range(2):
        add(emulator, f"train-{i}", 8, group="train")
    try:
        live = serve(emulator, lambda _: {"train-0", "train-1"} <= bound(emulator).keys(), OPTIONS)
    finally:
        expiring.stop()
    assert live.autoscaler is not None
    assert live.autoscaler.backoff == {}
    assert set(bound(emulator).values()) == set(expiring.added)


def test_a_new_leader_takes_over_its_predecessors_requests_and_holds(emulator: Emulator) -> None:
    add_node(emulator, "system", gpus=0)
    add_group(emulator, "train", 2)
    for i in range(2):
        add(emulator, f"train-{i}", 8, group="train")
    store = emulator.store
    requests = store.resource("autoscaling.x-k8s.io", "v1", "provisioningrequests")
    body = pr.request_body("gpufleet-train-2", "default/train", 2, "p100x8", 2)
    store.create(requests, "default", body)  # its predecessor's second attempt
    store.create(
        requests, "default", pr.request_body("gpufleet-train-1", "default/train", 2, "p100x8", 2)
    )
    nodes = store.resource("", "v1", "nodes")
    allocatable = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8", "pods": "110"}
    for name, holder in (("came-0", "default.train"), ("came-1", "default.train"), ("odd", "x.y")):
        labels = {
            "nvidia.com/gpu.product": "P100",
            "node.kubernetes.io/instance-type": "p100x8",
            PROVISIONED_FOR_LABEL: holder,
        }
        store.create(
            nodes,
            "",
            {"metadata": {"name": name, "labels": labels}, "status": {"allocatable": allocatable}},
        )

    def settled(_live: LiveScheduler) -> bool:
        return (
            {"train-0", "train-1"} <= bound(emulator).keys()
            and not listed(emulator, "autoscaling.x-k8s.io", "v1", "provisioningrequests")
            and not held_nodes(emulator)
        )

    serve(emulator, settled, OPTIONS)
    assert {bound(emulator)[f"train-{i}"] for i in range(2)} == {"came-0", "came-1"}
    assert not listed(emulator, "", "v1", "podtemplates")


def test_pods_that_would_lose_all_their_work_are_protected_until_they_finish(
    emulator: Emulator,
) -> None:
    add_node(emulator, "n0", gpus=8)
    old = datetime.now(UTC) - timedelta(hours=1)
    add_group(emulator, "plain", 2)
    for i in range(2):
        add(emulator, f"plain-{i}", 1, group="plain", on="n0", index=str(i), started=old)
    saved = {
        "gpufleet.io/checkpoint-interval": "10m",
        "gpufleet.io/last-checkpoint": (datetime.now(UTC) - timedelta(minutes=1)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        ),
    }
    add(emulator, "saver", 1, on="n0", index="2", annotations=saved, started=old)
    fresh = {"gpufleet.io/checkpoint-interval": "30m"}
    add(emulator, "fresh", 1, on="n0", index="3", annotations=fresh)  # nothing saved yet
    users = {pr.SAFE_TO_EVICT: "true"}
    add(emulator, "users", 1, on="n0", index="4", annotations=users, started=old)
    protected = ["plain-0", "plain-1", "fresh"]

    resource = emulator.store.resource("", "v1", "pods")
    seen: list[dict[str, dict[str, str]]] = []
    counted: list[float] = []

    def finish(current: JSON) -> JSON:
        return {**current, "status": {**current["status"], "phase": "Succeeded"}}

    def marked_then_finished(live: LiveScheduler) -> bool:
        if not seen:
            if not all(pr.PROTECTED_ANNOTATION in marks(emulator, p) for p in protected):
                return False
            if live.metrics.protected_pods._value.get() != len(protected):
                return False  # set once the cycle's writes are done
            seen.append({p: marks(emulator, p) for p in pods(emulator)})
            counted.append(live.metrics.protected_pods._value.get())
            for name in ("plain-0", "plain-1"):  # the gang finishes
                emulator.store.mutate(resource, "default", name, finish, subresource="status")
        return not any(
            k in marks(emulator, p)
            for p in ("plain-0", "plain-1")
            for k in (pr.SAFE_TO_EVICT, pr.DO_NOT_DISRUPT, pr.PROTECTED_ANNOTATION)
        )

    serve(emulator, marked_then_finished, OPTIONS)
    [before] = seen
    assert before["plain-0"][pr.SAFE_TO_EVICT] == "false"
    assert before["fresh"][pr.DO_NOT_DISRUPT] == "true"
    assert pr.SAFE_TO_EVICT not in before["saver"]  # may move: its work is saved
    assert before["users"] == {**users, "gpufleet.io/gpu-index": "4"}  # the user's own say
    assert counted == [3]
    assert pr.PROTECTED_ANNOTATION in marks(emulator, "fresh")  # still running


def test_a_new_leader_takes_off_the_protection_its_predecessor_put_on(
    emulator: Emulator,
) -> None:
    add_node(emulator, "n0", gpus=8)
    left = {**pr.PROTECTION, pr.PROTECTED_ANNOTATION: ",".join(sorted(pr.PROTECTION))}
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    saved = {"gpufleet.io/checkpoint-interval": "10m", "gpufleet.io/last-checkpoint": now}
    old = datetime.now(UTC) - timedelta(hours=1)
    add(emulator, "saved", 1, on="n0", index="0", annotations={**left, **saved}, started=old)

    def unmarked(_live: LiveScheduler) -> bool:
        return pr.PROTECTED_ANNOTATION not in marks(emulator, "saved")

    serve(emulator, unmarked, OPTIONS)
    assert marks(emulator, "saved") == {**saved, "gpufleet.io/gpu-index": "0"}
