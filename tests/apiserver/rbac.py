"""Role-based access control in the emulator: a request made with a restricted identity's
token is allowed only when a rendered ClusterRole or Role bound to it grants it, so a test
that runs the scheduler as the chart's ServiceAccount fails on any verb the chart forgot.

The semantics are Kubernetes' ("Using RBAC Authorization"):

* A request's attributes (API concepts, "Request attributes for authorization"): its API
  group, its resource (``pods/binding`` for a subresource), its namespace, its name, and a
  verb from the HTTP method — GET and HEAD are ``get`` on a name, ``list`` on a collection,
  ``watch`` with ``?watch=1``; POST ``create``, PUT ``update``, PATCH ``patch``, DELETE
  ``delete`` on a name and ``deletecollection`` on a collection.
* A rule grants its ``verbs`` on its ``resources`` of its ``apiGroups``; ``*`` matches any,
  ``*/status`` any resource's status. With ``resourceNames`` it grants only requests naming
  one of them, so it never grants a ``create`` or a ``list`` (which name nothing).
* A ClusterRoleBinding grants its ClusterRole's rules in every namespace and at the cluster
  scope; a RoleBinding grants its Role's (or a ClusterRole's) rules in its own namespace only.
* Subjects: a ServiceAccount is the user ``system:serviceaccount:<namespace>:<name>`` in the
  groups ``system:serviceaccounts``, ``system:serviceaccounts:<namespace>`` and
  ``system:authenticated``; ``User`` and ``Group`` subjects match by name.
* RBAC only allows; what no rule allows is denied: 403 ``Forbidden`` with apiserver's own
  message (``responsewriters.Forbidden``), e.g. ``pods "p" is forbidden: User
  "system:serviceaccount:ns:sa" cannot create resource "pods/binding" in API group "" in the
  namespace "default"``.
* Discovery and health (``/api``, ``/apis``, ``/version``, ``/healthz``...) are granted to
  every authenticated user by the default ``system:discovery`` and
  ``system:public-info-viewer`` bindings; any other non-resource path is denied.

:class:`Authorizer` keeps what it allowed (``used``) and what it refused (``denied``), so a
test can list the rules a role grants that nothing ever used (:func:`unused`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tests.apiserver import errors

JSON = dict[str, Any]
DISCOVERY = ("/api", "/apis", "/version", "/healthz", "/livez", "/readyz", "/openapi")

Rule = tuple[str, str, str, str]
"""(apiGroup, resource, verb, resourceName or "") — one permission, as rendered rules expand."""


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a token authenticates as."""

    user: str
    groups: tuple[str, ...] = ("system:authenticated",)

    @staticmethod
    def service_account(namespace: str, name: str) -> Identity:
        return Identity(
            f"system:serviceaccount:{namespace}:{name}",
            (
                "system:serviceaccounts",
                f"system:serviceaccounts:{namespace}",
                "system:authenticated",
            ),
        )


@dataclass(frozen=True, slots=True)
class Attributes:
    """What RBAC judges of a request (see the module docstring)."""

    verb: str
    group: str = ""
    resource: str = ""
    """With its subresource: ``pods/binding``. Empty for a non-resource request."""
    namespace: str = ""
    name: str = ""
    path: str = ""


def verb(method: str, *, named: bool, watch: bool) -> str:
    """The verb of a request on a resource path (API concepts; see the module docstring)."""
    if method in {"GET", "HEAD"}:
        return "watch" if watch else ("get" if named else "list")
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    return {"POST": "create", "PUT": "update", "PATCH": "patch"}.get(method, method.lower())


def _matches(patterns: Iterable[str], value: str) -> bool:
    return any(p in {"*", value} for p in patterns)


def _resource_matches(patterns: Iterable[str], resource: str) -> bool:
    sub = resource.partition("/")[2]
    return any(p in {"*", resource} or (sub and p == f"*/{sub}") for p in patterns)


def allows(rule: Mapping[str, Any], request: Attributes) -> bool:
    """Whether one PolicyRule grants the request (rbac/v1 ``RuleAllows``)."""
    if not request.resource:
        return _matches(rule.get("verbs") or [], request.verb) and any(
            u == request.path or (u.endswith("*") and request.path.startswith(u[:-1]))
            for u in rule.get("nonResourceURLs") or []
        )
    names = rule.get("resourceNames") or []
    return (
        _matches(rule.get("verbs") or [], request.verb)
        and _matches(rule.get("apiGroups") or [], request.group)
        and _resource_matches(rule.get("resources") or [], request.resource)
        and (not names or request.name in names)
    )


