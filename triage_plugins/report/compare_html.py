"""The HTML page of ``triage compare``: one self-contained file (inline CSS and SVG, no script).

The metric columns are those of the metric registry (:func:`compare_columns`), so a metric a plugin
registers is shown with no edit here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from triage_plugins.diagnosis.chain import CHAIN, SIGNATURES
from triage_plugins.metrics.registry import MetricRegistry
from triage_plugins.report import plots
from triage_plugins.report.html import (
    Safe,
    cell,
    details,
    esc,
    figures,
    metric_cell,
    number,
    page,
    section,
    table,
)
from triage_plugins.runtime.registrations import metric_registry

if TYPE_CHECKING:
    from triage_plugins.report.results import (
        CompareResult,
        CompareRow,
        Difference,
        MetricSummary,
        SeedSummary,
    )

__all__ = ["chain_funnel", "compare_columns", "compare_html"]

_SIG_ORDER = (*SIGNATURES, "undetermined")
_GROUPS = ("implementation", "validation", "usage", "gold")


def compare_columns(registry: MetricRegistry | None = None) -> dict[str, tuple[str, ...]]:
    """The compare tables' metric columns per group (``implementation``, ``validation``, ``usage``,
    ``gold``), from ``registry`` (default :func:`~triage_plugins.runtime.registrations.metric_registry`,
    the registry ``triage compare`` scores with)."""
    registry = metric_registry() if registry is None else registry
    return {group: registry.columns(group) for group in _GROUPS}  # type: ignore[arg-type]


def chain_funnel(signatures: dict[str, int]) -> list[tuple[str, float]]:
    """Share of queries not failed at each link, read from the signature counts (TRIAGE §4.5, Fig. 5).

    A query with signature s failed the link that names s and was not evaluated past it; N/A links are
    skipped by the chain, so "not failed" is the honest reading of the funnel.
    """
    total = sum(signatures.values())
    if not total:
        return []
    remaining = total - signatures.get("undetermined", 0)
    out = []
    for link in CHAIN:
        remaining -= signatures.get(link.signature, 0)
        out.append((link.metric, remaining / total))
    return out


def _summary_cell(s: MetricSummary | None, *, mean: bool = False) -> Safe:
    if s is None:
        return cell("–", cls="muted")
    value = s.mean if mean else s.median
    if value is None:
        return cell("N/A", title=f"undefined for all {s.na} queries: {s.reason}", cls="na")
    text = number(value)
    if s.na:
        return Safe(f"{cell(text)} {cell(f'({s.na} N/A)', title=s.reason, cls='na')}")
    return cell(text, title=f"{s.n} queries")


def _status(row: CompareRow) -> Safe:
    cls = {"ok": "good", "failed": "bad", "unavailable": "muted"}[row.status]
    return cell(row.status, cls=cls)


def _ms(value: float | None) -> str:
    return "N/A" if value is None else f"{value * 1000:.1f}"


def _wrapped(title: str, content: Safe, *, anchor: str, intro: str) -> Safe:
    """A section whose table scrolls sideways when it is wider than the page."""
    return section(title, Safe('<div class="wrap">'), content, Safe("</div>"), anchor=anchor, intro=intro)


def _wide(content: Safe) -> Safe:
    """``content`` in a box that scrolls sideways when it is wider than the page."""
    return Safe(f'<div class="wrap">{content}</div>')


def _setup_cell(row: CompareRow) -> Safe:
    """The row's query set-up: ``default``, or ``non-default`` opening to its description (#18 item 3)."""
    if row.setup.default:
        return cell("default", title=row.setup.description, cls="muted")
    return Safe(f'<details class="setup"><summary>{cell("non-default", cls="bad")}</summary>'
                f'{cell(row.setup.description)}</details>')  # fmt: skip


def _row_label(row: CompareRow) -> Safe:
    """The row's label with a short ``non-default`` marker; the set-up text is in Frameworks."""
    if row.setup.default:
        return cell(row.label)
    why = _short(row.setup.description, 300)
    return Safe(f'{cell(row.label)} <a class="bad" href="#frameworks" title="{esc(why)}">non-default</a>')


