"""LightRAG's graph read where it lives: ``PGTableGraphStorage`` tables over COPY (issue #31).

``get_all_nodes()`` / ``get_all_edges()`` fetch every row with its whole JSONB (descriptions
included), decode it into one dict per node and edge, and sort the lists in Python: a second full
copy of the graph in every worker, next to the view built from it. For ``PGTableGraphStorage``
(plain tables ``lightrag_graph_nodes`` / ``lightrag_graph_edges``, edges stored once per sorted
pair) this module instead

- streams only the columns the view needs (node id and ``entity_type``; edge ends, ``keywords``,
  ``source_id`` and the persisted triage score) with ``COPY (SELECT …) TO STDOUT``, in one
  repeatable-read snapshot, sorted by PostgreSQL as ``get_all_*`` sorts in Python (``COLLATE "C"``
  is code-point order); the text is parsed batch by batch off the event loop straight into the
  :class:`GraphView` (one :class:`Triple` per edge, node id strings shared);
- counts nodes, edges and the nodes of degree ≤ 1 (DNR, TRIAGE eq. 21) in SQL, with no view at all.

The graph metrics do not take DNR from those counts: a worker holds the view anyway (its grounder
needs it), the graph event carries that very view to the metrics plugin (no copy of its own), and
DNR over it is one vectorized pass (milliseconds at 1M edges) where the SQL takes seconds (4.8 s,
``benchmarks/RESULTS.md``) and reads the tables at another moment than the view the event's other
metrics see. :func:`graph_counts` is for a process that holds no view (a check or report).

The view equals ``graph_view(get_all_nodes(), get_all_edges())`` (a test checks it). Private
surface of ``lightrag-hku`` 1.5.7 used: the storage's ``db.pool`` (LightRAG's asyncpg pool),
``workspace`` / ``namespace`` and the two table layouts.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from triage_lightrag.translate import relation_triple, split_sources, stored_scores
from triage_plugins import GraphView, MetricResult, Triple
from triage_plugins.adapter_kit import na, ok

__all__ = ["BATCH_BYTES", "GraphCounts", "StreamedGraph", "graph_counts", "is_table_storage", "stream_graph"]

log = logging.getLogger("triage.lightrag.pg_graph")

BATCH_BYTES = 4 << 20  # COPY text parsed (off the event loop) per batch: bounds the raw bytes held

_SCOPE = "workspace = $1 AND namespace = $2"
_EDGE_SCOPE = f"{_SCOPE} AND src_id <> tgt_id AND src_id <> '' AND tgt_id <> ''"  # graph_view's skips
NODES_SQL = (
    f"SELECT id, properties->>'entity_type' FROM lightrag_graph_nodes WHERE {_SCOPE} "
    'ORDER BY id COLLATE "C"'
)
EDGES_SQL = (
    "SELECT src_id, tgt_id, properties->>'keywords', properties->>'source_id', "
    f"properties->>'triage_score' FROM lightrag_graph_edges WHERE {_EDGE_SCOPE} "
    'ORDER BY src_id COLLATE "C", tgt_id COLLATE "C"'
)
COUNTS_SQL = f"""
WITH ends AS (
    SELECT src_id AS id FROM lightrag_graph_edges WHERE {_EDGE_SCOPE}
    UNION ALL
    SELECT tgt_id FROM lightrag_graph_edges WHERE {_EDGE_SCOPE}
), degrees AS (SELECT id, count(*) AS degree FROM ends GROUP BY id)
SELECT (SELECT count(*) FROM lightrag_graph_nodes WHERE {_SCOPE}),
       (SELECT count(*) FROM lightrag_graph_edges WHERE {_EDGE_SCOPE}),
       (SELECT count(*) FROM degrees),
       (SELECT count(*) FROM degrees WHERE degree = 1)
"""

_ESCAPE = re.compile(rb"\\(.)")
_UNESCAPED = {b"b": b"\b", b"f": b"\f", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"v": b"\v"}


def is_table_storage(storage: Any) -> bool:
    """``storage`` is LightRAG's ``PGTableGraphStorage`` with its connection pool open."""
    return type(storage).__name__ == "PGTableGraphStorage" and _pool(storage) is not None


def _pool(storage: Any) -> Any:
    return getattr(getattr(storage, "db", None), "pool", None)


# --------------------------------------------------------------------------- COPY text format


def _field(raw: bytes) -> str | None:
    """One field of PostgreSQL's COPY text format (``\\N`` is NULL; COPY TO escapes only these)."""
    if raw == b"\\N":
        return None
    if b"\\" in raw:
        raw = _ESCAPE.sub(lambda m: _UNESCAPED.get(m.group(1), m.group(1)), raw)
    return raw.decode("utf-8")


