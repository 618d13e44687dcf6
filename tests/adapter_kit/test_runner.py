"""The runner SDK: compare query ids, the one gold-hit rule and the feedback-rounds loop."""

from __future__ import annotations

import asyncio

import pytest

from triage_plugins.adapter_kit.runner import (
    Answered,
    Corpus,
    FrameworkRunner,
    Question,
    arun_rounds,
    gold_hit,
    missing_package,
    parse_query_id,
    query_id,
    round_label,
    run_rounds,
)
from triage_plugins.apps.demo import answer_is_correct
from triage_plugins.apps.evolve import answer_correct
from triage_plugins.contract.events import Gold

# --------------------------------------------------------------------------- the gold-hit rule


@pytest.mark.parametrize(
    ("answer", "gold", "hit"),
    [
        ("Christopher Nolan", ["Christopher Nolan"], True),  # equal
        ("It was directed by Christopher Nolan.", ["christopher nolan"], True),  # contained, any case
        ("new_york", ["New York"], True),  # underscores and punctuation are spaces
        ("it is burnham-on-sea", ["burnham-on-sea"], True),
        ("Bob and Cy", ["Cy"], True),  # one of several answers named
        ("Bobby", ["Bob"], False),  # whole words only: no substring hit
        ("york", ["new york"], False),
        ("", ["x"], False),
        ("   ", ["x"], False),
        ("Ada", ["", "   "], False),  # a blank gold answer never hits
        ("Ada", [], False),
    ],
)
def test_gold_hit_is_a_whole_phrase_of_the_normalized_answer(answer: str, gold: list[str], hit: bool) -> None:
    assert gold_hit(answer, gold) is hit
    if all(g.strip() for g in gold):  # a Gold (which refuses blank answers) or its answers
        assert gold_hit(answer, Gold(answers=tuple(gold))) is hit


def test_evolve_bench_and_the_demo_use_the_same_rule() -> None:
    for answer, gold in (("Bobby", ["Bob"]), ("new_york", ["New York"]), ("Bob and Cy", ["Cy"]), ("", ["x"])):
        assert answer_correct(answer, gold) is gold_hit(answer, gold)
        assert answer_is_correct(answer, gold) is gold_hit(answer, gold)


# --------------------------------------------------------------------------- ids, labels, availability


def test_query_ids_round_trip() -> None:
    assert query_id("q1", "local") == "q1@local" and query_id("q1", "local", 3) == "q1@local#r3"
    assert parse_query_id(query_id("a@b", "mix", 2)) == ("a@b", "mix", 2)
    assert round_label("toy", "m", 0) == "toy/m: questions"
    assert round_label("toy", "m", 2) == "toy/m: questions (round 2)"


def test_missing_package_names_the_extra() -> None:
    assert missing_package("json", "x") is None
    assert missing_package("no_such_module_here", "toy", "toy-pkg") == (
        "toy-pkg is not installed (pip install 'triage-plugins[toy]')"
    )


class _Runner:
    name = "toy"
    modes = ("m",)

    def available(self) -> tuple[bool, str]:
        return True, ""

    def run(self, corpus, questions, mode, manager, *, feedback_rounds, seed, progress) -> None:
        return None


def test_the_runner_protocol_is_structural() -> None:
    assert isinstance(_Runner(), FrameworkRunner)
    assert not isinstance(object(), FrameworkRunner)
    assert Corpus("c", ()).questions == ()


# --------------------------------------------------------------------------- feedback rounds

QUESTIONS = (
    Question("q1", "Who?", Gold(answers=("Bob",))),
    Question("q2", "Where?", Gold(answers=("Paris",))),
    Question("q3", "No gold?"),
)


def _log() -> tuple[list[tuple], dict]:
    calls: list[tuple] = []
    answers = {"q1": "Bob", "q2": "Lyon", "q3": "x"}

    def progress(label: str, total: int):
        calls.append(("progress", label, total))
        return lambda: calls.append(("tick",))

    return calls, {"answers": answers, "progress": progress}


def test_run_rounds_sends_gold_feedback_for_the_previous_round_then_asks_again() -> None:
    calls, ctx = _log()

    def ask(q: Question, qid: str) -> str:
        calls.append(("ask", qid))
        return ctx["answers"][q.id]

    last = run_rounds(
        "toy",
        "m",
        QUESTIONS,
        ask,
        lambda qid, score: calls.append(("feedback", qid, score)),
        lambda: calls.append(("flush",)),
        feedback_rounds=1,
        progress=ctx["progress"],
    )
    assert [c for c in calls if c[0] != "tick"] == [
        ("progress", "toy/m: questions", 3),
        ("ask", "q1@m"),
        ("ask", "q2@m"),
        ("ask", "q3@m"),
        ("feedback", "q1@m", 1.0),  # a hit
        ("feedback", "q2@m", 0.0),  # a miss; q3 has no gold: no feedback
        ("flush",),
        ("progress", "toy/m: questions (round 1)", 3),
        ("ask", "q1@m#r1"),
        ("ask", "q2@m#r1"),
        ("ask", "q3@m#r1"),
    ]
    assert calls.count(("tick",)) == 6
    assert last == [Answered(q, f"{q.id}@m#r1", ctx["answers"][q.id]) for q in QUESTIONS]


def test_no_feedback_rounds_asks_once_and_sends_nothing() -> None:
    calls, ctx = _log()
    run_rounds(
        "toy", "m", QUESTIONS, lambda q, qid: "Bob", lambda *a: calls.append(("feedback",)),
        lambda: calls.append(("flush",)), feedback_rounds=0,
    )  # fmt: skip
    assert calls == []


def test_arun_rounds_awaits_the_answers_and_an_async_flush() -> None:
    calls, ctx = _log()

    async def ask(q: Question, qid: str) -> str:
        calls.append(("ask", qid))
        return ctx["answers"][q.id]

    async def aflush() -> int:
        calls.append(("aflush",))
        return 0

    async def main() -> list[Answered]:
        return await arun_rounds(
            "toy", "m", QUESTIONS[:1], ask, lambda qid, s: calls.append(("feedback", qid, s)), aflush,
            feedback_rounds=2,
        )  # fmt: skip

    last = asyncio.run(main())
    assert calls == [
        ("ask", "q1@m"),
        ("feedback", "q1@m", 1.0),
        ("aflush",),
        ("ask", "q1@m#r1"),
        ("feedback", "q1@m#r1", 1.0),
        ("aflush",),
        ("ask", "q1@m#r2"),
    ]
    assert [a.query_id for a in last] == ["q1@m#r2"]
    # a synchronous flush works too
    calls.clear()
    asyncio.run(
        arun_rounds("toy", "m", QUESTIONS[:1], ask, lambda *a: None, lambda: calls.append(("flush",)),
                    feedback_rounds=1)
    )  # fmt: skip
    assert ("flush",) in calls
