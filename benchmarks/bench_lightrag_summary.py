"""``GET /triage/summary`` on a large store: the whole-table read before, the bounded read now (issue #31).

A SQLite store is filled with ``--queries`` queries' usage metrics as the usage plugin stores them
(12 metrics per query, one packed row each). Two parts:

- ``read``: the summary's store read and aggregation, in this process: *before* = the old code
  (``store.metrics(scope="query")`` whole, then the last 5000 metric rows), *after* =
  :func:`triage_lightrag.server_routes.query_metrics` (``metrics(scope="query", last=500)``);
- ``server``: a real ``triage-lightrag-server`` (uvicorn, offline LLM/embedder/tokenizer, on
  127.0.0.1) on a copy of that store: the median ``/query`` latency alone, then while a client
  thread calls ``GET /triage/summary`` back to back; *before* runs the server with the old
  ``summary`` put back (this script's ``--serve before``), *after* with the code as it is.

Run::

    python benchmarks/bench_lightrag_summary.py --queries 50000 --repeats 5 --server-queries 20
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

METRICS = ("QGR", "ERC", "CRP", "CSR", "RDS", "AAS", "SCR", "HCR", "NRR", "TRR", "ECR", "QTL")
DOCS = [
    "Christopher Nolan directed Inception. Inception was released in 2010. Christopher Nolan was born in London.",
    "Greta Gerwig directed Barbie. Barbie was produced by Warner Bros. Greta Gerwig was born in Sacramento.",
]
FUNCS = "triage_lightrag.testing:offline_server_functions"
OLD_ROWS = 5000


def fill(path: Path, queries: int, batch: int = 2000) -> float:
    """A store with ``queries`` queries' packed metric rows; seconds taken."""
    from triage_plugins.store import open_store
    from triage_plugins.store.rows import MetricRow

    t0 = time.perf_counter()
    with open_store(path) as store:
        run = store.start_run("bench")
        for start in range(0, queries, batch):
            rows = [
                MetricRow(
                    "query",
                    f"lightrag-q{q}",
                    name,
                    (q % 97) / 97 if i % 5 else None,
                    None if i % 5 else "undefined here",
                    framework="lightrag",
                )  # fmt: skip
                for q in range(start, min(queries, start + batch))
                for i, name in enumerate(METRICS)
            ]
            store.record_metrics(rows, run_id=run)
        store.end_run(run)
    return time.perf_counter() - t0


def old_query_metrics(store: Any) -> tuple[dict[str, dict[str, Any]], int]:
    """The summary's read before issue #31: every query-metric row, then the last 5000."""
    rows = store.metrics(scope="query")[-OLD_ROWS:]
    values: dict[str, list[float]] = {}
    undefined: Counter[str] = Counter()
    for row in rows:
        if row.value is None or not math.isfinite(row.value):
            undefined[row.name] += 1
        else:
            values.setdefault(row.name, []).append(float(row.value))
    out = {}
    for name in sorted(set(values) | set(undefined)):
        got = values.get(name, [])
        out[name] = {
            "mean": sum(got) / len(got) if got else None,
            "n": len(got),
            "undefined": undefined[name],
        }
    return out, len({row.scope_id for row in rows})


def part_read(path: Path, repeats: int) -> None:
    from triage_lightrag.server_routes import query_metrics
    from triage_plugins.store import open_store

    with open_store(path, readonly=True) as store:
        for label, fn in (("before", old_query_metrics), ("after", query_metrics)):
            times = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                _, n = fn(store)
                times.append(time.perf_counter() - t0)
            print(f"read {label:6s}: median {statistics.median(times):.4f} s  "
                  f"(min {min(times):.4f}, max {max(times):.4f}; {n} queries summarised)")  # fmt: skip


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(base: str, proc: subprocess.Popen, seconds: float = 90) -> None:
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit("server did not start")


def _upload(client: Any) -> None:
    for i, text in enumerate(DOCS):
        track = client.post("/documents/text", json={"text": text, "file_source": f"d{i}.txt"}).json()[
            "track_id"
        ]
        for _ in range(600):
            docs = client.get(f"/documents/track_status/{track}").json().get("documents") or []
            if docs and all(str(d.get("status")).lower().endswith("processed") for d in docs):
                break
            time.sleep(0.1)


def _latencies(client: Any, n: int) -> list[float]:
    out = []
    for i in range(n):
        t0 = time.perf_counter()
        r = client.post("/query", json={"query": "Who directed Inception?" if i % 2 else "Who directed Barbie?",
                                        "mode": "hybrid"})  # fmt: skip
        assert r.status_code == 200, r.text
        out.append(time.perf_counter() - t0)
    return out


def part_server(store: Path, variant: str, n: int, tmp: Path) -> None:
    import httpx

    work = tmp / variant
    work.mkdir()
    copy = work / "t.sqlite"
    shutil.copy(store, copy)
    port = _port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("TRIAGE_")},
           "TRIAGE_LIGHTRAG_FUNCS": FUNCS, "TRIAGE_STORE_URL": str(copy)}  # fmt: skip
    cmd = [sys.executable, __file__, "--serve", variant, "--host", "127.0.0.1", "--port", str(port),
           "--working-dir", str(work / "rag"), "--input-dir", str(work / "in"),
           "--llm-binding", "openai", "--embedding-binding", "openai"]  # fmt: skip
    log = open(work / "server.log", "w")  # noqa: SIM115
    proc = subprocess.Popen(cmd, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait(base, proc)
        with httpx.Client(base_url=base, timeout=120) as c:
            _upload(c)
            _latencies(c, 4)  # warm-up
            alone = _latencies(c, n)
            stop, summaries = threading.Event(), []

            def hammer() -> None:
                with httpx.Client(base_url=base, timeout=120) as h:
                    while not stop.is_set():
                        t0 = time.perf_counter()
                        h.get("/triage/summary").raise_for_status()
                        summaries.append(time.perf_counter() - t0)

            thread = threading.Thread(target=hammer)
            thread.start()
            try:
                busy = _latencies(c, n)
            finally:
                stop.set()
                thread.join()
        print(f"server {variant:6s}: /query median {statistics.median(alone):.3f} s alone, "
              f"{statistics.median(busy):.3f} s beside /triage/summary "
              f"(summary median {statistics.median(summaries):.3f} s over {len(summaries)} calls)")  # fmt: skip
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def serve(variant: str, argv: list[str]) -> None:
    """Run triage-lightrag-server; ``before`` puts the old read back under ``summary()``."""
    from triage_lightrag import server, server_routes

    if variant == "before":
        server_routes.query_metrics = lambda store, rows=OLD_ROWS: old_query_metrics(store)
    server.main(argv)


def main() -> None:
    if "--serve" in sys.argv:
        i = sys.argv.index("--serve")
        variant, argv = sys.argv[i + 1], sys.argv[1:i] + sys.argv[i + 2 :]
        serve(variant, argv)
        return
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=50000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--server-queries", type=int, default=20)
    parser.add_argument("--parts", default="read,server")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        store = tmp / "big.sqlite"
        seconds = fill(store, args.queries)
        print(f"store: {args.queries} queries x {len(METRICS)} metrics in {seconds:.1f} s, "
              f"{store.stat().st_size / 1e6:.1f} MB")  # fmt: skip
        if "read" in args.parts:
            part_read(store, args.repeats)
        if "server" in args.parts:
            for variant in ("before", "after"):
                part_server(store, variant, args.server_queries, tmp)


if __name__ == "__main__":
    main()
