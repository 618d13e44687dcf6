"""LightRAG ingestion hooks: extraction events per processed chunk and graph events (DESIGN §3).

A mixin of :class:`~triage_lightrag.instrument.LightRAGInstrumentor`: the wrappers of
``apipeline_process_enqueue_documents``, ``doc_status.upsert`` and the graph-editing methods, and
the graph refresh they end in. Every ingestion route (``ainsert``/``insert``, the server's
``/documents`` routes, deletions and edits) reaches one of them.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from triage_lightrag.translate import FRAMEWORK, extraction_event, graph_view, stored_scores
from triage_plugins.adapter_kit.logprobs import lookup_logprobs
from triage_plugins.contract.events import GraphEvent
from triage_plugins.contract.graph_view import GraphView

log = logging.getLogger("triage.lightrag")

_warned: set[str] = set()


class IngestionHooks:
    """Ingestion wrappers; the state they use (``_lock``, ``_processed``, ``_view``, …) is the
    instrumentor's."""

    def _make_doc_status_upsert(self, original: Callable[..., Any]) -> Callable[..., Any]:
        """Note each document LightRAG marks ``processed`` (every ingestion route writes it here)."""

        async def upsert(data: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            result = await original(data, *args, **kwargs)
            try:
                self._note_processed(data)
            except Exception as exc:  # noqa: BLE001
                self._failed("reading document status", exc)
            return result

        return upsert

    def _note_processed(self, data: Any) -> None:
        if not isinstance(data, dict):
            return
        for doc_id, row in data.items():
            if (
                not isinstance(row, dict)
                or str(getattr(row.get("status"), "value", row.get("status"))) != "processed"
            ):
                continue
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
                    await self._refresh_graph()
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
        if processed or self._graph_stale:
            await self._refresh_graph()

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


def _view_and_grounder(nodes: list[dict[str, Any]], edges: list[dict[str, Any]]) -> tuple[GraphView, Any]:
    from triage_plugins.kg.grounding import shared_grounder

    view = graph_view(nodes, edges)
    try:
        grounder = shared_grounder(view)
    except Exception as exc:  # noqa: BLE001 - without a grounder, mentions are LightRAG's keywords
        log.warning("triage_lightrag: no grounder for this graph (%s: %s)", type(exc).__name__, exc)
        grounder = None
    return view, grounder
