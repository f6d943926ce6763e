"""The emulator's etcd: every object, one revision counter and a bounded window of changes.

* One global ``revision``, as etcd's: every write (create, update, delete) takes the next
  one, and it is the written object's ``metadata.resourceVersion`` (API concepts, "Resource
  versions": opaque strings to clients, here the decimal revision). A list's
  ``metadata.resourceVersion`` is the revision it was read at.
* The server sets ``metadata.uid`` (a UUID4 drawn from the seeded ``random.Random`` passed
  in, so a run is reproducible), ``resourceVersion`` and ``creationTimestamp`` (RFC 3339 in
  UTC, from the clock passed in); a client's values of these are ignored on create (API
  conventions, "Metadata"). ``generateName`` gets five random characters, as apiserver's
  ``SimpleNameGenerator`` does. ``metadata.generation`` is not kept.
* Optimistic concurrency (API conventions, "Concurrency Control and Consistency"): an update
  whose ``metadata.resourceVersion`` is not the stored one is a 409 Conflict; one without it
  is unconditional. An update that changes nothing writes nothing and keeps the
  resourceVersion, as apiserver's ``GuaranteedUpdate`` does.
* Status subresource ("Resources: status subresource" in the API conventions, and for custom
  resources "Extend the Kubernetes API with CustomResourceDefinitions: Status subresource"):
  see ``resources.py``.
* Finalizers ("Finalizers" concept): deleting an object with ``metadata.finalizers`` sets
  ``deletionTimestamp`` and keeps it; the update that empties the list removes it.
* Namespaces: a namespaced object needs its namespace ("Namespaces": admission's
  NamespaceLifecycle answers ``namespaces "x" not found``). ``default``, ``kube-system``,
  ``kube-public`` and ``kube-node-lease`` exist from the start. Deleting a namespace deletes
  what is in it at once, where apiserver's namespace controller does it in the background.
* Pods are removed at once on delete (there is no kubelet to end them gracefully), as
  apiserver does for a pod that is not bound or with ``gracePeriodSeconds=0``.
* The window: the last ``window`` changes are kept, as the watch cache keeps a bounded
  history (API concepts, "Efficient detection of changes"). Changes older than the window
  are compacted: a watch or an exact list from before them is answered 410.
* ``writes`` is an append-only log of every applied write, for tests to inspect.

The store is shared by the server's event loop and the test's thread: every operation holds
one lock. Listeners (the open watches) are called under it after each write; they only wake
their watch on its loop, which then reads the window.
"""

from __future__ import annotations

import builtins
import copy
import string
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from random import Random
from typing import Any

from tests.apiserver import errors
from tests.apiserver.resources import RESOURCES, Resource, find
from tests.apiserver.views import to_storage, to_view

JSON = dict[str, Any]
Key = tuple[str, str]  # (namespace, name); namespace "" for a cluster-scoped object
Mutation = Callable[[JSON], JSON]

NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
SERVER_SET = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")


@dataclass(frozen=True, slots=True)
class Change:
    """One entry of the window: what a write did to one stored object. ``obj`` is the object
    after the write (for ``DELETED``, its last state at the deletion's revision), ``prev``
    the object before it (``None`` for ``ADDED``)."""

    revision: int
    storage: str
    type: str
    obj: JSON
    prev: JSON | None


@dataclass(frozen=True, slots=True)
class Write:
    """One applied write, as tests read it: ``verb`` is create, update, patch, delete, bind,
    evict, ...; ``resource`` the qualified resource, with ``/status`` for the subresource."""

    verb: str
    resource: str
    namespace: str
    name: str
    uid: str
    resource_version: str
    time: str


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _meta(obj: JSON) -> JSON:
    meta: JSON = obj.setdefault("metadata", {})
    return meta


