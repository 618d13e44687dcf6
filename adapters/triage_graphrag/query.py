"""Query instrumentation for GraphRAG 3.3: retrieval, gate, generation and feedback events.

:func:`local_search` and :func:`global_search` take the parameters of ``graphrag.api``'s functions
of the same name (plus keyword-only triage options) and return what they return — a
``(response, context)`` pair — as a :class:`SearchResult` that also carries ``query_id``, the
retrieval event and the gate decision. Or pass :func:`query_callbacks` to GraphRAG yourself.

From ``on_context`` (called by local search before the answer is generated, by global search
after the map step and before the reduce step) a **retrieval** event is built: the short ids of the
context tables are mapped back to stable ids (:mod:`triage_graphrag.tables`) — local search gives
entities (V_S), relationships (K_S) and sources (chunks, in context order); global search gives
reports, whose communities' relationships and text units become K_S and the chunks. Mentions and
their grounding come from the default grounder over entity titles (TRIAGE §4.3.1). The gate
(``manager.gate``) is asked synchronously; GraphRAG cannot be rerouted from a callback, so a
``warn``/``reroute`` decision is logged and returned on the result for the caller to act on. The
**generation** event follows the response; :func:`feedback` sends a score for a query id.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from triage_graphrag.tables import FRAMEWORK, GraphTables
from triage_plugins.contract.events import (
    FeedbackEvent,
    GateDecision,
    GenerationEvent,
    RetrievalEvent,
    Subgraph,
)

if TYPE_CHECKING:
    import pandas as pd

    from triage_plugins.runtime.manager import TriageManager
    from triage_plugins.store import Store

__all__ = [
    "SearchResult",
    "feedback",
    "global_search",
    "graph_tables",
    "local_search",
    "manager_for",
    "query_callbacks",
]

log = logging.getLogger("triage.graphrag.query")


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


# --------------------------------------------------------------------------- tables cache

_cache: list[tuple[tuple[int, ...], tuple[Any, ...], GraphTables]] = []
_cache_lock = threading.Lock()
_CACHE_SIZE = 4


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
    with _cache_lock:
        for k, held, tables in _cache:
            if k == key and all(a is b for a, b in zip(held, frames, strict=True)):
                return tables
    rels = relationships if relationships is not None else pd.DataFrame(columns=["source", "target"])
    tables = GraphTables.from_frames(entities, rels, text_units, communities)
    with _cache_lock:
        _cache.insert(0, (key, frames, tables))
        del _cache[_CACHE_SIZE:]
    return tables


_managers: dict[str, TriageManager] = {}


def manager_for(
    store: Store | str | os.PathLike[str] | None = None, manager: TriageManager | None = None
) -> TriageManager:
    """``manager`` if given; else one manager per store (created once, reused by later calls); else the default."""
    if manager is not None:
        return manager
    from triage_plugins.runtime.manager import TriageManager, default_manager

    if store is None:
        return default_manager()
    key = f"store:{id(store)}" if hasattr(store, "record_event") else f"path:{os.fspath(store)}"
    with _cache_lock:
        found = _managers.get(key)
        if found is None:
            found = _managers[key] = TriageManager(store=store)
        return found


def _manager(manager: TriageManager | None, store: Store | str | os.PathLike[str] | None) -> TriageManager:
    return manager_for(store, manager)


# --------------------------------------------------------------------------- callbacks


def _rows(context: Any, name: str, *columns: str) -> list[tuple[Any, ...]]:
    """The given columns of a context table, rows left out of the context (``in_context`` False) dropped.

    Column-wise ``tolist`` rather than ``to_dict("records")``: this runs on the host's query path.
    """
    if not isinstance(context, dict):
        return []
    frame = context.get(name)
    if frame is None or not hasattr(frame, "columns") or len(frame) == 0:
        return []
    n = len(frame)
    cols = [frame[c].tolist() if c in frame.columns else [None] * n for c in columns]
    keep = frame["in_context"].tolist() if "in_context" in frame.columns else [True] * n
    return [row for row, k in zip(zip(*cols, strict=True), keep, strict=True) if k is not False]


def _short(value: Any) -> str:
    text = str(value).strip()
    try:
        return str(int(float(text)))
    except ValueError:
        return text


class _Recorder:
    """The triage side of the query callbacks (kept apart from GraphRAG's class, which is built lazily)."""

    def __init__(
        self, manager: TriageManager, tables: GraphTables, query: str, query_id: str, retriever: str
    ) -> None:
        self.manager = manager
        self.tables = tables
        self.query = query
        self.query_id = query_id
        self.retriever = retriever
        self.started = time.perf_counter()
        self.retrieval: RetrievalEvent | None = None
        self.decision: GateDecision | None = None
        self.tokens: list[str] = []
        self.generated = False

    def retrieval_event(self, context: Any) -> RetrievalEvent:
        t = self.tables
        seconds = time.perf_counter() - self.started
        triples: dict[str, Any] = {}
        nodes: list[str] = []
        chunk_ids: list[str] = []
        if self.retriever == "global":
            for (short,) in _rows(context, "reports", "id"):
                key = _short(short)
                triples.update((i, t.triples[i]) for i in t.community_triples.get(key, ()) if i in t.triples)
                chunk_ids.extend(t.community_units.get(key, ()))
        else:
            for short, title in _rows(context, "entities", "id", "entity"):
                title = str(title or t.entity_by_short.get(_short(short), "")).strip()
                if title:
                    nodes.append(title)
            for short, source, target in _rows(context, "relationships", "id", "source", "target"):
                tid = t.by_short.get(_short(short)) or t.by_pair.get((str(source), str(target)))
                if tid is not None:
                    triples[tid] = t.triples[tid]
            for (short,) in _rows(context, "sources", "id"):
                uid = t.unit_by_short.get(_short(short))
                if uid is not None:
                    chunk_ids.append(uid)
        chunks = tuple(t.chunks[c] for c in dict.fromkeys(chunk_ids) if c in t.chunks)
        grounding = t.grounder.ground(self.query)
        return RetrievalEvent(
            FRAMEWORK,
            self.query_id,
            self.query,
            grounding.mentions,
            dict(grounding.grounding),
            Subgraph(tuple(triples.values()), tuple(dict.fromkeys(nodes))),
            (),
            chunks,
            None,
            "GraphRAG does not report how many entities its search scored",
            seconds,
            self.retriever,
        )

    def on_context(self, context: Any) -> None:
        try:
            event = self.retrieval_event(context)
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
        self.generated = True
        try:
            answer = (
                response
                if isinstance(response, str)
                else ("".join(self.tokens) if response is None else str(response))
            )
            grounding = self.tables.grounder.ground(answer)
            event = GenerationEvent(
                FRAMEWORK,
                self.query_id,
                answer,
                grounding.mentions,
                dict(grounding.grounding),
                None,
                time.perf_counter() - self.started,
            )
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

            def __init__(self, recorder: _Recorder) -> None:
                self.triage = recorder

            @property
            def query_id(self) -> str:
                return self.triage.query_id

            def on_context(self, context: Any) -> None:
                self.triage.on_context(context)

            def on_llm_new_token(self, token: Any) -> None:
                self.triage.tokens.append(str(token))

            def on_reduce_response_end(self, reduce_response_output: str) -> None:
                self.triage.generation(reduce_response_output)

            def generation(self, response: Any = None) -> GenerationEvent | None:
                return self.triage.generation(response)

        _CALLBACKS_CLASS = TriageQueryCallbacks
    return _CALLBACKS_CLASS


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
    """GraphRAG ``QueryCallbacks`` for one query; pass them in ``callbacks=[...]`` of any ``graphrag.api`` search.

    After the search, call ``cb.generation(response)``: GraphRAG 3.3 has no end-of-answer callback (a
    later version calling ``on_reduce_response_end`` is handled, once). ``cb.query_id`` is the id
    for :func:`feedback`.
    """
    tables = graph_tables(entities, relationships, text_units, communities)
    recorder = _Recorder(_manager(manager, store), tables, query, query_id or uuid.uuid4().hex, retriever)
    return _callbacks_class()(recorder)


# --------------------------------------------------------------------------- searches


async def local_search(
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
    manager: TriageManager | None = None,
    store: Store | str | os.PathLike[str] | None = None,
    query_id: str | None = None,
) -> SearchResult:
    """``graphrag.api.local_search``, observed; with ``manager.config.reweight`` the context follows P.

    Reweighting (see :mod:`triage_graphrag.reweight`) rewrites ``combined_degree`` in a copy of
    ``relationships`` (triplet level) and builds the engine with the P-ordered text-unit context
    (chunk level); with reweighting off, or when no plugin answers, GraphRAG runs unchanged.
    """
    from graphrag import api

    mgr = _manager(manager, store)
    cb = query_callbacks(
        query, entities, relationships, text_units, communities, query_id=query_id, manager=mgr
    )
    tables = cb.triage.tables
    user_callbacks = list(callbacks or [])
    rels = relationships
    if mgr.config.reweight:
        from triage_graphrag.reweight import reweight_relationships

        try:
            rels = reweight_relationships(relationships, tables, mgr, query, cb.query_id)
        except Exception as exc:  # noqa: BLE001
            log.warning("triplet reweighting skipped: %s", exc)
            rels = None
        rels = relationships if rels is None else rels
        response, context = await _local_reweighted(
            config, entities, communities, community_reports, text_units, rels, covariates,
            community_level, response_type, query, [*user_callbacks, cb], verbose, mgr, cb.query_id,
        )  # fmt: skip
    else:
        response, context = await api.local_search(
            config=config,
            entities=entities,
            communities=communities,
            community_reports=community_reports,
            text_units=text_units,
            relationships=relationships,
            covariates=covariates,
            community_level=community_level,
            response_type=response_type,
            query=query,
            callbacks=[*user_callbacks, cb],
            verbose=verbose,
        )
    cb.generation(response)
    return SearchResult(response, context, cb.query_id, cb.triage.retrieval, cb.triage.decision)


async def _local_reweighted(
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
    callbacks: list[Any],
    verbose: bool,
    manager: TriageManager,
    query_id: str,
) -> tuple[Any, Any]:
    """``graphrag.api.local_search`` (3.3) step by step, with the engine's context builder replaced."""
    from graphrag.callbacks.noop_query_callbacks import NoopQueryCallbacks
    from graphrag.config.embeddings import entity_description_embedding
    from graphrag.logger.standard_logging import init_loggers
    from graphrag.query.factory import get_local_search_engine
    from graphrag.query.indexer_adapters import (
        read_indexer_covariates,
        read_indexer_entities,
        read_indexer_relationships,
        read_indexer_reports,
        read_indexer_text_units,
    )
    from graphrag.utils.api import get_embedding_store, load_search_prompt

    from triage_graphrag.reweight import mixed_context_class

    init_loggers(config=config, verbose=verbose, filename="query.log")
    context_data: dict[str, Any] = {}

    class _Collect(NoopQueryCallbacks):
        def on_context(self, context: Any) -> None:
            context_data.clear()
            context_data.update(context)

    engine = get_local_search_engine(
        config=config,
        reports=read_indexer_reports(community_reports, communities, community_level),
        text_units=read_indexer_text_units(text_units),
        entities=read_indexer_entities(entities, communities, community_level),
        relationships=read_indexer_relationships(relationships),
        covariates={"claims": read_indexer_covariates(covariates) if covariates is not None else []},
        description_embedding_store=get_embedding_store(
            config=config.vector_store, embedding_name=entity_description_embedding
        ),
        response_type=response_type,
        system_prompt=load_search_prompt(config.local_search.prompt),
        callbacks=[*callbacks, _Collect()],
    )
    engine.context_builder = mixed_context_class().from_builder(engine.context_builder, manager, query_id)
    response = ""
    async for chunk in engine.stream_search(query=query):
        response += chunk
    return response, dict(context_data)


async def global_search(
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
    manager: TriageManager | None = None,
    store: Store | str | os.PathLike[str] | None = None,
    query_id: str | None = None,
    top_k_reports: int | None = None,
) -> SearchResult:
    """``graphrag.api.global_search``, observed; with ``manager.config.reweight`` reports follow P.

    :param relationships: the ``relationships`` table — global search itself does not take it, but
        without it the reports cannot be mapped to triples (K_S stays empty) or reweighted.
    :param text_units: the ``text_units`` table, to report the reports' chunks.
    :param top_k_reports: with reweighting, keep only this many reports (best P first).
    """
    from graphrag import api

    mgr = _manager(manager, store)
    cb = query_callbacks(
        query,
        entities,
        relationships,
        text_units,
        communities,
        retriever="global",
        query_id=query_id,
        manager=mgr,
    )
    user_callbacks = list(callbacks or [])
    if mgr.config.reweight and relationships is not None and not dynamic_community_selection:
        response, context = await _global_reweighted(
            config, entities, communities, community_reports, community_level, response_type, query,
            [*user_callbacks, cb], verbose, mgr, cb.triage.tables, top_k_reports,
        )  # fmt: skip
    else:
        response, context = await api.global_search(
            config=config,
            entities=entities,
            communities=communities,
            community_reports=community_reports,
            community_level=community_level,
            dynamic_community_selection=dynamic_community_selection,
            response_type=response_type,
            query=query,
            callbacks=[*user_callbacks, cb],
            verbose=verbose,
        )
    cb.generation(response)
    return SearchResult(response, context, cb.query_id, cb.triage.retrieval, cb.triage.decision)


async def _global_reweighted(
    config: Any,
    entities: pd.DataFrame,
    communities: pd.DataFrame,
    community_reports: pd.DataFrame,
    community_level: int | None,
    response_type: str,
    query: str,
    callbacks: list[Any],
    verbose: bool,
    manager: TriageManager,
    tables: GraphTables,
    top_k: int | None,
) -> tuple[Any, Any]:
    """``graphrag.api.global_search`` (3.3) step by step, with report weights set from P."""
    from graphrag.callbacks.noop_query_callbacks import NoopQueryCallbacks
    from graphrag.logger.standard_logging import init_loggers
    from graphrag.query.context_builder.community_context import _compute_community_weights
    from graphrag.query.factory import get_global_search_engine
    from graphrag.query.indexer_adapters import (
        read_indexer_communities,
        read_indexer_entities,
        read_indexer_reports,
    )
    from graphrag.utils.api import load_search_prompt

    from triage_graphrag.reweight import reweight_reports

    init_loggers(config=config, verbose=verbose, filename="query.log")
    context_data: dict[str, Any] = {}

    class _Collect(NoopQueryCallbacks):
        def on_context(self, context: Any) -> None:
            context_data.clear()
            context_data.update(context)

    reports = read_indexer_reports(community_reports, communities, community_level=community_level)
    entities_ = read_indexer_entities(entities, communities, community_level=community_level)
    engine = get_global_search_engine(
        config,
        reports=reports,
        entities=entities_,
        communities=read_indexer_communities(communities, community_reports),
        response_type=response_type,
        dynamic_community_selection=False,
        map_system_prompt=load_search_prompt(config.global_search.map_prompt),
        reduce_system_prompt=load_search_prompt(config.global_search.reduce_prompt),
        general_knowledge_inclusion_prompt=load_search_prompt(config.global_search.knowledge_prompt),
        callbacks=[*callbacks, _Collect()],
    )
    params = engine.context_builder_params
    weight_name = params.get("community_weight_name", "occurrence weight")
    if reports and params.get("include_community_weight", True):
        try:
            _compute_community_weights(
                reports,
                entities_,
                weight_attribute=weight_name,
                normalize=params.get("normalize_community_weight", True),
            )
            kept = reweight_reports(reports, tables, manager, query, weight_name=weight_name, top_k=top_k)
            if kept is not None:
                engine.context_builder.community_reports = kept
        except Exception as exc:  # noqa: BLE001 - reweighting never breaks the search
            log.warning("report reweighting skipped: %s", exc)
    response = ""
    async for chunk in engine.stream_search(query=query):
        response += chunk
    return response, dict(context_data)


def feedback(
    query_id: str,
    score: float,
    *,
    manager: TriageManager | None = None,
    store: Store | str | os.PathLike[str] | None = None,
    source: str = "human",
) -> FeedbackEvent:
    """Send a score in [0, 1] for an answered query (EvoRAG §4.1); returns the emitted event."""
    event = FeedbackEvent(FRAMEWORK, query_id, score, source)  # type: ignore[arg-type]
    _manager(manager, store).emit_feedback(event)
    return event
