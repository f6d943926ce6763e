"""A claim's write before its pod's bind (``kube/write/claims.py``), for a claim that was deleted
and made again under its name since the cycle read it: another claim, whose status the
live scheduler must not fill with the first one's devices."""

from __future__ import annotations

from typing import Any

from gpufleet.kube.read.objects import ObjectStore
from gpufleet.kube.write.bind import PodRef
from gpufleet.kube.write.claims import ClaimWrite, reserved_status
from gpufleet.model.devices import DeviceResult
from gpufleet.scheduler.state.changes import ClaimObject
from tests.kube.process.test_dra_live import claim_spec

POD = PodRef("default", "p", "uid-p")
RESULT = DeviceResult("gpu", "gpu.example.com", "n0", "gpu-0")


def claim(uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "c0", "namespace": "default", "uid": uid},
        "spec": claim_spec("gpu"),
    }


def test_a_claim_made_again_is_not_written() -> None:
    write = ClaimWrite("default/c0", (RESULT,), "n0", uid="uid-1")
    status, allocated, why = reserved_status({}, POD, write, 0.0, "uid-2")
    assert (status, allocated) == (None, False)
    assert why == "it was deleted and made again since the cycle read it"
    status, allocated, why = reserved_status({}, POD, write, 0.0, "uid-1")
    assert why == ""
    assert allocated
    assert status is not None
    assert status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]


def test_a_claim_made_again_alike_is_an_event_with_its_new_uid() -> None:
    """The cache must learn the new uid, or every write would be refused."""
    store = ObjectStore()
    [first] = store.apply("ADDED", "ResourceClaim", claim("uid-1")).events
    assert isinstance(first.obj, ClaimObject)
    assert first.obj.uid == "uid-1"
    store.apply("DELETED", "ResourceClaim", claim("uid-1"))
    [again] = store.apply("ADDED", "ResourceClaim", claim("uid-2")).events
    assert isinstance(again.obj, ClaimObject)
    assert again.obj.uid == "uid-2"
    relisted = store.apply("MODIFIED", "ResourceClaim", claim("uid-3")).events  # a relist
    assert [e.type for e in relisted] == ["MODIFIED"]


def test_a_claim_reserved_for_256_pods_takes_no_more() -> None:
    """The API server refuses a longer ``status.reservedFor``: the write says why instead."""
    others = [{"resource": "pods", "name": f"o{i}", "uid": f"u{i}"} for i in range(256)]
    allocated = {
        "devices": {
            "results": [
                {
                    "request": "gpu",
                    "driver": RESULT.driver,
                    "pool": RESULT.pool,
                    "device": RESULT.device,
                }
            ]
        }
    }
    status = {"allocation": allocated, "reservedFor": others}
    write = ClaimWrite("default/c0", (RESULT,), "n0")
    new, allocates, why = reserved_status(status, POD, write, 0.0)
    assert (new, allocates) == (None, False)
    assert why == "it has reached its maximum number of consumers (256)"
    new, _, why = reserved_status({**status, "reservedFor": others[:255]}, POD, write, 0.0)
    assert why == ""
    assert new is not None
    assert len(new["reservedFor"]) == 256
