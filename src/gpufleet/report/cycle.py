"""A cycle's result for people and programs: the what-if JSON, tables, and a pod's story.

The JSON has exactly the shape of ARCHITECTURE.md ("What-if output"): ``bindings`` (with
``gpus`` only for pods that use GPUs), ``evictions`` and ``pending``, plus
``reconfigurations`` (``{"node", "gpu", "layout": [profiles]}``) when the cycle changes the
partition of a dynamic-MIG GPU, and ``cost`` (:class:`~gpufleet.model.costs.CycleCost`: the
hourly cost before and after the cycle, per queue) when it was asked for.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from gpufleet.model.costs import IDLE
from gpufleet.model.workload import RESOURCES
from gpufleet.report.reasons import note_text, why_text
from gpufleet.report.replay_cost import money

if TYPE_CHECKING:
    from collections.abc import Mapping

    from gpufleet.model.costs import CycleCost
    from gpufleet.model.devices import DeviceResult
    from gpufleet.model.workload import PodInfo
    from gpufleet.scheduler.api.outcome import (
        Binding,
        ClaimStatus,
        CycleResult,
        Eviction,
        JobRecord,
    )

EVICTED_BECAUSE = {
    "preempt": "preempted for {for_}, a job of higher priority in the same queue",
    "reclaim": "reclaimed for {for_}: the pod's queue is above its fair share, and the "
    "queue of {for_} is within its own",
    "consolidate": "moved by consolidation to make room for {for_}",
    "stale-gang": "released: its gang {for_} stayed below minMember past the grace period",
}
"""Why a cycle evicts a pod, by the eviction's action."""


def binding_json(binding: Binding) -> dict[str, object]:
    out: dict[str, object] = {"pod": binding.pod, "node": binding.node}
    if binding.gpus is not None:
        out["gpus"] = list(binding.gpus)
    out["pipelined"] = binding.pipelined
    if binding.device:
        out["device"] = binding.device
    if binding.claims:
        out["claims"] = {
            key: [
                {"request": r.request, "driver": r.driver, "pool": r.pool, "device": r.device}
                for r in results
            ]
            for key, results in binding.claims.items()
        }
    if binding.volumes:
        out["volumes"] = {
            key: {"volume": name} if name else {"provision": True}
            for key, name in binding.volumes.items()
        }
    return out


def cycle_json(result: CycleResult, cost: CycleCost | None = None) -> str:
    """The what-if JSON, one binding, eviction or pending pod per line; with ``cost``, its
    ``cost`` object too (``gpufleet schedule --cost``)."""
    document: dict[str, list[dict[str, object]]] = {
        "bindings": [binding_json(b) for b in result.bindings],
        "evictions": [{"pod": e.pod, "action": e.action, "for": e.for_} for e in result.evictions],
        "pending": [{"pod": p.pod, "reason": why_text(p.why)} for p in result.pending],
    }
    if result.reconfigurations:
        document["reconfigurations"] = [
            {"node": r.node, "gpu": r.gpu, "layout": list(r.layout)}
            for r in result.reconfigurations
        ]
    sections = []
    for key, items in document.items():
        rows = ",\n".join(f"    {json.dumps(item, ensure_ascii=False)}" for item in items)
        sections.append(f'  "{key}": [\n{rows}\n  ]' if items else f'  "{key}": []')
    if cost is not None:
        body = json.dumps(cost.to_json(), indent=2, ensure_ascii=False).replace("\n", "\n  ")
        sections.append(f'  "cost": {body}')
    return "{\n" + ",\n".join(sections) + "\n}\n"


def cycle_tables(result: CycleResult) -> list[Table]:
    bindings = Table(title=f"bindings ({len(result.bindings)})")
    devices = any(b.device for b in result.bindings)
    for column in ("pod", "node", "gpus", "pipelined", *(("each GPU is",) if devices else ())):
        bindings.add_column(column)
    for b in result.bindings:
        gpus = "" if b.gpus is None else ",".join(map(str, b.gpus))
        row = (b.pod, b.node, gpus, "yes" if b.pipelined else "")
        bindings.add_row(*row, *((b.device,) if devices else ()))
    evictions = Table(title=f"evictions ({len(result.evictions)})")
    for column in ("pod", "action", "for"):
        evictions.add_column(column)
    for e in result.evictions:
        evictions.add_row(e.pod, e.action, e.for_)
    pending = Table(title=f"pending ({len(result.pending)})")
    pending.add_column("pod", no_wrap=True)
    pending.add_column("reason")
    for p in result.pending:
        pending.add_row(p.pod, why_text(p.why))
    tables = [bindings, evictions, pending]
    if result.reconfigurations:
        mig = Table(title=f"MIG reconfigurations ({len(result.reconfigurations)})")
        for column in ("node", "gpu", "layout"):
            mig.add_column(column)
        for r in result.reconfigurations:
            mig.add_row(r.node, str(r.gpu), " + ".join(r.layout) or "(MIG off)")
        tables.append(mig)
    return tables


