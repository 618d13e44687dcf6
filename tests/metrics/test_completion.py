"""KG Completion probe (TRIAGE §4.1.3): filtered ranks, MRR_type (eq. 17), ECE (eq. 18)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.kg.ontology import Ontology, PredicateSpec
from triage_plugins.metrics import completion as C

CANDIDATES = ("a", "b", "c", "d", "e")
SCORES = {
    "h": {"a": 0.9, "b": 0.8, "c": 0.7, "d": 0.7, "e": 0.1},
    "h2": dict.fromkeys(CANDIDATES, 0.2),
}


def table_scorer(head: str, relation: str, candidates: Sequence[str]) -> np.ndarray:
    return np.array([SCORES[head][c] for c in candidates])


TEST = [Triple.of("h", "r", "c"), Triple.of("h2", "r", "e")]
KNOWN = [Triple.of("h", "r", "a")]  # filtered out of the first query's candidates


def test_filtered_ranks_hand_computed():
    result = C.filtered_ranks(TEST, table_scorer, CANDIDATES, known=KNOWN)
    # q1: a filtered, b above, d tied -> 1 + 1 + 1/2; q2: four ties -> 1 + 4/2
    np.testing.assert_allclose(result.ranks, [2.5, 3.0])
    np.testing.assert_allclose(result.top_confidence, [0.8, 0.2])
    np.testing.assert_allclose(result.top_correct, [0.0, 1 / 5])
    assert result.type_ranks is None
    unfiltered = C.filtered_ranks(TEST[:1], table_scorer, CANDIDATES)
    assert unfiltered.ranks[0] == 3.5


def test_rank_metrics_hand_computed():
    ranks = [2.5, 3.0]
    assert C.mean_rank(ranks).value == pytest.approx(2.75)
    assert C.mean_reciprocal_rank(ranks).value == pytest.approx((1 / 2.5 + 1 / 3) / 2)
    assert C.hits_at_k(ranks, 1).value == 0.0
    assert C.hits_at_k(ranks, 3).value == 1.0
    assert C.hits_at_k([1, 4, 11, 2], 3).value == 0.5
    with pytest.raises(ConfigError):
        C.hits_at_k(ranks, 0)


def test_type_constrained_rank_uses_range_compatible_candidates():
    onto = Ontology(
        classes=("Person", "Film", "Director"),
        subclass_of={"Director": "Person"},
        predicates={"r": PredicateSpec("r", range="Person")},
    )
    types = {"a": {"Film"}, "b": {"Director"}, "c": {"Person"}, "d": {"Film"}}  # e untyped: kept
    result = C.filtered_ranks(TEST, table_scorer, CANDIDATES, known=KNOWN, ontology=onto, entity_types=types)
    # q1: only b (a Director, so a Person) outranks c; the tie d is a Film -> 2
    # q2: ties among type-valid b, c -> 1 + 2/2
    np.testing.assert_allclose(result.type_ranks, [2.0, 2.0])
    assert C.type_constrained_mrr(result.type_ranks).value == pytest.approx(0.5)
    assert C.type_constrained_mrr(None).value is None


def test_expected_calibration_error_hand_computed():
    result = C.expected_calibration_error([0.95, 0.85, 0.15, 0.05], [1, 0, 0, 0])
    assert result.value == pytest.approx((0.05 + 0.85 + 0.15 + 0.05) / 4)
    # two predictions in one bin: |mean acc − mean conf| weighted by 2/3
    grouped = C.expected_calibration_error([0.72, 0.78, 1.0], [1, 0, 1], bins=10)
    assert grouped.value == pytest.approx(2 / 3 * abs(0.5 - 0.75) + 1 / 3 * 0.0)
    assert C.expected_calibration_error([], []).value is None
    with pytest.raises(ConfigError):
        C.expected_calibration_error([1.5], [1])


def test_relation_tail_prior_is_a_smoothed_frequency():
    graph = GraphView([Triple.of("x", "r", "a"), Triple.of("y", "r", "a"), Triple.of("z", "r", "b")])
    prior = C.RelationTailPrior(graph)
    scores = prior("anyone", "r", ["a", "b", "x", "unknown"])
    np.testing.assert_allclose(scores, [3 / 8, 2 / 8, 1 / 8, 1 / 8])  # (count + 1) / (3 + 5 nodes)
    np.testing.assert_allclose(prior("x", "never_seen", ["a", "b"]), [1 / 5, 1 / 5])


def test_completion_probe_end_to_end_with_the_baseline():
    graph = GraphView(
        [
            Triple.of("x", "r", "a"),
            Triple.of("y", "r", "a"),
            Triple.of("z", "r", "b"),
            Triple.of("x", "s", "b"),
        ]
    )
    out = C.completion_metrics(graph, [Triple.of("z", "r", "a"), Triple.of("w", "r", "nowhere")])
    # candidates x, a, y, z, b: P(a|r) = 3/8, P(b|r) = 2/8, others 1/8; (z, r, b) known -> b filtered
    assert out["MR"].value == 1.0 and out["MRR"].value == 1.0 and out["Hits@1"].value == 1.0
    assert out["MR"].details["skipped"] == 1
    assert out["MRR_type"].value is None
    assert out["ECE"].value == pytest.approx(abs(1.0 - 3 / 8))


def test_completion_probe_na_conventions():
    graph = GraphView([Triple.of("x", "r", "a")])
    empty = C.completion_metrics(graph, [])
    assert all(r.value is None and r.reason for r in empty.values())
    raw = C.completion_metrics(
        graph, [Triple.of("x", "r", "a")], scorer=lambda h, r, cs: np.full(len(cs), 5.0)
    )
    assert raw["ECE"].value is None and "probabilities" in raw["ECE"].reason
    assert raw["MRR"].value is not None
    with pytest.raises(ConfigError):
        C.completion_metrics(graph, [Triple.of("x", "r", "a")], scorer=lambda h, r, cs: np.zeros(1))


def test_split_holdout_is_deterministic_and_rankable():
    triples = [Triple.of(f"e{i % 7}", "r", f"e{(i * 3) % 11}") for i in range(60)]
    triples = list({t.id: t for t in triples}.values())
    train, test = C.split_holdout(triples, fraction=0.2, seed=3)
    assert (train, test) == C.split_holdout(triples, fraction=0.2, seed=3)
    assert sorted(t.id for t in train + test) == sorted(t.id for t in triples)
    seen = {x for t in train for x in (t.subject, t.object)}
    assert test and all(t.subject in seen and t.object in seen for t in test)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(-5, 5), min_size=5, max_size=5),
    st.lists(st.sampled_from(CANDIDATES), min_size=1, max_size=6),
)
def test_rank_ratios_in_unit_interval(scores, tails):
    def scorer(head: str, relation: str, candidates: Sequence[str]) -> np.ndarray:
        return np.array(scores)

    test = [Triple.of("h", "r", t) for t in tails]
    ranks = C.filtered_ranks(test, scorer, CANDIDATES).ranks
    assert np.all(ranks >= 1) and np.all(ranks <= len(CANDIDATES))
    for metric in (C.mean_reciprocal_rank(ranks), *(C.hits_at_k(ranks, k) for k in C.HITS_AT)):
        assert 0.0 <= metric.value <= 1.0
    probs = 1 / (1 + np.exp(-np.array(scores)))
    assert 0.0 <= C.expected_calibration_error(probs, (np.array(scores) > 0).astype(float)).value <= 1.0
