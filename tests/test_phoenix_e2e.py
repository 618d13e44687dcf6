"""End to end with a real Phoenix server: OTLP in, spans and annotations out, feedback into learning.

Starts ``arize-phoenix`` (``python -m phoenix.server.main serve``; SQLite in a temporary
``PHOENIX_WORKING_DIR``, HTTP and gRPC on free ports of 127.0.0.1, telemetry and external resources
off), sends a reference-pipeline run and a real LlamaIndex run (offline LLM and embedder) through the
OTLP/HTTP exporter, reads the spans back with ``phoenix-client``, checks the TRIAGE attributes, posts
an annotation and checks that ``triage feedback pull`` changes the learned scores — once.

The server may live in another environment than the tests (its dependencies are heavy): the
interpreter is ``$TRIAGE_PHOENIX_PYTHON``, else this one when it can import ``phoenix.server``, else
``.venv-phoenix/bin/python`` beside the repository. The test skips, saying so, only when none has it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.trace", reason="needs triage-plugins[otel]")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http", reason="needs triage-plugins[otel]")
pytest.importorskip("phoenix.client", reason="needs triage-plugins[phoenix] (arize-phoenix-client)")

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: E402
from phoenix.client import Client  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from triage_plugins.cli import app  # noqa: E402
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.contract.events import Chunk, ExtractedTriple, Triple  # noqa: E402
from triage_plugins.reference.pipeline import ReferencePipeline  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402
from triage_plugins.store import Store  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
START_TIMEOUT = 120.0  # seconds for the server to answer /healthz (about 15 s on 2 cores)


def _phoenix_python() -> str | None:
    given = os.environ.get("TRIAGE_PHOENIX_PYTHON")
    if given:
        return given
    import importlib.util

    try:
        if importlib.util.find_spec("phoenix.server") is not None:
            return sys.executable
    except ModuleNotFoundError:
        pass
    beside = REPO / ".venv-phoenix" / "bin" / "python"
    return str(beside) if beside.exists() else None


@pytest.fixture(scope="module")
def phoenix(tmp_path_factory, local_servers):
    """The base URL of a Phoenix server started for this module (killed at the end)."""
    python = _phoenix_python()
    if python is None:
        pytest.skip("arize-phoenix (the server) is not installed: set TRIAGE_PHOENIX_PYTHON or .venv-phoenix")
    work = tmp_path_factory.mktemp("phoenix")
    port, grpc = local_servers.free_port(), local_servers.free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PHOENIX_", "OTEL_"))},
        "PHOENIX_WORKING_DIR": str(work),
        "PHOENIX_HOST": "127.0.0.1",
        "PHOENIX_PORT": str(port),
        "PHOENIX_GRPC_PORT": str(grpc),
        "PHOENIX_TELEMETRY_ENABLED": "false",
        "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
    }
    log = open(work / "server.log", "wb")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen(
        [python, "-m", "phoenix.server.main", "serve"], env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        local_servers.wait_http(proc, f"{url}/healthz", work / "server.log", START_TIMEOUT, "phoenix")
        yield url
    finally:
        _stop(proc)
        log.close()


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def _provider(url: str) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{url}/v1/traces")))
    return provider


def _spans(url: str, want: set[tuple[str, str]], timeout: float = 20.0) -> list[dict]:
    """The project's spans once every (name, query id) in ``want`` arrived (ingestion is asynchronous)."""
    client = Client(base_url=url)
    deadline = time.monotonic() + timeout
    while True:
        spans = client.spans.get_spans(project_identifier="default", limit=10_000)
        have = {(s["name"], (s.get("attributes") or {}).get("triage.query_id")) for s in spans}
        if want <= have or time.monotonic() > deadline:
            return spans
        time.sleep(0.5)


def _one(spans: list[dict], name: str, query_id: str) -> dict:
    found = [s for s in spans if s["name"] == name and s["attributes"].get("triage.query_id") == query_id]
    assert len(found) == 1, (name, query_id, [s["name"] for s in spans])
    return found[0]


