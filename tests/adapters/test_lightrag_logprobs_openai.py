"""TCS on lightrag-server's stock ``openai`` binding (lightrag-hku[api] 1.5.7), no hand-written function.

The real app (:func:`triage_lightrag.server.create_app`) runs with ``--llm-binding openai`` pointed
at an OpenAI-compatible stub HTTP server on 127.0.0.1: LightRAG's own binding
(``lightrag.llm.openai.openai_complete_if_cache``, imported by lightrag-server itself) sends every
extraction, keyword, summary and answer request there. The stub answers with the offline scripted
LLM's texts (:class:`triage_lightrag.testing.ScriptedLightRAGLLM`) and, when a request asks for
them, made-up token log-probabilities. Only the embedder and tokenizer are offline stand-ins
(``TRIAGE_LIGHTRAG_FUNCS=triage_lightrag.testing:offline_embedding_functions``).
LightRAG surface relied on: ``create_app`` building ``LightRAG(..., role_llm_configs=...)`` with a
``RoleLLMConfig`` per role (``metadata["binding"]``), the ``extract`` role writing extractions.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightrag.api")
pytest.importorskip("openai")
pytest.importorskip("fastapi.testclient")

from fastapi.testclient import TestClient  # noqa: E402

from triage_lightrag.server import ServerOptions, create_app  # noqa: E402
from triage_lightrag.testing import (  # noqa: E402
    ScriptedLightRAGLLM,
    offline_embedding_functions,
    server_args,
    upload_and_wait,
)
from triage_plugins.store import open_store  # noqa: E402

FUNCS = "triage_lightrag.testing:offline_embedding_functions"
MODES = ("local", "global", "hybrid", "mix", "naive")
DOCS = [
    "Christopher Nolan directed Inception. Inception was released in 2010. Christopher Nolan was born in London.",
    "Greta Gerwig directed Barbie. Barbie was produced by Warner Bros. Greta Gerwig was born in Sacramento.",
]
#: Uploaded only where logprobs are refused (the registry of log-probabilities is per process, by text).
REFUSED_DOC = "Denis Villeneuve directed Dune. Dune was produced by Legendary Pictures."


class Stub:
    """An OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 answering LightRAG's prompts."""

    def __init__(self) -> None:
        self.llm = ScriptedLightRAGLLM([*DOCS, REFUSED_DOC])
        self.requests: list[dict[str, Any]] = []  # {"kind", "logprobs", "workspace"}
        self.refuse_logprobs = False
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                status, answer = stub.answer(body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def answer(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = body["messages"]
        system = next((m["content"] for m in messages if m["role"] == "system"), None)
        history = [m for m in messages[:-1] if m["role"] != "system"]
        prompt = messages[-1]["content"]
        kind = "extract" if "---Input Text---" in prompt and not history else "other"
        if "Description List" in prompt:
            kind = "summary"  # the extract role's other use: it asks for log-probabilities too
        asked = bool(body.get("logprobs"))
        with self._lock:
            self.requests.append({"kind": kind, "logprobs": asked, "model": body.get("model")})
            if asked and self.refuse_logprobs:
                return 400, {
                    "error": {
                        "message": "logprobs is not supported by this model",
                        "type": "invalid_request_error",
                    }
                }
            text = self.llm.complete(prompt, system, history)
        choice: dict[str, Any] = {
            "index": 0,
            "finish_reason": "stop",
            "message": {"role": "assistant", "content": text},
        }
        if asked:
            tokens = re.findall(r"\S+|\s+", text)
            choice["logprobs"] = {
                "content": [
                    {
                        "token": t,
                        "logprob": -0.01 * (1 + len(t) % 5),
                        "bytes": list(t.encode()),
                        "top_logprobs": [],
                    }
                    for t in tokens
                ]
            }
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "stub"), "choices": [choice],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }  # fmt: skip

    def extraction_requests(self, model: str) -> list[dict[str, Any]]:
        return [r for r in self.requests if r["kind"] == "extract" and r["model"] == model]


@pytest.fixture(scope="module", autouse=True)
def _forget_provider_modules() -> Iterator[None]:
    """lightrag-server imports ``lightrag.llm.openai`` for this module's binding; drop it (and what it
    pulled in under ``lightrag.llm``) afterwards, so a later test that checks our default path imports
    no provider module sees only what that path imports."""
    before = {m for m in sys.modules if m.startswith("lightrag.llm")}
    yield
    for name in [m for m in sys.modules if m.startswith("lightrag.llm") and m not in before]:
        del sys.modules[name]


