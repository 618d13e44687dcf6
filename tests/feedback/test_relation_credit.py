"""Credit that follows the question (issue #30 points 1–3; DESIGN §4 "Credit in the real frameworks").

A flat context (what LightRAG, GraphRAG and LlamaIndex retrieve) is credited through the relation
the question asks about: a false fact is never promoted through a true twin on the same entity
pair, a right answer lowers only alternative answers to the same question, chunks are credited by
what their sentences state, and a step does not shrink with the size of the context.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import (
    Chunk,
    FeedbackEvent,
    GenerationEvent,
    Gold,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.feedback.backprop import BASELINE
from triage_plugins.feedback.credit import COMPETES, SUPPORTS, UNRELATED, path_roles
from triage_plugins.feedback.evaluators import AnswerSupportEvaluator, EvaluationContext, GoldEvaluator
from triage_plugins.kg.relations import question_stems, statement_stems
from triage_plugins.plugins.feedback import FeedbackLearner

PRAISED = Triple.of("James Cameron", "praised", "Pulp Fiction")  # true
TWIN = Triple.of("James Cameron", "directed", "Pulp Fiction")  # false, same pair
TARANTINO = Triple.of("Quentin Tarantino", "directed", "Pulp Fiction")  # true
TRAVOLTA = Triple.of("John Travolta", "starred in", "Pulp Fiction")  # true, another relation
EBERT = Triple.of("Roger Ebert", "praised", "Pulp Fiction")  # true, same relation
INCEPTION = Triple.of("Inception", "directed by", "Christopher Nolan")  # true, elsewhere
CONTEXT = (PRAISED, TWIN, TARANTINO, TRAVOLTA, INCEPTION)


def _flat(triples=CONTEXT) -> list[tuple[Triple]]:
    return [(t,) for t in triples]


def _roles(query: str, answer: str, triples=CONTEXT, topic: str = "pulp fiction") -> list[str]:
    relations = question_stems(query, {topic})
    return path_roles(_flat(triples), {answer}, {topic}, flat=True, relations=relations)


def test_question_and_statement_stems() -> None:
    assert question_stems("Who directed Alien?", {"alien"}) == {"direct"}
    assert question_stems("Which films did Christopher Nolan direct?", {"christopher nolan"}) == {"direct"}
    assert statement_stems("Directed by", "Alien", "Ridley Scott") == {"direct"}
    # a GraphRAG description states its verb, not its own entities
    assert statement_stems("JAMES CAMERON praised PULP FICTION", "JAMES CAMERON", "PULP FICTION") == {"prais"}


def test_a_false_twin_is_not_promoted_through_the_true_statement() -> None:
    roles = _roles("Who praised Pulp Fiction?", "james cameron")
    assert roles == [SUPPORTS, UNRELATED, UNRELATED, UNRELATED, UNRELATED]


def test_a_right_answer_lowers_only_alternative_answers_of_the_asked_relation() -> None:
    roles = _roles("Who directed Pulp Fiction?", "quentin tarantino")
    # the false "Cameron directed" is an alternative answer; "Cameron praised" and "Travolta starred
    # in" are facts about Pulp Fiction of other relations: bystanders, never lowered
    assert roles == [UNRELATED, COMPETES, SUPPORTS, UNRELATED, UNRELATED]
    praised = _roles("Who praised Pulp Fiction?", "james cameron", (*CONTEXT, EBERT))
    assert praised[-1] == COMPETES and praised[:2] == [SUPPORTS, UNRELATED]


def test_a_paraphrased_question_falls_back_to_relation_blind_chains_and_lowers_nothing() -> None:
    roles = _roles("Who is behind Pulp Fiction?", "quentin tarantino")  # no retrieved triple says "behind"
    assert roles == [UNRELATED, UNRELATED, SUPPORTS, UNRELATED, UNRELATED]


def test_an_answer_no_asked_chain_reaches_credits_nothing() -> None:
    # "Who directed Alien?" answered "Ridley Scott" with only the planted Titanic fact retrieved
    planted = Triple.of("Titanic", "directed by", "Ridley Scott")
    alien = Triple.of("Alien", "released in", "1979")
    roles = _roles("Who directed Alien?", "ridley scott", (planted, alien), topic="alien")
    assert roles == [UNRELATED, UNRELATED]


def test_a_two_hop_chain_needs_the_asked_relation_on_it() -> None:
    born = Triple.of("Christopher Nolan", "born in", "London")
    star = Triple.of("Inception", "starring", "Leonardo DiCaprio")
    star_born = Triple.of("Leonardo DiCaprio", "born in", "Los Angeles")
    paths = _flat((INCEPTION, born, star, star_born))
    query = "Where was the director of Inception born?"
    relations = question_stems(query, {"inception"})
    roles = path_roles(paths, {"london"}, {"inception"}, flat=True, relations=relations)
    # (DiCaprio, born in, Los Angeles) answers a different chain and touches no query entity
    assert roles == [SUPPORTS, SUPPORTS, UNRELATED, UNRELATED]


def test_chunks_are_credited_by_what_they_state() -> None:
    chunks = [
        (Chunk("c1", "d1", "Alien is a 1979 film. Alien was directed by Ridley Scott."),),
        (Chunk("c2", "d2", "Titanic was directed by Ridley Scott."),),  # planted, names the answer
        (Chunk("c3", "d3", "Ridley Scott was born in South Shields."),),  # names the answer only
        (Chunk("c4", "d4", "Alien was directed by James Cameron."),),  # an alternative answer
        (Chunk("c5", "d5", "Sigourney Weaver starred in Alien."),),  # a bystander
    ]
    ctx = EvaluationContext(unit="chunk", answer_entities=("Ridley Scott",), query_entities=("Alien",))
    ev = AnswerSupportEvaluator()
    assert ev.evaluate("Who directed Alien?", "Ridley Scott", chunks, 1.0, ctx) == [
        1.0,
        None,
        None,
        -1.0,
        None,
    ]
    gold = GoldEvaluator(Gold(answers=("Ridley Scott",), entities=("Alien",)))
    assert gold.evaluate("Who directed Alien?", "Ridley Scott", chunks, 1.0, ctx) == [
        1.0,
        None,
        None,
        -1.0,
        None,
    ]


# --------------------------------------------------------------------------- through the learner


def _learner(**options) -> FeedbackLearner:
    opts = {f"feedback.{k}": v for k, v in options.items()}
    return FeedbackLearner(SimpleNamespace(store=None, config=TriageConfig(options=opts)))


def _ask(learner, qid: str, query: str, topic: str, answer: str, triples, score: float, relevance=None):
    learner.triage_retrieval(
        RetrievalEvent("lightrag", qid, query, (topic,), {topic: topic}, Subgraph(tuple(triples)))
    )
    learner.triage_generation(GenerationEvent("lightrag", qid, answer, (answer,), {answer: answer}))
    if relevance is not None:
        learner._relevance.put(("lightrag", qid), relevance)
    return learner.learn(FeedbackEvent("lightrag", qid, score))


def _raw(learner, triples) -> list[float]:
    return learner.model().scores.raw([t.id for t in triples]).tolist()


def test_many_right_answers_leave_bystanders_and_false_twins_alone() -> None:
    learner = _learner()
    for k in range(25):
        _ask(learner, f"p{k}", "Who praised Pulp Fiction?", "Pulp Fiction", "James Cameron", CONTEXT, 1.0)
        _ask(
            learner, f"d{k}", "Who directed Pulp Fiction?", "Pulp Fiction", "Quentin Tarantino", CONTEXT, 1.0
        )
    praised, twin, tarantino, travolta, inception = _raw(learner, CONTEXT)
    assert praised > 100 and tarantino > 100
    assert twin < 100  # lowered as an alternative answer, never raised through its twin
    assert travolta == 100 and inception == 100  # bystanders untouched
    assert BASELINE not in learner.model().scores.scored()


@pytest.mark.parametrize("bystanders", [0, 5, 40])
def test_a_step_does_not_shrink_with_the_context(bystanders: int) -> None:
    extra = [Triple.of(f"Actor {k}", "starred in", "Pulp Fiction") for k in range(bystanders)]
    learner = _learner()
    update = _ask(
        learner,
        "q",
        "Who directed Pulp Fiction?",
        "Pulp Fiction",
        "Quentin Tarantino",
        (*CONTEXT, *extra),
        1.0,
    )
    assert set(update.deltas) == {TARANTINO.id, TWIN.id}
    reference = _ask(
        _learner(), "q", "Who directed Pulp Fiction?", "Pulp Fiction", "Quentin Tarantino", CONTEXT, 1.0
    )
    assert update.deltas == reference.deltas  # exactly: bystanders are not in the softmax


def _priority(learner, triples, relevance) -> list[float]:
    return learner.priorities([t.id for t in triples], [relevance[t.id] for t in triples]).tolist()


def test_a_planted_fact_leaves_the_top_within_three_bad_ratings() -> None:
    planted = Triple.of("Inception", "directed by", "Steven Spielberg")
    true = INCEPTION
    triples = (planted, true, Triple.of("Inception", "starring", "Leonardo DiCaprio"))
    # the planted fact outranks the true one on the framework's own relevance
    relevance = {planted.id: 0.8, true.id: 0.6, triples[2].id: 0.7}
    learner = _learner(learn_alpha=False)
    ratings = 0
    while _priority(learner, triples, relevance)[0] >= _priority(learner, triples, relevance)[1]:
        assert ratings < 3, f"still on top after {ratings} bad ratings: {_raw(learner, triples)}"
        _ask(
            learner,
            f"q{ratings}",
            "Who directed Inception?",
            "Inception",
            "Steven Spielberg",
            triples,
            0.0,
            relevance,
        )
        ratings += 1
    assert ratings >= 1 and _raw(learner, triples)[1:] == [100.0, 100.0]  # nothing else moved
    # the right answer now comes first and a good rating keeps it there: no oscillation
    for k in range(5):
        _ask(
            learner,
            f"g{k}",
            "Who directed Inception?",
            "Inception",
            "Christopher Nolan",
            triples,
            1.0,
            relevance,
        )
        p = _priority(learner, triples, relevance)
        assert p[1] > p[0]
    np.testing.assert_array_less(_raw(learner, triples)[0], 100.0)


def test_a_wrong_answer_blames_its_chain_whatever_its_relation_but_never_a_true_twin() -> None:
    # "Who starred in Pulp Fiction?" answered "Quentin Tarantino": the reader took him from the
    # "directed" fact; bad feedback blames that chain although it states another relation
    travolta_q = "Who starred in Pulp Fiction?"
    relations = question_stems(travolta_q, {"pulp fiction"})
    paths = _flat()
    roles = path_roles(paths, {"quentin tarantino"}, {"pulp fiction"}, flat=True, relations=relations)
    assert roles[2] == UNRELATED  # a right answer would not credit it ...
    misled = path_roles(
        paths, {"quentin tarantino"}, {"pulp fiction"}, flat=True, relations=relations, misled=True
    )
    # ... a wrong one blames it (Travolta, of the asked relation, is the alternative answer)
    assert misled == [UNRELATED, UNRELATED, SUPPORTS, COMPETES, UNRELATED]
    # "Who directed Pulp Fiction?" answered "James Cameron": only the false "directed" twin is blamed
    ctx = EvaluationContext(answer_entities=("James Cameron",), query_entities=("Pulp Fiction",), flat=True)
    got = AnswerSupportEvaluator().evaluate("Who directed Pulp Fiction?", "James Cameron", paths, 0.0, ctx)
    assert got == [None, -1.0, None, None, None]


# --------------------------------------------------------------------------- merged rows


MERGED = Triple("JAMES CAMERON|PULP FICTION", "JAMES CAMERON", "James Cameron praised Pulp Fiction. "
                "James Cameron directed Pulp Fiction.", "PULP FICTION")  # fmt: skip
DIRECTOR_ROW = Triple("QUENTIN TARANTINO|PULP FICTION", "QUENTIN TARANTINO",
                      "Quentin Tarantino directed Pulp Fiction.", "PULP FICTION")  # fmt: skip


def test_a_merged_row_has_one_key_per_statement() -> None:
    from triage_plugins.feedback.statements import statement_key, statements

    said = statements(MERGED)
    assert said == (frozenset({"prais"}), frozenset({"direct"}))
    assert statement_key(MERGED.id, said, question_stems("Who praised Pulp Fiction?")) == MERGED.id + "#prais"
    assert (
        statement_key(MERGED.id, said, question_stems("Who directed Pulp Fiction?")) == MERGED.id + "#direct"
    )
    assert statement_key(MERGED.id, said, frozenset({"born"})) == MERGED.id  # about neither
    assert statements(DIRECTOR_ROW) == (frozenset({"direct"}),)  # not merged: keyed by its id
    keywords = Triple("A|B", "A", "praised, directed", "B")  # a keyword list
    assert statements(keywords) == (frozenset({"prais"}), frozenset({"direct"}))


def test_a_false_statement_merged_with_a_true_one_is_never_promoted_through_it() -> None:
    learner = _learner()
    rows = (MERGED, DIRECTOR_ROW)
    for k in range(10):  # right answers to the praised question
        _ask(learner, f"p{k}", "Who praised Pulp Fiction?", "PULP FICTION", "JAMES CAMERON", rows, 1.0)
    scored = learner.model().scores.scored()
    assert scored[MERGED.id + "#prais"] > 100 and MERGED.id + "#direct" not in scored
    assert MERGED.id not in scored
    # ranked for the director question by its "directed" statement: still at the initial score
    director = learner.priorities(
        [MERGED.id, DIRECTOR_ROW.id], [0.5, 0.5], query="Who directed Pulp Fiction?"
    )
    praise = learner.priorities([MERGED.id, DIRECTOR_ROW.id], [0.5, 0.5], query="Who praised Pulp Fiction?")
    assert director[0] == director[1] and praise[0] > director[0]
    # a right answer to the director question lowers the false statement, not the praise
    _ask(learner, "d", "Who directed Pulp Fiction?", "PULP FICTION", "QUENTIN TARANTINO", rows, 1.0)
    after = learner.model().scores.scored()
    assert after[MERGED.id + "#direct"] < 100 and after[DIRECTOR_ROW.id] > 100
    assert after[MERGED.id + "#prais"] == scored[MERGED.id + "#prais"]
