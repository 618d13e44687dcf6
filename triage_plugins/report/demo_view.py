"""Terminal rendering of ``triage demo`` (rich): one table per phase, the chain, the learning."""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import TYPE_CHECKING

from rich.console import Console, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from triage_plugins.diagnosis.chain import REMEDIATION, render_trace
from triage_plugins.metrics.registry import MetricRegistry
from triage_plugins.metrics.result import MetricResult
from triage_plugins.reference.retrievers import FEEDBACK_RETRIEVER
from triage_plugins.report.terminal import fold_table, matrix_table

if TYPE_CHECKING:
    from triage_plugins.report.results import DemoResult, DemoSeeds, SeedInterval

__all__ = ["render_demo", "render_demo_seeds"]


_DEMO_COLUMNS = ("QGR", "ERC", "RRS", "AGR", "CC", "Hits@1", "RPC")
"""What the demo highlights, a selection that fits an 80-column terminal (not a copy of the metric
list: ``triage score`` and ``triage report`` show every metric of the registry)."""


def _usage_columns(registry: MetricRegistry) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(means, medians) of the demo's columns: bounded metrics are averaged, unbounded ones (a cost,
    RPC) shown as medians, as their :class:`~triage_plugins.metrics.registry.MetricSpec` says."""
    specs = [registry[m] for m in _DEMO_COLUMNS if m in registry]
    means = tuple(s.symbol for s in specs if s.value_range is not None)
    return means, tuple(s.symbol for s in specs if s.value_range is None)


def _phase_table(title: str, metrics: dict[str, MetricResult]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("metric", style="bold")
    table.add_column("value", justify="right")
    table.add_column("note", overflow="fold")
    for name, r in metrics.items():
        if r.value is None:
            table.add_row(name, "[dim]N/A[/]", f"[dim]{escape(r.reason or '')}[/]")
        else:
            table.add_row(name, f"{r.value:.3f}", escape(r.reason or ""))
    return table


def _mean(values: list[float]) -> str:
    return f"{statistics.fmean(values):.2f}" if values else "[dim]N/A[/]"


def _defined(queries: list, name: str) -> list[float]:
    return [q.metrics[name].value for q in queries if name in q.metrics and q.metrics[name].value is not None]


def _usage_table(result: DemoResult, console: Console) -> RenderableType:
    by_retriever: dict[str, list] = defaultdict(list)
    for q in result.usage.queries:
        by_retriever[q.retriever].append(q)
    means, medians = _usage_columns(result.usage.registry)
    rows = []
    for name, queries in by_retriever.items():
        cells = [_mean(_defined(queries, col)) for col in means]
        for col in medians:
            values = _defined(queries, col)
            cells.append(f"{statistics.median(values):.0f}" if values else "N/A")
        acc = result.accuracy.get(name)
        chain = _chain_cells(queries)
        rows.append(
            (
                Text(name, style="bold"),
                [str(len(queries)), *cells, "-" if acc is None else f"{acc:.1%}", *chain],
            )
        )
    title = "KG Usage per retriever (means over defined values; N/A excluded)"
    columns = [(col, "right") for col in ("n", *means, *medians, "ACC", "supported", "silent")]
    return matrix_table(console, title, ("retriever", "metric"), rows, columns)


def _silent_line(result: DemoResult) -> str:
    """What the supported and silent columns count, with the silent failures over every retriever."""
    silent = sum(_silent(q) for q in result.usage.queries)
    return (
        "[dim]supported: share of the retriever's queries with no broken chain link; silent: supported, "
        f"yet answered wrong (Hits@1 = 0). [/][bold red]{silent} silent failures[/][dim] over all "
        f"retrievers: the chain saw nothing wrong (`triage report {escape(result.store or 'STORE')} --html "
        "report.html` lists them first)[/]"
    )


def _silent(q: object) -> bool:
    hits = q.metrics.get("Hits@1")  # type: ignore[attr-defined]
    return q.signature == "supported" and hits is not None and hits.value == 0  # type: ignore[attr-defined]


def _chain_cells(queries: list) -> list[Text | str]:
    """The retriever's supported share and its silent failures (supported, yet Hits@1 = 0), in red."""
    supported = [q for q in queries if q.signature == "supported"]
    silent = sum(_silent(q) for q in queries)
    share = f"{len(supported) / len(queries):.0%}" if queries else "-"
    return [share, Text(str(silent), style="bold red" if silent else "")]


def _signature_table(result: DemoResult) -> Table:
    table = Table(
        title="Chain signatures over all retrievers (first broken link) and what to do", title_justify="left"
    )
    table.add_column("signature", style="bold")
    table.add_column("queries", justify="right")
    table.add_column("stage")
    table.add_column("first lever", overflow="fold")
    for sig, n in sorted(result.usage.signatures.items(), key=lambda kv: -kv[1]):
        remedy = REMEDIATION.get(sig)
        stage = (remedy.stage or "-") if remedy else "-"
        lever = remedy.levers[0] if remedy and remedy.levers else "-"
        table.add_row(escape(sig), str(n), stage, escape(lever))
    return table


def _rounds_table(result: DemoResult) -> Table:
    table = Table(
        title="EvoRAG feedback learning (krag, gold feedback on the training half, accuracy on the held-out half)",
        title_justify="left",
    )
    table.add_column("round", justify="right")
    table.add_column("train ACC", justify="right")
    table.add_column("held-out ACC", justify="right")
    table.add_column("Δ vs static (points)", justify="right")
    table.add_column("shortcut edges", justify="right")
    base = result.rounds[0]["test_accuracy"]
    for r in result.rounds:
        train = r["train_accuracy"]
        delta = r["test_accuracy"] - base
        table.add_row(
            "static" if r["round"] == 0 else str(r["round"]),
            "-" if train is None else f"{train:.1%}",
            f"{r['test_accuracy']:.1%}",
            "-" if r["round"] == 0 else f"{100 * delta:+.1f}",
            str(r["shortcuts"]),
        )
    return table


