"""LightRAG ingestion hooks: extraction events per processed chunk and graph events (DESIGN §3).

A mixin of :class:`~triage_lightrag.instrument.LightRAGInstrumentor`: the wrappers of
``apipeline_process_enqueue_documents``, ``doc_status.upsert`` and the graph-editing methods, and
the graph refresh they end in. Every ingestion route (``ainsert``/``insert``, the server's
``/documents`` routes, deletions and edits) reaches one of them.

The view is kept fresh incrementally (:mod:`triage_lightrag.freshness`): a processed document's
entities and relations are logged in the shared store *before* LightRAG writes its ``processed``
status, and every query first applies what this process and the others changed, reading only those
nodes and edges back from LightRAG's storage and updating the view and grounder in place of a rebuild
(:func:`~triage_lightrag.freshness.updated_view`). The graph event carries that view: the metrics
plugins read it, they hold no copy of their own. Edits and deletions re-read the graph in full
(``PGTableGraphStorage``: streamed with COPY, :mod:`triage_lightrag.pg_graph`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
from collections.abc import Callable, Mapping
from typing import Any

from triage_lightrag.freshness import ChangeLog, GraphChange, change_of_documents, updated_view
from triage_lightrag.pg_graph import is_table_storage, stream_graph
from triage_lightrag.translate import FRAMEWORK, extraction_event, graph_view, stored_scores
from triage_plugins import GraphEvent, GraphView
from triage_plugins.adapter_kit.logprobs import lookup_logprobs

log = logging.getLogger("triage.lightrag")

_warned: set[str] = set()


class IngestionHooks:
    """Ingestion wrappers; the state they use (``_lock``, ``_processed``, ``_view``, …) is the
    instrumentor's; the graph's freshness state is this mixin's."""

    def __init__(self) -> None:
        super().__init__()
        self._graph_version = 0  # the change-log version the view includes
        self._local_change = GraphChange()  # logged here, not applied to the view yet
        self._graph_sync: tuple[asyncio.AbstractEventLoop, asyncio.Lock] | None = None
        self._origin = f"{os.getpid()}-{secrets.token_hex(4)}"

    @property
    def change_log(self) -> ChangeLog | None:
        """The graph change log in the learner's store (``None`` without a store)."""
        store = getattr(self._manager, "store", None)
        return None if store is None else ChangeLog(store, self._origin)

    def _make_doc_status_upsert(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Note each document LightRAG marks ``processed`` (every ingestion route writes it here);
        its graph change is logged first, so a process that sees the status sees the change."""

        async def upsert(data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            try:
                await self._log_processed(data)
            except Exception as exc:  # noqa: BLE001
                self._failed("logging a graph change", exc)
            result = await original(data, *args, **kwargs)
            try:
                self._note_processed(data)
            except Exception as exc:  # noqa: BLE001
                self._failed("reading document status", exc)
            return result

        return upsert

    async def _log_processed(self, data: Any) -> None:
        """The entities and relations of the documents becoming ``processed`` (LightRAG's
        ``full_entities`` / ``full_relations`` rows): noted here, logged for the other processes."""
        doc_ids = _processed_ids(data)
        if not doc_ids:
            return
        rag = self.rag
        entities = await rag.full_entities.get_by_ids(doc_ids)
        relations = await rag.full_relations.get_by_ids(doc_ids)
        change = change_of_documents(entities, relations)
        self._local_change = self._local_change.merged(change)
        await self._publish(change)

    async def _publish(self, change: GraphChange) -> None:
        changes = self.change_log
        if changes is not None and not change.empty:
            version = await asyncio.to_thread(changes.publish, change)
            log.debug("triage_lightrag: graph change %d logged (%d nodes, %d edges, full=%s)",
                      version, len(change.nodes), len(change.edges), change.full)  # fmt: skip

    def _note_processed(self, data: Any) -> None:
        for doc_id in _processed_ids(data):
            row = data[doc_id]
            chunks = tuple(c for c in row.get("chunks_list") or () if isinstance(c, str) and c)
            with self._lock:
                self._processed[str(doc_id)] = (str(row.get("track_id") or doc_id), chunks)

    def _make_process(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """``apipeline_process_enqueue_documents``: after it, the processed chunks' extraction
        events and a graph event (``ainsert``/``insert`` and the server's uploads all end here)."""

        async def apipeline_process_enqueue_documents(*args: Any, **kwargs: Any) -> Any:
            try:
                return await original(*args, **kwargs)
            finally:
                try:
                    await self._after_processing()
                except Exception as exc:  # noqa: BLE001
                    self._failed("post-ingestion events", exc)

        return apipeline_process_enqueue_documents

    def _make_graph_edit(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """A deletion or an entity/relation edit: the graph event follows the live graph."""

        async def edit(*args: Any, **kwargs: Any) -> Any:
            try:
                return await original(*args, **kwargs)
            finally:
                self._graph_stale = True
                try:
                    await self._publish(GraphChange(full=True))
                    await self._sync_graph()
                except Exception as exc:  # noqa: BLE001
                    self._failed("graph event after an edit", exc)

        return edit

    async def _after_processing(self) -> None:
        from lightrag.utils import normalize_entity_name

        with self._lock:
            processed, self._processed = self._processed, {}
        rag = self.rag
        temperature = (rag.llm_model_kwargs or {}).get("temperature")
        model = str(rag.llm_model_name)
        for track_id, chunk_ids in processed.values():
            records = await rag.text_chunks.get_by_ids(list(chunk_ids)) if chunk_ids else []
            for cid, record in zip(chunk_ids, records, strict=False):
                completions = await self._completions(cid, record) if record else None
                if completions is None:
                    continue
                # parsing the completions is CPU work: done on the delivery worker
                self._defer(
                    "extraction event", self._emit_extraction, track_id, cid, dict(record), completions,
                    normalize_entity_name, model, temperature,
                )  # fmt: skip
        await self._sync_graph()

    def _emit_extraction(
        self, run_id: str, cid: str, record: dict[str, Any], completions: list[str],
        normalize: Callable[[str], str], model: str, temperature: Any,
    ) -> None:  # fmt: skip
        event = extraction_event(
            run_id, cid, record, completions, normalize=normalize, logprobs_of=lookup_logprobs,
            model=model, temperature=temperature,
        )  # fmt: skip
        self.manager.emit_extraction(event)

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

    async def _sync_graph(self) -> None:
        """Bring the view up to date: in full when stale, else the changes logged here and by the
        other processes (:mod:`triage_lightrag.freshness`). One sync at a time per instance."""
        loop = asyncio.get_running_loop()
        if self._graph_sync is None or self._graph_sync[0] is not loop:  # sync calls run their own loops
            self._graph_sync = (loop, asyncio.Lock())
        async with self._graph_sync[1]:
            changes = self.change_log
            latest = await asyncio.to_thread(changes.version) if changes is not None else 0
            # no view yet (a first read failed): re-read when something changed since
            if self._graph_stale or (self._view is None and latest > self._graph_version):
                await self._refresh_graph(latest)
                return
            if self._view is None:
                return
            local, self._local_change = self._local_change, GraphChange()
            others = GraphChange()
            if changes is not None and latest > self._graph_version:
                others = await asyncio.to_thread(changes.since, self._graph_version, latest)
            if local.full or others.full:
                await self._refresh_graph(latest)
                return
            if not (local.empty and others.empty):
                try:
                    await self._apply_change(local.merged(others), emit=not local.empty)
                except BaseException:
                    self._local_change = self._local_change.merged(local)  # retried with the next sync
                    raise
            self._graph_version = max(self._graph_version, latest)

    async def _refresh_graph(self, version: int | None = None) -> None:
        """Re-read the whole graph (first use, edits, a reader too far behind); a graph event follows."""
        self._local_change = GraphChange()  # the full read includes it
        view, scores = await _read_graph(self.rag.chunk_entity_relation_graph)
        # the grounder's gazetteer is CPU work: keep it off the event loop
        view, grounder = await asyncio.to_thread(_with_grounder, view)
        self._use_view(view, grounder, version)
        self._emit_graph(scores)

    async def _apply_change(self, change: GraphChange, *, emit: bool) -> None:
        """Read the named nodes and edges (and the edges' endpoints) back from LightRAG's storage
        and update the view; a graph event follows a change made here (``emit``)."""
        graph = self.rag.chunk_entity_relation_graph
        pairs = sorted(change.edges)
        names = sorted(change.nodes | {n for p in pairs for n in p})
        found_nodes = await graph.get_nodes_batch(names) if names else {}
        found_edges = await graph.get_edges_batch([{"src": a, "tgt": b} for a, b in pairs]) if pairs else {}
        nodes = {n: found_nodes.get(n) for n in names}
        edges = {p: found_edges.get(p) for p in pairs}
        view, grounder = await asyncio.to_thread(
            _updated_view_and_grounder, self._view, self._grounder, nodes, edges
        )
        self._use_view(view, grounder, None)
        log.debug("triage_lightrag: graph view updated from %d nodes, %d edges", len(names), len(pairs))
        if emit:
            self._emit_graph(stored_scores(_edge_rows(edges)))

    def _use_view(self, view: GraphView, grounder: Any, version: int | None) -> None:
        self._view = view
        self._grounder = grounder
        self._graph_stale = False
        if version is not None:
            self._graph_version = version

    def _emit_graph(self, stored: Mapping[str, float]) -> None:
        """A graph event of the view; ``stored``: the learned scores the edges carry (a restarted
        deployment keeps what it learned)."""
        self._guard("graph event", self.manager.emit_graph, GraphEvent(FRAMEWORK, self._view))
        if self.reweight and self.unit == "triple" and stored:
            self._guard("score seeding", self.manager.seed_scores, self.unit, stored)

    async def _ensure_graph(self) -> None:
        """Before a query is grounded: the view includes every logged change (a failed read is
        counted and the query goes on with the view it has)."""
        try:
            await self._sync_graph()
        except Exception as exc:  # noqa: BLE001 - not retried on every query; the next change re-reads
            self._graph_stale = False
            self._failed("reading the graph", exc)


def _processed_ids(data: Any) -> list[str]:
    """Ids of the rows of a ``doc_status.upsert`` payload whose status is ``processed``."""
    if not isinstance(data, dict):
        return []
    return [
        str(doc_id)
        for doc_id, row in data.items()
        if isinstance(row, dict)
        and str(getattr(row.get("status"), "value", row.get("status"))) == "processed"
    ]


def _edge_rows(edges: Mapping[tuple[str, str], Mapping[str, Any] | None]) -> list[dict[str, Any]]:
    """``get_edges_batch`` results in ``get_all_edges`` shape (for :func:`stored_scores`)."""
    return [{**row, "source": a, "target": b} for (a, b), row in edges.items() if row is not None]


def _updated_view_and_grounder(
    view: GraphView, grounder: Any, nodes: Mapping[str, Any], edges: Mapping[tuple[str, str], Any]
) -> tuple[GraphView, Any]:
    """The view with the change applied, and its grounder updated from ``grounder``'s (both
    incremental: :meth:`GraphView.with_changes`, :meth:`Grounder.updated`)."""
    return _with_grounder(updated_view(view, nodes, edges), grounder)


async def _read_graph(graph: Any) -> tuple[GraphView, dict[str, float]]:
    """The whole graph as a view and the learned scores its edges carry: ``PGTableGraphStorage``
    streamed with COPY (:mod:`triage_lightrag.pg_graph`), any other storage through
    ``get_all_nodes`` / ``get_all_edges``."""
    if is_table_storage(graph):
        streamed = await stream_graph(graph)
        return streamed.view, streamed.scores
    nodes, edges = await graph.get_all_nodes(), await graph.get_all_edges()
    view = await asyncio.to_thread(graph_view, nodes, edges)  # CPU work: off the event loop
    return view, stored_scores(edges)


def _with_grounder(view: GraphView, previous: Any = None) -> tuple[GraphView, Any]:
    """``view`` and its shared grounder (the one the default plugins get for the graph event),
    updated from ``previous`` (the grounder of the view it was made from) when it can be."""
    from triage_plugins.adapter_kit import Grounder, shared_grounder

    try:
        grounder = shared_grounder(view, previous=previous if isinstance(previous, Grounder) else None)
    except Exception as exc:  # noqa: BLE001 - without a grounder, mentions are LightRAG's keywords
        log.warning("triage_lightrag: no grounder for this graph (%s: %s)", type(exc).__name__, exc)
        grounder = None
    return view, grounder
