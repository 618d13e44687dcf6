"""The implementation/validation recorder: a default plugin measuring TRIAGE §4.1 and §4.2.

It keeps every :class:`~triage_plugins.contract.events.ExtractionEvent` it sees (per framework, chunk and
run), and when a :class:`~triage_plugins.contract.events.GraphEvent` arrives it computes the KG Validation
metrics of that graph (with the event's ontology) and the KG Implementation metrics of the
extractions so far (with the event's graph, aliases and ontology for CSR_link, SC and CVR), and
writes them to ``manager.store`` as ``scope="graph"`` rows, ``scope_id`` = the framework name.
"""

from __future__ import annotations

import logging
import threading
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.metrics.extraction import implementation_metrics
from triage_plugins.metrics.validation import validation_metrics

if TYPE_CHECKING:
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
    triage_options: ClassVar[Mapping[str, Any]] = {"implementation.tau": 0.5, "implementation.delta": 0.9}

    def __init__(self, manager: Any) -> None:
        self._manager = manager
        self._lock = threading.Lock()
        self._events: dict[str, dict[tuple[str, str], list[ExtractionEvent]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.latest: dict[str, dict[str, MetricResult]] = {}

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
        with self._lock:
            self._events[event.framework][(event.chunk.id, event.run_id)].append(event)

    @hookimpl
    def triage_graph(self, event: GraphEvent) -> None:
        results = dict(
            validation_metrics(event.graph, ontology=event.ontology, delta=self._option("delta", 0.9))
        )
        extractions = self.events(event.framework)
        if extractions:
            results.update(
                implementation_metrics(
                    extractions,
                    ontology=event.ontology,
                    tau=self._option("tau", 0.5),
                    graph=event.graph,
                    aliases=event.aliases,
                )
            )
        self.latest[event.framework] = results
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
