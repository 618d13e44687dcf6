"""ImplementationRecorder: extraction events accumulate; a graph event writes §4.1 + §4.2 metrics."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import Chunk, ExtractedTriple, ExtractionEvent, GraphEvent, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.ontology import Ontology, PredicateSpec
from triage_plugins.plugins.implementation import ImplementationRecorder
from triage_plugins.store import Store


def extraction(
    chunk: str, run: str, *triples: tuple[str, str, str], prob: float | None = None, framework="fw"
):
    lps = None if prob is None else (math.log(prob),)
    return ExtractionEvent(
        framework,
        run,
        Chunk(chunk, "doc", "text"),
        tuple(ExtractedTriple(Triple.of(*t), lps) for t in triples),
    )


GRAPH = GraphView([Triple.of("a", "p", "b"), Triple.of("b", "p", "c")], nodes=["z"])


@pytest.fixture
def manager(tmp_path):
    store = Store.open(tmp_path / "t.sqlite")
    yield SimpleNamespace(store=store, config=TriageConfig(), run_id=None)
    store.close()


def rows_by_name(store: Store) -> dict:
    return {row.name: row for row in store.metrics(scope="graph")}


def test_graph_event_writes_validation_and_implementation_metrics(manager):
    recorder = ImplementationRecorder(manager)
    recorder.triage_extraction(extraction("c1", "r1", ("a", "p", "b"), ("b", "p", "c")))
    recorder.triage_extraction(extraction("c1", "r2", ("a", "p", "b")))
    recorder.triage_graph(GraphEvent("fw", GRAPH))
    rows = rows_by_name(manager.store)
    assert rows["DNR"].value == pytest.approx(3 / 4)  # a, c leaves; z isolated; b degree 2
    assert rows["DNR"].scope_id == "fw" and rows["DNR"].framework == "fw"
    assert rows["DNR"].details == {"isolated": 1, "leaves": 2}
    assert rows["EC"].value == pytest.approx(1 / 2)  # J({ab, bc}, {ab})
    assert rows["TCS"].value is None and "log-probabilities" in rows["TCS"].reason
    assert rows["LC"].value is None and rows["LC"].reason
    assert rows["CSR_link"].value == 1.0  # every endpoint is a node of the event's graph


def test_ontology_comes_from_the_graph_event(manager):
    onto = Ontology(classes=("Thing",), predicates={"p": PredicateSpec("p", functional=True)})
    recorder = ImplementationRecorder(manager)
    recorder.triage_extraction(extraction("c1", "r1", ("a", "p", "b"), prob=0.9))
    graph = GraphView([Triple.of("a", "p", "b"), Triple.of("a", "p", "c")])
    recorder.triage_graph(GraphEvent("fw", graph, ontology=onto))
    rows = rows_by_name(manager.store)
    assert rows["LC"].value == 0.0  # p is functional and a has two objects
    assert rows["SC"].value == 1.0
    assert rows["TCS"].value == pytest.approx(0.9)


def test_frameworks_are_kept_apart_and_without_extractions_only_validation_is_written(manager):
    recorder = ImplementationRecorder(manager)
    recorder.triage_extraction(extraction("c1", "r1", ("a", "p", "b"), framework="other"))
    recorder.triage_graph(GraphEvent("fw", GRAPH))
    names = set(rows_by_name(manager.store))
    assert {"DNR", "SRR", "LC", "OC", "COR", "CMP"} <= names
    assert "EC" not in names and "TCS" not in names
    assert len(recorder.events("other")) == 1


def test_without_a_store_metrics_stay_in_memory():
    recorder = ImplementationRecorder(SimpleNamespace(store=None))
    recorder.triage_extraction(extraction("c1", "r1", ("a", "p", "b")))
    recorder.triage_graph(GraphEvent("fw", GRAPH))
    assert recorder.latest["fw"]["DNR"].value == pytest.approx(3 / 4)


def test_tau_option_is_read_from_the_config(manager):
    manager.config = TriageConfig(options={"implementation.tau": 0.95})
    recorder = ImplementationRecorder(manager)
    recorder.triage_extraction(extraction("c1", "r1", ("a", "p", "b"), prob=0.9))
    recorder.triage_graph(GraphEvent("fw", GRAPH))
    assert rows_by_name(manager.store)["SCR"].value == 0.0  # TCS 0.9 < τ 0.95


def test_recorder_works_through_the_manager(tmp_path):
    from triage_plugins.runtime.manager import TriageManager

    mgr = TriageManager(store=tmp_path / "m.sqlite", synchronous=True, entry_points=False, defaults=False)
    try:
        mgr.register(ImplementationRecorder(mgr), name="implementation")
        mgr.emit_extraction(extraction("c1", "r1", ("a", "p", "b"), prob=0.5))
        mgr.emit_graph(GraphEvent("fw", GRAPH))
        mgr.flush()
        rows = {r.name: r for r in mgr.store.metrics(scope="graph")}
        assert rows["TCS"].value == pytest.approx(0.5)
        assert rows["DNR"].value == pytest.approx(3 / 4)
    finally:
        mgr.close()


def test_kept_extractions_are_bounded_and_the_window_is_reported(tmp_path):
    store = Store.open(tmp_path / "b.sqlite")
    options = {"implementation.max_chunks": 3, "implementation.max_events_per_chunk": 2}
    manager = SimpleNamespace(store=store, config=TriageConfig(options=options), run_id=None)
    recorder = ImplementationRecorder(manager)
    for i in range(10):  # ten chunks: only the last three are kept
        recorder.triage_extraction(extraction(f"c{i}", "r1", ("a", "p", "b"), prob=0.9))
    for _ in range(5):  # five extractions of one kept chunk: only the last two are kept
        recorder.triage_extraction(extraction("c9", "r1", ("a", "p", "b"), prob=0.9))
    kept = recorder.events("fw")
    assert len(kept) == 1 + 1 + 2  # c7, c8 once; c9 twice (the cap per chunk)
    assert sorted({e.chunk.id for e in kept}) == ["c7", "c8", "c9"]
    assert sum(1 for e in kept if e.chunk.id == "c9") == 2
    assert recorder.evicted == {"fw": 7}
    recorder.triage_graph(GraphEvent("fw", GRAPH))
    tcs = rows_by_name(store)["TCS"]
    assert tcs.details["window_chunks"] == 3 and tcs.details["evicted_chunks"] == 7
    store.close()


def test_a_chunk_seen_again_is_kept_over_older_ones(manager):
    manager.config = TriageConfig(options={"implementation.max_chunks": 2})
    recorder = ImplementationRecorder(manager)
    recorder.triage_extraction(extraction("old", "r1", ("a", "p", "b")))
    recorder.triage_extraction(extraction("mid", "r1", ("a", "p", "b")))
    recorder.triage_extraction(extraction("old", "r1", ("a", "p", "b")))  # seen again: now the newest
    recorder.triage_extraction(extraction("new", "r1", ("a", "p", "b")))
    assert {e.chunk.id for e in recorder.events("fw")} == {"old", "new"}
