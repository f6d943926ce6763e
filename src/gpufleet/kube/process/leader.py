"""Leader election on a ``coordination.k8s.io/v1`` Lease, as kube-scheduler's (client-go's
leaderelection) does it, so that two replicas never both bind.

* **Acquire**: read the Lease; create it if there is none; take it over if its holder's
  record has not changed for ``lease_s`` *as observed by this replica* (client-go compares
  against its own clock when it last saw the record change, never against the holder's
  timestamps, so clock skew between replicas does not matter); otherwise retry every
  ``retry_s``. Every write carries the ``resourceVersion`` read, so two candidates cannot
  both win: the second gets 409.
* **Renew** every ``retry_s``; a leader that has not renewed for ``renew_deadline_s`` (less
  than ``lease_s``) stops being leader — :meth:`LeaderElector.may_act` is False from that
  moment, before any other replica may take the Lease over — and the work it led stops.
* Defaults are kube-scheduler's: 15 s lease, 10 s renew deadline, 2 s retry.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

from gpufleet.kube.write.recorder import micro_time

log = logging.getLogger("gpufleet.leader")


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    namespace: str = "kube-system"
    name: str = "gpufleet"
    identity: str = ""
    lease_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_s: float = 2.0


class LeaderElector:
    def __init__(
        self,
        http: httpx.AsyncClient,
        config: LeaseConfig,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.http, self.config, self.clock, self.wall = http, config, clock, wall
        self.path = (
            f"/apis/coordination.k8s.io/v1/namespaces/{config.namespace}/leases/{config.name}"
        )
        self.renewed_at: float | None = None
        """When this replica last renewed (its own clock); None: not leader."""
        self._seen: tuple[str, float] | None = None
        """The other holder's record (its resourceVersion) and when this replica saw it
        change."""
        self.transitions = 0

    def may_act(self) -> bool:
        """Whether this replica leads now: it renewed within the renew deadline."""
        return (
            self.renewed_at is not None
            and self.clock() - self.renewed_at < self.config.renew_deadline_s
        )

    async def acquire(self, stop: asyncio.Event) -> bool:
        """Wait until this replica holds the Lease (True) or ``stop`` is set (False)."""
        while not stop.is_set():
            if await self._try():
                c = self.config
                log.info("became leader as %s (lease %s/%s)", c.identity, c.namespace, c.name)
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.config.retry_s)
        return False

    async def hold(self, stop: asyncio.Event, lost: asyncio.Event) -> None:
        """Renew until ``stop``; set ``lost`` (and stop renewing) once the renew deadline
        passed without a renewal."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=self.config.retry_s)
            if stop.is_set():
                break
            if not await self._try() and not self.may_act():
                log.warning("lost leadership: could not renew within the deadline")
                self.renewed_at = None
                lost.set()
                return

    async def release(self) -> None:
        """Give the Lease up (on a clean stop), so that another replica need not wait."""
        if self.renewed_at is None:
            return
        self.renewed_at = None
        try:
            lease = await self._read()
            if lease is None or _holder(lease) != self.config.identity:
                return
            lease["spec"]["holderIdentity"] = ""
            await self.http.put(self.path, json=lease)
        except httpx.HTTPError:
            return

    async def _try(self) -> bool:
        """One attempt to acquire or renew; whether this replica holds the Lease now."""
        try:
            lease = await self._read()
            now, wall = self.clock(), self.wall()
            if lease is None:
                body = self._lease(None, wall, acquired=True)
                response = await self.http.post(self.path.rsplit("/", 1)[0], json=body)
                return self._won(response, now)
            holder = _holder(lease)
            version = str(lease["metadata"].get("resourceVersion", ""))
            mine = holder == self.config.identity
            if not mine and holder:
                if self._seen is None or self._seen[0] != version:
                    self._seen = (version, now)
                    return False
                if now - self._seen[1] < self.config.lease_s:
                    return False
            body = self._lease(lease, wall, acquired=not mine)
            response = await self.http.put(self.path, json=body)
            return self._won(response, now)
        except httpx.HTTPError as exc:
            log.warning("lease %s: %s", self.path, exc)
            return False

    def _won(self, response: httpx.Response, now: float) -> bool:
        if response.status_code in (200, 201):
            self.renewed_at = now
            self._seen = None
            return True
        return False

    async def _read(self) -> dict[str, Any] | None:
        response = await self.http.get(self.path)
        if response.status_code == 404:
            return None
        response.raise_for_status()
        body: dict[str, Any] = response.json()
        return body

    def _lease(
        self, current: dict[str, Any] | None, wall: float, *, acquired: bool
    ) -> dict[str, Any]:
        spec: dict[str, Any] = dict((current or {}).get("spec") or {})
        stamp = micro_time(wall)
        spec["holderIdentity"] = self.config.identity
        spec["leaseDurationSeconds"] = round(self.config.lease_s)
        spec["renewTime"] = stamp
        if acquired:
            spec["acquireTime"] = stamp
            if current is not None:
                spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        meta: dict[str, Any] = {"name": self.config.name, "namespace": self.config.namespace}
        if current is not None:
            meta["resourceVersion"] = current["metadata"]["resourceVersion"]
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": meta,
            "spec": spec,
        }


def _holder(lease: dict[str, Any]) -> str:
    return str((lease.get("spec") or {}).get("holderIdentity") or "")
