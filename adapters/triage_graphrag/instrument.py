"""Instrumentation of GraphRAG 3.3: indexing, queries (retrieval, gate, generation) and feedback.

GraphRAG is driven through functions (``graphrag.api.build_index`` / ``local_search`` /
``global_search`` / ``drift_search`` / ``basic_search``), so there is no instance to wrap:
:class:`GraphRAGInstrumentor` (the adapter's :class:`~triage_plugins.adapter_kit.Instrumentor`)
holds the manager, and while it is instrumented the engine factories ``graphrag.api`` uses are
hooked (:mod:`triage_graphrag.hooks`). Learning with plain ``graphrag.api`` calls::

    inst = instrument(store="triage.sqlite", reweight=True)       # the switch
    cb = inst.query_callbacks(question, entities, relationships, text_units, communities)
    response, context = await graphrag.api.local_search(..., query=question, callbacks=[cb])
    inst.feedback(cb.query_id, 0.0)                               # the next search ranks differently
    inst.uninstrument()

``cb`` works for every ``graphrag.api`` search; the kind of search is learnt from the engine
GraphRAG builds, and with reweighting on that engine's ranking follows the learned priorities
(:func:`triage_graphrag.reweight.prepare_engine`: triplet and chunk level for local search and
DRIFT's local steps, report weights for global search). Before any feedback changes an order, the
context is byte-identical to plain GraphRAG's. The observed wrappers :meth:`~GraphRAGInstrumentor.local_search`
/ :meth:`~GraphRAGInstrumentor.global_search` take ``graphrag.api``'s parameters and return its
``(response, context)`` as a :class:`SearchResult` that also carries ``query_id``, the retrieval
event and the gate decision; :meth:`~GraphRAGInstrumentor.observe_index` observes indexing and
``graphrag update`` runs (:mod:`triage_graphrag.indexing`).

From ``on_context`` (called by local and basic search before the answer is generated, by global
search after the map step, by each DRIFT action) a **retrieval** event is built
(:func:`triage_graphrag.translate.retrieval_event`); DRIFT's action contexts are merged into one
event, emitted when its reduce step starts. The gate (``manager.gate``) is asked synchronously;
GraphRAG cannot be rerouted from a callback, so a ``warn``/``reroute`` decision is logged and
returned on the result for the caller to act on. The **generation** event is the response (the
streamed tokens, emitted at the query's feedback when the caller did not call ``cb.generation``).

The module-level functions (:func:`observe_index`, :func:`local_search`, :func:`global_search`,
:func:`query_callbacks`, :func:`feedback`) are the former API, kept as thin wrappers over a
``GraphRAGInstrumentor`` for the given ``manager`` (without one: the process-wide
:func:`~triage_plugins.runtime.manager.default_manager`, or a manager for ``store`` that lives as
long as the call — learning from feedback needs one manager across the queries and their feedback).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Unpack

from triage_graphrag import indexing
from triage_graphrag.translate import FRAMEWORK, GraphTables, generation_event, retrieval_event
from triage_plugins import ConfigError, FeedbackEvent, GateDecision, GenerationEvent, RetrievalEvent
from triage_plugins.adapter_kit.instrumentor import InstrumentOptions, Instrumentor
from triage_plugins.adapter_kit.lru import LRU

if TYPE_CHECKING:
    import pandas as pd

    from triage_plugins import TriageManager
    from triage_plugins.adapter_kit import Store

__all__ = [
    "FRAMEWORK",
    "GraphRAGInstrumentor",
    "SearchResult",
    "feedback",
    "global_search",
    "graph_tables",
    "instrument",
    "local_search",
    "manager_for",
    "observe_index",
    "query_callbacks",
]

log = logging.getLogger("triage.graphrag")

TABLES_KEPT = 4  # sets of frames whose GraphTables are kept
PENDING_KEPT = 256  # queries whose generation event may still come from their streamed tokens


class SearchResult(tuple):
    """``(response, context)`` as ``graphrag.api`` returns it, plus the triage view of the query.

    :ivar query_id: the id joining retrieval, generation and feedback.
    :ivar retrieval: the retrieval event (``None`` when GraphRAG built no context).
    :ivar gate: the gate's decision (``proceed`` when no plugin decides).
    """

    query_id: str
    retrieval: RetrievalEvent | None
    gate: GateDecision | None

    def __new__(
        cls, response: Any, context: Any, query_id: str, retrieval: Any = None, gate: Any = None
    ) -> SearchResult:
        self = super().__new__(cls, (response, context))
        self.query_id = query_id
        self.retrieval = retrieval
        self.gate = gate
        return self

    @property
    def response(self) -> Any:
        return self[0]

    @property
    def context(self) -> Any:
        return self[1]


_tables: LRU[tuple[int, ...], tuple[tuple[Any, ...], GraphTables]] = LRU(TABLES_KEPT)


def graph_tables(
    entities: pd.DataFrame,
    relationships: pd.DataFrame | None,
    text_units: pd.DataFrame | None = None,
    communities: pd.DataFrame | None = None,
) -> GraphTables:
    """The :class:`GraphTables` of these frames, built once per set of frame objects."""
    import pandas as pd

    frames = (entities, relationships, text_units, communities)
    key = tuple(id(f) for f in frames)
    hit = _tables.get(key)
    if hit is not None and all(a is b for a, b in zip(hit[0], frames, strict=True)):
        return hit[1]
    rels = relationships if relationships is not None else pd.DataFrame(columns=["source", "target"])
    tables = GraphTables.from_frames(entities, rels, text_units, communities)
    _tables.put(key, (frames, tables))
    return tables


# --------------------------------------------------------------------------- query callbacks


class _QueryRecorder:
    """The triage side of one query's callbacks (kept apart from GraphRAG's class, built lazily)."""

    def __init__(
        self,
        manager: TriageManager,
        tables: GraphTables,
        query: str,
        query_id: str,
        retriever: str,
        reweight: bool = False,
        top_k_reports: int | None = None,
    ) -> None:
        self.manager = manager
        self.tables = tables
        self.query = query
        self.query_id = query_id
        self.retriever = retriever
        self.reweight = reweight
        self.top_k_reports = top_k_reports
        self.started = time.perf_counter()
        self.retrieval: RetrievalEvent | None = None
        self.decision: GateDecision | None = None
        self.tokens: list[str] = []
        self.generated = False
        self.drift_contexts: list[Any] = []  # DRIFT: one local context per action, one event per query

    def engine_built(self, kind: str, engine: Any) -> None:
        """GraphRAG's factory built the engine of this query (:mod:`triage_graphrag.hooks`)."""
        self.retriever = kind
        if not self.reweight:
            return
        try:
            from triage_graphrag.reweight import prepare_engine

            prepare_engine(
                kind, engine, self.manager, self.query, self.query_id, self.tables, self.top_k_reports
            )
        except Exception as exc:  # noqa: BLE001 - GraphRAG then runs with its own ranking
            log.warning("triage reweighting of the %s search skipped: %s", kind, exc, exc_info=exc)

    def on_context(self, context: Any) -> None:
        if self.retriever == "drift":  # every DRIFT action builds a local context: keep them
            self.drift_contexts.append(context)
            return
        self._retrieval(context)

    def drift_done(self) -> None:
        """DRIFT's actions are done (its reduce step starts): one retrieval event for all of them."""
        if self.retriever == "drift" and self.retrieval is None:
            self._retrieval(list(self.drift_contexts))

    def _retrieval(self, context: Any) -> None:
        try:
            seconds = time.perf_counter() - self.started
            event = retrieval_event(self.tables, context, self.query, self.query_id, self.retriever, seconds)
            self.retrieval = event
            # gate first, then queue the notification: the worker it wakes then competes for the
            # GIL with the LLM call that follows, not with the host's context building
            self.decision = self.manager.gate(event)
            self.manager.emit_retrieval(event)
            if self.decision.action != "proceed":
                log.warning(
                    "triage gate: %s for query %s (%s)",
                    self.decision.action,
                    self.query_id,
                    self.decision.reason,
                )
        except Exception as exc:  # noqa: BLE001 - instrumentation never breaks the host
            log.warning("triage retrieval event for query %s failed: %s", self.query_id, exc, exc_info=exc)
        self.started = time.perf_counter()  # generation time starts here

    def generation(self, response: Any) -> GenerationEvent | None:
        """Emit the generation event for ``response`` (the streamed tokens when ``None``); once per query."""
        if self.generated:
            return None
        self.drift_done()
        self.generated = True
        try:
            if isinstance(response, str):
                answer = response
            else:
                answer = "".join(self.tokens) if response is None else str(response)
            event = generation_event(self.tables, self.query_id, answer, time.perf_counter() - self.started)
            self.manager.emit_generation(event)
            return event
        except Exception as exc:  # noqa: BLE001
            log.warning("triage generation event for query %s failed: %s", self.query_id, exc, exc_info=exc)
            return None


