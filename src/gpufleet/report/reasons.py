"""Why pods wait, in words: the core's structured reasons rendered for people.

The scheduling core says why a pod waits as a :class:`~gpufleet.scheduler.api.outcome.Why` (a
code, its facts, the reason it adds to) and why no node took a pod as a
:class:`~gpufleet.framework.status.Status` (nodes counted per filter reason). This module
turns both into the sentences ``gpufleet schedule`` and ``explain`` print — for a Status,
kube-scheduler's own words ("0/4 nodes are available: 3 Insufficient cpu, ...").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpufleet.framework.status import Status
from gpufleet.model.workload import RESOURCES, UNITS
from gpufleet.scheduler.api.outcome import SEARCH_CODES, Note, NoteCode, Why, WhyCode
from gpufleet.scheduler.state.fairshare import EPS


def status_text(status: Status) -> str:
    """kube-scheduler's FitError text: ``0/N nodes are available: <count reason>, ...``."""
    if status.is_success:
        return ""
    pod_level = sorted({r.message for r in status.reasons if r.nodes and r.pod_level})
    if pod_level:  # kube-scheduler's PreFilter rejection: the pod's problem, once
        return f"0/{status.total_nodes} nodes are available: {', '.join(pod_level)}."
    parts = sorted(f"{r.nodes} {r.message}" for r in status.reasons if r.nodes)
    detail = ", ".join(parts) if parts else "no nodes to consider"
    return f"0/{status.total_nodes} nodes are available: {detail}."


def gpus_text(value: float) -> str:
    return f"{value:g} GPU" + ("" if value == 1 else "s")


def amount_text(values: Sequence[float], over: Sequence[bool] | None = None) -> str:
    """A resource vector in words (``2 GPUs, 4000 milli-CPU``): the resources of ``over``
    only, each even at 0 (the reader asked for them); without ``over``, GPUs always and the
    others when not 0."""
    parts = [
        gpus_text(values[i]) if i == 0 else f"{values[i]:g} {UNITS[i]}"
        for i in range(len(RESOURCES))
        if (over is None or over[i]) and (values[i] > EPS or i == 0 or over is not None)
    ]
    return ", ".join(parts)


def _search(code: NoteCode) -> Callable[[Mapping[str, Any]], str]:
    """The words of the victim search's outcome ``code``, from the action's own words for
    its victims (``victims``) and whether it moves them (``moves``)."""

    def words(f: Mapping[str, Any]) -> str:
        victims, moves = f.get("victims", "eligible pods"), bool(f.get("moves"))
        if code is NoteCode.FOUND:
            return "moves found" if moves else "found victims"
        if code is NoteCode.NOT_FOUND:
            if moves:
                return f"no {victims} can be moved to make room"
            return f"evicting {victims} frees no fitting node"
        verb = "moving" if moves else "evicting"
        return f"{verb} all {victims} would still leave no room for the job"

    return words


def note_text(note: Note) -> str:
    """``note`` as ``explain`` lists what was considered: ``[in rack r1: ]preempt: ...``."""
    where = ""
    if note.domain is not None:
        where = f"in {note.domain[0]} {note.domain[1]}: "
    elif note.anywhere:
        where = "anywhere: "
    return f"{where}{note.action}: {note_words(note)}"


def note_words(note: Note) -> str:
    """What ``note`` says, without where and by which action."""
    return _NOTE_RENDER[note.code](note.facts)


def _no_lower_priority(f: Mapping[str, Any]) -> str:
    runtime = f["min_runtime_s"]
    past = f" past its preemptMinRuntime of {runtime:g}s" if runtime else ""
    return f"no lower-priority preemptible pods in queue {f['queue']}{past}"


_NOTE_RENDER: dict[NoteCode, Callable[[Mapping[str, Any]], str]] = {
    **{code: _search(code) for code in SEARCH_CODES},
    NoteCode.PREEMPTION_NEVER: lambda _f: "the job's preemptionPolicy is Never",
    NoteCode.BEYOND_FREE: lambda _f: "the job does not fit in the cluster's total free capacity",
    NoteCode.NOT_SERVING: lambda _f: (
        "only a serving queue's jobs within its GPU quota gather nodes"
    ),
    NoteCode.NO_LOWER_PRIORITY: _no_lower_priority,
    NoteCode.OVER_FAIR_SHARE: lambda f: (
        f"queue {f['queue']} would be at {f['ratio']:.2f}x its fair share "
        f"({f['fair_gpus']:g} GPUs) with this job; reclaim takes GPUs only for a queue that "
        "stays within its fair share"
    ),
    NoteCode.NONE_RECLAIMABLE: lambda f: (
        f"no pod of a queue above its fair share can be reclaimed ({f['above']} queue(s) "
        f"above it; {f['protected']} preemptible pod(s) of other queues within "
        "reclaimMinRuntime)"
    ),
    NoteCode.NOTHING_LENT: lambda f: (
        f"no pod of a queue over its GPU quota can be reclaimed ({f['above']} queue(s) over "
        f"it; {f['protected']} preemptible pod(s) of other queues within reclaimMinRuntime)"
    ),
}


def why_text(why: Why) -> str:
    """The sentence for ``why`` (and the reasons it adds to)."""
    return _RENDER[why.code](why)


