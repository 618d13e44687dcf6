"""Drop-in instrumentation of one LightRAG 1.5.7 instance (DESIGN §2–3; docs/lightrag.md).

:class:`LightRAGInstrumentor` is the adapter's :class:`~triage_plugins.adapter_kit.Instrumentor`;
:func:`instrument` (``from triage_lightrag import instrument``) is the compatible shortcut. It wraps
**instance attributes only** — never LightRAG's modules or classes — and ``uninstrument()``
restores each of them:

============================================  ================================================
wrapped attribute                             why
============================================  ================================================
``rag.ainsert``                               extraction events per chunk + a graph event
``rag.aquery_data``                           retrieval event (every mode)
``rag.aquery_llm``, ``rag.aquery``            retrieval, gate, generation (``query*``/``insert``
                                              reach these through the instance)
``rag.entities_vdb.query``                    RPC: entities scored by the vector query
``rag.relationships_vdb.query``               RPC; with triple reweighting, global-mode order
``rag.chunk_entity_relation_graph.``          with triple reweighting: local-mode order
``edge_degrees_batch``
``rag.rerank_model_func`` (field)             with chunk reweighting: chunk order
``rag.text_chunks.global_config[``           with chunk reweighting: the same function for the
``"rerank_model_func"]``                      KG modes, which read the init-time config dict
``rag.text_chunks.get_by_ids``,               with chunk reweighting: chunk text -> chunk id
``rag.chunks_vdb.query``
============================================  ================================================

Private LightRAG surface read (no patching): the ``llm_cache_list`` of a chunk record and the
``return`` field of ``llm_response_cache`` entries (the raw extraction completions), the
``distance`` field of vector hits, and the facts that local mode sorts edges by
``(edge_degrees_batch rank, weight)`` and global mode keeps ``relationships_vdb.query`` order.
Events are built on the manager's delivery worker (``_defer``), never on the host's path.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Unpack

from triage_lightrag.reweight import identity_ranking, order_relations, rank_chunks, rank_edges
from triage_lightrag.translate import (
    FRAMEWORK,
    SCORE_ATTRIBUTE,
    extraction_event,
    graph_view,
    pin_keywords,
    query_mentions,
    reroute,
    retrieval_event,
    snapshot,
    stored_scores,
)
from triage_plugins.adapter_kit.instrumentor import InstrumentOptions, Instrumentor
from triage_plugins.adapter_kit.logprobs import lookup_logprobs
from triage_plugins.adapter_kit.lru import LRU
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import FeedbackEvent, GateDecision, GenerationEvent, GraphEvent

if TYPE_CHECKING:
    from triage_plugins.contract.graph_view import GraphView

__all__ = ["FRAMEWORK", "GatedAnswer", "LightRAGInstrumentor", "instrument"]

log = logging.getLogger("triage.lightrag")

_MARKER = "_triage_lightrag_instrumentation"
_REQUIRED = ("ainsert", "aquery_data", "aquery_llm", "chunk_entity_relation_graph", "relationships_vdb")
RECENT_QUERIES = 2048  # queries whose retrieved edges are kept for persisting learned scores
_warned: set[str] = set()


class GatedAnswer(str):
    """``aquery``'s answer when the gate warned or rerouted: equal to the text, with ``.gate``."""

    gate: GateDecision

    def __new__(cls, text: str, gate: GateDecision) -> GatedAnswer:
        obj = super().__new__(cls, text)
        obj.gate = gate
        return obj


@dataclass
class _QueryState:
    """What the wrappers learn while one query runs (shared by LightRAG's worker tasks)."""

    query: str
    query_id: str
    entities_scored: int = 0
    relations_scored: int = 0
    chunk_ids: dict[str, str] = field(default_factory=dict)  # chunk text -> chunk id


