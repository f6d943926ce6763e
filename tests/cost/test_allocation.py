"""Allocation as OpenCost computes it, on the hand-computed fixture (``fixture.py``), and
conservation — workload plus idle is what the nodes cost — over random clusters and windows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cost.allocation import IDLE, Nodes, Runs, allocate
from gpufleet.load.costs.prices import load_price_sheet
from tests.cost import fixture


@pytest.fixture
def sheet_path(tmp_path: Path) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(fixture.SHEET_YAML)
    return path


def test_a_node_priced_whole_is_split_in_the_base_ratios(sheet_path: Path) -> None:
    sheet = load_price_sheet(sheet_path)
    b = sheet.type_of(fixture.B_LABELS)  # instance type wins over the GPU product
    assert b is not None
    assert b.name == "a100-node"
    split = b.prices(4, 32, 256, sheet.base)
    assert split.gpu == pytest.approx(fixture.SPLIT.gpu)
    assert split.cpu == pytest.approx(fixture.SPLIT.cpu)
    assert split.ram == pytest.approx(fixture.SPLIT.ram)
    assert 4 * split.gpu + 32 * split.cpu + 256 * split.ram == pytest.approx(12.0)


def test_the_fixture_s_allocation_and_idle_are_those_worked_out_by_hand(sheet_path: Path) -> None:
    nodes = fixture.nodes(load_price_sheet(sheet_path))
    alloc = allocate(fixture.RUNS, nodes, fixture.WINDOW)
    np.testing.assert_allclose(alloc.cost, fixture.RUN_COSTS)
    np.testing.assert_allclose(alloc.asset, fixture.ASSETS)
    np.testing.assert_allclose(alloc.idle, fixture.IDLE)
    assert alloc.total == pytest.approx(fixture.TOTAL)
    rows = {r["name"]: r for r in alloc.aggregate("pod")}
    hungry = rows["infer/hungry"]
    assert hungry["cpuCoreHours"] == pytest.approx(12.0)  # usage 6 > request 2, for 2 h
    assert hungry["cpuEfficiency"] == pytest.approx(3.0)
    assert hungry["ramEfficiency"] == pytest.approx(0.75)
    assert rows["ml/train"]["cpuEfficiency"] is None  # no usage known: never invented
    assert rows["ml/share"]["gpuHours"] == pytest.approx(0.5)
    assert rows["infer/mig"]["gpuHours"] == pytest.approx(0.5)
    idle = rows[IDLE]
    assert (idle["gpuCost"], idle["cpuCost"], idle["ramCost"]) == pytest.approx(fixture.IDLE_TOTAL)
    by_node = {r["node"]: r for r in alloc.idle_rows()}
    assert by_node["b"]["totalCost"] == pytest.approx(24.0)
    assert by_node["b"]["idleCost"] == pytest.approx(13.5 + 3.3 + 4.425)
    assert by_node["b"]["category"] == "spot"


def test_idle_shared_by_cost_weight(sheet_path: Path) -> None:
    nodes = fixture.nodes(load_price_sheet(sheet_path))
    alloc = allocate(fixture.RUNS, nodes, fixture.WINDOW)
    rows = {r["name"]: r for r in alloc.aggregate("queue", share_idle=True)}
    assert IDLE not in rows  # every resource had a workload to share it over
    # GPU idle 48 over GPU costs research 13.5, serving 0.9 (of 14.4): 45 and 3.
    # CPU idle 8.8 over 0.9 and 1.5 (of 2.4): 3.3 and 5.5.
    # RAM idle 13.305 over 1.36 and 0.375 (of 1.735): 10.4288... and 2.8761...
    research = rows["research"]
    assert research["sharedCost"] == pytest.approx(45 + 3.3 + 13.305 * 1.36 / 1.735)
    assert research["totalCost"] == pytest.approx(15.76 + research["sharedCost"])
    assert sum(r["totalCost"] for r in rows.values()) == pytest.approx(fixture.TOTAL)


def test_aggregation_by_experiment_and_node(sheet_path: Path) -> None:
    sheet = load_price_sheet(sheet_path)
    alloc = allocate(fixture.RUNS, fixture.nodes(sheet), fixture.WINDOW)
    rows = {r["name"]: r["totalCost"] for r in alloc.aggregate("experiment")}
    assert rows["exp-1"] == pytest.approx(12 + 0.8 + 1.28)
    assert rows["exp-2"] == pytest.approx(1.68 + 1.8 + 0.975)
    nodes = {r["name"]: r["totalCost"] for r in alloc.aggregate("node")}
    assert nodes["a"] == pytest.approx(15.76)
    with pytest.raises(ValueError, match="no dimension 'team'"):
        alloc.aggregate("team")


@st.composite
def clusters(draw: st.DrawFn) -> tuple[Runs, Nodes, tuple[float, float]]:
    n = draw(st.integers(1, 5))
    r = draw(st.integers(0, 12))
    money = st.floats(0, 10, allow_nan=False)
    caps = [
        (draw(st.integers(0, 8)), draw(st.integers(1, 96)), draw(st.integers(1, 1024)))
        for _ in range(n)
    ]
    prices = [(draw(money), draw(money), draw(money)) for _ in range(n)]
    times = st.floats(0, 100 * 3600, allow_nan=False)
    life = [sorted((draw(times), draw(times))) for _ in range(n)]
    node_of = [draw(st.integers(0, n - 1)) for _ in range(r)]
    spans = []
    for i in range(r):
        lo, hi = life[node_of[i]]
        a, b = sorted((draw(st.floats(lo, hi)), draw(st.floats(lo, hi))))
        spans.append((a, b))
    requests = []
    usages = []
    for i in range(r):
        gpus, cores, ram = caps[node_of[i]]
        requests.append(tuple(draw(st.floats(0, c)) / r for c in (gpus, cores, ram)))
        known = draw(st.booleans())
        usages.append(
            tuple(draw(st.floats(0, c)) if known else float("nan") for c in (gpus, cores, ram))
        )
    window = tuple(sorted((draw(times), draw(times))))
    if window[1] <= window[0]:
        window = (window[0], window[0] + 3600.0)
    runs = Runs.of(
        tuple(f"p{i}" for i in range(r)),
        node=node_of,
        start=[s[0] for s in spans],
        end=[s[1] for s in spans],
        request=np.array(requests).reshape(r, 3),
        usage=np.array(usages).reshape(r, 3),
        dims={"queue": tuple(draw(st.sampled_from("abc")) for _ in range(r))},
    )
    nodes = Nodes.of(
        tuple(f"n{i}" for i in range(n)),
        types=("t",) * n,
        categories=("on-demand",) * n,
        capacity=caps,
        prices=prices,
        start=[lo for lo, _ in life],
        end=[hi for _, hi in life],
    )
    return runs, nodes, window  # type: ignore[return-value]


@settings(max_examples=150, deadline=None)
@given(clusters(), st.booleans())
def test_workload_plus_idle_is_what_the_nodes_cost(
    cluster: tuple[Runs, Nodes, tuple[float, float]], share: bool
) -> None:
    runs, nodes, window = cluster
    alloc = allocate(runs, nodes, window)
    per_resource = alloc.asset.sum(axis=0)
    for by in ("pod", "queue", "node"):
        rows = alloc.aggregate(by, share_idle=share)
        if not share:  # per resource; shared idle is one sum per row (sharedCost)
            for k, name in enumerate(("gpuCost", "cpuCost", "ramCost")):
                spent = sum(r[name] for r in rows)
                assert spent == pytest.approx(per_resource[k], rel=1e-9, abs=1e-6)
        total = sum(r["totalCost"] for r in rows)
        assert total == pytest.approx(alloc.total, rel=1e-9, abs=1e-6)
    np.testing.assert_allclose(
        alloc.workload_by_node + alloc.idle, alloc.asset, rtol=1e-9, atol=1e-6
    )
