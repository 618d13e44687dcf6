"""Contribution scores -> LlamaIndex ranking (EvoRAG §4.2 hybrid priority, written back).

The adapter computes nothing: candidates go to :meth:`TriageManager.rerank` as a
:class:`~triage_plugins.contract.events.RerankRequest` (the framework's own score as relevance S_r, clipped
to [0, 1]; LlamaIndex's default score 1.0 where it gives none), and the returned priorities
reorder (and, with ``top_n`` / ``min_priority``, filter) what LlamaIndex hands to the reader.
When no plugin answers (reweighting off), everything passes through unchanged.

- :class:`TriagePostprocessor` — public ``BaseNodePostprocessor`` for any query engine. It ranks
  what the feedback learner scores (the manager's ``config.unit`` unless told otherwise): as
  triples, triplet nodes (``include_text=False``) are reordered, and each ``include_text`` node
  (LlamaIndex's default: a chunk under the triplet lines it supports) has its triplet lines
  reordered and is placed by its best triplet; as chunks, nodes are ranked by the chunk the engine
  shows (:func:`~triage_llamaindex.translate.chunk_key` ids, the ones in the retrieval events).
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
    AttachedText,
    build_known_graph,
    chunk_key,
    graph_fingerprint,
    parse_triples,
    split_attached,
    store_triplets,
    triple_of,
)
from triage_plugins.adapter_kit.ordering import ask_priorities, host_order
from triage_plugins.adapter_kit.query_ids import current_query_id

if TYPE_CHECKING:
    from triage_plugins import TriageManager

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
    from triage_plugins.adapter_kit import default_manager

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
    :param unit: ``"auto"`` (what the manager's learner scores, ``config.unit``), ``"triple"`` or
        ``"chunk"``. As triples: triplet nodes are ranked by their triplet; an ``include_text``
        node's triplet lines are reordered inside it and the node ranks by its best line (nodes
        holding no triplet keep their place). As chunks: nodes are ranked by the chunk shown.
    :param top_n: keep at most this many nodes after reordering.
    :param min_priority: drop triplets (triplet nodes, or lines of an ``include_text`` node, and a
        node left with none) or chunks whose priority is below this.
    :param manager: the triage manager (default: the active instrumentation's, else the default).
    :param graph_store: the property graph store, to read triplet nodes rendered with
        ``include_properties=True`` exactly (plain renderings need no store).

    When nothing answers (reweighting off, or the learner scores the other unit), the nodes pass
    through unchanged and the reason is logged once.
    """

    reweight: bool = True
    unit: Literal["auto", "triple", "chunk"] = "auto"
    top_n: int | None = None
    min_priority: float | None = None
    _manager: Any = PrivateAttr(default=None)
    _graph_store: Any = PrivateAttr(default=None)
    _known: Any = PrivateAttr(default=None)
    _warned: Any = PrivateAttr(default_factory=set)

    def __init__(self, *, manager: TriageManager | None = None, graph_store: Any = None, **data: Any) -> None:
        super().__init__(**data)
        self._manager = manager
        self._graph_store = graph_store

    @classmethod
    def class_name(cls) -> str:
        return "TriagePostprocessor"

    def _known_graph(self) -> Any:
        """The graph of the current query's retrieval (active instrumentation), or of ``graph_store``."""
        from triage_llamaindex.instrument import active_instrumentation

        active = active_instrumentation()
        store = self._graph_store
        if active is not None:
            if store is not None:
                return active.known_graph(store)
            qid = active.current_query_id()
            return active.query_graph(qid) if qid is not None else None
        if store is None:
            return None
        fingerprint = graph_fingerprint(store)
        cached = self._known
        if cached is None or cached[0] is None or cached[0] != fingerprint:
            cached = self._known = (fingerprint, build_known_graph(store))
        return cached[1]

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        if not self.reweight or not nodes:
            return nodes
        manager = _resolve_manager(self._manager)
        unit = manager.config.unit if self.unit == "auto" else self.unit
        query = query_bundle.query_str if query_bundle is not None else ""
        known = self._known_graph()
        by_line = known.by_line if known is not None else None
        out = None
        if unit == "triple":
            out = self._rank_triples(manager, query, nodes, by_line)
        if out is None and (unit == "chunk" or not _holds_triples(nodes, by_line)):
            unit = "chunk"
            out = self._rank_chunks(manager, query, nodes, known)
        if out is None:
            self._unanswered(manager, unit)
            return nodes
        return out

    def _rank_triples(
        self, manager: TriageManager, query: str, nodes: Sequence[NodeWithScore], by_line: Any
    ) -> list[NodeWithScore] | None:
        """Triplet lines ranked inside each node, nodes by their best line (``None``: no answer)."""
        parsed = [_node_lines(n, by_line) for n in nodes]
        ids = [t.id for _, lines in parsed for _, t in lines]
        relevance = [n.score for n, (_, lines) in zip(nodes, parsed, strict=True) for _ in lines]
        relevance = [DEFAULT_SCORE if r is None else r for r in relevance]
        if not ids:
            return None
        priorities = ask_priorities(manager, FRAMEWORK, query, "triple", ids, relevance, _current_query_id())
        if priorities is None:
            return None
        ranked: list[tuple[int, NodeWithScore, float]] = []
        it = iter(priorities)
        for i, (scored, (attached, lines)) in enumerate(zip(nodes, parsed, strict=True)):
            if not lines:
                continue
            prios = [next(it) for _ in lines]
            keep = [
                j for j in host_order(prios) if self.min_priority is None or prios[j] >= self.min_priority
            ]
            if not keep:
                continue
            node = scored.node
            if attached is not None:
                text = attached.render([lines[j][0] for j in keep])
                if text != node.get_content():
                    node = node.model_copy()
                    node.set_content(text)
            ranked.append((i, node, prios[keep[0]]))
        slots = [i for i, (_, lines) in enumerate(parsed) if lines]
        order = sorted(ranked, key=lambda r: -r[2])  # stable: ties keep LlamaIndex's order
        placed: dict[int, NodeWithScore] = {}
        for slot, (_, node, p) in zip(slots, order, strict=False):
            placed[slot] = NodeWithScore(node=node, score=p)
        out = []
        for i, scored in enumerate(nodes):
            if not parsed[i][1]:
                out.append(scored)  # holds no triplet: keeps its place
            elif i in placed:
                out.append(placed[i])
        return out[: self.top_n] if self.top_n is not None else out

    def _rank_chunks(
        self, manager: TriageManager, query: str, nodes: Sequence[NodeWithScore], known: Any
    ) -> list[NodeWithScore] | None:
        ids = [_shown_chunk_id(n, known) for n in nodes]
        ranked = rank_by_priority(
            manager, query, "chunk", ids, [n.score for n in nodes],
            top_n=self.top_n, min_priority=self.min_priority,
        )  # fmt: skip
        if ranked is None:
            return None
        return [NodeWithScore(node=nodes[i].node, score=p) for i, p in ranked]

    def _unanswered(self, manager: TriageManager, unit: str) -> None:
        config = manager.config
        if not config.reweight:
            cause = (
                "the manager's reweighting is off (instrument(..., reweight=True) or "
                "TriageConfig(reweight=True) turns the feedback learner on)"
            )
        elif config.unit != unit:
            cause = f"the feedback learner scores {config.unit}s, these nodes were ranked as {unit}s"
        else:
            cause = f"no plugin answered triage_rerank for unit {unit!r}"
        if cause not in self._warned:
            self._warned.add(cause)
            log.warning("TriagePostprocessor: nodes keep LlamaIndex's order: %s (logged once)", cause)


