"""Queue admission (``scheduler/queues/admission.py``): a job is admitted when every queue on its
path stays within its limit with the job counted, and non-preemptible work only within its
queues' quotas, counting non-preemptible work only; shares sized by GPU memory are capped
so that what they take on a smaller GPU keeps within."""

from __future__ import annotations

import numpy as np
import pytest

from gpufleet.model.workload import PodInfo, QueueSpec, pods_request, vector
from gpufleet.report.reasons import why_text
from gpufleet.scheduler.queues.admission import QueueAdmission
from tests.builders import info, job, ledger_of, node

INF = np.inf
QUOTA_GPUS = (True, False, False)

QUEUES = (
    QueueSpec("dept", limit=vector(12, INF, INF)),
    QueueSpec("a", "dept", limit=vector(6, 8000, INF), quota=vector(2), quota_set=QUOTA_GPUS),
    QueueSpec("b", "dept"),
    QueueSpec("free"),
)
RUNNING = (
    info("a/r").gpus(2).queue("a").on("n0").obj(),
    info("a/np").gpus(1).queue("a").priority(150).on("n0").obj(),
    info("b/r").gpus(4).queue("b").on("n0").obj(),
)
"""a holds 3 GPUs (1 of them non-preemptible) and 2 CPUs; dept 7 GPUs."""


def admission(non_preemptible_priority: int = 100) -> QueueAdmission:
    ledger = ledger_of([node("n0", gpus=8), node("n1", gpus=8)], RUNNING, queues=QUEUES)
    return QueueAdmission(ledger, non_preemptible_priority)


def asking(queue: str, gpus: int, *, cpu: float = 1, priority: int = 0) -> PodInfo:
    return info(f"{queue}/p").gpus(gpus).cpu(cpu).queue(queue).priority(priority).obj()


@pytest.mark.parametrize(
    ("pod", "expected"),
    [
        pytest.param(asking("a", 1), None, id="within-every-limit"),
        pytest.param(asking("a", 3), None, id="exactly-at-the-limits"),
        pytest.param(
            asking("a", 4),
            "queue a is at its limit of 6 GPUs (3 GPUs in use, job needs 4 GPUs)",
            id="own-limit",
        ),
        pytest.param(
            asking("b", 6),
            "queue dept is at its limit of 12 GPUs (7 GPUs in use, job needs 6 GPUs)",
            id="parent-limit",
        ),
        pytest.param(
            asking("a", 0, cpu=7),
            "queue a is at its limit of 8000 milli-CPU "
            "(2000 milli-CPU in use, job needs 7000 milli-CPU)",
            id="cpu-limit",
        ),
        pytest.param(asking("free", 16), None, id="no-limit"),
        pytest.param(asking("a", 1, priority=100), None, id="non-preemptible-within-quota"),
        pytest.param(
            asking("a", 2, priority=100),
            "non-preemptible job (priority 100) must fit within queue a's quota of 2 GPUs "
            "(1 GPU in use by non-preemptible work, job needs 2 GPUs)",
            id="non-preemptible-over-quota",
        ),
        pytest.param(asking("a", 2), None, id="preemptible-beyond-quota"),
        pytest.param(asking("b", 2, priority=100), None, id="non-preemptible-without-quota"),
    ],
)
def test_blocked_names_the_queue_and_the_limit(pod: PodInfo, expected: str | None) -> None:
    work = job(pod)
    blocked = admission().blocked(work, pods_request(work.core))
    assert (None if blocked is None else why_text(blocked)) == expected


def test_the_non_preemptible_threshold_is_the_configured_one() -> None:
    work = job(asking("a", 2, priority=150))
    request = pods_request(work.core)
    assert admission(non_preemptible_priority=100).blocked(work, request) is not None
    assert admission(non_preemptible_priority=200).blocked(work, request) is None


def share(key: str, queue: str, *, priority: int = 0) -> PodInfo:
    """A 20 GiB share sized by GPU memory, counted at a quarter GPU while it waits."""
    return info(key).gpu_memory(20 * 1024, 250).queue(queue).priority(priority).obj()


@pytest.mark.parametrize(
    ("pods", "expected"),
    [
        pytest.param(
            (asking("a", 2), share("a/s1", "a"), share("a/s2", "a")),
            # a's limit leaves 6 - 3 - 2.5 = 0.5 GPU beyond the job, split between the shares
            {"a/s1": 500, "a/s2": 500},
            id="what-the-limit-leaves-split-evenly",
        ),
        pytest.param(
            (share("a/s1", "a", priority=100),),
            # the quota leaves 2 - 1 - 0.25 GPU, less than the limit does
            {"a/s1": 1000},
            id="non-preemptible-capped-by-quota",
        ),
        pytest.param((share("free/s", "free"),), {}, id="no-limit-no-cap"),
        pytest.param((asking("a", 1),), {}, id="no-share-no-cap"),
    ],
)
def test_share_caps(pods: tuple[PodInfo, ...], expected: dict[str, int]) -> None:
    work = job(*pods)
    assert admission().share_caps(work, work.core, pods_request(work.core)) == expected
