"""Drop-in instrumentation of one LightRAG 1.5.7 instance (DESIGN §2–3; docs/lightrag.md).

:class:`LightRAGInstrumentor` is the adapter's :class:`~triage_plugins.adapter_kit.Instrumentor`;
:func:`instrument` (``from triage_lightrag import instrument``) is the compatible shortcut. It wraps
**instance attributes only** — never LightRAG's modules or classes — and ``uninstrument()``
restores each of them:

============================================  ================================================
wrapped attribute                             why
============================================  ================================================
``rag.apipeline_process_enqueue_documents``   extraction events per processed chunk + a graph
                                              event (``ainsert``/``insert`` and the server's
                                              ``/documents`` routes all reach it)
``rag.doc_status.upsert``                     notes the documents that became ``processed``
``rag.adelete_by_doc_id``, ``adelete_by_*``,  a graph event after each deletion or edit
``aedit_*``, ``acreate_*``, ``amerge_entities``,
``ainsert_custom_kg``
``rag.aquery_data``                           retrieval event (every mode)
``rag.aquery_llm``                            retrieval, gate, generation (``aquery``, ``query*``
                                              reach it through the instance)
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
Events are built on the manager's delivery worker (``_defer``), never on the host's path; the gate
is asked there too unless ``gate.mode = "reroute"`` was chosen (then the host waits for it, in a
thread under the manager's hook budget); ``triage_rerank`` is asked in a thread under that budget,
so no synchronous hook ever blocks LightRAG's event loop.

**Observe-only by default.** With reweighting off and no gate mode chosen (``gate.mode`` defaults
to ``"warn"``), LightRAG's answers and return types are those of the plain instance: one pass
through LightRAG's own ``aquery_llm``, nothing added to what it returns. The gate's decision is
recorded (:meth:`LightRAGInstrumentor.gate_decision`) and never acted on. ``reroute`` is an
explicit opt-in and even then LightRAG's own types come back; the decision travels on the query
(``gate_decision(query_id)``), not in the answer.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Unpack

from triage_lightrag.ingestion import IngestionHooks
from triage_lightrag.persist import ScorePersistence
from triage_lightrag.ranking import RankingHooks
from triage_lightrag.translate import (
    FRAMEWORK,
    pin_keywords,
    query_mentions,
    reroute,
    retrieval_event,
    snapshot,
)
from triage_plugins import ConfigError, FeedbackEvent, GateDecision, GenerationEvent, TriageError
from triage_plugins.adapter_kit import GENERATION_CONTEXTS, trusted_parts
from triage_plugins.adapter_kit.instrumentor import InstrumentOptions, Instrumentor
from triage_plugins.adapter_kit.lru import LRU

if TYPE_CHECKING:
    import os

    from triage_plugins import GraphView, TriageConfig, TriageManager
    from triage_plugins.adapter_kit import Store

__all__ = [
    "FRAMEWORK",
    "GatedAnswer",
    "LightRAGInstrumentor",
    "UnknownQueryError",
    "instrument",
    "workspace_config",
]

log = logging.getLogger("triage.lightrag")

_MARKER = "_triage_lightrag_instrumentation"
_REQUIRED = ("ainsert", "aquery_data", "aquery_llm", "chunk_entity_relation_graph", "relationships_vdb")
RECENT_QUERIES = 2048  # queries whose retrieved edges are kept for persisting learned scores
#: LightRAG methods after which the graph changed (deletions, edits, custom KG): a graph event follows
GRAPH_EDITS = (
    "adelete_by_doc_id",
    "adelete_by_entity",
    "adelete_by_relation",
    "aedit_entity",
    "aedit_relation",
    "acreate_entity",
    "acreate_relation",
    "amerge_entities",
    "ainsert_custom_kg",
)


class UnknownQueryError(TriageError, LookupError):
    """Feedback names a query id this instrumentor never saw, or saw too long ago to remember."""


class GatedAnswer(str):
    """Kept for old imports only: answers are never wrapped any more (LightRAG's own types come
    back; the gate's decision is :meth:`LightRAGInstrumentor.gate_decision`)."""

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
    grounder: Any = None  # the graph's grounder when the query started (the event is built later)


@dataclass
class _Issued:
    """What the instrumentor remembers of a query id it handed out (bounded LRU)."""

    streaming: bool = False  # an answer stream is open: feedback waits for its end
    held: list[FeedbackEvent] = field(default_factory=list)
    answered: bool = False  # an answer built on the retrieval was (or is being) generated


def host_wait(budget: Any) -> float | None:
    """How long a query waits for a synchronous hook call: four per-plugin budgets, at least 1 s
    (``None``, no bound, when the budget is off). Long enough for the defaults to answer after one
    slow plugin was cut off; short enough that a hung plugin cannot hold a query."""
    if budget is None or not budget.enabled:
        return None
    return max(1.0, 4.0 * budget.seconds)


class LightRAGInstrumentor(IngestionHooks, RankingHooks, ScorePersistence, Instrumentor):
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
        self._issued: LRU[str, _Issued] = LRU(RECENT_QUERIES)
        self._decisions: LRU[str, GateDecision] = LRU(RECENT_QUERIES)
        self._processed: dict[str, tuple[str, tuple[str, ...]]] = {}  # doc id -> (track id, chunk ids)
        self._dirty: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()
        self._workspace = ""  # the instance's LightRAG workspace, read by instrument()

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

    @property
    def gate_mode(self) -> str:
        """``"off"`` (``config.gate`` false), ``"warn"`` (the default: record only) or ``"reroute"``."""
        from triage_plugins.adapter_kit import DEFAULT_GATE_MODE

        config = self.manager.config
        if not getattr(config, "gate", True):
            return "off"
        return str(config.options.get("gate.mode", DEFAULT_GATE_MODE))

    @property
    def namespace(self) -> str | None:
        """The scope of the store the learner reads and writes (``None``: the default scope)."""
        return self.manager.config.namespace

    # ------------------------------------------------------------------ lifecycle

    def instrument(
        self,
        host: Any = None,
        *,
        manager: TriageManager | None = None,
        store: Store | str | os.PathLike[str] | None = None,
        config: TriageConfig | None = None,
        reweight: bool | None = None,
        unit: str | None = None,
    ) -> Any:
        """The kit's :meth:`~triage_plugins.adapter_kit.Instrumentor.instrument`; a manager it creates
        (no ``manager=``) learns in the instance's workspace: ``config.namespace`` is joined with
        LightRAG's ``workspace`` (:func:`workspace_config`), so two workspaces on one store keep two
        learners. A manager passed in is used as is: scope it with ``TriageConfig(namespace=...)``."""
        target = host if host is not None else self.host
        self._workspace = str(getattr(target, "workspace", "") or "")
        return super().instrument(
            host, manager=manager, store=store, config=config, reweight=reweight, unit=unit
        )

    def _use_manager(
        self, manager: Any, store: Any, config: TriageConfig | None, reweight: bool | None, unit: str | None
    ) -> None:
        if manager is None:
            config = workspace_config(config, self._workspace)
        super()._use_manager(manager, store, config, reweight, unit)

    def uninstrument(self) -> None:
        """Remove our wrappers (LIFO-safe: a wrapper someone installed over ours stays, and ours
        under it becomes a pass-through), close an owned manager (stopping its worker thread).
        Feedback after this raises :class:`ConfigError`."""
        super().uninstrument()

    def _instrument(self, rag: Any) -> None:
        for name in _REQUIRED:
            if not hasattr(rag, name):
                raise ConfigError(
                    f"instrument() needs a LightRAG instance; {type(rag).__name__} has no {name!r}"
                )
        existing = getattr(rag, "__dict__", {}).get(_MARKER)
        if existing is not None and existing is not self:
            raise ConfigError("this LightRAG instance is already instrumented: uninstrument() that first")
        self._wrap_attribute(rag, "apipeline_process_enqueue_documents", self._make_process)
        self._wrap_attribute(rag.doc_status, "upsert", self._make_doc_status_upsert)
        for name in GRAPH_EDITS:
            if callable(getattr(rag, name, None)):
                self._wrap_attribute(rag, name, self._make_graph_edit)
        self._wrap_attribute(rag, "aquery_data", self._make_aquery_data)
        self._wrap_attribute(rag, "aquery_llm", self._make_aquery_llm)
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

    def feedback(
        self, query_id: str, score: float, source: str = "human", raw: str | int | float | None = None
    ) -> FeedbackEvent:
        """Send a score in [0, 1] for a query this instrumentor answered (kit's ``feedback``).

        Never a silent no-op:

        - not instrumented (or after :meth:`uninstrument`): raises :class:`ConfigError`;
        - an id this instrumentor never handed out, or one older than the last
          ``RECENT_QUERIES`` (2048) queries: raises :class:`UnknownQueryError` (the server answers 404);
        - a query whose answer stream is still open: the feedback is held and applied once the
          stream has been read to its end (or closed; then a warning says the answer is partial).
        """
        if not self._instrumented:
            raise ConfigError("feedback() on an instrumentor that is not instrumented (uninstrument()ed?)")
        issued = self._issued.get(query_id)
        if issued is None:
            raise UnknownQueryError(
                f"unknown or expired query id {query_id!r}: not among the last {RECENT_QUERIES} "
                "queries this instrumentor answered"
            )
        event = FeedbackEvent(self.framework, query_id, score, source, raw)  # type: ignore[arg-type]
        with self._lock:
            if issued.streaming:
                issued.held.append(event)
                return event
        self._defer("feedback event", self._emit_feedback, event)
        return event

    def knows_query(self, query_id: str) -> bool:
        """Whether ``query_id`` is a query this instrumentor answered recently (feedback accepted)."""
        return query_id in self._issued

    def answered(self, query_id: str) -> bool | None:
        """Whether ``query_id`` produced an answer built on its retrieval (``aquery_llm`` / ``aquery``,
        streamed or not; ``False`` for an ``aquery_data`` query or ``mode="bypass"``, which the
        feedback learner cannot credit); ``None`` for an id this instrumentor does not know."""
        issued = self._issued.get(query_id)
        return None if issued is None else issued.answered

    def awaiting_stream(self, query_id: str) -> bool:
        """Whether feedback for ``query_id`` is held until its answer stream ends."""
        issued = self._issued.get(query_id)
        return issued is not None and issued.streaming

    def gate_decisions(self) -> list[tuple[str, GateDecision]]:
        """(query id, decision) of the recent queries the gate decided, oldest first."""
        return self._decisions.items()

    def gate_decision(self, query_id: str) -> GateDecision | None:
        """The gate's decision for a query (after :meth:`flush` in ``warn`` mode, where the gate runs
        on the delivery worker); ``None`` when the gate is off or has not decided yet."""
        return self._decisions.get(query_id)

    def _release_held(self, query_id: str) -> None:
        issued = self._issued.get(query_id)
        if issued is None:
            return
        with self._lock:
            issued.streaming = False
            held, issued.held = issued.held, []
        for event in held:
            self._defer("feedback event", self._emit_feedback, event)

    # ------------------------------------------------------------------ queries

    def _begin(self, query: str) -> tuple[_QueryState, Any]:
        state = _QueryState(query=query, query_id=self._next_query_id(), grounder=self._grounder)
        if state.query_id not in self._issued:
            self._issued.put(state.query_id, _Issued())
        return state, self._state.set(state)

    def _make_aquery_data(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def aquery_data(query: str, param: Any = None, *args: Any, **kwargs: Any) -> Any:
            param = _param(param)
            with self._host_busy():  # the job is queued inside: held until the host goes idle
                await self._ensure_graph()
                result, state, seconds = await self._retrieve(original, query, param, *args, **kwargs)
                self._defer(
                    "retrieval event", self._emit_retrieval, state, param.mode, snapshot(result), seconds
                )
            return result

        return aquery_data

    def _make_aquery_llm(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def aquery_llm(query: str, param: Any = None, *args: Any, **kwargs: Any) -> Any:
            with self._query_scope(), self._host_busy():
                return await self._answer(original, query, _param(param), args, kwargs)

        return aquery_llm

    async def _answer(
        self, original: Callable[..., Any], query: str, param: Any, args: tuple, kwargs: dict
    ) -> Any:
        """Retrieval -> gate -> generation for ``aquery_llm`` (and ``aquery``/``query*`` through it).

        Default (gate ``warn`` or off): one pass through LightRAG's own ``aquery_llm``; the retrieval
        event is built from its payload and the gate is asked on the delivery worker, so nothing
        changes for the host. ``gate.mode = "reroute"`` (opt-in): retrieval runs first through
        ``aquery_data`` and the host waits for the gate (in a thread, under the hook budget); on a
        reroute LightRAG retrieves again with the suggestion, then answers with the keywords of
        that retrieval pinned in the ``QueryParam`` (no second keyword call).
        """
        if param.mode == "bypass":
            return await self._generate(original, query, param, args, kwargs, context="none")
        await self._ensure_graph()
        mode = self.gate_mode
        if mode != "reroute":
            return await self._generate(original, query, param, args, kwargs, gate=mode != "off")
        try:
            param = await self._retrieve_and_gate(query, param)
        except Exception as exc:  # noqa: BLE001 - fall back to LightRAG's own path
            self._failed("pre-answer retrieval", exc)
        return await self._generate(original, query, param, args, kwargs, emit=False)

    async def _retrieve_and_gate(self, query: str, param: Any) -> Any:
        """The opt-in synchronous gate: retrieve, ask the gate off the loop, reroute at most once."""
        data_fn = self._original(self.rag, "aquery_data")
        result, state, seconds = await self._retrieve(data_fn, query, param)
        decision = await self._off_loop(
            "gate", self._retrieval_and_gate, state, param.mode, snapshot(result), seconds
        )
        pinned = pin_keywords(param, result)
        if decision is None or decision.action != "reroute":
            return pinned
        rerouted = reroute(pinned, decision.suggestion)
        result, state, seconds = await self._retrieve(data_fn, query, rerouted)
        self._defer("retrieval event", self._emit_retrieval, state, rerouted.mode, snapshot(result), seconds)
        return rerouted

    async def _off_loop(self, what: str, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` in a thread, awaited at most :func:`host_wait` seconds (``None`` past it).

        A synchronous hook (gate, rerank) never blocks LightRAG's event loop. The manager already
        holds each plugin to its budget (a plugin over it has its answer discarded and is skipped for
        a cool-down, so the defaults answer); this wait only bounds a call that hangs: past it, the
        host goes on with its own order / proceeds, and the failure is counted.
        """
        timeout = host_wait(getattr(self._manager, "budget", None))
        call = asyncio.to_thread(self._guard, what, fn, *args)
        try:
            return await (call if timeout is None else asyncio.wait_for(call, timeout))
        except TimeoutError:
            self._failed(what, TimeoutError(f"no answer within {timeout:g} s; host order kept"))
            return None

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
        gate: bool = False,
        emit: bool = True,
        context: str = "retrieved",
    ) -> Any:
        """LightRAG's own ``aquery_llm``; events are built on the worker, the result is returned as is."""
        t0 = time.perf_counter()
        result, state, seconds = await self._retrieve(original, query, param, *args, **kwargs)
        if emit and context != "none":
            self._defer(
                "retrieval event", self._emit_retrieval, state, param.mode, snapshot(result), seconds, gate
            )
        llm_response = result.get("llm_response") if isinstance(result, dict) else None
        if not isinstance(llm_response, dict):
            return result
        issued = self._issued.get(state.query_id)
        if llm_response.get("is_streaming") and llm_response.get("response_iterator") is not None:
            if issued is not None:
                issued.streaming = True
                issued.answered = context == "retrieved"
            llm_response["response_iterator"] = self._stream(
                llm_response["response_iterator"], state.query_id, t0, context
            )
        elif isinstance(llm_response.get("content"), str):
            answer = llm_response["content"]
            if issued is not None:
                issued.answered = context == "retrieved"
            self._defer("generation event", self._emit_generation, state.query_id, answer, seconds, context)
        return result

    async def _stream(
        self, iterator: AsyncIterator[str], qid: str, t0: float, context: str
    ) -> AsyncIterator[str]:
        parts: list[str] = []
        finished = False
        try:
            async for piece in iterator:
                parts.append(str(piece))
                yield piece
            finished = True
        finally:
            seconds = time.perf_counter() - t0
            if not finished:
                log.warning(
                    "triage_lightrag: the answer stream of %s was closed before its end; its generation "
                    "event holds the part read (%d pieces) and held feedback applies to it", qid, len(parts),
                )  # fmt: skip
            self._defer("generation event", self._emit_generation, qid, "".join(parts), seconds, context)
            self._release_held(qid)

    # ------------------------------------------------------------------ events (built on the worker)

    def _mentions(
        self, query: str, low: Sequence[str], high: Sequence[str]
    ) -> tuple[list[str], dict[str, str | None]]:
        """M_q and γ_q of ``query`` (see :func:`triage_lightrag.translate.query_mentions`)."""
        return query_mentions(self._grounder, query, low, high)

    def _retrieval_event(self, state: _QueryState, mode: str, result: Any, seconds: float) -> Any:
        scored = state.entities_scored + state.relations_scored
        event = retrieval_event(state.query_id, state.query, mode, result, state.grounder, scored, seconds)
        self._recent.put(state.query_id, tuple([(t.id, t.subject, t.object) for t in event.subgraph.triples]))
        return event

    def _emit_retrieval(
        self, state: _QueryState, mode: str, result: Any, seconds: float, gate: bool = False
    ) -> None:
        """Emit the retrieval event; with ``gate``, ask the gate and record its decision (``warn``
        mode: on the worker, never acted on)."""
        event = self._retrieval_event(state, mode, result, seconds)
        self.manager.emit_retrieval(event)
        if gate:
            self._decisions.put(state.query_id, self.manager.gate(event))

    def _retrieval_and_gate(self, state: _QueryState, mode: str, result: Any, seconds: float) -> GateDecision:
        """The synchronous gate (``reroute`` mode), run in a thread: event, emit, decision."""
        event = self._retrieval_event(state, mode, result, seconds)
        self.manager.emit_retrieval(event)
        decision = self.manager.gate(event)
        self._decisions.put(state.query_id, decision)
        return decision

    def _emit_generation(self, qid: str, answer: str, seconds: float, context: str) -> None:
        mentions: tuple[str, ...] = ()
        grounding: dict[str, str | None] = {}
        if self._grounder is not None and answer:
            found = self._grounder.ground_answer(answer)
            mentions, grounding = tuple(found.mentions), dict(found.grounding)
        values = (FRAMEWORK, qid, answer, mentions, grounding, None, seconds, context)
        if _generation_checked(qid, answer, mentions, grounding, seconds, context):
            event = GenerationEvent.trusted(*values[:4], MappingProxyType(grounding), *values[5:])
        else:
            event = GenerationEvent(*values)  # type: ignore[arg-type]  # names what is wrong
        self.manager.emit_generation(event)


# ---------------------------------------------------------------------------- helpers


def workspace_config(config: TriageConfig | None, workspace: str) -> TriageConfig | None:
    """``config`` scoped to a LightRAG ``workspace``: its namespace joined with the workspace
    (``"<namespace>:<workspace>"``, or the workspace alone); unchanged for the default workspace ``""``,
    whose learner keeps the default scope (the store's unprefixed keys)."""
    if not workspace:
        return config
    from triage_plugins import TriageConfig
    from triage_plugins.adapter_kit import join_namespaces

    base = config or TriageConfig()
    return dataclasses.replace(base, namespace=join_namespaces(base.namespace, workspace))


def _generation_checked(
    qid: Any, answer: Any, mentions: tuple, grounding: dict[str, Any], seconds: Any, context: Any
) -> bool:
    """Whether a generation event's parts are in the form :meth:`GenerationEvent.trusted` takes
    (mentions and grounding come from one coalesced grounding: its keys are the mentions)."""
    return context in GENERATION_CONTEXTS and trusted_parts(qid, answer, mentions, grounding, seconds)


def _param(param: Any) -> Any:
    if param is not None:
        return param
    from lightrag import QueryParam

    return QueryParam()


def instrument(rag: Any, **options: Unpack[InstrumentOptions]) -> LightRAGInstrumentor:
    """Instrument an initialized ``LightRAG`` instance; returns its :class:`LightRAGInstrumentor`.

    Instrumenting an instance twice returns the existing instrumentor when the settings are the
    same, and raises :class:`ConfigError` when they differ. ``options`` are those of
    :meth:`~triage_plugins.adapter_kit.Instrumentor.instrument` (``manager``, ``store``, ``config``,
    ``reweight``, ``unit``) with its manager policy: a ``manager`` passed in is used as is and never
    closed; without one, an owned manager over ``store``, learning in the scope of ``rag.workspace``
    (:meth:`LightRAGInstrumentor.instrument`). ``reweight`` writes contribution scores
    back into LightRAG's ranking (default: the manager's ``config.reweight``; off, answers are
    unchanged); ``unit`` is ``"triple"`` (local and global relation order) or ``"chunk"``.
    """
    existing = getattr(rag, "__dict__", {}).get(_MARKER)
    if isinstance(existing, LightRAGInstrumentor) and existing.is_instrumented:
        return existing.instrument(rag, **options)  # the same settings, or ConfigError
    return LightRAGInstrumentor().instrument(rag, **options)
