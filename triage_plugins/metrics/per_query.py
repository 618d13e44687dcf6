"""Every per-query usage metric of a registry for one query, over one shared
:class:`~triage_plugins.metrics.usage.QueryView` (the hot path: one grounding, one subgraph index).

Kept apart from :mod:`triage_plugins.metrics.usage` so the default registry can be the built-in one:
the registry imports the usage package for its functions, and this module imports both.
"""

from __future__ import annotations

from collections.abc import Collection

from triage_plugins.contract.events import GenerationEvent, RetrievalEvent
from triage_plugins.metrics.registry import BUILTIN_METRICS, MetricRegistry
from triage_plugins.metrics.result import MetricResult
from triage_plugins.metrics.usage.query import query_view
from triage_plugins.metrics.usage.views import Grounderlike

__all__ = ["chain_head_metrics", "usage_metrics"]


def chain_head_metrics(
    retrieval: RetrievalEvent,
    *,
    grounder: Grounderlike | None = None,
    metrics: MetricRegistry = BUILTIN_METRICS,
) -> dict[str, MetricResult]:
    """The chain links computable before the reader runs (QGR, ERC, RRS), for the synchronous gate."""
    view = query_view(retrieval, None, grounder, None)
    return {spec.symbol: view.compute(spec) for spec in metrics.chain if spec.stage == "retrieval"}


def usage_metrics(
    retrieval: RetrievalEvent,
    generation: GenerationEvent | None = None,
    *,
    grounder: Grounderlike | None = None,
    closed_book: GenerationEvent | None = None,
    metrics: MetricRegistry | None = None,
    only: Collection[str] | None = None,
) -> dict[str, MetricResult]:
    """Every per-query usage metric of ``metrics`` (default: the built-in registry) for one query, in
    registry order, sharing one grounding and one subgraph index (:func:`query_view`).

    Answer-side metrics are N/A without ``generation``, gold metrics without ``retrieval.gold``, KNI
    without ``closed_book`` (a ``context="none"`` generation). ``only``: compute just these symbols
    (the others are left out of the result, not N/A).
    """
    view = query_view(retrieval, generation, grounder, closed_book)
    specs = (BUILTIN_METRICS if metrics is None else metrics).per_query
    if only is not None:
        return {spec.symbol: view.compute(spec) for spec in specs if spec.symbol in only}
    return {spec.symbol: view.compute(spec) for spec in specs}
