"""RBAC in the emulator (``rbac.py``): a restricted token gets what its bound roles grant
and a 403 in apiserver's words otherwise; the emulator's own token stays unrestricted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.apiserver.rbac import Attributes, Authorizer, Identity, unused, verb
from tests.apiserver.server import Emulator

JSON = dict[str, Any]
ACCOUNT = Identity.service_account("ops", "robot")
SUBJECT = {"kind": "ServiceAccount", "name": "robot", "namespace": "ops"}
CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
]
ROLE_RULES = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    {
        "apiGroups": ["coordination.k8s.io"],
        "resources": ["leases"],
        "resourceNames": ["mine"],
        "verbs": ["get", "update"],
    },
]
OBJECTS: list[JSON] = [
    {"kind": "ClusterRole", "metadata": {"name": "reader"}, "rules": CLUSTER_RULES},
    {
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "reader"},
        "roleRef": {"kind": "ClusterRole", "name": "reader"},
        "subjects": [SUBJECT],
    },
    {"kind": "Role", "metadata": {"name": "lease", "namespace": "ops"}, "rules": ROLE_RULES},
    {
        "kind": "RoleBinding",
        "metadata": {"name": "lease", "namespace": "ops"},
        "roleRef": {"kind": "Role", "name": "lease"},
        "subjects": [SUBJECT],
    },
]
LEASES = "/apis/coordination.k8s.io/v1/namespaces"


@pytest.fixture
def secured() -> Iterator[Emulator]:
    rbac = Authorizer(OBJECTS, {"robot-token": ACCOUNT})
    server = Emulator(rbac=rbac).start()
    store = server.store
    store.create(store.resource("", "v1", "namespaces"), "", {"metadata": {"name": "ops"}})
    store.create(store.resource("", "v1", "pods"), "default", {"metadata": {"name": "p"}})
    try:
        yield server
    finally:
        server.stop()


def as_robot(emulator: Emulator) -> httpx.Client:
    return httpx.Client(base_url=emulator.url, headers={"Authorization": "Bearer robot-token"})


@pytest.mark.parametrize(
    ("method", "named", "watch", "expected"),
    [
        ("GET", True, False, "get"),
        ("GET", False, False, "list"),
        ("GET", False, True, "watch"),
        ("POST", False, False, "create"),
        ("PUT", True, False, "update"),
        ("PATCH", True, False, "patch"),
        ("DELETE", True, False, "delete"),
        ("DELETE", False, False, "deletecollection"),
    ],
)
def test_the_verb_of_a_request(method: str, named: bool, watch: bool, expected: str) -> None:
    assert verb(method, named=named, watch=watch) == expected


@pytest.mark.parametrize(
    ("method", "path", "code"),
    [
        pytest.param("GET", "/api/v1/pods", 200, id="list-cluster-wide"),
        pytest.param("GET", "/api/v1/namespaces/default/pods/p", 200, id="get"),
        pytest.param("GET", "/api/v1/nodes", 403, id="list-not-granted"),
        pytest.param("DELETE", "/api/v1/namespaces/default/pods/p", 403, id="delete-not-granted"),
        pytest.param("GET", f"{LEASES}/ops/leases/mine", 404, id="get-its-own-lease"),
        pytest.param("GET", f"{LEASES}/ops/leases/other", 403, id="get-another-lease"),
        pytest.param("GET", f"{LEASES}/default/leases/mine", 403, id="role-outside-namespace"),
        pytest.param("GET", f"{LEASES}/ops/leases", 403, id="list-with-resource-names"),
        pytest.param("GET", "/apis", 200, id="discovery"),
        pytest.param("GET", "/_emulator/writes", 200, id="emulator-controls"),
    ],
)
def test_what_the_roles_grant(secured: Emulator, method: str, path: str, code: int) -> None:
    with as_robot(secured) as http:
        assert http.request(method, path).status_code == code


def test_a_create_is_granted_without_resource_names(secured: Emulator) -> None:
    lease = {"metadata": {"name": "mine"}, "spec": {}}
    with as_robot(secured) as http:
        assert http.post(f"{LEASES}/ops/leases", json=lease).status_code == 201
        assert http.put(f"{LEASES}/ops/leases/mine", json=lease).status_code == 200


def test_a_denial_is_apiservers_forbidden(secured: Emulator) -> None:
    with as_robot(secured) as http:
        response = http.post("/api/v1/namespaces/default/pods/p/eviction", json={})
    assert response.status_code == 403
    assert response.json() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "p" is forbidden: User "system:serviceaccount:ops:robot" cannot create '
        'resource "pods/eviction" in API group "" in the namespace "default"',
        "reason": "Forbidden",
        "code": 403,
        "details": {"name": "p", "group": "", "kind": "pods"},
    }
    assert secured.rbac is not None
    [(who, what)] = secured.rbac.denied
    assert (who, what.verb, what.resource) == (ACCOUNT, "create", "pods/eviction")


def test_a_cluster_scoped_denial_says_so(secured: Emulator) -> None:
    with as_robot(secured) as http:
        message = http.get("/apis/coordination.k8s.io/v1/leases").json()["message"]
    assert message == (
        'leases.coordination.k8s.io is forbidden: User "system:serviceaccount:ops:robot" '
        'cannot list resource "leases" in API group "coordination.k8s.io" at the cluster scope'
    )


def test_the_emulators_token_is_unrestricted_and_others_are_unauthorized(
    secured: Emulator,
) -> None:
    admin = {"Authorization": f"Bearer {secured.token}"}
    with httpx.Client(base_url=secured.url) as http:
        assert http.get("/api/v1/nodes", headers=admin).status_code == 200
        assert http.get("/api/v1/nodes").status_code == 401
        assert http.get("/api/v1/nodes", headers={"Authorization": "Bearer x"}).status_code == 401


def test_the_permissions_never_used_are_listed(secured: Emulator) -> None:
    with as_robot(secured) as http:
        http.get("/api/v1/pods")
        http.get(f"{LEASES}/ops/leases/mine")
    assert secured.rbac is not None
    granted = {
        ("", "pods", "get", ""),
        ("", "pods", "list", ""),
        ("coordination.k8s.io", "leases", "get", "mine"),
        ("coordination.k8s.io", "leases", "update", "mine"),
    }
    assert unused(granted, secured.rbac.used) == {
        ("", "pods", "get", ""),
        ("coordination.k8s.io", "leases", "update", "mine"),
    }
    assert Attributes("list", "", "pods", "", "", "/api/v1/pods") in secured.rbac.used
