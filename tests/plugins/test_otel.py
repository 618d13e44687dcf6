"""``triage.otel``: OpenInference span shapes, read back from the OpenTelemetry SDK's in-memory exporter.

Drives the real reference pipeline (extraction → graph → retrieval → gate → generation) through a real
:class:`TriageManager` with the default plugins, and a real SDK ``TracerProvider`` whose spans go to an
``InMemorySpanExporter``. Nothing is exported over the network.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs triage-plugins[otel] (opentelemetry-sdk)")
pytest.importorskip("openinference.semconv.trace", reason="needs openinference-semantic-conventions")

from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.contract.errors import ConfigError  # noqa: E402
from triage_plugins.contract.events import Chunk, ExtractedTriple, Triple  # noqa: E402
from triage_plugins.plugins import otel  # noqa: E402
from triage_plugins.reference.pipeline import ReferencePipeline  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
CHUNKS = [
    Chunk("c1", "d1", "Inception directed_by Nolan."),
    Chunk("c2", "d1", "Nolan born_in London."),
    Chunk("c3", "d2", "Interstellar directed_by Nolan."),
    Chunk("c4", "d3", "Caine born_in London."),
]


def _extract(chunk: Chunk) -> list[ExtractedTriple]:
    s, p, o = chunk.text.rstrip(".").split(" ", 2)
    return [ExtractedTriple(Triple.of(s, p, o), (-0.1, -0.2), chunk.text)]


@pytest.fixture(autouse=True)
def _no_otel_env(monkeypatch):
    for var in (*otel.ENDPOINT_VARS, "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def exported():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _manager(provider=None, *, synchronous=True, **options) -> TriageManager:
    if provider is not None:
        options["otel.tracer_provider"] = provider
    return TriageManager(config=TriageConfig(options=options), synchronous=synchronous, entry_points=False)


def _pipeline(manager: TriageManager) -> ReferencePipeline:
    pipeline = ReferencePipeline(manager, retriever="krag")
    pipeline.index_chunks(CHUNKS, _extract)
    return pipeline


def _by_name(exporter) -> dict[str, list]:
    out: dict[str, list] = {}
    for span in exporter.get_finished_spans():
        out.setdefault(span.name, []).append(span)
    return out


# --------------------------------------------------------------------------- off by default


def test_off_by_default_creates_no_provider_and_no_spans(monkeypatch):
    monkeypatch.setattr(otel, "_OWN", {})
    manager = _manager()
    plugin = manager.get_plugin("triage.otel")
    assert isinstance(plugin, otel.OtelOff) and "OTEL_EXPORTER_OTLP_ENDPOINT" in plugin.reason
    assert manager.carry_context is False
    assert otel._OWN == {}  # no provider was created
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    info = next(i for i in manager.plugins() if i.name == "triage.otel")
    assert info.hooks == ()  # nothing is called on any event
    _pipeline(manager).ask("Who directed Inception?")
    manager.close()


def test_sdk_disabled_and_enabled_false_keep_it_off(exported, monkeypatch):
    provider, exporter = exported
    assert isinstance(_manager(provider, **{"otel.enabled": False}).get_plugin("triage.otel"), otel.OtelOff)
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert isinstance(_manager(provider).get_plugin("triage.otel"), otel.OtelOff)
    with pytest.raises(ConfigError, match="otel.tracer_provider"):
        _manager(object())


def test_uses_the_hosts_provider_and_never_creates_a_second_one(exported, monkeypatch):
    provider, exporter = exported
    monkeypatch.setattr(otel, "_OWN", {})
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)  # the host set its provider
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")  # would create one otherwise
    manager = _manager()
    plugin = manager.get_plugin("triage.otel")
    assert isinstance(plugin, otel.OtelExporter) and plugin.provider is provider
    assert otel._OWN == {}
    _pipeline(manager).ask("Who directed Inception?")
    assert "triage.retrieval" in _by_name(exporter)


def test_endpoint_alone_creates_one_batch_provider_per_process(monkeypatch):
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    monkeypatch.setattr(otel, "_OWN", {})
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_SERVICE_NAME", "my-rag")
    first = _manager().get_plugin("triage.otel")
    second = _manager().get_plugin("triage.otel")
    try:
        assert isinstance(first.provider, TracerProvider) and first.provider is second.provider
        assert first.provider.resource.attributes["service.name"] == "my-rag"
        processors = first.provider._active_span_processor._span_processors
        assert [type(p) for p in processors] == [BatchSpanProcessor]
        assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)  # not made global
    finally:
        first.provider.shutdown()


# --------------------------------------------------------------------------- span shapes


def test_retrieval_span_is_an_openinference_retriever_with_triage_metrics(exported):
    provider, exporter = exported
    manager = _manager(provider)
    answer = _pipeline(manager).ask("Who directed Inception?", query_id="q-1")
    spans = _by_name(exporter)
    (retrieval,) = spans["triage.retrieval"]
    a = retrieval.attributes
    assert a[KIND] == OpenInferenceSpanKindValues.RETRIEVER.value
    assert a["triage.query_id"] == "q-1" and a["triage.framework"] == "reference"
    assert a["input.value"] == "Who directed Inception?"
    ids = [a[k] for k in sorted(a) if k.startswith("retrieval.documents.") and k.endswith(".document.id")]
    assert set(ids) == set(answer.retrieval.subgraph.triple_ids)
    assert a["triage.subgraph.triples"] == len(answer.retrieval.subgraph.triples)
    meta = json.loads(a["retrieval.documents.0.document.metadata"])
    assert meta["unit"] == "triple" and meta["provenance"]  # the chunk it was read from
    assert a["retrieval.documents.0.document.content"].count(" ") >= 2
    # the usage metrics: defined ones as numbers, each in [0, 1]
    for key in ("triage.qgr", "triage.erc", "triage.rrs"):
        assert 0.0 <= a[key] <= 1.0
    assert a["triage.signature"] in {"supported", "out_of_scope", "retrieval_gap", "connectivity_gap"}
    assert a["triage.signature.phase"] == "retrieval"


def test_undefined_metrics_are_omitted_with_their_reason(exported):
    provider, exporter = exported
    manager = _manager(provider)
    _pipeline(manager).ask("what is there to know", query_id="q-none")
    (retrieval,) = _by_name(exporter)["triage.retrieval"]
    a = retrieval.attributes
    assert "triage.qgr" not in a and a["triage.qgr.reason"]
    assert a["triage.signature"] == "out_of_scope"
    assert a["triage.remediation.stage"] == "graph" and a["triage.remediation.lever"]


def test_gate_and_generation_spans_without_a_host_span_hang_under_the_retrieval(exported):
    provider, exporter = exported
    manager = _manager(provider)
    answer = _pipeline(manager).ask("Who directed Inception?", query_id="q-2")
    spans = _by_name(exporter)
    (retrieval,) = spans["triage.retrieval"]
    (gate,) = spans["triage.gate"]
    (generation,) = spans["triage.generation"]
    assert retrieval.parent is None  # the root of the query's trace
    for child in (gate, generation):
        assert child.parent.span_id == retrieval.context.span_id
        assert child.context.trace_id == retrieval.context.trace_id
        assert child.attributes["triage.query_id"] == "q-2"
    assert gate.attributes[KIND] == OpenInferenceSpanKindValues.GUARDRAIL.value
    assert gate.attributes["triage.gate.action"] == answer.decision.action
    g = generation.attributes
    assert g[KIND] == OpenInferenceSpanKindValues.CHAIN.value
    assert g["output.value"] == answer.text
    assert g["triage.signature.phase"] == "generation"
    assert any(k in g for k in ("triage.agr", "triage.agr.reason"))


def test_spans_parent_to_the_hosts_span_across_the_background_worker(exported):
    provider, exporter = exported
    manager = _manager(provider, synchronous=False)
    assert manager.carry_context is otel.pin_current_span
    pipeline = _pipeline(manager)
    tracer = provider.get_tracer("host")
    with tracer.start_as_current_span("host.query") as host:
        pipeline.ask("Who directed Inception?", query_id="q-3")
    manager.flush()
    spans = _by_name(exporter)
    for name in ("triage.retrieval", "triage.gate", "triage.generation"):
        (span,) = spans[name]
        assert span.parent.span_id == host.get_span_context().span_id, name
        assert span.context.trace_id == host.get_span_context().trace_id
    manager.close()


def test_indexing_trace_has_an_extraction_span_per_chunk_and_graph_validation(exported):
    provider, exporter = exported
    manager = _manager(provider)
    _pipeline(manager)
    spans = _by_name(exporter)
    (root,) = spans["triage.indexing"]
    assert root.parent is None and root.attributes["triage.extractions"] == len(CHUNKS)
    extractions = spans["triage.extraction"]
    assert sorted(s.attributes["triage.chunk.id"] for s in extractions) == [c.id for c in CHUNKS]
    for span in extractions:
        assert span.parent.span_id == root.context.span_id
        assert 0.0 < span.attributes["triage.tcs"] <= 1.0  # from the token log-probabilities
        assert span.attributes["triage.ec.reason"]  # one run per chunk: EC undefined
    (graph,) = spans["triage.graph"]
    assert graph.parent.span_id == root.context.span_id
    assert 0.0 <= graph.attributes["triage.dnr"] <= 1.0
    assert graph.attributes["triage.oc.reason"]  # no ontology given


def test_extraction_consistency_is_exported_when_a_chunk_has_several_runs(exported):
    provider, exporter = exported
    manager = _manager(provider)
    pipeline = ReferencePipeline(manager)
    for run in ("run-1", "run-2"):
        for chunk in CHUNKS[:2]:
            manager.emit_extraction(otel_extraction(chunk, run, drop=(run == "run-2" and chunk.id == "c2")))
    pipeline.index_chunks([], _extract)
    ec = {
        s.attributes["triage.chunk.id"]: s.attributes.get("triage.ec")
        for s in _by_name(exporter)["triage.extraction"]
    }
    assert ec["c1"] == 1.0 and ec["c2"] == 0.0


def otel_extraction(chunk: Chunk, run: str, *, drop: bool = False):
    from triage_plugins.contract.events import ExtractionEvent

    return ExtractionEvent("reference", run, chunk, () if drop else tuple(_extract(chunk)))


def test_metric_attribute_names():
    assert otel.metric_attribute("ERC") == "triage.erc"
    assert otel.metric_attribute("Hits@1") == "triage.hits_at_1"
    assert otel.metric_attribute("TRIAGE-TI") == "triage.triage_ti"
    assert otel.metric_attribute("CSR_link") == "triage.csr_link"


def test_a_large_retrieval_keeps_every_metric_within_the_sdks_attribute_limit(exported):
    from triage_plugins.contract.events import RetrievalEvent, Subgraph

    provider, exporter = exported
    manager = _manager(provider)
    triples = tuple(Triple.of(f"E{i}", "linked_to", f"E{i + 1}") for i in range(80))
    manager.emit_retrieval(
        RetrievalEvent("reference", "q-big", "How is E0 linked to E80?", ("E0", "E80"),
                       {"E0": "E0", "E80": "E80"}, Subgraph(triples))
    )  # fmt: skip
    (span,) = _by_name(exporter)["triage.retrieval"]
    a = span.attributes
    assert len(a) <= 128 and span.dropped_attributes == 0
    assert a["triage.query_id"] == "q-big" and a["triage.signature"]
    for key in ("triage.qgr", "triage.erc", "triage.rrs"):
        assert key in a
    shown = sum(1 for k in a if k.endswith(".document.id"))
    assert shown > 0 and shown + a["triage.documents.omitted"] == 80


# --------------------------------------------------------------------------- what a Phoenix annotation scores


@pytest.mark.parametrize(
    ("result", "score"),
    [
        ({"score": 0.25}, 0.25),
        ({"score": 5}, 1.0),  # a 1-5 rating
        ({"score": 2, "label": "bad"}, 0.25),  # the score wins over the label
        ({"label": "Thumbs Up"}, 1.0),
        ({"label": "incorrect"}, 0.0),
        ({"label": "meh"}, None),
        ({"score": 7.0}, None),
        ({}, None),
        (None, None),
    ],
)
def test_annotation_results_map_to_feedback_scores(result, score):
    from triage_plugins.apps.feedback_pull import annotation_score

    value, _, why = annotation_score(result)
    assert value == score
    assert bool(why) == (score is None)  # a skipped annotation always says why