def render_demo(result: DemoResult, console: Console, *, more_seeds: int = 0) -> None:
    """Print the demo summary: phases, usage per retriever, signatures, a traced query, learning.

    :param more_seeds: how many worlds the seeds table that follows covers (0: none follows)."""
    w = result.world
    console.print(
        Panel.fit(
            f"Embedded world (seed {result.seed}): {w['entities']} entities, {w['facts']} true facts, "
            f"{w['documents']} documents / {w['chunks']} chunks, {w['questions']} questions.\n"
            f"Extracted graph: {w['graph_nodes']} nodes, {w['graph_triples']} triples "
            "(alias, outdated, dangling and irrelevant noise left in on purpose).",
            title="triage demo",
        )
    )
    console.print(fold_table(_phase_table("KG Implementation (extraction)", result.implementation), console))
    console.print(fold_table(_phase_table("KG Validation (graph)", result.validation), console))
    console.print(_usage_table(result, console))
    console.print(_silent_line(result))
    console.print(fold_table(_signature_table(result), console))
    if result.traced is not None and result.traced.diagnosis is not None:
        q = result.traced
        console.print(
            Panel(  # the query in the body: a panel title is one line, cut at the console width
                Text.assemble(("query: ", "bold"), q.query, "\n", render_trace(q.diagnosis)),
                title=f"One query through the chain ({escape(q.retriever)})",
                title_align="left",
            )
        )
    if result.rounds:
        console.print(fold_table(_rounds_table(result), console))
        gain = result.rounds[-1]["test_accuracy"] - result.rounds[0]["test_accuracy"]
        where = (
            f"the table below repeats it over {more_seeds} worlds with a 95 % interval"
            if more_seeds > 1
            else "no interval; `triage demo --seeds 5` repeats it over five worlds with a 95 % interval"
        )
        console.print(
            f"[dim]held-out: {100 * gain:+.1f} points after {len(result.rounds) - 1} round(s) on this one "
            f"world (seed {result.seed}); {where}[/]"
        )
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    console.print(
        "[dim]every short name above (QGR, ERC, RRS, ARF, AGR, CSR …) is a TRIAGE metric: "
        "`triage explain ERC` says what one measures and what to do when it is low; "
        "`triage explain --list` lists them[/]"
    )
    tail = f"done in {result.seconds:.1f} s"
    if result.store:
        tail += f"; trace and scores in {escape(result.store)} (inspect with `triage store info`, `triage report`)"
    if result.dropped_events or result.plugin_failures:
        tail += (
            f"; {result.dropped_events} events dropped, {result.plugin_failures} plugin errors (see the log)"
        )
    console.print(f"[dim]{tail}[/]")


def _fmt(value: float, signed: bool) -> str:
    """An accuracy as a percentage, or a difference of accuracies in percentage points."""
    return f"{100 * value:+.1f} pts" if signed else f"{value:.1%}"


def _pct_interval(iv: SeedInterval, *, signed: bool = False) -> tuple[str, str]:
    mean = "N/A" if iv.mean is None else _fmt(iv.mean, signed)
    if iv.low is None or iv.high is None:
        return mean, f"[dim]N/A: {escape(iv.reason or '')}[/]"
    return mean, f"[{_fmt(iv.low, signed)}, {_fmt(iv.high, signed)}]"


def _seeds_table(result: DemoSeeds) -> Table:
    n = len(result.seeds)
    table = Table(
        title=f"Learning over {n} seeds ({FEEDBACK_RETRIEVER}, held-out ACC; 95% Student t-interval over seeds)",
        title_justify="left",
    )
    table.add_column("held-out ACC")
    table.add_column("mean", justify="right")
    table.add_column("95% CI", justify="right")
    table.add_column("per seed", justify="right")
    last = f"after round {result.feedback_rounds}"
    for label, iv, signed in (
        ("static", result.before, False),
        (last, result.after, False),
        (f"Δ {last} − static", result.gain, True),
    ):
        mean, ci = _pct_interval(iv, signed=signed)
        table.add_row(
            label,
            mean,
            escape(ci) if not ci.startswith("[dim]") else ci,
            " ".join(_fmt(v, signed) for v in iv.values),
        )
    return fold_table(table)


def render_demo_seeds(result: DemoSeeds, console: Console) -> None:
    """Print the first seed's demo as :func:`render_demo` does, then accuracy before and after the
    feedback rounds over all seeds with a 95 % t-interval."""
    render_demo(result.first, console, more_seeds=len(result.seeds))
    if not result.before.values:
        console.print("[yellow]note:[/] no feedback rounds ran: no learning to summarize over seeds")
        return
    console.print(fold_table(_seeds_table(result), console))
    gains = result.gain.values
    better = sum(g > 0 for g in gains)
    worse = sum(g < 0 for g in gains)
    console.print(
        f"[dim]seeds {result.seeds[0]}–{result.seeds[-1]}: learning raised held-out accuracy on {better}, "
        f"lowered it on {worse}, left it unchanged on {len(gains) - better - worse}; only seed "
        f"{result.seeds[0]} was written to the store (the others ran in memory)[/]"
    )
