"""The replay's cost page, ``cost.html``, in a real headless browser (Debian's chromium): it
loads with no script error, shows the figures of ``results.json``, and its queue table sorts.

The browser is required: a machine without it fails this test rather than skip it (``.ci/run``
installs it)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from gpufleet.report.replay_cost import money
from tests.cli.test_app import gpufleet
from tests.cli.test_replay import CLUSTER, PHILLY, QUEUES, write
from tests.cost.test_replay_cost_cli import SHEET

TOTAL_COLUMN = 7
"""The queue table's column of each queue's total cost."""


def chromium() -> str:
    found = shutil.which("chromium")
    assert found, "Debian's chromium is needed: apt-get install chromium"
    return found


def dump_dom(url: str, profile: Path) -> str:
    """The page's DOM after its scripts ran; fails on a script error."""
    result = subprocess.run(
        [
            chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
            "--dump-dom", url,
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "Uncaught" not in result.stderr, result.stderr
    assert "<html" in result.stdout, result.stderr
    return result.stdout


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("replay")
    result = gpufleet(
        "simulate", "--protocol", "replay", "--workload", str(write(tmp / "p.csv", PHILLY)),
        "--cluster", str(write(tmp / "c.yaml", CLUSTER)),
        "--queues", str(write(tmp / "q.yaml", QUEUES)),
        "--policy", "kube-default", "--policy", "gpufleet",
        "--prices", str(write(tmp / "prices.yaml", SHEET)),
        "--out", "report", "--json", "-", cwd=tmp,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return tmp / "report"


def queue_totals(dom: str) -> list[float]:
    table = dom[dom.index('id="queues"') :]
    table = table[: table.index("</table>")]
    return [
        float(re.findall(r'data-value="([^"]+)"', row)[TOTAL_COLUMN - 3])
        for row in re.findall(r"<tr>(.*?)</tr>", table, re.DOTALL)
        if "<td" in row
    ]


def test_the_cost_page_shows_the_replays_figures_in_a_browser(report: Path, tmp_path: Path) -> None:
    page = report / "cost.html"
    assert 'href="cost.html"' in (report / "index.html").read_text(encoding="utf-8")
    source = page.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", source)  # no network
    dom = dump_dom(page.as_uri(), tmp_path / "profile")
    assert 'data-sortable="ready"' in dom
    for name in ("a100-list", "A100 list prices, for a test", "USD"):
        assert f"<td>{html.escape(name)}</td>" in dom
    assert 'src="replay-cost.png"' in dom
    runs = json.loads((report / "results.json").read_text(encoding="utf-8"))["runs"]
    assert {r["policy"] for r in runs} == {"kube-default", "gpufleet"}
    for run in runs:
        cost = run["cost"]
        assert f"<td>{money(cost['totalCost'])}</td>" in dom
        for queue in cost["queues"]:
            assert f"<td>{html.escape(queue['name'])}</td>" in dom
            assert f">{money(queue['totalCost'])}</td>" in dom  # a sortable cell
        for job in cost["topJobs"]:
            assert f"<td>{html.escape(job['name'])}</td>" in dom
    idle = dom[dom.index("Unallocated cost per node type") :]
    assert "<td>a100</td>" in idle[: idle.index("</table>")]  # the node type the sheet priced
    assert "<td>__idle__</td>" not in dom[dom.index('id="queues"') :]


def test_the_queue_table_sorts_in_a_browser(report: Path, tmp_path: Path) -> None:
    url = (report / "cost.html").as_uri()
    up = queue_totals(dump_dom(f"{url}#sort={TOTAL_COLUMN}", tmp_path / "up"))
    down = queue_totals(dump_dom(f"{url}#sort=-{TOTAL_COLUMN}", tmp_path / "down"))
    assert len(up) >= 4
    assert up == sorted(up)
    assert down == sorted(up, reverse=True)
    assert queue_totals((report / "cost.html").read_text(encoding="utf-8")) != up
