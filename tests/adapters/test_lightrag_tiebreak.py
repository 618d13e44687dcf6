"""Reweighting on, no feedback yet: LightRAG 1.5.7's own order, exactly (issue #31: 4/10 answers
reordered in local/hybrid/mix when the weight tie-break was lost).

A real LightRAG over the offline world corpus (scripted LLM, hashing embedder, byte tokenizer).
Local mode sorts edges by ``(edge_degrees_batch rank, weight)`` (``operate.py``,
``_find_most_related_edges_from_entities``): the reweighting knob rewrites the ranks, so equal
priorities must keep equal ranks for the weight to decide as it does without triage.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import pytest

pytest.importorskip("lightrag")

from lightrag import QueryParam  # noqa: E402

from triage_lightrag import instrument  # noqa: E402
from triage_lightrag.testing import ScriptedLightRAGLLM, build_rag  # noqa: E402
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.offline.world import generate_world  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402

MODES = ("local", "hybrid", "mix")


@pytest.fixture(scope="module")
def world():
    return generate_world(
        0, n_people=10, n_organisations=3, n_cities=4, n_countries=2, n_films=5, n_documents=8, n_questions=10
    )


@pytest.fixture(scope="module")
def rag(loop, world, tmp_path_factory):
    texts = [d.text for d in world.documents]
    llm = ScriptedLightRAGLLM(texts, answer="list")  # an answer naming what LightRAG ranked first
    instance = loop.run_until_complete(
        build_rag(tmp_path_factory.mktemp("tiebreak"), texts, workspace=f"tb-{uuid.uuid4().hex[:8]}", llm=llm)
    )
    yield instance
    loop.run_until_complete(instance.finalize_storages())


def answers(loop: Any, rag: Any, questions: list[str]) -> dict[tuple[str, str], Any]:
    """Per (mode, question): the relations and chunks in LightRAG's order, and the answer."""
    out = {}
    for mode in MODES:
        for q in questions:
            result = loop.run_until_complete(rag.aquery_llm(q, QueryParam(mode=mode)))
            data = result.get("data") or {}
            out[(mode, q)] = (
                [(r["src_id"], r["tgt_id"]) for r in data.get("relationships", [])],
                [c.get("chunk_id") for c in data.get("chunks", [])],
                (result.get("llm_response") or {}).get("content"),
            )
    return out


def test_the_corpus_has_weight_ties_and_differences(loop, rag):
    edges = loop.run_until_complete(rag.chunk_entity_relation_graph.get_all_edges())
    weights = Counter(float(e.get("weight", 1.0)) for e in edges)
    assert len(weights) > 1 and max(weights.values()) > 1  # some equal, some different


def test_reweighting_without_feedback_keeps_lightrags_order(loop, rag, world, tmp_path):
    questions = [q.text for q in world.questions]
    plain = answers(loop, rag, questions)
    manager = TriageManager(
        store=tmp_path / "t.sqlite", entry_points=False, config=TriageConfig(reweight=True, unit="triple")
    )
    inst = instrument(rag, manager=manager, reweight=True)
    try:
        reweighted = answers(loop, rag, questions)
        asked = inst.flush(10)
    finally:
        inst.uninstrument()
    assert asked is not False
    differing = [key for key in plain if plain[key] != reweighted[key]]
    assert differing == [], f"{len(differing)}/{len(plain)} differ, e.g. {differing[:3]}"
    assert any(len(rel) > 1 for rel, _, _ in plain.values())


def test_ranks_keep_equal_priorities_tied():
    """The knob itself: equal priority and degree give equal ranks (LightRAG's weight decides);
    a higher priority outranks a higher degree."""
    from triage_lightrag.reweight import rank_edges

    pairs = [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c")]
    degrees = {("a", "b"): 5, ("a", "c"): 5, ("a", "d"): 3, ("b", "c"): 5}
    flat = rank_edges(pairs, degrees, lambda _u, ids, rel: list(rel))
    assert flat is not None and flat[("a", "b")] == flat[("a", "c")] == flat[("b", "c")] > flat[("a", "d")]
    boosted = rank_edges(pairs, degrees, lambda _u, ids, rel: [0.1, 0.1, 0.9, 0.1])
    assert boosted is not None and boosted[("a", "d")] > boosted[("a", "b")] == boosted[("a", "c")]
