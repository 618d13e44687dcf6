"""The trusted constructors (``Subgraph.trusted``, ``RetrievalEvent.trusted``,
``GenerationEvent.trusted``) make objects equal to the checked constructors' for values in normal form:
same fields, same types, same JSON, same hash behaviour of their parts."""

from __future__ import annotations

from dataclasses import fields
from types import MappingProxyType

from triage_plugins.contract.events import Chunk, GenerationEvent, RetrievalEvent, Subgraph, Triple


def _same(a: object, b: object) -> None:
    assert a == b
    assert type(a) is type(b)
    for f in fields(a):  # type: ignore[arg-type]
        x, y = getattr(a, f.name), getattr(b, f.name)
        assert x == y and type(x) is type(y), f.name


def test_trusted_subgraph_equals_the_checked_one():
    triples = (Triple("a|r|b", "a", "r", "b"), Triple("b|s|c", "b", "s", "c", "T", None))
    _same(Subgraph.trusted(triples, ("d",)), Subgraph(triples, ("d",)))
    _same(Subgraph.trusted((), ()), Subgraph())


def test_trusted_retrieval_event_equals_the_checked_one():
    sub = Subgraph((Triple("a|r|b", "a", "r", "b"),), ("c",))
    chunks = (Chunk("c1", "doc", "text"), Chunk("c2", "doc", "more"))
    grounding = {"A": "a", "Zed": None}
    values = ("lightrag", "q1", "Who is A?", ("A", "Zed"), grounding, sub, (), chunks, 3, "note", 0.25,
              "global", None)  # fmt: skip
    trusted = RetrievalEvent.trusted(*values[:4], MappingProxyType(dict(grounding)), *values[5:])
    checked = RetrievalEvent(*values)
    _same(trusted, checked)
    assert trusted.to_json() == checked.to_json()
    assert trusted.to_dict() == checked.to_dict()


def test_trusted_generation_event_equals_the_checked_one():
    grounding = {"B": "b"}
    values = ("lightrag", "q1", "B did it.", ("B",), grounding, None, 0.5, "retrieved")
    trusted = GenerationEvent.trusted(*values[:4], MappingProxyType(dict(grounding)), *values[5:])
    checked = GenerationEvent(*values)
    _same(trusted, checked)
    assert trusted.to_json() == checked.to_json()
