"""Contribution scores -> LlamaIndex ranking (EvoRAG §4.2 hybrid priority, written back).

The adapter computes nothing: candidates go to :meth:`TriageManager.rerank` as a
:class:`~triage_plugins.contract.events.RerankRequest` (the framework's own score as relevance S_r, clipped
to [0, 1]; LlamaIndex's default score 1.0 where it gives none), and the returned priorities
reorder (and, with ``top_n`` / ``min_priority``, filter) what LlamaIndex hands to the reader.
When no plugin answers (reweighting off), everything passes through unchanged.

- :class:`TriagePostprocessor` — public ``BaseNodePostprocessor`` for any query engine: triplet
  nodes (``include_text=False``) are ranked as triples, chunk nodes as chunks.
- :class:`TriageLLMSynonymRetriever`, :class:`TriageVectorContextRetriever` — PropertyGraphIndex
  sub-retrievers that rank the real ``(EntityNode, Relation, EntityNode)`` triplets before
  LlamaIndex turns them into nodes. Optionally (``relation_provenance=True``) each node's SOURCE is
  the relation's own ``triplet_source_id`` instead of the subject entity's.
- :func:`persist_contributions` — scores into ``Relation.properties["contribution"]``.

Private surface (llama-index-core 0.14.25): the sub-retrievers override
``BasePGRetriever._get_nodes_with_score(triplets, scores=None)``, which ``LLMSynonymRetriever`` and
``VectorContextRetriever`` call with the final triplets; the adapter's tests fail if it changes.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Literal

from llama_index.core.indices.property_graph import LLMSynonymRetriever, VectorContextRetriever
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeRelationship, NodeWithScore, QueryBundle, RelatedNodeInfo
from pydantic import PrivateAttr

from triage_llamaindex.translate import (
    TRIPLET_SOURCE_KEY,
    build_known_graph,
    graph_fingerprint,
    parse_triples,
    store_triplets,
    triple_of,
)
from triage_plugins.adapter_kit.ordering import ask_priorities, host_order
from triage_plugins.adapter_kit.query_ids import current_query_id

if TYPE_CHECKING:
    from triage_plugins.runtime.manager import TriageManager

__all__ = [
    "TriageLLMSynonymRetriever",
    "TriagePostprocessor",
    "TriageVectorContextRetriever",
    "persist_contributions",
    "rank_by_priority",
]

log = logging.getLogger("triage.llamaindex.reweight")

FRAMEWORK = "llamaindex"
DEFAULT_SCORE = 1.0  # what LlamaIndex's BasePGRetriever assigns when a retriever gives no score

_current_query: ContextVar[QueryBundle | None] = ContextVar("triage_pg_query", default=None)


def _resolve_manager(manager: TriageManager | None) -> TriageManager:
    if manager is not None:
        return manager
    from triage_llamaindex.instrument import active_instrumentation

    active = active_instrumentation()
    if active is not None:
        return active.manager
    from triage_plugins.runtime.manager import default_manager

    return default_manager()


def _current_query_id() -> str | None:
    from triage_llamaindex.instrument import active_instrumentation

    active = active_instrumentation()
    return active.current_query_id() if active is not None else current_query_id()


def rank_by_priority(
    manager: TriageManager,
    query: str,
    unit: Literal["triple", "chunk"],
    ids: Sequence[str],
    scores: Sequence[float | None],
    *,
    top_n: int | None = None,
    min_priority: float | None = None,
) -> list[tuple[int, float]] | None:
    """Ask ``manager.rerank`` and return ``(candidate index, priority)`` best first.

    Duplicated ids are asked once and share the first occurrence's priority; a candidate without a
    score gets LlamaIndex's default 1.0 as S_r. ``None`` when no plugin answered (keep the
    framework's order and scores). Ties keep the framework's order
    (:func:`~triage_plugins.adapter_kit.ordering.host_order`).
    """
    relevance = [DEFAULT_SCORE if score is None else score for score in scores]
    priorities = ask_priorities(manager, FRAMEWORK, query, unit, ids, relevance, _current_query_id())
    if priorities is None:
        return None
    ranked = [(i, priorities[i]) for i in host_order(priorities)]
    if min_priority is not None:
        ranked = [(i, p) for i, p in ranked if p >= min_priority]
    if top_n is not None:
        ranked = ranked[:top_n]
    return ranked


# --------------------------------------------------------------------------- postprocessor


class TriagePostprocessor(BaseNodePostprocessor):
    """Reorder (and optionally cut) retrieved nodes by triage's contribution-based priority.

    :param reweight: ask ``triage_rerank``; ``False`` passes nodes through untouched.
    :param unit: ``"triple"`` (nodes are ``s -> p -> o`` triplet nodes), ``"chunk"`` (node ids are
        chunk ids) or ``"auto"`` (triple when every node renders exactly one triplet).
    :param top_n: keep at most this many nodes after reordering.
    :param min_priority: drop nodes whose priority is below this.
    :param manager: the triage manager (default: the active instrumentation's, else the default).
    :param graph_store: the property graph store, to read triplet nodes rendered with
        ``include_properties=True`` exactly (plain renderings need no store).
    """

    reweight: bool = True
    unit: Literal["auto", "triple", "chunk"] = "auto"
    top_n: int | None = None
    min_priority: float | None = None
    _manager: Any = PrivateAttr(default=None)
    _graph_store: Any = PrivateAttr(default=None)
    _known: Any = PrivateAttr(default=None)

    def __init__(self, *, manager: TriageManager | None = None, graph_store: Any = None, **data: Any) -> None:
        super().__init__(**data)
        self._manager = manager
        self._graph_store = graph_store

    @classmethod
    def class_name(cls) -> str:
        return "TriagePostprocessor"

    def _by_line(self) -> Mapping[str, Any] | None:
        store = self._graph_store
        if store is None:
            return None
        from triage_llamaindex.instrument import active_instrumentation

        active = active_instrumentation()
        if active is not None:
            return active.known_graph(store).by_line
        fingerprint = graph_fingerprint(store)
        cached = self._known
        if cached is None or cached[0] is None or cached[0] != fingerprint:
            cached = self._known = (fingerprint, build_known_graph(store).by_line)
        return cached[1]

    def _triple_ids(self, nodes: Sequence[NodeWithScore]) -> list[str] | None:
        by_line = self._by_line()
        ids = []
        for scored in nodes:
            text = scored.node.get_content().strip()
            triples = parse_triples(text, by_line)
            if len(triples) != 1 or "\n" in text:
                return None
            ids.append(triples[0].id)
        return ids

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not self.reweight or not nodes:
            return nodes
        unit: Literal["triple", "chunk"]
        ids = self._triple_ids(nodes) if self.unit in ("auto", "triple") else None
        if ids is not None:
            unit = "triple"
        elif self.unit == "triple":
            log.warning("TriagePostprocessor(unit='triple'): nodes are not triplet nodes; left unchanged")
            return nodes
        else:
            unit, ids = "chunk", [n.node.node_id for n in nodes]
        query = query_bundle.query_str if query_bundle is not None else ""
        ranked = rank_by_priority(
            _resolve_manager(self._manager),
            query,
            unit,
            ids,
            [n.score for n in nodes],
            top_n=self.top_n,
            min_priority=self.min_priority,
        )
        if ranked is None:
            return nodes
        return [NodeWithScore(node=nodes[i].node, score=p) for i, p in ranked]


# --------------------------------------------------------------------------- sub-retrievers


class _TriageRankedPG:
    """Mixin for PropertyGraphIndex sub-retrievers: rank real triplets before they become nodes."""

    _triage_manager: TriageManager | None
    _triage_reweight: bool
    _triage_top_n: int | None
    _triage_min_priority: float | None
    _triage_relation_provenance: bool

    def __init__(
        self,
        *args: Any,
        triage_manager: TriageManager | None = None,
        reweight: bool = True,
        top_n: int | None = None,
        min_priority: float | None = None,
        relation_provenance: bool = False,
        **kwargs: Any,
    ) -> None:
        self._triage_manager = triage_manager
        self._triage_reweight = reweight
        self._triage_top_n = top_n
        self._triage_min_priority = min_priority
        self._triage_relation_provenance = relation_provenance
        super().__init__(*args, **kwargs)  # the LlamaIndex sub-retriever

    def retrieve_from_graph(self, query_bundle: QueryBundle, limit: int | None = None) -> list[NodeWithScore]:
        token = _current_query.set(query_bundle)
        try:
            return super().retrieve_from_graph(query_bundle, limit=limit)  # type: ignore[misc]
        finally:
            _current_query.reset(token)

    async def aretrieve_from_graph(
        self, query_bundle: QueryBundle, limit: int | None = None
    ) -> list[NodeWithScore]:
        token = _current_query.set(query_bundle)
        try:
            return await super().aretrieve_from_graph(query_bundle, limit=limit)  # type: ignore[misc]
        finally:
            _current_query.reset(token)

    def _get_nodes_with_score(
        self, triplets: list[Any], scores: list[float] | None = None
    ) -> list[NodeWithScore]:
        if self._triage_reweight and triplets:
            bundle = _current_query.get()
            ranked = rank_by_priority(
                _resolve_manager(self._triage_manager),
                bundle.query_str if bundle is not None else "",
                "triple",
                [triple_of(*t).id for t in triplets],
                list(scores) if scores is not None else [None] * len(triplets),
                top_n=self._triage_top_n,
                min_priority=self._triage_min_priority,
            )
            if ranked is not None:
                triplets = [triplets[i] for i, _ in ranked]
                scores = [p for _, p in ranked]
        nodes = super()._get_nodes_with_score(triplets, scores)  # type: ignore[misc]
        if self._triage_relation_provenance:
            for scored, (_, relation, _) in zip(nodes, triplets, strict=True):
                source = relation.properties.get(TRIPLET_SOURCE_KEY)
                if source is not None:
                    scored.node.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id=source)
        return nodes


class TriageLLMSynonymRetriever(_TriageRankedPG, LLMSynonymRetriever):
    """``LLMSynonymRetriever`` whose triplets are ranked by triage priority.

    Takes ``LLMSynonymRetriever``'s arguments plus ``triage_manager``, ``reweight``, ``top_n``,
    ``min_priority`` and ``relation_provenance`` (see the module docstring).
    """


class TriageVectorContextRetriever(_TriageRankedPG, VectorContextRetriever):
    """``VectorContextRetriever`` whose triplets are ranked by triage priority.

    Takes ``VectorContextRetriever``'s arguments plus ``triage_manager``, ``reweight``, ``top_n``,
    ``min_priority`` and ``relation_provenance`` (see the module docstring).
    """


# --------------------------------------------------------------------------- persistence


def persist_contributions(graph_store: Any, scores: Mapping[str, float], key: str = "contribution") -> int:
    """Write ``scores`` (triple id -> value) into ``Relation.properties[key]``; returns the count.

    The relations the store returned are updated in place and handed to ``upsert_relations`` (how
    database-backed stores persist properties). ``SimplePropertyGraphStore.upsert_relations`` skips
    triplets it already holds, so there the in-place update is what sticks — and it is saved by
    ``store.persist(...)`` like any other property.
    """
    changed = []
    for triplet in store_triplets(graph_store):
        value = scores.get(triple_of(*triplet).id)
        if value is None:
            continue
        relation = triplet[1]
        relation.properties[key] = float(value)
        changed.append(relation)
    if changed:
        graph_store.upsert_relations(changed)
    return len(changed)
