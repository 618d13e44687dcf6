"""The LightRAG adapter as a deployment meets it (lightrag-hku 1.5.7, offline): observe-only defaults
with every default plugin on, every ingestion route, no silent no-ops, sync hooks off the event loop.

Private LightRAG surface relied on (beyond test_lightrag.py's): ``doc_status.upsert`` receiving each
document's ``processed`` row with its ``chunks_list``; every ingestion route ending in
``apipeline_process_enqueue_documents``.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

pytest.importorskip("lightrag")

from lightrag import QueryParam  # noqa: E402

from triage_lightrag import instrument  # noqa: E402
from triage_lightrag.instrument import UnknownQueryError  # noqa: E402
from triage_lightrag.testing import build_rag  # noqa: E402
from triage_lightrag.translate import triple_id  # noqa: E402
from triage_plugins import hookimpl  # noqa: E402
from triage_plugins.adapter_kit.recording import EventRecorder as Spy
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.contract.errors import ConfigError  # noqa: E402
from triage_plugins.offline.world import generate_world  # noqa: E402
from triage_plugins.runtime.manager import TriageManager  # noqa: E402

MODES = ("local", "global", "hybrid", "mix", "naive")


@pytest.fixture(scope="module")
def world():
    return generate_world(
        1, n_people=10, n_organisations=3, n_cities=4, n_countries=2, n_films=5, n_documents=8, n_questions=6
    )


@pytest.fixture(scope="module")
def rag(loop, world, tmp_path_factory):
    texts = [d.text for d in world.documents]
    instance = loop.run_until_complete(
        build_rag(tmp_path_factory.mktemp("deploy"), texts, workspace=f"d-{uuid.uuid4().hex[:8]}")
    )
    yield instance
    loop.run_until_complete(instance.finalize_storages())


def spied(**kwargs: Any) -> tuple[TriageManager, Spy]:
    m = TriageManager(store=None, synchronous=True, entry_points=False, defaults=False, **kwargs)
    spy = Spy()
    m.register(spy)
    return m, spy


async def _answers(rag: Any, question: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in MODES:
        out[f"aquery/{mode}"] = await rag.aquery(question, QueryParam(mode=mode))
        stream = await rag.aquery(question, QueryParam(mode=mode, stream=True))
        out[f"stream-type/{mode}"] = type(stream)
        out[f"stream/{mode}"] = "".join([piece async for piece in stream])
        llm = await rag.aquery_llm(question, QueryParam(mode=mode))
        out[f"aquery_llm/{mode}"] = llm
        out[f"aquery_data/{mode}"] = await rag.aquery_data(question, QueryParam(mode=mode))
    return out


def test_every_default_plugin_on_changes_no_answer_nor_type(loop, rag, world, tmp_path):
    """Observe-only by default: gate on in its default mode, recorder, usage, feedback, SQLite store."""
    question = world.questions[0].text
    plain = loop.run_until_complete(_answers(rag, question))
    asyncio.set_event_loop(loop)
    try:
        plain_sync = rag.query(question, QueryParam(mode="hybrid"))
        inst = instrument(rag, store=tmp_path / "t.sqlite")  # owned manager, every default plugin
        assert inst.gate_mode == "warn" and not inst.reweight
        try:
            traced = loop.run_until_complete(_answers(rag, question))
            traced_sync = rag.query(question, QueryParam(mode="hybrid"))
            inst.flush()
        finally:
            inst.uninstrument()
    finally:
        asyncio.set_event_loop(None)
    assert traced_sync == plain_sync and type(traced_sync) is type(plain_sync) is str
    assert traced.keys() == plain.keys()
    for key, value in plain.items():
        if key.startswith("aquery_llm"):  # the same dict, minus the (always different) iterator
            assert type(traced[key]) is dict and traced[key] == value, key
        else:
            assert traced[key] == value and type(traced[key]) is type(value), key
    decisions = [d for _, d in inst.gate_decisions()]
    assert decisions and all(d.action in ("proceed", "warn") for d in decisions)  # recorded, not acted on


def test_every_ingestion_route_emits_and_the_graph_follows(loop, world, tmp_path):
    texts = [d.text for d in world.documents]
    rag = loop.run_until_complete(build_rag(tmp_path, texts[:2], workspace=f"i-{uuid.uuid4().hex[:8]}"))
    m, spy = spied()
    inst = instrument(rag, manager=m)
    try:
        # the server's route: enqueue, then process
        loop.run_until_complete(rag.apipeline_enqueue_documents(texts[2], ids="doc-pipe", file_paths="p.txt"))
        loop.run_until_complete(rag.apipeline_process_enqueue_documents())
        [piped] = spy.of("extraction")
        assert piped.chunk.doc_id == "doc-pipe" and piped.triples
        # the sync insert
        asyncio.set_event_loop(loop)
        try:
            rag.insert(texts[3], ids="doc-sync")
        finally:
            asyncio.set_event_loop(None)
        assert [e.chunk.doc_id for e in spy.of("extraction")] == ["doc-pipe", "doc-sync"]
        graph = spy.of("graph")[-1].graph
        new_node = piped.triples[0].triple.subject
        assert new_node in graph.nodes
        # grounding follows the live graph: a query naming the new entity grounds it
        loop.run_until_complete(rag.aquery_data(f"What about {new_node}?", QueryParam(mode="local")))
        assert spy.of("retrieval")[-1].grounding.get(new_node) == new_node
        # deletion and an entity edit are graph events too
        before = len(spy.of("graph"))
        loop.run_until_complete(rag.adelete_by_doc_id("doc-sync"))
        loop.run_until_complete(
            rag.acreate_entity("Zyxwv Quorum", {"entity_type": "organization", "description": "x"})
        )
        graphs = spy.of("graph")
        assert len(graphs) == before + 2 and "Zyxwv Quorum" in graphs[-1].graph.nodes
        sync_only = {t.triple.id for t in spy.of("extraction")[1].triples} - {
            t.triple.id for t in piped.triples
        }
        live = {t.id for t in graphs[-1].graph.triples}
        assert sync_only - live  # relations only the deleted document stated left the graph event
        edges = loop.run_until_complete(rag.chunk_entity_relation_graph.get_all_edges())
        assert live == {triple_id(e["source"], e["target"]) for e in edges}  # the live graph, exactly
    finally:
        inst.uninstrument()
        loop.run_until_complete(rag.finalize_storages())


def test_no_silent_no_ops(loop, rag, world):
    m, spy = spied()
    inst = instrument(rag, manager=m)
    question = world.questions[1].text
    try:
        with pytest.raises(UnknownQueryError, match="unknown or expired"):
            inst.feedback("never-asked", 1.0)
        with pytest.raises(ConfigError, match="already instrumented with other reweight"):
            instrument(rag, reweight=True)
        # feedback on an open stream waits for its end
        with inst.query() as qid:
            stream = loop.run_until_complete(rag.aquery(question, QueryParam(mode="local", stream=True)))
        inst.feedback(qid, 1.0)
        assert inst.awaiting_stream(qid) and spy.of("feedback") == []

        async def drain() -> str:
            return "".join([p async for p in stream])

        loop.run_until_complete(drain())
        inst.flush()
        assert [e.query_id for e in spy.of("feedback")] == [qid]
    finally:
        inst.uninstrument()
    with pytest.raises(ConfigError, match="not instrumented"):
        inst.feedback(qid, 0.5)


def test_uninstrument_is_lifo_safe_and_stops_our_thread(loop, rag, world, tmp_path):
    before = set(threading.enumerate())  # other tests' managers may still run threads of their own
    inst = instrument(rag, store=tmp_path / "t.sqlite")
    ours = rag.__dict__["aquery_data"]
    calls: list[str] = []

    async def theirs(*args: Any, **kwargs: Any) -> Any:  # another tool wraps after us
        calls.append("theirs")
        return await ours(*args, **kwargs)

    rag.aquery_data = theirs
    loop.run_until_complete(rag.aquery_data(world.questions[2].text, QueryParam(mode="local")))
    worker_threads = {t for t in threading.enumerate() if t.name.startswith("triage-") and t not in before}
    assert worker_threads  # our manager's delivery worker
    inst.uninstrument()
    try:
        assert rag.__dict__["aquery_data"] is theirs  # their wrapper survives our uninstrument
        result = loop.run_until_complete(rag.aquery_data(world.questions[2].text, QueryParam(mode="local")))
        assert calls == ["theirs", "theirs"] and result["status"] == "success"
        assert "aquery_llm" not in rag.__dict__  # everything else of ours is gone
        time.sleep(0.2)
        assert not any(t.is_alive() for t in worker_threads)
    finally:
        del rag.aquery_data


class SlowRerank:
    @hookimpl
    def triage_rerank(self, request):
        time.sleep(0.3)
        return [1.0] * len(request.ids)


def test_sync_hooks_never_block_the_event_loop(loop, rag, world):
    m = TriageManager(
        store=None, synchronous=True, entry_points=False, defaults=False, hook_budget=0.1,
        config=TriageConfig(reweight=True),
    )  # fmt: skip
    m.register(SlowRerank(), name="slow")
    inst = instrument(rag, manager=m)
    question = world.questions[3].text
    plain = None
    try:

        async def run() -> tuple[int, Any]:
            ticks = 0
            done = asyncio.Event()

            async def ticker() -> None:
                nonlocal ticks
                while not done.is_set():
                    ticks += 1
                    await asyncio.sleep(0.01)

            task = asyncio.create_task(ticker())
            result = await rag.aquery_data(question, QueryParam(mode="local"))
            done.set()
            await task
            return ticks, result

        ticks, result = loop.run_until_complete(run())
    finally:
        inst.uninstrument()
    plain = loop.run_until_complete(rag.aquery_data(question, QueryParam(mode="local")))
    assert ticks >= 5  # the loop kept running while the slow plugin slept in its thread
    assert result["data"]["relationships"] == plain["data"]["relationships"]  # over budget: host order
    assert m.failures[("slow", "triage_rerank", "OverBudget")] >= 1  # its late answer was discarded
