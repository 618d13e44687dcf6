"""Path utility evaluators (EvoRAG §4.2): LLM judge with gating, answer support, gold."""

from __future__ import annotations

import json

import numpy as np
import pytest

from triage_plugins.contract.errors import JudgeOutputError, TriageError
from triage_plugins.contract.events import Chunk, Gold, Triple
from triage_plugins.feedback.backprop import FeedbackOptimizer
from triage_plugins.feedback.evaluators import (
    AnswerSupportEvaluator,
    EvaluationContext,
    GoldEvaluator,
    LLMJudgeEvaluator,
    PathEvaluator,
    judge_prompt,
    parse_judgement,
)
from triage_plugins.feedback.scores import ContributionScores, MemoryScoreStore

T1 = Triple.of("Inception", "directed_by", "Christopher Nolan")
T2 = Triple.of("Christopher Nolan", "born_in", "London")
T3 = Triple.of("Inception", "starring", "Leonardo DiCaprio")
T4 = Triple.of("Leonardo DiCaprio", "born_in", "Los Angeles")
PATHS = [(T1, T2), (T3, T4), (T3,)]
QUERY = "Where was the director of Inception born?"


def _reply(*rows: tuple[float, float, float]) -> str:
    return json.dumps(
        {
            "paths": [
                {"path": k, "supportiveness": s, "fidelity": f, "conflict": c}
                for k, (s, f, c) in enumerate(rows, start=1)
            ]
        }
    )


# --------------------------------------------------------------------------- parser


def test_parse_valid_and_fenced_output() -> None:
    text = _reply((0.5, 1, -1), (-0.25, 0.0, 0.5))
    assert parse_judgement(text, 2) == [(0.5, 1.0, -1.0), (-0.25, 0.0, 0.5)]
    assert parse_judgement(f"```json\n{text}\n```", 2) == parse_judgement(text, 2)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Path 1 is supportive.", "not valid JSON"),
        (_reply((0.5, 1, -1)) + " trailing words", "not valid JSON"),
        ("[1, 2]", 'key "paths"'),
        ('{"paths": {"1": 0.5}}', "must be a list"),
        (_reply((0.5, 1, -1)), "scored 1 path(s) but 2 were given"),
        (
            '{"paths": [{"path": 1, "supportiveness": 0.5, "fidelity": 1}, {"path": 2}]}',
            'missing key "conflict"',
        ),
        (_reply((0.5, 1, -1), (1.5, 0, 0)), "outside [-1, 1]"),
        (_reply((0.5, 1, -1), (0.5, "high", 0)), '"fidelity" must be a number'),
        (_reply((0.5, 1, -1), (0.5, True, 0)), '"fidelity" must be a number'),
        (
            '{"paths": [{"path": 2, "supportiveness": 0, "fidelity": 0, "conflict": 0}, '
            '{"path": 1, "supportiveness": 0, "fidelity": 0, "conflict": 0}]}',
            "numbered 1..2 in order",
        ),
        ('{"paths": [1, 2]}', "entry 1 must be a JSON object"),
    ],
)
def test_parser_rejects_malformed_output_with_a_clear_error(text: str, message: str) -> None:
    with pytest.raises(JudgeOutputError) as info:
        parse_judgement(text, 2)
    assert message in str(info.value)
    assert isinstance(info.value, TriageError)


def test_prompt_names_query_answer_score_and_every_path() -> None:
    prompt = judge_prompt(QUERY, "London", PATHS, 0.75)
    assert QUERY in prompt and "London" in prompt and "0.75" in prompt
    assert "[1] (Inception, directed_by, Christopher Nolan) -> (Christopher Nolan, born_in, London)" in prompt
    assert "[3] (Inception, starring, Leonardo DiCaprio)" in prompt
    assert "exactly 3 entries" in prompt


# --------------------------------------------------------------------------- LLM judge and gating


def test_judge_gates_on_fidelity_and_conflict() -> None:
    seen: list[str] = []

    def llm(prompt: str) -> str:
        seen.append(prompt)
        # path 1 passes the gate; path 2 has low fidelity; path 3 has high conflict
        return _reply((0.8, 0.9, -0.5), (0.7, -0.5, -1.0), (0.6, 0.9, 0.5))

    judge = LLMJudgeEvaluator(llm)
    assert isinstance(judge, PathEvaluator)
    assert judge.evaluate(QUERY, "London", PATHS, 1.0, EvaluationContext()) == [0.8, None, None]
    assert len(seen) == 1  # one call for all paths (EvoRAG §4.3.4)
    strict = LLMJudgeEvaluator(llm, fidelity_min=0.95)
    assert strict.evaluate(QUERY, "London", PATHS, 1.0, EvaluationContext()) == [None, None, None]