def _pull(store: Path, url: str) -> str:
    result = CliRunner().invoke(app, ["feedback", "pull", "--store", str(store), "--endpoint", url])
    assert result.exit_code == 0, result.output
    return result.output


def _scores(store: Path) -> dict[str, float]:
    with Store.open(str(store)) as s:
        return {k: row.raw for k, row in s.get_scores("triple").items()}


def _ranked_first(store: Path, ids) -> str:
    """The id the feedback learner ranks first among ``ids`` at equal relevance (reweighting on)."""
    from triage_plugins.contract.events import RerankRequest

    ids = sorted(ids)
    config = TriageConfig(reweight=True)
    with TriageManager(store=str(store), config=config, entry_points=False) as manager:
        priorities = manager.rerank(RerankRequest("reference", "q", "triple", tuple(ids), (0.5,) * len(ids)))
    best = max(priorities)
    return next(i for i, p in zip(ids, priorities, strict=True) if p == best)


# --------------------------------------------------------------------------- the reference pipeline

CHUNKS = [
    Chunk("c1", "d1", "Inception directed_by Nolan."),
    Chunk("c2", "d1", "Nolan born_in London."),
    Chunk("c3", "d2", "Inception genre scifi."),
    Chunk("c4", "d2", "Inception produced_by Thomas."),
]


def _extract(chunk: Chunk) -> list[ExtractedTriple]:
    s, p, o = chunk.text.rstrip(".").split(" ", 2)
    return [ExtractedTriple(Triple.of(s, p, o), None, chunk.text)]


def test_reference_run_reaches_phoenix_and_an_annotation_changes_the_learned_scores(phoenix, tmp_path):
    store = tmp_path / "triage.sqlite"
    provider = _provider(phoenix)
    config = TriageConfig(options={"otel.tracer_provider": provider})
    with TriageManager(store=str(store), config=config, entry_points=False) as manager:
        pipeline = ReferencePipeline(manager)
        pipeline.index_chunks(CHUNKS, _extract)
        answer = pipeline.ask("Who directed Inception?", query_id="ref-1")
        manager.flush()
    provider.force_flush()
    provider.shutdown()
    assert answer.text == "Nolan"

    spans = _spans(phoenix, {(n, "ref-1") for n in ("triage.retrieval", "triage.gate", "triage.generation")})
    retrieval = _one(spans, "triage.retrieval", "ref-1")
    a = retrieval["attributes"]
    assert retrieval["span_kind"] == "RETRIEVER"
    assert a["triage.framework"] == "reference" and a["triage.subgraph.triples"] == len(
        answer.retrieval.subgraph.triples
    )
    assert 0.0 <= a["triage.qgr"] <= 1.0 and 0.0 <= a["triage.erc"] <= 1.0
    assert a["triage.signature"] and a["triage.signature.phase"] == "retrieval"
    assert a["retrieval.documents.0.document.id"] in answer.retrieval.subgraph.triple_ids
    assert _one(spans, "triage.gate", "ref-1")["span_kind"] == "GUARDRAIL"
    generation = _one(spans, "triage.generation", "ref-1")
    assert generation["parent_id"] == retrieval["context"]["span_id"]
    assert generation["attributes"]["output.value"] == "Nolan"
    assert any(s["name"] == "triage.indexing" for s in spans)

    assert _scores(store) == {}
    before = [i for i in answer.retrieval.subgraph.triple_ids if i.startswith("Inception|")]
    assert _ranked_first(store, before) == sorted(before)[0]  # equal relevance, no score: a tie
    Client(base_url=phoenix).spans.add_span_annotation(
        span_id=generation["context"]["span_id"], annotation_name="correctness",
        annotator_kind="HUMAN", label="correct", sync=True,
    )  # fmt: skip
    out = _pull(store, phoenix)
    assert "1 annotation(s) applied" in out
    learned = _scores(store)
    nolan = "Inception|directed_by|Nolan"
    assert learned[nolan] > 100.0  # the path to the rated answer gains
    assert all(v < 100.0 for k, v in learned.items() if k.startswith("Inception|") and k != nolan)

    assert _ranked_first(store, answer.retrieval.subgraph.triple_ids) == nolan  # what ranks first changed

    again = _pull(store, phoenix)  # idempotent: the annotation is applied once
    assert "0 annotation(s) applied, 1 already applied" in again
    assert _scores(store) == learned


