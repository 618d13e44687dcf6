"""Issue #18 item 1: metrics exactly as TRIAGE defines them, each value computed by hand from the
paper's equation (the comment above each assertion) on an input that used to give another value."""

from __future__ import annotations

import math

import numpy as np
import pytest

from triage_plugins.contract.events import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    GenerationEvent,
    Gold,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.metrics import extraction as X
from triage_plugins.metrics import validation as V
from triage_plugins.metrics.per_query import usage_metrics
from triage_plugins.metrics.usage import hop_depth, rhd_distribution


def _retrieval(triples, grounding, *, gold=None) -> RetrievalEvent:
    return RetrievalEvent(
        "test",
        "q1",
        "q",
        mentions=tuple(grounding),
        grounding=grounding,
        subgraph=Subgraph(tuple(triples)),
        expanded_nodes=3,
        gold=gold,
    )


def _answer(text: str, grounding: dict[str, str | None]) -> GenerationEvent:
    return GenerationEvent("test", "q1", text, tuple(grounding), grounding)


AB = Triple.of("a", "r", "b")
BC = Triple.of("b", "r", "c")


# --------------------------------------------------------------------------- RHD (eq. 33)


def test_rhd_is_infinite_when_a_query_mention_is_ungrounded() -> None:
    # eq. 33: ℓ(q) = ∞ when the grounded query mentions "cannot be evaluated because grounding failed";
    # with M_q = {a, X} and X ungrounded, ℓ is not the single-entity 0 of {a} alone.
    two = _retrieval([AB], {"A": "a", "Xyz": None})
    assert hop_depth(two) == math.inf
    m = usage_metrics(two)
    assert m["RHD"].value is None and m["RHD"].details["hops"] == "inf"
    assert "not grounded" in m["RHD"].reason
    # three mentions, a–b–c retrieved (ℓ would be 2), one unresolved: ∞, not 2
    three = _retrieval([AB, BC], {"A": "a", "C": "c", "Xyz": None})
    assert hop_depth(three) == math.inf
    # the distribution puts both in the ∞ bucket: RHD(∞) = 2/2
    assert rhd_distribution([usage_metrics(e)["RHD"] for e in (two, three)]) == {math.inf: 1.0}
    # the same queries without the unresolved mention keep their finite depths (0 and 2)
    assert hop_depth(_retrieval([AB], {"A": "a"})) == 0
    assert hop_depth(_retrieval([AB, BC], {"A": "a", "C": "c"})) == 2


# --------------------------------------------------------------------------- GPC, RPR (eq. 34–35)


def test_empty_gold_paths_make_gpc_rpp_rpr_na_and_keep_the_other_metrics() -> None:
    gold = Gold.from_dict({"answers": ["b"], "paths": [[]]})  # accepted: one empty gold path
    event = _retrieval([AB], {"A": "a"}, gold=gold)
    m = usage_metrics(event, _answer("b", {"b": "b"}))  # used to raise ZeroDivisionError (|P*_q| = 0)
    # eq. 35: RPR = |K_S ∩ P*_q| / |P*_q| with P*_q = ∅ is 0/0; eq. 34 has no path to cover
    for name in ("GPC", "RPP", "RPR"):
        assert m[name].value is None, name
        assert "empty" in m[name].reason, name
    # the query's other metrics survive: QGR = 1/1, CC = 1 (b ∈ V_S), Hits@1 = 1
    assert m["QGR"].value == 1.0 and m["CC"].value == 1.0 and m["Hits@1"].value == 1.0


def test_gold_paths_ignore_an_empty_path_next_to_a_real_one() -> None:
    gold = Gold(answers=("c",), paths=((), (AB, BC)))
    m = usage_metrics(_retrieval([AB], {"A": "a"}, gold=gold))
    # P*_q = {ab, bc}; K_S = {ab}: RPR = 1/2, RPP = 1/1, GPC = 0 (bc missing)
    assert m["RPR"].value == pytest.approx(0.5)
    assert m["RPP"].value == 1.0
    assert m["GPC"].value == 0.0


# --------------------------------------------------------------------------- DNR, COR, CMP (eq. 21, 23–24)


