"""Malformed constructor calls raise EventError, never TypeError or OverflowError (issue #34, item 7).

Each case starts from a valid call of an event or building block and poisons one or two arguments,
or one item inside a sequence or mapping argument, with a hostile value (a huge int, NaN, bytes, an
unhashable, a wrong dataclass...). The call must either build an event or raise ``EventError``.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

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
)
from triage_plugins.contract.graph_view import GraphView

T1 = Triple.of("Inception", "directed_by", "Nolan")
T2 = Triple.of("Nolan", "born_in", "London")
CHUNK = Chunk("c1", "d1", "Inception directed_by Nolan.", {"page": 1})
HOSTILE: list[Any] = [
    None, True, 0, -1, 10**400, -(10**400), 2**63, 1e308, float("nan"), float("inf"), "", " ", "\x00",
    "x" * 10_000, b"x", bytearray(b"x"), [], (), {}, set(), [[]], [{}], {"k": []}, {"k": {1: 2}},
    {1: "v"}, {("t",): 1}, [None], [10**400], [float("nan")], ["a", "a"], T1, CHUNK, [T1, T1],
    Path(("x",)), object(), 1.5, -0.0, {"k": 10**400}, {"k": float("nan")}, [b"x"], [[T1, None]],
]  # fmt: skip


def _valid() -> dict[type, dict[str, Any]]:
    """A valid keyword call of each class."""
    graph = GraphView([T1, T2])
    subgraph = Subgraph((T1, T2), ("Inception",))
    gold = Gold(("Nolan",), ((T1,),), ("Nolan",))
    return {
        Triple: {"id": "t", "subject": "a", "predicate": "r", "object": "b", "subject_type": "X"},
        Subgraph: {"triples": (T1,), "nodes": ("a",)},
        Path: {"triple_ids": (T1.id,), "score": 0.5},
        ExtractedTriple: {"triple": T1, "token_logprobs": (-0.1, -2.0), "evidence": "e"},
        Chunk: {"id": "c", "doc_id": "d", "text": "t", "locator": {"page": 1, "line": "2"}},
        Gold: {"answers": ("Nolan",), "paths": ((T1,),), "entities": ("Nolan",)},
        ExtractionEvent: {
            "framework": "f", "run_id": "r", "chunk": CHUNK,
            "triples": (ExtractedTriple(T1, (-0.5,)),), "model": "m", "temperature": 0.0,
        },
        GraphEvent: {"framework": "f", "graph": graph, "aliases": {"Chris Nolan": "Nolan"}},
        RetrievalEvent: {
            "framework": "f", "query_id": "q", "query": "Who directed Inception?",
            "mentions": ("Inception",), "grounding": {"Inception": "Inception"}, "subgraph": subgraph,
            "paths": (Path((T1.id,), 0.9),), "chunks": (CHUNK,), "expanded_nodes": 3,
            "seconds": 0.1, "retriever": "local", "gold": gold,
        },
        GenerationEvent: {
            "framework": "f", "query_id": "q", "answer": "Nolan", "answer_mentions": ("Nolan",),
            "answer_grounding": {"Nolan": "Nolan"}, "prompt_tokens": 12, "seconds": 0.2,
        },
        FeedbackEvent: {"framework": "f", "query_id": "q", "score": 0.5, "source": "human", "raw": 3},
        RerankRequest: {
            "framework": "f", "query": "q?", "unit": "triple", "ids": ("a", "b"), "relevance": (0.1, 0.9),
            "query_id": "q",
        },
        GateDecision: {"action": "warn", "reason": "r", "metrics": {"ERC": 0.5}, "suggestion": {"k": 2}},
    }  # fmt: skip


def _poisoned(rng: random.Random, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with one or two values, or one item of a sequence or mapping value, made hostile."""
    out = dict(kwargs)
    for name in rng.sample(sorted(out), k=min(len(out), rng.choice((1, 1, 2)))):
        value = out[name]
        if isinstance(value, tuple) and value and rng.random() < 0.5:
            items = list(value)
            items[rng.randrange(len(items))] = rng.choice(HOSTILE)
            out[name] = tuple(items)
        elif isinstance(value, dict) and value and rng.random() < 0.5:
            key = rng.choice(sorted(value))
            bad_key = {rng.choice(HOSTILE[:5]): 1}
            out[name] = {**value, key: rng.choice(HOSTILE)} if rng.random() < 0.7 else bad_key
        else:
            out[name] = rng.choice(HOSTILE)
    return out


def test_valid_calls_build() -> None:
    for cls, kwargs in _valid().items():
        assert isinstance(cls(**kwargs), cls)


@pytest.mark.parametrize("seed", range(6))
def test_poisoned_constructor_calls_raise_only_event_error(seed: int) -> None:
    rng = random.Random(seed)
    valid = _valid()
    classes = sorted(valid, key=lambda c: c.__name__)
    escaped: list[str] = []
    rejected = 0
    for _ in range(100):
        cls = rng.choice(classes)
        kwargs = _poisoned(rng, valid[cls])
        try:
            cls(**kwargs)
        except EventError:
            rejected += 1
        except Exception as exc:  # noqa: BLE001 - the point: nothing else may escape
            escaped.append(f"{cls.__name__}: {type(exc).__name__}: {str(exc)[:80]}")
    assert escaped == []
    assert rejected > 50  # the poison is real: most calls are refused


@pytest.mark.parametrize(
    ("cls", "name", "value"),
    [
        (Path, "score", 10**400),
        (ExtractedTriple, "token_logprobs", ("x",)),
        (ExtractedTriple, "token_logprobs", (-(10**400),)),
        (RerankRequest, "relevance", (10**400, 0.5)),
        (RetrievalEvent, "seconds", 10**400),
        (FeedbackEvent, "score", -(10**400)),
    ],
)
def test_known_escapes_are_event_errors(cls: type, name: str, value: Any) -> None:
    with pytest.raises(EventError, match=name):
        cls(**{**_valid()[cls], name: value})
