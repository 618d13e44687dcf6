"""Default plugins UsageRecorder (per-query usage metrics + signature rows) and DefaultGate."""

from __future__ import annotations

from pathlib import Path

import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import GenerationEvent, Gold, GraphEvent, RetrievalEvent, Subgraph, Triple
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.plugins.gate import DefaultGate
from triage_plugins.plugins.usage import UsageRecorder
from triage_plugins.runtime.manager import TriageManager

FIG4_QUERY = "Did the director of Inception also direct Interstellar?"
T1 = Triple("t1", "Inception", "directed_by", "Christopher Nolan")
T2 = Triple("t2", "Interstellar", "directed_by", "Chris Nolan")
T2_MERGED = Triple("t2m", "Interstellar", "directed_by", "Christopher Nolan")
T3 = Triple("t3", "Memento", "directed_by", "Christopher Nolan")
GRAPH = GraphView([T1, T2, T2_MERGED, T3])


def _manager(
    tmp_path: Path, config: TriageConfig | None = None
) -> tuple[TriageManager, UsageRecorder, DefaultGate]:
    manager = TriageManager(
        store=tmp_path / "t.sqlite", config=config, synchronous=True, entry_points=False, defaults=False
    )
    recorder, gate = UsageRecorder(manager), DefaultGate(manager)
    manager.register(recorder, "triage.usage")
    manager.register(gate, "triage.gate")
    return manager, recorder, gate


def _retrieval(qid: str, query: str, triples: tuple[Triple, ...], mentions=None, gold=None) -> RetrievalEvent:
    mentions = mentions or {}
    return RetrievalEvent(
        "mine",
        qid,
        query,
        tuple(mentions),
        mentions,
        Subgraph(triples),
        expanded_nodes=7,
        retriever="local",
        gold=gold,
    )


def _values(manager: TriageManager, qid: str) -> dict[str, float | None]:
    return {
        row.name: row.value
        for row in manager.store.metrics(scope="query", scope_id=qid)
        if row.name != "signature"
    }


def _signatures(manager: TriageManager, qid: str) -> list:
    return manager.store.metrics(scope="query", name="signature", scope_id=qid)


def test_retrieval_rows_and_provisional_signature(tmp_path: Path) -> None:
    manager, _, _ = _manager(tmp_path)
    manager.emit_graph(GraphEvent("mine", GRAPH))
    manager.emit_retrieval(_retrieval("q1", FIG4_QUERY, (T1, T2)))  # mentions derived by the grounder
    values = _values(manager, "q1")
    assert set(values) == {"QGR", "ERC", "ERP", "RRS", "RPC", "RHD"}  # no gold: no gold rows
    assert (values["QGR"], values["ERC"], values["RRS"], values["RPC"]) == (1.0, 1.0, 0.0, 7.0)
    assert values["RHD"] is None
    rhd = next(r for r in manager.store.metrics(scope="query", name="RHD", scope_id="q1"))
    assert rhd.details["hops"] == "inf" and rhd.reason.startswith("ℓ(q) = ∞")
    (sig,) = _signatures(manager, "q1")
    assert sig.value is None and sig.reason == "connectivity_gap"
    assert sig.details["phase"] == "retrieval" and sig.details["stage"] == "retrieval"
    assert sig.details["failed"] == "RRS" and sig.details["evaluated"] == "QGR,ERC,RRS"
    assert sig.framework == "mine" and sig.retriever == "local"
    assert not manager.failures


def test_generation_completes_answer_metrics_gold_and_final_signature(tmp_path: Path) -> None:
    manager, _, _ = _manager(tmp_path)
    manager.emit_graph(GraphEvent("mine", GRAPH))
    gold = Gold(answers=("Christopher Nolan",))
    manager.emit_retrieval(_retrieval("q2", FIG4_QUERY, (T1, T2_MERGED), gold=gold))
    manager.emit_generation(
        GenerationEvent("mine", "q2", "Yes, Christopher Nolan directed Inception and Interstellar.")
    )
    values = _values(manager, "q2")
    assert values["RRS"] == 1.0 and values["RHD"] == 2.0
    assert values["CC"] == 1.0 and values["GPC"] is None  # gold answers but no gold path
    assert (values["AGR"], values["AUR"], values["ARF"]) == (1.0, 1.0, 1.0)
    assert values["Hits@1"] == 1.0 and values["F1"] == 1.0
    assert "KNI" not in values  # no closed-book run yet
    provisional, final = _signatures(manager, "q2")
    assert provisional.details["phase"] == "retrieval" and provisional.reason == "supported"
    assert final.details["phase"] == "generation" and final.reason == "supported"
    assert final.details["evaluated"] == "QGR,ERC,RRS,ARF,AGR"
    assert not manager.failures


