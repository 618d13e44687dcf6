"""Graph freshness across processes (issue #31): the change log in the shared store, the incremental
view update, and two ``lightrag-gunicorn`` workers where one grounds what the other ingested.

Real ``lightrag-hku`` 1.5.7 with the offline stand-ins (:mod:`triage_lightrag.testing`); the store
is a real SQLite file. LightRAG surface relied on: ``full_entities`` / ``full_relations`` rows
(``entity_names``, ``relation_pairs``) written before a document's ``processed`` status,
``get_nodes_batch`` / ``get_edges_batch`` / ``get_all_nodes`` / ``get_all_edges`` of the graph
storage, two instances of one workspace in one process seeing each other's committed graph
(``storage_updated`` flags), and under gunicorn the routes ``/documents/text``,
``/documents/track_status/{id}``, ``/query``.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightrag")

from lightrag import QueryParam  # noqa: E402

from triage_lightrag import instrument  # noqa: E402
from triage_lightrag.freshness import RING, ChangeLog, GraphChange, change_of_documents  # noqa: E402
from triage_lightrag.testing import ScriptedLightRAGLLM, build_rag  # noqa: E402
from triage_lightrag.translate import graph_view  # noqa: E402
from triage_plugins.contract.graph_view import GraphView  # noqa: E402
from triage_plugins.store import open_store  # noqa: E402
from triage_plugins.store.scoped import scoped  # noqa: E402

DOC1 = "Christopher Nolan directed Inception. Inception was released in 2010. Christopher Nolan was born in London."
DOC2 = "Greta Gerwig directed Barbie. Greta Gerwig was born in Sacramento."


# --------------------------------------------------------------------------- the change log


def test_a_change_reaches_other_processes_and_not_its_author(tmp_path):
    with open_store(tmp_path / "s.sqlite") as store:
        writer, reader = ChangeLog(store, "w"), ChangeLog(store, "r")
        assert reader.version() == 0
        change = GraphChange(frozenset({"Barbie", "Greta Gerwig"}), frozenset({("Barbie", "Greta Gerwig")}))
        assert writer.publish(change) == 1
        assert reader.version() == 1
        assert reader.since(0, 1) == change
        assert writer.since(0, 1).empty  # its own change is applied where it was made
        assert reader.since(1, 1).empty


def test_a_reader_too_far_behind_reads_in_full(tmp_path):
    with open_store(tmp_path / "s.sqlite") as store:
        writer, reader = ChangeLog(store, "w"), ChangeLog(store, "r")
        for i in range(RING + 2):
            writer.publish(GraphChange(frozenset({f"n{i}"})))
        assert reader.since(0, RING + 2).full  # more than the ring holds
        assert reader.since(1, RING + 1).full  # version 1's slot was reused by version RING + 1
        assert reader.since(RING, RING + 2).nodes == {f"n{RING}", f"n{RING + 1}"}


def test_workspaces_keep_separate_logs(tmp_path):
    with open_store(tmp_path / "s.sqlite") as store:
        a, b = ChangeLog(scoped(store, "wa"), "w"), ChangeLog(scoped(store, "wb"), "w")
        a.publish(GraphChange(full=True))
        assert (a.version(), b.version()) == (1, 0)


def test_documents_name_their_change_and_big_changes_are_full():
    change = change_of_documents(
        [{"entity_names": ["B", "A"]}, None], [{"relation_pairs": [["B", "A"], ["x"]]}, None]
    )
    assert change == GraphChange(frozenset({"A", "B"}), frozenset({("A", "B")}))
    assert GraphChange(frozenset(str(i) for i in range(50_001))).full


# --------------------------------------------------------------------------- one process, real LightRAG


class CountingReads:
    """Counts calls of ``get_all_nodes`` / ``get_all_edges`` on one graph storage instance (a
    pass-through wrapper on the instance; removed by :meth:`close`)."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.calls = 0
        for name in ("get_all_nodes", "get_all_edges"):
            original = getattr(graph, name)

            async def counted(*a: Any, _original: Any = original, **k: Any) -> Any:
                self.calls += 1
                return await _original(*a, **k)

            setattr(graph, name, counted)

    def close(self) -> None:
        for name in ("get_all_nodes", "get_all_edges"):
            self.graph.__dict__.pop(name, None)


