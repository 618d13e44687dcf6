"""The contract: every hook in hookspecs.py is documented and exercised through the manager."""

from __future__ import annotations

import inspect

from triage_plugins import hookimpl
from triage_plugins.contract import hookspecs
from triage_plugins.contract.events import (
    Chunk,
    ExtractionEvent,
    FeedbackEvent,
    GateDecision,
    GenerationEvent,
    GraphEvent,
    RerankRequest,
    RetrievalEvent,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.runtime.manager import TriageManager

HOOKS = sorted(n for n, f in vars(hookspecs).items() if n.startswith("triage_") and inspect.isfunction(f))
#: Called once by a registry (metrics, compare runners); exercised by those registries' tests.
REGISTRATION_HOOKS = ["triage_register_metrics", "triage_register_runners"]
#: Synchronous reads and writes of learned scores; exercised in tests/test_manager.py.
LEARNED_STATE_HOOKS = ["triage_learned_scores", "triage_seed_scores"]
#: Broadcast by the scorers (the usage and implementation plugins); exercised below with the defaults.
SCORED_HOOKS = ["triage_graph_scored", "triage_query_scored"]
EVENT_HOOKS = sorted(set(HOOKS) - set(REGISTRATION_HOOKS) - set(LEARNED_STATE_HOOKS) - set(SCORED_HOOKS))


class Recorder:
    """Implements every hook and records the calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    @hookimpl
    def triage_extraction(self, event):
        self.calls.append(("triage_extraction", event))

    @hookimpl
    def triage_graph(self, event):
        self.calls.append(("triage_graph", event))

    @hookimpl
    def triage_retrieval(self, event):
        self.calls.append(("triage_retrieval", event))

    @hookimpl
    def triage_gate(self, event):
        self.calls.append(("triage_gate", event))
        return GateDecision("warn", "test gate")

    @hookimpl
    def triage_generation(self, event):
        self.calls.append(("triage_generation", event))

    @hookimpl
    def triage_feedback(self, event):
        self.calls.append(("triage_feedback", event))

    @hookimpl
    def triage_rerank(self, request):
        self.calls.append(("triage_rerank", request))
        return [float(i) for i in range(len(request.ids))]


def test_hook_table_matches_design():
    assert (
        sorted(
            [
                "triage_extraction",
                "triage_graph",
                "triage_retrieval",
                "triage_gate",
                "triage_generation",
                "triage_feedback",
                "triage_rerank",
            ]
        )
        == EVENT_HOOKS
    )
    assert set(REGISTRATION_HOOKS) <= set(HOOKS)
    assert set(LEARNED_STATE_HOOKS) <= set(HOOKS)
    assert set(SCORED_HOOKS) <= set(HOOKS)


def test_every_hook_is_documented():
    for name in HOOKS:
        fn = getattr(hookspecs, name)
        doc = inspect.getdoc(fn) or ""
        params = list(inspect.signature(fn).parameters)
        assert doc.strip(), f"{name} has no docstring"
        for p in params:
            assert f":param {p}:" in doc, f"{name} does not document :param {p}:"
        opts = fn.triage_spec  # set by the HookspecMarker
        if opts.get("firstresult"):
            assert "first non-None result" in doc, f"{name} is firstresult but does not say so"
            assert ":return:" in doc


def test_every_hook_is_called_through_the_manager():
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    rec = Recorder()
    manager.register(rec)
    t = Triple.of("A", "r", "B")
    chunk = Chunk("c1", "d1", "A r B.")
    retrieval = RetrievalEvent("test", "q1", "A?", mentions=("A",), grounding={"A": "A"})
    manager.emit_extraction(ExtractionEvent("test", "run1", chunk))
    manager.emit_graph(GraphEvent("test", GraphView([t])))
    manager.emit_retrieval(retrieval)
    decision = manager.gate(retrieval)
    manager.emit_generation(GenerationEvent("test", "q1", "B"))
    manager.emit_feedback(FeedbackEvent("test", "q1", 1.0))
    prio = manager.rerank(RerankRequest("test", "A?", "triple", ("t1", "t2"), (0.5, 0.5)))
    called = sorted({name for name, _ in rec.calls})
    assert called == EVENT_HOOKS
    assert decision.action == "warn"
    assert prio == [0.0, 1.0]
    manager.close()


class Scored:
    """Implements the scoring hooks and keeps the records."""

    def __init__(self) -> None:
        self.records: list[tuple[str, object]] = []

    @hookimpl
    def triage_query_scored(self, record):
        self.records.append(("triage_query_scored", record))

    @hookimpl
    def triage_graph_scored(self, record):
        self.records.append(("triage_graph_scored", record))


def test_the_scoring_hooks_are_broadcast_by_the_default_scorers():
    manager = TriageManager(synchronous=True, entry_points=False)
    seen = Scored()
    manager.register(seen)
    t = Triple.of("A", "r", "B")
    retrieval = RetrievalEvent("test", "q1", "A?", mentions=("A",), grounding={"A": "A"})
    manager.emit_graph(GraphEvent("test", GraphView([t])))
    manager.emit_retrieval(retrieval)
    manager.emit_generation(GenerationEvent("test", "q1", "B"))
    assert sorted({name for name, _ in seen.records}) == SCORED_HOOKS
    phases = [r.phase for name, r in seen.records if name == "triage_query_scored"]
    assert phases == ["retrieval", "generation"]
    manager.close()
