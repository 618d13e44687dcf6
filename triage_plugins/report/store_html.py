"""The HTML page of ``triage report STORE``: one self-contained file (inline CSS, SVG and one inline
script, no fetch), in tabs: overview, queries (table and per-query panels, :mod:`query_view`), chains
(per framework × retriever), graph, scores."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from triage_plugins.contract.config import default_thresholds
from triage_plugins.diagnosis.chain import REMEDIATION
from triage_plugins.report import plots
from triage_plugins.report.data import CHAIN_METRICS, audit_line
from triage_plugins.report.html import (
    Safe,
    cell,
    details,
    esc,
    figures,
    metric_cell,
    number,
    page,
    row,
    section,
    table,
    wide,
)
from triage_plugins.report.query_view import SCRIPT, panel_href, queries_tab

if TYPE_CHECKING:
    from triage_plugins.report.data import GroupReport, QueryTrace, ScoreUnitReport, StoreReport

__all__ = ["store_html"]

_STATUS_CLS = {"pass": "good", "fail": "bad", "n/a": "na", "not reached": "muted"}


def _when(ts: float | None) -> str:
    return "–" if ts is None else time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def _trace_table(q: QueryTrace) -> Safe:
    return table(
        ["link", "value", "θ", "status", "meaning / reason"],
        [
            [s.metric, number(s.value), f"{s.threshold:.2f}", cell(s.status, cls=_STATUS_CLS[s.status]),
             s.meaning if s.status == "fail" else (s.reason or "")]
            for s in q.steps
        ],
        numeric=(1, 2),
    )  # fmt: skip


def _group_figures(g: GroupReport, window: int, thresholds: Mapping[str, float]) -> list[object]:
    """The summary table with the signature and RHD charts beside it, then the rolling means."""
    stats = table(
        ["metric", "median", "mean", "last-window mean", "queries", "N/A"],
        [
            [s.name, number(s.median), number(s.mean), number(s.last_window), s.n, s.na]
            for s in g.stats.values()
        ],
        numeric=(1, 2, 3, 4, 5),
    )
    rolling = _rolling_multiples(g, window, thresholds)
    sigs = plots.bar_chart(
        [(s, float(n)) for s, n in g.signatures.items()],
        title="Chain signatures (queries)",
        value_format="{:.0f}",
        colors=plots.SIGNATURE_COLORS,
        width=420,
        label_width=140,
    )
    rhd_items = [("∞" if k == "inf" else f"ℓ={k}", v) for k, v in g.rhd.items()]
    figs = [sigs]
    if rhd_items:
        figs.append(plots.column_chart(rhd_items, title="RHD (eq. 33)", max_value=1.0, width=230))
    return [row(wide(stats), figures(*figs)), Safe(f"<h3>Rolling mean over the last {window} queries</h3>"),
            figures(*rolling)]  # fmt: skip


def _rolling_multiples(g: GroupReport, window: int, thresholds: Mapping[str, float]) -> list[str]:
    """One small chart per chain metric with a defined value (one line each, its own θ and triggers),
    rather than every metric on one plot."""
    charts = []
    for metric, points in g.rolling.items():
        if all(y is None for _, y in points):
            continue
        theta = {f"θ = {thresholds[metric]:g}": thresholds[metric]} if metric in thresholds else {}
        marks = [(float(t.position), f"trigger {t.statistic}") for t in g.triggers if t.metric == metric]
        charts.append(
            plots.line_chart(
                {metric: points},
                title=metric,
                x_label="query (time order)",
                thresholds=theta,
                markers=marks,
                width=300,
                height=170,
            )  # fmt: skip
        )
    return charts


def _levers(levers: tuple[str, ...]) -> Safe:
    return Safe('<ul class="levers">' + "".join(f"<li>{cell(lv)}</li>" for lv in levers) + "</ul>")


_TRIGGER_COLUMNS = [
    "after query",
    "when",
    "metric",
    "statistic",
    "value",
    "threshold",
    "stage",
    "signature",
    "levers",
]


def _triggers_part(g: GroupReport) -> list[object]:
    parts: list[object] = [Safe("<h3>KG-update triggers</h3>")]
    if not g.triggers:
        note = "No trigger fired: no rolling aggregate crossed its threshold."
        return [*parts, Safe(f'<p class="note">{note}</p>')]
    rows = [
        [f"#{t.position} ({t.query_id})", _when(t.ts), t.metric, t.statistic, number(t.value),
         number(t.threshold), t.stage or "investigate", t.signature or "", _levers(t.levers)]
        for t in g.triggers
    ]  # fmt: skip
    return [*parts, wide(table(_TRIGGER_COLUMNS, rows, numeric=(4, 5)))]


def _worst_part(g: GroupReport, embedded: set[str]) -> list[object]:
    parts: list[object] = [Safe("<h3>Worst queries per signature</h3>")]
    if not g.worst:
        parts.append(Safe('<p class="note">No failing query.</p>'))
    for sig, queries in g.worst.items():
        remedy = REMEDIATION[sig]
        blocks: list[object] = [
            Safe(f'<p class="note">{cell(remedy.summary)} Stage: <b>{cell(remedy.stage or "-")}</b>.</p>'),
            _levers(remedy.levers),
        ]
        for q in queries:
            failed = q.failed
            head = f"{q.query_id} — {q.query or '(query text not recorded)'}"
            if failed is not None:
                head += f" — {failed.metric} = {number(failed.value)}"
            key = f"{g.framework}/{g.retriever}/{q.query_id}"
            link = (
                Safe(
                    f'<p><a href="{esc(panel_href(key))}">open this query: retrieved subgraph, answer, gold</a></p>'
                )
                if key in embedded
                else Safe("")
            )
            blocks.append(details(head, link, wide(_trace_table(q))))
        parts.append(details(f"{sig} ({g.signatures.get(sig, 0)} queries)", *blocks, open_=True))
    return parts


def _group_section(
    g: GroupReport, window: int, anchor: str, thresholds: Mapping[str, float], embedded: set[str]
) -> Safe:
    parts = [*_group_figures(g, window, thresholds), *_triggers_part(g), *_worst_part(g, embedded)]
    return section(f"{g.label} — {len(g.queries)} queries", *parts, anchor=anchor)


def _scores_section(units: list[ScoreUnitReport]) -> Safe:
    parts: list[object] = []
    for u in units:
        items = [(m.id, m.delta) for m in u.promoted[:8]] + [
            (m.id, m.delta) for m in reversed(u.suppressed[:8])
        ]
        parts.append(Safe(f"<h3>{cell(u.unit)}: {u.moved} of {u.total} scores moved</h3>"))
        if items:
            parts.append(
                figures(plots.diverging_bars(items, title=f"Score drift from 100 — {u.unit}", width=720))
            )
        if u.reasons:
            parts.append(Safe(f"<p>{cell(audit_line(u.reasons))}</p>"))
        rows = [
            [
                kind,
                m.id,
                f"{m.raw:.2f}",
                f"{m.delta:+.2f}",
                m.n_updates,
                m.reason or "-",
                "; ".join(f"{q} {d:+.1f}" for q, d in m.by) or "-",
                _when(m.updated_at),
            ]
            for kind, moves in (("promoted", u.promoted), ("suppressed", u.suppressed))
            for m in moves
        ]
        head = ["", "id", "raw", "vs 100", "updates", "why", "moved most by (query, step)", "last update"]
        parts.append(wide(table(head, rows, numeric=(2, 3, 4))))
    return section(
        "Contribution scores",
        *(parts or ["No contribution score in this store (no feedback was learned)."]),
        intro="EvoRAG §4.3: raw contribution scores start at 100; feedback moves them. The most promoted and "
        "most suppressed triples or chunks, with the number of updates each had. The learning audit "
        "replays the store's feedback to say why each moved: it led to a wrong answer, it was an "
        "alternative to a right answer, it led to a right (or the gold) answer, or it moved as a "
        "bystander (a path the feedback said nothing about).",
    )


def _pane(name: str, *parts: object) -> Safe:
    return Safe(
        f'<div class="tabpane" id="{esc(name)}" data-tab="{esc(name)}">{"".join(esc(p) for p in parts)}</div>'
    )


def _verdict_counts(report: StoreReport) -> dict[str, Counter[str]]:
    counts: dict[str, Counter[str]] = {}
    for d in report.details.queries if report.details else ():
        counts.setdefault(f"{d.framework} / {d.retriever}", Counter())[d.verdict] += 1
    return counts


def _overview(report: StoreReport) -> Safe:
    verdicts = _verdict_counts(report)
    overview = table(
        ["framework / retriever", "queries", "silent failures", "wrong", *CHAIN_METRICS, "triggers", "signatures"],
        [
            [g.label, len(g.queries), verdicts.get(g.label, Counter())["silent failure"],
             verdicts.get(g.label, Counter())["wrong"],
             *(number(g.stats[m].median) if m in g.stats else "–" for m in CHAIN_METRICS),
             len(g.triggers), ", ".join(f"{s} {n}" for s, n in g.signatures.items())]
            for g in report.groups
        ],
        numeric=range(1, 5 + len(CHAIN_METRICS)),
    )  # fmt: skip
    counts = ", ".join(f"{n} {k}" for k, n in report.counts.items())
    silent = sum(c["silent failure"] for c in verdicts.values())
    lead = (
        f'<p class="note"><b>{silent} silent failures</b> (chain signature <i>supported</i> but Hits@1 = 0: the '
        'diagnosis saw nothing wrong, the answer is wrong) — listed first in <a href="#queries">Queries</a>.</p>'
        if report.details
        else ""
    )
    return section(
        "Overview",
        Safe(lead),
        Safe('<div class="wrap">'),
        overview,
        Safe("</div>"),
        intro=f"{report.runs} run(s); rows: {counts}. Chain metric columns are medians per query; silent "
        "failures and wrong answers count the embedded queries (see Queries).",
    )


def _graph_section(report: StoreReport) -> Safe:
    if not report.graph:
        return section("Graph", "No graph-scope metric in this store.")
    names = list(dict.fromkeys(n for metrics in report.graph.values() for n in metrics))
    return section(
        "Graph",
        Safe('<div class="wrap">'),
        table(
            ["framework", *names],
            [[fw, *(metric_cell(m.get(n)) for n in names)] for fw, m in report.graph.items()],
            numeric=range(1, 1 + len(names)),
        ),
        Safe("</div>"),
        intro="Latest KG Implementation (§4.1) and Validation (§4.2) metrics recorded per framework.",
    )


def store_html(report: StoreReport) -> str:
    """Render a :class:`~triage_plugins.report.data.StoreReport` as one self-contained HTML document."""
    thresholds = report.thresholds or default_thresholds()
    embedded = {d.key for d in report.details.queries} if report.details else set()
    overview: list[object] = [_overview(report)]
    if report.notes:
        overview.append(
            section("Notes", Safe("<ul>" + "".join(f"<li>{cell(n)}</li>" for n in report.notes) + "</ul>"))
        )
    queries = section(
        "Queries",
        *queries_tab(report.details),
        intro="Every embedded query with its verdict against the gold answer. Click a column to sort, a row "
        "to open its panel: question, answer, gold, chain values, the retrieved subgraph (query entities "
        "orange, gold answers green) and the retrieved triples and chunks.",
    )
    chains = [
        _group_section(g, report.window, f"group-{i}", thresholds, embedded)
        for i, g in enumerate(report.groups)
    ]
    panes = [
        _pane("overview", *overview),
        _pane("queries", queries),
        _pane("chains", *(chains or [section("Chains", "No per-query metric rows.")])),
        _pane("graph", _graph_section(report)),
        _pane("scores", _scores_section(report.scores)),
    ]
    since = f" · since {_when(report.since)}" if report.since is not None else ""
    subtitle = f"Store: {report.store}{since} · window W = {report.window} · {_when(report.generated_at)} UTC"
    if report.dropped or report.undelivered:
        subtitle += f" · {report.dropped + report.undelivered} events lost (see Notes)"
    nav = [("overview", "Overview"), ("queries", "Queries"), ("chains", "Chains"), ("graph", "Graph"),
           ("scores", "Scores")]  # fmt: skip
    return page("triage report", subtitle, panes, nav=nav, script=SCRIPT)
