"""The incremental graph refresh (issue #31): after an upload, the view and grounder a LightRAG
worker updates from the changed rows alone give the metrics and groundings of a full re-read.

Real ``lightrag-hku`` 1.5.7 with the offline stand-ins (:mod:`triage_lightrag.testing`), on its
default storages (NetworkX + JSON) and, where a PostgreSQL can be started, on
``PGTableGraphStorage`` + ``PGKVStorage``. LightRAG surface relied on: ``get_all_nodes`` /
``get_all_edges`` (the full re-read compared with), ``full_entities`` / ``full_relations`` rows.
"""

from __future__ import annotations

import sys
import uuid
from typing import Any

import pytest

pytest.importorskip("lightrag")

from lightrag import QueryParam  # noqa: E402

from triage_lightrag import instrument  # noqa: E402
from triage_lightrag.testing import ScriptedLightRAGLLM, build_rag, postgres_settings  # noqa: E402
from triage_lightrag.translate import graph_view  # noqa: E402
from triage_plugins.contract.graph_view import GraphView  # noqa: E402
from triage_plugins.contract.hookspecs import hookimpl  # noqa: E402
from triage_plugins.kg import gazetteer as gz  # noqa: E402
from triage_plugins.kg.grounding import Grounder  # noqa: E402
from triage_plugins.metrics.validation import validation_metrics  # noqa: E402

DOCS = [
    "Christopher Nolan directed Inception. Inception was released in 2010. Christopher Nolan was born in London.",
    "Denis Villeneuve directed Dune. Dune was released in 2021. Denis Villeneuve was born in Quebec.",
]
UPLOAD = [
    "Greta Gerwig directed Barbie. Greta Gerwig was born in Sacramento.",
    "Christopher Nolan directed Tenet. Tenet was released in 2020.",  # touches existing nodes
]
QUESTIONS = ["Who directed Barbie?", "Did Christopher Nolan direct Tenet?", "Where was Greta Gerwig born?"]
PG_STORAGES = {"graph_storage": "PGTableGraphStorage", "kv_storage": "PGKVStorage"}


class GraphEvents:
    """Keeps the graph each graph event carries (to check it is the adapter's own view)."""

    def __init__(self) -> None:
        self.graphs: list[GraphView] = []

    @hookimpl
    def triage_graph(self, event: Any) -> None:
        self.graphs.append(event.graph)


def _full_view(loop: Any, rag: Any) -> GraphView:
    graph = rag.chunk_entity_relation_graph
    return graph_view(
        loop.run_until_complete(graph.get_all_nodes()), loop.run_until_complete(graph.get_all_edges())
    )


def _edges(view: GraphView) -> dict[str, tuple[Any, ...]]:
    """Triples as LightRAG's undirected edges: a new edge takes the sorted pair's orientation, which
    a NetworkX full read need not give (a PostgreSQL table stores the sorted pair)."""
    return {
        t.id: (t.predicate, frozenset({(t.subject, t.subject_type), (t.object, t.object_type)}))
        for t in view.triples
    }


def _grounded(grounder: Grounder, texts: list[str]) -> list[tuple[Any, ...]]:
    return [(g.mentions, g.grounding, g.spans) for g in map(grounder.ground, texts)]