class _Rows:
    """Splits streamed COPY text into rows of fields; a row cut by a chunk boundary waits."""

    def __init__(self, consume: Callable[[list[str | None]], None]) -> None:
        self._rest = b""
        self._consume = consume

    def feed(self, data: bytes) -> None:
        lines = (self._rest + data).split(b"\n")
        self._rest = lines.pop()
        consume = self._consume
        for line in lines:
            consume([_field(f) for f in line.split(b"\t")])

    def close(self) -> None:
        if self._rest:
            raise ValueError("COPY output ended inside a row")


async def _copy(conn: Any, sql: str, args: tuple[Any, ...], rows: _Rows, batch_bytes: int) -> None:
    """Stream ``sql``'s result, handing ``rows`` about ``batch_bytes`` of text at a time in a thread."""
    pending: list[bytes] = []
    size = 0

    async def sink(chunk: bytes) -> None:
        nonlocal size
        pending.append(chunk)
        size += len(chunk)
        if size >= batch_bytes:
            await _flush()

    async def _flush() -> None:
        nonlocal size
        data = b"".join(pending)
        pending.clear()
        size = 0
        await asyncio.to_thread(rows.feed, data)

    await conn.copy_from_query(sql, *args, output=sink, format="text")
    await _flush()
    rows.close()


# --------------------------------------------------------------------------- the view


@dataclass
class _Builder:
    """The view's parts, filled row by row: nodes in id order, one triple per edge."""

    nodes: dict[str, str] = field(default_factory=dict)  # id -> the same string (shared by triples)
    types: dict[str, str] = field(default_factory=dict)
    triples: list[Triple] = field(default_factory=list)
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)

    def node(self, row: list[str | None]) -> None:
        nid, entity_type = row
        if nid:
            self.nodes[nid] = nid
            if entity_type:
                self.types[nid] = entity_type

    def edge(self, row: list[str | None]) -> None:
        src, tgt, keywords, source_id, score = row
        if not src or not tgt:  # the query keeps only edges with both ends
            return
        src, tgt = self.nodes.get(src, src), self.nodes.get(tgt, tgt)
        types = self.types
        t = relation_triple(src, tgt, keywords, subject_type=types.get(src), object_type=types.get(tgt))
        self.triples.append(t)
        self.sources[t.id] = split_sources(source_id)
        if score:
            self.scores.update(stored_scores([{"source": src, "target": tgt, "triage_score": score}]))

    def view(self) -> GraphView:
        return GraphView(self.triples, nodes=list(self.nodes), sources=self.sources)


@dataclass(frozen=True, slots=True)
class StreamedGraph:
    """The whole graph as a view, and the learned scores its edges carry (triple id -> raw score)."""

    view: GraphView
    scores: dict[str, float]


async def stream_graph(storage: Any, *, batch_bytes: int = BATCH_BYTES) -> StreamedGraph:
    """The graph of a ``PGTableGraphStorage`` (see :func:`is_table_storage`), streamed with COPY."""
    builder = _Builder()
    args = (storage.workspace, storage.namespace)
    async with _pool(storage).acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        await _copy(conn, NODES_SQL, args, _Rows(builder.node), batch_bytes)
        await _copy(conn, EDGES_SQL, args, _Rows(builder.edge), batch_bytes)
    view = await asyncio.to_thread(builder.view)
    log.debug("triage_lightrag: streamed %r from PostgreSQL", view)
    return StreamedGraph(view, builder.scores)


# --------------------------------------------------------------------------- counts in SQL


@dataclass(frozen=True, slots=True)
class GraphCounts:
    """Counts of the graph as its view sees it (self-loops are not triples), read in SQL.

    ``nodes``: every node row; ``edges``: the triples; ``connected``: nodes with an edge;
    ``leaves``: nodes with exactly one.
    """

    nodes: int
    edges: int
    connected: int
    leaves: int

    @property
    def isolated(self) -> int:
        return self.nodes - self.connected

    def dead_node_ratio(self) -> MetricResult:
        """DNR (TRIAGE eq. 21) as :func:`~triage_plugins.metrics.validation.dead_node_ratio` gives it
        for the view: LightRAG keeps one edge per pair, so a node's degree is its edge count."""
        if not self.nodes:
            return na("DNR", "the graph has no nodes", n=0)
        dead = self.isolated + self.leaves
        return ok("DNR", dead / self.nodes, n=self.nodes, isolated=self.isolated, leaves=self.leaves)


async def graph_counts(storage: Any) -> GraphCounts:
    """Node, edge and low-degree counts of a ``PGTableGraphStorage`` graph, computed in SQL."""
    async with _pool(storage).acquire() as conn:
        row = await conn.fetchrow(COUNTS_SQL, storage.workspace, storage.namespace)
    return GraphCounts(*(int(v) for v in row))