def _same_graph(got: GraphView, want: GraphView) -> None:
    """The same nodes, edges (ids and entity types) and provenance; orientation may differ."""

    def edges(view: GraphView) -> dict[str, tuple[Any, ...]]:
        return {
            t.id: (t.predicate, frozenset({(t.subject, t.subject_type), (t.object, t.object_type)}))
            for t in view.triples
        }

    assert set(got.nodes) == set(want.nodes)
    assert edges(got) == edges(want)
    assert dict(got.sources) == dict(want.sources)


def _full_view(loop: Any, rag: Any) -> GraphView:
    graph = rag.chunk_entity_relation_graph
    return graph_view(
        loop.run_until_complete(graph.get_all_nodes()), loop.run_until_complete(graph.get_all_edges())
    )


def _grounding(store: Any, query_id: str) -> dict[str, str | None]:
    event = store.last_event("retrieval", framework="lightrag", query_id=query_id)
    assert event is not None, query_id
    return dict(event.grounding)


def test_an_upload_updates_the_view_without_a_full_read(loop, tmp_path):
    rag = loop.run_until_complete(build_rag(tmp_path / "rag", [DOC1], llm=ScriptedLightRAGLLM()))
    inst = instrument(rag, store=tmp_path / "t.sqlite")
    try:
        with inst.query():
            loop.run_until_complete(rag.aquery_data("Who directed Inception?", QueryParam(mode="local")))
        reads = CountingReads(rag.chunk_entity_relation_graph)
        try:
            loop.run_until_complete(rag.ainsert(DOC2))
            with inst.query() as qid:
                loop.run_until_complete(rag.aquery_data("Who directed Barbie?", QueryParam(mode="local")))
            assert reads.calls == 0  # the new document's nodes and edges were read, not the graph
        finally:
            reads.close()
        inst.flush()
        store = inst.manager.store
        assert inst.change_log is not None and inst.change_log.version() == 1
        assert _grounding(store, qid).get("Barbie") == "Barbie"
        last = list(store.events("graph"))[-1]  # the upload's graph event: the whole updated graph
        _same_graph(last.graph, _full_view(loop, rag))
        assert last.graph.has_node("Greta Gerwig") and last.graph.has_node("Christopher Nolan")
    finally:
        inst.uninstrument()
        loop.run_until_complete(rag.finalize_storages())


def test_another_instance_grounds_what_this_one_ingested(loop, tmp_path):
    """Two instances of one workspace (as two workers are), one store: the reader's next query
    applies the writer's change, reading only the changed nodes and edges."""
    workspace = f"f-{uuid.uuid4().hex[:8]}"
    writer = loop.run_until_complete(
        build_rag(tmp_path / "rag", [DOC1], workspace=workspace, llm=ScriptedLightRAGLLM())
    )
    reader = loop.run_until_complete(
        build_rag(tmp_path / "rag", [], workspace=workspace, llm=ScriptedLightRAGLLM())
    )
    store_path = tmp_path / "t.sqlite"
    w, r = instrument(writer, store=store_path), instrument(reader, store=store_path)
    try:
        with r.query() as before:
            loop.run_until_complete(reader.aquery_data("Who directed Barbie?", QueryParam(mode="local")))
        reads = CountingReads(reader.chunk_entity_relation_graph)
        try:
            loop.run_until_complete(writer.ainsert(DOC2))
            with r.query() as after:
                loop.run_until_complete(reader.aquery_data("Who directed Barbie?", QueryParam(mode="local")))
            assert reads.calls == 0
        finally:
            reads.close()
        r.flush()
        assert _grounding(r.manager.store, before).get("Barbie") is None  # not in the graph yet
        assert _grounding(r.manager.store, after).get("Barbie") == "Barbie"
    finally:
        for inst, rag in ((w, writer), (r, reader)):
            inst.uninstrument()
            loop.run_until_complete(rag.finalize_storages())


# --------------------------------------------------------------------------- two gunicorn workers


