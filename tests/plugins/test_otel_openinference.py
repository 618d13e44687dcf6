"""``triage.otel`` beside the real OpenInference LlamaIndex instrumentor: one trace, ours inside theirs.

A LlamaIndex user who already traces with ``openinference-instrumentation-llama-index`` (instrumented
with an explicit ``tracer_provider=``; no global provider is set) adds ``triage.otel`` with the same
provider (option ``otel.tracer_provider``). The TRIAGE spans, made on the manager's background worker,
must land in the trace of the query that OpenInference records, under OpenInference's own spans, up
to its root ``RetrieverQueryEngine.query`` span. Spans are read back from the OpenTelemetry SDK's
``InMemorySpanExporter``: no network, no Phoenix.

The index is built as in ``tests/adapters/test_llamaindex.py``: a real ``PropertyGraphIndex`` with the
adapter's offline LLM and embedder, ``TriageLLMPathExtractor`` + ``TriageExtractionTap``, and a
``TriagePostprocessor`` in the query engine.
"""

from __future__ import annotations

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs triage-plugins[otel] (opentelemetry-sdk)")
pytest.importorskip("openinference.semconv.trace", reason="needs openinference-semantic-conventions")
pytest.importorskip("llama_index.core", reason="needs llama-index-core")
pytest.importorskip(
    "openinference.instrumentation.llama_index",
    reason="needs openinference-instrumentation-llama-index (the OpenInference LlamaIndex instrumentor)",
)

from llama_index.core import PropertyGraphIndex, Settings  # noqa: E402
from llama_index.core.indices.property_graph import LLMSynonymRetriever  # noqa: E402
from llama_index.core.instrumentation.dispatcher import instrument_tags  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402
from openinference.instrumentation.llama_index import (  # noqa: E402
    LlamaIndexInstrumentor as OILlamaIndexInstrumentor,
)
from openinference.semconv.trace import OpenInferenceSpanKindValues, SpanAttributes  # noqa: E402
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from triage_llamaindex import (  # noqa: E402
    TriageExtractionTap,
    TriageLLMPathExtractor,
    TriagePostprocessor,
    instrument,
)
from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM  # noqa: E402
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.plugins import otel  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402

# openinference-instrumentation-llama-index 4.6 still calls pydantic's deprecated ``.json()``
pytestmark = pytest.mark.filterwarnings(
    "ignore::DeprecationWarning:openinference.instrumentation.llama_index"
)

KIND = SpanAttributes.OPENINFERENCE_SPAN_KIND
OI_SCOPE = "openinference.instrumentation.llama_index"  # the OpenInference tracer's scope name
QUESTION = "Who directed Interstellar?"
QUERY_ID = "oi-1"
CHUNKS = {
    "c0": ("doc-films", "Nolan directed Inception."),
    "c1": ("doc-people", "Nolan was born in London."),
    "c2": ("doc-films", "Nolan directed Interstellar."),
    "c3": ("doc-people", "Caine starred in Interstellar. Caine was born in London."),
    "c4": ("doc-films", "Hoyte produced Interstellar."),
}
# the usage metrics of the retrieval stage the exporter always reports (a value, or why there is none)
RETRIEVAL_METRICS = ("triage.qgr", "triage.erc", "triage.rrs")


def chunk_nodes() -> list[TextNode]:
    return [
        TextNode(id_=cid, text=text, relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)})
        for cid, (doc, text) in CHUNKS.items()
    ]


