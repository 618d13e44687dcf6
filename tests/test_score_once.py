"""Score once (issue #32): one record per query, and every view of a compare run agrees."""

from __future__ import annotations

from typing import Any

import pytest

from triage_plugins.adapter_kit.runner import query_id
from triage_plugins.apps.compare import embedded_corpus, register_runner, run_compare, unregister_runner
from triage_plugins.contract.events import GenerationEvent, GraphEvent, RetrievalEvent, Subgraph
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.offline.extractor import extraction_event
from triage_plugins.report.data import build_store_report
from triage_plugins.runtime.manager import TriageManager
from triage_plugins.store import open_store

HOST = "host"


class HostRunner:
    """A host framework as compare sees one: its events carry no gold and its graph no ontology; it
    builds its graph twice (half, then all) and answers every question wrongly."""

    name = HOST
    modes = ("local",)

    def available(self) -> tuple[bool, str]:
        return True, ""

    def run(self, corpus, questions, mode, manager, *, feedback_rounds, seed, progress) -> None:
        events = [extraction_event(c, "run-1", framework=HOST) for c in corpus.chunks]
        triples = [x.triple for e in events for x in e.triples]
        for event in events:
            manager.emit_extraction(event)
        manager.emit_graph(GraphEvent(HOST, GraphView(triples[: len(triples) // 2])))
        manager.emit_graph(GraphEvent(HOST, GraphView(triples)))
        for q in questions:
            qid = query_id(q.id, mode)
            path = q.gold.paths[0] if q.gold and q.gold.paths else ()
            manager.emit_retrieval(
                RetrievalEvent(HOST, qid, q.text, subgraph=Subgraph(tuple(path)), retriever=mode)
            )
            manager.emit_generation(GenerationEvent(HOST, qid, "Nobody"))


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Any]:
    store = tmp_path_factory.mktemp("once") / "compare.sqlite"
    register_runner(HostRunner(), replace=True)
    try:
        result = run_compare(embedded_corpus(0, n_questions=6), frameworks=[HOST], store=store)
    finally:
        unregister_runner(HOST)
    return result, store


def test_compare_and_report_show_the_same_graph_metrics(compared) -> None:
    result, store = compared
    (row,) = result.rows
    shown = {**row.implementation, **row.validation}
    assert {"CSR_link", "SC", "LC", "OC"} <= set(shown)
    with open_store(store) as opened:
        report = build_store_report(opened)
    stored = report.graph[HOST]
    for name, result_ in shown.items():
        assert stored[name].value == result_.value, name
    assert shown["SC"].value is not None  # the corpus's ontology reached the host's graph event


def test_a_host_frameworks_retrievals_carry_their_questions_gold(compared) -> None:
    result, store = compared
    with open_store(store) as opened:
        retrievals = list(opened.events("retrieval", framework=HOST))
        report = build_store_report(opened)
    assert retrievals and all(r.gold is not None for r in retrievals)
    (group,) = [g for g in report.groups if g.framework == HOST]
    assert group.stats["Hits@1"].n == len(retrievals) and group.stats["Hits@1"].mean == 0.0
    assert result.rows[0].gold is not None and result.rows[0].gold["Hits@1"].mean == 0.0


def test_a_compare_row_ends_its_run_once_with_its_counts(tmp_path) -> None:
    ended: list[tuple[str, dict]] = []
    store = open_store(tmp_path / "s.sqlite")
    real = store.end_run

    def spy(run_id: str, **counts: Any) -> None:
        ended.append((run_id, counts))
        real(run_id, **counts)

    store.end_run = spy  # type: ignore[method-assign]
    register_runner(HostRunner(), replace=True)
    try:
        run_compare(embedded_corpus(0, n_questions=2), frameworks=[HOST], store=store)
    finally:
        unregister_runner(HOST)
        store.close()
    assert len(ended) == 1 and {"dropped", "undelivered", "faults"} <= set(ended[0][1])


class Records:
    def __init__(self) -> None:
        self.records: list[Any] = []

    @hookimpl
    def triage_query_scored(self, record):
        self.records.append(record)


def test_the_gate_reads_the_scorers_values_for_the_same_retrieval(monkeypatch) -> None:
    import triage_plugins.plugins.gate as gate_module

    manager = TriageManager(synchronous=True, entry_points=False)
    seen = Records()
    manager.register(seen)
    retrieval = RetrievalEvent("test", "q1", "A?", mentions=("A",), grounding={"A": None})

    def recomputed(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the gate recomputed what the scorer scored")

    monkeypatch.setattr(gate_module, "chain_head_metrics", recomputed)
    manager.emit_retrieval(retrieval)
    decision = manager.gate(retrieval)
    manager.emit_generation(GenerationEvent("test", "q1", "B"))
    assert decision.action == "warn" and decision.metrics["QGR"] == 0.0
    final = seen.records[-1]
    assert final.phase == "generation" and final.gate == decision and final.answer is not None
    assert final.metrics["QGR"] is seen.records[0].metrics["QGR"]  # computed once, reused
    manager.close()
