"""The autoscaling benchmark's tables, its verdicts against the targets, and its plot."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gpufleet.model.autoscale import SupplyRun
from gpufleet.report.autoscale import cheaper_ca, markdown, targets
from gpufleet.report.autoscale_plot import plot_supply
from tests.model.test_values import supply_run


def runs() -> dict[str, list[SupplyRun]]:
    base = supply_run()
    replay = base.replay
    return {
        "ca-price": [replace(base, policy="ca-price", spend=100.0)],
        "ca-least-waste": [replace(base, policy="ca-least-waste", spend=150.0)],
        "gpufleet": [
            replace(
                base,
                policy="gpufleet",
                spend=65.0,
                scale_down_evictions=0,
                incomplete_spend=0.0,
                idle_node_hours=0.2,
                replay=replace(replay, mean_jct_s=(replay.mean_jct_s or 0.0) * 1.06),
            )
        ],
    }


def test_the_table_has_a_row_per_policy() -> None:
    lines = markdown(runs())
    assert len(lines) == 2 + 3
    assert lines[2].startswith("| ca-price | 100 |")


def test_gpufleet_is_judged_against_the_cheaper_cluster_autoscaler() -> None:
    done = runs()
    assert cheaper_ca(done) == "ca-price"
    verdicts = targets(done)
    assert verdicts[0] == ("- met: spend 35.0% lower than ca-price (target: at least 30% lower)")
    assert verdicts[1].startswith("- NOT met: mean JCT x1.060")
    assert "- met: scale-down evictions 0 (target: 0)" in verdicts


def test_the_plot_is_written(tmp_path: Path) -> None:
    path = tmp_path / "autoscale.png"
    plot_supply({name: done[0] for name, done in runs().items()}, path, title="t")
    assert path.read_bytes().startswith(b"\x89PNG")