def _short(text: str, n: int) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _overview_section(rows: list[CompareRow]) -> Safe:
    overview = table(
        ["framework", "mode", "status", "query set-up", "reason / error", "queries", "triples extracted",
         "graph triples", "run s", "median query ms"],
        [
            [r.framework, r.mode, _status(r), _setup_cell(r), r.reason or "",
             r.queries if r.status == "ok" else "",
             number(r.triples_extracted, na="–"), number(r.graph_triples, na="–"),
             "" if r.seconds is None else f"{r.seconds:.2f}",
             _ms(r.latency.get("query_median")) if r.status == "ok" else ""]
            for r in rows
        ],
        numeric=(5, 6, 7, 8, 9),
    )  # fmt: skip
    return _wrapped(
        "Frameworks",
        overview,
        anchor="frameworks",
        intro="One row per framework × mode, with the query set-up it uses (a set-up that is not the "
        "framework's own default is marked non-default). A framework that is not installed or has no runner "
        "is listed as unavailable with the reason; one that raised is listed as failed, and the others still ran.",
    )


def _kg_section(ok: list[CompareRow], columns: dict[str, tuple[str, ...]]) -> Safe:
    impl, val = columns["implementation"], columns["validation"]
    kg = table(
        ["framework / mode", *impl, *val],
        [
            [r.label, *(metric_cell(r.implementation.get(m)) for m in impl),
             *(metric_cell(r.validation.get(m)) for m in val)]
            for r in ok
        ],
        numeric=range(1, 1 + len(impl) + len(val)),
    )  # fmt: skip
    return _wrapped(
        "KG Implementation and Validation",
        kg,
        anchor="kg",
        intro=f"TRIAGE §4.1 ({', '.join(impl)}) and §4.2 ({', '.join(val)}), from each "
        "framework's own extraction and graph events. N/A: hover for the reason (no log-probabilities, "
        "no ontology ...).",
    )


def _usage_section(ok: list[CompareRow], columns: tuple[str, ...], registry: MetricRegistry) -> Safe:
    usage = table(
        ["framework / mode", "queries", *columns],
        [[r.label, r.queries, *(_summary_cell(r.usage.get(m)) for m in columns)] for r in ok],
        numeric=range(1, 2 + len(columns)),
    )
    boxes = []
    for m in columns:
        spec = registry.get(m)
        boxes.append(
            plots.box_plot(
                [(r.label, r.distributions.get(m, [])) for r in ok],
                title=f"{m} per query",
                domain=None if spec is None else spec.value_range,
                width=430,
            )
        )
    return section(
        "KG Usage",
        Safe('<div class="wrap">'),
        usage,
        Safe("</div>"),
        figures(*boxes),
        anchor="usage",
        intro="TRIAGE §4.3: median per query over the queries where the metric is defined, with the number "
        "of N/A queries (hover for the most common reason). RPC is the retrieval path cost (expanded nodes).",
    )


def _with_interval(row: CompareRow, metric: str, shown: Safe) -> Safe:
    """``shown`` followed by the metric's 95 % interval ``[low, high]`` when the row has one."""
    text = row.interval_text(metric)
    if not text:
        return shown
    iv = row.intervals[metric]
    why = f"95 % clustered BCa interval over {iv.n} questions in {iv.n_clusters} clusters"
    return Safe(f"{shown} {cell(text, title=why, cls='muted')}")


def _gold_section(with_gold: list[CompareRow], columns: tuple[str, ...]) -> Safe:
    def shown(r: CompareRow, m: str) -> Safe:
        summary = _summary_cell(r.gold.get(m), mean=True)  # type: ignore[union-attr]
        return _with_interval(r, m, summary) if m == "Hits@1" else summary

    gold = table(
        ["framework / mode", *columns],
        [[_row_label(r), *(shown(r, m) for m in columns)] for r in with_gold],
        numeric=range(1, 1 + len(columns)),
    )
    bars = plots.bar_chart(
        [(r.label, r.gold["Hits@1"].mean or 0.0) for r in with_gold],  # type: ignore[index]
        title="Hits@1 (mean)",
        max_value=1.0,
        width=520,
        label_width=190,
    )
    return section(
        "Answer accuracy (gold)",
        Safe('<div class="wrap">'),
        gold,
        Safe("</div>"),
        figures(bars),
        anchor="gold",
        intro=f"Only for questions that carry gold answers: {', '.join(columns)} (CC: the gold answer is in "
        "the retrieved context), as means over the queries. Hits@1 carries its 95 % interval [low, high]: "
        "a bootstrap (BCa) over questions, resampling clusters of questions that share a gold entity.",
    )