def test_duplicate_records_of_one_fact_count_once_in_dnr() -> None:
    # K = {(a, r, b), (b, r, c)} recorded as three triples (b→c twice, under different ids).
    first, dup = Triple("t2", "b", "r", "c"), Triple("t3", "b", "r", "c")
    graph = GraphView([Triple("t1", "a", "r", "b"), first, dup])
    # eq. 21 over the set K: deg(a) = 1, deg(b) = 2, deg(c) = 1 → DNR = 2/3 (not 1/3 with c at 2)
    assert V.dead_node_ratio(graph).value == pytest.approx(2 / 3)
    # two records of one fact only: deg(b) = deg(c) = 1 → DNR = 2/2 = 1.0 (it used to be 0.0)
    assert V.dead_node_ratio(GraphView([first, dup])).value == 1.0


def test_duplicate_records_of_one_fact_count_once_in_cor_and_cmp() -> None:
    right1, right2 = Triple("t1", "Heat", "directed_by", "Mann"), Triple("t2", "Heat", "directed_by", "Mann")
    wrong = Triple("t3", "Heat", "year", "1996")
    graph = GraphView([right1, right2, wrong])
    reference = GraphView([Triple.of("Heat", "directed_by", "Mann"), Triple.of("Heat", "year", "1995")])
    # eq. 23: K = {(Heat, directed_by, Mann), (Heat, year, 1996)}, K ∩ K* = 1 fact → COR = 1 − 1/2 = 0.5
    assert V.correctness(graph, reference).value == pytest.approx(0.5)
    assert V.correctness(graph, reference).n == 2
    # eq. 24: K* has 2 facts, one in K → CMP = 0.5 (K* given with a duplicate record too)
    dup_ref = GraphView([*reference.triples, Triple("x", "Heat", "directed_by", "Mann")])
    assert V.completeness(graph, dup_ref).value == pytest.approx(0.5)
    assert V.completeness(graph, dup_ref).n == 2


# --------------------------------------------------------------------------- SCR (eq. 8)


def _xt(s: str, p: str, o: str, prob: float) -> ExtractedTriple:
    return ExtractedTriple(Triple.of(s, p, o), (math.log(prob),))


def test_scr_counts_passages_that_yielded_no_extraction_event() -> None:
    c1, c2 = Chunk("c1", "d", "text one"), Chunk("c2", "d", "text two")
    events = [
        ExtractionEvent("test", "r1", c1, (_xt("a", "p", "b", 0.9),)),
        ExtractionEvent("test", "r1", c2, (_xt("a", "p", "c", 0.2),)),
    ]
    # P = {c1, c2, c3}; only c1 has a triple with TCS ≥ 0.5; c3 emitted nothing → SCR = 1/3 (not 1/2)
    result = X.source_coverage_ratio(events, passages=["c1", "c2", "c3"])
    assert result.value == pytest.approx(1 / 3)
    assert result.n == 3 and result.details["silent_passages"] == 1
    out = X.implementation_metrics(events, passages=["c1", "c2", "c3"])
    assert out["SCR"].value == pytest.approx(1 / 3)
    # without the passage list, P is the passages that emitted an event (documented reading): 1/2
    assert X.source_coverage_ratio(events).value == pytest.approx(0.5)


# --------------------------------------------------------------------------- Soft-F1 and answer F1


def test_soft_f1_is_undefined_when_the_gold_set_is_empty_and_zero_by_convention_for_no_extraction() -> None:
    def emb(texts):
        return np.ones((len(texts), 1))

    t = [Triple.of("a", "p", "b")]
    # eq. 3: Soft-R = ΣM/|G| with G = ∅ is 0/0 → Soft-F1 undefined
    no_gold = X.soft_f1(t, [], embedder=emb)
    assert no_gold.value is None and "gold" in no_gold.reason
    # E = ∅, G ≠ ∅: Soft-R = 0, Soft-P is 0/0 → the WebQSP convention (TRIAGE [64]): P = 1, F1 = 0
    nothing = X.soft_f1([], t, embedder=emb)
    assert nothing.value == 0.0 and nothing.details["soft_r"] == 0.0
    assert "convention" in nothing.reason


def test_answer_f1_states_its_empty_prediction_convention() -> None:
    event = _retrieval([AB], {"A": "a"}, gold=Gold(answers=("b",)))
    m = usage_metrics(event, _answer("a", {"A": "a"}))  # names only the question's own entity
    # predicted = ∅: P is 0/0; TRIAGE's F1 is WebQSP's [64], which scores P = 1, R = 0, F1 = 0
    assert m["F1"].value == 0.0
    assert "convention" in m["F1"].reason
    assert m["F1"].details["precision"] == 1.0 and m["F1"].details["recall"] == 0.0