def test_generation_gap_and_kni_in_either_order(tmp_path: Path) -> None:
    manager, _, _ = _manager(tmp_path)
    manager.emit_graph(GraphEvent("mine", GRAPH))
    manager.emit_retrieval(_retrieval("q3", "Who directed Memento?", (T3,)))
    manager.emit_generation(GenerationEvent("mine", "q3", "Christopher Nolan and Memento.", context="none"))
    assert "KNI" not in _values(manager, "q3")  # waits for the retrieved-context answer
    manager.emit_generation(GenerationEvent("mine", "q3", "Steven Spielberg directed it."))
    values = _values(manager, "q3")
    assert values["AGR"] == 0.0  # "Steven Spielberg" is an unresolved answer mention
    assert values["KNI"] == pytest.approx(0.0 - 1.0)  # closed-book answer was fully grounded in V_S
    assert _signatures(manager, "q3")[-1].reason == "generation_gap"


def test_answer_arriving_before_its_retrieval_is_kept(tmp_path: Path) -> None:
    manager, _, _ = _manager(tmp_path)
    manager.emit_generation(GenerationEvent("mine", "q4", "Memento", ("Memento",), {"Memento": "Memento"}))
    assert _values(manager, "q4") == {}
    manager.emit_retrieval(_retrieval("q4", "Who directed Memento?", (T3,), {"Memento": "Memento"}))
    assert _values(manager, "q4")["AGR"] == 1.0


def test_without_mentions_or_graph_the_signature_is_undetermined(tmp_path: Path) -> None:
    manager, _, _ = _manager(tmp_path)
    manager.emit_retrieval(_retrieval("q5", FIG4_QUERY, (T1, T2)))
    (sig,) = _signatures(manager, "q5")
    assert sig.reason == "undetermined" and sig.details["signature"] is None
    assert _values(manager, "q5")["QGR"] is None


def test_memory_is_bounded(tmp_path: Path) -> None:
    config = TriageConfig(options={"usage.max_queries": 2})
    manager, recorder, _ = _manager(tmp_path, config)
    for i in range(5):
        manager.emit_retrieval(_retrieval(f"q{i}", "x", (T1,), {"Inception": "Inception"}))
    assert len(recorder) == 2


def test_recorder_without_a_store_computes_quietly() -> None:
    manager = TriageManager(store=None, synchronous=True, entry_points=False, defaults=False)
    manager.register(UsageRecorder(manager))
    manager.emit_retrieval(_retrieval("q1", "x", (T1,), {"Inception": "Inception"}))
    assert not manager.failures


# --------------------------------------------------------------------------- gate


def test_gate_reroutes_a_connectivity_gap(tmp_path: Path) -> None:
    manager, _, _ = _manager(tmp_path, TriageConfig(options={"gate.mode": "reroute"}))
    manager.emit_graph(GraphEvent("mine", GRAPH))
    decision = manager.gate(_retrieval("q1", FIG4_QUERY, (T1, T2)))
    assert decision.action == "reroute"
    assert dict(decision.suggestion) == {"expand_hops": 1}
    assert "connectivity gap" in decision.reason
    assert dict(decision.metrics) == {"QGR": 1.0, "ERC": 1.0, "RRS": 0.0}


def test_gate_reroutes_a_retrieval_gap_and_warns_out_of_scope(tmp_path: Path) -> None:
    manager, _, _ = _manager(tmp_path, TriageConfig(options={"gate.mode": "reroute"}))
    gap = manager.gate(
        _retrieval("q", "x", (T3,), {"Inception": "Inception", "Interstellar": "Interstellar"})
    )
    assert gap.action == "reroute" and dict(gap.suggestion) == {"widen_top_k": 2}
    scope = manager.gate(_retrieval("q", "x", (T3,), {"Mona Lisa": None}))
    assert scope.action == "warn" and "out of scope" in scope.reason
    fine = manager.gate(
        _retrieval("q", "x", (T1, T2_MERGED), {"Inception": "Inception", "Interstellar": "Interstellar"})
    )
    assert fine.action == "proceed"
    blind = manager.gate(_retrieval("q", FIG4_QUERY, (T1, T2)))  # no mentions, no graph seen
    assert blind.action == "proceed" and "cannot evaluate" in blind.reason