# --------------------------------------------------------------------------- a real framework


def test_llamaindex_run_nests_under_the_hosts_span_and_the_hosts_rating_is_learned(phoenix, tmp_path):
    pytest.importorskip("llama_index.core")
    from llama_index.core import PropertyGraphIndex, Settings
    from llama_index.core.indices.property_graph import LLMSynonymRetriever
    from llama_index.core.instrumentation.dispatcher import instrument_tags
    from llama_index.core.query_engine import RetrieverQueryEngine
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode

    from triage_llamaindex import TriageExtractionTap, TriageLLMPathExtractor, instrument
    from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM

    texts = {
        "c0": ("doc-films", "Nolan directed Inception."),
        "c1": ("doc-people", "Nolan was born in London."),
        "c2": ("doc-films", "Nolan directed Interstellar."),
        "c3": ("doc-people", "Caine starred in Interstellar."),
    }
    nodes = [
        TextNode(id_=cid, text=t, relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)})
        for cid, (doc, t) in texts.items()
    ]
    store = tmp_path / "triage.sqlite"
    provider = _provider(phoenix)
    config = TriageConfig(options={"otel.tracer_provider": provider})
    manager = TriageManager(store=str(store), config=config, entry_points=False)  # background delivery
    llm, embed = OfflineLLM(), OfflineEmbedding()
    saved = (Settings._llm, Settings._embed_model)
    Settings.llm, Settings.embed_model = llm, embed
    inst = instrument(manager=manager)
    try:
        index = PropertyGraphIndex(
            nodes=nodes, llm=llm, embed_model=embed,
            kg_extractors=[TriageLLMPathExtractor(llm=llm, num_workers=1), TriageExtractionTap()],
        )  # fmt: skip
        sub = LLMSynonymRetriever(index.property_graph_store, include_text=False, llm=llm)
        engine = RetrieverQueryEngine.from_args(index.as_retriever(sub_retrievers=[sub]), llm=llm)
        tracer = provider.get_tracer("host-app")
        with tracer.start_as_current_span("llamaindex.query") as host, instrument_tags({"query_id": "li-1"}):
            response = engine.query("Who directed Interstellar?")
        manager.flush()
    finally:
        inst.uninstrument()
        manager.close()
        Settings._llm, Settings._embed_model = saved
    provider.force_flush()
    provider.shutdown()
    assert str(response).strip()  # the offline reader answered

    spans = _spans(phoenix, {("triage.retrieval", "li-1"), ("triage.generation", "li-1")})
    host_id = format(host.get_span_context().span_id, "016x")
    retrieval = _one(spans, "triage.retrieval", "li-1")
    assert retrieval["parent_id"] == host_id  # delivered on the worker, parented to the host's span
    assert retrieval["attributes"]["triage.framework"] == "llamaindex"
    assert "triage.erc" in retrieval["attributes"] or "triage.erc.reason" in retrieval["attributes"]
    assert _one(spans, "triage.generation", "li-1")["parent_id"] == host_id

    # the user rates the host's own span (it has no TRIAGE attribute): the trace says which query
    Client(base_url=phoenix).spans.add_span_annotation(
        span_id=host_id, annotation_name="correctness", annotator_kind="HUMAN", score=5, sync=True
    )
    before = _scores(store)
    out = _pull(store, phoenix)
    assert "llamaindex/li-1" in out and "score 1.00" in out
    after = _scores(store)
    # the host's rating is learned: scores move (which way each moves is the credit rule's, tested in
    # tests/feedback: the first-line stand-in reader may answer from a fact of another relation, and a
    # good rating of that answer then lowers the alternative rather than promoting it)
    assert after != before