def _p(value: float | None) -> str:
    if value is None:
        return "N/A"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def _difference_rows(hits: list[Difference]) -> list[list[object]]:
    return [
        [d.a, d.b, number(d.interval.estimate), f"[{number(d.interval.low)}, {number(d.interval.high)}]",
         _p(d.p_value), _p(d.p_holm),
         cell("yes", cls="good") if d.significant_holm else cell("no", cls="muted")]
        for d in hits
    ]  # fmt: skip


_DIFF_HEADERS = ["a", "b", "Hits@1 a − b", "95 % interval", "p", "Holm p", "significant (Holm)"]


def _differences_section(differences: list[Difference]) -> Safe:
    """The paired Hits@1 differences between every two rows, Holm-corrected: the significant pairs
    first, the others folded away."""
    hits = [d for d in differences if d.metric == "Hits@1"]
    sig = sorted((d for d in hits if d.significant_holm), key=lambda d: d.p_holm or 0.0)
    rest = [d for d in hits if not d.significant_holm]
    parts: list[object] = [
        table(_DIFF_HEADERS, _difference_rows(sig), numeric=(2, 3, 4, 5)) if sig else
        Safe('<p class="note">No pair differs significantly after the Holm correction.</p>'),
    ]  # fmt: skip
    if rest:
        parts.append(
            details(
                f"{len(rest)} of {len(hits)} pairs not distinguishable after Holm",
                table(_DIFF_HEADERS, _difference_rows(rest), numeric=(2, 3, 4, 5)),
            )
        )
    return section(
        "Hits@1 differences",
        Safe('<div class="wrap">'),
        *parts,
        Safe("</div>"),
        anchor="differences",
        intro=f"Paired over the questions both rows answered (clustered BCa, the same resamples for every "
        f"pair). {len(hits)} pairs are tested at once, so each p-value is corrected for multiple "
        f"comparisons by Holm–Bonferroni over the {len(hits)} pairs (family-wise error ≤ 5 %): "
        f"{len(sig)} pairs are significant after it, {sum(d.significant for d in hits)} before it "
        "(the 95 % interval alone excludes 0).",
    )


def _chain_section(ok: list[CompareRow]) -> Safe:
    funnels = [plots.funnel(chain_funnel(r.signatures), title=r.label, width=260) for r in ok if r.signatures]
    sig_bars = plots.stacked_bars(
        [(r.label, r.signatures) for r in ok],
        _SIG_ORDER,
        title="Chain signatures (share of queries)",
        colors=plots.SIGNATURE_COLORS,
        width=820,
        label_width=190,
    )
    sig_table = table(
        ["framework / mode", *_SIG_ORDER, "supported share [95 %]"],
        [[r.label, *(r.signatures.get(s, 0) for s in _SIG_ORDER), _supported_share(r)] for r in ok],
        numeric=range(1, 2 + len(_SIG_ORDER)),
    )
    return section(
        "Diagnostic chain",
        figures(sig_bars),
        _wide(sig_table),
        Safe("<h3>Chain funnels</h3>"),
        figures(*funnels) if funnels else "No query was diagnosed.",
        anchor="chain",
        intro=f"TRIAGE §4.5: {' → '.join(link.metric for link in CHAIN)}. Each funnel shows, per link, the "
        "share of queries that had not failed by that link (N/A links are skipped, not passed); the last "
        "bar is 'supported'.",
    )


def _supported_share(row: CompareRow) -> Safe:
    iv = row.intervals.get("chain:supported")
    if iv is None:
        return cell("–", cls="muted")
    return _with_interval(row, "chain:supported", cell(number(iv.estimate)))


