"""Feedback integrity and per-workspace learning at the real ``lightrag-server`` app (issue #31).

The stock ``lightrag.api`` app (lightrag-hku[api] 1.5.7), built by
:func:`triage_lightrag.server.create_app` and driven in-process through FastAPI's ``TestClient``;
only the LLM, embedder and tokenizer are offline fakes
(``triage_lightrag.testing:offline_server_functions``). LightRAG surface relied on: the routes
``/documents/text``, ``/documents/track_status``, ``/query``, ``/query/data``, and the
``--workspace`` argument. A query that reaches the instance outside ``/query*`` (LightRAG's
Ollama-compatible ``/api/chat``, which counts tokens with a tiktoken download and so cannot run
offline) is stood in for by a direct ``aquery`` on the app's loop. Apps of one process get distinct
workspaces (LightRAG instances of one workspace share state in-process).
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightrag.api")
pytest.importorskip("fastapi.testclient")

from fastapi.testclient import TestClient  # noqa: E402

from triage_lightrag import server_routes  # noqa: E402
from triage_lightrag.feedback_guard import (  # noqa: E402
    ISSUED,
    FeedbackPolicy,
    RateLimiter,
    claim_name,
    issue_query_id,
    process_tag,
)
from triage_lightrag.server import ServerOptions, create_app  # noqa: E402
from triage_lightrag.testing import server_args, upload_and_wait  # noqa: E402
from triage_plugins.adapter_kit.query_ids import new_query_id  # noqa: E402
from triage_plugins.store import open_store  # noqa: E402
from triage_plugins.store.scoped import unscoped  # noqa: E402

FUNCS = "triage_lightrag.testing:offline_server_functions"
KEY = "operator-credential-for-tests"
DOCS = [
    "Christopher Nolan directed Inception. Inception was released in 2010. Christopher Nolan was born in London.",
    "Greta Gerwig directed Barbie. Barbie was produced by Warner Bros. Greta Gerwig was born in Sacramento.",
]
QUESTION = {"query": "Who directed Inception?", "mode": "hybrid"}


@contextmanager
def serving(tmp_path: Path, workspace: str, store: Path, **options: Any) -> Iterator[tuple[Any, Any]]:
    """A running app of ``workspace`` over ``store`` with the documents uploaded: ``(client, inst)``."""
    app = create_app(
        server_args(tmp_path / workspace / "rag", tmp_path / workspace / "inputs", workspace),
        ServerOptions(store=str(store), funcs=FUNCS, **options),
    )
    with TestClient(app) as client:
        for i, text in enumerate(DOCS):
            upload_and_wait(client, text, f"doc{i}.txt")
        yield client, app.state.triage.inst


@pytest.fixture(scope="module")
def guarded(tmp_path_factory):
    """One app with an operator credential configured (revisions off, no rate limit)."""
    tmp = tmp_path_factory.mktemp("guarded")
    store = tmp / "triage.sqlite"
    with serving(tmp, "guarded", store, operator_key=KEY) as (client, inst):
        yield client, inst, store


def ask(client: Any, body: dict[str, Any] = QUESTION) -> str:
    r = client.post("/query", json=body)
    assert r.status_code == 200, r.text
    return r.headers["x-triage-query-id"]


def feedback_events(store_path: Path, query_id: str | None = None) -> list[Any]:
    with open_store(store_path, readonly=True) as store:
        return [e for e in store.events("feedback") if query_id is None or e.query_id == query_id]


def scores(inst: Any) -> dict[str, float]:
    inst.flush(10)
    return {k: row.raw for k, row in inst.manager.store.get_scores("triple").items()}


# ---------------------------------------------------------------------------- ids


def test_issued_ids_are_random_compact_and_per_process():
    ids = [issue_query_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for qid in ids[:50]:
        match = ISSUED.match(qid)
        assert match is not None and match["process"] == process_tag() and len(qid) <= 40
        token = base64.b32decode(match["token"].upper())
        assert len(token) == 10  # 80 random bits
    tokens = {ISSUED.match(q)["token"] for q in ids}
    assert len({t[:4] for t in tokens}) > 1000  # no shared prefix, no counter: nothing to step from


def test_the_server_issues_unguessable_ids(guarded):
    client, _, _ = guarded
    ids = [ask(client, {"query": "Who directed Barbie?", "mode": "local"}) for _ in range(3)]
    assert all(ISSUED.match(q) for q in ids) and len(set(ids)) == 3
    assert all(q.startswith(f"lightrag-{process_tag()}-") for q in ids)
    data = client.post("/query/data", json=QUESTION).headers["x-triage-query-id"]
    assert ISSUED.match(data)


def test_forged_ids_are_never_accepted(guarded, monkeypatch):
    """Guesses next to a real id, sequential ids (the library's own, and one LightRAG's Ollama route
    really answered), random ids of the right shape from this or another process: 0 accepted."""
    client, inst, store_path = guarded
    monkeypatch.setattr(server_routes, "PEER_WAIT_SECONDS", 0.1)
    real = ask(client)
    # a query that reached the instance outside /query* (as LightRAG's Ollama-compatible /api/chat
    # does; that route needs tiktoken's download, so it is called directly on the app's loop here):
    # its id is the library's sequential one, known to this worker, never sent to a client
    client.portal.call(inst.rag.aquery, "Who directed Barbie?")
    chat_id = inst.last_query_id
    assert chat_id != real and inst.knows_query(chat_id) and not ISSUED.match(chat_id)
    sequential = new_query_id("lightrag")
    head, _, n = sequential.rpartition("-")
    neighbours = [real[:-1] + c for c in "a2z7" if c != real[-1]] + [real[:-2] + real[-1] + real[-2]]
    forged = [
        chat_id,
        *(f"{head}-{int(n) - k}" for k in range(1, 4)),
        *neighbours,
        *(issue_query_id() for _ in range(5)),  # this process's shape, never issued to a query
        "lightrag-0123456789-abcdefghijklmnop",  # another process's shape
        "lightrag-" + real.split("-", 1)[1].upper(),
        "graphrag-" + real.split("-", 1)[1],
    ]
    before = scores(inst)
    statuses = [
        client.post("/triage/feedback", json={"query_id": q, "score": 0.0}).status_code for q in forged
    ]
    assert statuses == [404] * len(forged)
    assert scores(inst) == before
    assert not {e.query_id for e in feedback_events(store_path)} & set(forged)
    with open_store(store_path, readonly=True) as store:
        assert all(store.get_param(claim_name("lightrag", q, "human")) is None for q in forged)
    assert client.post("/triage/feedback", json={"query_id": real, "score": 1.0}).status_code == 200


# ---------------------------------------------------------------------------- replays


def test_fifty_replays_move_a_score_once(guarded, tmp_path):
    client, inst, store_path = guarded
    qid = ask(client)
    learner = inst.manager.get_plugin("triage.feedback")
    before = scores(inst)
    first = client.post("/triage/feedback", json={"query_id": qid, "score": 0.0})
    assert first.status_code == 200 and first.json()["status"] == "recorded", first.text
    once = scores(inst)
    update = learner.last_update
    moved = {k for k in once if once[k] != before.get(k, 100.0)}
    assert moved  # the first feedback moved scores
    for i in range(50):
        r = client.post("/triage/feedback", json={"query_id": qid, "score": (0.0, 1.0)[i % 2]})
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "already recorded" and "changes nothing" in r.json()["detail"]
    assert scores(inst) == once and learner.last_update is update
    assert [e.score for e in feedback_events(store_path, qid)] == [0.0]
    # another worker of the same store (its own workspace, process-local state) sees the claim too
    with serving(tmp_path, "guarded-peer", store_path, operator_key=KEY) as (peer, peer_inst):
        r = peer.post("/triage/feedback", json={"query_id": qid, "score": 1.0})
        assert r.status_code == 200 and r.json()["status"] == "already recorded", r.text
        assert peer_inst.manager.get_plugin("triage.feedback").last_update is None
    assert len(feedback_events(store_path, qid)) == 1
    # one per source: the operator's gold rating of the same query is its own slot
    r = client.post(
        "/triage/feedback",
        json={"query_id": qid, "score": 1.0, "source": "gold"},
        headers={"X-Triage-Operator-Key": KEY},
    )
    assert r.status_code == 200 and r.json()["status"] == "recorded"


def test_revisions_when_the_deployer_allows_them(tmp_path):
    store = tmp_path / "t.sqlite"
    with serving(tmp_path, "revising", store, revisions=True) as (client, inst):
        qid = ask(client)
        seen = [scores(inst)]
        for score in (0.0, 1.0, 0.0):
            r = client.post("/triage/feedback", json={"query_id": qid, "score": score})
            assert r.status_code == 200 and r.json()["status"] == "recorded", r.text
            seen.append(scores(inst))
    assert all(a != b for a, b in zip(seen, seen[1:], strict=False))  # each revision moved scores
    assert [e.score for e in feedback_events(store, qid)] == [0.0, 1.0, 0.0]


# ---------------------------------------------------------------------------- privileged sources


def test_a_privileged_source_without_the_operator_credential_is_refused_and_stored_nowhere(guarded):
    client, inst, store_path = guarded
    qid = ask(client)
    learner = inst.manager.get_plugin("triage.feedback")
    update, before = learner.last_update, scores(inst)
    for source, headers in [
        ("gold", {}),
        ("gold", {"X-Triage-Operator-Key": "guess"}),
        ("gold", {"X-Triage-Operator-Key": KEY[:-1]}),
        ("llm", {}),
    ]:
        r = client.post(
            "/triage/feedback", json={"query_id": qid, "score": 0.0, "source": source}, headers=headers
        )
        assert r.status_code == 403, r.text
        assert "operator credential" in r.json()["detail"]
    assert scores(inst) == before and learner.last_update is update
    assert feedback_events(store_path, qid) == []
    with open_store(store_path, readonly=True) as store:
        assert all(store.get_param(claim_name("lightrag", qid, s)) is None for s in ("gold", "llm", "human"))
    # the user's own feedback needs no credential; the operator's goes through with it
    assert (
        client.post("/triage/feedback", json={"query_id": qid, "score": 1.0}).json()["status"] == "recorded"
    )
    r = client.post(
        "/triage/feedback",
        json={"query_id": qid, "score": 0.0, "source": "gold"},
        headers={"X-Triage-Operator-Key": KEY},
    )
    assert r.status_code == 200 and r.json()["status"] == "recorded"
    assert [(e.source, e.score) for e in feedback_events(store_path, qid)] == [("human", 1.0), ("gold", 0.0)]


def test_without_a_configured_credential_no_privileged_source_is_accepted(tmp_path):
    store = tmp_path / "t.sqlite"
    with serving(tmp_path, "no-key", store) as (client, _):
        qid = ask(client)
        r = client.post(
            "/triage/feedback",
            json={"query_id": qid, "score": 1.0, "source": "gold"},
            headers={"X-Triage-Operator-Key": ""},
        )
        assert r.status_code == 403 and "none configured" in r.json()["detail"]
    assert feedback_events(store) == []
    assert FeedbackPolicy(operator_key=None).refusal("human", None) is None
    assert "operator_key" not in repr(ServerOptions(operator_key=KEY)) and KEY not in repr(
        FeedbackPolicy(KEY)
    )


def test_the_credential_is_read_like_the_other_settings_and_never_shown(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text(
        f"TRIAGE_OPERATOR_KEY={KEY}\nTRIAGE_FEEDBACK_RATE=30\nTRIAGE_OPERATOR_KY=typo\n", encoding="utf-8"
    )
    options = ServerOptions.from_env({"TRIAGE_FEEDBACK_REVISIONS": "1"}, env_file=env_file)
    assert (options.operator_key, options.feedback_rate, options.revisions) == (KEY, 30, True)
    assert options.policy() == FeedbackPolicy(KEY, True, 30)
    lines = "\n".join(options.describe())
    assert KEY not in lines and "typo" not in lines
    assert f"operator_key = set  (TRIAGE_OPERATOR_KEY from {env_file})" in lines
    assert "feedback_rate = 30 per client per minute" in lines
    assert ServerOptions.from_env({}, feedback_rate="5").feedback_rate == 5


# ---------------------------------------------------------------------------- rate limit


def test_an_optional_per_client_rate_limit(tmp_path):
    store = tmp_path / "t.sqlite"
    with serving(tmp_path, "limited", store, feedback_rate=3) as (client, _):
        ids = [ask(client) for _ in range(4)]
        codes = [client.post("/triage/feedback", json={"query_id": q, "score": 1.0}) for q in ids]
    assert [r.status_code for r in codes] == [200, 200, 200, 429]
    assert 1 <= int(codes[-1].headers["retry-after"]) <= 60
    assert {e.query_id for e in feedback_events(store)} == set(ids[:3])
    limiter = RateLimiter(2)
    assert [limiter.retry_after("a", now=t) is None for t in (0.0, 1.0, 2.0)] == [True, True, False]
    assert limiter.retry_after("b", now=2.0) is None  # per client
    assert limiter.retry_after("a", now=60.5) is None  # the window slid past the first


# ---------------------------------------------------------------------------- workspaces


def test_two_workspaces_on_one_store_keep_two_learners(tmp_path):
    """Servers of workspaces ``wa`` and ``wb`` share a store: feedback at ``wa`` moves ``wa``'s scores
    only; ``wb``'s retrieval (order included) is as before, and its runs are its own."""
    store = tmp_path / "shared.sqlite"
    local = {"query": "Who directed Inception?", "mode": "local"}
    with (
        serving(tmp_path, "wa", store, reweight=True) as (a, inst_a),
        serving(tmp_path, "wb", store, reweight=True) as (b, inst_b),
    ):
        wb_before = b.post("/query/data", json=local).json()
        for _ in range(3):
            qid = ask(a, local)
            assert a.post("/triage/feedback", json={"query_id": qid, "score": 0.0}).status_code == 200
        learned_a, learned_b = scores(inst_a), scores(inst_b)
        wb_after = b.post("/query/data", json=local).json()
        assert (inst_a.namespace, inst_b.namespace) == ("wa", "wb")
        shared = unscoped(inst_a.manager.store)
        assert shared.get_scores("triple") == {}  # nothing in the default scope
        assert {k: r.raw for k, r in shared.get_scores("wa:triple").items()} == learned_a
    assert learned_a and any(v < 100.0 for v in learned_a.values())
    assert learned_b == {}
    assert wb_after["data"] == wb_before["data"]
    with open_store(store, readonly=True) as opened:
        runs = opened.runs("lightrag-server")
        assert sorted((r.config["workspace"], r.config["namespace"]) for r in runs) == [
            ("wa", "wa"),
            ("wb", "wb"),
        ]