@pytest.fixture(scope="module")
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.server.shutdown()


def lightrag_args(tmp: Path, stub: Stub, workspace: str) -> Any:
    """lightrag-server's own parsed arguments: the stock openai binding at the stub (the model name
    tells the stub which app asks)."""
    args = server_args(tmp / workspace, tmp / "inputs", workspace)
    args.llm_binding_host, args.llm_model = stub.url, f"model-{workspace}"  # LLM_BINDING_HOST, LLM_MODEL
    args.llm_binding_api_key = "not-needed"
    return args


def upload_all(client: Any, docs: list[str] = DOCS) -> None:
    for i, text in enumerate(docs):
        upload_and_wait(client, text, f"doc{i}.txt")


@pytest.fixture(scope="module")
def served(stub, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("openai")
    store = tmp / "triage.sqlite"
    app = create_app(lightrag_args(tmp, stub, "traced"), ServerOptions(store=str(store), funcs=FUNCS))
    with TestClient(app) as client:
        upload_all(client)
        yield client, app, store


def test_extraction_asks_for_logprobs_and_they_reach_every_triple(served, stub):
    client, app, store_path = served
    asked = stub.extraction_requests("model-traced")
    assert asked and all(r["logprobs"] for r in asked)  # every extraction request, none by hand
    others = [r for r in stub.requests if r["kind"] == "other" and r["model"] == "model-traced"]
    assert not any(r["logprobs"] for r in others)  # keywords and answers are asked as before
    app.state.triage.inst.flush(10)
    with open_store(store_path, readonly=True) as store:
        events = list(store.events("extraction"))
        triples = [t for e in events for t in e.triples]
        assert len(events) == len(DOCS) and triples
        assert all(t.token_logprobs and all(lp <= 0 for lp in t.token_logprobs) for t in triples)
        tcs = [m for m in store.metrics(name="TCS")]
    assert tcs and all(m.value is not None and 0 < m.value <= 1 for m in tcs)


def test_answers_equal_the_stock_server_on_the_same_binding(served, stub, tmp_path):
    """The stock app (no triage, no log-probabilities asked) over the same stub answers the same."""
    client, _, _ = served
    import lightrag.api.lightrag_server as server
    from lightrag.api.config import initialize_config

    args = lightrag_args(tmp_path, stub, "plain")
    initialize_config(args, force=True)
    real, real_embedding = server.LightRAG, server.create_embedding_function_from_args
    offline = offline_embedding_functions()
    server.LightRAG = lambda *a, **k: real(*a, **{**k, **offline})  # the embedder and tokenizer only
    server.create_embedding_function_from_args = lambda *_a, **_k: offline["embedding_func"]
    try:
        plain_app = server.create_app(args)
    finally:
        server.LightRAG, server.create_embedding_function_from_args = real, real_embedding
    with TestClient(plain_app) as plain:
        upload_all(plain)
        assert not any(r["logprobs"] for r in stub.extraction_requests("model-plain"))
        for mode in MODES:
            for question in ("Who was born in London?", "Who directed Barbie?"):
                body = {"query": question, "mode": mode}
                a, b = plain.post("/query", json=body), client.post("/query", json=body)
                assert a.status_code == b.status_code == 200
                assert {k: v for k, v in a.json().items() if k != "response_time"} == {
                    k: v for k, v in b.json().items() if k != "response_time"
                }


def test_an_endpoint_refusing_logprobs_still_extracts(stub, tmp_path):
    """HTTP 400 naming ``logprobs``: asked once more without, then never again; TCS is N/A."""
    store = tmp_path / "triage.sqlite"
    app = create_app(lightrag_args(tmp_path, stub, "refused"), ServerOptions(store=str(store), funcs=FUNCS))
    stub.refuse_logprobs = True
    try:
        with TestClient(app) as client:
            upload_all(client, [REFUSED_DOC])
            app.state.triage.inst.flush(10)
    finally:
        stub.refuse_logprobs = False
    asked = [r["logprobs"] for r in stub.extraction_requests("model-refused")]
    assert asked[0] is True and not any(asked[2:])  # the refused request, its retry, then none
    with open_store(store, readonly=True) as s:
        triples = [t for e in s.events("extraction") for t in e.triples]
        assert triples and all(t.token_logprobs is None for t in triples)
