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
<title>$title</title>
<style>
 body { font-family: system-ui, sans-serif; margin: 2rem; color: #222; }
 table { border-collapse: collapse; margin: 1rem 0; }
 th, td { border: 1px solid #ccc; padding: .35rem .7rem; text-align: right; }
 th:first-child, td:first-child { text-align: left; }
 th { background: #f3f3f3; }
 table[data-sortable] th { cursor: pointer; }
 img { max-width: 100%; border: 1px solid #ddd; }
 p.note { color: #555; max-width: 60rem; }
</style>
</head>
<body>
<h1>$title</h1>
<p>$subtitle</p>
$content
</body>
</html>
""")

FILL = """$table
<img src="unallocated.png" alt="unallocated GPU % against arrived workload, per policy">
<p class="note">Fill protocol of the FGD paper (USENIX ATC '23): pods arrive in a seeded random
order, each is placed once and never deleted, until the arrived GPU demand reaches the
inflation target. Lower unallocated GPU at arrived 100% is better. Every run's curves are in
<a href="results.json">results.json</a>.</p>"""


def page(title: str, subtitle: str, content: str) -> str:
    """A report page that needs no server; ``content`` is HTML, the title and subtitle
    text."""
    return PAGE.substitute(
        title=html.escape(title), subtitle=html.escape(subtitle), content=content
    )


def table_html(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    def cells(row: Sequence[str], tag: str) -> str:
        return "".join(f"<{tag}>{html.escape(c)}</{tag}>" for c in row)

    rows_html = "\n".join(f"<tr>{cells(row, 'td')}</tr>" for row in body)
    return (
        f"<table>\n<thead><tr>{cells(header, 'th')}</tr></thead>\n"
        f"<tbody>\n{rows_html}\n</tbody>\n</table>"
    )


def report_html(summaries: Sequence[PolicySummary], subtitle: str) -> str:
    content = FILL.replace("$table", table_html(COLUMNS, rows(summaries)))
    return page("gpufleet simulation report", subtitle, content)
