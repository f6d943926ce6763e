"""Pod requests: the two GPU forms and device-plugin semantics."""

from __future__ import annotations

import dataclasses

import pytest

from gpufleet.model.pod import PodSpec
from tests.builders import pod


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((-1, 0, 0, 0), "negative"),
        ((1, 1, 0, 500), "without GPUs"),
        ((1, 1, 1, 0), "1..1000"),
        ((1, 1, 1, 1001), "1..1000"),
        ((1, 1, 2, 500), "only possible with one GPU"),
    ],
)
def test_invalid_requests_are_refused(args: tuple[int, int, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PodSpec("p", *args)


def test_share_takes_a_whole_gpu_under_device_plugin_semantics() -> None:
    share = pod().share(460).obj()
    assert share.is_gpu_share
    assert share.total_gpu_milli == 460
    whole = share.as_whole_gpus()
    assert (whole.num_gpu, whole.gpu_milli, whole.is_gpu_share) == (1, 1000, False)
    two = pod().gpus(2).obj()
    assert two.as_whole_gpus() is two


def test_request_key_is_every_field_but_the_name() -> None:
    a = PodSpec("a", 1000, 1024, 2, 1000, frozenset({"V100"}), exclusive_cpu=True)
    assert a.request_key == dataclasses.replace(a, name="b").request_key
    assert len(a.request_key) == len(dataclasses.fields(PodSpec)) - 1
    others = (
        dataclasses.replace(a, cpu_milli=2000),
        dataclasses.replace(a, gpu_models=None),
        dataclasses.replace(a, exclusive_cpu=False),
    )
    assert all(other.request_key != a.request_key for other in others)
