"""The LlamaIndex adapter against the real llama-index-core 0.14.25, offline.

Drives a real ``PropertyGraphIndex`` (in-memory ``SimplePropertyGraphStore``) with the adapter's
``OfflineLLM`` (the core's rule-based ``extract_records`` formatted by ``format_llamaindex``, plus
fixed per-token log-probabilities ``-0.01 × token length``) and ``OfflineEmbedding`` (the core's
``HashingEmbedder``); one small index per module.

Private LlamaIndex surface this depends on (a LlamaIndex change that breaks it fails here):
``BasePGRetriever._get_nodes_with_score(triplets, scores=None)`` (overridden by the triage
sub-retrievers), ``SimpleLLMPathExtractor._aextract`` (overridden by ``TriageLLMPathExtractor``),
``BasePGRetriever._graph_store`` / ``PGRetriever.sub_retrievers`` (read to find the graph).

Corpus (five chunks, fixed ids). LlamaIndex stamps every entity with the *last* chunk that mentions
it, so the stock retriever attributes ``Interstellar -> Directed_by -> Nolan`` to chunk ``c4`` (the
last chunk naming Interstellar) although it was read from ``c2``; the adapter must say ``c2``.
"""

from __future__ import annotations

import inspect

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import PropertyGraphIndex, Settings  # noqa: E402
from llama_index.core.graph_stores import SimplePropertyGraphStore  # noqa: E402
from llama_index.core.indices.property_graph import (  # noqa: E402
    LLMSynonymRetriever,
    SimpleLLMPathExtractor,
    VectorContextRetriever,
)
from llama_index.core.indices.property_graph.sub_retrievers.base import BasePGRetriever  # noqa: E402
from llama_index.core.instrumentation import get_dispatcher  # noqa: E402
from llama_index.core.instrumentation.dispatcher import instrument_tags  # noqa: E402
from llama_index.core.llms.callbacks import llm_chat_callback  # noqa: E402
from llama_index.core.postprocessor.types import BaseNodePostprocessor  # noqa: E402
from llama_index.core.query_engine import RetrieverQueryEngine  # noqa: E402
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode  # noqa: E402

from triage_llamaindex import (  # noqa: E402
    TriageExtractionTap,
    TriageLLMPathExtractor,
    TriageLLMSynonymRetriever,
    TriagePostprocessor,
    TriageVectorContextRetriever,
    instrument,
    persist_contributions,
)
from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM  # noqa: E402
from triage_llamaindex.translate import chosen_token_offsets, parse_triples  # noqa: E402
from triage_plugins import hookimpl  # noqa: E402
from triage_plugins.adapter_kit.recording import EventRecorder as Recorder
from triage_plugins.contract.events import Triple  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402

CHUNKS = {
    "c0": ("doc-films", "Nolan directed Inception."),
    "c1": ("doc-people", "Nolan was born in London."),
    "c2": ("doc-films", "Nolan directed Interstellar."),
    "c3": ("doc-people", "Caine starred in Interstellar. Caine was born in London."),
    "c4": ("doc-films", "Hoyte produced Interstellar."),
}
# what the core extractor reads, as LlamaIndex stores it (its parser capitalizes every field)
DIRECTED_INCEPTION = "Inception|Directed_by|Nolan"
DIRECTED_INTERSTELLAR = "Interstellar|Directed_by|Nolan"
NOLAN_LONDON = "Nolan|Born_in|London"
STARRED = "Interstellar|Starred_actors|Caine"
CAINE_LONDON = "Caine|Born_in|London"
PRODUCED = "Interstellar|Produced_by|Hoyte"
INTERSTELLAR = {DIRECTED_INTERSTELLAR, STARRED, PRODUCED}


def chunk_nodes() -> list[TextNode]:
    return [
        TextNode(id_=cid, text=text, relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)})
        for cid, (doc, text) in CHUNKS.items()
    ]


class FixedPriorities:
    """Answers ``triage_rerank`` from a fixed table (0.5 for unknown ids) and records requests."""

    def __init__(self, table: dict[str, float]) -> None:
        self.table = table
        self.requests: list = []

    @hookimpl
    def triage_rerank(self, request):
        self.requests.append(request)
        return [self.table.get(i, 0.5) for i in request.ids]


class TinyLearner:
    """A minimal feedback learner: feedback on a query moves the priority of its retrieved triples.

    priority(t) = prior(t) + Σ (score - 0.5) over feedback on queries that retrieved t.
    """

    def __init__(self, prior: dict[str, float]) -> None:
        self.priority = dict(prior)
        self.retrieved: dict[str, tuple[str, ...]] = {}

    @hookimpl
    def triage_retrieval(self, event):
        self.retrieved[event.query_id] = event.subgraph.triple_ids

    @hookimpl
    def triage_feedback(self, event):
        for tid in self.retrieved.get(event.query_id, ()):
            self.priority[tid] = self.priority.get(tid, 0.5) + (event.score - 0.5)

    @hookimpl
    def triage_rerank(self, request):
        return [self.priority.get(i, 0.5) for i in request.ids]


