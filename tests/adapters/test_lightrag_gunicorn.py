"""``triage-lightrag-server --gunicorn --workers 2``: a real ``lightrag-gunicorn`` (gunicorn 27,
``lightrag.api.run_with_gunicorn``) on 127.0.0.1, offline.

The app is preloaded in the gunicorn master and forked into two workers; each instruments its own
``LightRAG`` instance and shares one SQLite store (``TRIAGE_STORE_URL``). Only the LLM, embedder and
tokenizer are offline fakes (``TRIAGE_LIGHTRAG_FUNCS=triage_lightrag.testing:offline_server_functions``).
Every request opens its own connection, so the kernel hands requests to either worker; feedback for
a query the other worker answered must be accepted (the store holds that query's retrieval): when
no feedback crossed by chance, one is made to, by stopping (SIGSTOP) the answering worker while it
is posted.
LightRAG surface relied on: ``--workers``, routes ``/health``, ``/documents/text``,
``/documents/track_status/{id}``, ``/query``; gunicorn's SIGTERM shutdown running each worker's
lifespan end.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightrag.api")
pytest.importorskip(
    "gunicorn", reason="gunicorn is not installed (pip install 'triage-plugins[lightrag-server]')"
)
httpx = pytest.importorskip("httpx")

from triage_plugins.store import open_store  # noqa: E402

FUNCS = "triage_lightrag.testing:offline_server_functions"
DOC = "Christopher Nolan directed Inception. Inception was released in 2010. Christopher Nolan was born in London."
MODES = ("local", "global", "hybrid", "mix", "naive", "hybrid")  # 6 queries
BUDGET = 80.0  # seconds for the whole test, start to stop


class Deadline:
    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def check(self, what: str, log: Path) -> None:
        assert self.left() > 0, f"{what} not done within the test's {BUDGET} s\n{log.read_text()[-3000:]}"


def request(method: str, url: str, deadline: Deadline, **kwargs: Any) -> Any:
    """One request on a fresh connection (so either worker may take it), bounded by ``deadline``."""
    timeout = max(1.0, min(30.0, deadline.left()))
    return httpx.request(method, url, headers={"connection": "close"}, timeout=timeout, **kwargs)


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM gunicorn's process group (master and workers), wait, then SIGKILL what is left."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=25)
    until = time.monotonic() + 5
    while _group_alive(proc.pid) and time.monotonic() < until:
        time.sleep(0.1)
    if _group_alive(proc.pid):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


@contextlib.contextmanager
def gunicorn_server(tmp_path: Path, local_servers: Any) -> Iterator[tuple[subprocess.Popen, str, Path, Path]]:
    """``triage-lightrag-server --gunicorn --workers 2`` with the offline functions on a free
    127.0.0.1 port, sharing the SQLite store ``tmp_path/triage.sqlite``; yields ``(process, base URL,
    log path, store path)`` once started (not yet answering) and stops its process group after."""
    port = local_servers.free_port()
    store_path = tmp_path / "triage.sqlite"
    env = {
        **os.environ,
        "TRIAGE_LIGHTRAG_FUNCS": FUNCS,
        "TRIAGE_STORE_URL": str(store_path),
        "LOG_DIR": str(tmp_path),
        "XDG_RUNTIME_DIR": str(tmp_path),  # gunicorn's control socket, else ~/.gunicorn/gunicorn.ctl
    }
    cmd = [
        sys.executable, "-m", "triage_lightrag.server", "--gunicorn", "--workers", "2",
        "--host", "127.0.0.1", "--port", str(port), "--timeout", "30",
        "--working-dir", str(tmp_path / "rag"), "--input-dir", str(tmp_path / "in"),
        "--llm-binding", "openai", "--embedding-binding", "openai",
    ]  # fmt: skip
    log_path = tmp_path / "server.log"
    with open(log_path, "w") as log:
        proc = subprocess.Popen(
            cmd, cwd=tmp_path, env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        try:
            yield proc, f"http://127.0.0.1:{port}", log_path, store_path
        finally:
            stop(proc)


def test_two_gunicorn_workers_share_the_store_and_accept_each_others_feedback(tmp_path, local_servers):
    deadline = Deadline(BUDGET)
    with gunicorn_server(tmp_path, local_servers) as (proc, base, log_path, store_path):
        ids, query_from = _drive(base, proc, deadline, log_path, local_servers, store_path)
    text = log_path.read_text()
    with open_store(store_path, readonly=True) as store:
        runs = store.runs("lightrag-server")
        pids = {r.config["pid"] for r in runs}
        assert len(pids) == 2 and proc.pid not in pids, (runs, text[-3000:])  # one run per worker
        assert all(r.ended_at is not None for r in runs), "a worker did not end its run on SIGTERM"
        retrieved = {e.query_id for e in store.events("retrieval")}
        generated = {e.query_id for e in store.events("generation")}
        fed = sorted(e.query_id for e in store.events("feedback"))
        assert set(ids) <= retrieved and set(ids) <= generated
        assert fed == sorted(ids)  # each feedback recorded once, by whichever worker took it
        assert list(store.events("extraction"))
        retrieved_by = {r.id: {e.query_id for e in store.events("retrieval", run_id=r.id)} for r in runs}
        fed_by = {r.id: {e.query_id for e in store.events("feedback", run_id=r.id)} for r in runs}
    # a worker recorded feedback for a query the other worker's run recorded the retrieval of
    assert "store" in query_from
    crossed = [(q, a, b) for a in runs for b in runs if a != b for q in fed_by[a.id] & retrieved_by[b.id]]
    assert len(crossed) == query_from.count("store"), (crossed, query_from)
    workers = {q.split("-")[1] for q in ids}  # an id's middle part is its worker's
    assert len(workers) == sum(1 for got in retrieved_by.values() if got & set(ids))


def _answering_pid(store_path: Path, qid: str, deadline: Deadline, log: Path) -> int:
    """The pid of the worker whose run recorded ``qid``'s retrieval (waits for it to be written)."""
    while True:
        if store_path.exists():
            with open_store(store_path, readonly=True) as store:
                pids = {r.id: r.config["pid"] for r in store.runs("lightrag-server")}
                for run_id, pid in pids.items():
                    if any(e.query_id == qid for e in store.events("retrieval", run_id=run_id)):
                        return int(pid)
        deadline.check(f"the retrieval of {qid} in the store", log)
        time.sleep(0.05)


