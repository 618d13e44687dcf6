"""Tests of the store-writing default plugin (plugins/recorder.py)."""

from __future__ import annotations

from pathlib import Path

import pluggy

from triage_plugins.contract import hookspecs
from triage_plugins.contract.events import (
    Chunk,
    ExtractionEvent,
    FeedbackEvent,
    GenerationEvent,
    GraphEvent,
    RetrievalEvent,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.plugins.recorder import StoreRecorder
from triage_plugins.store import Store


class StandIn:
    """The two attributes of the manager the recorder reads."""

    def __init__(self, store: Store | None, run_id: str | None = None) -> None:
        self.store = store
        self.run_id = run_id


T = Triple.of("Inception", "directed_by", "Christopher Nolan")


def five_events() -> list:
    return [
        ExtractionEvent("mine", "r1", Chunk("c1", "d1", "Inception was directed by Christopher Nolan."), ()),
        GraphEvent("mine", GraphView([T])),
        RetrievalEvent("mine", "q1", "Who directed Inception?", mentions=("Inception",)),
        GenerationEvent("mine", "q1", "Christopher Nolan"),
        FeedbackEvent("mine", "q1", 1.0, "gold"),
    ]


def test_each_hook_records_under_the_run_id(tmp_path: Path) -> None:
    with Store.open(tmp_path / "r.sqlite") as store:
        run = store.start_run("demo")
        recorder = StoreRecorder(StandIn(store, run))
        ext, graph, ret, gen, fb = five_events()
        recorder.triage_extraction(ext)
        recorder.triage_graph(graph)
        recorder.triage_retrieval(ret)
        recorder.triage_generation(gen)
        recorder.triage_feedback(fb)
        assert list(store.events(run_id=run)) == [ext, graph, ret, gen, fb]


def test_no_run_id_records_without_run(tmp_path: Path) -> None:
    class NoRun:
        def __init__(self, store: Store) -> None:
            self.store = store

    with Store.open(tmp_path / "r.sqlite") as store:
        StoreRecorder(NoRun(store)).triage_feedback(FeedbackEvent("mine", "q9", 0.5))
        assert [e.query_id for e in store.events(kind="feedback")] == ["q9"]
        assert store.runs() == []


def test_a_store_attached_later_is_used(tmp_path: Path) -> None:
    manager = StandIn(None)
    recorder = StoreRecorder(manager)
    recorder.triage_feedback(FeedbackEvent("mine", "q0", 0.0))
    with Store.open(tmp_path / "r.sqlite") as store:
        manager.store = store
        recorder.triage_feedback(FeedbackEvent("mine", "q1", 1.0))
        assert [e.query_id for e in store.events()] == ["q1"]


def test_without_store_the_hooks_do_nothing() -> None:
    recorder = StoreRecorder(StandIn(None, "run"))
    for event in five_events():
        getattr(recorder, f"triage_{event.kind}")(event)  # must not raise
    assert recorder.store is None


def test_registers_on_the_triage_hook_spec(tmp_path: Path) -> None:
    pm = pluggy.PluginManager(hookspecs.PROJECT)
    pm.add_hookspecs(hookspecs)
    with Store.open(tmp_path / "r.sqlite") as store:
        pm.register(StoreRecorder(StandIn(store)))
        ext, graph, ret, gen, fb = five_events()
        pm.hook.triage_extraction(event=ext)
        pm.hook.triage_graph(event=graph)
        pm.hook.triage_retrieval(event=ret)
        pm.hook.triage_generation(event=gen)
        pm.hook.triage_feedback(event=fb)
        assert [e.kind for e in store.events()] == [
            "extraction",
            "graph",
            "retrieval",
            "generation",
            "feedback",
        ]
