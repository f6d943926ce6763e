"""What a bound pod holds (``kube/read/bound.py``): a job's own annotations of its run
never hide the GPUs it holds."""

from __future__ import annotations

from gpufleet.kube.read.bound import requests_only
from gpufleet.load.foreign import PodNames
from gpufleet.load.objects.pods import PROGRESS_ANNOTATIONS


def test_read_by_its_requests_a_bound_pod_drops_what_it_says_of_its_run() -> None:
    notes = dict.fromkeys(PROGRESS_ANNOTATIONS, "not a value") | {"team": "a"}
    raw = {"metadata": {"name": "p", "namespace": "ml", "annotations": notes}, "spec": {}}
    kept = requests_only(raw, PodNames())
    assert kept["metadata"]["annotations"] == {"team": "a"}
    assert raw["metadata"]["annotations"] == notes  # the object read is left as it was
