"""A NodePool's ``spec.autoscaling``: the node type a cluster may buy, read or refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpufleet.cost.prices import NodeType, PriceSheet, UnitPrices
from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.load.errors import InputError
from gpufleet.load.objects.node_pools import SPOT_INTERRUPTIONS_PER_HOUR
from gpufleet.load.snapshot import load_snapshot
from gpufleet.model.workload import Snapshot

NODE = """apiVersion: v1
kind: Node
metadata: {name: system}
status: {allocatable: {cpu: "8", memory: 32Gi}}
"""


def pool(autoscaling: str, *, count: int = 0, capacity: str = "spot") -> str:
    return f"""apiVersion: gpufleet.io/v1alpha1
kind: NodePool
metadata: {{name: gpu}}
spec:
  count: {count}
  template:
    metadata:
      labels: {{nvidia.com/gpu.product: P100, karpenter.sh/capacity-type: {capacity}}}
    status: {{allocatable: {{cpu: "64", memory: 512Gi, nvidia.com/gpu: "8"}}}}
  domains: [{{label: topology.gpufleet.io/rack, size: 4}}]
  {autoscaling}
"""


def load(tmp_path: Path, *docs: str) -> Snapshot:
    path = tmp_path / "cluster.yaml"
    path.write_text("\n---\n".join(docs))
    return load_snapshot(path)


def test_an_autoscaling_pool_is_an_offer_named_and_labelled_as_its_nodes(tmp_path: Path) -> None:
    snap = load(tmp_path, NODE, pool("autoscaling: {maxNodes: 12, provisioningDelay: 4m}"))
    (offer,) = snap.offers
    assert (offer.pool, offer.max_nodes, offer.min_nodes, offer.delay_s) == ("gpu", 12, 0, 240.0)
    assert offer.spot
    assert offer.interruptions_per_hour == SPOT_INTERRUPTIONS_PER_HOUR
    assert offer.availability == 1.0
    node = offer.node(5)
    assert node.name == "gpu-005"
    assert node.labels["topology.gpufleet.io/rack"] == "gpu-rack-01"
    assert node.labels["kubernetes.io/hostname"] == "gpu-005"
    assert [n.name for n in snap.nodes] == ["system"]  # count 0: none yet


def test_the_pools_own_nodes_and_its_offer_name_nodes_alike(tmp_path: Path) -> None:
    snap = load(tmp_path, pool("autoscaling: {maxNodes: 12}", count=2))
    assert [n.name for n in snap.nodes] == ["gpu-000", "gpu-001"]
    assert snap.offers[0].node(1) == snap.nodes[1]


@pytest.mark.parametrize(
    ("autoscaling", "capacity", "message"),
    [
        ("autoscaling: {}", "spot", "spec.autoscaling.maxNodes': expected the most nodes"),
        ("autoscaling: {maxNodes: 0}", "spot", "maxNodes': expected an integer >= 1"),
        ("autoscaling: {maxNodes: 4, minNodes: 2}", "spot", "minNodes': expected an integer <= 0"),
        ("autoscaling: {maxNodes: 4, provisioningDelay: soon}", "spot", "provisioningDelay"),
        ("autoscaling: {maxNodes: 4, availability: 0}", "spot", "availability': expected a chance"),
        ("autoscaling: {maxNodes: 4, interruptionsPerHour: 2}", "spot", "a number from 0 to 1"),
        (
            "autoscaling: {maxNodes: 4, interruptionsPerHour: 0.1}",
            "on-demand",
            "expected nothing on a pool whose template is not labelled",
        ),
        ("autoscaling: {maxNodes: 4, spot: true}", "spot", "unknown field"),
    ],
)
def test_a_bad_autoscaling_field_is_an_error_naming_it(
    tmp_path: Path, autoscaling: str, capacity: str, message: str
) -> None:
    with pytest.raises(InputError, match=message):
        load(tmp_path, NODE, pool(autoscaling, capacity=capacity))


def test_a_pool_of_no_nodes_needs_autoscaling(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"spec\.count': expected an integer >= 1"):
        load(tmp_path, NODE, pool(""))


def test_a_spot_node_takes_the_spot_entry_of_its_instance_type() -> None:
    sheet = PriceSheet(
        "s",
        "USD",
        "t",
        (
            NodeType(
                "od",
                ("node.kubernetes.io/instance-type", "x"),
                "on-demand",
                components=UnitPrices(1.0, 0, 0),
            ),
            NodeType(
                "sp",
                ("node.kubernetes.io/instance-type", "x"),
                "spot",
                components=UnitPrices(0.4, 0, 0),
            ),
        ),
    )
    spot = {"node.kubernetes.io/instance-type": "x", "karpenter.sh/capacity-type": "spot"}
    on_demand = {"node.kubernetes.io/instance-type": "x"}
    assert sheet.type_of(spot).name == "sp"  # type: ignore[union-attr]
    assert sheet.type_of(on_demand).name == "od"  # type: ignore[union-attr]
    only_spot = PriceSheet("s", "USD", "t", sheet.types[1:])
    assert only_spot.type_of(on_demand).name == "sp"  # type: ignore[union-attr]


def test_the_bundled_sheet_prices_the_benchmarks_spot_type_at_60_percent_off() -> None:
    sheet = load_price_sheet()
    labels = {"node.kubernetes.io/instance-type": "p100x8"}
    od = sheet.type_of(labels)
    spot = sheet.type_of({**labels, "karpenter.sh/capacity-type": "spot"})
    assert od is not None
    assert spot is not None
    assert od.components is not None
    assert spot.components is not None
    assert spot.category == "spot"
    assert spot.components.gpu == pytest.approx(0.4 * od.components.gpu)
