"""Observe LlamaIndex through its instrumentation dispatcher (DESIGN §3, adapter).

:class:`LlamaIndexInstrumentor` (the adapter's :class:`~triage_plugins.adapter_kit.Instrumentor`)
adds one event handler and one span handler to the root dispatcher, the way OpenInference's
LlamaIndex instrumentor does (skips when already added; ``uninstrument()`` removes exactly those
two). :func:`instrument` is the compatible shortcut. The handlers translate, and hand events to the
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
                                           node texts; chunks = what the engine shows, in rank
                                           order: the chunk an ``include_text`` node attaches,
                                           a chunk node itself, and for a triplet-only node the
                                           chunk its triplet was extracted from (relation
                                           provenance); no paths (LlamaIndex returns flat
                                           triplets)
``QueryEndEvent`` of the outermost query   ``GenerationEvent`` (a streaming response: when its
                                           stream has been read to the end)
``feedback(query_id, score)``              ``FeedbackEvent`` (with reweighting on: learned
                                           before it returns)
========================================  =====================================================

The node texts are read when the retrieval ends, on the host; the retrieval event is built, emitted
and gated on the manager's delivery worker (with a synchronous manager, at once), so the gate's
decision (``decisions``) is there after ``flush()``. Each outermost query or retrieval span marks the
host busy, so delivery runs between queries.

Chunk ids are :func:`~triage_llamaindex.translate.chunk_key`: LlamaIndex's generated UUIDs become
a hash of the chunk text (stable across rebuilds), ids the user set are kept. Provenance is scoped
per store: a graph snapshot lists only chunks held by that store.

Query ids: ``instrument_tags({"query_id": ...})`` when the caller sets it, else the id of the
enclosing ``inst.query()`` block, else the id of the root span of the query's span tree (e.g.
``"RetrieverQueryEngine.query-<uuid>"``).

Private surface (llama-index-core 0.14.25): ``BasePGRetriever._graph_store`` (to find the graph a
retriever reads) and ``PGRetriever.sub_retrievers``. LlamaIndex is imported only when the
instrumentor is instrumented (the handler classes are built then).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Collection, Mapping
from typing import Any, Unpack

from triage_llamaindex.answers import AnswersMixin
from triage_llamaindex.translate import (
    TRIPLET_SOURCE_KEY,
    KnownGraph,
    build_known_graph,
    chunk_key,
    chunk_of,
    graph_fingerprint,
    parse_triples,
    retriever_name,
    retriever_store,
    split_attached,
    store_of,
    store_triplets,
    triple_logprobs,
    triple_of,
)
from triage_plugins import (
    Chunk,
    ConfigError,
    ExtractedTriple,
    ExtractionEvent,
    GateDecision,
    GraphEvent,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.adapter_kit.instrumentor import InstrumentOptions, Instrumentor
from triage_plugins.adapter_kit.lru import LRU
from triage_plugins.adapter_kit.query_ids import current_query_id

__all__ = ["FRAMEWORK", "LlamaIndexInstrumentor", "active_instrumentation", "instrument"]

log = logging.getLogger("triage.llamaindex")

FRAMEWORK = "llamaindex"
QUERY_ID_TAG = "query_id"
EXPANDED_NODES_NOTE = "LlamaIndex retrievers do not report how many graph nodes they expanded"
PENDING_COMPLETIONS = 256  # completions with log-probabilities awaiting their chunk (by prompt)
KEPT_COMPLETIONS = 4096  # completions attributed to a chunk by TriageLLMPathExtractor, awaiting the tap
KEPT_QUERIES = 1024  # per-query state kept for generation / gate lookups

_Node = tuple[str, str, "str | None"]  # a retrieved node as read on the host: id, content, ref_doc_id

_active: LlamaIndexInstrumentor | None = None
_active_lock = threading.Lock()


def active_instrumentation() -> LlamaIndexInstrumentor | None:
    """The instrumentor currently registered on the root dispatcher, if any."""
    return _active


class LlamaIndexInstrumentor(AnswersMixin, Instrumentor):
    """Instrumentor of LlamaIndex's root dispatcher (see the module docstring and the kit's base).

    :ivar decisions: query id -> the gate's decision for that query (most recent queries only).
    :ivar unattributed: feedback this instrumentor could not tie to what it observed, per cause
        (each cause is logged once; the event is still sent).
    """

    framework = FRAMEWORK

    def __init__(self) -> None:
        super().__init__()
        self.decisions: LRU[str, GateDecision] = LRU(KEPT_QUERIES)
        self._span_handler: Any = None
        self._event_handler: Any = None
        self._lock = threading.Lock()
        # extraction
        self._by_node: LRU[str, tuple[str, Any]] = LRU(KEPT_COMPLETIONS)
        self._pending: deque[tuple[str, str, Any, int]] = deque(maxlen=PENDING_COMPLETIONS)
        self._tap_sources: dict[str, list[str]] = {}
        self._chunks: dict[str, Chunk] = {}
        # graphs, keyed by id(store); the store itself is kept to keep ids unambiguous
        self._graphs: dict[int, tuple[Any, KnownGraph]] = {}
        self._default_store: Any = None
        self._query_graph: LRU[str, KnownGraph | None] = LRU(KEPT_QUERIES)
        self._answered: LRU[str, bool] = LRU(KEPT_QUERIES)  # query id -> generation emitted
        self._streaming: LRU[str, bool] = LRU(KEPT_QUERIES)  # query ids whose stream is unread
        self.unattributed: Counter[str] = Counter()

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("llama-index-core >= 0.14, < 0.15",)

    # ------------------------------------------------------------------ lifecycle

    def _instrument(self, host: Any) -> None:
        """Add the two handlers to the root dispatcher (adapter state is kept across re-instrumenting)."""
        global _active
        from llama_index.core.instrumentation import get_dispatcher

        span_cls, event_cls = _handler_classes()
        root = get_dispatcher()
        for handler in (*root.event_handlers, *root.span_handlers):
            owner = getattr(handler, "owner", None)
            if isinstance(handler, event_cls | span_cls) and owner is not self:
                raise ConfigError("another triage instrumentation is installed: uninstrument() it first")
        if self._span_handler is None:
            self._span_handler, self._event_handler = span_cls(self), event_cls(self)
        span, event = self._span_handler, self._event_handler
        if not any(h is span for h in root.span_handlers):
            root.add_span_handler(span)
            self._on_uninstrument(lambda: _remove(root.span_handlers, span))
            self._on_uninstrument(span.release_all)
        if not any(h is event for h in root.event_handlers):
            root.add_event_handler(event)
            self._on_uninstrument(lambda: _remove(root.event_handlers, event))
        with _active_lock:
            _active = self
        self._on_uninstrument(self._deactivate)

    def _deactivate(self) -> None:
        global _active
        with _active_lock:
            if _active is self:
                _active = None

    @property
    def installed(self) -> bool:
        """Former name of :attr:`is_instrumented`."""
        return self.is_instrumented

    def install(self) -> LlamaIndexInstrumentor:
        """Former name of :meth:`instrument` (again, with the same manager)."""
        return self.instrument()

    # ------------------------------------------------------------------ public helpers

    def current_query_id(self) -> str | None:
        """Query id of the span tree the caller runs in (``None`` outside any span or query block)."""
        from llama_index.core.instrumentation.dispatcher import active_instrument_tags
        from llama_index.core.instrumentation.span import active_span_id

        tagged = active_instrument_tags.get().get(QUERY_ID_TAG)
        if tagged is not None:
            return str(tagged)
        current = current_query_id()
        if current is not None:
            return current
        span_id = active_span_id.get()
        return self._span_handler.root(span_id) if span_id and self._span_handler is not None else None

    def emit_graph(self, index_or_store: Any) -> GraphEvent:
        """Snapshot a ``PropertyGraphIndex`` (or its property graph store) and emit ``GraphEvent``.

        The store also becomes the default graph for parsing retrievals whose retriever does not
        reveal its store.
        """
        store = store_of(index_or_store)
        self._default_store = store
        known = self._refresh_graph(store, force=True)
        event = GraphEvent(FRAMEWORK, known.view)
        self.manager.emit_graph(event)
        return event

    def persist_contributions(self, index_or_store: Any, key: str = "contribution") -> int:
        """Write the learned triple contribution scores into ``Relation.properties[key]``."""
        from triage_llamaindex.reweight import persist_contributions

        store = store_of(index_or_store)
        written = persist_contributions(store, self.manager.learned_scores("triple"), key=key)
        self._graphs.pop(id(store), None)  # renderings with properties changed
        return written

    def known_graph(self, index_or_store: Any) -> KnownGraph:
        """The adapter's current snapshot of a store (rebuilt when the store changed; no event)."""
        return self._refresh_graph(store_of(index_or_store))

    def query_graph(self, query_id: str) -> KnownGraph | None:
        """The graph snapshot the retrieval of ``query_id`` was read against (recent queries only)."""
        return self._query_graph.get(query_id)

    # ------------------------------------------------------------------ graph state

    def _build_graph(self, store: Any) -> KnownGraph:
        """Snapshot ``store``, its chunks read from the store itself (never another index's).

        The in-memory store keeps its chunks beside the entities: all are read once here, not one
        store scan per query; other stores are asked, in one call, for the chunks the triplets name.
        """
        triplets = store_triplets(store)
        nodes = getattr(getattr(store, "graph", None), "nodes", None)
        if isinstance(nodes, Mapping):
            wanted = [n.id for n in nodes.values() if hasattr(n, "text")]
        else:
            named: dict[str, None] = {}
            for triplet in triplets:
                own = triplet[1].properties.get(TRIPLET_SOURCE_KEY)
                if isinstance(own, str) and own:
                    named.setdefault(own)
                for node_id in self._tap_sources.get(triple_of(*triplet).id, ()):
                    named.setdefault(node_id)
            wanted = list(named)
        chunks = self._read_chunks(store, wanted)  # LlamaIndex node id -> triage chunk

        def key_of(node_id: str) -> str:
            found = chunks.get(node_id) or self._chunks.get(node_id)
            return found.id if found is not None else node_id

        known = build_known_graph(
            store, self._tap_sources, key_of=key_of, present=chunks.__contains__, triplets=triplets
        )
        known.extra["store"] = store
        known.extra["by_key"] = {c.id: c for c in chunks.values()}
        self._graphs[id(store)] = (store, known)
        return known

    def _refresh_graph(self, store: Any, *, force: bool = False) -> KnownGraph:
        cached = self._graphs.get(id(store))
        if not force and cached is not None and cached[0] is store:
            fp = cached[1].fingerprint
            if fp is None or fp == graph_fingerprint(store):
                return cached[1]
        return self._build_graph(store)

    def _graph_for_retriever(self, retriever: Any) -> KnownGraph | None:
        store = retriever_store(retriever) or self._default_store
        if store is None:
            return None
        cached = self._graphs.get(id(store))
        known = self._refresh_graph(store)
        if cached is None or cached[1] is not known:
            self.manager.emit_graph(GraphEvent(FRAMEWORK, known.view))
        return known

    def _ground(
        self, known: KnownGraph | None, text: str, *, answer: bool = False
    ) -> tuple[tuple[str, ...], dict[str, str | None]]:
        if known is None or not text:
            return (), {}
        if known.grounder is None:
            from triage_plugins.adapter_kit import shared_grounder

            known.grounder = shared_grounder(known.view)
        result = known.grounder.ground_answer(text) if answer else known.grounder.ground(text)
        return tuple(result.mentions), dict(result.grounding)

    @staticmethod
    def _read_chunks(store: Any, ids: list[str]) -> dict[str, Chunk]:
        """The store's chunks with these LlamaIndex node ids, as triage chunks (:func:`chunk_key` ids)."""
        if store is None or not ids:
            return {}
        out = {}
        for node in store.get_llama_nodes(ids):
            text = node.get_content()
            out[node.node_id] = Chunk(chunk_key(node.node_id, text), node.ref_doc_id or node.node_id, text)
        return out

    def _provenance_chunks(self, triples: Any, known: KnownGraph | None) -> list[Chunk]:
        """Chunks each triple was extracted from, in rank order (relation provenance)."""
        if known is None:
            return []
        by_key: Mapping[str, Chunk] = known.extra.get("by_key", {})
        ordered: dict[str, None] = {}
        for tid in triples:
            for chunk_id in known.sources.get(tid, ()):
                ordered.setdefault(chunk_id)
        return [by_key.get(c) or Chunk(c, c, "") for c in ordered]

    def _shown_chunks(self, nodes: list[_Node], known: KnownGraph | None) -> tuple[Chunk, ...]:
        """The chunks the engine shows for ``nodes``, in rank order (see the module docstring)."""
        by_line = known.by_line if known is not None else None
        out: dict[str, Chunk] = {}
        for node_id, text, doc_id in nodes:
            attached = split_attached(text, by_line)
            triples = [] if attached is not None else parse_triples(text, by_line)
            if triples:  # a triplet-only node: no chunk is shown, its triplet's source is the chunk
                for chunk in self._provenance_chunks([t.id for t in triples], known):
                    out.setdefault(chunk.id, chunk)
                continue
            body = attached.chunk if attached is not None else text
            chunk = chunk_of(chunk_key(node_id, body), doc_id or node_id, body)
            out.setdefault(chunk.id, chunk)
        return tuple(out.values())

    # ------------------------------------------------------------------ event routes

    def _on_completion(self, event: Any) -> None:
        from llama_index.core.instrumentation.events.llm import LLMCompletionEndEvent

        from triage_llamaindex.extraction import extracting_node_id

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
        if node_id is not None:
            self._by_node.put(node_id, (text, logprobs))  # bounded: no tap may collect them
            return
        with self._lock:
            if self._pending and self._pending[-1][3] == id(response):
                return  # the same response re-announced by an outer span (acomplete -> complete)
            self._pending.append((prompt, text, logprobs, id(response)))

    def _completion_for(self, node_id: str, chunk_text: str) -> tuple[str, Any] | None:
        """The chunk's completion: exact (``TriageLLMPathExtractor``) or the prompt holding its text."""
        found = self._by_node.pop(node_id)
        if found is not None:
            return found
        with self._lock:
            for i, (prompt, text, logprobs, _) in enumerate(self._pending):
                if chunk_text and chunk_text in prompt:
                    del self._pending[i]
                    return (text, logprobs)
        return None

    def _on_chunk(self, event: Any) -> None:
        chunk = Chunk(chunk_key(event.node_id, event.text), event.doc_id, event.text)
        self._chunks[event.node_id] = chunk
        unique: dict[str, Triple] = {}
        for s, p, o, st, ot in event.triples:
            t = Triple.of(s, p, o, subject_type=st, object_type=ot)
            unique.setdefault(t.id, t)
            sources = self._tap_sources.setdefault(t.id, [])  # LlamaIndex node ids
            if event.node_id not in sources:
                sources.append(event.node_id)
        completion = self._completion_for(event.node_id, event.text)
        if completion is not None:
            lps = triple_logprobs(completion[0], completion[1], unique.values())
        else:
            lps = dict.fromkeys(unique)
        extracted = tuple(ExtractedTriple(t, lps.get(t.id)) for t in unique.values())
        self.manager.emit_extraction(ExtractionEvent(FRAMEWORK, event.run_id, chunk, extracted))

    def _on_retrieval(self, event: Any) -> None:
        """The outermost retrieval of a query: what the event needs is read here, on the host (the
        node texts as they are now: a postprocessor may rewrite them later); the event is built,
        emitted and gated on the delivery worker."""
        spans = self._span_handler
        span = spans.get(event.span_id)
        if span is None or spans.has_ancestor(event.span_id, "retriever"):
            return  # unknown span, or a sub-retriever inside an outer retriever
        seconds = time.perf_counter() - span.started
        query_id = self._query_id_of(event)
        query = event.str_or_query_bundle
        query_str = query if isinstance(query, str) else query.query_str
        known = self._graph_for_retriever(span.instance)
        nodes = [(s.node.node_id, s.node.get_content(), s.node.ref_doc_id) for s in event.nodes]
        self.last_query_id = query_id
        self._query_graph.put(query_id, known)
        self._answered.put(query_id, False)
        retriever = retriever_name(span.instance)
        self._defer(
            "retrieval event", self._emit_retrieval, query_id, query_str, known, nodes, seconds, retriever
        )

    def _emit_retrieval(
        self,
        query_id: str,
        query_str: str,
        known: KnownGraph | None,
        nodes: list[_Node],
        seconds: float,
        retriever: str,
    ) -> None:
        """Build, emit and (with ``config.gate``) gate the retrieval event; runs on the worker."""
        by_line = known.by_line if known is not None else None
        triples: dict[str, Triple] = {}
        for _, text, _ in nodes:
            for triple in parse_triples(text, by_line):
                triples.setdefault(triple.id, triple)
        mentions, grounding = self._ground(known, query_str)
        retrieval = RetrievalEvent(
            FRAMEWORK,
            query_id,
            query_str,
            mentions=mentions,
            grounding=grounding,
            subgraph=Subgraph(tuple(triples.values())),
            chunks=self._shown_chunks(nodes, known),
            expanded_nodes=None,
            expanded_nodes_note=EXPANDED_NODES_NOTE,
            seconds=seconds,
            retriever=retriever,
        )
        self.manager.emit_retrieval(retrieval)
        if self.manager.config.gate:
            decision = self.manager.gate(retrieval)
            self.decisions.put(query_id, decision)
            if decision.action != "proceed":
                log.info("triage gate: %s for query %s: %s", decision.action, query_id, decision.reason)

    def _on_query_end(self, event: Any) -> None:
        spans = self._span_handler
        span = spans.get(event.span_id)
        if span is None or spans.has_ancestor(event.span_id, "query"):
            return
        query_id = self._query_id_of(event)
        self.last_query_id = query_id
        response = event.response
        answer = getattr(response, "response", None)
        if isinstance(answer, str):
            self._emit_generation(query_id, answer, span.started)
            return
        if self._follow_stream(response, query_id, span.started):
            return
        log.debug("query %s: response %s has no text; no generation event", query_id, type(response).__name__)

    def _query_id_of(self, event: Any) -> str:
        tags = event.tags
        tagged = tags.get(QUERY_ID_TAG) if tags else None
        if tagged is not None:
            return str(tagged)
        return current_query_id() or self._span_handler.root(event.span_id)