def test_judge_raises_on_malformed_reply() -> None:
    judge = LLMJudgeEvaluator(lambda prompt: "I think path 1 helps.")
    with pytest.raises(JudgeOutputError, match="not valid JSON"):
        judge.evaluate(QUERY, "London", PATHS, 1.0, EvaluationContext())


def test_gated_path_gets_no_update() -> None:
    """Gating suppresses the update: a triple only on a gated path keeps its score exactly."""

    def llm(prompt: str) -> str:  # path 2 (T3, T4) is supportive but contradicts → gated
        return _reply((1.0, 0.9, -1.0), (1.0, 0.9, 0.8), (-1.0, 0.9, -1.0))

    utilities = LLMJudgeEvaluator(llm).evaluate(QUERY, "London", PATHS, 1.0, EvaluationContext())
    assert utilities == [1.0, None, -1.0]
    opt = FeedbackOptimizer(ContributionScores(MemoryScoreStore(), "triple"))
    ids = [[t.id for t in p] for p in PATHS]
    relevance = {t.id: 0.5 for t in (T1, T2, T3, T4)}
    update = opt.step(ids, utilities, relevance)
    assert T4.id not in update.deltas  # only on the gated path
    assert update.deltas[T1.id] > 0 and update.deltas[T2.id] > 0
    assert update.deltas[T3.id] < 0  # on the harmful third path
    np.testing.assert_allclose(opt.scores.raw([T4.id]), [100.0])


# --------------------------------------------------------------------------- answer support


def test_answer_support_positive_feedback() -> None:
    ctx = EvaluationContext(answer_entities=("London",), query_entities=("Inception",))
    ev = AnswerSupportEvaluator()
    assert ev.evaluate(QUERY, "London", PATHS, 1.0, ctx) == [1.0, -1.0, -1.0]
    assert ev.evaluate(QUERY, "London", PATHS, 0.75, ctx) == [0.5, -0.5, -0.5]  # rating 4 → f = 0.5


def test_answer_support_negative_feedback_blames_supporting_paths_only() -> None:
    ctx = EvaluationContext(answer_entities=("Los Angeles",), query_entities=("Inception",))
    assert AnswerSupportEvaluator().evaluate(QUERY, "Los Angeles", PATHS, 0.0, ctx) == [None, -1.0, None]


def test_answer_support_neutral_feedback_or_no_answer_gives_no_update() -> None:
    ctx = EvaluationContext(answer_entities=("London",))
    ev = AnswerSupportEvaluator()
    assert ev.evaluate(QUERY, "London", PATHS, 0.5, ctx) == [None, None, None]
    assert ev.evaluate(QUERY, "", PATHS, 1.0, EvaluationContext()) == [None, None, None]


def test_answer_support_ignores_query_entities_in_the_answer() -> None:
    # the answer mentions Inception (the topic entity, on every path) and London
    ctx = EvaluationContext(answer_entities=("Inception", "London"), query_entities=("Inception",))
    assert AnswerSupportEvaluator().evaluate(QUERY, "Inception's director: London", PATHS, 1.0, ctx) == [
        1.0,
        -1.0,
        -1.0,
    ]


def test_answer_support_falls_back_to_answer_text() -> None:
    ev = AnswerSupportEvaluator()
    answer = "He was born in London."
    assert ev.evaluate(QUERY, answer, PATHS, 1.0, EvaluationContext()) == [1.0, -1.0, -1.0]


def test_answer_support_chunks() -> None:
    chunks = [
        (Chunk("c1", "d1", "Nolan was born in London in 1970."),),
        (Chunk("c2", "d1", "DiCaprio was born in Los Angeles."),),
    ]
    ctx = EvaluationContext(unit="chunk", answer_entities=("London",))
    old = AnswerSupportEvaluator(credit="path")
    assert old.evaluate(QUERY, "London", chunks, 1.0, ctx) == [1.0, -1.0]
    text_only = EvaluationContext(unit="chunk")
    assert old.evaluate(QUERY, "Los Angeles", chunks, 0.0, text_only) == [None, -1.0]
    # by content (the default): no chunk states the asked relation, so none is an alternative answer
    assert AnswerSupportEvaluator().evaluate(QUERY, "London", chunks, 1.0, ctx) == [1.0, None]


# --------------------------------------------------------------------------- gold


def test_gold_penalize_answers_and_paths() -> None:
    gold = Gold(answers=("London",), paths=((T1, T2),))
    ctx = EvaluationContext(gold=gold)
    # (T1, T2) reaches London → 1; (T3, T4) neither reaches it nor overlaps the gold path → −1;
    # (T1, T3) has half its triples on the gold path → 2·(1/2) − 1 = 0.
    paths = [(T1, T2), (T3, T4), (T1, T3)]
    assert GoldEvaluator(others="penalize").evaluate(QUERY, "", paths, 0.0, ctx) == [1.0, -1.0, 0.0]


