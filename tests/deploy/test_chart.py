"""The Helm chart (``deploy/helm/gpufleet``): it lints, and what it renders is what a
secondary scheduler needs — two replicas electing a leader on a Lease in the release's
namespace, probes, a restricted security context, the configuration file it reads, and RBAC
that grants exactly what the code does, no more; scheduler-plugins' PodGroup CRD only when
asked; every core object is valid against Kubernetes' own schemas (kubernetes-validate,
strict: no unknown field)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes_validate import utils as kubernetes_validate
from tools.crds.kinds import definitions

from gpufleet.kube.read.kinds import API, KINDS, LIVE_VOCABULARIES, kinds
from gpufleet.load.costs.prices import load_price_sheet
from gpufleet.load.objects.config import read_configuration
from gpufleet.plugins.registry import POLICIES
from tests.deploy.conftest import CHART, NAMESPACE, RELEASE, Render

Rule = tuple[str, str, str, str]
"""(apiGroup, resource, verb, resourceName or "") — one permission."""

SCHEDULER_RULES: set[Rule] = {
    # kube/read/watch.py lists and watches every kind of kube/read/kinds.py's API, all namespaces.
    *(
        (v.rpartition("/")[0], plural, verb, "")
        for v, plural in (API[kind] for kind in KINDS)
        for verb in ("list", "watch")
    ),
    # kube/write/bind.py: a pod read back to settle a bind whose reply was lost.
    ("", "pods", "get", ""),
    # kube/write/bind.py: bind (POST pods/NAME/binding) and evict (POST pods/NAME/eviction).
    ("", "pods/binding", "create", ""),
    ("", "pods/eviction", "create", ""),
    # kube/process/tell.py: PodScheduled conditions and nominatedNodeName (PATCH pods/NAME/status).
    ("", "pods/status", "patch", ""),
    # kube/write/claims.py: GET a ResourceClaim, PUT its status (allocation, reservedFor).
    ("resource.k8s.io", "resourceclaims", "get", ""),
    ("resource.k8s.io", "resourceclaims/status", "update", ""),
    # kube/write/podgroups.py: PodGroup status (merge PATCH of podgroups/NAME/status) and its
    # gpufleet.io/stale-since annotation (merge PATCH of podgroups/NAME).
    ("scheduling.x-k8s.io", "podgroups/status", "patch", ""),
    ("scheduling.x-k8s.io", "podgroups", "patch", ""),
    # kube/write/volumes.py: a chosen volume's claimRef, a claim's selected node (merge PATCH).
    ("", "persistentvolumes", "patch", ""),
    ("", "persistentvolumeclaims", "patch", ""),
    # kube/write/queues.py: Queue status (merge PATCH of queues/NAME/status).
    ("gpufleet.io", "queues/status", "patch", ""),
    # kube/write/recorder.py: POST an event, PATCH its series when it repeats.
    ("events.k8s.io", "events", "create", ""),
    ("events.k8s.io", "events", "patch", ""),
    # kube/process/delegated.py: a scraper of /metrics reviewed (POST a TokenReview, then a
    # SubjectAccessReview).
    ("authentication.k8s.io", "tokenreviews", "create", ""),
    ("authorization.k8s.io", "subjectaccessreviews", "create", ""),
}
"""The ClusterRole: everything gpufleet serve does to the API outside its Lease."""

LEASE_RULES: set[Rule] = {
    # kube/process/leader.py: POST the Lease when there is none (a create cannot name its object).
    ("coordination.k8s.io", "leases", "create", ""),
    # kube/process/leader.py: GET the Lease, PUT it to take, renew or release it.
    ("coordination.k8s.io", "leases", "get", "gpufleet"),
    ("coordination.k8s.io", "leases", "update", "gpufleet"),
}
"""The Role in the release's namespace: the scheduler's Lease, and nothing else there."""

CORE_KINDS = {
    "ServiceAccount",
    "ConfigMap",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    "Service",
    "Deployment",
}
NON_DEFAULT = (
    "replicaCount=3",
    "image.repository=registry.example.com/gpufleet",
    "image.tag=1.2.3",
    "serviceMonitor.enabled=true",
    "resources.requests.cpu=2",
    "resources.requests.memory=4Gi",
    "resources.limits.memory=8Gi",
    "leaderElection.resourceName=gpufleet-east",
    "config.policy=fgd",
    "metrics.port=9090",
    "podGroupCRD.install=true",
)


def one(objects: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind]
    return found


def rules(role: dict[str, Any]) -> set[Rule]:
    return {
        (group, resource, verb, name)
        for rule in role["rules"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
        for name in rule.get("resourceNames") or [""]
    }


def scheduler_role(objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The ClusterRole the scheduler runs with (the other is the metrics readers')."""
    (found,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRole" and not o["metadata"]["name"].endswith("-metrics-reader")
    ]
    return found