def test_a_gunicorn_worker_grounds_what_the_other_ingested(tmp_path, local_servers):
    pytest.importorskip("lightrag.api")
    pytest.importorskip("gunicorn")
    helpers = _gunicorn_helpers()
    deadline = helpers.Deadline(90.0)
    with helpers.gunicorn_server(tmp_path, local_servers) as (proc, base, log_path, store_path):
        local_servers.wait_http(proc, f"{base}/health", log_path, deadline.left(), "lightrag-gunicorn")
        _upload(base, DOC1, deadline, log_path)
        # both workers answer once, so both hold a view of the first document's graph
        first = _query(base, "Who directed Inception?", deadline)
        one = _pid_of(store_path, "retrieval", first, deadline, log_path)
        with _stopped(one):
            second = _query(base, "Who directed Inception?", deadline)
        other = _pid_of(store_path, "retrieval", second, deadline, log_path)
        assert {one, other} == _worker_pids(store_path)
        ingesting = _upload(base, DOC2, deadline, log_path, store_path)
        reader = ({one, other} - {ingesting}).pop()
        with _stopped(ingesting):  # the next query can only reach the worker that did not ingest
            late = _query(base, "Who directed Barbie?", deadline)
        assert _pid_of(store_path, "retrieval", late, deadline, log_path) == reader
    with open_store(store_path, readonly=True) as store:
        event = store.last_event("retrieval", framework="lightrag", query_id=late)
        assert event is not None and event.grounding.get("Barbie") == "Barbie", (
            event,
            log_path.read_text()[-3000:],
        )
        generated = store.last_event("generation", framework="lightrag", query_id=late)
        assert generated is not None


def _upload(base: str, text: str, deadline: Any, log: Path, store_path: Path | None = None) -> int:
    """Upload ``text`` and wait until it is processed; the pid of the worker that extracted it
    (when ``store_path`` is given; else 0)."""
    request = _gunicorn_helpers().request
    r = request(
        "POST",
        f"{base}/documents/text",
        deadline,
        json={"text": text, "file_source": f"{uuid.uuid4().hex}.txt"},
    )
    assert r.status_code == 200, r.text
    track = r.json()["track_id"]
    while True:
        docs = (
            request("GET", f"{base}/documents/track_status/{track}", deadline).json().get("documents") or []
        )
        if docs and all(str(d.get("status")).lower().endswith("processed") for d in docs):
            break
        deadline.check("document processing", log)
        time.sleep(0.1)
    if store_path is None:
        return 0
    return _pid_of(store_path, "extraction", text, deadline, log)


def _gunicorn_helpers() -> Any:
    """``Deadline``, ``request`` and ``gunicorn_server`` of the gunicorn test (same folder)."""
    name = "triage_tests_lightrag_gunicorn"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            name, Path(__file__).with_name("test_lightrag_gunicorn.py")
        )
        assert spec is not None and spec.loader is not None
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


def _query(base: str, query: str, deadline: Any) -> str:
    r = _gunicorn_helpers().request("POST", f"{base}/query", deadline, json={"query": query, "mode": "local"})
    assert r.status_code == 200, r.text
    return r.headers["x-triage-query-id"]


def _worker_pids(store_path: Path) -> set[int]:
    with open_store(store_path, readonly=True) as store:
        return {int(r.config["pid"]) for r in store.runs("lightrag-server")}


def _pid_of(store_path: Path, kind: str, key: str, deadline: Any, log: Path) -> int:
    """The pid of the worker whose run recorded a ``kind`` event for ``key`` (a query id, or for
    extraction events a chunk text); waits for the worker's asynchronous write."""
    while True:
        if store_path.exists():
            with open_store(store_path, readonly=True) as store:
                for run in store.runs("lightrag-server"):
                    for e in store.events(kind, run_id=run.id):
                        if (e.chunk.text == key) if kind == "extraction" else (e.query_id == key):
                            return int(run.config["pid"])
        deadline.check(f"the {kind} event of {key!r} in the store", log)
        time.sleep(0.05)


class _stopped:
    """SIGSTOP a worker for the block (the master keeps it; gunicorn's timeout is longer)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def __exit__(self, *exc: object) -> None:
        os.kill(self.pid, signal.SIGCONT)
