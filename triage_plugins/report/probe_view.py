"""Terminal rendering of ``triage probe``: our Table 5 beside the paper's."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from triage_plugins.reference.probe_builder import PAPER_TABLE5, PAPER_THETA_ERC

if TYPE_CHECKING:
    from triage_plugins.report.results import ProbeResult, Stratum

__all__ = ["render_probe"]


def _pct(value: float | None, ci: tuple[float, float] | None) -> str:
    if value is None:
        return "[dim]N/A[/]"
    return f"{value:.1f}" + (f" [dim][{ci[0]:.0f}, {ci[1]:.0f}][/]" if ci else "")


def _table(title: str, rows: list[Stratum], *, paper: bool) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("stratum", style="bold", no_wrap=True)
    table.add_column("n", justify="right")
    table.add_column("CC % [95% CI]", justify="right")
    table.add_column("Hits@1 % [95% CI]", justify="right")
    if paper:
        table.add_column("paper CC %", justify="right")
        table.add_column("paper Hits@1 %", justify="right")
    for s in rows:
        cells = [s.name, str(s.n), _pct(s.cc, s.cc_ci), _pct(s.hits1, s.hits1_ci)]
        if paper:
            ref = PAPER_TABLE5.get(s.name, {})
            cells += [
                f"{ref['CC']:.1f}" if "CC" in ref else "-",
                f"{ref['Hits@1']:.1f}" if "Hits@1" in ref else "-",
            ]
        table.add_row(*cells)
    return table


def render_probe(result: ProbeResult, console: Console, *, per_retriever: bool = True) -> None:
    """Print the pooled Table 5 with the paper's figures, θ_ERC, and each retriever's strata."""
    n_obs = sum(1 for o in result.observations if o.category != "off-topic")
    cats = ", ".join(f"{k} {v}" for k, v in result.category_counts.items())
    console.print(f"[bold]Probe on {escape(result.kb)}[/]: {len(result.questions)} questions ({cats})")
    console.print(
        _table(
            f"Table 5 — predictive validity, retrievers pooled ({n_obs} observations, off-topic excluded; "
            "CIs: cluster bootstrap over questions)",
            result.pooled,
            paper=True,
        )
    )
    if result.theta_erc is None:
        console.print("θ_ERC: [dim]N/A[/]")
    else:
        ci = f" [95% CI {result.theta_ci[0]:.2f}, {result.theta_ci[1]:.2f}]" if result.theta_ci else ""
        console.print(
            f"Youden-optimal θ_ERC for predicting CC = 0: [bold]{result.theta_erc:.2f}[/]{ci} "
            f"(J = {result.youden_j:.2f}; paper: {PAPER_THETA_ERC})"
        )
    if per_retriever:
        for name, rows in result.per_retriever.items():
            console.print(_table(f"retriever {name}", rows, paper=False))
    for note in result.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