_CALLBACKS_CLASS: type | None = None


def _callbacks_class() -> type:
    global _CALLBACKS_CLASS
    if _CALLBACKS_CLASS is None:
        from graphrag.callbacks.noop_query_callbacks import NoopQueryCallbacks

        class TriageQueryCallbacks(NoopQueryCallbacks):
            """GraphRAG ``QueryCallbacks`` emitting triage events; call :meth:`generation` with the response."""

            def __init__(self, recorder: _QueryRecorder) -> None:
                self.triage = recorder

            @property
            def query_id(self) -> str:
                return self.triage.query_id

            def on_context(self, context: Any) -> None:
                self.triage.on_context(context)

            def triage_engine_built(self, kind: str, engine: Any) -> None:
                self.triage.engine_built(kind, engine)

            def on_llm_new_token(self, token: Any) -> None:
                self.triage.tokens.append(str(token))

            def on_reduce_response_start(self, reduce_response_context: Any) -> None:
                self.triage.drift_done()

            def on_reduce_response_end(self, reduce_response_output: str) -> None:
                self.triage.generation(reduce_response_output)

            def generation(self, response: Any = None) -> GenerationEvent | None:
                return self.triage.generation(response)

        _CALLBACKS_CLASS = TriageQueryCallbacks
    return _CALLBACKS_CLASS


