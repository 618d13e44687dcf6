"""Offline scoring is a replay (issue #32): the scorer holds each query and scores it once.

The replay's final record of a query equals what scoring it in full gives (every per-query metric,
the chain read over them), whatever order its events came in, and the metrics are computed once per
query (before, at the retrieval and again at the answer).
"""

from __future__ import annotations

from typing import Any

import pytest

import triage_plugins.plugins.usage as usage_module
from tests.test_scoring import T1, T3, T4, T5, _retrieval
from triage_plugins.apps.score import Replay, score_events
from triage_plugins.contract.config import CHAIN_THRESHOLDS
from triage_plugins.contract.events import GenerationEvent, Gold, GraphEvent
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.diagnosis.chain import diagnose
from triage_plugins.kg.grounding import shared_grounder
from triage_plugins.metrics.per_query import usage_metrics
from triage_plugins.metrics.registry import BUILTIN_METRICS

GRAPH = GraphEvent("mine", GraphView([T1, T3, T4, T5]))
GOLD = Gold(answers=("Christopher Nolan",))


def _events() -> list[Any]:
    """Answered, answered with a closed-book run first, never answered, an answer before its retrieval,
    a query retrieved twice, an orphan answer."""
    return [
        _retrieval("a", "Who directed Memento?", (T4,), gold=GOLD),
        GenerationEvent("mine", "a", "Christopher Nolan directed Memento."),
        GenerationEvent("mine", "b", "Christopher Nolan.", context="none"),
        _retrieval("b", "Who directed Memento?", (T4,), gold=GOLD),
        GenerationEvent("mine", "b", "Christopher Nolan."),
        _retrieval("c", "Where was Christopher Nolan born?", (T3,)),
        GenerationEvent("mine", "c", "no answer", context="none"),
        GenerationEvent("mine", "d", "James Cameron."),
        _retrieval("d", "Who directed Titanic?", (T5,)),
        _retrieval("e", "Who directed Titanic?", (T1,)),
        _retrieval("e", "Who directed Titanic?", (T5,)),
        GenerationEvent("mine", "orphan", "Nobody."),
    ]


def _replayed(monkeypatch: pytest.MonkeyPatch, events: list[Any]) -> tuple[list[Any], list[int], int]:
    calls: list[int] = []

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return usage_metrics(*args, **kwargs)

    monkeypatch.setattr(usage_module, "usage_metrics", counted)
    replay = Replay(None, BUILTIN_METRICS)
    try:
        replay.use_graph(GRAPH)
        for event in events:
            replay.feed(event)
        records = list(replay.records())
    finally:
        replay.close()
    return records, calls, replay.orphans


def test_each_query_is_scored_once_into_its_full_final_record(monkeypatch: pytest.MonkeyPatch) -> None:
    events = _events()
    records, calls, orphans = _replayed(monkeypatch, events)
    assert [r.query_id for r in records] == ["a", "b", "c", "d", "e"]  # where each was first retrieved
    assert len(calls) == len(records) and orphans == 1
    grounder = shared_grounder(GRAPH.graph, {})
    last = {e.query_id: e for e in events if e.kind == "retrieval"}
    answers = {e.query_id: e for e in events if e.kind == "generation" and e.context == "retrieved"}
    closed = {e.query_id: e for e in events if e.kind == "generation" and e.context == "none"}
    for record in records:
        qid = record.query_id
        assert record.retrieval is last[qid]
        answer = answers.get(qid)
        expected = usage_metrics(
            last[qid], answer, grounder=grounder, closed_book=closed.get(qid) if answer else None
        )
        assert dict(record.metrics) == expected and list(record.metrics) == list(expected)
        assert record.diagnosis == diagnose(expected, dict(CHAIN_THRESHOLDS))
        assert record.phase == ("generation" if answer else "retrieval")
        assert record.answer is answer and record.closed_book is (closed.get(qid) if answer else None)


def test_score_events_notes_what_the_replay_saw() -> None:
    report = score_events([GRAPH, *_events()])
    assert [q.query_id for q in report.queries] == ["a", "b", "c", "d", "e"]
    assert any("'e' (mine) retrieved twice" in n for n in report.notes)
    assert any(n.startswith("1 generation event(s) without a retrieval event") for n in report.notes)


def test_records_collected_live_give_the_report_the_replay_gives() -> None:
    from triage_plugins.apps.score import report_json, score_records
    from triage_plugins.contract.records import RecordCollector
    from triage_plugins.runtime.manager import TriageManager

    events = [GRAPH, *(e for e in _events() if e.query_id in ("a", "b"))]  # queries with gold
    with TriageManager(synchronous=True, entry_points=False) as manager:
        collector = RecordCollector()
        manager.register(collector)
        for event in events:
            emit = {"graph": manager.emit_graph, "retrieval": manager.emit_retrieval}
            emit.get(event.kind, manager.emit_generation)(event)
        finals = collector.finals()
    live = score_records(events, finals, metrics=BUILTIN_METRICS)
    assert [q.query_id for q in live.queries] == ["a", "b"]
    assert report_json(live) == report_json(score_events(events, metrics=BUILTIN_METRICS))
