"""The store contract: the behaviour every backend behind :class:`triage_plugins.store.Store` shares.

Each test runs against every backend in ``BACKENDS``: SQLite (file, URL, memory) and PostgreSQL (a
real server, a fresh database per test; see ``tests/store/pgserver.py``).
"""

from __future__ import annotations

import time

import pytest

from triage_plugins.contract.errors import StoreError
from triage_plugins.contract.events import FeedbackEvent, RetrievalEvent
from triage_plugins.store import SCHEMA_VERSION, MetricRow, SQLiteStore, Store, is_store, open_store

BACKENDS = {
    "sqlite-file": lambda request, tmp_path: open_store(tmp_path / "contract.sqlite"),
    "sqlite-url": lambda request, tmp_path: open_store(f"sqlite:///{tmp_path}/contract-url.sqlite"),
    "sqlite-memory": lambda request, tmp_path: open_store(":memory:"),
    "postgres": lambda request, tmp_path: open_store(request.getfixturevalue("postgres_url")),
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request, tmp_path):
    opened = BACKENDS[request.param](request, tmp_path)
    yield opened
    opened.close()


def test_every_backend_implements_the_protocol(store):
    assert isinstance(store, Store)
    assert is_store(store)
    assert open_store(store) is store  # an opened store is passed through
    assert Store.open(store) is store
    assert store.schema_version == SCHEMA_VERSION


def test_paths_and_urls_are_not_stores(tmp_path):
    assert not is_store(tmp_path / "x.sqlite")
    assert not is_store("sqlite:///x.sqlite")
    assert isinstance(open_store(tmp_path / "y.sqlite"), SQLiteStore)


def test_unreachable_postgres_is_a_clear_error_without_the_password():
    pytest.importorskip("psycopg")
    with pytest.raises(StoreError, match="cannot connect to PostgreSQL store") as info:
        open_store("postgresql://someone:s3cret-pw@127.0.0.1:1/db")
    assert "s3cret-pw" not in str(info.value)
    assert "127.0.0.1" in str(info.value)


def test_the_environment_names_the_store(tmp_path, monkeypatch):
    monkeypatch.delenv("TRIAGE_STORE", raising=False)
    monkeypatch.delenv("TRIAGE_STORE_URL", raising=False)
    with pytest.raises(StoreError, match="TRIAGE_STORE_URL"):
        open_store()
    monkeypatch.setenv("TRIAGE_STORE", str(tmp_path / "old.sqlite"))
    monkeypatch.setenv("TRIAGE_STORE_URL", f"sqlite:///{tmp_path}/env.sqlite")
    with open_store() as opened:
        assert opened.path == tmp_path / "env.sqlite"  # TRIAGE_STORE_URL wins


def test_postgres_without_psycopg_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "psycopg", None)  # import psycopg now raises ImportError
    with pytest.raises(StoreError, match=r'pip install "triage-plugins\[postgres\]"'):
        open_store("postgresql://user@localhost/db")


def test_runs_events_round_trip(store):
    run = store.start_run("contract", {"k": 1})
    event = RetrievalEvent("fw", "q1", "Who?", mentions=("A",), grounding={"A": None})
    store.record_events([event, FeedbackEvent("fw", "q1", 0.5)], run)
    store.end_run(run)
    assert [r.id for r in store.runs("contract")] == [run]
    assert store.runs("contract")[0].ended_at is not None
    assert list(store.events("retrieval", run)) == [event]
    assert [e.kind for e in store.events(run_id=run, query_id="q1")] == ["retrieval", "feedback"]
    with pytest.raises(StoreError, match="unknown run id"):
        store.end_run("no-such-run")


def test_undefined_metrics_keep_their_reason(store):
    store.record_metrics(
        [MetricRow("query", "q1", "ERC", None, "no gold"), MetricRow("query", "q1", "QGR", 0.5)]
    )
    rows = {r.name: r for r in store.metrics("query")}
    assert rows["ERC"].value is None and rows["ERC"].reason == "no gold"
    assert rows["QGR"].value == 0.5
    with pytest.raises(StoreError, match="needs a reason"):
        store.record_metric("query", "q1", "RRS", None)


