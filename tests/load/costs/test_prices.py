"""Price sheets: the bundled one reads and prices every bundled cluster's nodes; a node is
matched by instance type, then GPU product, then the default; every bad sheet is one line
naming the file, the entry and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.load.costs.prices import DEFAULT_SHEET, load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.load.snapshot import load_snapshot
from tests.cost.fixture import SHEET_YAML

DATA = DEFAULT_SHEET.parent


def test_the_bundled_sheet_says_whose_prices_and_of_when() -> None:
    sheet = load_price_sheet()
    assert sheet.currency == "USD"
    assert "illustrative" in sheet.title
    assert "2026-11-01" in sheet.title
    assert sheet.default is not None


@pytest.mark.parametrize("cluster", ["philly-cluster.yaml", "openb-replay-cluster.yaml"])
def test_the_bundled_sheet_prices_the_bundled_clusters_by_their_gpu_model(cluster: str) -> None:
    sheet = load_price_sheet()
    snapshot = load_snapshot(DATA / cluster)
    for node in snapshot.nodes:
        entry = sheet.type_of(node.labels, node.gpu_model)
        assert entry is not None
        assert entry is not sheet.default, node.labels


def test_instance_type_then_gpu_product_then_default(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    text = SHEET_YAML.replace(
        "  nodeTypes:",
        "  default: {category: committed, nodeHour: 1.0}\n  nodeTypes:",
    )
    path.write_text(text)
    sheet = load_price_sheet(path)
    by_type = {"node.kubernetes.io/instance-type": "a100-box"}
    by_gpu = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert sheet.type_of({**by_gpu, **by_type}).name == "a100-node"  # type: ignore[union-attr]
    assert sheet.type_of(by_gpu).name == "h100"  # type: ignore[union-attr]
    assert sheet.type_of({}, "NVIDIA-H100-80GB-HBM3").name == "h100"  # type: ignore[union-attr]
    assert sheet.type_of({"nvidia.com/gpu.product": "L4"}) is sheet.default


def test_one_type_may_have_a_spot_entry_beside_another(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        SHEET_YAML.replace("    instanceType: a100-box", "    gpuProduct: NVIDIA-H100-80GB-HBM3")
    )
    sheet = load_price_sheet(path)
    product = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    assert sheet.type_of(product).name == "h100"  # type: ignore[union-attr]
    spot = {**product, "karpenter.sh/capacity-type": "spot"}
    assert sheet.type_of(spot).name == "a100-node"  # type: ignore[union-attr]


BAD = [
    (
        "    prices: {gpuHour: 3.0, vcpuHour: 0.05, ramGiBHour: 0.01}",
        "    prices: {gpuHour: -3.0, vcpuHour: 0.05, ramGiBHour: 0.01}",
        "PriceSheet fixture entry h100: field 'spec.nodeTypes[0].prices.gpuHour': "
        "expected a price from 0 to 1,000,000 per hour, got -3.0",
    ),
    (
        "    nodeHour: 12.0",
        "    nodeHour: twelve",
        "entry a100-node: field 'spec.nodeTypes[1].nodeHour': expected a price, a number, "
        "got 'twelve'",
    ),
    (
        "    instanceType: a100-box\n    category: spot",
        "    gpuProduct: NVIDIA-H100-80GB-HBM3\n    category: on-demand",
        "entry a100-node: field 'spec.nodeTypes[1].gpuProduct': gpuProduct "
        "NVIDIA-H100-80GB-HBM3 is matched twice: entry h100 matches it too",
    ),
    (
        "    category: spot",
        "    category: reserved",
        "entry a100-node: field 'spec.nodeTypes[1].category': expected one of on-demand, "
        "spot, committed, got 'reserved'",
    ),
    (
        "    nodeHour: 12.0",
        "    nodeHour: 12.0\n    prices: {gpuHour: 1}",
        "entry a100-node: field 'spec.nodeTypes[1].prices': expected exactly one of prices "
        "and nodeHour",
    ),
    ("  currency: USD", "  currency: dollars", "field 'spec.currency': expected an ISO 4217"),
    ("  title: fixture prices", "  titel: fixture prices", "field 'spec.titel': unknown field"),
    ("kind: PriceSheet", "kind: Prices", "expected apiVersion gpufleet.io/v1alpha1 and kind"),
]


@pytest.mark.parametrize(("old", "new", "message"), BAD)
def test_a_bad_sheet_is_one_line_naming_the_entry_and_field(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    assert old in SHEET_YAML
    path = tmp_path / "bad.yaml"
    path.write_text(SHEET_YAML.replace(old, new))
    with pytest.raises(InputError) as caught:
        load_price_sheet(path)
    line = str(caught.value)
    assert line.startswith(str(path))
    assert message in line
    assert "\n" not in line