def cost_tables(cost: CycleCost) -> list[Table | Text]:
    """What the cycle changes in the hourly cost, per queue (a parent includes its children)
    and for the cluster, and the line naming the price sheet (a title is the user's: plain
    text, never markup)."""
    unit = f"{cost.sheet.currency}/h"
    table = Table(title=f"hourly cost, {unit}: before and after this cycle")
    for i, column in enumerate(("queue", "parent", "before", "after", "change")):
        table.add_column(column, justify="left" if i < 2 else "right", no_wrap=i < 2)
    before = {q.name: q.cost.total for q in cost.before.queues}
    after = {q.name: q.cost.total for q in cost.after.queues}
    parents = {q.name: q.parent for q in (*cost.before.queues, *cost.after.queues)}
    order = sorted(parents, key=lambda q: (-after.get(q, 0.0), -before.get(q, 0.0), q))

    def row(name: Text, parent: str, was: float, now: float) -> None:
        table.add_row(name, Text(parent), money(was), money(now), f"{now - was:+,.2f}")

    for name in order:
        row(Text(name), parents[name] or "", before.get(name, 0.0), after.get(name, 0.0))
    table.add_section()
    row(Text(f"unallocated ({IDLE})"), "", cost.before.idle.total, cost.after.idle.total)
    row(Text("cluster (all nodes)"), "", cost.before.cluster.total, cost.after.cluster.total)
    line = Text(
        f"prices: {cost.sheet.title} (sheet {cost.sheet.name}, {cost.sheet.currency}); "
        "requests at the nodes' prices, per hour, as OpenCost charges them (no usage is known "
        "in a snapshot)"
    )
    return [table, line]


def _vector(values: object) -> str:
    gpu, cpu, memory = (float(v) for v in values)  # type: ignore[attr-defined]
    return f"{gpu:g} GPUs, {cpu / 1000:g} CPU, {memory / 1024:g} GiB"


def claim_status_lines(
    key: str, results: tuple[DeviceResult, ...], status: ClaimStatus | None
) -> list[str]:
    """A claim's ``status.allocation`` as Kubernetes writes it (YAML flow style)."""
    lines = [f"  claim {key}:", "    status.allocation:", "      devices:", "        results:"]
    for r in results:
        fields = f"request: {r.request}, driver: {r.driver}, pool: {r.pool}, device: {r.device}"
        if r.admin_access:
            fields += ", adminAccess: true"
        if r.tolerations:
            tolerations = ", ".join(
                "{" + ", ".join(f"{k}: {v}" for k, v in t.fields().items()) + "}"
                for t in r.tolerations
            )
            fields += f", tolerations: [{tolerations}]"
        lines.append(f"        - {{{fields}}}")
    if status is not None and status.config:
        lines.append("        config:")
        for source, c in status.config:
            requests = f", requests: [{', '.join(c.requests)}]" if c.requests else ""
            lines.append(
                f"        - {{source: {source}{requests}, opaque: {{driver: {c.driver}, "
                f"parameters: {c.parameters}}}}}"
            )
    if status is not None and status.node is not None:
        lines.append(
            "      nodeSelector: {nodeSelectorTerms: [{matchFields: [{key: metadata.name, "
            f"operator: In, values: [{status.node}]}}]}}]}}"
        )
    return lines


def eviction_reason(eviction: Eviction) -> str:
    template = EVICTED_BECAUSE.get(eviction.action, "evicted ({action}) for {for_}")
    return template.format(for_=eviction.for_, action=eviction.action)


def _gpus(gpus: tuple[int, ...] | None) -> list[int] | None:
    return None if not gpus else list(gpus)


