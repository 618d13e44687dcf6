"""LlamaIndex reweighting as documented (issue #16), on the real llama-index-core 0.14.25, offline.

The README's ``index.as_query_engine(node_postprocessors=[TriagePostprocessor()])`` keeps
LlamaIndex's defaults: ``include_text=True`` (each node is a chunk under the triplet lines it
supports, grouped by the *subject entity's* last chunk) and the learner's ``unit="triple"``. These
tests drive that engine, and its streaming and chunk-mode variants, with the adapter's offline LLM
(``answer="first-line"``: the reader answers from the first ``s -> p -> o`` line of the context, so
a bad rating blames exactly the triple at the top of the context) and offline embedding.

Corpus: the README prelude's three documents (``Document(text=...)``, so LlamaIndex names every
chunk with a fresh uuid4). For "Where was Nolan born?" LlamaIndex attaches ``Nolan -> Born_in ->
London`` to the chunk "Nolan directed Interstellar." (Nolan's last chunk), beside ``Interstellar ->
Directed_by -> Nolan``: which line comes first decides the answer.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core import Document, PropertyGraphIndex, Settings  # noqa: E402
from llama_index.core.indices.property_graph import LLMSynonymRetriever  # noqa: E402
from llama_index.core.schema import TextNode  # noqa: E402

from triage_llamaindex import (  # noqa: E402
    TriageExtractionTap,
    TriageLLMPathExtractor,
    TriagePostprocessor,
    instrument,
)
from triage_llamaindex.offline import OfflineEmbedding, OfflineLLM  # noqa: E402
from triage_llamaindex.translate import chunk_key, parse_triples, split_attached  # noqa: E402
from triage_plugins.adapter_kit.recording import EventRecorder as Recorder
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ("Nolan directed Inception.", "Nolan was born in London.", "Nolan directed Interstellar.")
BORN = "Where was Nolan born?"
#: chunk mode: each chunk names different entities, so a bad answer blames one shown chunk
CHUNK_TEXTS = ("Nolan directed Inception.", "Caine was born in London.", "Hoyte produced Interstellar.")
CHUNK_QUESTION = "Who directed Inception?"
QUESTIONS = (BORN, "Who directed Inception?", "Tell me about Nolan", "Who directed Interstellar?")


def _readme_harness():
    spec = importlib.util.spec_from_file_location("_triage_test_readme", ROOT / "tests" / "test_readme.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def readme_llamaindex_block() -> tuple[str, str]:
    """(the README's LlamaIndex python block, the prelude test_readme runs it with)."""
    harness = _readme_harness()
    for block in harness.readme_blocks():
        if block.lang == "python" and harness.PRELUDE_FOR.get(block.first) == "llamaindex":
            return block.text, harness.PRELUDES["llamaindex"]
    raise AssertionError("README has no LlamaIndex python block")


@pytest.fixture
def offline():
    llm, embed = OfflineLLM(), OfflineEmbedding()
    saved = (Settings._llm, Settings._embed_model)
    Settings.llm, Settings.embed_model = llm, embed
    yield llm, embed
    Settings._llm, Settings._embed_model = saved


def build(llm, texts=TEXTS) -> PropertyGraphIndex:
    """The README's index: ``from_documents`` over id-less Documents (uuid4 chunk ids)."""
    return PropertyGraphIndex.from_documents(
        [Document(text=t) for t in texts],
        kg_extractors=[TriageLLMPathExtractor(llm=llm), TriageExtractionTap()],
    )


def context_triples(response) -> list[str]:
    """Triple ids in the order the engine hands them to the reader (node by node, line by line)."""
    return [t.id for n in response.source_nodes for t in parse_triples(n.node.get_content(), None)]


def answer_of(response) -> str:
    if hasattr(response, "response_gen"):
        return "".join(response.response_gen)
    return response.response


def penalise_until_moved(inst, engine, question=BORN, rounds=3):
    """Ask, rate the answer bad, ask again (no flush: feedback is learned before it returns): the round in which the triple that was on
    top of the context first left the top (``None``: not within ``rounds``), and that triple."""
    with inst.query() as qid:
        response = engine.query(question)
    answer_of(response)
    top = context_triples(response)[0]
    for k in range(1, rounds + 1):
        inst.feedback(qid, 0.0)
        with inst.query() as qid:
            response = engine.query(question)
        answer_of(response)
        if context_triples(response)[0] != top:
            return k, top
    return None, top


# --------------------------------------------------------------------------- the README snippet


def _run_readme(snippet: str, prelude: str, tmp_path, monkeypatch) -> dict:
    monkeypatch.chdir(tmp_path)
    saved = (Settings._llm, Settings._embed_model)
    ns: dict = {"__name__": "__main__"}
    try:
        exec(compile(prelude, "prelude.py", "exec"), ns)
        exec(compile(snippet, "README.md", "exec"), ns)
    except BaseException:
        Settings._llm, Settings._embed_model = saved
        raise
    ns["_restore"] = lambda: (
        setattr(Settings, "_llm", saved[0]) or setattr(Settings, "_embed_model", saved[1])
    )
    return ns


@pytest.mark.parametrize("streaming", [False, True], ids=["plain", "streaming"])
def test_readme_snippet_moves_a_penalised_triple_off_the_top_within_3_bad_feedbacks(
    streaming, tmp_path, monkeypatch
):
    snippet, prelude = readme_llamaindex_block()
    ns = _run_readme(snippet, prelude, tmp_path, monkeypatch)
    inst, index = ns["inst"], ns["index"]
    try:
        engine = (
            index.as_query_engine(streaming=True, node_postprocessors=[TriagePostprocessor()])
            if streaming
            else ns["engine"]
        )
        moved, top = penalise_until_moved(inst, engine)
        learned = inst.manager.learned_scores("triple")
    finally:
        inst.uninstrument()
        ns["_restore"]()
    assert "reweight=True" in snippet, "the README's LlamaIndex block must turn learning on"
    assert moved is not None, f"{top} still on top after 3 bad feedbacks"
    assert learned[top] < 100.0  # its contribution score fell from the initial 100


def test_default_engine_reorders_the_triplet_lines_and_the_attached_chunks(offline, tmp_path):
    """``include_text=True``: the lines inside each chunk node and the nodes themselves move, and the
    reader answers from the new top line; the chunk text LlamaIndex attached is kept verbatim."""
    llm, _ = offline
    inst = instrument(store=tmp_path / "t.sqlite", reweight=True)
    try:
        index = build(llm)
        engine = index.as_query_engine(node_postprocessors=[TriagePostprocessor()])
        with inst.query() as qid:
            before = engine.query(BORN)
        inst.feedback(qid, 0.0)
        after = engine.query(BORN)
    finally:
        inst.uninstrument()
    top = context_triples(before)[0]
    assert context_triples(after)[0] != top
    assert set(context_triples(after)) == set(context_triples(before))  # reordered, nothing lost
    assert before.response != after.response  # the reader read the new top line
    chunks = lambda r: sorted(split_attached(n.node.get_content(), None).chunk for n in r.source_nodes)  # noqa: E731
    assert chunks(after) == chunks(before) and set(chunks(before)) <= set(TEXTS)
    for n in after.source_nodes:  # every node is still LlamaIndex's layout: preamble, lines, chunk
        assert n.node.get_content().startswith("Here are some facts extracted from the provided text:\n\n")


def test_reweighting_off_the_default_engine_is_plain_llamaindex(offline, tmp_path, caplog):
    """Observe-only: with the postprocessor in place and reweighting off, answers, node texts and
    scores equal the plain engine's, streaming included; the postprocessor says once why."""
    llm, _ = offline
    index = build(llm)
    plain = index.as_query_engine()
    caplog.set_level(logging.WARNING, logger="triage.llamaindex.reweight")
    inst = instrument(store=tmp_path / "o.sqlite")
    try:
        observed = index.as_query_engine(node_postprocessors=[TriagePostprocessor()])
        streamed = index.as_query_engine(streaming=True, node_postprocessors=[TriagePostprocessor()])
        got = [(observed.query(q), streamed.query(q)) for q in QUESTIONS]
        got = [(r, s, answer_of(s)) for r, s in got]
    finally:
        inst.uninstrument()
    for q, (response, stream, streamed_text) in zip(QUESTIONS, got, strict=True):
        want = plain.query(q)
        assert type(response) is type(want)
        assert response.response == want.response == streamed_text
        view = lambda r: [(n.node.get_content(), n.score) for n in r.source_nodes]  # noqa: E731
        assert view(response) == view(want) == view(stream)
    assert caplog.text.count("reweighting is off") == 2  # once per postprocessor


# --------------------------------------------------------------------------- chunk mode, chunk ids


def content_id(text: str) -> str:
    """triage's id of a chunk LlamaIndex named itself (any uuid4 gives the same)."""
    return chunk_key(str(uuid.uuid4()), text)


def shown(response) -> dict[str, float]:
    """Chunk text attached to each node -> the node's score, in the engine's order."""
    return {split_attached(n.node.get_content(), None).chunk: n.score for n in response.source_nodes}


def chunk_manager(path, recorder) -> TriageManager:
    manager = TriageManager(store=path, config=TriageConfig(reweight=True, unit="chunk"))
    manager.register(recorder)
    return manager


def test_chunk_mode_scores_the_chunk_the_engine_shows(offline, tmp_path):
    """LlamaIndex attaches the subject's last chunk: that chunk is in the retrieval event, takes
    the penalty, and drops in priority; the chunk the triple was read from is not blamed for it."""
    llm, _ = offline
    recorder = Recorder()
    manager = chunk_manager(tmp_path / "c.sqlite", recorder)
    inst = instrument(manager=manager)
    try:
        index = build(llm, CHUNK_TEXTS)
        engine = index.as_query_engine(node_postprocessors=[TriagePostprocessor()])
        with inst.query() as qid:
            before = engine.query(CHUNK_QUESTION)
        inst.feedback(qid, 0.0)
        after = engine.query(CHUNK_QUESTION)
        learned = manager.learned_scores("chunk")
    finally:
        inst.uninstrument()
    manager.close()
    first = list(shown(before))[0]
    assert first == "Nolan directed Inception." and before.response == "Nolan"
    (retrieval, _) = recorder.of("retrieval")
    assert [c.text for c in retrieval.chunks] == list(shown(before))  # what the reader was shown
    assert [c.id for c in retrieval.chunks] == [content_id(t) for t in shown(before)]
    assert set(learned) == {content_id(first)}  # the only shown chunk holding the answer
    assert learned[content_id(first)] < 100.0
    assert shown(after)[first] < shown(before)[first]  # its priority fell


def test_chunk_ids_are_content_hashes_and_scores_survive_a_rebuild(offline, tmp_path):
    llm, _ = offline
    recorder = Recorder()
    store = tmp_path / "r.sqlite"
    manager = chunk_manager(store, recorder)
    inst = instrument(manager=manager)
    try:
        first = build(llm, CHUNK_TEXTS)
        engine = first.as_query_engine(node_postprocessors=[TriagePostprocessor()])
        with inst.query() as qid:
            judged = engine.query(CHUNK_QUESTION)
        inst.feedback(qid, 0.0)
        fresh = engine.query(CHUNK_QUESTION)
        second = build(llm, CHUNK_TEXTS)  # the same documents again: LlamaIndex draws new uuid4 ids
        rebuilt = second.as_query_engine(node_postprocessors=[TriagePostprocessor()]).query(CHUNK_QUESTION)
    finally:
        inst.uninstrument()
    manager.close()
    runs: dict[str, set[str]] = {}
    for e in recorder.of("extraction"):
        runs.setdefault(e.run_id, set()).add(e.chunk.id)
    one, two = runs.values()
    assert one == two == {content_id(t) for t in CHUNK_TEXTS}  # the same ids, build after build
    assert {n.node.node_id for n in judged.source_nodes}.isdisjoint(
        n.node.node_id for n in rebuilt.source_nodes
    )
    penalised = "Nolan directed Inception."
    assert shown(fresh)[penalised] < shown(judged)[penalised]
    assert shown(rebuilt)[penalised] == pytest.approx(shown(fresh)[penalised])  # the learning holds
    reopened = TriageManager(store=store, config=TriageConfig(reweight=True, unit="chunk"))
    try:
        assert reopened.learned_scores("chunk")[content_id(penalised)] < 100.0  # and is in the store
    finally:
        reopened.close()


def test_user_set_chunk_ids_are_kept():
    assert chunk_key("c0", "Nolan directed Inception.") == "c0"
    generated = TextNode(text="Nolan directed Inception.").node_id
    assert chunk_key(generated, "Nolan directed Inception.") == chunk_key(
        TextNode(text="Nolan directed Inception.").node_id, "Nolan directed Inception."
    )
    assert chunk_key(generated, "Nolan directed Inception.") != chunk_key(generated, "Nolan directed Tenet.")


# --------------------------------------------------------------------------- streaming


def test_streamed_answers_get_generation_events_and_learn(offline, tmp_path):
    llm, _ = offline
    recorder = Recorder()
    manager = TriageManager(store=tmp_path / "s.sqlite", config=TriageConfig(reweight=True))
    manager.register(recorder)
    inst = instrument(manager=manager)
    try:
        index = build(llm)
        engine = index.as_query_engine(streaming=True, node_postprocessors=[TriagePostprocessor()])
        with inst.query("s-1"):
            response = engine.query(BORN)
        assert recorder.of("generation") == []  # nothing before the stream is read
        tokens = list(response.response_gen)
        inst.flush()
        (generation,) = recorder.of("generation")
        assert generation.query_id == "s-1" and generation.answer == "".join(tokens)
        inst.feedback("s-1", 0.0)
        updated = manager.learned_scores("triple")

        async def ask():
            with inst.query("s-2"):
                streamed = await engine.aquery(BORN)
            return [t async for t in streamed.async_response_gen()]

        async_tokens = asyncio.run(ask())
        inst.flush()
    finally:
        inst.uninstrument()
    manager.close()
    assert updated and min(updated.values()) < 100.0  # 3 bad feedbacks used to give 0 updates
    assert recorder.of("generation")[-1].query_id == "s-2"
    assert (
        recorder.of("generation")[-1].answer == async_tokens[-1]
    )  # the async generator yields the text so far


# --------------------------------------------------------------------------- provenance per index


def test_retrieval_events_list_only_their_own_indexs_chunks(offline, tmp_path):
    """Two indexes in one process share a triple; each retrieval names only its index's chunks."""
    llm, _ = offline
    recorder = Recorder()
    manager = TriageManager(store=None, synchronous=True, entry_points=False, defaults=False)
    manager.register(recorder)
    inst = instrument(manager=manager)
    try:
        a = build(llm, ("Nolan directed Inception.", "Nolan was born in London."))
        built_a = len(recorder.of("extraction"))
        b = build(
            llm,
            (
                "Nolan directed Inception. Caine starred in Inception.",
                "Nolan was born in London. Nolan directed Tenet.",
            ),
        )
        ids = [e.chunk.id for e in recorder.of("extraction")]
        own = {"a": set(ids[:built_a]), "b": set(ids[built_a:])}
        assert own["a"] and own["b"] and own["a"].isdisjoint(own["b"])
        for index in (a, b):  # a's graph is first read after b was built
            for q in ("Who directed Inception?", "Where was Nolan born?"):
                index.as_query_engine(include_text=False).query(q)
                index.as_query_engine().query(q)
    finally:
        inst.uninstrument()
    retrievals = recorder.of("retrieval")
    assert len(retrievals) == 8
    for i, event in enumerate(retrievals):
        mine = own["a" if i < 4 else "b"]
        assert event.chunks and {c.id for c in event.chunks} <= mine, (i, event.chunks)
    for event in recorder.of("graph"):
        listed = {c for ids in event.graph.sources.values() for c in ids}
        assert listed <= own["a"] or listed <= own["b"]


def test_a_triple_read_from_two_chunks_lists_both_and_only_its_own_indexs(offline):
    llm, _ = offline
    twice = ("Nolan directed Inception.", "Nolan directed Inception. Nolan was born in London.")
    inst = instrument(manager=TriageManager(store=None, synchronous=True, entry_points=False, defaults=False))
    try:
        x = build(llm, twice)
        build(llm, ("Nolan directed Inception. Caine starred in Inception.",))  # the same triple again
        sources = inst.emit_graph(x).graph.sources
    finally:
        inst.uninstrument()
    assert set(sources["Inception|Directed_by|Nolan"]) == {content_id(t) for t in twice}


# --------------------------------------------------------------------------- feedback learned before it returns, no silent drops


def test_feedback_is_learned_before_it_returns_when_reweighting(offline, tmp_path):
    llm, _ = offline
    inst = instrument(store=tmp_path / "w.sqlite", reweight=True)  # an owned, background-worker manager
    try:
        index = build(llm)
        engine = index.as_query_engine(node_postprocessors=[TriagePostprocessor()])
        orders = []
        for _ in range(3):
            with inst.query() as qid:
                response = engine.query(BORN)
            orders.append(context_triples(response)[0])
            inst.feedback(qid, 0.0)
            assert orders[-1] in inst.manager.learned_scores("triple")  # already learned, no flush()
    finally:
        inst.uninstrument()
    assert orders[1] != orders[0]  # the very next query was ranked with the feedback


def test_unattributable_feedback_is_logged_once_per_cause(offline, tmp_path, caplog):
    llm, _ = offline
    caplog.set_level(logging.WARNING, logger="triage.llamaindex")
    inst = instrument(store=tmp_path / "u.sqlite", reweight=True)
    try:
        index = build(llm)
        inst.feedback("nobody-asked", 0.0)
        inst.feedback("nobody-asked-either", 1.0)
        with inst.query("retrieved-only"):
            index.as_retriever().retrieve(BORN)
        inst.feedback("retrieved-only", 0.0)
        with inst.query("unread-stream"):
            index.as_query_engine(streaming=True).query(BORN)
        inst.feedback("unread-stream", 0.0)
        with inst.query("answered"):
            index.as_query_engine().query(BORN)
        inst.feedback("answered", 0.0)
    finally:
        inst.uninstrument()
    assert inst.unattributed == {
        "query id never retrieved through this instrumentor": 2,
        "query has a retrieval but no answer (no generation event)": 1,
        "streamed answer not read to its end (no generation event yet)": 1,
    }
    warned = [r.getMessage() for r in caplog.records if r.name == "triage.llamaindex"]
    assert len(warned) == 3 and "nobody-asked" in warned[0] and "nobody-asked-either" not in caplog.text


def test_split_attached_round_trips_llamaindex_include_text_nodes(offline):
    llm, _ = offline
    index = build(llm)
    retriever = index.as_retriever(
        sub_retrievers=[LLMSynonymRetriever(index.property_graph_store, include_text=True, llm=llm)]
    )
    nodes = retriever.retrieve("Tell me about Nolan")
    assert nodes
    for scored in nodes:
        text = scored.node.get_content()
        attached = split_attached(text, None)
        assert attached is not None and attached.chunk in TEXTS
        assert attached.render([line for line, _ in attached.lines]) == text
    assert split_attached("Nolan directed Inception.", None) is None