def test_gold_neutral_and_misled_leave_irrelevant_paths_alone() -> None:
    gold = Gold(answers=("London",), paths=((T1, T2),))
    paths = [(T1, T2), (T3, T4), (T1, T3)]
    # the reader answered Los Angeles (wrong): the path ending there misled it → −1; (T1, T3)
    # ends on DiCaprio, neither a gold answer nor the response → 0 (neutral) / no update (misled)
    wrong = EvaluationContext(gold=gold, answer_entities=("Los Angeles",), query_entities=("Inception",))
    assert GoldEvaluator().evaluate(QUERY, "Los Angeles", paths, 0.0, wrong) == [1.0, -1.0, 0.0]
    misled = GoldEvaluator(others="misled")
    assert misled.evaluate(QUERY, "Los Angeles", paths, 0.0, wrong) == [1.0, -1.0, None]
    # a correct response: nothing misled the reader
    right = EvaluationContext(gold=gold, answer_entities=("London",), query_entities=("Inception",))
    assert GoldEvaluator().evaluate(QUERY, "London", paths, 1.0, right) == [1.0, 0.0, 0.0]
    assert misled.evaluate(QUERY, "London", paths, 1.0, right) == [1.0, None, None]


def test_gold_neutral_takes_the_verdict_on_the_response_from_the_feedback() -> None:
    gold = Gold(answers=("London",))
    paths = [(T1, T2), (T3, T4), (T1,)]
    ctx = EvaluationContext(gold=gold, answer_entities=("London",), query_entities=("Inception",))
    # a correct answer whose feedback says wrong (a flipped verdict): its path is pushed down
    assert GoldEvaluator().evaluate(QUERY, "London", paths, 0.0, ctx) == [-1.0, 0.0, 0.0]
    # a wrong answer whose feedback says right: its path is credited, and gold still credits London
    wrong = EvaluationContext(gold=gold, answer_entities=("Los Angeles",), query_entities=("Inception",))
    assert GoldEvaluator().evaluate(QUERY, "Los Angeles", paths, 1.0, wrong) == [1.0, 1.0, 0.0]
    # no verdict (0.5): gold decides whether the response misled
    assert GoldEvaluator().evaluate(QUERY, "Los Angeles", paths, 0.5, wrong) == [1.0, -1.0, 0.0]
    assert GoldEvaluator().evaluate(QUERY, "London", paths, 0.5, ctx) == [1.0, 0.0, 0.0]


def test_gold_misled_credits_paths_that_end_on_the_answer_not_ones_crossing_it() -> None:
    hub = Triple.of("Christopher Nolan", "gender", "male")
    other = Triple.of("Leonardo DiCaprio", "gender", "male")
    gold = Gold(answers=("male",))
    ctx = EvaluationContext(gold=gold, query_entities=("Christopher Nolan",))
    # Nolan → male ends on the answer; Nolan → male → DiCaprio crosses it and walks on
    paths = [(hub,), (hub, other)]
    assert GoldEvaluator().evaluate("Nolan's gender?", "", paths, 1.0, ctx) == [1.0, 0.0]
    assert GoldEvaluator(others="penalize").evaluate("Nolan's gender?", "", paths, 1.0, ctx) == [1.0, 1.0]


def test_gold_rejects_an_unknown_mode() -> None:
    with pytest.raises(TriageError, match="misled"):
        GoldEvaluator(others="strict")  # type: ignore[arg-type]


def test_gold_without_annotations_gives_no_update() -> None:
    assert GoldEvaluator().evaluate(QUERY, "", PATHS, 1.0, EvaluationContext()) == [None, None, None]


def test_gold_chunks() -> None:
    chunks = [(Chunk("c1", "d1", "born in London"),), (Chunk("c2", "d1", "born in Paris"),)]
    penalize = GoldEvaluator(Gold(answers=("London",)), others="penalize")
    assert penalize.evaluate(QUERY, "", chunks, 1.0, EvaluationContext(unit="chunk")) == [1.0, -1.0]
    neutral = GoldEvaluator(Gold(answers=("London",)))
    # the response named Paris: the chunk naming it misled the reader
    ctx = EvaluationContext(unit="chunk", answer_entities=("Paris",))
    assert neutral.evaluate(QUERY, "Paris", chunks, 0.0, ctx) == [1.0, -1.0]
    # by content (the default), a chunk naming neither answer is out of the update, not neutral
    assert neutral.evaluate(QUERY, "", chunks, 0.0, EvaluationContext(unit="chunk")) == [1.0, None]
    old = GoldEvaluator(Gold(answers=("London",)), credit="path")
    assert old.evaluate(QUERY, "", chunks, 0.0, EvaluationContext(unit="chunk")) == [1.0, 0.0]
