"""The terminal form of both reports: the same tables as the HTML, rendered with rich.

Untrusted text (entity names, queries, error messages) is wrapped in :class:`rich.text.Text`, so
rich markup inside it (``[bold]``, ``[link=…]``) is printed literally, never interpreted.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from triage_plugins.diagnosis.chain import SIGNATURES
from triage_plugins.report.compare_html import chain_funnel, compare_columns
from triage_plugins.report.data import CHAIN_METRICS

if TYPE_CHECKING:
    from rich.console import Console

    from triage_plugins.apps.compare import CompareResult, CompareRow, MetricSummary
    from triage_plugins.metrics.registry import MetricRegistry
    from triage_plugins.metrics.result import MetricResult
    from triage_plugins.report.data import StoreReport

__all__ = ["render_compare", "render_store_report"]

_SIG_ORDER = (*SIGNATURES, "undetermined")


def _num(value: float | None, digits: int = 3) -> Text:
    if value is None:
        return Text("N/A", style="yellow")
    if math.isinf(value):
        return Text("∞")
    return Text(f"{value:.{digits}f}")


def _metric(result: MetricResult | None) -> Text:
    if result is None:
        return Text("–", style="dim")
    return _num(result.value)


def _summary(s: MetricSummary | None, *, mean: bool = False) -> Text:
    if s is None:
        return Text("–", style="dim")
    text = _num(s.mean if mean else s.median)
    if s.na and (s.median is not None):
        text.append(f" ({s.na} N/A)", style="yellow dim")
    return text


def _frameworks_table(result: CompareResult, console: Console) -> None:
    frameworks = Table(title="Frameworks", title_justify="left")
    for col in ("framework", "mode", "status"):
        frameworks.add_column(col, no_wrap=True)
    for col in ("queries", "triples", "graph", "run s", "query ms"):
        frameworks.add_column(col, justify="right")
    for r in result.rows:
        style = {"ok": "green", "failed": "bold red", "unavailable": "dim"}[r.status]
        q_ms = r.latency.get("query_median")
        frameworks.add_row(
            Text(r.framework),
            Text(r.mode),
            Text(r.status, style=style),
            str(r.queries) if r.status == "ok" else "",
            "" if r.triples_extracted is None else str(r.triples_extracted),
            "" if r.graph_triples is None else str(r.graph_triples),
            "" if r.seconds is None else f"{r.seconds:.2f}",
            "" if q_ms is None else f"{q_ms * 1000:.1f}",
        )
    console.print(frameworks)
    for r in result.rows:
        if r.status != "ok":
            style = "bold red" if r.status == "failed" else "dim"
            console.print(Text.assemble((f"{r.framework} {r.status}: ", style), r.reason or ""))


def _kg_table(ok: list[CompareRow], columns: dict[str, tuple[str, ...]], console: Console) -> None:
    impl, val = columns["implementation"], columns["validation"]
    kg = Table(title="KG Implementation (§4.1) and Validation (§4.2)", title_justify="left")
    kg.add_column("framework / mode", no_wrap=True)
    for m in (*impl, *val):
        kg.add_column(m, justify="right")
    for r in ok:
        kg.add_row(
            Text(r.label),
            *(_metric(r.implementation.get(m)) for m in impl),
            *(_metric(r.validation.get(m)) for m in val),
        )
    console.print(kg)


def _usage_tables(ok: list[CompareRow], columns: dict[str, tuple[str, ...]], console: Console) -> None:
    usage = Table(title="KG Usage (§4.3): median per query (N/A count)", title_justify="left")
    usage.add_column("framework / mode", no_wrap=True)
    usage.add_column("queries", justify="right")
    for m in columns["usage"]:
        usage.add_column(m, justify="right")
    for r in ok:
        usage.add_row(Text(r.label), str(r.queries), *(_summary(r.usage.get(m)) for m in columns["usage"]))
    console.print(usage)

    with_gold = [r for r in ok if r.gold is not None]
    if with_gold:
        gold = Table(title="Answer accuracy (gold; means)", title_justify="left")
        gold.add_column("framework / mode")
        for m in columns["gold"]:
            gold.add_column(m, justify="right")
        for r in with_gold:
            gold.add_row(Text(r.label), *(_summary(r.gold.get(m), mean=True) for m in columns["gold"]))  # type: ignore[union-attr]
        console.print(gold)


def _chain_tables(ok: list[CompareRow], console: Console) -> None:
    present = [s for s in _SIG_ORDER if any(r.signatures.get(s) for r in ok)]
    sigs = Table(title="Chain signatures (§4.5): queries", title_justify="left")
    sigs.add_column("framework / mode", no_wrap=True)
    for s in present:
        sigs.add_column(s, justify="right")
    for r in ok:
        sigs.add_row(Text(r.label), *(str(r.signatures.get(s, 0)) for s in present))
    console.print(sigs)

    funnel = Table(
        title="Chain funnel (share not failed at each link) and RHD (eq. 33)", title_justify="left"
    )
    funnel.add_column("framework / mode", no_wrap=True)
    for link in CHAIN_METRICS:
        funnel.add_column(link, justify="right")
    funnel.add_column("RHD ℓ: share")
    for r in ok:
        shares = dict(chain_funnel(r.signatures))
        rhd = "  ".join(f"{'∞' if k == 'inf' else k}:{v:.0%}" for k, v in r.rhd.items()) or "N/A"
        funnel.add_row(
            Text(r.label), *(f"{shares[m]:.0%}" if m in shares else "N/A" for m in CHAIN_METRICS), rhd
        )
    console.print(funnel)


def _rounds_table(ok: list[CompareRow], console: Console) -> None:
    with_rounds = [r for r in ok if r.rounds]
    if not with_rounds:
        return
    n = max(len(r.rounds) for r in with_rounds)
    rounds = Table(title="Hits@1 per feedback round (EvoRAG reweighting)", title_justify="left")
    rounds.add_column("framework / mode")
    for i in range(n):
        rounds.add_column(f"round {i}", justify="right")
    for r in with_rounds:
        rounds.add_row(Text(r.label), *(_num(s.hits_at_1) for s in r.rounds))
    console.print(rounds)


def render_compare(
    result: CompareResult, console: Console, *, registry: MetricRegistry | None = None
) -> None:
    """Print a :class:`~triage_plugins.apps.compare.CompareResult` as rich tables.

    :param registry: whose metric columns to show (default: the registry ``triage compare`` scores with).
    """
    console.print(
        Text.assemble(
            ("triage compare", "bold"),
            f" — {result.corpus}, {result.questions} questions, seed {result.seed}, "
            f"{result.feedback_rounds} feedback round(s)",
        )
    )
    _frameworks_table(result, console)
    ok = [r for r in result.rows if r.status == "ok"]
    if not ok:
        return
    columns = compare_columns(registry)
    _kg_table(ok, columns, console)
    ok = [r for r in ok if r.queries]
    if not ok:
        console.print(Text("no query was answered: no usage metrics", style="dim"))
        _notes(result, console)
        return
    _usage_tables(ok, columns, console)
    _chain_tables(ok, console)
    _rounds_table(ok, console)
    _notes(result, console)


def _notes(result: CompareResult, console: Console) -> None:
    for r in result.rows:
        for note in r.notes:
            console.print(Text(f"note: {r.label}: {note}", style="dim"))
    for note in result.notes:
        console.print(Text(f"note: {note}", style="dim"))


def render_store_report(report: StoreReport, console: Console, *, traces: int = 2) -> None:
    """Print a :class:`~triage_plugins.report.data.StoreReport` as rich tables."""
    from triage_plugins.diagnosis.chain import render_trace

    console.print(Text.assemble(("triage report", "bold"), f" — {report.store}, window W = {report.window}"))
    if report.dropped or report.undelivered:
        lost = report.dropped + report.undelivered
        console.print(
            Text(f"warning: {lost} events never reached this store (see the note at the end)", style="yellow"),
            soft_wrap=True,
        )
    overview = Table(title="Overview (chain metrics: median per query)", title_justify="left")
    overview.add_column("framework / retriever", no_wrap=True)
    overview.add_column("queries", justify="right")
    for m in CHAIN_METRICS:
        overview.add_column(m, justify="right")
    overview.add_column("triggers", justify="right")
    overview.add_column("signatures")
    for g in report.groups:
        overview.add_row(
            Text(g.label),
            str(len(g.queries)),
            *(_num(g.stats[m].median, 2) if m in g.stats else Text("–", style="dim") for m in CHAIN_METRICS),
            str(len(g.triggers)),
            ", ".join(f"{s} {n}" for s, n in g.signatures.items()),
        )
    console.print(overview)

    if report.graph:
        names = list(dict.fromkeys(n for metrics in report.graph.values() for n in metrics))
        graph = Table(title="Graph (latest §4.1/§4.2 metrics)", title_justify="left")
        graph.add_column("metric", no_wrap=True)
        for fw in report.graph:
            graph.add_column(Text(fw), justify="right")
        for n in names:
            graph.add_row(n, *(_metric(metrics.get(n)) for metrics in report.graph.values()))
        console.print(graph)

    for g in report.groups:
        if g.triggers:
            t = Table(title=f"KG-update triggers — {g.label}", title_justify="left")
            for col in ("after query", "metric", "statistic", "value", "threshold", "stage", "first lever"):
                t.add_column(col)
            for s in g.triggers:
                t.add_row(
                    Text(f"#{s.position} ({s.query_id})"), s.metric, s.statistic, f"{s.value:.3f}",
                    f"{s.threshold:.3f}", s.stage or "investigate", Text(s.levers[0] if s.levers else ""),
                )  # fmt: skip
            console.print(t)
        for sig, queries in g.worst.items():
            console.print(Text(f"worst {sig} queries — {g.label}", style="bold"))
            for q in queries[:traces]:
                console.print(Text(f"  {q.query_id}: {q.query or '(query text not recorded)'}"))
                console.print(Text("    " + render_trace(list(q.steps)).replace("\n", "\n    "), style="dim"))

    for u in report.scores:
        t = Table(title=f"Contribution scores — {u.unit}: {u.moved} of {u.total} moved", title_justify="left")
        for col in ("", "id", "raw", "vs 100", "updates"):
            t.add_column(col, justify="right" if col in {"raw", "vs 100", "updates"} else "left")
        for kind, moves in (("promoted", u.promoted), ("suppressed", u.suppressed)):
            for m in moves:
                t.add_row(kind, Text(m.id), f"{m.raw:.2f}", f"{m.delta:+.2f}", str(m.n_updates))
        console.print(t)
    for note in report.notes:
        console.print(Text(f"note: {note}", style="dim"))
