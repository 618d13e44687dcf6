"""The per-class encoders write exactly what the generic dataclass walk they replaced wrote.

``reference_to_dict`` / ``reference_to_json`` below are the walk ``events.py`` used before (reflection
over ``dataclasses.fields`` per object, then ``json.dumps``); every event here, hand-made with the
awkward cases (escapes, lone surrogates, ``%``, int and float subclasses, huge and tiny numbers) and
hypothesis-generated, must give the identical dict and byte-identical JSON text.
"""

from __future__ import annotations

import enum
import json
import math
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage_plugins.contract import events
from triage_plugins.contract.events import (
    Chunk,
    Event,
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
    from_json,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.ontology import Ontology, PredicateSpec

# ----------------------------------------------------------------------------- the old generic walk


def _walk(obj: Any) -> Any:
    if type(obj).__module__ != events.__name__ and hasattr(obj, "to_dict") and not isinstance(obj, Mapping):
        return obj.to_dict()  # GraphView, Ontology
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: _walk(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, Mapping):
        return {k: _walk(v) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [_walk(v) for v in obj]
    return obj


def reference_to_dict(event: Event) -> dict[str, Any]:
    return {"event": event.kind, **_walk(event)}


def reference_to_json(event: Event) -> str:
    return json.dumps(reference_to_dict(event), ensure_ascii=False, allow_nan=False)


def _blocks(event: Event) -> list[Any]:
    """The building blocks inside an event (each has its own ``to_dict``)."""
    out: list[Any] = []
    for f in fields(event):  # type: ignore[arg-type]
        value = getattr(event, f.name)
        items = value if isinstance(value, tuple) else (value,)
        for item in items:
            if isinstance(item, Subgraph):
                out.extend([item, *item.triples])
            elif isinstance(item, Gold):
                out.extend([item, *(t for p in item.paths for t in p)])
            elif isinstance(item, ExtractedTriple):
                out.extend([item, item.triple])
            elif isinstance(item, GraphView):
                out.extend(item.triples)
            elif isinstance(item, Triple | Path | Chunk):
                out.append(item)
    return out


def assert_same_encoding(event: Event) -> None:
    expected = reference_to_json(event)
    assert event.to_dict() == reference_to_dict(event)
    assert json.dumps(event.to_dict(), ensure_ascii=False, allow_nan=False) == expected  # key order too
    assert event.to_json() == expected
    for block in _blocks(event):
        assert block.to_dict() == _walk(block)
        assert block._json() == json.dumps(_walk(block), ensure_ascii=False, allow_nan=False)


# ----------------------------------------------------------------------------- hand-made events

NASTY = [
    'quote " and \\ backslash',
    "tab\tnew\nline\r\x00\x1f\x7f",
    "lone \ud800 surrogate",
    "100% %s %d",
    "é ü 中文 \u2028 \U0001f600",
    "",
    " ",
]


class Count(enum.IntEnum):
    SEVEN = 7


class Big(int):
    def __repr__(self) -> str:
        return "Big(...)"


def _triple(i: int, typed: bool = False) -> Triple:
    s, p, o = f"{NASTY[i % 5]} s{i}", f"rel {i % 3}", f'o"{i}'
    return Triple(f"{s}|{p}|{o}", s, p, o, "Film" if typed else None, NASTY[i % 5] if typed else None)


def hand_made() -> list[Event]:
    triples = tuple(_triple(i, typed=i % 2 == 0) for i in range(12))
    chunk = Chunk("c\\1", 'doc "1"', NASTY[1] + NASTY[2], {"section": "2.1 %", "paragraph": 3, "n": 10**40})
    gold = Gold(("a", NASTY[2]), ((triples[0], triples[1]), (triples[2],)), (NASTY[3],))
    mentions = (NASTY[0], NASTY[2], "x")
    retrieval = RetrievalEvent(
        "lightrag",
        'q "1"',
        NASTY[1],
        mentions,
        {NASTY[0]: triples[0].subject, "x": None},
        Subgraph(triples, (NASTY[4], "n2")),
        (Path((triples[0].id,), -0.0), Path((triples[1].id, triples[2].id))),
        (chunk, Chunk("c2", "d", "")),
        Count.SEVEN,
        NASTY[3],
        1e-300,
        NASTY[4],
        gold,
    )
    onto = Ontology(
        classes=("Person", "Film"),
        disjoint=(("Person", "Film"),),
        predicates={"directed_by": PredicateSpec("directed_by", "Film", "Person", True, None)},
    )
    graph = GraphView(
        triples,
        nodes=("iso", NASTY[2]),
        labels={triples[0].subject: NASTY[0], "iso": "Iso"},
        sources={triples[0].id: ("c\\1", "c2"), triples[3].id: ()},
    )
    return [
        retrieval,
        RetrievalEvent("f", "q", ""),
        ExtractionEvent(
            "f",
            "run",
            chunk,
            (
                ExtractedTriple(triples[0], (-0.0, -1e-9, -123.456, -1e300), NASTY[1]),
                ExtractedTriple(triples[1]),
            ),
            NASTY[3],
            0.7,
        ),
        ExtractionEvent("f", "run", Chunk("c", "d", "t")),
        GraphEvent("f", graph, {NASTY[0]: triples[0].subject, "unlinked": None}, onto),
        GraphEvent("f", GraphView(())),
        GenerationEvent("f", "q", NASTY[1], mentions, {NASTY[2]: None}, Big(10**20), 0.1 + 0.2, "none"),
        GenerationEvent("f", "q", "a", prompt_tokens=12.0),
        FeedbackEvent("f", "q", 1, "gold", np.float64(4.5)),
        FeedbackEvent("f", "q", 0.25, "llm", NASTY[3]),
        FeedbackEvent("f", "q", 0.0, "human", Count.SEVEN),
        FeedbackEvent.from_rating("f", "q", 3),
        RerankRequest("f", NASTY[0], "triple", (NASTY[1], "b"), (1, 5e-324), query_id=NASTY[2]),
        RerankRequest("f", "q", "chunk", (), ()),
        GateDecision("reroute", NASTY[0], {"ERC": 0.5, "RRS": None}, {"top_k": 120, "mode": ("a", "b")}),
        GateDecision("proceed"),
    ]


@pytest.mark.parametrize("event", hand_made(), ids=lambda e: type(e).__name__)
def test_hand_made_events_encode_as_before(event):
    assert_same_encoding(event)
    if not isinstance(event, GateDecision):  # a gate's free-form tuple comes back as a list
        assert from_json(event.to_json()) == event


def test_unencodable_free_form_values_fail_as_before():
    for bad, error in ((float("nan"), ValueError), (object(), TypeError)):
        decision = GateDecision("warn", "r", {"x": bad})
        with pytest.raises(error):
            reference_to_json(decision)
        with pytest.raises(error):
            decision.to_json()


def test_a_subclass_without_its_own_encoder_is_walked():
    from dataclasses import dataclass

    @dataclass(frozen=True, slots=True)
    class Custom(Event):
        kind = "custom"
        name: str
        triples: tuple[Triple, ...] = ()

    event = Custom("n", (_triple(1),))
    assert event.to_dict() == {"event": "custom", "name": "n", "triples": [_triple(1).to_dict()]}
    assert event.to_json() == json.dumps(event.to_dict(), ensure_ascii=False, allow_nan=False)


# ----------------------------------------------------------------------------- hypothesis

_text = st.text(st.characters(exclude_categories=()), max_size=10) | st.sampled_from(NASTY)
_ids = _text.filter(lambda s: s.strip() != "")
_finite = st.floats(allow_nan=False, allow_infinity=False)
_whole = st.integers(0, 10**30) | st.just(Count.SEVEN)


@st.composite
def _triples(draw, max_size: int = 6) -> tuple[Triple, ...]:
    made = draw(st.lists(st.tuples(_ids, _ids, _ids, st.none() | _ids, st.none() | _ids), max_size=max_size))
    return tuple(Triple(f"{s}|{p}|{o}|{k}", s, p, o, a, b) for k, (s, p, o, a, b) in enumerate(made))


@st.composite
def _chunks(draw) -> tuple[Chunk, ...]:
    locators = draw(st.lists(st.dictionaries(_ids, _ids | st.integers(), max_size=3), max_size=3))
    return tuple(Chunk(f"c{i}", draw(_ids), draw(_text), loc) for i, loc in enumerate(locators))


@st.composite
def _retrieval(draw) -> RetrievalEvent:
    triples = draw(_triples())
    ids = [t.id for t in triples]
    paths = tuple(
        Path(tuple(draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3))), draw(st.none() | _finite))
        for _ in range(draw(st.integers(0, 3) if ids else st.just(0)))
    )
    mentions = tuple(draw(st.lists(_ids, max_size=4, unique=True)))
    grounding = {m: draw(st.none() | _ids) for m in mentions if draw(st.booleans())}
    gold = draw(
        st.none()
        | st.builds(
            Gold,
            st.lists(_ids, max_size=2).map(tuple),
            st.lists(_triples(2).filter(bool), max_size=2).map(tuple),
        )
    )
    return RetrievalEvent(
        draw(_ids),
        draw(_ids),
        draw(_text),
        mentions,
        grounding,
        Subgraph(triples, tuple(draw(st.lists(_ids, max_size=3)))),
        paths,
        draw(_chunks()),
        draw(st.none() | _whole),
        draw(st.none() | _text),
        draw(st.none() | st.floats(0, 1e300)),
        draw(_ids),
        gold,
    )