class LightRAGInstrumentor(Instrumentor):
    """Instrumentor of one ``LightRAG`` instance (see the module docstring and the kit's base)."""

    framework = FRAMEWORK

    def __init__(self) -> None:
        super().__init__()
        self._state: ContextVar[_QueryState | None] = ContextVar(
            f"triage_lightrag_state_{id(self)}", default=None
        )
        self._view: GraphView | None = None
        self._grounder: Any = None
        self._graph_stale = True
        # query id -> (triple id, subject, object) of what it retrieved; ids alone cannot be split
        # back into the entity pair when a name contains "|"
        self._recent: LRU[str, tuple[tuple[str, str, str], ...]] = LRU(RECENT_QUERIES)
        self._dirty: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("lightrag-hku >= 1.5.7, < 1.6",)

    @property
    def rag(self) -> Any:
        """The instrumented ``LightRAG`` instance."""
        return self.host

    @property
    def dropped(self) -> int:
        """Events (and event-building jobs) the manager's full queue dropped."""
        return int(getattr(self._manager, "dropped", 0))

    # ------------------------------------------------------------------ lifecycle

    def _instrument(self, rag: Any) -> None:
        for name in _REQUIRED:
            if not hasattr(rag, name):
                raise ConfigError(
                    f"instrument() needs a LightRAG instance; {type(rag).__name__} has no {name!r}"
                )
        existing = getattr(rag, "__dict__", {}).get(_MARKER)
        if existing is not None and existing is not self:
            raise ConfigError("this LightRAG instance is already instrumented: uninstrument() that first")
        self._wrap_attribute(rag, "ainsert", self._make_ainsert)
        self._wrap_attribute(rag, "aquery_data", self._make_aquery_data)
        self._wrap_attribute(rag, "aquery_llm", self._make_aquery_llm)
        self._wrap_attribute(rag, "aquery", self._make_aquery)
        self._wrap_attribute(rag.entities_vdb, "query", self._make_entities_query)
        self._wrap_attribute(rag.relationships_vdb, "query", self._make_relationships_query)
        if self.reweight and self.unit == "triple":
            self._wrap_attribute(
                rag.chunk_entity_relation_graph, "edge_degrees_batch", self._make_edge_degrees
            )
        if self.reweight and self.unit == "chunk":
            self._wrap_attribute(rag.text_chunks, "get_by_ids", self._make_chunk_reader)
            self._wrap_attribute(rag.chunks_vdb, "query", self._make_chunk_vdb)
            self._wrap_attribute(rag, "rerank_model_func", self._make_rerank)
            # KG modes read the reranker from the storages' init-time config dict, not the field.
            config = getattr(rag.text_chunks, "global_config", None)
            if isinstance(config, dict):
                self._wrap_item(config, "rerank_model_func", rag.rerank_model_func)
        rag.__dict__[_MARKER] = self
        self._on_uninstrument(lambda: rag.__dict__.pop(_MARKER, None))
        self._graph_stale = True

    # ------------------------------------------------------------------ feedback and persistence

    def _emit_feedback(self, event: FeedbackEvent) -> None:
        with self._lock:
            self._dirty.update({tid: (a, b) for tid, a, b in self._recent.get(event.query_id, ())})
        super()._emit_feedback(event)

    async def apersist(self) -> int:
        """Write learned triple scores to the graph as the ``triage_score`` edge attribute.

        Only edges retrieved by queries that received feedback since the last call are written
        (``upsert_edge`` merges the attribute, so it survives re-extraction of the edge); the graph
        is then committed (``index_done_callback``). Returns the number of edges written.
        """
        if self.unit != "triple":
            return 0
        await asyncio.to_thread(self.flush)
        with self._lock:
            dirty, self._dirty = self._dirty, {}
        if not dirty:
            return 0
        scores = self.manager.learned_scores(self.unit, sorted(dirty))
        graph = self.rag.chunk_entity_relation_graph
        written = 0
        for tid, raw in scores.items():
            a, b = dirty[tid]
            if not await graph.has_edge(a, b):
                continue
            await graph.upsert_edge(a, b, {SCORE_ATTRIBUTE: float(raw)})
            written += 1
        if written:
            await graph.index_done_callback()
        return written

    async def aflush(self) -> int:
        """:meth:`flush`, then :meth:`apersist` (returns the number of edges written)."""
        await asyncio.to_thread(self.flush)
        return await self.apersist()

    # ------------------------------------------------------------------ insert: extraction + graph

    def _make_ainsert(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def ainsert(*args: Any, **kwargs: Any) -> Any:
            track_id = await original(*args, **kwargs)
            try:
                await self._after_insert(track_id)
            except Exception as exc:  # noqa: BLE001
                self._failed("post-insert events", exc)
            return track_id

        return ainsert

    async def _after_insert(self, track_id: str) -> None:
        from lightrag.utils import normalize_entity_name

        rag = self.rag
        docs = await rag.aget_docs_by_track_id(track_id) if track_id else {}
        chunk_ids = [cid for status in docs.values() for cid in (getattr(status, "chunks_list", None) or ())]
        records = await rag.text_chunks.get_by_ids(chunk_ids) if chunk_ids else []
        temperature = (rag.llm_model_kwargs or {}).get("temperature")
        for cid, record in zip(chunk_ids, records, strict=False):
            completions = await self._completions(cid, record) if record else None
            if completions is None:
                continue
            event = extraction_event(
                track_id, cid, record, completions, normalize=normalize_entity_name,
                logprobs_of=lookup_logprobs, model=str(rag.llm_model_name), temperature=temperature,
            )  # fmt: skip
            self._guard("extraction event", self.manager.emit_extraction, event)
        await self._refresh_graph()

    async def _completions(self, chunk_id: str, record: dict[str, Any]) -> list[str] | None:
        """The raw extraction completions LightRAG cached for one chunk (``None``: none cached)."""
        cache_ids = list(record.get("llm_cache_list") or ())
        if not cache_ids:
            if "no-extract-cache" not in _warned:
                _warned.add("no-extract-cache")
                log.warning(
                    "triage_lightrag: chunk %s has no cached extraction (enable_llm_cache_for_entity_extract "
                    "is off?); no extraction event for it",
                    chunk_id,
                )
            return None
        entries = await self.rag.llm_response_cache.get_by_ids(cache_ids)
        return [
            e["return"]
            for e in entries
            if e and e.get("cache_type") == "extract" and isinstance(e.get("return"), str)
        ]

    async def _refresh_graph(self) -> None:
        graph = self.rag.chunk_entity_relation_graph
        nodes, edges = await graph.get_all_nodes(), await graph.get_all_edges()
        # the view and the grounder's gazetteer are CPU work: keep them off the event loop
        view, grounder = await asyncio.to_thread(_view_and_grounder, nodes, edges)
        self._view = view
        self._grounder = grounder
        self._graph_stale = False
        self._guard("graph event", self.manager.emit_graph, GraphEvent(FRAMEWORK, view))
        if self.reweight and self.unit == "triple":
            stored = stored_scores(edges)  # a restarted deployment keeps what it learned
            if stored:
                self._guard("score seeding", self.manager.seed_scores, self.unit, stored)

    async def _ensure_graph(self) -> None:
        if self._graph_stale:
            try:
                await self._refresh_graph()
            except Exception as exc:  # noqa: BLE001
                self._graph_stale = False
                self._failed("reading the graph", exc)

    # ------------------------------------------------------------------ queries

    def _begin(self, query: str) -> tuple[_QueryState, Any]:
        state = _QueryState(query=query, query_id=self._next_query_id())
        return state, self._state.set(state)

    def _make_aquery_data(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def aquery_data(query: str, param: Any = None, *args: Any, **kwargs: Any) -> Any:
            param = _param(param)
            await self._ensure_graph()
            result, state, seconds = await self._retrieve(original, query, param, *args, **kwargs)
            self._defer("retrieval event", self._emit_retrieval, state, param.mode, snapshot(result), seconds)
            return result

        return aquery_data

    def _make_aquery_llm(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def aquery_llm(query: str, param: Any = None, *args: Any, **kwargs: Any) -> Any:
            with self._query_scope():
                return await self._answer(original, query, _param(param), args, kwargs)

        return aquery_llm

    def _make_aquery(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def aquery(query: str, param: Any = None, system_prompt: str | None = None) -> Any:
            result = await self.rag.aquery_llm(query, _param(param), system_prompt)
            llm_response = result.get("llm_response", {})
            if llm_response.get("is_streaming"):
                return llm_response.get("response_iterator")
            content = llm_response.get("content", "")
            gate = result.get("triage_gate")
            if isinstance(content, str) and gate is not None:
                return GatedAnswer(content, GateDecision.from_dict(gate))
            return content

        return aquery

    async def _answer(
        self, original: Callable[..., Any], query: str, param: Any, args: tuple, kwargs: dict
    ) -> Any:
        """Retrieval -> gate -> generation for ``aquery_llm`` (and ``aquery`` through it).

        With the gate on, retrieval runs once through ``aquery_data`` (event + gate), then
        LightRAG's own ``aquery_llm`` answers with the same keywords pinned in the ``QueryParam``
        (no second keyword LLM call; the same prompt, so the same answer). With the gate off
        (``manager.config.gate = False``) there is a single pass and the retrieval event is built
        from ``aquery_llm``'s own payload.
        """
        if param.mode == "bypass":
            return await self._generate(original, query, param, args, kwargs, context="none")
        await self._ensure_graph()
        if not getattr(self.manager.config, "gate", True):
            return await self._generate(original, query, param, args, kwargs, emit_retrieval=True)
        decision: GateDecision | None = None
        try:
            param, decision = await self._retrieve_and_gate(query, param)
        except Exception as exc:  # noqa: BLE001 - fall back to LightRAG's own path
            self._failed("pre-answer retrieval", exc)
        return await self._generate(original, query, param, args, kwargs, decision=decision)

    async def _retrieve_and_gate(self, query: str, param: Any) -> tuple[Any, GateDecision | None]:
        data_fn = self._original(self.rag, "aquery_data")
        result, state, seconds = await self._retrieve(data_fn, query, param)
        event = self._guard("retrieval event", self._retrieval_event, state, param.mode, result, seconds)
        if event is None:
            return param, None
        self._guard("retrieval event", self.manager.emit_retrieval, event)
        decision = self._guard("gate", self.manager.gate, event)
        pinned = pin_keywords(param, result)
        if decision is None or decision.action != "reroute":
            return pinned, decision
        rerouted = reroute(pinned, decision.suggestion)
        result, state, seconds = await self._retrieve(data_fn, query, rerouted)
        second = self._guard("retrieval event", self._retrieval_event, state, rerouted.mode, result, seconds)
        if second is not None:
            self._guard("retrieval event", self.manager.emit_retrieval, second)
        return rerouted, decision

    async def _retrieve(
        self, fn: Callable[..., Any], query: str, param: Any, *args: Any, **kwargs: Any
    ) -> tuple[Any, _QueryState, float]:
        """``await fn(query, param, ...)`` as one query: its state visible to the wrappers, timed."""
        state, token = self._begin(query)
        t0 = time.perf_counter()
        try:
            result = await fn(query, param, *args, **kwargs)
        finally:
            self._state.reset(token)
        return result, state, time.perf_counter() - t0

    async def _generate(
        self,
        original: Callable[..., Any],
        query: str,
        param: Any,
        args: tuple,
        kwargs: dict,
        *,
        decision: GateDecision | None = None,
        emit_retrieval: bool = False,
        context: str = "retrieved",
    ) -> Any:
        t0 = time.perf_counter()
        result, state, seconds = await self._retrieve(original, query, param, *args, **kwargs)
        if emit_retrieval:
            self._defer("retrieval event", self._emit_retrieval, state, param.mode, snapshot(result), seconds)
        if decision is not None and decision.action != "proceed" and isinstance(result, dict):
            result["triage_gate"] = decision.to_dict()
        llm_response = result.get("llm_response") if isinstance(result, dict) else None
        if not isinstance(llm_response, dict):
            return result
        if llm_response.get("is_streaming") and llm_response.get("response_iterator") is not None:
            llm_response["response_iterator"] = self._stream(
                llm_response["response_iterator"], state.query_id, t0, context
            )
        elif isinstance(llm_response.get("content"), str):
            answer = llm_response["content"]
            self._defer("generation event", self._emit_generation, state.query_id, answer, seconds, context)
        return result

    async def _stream(
        self, iterator: AsyncIterator[str], qid: str, t0: float, context: str
    ) -> AsyncIterator[str]:
        parts: list[str] = []
        async for piece in iterator:
            parts.append(str(piece))
            yield piece
        seconds = time.perf_counter() - t0
        self._defer("generation event", self._emit_generation, qid, "".join(parts), seconds, context)

    # ------------------------------------------------------------------ events (built on the worker)

    def _mentions(
        self, query: str, low: Sequence[str], high: Sequence[str]
    ) -> tuple[list[str], dict[str, str | None]]:
        """M_q and γ_q of ``query`` (see :func:`triage_lightrag.translate.query_mentions`)."""
        return query_mentions(self._grounder, query, low, high)

    def _retrieval_event(self, state: _QueryState, mode: str, result: Any, seconds: float) -> Any:
        scored = state.entities_scored + state.relations_scored
        event = retrieval_event(state.query_id, state.query, mode, result, self._grounder, scored, seconds)
        self._recent.put(state.query_id, tuple((t.id, t.subject, t.object) for t in event.subgraph.triples))
        return event

    def _emit_retrieval(self, state: _QueryState, mode: str, result: Any, seconds: float) -> None:
        self.manager.emit_retrieval(self._retrieval_event(state, mode, result, seconds))

    def _emit_generation(self, qid: str, answer: str, seconds: float, context: str) -> None:
        mentions: tuple[str, ...] = ()
        grounding: dict[str, str | None] = {}
        if self._grounder is not None and answer:
            found = self._grounder.ground(answer)
            mentions, grounding = tuple(found.mentions), dict(found.grounding)
        self.manager.emit_generation(
            GenerationEvent(FRAMEWORK, qid, answer, mentions, grounding, None, seconds, context)  # type: ignore[arg-type]
        )

    # ------------------------------------------------------------------ counting and ranking knobs

    def _ask(self, state: _QueryState) -> Callable[[str, Sequence[str], Sequence[float]], list[float] | None]:
        return lambda unit, ids, relevance: self._priorities(
            state.query, unit, ids, relevance, state.query_id
        )

    def _make_entities_query(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def query(*args: Any, **kwargs: Any) -> Any:
            results = await original(*args, **kwargs)
            state = self._state.get()
            if state is not None and results:
                state.entities_scored += len(results)
            return results

        return query

    def _make_relationships_query(self, original: Callable[..., Any]) -> Callable[..., Any]:
        reorder = self.reweight and self.unit == "triple"

        async def query(*args: Any, **kwargs: Any) -> Any:
            results = await original(*args, **kwargs)
            state = self._state.get()
            if state is None or not results:
                return results
            state.relations_scored += len(results)
            if not reorder:
                return results
            ordered = self._guard("global reweighting", order_relations, results, self._ask(state))
            return results if ordered is None else ordered

        return query

    def _make_edge_degrees(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def edge_degrees_batch(edge_pairs: list[tuple[str, str]], *args: Any, **kwargs: Any) -> Any:
            degrees = await original(edge_pairs, *args, **kwargs)
            state = self._state.get()
            if state is None or not edge_pairs:
                return degrees
            ranked = self._guard("local reweighting", rank_edges, list(edge_pairs), degrees, self._ask(state))
            return degrees if ranked is None else ranked

        return edge_degrees_batch

    def _make_chunk_reader(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def get_by_ids(ids: list[str], *args: Any, **kwargs: Any) -> Any:
            records = await original(ids, *args, **kwargs)
            state = self._state.get()
            if state is not None and records:
                for cid, record in zip(ids, records, strict=False):
                    if isinstance(record, dict) and isinstance(record.get("content"), str):
                        state.chunk_ids.setdefault(record["content"], cid)
            return records

        return get_by_ids

    def _make_chunk_vdb(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def query(*args: Any, **kwargs: Any) -> Any:
            results = await original(*args, **kwargs)
            state = self._state.get()
            if state is not None and results:
                for r in results:
                    if isinstance(r.get("content"), str) and r.get("id"):
                        state.chunk_ids.setdefault(r["content"], str(r["id"]))
            return results

        return query

    def _make_rerank(self, user_rerank: Callable[..., Any] | None) -> Callable[..., Any]:
        """LightRAG's ``rerank_model_func`` contract: ``(query, documents, top_n) -> [{index, relevance_score}]``."""

        async def rerank_model_func(
            query: str, documents: list[str], top_n: int | None = None, **kwargs: Any
        ) -> Any:
            n = len(documents)
            base = None
            if user_rerank is not None:
                base = await user_rerank(query=query, documents=documents, top_n=n, **kwargs)
            state = self._state.get()
            ranked = None
            if state is not None and n:
                ranked = self._guard(
                    "chunk reweighting",
                    rank_chunks,
                    documents,
                    base,
                    state.chunk_ids,
                    self._ask(state),
                    top_n,
                )
            if ranked is not None:
                return ranked
            return base if base is not None else identity_ranking(n, top_n)

        return rerank_model_func


# ---------------------------------------------------------------------------- helpers


def _param(param: Any) -> Any:
    if param is not None:
        return param
    from lightrag import QueryParam

    return QueryParam()


def _view_and_grounder(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> tuple[GraphView, Any]:
    from triage_plugins.kg.grounding import shared_grounder

    view = graph_view(nodes, edges)
    try:
        grounder = shared_grounder(view)
    except Exception as exc:  # noqa: BLE001 - without a grounder, mentions are LightRAG's keywords
        log.warning("triage_lightrag: no grounder for this graph (%s: %s)", type(exc).__name__, exc)
        grounder = None
    return view, grounder


def instrument(rag: Any, **options: Unpack[InstrumentOptions]) -> LightRAGInstrumentor:
    """Instrument an initialized ``LightRAG`` instance; returns its :class:`LightRAGInstrumentor`.

    Instrumenting an instance twice returns the existing instrumentor. ``options`` are those of
    :meth:`~triage_plugins.adapter_kit.Instrumentor.instrument` (``manager``, ``store``, ``config``,
    ``reweight``, ``unit``) with its manager policy: a ``manager`` passed in is used as is and never
    closed; without one, an owned manager over ``store``. ``reweight`` writes contribution scores
    back into LightRAG's ranking (default: the manager's ``config.reweight``; off, answers are
    unchanged); ``unit`` is ``"triple"`` (local and global relation order) or ``"chunk"``.
    """
    existing = getattr(rag, "__dict__", {}).get(_MARKER)
    if isinstance(existing, LightRAGInstrumentor) and existing.is_instrumented:
        return existing
    return LightRAGInstrumentor().instrument(rag, **options)
