"""The LightRAG adapter's memoized translation (``benchmarks/RESULTS.md``, "LightRAG global own CPU")
builds the same events as the plain path, on real ``lightrag-hku`` 1.5.7 payloads (offline).

Memoized: retrieved relations -> triples (on their string fields) and, per grounder, the grounding
of a query and the node a keyword links to. Each is checked against the unmemoized computation,
cold and warm; no private LightRAG surface beyond ``aquery_data``'s payload.
"""

from __future__ import annotations

import pytest

pytest.importorskip("lightrag")

from triage_lightrag import translate  # noqa: E402
from triage_plugins.contract.events import Chunk, Subgraph  # noqa: E402
from triage_plugins.contract.graph_view import normalize_label  # noqa: E402
from triage_plugins.kg.grounding import coalesce_mentions  # noqa: E402

MODES = ("local", "global", "hybrid", "mix", "naive")


@pytest.fixture(scope="module")
def payloads(lightrag_payloads):
    sizes = dict(n_people=10, n_organisations=3, n_cities=4, n_countries=2, n_films=5, n_documents=8, n_questions=6)
    return lightrag_payloads(0, MODES, **sizes)


def _plain_subgraph(data) -> Subgraph:
    triples = {}
    for r in data["relationships"]:
        src, tgt = r.get("src_id"), r.get("tgt_id")
        if src and tgt and src != tgt:
            t = translate.relation_triple(str(src), str(tgt), r.get("keywords"))
            triples.setdefault(t.id, t)
    nodes = dict.fromkeys(str(e["entity_name"]) for e in data["entities"] if e.get("entity_name"))
    return Subgraph(tuple(triples.values()), tuple(nodes))


def _plain_chunks(data) -> tuple[Chunk, ...]:
    chunks = {}
    for c in data["chunks"]:
        if c.get("chunk_id") and c["chunk_id"] not in chunks:
            chunks[c["chunk_id"]] = Chunk(
                str(c["chunk_id"]), str(c.get("file_path") or "unknown_source"), str(c.get("content") or "")
            )
    return tuple(chunks.values())


def _plain_mentions(grounder, query, low, high):
    grounded = grounder.ground(query)
    found = [(m, grounded.grounding[m]) for m in grounded.mentions]
    found += [(kw.strip(), grounder.link(kw)) for kw in low if isinstance(kw, str) and normalize_label(kw)]
    found += [(kw.strip(), n) for kw in high if isinstance(kw, str) and (n := grounder.link(kw)) is not None]
    coalesced = coalesce_mentions(found)
    return list(coalesced.mentions), dict(coalesced.grounding)


def test_memoized_translation_builds_the_plain_events(payloads):
    grounder, cases = payloads
    assert any(p["data"]["relationships"] for _, _, p, _ in cases)
    translate._RETRIEVED.clear()
    translate._MEMOS.clear()
    translate._CHUNKS.clear()
    for warm in (False, True):
        for i, (query, mode, payload, _) in enumerate(cases):
            keywords = payload["metadata"]["keywords"]
            low, high = keywords["low_level"], keywords["high_level"]
            assert translate.retrieved_subgraph(payload["data"]) == _plain_subgraph(payload["data"])
            assert translate.retrieved_chunks(payload["data"]) == _plain_chunks(payload["data"])
            expected = _plain_mentions(grounder, query, low, high)
            assert translate.query_mentions(grounder, query, low, high) == expected, (warm, mode)
            event = translate.retrieval_event(f"q{i}", query, mode, payload, grounder, 7, 0.5)
            assert (list(event.mentions), dict(event.grounding)) == expected
            assert event.subgraph == _plain_subgraph(payload["data"])
            again = translate.retrieval_event(f"q{i}", query, mode, payload, grounder, 7, 0.5)
            assert again == event and again.to_json() == event.to_json()
    assert translate._RETRIEVED and translate._MEMOS[grounder]


def test_relations_with_other_field_types_are_translated_as_before():
    data = {
        "relationships": [
            {"src_id": "A", "tgt_id": "B", "keywords": ["not", "a", "string"]},
            {"src_id": 1, "tgt_id": "B", "keywords": None},
            {"src_id": "A", "tgt_id": "A", "keywords": "self"},
            {"src_id": "", "tgt_id": "B"},
            {"src_id": "B", "tgt_id": "A", "keywords": "again"},
        ],
        "entities": [{"entity_name": "C"}],
        "chunks": [
            {"chunk_id": "c1", "file_path": "a.txt", "content": "one"},
            {"chunk_id": 2, "content": "two"},
            {"chunk_id": "c1", "file_path": "b.txt", "content": "dropped: the id repeats"},
        ],
    }
    for _ in range(2):
        assert translate.retrieved_subgraph(data) == _plain_subgraph(data)
        assert translate.retrieved_chunks(data) == _plain_chunks(data)
    edited = {"chunks": [{"chunk_id": "c1", "file_path": "a.txt", "content": "one, edited"}]}
    assert translate.retrieved_chunks(edited) == _plain_chunks(edited)
    moved = {"chunks": [{"chunk_id": "c1", "file_path": 7, "content": "one, edited"}]}
    assert translate.retrieved_chunks(moved) == _plain_chunks(moved)
    assert [t.id for t in translate.retrieved_subgraph(data).triples] == ["A|B", "1|B"]