def forbidden(identity: Identity, request: Attributes) -> errors.ApiError:
    """apiserver's 403: ``NewForbidden`` of ``forbiddenMessage``."""
    user = identity.user
    if not request.resource:
        why = f'User "{user}" cannot {request.verb} path "{request.path}"'
        return errors.ApiError(403, "Forbidden", f"forbidden: {why}")
    where = (
        f'in the namespace "{request.namespace}"' if request.namespace else "at the cluster scope"
    )
    why = (
        f'User "{user}" cannot {request.verb} resource "{request.resource}" '
        f'in API group "{request.group}" {where}'
    )
    plural = request.resource.partition("/")[0]
    qualified = f"{plural}.{request.group}" if request.group else plural
    subject = f'{qualified} "{request.name}"' if request.name else qualified
    details = {"name": request.name, "group": request.group, "kind": plural}
    return errors.ApiError(403, "Forbidden", f"{subject} is forbidden: {why}", details)


@dataclass(frozen=True, slots=True)
class _Grant:
    rules: tuple[JSON, ...]
    namespace: str
    """Empty for a ClusterRoleBinding: everywhere."""


class Authorizer:
    """RBAC over rendered objects (ClusterRole, Role, ClusterRoleBinding, RoleBinding; any
    other kind is ignored) for the identities of ``tokens``."""

    def __init__(self, objects: Iterable[Mapping[str, Any]], tokens: Mapping[str, Identity]):
        objects = list(objects)
        roles = {
            (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): tuple(
                o.get("rules") or []
            )
            for o in objects
            if o.get("kind") in {"ClusterRole", "Role"}
        }
        self.bindings: list[tuple[tuple[JSON, ...], _Grant]] = []
        for o in objects:
            if o.get("kind") not in {"ClusterRoleBinding", "RoleBinding"}:
                continue
            ref, namespace = o["roleRef"], o["metadata"].get("namespace", "")
            scope = namespace if ref["kind"] == "Role" else ""
            rules = roles.get((ref["kind"], scope, ref["name"]), ())
            within = namespace if o["kind"] == "RoleBinding" else ""
            self.bindings.append((tuple(o.get("subjects") or []), _Grant(rules, within)))
        self.tokens = dict(tokens)
        self.used: list[Attributes] = []
        self.denied: list[tuple[Identity, Attributes]] = []
        self._lock = threading.Lock()

    @property
    def rules(self) -> list[Mapping[str, Any]]:
        return [rule for _, grant in self.bindings for rule in grant.rules]

    def identity(self, token: str) -> Identity | None:
        return self.tokens.get(token)

    def authorize(self, identity: Identity, request: Attributes) -> None:
        """Record the request as used, or raise its 403."""
        if not request.resource and request.path.startswith(DISCOVERY):
            with self._lock:
                self.used.append(request)
        elif not self.allowed(identity, request):
            with self._lock:
                self.denied.append((identity, request))
            raise forbidden(identity, request)

    def allowed(self, identity: Identity, request: Attributes) -> bool:
        """Whether a rule bound to ``identity`` grants the request (a SubjectAccessReview
        asks this of the requests of a delegating server); what it allows counts as used."""
        allowed = any(
            self._subject(subject, identity)
            and (not grant.namespace or grant.namespace == request.namespace)
            and any(allows(rule, request) for rule in grant.rules)
            for subjects, grant in self.bindings
            for subject in subjects
        )
        if allowed:
            with self._lock:
                self.used.append(request)
        return allowed

    @staticmethod
    def _subject(subject: Mapping[str, Any], identity: Identity) -> bool:
        kind, name = subject.get("kind"), subject.get("name")
        if kind == "ServiceAccount":
            return identity.user == f"system:serviceaccount:{subject.get('namespace')}:{name}"
        if kind == "User":
            return identity.user == name
        return kind == "Group" and name in identity.groups


NON_RESOURCE = "nonResourceURLs"
"""The group of a permission on a non-resource URL (its resource is the URL)."""


def expand(role: Mapping[str, Any]) -> set[Rule]:
    """A role's rules, one permission each; a non-resource URL's as
    ``(NON_RESOURCE, url, verb, "")``."""
    resources = {
        (group, resource, verb, name)
        for rule in role.get("rules") or []
        for group in rule.get("apiGroups") or []
        for resource in rule.get("resources") or []
        for verb in rule.get("verbs") or []
        for name in rule.get("resourceNames") or [""]
    }
    return resources | {
        (NON_RESOURCE, url, verb, "")
        for rule in role.get("rules") or []
        for url in rule.get("nonResourceURLs") or []
        for verb in rule.get("verbs") or []
    }


def unused(granted: Iterable[Rule], used: Iterable[Attributes]) -> set[Rule]:
    """The permissions no allowed request exercised."""
    used = list(used)

    def exercised(permission: Rule) -> bool:
        group, resource, verb_, name = permission
        if group == NON_RESOURCE:
            url = {"nonResourceURLs": [resource], "verbs": [verb_]}
            return any(allows(url, request) for request in used if not request.resource)
        rule = {
            "apiGroups": [group],
            "resources": [resource],
            "verbs": [verb_],
            "resourceNames": [name] if name else [],
        }
        return any(allows(rule, request) for request in used)

    return {p for p in granted if not exercised(p)}
