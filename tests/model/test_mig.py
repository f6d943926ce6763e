"""MIG profile tables, layout rules, and the partitions gpufleet chooses (property-tested)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.compose import run_cycle
from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.mig import TABLES, Instance, MigLayouts, table_for, valid_layout
from gpufleet.model.pod import PodSpec
from gpufleet.model.workload import PodInfo, Snapshot

H100 = TABLES["H100-80GB"]

# NVIDIA's placement table for H100 80GB (nvidia-smi mig -lgipp), written out independently
# of the module: profile -> (compute slices, memory slices, allowed starts, max instances).
NVIDIA_H100 = {
    "1g.10gb": (1, 1, {0, 1, 2, 3, 4, 5, 6}, 7),
    "1g.20gb": (1, 2, {0, 2, 4, 6}, 4),
    "2g.20gb": (2, 2, {0, 2, 4}, 3),
    "3g.40gb": (3, 4, {0, 4}, 2),
    "4g.40gb": (4, 4, {0}, 1),
    "7g.80gb": (7, 8, {0}, 1),
}


def nvidia_valid(layout: list[tuple[str, int]]) -> bool:
    memory = [0] * 8
    compute = 0
    for name, start in layout:
        c, size, starts, most = NVIDIA_H100[name]
        if start not in starts or sum(n == name for n, _ in layout) > most:
            return False
        for slot in range(start, start + size):
            if slot >= 8:
                return False
            memory[slot] += 1
        compute += c
    return max(memory) <= 1 and compute <= 7


@pytest.mark.parametrize(
    ("product", "profiles"),
    [
        (
            "NVIDIA-A100-SXM4-40GB",
            ["1g.5gb", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
        ),
        (
            "NVIDIA-A100-SXM4-80GB",
            ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
        ),
        (
            "NVIDIA-H100-80GB-HBM3",
            ["1g.10gb", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
        ),
        ("NVIDIA-H200", ["1g.18gb", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"]),
    ],
)
def test_tables(product: str, profiles: list[str]) -> None:
    table = table_for(product)
    assert table is not None
    assert list(table) == profiles


def test_no_table_for_gpus_without_mig() -> None:
    assert table_for("Tesla-T4") is None
    assert table_for(None) is None


@pytest.mark.parametrize(
    ("layout", "valid"),
    [
        pytest.param([("4g.40gb", 0), ("3g.40gb", 4)], True, id="4g+3g"),
        pytest.param([("3g.40gb", 0), ("3g.40gb", 4)], True, id="3g+3g"),
        pytest.param([("3g.40gb", 0), ("3g.40gb", 4), ("1g.10gb", 6)], False, id="memory-full"),
        pytest.param([("1g.10gb", s) for s in range(7)], True, id="seven-1g"),
        pytest.param(
            [("2g.20gb", 0), ("2g.20gb", 2), ("2g.20gb", 4), ("1g.10gb", 6)], True, id="2g*3+1g"
        ),
        pytest.param([("4g.40gb", 0), ("4g.40gb", 4)], False, id="4g-only-at-0"),
        pytest.param(
            [("1g.20gb", s) for s in (0, 2, 4, 6)] + [("1g.10gb", 1)], False, id="overlap"
        ),
        pytest.param([("2g.20gb", 1)], False, id="bad-start"),
        pytest.param([("7g.80gb", 0), ("1g.10gb", 0)], False, id="7g-alone"),
    ],
)
def test_layout_rules(layout: list[tuple[str, int]], valid: bool) -> None:
    assert valid_layout([Instance(H100[name], start) for name, start in layout]) is valid
    assert nvidia_valid(layout) is valid


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(list(H100)), st.booleans()), min_size=1, max_size=30))
def test_layouts_stay_valid_under_place_and_release(ops: list[tuple[str, bool]]) -> None:
    """Every layout MigLayouts holds is a valid NVIDIA placement, whatever is placed."""
    layouts = MigLayouts({0: H100}, {0: 2})
    live: list[tuple[int, str]] = []
    for i, (profile, release) in enumerate(ops):
        if release and live:
            gpu, pod = live.pop(0)
            layouts.release(0, gpu, pod)
        else:
            options = layouts.candidates(0, profile, [True, True])
            if options:
                gpu = options[0][1]
                layouts.place(0, gpu, profile, f"p{i}")
                live.append((gpu, f"p{i}"))
        for g in (0, 1):
            part = layouts.parts[0, g]
            assert nvidia_valid([(x.profile.name, x.start) for x in part.instances])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(list(H100)), min_size=1, max_size=24), st.integers(1, 4))
def test_cycle_reconfigurations_are_valid(profiles: list[str], gpus: int) -> None:
    """Whatever MIG requests arrive, each layout the cycle emits is valid and slices on one
    GPU never exceed its 7 compute and 8 memory slices."""
    node = NodeSpec(
        "h1",
        256_000,
        1 << 20,
        gpus,
        "NVIDIA-H100-80GB-HBM3",
        {"nvidia.com/mig.capable": "true"},
        mig_dynamic=True,
    )
    pods = tuple(
        PodInfo(f"inf/p{i}", PodSpec(f"inf/p{i}", 1000, 1024, mig_profile=p), created=float(i))
        for i, p in enumerate(profiles)
    )
    result = run_cycle(Snapshot((node,), pods), 100.0)
    per_gpu: dict[int, list[str]] = {}
    for b in result.bindings:
        assert b.gpus is not None
        per_gpu.setdefault(b.gpus[0], []).append(b.pod)
    for reconfiguration in result.reconfigurations:
        names = list(reconfiguration.layout)
        assert sum(NVIDIA_H100[n][0] for n in names) <= 7
        assert sum(NVIDIA_H100[n][1] for n in names) <= 8
        assert len(names) == len(per_gpu.get(reconfiguration.gpu, []))
    assert len(result.bindings) + len(result.pending) == len(profiles)


def test_state_keeps_partitioned_gpus_from_whole_gpu_pods() -> None:
    state = ClusterState(
        [NodeSpec("h1", 64_000, 1 << 20, 2, "NVIDIA-H100-80GB-HBM3", mig_dynamic=True)]
    )
    slice_pod = PodSpec("s", 1000, 1024, mig_profile="1g.10gb")
    state.reserve(0, slice_pod, (0,))
    assert state.gpu_free[0].tolist() == [0, 1000]
    state.release(0, slice_pod, (0,))
    assert state.gpu_free[0].tolist() == [1000, 1000]  # the slice made now is undone


def test_several_slices_lay_out_an_idle_partition_anew() -> None:
    """An idle 1g.10gb left at start 4 leaves room beside it for two 2g.20gb only; three fit
    once the idle partition is laid out anew, and the planned GPUs are what reserve takes.
    Releasing the pod gives the GPU its old partition back."""
    node = NodeSpec("h1", 64_000, 1 << 20, 1, "NVIDIA-H100-80GB-HBM3", mig_dynamic=True)
    state = ClusterState([node])
    assert state.mig is not None
    one_g = TABLES["H100-80GB"]["1g.10gb"]
    state.mig.parts[0, 0].instances.append(Instance(one_g, 4))
    state.mig.parts[0, 0].users.append(None)
    state.gpu_free[0, 0] = 0
    state.mig.mark_baseline()
    pod = PodSpec("ml/three", 1000, 1024, mig_profile="2g.20gb", mig_count=3)
    two = PodSpec("ml/two", 1000, 1024, mig_profile="2g.20gb", mig_count=2)
    assert state.mig_gpu(0, two) == (0, 0)
    gpus = state.mig_gpu(0, pod)
    assert gpus == (0, 0, 0)
    state.reserve(0, pod, gpus)
    assert state.mig.layout(0, 0) == ["2g.20gb", "2g.20gb", "2g.20gb"]
    assert valid_layout(state.mig.parts[0, 0].instances)
    state.release(0, pod, gpus)
    assert state.mig.layout(0, 0) == ["1g.10gb"]
    assert state.mig.reconfigurations() == []
