"""The LightRAG adapter builds its events through the contract's trusted constructors when the parts
are in normal form; the events equal the checked constructors' (fields, types, JSON), on real
``lightrag-hku`` 1.5.7 ``aquery_data`` payloads (offline), and malformed parts still go through the
checked constructor and fail as before. No private LightRAG surface beyond the payload."""

from __future__ import annotations

from dataclasses import fields
from types import MappingProxyType

import pytest

pytest.importorskip("lightrag")

from triage_lightrag import translate  # noqa: E402
from triage_lightrag.instrument import _generation_checked  # noqa: E402
from triage_plugins.contract.errors import EventError  # noqa: E402
from triage_plugins.contract.events import GenerationEvent, RetrievalEvent, Subgraph  # noqa: E402


@pytest.fixture(scope="module")
def payloads(lightrag_payloads):
    sizes = dict(n_people=8, n_organisations=3, n_cities=3, n_countries=2, n_films=4, n_documents=6, n_questions=4)
    return lightrag_payloads(1, ("local", "global", "naive"), **sizes)


def _checked_copy(event):
    """The same event through the checked constructor."""
    return type(event)(*[getattr(event, f.name) for f in fields(event)])


def _same(a, b) -> None:
    assert a == b and a._json() == b._json()
    for f in fields(a):
        assert type(getattr(a, f.name)) is type(getattr(b, f.name)), f.name


def test_retrieval_events_equal_the_checked_ones(payloads):
    grounder, cases = payloads
    assert any(p["data"]["relationships"] for _, _, p, _ in cases)
    for i, (query, mode, payload, _) in enumerate(cases):
        for g in (grounder, None):
            event = translate.retrieval_event(f"q{i}", query, mode, payload, g, 7, 0.5)
            _same(event, _checked_copy(event))
            _same(event.subgraph, Subgraph(event.subgraph.triples, event.subgraph.nodes))


def test_generation_events_equal_the_checked_ones(payloads):
    grounder, cases = payloads
    for i, (query, _, _, answers) in enumerate(cases):
        for text in (query, " and ".join(map(str, answers)), ""):
            found = grounder.ground_answer(text)
            mentions, grounding = tuple(found.mentions), dict(found.grounding)
            assert _generation_checked(f"q{i}", text, mentions, grounding, 0.25, "retrieved")
            trusted = GenerationEvent.trusted(
                "lightrag", f"q{i}", text, mentions, MappingProxyType(grounding), None, 0.25, "retrieved"
            )
            _same(trusted, GenerationEvent("lightrag", f"q{i}", text, mentions, grounding, None, 0.25, "retrieved"))


def test_malformed_parts_take_the_checked_path():
    payload = {"data": {"entities": [{"entity_name": "  "}], "relationships": [], "chunks": []}}
    with pytest.raises(EventError):
        translate.retrieved_subgraph(payload["data"])
    with pytest.raises(EventError):
        translate.retrieval_event(" ", "q", "global", {}, None, 1, 0.5)
    with pytest.raises(EventError):
        translate.retrieval_event("q", "q", "global", {}, None, -1, 0.5)
    event = translate.retrieval_event("q", "q", "global", {}, None, 1, 1)  # an int: made a float
    assert isinstance(event, RetrievalEvent) and type(event.seconds) is float
    assert not _generation_checked("q", "a", ("x",), {"x": " "}, 0.1, "retrieved")
    assert not _generation_checked("q", "a", (), {}, 0.1, "other")