@st.composite
def _extraction(draw) -> ExtractionEvent:
    logprobs = st.none() | st.lists(
        st.floats(max_value=0.0, allow_nan=False, allow_infinity=False), max_size=4
    )
    extracted = tuple(ExtractedTriple(t, draw(logprobs), draw(st.none() | _text)) for t in draw(_triples()))
    chunk = draw(_chunks().filter(bool))[0]
    return ExtractionEvent(
        draw(_ids), draw(_ids), chunk, extracted, draw(st.none() | _text), draw(st.none() | st.floats(0, 2))
    )


@st.composite
def _graph(draw) -> GraphEvent:
    triples = draw(_triples())
    nodes = draw(st.lists(_ids, max_size=3))
    known = [t.subject for t in triples] + nodes
    labels = {n: draw(_ids) for n in known if draw(st.booleans())}
    sources = {t.id: tuple(draw(st.lists(_ids, max_size=2))) for t in triples if draw(st.booleans())}
    aliases = draw(st.dictionaries(_ids, st.none() | _ids, max_size=3))
    return GraphEvent(draw(_ids), GraphView(triples, nodes, labels, sources), aliases)


@st.composite
def _generation(draw) -> GenerationEvent:
    mentions = tuple(draw(st.lists(_ids, max_size=3, unique=True)))
    return GenerationEvent(
        draw(_ids),
        draw(_ids),
        draw(_text),
        mentions,
        {m: draw(st.none() | _ids) for m in mentions},
        draw(st.none() | _whole),
        draw(st.none() | st.floats(0, 100)),
        draw(st.sampled_from(["retrieved", "none"])),
    )