_SEED_HEADERS = ("framework / mode", "Hits@1 mean", "95 % interval", "per seed", "supported mean",
                 "95 % interval", "per seed")  # fmt: skip


def _seeds_section(summary: SeedSummary, rows: list[CompareRow]) -> Safe:
    """Per row, Hits@1 and the supported share over corpus seeds: mean, 95 % t interval, per-seed values."""
    shown: dict[str, object] = {r.label: _row_label(r) for r in rows}

    def stat(label: str, metric: str) -> tuple[str, str, str]:
        s = summary.rows[label].get(metric)
        if s is None or s.mean is None:
            return "N/A", "", ""
        iv = "" if s.interval is None else f"[{number(s.interval.low)}, {number(s.interval.high)}]"
        return number(s.mean), iv, " ".join(number(v) for v in s.values)

    body = [[shown.get(label, label), *stat(label, "Hits@1"), *stat(label, "chain:supported")]
            for label in summary.rows]  # fmt: skip
    seeds = summary.seeds
    return section(
        "Across seeds",
        _wide(table(_SEED_HEADERS, body, numeric=(1, 2, 4, 5))),
        anchor="seeds",
        intro=f"The comparison repeated over corpus seeds {seeds[0]}–{seeds[-1]} ({len(seeds)} corpora): the "
        "mean over seeds of each row's rate with a 95 % Student-t interval over seeds (N/A where the row "
        f"did not complete). The other sections show seed {seeds[0]}.",
    )


def _rhd_section(ok: list[CompareRow]) -> Safe:
    hists = []
    for r in ok:
        items = [("∞" if k == "inf" else f"ℓ={k}", v) for k, v in r.rhd.items()]
        if items:
            hists.append(plots.column_chart(items, title=f"RHD — {r.label}", max_value=1.0, width=230))
    return section(
        "Reasoning hop depth",
        figures(*hists) if hists else "No query had an evaluable RHD.",
        anchor="rhd",
        intro="TRIAGE eq. 33: the share of queries whose grounded entities are at most ℓ hops apart in the "
        "retrieved subgraph; ∞ when a pair is disconnected.",
    )


def _rounds_section(with_rounds: list[CompareRow]) -> Safe:
    held = any(s.held_out_n for r in with_rounds for s in r.rounds)

    def acc(s: Any) -> float | None:
        return s.held_out if held else s.hits_at_1

    what = "held-out Hits@1" if held else "Hits@1"
    changes = sorted(
        ((r.label, 100 * (last - first)) for r in with_rounds
         if (first := acc(r.rounds[0])) is not None and (last := acc(r.rounds[-1])) is not None),
        key=lambda item: -item[1],
    )  # fmt: skip
    chart = plots.diverging_bars(
        changes, title=f"Change in {what}, last round − round 0 (points)", width=640, label_width=230
    )
    max_round = max(len(r.rounds) for r in with_rounds)
    rounds_table = table(
        ["framework / mode", *(f"round {i}" for i in range(max_round))],
        [[r.label, *(number(acc(s)) for s in r.rounds)] for r in with_rounds],
        numeric=range(1, 1 + max_round),
    )
    drift = [
        plots.diverging_bars(
            [(item, delta) for item, delta, _ in r.score_moves],
            title=f"Score drift from 100 — {r.label}",
            width=620,
            label_width=230,
        )
        for r in with_rounds
        if r.score_moves
    ]
    return section(
        "Feedback rounds",
        figures(chart) if changes else "No row has an accuracy in both the first and the last round.",
        _wide(rounds_table),
        Safe("<h3>Contribution-score drift (most promoted and most suppressed)</h3>"),
        figures(*drift) if drift else "No contribution score moved.",
        anchor="rounds",
        intro="EvoRAG: after each round the gold feedback on the rated questions is backpropagated into "
        "the contribution scores and the next round retrieves with the learned reweighting (only "
        "retrievers that consult triage_rerank can change). Accuracy is measured on the held-out "
        "questions, which are never rated. The chart shows each row's change over the rounds; the table "
        "each round's value.",
    )