# --------------------------------------------------------------------------- the instrumentor


class GraphRAGInstrumentor(Instrumentor):
    """Instrumentor of GraphRAG's indexing and searches (see the module docstring and the kit's base)."""

    framework = FRAMEWORK

    def instrumentation_dependencies(self) -> Collection[str]:
        return ("graphrag >= 3.3, < 3.4",)

    def _instrument(self, host: Any) -> None:
        if host is not None:
            raise ConfigError("GraphRAG has no instance to instrument: call instrument() without one")
        from triage_graphrag import hooks

        self._pending: LRU[str, _QueryRecorder] = LRU(PENDING_KEPT)
        self._migrated: set[int] = set()
        self._on_uninstrument(hooks.acquire())

    def observe_index(
        self, config_or_root: Any, *, logprobs: bool = True, method: str = "standard"
    ) -> indexing.IndexObservation:
        """Observe an indexing run (:func:`triage_graphrag.indexing.observe`); closed by uninstrument().

        For ``build_index(..., is_update_run=True)`` (``graphrag update``) pass ``method="standard-update"``.
        """
        obs = indexing.observe(config_or_root, self.manager, logprobs=logprobs, method=method)
        self._on_uninstrument(obs.close)
        return obs

    def query_callbacks(
        self,
        query: str,
        entities: pd.DataFrame,
        relationships: pd.DataFrame | None,
        text_units: pd.DataFrame | None = None,
        communities: pd.DataFrame | None = None,
        *,
        retriever: str = "local",
        query_id: str | None = None,
        top_k_reports: int | None = None,
    ) -> Any:
        """GraphRAG ``QueryCallbacks`` for one query; pass them in ``callbacks=[...]`` of any ``graphrag.api`` search.

        The search's kind (local, global, DRIFT, basic) is learnt from the engine GraphRAG builds; with
        reweighting on, that engine's ranking follows the learned priorities (:mod:`triage_graphrag.hooks`).
        The generation event is the streamed answer, emitted at :meth:`feedback` for this query (or
        call ``cb.generation(response)`` yourself; once per query). ``cb.query_id`` is the id for
        :meth:`feedback` (``query_id``, else the current ``query()`` block's, else a fresh one).

        :param top_k_reports: with reweighting, global search keeps only this many reports (best P first).
        """
        tables = graph_tables(entities, relationships, text_units, communities)
        self._carry_over(tables)
        qid = query_id or self._next_query_id()
        recorder = _QueryRecorder(
            self.manager, tables, query, qid, retriever, reweight=self.reweight, top_k_reports=top_k_reports
        )
        self._pending.put(qid, recorder)
        return _callbacks_class()(recorder)

    def _carry_over(self, tables: GraphTables) -> None:
        """Carry scores of old-style triple keys over to these tables' keys (once per set of tables)."""
        if id(tables) in self._migrated:
            return
        self._migrated.add(id(tables))
        from triage_graphrag.translate import migrate_legacy_scores

        self._guard(
            "carrying old-style triple scores over", migrate_legacy_scores, self.manager, tables.triples
        )

    def feedback(
        self, query_id: str, score: float, source: str = "human", raw: str | int | float | None = None
    ) -> FeedbackEvent:
        """Send a score in [0, 1] for an answered query; a search run through ``graphrag.api`` with
        :meth:`query_callbacks` gets its generation event (the streamed answer) first."""
        recorder = self._pending.get(query_id) if self.is_instrumented else None
        if recorder is not None:
            recorder.generation(None)
        return super().feedback(query_id, score, source, raw)

    async def local_search(
        self,
        config: Any,
        entities: pd.DataFrame,
        communities: pd.DataFrame,
        community_reports: pd.DataFrame,
        text_units: pd.DataFrame,
        relationships: pd.DataFrame,
        covariates: pd.DataFrame | None,
        community_level: int,
        response_type: str,
        query: str,
        callbacks: list[Any] | None = None,
        verbose: bool = False,
        *,
        query_id: str | None = None,
    ) -> SearchResult:
        """``graphrag.api.local_search`` with :meth:`query_callbacks`; with reweighting the context follows P.

        With reweighting, the engine's context builder ranks relationships (triplet level) and text
        units (chunk level) by P; with reweighting off, or before any feedback changes an order,
        GraphRAG runs unchanged.
        """
        from graphrag import api

        cb = self.query_callbacks(query, entities, relationships, text_units, communities, query_id=query_id)
        response, context = await api.local_search(
            config=config, entities=entities, communities=communities,
            community_reports=community_reports, text_units=text_units, relationships=relationships,
            covariates=covariates, community_level=community_level, response_type=response_type,
            query=query, callbacks=[*(callbacks or []), cb], verbose=verbose,
        )  # fmt: skip
        cb.generation(response)
        return SearchResult(response, context, cb.query_id, cb.triage.retrieval, cb.triage.decision)

    async def global_search(
        self,
        config: Any,
        entities: pd.DataFrame,
        communities: pd.DataFrame,
        community_reports: pd.DataFrame,
        community_level: int | None,
        dynamic_community_selection: bool,
        response_type: str,
        query: str,
        callbacks: list[Any] | None = None,
        verbose: bool = False,
        *,
        relationships: pd.DataFrame | None = None,
        text_units: pd.DataFrame | None = None,
        query_id: str | None = None,
        top_k_reports: int | None = None,
    ) -> SearchResult:
        """``graphrag.api.global_search`` with :meth:`query_callbacks`; with reweighting the reports follow P.

        :param relationships: the ``relationships`` table — global search itself does not take it, but
            without it the reports cannot be mapped to triples (K_S stays empty) or reweighted.
        :param text_units: the ``text_units`` table, to report the reports' chunks.
        :param top_k_reports: with reweighting, keep only this many reports (best P first).
        """
        from graphrag import api

        cb = self.query_callbacks(
            query, entities, relationships, text_units, communities, retriever="global",
            query_id=query_id, top_k_reports=top_k_reports,
        )  # fmt: skip
        if relationships is None:
            cb.triage.reweight = False  # no triples to weigh the reports by
        response, context = await api.global_search(
            config=config, entities=entities, communities=communities,
            community_reports=community_reports, community_level=community_level,
            dynamic_community_selection=dynamic_community_selection, response_type=response_type,
            query=query, callbacks=[*(callbacks or []), cb], verbose=verbose,
        )  # fmt: skip
        cb.generation(response)
        return SearchResult(response, context, cb.query_id, cb.triage.retrieval, cb.triage.decision)