class Exploding:
    """Raises in every hook."""

    @hookimpl
    def triage_retrieval(self, event):
        raise RuntimeError("boom")

    @hookimpl
    def triage_generation(self, event):
        raise RuntimeError("boom")

    @hookimpl
    def triage_gate(self, event):
        raise RuntimeError("boom")

    @hookimpl
    def triage_rerank(self, request):
        raise RuntimeError("boom")


def manager_with(*plugins, store=None) -> TriageManager:
    manager = TriageManager(store=store, synchronous=True, entry_points=False, defaults=store is not None)
    for plugin in plugins:
        manager.register(plugin)
    return manager


def loaded_types(manager: TriageManager) -> set[type]:
    return {type(manager.get_plugin(info.name)) for info in manager.plugins()}


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def offline():
    llm = OfflineLLM()
    embed = OfflineEmbedding()
    saved = (Settings._llm, Settings._embed_model)
    Settings.llm, Settings.embed_model = llm, embed
    yield llm, embed
    Settings._llm, Settings._embed_model = saved


@pytest.fixture(scope="module")
def built(offline):
    """The module's index, built under instrumentation with the logprob-keeping extractor."""
    llm, embed = offline
    recorder = Recorder()
    inst = instrument(manager=manager_with(recorder))
    try:
        index = PropertyGraphIndex(
            nodes=chunk_nodes(),
            llm=llm,
            embed_model=embed,
            kg_extractors=[TriageLLMPathExtractor(llm=llm, num_workers=1), TriageExtractionTap()],
        )
    finally:
        inst.uninstrument()
    return index, recorder


@pytest.fixture
def index(built):
    return built[0]


@pytest.fixture
def inst_rec():
    """A fresh instrumentation with a recorder; always uninstrumented afterwards."""
    recorder = Recorder()
    inst = instrument(manager=manager_with(recorder))
    yield inst, recorder
    inst.uninstrument()


def synonym_engine(index, *postprocessors, retriever_cls=LLMSynonymRetriever, **kwargs):
    sub = retriever_cls(index.property_graph_store, include_text=False, llm=Settings.llm, **kwargs)
    retriever = index.as_retriever(sub_retrievers=[sub])
    return RetrieverQueryEngine.from_args(
        retriever, llm=Settings.llm, node_postprocessors=list(postprocessors)
    )


def node_triple_ids(nodes) -> list[str]:
    return [t.id for n in nodes for t in parse_triples(n.node.get_content(), None)]


# --------------------------------------------------------------------------- private surface


def test_private_get_nodes_with_score_surface_is_unchanged():
    params = list(inspect.signature(BasePGRetriever._get_nodes_with_score).parameters)
    assert params == ["self", "triplets", "scores"]
    for cls in (LLMSynonymRetriever, VectorContextRetriever):
        assert "_get_nodes_with_score" in inspect.getsource(cls)
    assert "_aextract" in vars(SimpleLLMPathExtractor)


# --------------------------------------------------------------------------- registration


def test_instrument_adds_two_handlers_once_and_uninstrument_removes_exactly_them():
    root = get_dispatcher()
    before_events, before_spans = list(root.event_handlers), list(root.span_handlers)
    inst = instrument(manager=manager_with())
    try:
        assert len(root.event_handlers) == len(before_events) + 1
        assert len(root.span_handlers) == len(before_spans) + 1
        again = instrument(manager=manager_with())
        assert again is inst
        assert len(root.event_handlers) == len(before_events) + 1
        from triage_llamaindex.instrument import LlamaIndexInstrumentor
        from triage_plugins.contract.errors import ConfigError

        with pytest.raises(ConfigError, match="another triage instrumentation"):
            LlamaIndexInstrumentor().instrument(manager=manager_with())
        inst.instrument()  # re-instrumenting itself adds nothing
        assert len(root.span_handlers) == len(before_spans) + 1
        from llama_index.core.instrumentation.event_handlers import NullEventHandler

        foreign = NullEventHandler()
        root.add_event_handler(foreign)  # someone else's handler, added after ours
    finally:
        inst.uninstrument()
    assert root.event_handlers == [*before_events, foreign]
    assert root.span_handlers == before_spans
    root.event_handlers.remove(foreign)
    inst.uninstrument()  # idempotent
    assert root.span_handlers == before_spans


