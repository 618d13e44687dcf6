"""Per-query state lives in one place (issue #32): the scorer's one map, and OTel's one span map.

The scorer holds answers that overtook their retrieval in the same map as the queries; the gate reads
the scorer's record of the retrieval it is asked about (no map of its own); the OTel exporter keeps
one map per query for span parenting, holding a gate decision that came before its retrieval span.
"""

from __future__ import annotations

from typing import Any

import pytest

from triage_plugins.contract.config import TriageConfig
from triage_plugins.contract.events import GenerationEvent, RetrievalEvent
from triage_plugins.contract.records import RecordCollector
from triage_plugins.runtime.manager import TriageManager


def _retrieval(qid: str = "q1") -> RetrievalEvent:
    return RetrievalEvent("test", qid, "A?", mentions=("A",), grounding={"A": None})


def test_an_answer_before_its_retrieval_waits_in_the_scorers_one_map() -> None:
    with TriageManager(synchronous=True, entry_points=False) as manager:
        seen = RecordCollector()
        manager.register(seen)
        manager.emit_generation(GenerationEvent("test", "q1", "B"))
        scorer = manager.scorer
        assert scorer is not None and len(scorer) == 1 and seen.records == []
        manager.emit_retrieval(_retrieval())
        phases = [r.phase for r in seen.take()]
        assert phases == ["retrieval", "generation"] and len(scorer) == 1


def test_the_gate_reads_the_record_of_this_very_retrieval_only() -> None:
    with TriageManager(synchronous=True, entry_points=False) as manager:
        scorer = manager.scorer
        assert scorer is not None
        retrieval = _retrieval()
        manager.emit_retrieval(retrieval)
        record = scorer.retrieval_record(retrieval)
        assert record is not None and record.phase == "retrieval" and record.retrieval is retrieval
        assert scorer.retrieval_record(_retrieval()) is None  # an equal event, not this one
        manager.emit_generation(GenerationEvent("test", "q1", "B"))
        assert scorer.retrieval_record(retrieval) is None  # used once, by the answer


def test_a_replay_scores_a_query_only_when_finished() -> None:
    from triage_plugins.plugins.usage import UsageRecorder

    with TriageManager(synchronous=True, entry_points=False, defaults=False) as manager:
        seen = RecordCollector()
        scorer = UsageRecorder(manager, replay=True)
        manager.register(scorer)
        manager.register(seen)
        manager.emit_retrieval(_retrieval())
        manager.emit_generation(GenerationEvent("test", "q1", "B"))
        assert seen.records == [] and scorer.held() == [("test", "q1")]
        assert scorer.finish("test", "q1") == 0
        (record,) = seen.take()
        assert record.phase == "generation" and scorer.held() == []


@pytest.mark.parametrize("gate_first", [True, False])
def test_the_gate_span_hangs_under_the_retrieval_span_whichever_comes_first(gate_first: bool) -> None:
    pytest.importorskip("opentelemetry.sdk.trace")
    pytest.importorskip("openinference.semconv.trace")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    config = TriageConfig(options={"otel.tracer_provider": provider})
    try:
        with TriageManager(config=config, synchronous=True, entry_points=False) as manager:
            retrieval = _retrieval()
            steps: list[Any] = [lambda: manager.gate(retrieval), lambda: manager.emit_retrieval(retrieval)]
            for step in steps if gate_first else steps[::-1]:
                step()
            manager.emit_generation(GenerationEvent("test", "q1", "B"))
        spans = {s.name: s for s in exporter.get_finished_spans()}
        root = spans["triage.retrieval"]
        for name in ("triage.gate", "triage.generation"):
            assert spans[name].parent is not None and spans[name].parent.span_id == root.context.span_id
    finally:
        provider.shutdown()
