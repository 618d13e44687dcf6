"""triage-plugins adapter for Microsoft GraphRAG 3.3: observe indexing and queries, learn from feedback.

Observe the index::

    from triage_graphrag import observe_index
    obs = observe_index(config, store="triage.sqlite")   # raw-graph snapshot, workflow, logprob model
    await graphrag.api.build_index(obs.config, callbacks=obs.callbacks)

Observe (and, with ``TriageConfig(reweight=True)``, reweight) queries — same parameters as
``graphrag.api``, same ``(response, context)`` result, plus ``result.query_id``::

    from triage_graphrag import local_search, global_search, feedback
    result = await local_search(config, entities, communities, reports, text_units, relationships,
                                None, 2, "Multiple Paragraphs", "Who directed Inception?", manager=m)
    feedback(result.query_id, 1.0, manager=m)

GraphRAG is imported lazily: importing this package (or its entry-point module ``plugin``)
imports nothing from ``graphrag``.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "GraphTables",
    "IndexObservation",
    "SearchResult",
    "feedback",
    "global_search",
    "graph_tables",
    "local_search",
    "manager_for",
    "mixed_context_class",
    "observe_index",
    "query_callbacks",
    "register_logprob_completion",
    "register_offline_models",
    "reweight_relationships",
    "reweight_reports",
    "triple_id",
]

_LOCATIONS = {
    "GraphTables": "triage_graphrag.tables",
    "triple_id": "triage_graphrag.tables",
    "IndexObservation": "triage_graphrag.indexing",
    "observe_index": "triage_graphrag.indexing",
    "register_logprob_completion": "triage_graphrag.indexing",
    "SearchResult": "triage_graphrag.query",
    "feedback": "triage_graphrag.query",
    "global_search": "triage_graphrag.query",
    "graph_tables": "triage_graphrag.query",
    "local_search": "triage_graphrag.query",
    "manager_for": "triage_graphrag.query",
    "query_callbacks": "triage_graphrag.query",
    "mixed_context_class": "triage_graphrag.reweight",
    "reweight_relationships": "triage_graphrag.reweight",
    "reweight_reports": "triage_graphrag.reweight",
    "register_offline_models": "triage_graphrag.offline",
}


def __getattr__(name: str) -> Any:
    module = _LOCATIONS.get(name)
    if module is None:
        raise AttributeError(f"module 'triage_graphrag' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)


def __dir__() -> list[str]:
    return sorted(__all__)
