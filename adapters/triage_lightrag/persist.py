"""Learned triple scores written back into LightRAG's graph (docs/lightrag.md, "Reweighting").

A mixin of :class:`~triage_lightrag.instrument.LightRAGInstrumentor`: feedback marks the edges its
query retrieved as dirty; :meth:`ScorePersistence.apersist` writes their learned scores as the
``triage_score`` edge attribute, which LightRAG keeps across re-extraction and restarts.
"""

from __future__ import annotations

import asyncio

from triage_lightrag.translate import SCORE_ATTRIBUTE
from triage_plugins import FeedbackEvent


class ScorePersistence:
    """Dirty-edge tracking and write-back; ``_lock``, ``_dirty``, ``_recent`` are the instrumentor's."""

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
