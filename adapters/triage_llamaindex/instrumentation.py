"""Observe LlamaIndex through its instrumentation dispatcher (DESIGN §3, adapter).

:func:`instrument` adds one event handler and one span handler to the root dispatcher, the way
OpenInference's LlamaIndex instrumentor does (skips when already added; :meth:`Instrumentation.
uninstrument` removes exactly those two). The handlers translate, and hand events to the
:class:`~triage_plugins.runtime.manager.TriageManager`, which delivers them off the host's hot path:

========================================  =====================================================
LlamaIndex                                triage
========================================  =====================================================
``TriageExtractionTap`` chunk event        ``ExtractionEvent`` (+ token log-probabilities of the
  + ``LLMCompletionEndEvent`` /              chunk's completion, when the LLM returned them)
  ``LLMChatEndEvent``
property graph store triplets              ``GraphEvent`` (each relation's own
                                           ``triplet_source_id``), on first retrieval against
                                           a new or changed store, or :meth:`emit_graph`
``RetrievalEndEvent`` of the outermost     ``RetrievalEvent`` (+ ``manager.gate`` when
  retriever of a span tree                   ``config.gate``): triplets parsed back from the
                                           node texts; chunks = the chunks those triplets were
                                           extracted from (relation provenance), or the nodes
                                           themselves when they hold no triplet; no paths
                                           (LlamaIndex returns flat triplets)
``QueryEndEvent`` of the outermost query   ``GenerationEvent``
:meth:`Instrumentation.feedback`           ``FeedbackEvent``
========================================  =====================================================

Query ids: ``instrument_tags({"query_id": ...})`` when the caller sets it, otherwise the id of the
root span of the query's span tree (e.g. ``"RetrieverQueryEngine.query-<uuid>"``).

Private surface (llama-index-core 0.14.25): ``BasePGRetriever._graph_store`` (to find the graph a
retriever reads) and ``PGRetriever.sub_retrievers``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from llama_index.core.base.base_query_engine import BaseQueryEngine
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.event_handlers import BaseEventHandler
from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
from llama_index.core.instrumentation.events.query import QueryEndEvent
from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent
from llama_index.core.instrumentation.span import active_span_id
from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

from triage_llamaindex.extraction import ChunkExtracted, extracting_node_id
from triage_llamaindex.translate import (
    KnownGraph,
    build_known_graph,
    graph_fingerprint,
    parse_triples,
    triple_logprobs,
)
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    FeedbackEvent,
    GateDecision,
    GenerationEvent,
    GraphEvent,
    RetrievalEvent,
    Subgraph,
    Triple,
)

if TYPE_CHECKING:
    from triage_plugins.runtime.manager import TriageManager

__all__ = ["FRAMEWORK", "Instrumentation", "active_instrumentation", "instrument"]

log = logging.getLogger("triage.llamaindex")

FRAMEWORK = "llamaindex"
QUERY_ID_TAG = "query_id"
EXPANDED_NODES_NOTE = "LlamaIndex retrievers do not report how many graph nodes they expanded"
_PENDING_COMPLETIONS = 256  # completions with log-probabilities awaiting their chunk
_KEPT_COMPLETIONS = 4096  # completions attributed to a chunk by TriageLLMPathExtractor, awaiting the tap
SUPPORTED = "0.14."  # llama-index-core minor series the adapter was written and tested against
_KEPT_QUERIES = 1024  # per-query state kept for generation / gate lookups

_active: Instrumentation | None = None
_active_lock = threading.Lock()


def active_instrumentation() -> Instrumentation | None:
    """The instrumentation currently registered on the root dispatcher, if any."""
    return _active


# --------------------------------------------------------------------------- handlers


_MISSING = object()
_KINDS: dict[type, Any] = {}  # class -> span kind, so span_enter skips ABC isinstance checks


def _span_kind(instance: Any) -> str | None:
    if isinstance(instance, BaseRetriever):
        return "retriever"
    if isinstance(instance, BaseQueryEngine):
        return "query"
    return None


class _Span:
    __slots__ = ("parent", "kind", "started", "instance")

    def __init__(self, parent: str | None, kind: str | None, instance: Any) -> None:
        self.parent = parent
        self.kind = kind
        self.started = time.perf_counter() if kind is not None else 0.0
        self.instance = instance


def _attach(model: Any, name: str, value: Any) -> None:
    """Set a plain instance attribute on a pydantic model, outside its fields.

    Pydantic private attributes cost ~2.5 µs per read (``__getattr__``); these handlers read their
    state on every span and event, ~50 times per query, so the state lives in ``__dict__``.
    """
    object.__setattr__(model, name, value)


class _TriageSpanHandler(BaseSpanHandler[Any]):
    """Keeps the span tree (parent, kind, start time) of open spans; nothing else."""

    def __init__(self, owner: Instrumentation) -> None:
        super().__init__()
        _attach(self, "spans", {})
        _attach(self, "owner", owner)

    @classmethod
    def class_name(cls) -> str:
        return "TriageSpanHandler"

    def span_enter(
        self,
        id_: str,
        bound_args: Any,
        instance: Any = None,
        parent_id: str | None = None,
        tags: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        cls = type(instance)
        kind = _KINDS.get(cls, _MISSING)
        if kind is _MISSING:
            kind = _KINDS[cls] = _span_kind(instance)
        self.spans[id_] = _Span(parent_id, kind, instance if kind == "retriever" else None)

    def span_exit(
        self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kwargs: Any
    ) -> None:
        self.spans.pop(id_, None)

    def span_drop(
        self, id_: str, bound_args: Any, instance: Any = None, err: Any = None, **kwargs: Any
    ) -> None:
        self.spans.pop(id_, None)

    # abstract in BaseSpanHandler; unused because span_enter/exit/drop are overridden
    def new_span(self, *args: Any, **kwargs: Any) -> None:
        return None

    def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
        return None

    def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
        return None

    # -- tree queries

    def get(self, span_id: str | None) -> _Span | None:
        return self.spans.get(span_id) if span_id else None

    def has_ancestor(self, span_id: str, kind: str) -> bool:
        span = self.spans.get(span_id)
        parent = span.parent if span else None
        while parent is not None:
            above = self.spans.get(parent)
            if above is None:
                return False
            if above.kind == kind:
                return True
            parent = above.parent
        return False

    def root(self, span_id: str) -> str:
        current = span_id
        span = self.spans.get(current)
        while span is not None and span.parent is not None and span.parent in self.spans:
            current = span.parent
            span = self.spans[current]
        return current


class _TriageEventHandler(BaseEventHandler):
    """Routes the few LlamaIndex events the adapter reads to :class:`Instrumentation`."""

    def __init__(self, owner: Instrumentation) -> None:
        super().__init__()
        _attach(self, "owner", owner)

    @classmethod
    def class_name(cls) -> str:
        return "TriageEventHandler"

    def handle(self, event: Any, **kwargs: Any) -> None:
        route = _ROUTES.get(type(event))
        if route is None:
            return
        try:
            route(self.owner, event)
        except Exception as exc:  # noqa: BLE001 - instrumentation never breaks the host
            self.owner._on_error(type(event).__name__, exc)


# --------------------------------------------------------------------------- the handle


class Instrumentation:
    """The handle :func:`instrument` returns: handlers, manager and adapter state.

    :ivar manager: where events go (and ``rerank`` / ``gate`` are asked).
    :ivar decisions: query id -> the gate's decision for that query (most recent queries only).
    :ivar last_query_id: id of the most recent query seen (for :meth:`feedback`).
    """

    def __init__(self, manager: TriageManager) -> None:
        self.manager = manager
        self.decisions: OrderedDict[str, GateDecision] = OrderedDict()
        self.last_query_id: str | None = None
        self.errors = 0
        self._span_handler = _TriageSpanHandler(self)
        self._event_handler = _TriageEventHandler(self)
        self._installed = False
        self._reported: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        # extraction
        self._by_node: OrderedDict[str, tuple[str, Any]] = OrderedDict()
        self._pending: deque[tuple[str, str, Any, int]] = deque(maxlen=_PENDING_COMPLETIONS)
        self._tap_sources: dict[str, list[str]] = {}
        self._chunks: dict[str, Chunk] = {}
        # graphs, keyed by id(store); the store itself is kept to keep ids unambiguous
        self._graphs: dict[int, tuple[Any, KnownGraph]] = {}
        self._default_store: Any = None
        self._query_graph: OrderedDict[str, KnownGraph | None] = OrderedDict()

    # ------------------------------------------------------------------ lifecycle

    @property
    def installed(self) -> bool:
        return self._installed

    def install(self) -> None:
        """(Re-)add this instrumentation's two handlers, e.g. after :meth:`uninstrument` (idempotent).

        Adapter state (graph snapshots, extraction provenance) is kept across uninstrument/install.
        """
        global _active
        root = get_dispatcher()
        for handler in (*root.event_handlers, *root.span_handlers):
            owner = getattr(handler, "owner", None)
            if isinstance(handler, _TriageEventHandler | _TriageSpanHandler) and owner is not self:
                raise ConfigError("another triage instrumentation is installed: uninstrument() it first")
        if not any(h is self._span_handler for h in root.span_handlers):
            root.add_span_handler(self._span_handler)
        if not any(h is self._event_handler for h in root.event_handlers):
            root.add_event_handler(self._event_handler)
        self._installed = True
        with _active_lock:
            _active = self

    def uninstrument(self) -> None:
        """Remove exactly the two handlers this instrumentation added (idempotent)."""
        global _active
        root = get_dispatcher()
        root.event_handlers[:] = [h for h in root.event_handlers if h is not self._event_handler]
        root.span_handlers[:] = [h for h in root.span_handlers if h is not self._span_handler]
        self._installed = False
        with _active_lock:
            if _active is self:
                _active = None

    def _on_error(self, where: str, exc: BaseException) -> None:
        self.errors += 1
        key = (where, type(exc).__name__)
        if key not in self._reported:
            self._reported.add(key)
            log.warning(
                "triage handler for %s raised %s; skipped (host unaffected)", where, exc, exc_info=exc
            )

    # ------------------------------------------------------------------ public helpers

    def current_query_id(self) -> str | None:
        """Query id of the span tree the caller runs in (``None`` outside any span)."""
        from llama_index.core.instrumentation.dispatcher import active_instrument_tags

        tagged = active_instrument_tags.get().get(QUERY_ID_TAG)
        if tagged is not None:
            return str(tagged)
        span_id = active_span_id.get()
        return self._span_handler.root(span_id) if span_id else None

    def feedback(
        self, query_id: str, score: float, source: str = "human", raw: str | int | float | None = None
    ) -> FeedbackEvent:
        """Send a score in [0, 1] for an answered query (EvoRAG §4.1) as a ``FeedbackEvent``."""
        event = FeedbackEvent(FRAMEWORK, query_id, score, source, raw)  # type: ignore[arg-type]
        self.manager.emit_feedback(event)
        return event

    def emit_graph(self, index_or_store: Any) -> GraphEvent:
        """Snapshot a ``PropertyGraphIndex`` (or its property graph store) and emit ``GraphEvent``.

        The store also becomes the default graph for parsing retrievals whose retriever does not
        reveal its store.
        """
        store = _store_of(index_or_store)
        self._default_store = store
        known = self._refresh_graph(store, force=True)
        return self._graph_event(known)

    def persist_contributions(self, index_or_store: Any, key: str = "contribution") -> int:
        """Write the store's triple contribution scores into ``Relation.properties[key]``."""
        if self.manager.store is None:
            raise ConfigError("persist_contributions needs a manager with a store (instrument(store=...))")
        from triage_llamaindex.reweight import persist_contributions

        store = _store_of(index_or_store)
        scores = {tid: row.raw for tid, row in self.manager.store.get_scores("triple").items()}
        written = persist_contributions(store, scores, key=key)
        self._graphs.pop(id(store), None)  # renderings with properties changed
        return written

    def known_graph(self, index_or_store: Any) -> KnownGraph:
        """The adapter's current snapshot of a store (rebuilt when the store changed; no event)."""
        return self._refresh_graph(_store_of(index_or_store))

    # ------------------------------------------------------------------ graph state

    def _build_graph(self, store: Any) -> KnownGraph:
        known = build_known_graph(store, self._tap_sources)
        known.extra["store"] = store
        self._graphs[id(store)] = (store, known)
        # the in-memory store keeps its chunks beside the entities: read their texts once here,
        # not one store scan per query (other stores are read lazily, per missing chunk)
        nodes = getattr(getattr(store, "graph", None), "nodes", None)
        if isinstance(nodes, Mapping):
            missing = [n.id for n in nodes.values() if hasattr(n, "text") and n.id not in self._chunks]
            if missing:
                self._load_chunks(store, missing)
        return known

    def _refresh_graph(self, store: Any, *, force: bool = False) -> KnownGraph:
        cached = self._graphs.get(id(store))
        if not force and cached is not None and cached[0] is store:
            fp = cached[1].fingerprint
            if fp is None or fp == graph_fingerprint(store):
                return cached[1]
        return self._build_graph(store)

    def _graph_for_retriever(self, retriever: Any) -> KnownGraph | None:
        store = _retriever_store(retriever) or self._default_store
        if store is None:
            return None
        cached = self._graphs.get(id(store))
        known = self._refresh_graph(store)
        if cached is None or cached[1] is not known:
            self.manager.emit_graph(GraphEvent(FRAMEWORK, known.view))
        return known

    def _graph_event(self, known: KnownGraph) -> GraphEvent:
        event = GraphEvent(FRAMEWORK, known.view)
        self.manager.emit_graph(event)
        return event

    def _ground(self, known: KnownGraph | None, text: str) -> tuple[tuple[str, ...], dict[str, str | None]]:
        if known is None or not text:
            return (), {}
        if known.grounder is None:
            try:
                from triage_plugins.kg.grounding import shared_grounder
            except ImportError:
                return (), {}
            known.grounder = shared_grounder(known.view)
        result = known.grounder.ground(text)
        return tuple(result.mentions), dict(result.grounding)

    def _remember(self, query_id: str, known: KnownGraph | None) -> None:
        self.last_query_id = query_id
        self._query_graph[query_id] = known
        while len(self._query_graph) > _KEPT_QUERIES:
            self._query_graph.popitem(last=False)

    # ------------------------------------------------------------------ event routes

    def _on_completion(self, event: Any) -> None:
        response = event.response
        logprobs = getattr(response, "logprobs", None)
        if not logprobs:
            return
        if isinstance(event, LLMCompletionEndEvent):
            prompt, text = event.prompt, response.text
        else:
            prompt = "\n".join(str(m.content or "") for m in event.messages)
            text = response.message.content or ""
        node_id = extracting_node_id.get()
        with self._lock:
            if node_id is not None:
                self._by_node[node_id] = (text, logprobs)
                while len(self._by_node) > _KEPT_COMPLETIONS:  # no tap to collect them
                    self._by_node.popitem(last=False)
                return
            if self._pending and self._pending[-1][3] == id(response):
                return  # the same response re-announced by an outer span (acomplete -> complete)
            self._pending.append((prompt, text, logprobs, id(response)))

    def _completion_for(self, node_id: str, chunk_text: str) -> tuple[str, Any] | None:
        """The chunk's completion: exact (``TriageLLMPathExtractor``) or the prompt holding its text."""
        with self._lock:
            found = self._by_node.pop(node_id, None)
            if found is not None:
                return found
            for i, (prompt, text, logprobs, _) in enumerate(self._pending):
                if chunk_text and chunk_text in prompt:
                    del self._pending[i]
                    return (text, logprobs)
        return None

    def _on_chunk(self, event: ChunkExtracted) -> None:
        chunk = Chunk(event.node_id, event.doc_id, event.text)
        self._chunks[chunk.id] = chunk
        triples = [Triple.of(s, p, o, subject_type=st, object_type=ot) for s, p, o, st, ot in event.triples]
        unique: dict[str, Triple] = {}
        for t in triples:
            unique.setdefault(t.id, t)
            sources = self._tap_sources.setdefault(t.id, [])
            if chunk.id not in sources:
                sources.append(chunk.id)
        completion = self._completion_for(event.node_id, event.text)
        if completion is not None:
            lps = triple_logprobs(completion[0], completion[1], unique.values())
        else:
            lps = dict.fromkeys(unique)
        extracted = tuple(ExtractedTriple(t, lps.get(t.id)) for t in unique.values())
        self.manager.emit_extraction(ExtractionEvent(FRAMEWORK, event.run_id, chunk, extracted))

    def _on_retrieval(self, event: RetrievalEndEvent) -> None:
        spans = self._span_handler
        span = spans.get(event.span_id)
        if span is None or spans.has_ancestor(event.span_id, "retriever"):
            return  # unknown span, or a sub-retriever inside an outer retriever
        seconds = time.perf_counter() - span.started
        query_id = _tagged(event.tags) or spans.root(event.span_id)
        query = event.str_or_query_bundle
        query_str = query if isinstance(query, str) else query.query_str
        known = self._graph_for_retriever(span.instance)
        by_line = known.by_line if known is not None else None
        triples: dict[str, Triple] = {}
        for scored in event.nodes:
            for triple in parse_triples(scored.node.get_content(), by_line):
                triples.setdefault(triple.id, triple)
        mentions, grounding = self._ground(known, query_str)
        retrieval = RetrievalEvent(
            FRAMEWORK,
            query_id,
            query_str,
            mentions=mentions,
            grounding=grounding,
            subgraph=Subgraph(tuple(triples.values())),
            chunks=self._provenance_chunks(triples, known) if triples else _node_chunks(event.nodes),
            expanded_nodes=None,
            expanded_nodes_note=EXPANDED_NODES_NOTE,
            seconds=seconds,
            retriever=_retriever_name(span.instance),
        )
        self._remember(query_id, known)
        self.manager.emit_retrieval(retrieval)
        if self.manager.config.gate:
            decision = self.manager.gate(retrieval)
            self.decisions[query_id] = decision
            while len(self.decisions) > _KEPT_QUERIES:
                self.decisions.popitem(last=False)
            if decision.action != "proceed":
                log.info("triage gate: %s for query %s: %s", decision.action, query_id, decision.reason)

    def _provenance_chunks(
        self, triples: Mapping[str, Triple], known: KnownGraph | None
    ) -> tuple[Chunk, ...]:
        """Chunks each retrieved triple was extracted from, in rank order (relation provenance)."""
        if known is None:
            return ()
        ordered: dict[str, None] = {}
        for tid in triples:
            for chunk_id in known.sources.get(tid, ()):
                ordered.setdefault(chunk_id)
        ids = list(ordered)
        missing = [c for c in ids if c not in self._chunks]
        if missing:
            store = known.extra.get("store") or self._default_store
            self._load_chunks(store, missing)
        return tuple(self._chunks.get(c) or Chunk(c, c, "") for c in ids)

    def _load_chunks(self, store: Any, ids: list[str]) -> None:
        if store is None:
            return
        for node in store.get_llama_nodes(ids):
            self._chunks[node.node_id] = Chunk(
                node.node_id, node.ref_doc_id or node.node_id, node.get_content()
            )

    def _on_query_end(self, event: QueryEndEvent) -> None:
        spans = self._span_handler
        span = spans.get(event.span_id)
        if span is None or spans.has_ancestor(event.span_id, "query"):
            return
        answer = getattr(event.response, "response", None)
        if not isinstance(answer, str):
            log.debug("query %s: response has no text (streaming?); no generation event", event.span_id)
            return
        query_id = _tagged(event.tags) or spans.root(event.span_id)
        known = self._query_graph.get(query_id)
        mentions, grounding = self._ground(known, answer)
        self.last_query_id = query_id
        self.manager.emit_generation(
            GenerationEvent(
                FRAMEWORK,
                query_id,
                answer,
                answer_mentions=mentions,
                answer_grounding=grounding,
                seconds=time.perf_counter() - span.started,
            )
        )


