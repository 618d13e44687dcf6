"""``triage compare`` scores each query once (issue #32): a row is built from the records its own
manager's scorer broadcast, and no metric is computed again; a query the scorer left without gold
or without an answer shows those metrics N/A with the reason."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

import triage_plugins.plugins.usage as usage_module
from triage_plugins.apps import score as score_module
from triage_plugins.apps.compare import aggregate_events, aggregate_records, embedded_corpus, run_compare
from triage_plugins.contract.events import GenerationEvent, Gold, GraphEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.contract.records import RecordCollector
from triage_plugins.metrics.per_query import usage_metrics
from triage_plugins.runtime.manager import TriageManager

T_AB = Triple.of("Ada", "knows", "Bob")
GRAPH = GraphEvent("alpha", GraphView([T_AB, Triple.of("Bob", "knows", "Cy")]))
GOLD = Gold(answers=("Bob",), paths=(), entities=("Ada",))


def _retrieval(qid: str, gold: Gold | None) -> RetrievalEvent:
    subgraph = Subgraph((T_AB,))
    return RetrievalEvent("alpha", qid, "Who?", ("Ada",), {"Ada": "Ada"}, subgraph, retriever="r", gold=gold)


def test_compare_computes_each_metric_of_each_query_once(monkeypatch: pytest.MonkeyPatch) -> None:
    computed: Counter[tuple[str, str, str]] = Counter()

    def counted(retrieval: RetrievalEvent, *args: Any, **kwargs: Any) -> Any:
        results = usage_metrics(retrieval, *args, **kwargs)
        computed.update((retrieval.framework, retrieval.query_id, name) for name in results)
        return results

    def no_replay(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("compare replayed its events through a second scorer")

    monkeypatch.setattr(usage_module, "usage_metrics", counted)
    monkeypatch.setattr(score_module.Replay, "__init__", no_replay)
    result = run_compare(embedded_corpus(0, n_questions=4), frameworks=["reference"], modes=["path"])
    (row,) = result.rows
    assert row.status == "ok" and row.queries == 4
    assert computed and max(computed.values()) == 1, computed.most_common(3)
    queries = {qid for _, qid, _ in computed}
    assert len(queries) == 4 and row.gold is not None and row.gold["Hits@1"].n == 4


def test_a_query_without_gold_or_answer_shows_those_metrics_na_with_the_reason() -> None:
    manager = TriageManager(synchronous=True, entry_points=False)
    collector = RecordCollector()
    manager.register(collector)
    manager.emit_graph(GRAPH)
    events: list[Any] = [
        _retrieval("q1", GOLD),
        GenerationEvent("alpha", "q1", "Bob", ("Bob",), {"Bob": "Bob"}),
        _retrieval("q2", None),
        GenerationEvent("alpha", "q2", "Cy", ("Cy",), {"Cy": "Cy"}),
        _retrieval("q3", GOLD),  # never answered
    ]
    for event in events:
        (manager.emit_retrieval if isinstance(event, RetrievalEvent) else manager.emit_generation)(event)
    manager.flush()
    row = aggregate_records(collector.take(), "alpha", "r", registry=manager.metrics)
    manager.close()
    assert row.queries == 3 and row.gold is not None
    hits = row.gold["Hits@1"]
    assert (hits.n, hits.na, hits.mean) == (1, 2, 1.0)
    cc = row.gold["CC"]
    assert (cc.n, cc.na, cc.reason) == (2, 1, "no gold annotations for this query")
    agr = row.usage["AGR"]
    assert agr.na >= 1 and row.usage["ERC"].n == 3
    offline = aggregate_events([GRAPH, *events], "alpha", "r")  # the same queries replayed, scored once
    for table in ("usage", "gold"):
        live, replayed = getattr(row, table), getattr(offline, table)
        assert {m: (s.n, s.na, s.mean) for m, s in live.items()} == {
            m: (s.n, s.na, s.mean) for m, s in replayed.items()
        }, table
    assert row.signatures == offline.signatures and row.per_question == offline.per_question
