"""One learner per LightRAG workspace (issue #31): two real ``lightrag-hku`` 1.5.7 instances in two
workspaces, instrumented over one store, SQLite and PostgreSQL; only the LLM, embedder and tokenizer
are offline stand-ins.

LightRAG surface relied on: the ``workspace`` field of the instance (``WORKSPACE``), local mode's
relation order (``edge_degrees_batch`` rank, as in ``test_lightrag.py``). PostgreSQL is a real
server started for the module (``tests/store/pgserver.py``), skipped where no binaries exist.
"""

from __future__ import annotations

import uuid

import pytest

pytest.importorskip("lightrag")

from lightrag import QueryParam  # noqa: E402

from triage_lightrag import instrument  # noqa: E402
from triage_lightrag.instrument import workspace_config  # noqa: E402
from triage_lightrag.testing import ScriptedLightRAGLLM, build_rag  # noqa: E402
from triage_lightrag.translate import triple_id  # noqa: E402
from triage_plugins.contract.config import TriageConfig  # noqa: E402
from triage_plugins.offline.world import generate_world  # noqa: E402
from triage_plugins.store import open_store  # noqa: E402
from triage_plugins.store.scoped import unscoped  # noqa: E402


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request, tmp_path):
    if request.param == "sqlite":
        yield str(tmp_path / "shared.sqlite")
        return
    yield request.getfixturevalue("postgres_url")


@pytest.fixture(scope="module")
def world():
    return generate_world(
        0, n_people=10, n_organisations=3, n_cities=4, n_countries=2, n_films=5, n_documents=8, n_questions=10
    )


def relation_ids(result: dict) -> list[str]:
    return [triple_id(r["src_id"], r["tgt_id"]) for r in result["data"]["relationships"]]


def test_feedback_in_one_workspace_moves_no_ranking_in_the_other(loop, world, tmp_path, store_url):
    texts = [d.text for d in world.documents]
    tag = uuid.uuid4().hex[:6]
    # staleness 0: each learner re-reads the store on every query, so a score another learner wrote
    # in the same scope would show at once (the control for what the scopes keep apart)
    learning = TriageConfig(reweight=True, unit="triple", options={"feedback.staleness": 0})
    rags, insts = {}, {}
    for ws in ("wa", "wb"):
        # "list" answers name the entities LightRAG ranked first, so negative feedback demotes them
        llm = ScriptedLightRAGLLM(texts, answer="list")
        rag = build_rag(tmp_path / ws, texts, workspace=f"{ws}-{tag}", llm=llm, max_parallel_insert=1)
        rags[ws] = loop.run_until_complete(rag)
        insts[ws] = instrument(rags[ws], store=store_url, config=learning)  # each its own (owned) manager
    q = world.questions[0].text
    tight = QueryParam(mode="local", max_relation_tokens=1200, enable_rerank=False)

    def order(ws: str) -> list[str]:
        return relation_ids(loop.run_until_complete(rags[ws].aquery_data(q, tight)))

    try:
        assert (insts["wa"].namespace, insts["wb"].namespace) == (f"wa-{tag}", f"wb-{tag}")
        before = {ws: order(ws) for ws in rags}
        for _ in range(5):
            loop.run_until_complete(rags["wa"].aquery(q, tight))
            insts["wa"].feedback(insts["wa"].query_id, 0.0)
        insts["wa"].flush()
        insts["wb"].flush()
        after = {ws: order(ws) for ws in rags}
        learned_a = insts["wa"].manager.store.get_scores("triple")
        learned_b = insts["wb"].manager.store.get_scores("triple")
        shared = unscoped(insts["wa"].manager.store)
        default_scope = shared.get_scores("triple")
        in_a_key = shared.get_scores(f"wa-{tag}:triple")
    finally:
        for ws in rags:
            insts[ws].uninstrument()
            loop.run_until_complete(rags[ws].finalize_storages())
    assert after["wa"] != before["wa"]  # wa learned from its feedback ...
    assert after["wb"] == before["wb"]  # ... and wb's ranking did not move
    assert learned_a and any(row.raw < 100.0 for row in learned_a.values())
    assert learned_b == {} and default_scope == {}
    assert set(in_a_key) == set(learned_a)  # stored under "<workspace>:triple" in the shared store
    with open_store(store_url, readonly=True) as store:
        feedback = list(store.events("feedback"))
        assert len(feedback) == 5  # events stay shared: one store holds both workspaces' traces
        assert sum(1 for _ in store.events("retrieval")) == 9  # 2 + 2 orders read, 5 answered in wa


def test_the_default_workspace_keeps_the_default_scope():
    """LightRAG's default workspace ``""`` learns in the unprefixed keys, where scores learned before
    scopes existed are: nothing to migrate."""
    assert workspace_config(None, "") is None
    config = TriageConfig(reweight=True)
    assert workspace_config(config, "") is config
    assert workspace_config(config, "wa").namespace == "wa"
    assert workspace_config(TriageConfig(namespace="team"), "wa").namespace == "team:wa"