def test_scores_add_atomically_and_set(store):
    assert store.add_scores("triple", {"t1": 5.0, "t2": -1.0}) == {"t1": 105.0, "t2": 99.0}
    assert store.add_score("triple", "t1", 1.0) == 106.0
    store.set_score("chunk", "c1", 42.0)
    assert store.get_scores("triple", ["t1", "absent"])["t1"].n_updates == 2
    assert set(store.get_scores("triple")) == {"t1", "t2"}
    assert store.get_scores("chunk")["c1"].raw == 42.0
    with pytest.raises(StoreError, match="finite"):
        store.add_score("triple", "t1", float("nan"))


def test_params_and_transactions_roll_back(store):
    store.set_param("alpha", 0.4)
    with pytest.raises(RuntimeError), store.transaction():
        store.set_param("alpha", 0.9)
        store.add_score("triple", "t9", 1.0)
        raise RuntimeError("undo")
    assert store.get_param("alpha") == 0.4
    assert store.get_scores("triple", ["t9"]) == {}
    assert store.get_param("missing", "default") == "default"
    assert store.counts()["params"] == 1


def test_graph_snapshots_are_stored_once_and_rebuilt(store):
    from triage_plugins.contract.events import GraphEvent, Triple
    from triage_plugins.contract.graph_view import GraphView

    run = store.start_run("graphs")
    big = GraphEvent("fw", GraphView([Triple.of(f"E{i}", "r", f"E{i + 1}") for i in range(200)]))
    other = GraphEvent("fw", GraphView([Triple.of("A", "r", "B")]))
    store.record_events([big, big, other, big], run)
    assert store.counts()["blobs"] == 2  # two distinct graphs, four events
    rebuilt = list(store.events("graph", run))
    assert [len(e.graph.triples) for e in rebuilt] == [200, 200, 1, 200]
    assert rebuilt[0] == big


def test_runs_record_what_they_lost(store):
    run = store.start_run("serve")
    store.end_run(run, dropped=3, undelivered=2)
    (row,) = store.runs("serve")
    assert (row.dropped, row.undelivered) == (3, 2)
    with pytest.raises(StoreError, match="dropped"):
        store.end_run(run, dropped=-1)


def test_prune_keeps_learned_scores_and_recent_runs(store):
    from triage_plugins.contract.events import GraphEvent, Triple
    from triage_plugins.contract.graph_view import GraphView

    runs = [store.start_run("serve") for _ in range(4)]
    for i, run in enumerate(runs):
        store.record_event(GraphEvent("fw", GraphView([Triple.of("A", "r", f"B{i}")])), run)
        store.record_metric("query", f"q{i}", "ERC", 0.5, run_id=run)
    store.add_score("triple", "t1", 5.0)
    store.set_param("alpha", 0.4)
    with pytest.raises(StoreError, match="older_than or keep_runs"):
        store.prune()
    deleted = store.prune(keep_runs=1)
    assert deleted == {"events": 3, "metrics": 3, "runs": 3, "blobs": 3, "parts": 0}
    assert [r.id for r in store.runs()] == runs[-1:]
    assert store.get_scores("triple")["t1"].raw == 105.0 and store.get_param("alpha") == 0.4
    assert store.prune(older_than=3600) == {"events": 0, "metrics": 0, "runs": 0, "blobs": 0, "parts": 0}
    assert store.prune(older_than=0)["runs"] == 1