_ROUTES = {
    ChunkExtracted: Instrumentation._on_chunk,
    LLMCompletionEndEvent: Instrumentation._on_completion,
    LLMChatEndEvent: Instrumentation._on_completion,
    RetrievalEndEvent: Instrumentation._on_retrieval,
    QueryEndEvent: Instrumentation._on_query_end,
}


# --------------------------------------------------------------------------- helpers


def _node_chunks(nodes: Any) -> tuple[Chunk, ...]:
    """A text retriever's nodes as chunks, in rank order (no graph to take provenance from)."""
    out: dict[str, Chunk] = {}
    for scored in nodes:
        node = scored.node
        out.setdefault(node.node_id, Chunk(node.node_id, node.ref_doc_id or node.node_id, node.get_content()))
    return tuple(out.values())


def _tagged(tags: Mapping[str, Any] | None) -> str | None:
    value = tags.get(QUERY_ID_TAG) if tags else None
    return None if value is None else str(value)


def _store_of(index_or_store: Any) -> Any:
    store = getattr(index_or_store, "property_graph_store", None)
    return store if store is not None else index_or_store


def _retriever_store(retriever: Any) -> Any:
    """The property graph store a (PG) retriever reads, via LlamaIndex's private ``_graph_store``."""
    store = getattr(retriever, "_graph_store", None)
    if store is not None:
        return store
    for sub in getattr(retriever, "sub_retrievers", None) or ():
        store = getattr(sub, "_graph_store", None)
        if store is not None:
            return store
    return None


