"""LightRAG ranking knobs: the storage wrappers that count what a query scored and, with
reweighting on, reorder it by learned priorities (DESIGN §3; docs/lightrag.md).

A mixin of :class:`~triage_lightrag.instrument.LightRAGInstrumentor`. Local mode sorts edges by
``(edge_degrees_batch rank, weight)``, global mode keeps ``relationships_vdb.query`` order, and
chunk order goes through ``rerank_model_func``; each wrapper reads the query's state from the
instrumentor's context variable and asks the manager's priorities off the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from triage_lightrag.reweight import identity_ranking, order_relations, rank_chunks, rank_edges


class RankingHooks:
    """Ranking wrappers; ``_state``, ``_off_loop`` and ``_priorities`` are the instrumentor's."""

    def _ask(self, state: Any) -> Callable[[str, Sequence[str], Sequence[float]], list[float] | None]:
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
            ordered = await self._off_loop("global reweighting", order_relations, results, self._ask(state))
            return results if ordered is None else ordered

        return query

    def _make_edge_degrees(self, original: Callable[..., Any]) -> Callable[..., Any]:
        async def edge_degrees_batch(edge_pairs: list[tuple[str, str]], *args: Any, **kwargs: Any) -> Any:
            degrees = await original(edge_pairs, *args, **kwargs)
            state = self._state.get()
            if state is None or not edge_pairs:
                return degrees
            ranked = await self._off_loop(
                "local reweighting", rank_edges, list(edge_pairs), degrees, self._ask(state)
            )
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
                ranked = await self._off_loop(
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
