"""Relation-centric KG evolution (EvoRAG §5.1, Algorithm 1): fusion and suppression."""

from __future__ import annotations

import numpy as np
import pytest

from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import Triple
from triage_plugins.feedback.backprop import FeedbackOptimizer
from triage_plugins.feedback.evolution import KGEvolution, fuse_relations, score_thresholds
from triage_plugins.feedback.scores import ContributionScores, MemoryScoreStore

AB = Triple.of("A", "r1", "B", subject_type="Person", object_type="Person")
BC = Triple.of("B", "r2", "C", object_type="City")
CD = Triple.of("C", "r3", "D")
CF = Triple.of("C", "r6", "F")
DE = Triple.of("D", "r4", "E")


def test_score_thresholds() -> None:
    assert score_thresholds([0.0, 1.0]) == (0.5, 0.5)
    assert score_thresholds([0.5]) is None
    assert score_thresholds([0.3, 0.3, 0.3]) is None


def test_fusion_adds_shortcut_along_a_high_scoring_chain() -> None:
    s_c = {AB.id: 0.9, BC.id: 0.85, CD.id: 0.3, DE.id: 0.95}
    shortcuts = fuse_relations([AB, BC, CD, DE], s_c, high=0.8)
    assert len(shortcuts) == 1
    sc = shortcuts[0]
    assert (sc.triple.subject, sc.triple.predicate, sc.triple.object) == ("A", "r1/r2", "C")
    assert sc.triple.id == "A|r1/r2|C"
    assert (sc.triple.subject_type, sc.triple.object_type) == ("Person", "City")
    assert sc.score == pytest.approx(0.875)
    assert sc.path == (AB, BC)


def test_fusion_rules_all_versus_average() -> None:
    # A→B→C→F: scores 0.9, 0.85, 0.7. Every triple ≥ 0.8 fails at CF; the average 0.8167 passes.
    s_c = {AB.id: 0.9, BC.id: 0.85, CF.id: 0.7, CD.id: 0.3}
    triples = [AB, BC, CF, CD]
    assert [s.triple.id for s in fuse_relations(triples, s_c, 0.8, rule="all")] == ["A|r1/r2|C"]
    average = fuse_relations(triples, s_c, 0.8, rule="average")
    assert [s.triple.id for s in average] == ["A|r1/r2|C", "A|r1/r2/r6|F"]  # B→C→F averages 0.775: no
    assert average[1].score == pytest.approx((0.9 + 0.85 + 0.7) / 3)
    assert fuse_relations(triples, s_c, 0.8, rule="average", max_hops=2)[-1].triple.id == "A|r1/r2|C"
    with pytest.raises(ConfigError):
        fuse_relations(triples, s_c, 0.8, rule="max")  # type: ignore[arg-type]


def test_fusion_never_joins_endpoints_already_joined() -> None:
    ca = Triple.of("C", "r9", "A")  # an edge already joins A and C (reverse direction)
    s_c = {AB.id: 0.9, BC.id: 0.85, ca.id: 0.1}
    assert fuse_relations([AB, BC, ca], s_c, 0.8) == []
    assert fuse_relations([AB, BC], {AB.id: 0.9, BC.id: 0.85}, 0.8, exclude_pairs=[("A", "C")]) == []


def test_fusion_skips_cycles_and_single_hops() -> None:
    ba = Triple.of("B", "r7", "A")
    assert fuse_relations([AB, ba], {AB.id: 0.9, ba.id: 0.9}, 0.8) == []


def test_fusion_needs_scores_above_threshold() -> None:
    assert fuse_relations([AB, BC], {AB.id: 0.9, BC.id: 0.79}, 0.8, rule="all") == []
    # the default (issue 5, Algorithm 1 line 12) reads the path's average: (0.9 + 0.79) / 2 >= 0.8
    assert [s.triple.id for s in fuse_relations([AB, BC], {AB.id: 0.9, BC.id: 0.79}, 0.8)] == ["A|r1/r2|C"]
    assert fuse_relations([AB, BC], {AB.id: 0.9, BC.id: 0.6}, 0.8) == []  # average 0.75
    assert fuse_relations([AB, BC], {AB.id: 0.9}, 0.8) == []  # BC has no score


# --------------------------------------------------------------------------- KGEvolution


def _graph_scores(store=None):
    """S_c: AB, BC 0.95; four at 0.5; L1, L2 at 0.05 → μ = 0.5, σ = sqrt(4·0.45²/8) ≈ 0.318."""
    scores = ContributionScores(store or MemoryScoreStore(), "triple")
    mids = [Triple.of(f"M{k}", "m", f"N{k}") for k in range(4)]
    low = [Triple.of("L", "bad", "X1"), Triple.of("L", "bad", "X2")]
    for t in (AB, BC):
        scores.set(t.id, 190.0)
    for t in mids:
        scores.set(t.id, 100.0)
    for t in low:
        scores.set(t.id, 10.0)
    return scores, [AB, BC, *mids, *low], low


