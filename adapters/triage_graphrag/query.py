"""Old home of the GraphRAG query instrumentation, kept so that old imports still work: see
:mod:`triage_graphrag.instrument` (:class:`~triage_graphrag.instrument.GraphRAGInstrumentor`)."""

from __future__ import annotations

from triage_graphrag.instrument import (
    SearchResult,
    feedback,
    global_search,
    graph_tables,
    local_search,
    manager_for,
    query_callbacks,
)

__all__ = [
    "SearchResult",
    "feedback",
    "global_search",
    "graph_tables",
    "local_search",
    "manager_for",
    "query_callbacks",
]
