"""The reference pipeline emits every event through the manager, with the right content."""

from __future__ import annotations

import pytest

from triage_plugins import hookimpl
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Chunk, ExtractedTriple, GateDecision, Gold, Triple
from triage_plugins.kg.ontology import Ontology
from triage_plugins.reference.pipeline import ReferencePipeline, canonical_graph
from triage_plugins.runtime.manager import TriageManager


class Spy:
    def __init__(self, decision: str = "proceed") -> None:
        self.events: list[tuple[str, object]] = []
        self.decision = decision

    @hookimpl
    def triage_extraction(self, event):
        self.events.append(("extraction", event))

    @hookimpl
    def triage_graph(self, event):
        self.events.append(("graph", event))

    @hookimpl
    def triage_retrieval(self, event):
        self.events.append(("retrieval", event))

    @hookimpl
    def triage_gate(self, event):
        self.events.append(("gate", event))
        return GateDecision(self.decision, "test")

    @hookimpl
    def triage_generation(self, event):
        self.events.append(("generation", event))

    @hookimpl
    def triage_feedback(self, event):
        self.events.append(("feedback", event))

    def of(self, kind):
        return [e for k, e in self.events if k == kind]


def _extract(chunk: Chunk) -> list[ExtractedTriple]:
    s, p, o = chunk.text.rstrip(".").split(" ", 2)
    return [ExtractedTriple(Triple.of(s, p, o), None, chunk.text)]


CHUNKS = [
    Chunk("c1", "d1", "Inception directed_by Nolan."),
    Chunk("c2", "d1", "Nolan born_in London."),
    Chunk("c3", "d2", "inception genre scifi."),
]


def _pipeline(decision: str = "proceed", **options):
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    spy = Spy(decision)
    manager.register(spy)
    pipeline = ReferencePipeline(manager, **options)
    onto = Ontology(classes=("Film",))
    pipeline.index_chunks(CHUNKS, _extract, ontology=onto)
    return pipeline, spy, onto


def test_canonical_graph_merges_normalized_surface_forms_only():
    graph, surface = canonical_graph([(c.id, _extract(c)) for c in CHUNKS])
    assert "inception" not in graph.nodes  # "inception" normalizes like "Inception": one node
    assert surface["inception"] == "Inception"
    assert graph.sources["Inception|directed_by|Nolan"] == ("c1",)
    merged, _ = canonical_graph([(c.id, _extract(c)) for c in CHUNKS], aliases={"Nolan": "Christopher Nolan"})
    assert merged.has_node("Christopher Nolan") and not merged.has_node("Nolan")


def test_every_stage_is_announced_in_order():
    pipeline, spy, onto = _pipeline()
    assert len(spy.of("extraction")) == 3
    (graph_event,) = spy.of("graph")
    assert graph_event.ontology == onto
    answer = pipeline.ask("Where was the director of Inception born?", retriever="krag", gold=Gold(("London",)))
    kinds = [k for k, _ in spy.events]
    assert kinds[-3:] == ["gate", "retrieval", "generation"]
    (retrieval,) = spy.of("retrieval")
    assert retrieval.grounding == {"Inception": "Inception"}
    assert retrieval.retriever == "krag" and retrieval.gold == Gold(("London",))
    assert {"Inception|directed_by|Nolan", "Nolan|born_in|London"} <= set(retrieval.subgraph.triple_ids)
    assert answer.text == "London"
    assert spy.of("generation")[0].answer_grounding == {"London": "London"}
    pipeline.feedback(answer.query_id, 1.0, source="gold")
    assert spy.of("feedback")[0].query_id == retrieval.query_id


def test_reroute_retrieves_once_more_wider():
    pipeline, spy, _ = _pipeline("reroute", beam=1, paths_per_seed=1)
    answer = pipeline.ask("What about Inception?", retriever="krag")
    narrow = pipeline.retrieve("What about Inception?", retriever="krag")
    assert len(answer.retrieval.paths) > len(narrow.paths)
    assert len(spy.of("retrieval")) == 1  # only the retrieval the reader used is announced


def test_added_triples_keep_the_ontology():
    pipeline, spy, onto = _pipeline()
    pipeline.add_triples([Triple.of("Inception", "directed_by/born_in", "London")])
    last = spy.of("graph")[-1]
    assert last.ontology == onto and last.graph.has_triple("Inception|directed_by/born_in|London")


def test_unknown_retriever_and_option_are_clear_errors():
    manager = TriageManager(synchronous=True, entry_points=False, defaults=False)
    with pytest.raises(ConfigError, match="unknown retriever"):
        ReferencePipeline(manager, retriever="magic")
    with pytest.raises(ConfigError, match="unknown pipeline option"):
        ReferencePipeline(manager, beam_width=3)
