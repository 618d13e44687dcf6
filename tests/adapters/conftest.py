"""Fixtures shared by the adapter tests."""

from __future__ import annotations

import asyncio

import pytest


@pytest.fixture(scope="module")
def loop():
    """One event loop per module (LightRAG's instances live on it); its leftover tasks cancelled."""
    loop = asyncio.new_event_loop()
    yield loop
    pending = asyncio.all_tasks(loop)  # LightRAG's LLM/embedding queue workers
    for task in pending:
        task.cancel()
    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.close()


@pytest.fixture(scope="module")
def lightrag_payloads(loop, tmp_path_factory):
    """``capture(seed, modes, **world_sizes)``: a real LightRAG built over a generated world
    (offline stand-ins), each question asked with ``aquery_data`` in each mode; returns the grounder
    of its graph and ``(question, mode, snapshot of the payload, gold answers)`` per ask."""

    def capture(seed: int, modes: tuple[str, ...], **sizes: int):
        import uuid

        from lightrag import QueryParam

        from triage_lightrag import translate
        from triage_lightrag.testing import build_rag
        from triage_plugins.kg.grounding import Grounder
        from triage_plugins.offline.world import generate_world

        world = generate_world(seed, **sizes)
        rag = loop.run_until_complete(
            build_rag(
                tmp_path_factory.mktemp("lightrag"),
                [d.text for d in world.documents],
                workspace=f"t-{uuid.uuid4().hex[:8]}",
            )
        )
        try:
            nodes = loop.run_until_complete(rag.chunk_entity_relation_graph.get_all_nodes())
            edges = loop.run_until_complete(rag.chunk_entity_relation_graph.get_all_edges())
            out = []
            for q in world.questions:
                for mode in modes:
                    result = loop.run_until_complete(rag.aquery_data(q.text, QueryParam(mode=mode)))
                    out.append((q.text, mode, translate.snapshot(result), q.answers))
        finally:
            loop.run_until_complete(rag.finalize_storages())
        return Grounder(translate.graph_view(nodes, edges)), out

    return capture
