"""Score a trace file of any length in two streaming passes: ``triage score EVENTS.jsonl``.

:func:`~triage_plugins.apps.score.score_events` holds the whole trace in memory. A deployment's trace
can have millions of lines, so :func:`score_file` reads the file twice instead:

1. **Index**: every line is parsed and checked (a bad line stops here, before any output); the
   extraction events and the last graph event are kept (the phases and the grounder need them); for
   each ``(framework, query_id)`` only the line numbers of its last retrieval, answer and closed-book
   generation are kept.
2. **Score**: the lines the index names are parsed again; a query is scored as soon as its last part
   has been read, handed to the JSON writer, and dropped. Only queries whose parts are still to come
   are held, so memory follows how far apart a query's events are, not the trace's length.

The result equals :func:`score_events` on the same events, except that queries come in the order
their last event appears in the file.

With ``skip_bad=True`` a line that is not an event is counted, noted and skipped in pass 1 instead of
stopping it; pass 2 reads only the lines pass 1 indexed, so both passes skip the same lines.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from triage_plugins.apps.score import (
    BadLines,
    QueryParts,
    QueryScore,
    ScoreReport,
    _default_grounder,
    _phases,
    _result_dict,
    _rhd_key,
    _summarize_queries,
    _Trace,
    parse_line,
    read_lines,
)
from triage_plugins.contract.errors import EventError
from triage_plugins.contract.events import (
    ExtractionEvent,
    GenerationEvent,
    GraphEvent,
    RetrievalEvent,
    from_json,
)
from triage_plugins.metrics.registry import MetricRegistry, metric_registry

if TYPE_CHECKING:
    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.kg.ontology import Ontology

__all__ = ["score_file", "write_json_report"]

_RETRIEVAL, _ANSWER, _CLOSED = 0, 1, 2


@dataclass(slots=True)
class _Index:
    """Pass 1: the trace without its queries' events, and where each query's parts are."""

    trace: _Trace = field(default_factory=_Trace)
    parts: dict[tuple[str, str], list[int]] = field(default_factory=dict)  # key -> 3 line numbers (0: none)


def _index(path: str | Path, bad: BadLines | None = None) -> _Index:
    index = _Index()
    trace = index.trace
    retrieved_twice = 0
    for number, line in read_lines(path, bad):
        if bad is None:
            event = parse_line(line, path, number)
        else:
            try:
                event = from_json(line)
            except EventError as exc:
                bad.add(number, str(exc))
                continue
        trace.counts[event.kind] += 1
        if isinstance(event, ExtractionEvent):
            trace.extractions.append(event)
        elif isinstance(event, GraphEvent):
            trace.graph_event = event
        elif isinstance(event, RetrievalEvent | GenerationEvent):
            slots = index.parts.setdefault((event.framework, event.query_id), [0, 0, 0])
            if isinstance(event, RetrievalEvent):
                retrieved_twice += slots[_RETRIEVAL] != 0
                slots[_RETRIEVAL] = number
            else:
                slots[_CLOSED if event.context == "none" else _ANSWER] = number
    if retrieved_twice:
        trace.notes.append(
            f"{retrieved_twice} retrieval event(s) repeat a query id: the last retrieval of each is scored"
        )
    if bad is not None and bad.count:
        trace.notes.append(bad.summary(path))
    if trace.counts["graph"] > 1:
        trace.notes.append(f"{trace.counts['graph']} graph events: the last one is scored")
    orphans = sum(1 for slots in index.parts.values() if not slots[_RETRIEVAL])
    if orphans:
        trace.notes.append(f"{orphans} generation event(s) without a retrieval event were not scored")
    return index


def _stream_parts(path: str | Path, index: _Index) -> Iterator[QueryParts]:
    """Pass 2: each query's (retrieval, answer, closed-book) as soon as its last part is read."""
    wanted: dict[int, tuple[tuple[str, str], int]] = {}
    for key, slots in index.parts.items():
        if slots[_RETRIEVAL]:
            for slot, number in enumerate(slots):
                if number:
                    wanted[number] = (key, slot)
    pending: dict[tuple[str, str], list[Any]] = {}
    # Pass 1 already counted the undecodable lines; none of them is wanted here.
    for number, line in read_lines(path, BadLines()):
        hit = wanted.pop(number, None)
        if hit is None:
            continue
        key, slot = hit
        held = pending.setdefault(key, [None, None, None])
        held[slot] = parse_line(line, path, number)
        if number == max(index.parts[key]):
            del pending[key]
            yield held[_RETRIEVAL], held[_ANSWER], held[_CLOSED]