# --------------------------------------------------------------------------- the dispatcher handlers


def _remove(handlers: list[Any], handler: Any) -> None:
    handlers[:] = [h for h in handlers if h is not handler]


def _attach(model: Any, name: str, value: Any) -> None:
    """Set a plain instance attribute on a pydantic model, outside its fields.

    Pydantic private attributes cost ~2.5 µs per read (``__getattr__``); these handlers read their
    state on every span and event, ~50 times per query, so the state lives in ``__dict__``.
    """
    object.__setattr__(model, name, value)


class _Span:
    __slots__ = ("busy", "instance", "kind", "parent", "started")

    def __init__(self, parent: str | None, kind: str | None, instance: Any) -> None:
        self.parent = parent
        self.kind = kind
        self.started = time.perf_counter() if kind is not None else 0.0
        self.instance = instance
        self.busy: contextlib.AbstractContextManager[None] | None = None  # the host-busy mark it holds

    def release(self) -> None:
        busy, self.busy = self.busy, None
        if busy is not None:
            busy.__exit__(None, None, None)


_HANDLERS: tuple[type, type] | None = None
_ROUTES: dict[type, Any] = {}  # LlamaIndex event class -> LlamaIndexInstrumentor method (filled lazily)


def _routes() -> dict[type, Any]:
    """The LlamaIndex events the adapter reads, each with the instrumentor method that handles it."""
    if not _ROUTES:
        from llama_index.core.instrumentation.events.llm import LLMChatEndEvent, LLMCompletionEndEvent
        from llama_index.core.instrumentation.events.query import QueryEndEvent
        from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent

        from triage_llamaindex.extraction import ChunkExtracted

        _ROUTES.update(
            {
                ChunkExtracted: LlamaIndexInstrumentor._on_chunk,
                LLMCompletionEndEvent: LlamaIndexInstrumentor._on_completion,
                LLMChatEndEvent: LlamaIndexInstrumentor._on_completion,
                RetrievalEndEvent: LlamaIndexInstrumentor._on_retrieval,
                QueryEndEvent: LlamaIndexInstrumentor._on_query_end,
            }
        )
    return _ROUTES


