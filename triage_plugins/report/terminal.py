"""The terminal form of both reports: the same tables as the HTML, rendered with rich.

Untrusted text (entity names, queries, error messages) is wrapped in :class:`rich.text.Text`, so
rich markup inside it (``[bold]``, ``[link=…]``) is printed literally, never interpreted.

Nothing is cut to ``…``: every column wraps (folding inside a word only when it must), and a
metric table too wide for the console even when wrapped at word boundaries is printed pivoted
(metrics as rows, frameworks as columns), so it reads at 80 columns and in logs.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from rich.console import Group
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from triage_plugins.diagnosis.chain import SIGNATURES
from triage_plugins.report.compare_html import chain_funnel, compare_columns
from triage_plugins.report.data import CHAIN_METRICS, audit_line

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

    from triage_plugins.metrics.registry import MetricRegistry
    from triage_plugins.metrics.result import MetricResult
    from triage_plugins.report.data import ScoreUnitReport, StoreReport
    from triage_plugins.report.results import CompareResult, CompareRow, MetricSummary

__all__ = ["fits", "fold_table", "matrix_table", "render_compare", "render_store_report"]

_SIG_ORDER = (*SIGNATURES, "undetermined")
_CORNER = ("framework / mode", "metric")


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


def fold_table(table: Table, console: Console | None = None) -> Table:
    """Let every header and cell of ``table`` wrap (fold inside a word only if it must), never end in
    ``…``; with ``console``, also give each column at least its longest word when the table fits at
    all (rich alone shrinks the widest columns first and splits a word that would have fitted)."""
    for column in table.columns:
        column.overflow = "fold"
        column.no_wrap = False
    if console is not None:
        _settle_widths(table, console)
    return table


def fits(table: Table, console: Console) -> bool:
    """Whether ``table`` fits the console with every cell wrapped only at word boundaries."""
    unbounded = console.options.update_width(10_000)
    return Measurement.get(console, unbounded, table).minimum <= console.width


def _settle_widths(table: Table, console: Console) -> None:
    """Fix each column's width between its longest word and its widest line so that the table fills
    the console; a table whose longest words do not fit side by side is left to rich (it folds)."""
    unbounded = console.options.update_width(10_000)
    # rich has no public per-column measure; these two are stable since rich 10
    ranges = [table._measure_column(console, unbounded, column) for column in table.columns]
    available = console.width - table._extra_width
    lows = [r.minimum for r in ranges]
    highs = [max(r.minimum, r.maximum) for r in ranges]
    if sum(highs) <= available or sum(lows) > available:
        return
    for column, width in zip(table.columns, _share(lows, highs, available), strict=True):
        column.width = max(1, width - table._get_padding_width(column._index))


def _share(lows: list[int], highs: list[int], total: int) -> list[int]:
    """Widths from ``lows`` up towards ``highs``, the spare room split evenly among the columns that
    still want more (narrow columns are satisfied first), summing to at most ``total``."""
    widths, spare = list(lows), total - sum(lows)
    while spare > 0:
        wanting = [i for i, (w, h) in enumerate(zip(widths, highs, strict=True)) if w < h]
        if not wanting:
            break
        step = max(1, spare // len(wanting))
        for i in wanting:
            give = min(step, highs[i] - widths[i], spare)
            widths[i] += give
            spare -= give
            if not spare:
                break
    return widths


Cell = Text | str


def _matrix(
    console: Console,
    title: str,
    corner: tuple[str, str],
    rows: list[tuple[Text, list[Cell]]],
    columns: list[tuple[str, str]],
) -> None:
    console.print(matrix_table(console, title, corner, rows, columns))


def _wide(
    title: str,
    corner: str,
    rows: list[tuple[Text, list[Cell]]],
    columns: list[tuple[str, str]],
    keep: range | list[int] | None = None,
) -> Table:
    keep = range(len(columns)) if keep is None else keep
    table = Table(title=title, title_justify="left")
    table.add_column(corner)
    for i in keep:
        table.add_column(columns[i][0], justify=columns[i][1])  # type: ignore[arg-type]
    for label, cells in rows:
        table.add_row(label, *(cells[i] for i in keep))
    return table


def matrix_table(
    console: Console,
    title: str,
    corner: tuple[str, str],
    rows: list[tuple[Text, list[Cell]]],
    columns: list[tuple[str, str]],
) -> RenderableType:
    """Rows × columns as one table that fits ``console`` without splitting a word: the wide form if
    it fits, else pivoted (columns as rows), else the wide form split into several tables of as many
    columns as fit, each repeating the row labels (titled "… (1 of 3)").

    :param corner: header of the label column as (wide form, pivoted form).
    :param columns: (name, justify) of each value column.
    """
    wide = _wide(title, corner[0], rows, columns)
    if fits(wide, console) or not rows:
        return fold_table(wide, console)
    tall = Table(title=title, title_justify="left")
    tall.add_column(corner[1])
    for label, _ in rows:
        tall.add_column(label, justify="right")
    for i, (name, _) in enumerate(columns):
        tall.add_row(name, *(cells[i] for _, cells in rows))
    if fits(tall, console):
        return fold_table(tall, console)
    chunks: list[list[int]] = [[]]
    for i in range(len(columns)):
        if chunks[-1] and not fits(_wide(title, corner[0], rows, columns, [*chunks[-1], i]), console):
            chunks.append([])
        chunks[-1].append(i)
    parts = [
        fold_table(_wide(f"{title} ({k} of {len(chunks)})", corner[0], rows, columns, keep), console)
        for k, keep in enumerate(chunks, 1)
    ]
    return Group(*parts)


def _frameworks_table(result: CompareResult, console: Console) -> None:
    """One row per framework × mode; a non-default set-up is marked on the row and described below
    it, with the reason of every row that did not run (prose wraps at word boundaries)."""
    rows: list[tuple[Text, list[Cell]]] = []
    for r in result.rows:
        style = {"ok": "green", "failed": "bold red", "unavailable": "dim"}[r.status]
        q_ms = r.latency.get("query_median")
        label = Text(r.label)
        if r.setup.label:
            label.append(" (non-default)", style="yellow")
        rows.append(
            (
                label,
                [
                    Text(r.status, style=style),
                    str(r.queries) if r.status == "ok" else "",
                    "" if r.triples_extracted is None else str(r.triples_extracted),
                    "" if r.graph_triples is None else str(r.graph_triples),
                    "" if r.seconds is None else f"{r.seconds:.2f}",
                    "" if q_ms is None else f"{q_ms * 1000:.1f}",
                ],
            )
        )
    columns = [
        ("status", "left"),
        *((c, "right") for c in ("queries", "triples", "graph", "run s", "query ms")),
    ]
    _matrix(console, "Frameworks", ("framework / mode", "field"), rows, columns)
    for r in result.rows:
        if r.setup.label:
            console.print(Text.assemble((f"set-up of {r.label}: ", "yellow"), r.setup.description))
    for r in result.rows:
        if r.status != "ok":
            style = "bold red" if r.status == "failed" else "dim"
            console.print(Text.assemble((f"{r.label} {r.status}: ", style), r.reason or ""))


def _kg_table(ok: list[CompareRow], columns: dict[str, tuple[str, ...]], console: Console) -> None:
    impl, val = columns["implementation"], columns["validation"]
    rows = [
        (
            Text(r.label),
            [
                *(_metric(r.implementation.get(m)) for m in impl),
                *(_metric(r.validation.get(m)) for m in val),
            ],
        )
        for r in ok
    ]
    title = "KG Implementation (§4.1) and Validation (§4.2)"
    _matrix(console, title, _CORNER, rows, [(m, "right") for m in (*impl, *val)])


def _usage_tables(ok: list[CompareRow], columns: dict[str, tuple[str, ...]], console: Console) -> None:
    usage = columns["usage"]
    rows = [(Text(r.label), [str(r.queries), *(_summary(r.usage.get(m)) for m in usage)]) for r in ok]
    title = "KG Usage (§4.3): median per query (N/A count)"
    _matrix(console, title, _CORNER, rows, [(m, "right") for m in ("queries", *usage)])

    with_gold = [r for r in ok if r.gold is not None]
    if with_gold:
        # the set-up itself is in the Frameworks table; here a marker keeps the rows short
        gold = [
            (
                Text(r.label + (" (non-default)" if r.setup.label else "")),
                [_gold_cell(r, m) for m in columns["gold"]],
            )
            for r in with_gold
        ]
        title = "Answer accuracy (gold; means; Hits@1 with its 95 % interval)"
        _matrix(console, title, _CORNER, gold, [(m, "right") for m in columns["gold"]])  # type: ignore[arg-type]


def _gold_cell(row: CompareRow, metric: str) -> Text:
    text = _summary(row.gold.get(metric), mean=True)  # type: ignore[union-attr]
    if metric == "Hits@1" and row.interval_text(metric):
        text.append(f" {row.interval_text(metric)}", style="dim")
    return text


def _differences_table(result: CompareResult, console: Console) -> None:
    """The Hits@1 pairs that differ after Holm's correction over every pair, largest first; the
    others are counted, not listed (they are in --json and --html)."""
    # Late: diagnosis.intervals loads scipy, which a command importing the report's records needs not.
    from triage_plugins.diagnosis.intervals import format_interval

    hits = [d for d in result.differences if d.metric == "Hits@1"]
    if not hits:
        return
    shown = sorted((d for d in hits if d.significant_holm), key=lambda d: -abs(d.interval.estimate))
    title = (
        f"Hits@1 differences a − b (paired, 95 % clustered BCa): {len(shown)} of {len(hits)} pairs differ "
        f"after the Holm–Bonferroni correction for {len(hits)} comparisons"
    )
    if not shown:
        console.print(Text(title, style="bold"))
        console.print(Text("no pair differs after the correction", style="dim"))
        return
    rows: list[tuple[Text, list[Cell]]] = [
        (Text(f"{d.a} − {d.b}"), [_num(d.interval.estimate), format_interval(d.interval), _p(d.p_value),
                                   _p(d.p_holm)])
        for d in shown
    ]  # fmt: skip
    columns = [("a − b", "right"), ("95 % interval", "right"), ("p", "right"), ("Holm p", "right")]
    _matrix(console, title, ("pair a − b", "pair"), rows, columns)
    if len(shown) < len(hits):
        rest = len(hits) - len(shown)
        what = "pair does" if rest == 1 else "pairs do"
        console.print(Text(f"{rest} more {what} not differ after Holm (all pairs: --json, --html)", style="dim"))


def _p(value: float | None) -> Text:
    """A p-value for a table: three decimals, ``<0.001`` below that."""
    if value is None:
        return Text("N/A", style="yellow")
    return Text("<0.001" if value < 0.001 else f"{value:.3f}")


def _seeds_table(result: CompareResult, console: Console) -> None:
    from triage_plugins.diagnosis.intervals import format_interval

    summary = result.across_seeds
    if summary is None:
        return
    rows: list[tuple[Text, list[Cell]]] = []
    for label, stats in summary.rows.items():
        cells: list[Cell] = []
        for metric in ("Hits@1", "chain:supported"):
            s = stats.get(metric)
            text = _num(None if s is None else s.mean)
            if s is not None and s.interval is not None:
                text.append(f" {format_interval(s.interval)}", style="dim")
            cells.append(text)
        rows.append((Text(label), cells))
    title = f"Across seeds {summary.seeds[0]}–{summary.seeds[-1]}: mean [95 % t interval over seeds]"
    _matrix(console, title, _CORNER, rows, [("Hits@1", "right"), ("supported", "right")])


def _chain_tables(ok: list[CompareRow], console: Console) -> None:
    present = [s for s in _SIG_ORDER if any(r.signatures.get(s) for r in ok)]
    rows = [(Text(r.label), [str(r.signatures.get(s, 0)) for s in present]) for r in ok]
    title = "Chain signatures (§4.5): queries"
    _matrix(console, title, ("framework / mode", "signature"), rows, [(s, "right") for s in present])

    funnel: list[tuple[Text, list[Cell]]] = []
    for r in ok:
        shares = dict(chain_funnel(r.signatures))
        rhd = "  ".join(f"{'∞' if k == 'inf' else k}:{v:.0%}" for k, v in r.rhd.items()) or "N/A"
        funnel.append(
            (Text(r.label), [*(f"{shares[m]:.0%}" if m in shares else "N/A" for m in CHAIN_METRICS), rhd])
        )
    title = "Chain funnel (share not failed at each link) and RHD (eq. 33)"
    cols = [*((m, "right") for m in CHAIN_METRICS), ("RHD ℓ: share", "left")]
    _matrix(console, title, ("framework / mode", "link"), funnel, cols)


def _rounds_table(ok: list[CompareRow], console: Console) -> None:
    with_rounds = [r for r in ok if r.rounds]
    if not with_rounds:
        return
    n = max(len(r.rounds) for r in with_rounds)
    held = any(s.held_out_n for r in with_rounds for s in r.rounds)
    rows: list[tuple[Text, list[Cell]]] = [
        (Text(r.label), [*(_round_cell(s, held) for s in r.rounds), *([""] * (n - len(r.rounds)))])
        for r in with_rounds
    ]
    title = (
        "Held-out Hits@1 per feedback round (questions never rated; 95 % interval)"
        if held
        else "Hits@1 per feedback round (EvoRAG reweighting)"
    )
    _matrix(console, title, ("framework / mode", "round"), rows, [(f"round {i}", "right") for i in range(n)])
    for r in with_rounds:
        if held and r.score_moves and len({s.held_out for s in r.rounds}) == 1:
            console.print(
                f"{r.label}: feedback moved learned scores, but held-out accuracy did not change in "
                "any round"
            )


def _round_cell(s: Any, held: bool) -> Cell:
    """One round's accuracy: held-out Hits@1 with its interval (when split), else Hits@1."""
    if not held:
        return _num(s.hits_at_1)
    iv = s.held_out_interval
    text = _num(s.held_out)
    return text if iv is None else f"{text} [{iv.low:.2f}, {iv.high:.2f}]"


