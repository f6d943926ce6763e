"""``gpufleet serve --config FILE``: the live scheduler's settings as a versioned file.

A Deployment passes its settings in a ConfigMap rather than a long argument list, as
kube-scheduler reads a ``KubeSchedulerConfiguration``. The file is one YAML document::

    apiVersion: gpufleet.io/v1alpha1
    kind: SchedulerConfiguration
    schedulerName: gpufleet
    policy: gpufleet
    period: 1s
    starvationAfter: 30m
    expectedDuration: 1h
    staleGrace: 60s
    watchDownGrace: 1m
    nonPreemptiblePriority: 100
    vocabularies: [kai, volcano]
    prices: /etc/gpufleet/prices.yaml
    leaderElection:
      leaderElect: true
      resourceName: gpufleet
      resourceNamespace: gpufleet-system
      leaseDuration: 15s
      renewDeadline: 10s
      retryPeriod: 2s

Every field is optional. :func:`read_configuration` checks the whole file (apiVersion and
kind, unknown fields, types, ranges, the policy's name) and returns the fields it sets under
the names of ``serve``'s options; the CLI takes them as defaults, so a flag given on the
command line wins. Durations are Kubernetes' (``90s``, ``10m``, ``1h30m``) or seconds.
Every fault is one :class:`~gpufleet.load.errors.InputError` naming the file and the field.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from gpufleet.load.errors import InputError
from gpufleet.load.objects.documents import documents
from gpufleet.load.objects.reader import Obj, Reader
from gpufleet.load.objects.schema import ANY, Schema, unknown_fields
from gpufleet.load.shown import shown

API_VERSION = "gpufleet.io/v1alpha1"
KIND = "SchedulerConfiguration"
LEASE_DURATION_S = 15.0
RENEW_DEADLINE_S = 10.0
"""kube-scheduler's leader-election defaults, ``serve``'s too: a file that sets one of the
two is checked against the other's default."""

_DURATIONS = {
    # field: (serve's option, the least it may be, in seconds)
    "period": ("period", 0.05),
    "starvationAfter": ("starvation_after", 0.0),
    "expectedDuration": ("expected_duration", 1.0),
    "staleGrace": ("stale_grace", 0.0),
    "watchDownGrace": ("watch_down_grace", 1.0),
    "leaderElection.leaseDuration": ("leader_elect_lease_duration", 1.0),
    "leaderElection.renewDeadline": ("leader_elect_renew_deadline", 0.5),
    "leaderElection.retryPeriod": ("leader_elect_retry_period", 0.1),
}
_STRINGS = {
    "schedulerName": "scheduler_name",
    "prices": "prices",
    "leaderElection.resourceName": "leader_elect_resource_name",
    "leaderElection.resourceNamespace": "leader_elect_resource_namespace",
}
SCHEMA: Schema = {
    "apiVersion": ANY,
    "kind": ANY,
    "policy": ANY,
    "nonPreemptiblePriority": ANY,
    "vocabularies": ANY,
    **{field: ANY for field in (*_DURATIONS, *_STRINGS) if "." not in field},
    "leaderElection": {
        "leaderElect": ANY,
        **{f.split(".", 1)[1]: ANY for f in (*_DURATIONS, *_STRINGS) if "." in f},
    },
}
"""Every field of the format; anything else is a typo, refused."""


class _FileReader(Reader):
    """A :class:`Reader` over a file that is not a Kubernetes object: no ``metadata``, and
    its faults name the file alone."""

    def __init__(self, source: str, obj: Obj) -> None:
        # Not Reader.__init__: that one requires metadata.name, which this file has not.
        self.obj, self.source, self.meta = obj, source, {}
        self.name, self.key, self.namespace, self.where = KIND, KIND, "", source


