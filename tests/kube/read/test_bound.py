"""What a bound pod holds (``kube/read/bound.py``): a job's own annotations of its run, and
its owner references, never hide the GPUs it holds."""

from __future__ import annotations

from gpufleet.kube.read.bound import requests_only
from gpufleet.load.foreign import PodNames
from gpufleet.load.objects.pods import PROGRESS_ANNOTATIONS


def test_read_by_its_requests_a_bound_pod_drops_what_it_says_of_its_run() -> None:
    notes = dict.fromkeys(PROGRESS_ANNOTATIONS, "not a value") | {"team": "a"}
    meta = {"name": "p", "namespace": "ml", "annotations": notes, "ownerReferences": "oops"}
    raw = {"metadata": meta, "spec": {}}
    kept = requests_only(raw, PodNames())
    assert kept["metadata"]["annotations"] == {"team": "a"}
    assert "ownerReferences" not in kept["metadata"]
    assert raw["metadata"]["annotations"] == notes  # the object read is left as it was
