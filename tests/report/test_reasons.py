"""Why pods wait, in words: every code of the core's structured reasons (and of the notes of
the actions tried) has its sentence, and the sentences say what kube-scheduler and
gpufleet's explain have always said."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufleet.framework.status import Code, Reason, Status
from gpufleet.report.reasons import _RENDER, note_text, status_text, why_text
from gpufleet.scheduler.api.outcome import Note, NoteCode, Why, WhyCode, note, why

FILTERS = Status(
    Code.UNSCHEDULABLE,
    (Reason("NodeResourcesFit", "Insufficient cpu", 3), Reason("GpuFit", "Insufficient GPU", 1)),
    "GpuFit",
    4,
)
FILTERS_TEXT = "0/4 nodes are available: 1 Insufficient GPU, 3 Insufficient cpu."
LIMIT = why(
    WhyCode.QUEUE_LIMIT,
    queue="team-a",
    resource=0,
    limit=(4.0, float("inf"), float("inf")),
    in_use=(3.0, 2000.0, 0.0),
    needs=(2.0, 1000.0, 0.0),
    over=(True, False, False),
)

CASES = [
    pytest.param(
        why(WhyCode.BLOCKED, detail="SchedulingGated: gate-a"),
        "SchedulingGated: gate-a",
        id="blocked",
    ),
    pytest.param(
        why(WhyCode.QUEUE_MISSING, queue="q"), "queue q does not exist", id="queue-missing"
    ),
    pytest.param(
        why(WhyCode.GANG_INCOMPLETE, gang="ns/g", pods=2, min_member=4),
        "gang ns/g has 2 pod(s), fewer than its minMember 4; waiting for the rest to be created",
        id="gang-incomplete",
    ),
    pytest.param(
        why(
            WhyCode.QUEUE_LIMIT,
            queue="test",
            resource=1,
            limit=(float("inf"), 2000.0, float("inf")),
            in_use=(0.0, 0.0, 0.0),
            needs=(0.0, 3000.0, 0.0),
            over=(False, True, False),
        ),
        "queue test is at its limit of 2000 milli-CPU (0 milli-CPU in use, job needs 3000 "
        "milli-CPU)",
        id="queue-limit-nothing-in-use",
    ),
    pytest.param(
        LIMIT,
        "queue team-a is at its limit of 4 GPUs (3 GPUs in use, job needs 2 GPUs)",
        id="queue-limit",
    ),
    pytest.param(
        why(
            WhyCode.QUOTA_NON_PREEMPTIBLE,
            priority=100,
            queue="team-a",
            quota=(2.0, 0.0, 0.0),
            in_use=(1.0, 0.0, 0.0),
            needs=(2.0, 0.0, 0.0),
            over=(True, False, False),
        ),
        "non-preemptible job (priority 100) must fit within queue team-a's quota of 2 GPUs "
        "(1 GPU in use by non-preemptible work, job needs 2 GPUs)",
        id="non-preemptible-quota",
    ),
    pytest.param(
        why(
            WhyCode.MIN_RESOURCES,
            gang="ml/train",
            min_resources=(8.0, 0.0, 0.0),
            free=(6.0, 60000.0, 500000.0),
            over=(True, False, False),
        ),
        "PodGroup ml/train waits until the cluster has its minResources free: it asks for "
        "8 GPUs, 6 GPUs free",
        id="min-resources",
    ),
    pytest.param(
        why(
            WhyCode.MIN_RESOURCES,
            gang="ml/train",
            min_resources=(8.0, 3000.0, 2048.0),
            free=(6.0, 2000.0, 4096.0),
            over=(True, True, False),
        ),
        "PodGroup ml/train waits until the cluster has its minResources free: it asks for "
        "8 GPUs, 3000 milli-CPU, 6 GPUs, 2000 milli-CPU free",
        id="min-resources-two-short",
    ),
    pytest.param(
        why(
            WhyCode.MIN_RESOURCES_QUEUE,
            gang="ml/test",
            queue="test",
            min_resources=(0.0, 3000.0, 2048.0),
            limit=(float("inf"), 2000.0, float("inf")),
            in_use=(0.0, 500.0, 0.0),
            over=(False, True, False),
        ),
        "PodGroup ml/test waits until queue test has room for its minResources: it asks for "
        "3000 milli-CPU, 1500 milli-CPU left under the queue's limit of 2000 milli-CPU",
        id="min-resources-queue",
    ),
    pytest.param(
        why(
            WhyCode.MIN_RESOURCES_QUEUE,
            gang="ml/test",
            queue="test",
            min_resources=(1.0, 0.0, 0.0),
            limit=(2.0, float("inf"), float("inf")),
            in_use=(3.0, 0.0, 0.0),
            over=(True, False, False),
        ),
        "PodGroup ml/test waits until queue test has room for its minResources: it asks for "
        "1 GPU, 0 GPUs left under the queue's limit of 2 GPUs",
        id="min-resources-queue-over-its-limit",
    ),
    pytest.param(why(WhyCode.UNSCHEDULABLE, status=FILTERS), FILTERS_TEXT, id="unschedulable"),
    pytest.param(
        why(WhyCode.GANG_UNSCHEDULABLE, gang="ns/g", need=4, fitted=3, pod="ns/p3", status=FILTERS),
        f"gang ns/g needs 4 pods, 3 fit; pod ns/p3: {FILTERS_TEXT}",
        id="gang-unschedulable",
    ),
    pytest.param(
        why(WhyCode.CLAIMS, pod="ns/p", detail="no node can hold its claims"),
        "pod ns/p: no node can hold its claims",
        id="claims",
    ),
    pytest.param(
        why(
            WhyCode.TOPOLOGY,
            kind="required",
            level="rack",
            pods=4,
            short="rack",
            counts=(("r1", 3), ("r2", 2)),
            more=1,
            missing=False,
        ),
        "topology required rack: rack r1 can hold 3 of 4 pods; rack r2 can hold 2 of 4 pods; "
        "1 more rack(s) hold fewer",
        id="topology",
    ),
    pytest.param(
        why(
            WhyCode.TOPOLOGY,
            kind="preferred",
            level="zone",
            pods=2,
            short="",
            counts=(),
            more=0,
            missing=True,
        ),
        "topology preferred zone: no node has the label zone",
        id="topology-no-label",
    ),
    pytest.param(
        why(WhyCode.GANG, gang="ns/g", need=2, then=why(WhyCode.CLAIMS, pod="ns/p", detail="x")),
        "gang ns/g of 2 pods: pod ns/p: x",
        id="gang-of",
    ),
    pytest.param(
        why(
            WhyCode.STALE,
            gang="ns/g",
            running=1,
            min_member=2,
            since_s=None,
            grace_s=60.0,
            then=LIMIT,
        ),
        "gang ns/g has 1 of 2 pods running and is stale since now; its pods are released after "
        "60s unless it is completed. queue team-a is at its limit of 4 GPUs (3 GPUs in use, job "
        "needs 2 GPUs)",
        id="stale",
    ),
    pytest.param(
        why(
            WhyCode.STALE_RELEASED,
            gang="ns/g",
            running=1,
            min_member=2,
            for_s=90.4,
            grace_s=60.0,
            then=LIMIT,
        ),
        "gang ns/g had 1 of 2 pods running for 90s (grace 60s); its running pods were released. "
        "queue team-a is at its limit of 4 GPUs (3 GPUs in use, job needs 2 GPUs)",
        id="stale-released",
    ),
    pytest.param(
        why(
            WhyCode.STARVING,
            waited_s=4000.0,
            after_s=1800.0,
            nodes=("n1", "n2"),
            start_in_s=600.0,
            then=LIMIT,
        ),
        "queue team-a is at its limit of 4 GPUs (3 GPUs in use, job needs 2 GPUs) Waiting 4000s "
        "(over 1800s): node(s) n1, n2 reserved for it, expected free in 600s.",
        id="starving",
    ),
    pytest.param(
        why(WhyCode.STRICT_FIFO, behind="ns/first"),
        "behind ns/first (strict FIFO)",
        id="strict-fifo",
    ),
    pytest.param(
        why(WhyCode.ELASTIC, job="ns/g", then=why(WhyCode.UNSCHEDULABLE, status=FILTERS)),
        f"elastic pod beyond minMember of ns/g: {FILTERS_TEXT}",
        id="elastic",
    ),
]


@pytest.mark.parametrize(("reason", "text"), CASES)
def test_each_code_reads_as_it_always_has(reason: Why, text: str) -> None:
    assert why_text(reason) == text


def test_every_code_has_a_sentence_and_a_case() -> None:
    assert set(_RENDER) == set(WhyCode)
    assert {case.values[0].code for case in CASES} == set(WhyCode)  # type: ignore[union-attr]


def test_reasons_are_values() -> None:
    again = why(WhyCode.QUEUE_LIMIT, **dict(LIMIT.facts))
    assert again == LIMIT
    assert hash(again) == hash(LIMIT)
    assert {again: 1}[LIMIT] == 1


def test_a_status_without_reasons_says_so() -> None:
    assert status_text(Status(Code.UNSCHEDULABLE, total_nodes=0)) == (
        "0/0 nodes are available: no nodes to consider."
    )
    assert status_text(Status(Code.SUCCESS)) == ""


NOTES = [
    (
        note(NoteCode.FOUND, victims="eligible pods", moves=False),
        "preempt",
        "preempt: found victims",
    ),
    (
        note(NoteCode.FOUND, victims="preemptible pods", moves=True),
        "consolidate",
        "consolidate: moves found",
    ),
    (
        note(NoteCode.NOT_FOUND, victims="reclaimable pods (of queues above their fair share)"),
        "reclaim",
        "reclaim: evicting reclaimable pods (of queues above their fair share) frees no fitting "
        "node",
    ),
    (
        note(NoteCode.NOT_FOUND, victims="preemptible pods", moves=True),
        "consolidate",
        "consolidate: no preemptible pods can be moved to make room",
    ),
    (
        note(NoteCode.NO_ROOM, victims="eligible pods", moves=False),
        "preempt",
        "preempt: evicting all eligible pods would still leave no room for the job",
    ),
    (
        note(NoteCode.NO_ROOM, victims="preemptible pods", moves=True),
        "consolidate",
        "consolidate: moving all preemptible pods would still leave no room for the job",
    ),
    (
        note(NoteCode.PREEMPTION_NEVER),
        "reclaim",
        "reclaim: the job's preemptionPolicy is Never",
    ),
    (
        note(NoteCode.BEYOND_FREE),
        "consolidate",
        "consolidate: the job does not fit in the cluster's total free capacity",
    ),
    (
        note(NoteCode.NO_LOWER_PRIORITY, queue="a", min_runtime_s=600.0),
        "preempt",
        "preempt: no lower-priority preemptible pods in queue a past its preemptMinRuntime of 600s",
    ),
    (
        note(NoteCode.OVER_FAIR_SHARE, queue="a", ratio=1.5, fair_gpus=4.0),
        "reclaim",
        "reclaim: queue a would be at 1.50x its fair share (4 GPUs) with this job; reclaim "
        "takes GPUs only for a queue that stays within its fair share",
    ),
    (
        note(NoteCode.NONE_RECLAIMABLE, above=1, protected=3),
        "reclaim",
        "reclaim: no pod of a queue above its fair share can be reclaimed (1 queue(s) above "
        "it; 3 preemptible pod(s) of other queues within reclaimMinRuntime)",
    ),
    (
        note(NoteCode.NOTHING_LENT, above=0, protected=2),
        "reclaim",
        "reclaim: no pod of a queue over its GPU quota can be reclaimed (0 queue(s) over it; "
        "2 preemptible pod(s) of other queues within reclaimMinRuntime)",
    ),
    (
        note(NoteCode.NOT_SERVING),
        "consolidate-serving",
        "consolidate-serving: only a serving queue's jobs within its GPU quota gather nodes",
    ),
]


@pytest.mark.parametrize(("said", "action", "text"), NOTES)
def test_each_note_reads_as_explain_has_always_said(said: Note, action: str, text: str) -> None:
    assert note_text(replace(said, action=action)) == text


def test_every_note_code_has_a_case_and_where_is_said_first() -> None:
    assert {said.code for said, _, _ in NOTES} == set(NoteCode)
    found = replace(note(NoteCode.FOUND), action="preempt")
    assert note_text(replace(found, domain=("rack", "r1"))) == "in rack r1: preempt: found victims"
    assert note_text(replace(found, anywhere=True)) == "anywhere: preempt: found victims"