def test_plugin_entry_point_module_imports_nothing_from_llama_index():
    import subprocess
    import sys

    code = (
        "import sys, triage_llamaindex.plugin; print(any(m.startswith('llama_index') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------- extraction


def test_extraction_event_per_chunk_with_triples_and_token_logprobs(built):
    _, recorder = built
    events = {e.chunk.id: e for e in recorder.of("extraction")}
    assert sorted(events) == ["c0", "c1", "c2", "c3", "c4"]
    assert len({e.run_id for e in events.values()}) == 1
    c0 = events["c0"]
    assert c0.framework == "llamaindex"
    assert c0.chunk.doc_id == "doc-films" and c0.chunk.text == "Nolan directed Inception."
    (only,) = c0.triples
    assert only.triple.id == DIRECTED_INCEPTION  # LlamaIndex capitalizes the predicate
    # "(Inception, directed_by, Nolan)" -> "(Inception,", " ", "directed_by,", " ", "Nolan)": -0.01 * len
    assert only.token_logprobs == pytest.approx((-0.11, -0.01, -0.12, -0.01, -0.06))
    c3 = {t.triple.id: t.token_logprobs for t in events["c3"].triples}
    assert set(c3) == {STARRED, CAINE_LONDON}
    # second line "(Caine, born_in, London)": "(Caine,", " ", "born_in,", " ", "London)"
    # (the newline between the two records belongs to neither)
    assert c3[CAINE_LONDON] == pytest.approx((-0.07, -0.01, -0.08, -0.01, -0.07))


def test_stock_extractor_logprobs_are_matched_by_prompt(offline):
    llm, embed = offline
    recorder = Recorder()
    inst = instrument(manager=manager_with(recorder))
    try:
        PropertyGraphIndex(
            nodes=chunk_nodes()[:2],
            llm=llm,
            embed_model=embed,
            embed_kg_nodes=False,
            kg_extractors=[
                SimpleLLMPathExtractor(llm=llm, num_workers=1),
                TriageExtractionTap(run_id="run-7"),
            ],
        )
    finally:
        inst.uninstrument()
    events = {e.chunk.id: e for e in recorder.of("extraction")}
    assert {e.run_id for e in events.values()} == {"run-7"}
    (c1,) = events["c1"].triples
    assert c1.triple.id == NOLAN_LONDON
    # "(Nolan, born_in, London)": "(Nolan,", " ", "born_in,", " ", "London)"
    assert c1.token_logprobs == pytest.approx((-0.07, -0.01, -0.08, -0.01, -0.07))


def test_no_logprobs_from_the_llm_means_none_not_a_number(offline):
    _, embed = offline
    llm = OfflineLLM(logprobs=False)
    recorder = Recorder()
    inst = instrument(manager=manager_with(recorder))
    try:
        PropertyGraphIndex(
            nodes=chunk_nodes()[:1],
            llm=llm,
            embed_model=embed,
            embed_kg_nodes=False,
            kg_extractors=[TriageLLMPathExtractor(llm=llm, num_workers=1), TriageExtractionTap()],
        )
    finally:
        inst.uninstrument()
    (event,) = recorder.of("extraction")
    assert [t.token_logprobs for t in event.triples] == [None]


class OfflineChatLLM(OfflineLLM):
    """The offline LLM as a chat model: ``apredict`` goes through ``achat`` / ``LLMChatEndEvent``."""

    @property
    def metadata(self):
        from llama_index.core.base.llms.types import LLMMetadata

        return LLMMetadata(model_name="offline-chat", is_chat_model=True)

    def _chat(self, messages):
        from llama_index.core.base.llms.types import ChatMessage, ChatResponse

        done = self._respond("\n".join(str(m.content) for m in messages))
        return ChatResponse(message=ChatMessage(role="assistant", content=done.text), logprobs=done.logprobs)

    @llm_chat_callback()
    def chat(self, messages, **kwargs):
        return self._chat(messages)

    @llm_chat_callback()
    async def achat(self, messages, **kwargs):
        return self._chat(messages)


@pytest.mark.parametrize("extractor_cls", [TriageLLMPathExtractor, SimpleLLMPathExtractor])
def test_chat_model_logprobs_come_from_the_chat_end_event(offline, extractor_cls):
    _, embed = offline
    llm = OfflineChatLLM()
    recorder = Recorder()
    inst = instrument(manager=manager_with(recorder))
    try:
        PropertyGraphIndex(
            nodes=chunk_nodes()[:1],
            llm=llm,
            embed_model=embed,
            embed_kg_nodes=False,
            kg_extractors=[extractor_cls(llm=llm, num_workers=1), TriageExtractionTap()],
        )
    finally:
        inst.uninstrument()
    (event,) = recorder.of("extraction")
    (only,) = event.triples
    assert only.token_logprobs == pytest.approx((-0.11, -0.01, -0.12, -0.01, -0.06))


def test_sampled_token_is_the_candidate_that_continues_the_text():
    from llama_index.core.base.llms.types import LogProb

    text = "(A, b, C)"
    lps = [
        [LogProb(token="(X", logprob=-0.1), LogProb(token="(A", logprob=-0.7)],
        [LogProb(token=", b", logprob=-0.2)],
        [LogProb(token=", C)", logprob=-0.3)],
    ]
    assert chosen_token_offsets(text, lps) == [(0, 2, -0.7), (2, 5, -0.2), (5, 9, -0.3)]
    assert chosen_token_offsets(text, [[LogProb(token="zz", logprob=-1.0)]]) is None


# --------------------------------------------------------------------------- graph


def test_graph_event_takes_each_relations_own_source_not_the_entitys(index, inst_rec):
    inst, recorder = inst_rec
    store = index.property_graph_store
    (interstellar,) = store.get(ids=["Interstellar"])
    assert interstellar.properties["triplet_source_id"] == "c4"  # LlamaIndex: last chunk naming it
    (nolan,) = store.get(ids=["Nolan"])
    assert nolan.properties["triplet_source_id"] == "c2"
    event = inst.emit_graph(index)
    assert recorder.of("graph") == [event]
    graph = event.graph
    assert {t.id for t in graph.triples} == {DIRECTED_INCEPTION, NOLAN_LONDON, CAINE_LONDON} | INTERSTELLAR
    assert graph.sources[DIRECTED_INTERSTELLAR] == ("c2",)
    assert graph.sources[NOLAN_LONDON] == ("c1",)
    assert graph.sources[STARRED] == ("c3",)
    assert graph.sources[PRODUCED] == ("c4",)
    assert set(graph.nodes) == {"Nolan", "Inception", "London", "Interstellar", "Caine", "Hoyte"}


# --------------------------------------------------------------------------- retrieval and generation


def test_retrieval_event_has_right_provenance_where_the_stock_node_is_wrong(index, inst_rec):
    inst, recorder = inst_rec
    engine = index.as_query_engine(include_text=False, llm=Settings.llm)
    response = engine.query("Who directed Interstellar?")
    stock = {n.node.get_content(): n.node.ref_doc_id for n in response.source_nodes}
    assert stock["Interstellar -> Directed_by -> Nolan"] == "c4"  # LlamaIndex's (wrong) attribution

    (retrieval,) = recorder.of("retrieval")  # two sub-retrievers ran; only the outermost counts
    assert retrieval.query == "Who directed Interstellar?"
    assert retrieval.retriever == "PGRetriever(LLMSynonymRetriever+VectorContextRetriever)"
    ids = retrieval.subgraph.triple_ids
    assert set(ids) >= INTERSTELLAR
    assert set(ids) == set(node_triple_ids(response.source_nodes))
    chunk_of = {c.id: c for c in retrieval.chunks}
    assert {"c2", "c3", "c4"} <= set(chunk_of)
    assert chunk_of["c2"].text == "Nolan directed Interstellar." and chunk_of["c2"].doc_id == "doc-films"
    assert retrieval.paths == ()  # LlamaIndex returns flat triplets, not paths
    assert retrieval.mentions == ("Interstellar",) and retrieval.grounding == {"Interstellar": "Interstellar"}
    assert retrieval.expanded_nodes is None and retrieval.expanded_nodes_note
    assert retrieval.seconds is not None and retrieval.seconds > 0

    (generation,) = recorder.of("generation")
    assert generation.query_id == retrieval.query_id
    assert retrieval.query_id.startswith("RetrieverQueryEngine.query-")
    assert generation.answer == response.response
    assert inst.last_query_id == retrieval.query_id
    # the graph was snapshotted on first retrieval
    assert len(recorder.of("graph")) == 1


def test_include_text_nodes_are_parsed_back_into_triplets(index, inst_rec):
    inst, recorder = inst_rec
    retriever = index.as_retriever(
        sub_retrievers=[LLMSynonymRetriever(index.property_graph_store, include_text=True, llm=Settings.llm)]
    )
    nodes = retriever.retrieve("Who directed Interstellar?")
    # LlamaIndex hands the reader only c4, the chunk its entity provenance points to
    assert [n.node.node_id for n in nodes] == ["c4"]
    (retrieval,) = recorder.of("retrieval")
    assert set(retrieval.subgraph.triple_ids) == INTERSTELLAR
    # the chunk the reader is shown (what chunk-mode learning scores); where each triple was read
    # stays in the graph event's sources (c2, c3, c4)
    assert [c.id for c in retrieval.chunks] == ["c4"]
    assert retrieval.chunks[0].text == CHUNKS["c4"][1]
    assert retrieval.retriever == "PGRetriever(LLMSynonymRetriever)"


def test_a_plain_vector_index_is_observed_with_its_chunks(offline, inst_rec):
    from llama_index.core import VectorStoreIndex

    inst, recorder = inst_rec
    _, embed = offline
    vector = VectorStoreIndex(chunk_nodes(), embed_model=embed)
    nodes = vector.as_retriever(similarity_top_k=2).retrieve("Nolan directed Inception")
    (retrieval,) = recorder.of("retrieval")
    assert retrieval.subgraph.triples == ()
    assert [c.id for c in retrieval.chunks] == [n.node.node_id for n in nodes]
    assert retrieval.chunks[0].text == CHUNKS[nodes[0].node.node_id][1]


def test_query_id_comes_from_instrument_tags_and_feedback_joins_it(index, inst_rec):
    inst, recorder = inst_rec
    engine = synonym_engine(index)
    with instrument_tags({"query_id": "q-42"}):
        engine.query("Who directed Inception?")
    (retrieval,) = recorder.of("retrieval")
    (generation,) = recorder.of("generation")
    assert retrieval.query_id == generation.query_id == "q-42"
    event = inst.feedback("q-42", 0.25, source="human", raw="meh")
    assert recorder.of("feedback") == [event]
    assert (event.framework, event.query_id, event.score, event.raw) == ("llamaindex", "q-42", 0.25, "meh")


def test_async_queries_are_observed_like_sync_ones(index, inst_rec):
    import asyncio

    inst, recorder = inst_rec
    engine = synonym_engine(index)

    async def ask():
        return await engine.aquery("Who directed Inception?")

    response = asyncio.run(ask())
    (retrieval,) = recorder.of("retrieval")
    (generation,) = recorder.of("generation")
    assert retrieval.query_id == generation.query_id
    assert retrieval.query_id.startswith("RetrieverQueryEngine.aquery-")
    assert retrieval.subgraph.triple_ids == (DIRECTED_INCEPTION,)
    assert generation.answer == response.response == "Nolan"


def test_gate_decision_is_asked_and_kept_per_query(index):
    from triage_plugins.contract.events import GateDecision

    class Warn:
        def __init__(self):
            self.seen = []

        @hookimpl
        def triage_gate(self, event):
            self.seen.append(event.query_id)
            return GateDecision("warn", "test gate", {"ERC": 0.0})

    gate = Warn()
    inst = instrument(manager=manager_with(gate))
    try:
        with instrument_tags({"query_id": "gated"}):
            response = synonym_engine(index).query("Who directed Inception?")
    finally:
        inst.uninstrument()
    assert gate.seen == ["gated"]
    assert inst.decisions["gated"].action == "warn"
    assert response.response == "Nolan"  # a warning never changes the host's answer


class Rewriter(BaseNodePostprocessor):
    """Rewrites every node's text after retrieval, the way a postprocessor may."""

    def _postprocess_nodes(self, nodes, query_bundle=None):
        for scored in nodes:
            scored.node.set_content("rewritten after retrieval")
        return nodes


def test_with_a_background_manager_the_event_holds_the_texts_as_retrieved_and_the_gate_answers_by_flush(
    index,
):
    from triage_plugins.contract.events import GateDecision

    class Gate:
        @hookimpl
        def triage_gate(self, event):
            return GateDecision("warn", "test gate", {"ERC": 0.0})

    recorder = Recorder()
    manager = TriageManager(store=None, synchronous=False, entry_points=False, defaults=False)
    manager.register(recorder)
    manager.register(Gate())
    inst = instrument(manager=manager)
    try:
        sub = LLMSynonymRetriever(index.property_graph_store, include_text=True, llm=Settings.llm)
        engine = RetrieverQueryEngine.from_args(
            index.as_retriever(sub_retrievers=[sub]), llm=Settings.llm, node_postprocessors=[Rewriter()]
        )
        with instrument_tags({"query_id": "bg"}):
            engine.query("Who directed Interstellar?")
        assert inst.flush()
        (retrieval,) = recorder.of("retrieval")
        assert set(retrieval.subgraph.triple_ids) == INTERSTELLAR  # read before the rewrite
        assert [c.text for c in retrieval.chunks] == [CHUNKS["c4"][1]]
        assert inst.decisions["bg"].action == "warn"
    finally:
        inst.uninstrument()
        manager.close()


def test_an_outermost_query_marks_the_host_busy_and_releases_it(index):
    manager = TriageManager(store=None, synchronous=False, entry_points=False, defaults=False)
    seen: list[bool] = []

    class Probe(BaseNodePostprocessor):
        def _postprocess_nodes(self, nodes, query_bundle=None):
            seen.append(manager._host_idle.is_set())
            return nodes

    inst = instrument(manager=manager)
    try:
        synonym_engine(index, Probe()).query("Who directed Inception?")
        assert seen == [False]  # inside the query: busy
        assert manager._host_idle.is_set()  # after it: idle again
    finally:
        inst.uninstrument()
        manager.close()


def test_events_reach_the_store_through_the_default_recorder(index, tmp_path):
    manager = manager_with(store=tmp_path / "t.sqlite")
    inst = instrument(manager=manager)
    try:
        with instrument_tags({"query_id": "stored-1"}):
            synonym_engine(index).query("Who directed Inception?")
        inst.feedback("stored-1", 1.0)
    finally:
        inst.uninstrument()
    manager.flush()
    kinds = [e.kind for e in manager.store.events()]
    assert kinds.count("retrieval") == 1 and kinds.count("generation") == 1 and kinds.count("feedback") == 1
    (retrieval,) = list(manager.store.events(kind="retrieval"))
    assert retrieval.query_id == "stored-1" and DIRECTED_INCEPTION in retrieval.subgraph.triple_ids
    manager.close()


# --------------------------------------------------------------------------- off / failures


@pytest.mark.parametrize("defaults", [False, True], ids=["recorder-only", "default-plugins"])
def test_instrumented_without_reweighting_gives_the_identical_response(index, tmp_path, defaults):
    engine = synonym_engine(index, TriagePostprocessor())
    plain = engine.query("Tell me about Nolan")
    recorder = Recorder()
    inst = instrument(manager=manager_with(recorder, store=tmp_path / "t.sqlite" if defaults else None))
    try:
        observed = engine.query("Tell me about Nolan")
    finally:
        inst.uninstrument()
    assert type(observed) is type(plain) and type(observed.response) is type(plain.response)
    assert observed.response == plain.response
    assert [(n.node.get_content(), n.score) for n in observed.source_nodes] == [
        (n.node.get_content(), n.score) for n in plain.source_nodes
    ]
    assert len(recorder.of("retrieval")) == 1


def test_handler_and_plugin_failures_change_nothing(index, monkeypatch):
    engine = synonym_engine(index, TriagePostprocessor())
    plain = engine.query("Tell me about Nolan")
    manager = manager_with(Exploding())
    inst = instrument(manager=manager)
    try:
        failing = engine.query("Tell me about Nolan")
        assert inst.errors == 0  # plugin failures are the manager's to contain
        from llama_index.core.instrumentation.events.retrieval import RetrievalEndEvent

        from triage_llamaindex.instrument import _routes

        def broken(self, event):
            raise ValueError("translation bug")

        monkeypatch.setitem(_routes(), RetrievalEndEvent, broken)
        broken_handler = engine.query("Tell me about Nolan")
    finally:
        inst.uninstrument()
    for response in (failing, broken_handler):
        assert response.response == plain.response
        assert [n.node.get_content() for n in response.source_nodes] == [
            n.node.get_content() for n in plain.source_nodes
        ]
    assert sum(manager.failures.values()) >= 2  # retrieval + rerank raised, both contained
    assert inst.errors == 2  # one per RetrievalEndEvent (sub-retriever and outer), both contained


# --------------------------------------------------------------------------- reweighting


def test_postprocessor_reorders_and_filters_triplet_nodes_by_priority(index):
    table = {NOLAN_LONDON: 0.9, DIRECTED_INTERSTELLAR: 0.6, DIRECTED_INCEPTION: 0.1}
    plugin = FixedPriorities(table)
    post = TriagePostprocessor(manager=manager_with(plugin), top_n=2)
    response = synonym_engine(index, post).query("Tell me about Nolan")
    assert node_triple_ids(response.source_nodes) == [NOLAN_LONDON, DIRECTED_INTERSTELLAR]
    assert [n.score for n in response.source_nodes] == [0.9, 0.6]
    (request,) = plugin.requests
    assert request.unit == "triple" and request.framework == "llamaindex"
    assert request.query == "Tell me about Nolan"
    assert set(request.ids) == set(table) and request.relevance == (1.0, 1.0, 1.0)

    cut = TriagePostprocessor(manager=manager_with(FixedPriorities(table)), min_priority=0.5)
    response = synonym_engine(index, cut).query("Tell me about Nolan")
    assert node_triple_ids(response.source_nodes) == [NOLAN_LONDON, DIRECTED_INTERSTELLAR]


def test_postprocessor_reads_triplet_nodes_rendered_with_properties(index):
    sub = LLMSynonymRetriever(
        index.property_graph_store, include_text=False, include_properties=True, llm=Settings.llm
    )
    nodes = index.as_retriever(sub_retrievers=[sub]).retrieve("Inception")
    assert "triplet_source_id" in nodes[0].node.get_content()  # the properties are in the text
    plugin = FixedPriorities({})
    post = TriagePostprocessor(manager=manager_with(plugin), graph_store=index.property_graph_store)
    post.postprocess_nodes(nodes, query_str="Inception")
    (request,) = plugin.requests
    assert request.unit == "triple" and request.ids == (DIRECTED_INCEPTION,)


def test_postprocessor_ranks_chunk_nodes_as_chunks(index):
    plugin = FixedPriorities({"c2": 0.2, "c1": 0.8, "c0": 0.5})
    retriever = index.as_retriever(
        sub_retrievers=[LLMSynonymRetriever(index.property_graph_store, include_text=True, llm=Settings.llm)]
    )
    nodes = TriagePostprocessor(manager=manager_with(plugin), unit="chunk").postprocess_nodes(
        retriever.retrieve("Tell me about Nolan"), query_str="Tell me about Nolan"
    )
    (request,) = plugin.requests
    assert request.unit == "chunk"
    expected = sorted(request.ids, key=lambda c: -plugin.table.get(c, 0.5))
    assert [n.node.node_id for n in nodes] == expected


def test_postprocessor_off_or_unanswered_passes_nodes_through(index):
    retriever = index.as_retriever(
        sub_retrievers=[LLMSynonymRetriever(index.property_graph_store, include_text=False, llm=Settings.llm)]
    )
    nodes = retriever.retrieve("Tell me about Nolan")
    plugin = FixedPriorities({DIRECTED_INCEPTION: 1.0})
    assert TriagePostprocessor(reweight=False, manager=manager_with(plugin)).postprocess_nodes(nodes) is nodes
    assert plugin.requests == []
    assert TriagePostprocessor(manager=manager_with()).postprocess_nodes(nodes, query_str="q") is nodes


@pytest.mark.parametrize("retriever_cls", [TriageLLMSynonymRetriever, TriageVectorContextRetriever])
def test_sub_retrievers_rank_the_real_triplets(index, retriever_cls):
    table = {NOLAN_LONDON: 0.9, DIRECTED_INTERSTELLAR: 0.6, DIRECTED_INCEPTION: 0.1}
    plugin = FixedPriorities(table)
    kwargs = {"llm": Settings.llm} if retriever_cls is TriageLLMSynonymRetriever else {"similarity_top_k": 1}
    sub = retriever_cls(
        index.property_graph_store,
        include_text=False,
        triage_manager=manager_with(plugin),
        vector_store=index.vector_store,
        **kwargs,
    )
    nodes = index.as_retriever(sub_retrievers=[sub]).retrieve("Nolan")
    ids = node_triple_ids(nodes)
    assert ids[:3] == [NOLAN_LONDON, DIRECTED_INTERSTELLAR, DIRECTED_INCEPTION]
    assert plugin.requests and plugin.requests[0].unit == "triple"
    assert plugin.requests[0].query == "Nolan"


def test_sub_retriever_can_report_the_relations_own_source(index):
    def sources(**kwargs):
        sub = TriageLLMSynonymRetriever(
            index.property_graph_store, include_text=False, llm=Settings.llm, reweight=False, **kwargs
        )
        nodes = index.as_retriever(sub_retrievers=[sub]).retrieve("Interstellar")
        return {n.node.get_content(): n.node.ref_doc_id for n in nodes}

    assert sources()["Interstellar -> Directed_by -> Nolan"] == "c4"  # stock behaviour by default
    assert sources(relation_provenance=True) == {
        "Interstellar -> Directed_by -> Nolan": "c2",
        "Interstellar -> Starred_actors -> Caine": "c3",
        "Interstellar -> Produced_by -> Hoyte": "c4",
    }


def _feedback_loop(engine_for):
    """Prior: the Interstellar triple ranks first; then negative feedback on a query that retrieved it.

    Returns the triple ids retrieved for "Tell me about Nolan" before and after the feedback, each
    uncut and cut (top 1 before, top 2 after).
    """
    learner = TinyLearner({DIRECTED_INTERSTELLAR: 0.7})
    manager = manager_with(learner)
    inst = instrument(manager=manager)
    try:
        before = node_triple_ids(engine_for(manager, None).query("Tell me about Nolan").source_nodes)
        before_top = node_triple_ids(engine_for(manager, 1).query("Tell me about Nolan").source_nodes)
        with instrument_tags({"query_id": "bad"}):
            engine_for(manager, None).query("Who directed Interstellar?")
        inst.feedback("bad", 0.0)
        after = node_triple_ids(engine_for(manager, None).query("Tell me about Nolan").source_nodes)
        after_top = node_triple_ids(engine_for(manager, 2).query("Tell me about Nolan").source_nodes)
    finally:
        inst.uninstrument()
    assert learner.retrieved["bad"]  # the retrieval event of the judged query reached the learner
    nolan = {DIRECTED_INCEPTION, NOLAN_LONDON, DIRECTED_INTERSTELLAR}
    assert set(before) == set(after) == nolan
    assert before[0] == DIRECTED_INTERSTELLAR and after[-1] == DIRECTED_INTERSTELLAR  # order changed
    assert before_top == [DIRECTED_INTERSTELLAR]  # membership changed
    assert DIRECTED_INTERSTELLAR not in after_top and len(after_top) == 2


def test_feedback_changes_order_and_membership_through_the_postprocessor(index):
    _feedback_loop(
        lambda manager, top_n: synonym_engine(index, TriagePostprocessor(manager=manager, top_n=top_n))
    )


def test_feedback_changes_order_and_membership_through_the_sub_retriever(index):
    _feedback_loop(
        lambda manager, top_n: synonym_engine(
            index, retriever_cls=TriageLLMSynonymRetriever, triage_manager=manager, top_n=top_n
        )
    )


# --------------------------------------------------------------------------- persistence


def test_contributions_persist_in_relation_properties(index, tmp_path):
    store = index.property_graph_store
    written = persist_contributions(store, {DIRECTED_INCEPTION: 42.5, "Nobody|Knows|This": 1.0})
    assert written == 1
    path = tmp_path / "pg.json"
    store.persist(str(path))
    reloaded = SimplePropertyGraphStore.from_persist_path(str(path))
    values = {
        Triple.of(s.id, r.label, o.id).id: r.properties.get("contribution")
        for s, r, o in reloaded.graph.get_triplets()
    }
    assert values[DIRECTED_INCEPTION] == 42.5
    assert values[NOLAN_LONDON] is None
    assert (
        next(r for s, r, o in reloaded.graph.get_triplets() if s.id == "Inception").properties[
            "triplet_source_id"
        ]
        == "c0"
    )


# --------------------------------------------------------------------------- end to end, real learner


def _learning_manager(tmp_path):
    from triage_plugins.contract.config import TriageConfig
    from triage_plugins.plugins.feedback import FeedbackLearner

    manager = TriageManager(
        store=tmp_path / "learn.sqlite",
        config=TriageConfig(reweight=True, unit="triple"),
        synchronous=True,
        entry_points=False,
    )
    if FeedbackLearner not in loaded_types(manager):
        manager.register(FeedbackLearner(manager), name="triage.feedback")
    return manager


@pytest.mark.parametrize("through", ["postprocessor", "sub-retriever"])
def test_bad_feedback_through_the_real_learner_demotes_the_triple_that_misled_the_reader(
    index, tmp_path, through
):
    """EvoRAG loop: answer = object of the first triple; a bad rating blames exactly that triple."""
    manager = _learning_manager(tmp_path)

    def engine(top_n):
        if through == "postprocessor":
            return synonym_engine(index, TriagePostprocessor(manager=manager, top_n=top_n))
        return synonym_engine(
            index, retriever_cls=TriageLLMSynonymRetriever, triage_manager=manager, top_n=top_n
        )

    inst = instrument(manager=manager)
    try:
        with instrument_tags({"query_id": "judged"}):
            first = engine(None).query("Tell me about Nolan")
        before = node_triple_ids(first.source_nodes)
        misleading = before[0]
        subject, _, obj = misleading.split("|")
        assert first.response == (subject if obj == "Nolan" else obj)  # the offline reader's rule
        inst.feedback("judged", 0.0)
        after = node_triple_ids(engine(None).query("Tell me about Nolan").source_nodes)
        cut = node_triple_ids(engine(2).query("Tell me about Nolan").source_nodes)
    finally:
        inst.uninstrument()
    assert set(after) == set(before) and len(before) == 3
    assert after[-1] == misleading and after[0] != misleading  # order changed
    assert misleading not in cut and len(cut) == 2  # membership changed
    scores = manager.store.get_scores("triple")
    assert scores[misleading].raw < 100.0  # stored contribution went down from its initial 100
    manager.close()


# --------------------------------------------------------------------------- metrics in the store


def test_metrics_reach_the_store(offline, tmp_path):
    """Extraction, graph and query metrics computed by the core from the adapter's events."""
    import math

    from triage_plugins.plugins.implementation import ImplementationRecorder
    from triage_plugins.plugins.usage import UsageRecorder

    llm, embed = offline
    manager = manager_with(store=tmp_path / "m.sqlite")
    present = loaded_types(manager)
    for cls in (ImplementationRecorder, UsageRecorder):
        if cls not in present:
            manager.register(cls(manager))
    inst = instrument(manager=manager)
    try:
        small = PropertyGraphIndex(
            nodes=chunk_nodes()[:2],
            llm=llm,
            embed_model=embed,
            kg_extractors=[TriageLLMPathExtractor(llm=llm, num_workers=1), TriageExtractionTap()],
        )
        inst.emit_graph(small)
        with instrument_tags({"query_id": "m-1"}):
            synonym_engine(small).query("Who directed Inception?")
    finally:
        inst.uninstrument()
    manager.flush()
    graph = {row.name: row.value for row in manager.store.metrics(scope="graph")}
    # TCS = mean over triples of exp(mean token logprob): c0 sums -0.31 over 5 tokens, c1 -0.24 over 5
    assert graph["TCS"] == pytest.approx((math.exp(-0.31 / 5) + math.exp(-0.24 / 5)) / 2)
    query = {row.name: row.value for row in manager.store.metrics(scope="query") if row.scope_id == "m-1"}
    assert query["QGR"] == 1.0  # the one mention, Inception, grounds
    assert query["ERC"] == 1.0  # and Inception is in the retrieved subgraph
    manager.close()


def test_instrumentation_persists_the_stores_contribution_scores(offline, tmp_path):
    llm, embed = offline
    small = PropertyGraphIndex(
        nodes=chunk_nodes()[:2],
        llm=llm,
        embed_model=embed,
        embed_kg_nodes=False,
        kg_extractors=[SimpleLLMPathExtractor(llm=llm, num_workers=1)],
    )
    manager = manager_with(store=tmp_path / "s.sqlite")
    manager.store.set_score("triple", NOLAN_LONDON, 87.5)
    inst = instrument(manager=manager)
    try:
        assert inst.persist_contributions(small) == 1
    finally:
        inst.uninstrument()
    relations = {
        Triple.of(s.id, r.label, o.id).id: r for s, r, o in small.property_graph_store.graph.get_triplets()
    }
    assert relations[NOLAN_LONDON].properties["contribution"] == 87.5
    assert "contribution" not in relations[DIRECTED_INCEPTION].properties
    manager.close()


# --------------------------------------------------------------------------- hostile plugins (issue #14)


def _answers_beside(index, mode):
    """Responses (text, nodes, scores) over two rounds with feedback, default plugins + reweighting on,
    with a hostile plugin in ``mode`` beside them (``None``: the default plugins alone)."""
    from triage_plugins.adapter_kit.hostile import hostile_manager

    manager, hostile = hostile_manager(mode, reweight=True)
    inst = instrument(manager=manager)
    seen = []
    try:
        engine = synonym_engine(index, TriagePostprocessor())
        for i, question in enumerate(["Tell me about Nolan", "Who directed Inception?"] * 2):
            with instrument_tags({"query_id": f"hostile-{i}"}):
                response = engine.query(question)
            seen.append((response.response, [(n.node.get_content(), n.score) for n in response.source_nodes]))
            inst.feedback(f"hostile-{i}", 0.0 if i % 2 else 1.0)
            assert manager.flush(timeout=30)
        learned = manager.learned_scores("triple")
    finally:
        inst.uninstrument()
    assert manager.close(timeout=10) == 0
    return seen, learned, manager, hostile


@pytest.fixture(scope="module")
def plain_beside(built):
    return _answers_beside(built[0], None)


@pytest.mark.parametrize("mode", ["raise", "exit", "garbage", "sleep"])
def test_a_hostile_plugin_changes_no_llamaindex_answer_and_is_counted(index, plain_beside, mode):
    from triage_plugins.adapter_kit.hostile import MODES, failures_of

    assert mode in MODES
    seen, learned, manager, hostile = _answers_beside(index, mode)
    assert seen == plain_beside[0]
    assert learned == plain_beside[1] and learned  # the feedback learned the same
    assert hostile.calls and failures_of(manager) > 0