def _node_lines(
    scored: NodeWithScore, by_line: Mapping[str, Any] | None
) -> tuple[AttachedText | None, list[tuple[str, Any]]]:
    """A node's triplet lines: those of an ``include_text`` node, or the one of a triplet node."""
    text = scored.node.get_content()
    attached = split_attached(text, by_line)
    if attached is not None:
        return attached, list(attached.lines)
    stripped = text.strip()
    triples = parse_triples(stripped, by_line)
    if len(triples) == 1 and "\n" not in stripped:
        return None, [(stripped, triples[0])]
    return None, []


def _holds_triples(nodes: Sequence[NodeWithScore], by_line: Mapping[str, Any] | None) -> bool:
    return any(_node_lines(n, by_line)[1] for n in nodes)


def _shown_chunk_id(scored: NodeWithScore, known: Any) -> str:
    """The triage id of the chunk a node shows (as in the retrieval events; see the instrumentor)."""
    node = scored.node
    by_line = known.by_line if known is not None else None
    attached, lines = _node_lines(scored, by_line)
    if attached is not None:
        return chunk_key(node.node_id, attached.chunk)
    if lines:  # a triplet node: the chunk its triplet was extracted from
        sources = known.sources.get(lines[0][1].id, ()) if known is not None else ()
        return sources[0] if sources else node.ref_doc_id or node.node_id
    return chunk_key(node.node_id, node.get_content())


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
