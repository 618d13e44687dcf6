"""Learned priorities -> LightRAG 1.5.7's own ranking knobs (EvoRAG §4.2, §6.12; docs/lightrag.md).

Each function takes the candidates LightRAG is about to rank, asks ``ask(unit, ids, relevance)`` for
one priority per candidate (the instrumentor's ``triage_rerank`` call, ``None`` when no plugin
answers) and returns what LightRAG reads instead, or ``None`` to keep LightRAG's own:

- **global mode** keeps ``relationships_vdb.query``'s order: :func:`order_relations` returns the
  hits in P order (S_r = the cosine ``distance``, else 1 − i/n);
- **local mode** sorts edges by ``(edge_degrees_batch rank, weight)``: :func:`rank_edges` returns
  integer ranks that follow P, then the degree (S_r = degree / max degree); edges equal in both
  share a rank, so LightRAG's own weight tie-break decides among them as it does without triage
  (with no feedback yet, P follows S_r and the order is exactly LightRAG's);
- **chunks** go through ``rerank_model_func``: :func:`rank_chunks` answers its contract
  ``[{index, relevance_score}]`` in P order with ``relevance_score`` = P (S_r = the user's reranker
  score when one is configured, else LightRAG's order).

The order itself is :func:`triage_plugins.adapter_kit.ordering.host_order`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from triage_lightrag.translate import triple_id
from triage_plugins.adapter_kit.ordering import as_relevance, host_order

__all__ = ["Ask", "identity_ranking", "order_relations", "rank_chunks", "rank_edges", "text_id"]

Ask = Callable[[str, Sequence[str], Sequence[float]], "list[float] | None"]


def text_id(text: str) -> str:
    """A chunk id for a text LightRAG handed over without one."""
    return "text-" + hashlib.md5(text.encode("utf-8")).hexdigest()[:16]


def order_relations(results: list[dict[str, Any]], ask: Ask) -> list[dict[str, Any]] | None:
    """Global mode: the relation hits of ``relationships_vdb.query`` in P order."""
    n = len(results)
    ids = [triple_id(str(r.get("src_id")), str(r.get("tgt_id"))) for r in results]
    relevance = [r["distance"] if "distance" in r else 1.0 - i / n for i, r in enumerate(results)]
    priorities = ask("triple", ids, relevance)
    return None if priorities is None else [results[i] for i in host_order(priorities)]


def rank_edges(pairs: Sequence[Sequence[str]], degrees: Mapping[Any, int], ask: Ask) -> dict[Any, int] | None:
    """Local mode: ``edge_degrees_batch``'s answer with ranks that follow (P, degree); equal
    (P, degree) share a rank, so LightRAG's weight breaks the tie."""
    keys = [tuple(p) for p in pairs]
    ids = [triple_id(str(a), str(b)) for a, b in keys]
    degree = [float(degrees.get(k, 0)) for k in keys]
    top = max(degree, default=0.0) or 1.0
    priorities = ask("triple", ids, [d / top for d in degree])
    if priorities is None:
        return None
    by_degree = sorted(range(len(keys)), key=lambda i: (-degree[i], i))
    ranked = dict(degrees)
    rank, previous = 0, None
    for i in reversed(host_order(priorities, ties=by_degree)):  # worst first
        if (priorities[i], degree[i]) != previous:
            rank, previous = rank + 1, (priorities[i], degree[i])
        ranked[keys[i]] = rank
    return ranked


def rank_chunks(
    documents: Sequence[str],
    base: Any,
    chunk_ids: Mapping[str, str],
    ask: Ask,
    top_n: int | None,
) -> list[dict[str, Any]] | None:
    """``rerank_model_func``'s answer in P order; ``base`` is the user's reranker's answer, if any.

    ``chunk_ids`` maps chunk text to chunk id (what LightRAG read while retrieving); a text it lacks
    gets :func:`text_id`.
    """
    n = len(documents)
    relevance = [1.0 - i / n for i in range(n)]
    if base:
        relevance = [0.0] * n
        for r in base:
            if isinstance(r, dict) and isinstance(r.get("index"), int) and 0 <= r["index"] < n:
                relevance[r["index"]] = as_relevance(r.get("relevance_score"))
    ids = [chunk_ids.get(doc) or text_id(doc) for doc in documents]
    priorities = ask("chunk", ids, relevance)
    if priorities is None:
        return None
    out = [{"index": i, "relevance_score": as_relevance(priorities[i])} for i in host_order(priorities)]
    return out[:top_n] if top_n else out


def identity_ranking(n: int, top_n: int | None) -> list[dict[str, Any]]:
    """``rerank_model_func``'s answer that keeps LightRAG's order."""
    out = [{"index": i, "relevance_score": 1.0} for i in range(n)]
    return out[:top_n] if top_n else out
