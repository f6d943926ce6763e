"""The status of an object the scheduler keeps (a PodGroup's, a Queue's), written as a
merge patch of its ``/status`` subresource only when it changes: what the server took is
remembered per object, and after a restart the object's own status counts as written, so
a new leader rewrites nothing that is already so. Only a replica that leads writes."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from typing import Any

import httpx

from gpufleet.kube.read.kinds import API
from gpufleet.kube.transport import send_json

log = logging.getLogger("gpufleet.serve")

JSON = dict[str, Any]


class StatusWriter:
    """Writes the status of objects of one ``kind`` (module docstring)."""

    def __init__(self, http: httpx.AsyncClient, kind: str) -> None:
        self.http, self.kind = http, kind
        self.written: dict[str, JSON] = {}
        """The status last written per object key (``namespace/name`` or name)."""
        self.patches = 0

    def keep_only(self, keys: Collection[str]) -> None:
        """Forget the objects not among ``keys`` (deleted)."""
        for key in [k for k in self.written if k not in keys]:
            del self.written[key]

    async def put(
        self, key: str, status: JSON, own: Mapping[str, Any], may_act: Callable[[], bool]
    ) -> bool:
        """Write ``status`` of object ``key`` unless it is what was last written or what
        the object says already (``own``); False when this replica may not write now."""
        if status == self.written.get(key):
            return True
        if status == own:  # the object says so already (a restart): nothing to write
            self.written[key] = status
            return True
        if not may_act():
            return False
        if await self._patch(key, status):
            self.written[key] = status
        return True

    async def _patch(self, key: str, status: JSON) -> bool:
        version, plural = API[self.kind]
        namespace, _, name = key.rpartition("/")
        where = f"namespaces/{namespace}/" if namespace else ""
        try:
            response = await send_json(
                self.http,
                "PATCH",
                f"/apis/{version}/{where}{plural}/{name}/status",
                {"status": status},
                "application/merge-patch+json",
            )
        except httpx.HTTPError as exc:
            log.warning("status of %s %s: %s", self.kind, key, exc)
            return False
        if response.status_code >= 300:
            log.warning("status of %s %s: %s", self.kind, key, response.status_code)
            return False
        self.patches += 1
        log.debug("%s %s: %s", self.kind, key, status)
        return True