def compare_html(result: CompareResult, *, registry: MetricRegistry | None = None) -> str:
    """Render a :class:`~triage_plugins.report.results.CompareResult` as one self-contained HTML document,
    one tab per section, answer accuracy first.

    :param registry: whose metric columns to show (default: the registry ``triage compare`` scores with).
    """
    registry = metric_registry() if registry is None else registry
    columns = compare_columns(registry)
    ok = [r for r in result.rows if r.status == "ok"]
    overview = _overview_section(result.rows)
    if not ok:
        return _page(
            result,
            _with_notes(result, [overview, section("Results", "No framework completed.", anchor="results")]),
        )
    kg = _kg_section(ok, columns)
    ok = [r for r in ok if r.queries]
    if not ok:
        usage = section("KG Usage", "No query was answered: no usage metrics.", anchor="usage")
        return _page(result, _with_notes(result, [overview, kg, usage]))
    first: list[object] = []
    with_gold = [r for r in ok if r.gold is not None]
    if with_gold:
        first.append(_gold_section(with_gold, columns["gold"]))
    if any(d.metric == "Hits@1" for d in result.differences):
        first.append(_differences_section(result.differences))
    if result.across_seeds is not None:
        first.append(_seeds_section(result.across_seeds, result.rows))
    sections = [*first, overview, kg, _usage_section(ok, columns["usage"], registry), _chain_section(ok),
                _rhd_section(ok)]  # fmt: skip
    with_rounds = [r for r in ok if r.rounds]
    if with_rounds:
        sections.append(_rounds_section(with_rounds))
    return _page(result, _with_notes(result, sections))


def _with_notes(result: CompareResult, sections: list[object]) -> list[object]:
    notes = [f"{r.label}: {n}" for r in result.rows for n in r.notes] + list(result.notes)
    if notes:
        items = "".join(f"<li>{cell(n)}</li>" for n in notes)
        sections.append(section("Notes", Safe(f"<ul>{items}</ul>"), anchor="notes"))
    return sections


_TABS = {"gold": "Accuracy", "differences": "Differences", "seeds": "Seeds", "frameworks": "Frameworks",
         "results": "Results", "kg": "KG", "usage": "Usage", "chain": "Chain", "rhd": "RHD",
         "rounds": "Feedback", "notes": "Notes"}  # fmt: skip

#: Shows one section at a time (the nav's tabs; ``#all`` shows every one); without it all show.
TAB_SCRIPT = r"""(function(){
"use strict";
var doc=document;doc.documentElement.classList.add("js");
var panes=[].slice.call(doc.querySelectorAll("main > section[id]"));
var links=[].slice.call(doc.querySelectorAll("nav a[data-tab]"));
function show(name){var all=name==="all";
 if(!all&&!panes.some(function(p){return p.id===name;}))name=panes.length?panes[0].id:"";
 panes.forEach(function(p){p.hidden=!all&&p.id!==name;});
 links.forEach(function(a){a.classList.toggle("on",a.dataset.tab===(all?"all":name));});}
function route(){var h="";try{h=decodeURIComponent(location.hash.slice(1));}catch(e){h="";}show(h);}
window.addEventListener("hashchange",route);route();
})();"""


def _page(result: CompareResult, sections: list[object]) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    seeds = result.across_seeds.seeds if result.across_seeds is not None else (result.seed,)
    seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}–{seeds[-1]}"
    subtitle = (
        f"Corpus: {result.corpus} · {result.questions} questions · {seed_text} · "
        f"{result.feedback_rounds} feedback round(s) · {stamp}"
    )
    present = [a for s in sections if (a := _anchor(s)) in _TABS]
    nav = [(a, _TABS[a]) for a in present] + [("all", "All sections")]
    return page("triage compare", subtitle, sections, nav=nav, script=TAB_SCRIPT)


def _anchor(part: object) -> str:
    text = str(part)
    return (
        text[len('<section id="') : text.index('"', len('<section id="'))]
        if text.startswith('<section id="')
        else ""
    )
