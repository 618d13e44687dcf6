"""Malformed input never escapes the documented error: from_dict/from_json raise EventError or succeed."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from triage_plugins.contract.errors import EventError
from triage_plugins.contract.events import EVENT_TYPES, Event, from_dict, from_json

_scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
_json = st.recursive(
    _scalars,
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
    max_leaves=20,
)
_FIELDS = sorted(
    {f for cls in EVENT_TYPES.values() for f in cls.__dataclass_fields__} | {"id", "subject", "triple"}
)


@st.composite
def _event_like(draw) -> dict:
    """Objects shaped like events: a known (or garbage) kind and plausible field names with any values."""
    kind = draw(st.sampled_from([*EVENT_TYPES, [], {}, 3, None, "nope"]))
    body = draw(st.dictionaries(st.sampled_from(_FIELDS), _json, max_size=8))
    return {"event": kind, **body}


def _only_event_error(call) -> None:
    try:
        result = call()
    except EventError:
        return
    assert isinstance(result, Event)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_event_like())
def test_from_dict_raises_only_event_error(data):
    _only_event_error(lambda: from_dict(data))


@settings(max_examples=300, deadline=None)
@given(_json)
def test_from_dict_on_any_json_value(value):
    _only_event_error(lambda: from_dict(value))


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=60) | st.binary(max_size=40))
def test_from_json_on_any_text(text):
    _only_event_error(lambda: from_json(text))


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,  # deeper than the parser's recursion limit
        '{"event": "feedback", "framework": "f", "query_id": "q", "score": ' + "9" * 5000 + "}",
        '{"event": []}',
        '{"event": {"a": 1}}',
        '{"event": "retrieval", "framework": "f", "query_id": "q", "query": "x", "grounding": [1, 2]}',
        '{"event": "retrieval", "framework": "f", "query_id": "q", "query": "x", "subgraph": {"triples": [[]]}}',
        json.dumps({"event": "graph", "framework": "f", "graph": "not a graph"}),
    ],
    ids=[
        "deep",
        "huge-int",
        "list-kind",
        "dict-kind",
        "list-for-mapping",
        "list-for-triple",
        "str-for-graph",
    ],
)
def test_known_malformed_inputs_give_event_error(text):
    with pytest.raises(EventError):
        from_json(text)


def test_non_text_is_an_event_error():
    with pytest.raises(EventError, match="expected a JSON text"):
        from_json(42)  # type: ignore[arg-type]