def test_params_step_atomically_within_bounds(store):
    assert store.add_param("alpha", 0.1, initial=0.5, bounds=(0.05, 0.95)) == pytest.approx(0.6)
    assert store.add_param("alpha", -0.25, bounds=(0.05, 0.95)) == pytest.approx(0.35)
    assert store.add_param("alpha", 5.0, bounds=(0.05, 0.95)) == 0.95  # clamped like a serial step
    assert store.get_param("alpha") == 0.95
    assert store.add_param("steps", 1.0) == 1.0 and store.add_param("steps", 2.0) == 3.0
    with pytest.raises(RuntimeError), store.transaction():
        store.add_param("steps", 10.0)
        raise RuntimeError("undo")
    assert store.get_param("steps") == 3.0
    store.set_param("label", "text")
    with pytest.raises(StoreError, match="not a number"):
        store.add_param("label", 1.0)
    with pytest.raises(StoreError, match="finite"):
        store.add_param("alpha", float("inf"))


def test_scores_changed_at_follows_every_write(store):
    assert store.scores_changed_at("triple") is None
    store.add_score("triple", "t1", 1.0)
    first = store.scores_changed_at("triple")
    assert first is not None and store.scores_changed_at("chunk") is None
    store.set_score("triple", "t2", 50.0)
    assert store.scores_changed_at("triple") >= first


def test_scores_changed_since_lists_only_the_recent_changes(store):
    store.add_scores("triple", {"t1": 1.0, "t2": -1.0})
    store.add_score("chunk", "c1", 1.0)
    changed = store.scores_changed_since("triple", 0.0)
    assert {k: r.raw for k, r in changed.items()} == {"t1": 101.0, "t2": 99.0}
    mark = store.scores_changed_at("triple") + 1e-3
    time.sleep(0.01)
    store.add_score("triple", "t2", -1.0)
    changed = store.scores_changed_since("triple", mark)
    assert list(changed) == ["t2"] and changed["t2"].raw == 98.0 and changed["t2"].n_updates == 2
    assert store.scores_changed_since("triple", time.time() + 60) == {}
    assert store.scores_changed_since("triple", 0.0, limit=1) is None  # too many: read them all instead


def test_last_event_of_a_query(store):
    run = store.start_run("serve")
    a = RetrievalEvent("fw", "q1", "first?", mentions=("A",))
    b = RetrievalEvent("fw", "q1", "second?", mentions=("B",))
    store.record_events([a, RetrievalEvent("other", "q1", "x?"), b, FeedbackEvent("fw", "q1", 1.0)], run)
    assert store.last_event("retrieval", framework="fw", query_id="q1") == b
    assert store.last_event("retrieval", framework="other", query_id="q1").query == "x?"
    assert store.last_event("retrieval", framework="fw", query_id="nope") is None


def test_unknown_run_ids_are_named(store):
    with pytest.raises(StoreError, match="unknown run id 'nope'"):
        store.record_event(FeedbackEvent("fw", "q", 1.0), "nope")
    with pytest.raises(StoreError, match="unknown run id"):
        store.record_metrics([MetricRow("query", "q", "ERC", 0.5, run_id="nope")])
    assert store.counts()["events"] == 0 and store.counts()["metrics"] == 0


def test_nested_transactions_roll_back_only_the_inner_part(store):
    with store.transaction():
        store.add_score("triple", "outer", 1.0)
        with pytest.raises(RuntimeError), store.transaction():
            store.add_score("triple", "inner", 1.0)
            raise RuntimeError("undo inner")
    assert set(store.get_scores("triple")) == {"outer"}


def test_retrieval_events_share_their_triples_and_chunks_and_prune_keeps_the_named_ones(store):
    """Each distinct retrieved triple and chunk is one row of ``parts`` in every backend; reading
    splices them back byte for byte; pruning deletes only those no remaining event names."""
    from triage_plugins.contract.events import Chunk, RetrievalEvent, Subgraph, Triple

    a, b, c = (Triple.of(f"E{i}", "r", f"E{i + 1}") for i in range(3))
    chunk = Chunk("c1", "doc", 'a chunk\'s text \u2028 with "quotes" ' * 20)
    old, new = store.start_run("old"), store.start_run("new")
    first = RetrievalEvent("f", "q1", "q?", subgraph=Subgraph((a, b)), chunks=(chunk,))
    second = RetrievalEvent("f", "q2", "q?", subgraph=Subgraph((b, c)), chunks=(chunk,))
    for event in (first, second):
        event.to_json()  # every triple and chunk met once: stored as parts from now on
    store.record_events([first, first], old)
    store.record_event(second, new)
    assert store.counts()["parts"] == 4
    assert [e.to_json() for e in store.events()] == [first.to_json(), first.to_json(), second.to_json()]
    assert store.last_event("retrieval", framework="f", query_id="q2") == second
    assert store.delete_run(old)["parts"] == 1  # a; b and the chunk are still named by q2
    assert store.counts()["parts"] == 3
    assert list(store.events()) == [second]


