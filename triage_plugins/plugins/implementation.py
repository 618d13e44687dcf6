"""The implementation/validation recorder: a default plugin measuring TRIAGE §4.1 and §4.2.

It keeps the :class:`~triage_plugins.contract.events.ExtractionEvent` objects it sees (per framework,
chunk and run), and when a :class:`~triage_plugins.contract.events.GraphEvent` arrives it computes the KG
Validation metrics of that graph (with the event's ontology) and the KG Implementation metrics of the
extractions kept (with the event's graph, aliases and ontology for CSR_link, SC and CVR), and
writes them to ``manager.store`` as ``scope="graph"`` rows, ``scope_id`` = the framework name, then
broadcasts them as a :class:`~triage_plugins.contract.records.GraphRecord` (``triage_graph_scored``).
The metrics read ``event.graph``, the view the adapter already holds for grounding (kept fresh
incrementally), never a copy; counts a graph store could give itself (SQL) are not asked for, as the
view's vectorized pass is cheaper and sees the same graph version as the event's other metrics.

What it keeps is bounded, so a long-running deployment neither grows without end nor takes longer
on each graph event: the latest ``implementation.max_chunks`` (chunk, run) pairs per framework, and
the latest ``implementation.max_events_per_chunk`` events of each. Older ones are evicted (oldest
first, counted); the Implementation metrics then cover the kept window, and their ``details`` say
so (``window_chunks``, ``evicted_chunks``).
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.contract.records import GraphRecord
from triage_plugins.metrics.extraction import implementation_metrics
from triage_plugins.metrics.validation import validation_metrics

if TYPE_CHECKING:
    from triage_plugins.contract.context import PluginContext
    from triage_plugins.contract.events import ExtractionEvent, GraphEvent
    from triage_plugins.metrics.result import MetricResult

__all__ = ["ImplementationRecorder"]

log = logging.getLogger("triage.plugins.implementation")


class ImplementationRecorder:
    """Accumulates extraction events; on each graph event computes and stores §4.1 + §4.2 metrics.

    Reads ``manager.config.options`` for ``"implementation.tau"`` (TCS threshold τ of SCR,
    default 0.5) and ``"implementation.delta"`` (SRR threshold δ, default 0.9). The last computed
    metrics per framework stay available in :attr:`latest` (useful without a store).

    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` (anything with ``.store``,
        and optionally ``.config`` and ``.run_id``).
    """

    #: Options this plugin reads (``TriageConfig.options``), with their defaults.
    triage_options: ClassVar[Mapping[str, Any]] = {
        "implementation.tau": 0.5,
        "implementation.delta": 0.9,
        "implementation.max_chunks": 20_000,
        "implementation.max_events_per_chunk": 8,
    }

    def __init__(self, manager: PluginContext) -> None:
        self._manager = manager
        self._lock = threading.Lock()
        self._events: dict[str, OrderedDict[tuple[str, str], deque[ExtractionEvent]]] = {}
        self.evicted: dict[str, int] = {}  # (chunk, run) pairs evicted per framework
        self.latest: dict[str, dict[str, MetricResult]] = {}
        self._max_chunks = max(1, int(self._option("max_chunks", 20_000)))
        self._max_per_chunk = max(1, int(self._option("max_events_per_chunk", 8)))

    def _option(self, name: str, default: float) -> float:
        config = getattr(self._manager, "config", None)
        options = getattr(config, "options", None) or {}
        return float(options.get(f"implementation.{name}", default))

    def events(self, framework: str) -> list[ExtractionEvent]:
        """The extraction events kept for ``framework``, in arrival order per (chunk, run)."""
        with self._lock:
            return [e for evs in self._events.get(framework, {}).values() for e in evs]

    @hookimpl
    def triage_extraction(self, event: ExtractionEvent) -> None:
        key = (event.chunk.id, event.run_id)
        with self._lock:
            chunks = self._events.setdefault(event.framework, OrderedDict())
            kept = chunks.get(key)
            if kept is None:
                kept = chunks[key] = deque(maxlen=self._max_per_chunk)
            else:
                chunks.move_to_end(key)
            kept.append(event)
            if len(chunks) > self._max_chunks:
                chunks.popitem(last=False)
                evicted = self.evicted.get(event.framework, 0)
                if not evicted:
                    log.warning(
                        "%s: more than %d extracted (chunk, run) pairs; the oldest are evicted and the "
                        "Implementation metrics cover the latest %d (implementation.max_chunks)",
                        event.framework, self._max_chunks, self._max_chunks,
                    )  # fmt: skip
                self.evicted[event.framework] = evicted + 1

    @hookimpl
    def triage_graph(self, event: GraphEvent) -> None:
        results = dict(
            validation_metrics(event.graph, ontology=event.ontology, delta=self._option("delta", 0.9))
        )
        extractions = self.events(event.framework)
        if extractions:
            measured = implementation_metrics(
                extractions,
                ontology=event.ontology,
                tau=self._option("tau", 0.5),
                graph=event.graph,
                aliases=event.aliases,
            )
            evicted = self.evicted.get(event.framework, 0)
            if evicted:
                window = len(self._events.get(event.framework, ()))
                measured = {
                    name: replace(
                        r, details={**r.details, "window_chunks": window, "evicted_chunks": evicted}
                    )
                    for name, r in dict(measured).items()
                }
            results.update(measured)
        self.latest[event.framework] = results
        self._write(event, results)
        emit = getattr(self._manager, "emit_graph_scored", None)
        if emit is not None:
            emit(GraphRecord(event.framework, event, results))

    def _write(self, event: GraphEvent, results: Mapping[str, MetricResult]) -> None:
        """The graph's metric rows (``scope="graph"``, scope id = the framework)."""
        store = getattr(self._manager, "store", None)
        if store is None:
            return
        run_id = getattr(self._manager, "run_id", None)
        for name, result in results.items():
            store.record_metric(
                "graph",
                event.framework,
                name,
                result.value,
                result.reason,
                run_id=run_id,
                framework=event.framework,
                details=dict(result.details),
                n=result.n,
            )
        log.debug("recorded %d graph metrics for %s", len(results), event.framework)