@pytest.fixture(autouse=True)
def _no_otel_env(monkeypatch):
    for var in (*otel.ENDPOINT_VARS, "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def offline():
    llm, embed = OfflineLLM(), OfflineEmbedding()
    saved = (Settings._llm, Settings._embed_model)
    Settings.llm, Settings.embed_model = llm, embed
    yield llm, embed
    Settings._llm, Settings._embed_model = saved


@pytest.fixture
def exported():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _traced_query(offline, provider: TracerProvider, *, openinference_first: bool) -> str:
    """Index and ask once with both instrumentors on ``provider``; both are always uninstrumented."""
    llm, embed = offline
    config = TriageConfig(options={"otel.tracer_provider": provider})
    manager = TriageManager(config=config, synchronous=False, entry_points=False)  # background delivery
    plugin = manager.get_plugin("triage.otel")
    assert isinstance(plugin, otel.OtelExporter) and plugin.provider is provider
    oi = OILlamaIndexInstrumentor()
    ours = None
    try:
        if openinference_first:
            oi.instrument(tracer_provider=provider)
            ours = instrument(manager=manager)
        else:
            ours = instrument(manager=manager)
            oi.instrument(tracer_provider=provider)
        assert oi.is_instrumented_by_opentelemetry  # its dependency check passed: it really traces
        index = PropertyGraphIndex(
            nodes=chunk_nodes(),
            llm=llm,
            embed_model=embed,
            kg_extractors=[TriageLLMPathExtractor(llm=llm, num_workers=1), TriageExtractionTap()],
        )
        sub = LLMSynonymRetriever(index.property_graph_store, include_text=False, llm=llm)
        engine = RetrieverQueryEngine.from_args(
            index.as_retriever(sub_retrievers=[sub]),
            llm=llm,
            node_postprocessors=[TriagePostprocessor(manager=manager)],
        )
        with instrument_tags({"query_id": QUERY_ID}):
            response = engine.query(QUESTION)
        assert manager.flush(timeout=30.0)  # the worker delivered every event: the spans are made
    finally:
        if ours is not None:
            ours.uninstrument()
        oi.uninstrument()
        manager.close()
    assert provider.force_flush()
    return str(response)


def _ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    """``span``'s parent, its parent, … up to the root (each must have been exported)."""
    chain = []
    while span.parent is not None:
        assert span.parent.span_id in by_id, f"{span.name}'s parent was not exported"
        span = by_id[span.parent.span_id]
        chain.append(span)
    return chain


def _is_openinference(span: ReadableSpan) -> bool:
    return span.instrumentation_scope is not None and span.instrumentation_scope.name == OI_SCOPE


def _one(spans: list[ReadableSpan], name: str) -> ReadableSpan:
    found = [s for s in spans if s.name == name and s.attributes.get("triage.query_id") == QUERY_ID]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


@pytest.mark.parametrize("openinference_first", [True, False], ids=["openinference-first", "triage-first"])
def test_triage_spans_join_the_openinference_trace_under_its_query_span(
    offline, exported, openinference_first
):
    provider, exporter = exported
    global_before = trace.get_tracer_provider()
    answer = _traced_query(offline, provider, openinference_first=openinference_first)
    assert trace.get_tracer_provider() is global_before  # no global provider was set by anyone
    assert answer.strip()

    spans = list(exporter.get_finished_spans())
    by_id = {s.context.span_id: s for s in spans}
    roots = [
        s for s in spans
        if _is_openinference(s) and s.parent is None and s.name == "RetrieverQueryEngine.query"
    ]  # fmt: skip
    assert len(roots) == 1, [s.name for s in spans if s.parent is None]
    (root,) = roots
    assert root.attributes[KIND] == OpenInferenceSpanKindValues.CHAIN.value
    assert root.attributes["input.value"] == QUESTION  # OpenInference's own record of this query

    # our retrieval span: the OpenInference shape, the TRIAGE metrics and the chain signature
    retrieval = _one(spans, "triage.retrieval")
    assert retrieval.instrumentation_scope.name == otel.SCOPE
    a = retrieval.attributes
    assert a[KIND] == OpenInferenceSpanKindValues.RETRIEVER.value
    assert a["triage.framework"] == "llamaindex" and a["input.value"] == QUESTION
    assert a["triage.subgraph.triples"] > 0
    ids = {a[k] for k in a if k.startswith("retrieval.documents.") and k.endswith(".document.id")}
    assert "Interstellar|Directed_by|Nolan" in ids  # the triple LlamaIndex retrieved for the question
    for key in RETRIEVAL_METRICS:
        assert (0.0 <= a[key] <= 1.0) if key in a else a[key + ".reason"], key
    assert any(key in a for key in RETRIEVAL_METRICS)  # at least one is a number here
    assert a["triage.signature.phase"] == "retrieval"
    assert a["triage.signature"] in {"supported", "out_of_scope", "retrieval_gap", "connectivity_gap"}

    # ... in the same trace, under OpenInference's retriever span, up to OpenInference's query span
    chain = _ancestors(retrieval, by_id)
    assert chain, "triage.retrieval is a root span: it is not inside OpenInference's query trace"
    assert chain[-1] is root, [s.name for s in chain]
    assert all(_is_openinference(s) for s in chain), [s.name for s in chain]
    assert chain[0].attributes[KIND] == OpenInferenceSpanKindValues.RETRIEVER.value, chain[0].name
    assert retrieval.context.trace_id == root.context.trace_id

    # the generation span (and the gate's, when made) hang in the same query trace
    generation = _one(spans, "triage.generation")
    assert generation.parent.span_id == root.context.span_id  # emitted at the end of the query span
    assert generation.attributes["output.value"] == answer
    assert generation.attributes["triage.signature.phase"] == "generation"
    children = [generation, *(s for s in spans if s.name == "triage.gate")]
    for span in children:
        up = _ancestors(span, by_id)
        assert up and up[-1] is root, (span.name, [s.name for s in up])
        assert span.context.trace_id == root.context.trace_id, span.name