def _check(loop: Any, rag: Any, store: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    inst = instrument(rag, store=store)
    events = GraphEvents()
    inst.manager.register(events, name="test.graph-events")
    try:
        with inst.query():
            loop.run_until_complete(rag.aquery_data("Who directed Inception?", QueryParam(mode="local")))
        first = inst._view
        builds: list[int] = []
        original = gz.Gazetteer.__init__
        monkeypatch.setattr(gz.Gazetteer, "__init__", lambda *a: builds.append(1) or original(*a))
        loop.run_until_complete(rag.ainsert(UPLOAD))
        with inst.query():
            loop.run_until_complete(rag.aquery_data(QUESTIONS[0], QueryParam(mode="local")))
        inst.flush()
        monkeypatch.undo()
        view, grounder = inst._view, inst._grounder
        assert view.delta is not None and builds == []  # updated from the change, not rebuilt
        assert len(view) > len(first) and view.has_node("Greta Gerwig") and view.has_node("Tenet")
        full = _full_view(loop, rag)
        assert set(view.nodes) == set(full.nodes)
        assert _edges(view) == _edges(full)
        assert dict(view.sources) == dict(full.sources)
        assert dict(validation_metrics(view)) == dict(validation_metrics(full))
        recorded = inst.manager.get_plugin("triage.implementation").latest["lightrag"]
        assert {k: recorded[k] for k in dict(validation_metrics(full))} == dict(validation_metrics(full))
        assert events.graphs[-1] is view  # the metrics read the adapter's view: no second copy
        texts = [*QUESTIONS, *(f"Tell me about {n}." for n in full.nodes), *(n.lower() for n in full.nodes)]
        assert _grounded(grounder, texts) == _grounded(Grounder(full), texts)
        assert grounder.ground("Who directed Barbie?").nodes == ("Barbie",)
    finally:
        inst.uninstrument()


def test_an_upload_refreshes_as_a_full_reread_would(loop, tmp_path, monkeypatch):
    # a workspace of its own: LightRAG shares a workspace's document status across the process
    workspace = f"u{uuid.uuid4().hex[:8]}"
    rag = loop.run_until_complete(
        build_rag(tmp_path / "rag", DOCS, workspace=workspace, llm=ScriptedLightRAGLLM())
    )
    try:
        _check(loop, rag, tmp_path / "t.sqlite", monkeypatch)
    finally:
        loop.run_until_complete(rag.finalize_storages())


@pytest.fixture
def postgres_env(postgres_server):
    """A fresh database of the session's PostgreSQL, named to LightRAG by ``POSTGRES_*``."""
    pytest.importorskip("asyncpg", reason="LightRAG's PostgreSQL storages need asyncpg")
    pg = sys.modules["triage_tests_pgserver"]  # loaded by tests/conftest.py
    url, drop = pg.fresh_database(postgres_server.url)
    with pytest.MonkeyPatch.context() as env:  # restored (or removed) on exit
        for key, value in postgres_settings(url).items():
            env.setenv(key, value)
        yield
    drop()


def test_an_upload_on_postgres_tables_refreshes_as_a_full_reread_would(
    loop, tmp_path, monkeypatch, postgres_env
):
    rag = loop.run_until_complete(
        build_rag(
            tmp_path / "rag", DOCS, workspace=f"i{uuid.uuid4().hex[:8]}", llm=ScriptedLightRAGLLM(),
            **PG_STORAGES,
        )
    )  # fmt: skip
    try:
        assert type(rag.chunk_entity_relation_graph).__name__ == "PGTableGraphStorage"
        _check(loop, rag, tmp_path / "t.sqlite", monkeypatch)
    finally:
        loop.run_until_complete(rag.finalize_storages())


def test_another_worker_applies_only_the_change(loop, tmp_path, monkeypatch):
    """Two instances of one workspace on one store (as two gunicorn workers are): the reader's next
    query applies the writer's logged change to its view and grounder, without rebuilding them."""
    workspace = f"w{uuid.uuid4().hex[:8]}"
    writer = loop.run_until_complete(
        build_rag(tmp_path / "rag", DOCS, workspace=workspace, llm=ScriptedLightRAGLLM())
    )
    reader = loop.run_until_complete(
        build_rag(tmp_path / "rag", [], workspace=workspace, llm=ScriptedLightRAGLLM())
    )
    w, r = instrument(writer, store=tmp_path / "t.sqlite"), instrument(reader, store=tmp_path / "t.sqlite")
    try:
        for inst, rag in ((w, writer), (r, reader)):  # both hold a view, as serving workers do
            with inst.query():
                loop.run_until_complete(rag.aquery_data("Who directed Dune?", QueryParam(mode="local")))
        before = r._view
        builds: list[int] = []
        original = gz.Gazetteer.__init__
        monkeypatch.setattr(gz.Gazetteer, "__init__", lambda *a: builds.append(1) or original(*a))
        loop.run_until_complete(writer.ainsert(UPLOAD))
        with r.query():
            loop.run_until_complete(reader.aquery_data(QUESTIONS[0], QueryParam(mode="local")))
        monkeypatch.undo()
        view = r._view
        assert view is not before and view.delta is not None and builds == []
        full = _full_view(loop, writer)
        assert _edges(view) == _edges(full) and set(view.nodes) == set(full.nodes)
        assert dict(validation_metrics(view)) == dict(validation_metrics(full))
        texts = [*QUESTIONS, *(f"Tell me about {n}." for n in full.nodes)]
        assert _grounded(r._grounder, texts) == _grounded(Grounder(full), texts)
    finally:
        for inst, rag in ((w, writer), (r, reader)):
            inst.uninstrument()
            loop.run_until_complete(rag.finalize_storages())


def test_updated_view_applies_rows_as_a_full_read_of_them_would():
    """Gone nodes take their edges, a re-typed node re-types its edges, a known edge keeps its
    orientation, a gone edge goes, a new one comes: as ``graph_view`` of the new rows gives."""
    from triage_lightrag.freshness import updated_view

    def node(n: str, kind: str) -> dict[str, Any]:
        return {"id": n, "entity_type": kind}

    def edge(a: str, b: str, kw: str, src: str) -> dict[str, Any]:
        return {"source": a, "target": b, "keywords": kw, "source_id": src}

    nodes = [node("A", "person"), node("B", "film"), node("C", "city"), node("E", "year"), node("F", "x")]
    edges = [edge("C", "A", "born in", "c1"), edge("A", "B", "directed", "c2"), edge("A", "E", "in", "c3"),
             edge("E", "F", "near", "c4")]  # fmt: skip
    view = graph_view(nodes, edges)
    out = updated_view(
        view,
        {"A": {"entity_type": "director"}, "B": None, "D": {"entity_type": "film"}},
        {
            ("A", "C"): {"keywords": "lives in", "source_id": "c5"},
            ("A", "E"): None,
            ("C", "D"): {"keywords": "set in", "source_id": "c6"},
        },
    )
    kinds = {"A": "director", "C": "city", "D": "film", "E": "year", "F": "x"}
    new_edges = [edge("C", "A", "lives in", "c5"), edge("C", "D", "set in", "c6")]
    new_edges.append(edge("E", "F", "near", "c4"))
    full = graph_view([node(n, k) for n, k in kinds.items()], new_edges)
    assert out.delta is not None and view.has_node("B") and len(view) == 4  # the old view stays
    assert set(out.nodes) == set(full.nodes) and _edges(out) == _edges(full)
    assert dict(out.sources) == dict(full.sources)
    assert out.triple("A|C").subject == "C"  # the orientation the view had
    assert dict(validation_metrics(out)) == dict(validation_metrics(full))