def read_configuration(
    path: Path, policies: Collection[str], vocabularies: Collection[str] = ()
) -> dict[str, Any]:
    """The settings ``path`` gives, keyed by ``serve``'s option names (``scheduler_name``,
    ``leader_elect``, ...); the fields it leaves out are absent. ``policies``: the names a
    ``policy`` may take; ``vocabularies``: those ``vocabularies`` may list (besides
    ``gpufleet``, always read)."""
    r = _open(path)
    settings = {**_strings(r, policies), **_numbers(r), **_vocabularies(r, vocabularies)}
    lease = settings.get("leader_elect_lease_duration", LEASE_DURATION_S)
    renew = settings.get("leader_elect_renew_deadline", RENEW_DEADLINE_S)
    if not renew < lease:
        field = "renewDeadline" if "leader_elect_renew_deadline" in settings else "leaseDuration"
        expected = (
            f"a duration shorter than leaderElection.leaseDuration ({lease:g}s)"
            if field == "renewDeadline"
            else f"a duration longer than leaderElection.renewDeadline ({renew:g}s)"
        )
        raise r.fail(f"leaderElection.{field}", expected, r.get(f"leaderElection.{field}"))
    elect = r.get("leaderElection.leaderElect")
    if elect is not None:
        if not isinstance(elect, bool):
            raise r.fail("leaderElection.leaderElect", "true or false", elect)
        settings["leader_elect"] = "true" if elect else "false"
    return settings


def _open(path: Path) -> _FileReader:
    """The file's one document, its apiVersion and kind checked and no field unknown."""
    source = str(path)
    docs = [doc for doc in documents(path) if doc is not None]
    if len(docs) != 1:
        raise InputError(source, f"expected one YAML document, a {KIND}, got {len(docs)}")
    if not isinstance(docs[0], Mapping):
        raise InputError(source, f"expected a {KIND} (a mapping), got {shown(docs[0])}")
    r = _FileReader(source, docs[0])
    for field, expected in (("apiVersion", API_VERSION), ("kind", KIND)):
        if r.get(field) != expected:
            raise r.fail(field, repr(expected), r.get(field))
    for field in unknown_fields(r.obj, SCHEMA):
        raise InputError(source, f"unknown field (known: {_known()})", field=field)
    if r.get("leaderElection") is not None:
        r.mapping("leaderElection")
    return r


def _strings(r: _FileReader, policies: Collection[str]) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    for field, option in _STRINGS.items():
        value = r.string(field)
        if value is not None:
            if not value:
                raise r.fail(field, "a non-empty string", value)
            settings[option] = value
    policy = r.string("policy")
    if policy is not None:
        if policy not in policies:
            raise r.fail("policy", f"one of {', '.join(policies)}", policy)
        settings["policy"] = policy
    return settings


def _vocabularies(r: _FileReader, known: Collection[str]) -> dict[str, Any]:
    """``vocabularies``: a list of the other schedulers' vocabularies to read."""
    raw = r.get("vocabularies")
    if raw is None:
        return {}
    names = ", ".join(sorted({*known, "gpufleet"}))
    if not isinstance(raw, list):
        raise r.fail("vocabularies", f"a list of vocabularies ({names})", raw)
    for i, name in enumerate(raw):
        if name != "gpufleet" and name not in known:
            raise r.fail(f"vocabularies[{i}]", f"one of {names}", name)
    return {"vocabulary": list(raw)}


def _numbers(r: _FileReader) -> dict[str, Any]:
    settings: dict[str, Any] = {}
    if r.get("nonPreemptiblePriority") is not None:
        settings["non_preemptible_priority"] = r.integer("nonPreemptiblePriority", 0, minimum=0)
    for field, (option, least) in _DURATIONS.items():
        if r.get(field) is not None:
            seconds = r.duration(field)
            if seconds < least:
                raise r.fail(field, f"a duration of at least {least:g}s", r.get(field))
            settings[option] = seconds
    return settings


def _known() -> str:
    top = [f for f in SCHEMA if f != "leaderElection"]
    nested = [f"leaderElection.{f}" for f in SCHEMA["leaderElection"]]
    return ", ".join([*top, *nested])
