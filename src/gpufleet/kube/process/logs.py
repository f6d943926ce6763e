"""How the live scheduler logs: one line per record, and one record per decision.

:class:`LineFormatter` writes each record as one line, ``key=value`` pairs (``--log-format
text``) or a JSON object (``--log-format json``), with the keys ``time``, ``level``,
``logger`` and ``msg``. A *decision* — a pod bound, evicted, found unschedulable, a bind
that failed, or what a dry run would do — carries its facts as keys of their own, so that
the lines can be filtered without parsing the message:

========== ================================================================================
key        meaning
========== ================================================================================
``action`` ``bind``, ``bind-failed`` (the pod backs off), ``unschedulable``, an eviction's
           action (``preempt``, ``reclaim``, ``consolidate``, ``stale-gang``),
           ``evict-refused``, and in a dry run ``would-bind`` and ``would-evict``
``pod``    the pod (``namespace/name``)
``node``   where it is bound, or runs when evicted (absent: pending)
``reason`` ``bound``; for an eviction the job it makes room for; why a pod is
           unschedulable (the words of its ``PodScheduled`` condition); why a bind failed
``for``    an eviction's job (``namespace/name`` of its gang)
``backoff`` a failed bind: seconds until the pod is tried again
========== ================================================================================

A decision is logged by :func:`decide`, which puts the facts in the record's ``decision``
attribute; any other formatter prints the message alone.
"""

from __future__ import annotations

import json
import logging

log = logging.getLogger("gpufleet.serve")

DECISION = "decision"
"""The log record attribute that holds a decision's facts."""


def decide(
    message: str,
    *,
    action: str,
    pod: str,
    node: str | None = None,
    reason: str = "",
    level: int = logging.INFO,
    **more: object,
) -> None:
    """Log one decision: ``message`` for people, the facts as fields (module docstring);
    a fact that is None is left out."""
    facts: dict[str, object] = {"action": action, "pod": pod}
    if node:
        facts["node"] = node
    if reason:
        facts["reason"] = reason
    facts.update((k.rstrip("_"), v) for k, v in more.items() if v is not None)
    log.log(level, "%s", message, extra={DECISION: facts})


class LineFormatter(logging.Formatter):
    """One line per record: ``time=... level=... msg="..." pod=... action=...`` (or a JSON
    object, ``as_json``); a decision's facts follow the message."""

    def __init__(self, as_json: bool) -> None:
        super().__init__()
        self.as_json = as_json

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, object] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        facts = getattr(record, DECISION, None)
        if isinstance(facts, dict):
            fields.update((k, v) for k, v in facts.items() if k not in fields)
        if record.exc_info:
            fields["error"] = self.formatException(record.exc_info)
        if self.as_json:
            return json.dumps(fields)
        return " ".join(f"{k}={json.dumps(v)}" for k, v in fields.items())


class PendingLog:
    """Logs why each pending pod waits once per change, as its condition is written: a
    reason repeated cycle after cycle is one line, a new one another."""

    def __init__(self) -> None:
        self.told: dict[str, str] = {}
        """The reason last logged per pending pod (pods no longer pending are dropped)."""

    def cycle(self, pending: list[tuple[str, str]]) -> None:
        """Take one cycle's pending pods with their reasons."""
        told: dict[str, str] = {}
        for pod, reason in pending:
            if self.told.get(pod) != reason:
                decide(
                    f"{pod} is unschedulable: {reason}",
                    action="unschedulable",
                    pod=pod,
                    reason=reason,
                )
            told[pod] = reason
        self.told = told
