"""Events: validation rules raise EventError naming the field; JSON round trip is lossless."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage_plugins.contract.errors import EventError
from triage_plugins.contract.events import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    FeedbackEvent,
    GateDecision,
    GenerationEvent,
    Gold,
    GraphEvent,
    Path,
    RerankRequest,
    RetrievalEvent,
    Subgraph,
    Triple,
    from_dict,
    from_json,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.ontology import Ontology, PredicateSpec

# ----------------------------------------------------------------------------- strategies

ids = st.text(min_size=1, max_size=12).filter(lambda s: s.strip() != "")
texts = st.text(max_size=40)
finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
logprob = st.floats(max_value=0.0, allow_nan=False, allow_infinity=False)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


@st.composite
def triples(draw):
    return Triple(
        draw(ids),
        draw(ids),
        draw(ids),
        draw(ids),
        draw(st.none() | ids),
        draw(st.none() | ids),
    )


@st.composite
def chunks(draw):
    locator = draw(st.dictionaries(ids, st.integers() | texts, max_size=3))
    return Chunk(draw(ids), draw(ids), draw(texts), locator)


@st.composite
def subgraphs(draw):
    ts = draw(st.lists(triples(), max_size=5, unique_by=lambda t: t.id))
    return Subgraph(tuple(ts), tuple(draw(st.lists(ids, max_size=3))))


@st.composite
def retrievals(draw):
    sub = draw(subgraphs())
    tids = [t.id for t in sub.triples]
    paths = ()
    if tids:
        paths = tuple(
            Path(
                tuple(draw(st.lists(st.sampled_from(tids), min_size=1, max_size=3))), draw(st.none() | finite)
            )
            for _ in range(draw(st.integers(0, 3)))
        )
    mentions = tuple(draw(st.lists(ids, max_size=4, unique=True)))
    grounding = {m: draw(st.none() | ids) for m in mentions if draw(st.booleans())}
    gold = draw(
        st.none()
        | st.builds(
            Gold,
            answers=st.lists(ids, max_size=2).map(tuple),
            paths=st.lists(st.lists(triples(), min_size=1, max_size=2).map(tuple), max_size=2).map(tuple),
            entities=st.lists(ids, max_size=2).map(tuple),
        )
    )
    return RetrievalEvent(
        framework=draw(ids),
        query_id=draw(ids),
        query=draw(texts),
        mentions=mentions,
        grounding=grounding,
        subgraph=sub,
        paths=paths,
        chunks=tuple(draw(st.lists(chunks(), max_size=2, unique_by=lambda c: c.id))),
        expanded_nodes=draw(st.none() | st.integers(0, 10**6)),
        expanded_nodes_note=draw(st.none() | texts),
        seconds=draw(st.none() | st.floats(min_value=0, max_value=1e6)),
        retriever=draw(ids),
        gold=gold,
    )


@st.composite
def extractions(draw):
    ets = tuple(
        ExtractedTriple(
            draw(triples()),
            draw(st.none() | st.lists(logprob, max_size=4).map(tuple)),
            draw(st.none() | texts),
        )
        for _ in range(draw(st.integers(0, 3)))
    )
    return ExtractionEvent(
        draw(ids), draw(ids), draw(chunks()), ets, draw(st.none() | texts), draw(st.none() | st.floats(0, 2))
    )


@st.composite
def generations(draw):
    mentions = tuple(draw(st.lists(ids, max_size=3, unique=True)))
    return GenerationEvent(
        draw(ids),
        draw(ids),
        draw(texts),
        mentions,
        {m: draw(st.none() | ids) for m in mentions},
        draw(st.none() | st.integers(0, 10**6)),
        draw(st.none() | st.floats(0, 100)),
        draw(st.sampled_from(["retrieved", "none"])),
    )


@st.composite
def graphs(draw):
    ts = draw(st.lists(triples(), max_size=6))
    view = GraphView(ts, nodes=draw(st.lists(ids, max_size=3)))
    onto = None
    if draw(st.booleans()):
        onto = Ontology(
            classes=("Person", "Film"),
            disjoint=(("Person", "Film"),),
            predicates={"directed_by": PredicateSpec("directed_by", "Film", "Person", True)},
        )
    aliases = draw(st.dictionaries(ids, st.none() | ids, max_size=3))
    return GraphEvent(draw(ids), view, aliases, onto)


any_event = st.one_of(
    retrievals(),
    extractions(),
    generations(),
    graphs(),
    st.builds(
        FeedbackEvent,
        ids,
        ids,
        unit,
        st.sampled_from(["llm", "human", "gold"]),
        st.none() | texts | st.integers(),
    ),
    st.builds(GateDecision, st.sampled_from(["proceed", "warn", "reroute"]), texts),
)


@settings(max_examples=150, deadline=None)
@given(any_event)
def test_json_round_trip_is_lossless(event):
    line = event.to_json()
    assert "\n" not in line
    back = from_json(line)
    assert type(back) is type(event)
    assert back == event
    assert back.to_json() == line


def test_rerank_round_trip():
    req = RerankRequest("lightrag", "q?", "chunk", ("c1", "c2"), (0.25, 1), query_id="q1")
    assert from_dict(json.loads(req.to_json())) == req
    assert req.relevance == (0.25, 1.0)


def test_design_example_parses():
    line = (
        '{"event": "retrieval", "framework": "mine", "query_id": "q7", "retriever": "local",'
        ' "query": "Did the director of Inception also direct Interstellar?",'
        ' "mentions": ["Inception", "Interstellar"],'
        ' "grounding": {"Inception": "Inception", "Interstellar": "Interstellar"},'
        ' "subgraph": {"triples": ['
        '   {"id": "t1", "subject": "Inception", "predicate": "directed_by", "object": "Christopher Nolan"},'
        '   {"id": "t2", "subject": "Interstellar", "predicate": "directed_by", "object": "Chris Nolan"}],'
        '   "nodes": []},'
        ' "paths": [], "chunks": [], "expanded_nodes": 12, "seconds": 0.004}'
    )
    ev = from_json(line)
    assert isinstance(ev, RetrievalEvent)
    assert ev.subgraph.node_ids == {"Inception", "Interstellar", "Christopher Nolan", "Chris Nolan"}
    assert ev.expanded_nodes == 12


# ----------------------------------------------------------------------------- invalid input

T = Triple.of("a", "p", "b")


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: Triple("", "a", "p", "b"), "Triple.id"),
        (lambda: Triple("t", "  ", "p", "b"), "Triple.subject"),
        (lambda: Triple("t", "a", "p", 3), "Triple.object"),
        (lambda: ExtractedTriple(T, (-0.1, 0.2)), "ExtractedTriple.token_logprobs"),
        (lambda: ExtractedTriple(T, (-0.1, math.nan)), "ExtractedTriple.token_logprobs"),
        (lambda: ExtractedTriple(T, (-math.inf,)), "ExtractedTriple.token_logprobs"),
        (lambda: ExtractedTriple("not a triple"), "ExtractedTriple.triple"),
        (lambda: Chunk("c", "", "text"), "Chunk.doc_id"),
        (lambda: Chunk("c", "d", "text", {"para": 1.5}), "Chunk.locator"),
        (lambda: FeedbackEvent("f", "q", 1.5), "FeedbackEvent.score"),
        (lambda: FeedbackEvent("f", "q", -0.01), "FeedbackEvent.score"),
        (lambda: FeedbackEvent("f", "q", math.nan), "FeedbackEvent.score"),
        (lambda: FeedbackEvent("f", "q", 0.5, "robot"), "FeedbackEvent.source"),
        (lambda: FeedbackEvent("f", "", 0.5), "FeedbackEvent.query_id"),
        (lambda: FeedbackEvent.from_rating("f", "q", 6), "FeedbackEvent.raw"),
        (
            lambda: RetrievalEvent("f", "q", "?", mentions=("A",), grounding={"B": "B"}),
            "RetrievalEvent.grounding",
        ),
        (
            lambda: RetrievalEvent("f", "q", "?", mentions=("A",), grounding={"A": ""}),
            "RetrievalEvent.grounding",
        ),
        (lambda: RetrievalEvent("f", "q", "?", paths=(Path(("zzz",)),)), "RetrievalEvent.paths"),
        (lambda: RetrievalEvent("f", "q", "?", expanded_nodes=-1), "RetrievalEvent.expanded_nodes"),
        (lambda: RetrievalEvent("f", "q", "?", expanded_nodes=2.5), "RetrievalEvent.expanded_nodes"),
        (lambda: RetrievalEvent("f", "q", "?", seconds=math.inf), "RetrievalEvent.seconds"),
        (lambda: RetrievalEvent("f", "q", "?", mentions="Inception"), "RetrievalEvent.mentions"),
        (lambda: Subgraph((T, T)), "Subgraph.triples"),
        (lambda: Path(()), "Path.triple_ids"),
        (lambda: GenerationEvent("f", "q", "a", (), {"X": "X"}), "GenerationEvent.answer_grounding"),
        (lambda: GenerationEvent("f", "q", "a", context="closed"), "GenerationEvent.context"),
        (lambda: RerankRequest("f", "q", "edge", ("a",), (0.5,)), "RerankRequest.unit"),
        (lambda: RerankRequest("f", "q", "triple", ("a", "b"), (0.5,)), "RerankRequest.relevance"),
        (lambda: RerankRequest("f", "q", "triple", ("a",), (1.5,)), "RerankRequest.relevance"),
        (lambda: RerankRequest("f", "q", "triple", ("a", "a"), (0.1, 0.2)), "RerankRequest.ids"),
        (
            lambda: ExtractionEvent("f", "r", Chunk("c", "d", "t"), temperature=-1),
            "ExtractionEvent.temperature",
        ),
        (lambda: GateDecision("maybe"), "GateDecision.action"),
        (lambda: GraphEvent("f", "not a graph"), "GraphEvent.graph"),
        (lambda: GraphEvent("f", GraphView([T]), aliases={"x": ""}), "GraphEvent.aliases"),
    ],
)
def test_invalid_input_raises_event_error_naming_the_field(build, field):
    with pytest.raises(EventError) as info:
        build()
    assert str(info.value).startswith(field + ":"), str(info.value)


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        '{"event": "nope"}',
        '{"event": "feedback", "framework": "f", "query_id": "q"}',
        '{"event": "feedback", "framework": "f", "query_id": "q", "score": 0.5, "colour": "red"}',
        "[1, 2]",
        '{"event": "retrieval", "framework": "f", "query_id": "q", "query": "x", "subgraph": {"triples": [{"id": "t"}]}}',
    ],
)
def test_malformed_json_raises_event_error(line):
    with pytest.raises(EventError):
        from_json(line)


def test_rating_maps_to_unit_interval():
    assert FeedbackEvent.from_rating("f", "q", 1).score == 0.0
    assert FeedbackEvent.from_rating("f", "q", 4).score == 0.75
    assert FeedbackEvent.from_rating("f", "q", 5).raw == 5


def test_events_are_immutable_and_lists_become_tuples():
    ev = RetrievalEvent("f", "q", "?", mentions=["A"], grounding={"A": None})
    assert ev.mentions == ("A",)
    with pytest.raises(AttributeError):
        ev.query = "other"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ev.grounding["A"] = "B"  # type: ignore[index]


def test_unicode_survives():
    t = Triple.of("Zoë Šťastná", "née", "Łódź 🚀")
    ev = GraphEvent("fw", GraphView([t]))
    assert from_json(ev.to_json()) == ev


def test_missing_required_field_names_it():
    with pytest.raises(EventError, match=r"^Triple\.object: is required"):
        Triple.from_dict({"id": "t", "subject": "a", "predicate": "p"})
