"""The feedback learner default plugin: remember → feedback → backprop → rerank; evolution."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace

import numpy as np
import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import (
    Chunk,
    FeedbackEvent,
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
from triage_plugins.plugins.feedback import FeedbackLearner

GOOD = Triple.of("Inception", "directed_by", "Christopher Nolan")
BAD = Triple.of("Inception", "directed_by", "Steven Spielberg")  # a false alternative answer
STAR = Triple.of("Inception", "starring", "Leonardo DiCaprio")  # true, another relation: a bystander
QUERY = "Who directed Inception?"


def _learner(**config) -> FeedbackLearner:
    options = config.pop("options", {})
    manager = SimpleNamespace(store=None, config=TriageConfig(options=options, **config))
    return FeedbackLearner(manager)


def _retrieval(**kw) -> RetrievalEvent:
    base = dict(
        framework="ref",
        query_id="q1",
        query=QUERY,
        mentions=("Inception",),
        grounding={"Inception": "Inception"},
        subgraph=Subgraph((GOOD, BAD)),
    )
    base.update(kw)
    return RetrievalEvent(**base)


def _generation(answer: str = "Christopher Nolan", node: str | None = "Christopher Nolan") -> GenerationEvent:
    return GenerationEvent(
        "ref", "q1", answer, answer_mentions=(answer,), answer_grounding={answer: node} if node else {}
    )


def _rerank(learner: FeedbackLearner, unit: str = "triple", ids=(GOOD.id, BAD.id), rel=(0.5, 0.5)):
    return learner.triage_rerank(RerankRequest("ref", QUERY, unit, ids, rel, query_id="q1"))


def test_rerank_is_none_when_reweight_is_off() -> None:
    learner = _learner(reweight=False)
    assert _rerank(learner) is None


def test_rerank_is_none_for_the_other_unit() -> None:
    learner = _learner(reweight=True, unit="triple")
    assert _rerank(learner, unit="chunk", ids=("c1",), rel=(0.9,)) is None


def test_rerank_before_learning_is_eq2_with_init_scores() -> None:
    learner = _learner(reweight=True)
    # P = (1 − 0.5)·S_r + 0.5·0.5
    assert _rerank(learner, rel=(0.8, 0.2)) == pytest.approx([0.65, 0.35])


def test_feedback_moves_scores_and_rerank_follows() -> None:
    learner = _learner(reweight=True)
    _rerank(learner)  # records S_r = 0.5 for both triples of q1
    learner.triage_retrieval(_retrieval())
    learner.triage_generation(_generation())
    learner.triage_feedback(FeedbackEvent("ref", "q1", 1.0))
    # hand computed: GOOD (U = 1), BAD (U = −1) and the baseline path (U = 0, S_r 0.5, S_c 0.5) have
    # P(L) = 1/3 each, E = 1/2, ∂loss/∂a = ∓1/3, ∂loss/∂S_c = 0.5·(∓1/3)/0.5, step ±0.25·200/3 raw
    assert learner.last_update is not None
    assert dict(learner.last_update.deltas) == pytest.approx({GOOD.id: 50 / 3, BAD.id: -50 / 3})
    np.testing.assert_allclose(learner.model().scores.raw([GOOD.id, BAD.id]), [100 + 50 / 3, 100 - 50 / 3])
    alpha = learner.model().optimizer.alpha
    prio = _rerank(learner)
    assert prio == pytest.approx(
        [(1 - alpha) * 0.5 + alpha * (0.5 + 1 / 12), (1 - alpha) * 0.5 + alpha * (0.5 - 1 / 12)]
    )
    assert prio[0] > prio[1]


def test_the_relation_blind_rule_is_eq4_over_the_whole_context() -> None:
    learner = _learner(reweight=True, options={"feedback.credit": "path"})
    _rerank(learner, ids=(GOOD.id, STAR.id))
    learner.triage_retrieval(_retrieval(subgraph=Subgraph((GOOD, STAR))))
    learner.triage_generation(_generation())
    learner.triage_feedback(FeedbackEvent("ref", "q1", 1.0))
    # hand computed (test_backprop): ∂loss/∂S_c = ∓0.5, step ±25 raw, bounded to ±20; the bystander
    # STAR competes under this rule (the collateral damage the default "relation" rule removes)
    assert learner.last_update is not None
    assert dict(learner.last_update.deltas) == pytest.approx({GOOD.id: 20.0, STAR.id: -20.0})
    default = _learner(reweight=True)
    default.triage_retrieval(_retrieval(subgraph=Subgraph((GOOD, STAR))))
    default.triage_generation(_generation())
    update = default.learn(FeedbackEvent("ref", "q1", 1.0))
    assert update is not None and set(update.deltas) == {GOOD.id} and update.deltas[GOOD.id] > 0


def test_repeated_feedback_lifts_a_useful_but_less_relevant_triple_to_the_top() -> None:
    learner = _learner(reweight=True)
    rel = (0.4, 0.8)  # the framework prefers BAD
    assert _rerank(learner, rel=rel) == pytest.approx([0.45, 0.65])
    learner.triage_retrieval(_retrieval())
    learner.triage_generation(_generation())
    for _ in range(5):
        _rerank(learner, rel=rel)
        learner.triage_feedback(FeedbackEvent("ref", "q1", 1.0))
    good, bad = _rerank(learner, rel=rel)
    assert good > bad


def test_feedback_without_remembered_retrieval_is_ignored() -> None:
    learner = _learner()
    assert learner.learn(FeedbackEvent("ref", "unknown", 1.0)) is None


def test_explicit_paths_are_used() -> None:
    hop = Triple.of("Christopher Nolan", "born_in", "London")
    learner = _learner()
    learner.triage_retrieval(
        _retrieval(subgraph=Subgraph((GOOD, BAD, hop)), paths=(Path((GOOD.id, hop.id)), Path((BAD.id,))))
    )
    learner.triage_generation(_generation("London", "London"))
    update = learner.learn(FeedbackEvent("ref", "q1", 1.0))
    assert update is not None and update.n_paths == 2
    assert update.deltas[GOOD.id] > 0 and update.deltas[hop.id] > 0 and update.deltas[BAD.id] < 0


def test_gold_is_used_when_the_retrieval_carries_it() -> None:
    learner = _learner()
    learner.triage_retrieval(_retrieval(gold=Gold(answers=("Christopher Nolan",))))
    learner.triage_generation(_generation("Steven Spielberg", "Steven Spielberg"))  # wrong answer
    update = learner.learn(FeedbackEvent("ref", "q1", 0.0, source="gold"))
    # gold says the GOOD path reaches the answer, whatever the reader said
    assert update is not None and update.deltas[GOOD.id] > 0 and update.deltas[BAD.id] < 0


def test_chunk_level_learning() -> None:
    chunks = (
        Chunk("c1", "d1", "Inception was directed by Christopher Nolan."),
        Chunk("c2", "d1", "Inception was directed by Steven Spielberg."),
        Chunk("c3", "d1", "Inception stars Leonardo DiCaprio."),
    )
    learner = _learner(unit="chunk", reweight=True)
    learner.triage_retrieval(_retrieval(chunks=chunks))
    learner.triage_generation(_generation())
    update = learner.learn(FeedbackEvent("ref", "q1", 1.0))
    assert update is not None
    assert update.deltas["c1"] > 0 and update.deltas["c2"] < 0 and "c3" not in update.deltas
    assert learner.model("triple").scores.scored() == {}  # triple scores untouched
    prio = _rerank(learner, unit="chunk", ids=("c1", "c2"), rel=(0.5, 0.5))
    assert prio[0] > prio[1]


def test_llm_evaluator_and_malformed_reply(caplog) -> None:
    replies = iter(
        [
            "not json",
            json.dumps(
                {
                    "paths": [
                        {"path": 1, "supportiveness": 1, "fidelity": 1, "conflict": -1},
                        {"path": 2, "supportiveness": -1, "fidelity": 1, "conflict": -1},
                    ]
                }
            ),
        ]
    )
    learner = _learner(options={"feedback.evaluator": "llm", "feedback.llm": lambda prompt: next(replies)})
    learner.triage_retrieval(_retrieval())
    learner.triage_generation(_generation())
    with caplog.at_level(logging.WARNING, logger="triage.plugins.feedback"):
        assert learner.learn(FeedbackEvent("ref", "q1", 1.0)) is None
    assert "not valid JSON" in caplog.text
    assert learner.model().scores.scored() == {}
    update = learner.learn(FeedbackEvent("ref", "q1", 1.0))
    assert update is not None and update.deltas[GOOD.id] > 0 and update.deltas[BAD.id] < 0


def test_fixed_alpha_option() -> None:
    learner = _learner(options={"feedback.learn_alpha": False, "feedback.alpha": 0.3})
    learner.triage_retrieval(_retrieval())
    learner.triage_generation(_generation())
    learner.learn(FeedbackEvent("ref", "q1", 1.0))
    assert learner.model().optimizer.alpha == 0.3


def test_unknown_option_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="feedback.etaa"):
        _learner(options={"feedback.etaa": 0.1})


def test_memory_is_bounded() -> None:
    learner = _learner(options={"feedback.memory": 2})
    for k in range(3):
        learner.triage_retrieval(_retrieval(query_id=f"q{k}"))
    assert learner._retrievals.get(("ref", "q0")) is None
    assert learner._retrievals.get(("ref", "q2")) is not None


def test_evolve_returns_shortcuts_from_the_graph() -> None:
    hop = Triple.of("Christopher Nolan", "born_in", "London")
    # many untouched triples keep σ small enough for the default μ + 2σ to be reachable
    mids = [Triple.of(f"M{k}", "m", f"N{k}") for k in range(40)]
    learner = _learner()
    learner.triage_graph(GraphEvent("ref", GraphView([GOOD, hop, BAD, *mids])))
    scores = learner.model().scores
    scores.set(GOOD.id, 190.0)
    scores.set(hop.id, 190.0)
    scores.set(BAD.id, 10.0)
    for t in mids:
        scores.set(t.id, 100.0)
    new = learner.evolve()
    assert [t.id for t in new] == ["Inception|directed_by/born_in|London"]
    assert learner.last_evolution is not None and learner.last_evolution.mean is not None


def test_through_the_manager(tmp_path) -> None:
    manager_mod = pytest.importorskip("triage_plugins.runtime.manager")
    pytest.importorskip("triage_plugins.store", reason="the store is needed for a manager with a path")
    config = TriageConfig(reweight=True)
    with manager_mod.TriageManager(
        store=tmp_path / "t.sqlite", config=config, synchronous=True, entry_points=False, defaults=False
    ) as manager:
        learner = FeedbackLearner(manager)
        manager.register(learner, name="feedback")
        request = RerankRequest("ref", QUERY, "triple", (GOOD.id, BAD.id), (0.5, 0.5), query_id="q1")
        assert manager.rerank(request) == pytest.approx([0.5, 0.5])
        manager.emit_retrieval(_retrieval())
        manager.emit_generation(_generation())
        manager.emit_feedback(FeedbackEvent("ref", "q1", 1.0))
        manager.flush()
        first, second = manager.rerank(request)
        assert first > second
        assert manager.store.get_scores("triple", [GOOD.id])[GOOD.id].raw == pytest.approx(100 + 50 / 3)