def instrument(**options: Unpack[InstrumentOptions]) -> GraphRAGInstrumentor:
    """A new, instrumented :class:`GraphRAGInstrumentor` (``options`` and manager policy: the kit's)."""
    return GraphRAGInstrumentor().instrument(**options)


# --------------------------------------------------------------------------- the former function API

_warned_store = False


def manager_for(
    store: Store | str | os.PathLike[str] | None = None, manager: TriageManager | None = None
) -> TriageManager:
    """``manager`` if given; else the process-wide default manager when no ``store`` is given; else a
    new manager over ``store`` (no longer cached: keep the one you get for queries and feedback)."""
    if manager is not None:
        return manager
    from triage_plugins import TriageManager
    from triage_plugins.adapter_kit import default_manager

    return default_manager() if store is None else TriageManager(store=store)


def _for_call(manager: TriageManager | None, store: Any) -> GraphRAGInstrumentor:
    """The instrumentor one former-API call runs with (owned manager only for ``store`` alone)."""
    global _warned_store
    if manager is None and store is None:
        from triage_plugins.adapter_kit import default_manager

        manager = default_manager()
    if manager is None and not _warned_store:
        _warned_store = True
        log.warning(
            "triage_graphrag: store= without manager= opens a manager for this call only; learning from "
            "feedback needs one manager for the queries and their feedback (pass manager=, or use "
            "GraphRAGInstrumentor)"
        )
    return GraphRAGInstrumentor().instrument(manager=manager, store=store)


