"""LightRAG on PostgreSQL (issue #31): ``PGTableGraphStorage`` (plain tables ``lightrag_graph_nodes`` /
``lightrag_graph_edges``, no extension) + ``PGKVStorage``, vectors in NanoVectorDB (pgvector is not
required), the triage store in the same PostgreSQL.

Real ``lightrag-hku`` 1.5.7 with the offline stand-ins; a real PostgreSQL (``tests/store/pgserver.py``;
skipped where no binaries exist, or without ``asyncpg``, LightRAG's PostgreSQL driver). LightRAG
reads its connection from ``POSTGRES_*`` variables into a process-wide pool, so the module uses one
database. Checked: events, graph metrics and learning are those of the default storages (NetworkX +
JSON) on the same documents, an upload updates the view from the named rows only, and the COPY-streamed
reader (``triage_lightrag.pg_graph``) gives the graph ``get_all_nodes`` / ``get_all_edges`` give.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

import pytest

pytest.importorskip("lightrag")
pytest.importorskip("asyncpg", reason="LightRAG's PostgreSQL storages need asyncpg")
psycopg = pytest.importorskip(
    "psycopg", reason='psycopg is not installed: pip install "triage-plugins[postgres]"'
)

from lightrag import QueryParam  # noqa: E402

from triage_lightrag import instrument  # noqa: E402
from triage_lightrag.testing import ScriptedLightRAGLLM, build_rag, postgres_settings  # noqa: E402
from triage_plugins.contract.config import TriageConfig  # noqa: E402

DOCS = [
    "Christopher Nolan directed Inception. Inception was released in 2010. Christopher Nolan was born in London.",
    "Denis Villeneuve directed Dune. Dune was released in 2021. Denis Villeneuve was born in Quebec.",
]
LATE = "Greta Gerwig directed Barbie. Greta Gerwig was born in Sacramento."
QUESTIONS = ("Who directed Inception?", "Where was Denis Villeneuve born?")
PG_STORAGES = {"graph_storage": "PGTableGraphStorage", "kv_storage": "PGKVStorage"}


@pytest.fixture(scope="module")
def database(postgres_server):
    """One fresh database of the session's PostgreSQL, named to LightRAG by ``POSTGRES_*``."""
    pg = sys.modules["triage_tests_pgserver"]  # loaded by tests/conftest.py
    url, drop = pg.fresh_database(postgres_server.url)
    store_url, drop_store = pg.fresh_database(postgres_server.url)  # the triage store refuses a shared schema
    with pytest.MonkeyPatch.context() as env:  # restored (or removed) on exit
        for key, value in postgres_settings(url).items():
            env.setenv(key, value)
        yield url, store_url
    drop()
    drop_store()


def _run(loop: Any, rag: Any, store: Any) -> dict[str, Any]:
    """Instrument ``rag``, ask the questions, rate the first answer, upload one late document and
    ask about it; what the store recorded."""
    inst = instrument(rag, store=store, config=TriageConfig(reweight=True))
    try:
        ids = []
        for question in QUESTIONS:
            with inst.query() as qid:
                loop.run_until_complete(rag.aquery(question, QueryParam(mode="local")))
            ids.append(qid)
        inst.feedback(ids[0], 1.0)
        reads = _count_full_reads(rag.chunk_entity_relation_graph)
        loop.run_until_complete(rag.ainsert(LATE))
        with inst.query() as late:
            loop.run_until_complete(rag.aquery("Who directed Barbie?", QueryParam(mode="local")))
        full_reads = reads()
        inst.flush()
        s = inst.manager.store
        graphs = [e.graph for e in s.events("graph")]
        return {
            "full_reads_after_upload": full_reads,
            "extraction": sorted(t.triple.id for e in s.events("extraction") for t in e.triples),
            "graph_nodes": [sorted(g.nodes) for g in graphs],
            "graph_triples": [sorted(t.id for t in g.triples) for g in graphs],
            "late_grounding": dict(s.last_event("retrieval", framework="lightrag", query_id=late).grounding),
            "graph_metrics": sorted((m.name, m.value) for m in s.metrics(scope="graph")),
            "query_metrics": len(s.metrics(scope="query")),
            "learned": {k: round(v.raw, 6) for k, v in s.get_scores("triple").items()},
        }
    finally:
        inst.uninstrument()


def _count_full_reads(graph: Any) -> Any:
    """Count ``get_all_nodes`` / ``get_all_edges`` calls on this storage instance (pass-through);
    returns a function that removes the counters and gives the count."""
    calls = [0]
    for name in ("get_all_nodes", "get_all_edges"):
        original = getattr(graph, name)

        async def counted(*a: Any, _original: Any = original, **k: Any) -> Any:
            calls[0] += 1
            return await _original(*a, **k)

        setattr(graph, name, counted)

    def done() -> int:
        for name in ("get_all_nodes", "get_all_edges"):
            graph.__dict__.pop(name, None)
        return calls[0]

    return done


