"""``triage explain METRIC`` and ``docs/metrics.md``: the metric glossary, read from the registry.

One source: each :class:`~triage_plugins.metrics.registry.MetricSpec` of the registry gives the name,
phase, paper section, range and direction; its definition is its own ``definition`` or else the first
paragraph of its function's docstring; a chain link's healthy value is its θ and its levers are those
of its signature in :data:`~triage_plugins.diagnosis.chain.REMEDIATION` (TRIAGE §4.5).
``python -m triage_plugins.apps.explain > docs/metrics.md`` regenerates the glossary.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import re
from dataclasses import dataclass

from triage_plugins.contract.errors import TriageError
from triage_plugins.metrics.registry import BUILTIN_METRICS, MetricRegistry, MetricSpec

__all__ = ["MetricEntry", "find_metric", "glossary_markdown", "metric_entry"]

_PHASE_TITLES = {
    "implementation": "KG Implementation (TRIAGE §4.1)",
    "validation": "KG Validation (TRIAGE §4.2)",
    "usage": "KG Usage (TRIAGE §4.3)",
}


@dataclass(frozen=True, slots=True)
class MetricEntry:
    """One glossary entry, every field plain text."""

    symbol: str
    name: str
    phase: str
    section: str
    definition: str
    range: str
    direction: str
    healthy: str
    lever: str
    notes: tuple[str, ...] = ()


def _definition(spec: MetricSpec) -> str:
    if spec.definition:
        return spec.definition
    fn = spec.function.func if isinstance(spec.function, functools.partial) else spec.function
    first = (inspect.getdoc(fn) or "").split("\n\n")[0]
    text = " ".join(first.split())
    return re.sub(r":\w+:`~?([^`]+)`", r"\1", text).replace("``", "")


def _range(spec: MetricSpec) -> str:
    if spec.value_range is None:
        return "unbounded (a count or rank)" if spec.symbol != "HHR" else "≥ 0 (a ratio of rates)"
    low, high = spec.value_range
    return f"[{low:g}, {high:g}]"


def metric_entry(spec: MetricSpec) -> MetricEntry:
    """The glossary entry of ``spec`` (chain links read their θ and REMEDIATION's levers)."""
    from triage_plugins.diagnosis.chain import REMEDIATION

    direction = {
        True: "higher is better",
        False: "lower is better",
        None: "neither higher nor lower is better",
    }
    healthy, lever, notes = spec.healthy, spec.lever, []
    if spec.link is not None:
        remedy = REMEDIATION[spec.link.signature]
        healthy = healthy or (
            f"at or above θ = {spec.link.threshold:g} (the chain's default); below it the query is "
            f"{spec.link.signature}: {spec.link.meaning}"
        )
        lever = lever or "; ".join(remedy.levers)
        order = " → ".join(s.symbol for s in BUILTIN_METRICS.chain)
        notes.append(f"chain link {spec.link.position} ({order}); stage: {remedy.stage}")
        if remedy.upstream:
            notes.append("upstream checks: " + "; ".join(remedy.upstream))
    if spec.needs_gold:
        notes.append("needs gold annotations (offline calibration, not deployment)")
    return MetricEntry(
        spec.symbol, spec.name, spec.phase, spec.section, _definition(spec), _range(spec),
        direction[spec.higher_is_better], healthy or "-", lever or "-", tuple(notes),
    )  # fmt: skip


def find_metric(name: str, registry: MetricRegistry = BUILTIN_METRICS) -> MetricSpec:
    """The spec named ``name`` (exact, else case-insensitive).

    :raises TriageError: no such metric; the message names the close matches.
    """
    if name in registry:
        return registry[name]
    folded = {s.symbol.casefold(): s for s in registry}
    if name.casefold() in folded:
        return folded[name.casefold()]
    close = difflib.get_close_matches(name.casefold(), list(folded), n=3, cutoff=0.5)
    hint = f"; did you mean {', '.join(folded[c].symbol for c in close)}?" if close else ""
    return _unknown(name, hint)


def _unknown(name: str, hint: str) -> MetricSpec:
    raise TriageError(f"unknown metric {name!r}{hint} (`triage explain --list` lists them all)")


def _entry_markdown(e: MetricEntry) -> list[str]:
    lines = [
        f"### {e.symbol}: {e.name}",
        "",
        f"- **Definition**: {e.definition}",
        f"- **Paper**: TRIAGE {e.section}",
        f"- **Range**: {e.range}, {e.direction}",
        f"- **Healthy**: {e.healthy}",
        f"- **When low**: {e.lever}",
    ]
    lines += [f"- {note[0].upper()}{note[1:]}" for note in e.notes]
    return [*lines, ""]


def glossary_markdown(registry: MetricRegistry = BUILTIN_METRICS) -> str:
    """``docs/metrics.md``: every metric of ``registry`` by phase, in registry order."""
    out = [
        "# Metric glossary",
        "",
        "<!-- Generated from triage_plugins/metrics/registry.py by "
        "`python -m triage_plugins.apps.explain > docs/metrics.md`; do not edit by hand. -->",
        "",
        "Every metric `triage` computes: its definition, where the TRIAGE paper defines it, its range,",
        "what a healthy value looks like and what to change when it is poor. `triage explain METRIC`",
        "prints one entry. Healthy values outside the diagnostic chain are rules of thumb; the chain's",
        "are its default thresholds θ. N/A (undefined) values always carry their reason.",
        "",
    ]
    for phase, title in _PHASE_TITLES.items():
        specs = registry.select(phase=phase)  # type: ignore[arg-type]
        if not specs:
            continue
        out += [f"## {title}", "", " · ".join(f"[{s.symbol}](#{_anchor(s)})" for s in specs), ""]
        for spec in specs:
            out += _entry_markdown(metric_entry(spec))
    return "\n".join(out).rstrip() + "\n"


def _anchor(spec: MetricSpec) -> str:
    """GitHub's anchor of the entry heading ``### SYMBOL: Name``."""
    text = f"{spec.symbol}: {spec.name}".lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


if __name__ == "__main__":
    print(glossary_markdown(), end="")
