"""The store contract: the behaviour every backend behind :class:`triage_plugins.store.Store` shares.

Each test runs against every backend in ``BACKENDS``; a new backend (PostgreSQL) joins by adding
one opener there.
"""

from __future__ import annotations

import pytest

from triage_plugins.contract.errors import StoreError
from triage_plugins.contract.events import FeedbackEvent, RetrievalEvent
from triage_plugins.store import MetricRow, SQLiteStore, Store, is_store, open_store

BACKENDS = {
    "sqlite-file": lambda tmp_path: open_store(tmp_path / "contract.sqlite"),
    "sqlite-url": lambda tmp_path: open_store(f"sqlite:///{tmp_path}/contract-url.sqlite"),
    "sqlite-memory": lambda tmp_path: open_store(":memory:"),
}


@pytest.fixture(params=sorted(BACKENDS))
def store(request, tmp_path):
    opened = BACKENDS[request.param](tmp_path)
    yield opened
    opened.close()


def test_every_backend_implements_the_protocol(store):
    assert isinstance(store, Store)
    assert is_store(store)
    assert open_store(store) is store  # an opened store is passed through
    assert Store.open(store) is store


def test_paths_and_urls_are_not_stores(tmp_path):
    assert not is_store(tmp_path / "x.sqlite")
    assert not is_store("sqlite:///x.sqlite")
    assert isinstance(open_store(tmp_path / "y.sqlite"), SQLiteStore)


@pytest.mark.parametrize("url", ["postgresql://user@localhost/db", "postgres://h/db"])
def test_postgres_urls_say_what_is_missing(url):
    with pytest.raises(StoreError, match="PostgreSQL"):
        open_store(url)


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
