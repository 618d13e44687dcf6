"""``triage-lightrag-server``: the real ``lightrag.api`` app (lightrag-hku[api] 1.5.7), offline.

The stock app is built by :func:`triage_lightrag.server.create_app` and driven in-process through
FastAPI's ``TestClient`` (its lifespan runs: storages, then instrumentation), and once as a real
``uvicorn`` process on 127.0.0.1. Only the LLM, embedder and tokenizer are offline fakes, injected
through the documented hook ``TRIAGE_LIGHTRAG_FUNCS=triage_lightrag.testing:offline_server_functions``.
LightRAG surface relied on: ``create_app(args)`` building one ``LightRAG(...)`` from the module's
``LightRAG`` name; routes ``/documents/text``, ``/documents/pipeline_status``, ``/query``,
``/query/stream``, ``/query/data``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightrag.api")
pytest.importorskip("fastapi.testclient")

from fastapi.testclient import TestClient  # noqa: E402

from triage_lightrag.server import ServerOptions, create_app, split_argv  # noqa: E402
from triage_lightrag.testing import server_args, upload_and_wait  # noqa: E402
from triage_plugins.contract.errors import ConfigError  # noqa: E402
from triage_plugins.store import open_store  # noqa: E402

FUNCS = "triage_lightrag.testing:offline_server_functions"
MODES = ("local", "global", "hybrid", "mix", "naive")
DOCS = [
    "Christopher Nolan directed Inception. Inception was released in 2010. Christopher Nolan was born in London.",
    "Greta Gerwig directed Barbie. Barbie was produced by Warner Bros. Greta Gerwig was born in Sacramento.",
]


def lightrag_args(tmp_path: Path, workspace: str = "served") -> Any:
    """LightRAG's own parsed arguments; one workspace per app, since LightRAG instances of one
    process share state per workspace."""
    return server_args(tmp_path / "rag", tmp_path / "inputs", workspace)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("server")
    store = tmp / "triage.sqlite"
    app = create_app(lightrag_args(tmp), ServerOptions(store=str(store), funcs=FUNCS))
    with TestClient(app) as client:
        for i, text in enumerate(DOCS):
            upload_and_wait(client, text, f"doc{i}.txt")
        yield client, app, store


def test_the_app_is_lightrags_own_with_the_triage_routes(served):
    client, app, _ = served
    paths = set(client.get("/openapi.json").json()["paths"])
    assert {"/query", "/query/stream", "/query/data", "/documents/text", "/health"} <= paths
    assert {"/triage/feedback", "/triage/summary"} <= paths
    assert client.get("/health").status_code == 200
    assert app.state.triage.inst is not None and app.state.triage.inst.is_instrumented
    providers = [m for m in sys.modules if m.split(".")[:2] == ["lightrag", "llm"] and m != "lightrag.llm"]
    assert [m for m in providers if m != "lightrag.llm.binding_options"] == []  # no provider imported


def test_upload_query_every_mode_feedback_and_rows_in_the_store(served):
    client, app, store_path = served
    ids = []
    for mode in MODES:
        r = client.post("/query", json={"query": "Who directed Inception?", "mode": mode})
        assert r.status_code == 200, r.text
        qid = r.headers["x-triage-query-id"]
        assert qid.startswith("lightrag-") and qid not in ids
        ids.append(qid)
        assert isinstance(r.json()["response"], str)
    r = client.post("/query/data", json={"query": "Who directed Barbie?", "mode": "hybrid"})
    assert r.status_code == 200 and r.headers["x-triage-query-id"] not in ids
    r = client.post("/triage/feedback", json={"query_id": ids[2], "score": 1.0})
    assert r.status_code == 200 and r.json()["status"] == "recorded"
    r = client.post("/triage/feedback", json={"query_id": "lightrag-never-seen", "score": 1.0})
    assert r.status_code == 404 and "not an id this server issued" in r.json()["detail"]
    assert client.post("/triage/feedback", json={"query_id": ids[0], "score": 2}).status_code == 422
    app.state.triage.inst.flush(10)
    with open_store(store_path, readonly=True) as store:
        extraction = list(store.events("extraction"))
        assert len(extraction) == len(DOCS)  # one chunk per uploaded document
        assert {e.chunk.text for e in extraction} == set(DOCS) and all(e.triples for e in extraction)
        graphs = list(store.events("graph"))
        assert graphs and any("Barbie" in t.subject + t.object for t in graphs[-1].graph.triples)
        retrieved = {e.query_id: e for e in store.events("retrieval")}
        assert set(ids) <= set(retrieved) and {retrieved[q].retriever for q in ids} == set(MODES)
        generated = {e.query_id for e in store.events("generation")}
        assert set(ids) <= generated
        [feedback] = list(store.events("feedback"))
        assert feedback.query_id == ids[2] and feedback.score == 1.0
    summary = client.get("/triage/summary").json()
    assert summary["gate"] == "warn" and summary["metrics"]["QGR"]["n"] >= len(MODES)
    assert summary["store_write_failures"] == {}  # a healthy store: no write failed


def test_streamed_answer_carries_the_id_and_feedback_is_recorded(served):
    client, app, store_path = served
    with client.stream("POST", "/query/stream", json={"query": "Who directed Barbie?", "mode": "local"}) as r:
        qid = r.headers["x-triage-query-id"]
        lines = [json.loads(line) for line in r.iter_lines() if line.strip()]
    text = "".join(part.get("response", "") for part in lines)
    assert "Greta Gerwig" in text
    r = client.post("/triage/feedback", json={"query_id": qid, "score": 0.0})
    assert r.status_code == 200, r.text
    app.state.triage.inst.flush(10)
    with open_store(store_path, readonly=True) as store:
        [generation] = [e for e in store.events("generation") if e.query_id == qid]
        assert generation.answer == text
        assert [e.score for e in store.events("feedback") if e.query_id == qid] == [0.0]


def test_answers_equal_plain_lightrag_server(served, tmp_path):
    """The same upload and queries through the stock app (not instrumented) give the same bodies."""
    client, _, _ = served
    import lightrag.api.lightrag_server as server
    from lightrag.api.config import initialize_config
    from lightrag.api.lightrag_server import create_app as stock_create_app

    from triage_lightrag.server import _capturing
    from triage_lightrag.testing import offline_server_functions

    args = lightrag_args(tmp_path, "plain")
    initialize_config(args, force=True)
    with _capturing(server, offline_server_functions(), []):
        plain_app = stock_create_app(args)
    with TestClient(plain_app) as plain:
        for i, text in enumerate(DOCS):
            upload_and_wait(plain, text, f"doc{i}.txt")
        for mode in MODES:
            body = {"query": "Who was born in London?", "mode": mode}
            a, b = plain.post("/query", json=body), client.post("/query", json=body)
            assert "x-triage-query-id" not in a.headers
            assert {k: v for k, v in a.json().items() if k != "response_time"} == {
                k: v for k, v in b.json().items() if k != "response_time"
            }


def test_feedback_for_a_query_another_worker_answered(served, tmp_path, monkeypatch):
    """A second app on the same store stands in for a second gunicorn worker: it never answered the
    query, yet accepts its feedback (the store holds the retrieval) and learns from it."""
    client, app, store_path = served
    r = client.post("/query", json={"query": "Who directed Inception?", "mode": "hybrid"})
    qid = r.headers["x-triage-query-id"]
    data_qid = client.post("/query/data", json={"query": "Who directed Barbie?"}).headers["x-triage-query-id"]
    app.state.triage.inst.flush(10)  # the answering worker has delivered its events
    options = ServerOptions(store=str(store_path), funcs=FUNCS, operator_key="operator-secret")
    peer_app = create_app(lightrag_args(tmp_path, "peer"), options)
    with TestClient(peer_app) as peer:
        peer_inst = peer_app.state.triage.inst
        assert not peer_inst.knows_query(qid)
        r = peer.post(
            "/triage/feedback",
            json={"query_id": qid, "score": 1.0, "source": "gold"},
            headers={"X-Triage-Operator-Key": "operator-secret"},
        )
        assert r.status_code == 200, r.text
        assert (r.json()["status"], r.json()["query_from"]) == ("recorded", "store")
        learner = peer_inst.manager.get_plugin("triage.feedback")
        # it learned from the retrieval the answering worker stored
        assert learner.last_update is not None and learner.last_update.deltas
        assert learner.unattributed["unknown query id"] == 0
        assert "learned" not in r.json()
        # a /query/data query another worker answered: recorded, and said to teach nothing
        r = peer.post("/triage/feedback", json={"query_id": data_qid, "score": 1.0})
        assert r.status_code == 200 and r.json()["query_from"] == "store", r.text
        assert r.json()["learned"] is False and "no answer" in r.json()["detail"]
        from triage_lightrag import server_routes

        monkeypatch.setattr(server_routes, "PEER_WAIT_SECONDS", 0.3)
        started = time.monotonic()
        forged = "lightrag-0123456789-abcdefghijklmnop"  # another process's shape, never issued
        r = peer.post("/triage/feedback", json={"query_id": forged, "score": 1.0})
        assert r.status_code == 404 and "store holds no lightrag retrieval" in r.json()["detail"]
        assert time.monotonic() - started >= 0.3  # another process's id: waited for its events first
    r = client.post("/triage/feedback", json={"query_id": qid, "score": 0.5})
    assert r.status_code == 200 and r.json()["query_from"] == "this worker"  # the answering worker, as before
    app.state.triage.inst.flush(10)
    with open_store(store_path, readonly=True) as store:
        assert [(e.score, e.source) for e in store.events("feedback") if e.query_id == qid] == [
            (1.0, "gold"),
            (0.5, "human"),
        ]


def test_feedback_on_a_query_data_query_says_it_teaches_nothing(served):
    """``/query/data`` retrieves and answers nothing; the learner credits what an answer used, so
    the feedback is stored but changes no score, and the 200 body says so (an answered query's
    body does not carry ``learned``)."""
    client, app, store_path = served
    qid = client.post("/query/data", json={"query": "Who directed Inception?", "mode": "hybrid"}).headers[
        "x-triage-query-id"
    ]
    learner = app.state.triage.inst.manager.get_plugin("triage.feedback")
    r = client.post("/triage/feedback", json={"query_id": qid, "score": 1.0})
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["status"], body["learned"]) == ("recorded", False)
    assert "no answer" in body["detail"] and "/query/data" in body["detail"]
    assert learner.last_update is not None and learner.last_update.deltas == {}  # truly nothing learned
    assert app.state.triage.inst.answered(qid) is False
    with open_store(store_path, readonly=True) as store:
        assert [e.score for e in store.events("feedback") if e.query_id == qid] == [1.0]  # still stored
    answered = client.post("/query", json={"query": "Who directed Inception?", "mode": "hybrid"})
    r = client.post(
        "/triage/feedback", json={"query_id": answered.headers["x-triage-query-id"], "score": 1.0}
    )
    assert r.status_code == 200 and "learned" not in r.json()
    assert learner.last_update.deltas  # the answered query's feedback did move scores


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity"])
def test_a_non_finite_score_is_a_422_and_nothing_is_stored(served, literal):
    """Python's JSON parser accepts NaN / Infinity; the 422 naming them must still render (it was a 500)."""
    client, app, store_path = served
    qid = client.post("/query", json={"query": "Who directed Barbie?", "mode": "local"}).headers[
        "x-triage-query-id"
    ]
    for body in (
        f'{{"query_id": "{qid}", "score": {literal}}}',
        f'{{"score": {literal}, "extra": [{literal}]}}',
    ):
        r = client.post("/triage/feedback", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 422, r.text
        [error] = [e for e in r.json()["detail"] if e["loc"] == ["body", "score"]]
        assert error["msg"].startswith("score must be a finite number between 0 and 1")
        assert error["input"] == literal
    app.state.triage.inst.flush(10)
    with open_store(store_path, readonly=True) as store:
        assert [e for e in store.events("feedback") if e.query_id == qid] == []


def test_the_query_id_header_is_exposed_to_cors_clients(served):
    """LightRAG's CORS middleware exposes only X-New-Token; a browser front-end must read the id too."""
    client, _, _ = served
    r = client.post(
        "/query",
        json={"query": "Who directed Barbie?", "mode": "local"},
        headers={"Origin": "http://ui.example"},
    )
    assert r.status_code == 200 and r.headers["access-control-allow-origin"] == "*"
    exposed = [h.strip().lower() for h in r.headers["access-control-expose-headers"].split(",")]
    assert "x-triage-query-id" in exposed and "x-new-token" in exposed
    assert r.headers["x-triage-query-id"].startswith("lightrag-")


def test_options_from_flags_and_env():
    given, rest = split_argv(
        ["--port", "9", "--triage-unit", "chunk", "--triage-reweight", "--triage-store=x.db"]
    )
    assert rest == ["--port", "9"]
    options = ServerOptions.from_env({"TRIAGE_UNIT": "triple", "TRIAGE_GATE": "reroute"}, **given)
    assert (options.unit, options.reweight, options.store, options.gate) == ("chunk", True, "x.db", "reroute")
    assert options.config().options == {"gate.mode": "reroute"}
    with pytest.raises(ConfigError, match="TRIAGE_UNIT"):
        ServerOptions.from_env({"TRIAGE_UNIT": "edges"})
    with pytest.raises(ConfigError, match="TRIAGE_REWEIGHT"):
        ServerOptions.from_env({"TRIAGE_REWEIGHT": "maybe"})


def test_options_from_a_dotenv_file_with_lightrags_precedence(tmp_path, monkeypatch):
    """The environment wins over .env (LightRAG's load_dotenv(override=False)), .env over defaults,
    a flag over both; each option says where its value came from."""
    env_file = tmp_path / ".env"
    env_file.write_text(
        "# the deployment's settings\nLLM_BINDING=openai\nTRIAGE_REWEIGHT=1\nTRIAGE_GATE=off\n"
        "TRIAGE_UNIT=chunk\nTRIAGE_STORE_URL=${TRIAGE_HOME}/t.sqlite\nTRIAGE_REWIEGHT=1\nTRIAGE_DATA_DIR=/data\n"
        f"TRIAGE_LIGHTRAG_FUNCS={FUNCS}\n",
        encoding="utf-8",
    )
    env = {"TRIAGE_UNIT": "triple", "TRIAGE_STORE": "ignored.sqlite"}
    monkeypatch.setenv("TRIAGE_HOME", "/srv/rag")  # interpolated as python-dotenv does for LightRAG
    options = ServerOptions.from_env(env, env_file=env_file, gate="warn")
    assert (options.reweight, options.unit, options.gate) == (True, "triple", "warn")
    assert options.store == "/srv/rag/t.sqlite"
    assert options.origins == {
        "store": f"TRIAGE_STORE_URL from {env_file}",
        "reweight": f"TRIAGE_REWEIGHT from {env_file}",
        "unit": "TRIAGE_UNIT from the environment",
        "gate": "--triage-gate",
        "funcs": f"TRIAGE_LIGHTRAG_FUNCS from {env_file}",
        "operator_key": "default",
        "revisions": "default",
        "feedback_rate": "default",
    }
    assert options.funcs == FUNCS
    lines = options.describe()
    assert f"reweight = on  (TRIAGE_REWEIGHT from {env_file})" in lines
    assert f"TRIAGE_GATE = off  (TRIAGE_GATE from {env_file}; not used: --triage-gate wins)" in lines
    assert any(line.startswith("TRIAGE_REWIEGHT = 1") and "TRIAGE_REWEIGHT?" in line for line in lines)
    assert not any("TRIAGE_DATA_DIR" in line for line in lines)  # another tool's variable: not listed
    assert any(line.startswith("TRIAGE_STORE = ignored.sqlite") and "not used" in line for line in lines)
    # the process environment and the current directory's .env, as lightrag-server reads them
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TRIAGE_GATE", "reroute")
    monkeypatch.delenv("TRIAGE_REWEIGHT", raising=False)
    options = ServerOptions.from_env()
    assert (options.reweight, options.gate) == (True, "reroute")
    with pytest.raises(ConfigError, match=r"TRIAGE_UNIT.*from .*\.env"):
        env_file.write_text("TRIAGE_UNIT=edges\n", encoding="utf-8")
        ServerOptions.from_env({}, env_file=env_file)


def _offline_env(**extra: str) -> dict[str, str]:
    """This process's environment without TRIAGE_* variables (they would win over a .env)."""
    return {**{k: v for k, v in os.environ.items() if not k.startswith("TRIAGE_")}, **extra}


def test_triage_settings_in_dotenv_reach_the_real_server(tmp_path, local_servers):
    """triage-lightrag-server started where a .env holds TRIAGE_* lines (and LightRAG's own): it
    serves with them, the environment winning where both set a variable, and its start-up log says
    where each value came from."""
    import httpx

    store = tmp_path / "from-dotenv.sqlite"
    (tmp_path / ".env").write_text(
        "LLM_BINDING=openai\nEMBEDDING_BINDING=openai\n"
        f"WORKING_DIR={tmp_path / 'rag'}\nINPUT_DIR={tmp_path / 'in'}\n"
        f"TRIAGE_STORE_URL={store}\n"
        "TRIAGE_REWEIGHT=1\nTRIAGE_GATE=off\nTRIAGE_UNIT=chunk\n",
        encoding="utf-8",
    )
    port = local_servers.free_port()
    cmd = [sys.executable, "-m", "triage_lightrag.server", "--host", "127.0.0.1", "--port", str(port)]
    log_path = tmp_path / "server.log"
    log = open(log_path, "w")  # noqa: SIM115
    # the offline functions come from the environment, so that a server that ignored .env could
    # still never reach a provider module
    env = _offline_env(TRIAGE_UNIT="triple", TRIAGE_LIGHTRAG_FUNCS=FUNCS)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        local_servers.wait_http(proc, f"{base}/health", log_path, 60, "triage-lightrag-server")
        with httpx.Client(base_url=base, timeout=20) as c:
            summary = c.get("/triage/summary").json()
            assert (summary["reweight"], summary["gate"], summary["unit"]) == (True, "off", "triple")
            assert summary["store"] is not None and summary["store"].endswith("from-dotenv.sqlite")
            upload_and_wait(c, DOCS[0], "a.txt")
            r = c.post("/query", json={"query": "Who directed Inception?", "mode": "hybrid"})
            assert "Christopher Nolan" in r.json()["response"]
            qid = r.headers["x-triage-query-id"]
            assert c.post("/triage/feedback", json={"query_id": qid, "score": 1.0}).status_code == 200
    finally:
        _stop(proc, log)
    assert store.exists() and not (tmp_path / "rag" / "triage.sqlite").exists()
    with open_store(store, readonly=True) as opened:
        assert [e.query_id for e in opened.events("feedback")] == [qid]
    text = log_path.read_text()
    env_file = tmp_path / ".env"
    assert f"triage: reweight = on  (TRIAGE_REWEIGHT from {env_file})" in text, text[-3000:]
    assert f"triage: gate = off  (TRIAGE_GATE from {env_file})" in text
    assert f"triage: store = {store}  (TRIAGE_STORE_URL from {env_file})" in text
    assert "triage: unit = triple  (TRIAGE_UNIT from the environment)" in text


def test_help_lists_the_settings_and_where_they_come_from(tmp_path):
    (tmp_path / ".env").write_text("TRIAGE_REWEIGHT=1\nTRIAGE_GATE=reroute\n", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "triage_lightrag.server", "--help", "--triage-unit", "chunk"],
        cwd=tmp_path,
        env=_offline_env(TRIAGE_GATE="off"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    settings = out.stdout.split("Settings here", 1)[1].split("usage:", 1)[0]
    assert all(len(line) <= 80 for line in settings.splitlines())  # long paths are folded
    settings = " ".join(settings.split())
    env_file = tmp_path / ".env"
    assert f"reweight = on (TRIAGE_REWEIGHT from {env_file})" in settings
    assert "gate = off (TRIAGE_GATE from the environment)" in settings
    assert "unit = chunk (--triage-unit)" in settings
    assert "funcs = none (default)" in settings
    assert "--working-dir" in out.stdout  # lightrag-server's own help follows


def test_a_real_uvicorn_process(tmp_path, local_servers):
    import httpx

    port = local_servers.free_port()
    env = {**os.environ, "TRIAGE_LIGHTRAG_FUNCS": FUNCS, "TRIAGE_STORE_URL": str(tmp_path / "t.sqlite")}
    cmd = [
        sys.executable, "-m", "triage_lightrag.server", "--host", "127.0.0.1", "--port", str(port),
        "--working-dir", str(tmp_path / "rag"), "--input-dir", str(tmp_path / "in"),
        "--llm-binding", "openai", "--embedding-binding", "openai", "--triage-gate", "warn",
    ]  # fmt: skip
    log = open(tmp_path / "server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        local_servers.wait_http(proc, f"{base}/health", tmp_path / "server.log", 60, "triage-lightrag-server")
        with httpx.Client(base_url=base, timeout=20) as c:
            upload_and_wait(c, DOCS[0], "a.txt")
            r = c.post("/query", json={"query": "Who directed Inception?", "mode": "hybrid"})
            qid = r.headers["x-triage-query-id"]
            assert "Christopher Nolan" in r.json()["response"]
            assert (
                c.post("/triage/feedback", json={"query_id": qid, "score": 1.0}).json()["status"]
                == "recorded"
            )
    finally:
        _stop(proc, log)
    with open_store(tmp_path / "t.sqlite", readonly=True) as store:
        assert [e.query_id for e in store.events("feedback")] == [qid]
        assert list(store.events("extraction")) and list(store.events("generation"))


def _stop(proc: subprocess.Popen, log) -> None:
    """Stop a server process started by a test (killed if it does not end in 20 s) and close its log."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log.close()