def container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    found: dict[str, Any]
    (found,) = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"]
    return found


@pytest.mark.parametrize("values", [(), NON_DEFAULT], ids=["default", "non-default"])
def test_the_chart_lints(helm: Callable[..., str], values: tuple[str, ...]) -> None:
    sets = [arg for value in values for arg in ("--set", value)]
    helm("lint", "--strict", str(CHART), "--namespace", NAMESPACE, *sets)


def test_by_default_two_replicas_elect_a_leader_on_a_lease_in_the_release_namespace(
    render: Render,
) -> None:
    objects = render()
    assert {o["kind"] for o in objects} == CORE_KINDS  # no ServiceMonitor unless asked
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    args = container(objects)["args"]
    assert args[0] == "serve"
    assert "--leader-elect=true" in args
    assert f"--leader-elect-resource-namespace={NAMESPACE}" in args
    assert "--leader-elect-resource-name=gpufleet" in args


def test_probes_ports_and_resources(render: Render) -> None:
    objects = render()
    c = container(objects)
    assert c["ports"] == [{"name": "https-metrics", "containerPort": 10259, "protocol": "TCP"}]
    probe = {"port": "https-metrics", "scheme": "HTTPS"}
    assert c["livenessProbe"]["httpGet"] == {"path": "/livez", **probe}
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", **probe}
    assert "--secure-port=10259" in c["args"]
    # The probes carry no credentials: their paths must be served without.
    assert "--authorization-always-allow-paths=/healthz,/readyz,/livez" in c["args"]
    assert set(c["resources"]["requests"]) == {"cpu", "memory"}
    service = one(objects, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "https-metrics"
    pod_labels = one(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()


def test_the_image_is_the_charts_app_version_by_default(render: Render) -> None:
    app_version = yaml.safe_load((CHART / "Chart.yaml").read_text())["appVersion"]
    assert container(render())["image"] == f"ghcr.io/gpufleet/gpufleet:{app_version}"


def test_the_pod_runs_restricted(render: Render) -> None:
    objects = render()
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container(objects)["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert pod["serviceAccountName"] == one(objects, "ServiceAccount")["metadata"]["name"]


def test_rbac_grants_exactly_what_the_scheduler_does(render: Render) -> None:
    objects = render()
    assert rules(scheduler_role(objects)) == SCHEDULER_RULES
    role = one(objects, "Role")
    assert role["metadata"]["namespace"] == NAMESPACE
    assert rules(role) == LEASE_RULES
    account = one(objects, "ServiceAccount")["metadata"]
    for binding, role in (
        ("ClusterRoleBinding", scheduler_role(objects)),
        ("RoleBinding", one(objects, "Role")),
    ):
        bound = one(objects, binding)
        assert bound["roleRef"]["kind"] == role["kind"]
        assert bound["roleRef"]["name"] == role["metadata"]["name"]
        assert bound["subjects"] == [
            {"kind": "ServiceAccount", "name": account["name"], "namespace": NAMESPACE}
        ]


def test_each_vocabulary_adds_list_and_watch_of_its_kinds_and_nothing_else(
    render: Render,
) -> None:
    for chosen in (["kai"], ["volcano", "capacityscheduling"], sorted(LIVE_VOCABULARIES)):
        objects = render("config.vocabularies={" + ",".join(chosen) + "}")
        added = {
            (v.rpartition("/")[0], plural, verb, "")
            for kind in kinds(frozenset(chosen))
            if kind not in KINDS
            for v, plural in [API[kind]]
            for verb in ("list", "watch")
        }
        assert added
        assert rules(scheduler_role(objects)) == SCHEDULER_RULES | added


def test_the_mounted_configuration_is_one_serve_reads(render: Render, tmp_path: Path) -> None:
    objects = render()
    config = one(objects, "ConfigMap")
    c = container(objects)
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "config"]
    (volume,) = [
        v
        for v in one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "config"
    ]
    assert volume["configMap"]["name"] == config["metadata"]["name"]
    assert f"--config={mount['mountPath']}/config.yaml" in c["args"]
    path = tmp_path / "config.yaml"
    path.write_text(config["data"]["config.yaml"])
    assert read_configuration(path, POLICIES, LIVE_VOCABULARIES) == {
        "scheduler_name": "gpufleet",
        "policy": "gpufleet",
        "period": 1.0,
        "starvation_after": 1800.0,
        "stale_grace": 60.0,
        "non_preemptible_priority": 100,
        "vocabulary": [],
        "leader_elect_lease_duration": 15.0,
        "leader_elect_renew_deadline": 10.0,
        "leader_elect_retry_period": 2.0,
    }


def test_non_default_values_reach_the_objects(render: Render, tmp_path: Path) -> None:
    objects = render(*NON_DEFAULT)
    assert {o["kind"] for o in objects} == CORE_KINDS | {
        "ServiceMonitor",
        "CustomResourceDefinition",
    }
    assert one(objects, "Deployment")["spec"]["replicas"] == 3
    c = container(objects)
    assert c["image"] == "registry.example.com/gpufleet:1.2.3"
    assert c["resources"] == {"requests": {"cpu": 2, "memory": "4Gi"}, "limits": {"memory": "8Gi"}}
    assert "--leader-elect-resource-name=gpufleet-east" in c["args"]
    assert "--secure-port=9090" in c["args"]
    assert c["ports"][0]["containerPort"] == 9090
    assert ("coordination.k8s.io", "leases", "update", "gpufleet-east") in rules(
        one(objects, "Role")
    )
    path = tmp_path / "config.yaml"
    path.write_text(one(objects, "ConfigMap")["data"]["config.yaml"])
    assert read_configuration(path, POLICIES)["policy"] == "fgd"
    monitor = one(objects, "ServiceMonitor")
    service = one(objects, "Service")
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"][0]["port"] == service["spec"]["ports"][0]["name"]
    assert service["spec"]["ports"][0]["port"] == 9090


def test_the_podgroup_crd_is_installed_only_when_asked(render: Render) -> None:
    """Off by default (it may be scheduler-plugins' already); on, it is the generator's
    PodGroup CRD, labelled as the chart's objects are and kept by helm on uninstall."""
    assert not [o for o in render() if o["kind"] == "CustomResourceDefinition"]
    objects = render("podGroupCRD.install=true")
    crd = one(objects, "CustomResourceDefinition")
    (generated,) = [d for d in definitions() if d["spec"]["names"]["kind"] == "PodGroup"]
    assert crd["metadata"]["name"] == "podgroups.scheduling.x-k8s.io"
    assert crd["spec"] == generated["spec"]
    assert crd["spec"]["names"]["shortNames"] == ["pg", "pgs"]
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    assert crd["metadata"]["labels"] == one(objects, "Deployment")["metadata"]["labels"]


@pytest.mark.parametrize("kubernetes", ["1.27.0", kubernetes_validate.latest_version()])
@pytest.mark.parametrize("values", [(), NON_DEFAULT], ids=["default", "non-default"])
def test_every_core_object_is_valid_kubernetes(
    render: Render, values: tuple[str, ...], kubernetes: str
) -> None:
    """Against the schemas of the oldest Kubernetes the chart allows (Chart.yaml's
    kubeVersion) and the newest kubernetes-validate bundles; the PodGroup CRD among them
    (non-default), which has no CEL rule and so installs on either. The ServiceMonitor is
    the Prometheus Operator's CRD, whose schema it does not bundle; it is checked above."""
    for obj in render(*values):
        if obj["kind"] == "ServiceMonitor":
            continue
        kubernetes_validate.validate(obj, kubernetes, strict=True)


def test_an_empty_config_renders_a_file_serve_reads(render: Render, tmp_path: Path) -> None:
    """``--set config=null`` (every setting left to serve's defaults) still renders, and
    the file it mounts is a valid, empty SchedulerConfiguration."""
    config = one(render("config=null"), "ConfigMap")
    path = tmp_path / "config.yaml"
    path.write_text(config["data"]["config.yaml"])
    assert read_configuration(path, POLICIES) == {}


def test_a_shadow_elects_on_a_lease_of_its_own(render: Render) -> None:
    """With --dry-run the chart's Lease is <name>-dry-run, in the flag and in the Role, so a
    shadow installed beside gpufleet never stops the scheduler it shadows."""
    objects = render("extraArgs={--dry-run}")
    assert "--leader-elect-resource-name=gpufleet-dry-run" in container(objects)["args"]
    names = {n for rule in one(objects, "Role")["rules"] for n in rule.get("resourceNames", [])}
    assert names == {"gpufleet-dry-run"}


def test_an_ipv6_cluster_can_have_the_endpoints_listen_on_ipv6(render: Render) -> None:
    assert "--bind-address=0.0.0.0" in container(render())["args"]
    assert "--bind-address=::" in container(render("metrics.address=::"))["args"]


def test_a_price_sheet_in_values_is_mounted_and_passed_and_reads(
    render: Render, tmp_path: Path
) -> None:
    assert "prices.yaml" not in one(render(), "ConfigMap")["data"]
    assert not any(a.startswith("--prices") for a in container(render())["args"])
    entry = "priceSheet.spec.nodeTypes[0]"
    objects = render(
        "priceSheet.apiVersion=gpufleet.io/v1alpha1",
        "priceSheet.kind=PriceSheet",
        "priceSheet.metadata.name=ours",
        "priceSheet.spec.title=our prices",
        "priceSheet.spec.currency=EUR",
        f"{entry}.name=h100",
        f"{entry}.gpuProduct=NVIDIA-H100-80GB-HBM3",
        f"{entry}.category=committed",
        f"{entry}.nodeHour=20",
    )
    assert "--prices=/etc/gpufleet/prices.yaml" in container(objects)["args"]
    path = tmp_path / "prices.yaml"
    path.write_text(one(objects, "ConfigMap")["data"]["prices.yaml"])
    sheet = load_price_sheet(path)
    assert (sheet.name, sheet.currency) == ("ours", "EUR")
    [h100] = sheet.types
    assert (h100.category, h100.per_node) == ("committed", 20.0)


def test_the_service_monitor_scrapes_over_https_with_prometheus_token(render: Render) -> None:
    monitor = one(render("serviceMonitor.enabled=true"), "ServiceMonitor")
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["port"] == "https-metrics"
    assert endpoint["bearerTokenFile"] == "/var/run/secrets/kubernetes.io/serviceaccount/token"
    assert endpoint["tlsConfig"] == {"insecureSkipVerify": True}  # the self-signed certificate


def test_the_metrics_reader_role_grants_get_on_metrics_to_the_subjects_given(
    render: Render,
) -> None:
    objects = render()
    (reader,) = [
        o for o in objects if o["metadata"]["name"] == f"{RELEASE}-gpufleet-metrics-reader"
    ]
    assert reader["kind"] == "ClusterRole"
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    assert len([o for o in objects if o["kind"] == "ClusterRoleBinding"]) == 1  # no subjects
    subject = "metrics.reader.subjects[0]"
    objects = render(
        f"{subject}.kind=ServiceAccount",
        f"{subject}.name=prometheus-k8s",
        f"{subject}.namespace=monitoring",
    )
    (binding,) = [
        o
        for o in objects
        if o["kind"] == "ClusterRoleBinding" and o["metadata"]["name"] == reader["metadata"]["name"]
    ]
    assert binding["roleRef"]["name"] == reader["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}
    ]


def test_a_tls_secret_is_mounted_and_served(render: Render) -> None:
    assert not any(a.startswith("--tls-") for a in container(render())["args"])
    objects = render("metrics.tls.secretName=gpufleet-serving")
    c = container(objects)
    (mount,) = [m for m in c["volumeMounts"] if m["name"] == "tls"]
    assert f"--tls-cert-file={mount['mountPath']}/tls.crt" in c["args"]
    assert f"--tls-private-key-file={mount['mountPath']}/tls.key" in c["args"]
    (volume,) = [
        v
        for v in one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "tls"
    ]
    assert volume["secret"] == {"secretName": "gpufleet-serving"}