def pod_outcome(result: CycleResult, info: PodInfo) -> dict[str, object]:
    """One pod after the cycle, for ``explain -o json``.

    ``status`` is ``bound`` (running, or bound by this cycle), ``pending`` or ``evicted``;
    ``node``/``gpus`` where it runs (or, evicted, where it ran; ``gpus`` are GPU indexes,
    null where the snapshot does not say which); ``reason`` why it waits or
    is evicted; ``action`` and ``for`` the eviction's, ``moved_to`` where consolidation
    binds it again. Keys without a value are null."""
    pod = info.key
    binding = next((b for b in result.bindings if b.pod == pod), None)
    eviction = next((e for e in result.evictions if e.pod == pod), None)
    pending = next((p for p in result.pending if p.pod == pod), None)
    out: dict[str, object] = {
        "pod": pod,
        "status": "pending",
        "node": info.node,
        "gpus": _gpus(info.gpus),
        "reason": None,
        "action": None,
        "for": None,
    }
    if eviction is not None:
        out["status"], out["reason"] = "evicted", eviction_reason(eviction)
        out["action"], out["for"] = eviction.action, eviction.for_
        if binding is not None:
            out["moved_to"] = {"node": binding.node, "gpus": _gpus(binding.gpus)}
    elif binding is not None:
        out["status"], out["node"], out["gpus"] = "bound", binding.node, _gpus(binding.gpus)
        out["pipelined"] = binding.pipelined
        if binding.device:
            out["device"] = binding.device
    elif info.bound:
        out["status"] = "bound"
    elif pending is not None:
        out["reason"] = why_text(pending.why)
    elif not info.managed:
        out["reason"] = "not scheduled by gpufleet: spec.schedulerName names another scheduler"
    return out


def explain_json(
    result: CycleResult, info: PodInfo, extra: Mapping[str, object] | None = None
) -> str:
    """``explain -o json``: the pod's outcome, and ``extra`` keys (``autoscale``)."""
    document = {**pod_outcome(result, info), **(extra or {})}
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"


def _unscheduled_lines(result: CycleResult, info: PodInfo | None) -> list[str]:
    """The story of a pod the cycle does not try to place: running, evicted or not ours."""
    if info is None:
        return ["  not scheduled by gpufleet in this snapshot (bound, or another scheduler's)"]
    outcome = pod_outcome(result, info)
    where = f"{info.node}" + (f" GPUs {list(info.gpus)}" if info.gpus else "")
    if outcome["status"] == "evicted":
        lines = [f"  running on {where}; this cycle evicts it ({outcome['action']})"]
        lines.append(f"  {outcome['reason']}")
        moved = outcome.get("moved_to")
        if isinstance(moved, dict):
            gpus = f" GPUs {moved['gpus']}" if moved["gpus"] else ""
            lines.append(f"  bound again to {moved['node']}{gpus}")
        return lines
    if info.bound:
        return [f"  running on {where}; this cycle leaves it there"]
    return [f"  {outcome['reason'] or 'not scheduled by gpufleet in this snapshot'}"]


def explain_lines(
    result: CycleResult, pod: str, record: JobRecord | None, info: PodInfo | None = None
) -> list[str]:
    """One pod's story: queue and fair share, outcome, actions considered, node by node."""
    lines = [f"pod {pod}"]
    if record is None:
        return [*lines, *_unscheduled_lines(result, info)]
    lines += [
        f"  job {record.key} ({len(record.pods)} pending pod(s)), priority {record.priority}",
        f"  queue {record.queue}: fair share {_vector(record.fair_share)}; "
        f"allocated {_vector(record.allocated)}; dominant share ratio {record.ratio:.2f}",
        f"  ({', '.join(RESOURCES)} divided by the queue's fair share; served lowest first)",
    ]
    for binding in result.bindings:
        if binding.pod == pod:
            gpus = f" GPUs {list(binding.gpus)}" if binding.gpus is not None else ""
            how = " (pipelined: on capacity freed by evictions)" if binding.pipelined else ""
            lines.append(f"  bound to {binding.node}{gpus}{how}")
            if binding.device:
                lines.append(
                    f"  each GPU it takes there is a {binding.device}; its queue is charged "
                    "what that is worth (whole GPUs come first wherever they fit)"
                )
            for key, results in (binding.claims or {}).items():
                lines += claim_status_lines(key, results, result.claim_status.get(key))
    for pending in result.pending:
        if pending.pod == pod:
            lines.append(f"  pending: {why_text(pending.why)}")
    victims = [e for e in result.evictions if e.for_ == record.key]
    for e in victims:
        lines.append(f"  evicts {e.pod} ({e.action})")
    if record.notes:
        lines.append("  considered:")
        lines.extend(f"    {note_text(note)}" for note in record.notes)
    failed = next((p for p in (pod, *record.pods) if p in result.node_reasons), None)
    nodes = result.node_reasons.get(failed) if failed is not None else None
    if nodes and all(not reasons for _, reasons in nodes):
        lines.append(
            "  every node fits the pod by itself: the job waits on the gang or topology "
            "reason above"
        )
    elif nodes:
        who = (
            "its turn"
            if failed == pod
            else f"the turn of {failed}, the first of the job that did not fit,"
        )
        lines.append(f"  nodes when {who} came (before any eviction):")
        for name, reasons in nodes:
            lines.append(f"    {name}: {'; '.join(reasons) if reasons else 'fits'}")
    return lines