def _retriever_name(retriever: Any) -> str:
    name = type(retriever).__name__ if retriever is not None else "default"
    subs = getattr(retriever, "sub_retrievers", None)
    if subs:
        name += "(" + "+".join(type(s).__name__ for s in subs) + ")"
    return name


def _check_version() -> None:
    from llama_index.core import __version__

    if not __version__.startswith(SUPPORTED):
        log.warning(
            "triage_llamaindex was tested with llama-index-core %sx, found %s: the private surfaces it "
            "reads (see the module docstrings) may have changed",
            SUPPORTED,
            __version__,
        )


# --------------------------------------------------------------------------- entry point


def instrument(*, store: Any = None, manager: TriageManager | None = None) -> Instrumentation:
    """Register the triage handlers on LlamaIndex's root dispatcher.

    :param store: a triage store (path, URL or ``Store``) for a new manager; ignored with ``manager``.
    :param manager: the manager to send events to (default: a new one on ``store``, or the
        process-wide :func:`~triage_plugins.runtime.manager.default_manager` when neither is given).
    :return: the :class:`Instrumentation`; when triage handlers are already registered, the
        existing one is returned unchanged (nothing is added twice).
    """
    with _active_lock:
        root = get_dispatcher()
        for handler in (*root.event_handlers, *root.span_handlers):
            owner = getattr(handler, "owner", None)
            if isinstance(handler, _TriageEventHandler | _TriageSpanHandler) and owner is not None:
                log.warning("LlamaIndex is already instrumented by triage; returning the existing handle")
                return owner
        _check_version()
        if manager is None:
            from triage_plugins.runtime.manager import TriageManager, default_manager

            manager = TriageManager(store=store) if store is not None else default_manager()
        inst = Instrumentation(manager)
    inst.install()
    return inst
