"""Reports: HTML (one self-contained file, inline SVG plots, no script) and rich terminal tables.

- :func:`compare_html` / :func:`render_compare` — the result of ``triage compare``;
- :func:`build_store_report` → :func:`store_html` / :func:`render_store_report` — ``triage report STORE``
  for a live deployment's store (metrics over rolling windows, KG-update triggers, worst queries per
  signature with their chain, contribution-score movement).

What the commands hand over to be rendered (``ScoreReport``, ``CompareResult``, ``ProbeResult``,
``DemoResult`` and their rows) is :mod:`triage_plugins.report.results`; the report imports nothing from
:mod:`triage_plugins.apps`.

Every string that came from documents or the graph (entity names, queries, triple ids) is escaped
(:mod:`triage_plugins.report.html`); the page carries a Content-Security-Policy that forbids scripts
and any fetch, as a second line of defence.
"""

from triage_plugins.report.compare_html import chain_funnel, compare_html
from triage_plugins.report.data import StoreReport, build_store_report, parse_since
from triage_plugins.report.store_html import store_html
from triage_plugins.report.terminal import render_compare, render_store_report

__all__ = [
    "StoreReport",
    "build_store_report",
    "chain_funnel",
    "compare_html",
    "parse_since",
    "render_compare",
    "render_store_report",
    "store_html",
]