class Store:
    """See the module docstring. Every method takes and returns objects as ``resource``
    serves them (with ``apiVersion`` and ``kind``); they are copies."""

    def __init__(
        self,
        *,
        rng: Random,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        window: int = 1000,
    ) -> None:
        self.rng = rng
        self.clock = clock
        self.revision = 0
        self.compacted = 0
        self.writes: list[Write] = []
        self._objects: dict[str, dict[Key, JSON]] = {r.storage_key: {} for r in RESOURCES}
        self._changes: deque[Change] = deque(maxlen=window)
        self._lock = threading.RLock()
        self._listeners: set[Callable[[], None]] = set()
        namespaces = self.resource("", "v1", "namespaces")
        for name in NAMESPACES:
            self.create(namespaces, "", {"metadata": {"name": name}})

    # -- lookup -----------------------------------------------------------------------------

    @staticmethod
    def resource(group: str, version: str, plural: str) -> Resource:
        found = find(group, version, plural)
        if found is None:
            raise KeyError(f"no resource {plural} in {group or 'core'}/{version}")
        return found

    def subscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.add(listener)

    def unsubscribe(self, listener: Callable[[], None]) -> None:
        with self._lock:
            self._listeners.discard(listener)

    # -- reads ------------------------------------------------------------------------------

    def get(self, resource: Resource, namespace: str, name: str) -> JSON:
        with self._lock:
            stored = self._objects[resource.storage_key].get(self._key(resource, namespace, name))
            if stored is None:
                raise errors.not_found(resource, name)
            return to_view(resource, stored)

    def list(
        self, resource: Resource, namespace: str = "", *, at: int | None = None
    ) -> tuple[list[JSON], int]:
        """Objects in key order (namespace, name) and the revision they were read at; ``at``
        reads the state of an earlier revision still in the window (an exact list)."""
        with self._lock:
            objects = dict(self._objects[resource.storage_key])
            revision = self.revision
            if at is not None and at != revision:
                if at > revision:
                    raise errors.too_large(at, revision)
                if at < self.compacted:
                    raise errors.gone("The resourceVersion for the provided list is too old.")
                for change in reversed(self._changes):
                    if change.revision <= at:
                        break
                    if change.storage != resource.storage_key:
                        continue
                    key = self._stored_key(change.obj)
                    if change.prev is None:
                        objects.pop(key, None)
                    else:
                        objects[key] = change.prev
                revision = at
            items = [
                to_view(resource, obj)
                for key, obj in sorted(objects.items())
                if not namespace or key[0] == namespace
            ]
            return items, revision

    def changes_since(self, revision: int) -> builtins.list[Change]:
        """The changes after ``revision``; 410 Expired when some have left the window."""
        with self._lock:
            if revision < self.compacted:
                raise errors.expired(f"too old resource version: {revision} ({self.compacted})")
            return [change for change in self._changes if change.revision > revision]

    # -- writes -----------------------------------------------------------------------------

    def create(
        self,
        resource: Resource,
        namespace: str,
        obj: JSON,
        *,
        keep_status: bool = False,
        verb: str = "create",
    ) -> JSON:
        """POST: a new object (409 AlreadyExists when the name is taken). ``keep_status``
        keeps the status it is given, for tests that seed a cluster (no HTTP request can)."""
        with self._lock:
            stored = to_storage(resource, obj)
            meta = _meta(stored)
            namespace = self._namespace(resource, namespace, meta)
            if not meta.get("name") and meta.get("generateName"):
                alphabet = string.ascii_lowercase + string.digits
                suffix = "".join(self.rng.choice(alphabet) for _ in range(5))
                meta["name"] = meta["generateName"] + suffix
            if not meta.get("name"):
                raise errors.invalid(
                    resource,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                )
            key = (namespace, meta["name"])
            if key in self._objects[resource.storage_key]:
                raise errors.already_exists(resource, meta["name"])
            for field in SERVER_SET:
                meta.pop(field, None)
            meta["uid"] = str(uuid.UUID(int=self.rng.getrandbits(128), version=4))
            meta["creationTimestamp"] = rfc3339(self.clock())
            if resource.status and not keep_status and resource.initial_status is not None:
                stored["status"] = copy.deepcopy(resource.initial_status)
            return self._write(resource, verb, key, stored, None)

    def update(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        obj: JSON,
        *,
        subresource: str = "",
        verb: str = "update",
    ) -> JSON:
        """PUT: replace the object, or only its status through ``subresource="status"``."""
        incoming = to_storage(resource, obj)
        meta = _meta(incoming)
        if meta.get("name", name) != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL "
                f"({name})"
            )
        self._namespace(resource, namespace, meta)

        def replace(current: JSON) -> JSON:
            return incoming

        return self.mutate(resource, namespace, name, replace, subresource=subresource, verb=verb)

    def mutate(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        change: Mutation,
        *,
        subresource: str = "",
        verb: str = "update",
    ) -> JSON:
        """Read, change and write one object under the lock: the update behind PUT, PATCH and
        the subresources. ``change`` gets the stored object (a copy, in ``resource``'s view)
        and returns the new one; its ``metadata.resourceVersion``, if any, is a precondition.
        ``subresource`` is "" for the resource itself (its status is kept), ``status`` (only
        the status changes) or the name of a subresource whose change is trusted whole
        (``binding`` sets the node and a condition)."""
        with self._lock:
            key = self._key(resource, namespace, name)
            current = self._objects[resource.storage_key].get(key)
            if current is None:
                raise errors.not_found(resource, name)
            new = to_storage(resource, change(to_view(resource, current)))
            meta = _meta(new)
            version = meta.get("resourceVersion")
            if version and version != current["metadata"]["resourceVersion"]:
                raise errors.stale(resource, name)
            uid = meta.get("uid")
            if uid and uid != current["metadata"]["uid"]:
                raise errors.conflict(
                    resource.qualified,
                    name,
                    f"Precondition failed: UID in precondition: {uid}, "
                    f"UID in object meta: {current['metadata']['uid']}",
                    resource.group,
                )
            new = self._carry_over(resource, name, current, new, subresource)
            if new == current:
                return to_view(resource, current)
            qualified = f"{resource.qualified}/{subresource}" if subresource else resource.qualified
            if new["metadata"].get("deletionTimestamp") and not new["metadata"].get("finalizers"):
                return self._write(resource, verb, key, None, current, log_as=qualified)
            return self._write(resource, verb, key, new, current, log_as=qualified)

    def delete(
        self,
        resource: Resource,
        namespace: str,
        name: str,
        *,
        uid: str | None = None,
        resource_version: str | None = None,
        verb: str = "delete",
    ) -> tuple[JSON, bool]:
        """DELETE with its preconditions: the object's last state, and whether it is gone
        (False: it has finalizers and now a deletionTimestamp)."""
        with self._lock:
            key = self._key(resource, namespace, name)
            current = self._objects[resource.storage_key].get(key)
            if current is None:
                raise errors.not_found(resource, name)
            meta = current["metadata"]
            for field, wanted in (("UID", uid), ("ResourceVersion", resource_version)):
                have = meta["uid" if field == "UID" else "resourceVersion"]
                if wanted and wanted != have:
                    raise errors.conflict(
                        resource.qualified,
                        name,
                        f"Precondition failed: {field} in precondition: {wanted}, "
                        f"{field} in object meta: {have}",
                        resource.group,
                    )
            if meta.get("finalizers"):
                if meta.get("deletionTimestamp"):
                    return to_view(resource, current), False
                marked = copy.deepcopy(current)
                marked["metadata"]["deletionTimestamp"] = rfc3339(self.clock())
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                return self._write(resource, verb, key, marked, current), False
            if resource.plural == "namespaces" and not resource.group:
                for other in RESOURCES:
                    if other.namespaced and other.storage_key == f"{other.group}/{other.plural}":
                        for inside in [k for k in self._objects[other.storage_key] if k[0] == name]:
                            self.delete(other, name, inside[1])
            return self._write(resource, verb, key, None, current), True

    # -- internals --------------------------------------------------------------------------

    @staticmethod
    def _carry_over(
        resource: Resource, name: str, current: JSON, new: JSON, subresource: str
    ) -> JSON:
        """What an update keeps of the stored object: all but the status through
        ``/status``; the server-set metadata, the name and namespace, and the status when the
        resource has a status subresource, through the resource itself."""
        if subresource == "status":
            return {**copy.deepcopy(current), "status": new.get("status", {})}
        meta = new["metadata"]
        for field in SERVER_SET:
            if field in current["metadata"]:
                meta[field] = current["metadata"][field]
            else:
                meta.pop(field, None)
        meta["name"] = name
        if "namespace" in current["metadata"]:
            meta["namespace"] = current["metadata"]["namespace"]
        if resource.status and not subresource and "status" in current:
            new["status"] = copy.deepcopy(current["status"])
        elif resource.status and not subresource:
            new.pop("status", None)
        return new

    def _key(self, resource: Resource, namespace: str, name: str) -> Key:
        return (namespace if resource.namespaced else "", name)

    @staticmethod
    def _stored_key(obj: JSON) -> Key:
        return (obj["metadata"].get("namespace", ""), obj["metadata"]["name"])

    def _namespace(self, resource: Resource, namespace: str, meta: JSON) -> str:
        if not resource.namespaced:
            meta.pop("namespace", None)
            return ""
        if meta.get("namespace", namespace) != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the "
                "request"
            )
        meta["namespace"] = namespace
        if ("", namespace) not in self._objects["/namespaces"]:
            raise errors.not_found(self.resource("", "v1", "namespaces"), namespace)
        return namespace

    def _write(
        self,
        resource: Resource,
        verb: str,
        key: Key,
        new: JSON | None,
        prev: JSON | None,
        *,
        log_as: str = "",
    ) -> JSON:
        self.revision += 1
        version = str(self.revision)
        objects = self._objects[resource.storage_key]
        if new is None:
            assert prev is not None
            gone = copy.deepcopy(prev)
            gone["metadata"]["resourceVersion"] = version
            del objects[key]
            change = Change(self.revision, resource.storage_key, "DELETED", gone, prev)
        else:
            new["metadata"]["resourceVersion"] = version
            objects[key] = new
            kind = "ADDED" if prev is None else "MODIFIED"
            change = Change(self.revision, resource.storage_key, kind, new, prev)
        if len(self._changes) == self._changes.maxlen:
            self.compacted = self._changes[0].revision
        self._changes.append(change)
        meta = change.obj["metadata"]
        self.writes.append(
            Write(
                verb,
                log_as or resource.qualified,
                key[0],
                key[1],
                meta["uid"],
                version,
                rfc3339(self.clock()),
            )
        )
        for listener in self._listeners:
            listener()
        return to_view(resource, change.obj)

    def objects(self, resource: Resource) -> Iterator[JSON]:
        """Every stored object of ``resource`` (copies), for tests."""
        items, _ = self.list(resource)
        yield from items
