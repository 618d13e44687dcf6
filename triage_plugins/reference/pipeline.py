"""The built-in reference KG-RAG pipeline: it emits every event through the hooks (DESIGN §5).

extraction per chunk → graph → retrieval → gate → generation → feedback, with the retrievers of
:mod:`triage_plugins.reference.retrievers`, the default grounder and an extractive reader. It is the
embedded default behind ``triage demo`` and ``triage probe``, and a worked example of an adapter:
everything it measures or learns comes from the shared default plugins, through the manager.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    FeedbackEvent,
    GateDecision,
    GenerationEvent,
    Gold,
    GraphEvent,
    Path,
    RerankRequest,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView, normalize_label
from triage_plugins.reference.retrievers import (
    RETRIEVERS,
    RelevanceIndex,
    Retrieved,
    beam_expand,
    krag_retrieve,
    path_retrieve,
)

if TYPE_CHECKING:
    from triage_plugins.kg.ontology import Ontology
    from triage_plugins.runtime.manager import TriageManager

__all__ = ["Answer", "ReferencePipeline", "canonical_graph"]

log = logging.getLogger("triage.reference")

FRAMEWORK = "reference"


class Reader(Protocol):
    def answer(
        self, question: str, paths: Sequence[Sequence[Triple]], topic_entities: Sequence[str] = ()
    ) -> Any: ...


@dataclass(frozen=True)
class Answer:
    """One answered query."""

    query_id: str
    question: str
    text: str
    entity: str | None
    retrieval: RetrievalEvent
    decision: GateDecision
    generation: GenerationEvent


def canonical_graph(
    extracted: Iterable[tuple[str, Sequence[ExtractedTriple]]],
    *,
    aliases: Mapping[str, str] | None = None,
) -> tuple[GraphView, dict[str, str]]:
    """Assemble the graph from extracted triples: surface forms that normalize alike become one node.

    Only exact normalized matches (and the explicit ``aliases``) are merged — an alias the
    pipeline does not know ("Chris Nolan" for "Christopher Nolan") stays a separate node, which
    is exactly what TRIAGE's CSR_link and RRS are meant to catch. Returns the view and the
    surface-form -> node-id map. Triple ids are ``subject|predicate|object`` over node ids.
    """
    canon: dict[str, str] = {}
    surface_of: dict[str, str] = {}
    alias_map = {normalize_label(k): v for k, v in (aliases or {}).items()}

    def node(surface: str) -> str:
        key = normalize_label(surface)
        if key in alias_map:
            return alias_map[key]
        if key not in canon:
            canon[key] = surface
        surface_of[surface] = canon[key]
        return canon[key]

    triples: dict[str, Triple] = {}
    sources: dict[str, list[str]] = {}
    for chunk_id, ets in extracted:
        for et in ets:
            t = et.triple
            s, o = node(t.subject), node(t.object)
            tid = f"{s}|{t.predicate}|{o}"
            triples.setdefault(tid, Triple(tid, s, t.predicate, o, t.subject_type, t.object_type))
            if chunk_id not in sources.setdefault(tid, []):
                sources[tid].append(chunk_id)
    return GraphView(triples.values(), sources=sources), surface_of


class ReferencePipeline:
    """A KG-RAG pipeline over a :class:`GraphView`, instrumented end to end.

    :param manager: where events go and where gate / rerank answers come from.
    :param graph: the knowledge graph (or build one with :meth:`index_chunks`).
    :param embedder: object with ``embed(texts) -> ndarray`` (default: the offline hashing embedder).
    :param reader: object with ``answer(question, paths, topic_entities)`` (default: the offline
        extractive reader over the graph's relations).
    :param retriever: default retriever name, one of :data:`RETRIEVERS`.
    :param options: retriever settings (``hops``, ``beam``, ``n_seeds``, ``paths_per_seed``,
        ``per_length`` and ``walks`` for ``krag``, ``top_k`` for the ``light-*`` seeds,
        ``path_top_k``).
    """

    framework = FRAMEWORK

    def __init__(
        self,
        manager: TriageManager,
        graph: GraphView | None = None,
        *,
        embedder: Any = None,
        reader: Reader | None = None,
        retriever: str = "krag",
        aliases: Mapping[str, str | None] | None = None,
        ontology: Ontology | None = None,
        emit_graph: bool = True,
        **options: Any,
    ) -> None:
        if retriever not in RETRIEVERS:
            raise ConfigError(f"unknown retriever {retriever!r}; choose one of {', '.join(RETRIEVERS)}")
        self.manager = manager
        self.retriever = retriever
        self.options = {
            "hops": 2,
            "beam": 16,
            "n_seeds": 10,
            "paths_per_seed": 10,
            "per_length": False,
            "walks": False,
            "top_k": 5,
            "path_top_k": 10,
        }
        unknown = set(options) - set(self.options)
        if unknown:
            raise ConfigError(f"unknown pipeline option(s): {', '.join(sorted(unknown))}")
        self.options.update(options)
        if embedder is None:
            from triage_plugins.offline.embedder import HashingEmbedder

            embedder = HashingEmbedder()
        self.embedder = embedder
        self._reader = reader
        self._ids = itertools.count(1)
        self.graph: GraphView = GraphView([])
        self.aliases: dict[str, str | None] = {}
        self.ontology: Ontology | None = None
        if graph is not None:
            self.set_graph(graph, aliases=aliases, ontology=ontology, emit=emit_graph)

    # ------------------------------------------------------------------ graph

    def set_graph(
        self,
        graph: GraphView,
        *,
        aliases: Mapping[str, str | None] | None = None,
        ontology: Ontology | None = None,
        emit: bool = True,
    ) -> None:
        """Use ``graph`` from now on (and announce it with ``triage_graph``)."""
        from triage_plugins.kg.grounding import shared_grounder

        self.graph = graph
        self.aliases = dict(aliases or {})
        if ontology is not None:
            self.ontology = ontology
        self.relevance = RelevanceIndex(graph, self.embedder)
        self.grounder = shared_grounder(graph, self.aliases)
        if self._reader is None or getattr(self, "_default_reader", False):
            from triage_plugins.offline.reader import ExtractiveReader

            self._reader = ExtractiveReader(sorted({t.predicate for t in graph.triples}))
            self._default_reader = True
        if emit:
            self.manager.emit_graph(GraphEvent(FRAMEWORK, graph, self.aliases, self.ontology))

    def add_triples(self, triples: Sequence[Triple]) -> None:
        """Add triples (for example EvoRAG shortcut edges) and re-announce the graph."""
        merged = list(self.graph.triples) + [t for t in triples if not self.graph.has_triple(t.id)]
        nodes = list(self.graph.nodes)
        labels = dict(self.graph.labels)
        sources = {k: list(v) for k, v in self.graph.sources.items()}
        self.set_graph(GraphView(merged, nodes, labels, sources), aliases=self.aliases)

    def index_chunks(
        self,
        chunks: Sequence[Chunk],
        extract: Callable[[Chunk], Sequence[ExtractedTriple]],
        *,
        run_id: str = "run-1",
        model: str | None = "offline-rule-extractor",
        aliases: Mapping[str, str] | None = None,
        ontology: Ontology | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> GraphView:
        """Extract every chunk (one ``triage_extraction`` each), assemble and announce the graph."""
        extracted: list[tuple[str, Sequence[ExtractedTriple]]] = []
        for chunk in chunks:
            ets = list(extract(chunk))
            self.manager.emit_extraction(ExtractionEvent(FRAMEWORK, run_id, chunk, tuple(ets), model, 0.0))
            extracted.append((chunk.id, ets))
            if progress is not None:
                progress(1)
        graph, _ = canonical_graph(extracted, aliases=aliases)
        self.set_graph(graph, aliases=dict(aliases or {}), ontology=ontology)
        return graph

    # ------------------------------------------------------------------ queries

    def _priority(
        self, question: str, query_id: str
    ) -> Callable[[list[str], list[float]], list[float] | None]:
        def ask(ids: list[str], relevance: list[float]) -> list[float] | None:
            if not ids:
                return None
            request = RerankRequest(FRAMEWORK, question, "triple", tuple(ids), tuple(relevance), query_id)
            return self.manager.rerank(request)

        return ask

    def _run_retriever(
        self, name: str, question: str, query_id: str, grounded: list[str], gold: Gold | None, wide: bool
    ) -> Retrieved:
        o = dict(self.options)
        if wide:
            o["beam"] *= 2
            o["paths_per_seed"] *= 2
            o["top_k"] *= 2
            o["path_top_k"] *= 2
        g, rel = self.graph, self.relevance
        if name == "gold-entity":
            seeds = list(gold.entities) if gold is not None else []
            return beam_expand(g, rel, question, seeds, hops=o["hops"], beam=o["beam"])
        if name == "extracted-entity":
            return beam_expand(g, rel, question, grounded, hops=o["hops"], beam=o["beam"])
        if name == "light-entity":
            seeds = rel.query(question).top_nodes(o["top_k"])
            return beam_expand(g, rel, question, seeds, hops=o["hops"], beam=o["beam"])
        if name == "light-relation":
            tops = rel.query(question).top_triples(o["top_k"])
            seeds = list(dict.fromkeys(n for i in tops for n in (g.triples[i].subject, g.triples[i].object)))
            return beam_expand(g, rel, question, seeds, hops=o["hops"], beam=o["beam"])
        if name == "path":
            return path_retrieve(g, rel, question, grounded, top_k=o["path_top_k"], max_hops=o["hops"] + 2)
        return krag_retrieve(
            g,
            rel,
            question,
            grounded,
            n_seeds=o["n_seeds"],
            hops=o["hops"],
            paths_per_seed=o["paths_per_seed"],
            per_length=o["per_length"],
            walks=o["walks"],
            priority=self._priority(question, query_id),
        )

    def retrieve(
        self,
        question: str,
        *,
        query_id: str | None = None,
        retriever: str | None = None,
        gold: Gold | None = None,
        wide: bool = False,
    ) -> RetrievalEvent:
        """Retrieve for ``question`` and build (but do not emit) its :class:`RetrievalEvent`."""
        name = retriever or self.retriever
        if name not in RETRIEVERS:
            raise ConfigError(f"unknown retriever {name!r}; choose one of {', '.join(RETRIEVERS)}")
        query_id = query_id or f"q{next(self._ids)}"
        started = time.perf_counter()
        grounding = self.grounder.ground(question)
        grounded = [n for n in grounding.grounding.values() if n is not None]
        found = self._run_retriever(name, question, query_id, grounded, gold, wide)
        seconds = time.perf_counter() - started
        return RetrievalEvent(
            framework=FRAMEWORK,
            query_id=query_id,
            query=question,
            mentions=grounding.mentions,
            grounding=grounding.grounding,
            subgraph=Subgraph(found.triples, found.nodes),
            paths=tuple(Path(p, s) for p, s in zip(found.paths, found.path_scores, strict=True)),
            expanded_nodes=found.expanded_nodes,
            seconds=seconds,
            retriever=name,
            gold=gold,
        )

    def ask(
        self,
        question: str,
        *,
        query_id: str | None = None,
        retriever: str | None = None,
        gold: Gold | None = None,
    ) -> Answer:
        """Retrieve, gate, read and announce each step; a ``reroute`` retries once, wider."""
        event = self.retrieve(question, query_id=query_id, retriever=retriever, gold=gold)
        decision = self.manager.gate(event)
        if decision.action == "reroute":
            # Reroute = one more retrieval with beam, paths per seed and top-k doubled.
            event = self.retrieve(
                question, query_id=event.query_id, retriever=retriever, gold=gold, wide=True
            )
        self.manager.emit_retrieval(event)
        started = time.perf_counter()
        paths = [[event.subgraph.triples[i] for i in idx] for idx in self._path_positions(event)]
        topic = [n for n in event.grounding.values() if n is not None]
        result = self._reader.answer(question, paths, topic)  # type: ignore[union-attr]
        text = getattr(result, "text", "") or ""
        entity = getattr(result, "entity", None)
        mentions: tuple[str, ...] = ()
        grounding: dict[str, str | None] = {}
        if entity:
            mentions = (text,) if text.strip() else ()
            grounding = {text: entity} if mentions else {}
        generation = GenerationEvent(
            FRAMEWORK,
            event.query_id,
            text,
            mentions,
            grounding,
            None,
            time.perf_counter() - started,
        )
        self.manager.emit_generation(generation)
        return Answer(event.query_id, question, text, entity, event, decision, generation)

    @staticmethod
    def _path_positions(event: RetrievalEvent) -> list[list[int]]:
        pos = {t.id: i for i, t in enumerate(event.subgraph.triples)}
        return [[pos[t] for t in p.triple_ids] for p in event.paths]

    def feedback(self, query_id: str, score: float, *, source: str = "human", raw: Any = None) -> None:
        """Announce a score in [0, 1] for an answered query."""
        self.manager.emit_feedback(FeedbackEvent(FRAMEWORK, query_id, score, source, raw))  # type: ignore[arg-type]