def test_a_part_pruned_by_another_store_object_is_written_again_by_one_that_wrote_it_before(store):
    """A store object does not send a part it knows it stored; a prune (here through a second
    object over the same store) makes it forget, so an event never names a pruned part."""
    from triage_plugins.contract.events import RetrievalEvent, Subgraph, Triple

    a, b = Triple.of("A", "r", "B"), Triple.of("B", "r", "C")
    RetrievalEvent("f", "q0", "?", subgraph=Subgraph((a, b))).to_json()  # met once: parts from now on
    old, new = store.start_run("old"), store.start_run("new")
    store.record_event(RetrievalEvent("f", "q1", "?", subgraph=Subgraph((a,))), old)
    store.record_event(RetrievalEvent("f", "q2", "?", subgraph=Subgraph((b,))), new)
    in_memory = store.path is None and not store.url.startswith("postgres")
    other = store if in_memory else open_store(store.url)  # a second object where it can have one
    try:
        assert other.delete_run(old)["parts"] == 1
    finally:
        if other is not store:
            other.close()
    assert store.counts()["parts"] == 1
    store.record_event(RetrievalEvent("f", "q3", "?", subgraph=Subgraph((a, b))), new)
    assert store.counts()["parts"] == 2  # a is stored again, not only named
    assert [e.query_id for e in store.events()] == ["q2", "q3"]
    assert list(store.events())[-1].subgraph.triples == (a, b)


def test_parts_of_a_rolled_back_transaction_are_not_taken_as_stored(store):
    from triage_plugins.contract.events import RetrievalEvent, Subgraph, Triple

    a = Triple.of("A", "r", "B")
    with pytest.raises(RuntimeError), store.transaction():
        store.record_event(RetrievalEvent("f", "q1", "?", subgraph=Subgraph((a,))))
        raise RuntimeError("roll back")
    assert store.counts()["parts"] == 0
    store.record_event(RetrievalEvent("f", "q2", "?", subgraph=Subgraph((a,))))
    assert store.counts()["parts"] == 1
    assert [e.subgraph.triples for e in store.events()] == [(a,)]


def test_parts_written_in_a_transaction_are_remembered_only_when_it_commits(store, monkeypatch):
    """Inside ``transaction()`` a write's parts are remembered (not sent again) once the outer
    transaction commits; the parts of a rolled-back transaction or savepoint are sent again."""
    from triage_plugins.contract.events import RetrievalEvent, Subgraph, Triple

    sent: list[list[str]] = []
    unknown = type(store)._unknown_parts

    def spy(self, conn, parts, written):
        out = unknown(self, conn, parts, written)
        sent.append([key for key, _ in out])
        return out

    monkeypatch.setattr(type(store), "_unknown_parts", spy)
    a, b, c = Triple.of("A", "r", "B"), Triple.of("B", "r", "C"), Triple.of("C", "r", "D")
    RetrievalEvent("f", "q0", "?", subgraph=Subgraph((a, b, c))).to_json()  # met once: parts from now on

    def record(qid: str, triple: Triple) -> None:
        store.record_event(RetrievalEvent("f", qid, "?", subgraph=Subgraph((triple,))))

    with store.transaction():
        record("q1", a)
    record("q2", a)
    assert [len(keys) for keys in sent] == [1, 0]  # committed: a is not sent again
    with pytest.raises(RuntimeError), store.transaction():
        record("q3", b)
        raise RuntimeError("roll back")
    with store.transaction():
        with pytest.raises(RuntimeError), store.transaction():
            record("q4", c)
            raise RuntimeError("roll back the savepoint only")
        record("q5", b)
    record("q6", c)
    assert [len(keys) for keys in sent] == [1, 0, 1, 1, 1, 1]  # b and c: sent again after each rollback
    assert [e.query_id for e in store.events()] == ["q1", "q2", "q5", "q6"]
    assert [e.subgraph.triples for e in store.events()] == [(a,), (a,), (b,), (c,)]


