"""What the scorer broadcasts once per scoring step: :class:`QueryRecord` and :class:`GraphRecord`.

A query's metrics and chain diagnosis are computed once, by one scorer (the ``triage.usage`` default
plugin), into a frozen record broadcast through ``triage_query_scored(record)`` (DESIGN §4 "Scoring
once"; pytest's ``TestReport`` and ``pytest_runtest_logreport``). The store writer, the OTel exporter,
the gate, ``triage score`` and ``triage compare`` read records; none recomputes a metric.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Literal

from triage_plugins.contract.hookspecs import hookimpl

if TYPE_CHECKING:
    from triage_plugins.contract.events import GateDecision, GenerationEvent, Gold, GraphEvent, RetrievalEvent
    from triage_plugins.diagnosis.chain import Diagnosis
    from triage_plugins.metrics.result import MetricResult

__all__ = ["PHASES", "GraphRecord", "Phase", "QueryRecord", "RecordCollector"]

Phase = Literal["retrieval", "generation", "closed_book"]
#: ``retrieval``: scored before the reader ran (provisional chain); ``generation``: the answer arrived
#: (the whole chain); ``closed_book``: a closed-book answer arrived after the answer (KNI only).
PHASES: tuple[str, ...] = ("retrieval", "generation", "closed_book")


@dataclass(frozen=True, slots=True)
class QueryRecord:
    """One query as scored at one phase.

    :param framework: the framework that answered.
    :param query_id: the query's id (with ``framework``, the query's key).
    :param phase: ``"retrieval"``, ``"generation"`` or ``"closed_book"`` (:data:`PHASES`).
    :param retrieval: the retrieval scored (the last one, when a gate rerouted the query).
    :param metrics: every metric computed for the query so far, by symbol.
    :param settled: the symbols this phase settles, in registry order: what a store writes now.
    :param diagnosis: the chain read at this phase; ``None`` for a ``closed_book`` update.
    :param gate: the gate's decision on the retrieval, when one was seen before this phase.
    :param answer: the answer with the retrieved context (``context="retrieved"``), if any yet.
    :param closed_book: the closed-book answer (``context="none"``, for KNI), if any yet.
    """

    framework: str
    query_id: str
    phase: Phase
    retrieval: RetrievalEvent
    metrics: Mapping[str, MetricResult]
    settled: tuple[str, ...] = ()
    diagnosis: Diagnosis | None = None
    gate: GateDecision | None = None
    answer: GenerationEvent | None = None
    closed_book: GenerationEvent | None = None

    def __post_init__(self) -> None:
        if self.phase not in PHASES:
            raise ValueError(f"QueryRecord.phase must be one of {PHASES}, got {self.phase!r}")
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))
        object.__setattr__(self, "settled", tuple(self.settled))

    @property
    def gold(self) -> Gold | None:
        """The question's gold annotations, when it carries any."""
        return self.retrieval.gold

    @property
    def signature(self) -> str | None:
        """The chain signature, or ``None`` when no link could be evaluated (or no chain was read)."""
        d = self.diagnosis
        return d.signature if d is not None and d.defined else None

    def settled_results(self) -> list[MetricResult]:
        """The results of :attr:`settled`, in order."""
        return [self.metrics[name] for name in self.settled if name in self.metrics]


@dataclass(frozen=True, slots=True)
class GraphRecord:
    """A graph's KG Implementation (§4.1) and Validation (§4.2) metrics, scored on a graph event.

    :param framework: the framework whose graph it is.
    :param event: the graph event scored.
    :param metrics: every metric computed, by symbol.
    """

    framework: str
    event: GraphEvent
    metrics: Mapping[str, MetricResult]

    def __post_init__(self) -> None:
        object.__setattr__(self, "metrics", MappingProxyType(dict(self.metrics)))


class RecordCollector:
    """A plugin collecting what the scorer broadcasts, in order: each ``triage_query_scored`` record
    and each ``triage_graph_scored`` record (``triage probe``, ``triage demo`` and tests read records
    instead of scoring again). Lists, not per-query maps: :meth:`take` drains them."""

    def __init__(self) -> None:
        self.records: list[QueryRecord] = []
        self.graphs: list[GraphRecord] = []

    @hookimpl
    def triage_query_scored(self, record: QueryRecord) -> None:
        self.records.append(record)

    @hookimpl
    def triage_graph_scored(self, record: GraphRecord) -> None:
        self.graphs.append(record)

    def take(self) -> list[QueryRecord]:
        """The query records collected since the last call, oldest first; the list is emptied."""
        records, self.records = self.records, []
        return records

    def finals(self) -> list[QueryRecord]:
        """Of the records taken now, each query's last one (its final reading), in the order queries
        were last scored."""
        seen: set[tuple[str, str]] = set()  # a local of this call, not state kept between queries
        last: list[QueryRecord] = []
        for record in reversed(self.take()):
            if (record.framework, record.query_id) not in seen:
                seen.add((record.framework, record.query_id))
                last.append(record)
        return last[::-1]