def _then(why: Why) -> str:
    return "" if why.then is None else why_text(why.then)


def _status(why: Why) -> str:
    assert why.status is not None, f"{why.code.value} without the filters' verdict"
    return status_text(why.status)


def _queue_limit(why: Why) -> str:
    f = why.facts
    i, limit = f["resource"], f["limit"]
    amount = gpus_text(limit[i]) if i == 0 else f"{limit[i]:g} {UNITS[i]}"
    return (
        f"queue {f['queue']} is at its limit of {amount} ({amount_text(f['in_use'], f['over'])} "
        f"in use, job needs {amount_text(f['needs'], f['over'])})"
    )


def _quota(why: Why) -> str:
    f = why.facts
    return (
        f"non-preemptible job (priority {f['priority']}) must fit within queue {f['queue']}'s "
        f"quota of {amount_text(f['quota'], f['over'])} ({amount_text(f['in_use'], f['over'])} "
        f"in use by non-preemptible work, job needs {amount_text(f['needs'], f['over'])})"
    )


def _min_resources(why: Why) -> str:
    f = why.facts
    over = f["over"]
    return (
        f"PodGroup {f['gang']} waits until the cluster has its minResources free: it asks for "
        f"{amount_text(f['min_resources'], over)}, {amount_text(f['free'], over)} free"
    )


def _min_resources_queue(why: Why) -> str:
    f = why.facts
    over = f["over"]
    room = [max(limit - used, 0.0) for limit, used in zip(f["limit"], f["in_use"], strict=True)]
    return (
        f"PodGroup {f['gang']} waits until queue {f['queue']} has room for its minResources: "
        f"it asks for {amount_text(f['min_resources'], over)}, {amount_text(room, over)} left "
        f"under the queue's limit of {amount_text(f['limit'], over)}"
    )


def _topology(why: Why) -> str:
    f = why.facts
    if f["missing"]:
        domains = f"no node has the label {f['level']}"
    else:
        short, pods = f["short"], f["pods"]
        shown = [f"{short} {label} can hold {n} of {pods} pods" for label, n in f["counts"]]
        more = f["more"]
        domains = "; ".join(shown) + (f"; {more} more {short}(s) hold fewer" if more else "")
    return f"topology {f['kind']} {f['level']}: {domains}"


def _stale(why: Why) -> str:
    f = why.facts
    since = "now" if f["since_s"] is None else f"{f['since_s']:.0f}s ago"
    return (
        f"gang {f['gang']} has {f['running']} of {f['min_member']} pods running and is stale "
        f"since {since}; its pods are released after {f['grace_s']:g}s unless it is "
        f"completed. {_then(why)}"
    )


def _stale_released(why: Why) -> str:
    f = why.facts
    return (
        f"gang {f['gang']} had {f['running']} of {f['min_member']} pods running for "
        f"{f['for_s']:.0f}s (grace {f['grace_s']:g}s); its running pods were released. "
        f"{_then(why)}"
    )


def _starving(why: Why) -> str:
    f = why.facts
    return (
        f"{_then(why)} Waiting {f['waited_s']:.0f}s (over {f['after_s']:g}s): "
        f"node(s) {', '.join(f['nodes'])} reserved for it, expected free in "
        f"{max(0.0, float(f['start_in_s'])):.0f}s."
    )


_RENDER: dict[WhyCode, Callable[[Why], str]] = {
    WhyCode.BLOCKED: lambda w: str(w.facts["detail"]),
    WhyCode.QUEUE_MISSING: lambda w: (
        f"queue {w.facts['queue']} is not valid: it {w.facts['invalid']}; its pods wait until "
        "it is fixed"
        if w.facts.get("invalid")
        else f"queue {w.facts['queue']} does not exist"
    ),
    WhyCode.GANG_INCOMPLETE: lambda w: (
        f"gang {w.facts['gang']} has {w.facts['pods']} pod(s), fewer than its minMember "
        f"{w.facts['min_member']}; waiting for the rest to be created"
    ),
    WhyCode.QUEUE_LIMIT: _queue_limit,
    WhyCode.QUOTA_NON_PREEMPTIBLE: _quota,
    WhyCode.MIN_RESOURCES: _min_resources,
    WhyCode.MIN_RESOURCES_QUEUE: _min_resources_queue,
    WhyCode.UNSCHEDULABLE: _status,
    WhyCode.GANG_UNSCHEDULABLE: lambda w: (
        f"gang {w.facts['gang']} needs {w.facts['need']} pods, {w.facts['fitted']} fit; "
        f"pod {w.facts['pod']}: {_status(w)}"
    ),
    WhyCode.CLAIMS: lambda w: f"pod {w.facts['pod']}: {w.facts['detail']}",
    WhyCode.TOPOLOGY: _topology,
    WhyCode.GANG: lambda w: f"gang {w.facts['gang']} of {w.facts['need']} pods: {_then(w)}",
    WhyCode.STALE: _stale,
    WhyCode.STALE_RELEASED: _stale_released,
    WhyCode.STARVING: _starving,
    WhyCode.STRICT_FIFO: lambda w: f"behind {w.facts['behind']} (strict FIFO)",
    WhyCode.ELASTIC: lambda w: f"elastic pod beyond minMember of {w.facts['job']}: {_then(w)}",
}
"""One sentence per code: a new code without one fails its test."""