def render_compare(
    result: CompareResult, console: Console, *, registry: MetricRegistry | None = None
) -> None:
    """Print a :class:`~triage_plugins.report.results.CompareResult` as rich tables.

    :param registry: whose metric columns to show (default: the registry ``triage compare`` scores with).
    """
    console.print(
        Text.assemble(
            ("triage compare", "bold"),
            f" — {result.corpus}, {result.questions} questions, {_seed_text(result)}, "
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
    _differences_table(result, console)
    _seeds_table(result, console)
    _chain_tables(ok, console)
    _rounds_table(ok, console)
    _notes(result, console)


def _seed_text(result: CompareResult) -> str:
    seeds = result.across_seeds.seeds if result.across_seeds is not None else (result.seed,)
    return f"seed {seeds[0]}" if len(seeds) == 1 else f"seeds {seeds[0]}–{seeds[-1]}"


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
            Text(
                f"warning: {lost} events never reached this store (see the note at the end)", style="yellow"
            ),
            soft_wrap=True,
        )
    overview = [
        (
            Text(g.label),
            [
                str(len(g.queries)),
                *(
                    _num(g.stats[m].median, 2) if m in g.stats else Text("–", style="dim")
                    for m in CHAIN_METRICS
                ),
                str(len(g.triggers)),
                ", ".join(f"{s} {n}" for s, n in g.signatures.items()),
            ],
        )
        for g in report.groups
    ]
    cols = [
        ("queries", "right"),
        *((m, "right") for m in CHAIN_METRICS),
        ("triggers", "right"),
        ("signatures", "left"),
    ]
    title = "Overview (chain metrics: median per query)"
    _matrix(console, title, ("framework / retriever", "metric"), overview, cols)

    if report.graph:
        names = list(dict.fromkeys(n for metrics in report.graph.values() for n in metrics))
        graph = Table(title="Graph (latest §4.1/§4.2 metrics)", title_justify="left")
        graph.add_column("metric")
        for fw in report.graph:
            graph.add_column(Text(fw), justify="right")
        for n in names:
            graph.add_row(n, *(_metric(metrics.get(n)) for metrics in report.graph.values()))
        console.print(fold_table(graph, console))

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
            console.print(fold_table(t, console))
        for sig, queries in g.worst.items():
            console.print(Text(f"worst {sig} queries — {g.label}", style="bold"))
            for q in queries[:traces]:
                console.print(Text(f"  {q.query_id}: {q.query or '(query text not recorded)'}"))
                console.print(Text("    " + render_trace(list(q.steps)).replace("\n", "\n    "), style="dim"))

    for u in report.scores:
        _scores_table(u, console)
    for note in report.notes:
        console.print(Text(f"note: {note}", style="dim"))


def _scores_table(u: ScoreUnitReport, console: Console) -> None:
    """The learned scores that moved most; an id is never split: when the table is too narrow for
    the longest id, it becomes the row label of a table that splits its other columns."""
    title = f"Contribution scores — {u.unit}: {u.moved} of {u.total} moved"
    moves = [(kind, m) for kind, ms in (("promoted", u.promoted), ("suppressed", u.suppressed)) for m in ms]
    t = Table(title=title, title_justify="left")
    for col in ("", "id", "raw", "vs 100", "updates", "why", "largest step"):
        t.add_column(col, justify="right" if col in {"raw", "vs 100", "updates"} else "left")
    for kind, m in moves:
        t.add_row(kind, Text(m.id), f"{m.raw:.2f}", f"{m.delta:+.2f}", str(m.n_updates), *_why(m))
    if u.reasons:
        console.print(Text(audit_line(u.reasons)))
    if fits(t, console) or not moves:
        console.print(fold_table(t, console))
        return
    rows: list[tuple[Text, list[Cell]]] = [
        (Text(m.id), [kind, f"{m.raw:.2f}", f"{m.delta:+.2f}", str(m.n_updates), *_why(m)])
        for kind, m in moves
    ]
    columns = [("moved", "left"), ("raw", "right"), ("vs 100", "right"), ("updates", "right")]
    columns += [("why", "left"), ("largest step", "left")]
    _matrix(console, title, ("id", "field"), rows, columns)


def _why(m: Any) -> list[Cell]:
    """The audit cells of a score: why it moved, and the feedback (query id, step) that moved it most
    (the HTML report lists the three largest)."""
    by = f"{m.by[0][0]} {m.by[0][1]:+.1f}" if m.by else "-"
    return [Text(m.reason or "-"), Text(by)]