def test_metric_rows_of_one_query_are_packed_and_read_back_as_written(store):
    """Consecutive rows of one scope id (same run, framework, retriever, time) are one table row;
    reads, name filters, counts and deletes see every metric row as written, in order."""
    run = store.start_run("packing")
    nan_details = {"ratio": float("nan"), "inf": float("inf"), "nested": {"a": [1, 2]}, "s": "é\x01"}
    rows = [
        MetricRow("graph", "g", "DNR", 0.25, details={"isolated": 0}),
        MetricRow("query", "q1", "QGR", 1.0, framework="lightrag", retriever="global", n=3),
        MetricRow("query", "q1", "ERC", None, "no mentions", framework="lightrag", retriever="global"),
        MetricRow("query", "q1", "signature", None, "healthy", framework="lightrag", details=nan_details),
        MetricRow("query", "q1", "RHD", 0.1, framework="lightrag", details=nan_details),
        MetricRow("query", "q2", "QGR", 0.5, framework="lightrag", ts=12.5),
        MetricRow("query", "q2", "ERC", 2.0, framework="lightrag", ts=12.5),
    ]
    assert store.record_metrics(rows, run_id=run) == len(rows)
    assert store._read("SELECT COUNT(*) FROM metrics")[0][0] == 4  # DNR; q1's first two; q1's last two; q2
    got = store.metrics()
    assert [(r.scope, r.scope_id, r.name, r.value, r.reason, r.n, r.framework, r.retriever) for r in got] == [
        (r.scope, r.scope_id, r.name, r.value, r.reason, r.n, r.framework, r.retriever) for r in rows
    ]
    assert [repr(dict(r.details)) for r in got] == [repr(dict(r.details)) for r in rows]
    assert {r.run_id for r in got} == {run}
    assert [r.ts for r in got][-2:] == [12.5, 12.5]
    assert [(r.scope_id, r.value) for r in store.metrics(name="QGR")] == [("q1", 1.0), ("q2", 0.5)]
    assert [r.name for r in store.metrics("query", scope_id="q2")] == ["QGR", "ERC"]
    assert [r.name for r in store.metrics(retriever="global")] == ["QGR", "ERC"]
    assert store.metrics(name="absent") == []
    assert store.counts()["metrics"] == len(rows)
    assert store.delete_run(run)["metrics"] == len(rows)
    assert store.counts()["metrics"] == 0


def test_the_packed_rows_name_is_reserved_and_a_damaged_packed_row_is_a_clear_error(store):
    with pytest.raises(StoreError, match="reserved"):
        MetricRow("query", "q1", "*", 1.0)
    with pytest.raises(StoreError, match="details of metric 'B'"):
        store.record_metrics(
            [MetricRow("query", "q", "A", 1.0), MetricRow("query", "q", "B", 1.0, details={"x": object()})]
        )
    assert store.counts()["metrics"] == 0  # all or none
    store.record_metrics([MetricRow("query", "q", "A", 1.0), MetricRow("query", "q", "B", 2.0)])
    sql = "UPDATE metrics SET details = '[[\"A\", 1.0]]' WHERE name = '*'"
    with store._tx() as conn:
        conn.execute(sql)
    with pytest.raises(StoreError, match="packed metric row of query 'q' is damaged"):
        store.metrics()
