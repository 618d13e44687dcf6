"""Score a trace of events from any pipeline: ``triage score EVENTS.jsonl`` (DESIGN §6).

:func:`score_events` reads what a pipeline recorded and computes every TRIAGE metric it can:

* **Implementation** (§4.1) from the extraction events, **Validation** (§4.2) from the last graph
  event — through :func:`triage_plugins.metrics.extraction.implementation_metrics` and
  :func:`triage_plugins.metrics.validation.validation_metrics`; a phase without its events (or whose
  module is unavailable) is reported as skipped, with the reason.
* **Usage** (§4.3) per query: a replay (:class:`Replay`) of each retrieval event and its generation
  events (joined by ``(framework, query_id)``; ``context="retrieved"`` is the answer,
  ``context="none"`` the closed-book run for KNI) through a synchronous manager, whose one scorer
  (the live ``triage.usage`` plugin) gives the query's metrics and chain signature (§4.5). Missing mentions and groundings are derived with the
  default :class:`~triage_plugins.kg.grounding.Grounder` over the graph of the last graph event; without a
  graph event they stay N/A ("mentions unavailable") and the signature is undetermined.
* **Aggregates**: the mean of each per-query metric over the queries where it is defined, the RHD
  distribution (eq. 33), the population ratios RFR and HHR (§4.3.5), and the signature counts.

:func:`render_score_report` prints the report with rich; :meth:`ScoreReport.to_dict` is the ``--json``
form. :func:`calibrate_rows` fits a Youden threshold with (clustered) BCa intervals (§5.2) for
``triage calibrate``.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.table import Table
from rich.text import Text

from triage_plugins.contract.config import CHAIN_THRESHOLDS
from triage_plugins.contract.errors import ConfigError, EventError, TriageError
from triage_plugins.contract.events import (
    Event,
    ExtractionEvent,
    GenerationEvent,
    GraphEvent,
    RetrievalEvent,
    from_json,
)
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.contract.records import QueryRecord
from triage_plugins.diagnosis.chain import REMEDIATION, SIGNATURES
from triage_plugins.metrics.registry import BUILTIN_METRICS, MetricRegistry
from triage_plugins.metrics.result import MetricResult, na
from triage_plugins.metrics.usage import (
    aggregate_usage,
    gold_answers_hit,
    hard_gold_answers,
    hard_hits_rate,
    rhd_distribution,
)
from triage_plugins.report.results import BadLines, PhaseReport, QueryScore, ScoreReport

if TYPE_CHECKING:
    from rich.console import Console

    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.diagnosis.calibration import Interval, Youden
    from triage_plugins.kg.ontology import Ontology

__all__ = [
    "CalibrationReport",
    "calibrate_rows",
    "read_events",
    "render_calibration",
    "render_score_report",
    "report_json",
    "score_events",
    "score_records",
]

log = logging.getLogger("triage.scoring")

CHAIN_COLUMNS: tuple[str, ...] = tuple(spec.symbol for spec in BUILTIN_METRICS.chain)


# --------------------------------------------------------------------------- reading


def read_lines(
    path: str | Path, bad: BadLines | None = None, *, name: str | Path | None = None
) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of a JSON-lines file's non-blank lines.

    :param bad: when given, a line that is not UTF-8 text is added to it and skipped instead of raising.
    :param name: the file as messages name it (default ``path``; a copy of a pipe is named by the pipe).
    :raises TriageError: the file cannot be read (missing, a folder, no permission, not UTF-8 text:
        the message names the line).
    """
    shown = path if name is None else name
    try:
        with open(path, "rb") as fh:
            for number, raw in enumerate(fh, 1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError as exc:
                    if bad is None:
                        raise TriageError(f"{shown}, line {number}: not UTF-8 text ({exc.reason})") from None
                    bad.add(number, f"not UTF-8 text ({exc.reason})")
                    continue
                if line.strip():
                    yield number, line
    except IsADirectoryError:
        raise TriageError(f"{shown} is a folder, not a JSON-lines file of events") from None
    except OSError as exc:
        raise TriageError(f"cannot read {shown}: {exc.strerror or exc}") from None


def read_events(path: str | Path) -> Iterator[Event]:
    """Events of a JSON-lines file, one per non-blank line; a bad line raises :class:`EventError`
    naming the file and line number (an unreadable file, :class:`TriageError`)."""
    for number, line in read_lines(path):
        yield parse_line(line, path, number)


def parse_line(line: str, path: str | Path, number: int) -> Event:
    """One line as an event; :class:`EventError` names the file and line when it is not one."""
    try:
        return from_json(line)
    except EventError as exc:
        raise EventError(exc.where, exc.field, f"{exc.why} ({path}, line {number})") from None


# --------------------------------------------------------------------------- scoring


def _as_metric_dict(result: Any) -> dict[str, MetricResult]:
    if isinstance(result, Mapping):
        return {str(k): v for k, v in result.items() if isinstance(v, MetricResult)}
    return {r.name: r for r in result if isinstance(r, MetricResult)}


def _accepted(fn: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments ``fn`` accepts, without the ``None`` ones."""
    accepted = inspect.signature(fn).parameters
    return {k: v for k, v in kwargs.items() if k in accepted and v is not None}


def _call_phase(fn: Any, *args: Any, **kwargs: Any) -> dict[str, MetricResult]:
    """Call a phase function with the keyword arguments it accepts."""
    return _as_metric_dict(fn(*args, **_accepted(fn, kwargs)))


def _plugin_metrics(
    registry: MetricRegistry, phase: str, stage: str, *args: Any, **kwargs: Any
) -> dict[str, MetricResult]:
    """A phase's metrics that plugins registered, each called like the phase function (with the
    keyword arguments it accepts); one that raises or returns no result is N/A with the reason."""
    out: dict[str, MetricResult] = {}
    for spec in registry.select(phase=phase, stage=stage):  # type: ignore[arg-type]
        if spec.symbol in BUILTIN_METRICS:
            continue
        try:
            result = spec.function(*args, **_accepted(spec.function, kwargs))
        except Exception as exc:  # noqa: BLE001 - a plugin's metric must not lose the phase
            result = na(spec.symbol, f"{spec.symbol} raised {type(exc).__name__}: {exc}", cause="error")
        if not isinstance(result, MetricResult):
            result = na(spec.symbol, f"{spec.symbol} returned {type(result).__name__}, not a MetricResult")
        out[spec.symbol] = result
    return out


def _implementation(
    extractions: list[ExtractionEvent],
    ontology: Ontology | None,
    graph: GraphView | None,
    aliases: Mapping[str, str | None],
    registry: MetricRegistry = BUILTIN_METRICS,
) -> PhaseReport:
    phase = PhaseReport("implementation")
    if not extractions:
        phase.skipped = "no extraction events in the trace"
        return phase
    try:
        from triage_plugins.metrics.extraction import implementation_metrics
    except ImportError as exc:
        phase.skipped = f"extraction metrics unavailable ({exc})"
        return phase
    options = {"ontology": ontology, "graph": graph, "aliases": dict(aliases) or None}
    try:
        phase.metrics = _call_phase(implementation_metrics, extractions, **options)
    except Exception as exc:  # noqa: BLE001 - one phase failing must not lose the others
        log.exception("implementation metrics failed")
        phase.skipped = f"implementation metrics failed: {exc}"
        return phase
    phase.metrics.update(_plugin_metrics(registry, "implementation", "extraction", extractions, **options))
    return phase


def _validation(
    graph: GraphView | None,
    ontology: Ontology | None,
    reference: GraphView | None,
    registry: MetricRegistry = BUILTIN_METRICS,
) -> PhaseReport:
    phase = PhaseReport("validation")
    if graph is None:
        phase.skipped = "no graph event in the trace"
        return phase
    try:
        from triage_plugins.metrics.validation import validation_metrics
    except ImportError as exc:
        phase.skipped = f"validation metrics unavailable ({exc})"
        return phase
    try:
        phase.metrics = _call_phase(validation_metrics, graph, ontology=ontology, reference=reference)
    except Exception as exc:  # noqa: BLE001
        log.exception("validation metrics failed")
        phase.skipped = f"validation metrics failed: {exc}"
        return phase
    phase.metrics.update(
        _plugin_metrics(registry, "validation", "graph", graph, ontology=ontology, reference=reference)
    )
    return phase


def _hard_hits(
    retrieval: RetrievalEvent,
    answer: GenerationEvent | None,
    metrics: Mapping[str, MetricResult],
    graph: GraphView | None,
    grounder: Any,
) -> tuple[float | None, float | None]:
    """(Hits@Any, Hits@Hard) of one query for HHR; ``(None, None)`` when it has no hard answers."""
    gold = retrieval.gold
    hits = metrics["Hits@1"].value if "Hits@1" in metrics else None  # a live record of a query without gold
    if graph is None or gold is None or not gold.entities or answer is None or hits is None:
        return None, None
    hard = hard_gold_answers(gold, graph)
    if not hard:
        return None, None
    return hits, 1.0 if gold_answers_hit(hard, answer, grounder=grounder) else 0.0


@dataclass
class Trace:
    """What a trace holds besides its queries (those go to the replay's scorer): the extraction
    events, the last graph event, counts by kind and notes."""

    extractions: list[ExtractionEvent] = field(default_factory=list)
    graph_event: GraphEvent | None = None
    counts: Counter[str] = field(default_factory=Counter)
    notes: list[str] = field(default_factory=list)

    @property
    def graph(self) -> GraphView | None:
        return self.graph_event.graph if self.graph_event is not None else None

    @property
    def aliases(self) -> Mapping[str, str | None]:
        return self.graph_event.aliases if self.graph_event is not None else {}


def read_trace(events: Iterable[Event], replay: Replay | None) -> Trace:
    """Sort events by kind: retrievals and generations go to ``replay`` (its scorer holds each query
    by ``(framework, query_id)`` until it is scored; without one they are only counted), the rest
    into the :class:`Trace`."""
    trace = Trace()
    for event in events:
        trace.counts[event.kind] += 1
        if isinstance(event, ExtractionEvent):
            trace.extractions.append(event)
        elif isinstance(event, GraphEvent):
            trace.graph_event = event
        elif replay is None:
            continue
        elif isinstance(event, RetrievalEvent):
            if replay.scorer.holds_retrieval(event.framework, event.query_id):
                trace.notes.append(
                    f"query {event.query_id!r} ({event.framework}) retrieved twice: the last retrieval is scored"
                )
            replay.feed(event)
        elif isinstance(event, GenerationEvent):
            replay.feed(event)
    if trace.counts["graph"] > 1:
        trace.notes.append(f"{trace.counts['graph']} graph events: the last one is scored")
    return trace


def default_grounder(trace: Trace, has_queries: bool | None = None) -> Any:
    """The default grounder over the trace's graph, to derive missing mentions (``None`` without one).

    :param has_queries: whether the trace has retrievals (default: it counts a retrieval event).
    """
    graph = trace.graph
    has_queries = trace.counts["retrieval"] > 0 if has_queries is None else has_queries
    if graph is not None and has_queries:
        try:
            from triage_plugins.kg.grounding import shared_grounder

            return shared_grounder(graph, dict(trace.aliases))  # the scorer's own: built once
        except ImportError as exc:  # pragma: no cover - ships with the core
            trace.notes.append(f"no default grounder ({exc}): missing mentions stay N/A")
    elif has_queries:
        trace.notes.append("no graph event: mentions and groundings missing from events cannot be derived")
    return None


class Replay:
    """Offline scoring as a replay: events go through a synchronous manager whose one scorer (the
    ``triage.usage`` plugin, :mod:`triage_plugins.plugins.usage`, with ``replay=True``) holds each
    query's events in its one per-query map and scores the query once, into its final
    :class:`~triage_plugins.contract.records.QueryRecord`; the replay collects the records the manager
    broadcasts (``triage_query_scored``), in a list drained as they are read.

    :param thresholds: chain thresholds θ.
    :param registry: the metrics to compute.
    """

    def __init__(self, thresholds: Mapping[str, float] | None, registry: MetricRegistry) -> None:
        from triage_plugins.contract.config import TriageConfig
        from triage_plugins.plugins.usage import UsageRecorder
        from triage_plugins.runtime.manager import TriageManager

        config = TriageConfig(thresholds={**CHAIN_THRESHOLDS, **(thresholds or {})})
        self.manager = TriageManager(config=config, synchronous=True, entry_points=False, defaults=False)
        self.scorer = UsageRecorder(self.manager, registry=registry, replay=True)
        self.manager.register(self.scorer, "triage.usage")
        self.manager.register(self, "triage.score.replay")
        self._records: list[QueryRecord] = []
        #: Generation events left unscored for want of a retrieval, over the queries finished so far.
        self.orphans = 0

    @hookimpl
    def triage_query_scored(self, record: QueryRecord) -> None:
        self._records.append(record)

    def use_graph(self, graph_event: GraphEvent) -> None:
        """Ground the queries against ``graph_event``'s graph (before they are finished)."""
        self.manager.emit_graph(graph_event)

    def feed(self, event: RetrievalEvent | GenerationEvent) -> None:
        """Hand one query event to the scorer, which holds it until its query is finished."""
        if isinstance(event, RetrievalEvent):
            self.manager.emit_retrieval(event)
        else:
            self.manager.emit_generation(event)

    def finish(self, framework: str, query_id: str) -> list[QueryRecord]:
        """Score the held query once; its record (none when it has no retrieval)."""
        self.orphans += self.scorer.finish(framework, query_id)
        records, self._records = self._records, []
        return records

    def records(self) -> Iterator[QueryRecord]:
        """Finish every held query, in order (where its first retrieval came), yielding its record."""
        for key in self.scorer.held():
            yield from self.finish(*key)

    def close(self) -> None:
        self.manager.close()


def _score_one(
    record: QueryRecord, *, graph: GraphView | None, grounder: Any
) -> tuple[QueryScore, float | None, float | None]:
    """One query's score from its record, with its (Hits@Any, Hits@Hard) for HHR."""
    metrics = dict(record.metrics)
    diagnosis = record.diagnosis if record.diagnosis is not None and record.diagnosis.defined else None
    undetermined = None
    if diagnosis is None:
        undetermined = metrics["QGR"].reason or "no chain link could be evaluated"
    retrieval = record.retrieval
    score = QueryScore(
        retrieval.query_id,
        retrieval.framework,
        retrieval.retriever,
        retrieval.query,
        metrics,
        diagnosis,
        undetermined,
        record.answer is not None,
    )
    a, h = _hard_hits(retrieval, record.answer, metrics, graph, grounder)
    return score, a, h


@dataclass(slots=True)
class UsageSummary:
    """What the per-query pass leaves behind: aggregates, RHD, signature counts, query count."""

    aggregate: dict[str, MetricResult]
    rhd: dict[int | float, float]
    signatures: dict[str, int]
    n_queries: int


def summarize_records(
    records: Iterable[QueryRecord], *, graph: GraphView | None, grounder: Any, sink: Any
) -> UsageSummary:
    """Turn each query's final record (from :meth:`Replay.records` or :meth:`Replay.finish`) into its
    score, hand it to ``sink`` and keep only what the aggregates need.

    Memory grows with the number of queries by a few numbers each (one value per metric for the
    means, RHD and the hit labels), not by the events or the per-query reports.
    """
    rhd_values: list[MetricResult] = []
    signatures: Counter[str] = Counter()
    hits_any: list[float | None] = []
    hits_hard: list[float | None] = []
    hits_defined = False
    n = 0

    def metric_rows() -> Iterator[Mapping[str, MetricResult]]:
        nonlocal hits_defined, n
        for record in records:
            score, a, h = _score_one(record, graph=graph, grounder=grounder)
            n += 1
            rhd_values.append(score.metrics["RHD"])
            signatures[score.signature or "undetermined"] += 1
            hits_any.append(a)
            hits_hard.append(h)
            hits = score.metrics.get("Hits@1")
            hits_defined = hits_defined or (hits is not None and hits.value is not None)
            sink(score)
            yield score.metrics

    aggregate = aggregate_usage(metric_rows())
    if n:
        if graph is None and hits_defined:
            aggregate["HHR"] = na("HHR", "needs the graph (a graph event) to tell hard gold answers")
        else:
            aggregate["HHR"] = hard_hits_rate(hits_any, hits_hard)
    ordered = {s: signatures[s] for s in SIGNATURES if signatures[s]}
    if signatures["undetermined"]:
        ordered["undetermined"] = signatures["undetermined"]
    return UsageSummary(aggregate, rhd_distribution(rhd_values), ordered, n)


def score_phases(
    trace: Trace, ontology: Ontology | None, reference: GraphView | None, registry: MetricRegistry
) -> dict[str, PhaseReport]:
    if ontology is None and trace.graph_event is not None:
        ontology = trace.graph_event.ontology
    return {
        "implementation": _implementation(trace.extractions, ontology, trace.graph, trace.aliases, registry),
        "validation": _validation(trace.graph, ontology, reference, registry),
    }


def score_events(
    events: Iterable[Event],
    *,
    ontology: Ontology | None = None,
    reference: GraphView | None = None,
    thresholds: Mapping[str, float] | None = None,
    metrics: MetricRegistry | None = None,
) -> ScoreReport:
    """Score a trace of events from any pipeline (DESIGN §6), held in memory.

    :param events: events in any order; the last graph event is the graph scored and grounded against.
    :param ontology: the schema for SC/CVR/LC/OC; defaults to the graph event's ontology.
    :param reference: a reference graph for COR/CMP (gold KG), when there is one.
    :param thresholds: chain thresholds θ (defaults: :data:`~triage_plugins.contract.config.CHAIN_THRESHOLDS`).
    :param metrics: the metrics to compute (default :func:`~triage_plugins.runtime.registrations.metric_registry`:
        the built-ins and the metrics of the ``triage`` entry-point plugins).

    For a trace file of any length, :func:`triage_plugins.apps.score_file.score_file` scores it in
    two streaming passes with the same result.
    """
    from triage_plugins.runtime.registrations import metric_registry

    registry = metric_registry() if metrics is None else metrics
    replay = Replay(thresholds, registry)
    try:
        trace = read_trace(events, replay)
        phases = score_phases(trace, ontology, reference, registry)
        grounder = default_grounder(trace)
        if trace.graph_event is not None:
            replay.use_graph(trace.graph_event)
        queries: list[QueryScore] = []
        summary = summarize_records(replay.records(), graph=trace.graph, grounder=grounder, sink=queries.append)
    finally:
        replay.close()
    if replay.orphans:
        trace.notes.append(f"{replay.orphans} generation event(s) without a retrieval event were not scored")
    return ScoreReport(
        phases, queries, summary.aggregate, summary.rhd, summary.signatures, dict(trace.counts),
        trace.notes, registry,
    )  # fmt: skip


def score_records(
    events: Iterable[Event],
    records: Iterable[QueryRecord],
    *,
    ontology: Ontology | None = None,
    reference: GraphView | None = None,
    metrics: MetricRegistry | None = None,
) -> ScoreReport:
    """:func:`score_events`' report from the records a live scorer broadcast, scoring no query again
    (``triage demo`` collects them with a :class:`~triage_plugins.contract.records.RecordCollector`).

    :param events: the run's events: the phases are scored from its extraction and graph events, and
        every kind is counted.
    :param records: each query's final record (:meth:`RecordCollector.finals`), in the order to report;
        its metrics are reported in registry order. A live scorer computes the gold metrics only for
        queries with gold, so a query without gold has none of them here (``score_events`` reports
        them N/A); the demo's queries all carry gold.
    """
    from triage_plugins.runtime.registrations import metric_registry

    registry = metric_registry() if metrics is None else metrics
    trace = read_trace(events, None)
    phases = score_phases(trace, ontology, reference, registry)
    grounder = default_grounder(trace)
    order = [spec.symbol for spec in registry.per_query]

    def in_order(record: QueryRecord) -> QueryRecord:
        return replace(record, metrics={s: record.metrics[s] for s in order if s in record.metrics})

    queries: list[QueryScore] = []
    summary = summarize_records(map(in_order, records), graph=trace.graph, grounder=grounder, sink=queries.append)
    return ScoreReport(
        phases, queries, summary.aggregate, summary.rhd, summary.signatures, dict(trace.counts),
        trace.notes, registry,
    )  # fmt: skip


# --------------------------------------------------------------------------- rendering


def _cell(result: MetricResult | None, digits: int = 3) -> Text:
    if result is None:
        return Text("–", style="dim")
    if result.value is None:
        return Text.assemble(
            ("N/A", "yellow"), " ", Text.assemble("(", plain(result.reason), ")", style="dim")
        )
    return Text(f"{result.value:.{digits}f}")


def _short(result: MetricResult | None) -> str:
    if result is None:
        return "–"
    if result.name == "RHD" and result.details.get("hops") == "inf":
        return "∞"
    return "N/A" if result.value is None else f"{result.value:.2f}"


def _usage_order(report: ScoreReport) -> list[str]:
    """The aggregate's metrics in registry order (a name the registry does not know comes last)."""
    known = report.registry.symbols(phase="usage")
    return [*known, *(n for n in report.aggregate if n not in report.registry)]


_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")


def plain(value: object) -> Text:
    """``value`` as terminal text: never read as rich markup, control characters shown escaped.

    Event strings come from other pipelines: ``[link=…]`` must not become a hidden hyperlink, an ESC
    sequence must not clear the screen, a bidi override must not reorder what is shown.
    """
    text = str(value)
    if _UNPRINTABLE.search(text):
        text = _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)
    return Text(text)


def render_score_report(report: ScoreReport, console: Console, *, max_queries: int = 50) -> None:
    """Print ``report`` as rich tables: phases, usage aggregates, RHD, signatures, per-query chain
    (columns wrap, never cut to ``…``)."""
    from triage_plugins.report.terminal import fold_table

    counts = ", ".join(f"{n} {k}" for k, n in sorted(report.counts.items())) or "no events"
    console.print(Text.assemble(("TRIAGE score", "bold"), " — ", plain(counts)))
    for phase in report.phases.values():
        title = f"KG {phase.name.capitalize()} (TRIAGE §{'4.1' if phase.name == 'implementation' else '4.2'})"
        if phase.skipped:
            console.print(
                Text.assemble((title, "bold"), ": ", ("skipped", "yellow"), " — ", plain(phase.skipped))
            )
            continue
        table = Table(title=title, title_justify="left")
        table.add_column("metric")
        table.add_column("value")
        table.add_column("n", justify="right")
        for name, result in phase.metrics.items():
            table.add_row(plain(name), _cell(result), "" if result.n is None else str(result.n))
        console.print(fold_table(table))
    if not report.queries:
        console.print(
            Text.assemble(
                ("KG Usage (TRIAGE §4.3)", "bold"), ": ", ("skipped", "yellow"), " — no retrieval events"
            )
        )
    else:
        _render_usage(report, console, max_queries)
    for note in report.notes:
        console.print(Text.assemble("note: ", plain(note), style="dim"))


def _signature_text(q: QueryScore) -> Text:
    """A query's signature for the terminal (``undetermined`` with its reason)."""
    if q.signature:
        return Text(q.signature)
    return Text.assemble(
        ("undetermined", "yellow"), " ", Text.assemble("(", plain(q.undetermined), ")", style="dim")
    )


def _render_usage(report: ScoreReport, console: Console, max_queries: int) -> None:
    from triage_plugins.report.terminal import fits, fold_table

    table = Table(title=f"KG Usage (TRIAGE §4.3), {report.total_queries} queries", title_justify="left")
    table.add_column("metric")
    table.add_column("mean / rate")
    table.add_column("queries", justify="right")
    table.add_column("N/A", justify="right")
    for name in _usage_order(report):
        result = report.aggregate.get(name)
        if result is None:
            continue
        table.add_row(
            plain(name),
            _cell(result),
            "" if result.n is None else str(result.n),
            str(result.details.get("na_queries", "")),
        )
    console.print(fold_table(table))
    rhd = "  ".join(f"ℓ={'∞' if k == math.inf else int(k)}: {v:.0%}" for k, v in report.rhd.items())
    console.print(Text.assemble(("RHD", "bold"), f" (eq. 33): {rhd or 'N/A (no query evaluable)'}"))

    sig = Table(title="Chain signatures (TRIAGE §4.5)", title_justify="left")
    for col in ("signature", "queries", "stage", "first lever"):
        sig.add_column(col, justify="right" if col == "queries" else "left")
    for name, n in report.signatures.items():
        remedy = REMEDIATION.get(name)
        stage = (remedy.stage or "") if remedy else ""
        lever = remedy.levers[0] if remedy and remedy.levers else ""
        sig.add_row(name, str(n), stage, Text(lever))
    console.print(fold_table(sig))

    from triage_plugins.report.score_order import WORST_FIRST, worst_first

    shown = worst_first(report.queries)[:max_queries]
    per = Table(title=f"Per query ({WORST_FIRST})", title_justify="left")
    for col in ("query", "retriever", *CHAIN_COLUMNS, "RHD", "signature"):
        per.add_column(col)
    for q in shown:
        signature = _signature_text(q)
        per.add_row(
            plain(q.query_id),
            plain(q.retriever),
            *(_short(q.metrics.get(c)) for c in CHAIN_COLUMNS),
            _short(q.metrics.get("RHD")),
            signature,
        )
    if fits(per, console):
        console.print(fold_table(per))
    else:  # too narrow for one row per query: one wrapped line per query, words never cut
        console.print(Text(f"Per query ({WORST_FIRST})", style="italic"))
        for q in shown:
            chain = [Text.assemble(f"{c} ", _short(q.metrics.get(c))) for c in (*CHAIN_COLUMNS, "RHD")]
            console.print(
                Text.assemble(
                    plain(q.query_id),
                    " (",
                    plain(q.retriever),
                    "): ",
                    Text("  ").join(chain),
                    " → ",
                    _signature_text(q),
                )
            )
    if report.total_queries > max_queries:
        console.print(
            Text(f"… {report.total_queries - max_queries} more queries (use --json for all)", style="dim")
        )


# --------------------------------------------------------------------------- calibration


@dataclass(frozen=True, slots=True)
class CalibrationReport:
    """A fitted chain threshold with bootstrap intervals (TRIAGE §5.2).

    :param youden: the point estimate (threshold = largest value classified failing; ``cutoff`` is
        what to configure for the chain's strict ``<`` rule).
    :param threshold_ci: BCa interval of the threshold; ``j_ci`` of Youden's J (clustered when
        ``cluster`` was given).
    """

    metric: str
    outcome: str
    youden: Youden
    threshold_ci: Interval | None
    j_ci: Interval | None
    cluster: str | None
    n_clusters: int | None

    def to_dict(self) -> dict[str, Any]:
        def interval(i: Interval | None) -> dict[str, Any] | None:
            if i is None:
                return None
            return {
                "low": i.low,
                "high": i.high,
                "confidence": i.confidence,
                "method": i.method,
                "n_resamples": i.n_resamples,
            }

        y = self.youden
        return {
            "metric": self.metric,
            "outcome": self.outcome,
            "threshold": y.threshold,
            "cutoff": y.cutoff,
            "j": y.j,
            "sensitivity": y.sensitivity,
            "specificity": y.specificity,
            "n": y.n,
            "n_failed": y.n_failed,
            "n_dropped": y.n_dropped,
            "reason": y.reason,
            "threshold_ci": interval(self.threshold_ci),
            "j_ci": interval(self.j_ci),
            "cluster": self.cluster,
            "n_clusters": self.n_clusters,
        }


def _number(value: Any) -> float | None:
    if isinstance(value, MetricResult):
        return value.value
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(number) else number


def calibrate_rows(
    rows: Iterable[Mapping[str, Any]],
    metric: str,
    outcome: str,
    cluster: str | None = None,
    *,
    failure: str = "low",
    outcome_threshold: float = 0.5,
    n_resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 0,
) -> CalibrationReport:
    """Fit the Youden threshold of ``metric`` for predicting failure of ``outcome`` (TRIAGE §5.1–5.2).

    :param rows: flat rows (e.g. :meth:`ScoreReport.rows`), values numbers, ``None`` or MetricResults.
    :param outcome: the outcome column (``"CC"``, ``"Hits@1"`` ...); a row *fails* when its outcome is
        below ``outcome_threshold`` (``failure="low"``) or above it (``failure="high"``, e.g. an error flag).
    :param cluster: a column naming the resampling unit (e.g. ``"query"`` for the question when the
        same question was run through several retrievers); ``None`` resamples rows.
    """
    # Imported here: scipy.special (~0.17 s) is for ``triage calibrate``, not every ``triage score``.
    from triage_plugins.diagnosis.calibration import bca_interval, clustered_bca_interval, youden_threshold

    if failure not in ("low", "high"):
        raise ConfigError(f"failure must be 'low' or 'high', got {failure!r}")
    xs: list[float | None] = []
    fails: list[bool | None] = []
    groups: list[Any] = []
    for row in rows:
        if metric not in row and outcome not in row:
            continue
        x, y = _number(row.get(metric)), _number(row.get(outcome))
        xs.append(x)
        fails.append(
            None if y is None else (y < outcome_threshold if failure == "low" else y > outcome_threshold)
        )
        groups.append(row.get(cluster) if cluster else None)
    if not xs:
        raise ConfigError(f"no row has {metric!r} or {outcome!r}")
    point = youden_threshold(xs, fails)
    keep = [i for i in range(len(xs)) if xs[i] is not None and fails[i] is not None]
    x = np.array([xs[i] for i in keep], dtype=float)
    y = np.array([1.0 if fails[i] else 0.0 for i in keep])
    labels = [groups[i] for i in keep]
    n_clusters = len(set(map(str, labels))) if cluster else None
    threshold_ci = j_ci = None
    if point.threshold is not None and len(x) >= 2:

        def threshold_of(a: np.ndarray, b: np.ndarray) -> float:
            fit = youden_threshold(a, b)
            return math.nan if fit.threshold is None else fit.threshold

        def j_of(a: np.ndarray, b: np.ndarray) -> float:
            fit = youden_threshold(a, b)
            return math.nan if fit.j is None else fit.j

        options = {"n_resamples": n_resamples, "confidence": confidence, "seed": seed}
        if cluster and n_clusters is not None and n_clusters >= 2:
            threshold_ci = clustered_bca_interval((x, y), labels, threshold_of, **options)
            j_ci = clustered_bca_interval((x, y), labels, j_of, **options)
        elif not cluster:
            threshold_ci = bca_interval((x, y), threshold_of, **options)
            j_ci = bca_interval((x, y), j_of, **options)
    return CalibrationReport(metric, outcome, point, threshold_ci, j_ci, cluster, n_clusters)


def render_calibration(report: CalibrationReport, console: Console) -> None:
    """Print a calibration report with rich (columns wrap, never cut to ``…``)."""
    from rich.table import Table

    from triage_plugins.report.terminal import fold_table

    y = report.youden
    title = f"Youden threshold of {report.metric} for predicting {report.outcome} failure (TRIAGE §5.2)"
    if y.threshold is None:
        console.print(f"[bold]{title}[/bold]: [yellow]N/A[/yellow] — {y.reason}")
        return
    table = Table(title=title, title_justify="left")
    table.add_column("quantity")
    table.add_column("estimate")
    shown = report.j_ci or report.threshold_ci
    table.add_column(f"{round(shown.confidence * 100)}% BCa CI" if shown else "CI")

    def ci(i: Interval | None) -> str:
        return "–" if i is None else f"[{i.low:.3f}, {i.high:.3f}]"

    table.add_row("θ (largest failing value)", f"{y.threshold:.3f}", ci(report.threshold_ci))
    table.add_row("configure θ (strict <)", f"{y.cutoff:.3f}", "")
    table.add_row("Youden J", f"{y.j:.3f}", ci(report.j_ci))
    table.add_row("sensitivity / specificity", f"{y.sensitivity:.3f} / {y.specificity:.3f}", "")
    table.add_row("observations (failed)", f"{y.n} ({y.n_failed})", "")
    if report.cluster:
        table.add_row("clusters", f"{report.n_clusters} by {report.cluster!r}", "")
    console.print(fold_table(table))


def report_json(report: ScoreReport | CalibrationReport) -> str:
    """The report as indented JSON text."""
    return json.dumps(report.to_dict(), ensure_ascii=False, indent=2, allow_nan=False)