def test_gate_respects_config(tmp_path: Path) -> None:
    event = _retrieval("q", "x", (T1, T2), {"Inception": "Inception", "Interstellar": "Interstellar"})
    off, _, _ = _manager(tmp_path / "a", TriageConfig(gate=False))
    assert off.gate(event).reason == "no gate plugin decided"  # the gate stayed silent
    lenient, _, _ = _manager(tmp_path / "b", TriageConfig(thresholds={"RRS": 0.0}))
    assert lenient.gate(event).action == "proceed"
    warn, _, _ = _manager(tmp_path / "c", TriageConfig(options={"gate.mode": "warn", "gate.expand_hops": 2}))
    decision = warn.gate(event)
    assert decision.action == "warn" and dict(decision.suggestion) == {"expand_hops": 2}


def test_gate_decides_on_a_200_triple_subgraph(tmp_path: Path) -> None:
    # its latency (≈ 0.06 ms) is measured in benchmarks/bench_core.py
    manager, _, gate = _manager(tmp_path)
    triples = tuple(Triple.of(f"e{i}", "r", f"e{(i * 7 + 1) % 150}") for i in range(200))
    event = _retrieval("q", "x", triples, {"A": "e1", "B": "e90", "C": "e140"})
    decision = gate.triage_gate(event)
    assert decision is not None and decision.action in ("proceed", "warn", "reroute")
    assert gate.triage_gate(event) == decision


def _background(tmp_path: Path, name: str) -> tuple[TriageManager, UsageRecorder]:
    manager = TriageManager(store=tmp_path / name, synchronous=False, entry_points=False, defaults=False)
    recorder = UsageRecorder(manager)
    manager.register(recorder, "triage.usage", _source=("default", None, None))  # the default lane
    return manager, recorder


def _rows(manager: TriageManager) -> list[tuple]:
    return [
        (r.scope_id, r.name, r.value, r.reason, r.details.get("phase"))
        for r in manager.store.metrics(scope="query")
    ]


def _emit_queries(manager: TriageManager) -> None:
    manager.emit_graph(GraphEvent("mine", GRAPH))
    gold = Gold(answers=("Christopher Nolan",))
    for i in range(6):
        manager.emit_retrieval(_retrieval(f"q{i}", FIG4_QUERY, (T1, T2_MERGED), gold=gold if i % 2 else None))
        manager.emit_generation(GenerationEvent("mine", f"q{i}", "Yes, Christopher Nolan directed both."))


def test_on_the_worker_a_batch_is_written_at_its_end_with_the_same_rows(tmp_path: Path) -> None:
    background, recorder = _background(tmp_path, "b.sqlite")
    inline, _, _ = _manager(tmp_path)
    for manager in (background, inline):
        _emit_queries(manager)
    assert background.flush(timeout=10)
    assert not recorder._pending  # written before flush() returned
    assert _rows(background) == _rows(inline) and len(_rows(inline)) > 6 * 6
    assert not background.failures
    background.close()


def test_a_failing_batched_write_is_counted_and_never_raised(tmp_path: Path) -> None:
    manager, _ = _background(tmp_path, "f.sqlite")

    def broken(rows, *, run_id=None):
        raise OSError("disk full")

    manager.store.record_metrics = broken  # type: ignore[method-assign]
    _emit_queries(manager)
    assert manager.flush(timeout=10)
    assert manager.failures[("triage.usage", "<batch end>", "OSError")] >= 1
    manager.close()


def test_views_are_shared_only_for_the_same_retrieval_event() -> None:
    from triage_plugins.metrics.per_query import chain_head_metrics, usage_metrics

    mentions = {"Inception": "Inception", "Interstellar": "Interstellar"}
    connected = _retrieval("s1", FIG4_QUERY, (T1, T2_MERGED), mentions)
    apart = _retrieval("s2", FIG4_QUERY, (T1, T2), mentions)  # same query, another subgraph
    assert chain_head_metrics(connected)["RRS"].value == 1.0
    assert usage_metrics(apart)["RRS"].value == 0.0  # not the previous event's connectivity
    assert usage_metrics(connected)["RRS"].value == 1.0
    assert chain_head_metrics(apart)["RRS"].value == usage_metrics(apart)["RRS"].value == 0.0
