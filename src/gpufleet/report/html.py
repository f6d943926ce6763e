"""``index.html``: the summary table and the plot, in one page that needs no server."""

from __future__ import annotations

import html
from collections.abc import Sequence
from string import Template

from gpufleet.report.summary import PolicySummary
from gpufleet.report.table import COLUMNS, rows

PAGE = Template("""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>gpufleet simulation report</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
 table { border-collapse: collapse; margin: 1rem 0; }
 th, td { border: 1px solid #ccc; padding: .35rem .7rem; text-align: right; }
 th:first-child, td:first-child { text-align: left; }
 th { background: #f3f3f3; }
 img { max-width: 100%; border: 1px solid #ddd; }
 p.note { color: #555; max-width: 60rem; }
</style>
</head>
<body>
<h1>gpufleet simulation report</h1>
<p>$subtitle</p>
<table>
<thead><tr>$header</tr></thead>
<tbody>
$body
</tbody>
</table>
<img src="unallocated.png" alt="unallocated GPU % against arrived workload, per policy">
<p class="note">Fill protocol of the FGD paper (USENIX ATC '23): pods arrive in a seeded random
order, each is placed once and never deleted, until the arrived GPU demand reaches the
inflation target. Lower unallocated GPU at arrived 100% is better. Every run's curves are in
<a href="results.json">results.json</a>.</p>
</body>
</html>
""")


def report_html(summaries: Sequence[PolicySummary], subtitle: str) -> str:
    header = "".join(f"<th>{html.escape(c)}</th>" for c in COLUMNS)
    body = "\n".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>"
        for row in rows(summaries)
    )
    return PAGE.substitute(subtitle=html.escape(subtitle), header=header, body=body)