@st.composite
def _rerank(draw) -> RerankRequest:
    ids = tuple(draw(st.lists(_ids, max_size=4, unique=True)))
    relevance = tuple(draw(st.floats(0, 1) | st.integers(0, 1)) for _ in ids)
    return RerankRequest(
        draw(_ids),
        draw(_text),
        draw(st.sampled_from(["triple", "chunk"])),
        ids,
        relevance,
        draw(st.none() | _ids),
    )


_events = st.one_of(
    _retrieval(),
    _extraction(),
    _graph(),
    _generation(),
    _rerank(),
    st.builds(
        FeedbackEvent,
        _ids,
        _ids,
        st.floats(0, 1) | st.integers(0, 1),
        st.sampled_from(["llm", "human", "gold"]),
        st.none() | _text | st.integers() | _finite,
    ),
    st.builds(
        GateDecision,
        st.sampled_from(["proceed", "warn", "reroute"]),
        _text,
        st.dictionaries(_ids, st.none() | _finite, max_size=3),
        st.dictionaries(_ids, _text | st.integers() | _finite, max_size=3),
    ),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_events)
def test_generated_events_encode_as_before(event):
    assert_same_encoding(event)


def test_numbers_are_written_as_json_writes_them():
    for value in (0.1 + 0.2, 1e16, 1e-7, -0.0, 5e-324, 1.7976931348623157e308, 10**25):
        event = FeedbackEvent("f", "q", 0.5, raw=value)
        assert event.to_json() == reference_to_json(event)
        assert json.loads(event.to_json())["raw"] == value
    assert not math.isnan(json.loads(FeedbackEvent("f", "q", 0.5).to_json())["score"])


# ----------------------------------------------------------------------------- shared parts and the memo