def test_postgres_tables_give_the_events_metrics_and_learning_of_the_default_storages(
    loop, database, tmp_path
):
    database, store_url = database
    workspace = f"pg{uuid.uuid4().hex[:8]}"  # two instances of one workspace in a process share state
    pg_rag = loop.run_until_complete(
        build_rag(tmp_path / "pg", DOCS, workspace=workspace, llm=ScriptedLightRAGLLM(), **PG_STORAGES)
    )
    plain = loop.run_until_complete(
        build_rag(tmp_path / "plain", DOCS, workspace=workspace + "f", llm=ScriptedLightRAGLLM())
    )
    try:
        assert type(pg_rag.chunk_entity_relation_graph).__name__ == "PGTableGraphStorage"
        assert type(pg_rag.text_chunks).__name__ == "PGKVStorage"
        on_pg = _run(loop, pg_rag, store_url)  # the triage store in PostgreSQL too
        on_files = _run(loop, plain, tmp_path / "t.sqlite")
    finally:
        for rag in (pg_rag, plain):
            loop.run_until_complete(rag.finalize_storages())
    with psycopg.connect(database) as conn:
        edges = conn.execute(
            "SELECT count(*) FROM lightrag_graph_edges WHERE workspace = %s", (workspace,)
        ).fetchone()[0]
    assert edges == len(on_pg["graph_triples"][-1]) > 0  # the graph lives in PostgreSQL's tables
    assert on_pg["full_reads_after_upload"] == 0  # the upload's rows were read, not the graph
    assert on_pg["late_grounding"].get("Barbie") == "Barbie"
    assert on_pg["learned"] and any(v != 100.0 for v in on_pg["learned"].values())
    assert on_pg["query_metrics"] > 0
    assert on_pg == on_files


ODD = "a\tb\\c\nd é"  # every character COPY's text format escapes, and one outside ASCII


def _add_odd_rows(loop: Any, graph: Any) -> None:
    """Rows the scripted extractor never writes: escaped text, a stored score, an isolated node,
    a self-loop, an edge whose endpoint LightRAG creates with no type."""
    loop.run_until_complete(graph.upsert_node("Odd\tName", {"entity_id": "Odd\tName", "entity_type": ODD}))
    loop.run_until_complete(graph.upsert_node("Lonely", {"entity_id": "Lonely", "entity_type": "person"}))
    edge = {"keywords": ODD, "source_id": "chunk-1<SEP>chunk-2<SEP>chunk-1", "triage_score": "42.5"}
    loop.run_until_complete(graph.upsert_edge("Odd\tName", "Dune", edge))
    loop.run_until_complete(graph.upsert_edge("Dune", "Dune", {"keywords": "self"}))
    loop.run_until_complete(graph.upsert_edge("Zeta", "Odd\tName", {"keywords": "untyped end"}))
    loop.run_until_complete(graph.index_done_callback())


def test_the_streamed_reader_gives_the_graph_get_all_gives(loop, database, tmp_path):
    """COPY-streamed view == ``graph_view(get_all_nodes(), get_all_edges())`` (same triples, nodes,
    order, provenance), the same stored scores, DNR counted in SQL == DNR of the view, and a first
    query through the instrumentor reads no ``get_all_*``."""
    from triage_lightrag.pg_graph import graph_counts, is_table_storage, stream_graph
    from triage_lightrag.translate import graph_view, stored_scores
    from triage_plugins.metrics.validation import dead_node_ratio

    workspace = f"pg{uuid.uuid4().hex[:8]}"
    rag = loop.run_until_complete(
        build_rag(
            tmp_path / "pg", [*DOCS, LATE], workspace=workspace, llm=ScriptedLightRAGLLM(), **PG_STORAGES
        )
    )
    try:
        graph = rag.chunk_entity_relation_graph
        _add_odd_rows(loop, graph)
        assert is_table_storage(graph)
        streamed = loop.run_until_complete(stream_graph(graph, batch_bytes=64))  # rows cut across batches
        nodes = loop.run_until_complete(graph.get_all_nodes())
        edges = loop.run_until_complete(graph.get_all_edges())
        counts = loop.run_until_complete(graph_counts(graph))
        reads = _count_full_reads(graph)
        inst = instrument(rag, store=tmp_path / "t.sqlite")
        try:
            with inst.query():
                loop.run_until_complete(rag.aquery("Who directed Dune?", QueryParam(mode="local")))
            first_view = inst._view
        finally:
            inst.uninstrument()
        full_reads = reads()
    finally:
        loop.run_until_complete(rag.finalize_storages())
    expected = graph_view(nodes, edges)
    view = streamed.view
    assert {t.id: t for t in view.triples} == {t.id: t for t in expected.triples}
    assert view == expected  # nodes, triples, their order and their sources
    assert len(view) >= 8 and view.has_node("Lonely") and view.degree("Lonely") == 0
    assert view.triple("Dune|Odd\tName").predicate == ODD.strip()
    assert view.sources["Dune|Odd\tName"] == ("chunk-1", "chunk-2")
    assert streamed.scores == stored_scores(edges) == {"Dune|Odd\tName": 42.5}
    assert (counts.nodes, counts.edges) == (len(view.nodes), len(view))
    assert counts.dead_node_ratio() == dead_node_ratio(view)
    assert full_reads == 0 and first_view == expected
