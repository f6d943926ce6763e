"""``cost.html``: a replay's cost on a page of its own, beside ``index.html`` and linked from it.

The price sheet used; cost per queue over time (the plot ``replay-cost.png``); unallocated
(idle) cost per node type; the most costly experiments (jobs); and every queue's cost in a
table whose headers sort it when clicked. Self-contained: no network, no external script or
style; a few lines of inline script sort the table (``#sort=N`` in the address sorts it by
column ``N`` on load, ``#sort=-N`` the other way round) and mark it
``data-sortable="ready"`` once they are attached. Every string is escaped.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from gpufleet.model.costs import IDLE, JOBS_FILE
from gpufleet.model.results import ReplayRun
from gpufleet.report.html import page, table_html
from gpufleet.report.replay import first_seed
from gpufleet.report.replay_cost import cost_columns, cost_rows, costed, money

TOP_EXPERIMENTS = 10
"""Experiments (jobs) per policy in the most-costly table."""

IdleRows = Sequence[tuple[str, int, Sequence[Mapping[str, Any]]]]
"""Per run, ``(policy, seed, rows)``: the rows of its allocation's ``idle_rows()``."""

SORT_SCRIPT = """<script>
(function () {
  "use strict";
  function key(cell) {
    var raw = cell.hasAttribute("data-value") ? cell.getAttribute("data-value") : cell.textContent;
    var number = Number(raw);
    return raw !== "" && !isNaN(number) ? number : raw.toLowerCase();
  }
  function sortBy(table, column, descending) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[column]), y = key(b.cells[column]);
      var order = x < y ? -1 : x > y ? 1 : 0;
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
    var heads = table.tHead.rows[0].cells;
    for (var i = 0; i < heads.length; i++) { heads[i].removeAttribute("aria-sort"); }
    heads[column].setAttribute("aria-sort", descending ? "descending" : "ascending");
  }
  document.querySelectorAll("table[data-sortable]").forEach(function (table) {
    var heads = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(heads, function (head, column) {
      head.addEventListener("click", function () {
        sortBy(table, column, head.getAttribute("aria-sort") === "ascending");
      });
    });
    var wanted = /^#sort=(-?)(\\d+)$/.exec(location.hash);
    if (wanted && Number(wanted[2]) < heads.length) {
      sortBy(table, Number(wanted[2]), wanted[1] === "-");
    }
    table.setAttribute("data-sortable", "ready");
  });
})();
</script>"""

NOTE = f"""<p class="note">Cost as OpenCost allocates it: a pod is charged its requests for the
time it ran, at its node's prices; what no pod requested is unallocated ({IDLE}). A parent
queue's cost includes its children's. Click a header of the queue table to sort by it. Every
job's cost is in <a href="{JOBS_FILE}">{JOBS_FILE}</a>; the summary is on
<a href="index.html">the report's first page</a>.</p>"""


def _cell(text: str, value: float | None = None) -> str:
    if value is None:
        return f"<td>{html.escape(text)}</td>"
    return f'<td data-value="{value!r}">{html.escape(text)}</td>'


def idle_by_type(
    idle: IdleRows,
) -> list[tuple[str, int, str, int, float, float, float, float, float]]:
    """Per run and node type: nodes, node-hours, idle GPU, CPU and memory cost, idle total."""
    out = []
    for policy, seed, rows in idle:
        types: dict[str, list[float]] = {}
        for row in rows:
            sums = types.setdefault(str(row["nodeType"]), [0.0, 0.0, 0.0, 0.0, 0.0, 0.0])
            sums[0] += 1
            sums[1] += float(row["hours"])
            sums[2] += float(row["gpuIdleCost"])
            sums[3] += float(row["cpuIdleCost"])
            sums[4] += float(row["ramIdleCost"])
            sums[5] += float(row["idleCost"])
        for name, (n, hours, gpu, cpu, ram, total) in sorted(
            types.items(), key=lambda item: -item[1][5]
        ):
            out.append((policy, seed, name, int(n), hours, gpu, cpu, ram, total))
    return out


def _queue_table(runs: Sequence[ReplayRun], currency: str) -> str:
    columns = (
        "policy",
        "queue",
        "parent",
        "GPU-h",
        f"GPU {currency}",
        f"CPU {currency}",
        f"memory {currency}",
        f"total {currency}",
        f"own pods {currency}",
    )
    rows = [
        "<tr>"
        + _cell(run.policy)
        + _cell(q.name)
        + _cell(q.parent or "-")
        + _cell(f"{q.gpu_hours:,.1f}", q.gpu_hours)
        + "".join(_cell(money(v), v) for v in (q.cost.gpu, q.cost.cpu, q.cost.ram, q.cost.total))
        + _cell(money(q.own), q.own)
        + "</tr>"
        for run, cost in costed(first_seed(runs))
        for q in cost.queues
    ]
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "\n".join(rows)
    return (
        f'<table id="queues" data-sortable="pending">\n<thead><tr>{head}</tr></thead>\n'
        f"<tbody>\n{body}\n</tbody>\n</table>"
    )


def cost_page(runs: Sequence[ReplayRun], idle: IdleRows, subtitle: str) -> str:
    """The page (empty when no run was costed)."""
    found = costed(runs)
    if not found:
        return ""
    sheet = found[0][1].sheet
    currency = sheet.currency
    experiments = [
        (r.policy, job.name, job.queue, f"{job.gpu_hours:,.1f}", money(job.cost.total))
        for r, c in costed(first_seed(runs))
        for job in c.jobs[:TOP_EXPERIMENTS]
    ]
    idle_rows = [
        (policy, str(seed), name, str(n), f"{hours:,.1f}", *map(money, (gpu, cpu, ram, total)))
        for policy, seed, name, n, hours, gpu, cpu, ram, total in idle_by_type(idle)
    ]
    content = "\n".join(
        (
            "<h2>Price sheet</h2>",
            table_html(("name", "title", "currency"), [(sheet.name, sheet.title, currency)]),
            "<h2>Cost of the replay</h2>",
            table_html(cost_columns(currency), cost_rows(runs)),
            "<h2>Cost per queue over time</h2>",
            '<img src="replay-cost.png"'
            ' alt="Cumulative cost per queue and unallocated cost over time, per policy">',
            f"<h2>Unallocated cost per node type, {html.escape(currency)}</h2>",
            table_html(
                (
                    "policy",
                    "seed",
                    "node type",
                    "nodes",
                    "node-hours",
                    "GPU idle",
                    "CPU idle",
                    "memory idle",
                    "idle total",
                ),
                idle_rows,
            ),
            f"<h2>Most costly experiments, {html.escape(currency)}</h2>",
            table_html(("policy", "experiment", "queue", "GPU-h", "cost"), experiments),
            f"<h2>Cost per queue, {html.escape(currency)}</h2>",
            _queue_table(runs, currency),
            NOTE,
            SORT_SCRIPT,
        )
    )
    return page("gpufleet replay cost", subtitle, content)
