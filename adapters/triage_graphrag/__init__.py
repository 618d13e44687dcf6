"""triage-plugins adapter for Microsoft GraphRAG 3.3: observe indexing and queries, learn from feedback.

::

    from triage_graphrag import GraphRAGInstrumentor

    inst = GraphRAGInstrumentor().instrument(manager=m)      # or store="triage.sqlite"
    obs = inst.observe_index(config)                         # raw-graph snapshot, workflow, logprob model
    await graphrag.api.build_index(obs.config, callbacks=obs.callbacks)
    result = await inst.local_search(config, entities, communities, reports, text_units, relationships,
                                     None, 2, "Multiple Paragraphs", "Who directed Inception?")
    inst.feedback(result.query_id, 1.0)

Same parameters as ``graphrag.api``, same ``(response, context)`` result, plus ``result.query_id``;
with ``TriageConfig(reweight=True)`` GraphRAG's ranking follows the learned priorities. Calling
``graphrag.api`` directly learns too: ``inst = instrument(reweight=True)``, then pass
``inst.query_callbacks(question, entities, relationships, text_units, communities)`` in
``callbacks=[...]`` of any ``graphrag.api`` search and send ``inst.feedback(cb.query_id, score)``.
Triples are keyed ``"SOURCE|TARGET"``, GraphRAG's own merge key, so learned scores survive
re-extraction, added documents and ``graphrag update`` (:mod:`~triage_graphrag.translate`). The former
functions (``observe_index``, ``local_search``, ``global_search``, ``query_callbacks``,
``feedback``, each with ``manager=``) still work, as thin wrappers over the instrumentor.

The modules follow the adapter skeleton: :mod:`~triage_graphrag.instrument` (the instrumentor),
:mod:`~triage_graphrag.translate` (tables and query contexts -> events),
:mod:`~triage_graphrag.reweight` (priorities -> GraphRAG's ranking knobs), plus
:mod:`~triage_graphrag.indexing` (the observed index and update runs) and
:mod:`~triage_graphrag.hooks` (the engine-factory hook behind plain ``graphrag.api`` calls). GraphRAG is imported lazily: importing
this package (or its entry-point module ``plugin``) imports nothing from ``graphrag``.
"""

from __future__ import annotations

from triage_graphrag.indexing import IndexObservation, register_logprob_completion
from triage_graphrag.instrument import (
    GraphRAGInstrumentor,
    SearchResult,
    feedback,
    global_search,
    graph_tables,
    instrument,
    local_search,
    manager_for,
    observe_index,
    query_callbacks,
)
from triage_graphrag.reweight import mixed_context_class, reweight_relationships, reweight_reports
from triage_graphrag.translate import (
    GraphTables,
    legacy_triple_id,
    migrate_legacy_scores,
    stable_key,
    triple_id,
)

__all__ = [
    "GraphRAGInstrumentor",
    "GraphTables",
    "IndexObservation",
    "SearchResult",
    "feedback",
    "global_search",
    "graph_tables",
    "instrument",
    "legacy_triple_id",
    "local_search",
    "manager_for",
    "migrate_legacy_scores",
    "mixed_context_class",
    "observe_index",
    "query_callbacks",
    "register_logprob_completion",
    "register_offline_models",
    "reweight_relationships",
    "reweight_reports",
    "stable_key",
    "triple_id",
]


def register_offline_models() -> None:
    """Register the offline model types (:func:`triage_graphrag.offline.register_offline_models`)."""
    from triage_graphrag import offline

    offline.register_offline_models()