def _split_round_trip(event: Event) -> None:
    """Split twice: objects met for the first time stay inline, met again they are parts; both
    skeletons join back to the exact text."""
    expected = reference_to_json(event)
    for _ in range(2):
        skeleton, parts = events.split_json(event)
        assert events.join_json(skeleton, parts) == event.to_json() == expected
        assert set(events.part_keys(skeleton)) == set(parts)
    if isinstance(event, RetrievalEvent):
        assert len(events.part_keys(skeleton)) == len(event.subgraph.triples) + len(event.chunks)
    else:
        assert parts == {} and skeleton == expected


def test_an_object_met_once_stays_inline_and_becomes_a_part_when_met_again():
    t, c = Triple.of("A", "r", "B"), Chunk("c", "d", "text")
    event = RetrievalEvent("f", "q", "?", subgraph=Subgraph((t,)), chunks=(c,))
    first, parts = events.split_json(event)
    assert parts == {} and first == event.to_json()
    again = RetrievalEvent("f", "q2", "?", subgraph=Subgraph((t, Triple.of("B", "r", "C"))), chunks=(c,))
    skeleton, parts = events.split_json(again)
    assert len(parts) == 2 and len(events.part_keys(skeleton)) == 2  # t and c; the new triple inline
    assert events.join_json(skeleton, parts) == again.to_json()


@pytest.mark.parametrize("event", hand_made(), ids=lambda e: type(e).__name__)
def test_hand_made_events_split_into_parts_and_join_back_byte_for_byte(event):
    _split_round_trip(event)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_events)
def test_generated_events_split_into_parts_and_join_back_byte_for_byte(event):
    _split_round_trip(event)


def test_a_part_mark_in_any_text_is_escaped_so_skeletons_split_exactly():
    mark = events.PART_MARK
    t = Triple(f"a{mark}b", mark, f"p{mark}", "o")
    event = RetrievalEvent(
        "f", f"q{mark}", mark * 3, subgraph=Subgraph((t,)), chunks=(Chunk("c", "d", mark),)
    )
    event.to_json()  # met once: parts from now on
    skeleton, parts = events.split_json(event)
    assert skeleton.count(mark) == 4  # two references, nothing else raw
    assert events.join_json(skeleton, parts) == json.dumps(reference_to_dict(event), ensure_ascii=False)


def test_equal_parts_share_a_key_and_differing_parts_do_not():
    a, b = Chunk("c", "d", "text"), Chunk("c", "d", "text")  # equal, two objects
    c = Chunk("c", "d", "text!")
    split = [RetrievalEvent("f", "q", "?", chunks=(x,)) for x in (a, b, c)]
    keys = [events.part_keys(events.split_json(e)[0]) for e in split + split][3:]  # met once before
    assert keys[0] == keys[1] != keys[2]


def test_the_memo_is_bounded_and_encodings_stay_exact_across_its_resets(monkeypatch):
    monkeypatch.setattr(events, "_FRAGMENT_BUDGET", 2_000)
    monkeypatch.setattr(events, "_memo", events._Memo())
    chunks = [Chunk(f"c{i}", "d", f"chunk {i} " * 30) for i in range(40)]
    memos, parted = set(), 0
    for i in range(300):
        event = RetrievalEvent("f", f"q{i}", "?", chunks=tuple(chunks[i % 37 : i % 37 + 3]))
        skeleton, parts = events.split_json(event)
        assert events.join_json(skeleton, parts) == event.to_json() == reference_to_json(event)
        assert events._memo.chars <= 2_000 + 3 * (64 + 330)  # past the budget a new memo starts
        memos.add(id(events._memo))
        parted += len(parts)
    assert len(memos) > 1 and parted > 0  # it was reset, and parts were still found between resets


def test_objects_seen_once_are_forgotten_past_their_bound_and_kept_ones_are_not(monkeypatch):
    monkeypatch.setattr(events, "_SEEN_ONCE", 50)
    monkeypatch.setattr(events, "_memo", events._Memo())
    hot = Chunk("hot", "d", "a chunk every query retrieves")
    for i in range(200):
        event = RetrievalEvent("f", f"q{i}", "?", chunks=(hot, Chunk(f"c{i}", "d", f"text {i}")))
        skeleton, parts = events.split_json(event)
        assert events.join_json(skeleton, parts) == reference_to_json(event)
        assert len(events._memo.seen) <= 50 + 2
        if i > 0:
            assert len(parts) == 1  # the hot chunk: a part from its second query on, across resets
