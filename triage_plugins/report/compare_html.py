"""The HTML page of ``triage compare``: one self-contained file (inline CSS and SVG, no script).

The metric columns are those of the metric registry (:func:`compare_columns`), so a metric a plugin
registers is shown with no edit here.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from triage_plugins.diagnosis.chain import CHAIN, SIGNATURES
from triage_plugins.metrics.registry import MetricRegistry, metric_registry
from triage_plugins.report import plots
from triage_plugins.report.html import Safe, cell, figures, metric_cell, number, page, section, table

if TYPE_CHECKING:
    from triage_plugins.apps.compare import CompareResult, CompareRow, Difference, MetricSummary, SeedSummary

__all__ = ["chain_funnel", "compare_columns", "compare_html"]

_SIG_ORDER = (*SIGNATURES, "undetermined")
_GROUPS = ("implementation", "validation", "usage", "gold")


def compare_columns(registry: MetricRegistry | None = None) -> dict[str, tuple[str, ...]]:
    """The compare tables' metric columns per group (``implementation``, ``validation``, ``usage``,
    ``gold``), from ``registry`` (default :func:`~triage_plugins.metrics.registry.metric_registry`,
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


def _setup_cell(row: CompareRow) -> Safe:
    """The row's query set-up; a non-default one is flagged ``(non-default: …)`` (#18 item 3)."""
    if row.setup.default:
        return cell(row.setup.description, cls="muted")
    return cell(row.setup.label, cls="bad")


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
        [[r.display_label, *(shown(r, m) for m in columns)] for r in with_gold],
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
        gold,
        figures(bars),
        anchor="gold",
        intro=f"Only for questions that carry gold answers: {', '.join(columns)} (CC: the gold answer is in "
        "the retrieved context), as means over the queries. Hits@1 carries its 95 % interval [low, high]: "
        "a bootstrap (BCa) over questions, resampling clusters of questions that share a gold entity.",
    )


def _differences_section(differences: list[Difference]) -> Safe:
    """The paired Hits@1 differences between every two rows, each marked significant or not."""
    hits = [d for d in differences if d.metric == "Hits@1"]
    rows = [
        [d.a, d.b, number(d.interval.estimate), f"[{number(d.interval.low)}, {number(d.interval.high)}]",
         cell("yes", cls="good") if d.significant else cell("not significant", cls="muted")]
        for d in hits
    ]  # fmt: skip
    return section(
        "Hits@1 differences",
        table(["a", "b", "Hits@1 a − b", "95 % interval", "significant"], rows, numeric=(2, 3)),
        anchor="differences",
        intro="Paired over the questions both rows answered (clustered BCa, the same resamples for every "
        "pair). A difference whose interval contains 0 is not significant: those two rows are not "
        "distinguishable on these questions.",
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
        sig_table,
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
    shown = {r.label: r.display_label for r in rows}

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
        table(_SEED_HEADERS, body, numeric=(1, 2, 4, 5)),
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

    series = {r.label: [(float(s.round), acc(s)) for s in r.rounds] for r in with_rounds}
    what = "Held-out Hits@1 (questions never rated)" if held else "Hits@1"
    chart = plots.line_chart(series, title=f"{what} per feedback round", x_label="feedback round", width=640)
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
        figures(chart),
        rounds_table,
        Safe("<h3>Contribution-score drift (most promoted and most suppressed)</h3>"),
        figures(*drift) if drift else "No contribution score moved.",
        anchor="rounds",
        intro="EvoRAG: after each round the gold feedback on the rated questions is backpropagated into "
        "the contribution scores and the next round retrieves with the learned reweighting (only "
        "retrievers that consult triage_rerank can change). Accuracy is measured on the held-out "
        "questions, which are never rated.",
    )


def compare_html(result: CompareResult, *, registry: MetricRegistry | None = None) -> str:
    """Render a :class:`~triage_plugins.apps.compare.CompareResult` as one self-contained HTML document.

    :param registry: whose metric columns to show (default: the registry ``triage compare`` scores with).
    """
    registry = metric_registry() if registry is None else registry
    columns = compare_columns(registry)
    ok = [r for r in result.rows if r.status == "ok"]
    sections: list[object] = [_overview_section(result.rows)]
    if not ok:
        sections.append(section("Results", "No framework completed.", anchor="results"))
        return _page(result, _with_notes(result, sections))
    sections.append(_kg_section(ok, columns))
    ok = [r for r in ok if r.queries]
    if not ok:
        sections.append(section("KG Usage", "No query was answered: no usage metrics.", anchor="usage"))
        return _page(result, _with_notes(result, sections))
    sections.append(_usage_section(ok, columns["usage"], registry))
    with_gold = [r for r in ok if r.gold is not None]
    if result.across_seeds is not None:
        sections.append(_seeds_section(result.across_seeds, result.rows))
    if with_gold:
        sections.append(_gold_section(with_gold, columns["gold"]))
    if any(d.metric == "Hits@1" for d in result.differences):
        sections.append(_differences_section(result.differences))
    sections += [_chain_section(ok), _rhd_section(ok)]
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


def _page(result: CompareResult, sections: list[object]) -> str:
    stamp = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    seeds = result.across_seeds.seeds if result.across_seeds is not None else (result.seed,)
    seed_text = f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}–{seeds[-1]}"
    subtitle = (
        f"Corpus: {result.corpus} · {result.questions} questions · {seed_text} · "
        f"{result.feedback_rounds} feedback round(s) · {stamp}"
    )
    nav = [("frameworks", "Frameworks"), ("kg", "KG"), ("usage", "Usage"), ("seeds", "Seeds"), ("gold", "Accuracy"),
           ("differences", "Differences"), ("chain", "Chain"), ("rhd", "RHD"), ("rounds", "Feedback"), ("notes", "Notes")]  # fmt: skip
    return page("triage compare", subtitle, sections, nav=nav)