def score_file(
    path: str | Path,
    *,
    ontology: Ontology | None = None,
    reference: GraphView | None = None,
    thresholds: Mapping[str, float] | None = None,
    metrics: MetricRegistry | None = None,
    keep: int | None = None,
    json_to: TextIO | None = None,
    skip_bad: bool = False,
) -> ScoreReport:
    """Score a JSON-lines trace file in two streaming passes (see the module docstring).

    :param keep: keep only the first ``keep`` per-query reports in the result (``None``: all); the
        aggregates, RHD and signature counts always cover every query.
    :param json_to: write the full JSON report (every query) here while scoring, in the shape of
        :meth:`ScoreReport.to_dict`.
    :param skip_bad: skip lines that are not events (counted in :attr:`ScoreReport.bad_lines` and
        summed up in one note) instead of raising.
    :raises EventError: a line is not an event (the message names the line), before anything is
        written; not with ``skip_bad``.
    :raises TriageError: the file cannot be read.
    """
    registry = metric_registry() if metrics is None else metrics
    bad = BadLines() if skip_bad else None
    index = _index(path, bad)
    trace = index.trace
    phases = _phases(trace, ontology, reference, registry)
    grounder = _default_grounder(trace, has_queries=any(slots[_RETRIEVAL] for slots in index.parts.values()))
    kept: list[QueryScore] = []
    writer = _JsonWriter(json_to) if json_to is not None else None
    if writer is not None:
        writer.start(dict(trace.counts), {k: v.to_dict() for k, v in phases.items()})

    def sink(score: QueryScore) -> None:
        if keep is None or len(kept) < keep:
            kept.append(score)
        if writer is not None:
            writer.query(score.to_dict())

    summary = _summarize_queries(
        _stream_parts(path, index), graph=trace.graph, grounder=grounder, thresholds=thresholds,
        registry=registry, sink=sink,
    )  # fmt: skip
    report = ScoreReport(
        phases, kept, summary.aggregate, summary.rhd, summary.signatures, dict(trace.counts),
        trace.notes, registry, n_queries=summary.n_queries, bad_lines=bad,
    )  # fmt: skip
    if writer is not None:
        writer.end(report)
    return report


class _JsonWriter:
    """Writes :meth:`ScoreReport.to_dict`'s shape piece by piece: counts and phases, each query as it
    is scored, then the aggregates and notes (JSON readers do not depend on key order)."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.first = True

    def _dump(self, value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, allow_nan=False)

    def start(self, counts: dict[str, int], phases: dict[str, Any]) -> None:
        self.out.write(
            f'{{"counts": {self._dump(counts)},\n "phases": {self._dump(phases)},\n "queries": [\n'
        )

    def query(self, data: dict[str, Any]) -> None:
        self.out.write(("  " if self.first else ",\n  ") + self._dump(data))
        self.first = False

    def end(self, report: ScoreReport) -> None:
        usage = {
            "aggregate": {k: _result_dict(v) for k, v in report.aggregate.items()},
            "rhd": {_rhd_key(k): v for k, v in report.rhd.items()},
            "signatures": dict(report.signatures),
        }
        self.out.write(f'\n ],\n "usage": {self._dump(usage)},\n "notes": {self._dump(report.notes)}}}\n')


def write_json_report(path: Path, events: str | Path, **options: Any) -> ScoreReport:
    """:func:`score_file` with its JSON report written to ``path`` atomically: into a temporary file
    beside it, renamed over ``path`` only once complete (a failure leaves ``path`` as it was)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            report = score_file(events, json_to=fh, **options)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return report
