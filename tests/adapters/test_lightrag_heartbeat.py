"""A SIGKILLed ``triage-lightrag-server`` worker: its lost events are counted at the next start.

Real ``python -m triage_lightrag.server`` processes (lightrag-hku[api] 1.5.7, uvicorn, 127.0.0.1)
on one SQLite store. The LLM is the offline scripted one, except that an answer to a question
containing ``SLOW`` waits until the process is killed (a module written into ``tmp_path`` and named
by ``TRIAGE_LIGHTRAG_FUNCS``); the embedder and tokenizer are offline too. The first server is
killed with SIGKILL while that query is in flight; a second one on the same store finds the lease
expired, ends the run and counts the query; ``/triage/summary`` and ``triage store info`` show it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightrag.api")

from typer.testing import CliRunner  # noqa: E402

from triage_lightrag.heartbeat import lease_name  # noqa: E402
from triage_lightrag.testing import upload_and_wait  # noqa: E402
from triage_plugins.cli import app as cli  # noqa: E402
from triage_plugins.store import open_store  # noqa: E402

DOC = "Christopher Nolan directed Inception. Inception was released in 2010. Christopher Nolan was born in London."

SLOW_FUNCS = textwrap.dedent(
    """
    import asyncio
    from triage_lightrag.testing import offline_server_functions

    def functions(args=None):
        out = offline_server_functions(args)
        llm = out["llm_model_func"]

        async def slow(prompt, *a, **k):
            if "SLOW" in prompt and "high_level_keywords" not in prompt:
                await asyncio.sleep(600)  # the answer never comes: the process is killed first
            return await llm(prompt, *a, **k)

        out["llm_model_func"] = slow
        return out
    """
)


def start(tmp: Path, name: str, store: Path, local_servers: Any) -> tuple[subprocess.Popen, str, Any]:
    port = local_servers.free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("TRIAGE_")},
        "PYTHONPATH": os.pathsep.join([str(tmp), os.environ.get("PYTHONPATH", "")]),
        "TRIAGE_LIGHTRAG_FUNCS": "slow_funcs:functions",
        "TRIAGE_STORE_URL": str(store),
        "TRIAGE_HEARTBEAT_SECONDS": "0.5",
    }
    cmd = [
        sys.executable, "-m", "triage_lightrag.server", "--host", "127.0.0.1", "--port", str(port),
        "--working-dir", str(tmp / "rag"), "--input-dir", str(tmp / "in"),
        "--llm-binding", "openai", "--embedding-binding", "openai",
    ]  # fmt: skip
    log = open(tmp / f"{name}.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    local_servers.wait_http(proc, f"{base}/health", tmp / f"{name}.log", 90, name)
    return proc, base, log


def ask_and_lose(base: str) -> None:
    """A query whose answer never comes: the server is killed while it waits."""
    import httpx

    with contextlib.suppress(httpx.HTTPError):  # the connection dies with the server
        httpx.post(f"{base}/query", json={"query": "SLOW Who directed Inception?"}, timeout=60)


def in_flight(store: Path) -> list[str]:
    """The query ids the running server's lease lists as in flight."""
    with open_store(store, readonly=True) as s:
        runs = [r for r in s.runs("lightrag-server") if r.ended_at is None]
        lease = s.get_param(lease_name(runs[-1].id)) if runs else None
    return list((lease or {}).get("in_flight") or ())


def test_a_killed_worker_is_counted_at_the_next_start(tmp_path, local_servers):
    import httpx

    (tmp_path / "slow_funcs.py").write_text(SLOW_FUNCS)
    store = tmp_path / "t.sqlite"
    proc, base, log = start(tmp_path, "first", store, local_servers)
    try:
        with httpx.Client(base_url=base, timeout=30) as c:
            upload_and_wait(c, DOC, "a.txt")
            answered = c.post("/query", json={"query": "Who directed Inception?", "mode": "hybrid"})
            assert answered.status_code == 200
        stuck = threading.Thread(target=ask_and_lose, args=(base,), daemon=True)
        stuck.start()
        deadline = time.monotonic() + 30
        while not in_flight(store) and time.monotonic() < deadline:
            time.sleep(0.1)
        lost = in_flight(store)
        assert len(lost) == 1
    finally:
        proc.kill()  # SIGKILL: no lifespan shutdown, no end_run
        proc.wait()
        log.close()
    with open_store(store, readonly=True) as s:
        [run] = s.runs("lightrag-server")
        assert run.ended_at is None  # nothing marked it: it looks like it is still serving

    proc, base, log = start(tmp_path, "second", store, local_servers)
    try:
        with httpx.Client(base_url=base, timeout=30) as c:
            summary = c.get("/triage/summary").json()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
    [killed] = summary["killed_workers"]
    assert killed["run"] == run.id and killed["queries_unanswered"] == 1 and killed["unanswered_ids"] == lost
    assert killed["undelivered"] == 1
    with open_store(store, readonly=True) as s:
        first, second = s.runs("lightrag-server")
        assert (
            first.ended_at is not None
            and first.undelivered == 1
            and first.faults["killed"]["pid"] == proc_pid(s, first)
        )
        assert second.ended_at is not None and "killed" not in second.faults  # ended cleanly
    info = CliRunner().invoke(cli, ["store", "info", str(store)])
    assert info.exit_code == 0, info.output
    assert f"run {run.id}" in info.output and "was killed: 1 query in flight lost their events" in info.output


def proc_pid(store: Any, run: Any) -> int:
    """The pid a run recorded in its config at start."""
    return int(run.config["pid"])
