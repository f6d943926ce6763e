"""The review APIs a delegating server asks about its own callers (``kube/process/delegated.py``):
``TokenReview`` (``authentication.k8s.io/v1``, "Authenticating": webhook token
authentication) and ``SubjectAccessReview`` (``authorization.k8s.io/v1``, "Authorization":
checking API access). Both are create-only: the object posted comes back with its
``status`` filled in, and nothing is stored.

* A TokenReview authenticates ``spec.token`` as the emulator's request authentication does:
  the emulator's own token is an administrator (user ``emulator-admin`` in ``system:masters``,
  the group apiserver lets do anything); a token of the RBAC authorizer's is its identity;
  any other is ``authenticated: false``.
* A SubjectAccessReview judges ``spec.user``/``spec.groups`` against ``spec.resourceAttributes``
  (``namespace``, ``verb``, ``group``, ``resource``, ``subresource``, ``name``) or
  ``spec.nonResourceAttributes`` (``path``, ``verb``) with the rendered RBAC (``rbac.py``);
  with no RBAC configured every request is allowed, as with ``--authorization-mode=AlwaysAllow``.
  ``status.allowed`` and, when RBAC allowed it, ``reason`` as RBAC writes it; when nothing
  allowed it, ``allowed: false`` and no reason (RBAC never denies, it only fails to allow).
* A body without its ``spec`` fields is a 400 as apiserver's validation writes it.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tests.apiserver import errors
from tests.apiserver.handlers import Target, body, reply
from tests.apiserver.rbac import Attributes, Authorizer, Identity
from tests.apiserver.resources import Resource

JSON = dict[str, Any]
ADMIN = Identity("emulator-admin", ("system:masters", "system:authenticated"))


async def handle(
    request: web.Request, target: Target, rbac: Authorizer | None, own_token: str
) -> web.Response:
    resource = target.resource
    if request.method != "POST" or target.name or target.sub:
        raise errors.ApiError(
            405,
            "MethodNotAllowed",
            f"the server does not allow this method on the requested resource "
            f"({resource.qualified})",
        )
    obj = await body(request)
    if not isinstance(obj, dict) or not isinstance(obj.get("spec"), dict):
        raise errors.invalid(resource, "", "spec", "Required value")
    spec = obj["spec"]
    if resource.kind == "TokenReview":
        status = _token_review(spec, rbac, own_token, resource)
    else:
        status = _access_review(spec, rbac, resource)
    answer = {**obj, "apiVersion": resource.api_version, "kind": resource.kind}
    return reply({**answer, "metadata": {"creationTimestamp": None}, "status": status}, 201)


def _token_review(spec: JSON, rbac: Authorizer | None, own_token: str, resource: Resource) -> JSON:
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise errors.invalid(resource, "", "spec.token", "Required value")
    identity = ADMIN if token == own_token else rbac.identity(token) if rbac else None
    if identity is None:
        return {"authenticated": False, "user": {}, "error": "invalid bearer token"}
    return {
        "authenticated": True,
        "user": {"username": identity.user, "uid": "", "groups": list(identity.groups)},
    }


def _access_review(spec: JSON, rbac: Authorizer | None, resource: Resource) -> JSON:
    user, groups = spec.get("user"), spec.get("groups") or []
    if not isinstance(groups, list):
        groups = []
    if not (isinstance(user, str) and user) and not groups:
        raise errors.invalid(
            resource, "", "spec.user", "at least one of user or group must be specified"
        )
    judged, other = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (judged is None) == (other is None):
        raise errors.invalid(
            resource,
            "",
            "spec.resourceAttributes",
            "exactly one of nonResourceAttributes or resourceAttributes must be specified",
        )
    if isinstance(other, dict):
        attributes = Attributes(str(other.get("verb", "")), path=str(other.get("path", "")))
    else:
        r = judged if isinstance(judged, dict) else {}
        sub = str(r.get("subresource", ""))
        plural = str(r.get("resource", ""))
        attributes = Attributes(
            str(r.get("verb", "")),
            str(r.get("group", "")),
            f"{plural}/{sub}" if sub else plural,
            str(r.get("namespace", "")),
            str(r.get("name", "")),
        )
    identity = Identity(str(user or ""), tuple(g for g in groups if isinstance(g, str)))
    if rbac is None or "system:masters" in identity.groups:
        return {"allowed": True}
    if rbac.allowed(identity, attributes):
        return {"allowed": True, "reason": "RBAC: allowed by a binding of the subject"}
    return {"allowed": False}
