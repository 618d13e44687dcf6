"""``triage score``: scoring a JSONL trace from any pipeline (DESIGN §6) and ``calibrate_rows``."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from triage_plugins.apps.score import (
    calibrate_rows,
    read_events,
    render_calibration,
    render_score_report,
    report_json,
    score_events,
)
from triage_plugins.contract.errors import EventError
from triage_plugins.contract.events import (
    Chunk,
    ExtractedTriple,
    ExtractionEvent,
    GenerationEvent,
    Gold,
    GraphEvent,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView

T1 = Triple("t1", "Inception", "directed_by", "Christopher Nolan")
T2 = Triple("t2", "Interstellar", "directed_by", "Chris Nolan")
T3 = Triple("t3", "Christopher Nolan", "born_in", "London")
T4 = Triple("t4", "Memento", "directed_by", "Christopher Nolan")
T5 = Triple("t5", "Titanic", "directed_by", "James Cameron")


def _retrieval(qid: str, query: str, triples: tuple[Triple, ...], mentions=None, gold=None) -> RetrievalEvent:
    mentions = mentions or {}
    return RetrievalEvent(
        "mine",
        qid,
        query,
        mentions=tuple(mentions),
        grounding=mentions,
        subgraph=Subgraph(triples),
        expanded_nodes=len(triples) * 2,
        retriever="local",
        gold=gold,
    )


def _trace() -> list:
    """A trace with one query per signature; mentions are omitted except in q2."""
    chunk = Chunk("c1", "d1", "Inception was directed by Christopher Nolan.")
    return [
        ExtractionEvent("mine", "run1", chunk, (ExtractedTriple(T1, None, chunk.text),)),
        ExtractionEvent("mine", "run2", chunk, (ExtractedTriple(T1, None, chunk.text),)),
        GraphEvent("mine", GraphView([T1, T2, T3, T4, T5])),
        # q1 — Fig. 4: both films retrieved, their director split in two nodes
        _retrieval("q1", "Did the director of Inception also direct Interstellar?", (T1, T2)),
        GenerationEvent(
            "mine", "q1", "Christopher Nolan directed Inception; Chris Nolan directed Interstellar."
        ),
        # q2 — Memento is a node but the retriever fetched Titanic
        _retrieval(
            "q2",
            "Where was the director of Memento born?",
            (T5,),
            {"Memento": "Memento"},
            Gold(answers=("London",)),
        ),
        # q3 — nothing in the KG
        _retrieval("q3", "Who painted the Mona Lisa?", (T5,)),
        # q4 — retrieval fine, the answer names an entity absent from the evidence
        _retrieval("q4", "Where was Christopher Nolan born?", (T3,), gold=Gold(answers=("London",))),
        GenerationEvent("mine", "q4", "He was born in Paris."),
        # q5 — supported, with a closed-book run for KNI
        _retrieval("q5", "Who directed Memento?", (T4,), gold=Gold(answers=("Christopher Nolan",))),
        GenerationEvent("mine", "q5", "Christopher Nolan directed Memento."),
        GenerationEvent("mine", "q5", "Christopher Nolan.", context="none"),
    ]


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(e.to_json() for e in _trace()) + "\n\n", encoding="utf-8")
    return path


def test_score_events_from_jsonl(trace_file: Path) -> None:
    report = score_events(read_events(trace_file))
    by_id = {q.query_id: q for q in report.queries}
    assert {k: q.signature for k, q in by_id.items()} == {
        "q1": "connectivity_gap",
        "q2": "retrieval_gap",
        "q3": "out_of_scope",
        "q4": "generation_gap",
        "q5": "supported",
    }
    q1 = by_id["q1"].metrics
    assert (q1["QGR"].value, q1["ERC"].value, q1["RRS"].value) == (1.0, 1.0, 0.0)  # derived mentions
    assert q1["AGR"].value == 1.0  # 4 answer entities, all in V_S (Chris Nolan is a node there)
    assert by_id["q2"].metrics["ERC"].value == 0.0 and by_id["q2"].metrics["CC"].value == 0.0
    assert by_id["q3"].metrics["QGR"].value == 0.0  # "Mona Lisa" is an unresolved mention
    q4 = by_id["q4"].metrics
    assert q4["AGR"].value == 0.0 and q4["ARF"].value is None and q4["Hits@1"].value == 0.0
    q5 = by_id["q5"].metrics
    assert (q5["AGR"].value, q5["ARF"].value, q5["KNI"].value, q5["Hits@1"].value) == (1.0, 1.0, 0.0, 1.0)

    agg = report.aggregate
    assert agg["QGR"].value == pytest.approx((1 + 1 + 0 + 1 + 1) / 5)
    assert agg["CC"].value == pytest.approx(2 / 3)  # q2 0, q4 1, q5 1
    assert agg["Hits@1"].value == pytest.approx(1 / 2)  # q4 0, q5 1
    assert agg["RFR"].value == pytest.approx(1 / 2)  # of q4, q5 (in context), q4 is wrong
    assert report.rhd == {0: pytest.approx(0.4), math.inf: pytest.approx(0.6)}  # q4, q5 at 0; q1-q3 at ∞
    assert report.signatures == {
        "out_of_scope": 1,
        "retrieval_gap": 1,
        "connectivity_gap": 1,
        "generation_gap": 1,
        "supported": 1,
    }
    assert report.counts == {"extraction": 2, "graph": 1, "retrieval": 5, "generation": 4}
    assert report.phases["validation"].skipped is None and "DNR" in report.phases["validation"].metrics
    assert report.phases["implementation"].skipped is None
    tcs = report.phases["implementation"].metrics["TCS"]
    assert tcs.value is None and tcs.reason  # rule-based extraction: no logprobs, N/A not 1.0


def test_report_json_and_rendering(trace_file: Path) -> None:
    report = score_events(read_events(trace_file))
    data = json.loads(report_json(report))
    assert data["usage"]["rhd"] == {"0": 0.4, "inf": 0.6}
    assert data["usage"]["signatures"]["connectivity_gap"] == 1
    q1 = next(q for q in data["queries"] if q["query_id"] == "q1")
    assert [s["status"] for s in q1["chain"]] == ["pass", "pass", "fail", "not reached", "not reached"]
    assert q1["stage"] == "retrieval"
    assert q1["metrics"]["RHD"]["details"]["hops"] == "inf"

    console = Console(file=io.StringIO(), width=220, record=True)
    render_score_report(report, console)
    text = console.export_text()
    for needle in ("KG Usage", "connectivity_gap", "generation_gap", "N/A", "RHD", "∞", "q5"):
        assert needle in text, needle


def test_missing_graph_leaves_mentions_na_and_signature_undetermined() -> None:
    events = [_retrieval("q1", "Did the director of Inception also direct Interstellar?", (T1, T2))]
    report = score_events(events)
    (q,) = report.queries
    assert q.signature is None and "not supplied" in q.undetermined
    assert q.metrics["QGR"].value is None
    assert report.signatures == {"undetermined": 1}
    assert report.phases["validation"].skipped == "no graph event in the trace"
    assert report.phases["implementation"].skipped == "no extraction events in the trace"
    assert any("no graph event" in n for n in report.notes)
    assert report.rhd == {}


def test_supplied_mentions_need_no_graph() -> None:
    events = [_retrieval("q1", "x", (T1, T2), {"Inception": "Inception", "Interstellar": "Interstellar"})]
    (q,) = score_events(events).queries
    assert q.signature == "connectivity_gap"


def test_orphan_generations_are_noted() -> None:
    report = score_events([GenerationEvent("mine", "zz", "hello")])
    assert report.queries == [] and any("without a retrieval" in n for n in report.notes)
    console = Console(file=io.StringIO(), width=120, record=True)
    render_score_report(report, console)
    assert "no retrieval events" in console.export_text()


def test_read_events_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(_trace()[3].to_json() + "\n{not json}\n", encoding="utf-8")
    with pytest.raises(EventError, match="line 2"):
        list(read_events(path))


def _probe_rows() -> list[dict]:
    """30 questions x 3 retrievers; CC fails exactly when ERC < 1 except one noisy row."""
    rows = []
    for q in range(30):
        for r, erc in enumerate((1.0, 2 / 3, 1 / 3)):
            cc = 1.0 if erc == 1.0 else 0.0
            rows.append({"query": f"question {q}", "retriever": f"r{r}", "ERC": erc, "CC": cc})
    rows[1]["CC"] = 1.0  # one partial-coverage success
    rows.append({"query": "question x", "ERC": None, "CC": 1.0})  # N/A metric: dropped
    return rows


def test_calibrate_rows_fits_the_youden_threshold_with_clustered_intervals() -> None:
    report = calibrate_rows(_probe_rows(), "ERC", "CC", cluster="query", n_resamples=300, seed=1)
    y = report.youden
    assert y.threshold == pytest.approx(2 / 3)
    assert y.n == 90 and y.n_dropped == 1 and y.n_failed == 59
    # at θ = 2/3: sensitivity 59/59, specificity 30/31
    assert y.j == pytest.approx(1 + 30 / 31 - 1)
    assert report.n_clusters == 30
    assert report.threshold_ci is not None and report.threshold_ci.n_clusters == 30
    assert report.j_ci.low <= y.j <= report.j_ci.high
    data = report.to_dict()
    assert data["threshold"] == pytest.approx(2 / 3) and data["cluster"] == "query"
    console = Console(file=io.StringIO(), width=160, record=True)
    render_calibration(report, console)
    assert "0.667" in console.export_text()


def test_calibrate_rows_from_a_score_report(trace_file: Path) -> None:
    rows = score_events(read_events(trace_file)).rows()
    assert {r["query_id"] for r in rows} == {"q1", "q2", "q3", "q4", "q5"}
    report = calibrate_rows(rows, "ERC", "CC", n_resamples=200)
    # ERC/CC pairs: q2 (0, fail), q4 (1, ok), q5 (1, ok) -> θ = 0, J = 1
    assert report.youden.threshold == 0.0 and report.youden.j == 1.0
    assert report.youden.n == 3
