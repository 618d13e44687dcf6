"""Shared store: feedback throughput and score-read latency, SQLite vs PostgreSQL, 1/4/8 processes, one run.

Each process runs a real :class:`~triage_plugins.runtime.manager.TriageManager` (recorder and
feedback learner, synchronous delivery) on one shared store: it serves a query (retrieval and
generation events) and gives feedback, ``--feedback`` times, then reads the scores of ten triples
``--reads`` times (``get_scores``, the cache-miss path of a rerank). Reported: feedback events per
second summed over processes, and the median / p95 read latency.

PostgreSQL: ``--postgres URL`` (a database it may fill), else a throw-away cluster started with the
test suite's ``tests/store/pgserver.py`` (initdb / pg_ctl; needs PostgreSQL's binaries).

    python benchmarks/bench_store.py --feedback 200 --reads 300
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
from pathlib import Path

from pg_cluster import postgres


def _worker(url: str, worker: int, n_feedback: int, n_reads: int, barrier, out) -> None:
    os.environ["TRIAGE_DISABLE_PLUGINS"] = "triage.implementation,triage.usage,triage.gate,triage.otel"
    from triage_plugins.contract.events import (
        FeedbackEvent,
        GenerationEvent,
        Gold,
        RetrievalEvent,
        Subgraph,
        Triple,
    )
    from triage_plugins.runtime.manager import TriageManager

    triples = [Triple.of("Inception", f"r{k}", f"O{k}") for k in range(10)]
    manager = TriageManager(store=url, entry_points=False, synchronous=True)
    barrier.wait()
    start = time.perf_counter()
    for i in range(n_feedback):
        qid = f"w{worker}-q{i}"
        manager.emit_retrieval(
            RetrievalEvent(
                "b", qid, "Who?", subgraph=Subgraph(tuple(triples[:4])), gold=Gold(answers=("O1",))
            )
        )
        manager.emit_generation(
            GenerationEvent("b", qid, "O1", answer_mentions=("O1",), answer_grounding={"O1": "O1"})
        )
        manager.emit_feedback(FeedbackEvent("b", qid, 1.0))
    seconds = time.perf_counter() - start
    ids = [t.id for t in triples]
    latencies = []
    for _ in range(n_reads):
        t0 = time.perf_counter()
        manager.store.get_scores("triple", ids)
        latencies.append(time.perf_counter() - t0)
    manager.close()
    out.put((n_feedback, seconds, latencies))


def run(url: str, processes: int, n_feedback: int, n_reads: int) -> tuple[float, float, float]:
    from triage_plugins.store import open_store

    open_store(url).close()
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [
        ctx.Process(target=_worker, args=(url, w, n_feedback, n_reads, barrier, out))
        for w in range(processes)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(60)
    throughput = sum(n for n, _, _ in results) / max(s for _, s, _ in results)
    latencies = sorted(x for _, _, lat in results for x in lat)
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    return throughput, statistics.median(latencies) * 1e3, p95 * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--feedback", type=int, default=200, help="feedback events per process")
    parser.add_argument("--reads", type=int, default=300, help="score reads per process")
    parser.add_argument("--processes", default="1,4,8")
    parser.add_argument("--postgres", default=os.environ.get("TRIAGE_BENCH_POSTGRES_URL"))
    args = parser.parse_args()
    with postgres(args.postgres) as (pg, admin):
        print("| backend | processes | feedback/s (all processes) | score read median / p95 (ms) |")
        print("|---|---:|---:|---:|")
        for n in (int(x) for x in args.processes.split(",")):
            for backend in ("sqlite", "postgres"):
                if backend == "sqlite":
                    url = str(Path(tempfile.mkdtemp(prefix="bench-store-")) / "s.sqlite")
                    drop = None
                else:
                    url, drop = pg.fresh_database(admin)
                try:
                    rate, median, p95 = run(url, n, args.feedback, args.reads)
                finally:
                    if drop is not None:
                        drop()
                print(f"| {backend} | {n} | {rate:.0f} | {median:.3f} / {p95:.3f} |", flush=True)


if __name__ == "__main__":
    main()