def _drive(
    base: str, proc: subprocess.Popen[bytes], deadline: Deadline, log: Path, servers: Any, store_path: Path
) -> tuple[list[str], list[str]]:
    """Wait for the server, upload, query once per mode, post feedback for each id."""
    servers.wait_http(proc, f"{base}/health", log, deadline.left(), "lightrag-gunicorn")
    r = request("POST", f"{base}/documents/text", deadline, json={"text": DOC, "file_source": "a.txt"})
    assert r.status_code == 200, r.text
    track = r.json()["track_id"]
    while True:
        docs = (
            request("GET", f"{base}/documents/track_status/{track}", deadline).json().get("documents") or []
        )
        if docs and all(str(d.get("status")).lower().endswith("processed") for d in docs):
            break
        deadline.check("document processing", log)
        time.sleep(0.1)
    ids: list[str] = []
    query_from: list[str] = []
    for mode in MODES:
        ids.append(_query(base, mode, deadline, ids))
    for qid in ids:
        query_from.append(_feedback(base, qid, deadline))
    # Which worker takes a connection is the kernel's choice (under load, often the one that just
    # answered). Unless one feedback already crossed: one more query, and its feedback posted while
    # the worker that answered it is stopped, so the other worker takes it.
    if "store" not in query_from:
        ids.append(_query(base, "hybrid", deadline, ids))
        pid = _answering_pid(store_path, ids[-1], deadline, log)
        os.kill(pid, signal.SIGSTOP)
        try:
            query_from.append(_feedback(base, ids[-1], deadline))
        finally:
            os.kill(pid, signal.SIGCONT)
    r = request(
        "POST", f"{base}/triage/feedback", deadline, json={"query_id": "lightrag-0123456789-1", "score": 1.0}
    )
    assert r.status_code == 404 and "not an id this server issued" in r.json()["detail"]
    # replays, whichever worker takes them: one feedback per query id and source, in the shared store
    for qid in ids:
        r = request("POST", f"{base}/triage/feedback", deadline, json={"query_id": qid, "score": 0.0})
        assert r.status_code == 200 and r.json()["status"] == "already recorded", r.text
    return ids, query_from


def _query(base: str, mode: str, deadline: Deadline, seen: list[str]) -> str:
    r = request("POST", f"{base}/query", deadline, json={"query": "Who directed Inception?", "mode": mode})
    assert r.status_code == 200, r.text
    qid = r.headers.get("x-triage-query-id")
    assert qid and qid.startswith("lightrag-") and qid not in seen, (qid, seen)  # unique across workers
    return qid


def _feedback(base: str, qid: str, deadline: Deadline) -> str:
    """Post feedback for ``qid`` (whichever worker takes it); which held the query (``query_from``)."""
    r = request("POST", f"{base}/triage/feedback", deadline, json={"query_id": qid, "score": 1.0})
    assert r.status_code == 200, (qid, r.status_code, r.text)
    assert r.json()["status"] == "recorded"
    return r.json()["query_from"]
