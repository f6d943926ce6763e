"""NodeAffinity and TaintToleration: Kubernetes' label and taint rules as masks."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufleet.model.cluster import ClusterState, NodeSpec
from gpufleet.model.pod import PodSpec
from gpufleet.model.selectors import NodeConstraint, Requirement, Taint, Toleration
from gpufleet.plugins.node_affinity import MESSAGE, NodeAffinity
from gpufleet.plugins.taint_toleration import TaintToleration
from tests.builders import pod

GPU_TAINT = Taint("nvidia.com/gpu", "present", "NoSchedule")


def labelled() -> ClusterState:
    def n(name: str, labels: dict[str, str], taints: tuple[Taint, ...] = ()) -> NodeSpec:
        return NodeSpec(name, 32_000, 65_536, 8, labels.get("gpu"), labels, taints)

    return ClusterState(
        [
            n("a100", {"gpu": "A100", "rack": "r1", "gen": "3"}),
            n("h100", {"gpu": "H100", "rack": "r2", "gen": "4"}, (GPU_TAINT,)),
            n("plain", {"rack": "r2"}, (Taint("maint", "", "NoExecute"),)),
            n("soft", {"gpu": "T4"}, (Taint("spot", "", "PreferNoSchedule"),)),
        ]
    )


def constrained(
    *terms: tuple[Requirement, ...], tolerations: tuple[Toleration, ...] = ()
) -> PodSpec:
    return replace(pod().obj(), constraint=NodeConstraint(terms, tolerations))


@pytest.mark.parametrize(
    ("terms", "feasible"),
    [
        pytest.param((), [True, True, True, True], id="no-terms"),
        pytest.param(
            ((Requirement("gpu", "In", ("A100", "H100")),),), [True, True, False, False], id="in"
        ),
        pytest.param(
            ((Requirement("gpu", "NotIn", ("A100",)),),), [False, True, True, True], id="not-in"
        ),
        pytest.param(((Requirement("gpu", "Exists"),),), [True, True, False, True], id="exists"),
        pytest.param(
            ((Requirement("gpu", "DoesNotExist"),),),
            [False, False, True, False],
            id="does-not-exist",
        ),
        pytest.param(((Requirement("gen", "Gt", ("3",)),),), [False, True, False, False], id="gt"),
        pytest.param(((Requirement("gen", "Lt", ("4",)),),), [True, False, False, False], id="lt"),
        pytest.param(
            ((Requirement("rack", "In", ("r2",)), Requirement("gpu", "Exists")),),
            [False, True, False, False],
            id="term-ands",
        ),
        pytest.param(
            ((Requirement("gpu", "In", ("T4",)),), (Requirement("rack", "In", ("r1",)),)),
            [True, False, False, True],
            id="terms-or",
        ),
    ],
)
def test_node_affinity(terms: tuple[tuple[Requirement, ...], ...], feasible: list[bool]) -> None:
    verdict = NodeAffinity().filter(labelled(), constrained(*terms))
    assert verdict.feasible.tolist() == feasible
    if not all(feasible):
        assert verdict.failures[0][0] == MESSAGE
        assert verdict.unresolvable


@pytest.mark.parametrize(
    ("tolerations", "feasible"),
    [
        pytest.param((), [True, False, False, True], id="none"),
        pytest.param(
            (Toleration("nvidia.com/gpu", "Exists", effect="NoSchedule"),),
            [True, True, False, True],
            id="exists",
        ),
        pytest.param(
            (Toleration("nvidia.com/gpu", "Equal", "absent"),),
            [True, False, False, True],
            id="wrong-value",
        ),
        pytest.param(
            (Toleration("nvidia.com/gpu", "Equal", "present", "NoExecute"),),
            [True, False, False, True],
            id="wrong-effect",
        ),
        pytest.param((Toleration(operator="Exists"),), [True, True, True, True], id="tolerate-all"),
    ],
)
def test_taint_toleration(tolerations: tuple[Toleration, ...], feasible: list[bool]) -> None:
    spec = constrained(tolerations=tolerations)
    verdict = TaintToleration().filter(labelled(), spec)
    assert verdict.feasible.tolist() == feasible


def test_taint_reason_names_the_taint() -> None:
    verdict = TaintToleration().filter(labelled(), pod().obj())
    assert [m for m, _ in verdict.failures] == [
        "node(s) had untolerated taint {maint}",
        "node(s) had untolerated taint {nvidia.com/gpu: present}",
    ]
