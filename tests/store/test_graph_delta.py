"""A graph event is stored as a delta against the previous snapshot (issue #34): its text is cut into
content-defined chunks kept once each, so a big graph updated by a few documents stores only the
chunks around the change, and ``store.events("graph")`` still returns every event as recorded.
Run on SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from triage_plugins.contract.events import PART_MARK, GraphEvent, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.store import Store, open_store
from triage_plugins.store.chunks import SMALL, split_text


def _graph(n_docs: int, *, seed: int = 0) -> GraphView:
    """A graph built document by document (20 triples each, over 5,000 entities), as the adapters'
    graphs are: a graph of more documents starts with the same triples, its nodes and labels gain
    new entities where they sort."""
    rng = random.Random(seed)
    triples: list[Triple] = []
    sources: dict[str, list[str]] = {}
    for doc in range(n_docs):
        for _ in range(20):
            s, p, o = rng.randrange(5000), rng.randrange(40), rng.randrange(5000)
            triple = Triple.of(f"Entity {s}", f"relation_{p}", f"Entity {o}")
            triples.append(triple)
            sources[triple.id] = [f"doc-{doc}-chunk-0"]
    nodes = sorted({n for t in triples for n in (t.subject, t.object)}, key=lambda n: int(n.split()[1]))
    return GraphView(triples, nodes=nodes, labels={n: n.lower() for n in nodes}, sources=sources)


def _stored_chars(store) -> int:
    """Characters held by the graph snapshots and the parts."""
    rows = store._read(
        "SELECT (SELECT COALESCE(SUM(LENGTH(json)), 0) FROM blobs) + (SELECT COALESCE(SUM(LENGTH(json)), 0) FROM parts)"
    )
    return int(rows[0][0])


@pytest.fixture(params=["sqlite", "postgres"])
def url(request, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "graph.sqlite")
    return request.getfixturevalue("postgres_url")


def test_a_slightly_changed_graph_stores_a_small_delta_and_both_read_back_identical(url: str) -> None:
    before = GraphEvent("lightrag", _graph(1000))
    after = GraphEvent("lightrag", _graph(1010))  # the same 1,000 documents, then 10 more
    assert len(before.to_json()) > 10 * SMALL
    with open_store(url) as store:
        run = store.start_run("test")
        empty = _stored_chars(store)
        store.record_event(before, run)
        first = _stored_chars(store) - empty
        store.record_event(after, run)
        second = _stored_chars(store) - empty - first
        store.record_event(after, run)  # the same graph again: nothing new at all
        third = _stored_chars(store) - empty - first - second
        read = [e.to_json() for e in store.events("graph")]
    assert read == [before.to_json(), after.to_json(), after.to_json()]
    assert first >= len(before.to_json())  # the first snapshot is stored whole, once
    assert second < len(after.to_json()) / 20, (second, len(after.to_json()))
    assert third == 0


def test_the_chunks_of_two_snapshots_are_shared_around_the_change() -> None:
    text = GraphEvent("f", _graph(1000)).to_json()
    more = GraphEvent("f", _graph(1010)).to_json()
    skeleton, chunks = split_text(text)
    skeleton2, chunks2 = split_text(more)
    assert "".join(chunks[k] for k in skeleton.split(PART_MARK)[1::2]) == text
    assert len(chunks) > 20
    new = set(chunks2) - set(chunks)
    assert sum(len(chunks2[k]) for k in new) < len(more) / 20
    assert split_text("short") == ("short", {})


def test_prune_keeps_the_chunks_of_a_snapshot_still_named(tmp_path: Path) -> None:
    with Store.open(tmp_path / "p.sqlite") as store:
        old, kept = store.start_run("old"), store.start_run("kept")
        first, second = GraphEvent("f", _graph(600, seed=1)), GraphEvent("f", _graph(600, seed=2))
        store.record_event(first, old)
        store.record_event(second, kept)
        deleted = store.delete_run(old)
        assert deleted["blobs"] == 1 and deleted["parts"] > 0  # the first graph's own chunks
        assert [e.to_json() for e in store.events("graph")] == [second.to_json()]