def observe_index(
    config_or_root: Any,
    *,
    store: Store | str | os.PathLike[str] | None = None,
    manager: TriageManager | None = None,
    logprobs: bool = True,
    method: str = "standard",
) -> indexing.IndexObservation:
    """Instrument a GraphRAG indexing run (``graphrag.api.build_index``).

    ::

        obs = observe_index(config, store="triage.sqlite")
        await graphrag.api.build_index(obs.config, callbacks=obs.callbacks)

    :param config_or_root: a ``GraphRagConfig`` (not modified) or a project root with settings.yaml.
    :param store: where events are recorded when no ``manager`` is given (that manager is closed by
        ``obs.close()``, else flushed at exit).
    :param manager: the :class:`~triage_plugins.runtime.manager.TriageManager` to emit to.
    :param logprobs: wrap the extraction model to record token log-probabilities.
    :param method: the indexing method whose pipeline is observed (``"standard"``, ``"fast"``,
        ``"standard-update"`` ...), used when the config names no ``workflows`` of its own.
    """
    if manager is None and store is None:
        from triage_plugins.adapter_kit import default_manager

        manager = default_manager()
    inst = GraphRAGInstrumentor().instrument(manager=manager, store=store)
    obs = inst.observe_index(config_or_root, logprobs=logprobs, method=method)
    obs.on_close.append(inst.uninstrument)
    return obs


def query_callbacks(
    query: str,
    entities: pd.DataFrame,
    relationships: pd.DataFrame | None,
    text_units: pd.DataFrame | None = None,
    communities: pd.DataFrame | None = None,
    *,
    retriever: str = "local",
    query_id: str | None = None,
    manager: TriageManager | None = None,
    store: Store | str | os.PathLike[str] | None = None,
) -> Any:
    """:meth:`GraphRAGInstrumentor.query_callbacks` for ``manager``."""
    inst = _for_call(manager, store)
    return inst.query_callbacks(
        query, entities, relationships, text_units, communities, retriever=retriever, query_id=query_id
    )


async def _search(
    method: str, manager: TriageManager | None, store: Any, args: tuple, kwargs: dict
) -> SearchResult:
    inst = _for_call(manager, store)
    try:
        return await getattr(inst, method)(*args, **kwargs)
    finally:
        if inst.owns_manager:
            inst.uninstrument()


async def local_search(
    *args: Any, manager: TriageManager | None = None, store: Any = None, **kwargs: Any
) -> SearchResult:
    """:meth:`GraphRAGInstrumentor.local_search` for ``manager`` (``graphrag.api.local_search``'s parameters)."""
    return await _search("local_search", manager, store, args, kwargs)


async def global_search(
    *args: Any, manager: TriageManager | None = None, store: Any = None, **kwargs: Any
) -> SearchResult:
    """:meth:`GraphRAGInstrumentor.global_search` for ``manager`` (``graphrag.api.global_search``'s parameters)."""
    return await _search("global_search", manager, store, args, kwargs)


def feedback(
    query_id: str,
    score: float,
    *,
    manager: TriageManager | None = None,
    store: Store | str | os.PathLike[str] | None = None,
    source: str = "human",
) -> FeedbackEvent:
    """Send a score in [0, 1] for an answered query (EvoRAG §4.1); returns the emitted event."""
    inst = _for_call(manager, store)
    try:
        return inst.feedback(query_id, score, source=source)
    finally:
        if inst.owns_manager:
            inst.uninstrument()
