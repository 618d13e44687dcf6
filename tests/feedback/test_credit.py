"""Credit where it is due (issue #16 points 3 and 5): feedback reaches the triples on the paths that
connect the question to the rated answer, and feedback that reaches none is counted, not dropped."""

from __future__ import annotations

import dataclasses
import logging
from types import SimpleNamespace

import numpy as np
import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.errors import ConfigError
from triage_plugins.contract.events import (
    FeedbackEvent,
    GenerationEvent,
    Gold,
    GraphEvent,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.feedback.credit import COMPETES, SUPPORTS, UNRELATED, Ends, chain_triples, path_roles
from triage_plugins.feedback.evaluators import AnswerSupportEvaluator, EvaluationContext, GoldEvaluator
from triage_plugins.plugins.feedback import FeedbackLearner, unattributed_param
from triage_plugins.store import open_store

JAWS = Triple.of("Jaws", "film by", "Steven Spielberg")
JAWS_WRONG = Triple.of("Jaws", "directed by", "Ridley Scott")
PLANTED = Triple.of("Inception", "directed by", "Steven Spielberg")  # false, touches the answer
ET = Triple.of("Steven Spielberg", "director of", "E.T.")
FLAT = [(JAWS,), (JAWS_WRONG,), (PLANTED,), (ET,)]
QUERY = "Who directed Jaws?"

DIRECTOR = Triple.of("Inception", "director", "Christopher Nolan")
BORN = Triple.of("Christopher Nolan", "born in", "London")
STAR = Triple.of("Inception", "starring", "Leonardo DiCaprio")
STAR_BORN = Triple.of("Leonardo DiCaprio", "born in", "Los Angeles")
BIG_BEN = Triple.of("Big Ben", "located in", "London")
TWO_HOP = [(DIRECTOR,), (BORN,), (STAR,), (STAR_BORN,), (BIG_BEN,)]


def _flat_context(answer: str, topic: str = "Jaws", **kw) -> EvaluationContext:
    return EvaluationContext(answer_entities=(answer,), query_entities=(topic,), flat=True, **kw)


# --------------------------------------------------------------------------- roles


def test_flat_roles_credit_the_chain_not_every_triple_touching_the_answer() -> None:
    roles = path_roles(FLAT, {"steven spielberg"}, {"jaws"}, flat=True)
    # (Jaws, Spielberg) connects question and answer; (Jaws, Ridley Scott) leads elsewhere;
    # the planted (Inception, Spielberg) and (Spielberg, E.T.) only touch the answer
    assert roles == [SUPPORTS, COMPETES, UNRELATED, UNRELATED]


def test_flat_roles_follow_a_two_hop_chain_through_the_retrieved_triples() -> None:
    roles = path_roles(TWO_HOP, {"london"}, {"inception"}, flat=True)
    assert roles == [SUPPORTS, SUPPORTS, COMPETES, UNRELATED, UNRELATED]


def test_chains_longer_than_max_hops_credit_nothing() -> None:
    assert chain_triples([DIRECTOR, BORN], {"inception"}, {"london"}, 1, Ends()) == [False, False]
    assert chain_triples([DIRECTOR, BORN], {"inception"}, {"london"}, 2, Ends()) == [True, True]


def test_without_query_entities_flat_credit_falls_back_to_touching_the_answer() -> None:
    assert path_roles(FLAT, {"steven spielberg"}, set(), flat=True) == [
        SUPPORTS,
        COMPETES,
        SUPPORTS,
        SUPPORTS,
    ]


def test_retriever_paths_are_judged_by_where_they_end() -> None:
    paths = [(DIRECTOR, BORN), (STAR, STAR_BORN), (STAR,)]
    assert path_roles(paths, {"london"}, {"inception"}) == [SUPPORTS, COMPETES, COMPETES]
    # a path that does not start at the question's entity is unrelated, not competing
    assert path_roles([(BIG_BEN, BORN)], {"christopher nolan"}, {"inception"}) == [SUPPORTS]
    assert path_roles([(ET, JAWS)], {"london"}, {"inception"}) == [UNRELATED]


# --------------------------------------------------------------------------- evaluators


def test_answer_support_flat_good_answer() -> None:
    ev = AnswerSupportEvaluator(credit="path")  # relation-blind chains (test_relation_credit.py: the default)
    assert ev.evaluate(QUERY, "Steven Spielberg", FLAT, 1.0, _flat_context("Steven Spielberg")) == [
        1.0,
        -1.0,
        None,
        None,
    ]
    # the earlier rule credits every triple touching the answer, the planted one included
    old = AnswerSupportEvaluator(credit="entity")
    assert old.evaluate(QUERY, "Steven Spielberg", FLAT, 1.0, _flat_context("Steven Spielberg")) == [
        1.0,
        -1.0,
        1.0,
        1.0,
    ]


def test_answer_support_flat_bad_answer_blames_only_the_chain() -> None:
    ctx = _flat_context("Steven Spielberg", topic="Inception")
    roles = AnswerSupportEvaluator().evaluate("Who directed Inception?", "Steven Spielberg", FLAT, 0.0, ctx)
    assert roles == [None, None, -1.0, None]  # the true (Jaws, Spielberg) is not blamed
    old = AnswerSupportEvaluator(credit="entity").evaluate(
        "Who directed Inception?", "Steven Spielberg", FLAT, 0.0, ctx
    )
    assert old == [-1.0, None, -1.0, -1.0]


def test_answer_support_finds_the_question_entity_in_the_query_text() -> None:
    ctx = EvaluationContext(answer_entities=("Steven Spielberg",), flat=True)  # nothing grounded
    assert AnswerSupportEvaluator(credit="path").evaluate(QUERY, "Steven Spielberg", FLAT, 1.0, ctx) == [
        1.0,
        -1.0,
        None,
        None,
    ]


def test_gold_flat_credits_the_triple_that_answers_the_question() -> None:
    gold = Gold(answers=("Steven Spielberg",), entities=("Jaws",))
    ctx = _flat_context("Ridley Scott", gold=gold)
    assert GoldEvaluator(credit="path").evaluate(QUERY, "Ridley Scott", FLAT, 0.0, ctx) == [
        1.0,
        -1.0,
        0.0,
        0.0,
    ]
    # relation-aware: "film by" does not state "directed", so the true (Jaws, film by, Spielberg) is
    # not promoted; the false alternative (Jaws, directed by, Ridley Scott) is lowered; no bystander moves
    assert GoldEvaluator().evaluate(QUERY, "Ridley Scott", FLAT, 0.0, ctx) == [None, -1.0, None, None]
    assert GoldEvaluator(credit="entity").evaluate(QUERY, "Ridley Scott", FLAT, 0.0, ctx) == [
        1.0,
        -1.0,
        1.0,
        1.0,
    ]


@pytest.mark.parametrize("bad", [{"credit": "nodes"}, {"max_hops": 0}])
def test_evaluators_reject_bad_credit_settings(bad) -> None:
    with pytest.raises(ConfigError):
        AnswerSupportEvaluator(**bad)
    with pytest.raises(ConfigError):
        GoldEvaluator(**bad)


# --------------------------------------------------------------------------- the learner


def _learner(store=None, **options) -> FeedbackLearner:
    opts = {f"feedback.{k}": v for k, v in options.items()}
    return FeedbackLearner(SimpleNamespace(store=store, config=TriageConfig(options=opts)))


def _flat_retrieval(qid: str = "q1", query: str = QUERY, topic: str = "Jaws") -> RetrievalEvent:
    return RetrievalEvent(
        "lightrag", qid, query, (topic,), {topic: topic}, Subgraph(tuple(t for (t,) in FLAT))
    )


def _answer(qid: str, text: str, node: str | None) -> GenerationEvent:
    return GenerationEvent("lightrag", qid, text, (text,), {text: node} if node else {})


@pytest.mark.parametrize("credit", ["path", "entity"])
def test_learner_flat_retrieval_credits_the_supporting_triple(credit: str) -> None:
    learner = _learner(credit=credit)
    learner.triage_retrieval(_flat_retrieval())
    learner.triage_generation(_answer("q1", "Steven Spielberg", "Steven Spielberg"))
    update = learner.learn(FeedbackEvent("lightrag", "q1", 1.0))
    assert update is not None and update.deltas[JAWS.id] > 0 and update.deltas[JAWS_WRONG.id] < 0
    if credit == "path":
        assert PLANTED.id not in update.deltas and ET.id not in update.deltas  # unrelated: untouched
        np.testing.assert_allclose(learner.model().scores.raw([PLANTED.id]), [100.0])
    else:
        assert update.deltas[PLANTED.id] > 0  # the flaw the path rule removes


def test_learner_rejects_an_unknown_credit_rule() -> None:
    with pytest.raises(ConfigError, match="feedback.credit"):
        _learner(credit="nodes")


def test_unattributed_feedback_is_logged_once_per_cause_and_counted_in_the_store(caplog) -> None:
    store = open_store(":memory:")
    try:
        learner = _learner(store)
        learner.triage_retrieval(_flat_retrieval("q1"))
        learner.triage_generation(_answer("q1", "I do not know.", None))  # names no graph entity
        learner.triage_retrieval(_flat_retrieval("q2"))
        learner.triage_generation(_answer("q2", "I do not know.", None))
        with caplog.at_level(logging.DEBUG, logger="triage.plugins.feedback"):
            for qid in ("missing", "gone", "q1", "q2"):
                learner.learn(FeedbackEvent("lightrag", qid, 1.0))
        assert dict(learner.unattributed) == {"unknown query id": 2, "no answer entity": 2}
        assert store.get_param("feedback.unattributed.unknown_query_id") == 2
        assert store.get_param(unattributed_param("no answer entity")) == 2
        warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
        assert len(warnings) == 2  # once per cause
        assert any("unknown query id" in w for w in warnings) and any(
            "no answer entity" in w for w in warnings
        )
        assert all("feedback.unattributed." in w for w in warnings)
    finally:
        store.close()


def test_neutral_feedback_is_not_counted_as_unattributed() -> None:
    learner = _learner()
    learner.triage_retrieval(_flat_retrieval())
    learner.triage_generation(_answer("q1", "I do not know.", None))
    learner.learn(FeedbackEvent("lightrag", "q1", 0.5))  # no verdict: nothing to attribute
    assert learner.unattributed == {}


def test_an_answer_entity_no_retrieved_triple_names_is_counted() -> None:
    learner = _learner()
    retrieval = _flat_retrieval(query="Who directed Inception?", topic="Inception")
    learner.triage_retrieval(dataclasses.replace(retrieval, subgraph=Subgraph((PLANTED, JAWS_WRONG))))
    learner.triage_generation(_answer("q1", "Christopher Nolan", "Christopher Nolan"))  # in no triple
    learner.learn(FeedbackEvent("lightrag", "q1", 0.0))
    assert learner.unattributed == {"no path to the answer": 1}


def test_an_answer_no_chain_reaches_is_credited_to_the_triples_naming_it() -> None:
    # Ridley Scott is retrieved, but no retrieved triple links him to Inception: the reader can only
    # have taken him from (Jaws, directed by, Ridley Scott), so that triple is blamed, and only it
    paths = [(PLANTED,), (JAWS_WRONG,)]
    ctx = _flat_context("Ridley Scott", topic="Inception")
    ev = AnswerSupportEvaluator(credit="path")
    assert ev.evaluate("Who directed Inception?", "Ridley Scott", paths, 0.0, ctx) == [None, -1.0]
    # relation-aware credit blames it too (a rejected answer), but never promotes it for a right one
    relation = AnswerSupportEvaluator()
    assert relation.evaluate("Who directed Inception?", "Ridley Scott", paths, 0.0, ctx) == [None, -1.0]
    # (were "Ridley Scott" right, (Inception, directed by, Spielberg) would be the alternative to lower)
    assert relation.evaluate("Who directed Inception?", "Ridley Scott", paths, 1.0, ctx) == [-1.0, None]


def test_label_memo_starts_afresh_with_a_new_graph_version() -> None:
    learner = _learner()
    labels = learner._labels_of("lightrag")
    labels(JAWS)
    assert learner._labels_of("lightrag") is labels and JAWS.id in labels.cache
    learner.triage_graph(GraphEvent("lightrag", GraphView([JAWS])))
    assert JAWS.id not in learner._labels_of("lightrag").cache


def test_store_summary_reports_unattributed_feedback(tmp_path) -> None:
    from triage_plugins.apps.store_tools import summarize

    path = tmp_path / "t.sqlite"
    store = open_store(path)
    try:
        learner = _learner(store)
        for qid in ("a", "b", "c"):
            learner.learn(FeedbackEvent("lightrag", qid, 0.0))
    finally:
        store.close()
    assert summarize(str(path)).unattributed == {"unknown query id": 3}
