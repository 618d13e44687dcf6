"""The learning audit (issue #30 point 6): the report tells a score lowered because it led to wrong
answers from one lowered as a bystander, and names the feedback that moved each score."""

from __future__ import annotations

import io
from dataclasses import replace

from rich.console import Console

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import (
    FeedbackEvent,
    GenerationEvent,
    Gold,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.plugins.feedback import move_reason, replay_moves
from triage_plugins.report.data import build_store_report
from triage_plugins.report.terminal import render_store_report
from triage_plugins.runtime.manager import TriageManager

TARANTINO = Triple.of("Quentin Tarantino", "directed", "Pulp Fiction")
TWIN = Triple.of("James Cameron", "directed", "Pulp Fiction")  # false
TRAVOLTA = Triple.of("John Travolta", "starred in", "Pulp Fiction")
CONTEXT = Subgraph((TARANTINO, TWIN, TRAVOLTA))
QUESTION = "Who directed Pulp Fiction?"


def _events(qid: str, answer: str, score: float) -> list:
    return [
        RetrievalEvent(
            "lightrag", qid, QUESTION, ("Pulp Fiction",), {"Pulp Fiction": "Pulp Fiction"}, CONTEXT
        ),
        GenerationEvent("lightrag", qid, answer, (answer,), {answer: answer}),
        FeedbackEvent("lightrag", qid, score),
    ]


def test_move_reasons() -> None:
    assert move_reason(0.0, -1.0) == "led to a wrong answer"
    assert move_reason(1.0, -1.0) == "alternative to a right answer"
    assert move_reason(1.0, 1.0) == "led to a right answer"
    assert move_reason(0.0, 1.0) == "leads to the gold answer"
    assert move_reason(1.0, None) == move_reason(1.0, 0.0) == "bystander"


def test_replay_names_each_step_and_why() -> None:
    events = [*_events("q1", "James Cameron", 0.0), *_events("q2", "Quentin Tarantino", 1.0)]
    moves = replay_moves(events)
    assert {(m.key, m.query_id, m.reason) for m in moves} == {
        (TWIN.id, "q1", "led to a wrong answer"),
        (TARANTINO.id, "q2", "led to a right answer"),
        (TWIN.id, "q2", "alternative to a right answer"),
    }
    assert all(m.key != TRAVOLTA.id for m in moves)  # the bystander never moves
    # with gold, the relation-blind rule keeps the bystander in the update (U = 0), and it moves:
    # the audit says so
    gold = Gold(answers=("Quentin Tarantino",), entities=("Pulp Fiction",))
    with_gold = [replace(e, gold=gold) if isinstance(e, RetrievalEvent) else e for e in events]
    blind = replay_moves(with_gold, options={"feedback.credit": "path"})
    assert any(m.key == TRAVOLTA.id and m.reason == "bystander" for m in blind)
    assert not any(m.key == TRAVOLTA.id for m in replay_moves(with_gold))


def test_report_shows_why_scores_moved(tmp_path) -> None:
    store_path = tmp_path / "audit.sqlite"
    with TriageManager(store_path, config=TriageConfig(), entry_points=False, synchronous=True) as manager:
        manager.start_run("audit")
        for qid, answer, score in (("q1", "James Cameron", 0.0), ("q2", "Quentin Tarantino", 1.0)):
            retrieval, generation, feedback = _events(qid, answer, score)
            manager.emit_retrieval(retrieval)
            manager.emit_generation(generation)
            manager.emit_feedback(feedback)
        manager.flush()
        report = build_store_report(manager.store)
    (triples,) = [u for u in report.scores if u.unit == "triple"]
    twin = next(m for m in triples.suppressed if m.id == TWIN.id)
    assert twin.reason in ("led to a wrong answer", "alternative to a right answer")
    assert {q for q, _ in twin.by} == {"q1", "q2"}
    assert "bystander" not in triples.reasons
    out = io.StringIO()
    render_store_report(report, Console(file=out, width=160))
    text = out.getvalue()
    assert "learning audit" in text and "led to a wrong answer" in text