def _handler_classes() -> tuple[type, type]:
    """The span and event handler classes (built on first use: they subclass LlamaIndex's)."""
    global _HANDLERS
    if _HANDLERS is None:
        _HANDLERS = (_span_handler_class(), _event_handler_class())
    return _HANDLERS


def _span_kinds() -> Any:
    """``kind_of(instance)``: ``"retriever"``, ``"query"`` or ``None``, cached per class (no ABC checks
    on every span)."""
    from llama_index.core.base.base_query_engine import BaseQueryEngine
    from llama_index.core.base.base_retriever import BaseRetriever

    kinds: dict[type, str | None] = {}

    def kind_of(instance: Any) -> str | None:
        cls = type(instance)
        if cls not in kinds:
            if isinstance(instance, BaseRetriever):
                kinds[cls] = "retriever"
            else:
                kinds[cls] = "query" if isinstance(instance, BaseQueryEngine) else None
        return kinds[cls]

    return kind_of


def _span_handler_class() -> type:
    from llama_index.core.instrumentation.span_handlers import BaseSpanHandler

    kind_of = _span_kinds()

    class TriageSpanHandler(BaseSpanHandler[Any]):
        """Keeps the span tree (parent, kind, start time) of open spans; nothing else."""

        def __init__(self, owner: LlamaIndexInstrumentor) -> None:
            super().__init__()
            _attach(self, "spans", {})
            _attach(self, "owner", owner)

        @classmethod
        def class_name(cls) -> str:
            return "TriageSpanHandler"

        def span_enter(self, id_: str, bound_args: Any, instance: Any = None, parent_id: str | None = None,
                       tags: dict[str, Any] | None = None, **kwargs: Any) -> None:  # fmt: skip
            kind = kind_of(instance)
            span = self.spans[id_] = _Span(parent_id, kind, instance if kind == "retriever" else None)
            if kind is not None and (parent_id is None or parent_id not in self.spans):
                span.busy = self.owner._host_busy()  # an outermost query or retrieval: host busy
                span.busy.__enter__()

        def span_exit(
            self, id_: str, bound_args: Any, instance: Any = None, result: Any = None, **kw: Any
        ) -> None:
            span = self.spans.pop(id_, None)
            if span is not None:
                span.release()

        def span_drop(
            self, id_: str, bound_args: Any, instance: Any = None, err: Any = None, **kw: Any
        ) -> None:
            span = self.spans.pop(id_, None)
            if span is not None:
                span.release()

        def release_all(self) -> None:
            """Drop every host-busy mark still held (the instrumentor is going away)."""
            for span in list(self.spans.values()):
                span.release()

        # abstract in BaseSpanHandler; unused because span_enter/exit/drop are overridden
        def new_span(self, *args: Any, **kwargs: Any) -> None:
            return None

        def prepare_to_exit_span(self, *args: Any, **kwargs: Any) -> None:
            return None

        def prepare_to_drop_span(self, *args: Any, **kwargs: Any) -> None:
            return None

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

    return TriageSpanHandler


