"""Drop-in instrumentation of one LightRAG 1.5.7 instance (DESIGN §2–3; docs/lightrag.md).

:func:`instrument` wraps **instance attributes only** — never LightRAG's modules or classes — and
:meth:`Instrumentation.uninstrument` restores each of them:

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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import hashlib
import itertools
import logging
import math
import os
import queue
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from triage_lightrag.logprobs import lookup_logprobs
from triage_lightrag.translate import (
    extraction_triples,
    graph_view,
    retrieved_chunks,
    retrieved_subgraph,
    triple_id,
)
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import (
    Chunk,
    ExtractionEvent,
    FeedbackEvent,
    GateDecision,
    GenerationEvent,
    GraphEvent,
    RerankRequest,
    RetrievalEvent,
)
from triage_plugins.contract.graph_view import normalize_label

if TYPE_CHECKING:
    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.runtime.manager import TriageManager
    from triage_plugins.store import Store

__all__ = ["FRAMEWORK", "GatedAnswer", "Instrumentation", "instrument"]

log = logging.getLogger("triage.lightrag")

FRAMEWORK = "lightrag"
SCORE_ATTRIBUTE = "triage_score"
MODES = ("local", "global", "hybrid", "mix", "naive")
# reroute "expand_hops": LightRAG has no multi-hop traversal; this is the next-wider mode.
WIDER_MODE = {"local": "hybrid", "global": "hybrid", "hybrid": "mix", "naive": "mix", "mix": "mix"}
_MARKER = "_triage_lightrag_instrumentation"
_RECENT = 2048


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


@dataclass
class _Wrapped:
    owner: Any
    name: str
    had_instance_value: bool
    original: Any
    item: bool = False  # a key of an instance-held dict rather than an attribute


def _clamp(x: Any) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return 0.0
    return 0.0 if not math.isfinite(v) else min(1.0, max(0.0, v))


def _text_id(text: str) -> str:
    return "text-" + hashlib.md5(text.encode("utf-8")).hexdigest()[:16]


class Instrumentation:
    """The handle :func:`instrument` returns: query ids, feedback, flush and uninstrument.

    :ivar query_id: id of the last query this instance answered (use :meth:`query` to choose ids
        when queries run concurrently).
    """

    def __init__(
        self,
        rag: Any,
        manager: TriageManager,
        *,
        reweight: bool,
        unit: str,
        owns_manager: bool,
        queue_size: int = 10_000,
        schedule_delay: float = 0.2,
    ) -> None:
        self.rag = rag
        self.manager = manager
        self.reweight = reweight
        self.unit = unit
        self._owns_manager = owns_manager
        self._qid: ContextVar[str | None] = ContextVar(f"triage_lightrag_qid_{id(self)}", default=None)
        self._state: ContextVar[_QueryState | None] = ContextVar(
            f"triage_lightrag_state_{id(self)}", default=None
        )
        self._wrapped: list[_Wrapped] = []
        self._last_qid: str | None = None
        self._view: GraphView | None = None
        self._grounder: Any = None
        self._graph_stale = True
        # query id -> (triple id, subject, object) of what it retrieved; ids alone cannot be split
        # back into the entity pair when a name contains "|"
        self._recent: OrderedDict[str, tuple[tuple[str, str, str], ...]] = OrderedDict()
        self._dirty: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        self._jobs: queue.Queue[Any] = queue.Queue(maxsize=queue_size)
        self._worker: threading.Thread | None = None
        self._wake = threading.Event()
        self.schedule_delay = schedule_delay
        self.dropped = 0
        self.active = False

    # ------------------------------------------------------------------ public API

    @property
    def query_id(self) -> str | None:
        """Id of the last query answered through this instrumentation."""
        return self._qid.get() or self._last_qid

    @contextlib.contextmanager
    def query(self, query_id: str | None = None) -> Iterator[str]:
        """Use ``query_id`` (or a fresh one) for the queries run inside the block.

        ContextVar-based: each asyncio task keeps its own id, and LightRAG copies the context into
        its worker tasks, so concurrent queries keep theirs::

            with inst.query("q-17"):
                await rag.aquery(question)
            inst.feedback("q-17", 1.0)
        """
        qid = query_id or _new_query_id()
        if not isinstance(qid, str) or not qid.strip():
            raise ConfigError(f"a query id must be a non-blank string, got {query_id!r}")
        token = self._qid.set(qid)
        try:
            yield qid
        finally:
            self._qid.reset(token)

    def feedback(self, query_id: str, score: float, source: str = "human") -> None:
        """Report a score in [0, 1] for an answered query (``FeedbackEvent.from_rating`` maps 1–5)."""
        event = FeedbackEvent(FRAMEWORK, query_id, score, source)  # type: ignore[arg-type]
        # Same queue as the retrieval events, so the learner always sees the retrieval first.
        self._defer("feedback event", self._emit_feedback, event)

    def _emit_feedback(self, event: FeedbackEvent) -> None:
        with self._lock:
            self._dirty.update({tid: (a, b) for tid, a, b in self._recent.get(event.query_id, ())})
        self.manager.emit_feedback(event)

    def flush(self, timeout: float | None = None) -> bool:
        """Build and deliver every queued event (returns ``False`` on timeout)."""
        drained = self._drain(timeout)
        return self.manager.flush(timeout) and drained

    # ------------------------------------------------------------------ deferred event building

    def _defer(self, what: str, fn: Callable[..., Any], *args: Any) -> None:
        """Build an event off the host's path: inline when the manager is synchronous, else on
        this instrumentation's worker thread (bounded queue; a full queue drops and counts)."""
        if getattr(self.manager, "synchronous", False):
            self._safely(what, fn, *args)
            return
        if self._worker is None or not self._worker.is_alive():
            with self._lock:
                if self._worker is None or not self._worker.is_alive():
                    self._worker = threading.Thread(target=self._work, name="triage-lightrag", daemon=True)
                    self._worker.start()
        try:
            self._jobs.put_nowait((what, fn, args))
        except queue.Full:
            with self._lock:
                self.dropped += 1
            _warn_once(
                "queue-full", "triage_lightrag: event queue full; events are dropped (host not blocked)"
            )

    def _work(self) -> None:
        """Batch like OpenTelemetry's batch span processor: after the first job, wait up to
        ``schedule_delay`` seconds (or until :meth:`flush`) and then build everything queued."""
        while True:
            batch = [self._jobs.get()]
            if batch[0] is not None:
                self._wake.wait(self.schedule_delay)
                self._wake.clear()
                with contextlib.suppress(queue.Empty):
                    while len(batch) < self._jobs.maxsize:
                        batch.append(self._jobs.get_nowait())
            stop = False
            for job in batch:
                try:
                    if job is None:
                        stop = True
                        continue
                    what, fn, args = job
                    self._safely(what, fn, *args)
                finally:
                    self._jobs.task_done()
                # Hand the GIL back between events, so the host's thread never waits long.
                time.sleep(0)
            if stop:
                return

    def _drain(self, timeout: float | None = None) -> bool:
        if self._worker is None or threading.current_thread() is self._worker:
            return True
        self._wake.set()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._jobs.all_tasks_done:
            while self._jobs.unfinished_tasks:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._jobs.all_tasks_done.wait(remaining)
        return True

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
        scores = self._learned_scores(sorted(dirty))
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

    def uninstrument(self) -> None:
        """Restore every attribute this instrumentation wrapped (idempotent)."""
        if not self.active:
            return
        for w in reversed(self._wrapped):
            if w.item:
                if w.had_instance_value:
                    w.owner[w.name] = w.original
                else:
                    w.owner.pop(w.name, None)
            elif w.had_instance_value:
                setattr(w.owner, w.name, w.original)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(w.owner, w.name)
        self._wrapped.clear()
        self.rag.__dict__.pop(_MARKER, None)
        self.active = False
        self.flush(timeout=10.0)
        if self._worker is not None and self._worker.is_alive():
            self._jobs.put(None)
            self._wake.set()
            self._worker.join(timeout=5.0)
        self._worker = None
        if self._owns_manager:
            self.manager.close()

    # ------------------------------------------------------------------ wrapping

    def _wrap(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        had = name in getattr(owner, "__dict__", {})
        original = getattr(owner, name)
        wrapper = make(original)
        if callable(original) and callable(wrapper) and not isinstance(wrapper, type):
            with contextlib.suppress(AttributeError, TypeError):
                functools.update_wrapper(wrapper, original)
        self._wrapped.append(_Wrapped(owner, name, had, original))
        setattr(owner, name, wrapper)

    def _wrap_item(self, mapping: dict[str, Any], key: str, value: Any) -> None:
        self._wrapped.append(_Wrapped(mapping, key, key in mapping, mapping.get(key), item=True))
        mapping[key] = value

    def _install(self) -> None:
        rag = self.rag
        self._wrap(rag, "ainsert", self._make_ainsert)
        self._wrap(rag, "aquery_data", self._make_aquery_data)
        self._wrap(rag, "aquery_llm", self._make_aquery_llm)
        self._wrap(rag, "aquery", self._make_aquery)
        self._wrap(rag.entities_vdb, "query", self._make_entities_query)
        self._wrap(rag.relationships_vdb, "query", self._make_relationships_query)
        if self.reweight and self.unit == "triple":
            self._wrap(rag.chunk_entity_relation_graph, "edge_degrees_batch", self._make_edge_degrees)
        if self.reweight and self.unit == "chunk":
            self._wrap(rag.text_chunks, "get_by_ids", self._make_chunk_reader)
            self._wrap(rag.chunks_vdb, "query", self._make_chunk_vdb)
            self._wrap(rag, "rerank_model_func", self._make_rerank)
            # KG modes read the reranker from the storages' init-time config dict, not the field.
            config = getattr(rag.text_chunks, "global_config", None)
            if isinstance(config, dict):
                self._wrap_item(config, "rerank_model_func", rag.rerank_model_func)
        rag.__dict__[_MARKER] = self
        self.active = True

    def _safely(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """Run adapter-side work; an error is logged, never raised into the host."""
        try:
            return fn(*args)
        except Exception as exc:  # noqa: BLE001 - instrumentation never breaks the host
            log.warning(
                "triage_lightrag: %s failed (%s: %s); the host is unaffected", what, type(exc).__name__, exc
            )
            return None

    # ------------------------------------------------------------------ insert: extraction + graph

    def _make_ainsert(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def ainsert(*args: Any, **kwargs: Any) -> Any:
            track_id = await original(*args, **kwargs)
            try:
                await self._after_insert(track_id)
            except Exception as exc:  # noqa: BLE001
                log.warning("triage_lightrag: post-insert events failed (%s: %s)", type(exc).__name__, exc)
            return track_id

        return ainsert

    async def _after_insert(self, track_id: str) -> None:
        rag = self.rag
        docs = await rag.aget_docs_by_track_id(track_id) if track_id else {}
        chunk_ids = [cid for status in docs.values() for cid in (getattr(status, "chunks_list", None) or ())]
        if chunk_ids:
            records = await rag.text_chunks.get_by_ids(chunk_ids)
            for cid, record in zip(chunk_ids, records, strict=False):
                if record:
                    event = await self._extraction_event(track_id, cid, record)
                    if event is not None:
                        self._safely("extraction event", self.manager.emit_extraction, event)
        await self._refresh_graph()

    async def _extraction_event(
        self, run_id: str, chunk_id: str, record: dict[str, Any]
    ) -> ExtractionEvent | None:
        from lightrag.utils import normalize_entity_name

        cache_ids = list(record.get("llm_cache_list") or ())
        if not cache_ids:
            _warn_once(
                "no-extract-cache",
                "triage_lightrag: chunk %s has no cached extraction (enable_llm_cache_for_entity_extract "
                "is off?); no extraction event for it",
                chunk_id,
            )
            return None
        entries = await self.rag.llm_response_cache.get_by_ids(cache_ids)
        triples: dict[str, Any] = {}
        for entry in entries:
            if not entry or entry.get("cache_type") != "extract" or not isinstance(entry.get("return"), str):
                continue
            text = entry["return"]
            for et in extraction_triples(
                text, normalize=normalize_entity_name, logprobs=lookup_logprobs(text)
            ):
                triples.setdefault(et.triple.id, et)
        chunk = Chunk(
            chunk_id,
            str(record.get("full_doc_id") or record.get("file_path") or "unknown"),
            str(record.get("content") or ""),
            {"chunk_order_index": int(record.get("chunk_order_index") or 0)},
        )
        temperature = (self.rag.llm_model_kwargs or {}).get("temperature")
        return ExtractionEvent(
            FRAMEWORK,
            run_id,
            chunk,
            tuple(triples.values()),
            str(self.rag.llm_model_name),
            float(temperature) if isinstance(temperature, int | float) and temperature >= 0 else None,
        )

    async def _refresh_graph(self) -> None:
        graph = self.rag.chunk_entity_relation_graph
        nodes, edges = await graph.get_all_nodes(), await graph.get_all_edges()
        # the view and the grounder's gazetteer are CPU work: keep them off the event loop
        view, grounder = await asyncio.to_thread(_view_and_grounder, nodes, edges)
        self._view = view
        self._grounder = grounder
        self._graph_stale = False
        self._safely("graph event", self.manager.emit_graph, GraphEvent(FRAMEWORK, view))
        if self.reweight and self.unit == "triple":
            stored = {
                triple_id(str(e["source"]), str(e["target"])): e[SCORE_ATTRIBUTE]
                for e in edges
                if e.get(SCORE_ATTRIBUTE) not in (None, "") and e.get("source") and e.get("target")
            }
            if stored:
                self._safely("score seeding", self._seed_scores, stored)

    # ------------------------------------------------------------------ scores (read / seed)

    def _learner_scores(self) -> Any:
        learner = self.manager.get_plugin("triage.feedback")
        model = getattr(learner, "model", None)
        return model(self.unit).scores if callable(model) else None

    def _learned_scores(self, ids: Sequence[str]) -> dict[str, float]:
        scores = self._learner_scores()
        if scores is not None:
            known = scores.scored()
            return {i: known[i] for i in ids if i in known}
        store: Store | None = self.manager.store
        if store is None:
            return {}
        return {i: float(row.raw) for i, row in store.get_scores(self.unit, ids).items()}

    def _seed_scores(self, stored: dict[str, Any]) -> None:
        """A restarted deployment keeps what it learned: graph ``triage_score`` -> score store."""
        scores = self._learner_scores()
        store = self.manager.store
        known = (
            scores.scored() if scores is not None else ({} if store is None else store.get_scores(self.unit))
        )
        for tid, raw in stored.items():
            if tid in known:
                continue
            value = float(raw)
            if scores is not None:
                scores.set(tid, value)
            elif store is not None:
                store.set_score(self.unit, tid, value)

    # ------------------------------------------------------------------ queries

    def _begin(self, query: str) -> tuple[_QueryState, Any]:
        qid = self._qid.get() or _new_query_id()
        self._last_qid = qid
        state = _QueryState(query=query, query_id=qid)
        return state, self._state.set(state)

    async def _ensure_graph(self) -> None:
        if self._graph_stale:
            try:
                await self._refresh_graph()
            except Exception as exc:  # noqa: BLE001
                self._graph_stale = False
                log.warning("triage_lightrag: could not read the graph (%s: %s)", type(exc).__name__, exc)

    def _make_aquery_data(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def aquery_data(query: str, param: Any = None, *args: Any, **kwargs: Any) -> Any:
            param = _param(param)
            await self._ensure_graph()
            state, token = self._begin(query)
            t0 = time.perf_counter()
            try:
                result = await original(query, param, *args, **kwargs)
            finally:
                self._state.reset(token)
            seconds = time.perf_counter() - t0
            self._defer(
                "retrieval event", self._emit_retrieval, state, param.mode, _snapshot(result), seconds
            )
            return result

        return aquery_data

    def _make_aquery_llm(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def aquery_llm(query: str, param: Any = None, *args: Any, **kwargs: Any) -> Any:
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
        token = self._qid.set(self._qid.get() or _new_query_id())
        try:
            return await self._answer_with_id(original, query, param, args, kwargs)
        finally:
            self._qid.reset(token)

    async def _answer_with_id(
        self, original: Callable[..., Any], query: str, param: Any, args: tuple, kwargs: dict
    ) -> Any:
        if param.mode == "bypass":
            return await self._generate(original, query, param, args, kwargs, context="none")
        await self._ensure_graph()
        decision: GateDecision | None = None
        if getattr(self.manager.config, "gate", True):
            try:
                param, decision = await self._retrieve_and_gate(query, param)
            except Exception as exc:  # noqa: BLE001 - fall back to LightRAG's own path
                log.warning("triage_lightrag: pre-answer retrieval failed (%s: %s)", type(exc).__name__, exc)
                decision = None
            return await self._generate(
                original, query, param, args, kwargs, decision=decision, emit_retrieval=False
            )
        return await self._generate(original, query, param, args, kwargs, emit_retrieval=True)

    async def _retrieve_and_gate(self, query: str, param: Any) -> tuple[Any, GateDecision | None]:
        data_fn = self._original("aquery_data")
        result, state, seconds = await self._retrieve(data_fn, query, param)
        event = self._safely("retrieval event", self._retrieval_event, state, param.mode, result, seconds)
        if event is None:
            return param, None
        self._safely("retrieval event", self.manager.emit_retrieval, event)
        decision = self._safely("gate", self.manager.gate, event)
        pinned = _pin_keywords(param, result)
        if decision is not None and decision.action == "reroute":
            rerouted = _reroute(pinned, decision.suggestion)
            result, state, seconds = await self._retrieve(data_fn, query, rerouted)
            second = self._safely(
                "retrieval event", self._retrieval_event, state, rerouted.mode, result, seconds
            )
            if second is not None:
                self._safely("retrieval event", self.manager.emit_retrieval, second)
            return rerouted, decision
        return pinned, decision

    async def _retrieve(
        self, data_fn: Callable[..., Any], query: str, param: Any
    ) -> tuple[Any, _QueryState, float]:
        state, token = self._begin(query)
        t0 = time.perf_counter()
        try:
            result = await data_fn(query, param)
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
        state, token = self._begin(query)
        t0 = time.perf_counter()
        try:
            result = await original(query, param, *args, **kwargs)
        finally:
            self._state.reset(token)
        seconds = time.perf_counter() - t0
        if emit_retrieval:
            self._defer(
                "retrieval event", self._emit_retrieval, state, param.mode, _snapshot(result), seconds
            )
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
            self._defer(
                "generation event",
                self._emit_generation,
                state.query_id,
                llm_response["content"],
                seconds,
                context,
            )
        return result

    async def _stream(
        self, iterator: AsyncIterator[str], qid: str, t0: float, context: str
    ) -> AsyncIterator[str]:
        parts: list[str] = []
        async for piece in iterator:
            parts.append(str(piece))
            yield piece
        self._defer(
            "generation event", self._emit_generation, qid, "".join(parts), time.perf_counter() - t0, context
        )

    def _original(self, name: str) -> Callable[..., Any]:
        for w in self._wrapped:
            if w.owner is self.rag and w.name == name and not w.item:
                return w.original
        return getattr(self.rag, name)

    # ------------------------------------------------------------------ events

    def _mentions(
        self, query: str, low: Sequence[str], high: Sequence[str]
    ) -> tuple[list[str], dict[str, str | None]]:
        """M_q and γ_q: the default grounder's mentions, LightRAG's low-level keywords, and its
        high-level keywords that name a node (themes that name none are not entity mentions).
        Mentions of one node are coalesced (TRIAGE §4.3.1)."""
        grounder = self._grounder
        mentions: list[str] = []
        grounding: dict[str, str | None] = {}
        nodes: set[str] = set()
        unresolved: set[str] = set()

        def add(surface: str, node: str | None) -> None:
            surface = surface.strip()
            if not surface or surface in grounding:
                return
            if node is not None:
                if node in nodes:
                    return
                nodes.add(node)
            else:
                key = normalize_label(surface)
                if not key or key in unresolved:
                    return
                unresolved.add(key)
            mentions.append(surface)
            grounding[surface] = node

        if grounder is not None:
            found = grounder.ground(query)
            for m in found.mentions:
                add(m, found.grounding[m])
        for kw in low:
            if isinstance(kw, str):
                add(kw, grounder.link(kw) if grounder is not None else None)
        if grounder is not None:
            for kw in high:
                if isinstance(kw, str) and (node := grounder.link(kw)) is not None:
                    add(kw, node)
        return mentions, grounding

    def _retrieval_event(self, state: _QueryState, mode: str, result: Any, seconds: float) -> RetrievalEvent:
        payload = result if isinstance(result, dict) else {}
        data = payload.get("data") or {}
        keywords = (payload.get("metadata") or {}).get("keywords") or {}
        mentions, grounding = self._mentions(
            state.query, keywords.get("low_level") or (), keywords.get("high_level") or ()
        )
        subgraph = retrieved_subgraph(data)
        if mode == "naive":
            expanded, note = 0, "naive mode: vector search over chunks only; no graph node is expanded"
        else:
            expanded = state.entities_scored + state.relations_scored
            note = (
                "entities + relations returned by LightRAG's vector queries (top_k each); "
                "graph neighbours read afterwards are not counted"
            )
        with self._lock:
            self._recent[state.query_id] = tuple((t.id, t.subject, t.object) for t in subgraph.triples)
            self._recent.move_to_end(state.query_id)
            while len(self._recent) > _RECENT:
                self._recent.popitem(last=False)
        return RetrievalEvent(
            FRAMEWORK,
            state.query_id,
            state.query,
            tuple(mentions),
            grounding,
            subgraph,
            (),
            retrieved_chunks(data),
            expanded,
            note,
            seconds,
            mode if mode in MODES else "default",
        )

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

    # ------------------------------------------------------------------ counting and reweighting

    def _make_entities_query(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def query(*args: Any, **kwargs: Any) -> Any:
            results = await original(*args, **kwargs)
            state = self._state.get()
            if state is not None and results:
                state.entities_scored += len(results)
            return results

        return query

    def _rerank(
        self, state: _QueryState, unit: str, ids: Sequence[str], relevance: Sequence[float]
    ) -> list[float] | None:
        request = RerankRequest(FRAMEWORK, state.query, unit, tuple(ids), tuple(relevance), state.query_id)  # type: ignore[arg-type]
        return self.manager.rerank(request)

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
            ordered = self._safely("global reweighting", self._order_relations, state, results)
            return results if ordered is None else ordered

        return query

    def _order_relations(self, state: _QueryState, results: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Global mode keeps the vector order: reorder the hits by P (S_r = cosine ``distance``)."""
        ids = [triple_id(str(r.get("src_id")), str(r.get("tgt_id"))) for r in results]
        n = len(results)
        relevance: dict[str, float] = {}
        for i, (tid, r) in enumerate(zip(ids, results, strict=True)):
            s_r = _clamp(r["distance"]) if "distance" in r else 1.0 - i / n
            relevance.setdefault(tid, s_r)
        priorities = self._rerank(state, "triple", list(relevance), list(relevance.values()))
        if priorities is None:
            return results
        p = dict(zip(relevance, priorities, strict=True))
        order = sorted(range(n), key=lambda i: (-p[ids[i]], i))
        return [results[i] for i in order]

    def _make_edge_degrees(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def edge_degrees_batch(edge_pairs: list[tuple[str, str]], *args: Any, **kwargs: Any) -> Any:
            degrees = await original(edge_pairs, *args, **kwargs)
            state = self._state.get()
            if state is None or not edge_pairs:
                return degrees
            ranked = self._safely("local reweighting", self._rank_edges, state, list(edge_pairs), degrees)
            return degrees if ranked is None else ranked

        return edge_degrees_batch

    def _rank_edges(
        self, state: _QueryState, pairs: list[tuple[str, str]], degrees: dict[Any, int]
    ) -> dict[Any, int]:
        """Local mode sorts edges by (rank, weight), rank = this batch's degrees: return ranks that
        follow P, distinct integers so that weight never decides (S_r = degree / max degree)."""
        keys = [tuple(p) for p in pairs]
        ids = [triple_id(str(a), str(b)) for a, b in keys]
        top = max((float(degrees.get(k, 0)) for k in keys), default=0.0) or 1.0
        relevance: dict[str, float] = {}
        for tid, k in zip(ids, keys, strict=True):
            relevance.setdefault(tid, _clamp(float(degrees.get(k, 0)) / top))
        priorities = self._rerank(state, "triple", list(relevance), list(relevance.values()))
        if priorities is None:
            return degrees
        p = dict(zip(relevance, priorities, strict=True))
        order = sorted(range(len(keys)), key=lambda i: (-p[ids[i]], -float(degrees.get(keys[i], 0)), i))
        ranked = dict(degrees)
        for position, i in enumerate(order):
            ranked[keys[i]] = len(order) - position
        return ranked

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
        """LightRAG's ``rerank_model_func`` contract: ``(query, documents, top_n) -> [{index, relevance_score}]``.

        S_r is the user's own reranker score when one was configured, else LightRAG's order
        (1 − i/n); the returned order follows P and ``relevance_score`` is P.
        """

        async def rerank_model_func(
            query: str, documents: list[str], top_n: int | None = None, **kwargs: Any
        ) -> Any:
            n = len(documents)
            base = None
            if user_rerank is not None:
                base = await user_rerank(query=query, documents=documents, top_n=n, **kwargs)
            state = self._state.get()
            if state is None or n == 0:
                return base if base is not None else _identity(n, top_n)
            ranked = self._safely("chunk reweighting", self._rank_chunks, state, documents, base, top_n)
            if ranked is not None:
                return ranked
            return base if base is not None else _identity(n, top_n)

        return rerank_model_func

    def _rank_chunks(
        self, state: _QueryState, documents: list[str], base: Any, top_n: int | None
    ) -> list[dict] | None:
        n = len(documents)
        relevance = [1.0 - i / n for i in range(n)]
        if base:
            relevance = [0.0] * n
            for r in base:
                if isinstance(r, dict) and isinstance(r.get("index"), int) and 0 <= r["index"] < n:
                    relevance[r["index"]] = _clamp(r.get("relevance_score"))
        ids = [state.chunk_ids.get(doc) or _text_id(doc) for doc in documents]
        unique: dict[str, float] = {}
        for cid, s_r in zip(ids, relevance, strict=True):
            unique.setdefault(cid, s_r)
        priorities = self._rerank(state, "chunk", list(unique), list(unique.values()))
        if priorities is None:
            return None
        p = dict(zip(unique, priorities, strict=True))
        order = sorted(range(n), key=lambda i: (-p[ids[i]], i))
        out = [{"index": i, "relevance_score": _clamp(p[ids[i]])} for i in order]
        return out[:top_n] if top_n else out


# ---------------------------------------------------------------------------- helpers


_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        log.warning(message, *args)


_ID_PREFIX = f"lightrag-{uuid.uuid4().hex[:10]}"  # random per process: ids stay unique across workers
_ID_COUNTER = itertools.count(1)


def _new_query_id() -> str:
    return f"{_ID_PREFIX}-{next(_ID_COUNTER)}"


def _identity(n: int, top_n: int | None) -> list[dict[str, Any]]:
    out = [{"index": i, "relevance_score": 1.0} for i in range(n)]
    return out[:top_n] if top_n else out


def _snapshot(result: Any) -> dict[str, Any]:
    """The parts of a LightRAG payload an event needs, copied so that the caller may mutate its own."""
    if not isinstance(result, dict):
        return {}
    data = result.get("data") or {}
    keywords = (result.get("metadata") or {}).get("keywords") or {}
    return {
        "data": {k: list(data.get(k) or ()) for k in ("entities", "relationships", "chunks")},
        "metadata": {"keywords": {k: list(keywords.get(k) or ()) for k in ("high_level", "low_level")}},
    }


def _param(param: Any) -> Any:
    if param is not None:
        return param
    from lightrag import QueryParam

    return QueryParam()


def _pin_keywords(param: Any, result: Any) -> Any:
    """The same ``QueryParam`` with the keywords the retrieval used (no second keyword LLM call)."""
    if param.hl_keywords or param.ll_keywords or not isinstance(result, dict):
        return param
    keywords = (result.get("metadata") or {}).get("keywords") or {}
    high, low = list(keywords.get("high_level") or ()), list(keywords.get("low_level") or ())
    if not high and not low:
        return param
    return dataclasses.replace(param, hl_keywords=high, ll_keywords=low)


def _reroute(param: Any, suggestion: Any) -> Any:
    """Apply a gate suggestion to a copy of ``param`` (documented in docs/lightrag.md).

    ``top_k`` / ``chunk_top_k``: set; ``widen_top_k``: multiply ``top_k`` and ``chunk_top_k``;
    ``mode``: switch to that mode; ``expand_hops`` > 0: switch to the next wider mode
    (local/global -> hybrid -> mix, naive -> mix).
    """
    s = dict(suggestion or {})
    changes: dict[str, Any] = {}
    factor = s.get("widen_top_k")
    if isinstance(factor, int | float) and factor > 0:
        changes["top_k"] = max(1, math.ceil(param.top_k * float(factor)))
        if param.chunk_top_k:
            changes["chunk_top_k"] = max(1, math.ceil(param.chunk_top_k * float(factor)))
    for name in ("top_k", "chunk_top_k"):
        if isinstance(s.get(name), int | float) and s[name] >= 1:
            changes[name] = int(s[name])
    if s.get("mode") in MODES:
        changes["mode"] = s["mode"]
    hops = s.get("expand_hops")
    if isinstance(hops, int | float) and hops > 0 and "mode" not in changes:
        changes["mode"] = WIDER_MODE.get(param.mode, param.mode)
    return dataclasses.replace(param, **changes) if changes else param


def _view_and_grounder(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> tuple[GraphView, Any]:
    from triage_plugins.kg.grounding import shared_grounder

    view = graph_view(nodes, edges)
    try:
        grounder = shared_grounder(view)
    except Exception as exc:  # noqa: BLE001 - without a grounder, mentions are LightRAG's keywords
        log.warning("triage_lightrag: no grounder for this graph (%s: %s)", type(exc).__name__, exc)
        grounder = None
    return view, grounder


def instrument(
    rag: Any,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    manager: TriageManager | None = None,
    reweight: bool = False,
    unit: str = "triple",
) -> Instrumentation:
    """Instrument an initialized ``LightRAG`` instance; returns its :class:`Instrumentation`.

    :param store: where a new manager records (path, ``sqlite:///`` URL or Store); ignored with ``manager``.
    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` to emit to (default: a new
        one over ``store``, closed by :meth:`Instrumentation.uninstrument`).
    :param reweight: write contribution scores back into LightRAG's ranking (EvoRAG); turns
        ``manager.config.reweight`` on and sets ``manager.config.unit``. Off: answers are unchanged.
    :param unit: ``"triple"`` (local and global relation order) or ``"chunk"`` (chunk order).

    Instrumenting an instance twice returns the existing handle.
    """
    if unit not in ("triple", "chunk"):
        raise ConfigError(f"unit must be 'triple' or 'chunk', got {unit!r}")
    for name in ("ainsert", "aquery_data", "aquery_llm", "chunk_entity_relation_graph", "relationships_vdb"):
        if not hasattr(rag, name):
            raise ConfigError(f"instrument() needs a LightRAG instance; {type(rag).__name__} has no {name!r}")
    existing = getattr(rag, "__dict__", {}).get(_MARKER)
    if isinstance(existing, Instrumentation) and existing.active:
        return existing
    owns = manager is None
    if manager is None:
        from triage_plugins.runtime.manager import TriageManager

        manager = TriageManager(store=store)
    if reweight:
        manager.config.reweight = True
        manager.config.unit = unit  # type: ignore[assignment]
    inst = Instrumentation(rag, manager, reweight=reweight, unit=unit, owns_manager=owns)
    inst._install()
    return inst
