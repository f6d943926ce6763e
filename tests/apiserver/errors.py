"""Failures as the apiserver reports them: a ``Status`` object with ``reason`` and ``code``.

API conventions, "Response Status Kind": an error answers with ``kind: Status``,
``status: Failure``, a machine-readable ``reason`` (``NotFound``, ``AlreadyExists``,
``Conflict``, ``Gone``, ``Expired``, ``TooManyRequests``, ``Invalid``, ``BadRequest``, ...),
the HTTP ``code`` and a human ``message``. The messages below are apiserver's own
(k8s.io/apimachinery ``pkg/api/errors``), so that a client that matches on them behaves as it
would against a real cluster.
"""

from __future__ import annotations

from typing import Any

from tests.apiserver.resources import Resource

JSON = dict[str, Any]


class ApiError(Exception):
    """A request the emulator refuses; ``status`` is the body, ``status['code']`` the HTTP code."""

    def __init__(self, code: int, reason: str, message: str, details: JSON | None = None):
        super().__init__(message)
        self.code = code
        self.status: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }
        if details:
            self.status["details"] = details


def success(code: int, details: JSON | None = None) -> JSON:
    """The ``Status`` of success that binding and eviction answer with."""
    body: JSON = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
    if details:
        body["details"] = details
    body["code"] = code
    return body


def _details(resource: Resource, name: str) -> JSON:
    return {"name": name, "group": resource.group, "kind": resource.plural}


def not_found(resource: Resource, name: str) -> ApiError:
    return ApiError(
        404, "NotFound", f'{resource.qualified} "{name}" not found', _details(resource, name)
    )


def already_exists(resource: Resource, name: str) -> ApiError:
    return ApiError(
        409,
        "AlreadyExists",
        f'{resource.qualified} "{name}" already exists',
        _details(resource, name),
    )


def conflict(qualified: str, name: str, why: str, group: str = "") -> ApiError:
    """``Operation cannot be fulfilled on <resource> "<name>": <why>`` (errors.NewConflict)."""
    return ApiError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified} "{name}": {why}',
        {"name": name, "group": group, "kind": qualified.split(".", maxsplit=1)[0]},
    )


STALE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def stale(resource: Resource, name: str) -> ApiError:
    """The optimistic-concurrency failure (API concepts, "Resource versions"; API
    conventions, "Concurrency Control and Consistency")."""
    return conflict(resource.qualified, name, STALE, resource.group)


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def invalid(resource: Resource, name: str, field: str, why: str) -> ApiError:
    """A 422 naming the field (errors.NewInvalid)."""
    cause = {"reason": "FieldValueRequired", "message": why, "field": field}
    message = f'{resource.kind} "{name}" is invalid: {field}: {why}'
    details = {**_details(resource, name), "kind": resource.kind, "causes": [cause]}
    return ApiError(422, "Invalid", message, details)


def expired(message: str) -> ApiError:
    """410 ``Expired``: a watch or a continue token from a compacted resourceVersion."""
    return ApiError(410, "Expired", message)


def gone(message: str) -> ApiError:
    """410 ``Gone``: an exact list at a compacted resourceVersion."""
    return ApiError(410, "Gone", message)


def too_large(requested: int, current: int) -> ApiError:
    """504: a resourceVersion the server has not reached (API concepts, "Resource versions":
    "the server ... returns a 504 ... Too large resource version")."""
    cause = {"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}
    return ApiError(
        504,
        "Timeout",
        f"Too large resource version: {requested}, current: {current}",
        {"causes": [cause], "retryAfterSeconds": 1},
    )


def unsupported_media_type(accepted: list[str]) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted media types include: "
        f"{', '.join(accepted)}",
    )