def _event_handler_class() -> type:
    from llama_index.core.instrumentation.event_handlers import BaseEventHandler

    class TriageEventHandler(BaseEventHandler):
        """Routes the few LlamaIndex events the adapter reads to its instrumentor."""

        def __init__(self, owner: LlamaIndexInstrumentor) -> None:
            super().__init__()
            _attach(self, "owner", owner)
            _attach(self, "routes", _routes())

        @classmethod
        def class_name(cls) -> str:
            return "TriageEventHandler"

        def handle(self, event: Any, **kwargs: Any) -> None:
            route = self.routes.get(type(event))
            if route is None:
                return
            try:
                route(self.owner, event)
            except Exception as exc:  # noqa: BLE001 - instrumentation never breaks the host
                self.owner._failed(f"handling {type(event).__name__}", exc)

    return TriageEventHandler


# --------------------------------------------------------------------------- entry point


def instrument(**options: Unpack[InstrumentOptions]) -> LlamaIndexInstrumentor:
    """Register the triage handlers on LlamaIndex's root dispatcher; returns the instrumentor.

    When triage handlers are already registered, the existing instrumentor is returned unchanged
    (nothing is added twice). ``options`` are those of
    :meth:`~triage_plugins.adapter_kit.Instrumentor.instrument` (its manager policy: a ``manager``
    passed in is used as is and never closed; without one, an owned manager over ``store``).
    """
    with _active_lock:
        existing = _active
    if existing is not None and existing.is_instrumented:
        log.warning("LlamaIndex is already instrumented by triage; returning the existing instrumentor")
        return existing
    return LlamaIndexInstrumentor().instrument(**options)
