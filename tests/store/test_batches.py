"""Batch writes: one transaction per batch, prepared statements over chunks of rows, all or none."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from triage_plugins.contract.errors import StoreError
from triage_plugins.contract.events import (
    Chunk,
    FeedbackEvent,
    GraphEvent,
    RetrievalEvent,
    Subgraph,
    Triple,
    join_json,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.store import MetricRow, Store
from triage_plugins.store.sqlite import _WRITE_CHUNK


@pytest.fixture
def store(tmp_path: Path):
    s = Store.open(tmp_path / "b.sqlite")
    yield s
    s.close()


def _mixed(n: int) -> list:
    """Feedback, retrieval and (repeating) graph events, over several write chunks."""
    graphs = [
        GraphEvent("f", GraphView([Triple.of(f"G{k}", "r", f"H{i}") for i in range(5)])) for k in range(3)
    ]
    out = []
    for i in range(n):
        if i % 7 == 0:
            out.append(graphs[i % 3])
        elif i % 2:
            out.append(FeedbackEvent("f", f"q{i}", 0.5))
        else:
            t = Triple.of(f"E{i}", "r", f"E{i + 1}")
            out.append(RetrievalEvent("f", f"q{i}", f"query {i}?", subgraph=Subgraph((t,))))
    return out


def test_a_batch_larger_than_a_chunk_is_stored_in_order(store: Store) -> None:
    events = _mixed(2 * _WRITE_CHUNK + 37)
    run = store.start_run("batch")
    assert store.record_events(iter(events), run) == len(events)
    assert list(store.events(run_id=run)) == events
    assert store.counts()["blobs"] == 3  # graph snapshots deduplicated across chunks


def test_the_stored_text_is_the_events_json(store: Store) -> None:
    events = _mixed(40)
    for event in events:
        event.to_json()  # each triple met once: stored as parts from now on
    store.record_events(events)
    path = store.path
    store.close()
    with sqlite3.connect(path) as db:
        rows = db.execute(
            "SELECT COALESCE(b.json, e.json) FROM events e LEFT JOIN blobs b ON b.hash = e.blob ORDER BY e.id"
        ).fetchall()
        parts = dict(db.execute("SELECT hash, json FROM parts"))
    assert [join_json(r[0], parts) for r in rows] == [e.to_json() for e in events]
    assert len(parts) == sum(len(e.subgraph.triples) for e in events if e.kind == "retrieval")


def test_retrieved_triples_and_chunks_are_stored_once_however_often_retrieved(store: Store) -> None:
    """A retrieval event is a skeleton naming its triples and chunks; each distinct one is one row of
    ``parts`` (queries over one graph read the same ones again), and reading splices them back."""
    triples = [Triple.of(f"E{i}", "r", f"E{i + 1}") for i in range(6)]
    chunks = [Chunk(f"c{i}", "doc", f"chunk text {i} " * 50) for i in range(4)]
    events = [
        RetrievalEvent(
            "f",
            f"q{i}",
            f"query {i}?",
            subgraph=Subgraph(tuple(triples[i % 3 : i % 3 + 3])),
            chunks=tuple(chunks[i % 2 :]),
        )
        for i in range(300)
    ]
    run = store.start_run("parts")
    store.record_events(events[:150], run)
    for event in events[150:]:
        store.record_event(event, run)
    assert store.counts()["parts"] == 5 + 4  # triples 0..4, chunks 0..3
    assert list(store.events(run_id=run)) == events
    assert [e.to_json() for e in store.events(run_id=run)] == [e.to_json() for e in events]
    assert store.last_event("retrieval", framework="f", query_id="q299") == events[299]
    path = store.path
    store.close()
    with sqlite3.connect(path) as db:
        stored = sum(len(text) for (text,) in db.execute("SELECT json FROM events"))
    assert stored < sum(len(e.to_json()) for e in events) / 5


def test_an_event_naming_a_missing_part_is_a_clear_error(store: Store) -> None:
    event = RetrievalEvent("f", "q1", "q?", subgraph=Subgraph((Triple.of("A", "r", "B"),)))
    event.to_json()  # its triple met once: stored as a part
    store.record_event(event)
    path = store.path
    store.close()
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM parts")
    with (
        Store.open(path) as again,
        pytest.raises(StoreError, match="names part '[0-9a-f]{32}', which is not stored"),
    ):
        list(again.events())


def test_a_failure_in_a_later_chunk_rolls_back_the_whole_batch(store: Store) -> None:
    events = _mixed(_WRITE_CHUNK + 10)
    with pytest.raises(StoreError, match="expects a triage event"):
        store.record_events([*events, "not an event"])  # type: ignore[list-item]
    with pytest.raises(StoreError, match="unknown run id 'nope'"):
        store.record_events(events, "nope")
    assert store.counts()["events"] == 0
    assert store.counts()["blobs"] == 0


def test_metric_batches_name_the_unknown_run(store: Store) -> None:
    run = store.start_run("m")
    rows = [MetricRow("query", f"q{i}", "ERC", i / 1000, run_id=run) for i in range(_WRITE_CHUNK + 5)]
    assert store.record_metrics(rows) == len(rows)
    assert [r.value for r in store.metrics(name="ERC")] == [r.value for r in rows]
    bad = [*rows[:3], MetricRow("query", "q", "ERC", 1.0, run_id="missing-run")]
    with pytest.raises(StoreError, match="unknown run id 'missing-run'"):
        store.record_metrics(bad)
    with pytest.raises(StoreError, match="unknown run id 'other'"):
        store.record_metrics([MetricRow("query", "q", "ERC", 1.0)], run_id="other")
    assert len(store.metrics()) == len(rows)


def test_empty_batches_write_nothing(store: Store) -> None:
    assert store.record_events([]) == 0
    assert store.record_metrics(iter(())) == 0
    assert store.counts()["events"] == store.counts()["metrics"] == 0


@pytest.mark.parametrize("allow_nan", [True, False])
def test_row_json_is_json_dumps_with_the_stores_options(allow_nan):
    import json
    import math

    from triage_plugins.store.rows import _dumps, _json_default

    for value in (
        {},
        {"a": 1, "b": [1, 2.5, None], "c": "é\u2028\ud800"},
        {"s": {3, 1}},
        {"m": {"k": (1, 2)}},
    ):
        assert _dumps(value, "x", allow_nan=allow_nan) == json.dumps(
            value, ensure_ascii=False, allow_nan=allow_nan, default=_json_default
        )
    special = {"x": math.inf, "n": math.nan}
    if allow_nan:
        assert _dumps(special, "x", allow_nan=True) == '{"x": Infinity, "n": NaN}'
    else:
        with pytest.raises(StoreError, match="x cannot be stored as JSON"):
            _dumps(special, "x", allow_nan=False)


def test_objects_met_once_stay_inline_and_add_no_part_rows(store: Store) -> None:
    """An adapter building new objects per query (nothing met twice) pays no part rows or hashes."""
    events = _mixed(60)  # a new Triple object per retrieval event
    store.record_events(events)
    assert store.counts()["parts"] == 0
    assert list(store.events()) == events