def test_evolution_thresholds_and_fusion_once() -> None:
    scores, triples, _ = _graph_scores()
    evo = KGEvolution(scores)
    result = evo.evolve(triples)
    assert result.mean == pytest.approx(0.5)
    assert result.std == pytest.approx(np.sqrt(4 * 0.45**2 / 8))
    assert [s.triple.id for s in result.shortcuts] == ["A|r1/r2|C"]
    np.testing.assert_allclose(scores.raw(["A|r1/r2|C"]), [190.0])  # the path average, stored
    again = evo.evolve([*triples, result.shortcuts[0].triple])
    assert again.shortcuts == ()
    assert KGEvolution(scores).evolve(triples).shortcuts == ()  # remembered through the store


def test_evolution_with_too_few_scores_does_nothing() -> None:
    scores = ContributionScores(MemoryScoreStore(), "triple")
    scores.set(AB.id, 150.0)
    result = KGEvolution(scores).evolve([AB, BC])
    assert result.mean is None and result.shortcuts == () and "fewer than two" in result.note


def test_suppression_after_k_evolutions_then_recovery_by_feedback() -> None:
    scores, triples, (l1, l2) = _graph_scores()
    evo = KGEvolution(scores, suppress_after=2, suppression_factor=0.5)
    ids = [l1.id, l2.id, AB.id]
    first = evo.evolve(triples)
    assert first.suppressed == frozenset()
    assert evo.factors(ids, scores.normalized(ids)) is None
    second = evo.evolve(triples)
    assert second.suppressed == {l1.id, l2.id}
    np.testing.assert_allclose(evo.factors(ids, scores.normalized(ids)), [0.5, 0.5, 1.0])
    assert l1.id in scores.scored()  # down-weighted, never deleted

    # l1 becomes useful: it sits on the helpful path of a few queries and climbs above τ_low
    opt = FeedbackOptimizer(scores, learn_alpha=False)
    for _ in range(3):
        factors = dict(zip(ids, evo.factors(ids, scores.normalized(ids)), strict=True))
        opt.step([[l1.id], [l2.id]], [1.0, -1.0], {l1.id: 0.5, l2.id: 0.5}, factors)
    low = second.mean - second.std
    assert scores.normalized([l1.id])[0] >= low
    np.testing.assert_allclose(evo.factors(ids, scores.normalized(ids)), [1.0, 0.5, 1.0])  # at once
    third = evo.evolve(triples)
    assert l1.id in third.recovered and l1.id not in third.suppressed


def test_suppression_state_persists_in_the_store() -> None:
    store = MemoryScoreStore()
    scores, triples, (l1, _) = _graph_scores(store)
    KGEvolution(scores, suppress_after=2).evolve(triples)
    evo = KGEvolution(ContributionScores(store, "triple"), suppress_after=2)
    assert evo.suppressor.counts[l1.id] == 1
    assert l1.id in evo.evolve(triples).suppressed


def test_chunk_level_evolution_suppresses_but_never_fuses() -> None:
    scores = ContributionScores(MemoryScoreStore(), "chunk")
    for k, raw in enumerate([190.0, 190.0, 100.0, 100.0, 100.0, 100.0, 10.0, 10.0]):
        scores.set(f"c{k}", raw)
    evo = KGEvolution(scores, suppress_after=1)
    result = evo.evolve()
    assert result.shortcuts == ()
    assert result.suppressed == {"c6", "c7"}


def test_threshold_width_moves_tau_low_to_mu_minus_k_sigma() -> None:
    raw = np.random.default_rng(3).normal(100.0, 30.0, 200).clip(0.0, 200.0)

    def evolve(width: float) -> frozenset[str]:
        scores = ContributionScores(MemoryScoreStore(), "chunk")
        for k, r in enumerate(raw):
            scores.set(f"c{k}", float(r))
        return KGEvolution(scores, suppress_after=1, width=width).evolve().suppressed

    s_c = raw / 200.0
    mu, sigma = score_thresholds(s_c.tolist())
    one, two = evolve(1.0), evolve(2.0)
    assert one == {f"c{k}" for k in np.flatnonzero(s_c < mu - sigma)}
    assert two == {f"c{k}" for k in np.flatnonzero(s_c < mu - 2.0 * sigma)}
    assert 0 < len(two) < len(one) and two < one


def test_invalid_settings() -> None:
    scores = ContributionScores(None, "triple")
    with pytest.raises(ConfigError):
        KGEvolution(scores, suppress_after=0)
    with pytest.raises(ConfigError):
        KGEvolution(scores, suppression_factor=0.0)
    with pytest.raises(ConfigError):
        KGEvolution(scores, rule="max")  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        KGEvolution(scores, width=0.0)
