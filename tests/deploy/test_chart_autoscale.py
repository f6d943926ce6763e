"""The chart's ``nodePools``: mounted and passed as ``--autoscale`` in a file serve reads, and
the permissions they add — exactly what live autoscaling uses, against the emulator's
ProvisioningRequest controller as the chart's ServiceAccount (``kube/process/provision.py``).
Without them the chart grants nothing of it."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gpufleet.cli.serve import _offers
from gpufleet.kube.process.leader import LeaseConfig
from gpufleet.kube.process.live import Replica
from gpufleet.kube.process.options import ServeOptions
from gpufleet.load.costs.prices import load_price_sheet
from tests.apiserver.provisioner import Provisioner
from tests.apiserver.rbac import expand, unused
from tests.deploy.chart import CHART, NAMESPACE, RELEASE
from tests.deploy.test_chart import container, one
from tests.deploy.test_chart_rbac_live import TOKEN, secured
from tests.kube.process.test_serve import add_group, add_node, bound, run_until
from tests.kube.process.test_serve_autoscale import POOLS, add

JSON = dict[str, Any]
AUTOSCALING = {
    ("autoscaling.x-k8s.io", "provisioningrequests"),
    ("", "podtemplates"),
    ("", "nodes"),
    ("", "pods"),
}


def with_pools(helm: Callable[..., str], tmp_path: Path) -> list[JSON]:
    """The chart with the NodePools of the live autoscaling tests in ``nodePools``."""
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump({"nodePools": list(yaml.safe_load_all(POOLS.read_text()))}))
    rendered = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, "-f", str(values))
    return [doc for doc in yaml.safe_load_all(rendered) if doc]


def granted(objects: list[JSON]) -> set[tuple[str, str, str, str]]:
    return {p for o in objects if o["kind"] == "ClusterRole" for p in expand(o)}


def autoscaling(permissions: set[tuple[str, str, str, str]]) -> set[tuple[str, str, str, str]]:
    """The permissions of live autoscaling: on its kinds, and patch of nodes and pods."""
    return {
        p
        for p in permissions
        if (p[0], p[1]) in AUTOSCALING and (p[1] not in {"nodes", "pods"} or p[2] == "patch")
    }


def test_node_pools_are_mounted_passed_and_read(
    helm: Callable[..., str], render: Callable[..., list[JSON]], tmp_path: Path
) -> None:
    assert "node-pools.yaml" not in one(render(), "ConfigMap")["data"]
    assert not any(a.startswith("--autoscale") for a in container(render())["args"])
    assert autoscaling(granted(render())) == set()
    objects = with_pools(helm, tmp_path)
    assert "--autoscale=/etc/gpufleet/node-pools.yaml" in container(objects)["args"]
    path = tmp_path / "node-pools.yaml"
    path.write_text(one(objects, "ConfigMap")["data"]["node-pools.yaml"])
    [offer] = _offers(path, load_price_sheet())
    assert (offer.pool, offer.max_nodes, offer.delay_s) == ("p100x8", 16, 300.0)


def test_live_autoscaling_uses_every_permission_the_node_pools_add_and_no_other(
    helm: Callable[..., str], tmp_path: Path
) -> None:
    objects = with_pools(helm, tmp_path)
    path = tmp_path / "node-pools.yaml"
    path.write_text(one(objects, "ConfigMap")["data"]["node-pools.yaml"])
    options = ServeOptions(period_s=0.2, batch_s=0.01, offers=_offers(path, load_price_sheet()))
    lease = LeaseConfig(NAMESPACE, "gpufleet", "replica-0", 2.0, 1.5, 0.1)
    with secured(objects) as emulator:
        provisioner = Provisioner(emulator.store, delay_s=0.2, step_s=0.2).start()
        add_node(emulator, "system", gpus=0)
        add_group(emulator, "train", 2)
        for i in range(2):
            add(emulator, f"train-{i}", 8, group="train")
        requests = emulator.store.resource("autoscaling.x-k8s.io", "v1", "provisioningrequests")
        try:
            run_until(
                emulator,
                lambda http: Replica(http, options, lease),
                lambda replica: replica.live,
                lambda _live: (
                    {"train-0", "train-1"} <= bound(emulator).keys()
                    and not emulator.store.list(requests)[0]
                ),
                timeout=30.0,
                headers={"Authorization": f"Bearer {TOKEN}"},
            )
        finally:
            provisioner.stop()
        assert emulator.rbac is not None
        assert emulator.rbac.denied == []
        added = autoscaling(granted(objects))
        assert added
        assert unused(added, emulator.rbac.used) == set()
