"""Which volume a placement gives each unbound claim, and what the what-if JSON says of it
(the scenario tests/scenarios/volume-binding.yaml, whose expectation only names nodes)."""

from __future__ import annotations

import json
from pathlib import Path

from gpufleet.compose import schedule_snapshot
from gpufleet.load.snapshot import load_snapshot
from gpufleet.report.cycle import cycle_json
from gpufleet.scheduler.cycle.config import CycleConfig
from tests.scenarios.test_scenarios import expectation, when

SCENARIO = Path(__file__).parents[2] / "scenarios" / "volume-binding.yaml"


def test_each_unbound_claim_is_given_a_volume_or_a_node_to_provision_on() -> None:
    snapshot = load_snapshot(SCENARIO, warn=lambda _: None)
    result = schedule_snapshot(snapshot, when(expectation(SCENARIO)["now"]), CycleConfig())
    volumes = {b.pod: b.volumes for b in result.bindings}
    assert volumes == {
        "ml/uses-local": None,  # bound already: nothing to write
        "ml/uses-scratch": {"ml/scratch": "local-n3"},  # the one free volume large enough
        "ml/uses-fast": {"ml/fast": ""},  # provisioned on its node
        "ml/uses-pinned": {"ml/pinned": ""},
        "ml/uses-prebound": {"ml/prebound": "prebound-n1"},  # its claimRef wins over size
    }
    document = json.loads(cycle_json(result))
    by_pod = {b["pod"]: b for b in document["bindings"]}
    assert by_pod["ml/uses-scratch"]["volumes"] == {"ml/scratch": {"volume": "local-n3"}}
    assert by_pod["ml/uses-fast"]["volumes"] == {"ml/fast": {"provision": True}}
    assert "volumes" not in by_pod["ml/uses-local"]
