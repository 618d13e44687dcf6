"""Durable queries per second on PostgreSQL: one commit per query vs group commits, side by side (issue #34).

Each writer process runs a real :class:`~triage_plugins.runtime.manager.TriageManager` (asynchronous
delivery, the recorder and the feedback learner) on one shared PostgreSQL store, with ``--threads``
host threads each serving ``--queries`` queries: a retrieval event, a generation event and
``emit_feedback(wait=True)``, which returns only after the feedback and its score updates committed.
Every such call must return ``True`` (counted when not). Reported: queries per second summed over
writers (all queries / the slowest writer's wall time), the transactions the server counted per query
(``pg_stat_database.xact_commit``: write commits and autocommitted reads), and the writers' own CPU
time per query (all their threads).

``ungrouped``: every write in its own transaction (``PostgresStore.group_commits = False``: the
behaviour before group commits). ``grouped-apart``: the writes of one delivery batch commit together,
and the learner's score update and α step are two statements that each wait for their answer (the
behaviour before ``add_scores_and_param``). ``grouped``: as ``grouped-apart``, with the score update
and the α step sent as one pipeline (one round trip). ``ungrouped`` keeps them apart too. Modes
alternate per writer count, each on a fresh database, so all see the same machine load.

PostgreSQL: ``--postgres URL`` (a database it may fill), else a throw-away cluster with
``fsync=on`` (durable commits) started with the test suite's ``tests/store/pgserver.py``.

    python benchmarks/bench_store_commits.py --writers 1,4 --threads 4 --queries 100
"""

from __future__ import annotations

import argparse
import importlib.util
import multiprocessing
import os
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODES = ("ungrouped", "grouped-apart", "grouped")


def _pgserver():
    spec = importlib.util.spec_from_file_location("bench_pgserver", ROOT / "tests" / "store" / "pgserver.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _serve(manager, worker: int, thread: int, n_queries: int, refused: list[int]) -> None:
    from triage_plugins.contract.events import (
        FeedbackEvent,
        GenerationEvent,
        Gold,
        RetrievalEvent,
        Subgraph,
        Triple,
    )

    for i in range(n_queries):
        qid = f"w{worker}-t{thread}-q{i}"
        k = (worker * 7919 + thread * 104729 + i * 31) % 200  # queries touch overlapping triples
        triples = tuple(Triple.of("Inception", f"r{(k + j) % 200}", f"O{(k + j) % 200}") for j in range(4))
        gold = Gold(answers=(triples[0].object,))
        manager.emit_retrieval(RetrievalEvent("b", qid, "Who?", subgraph=Subgraph(triples), gold=gold))
        answer = triples[0].object
        manager.emit_generation(
            GenerationEvent("b", qid, answer, answer_mentions=(answer,), answer_grounding={answer: answer})
        )
        if not manager.emit_feedback(FeedbackEvent("b", qid, 1.0), wait=True):
            refused.append(i)


def _writer(url: str, mode: str, worker: int, threads: int, n_queries: int, barrier, out) -> None:
    os.environ["TRIAGE_DISABLE_PLUGINS"] = "triage.implementation,triage.usage,triage.gate,triage.otel"
    from triage_plugins.runtime.manager import TriageManager
    from triage_plugins.store.postgres import PostgresStore

    PostgresStore.group_commits = mode != "ungrouped"
    if mode != "grouped":  # the learner then writes scores and α in two answered statements
        PostgresStore.add_scores_and_param = None  # type: ignore[assignment,method-assign]
    manager = TriageManager(
        store=url, entry_points=False, spill_dir=Path(os.environ["BENCH_SPILL"]) / str(worker)
    )
    refused: list[int] = []
    hosts = [
        threading.Thread(target=_serve, args=(manager, worker, t, n_queries, refused)) for t in range(threads)
    ]
    barrier.wait()
    start, cpu = time.perf_counter(), time.process_time()
    for host in hosts:
        host.start()
    for host in hosts:
        host.join()
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    failures = manager.write_failures
    manager.close()
    out.put((threads * n_queries, seconds, len(refused), failures, cpu))


def _commits(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(
            conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()[0]
        )


def run(url: str, mode: str, writers: int, threads: int, n_queries: int) -> tuple[float, float, int, float]:
    """``(queries/s, commits per query, wait=True calls that returned False, writer CPU ms per query)``
    of one configuration."""
    from triage_plugins.store import open_store

    open_store(url).close()
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(writers), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(url, mode, w, threads, n_queries, barrier, out))
        for w in range(writers)
    ]
    before = _commits(url)
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    time.sleep(0.6)  # pg_stat_database is reported by each backend at most every 0.5 s
    queries = sum(r[0] for r in results)
    commits = _commits(url) - before
    refused = sum(r[2] for r in results)
    if any(r[3] for r in results):
        raise SystemExit(f"store writes failed: {[r[3] for r in results]}")
    cpu = sum(r[4] for r in results) / queries * 1e3
    return queries / max(r[1] for r in results), commits / queries, refused, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", default="1,4", help="writer processes, comma-separated")
    parser.add_argument("--threads", type=int, default=4, help="host threads per writer")
    parser.add_argument("--queries", type=int, default=100, help="queries per host thread")
    parser.add_argument("--postgres", default=os.environ.get("TRIAGE_BENCH_POSTGRES_URL"))
    args = parser.parse_args()
    import tempfile

    os.environ["BENCH_SPILL"] = tempfile.mkdtemp(prefix="bench-spill-")
    pg = _pgserver()
    cluster = None if args.postgres else pg.start_cluster(fsync=True)
    admin = args.postgres or cluster.url  # type: ignore[union-attr]
    try:
        print(
            "| writers | host threads each | mode | queries/s (all writers) | transactions per query "
            "| writer CPU ms per query | wait=True refused |"
        )
        print("|---:|---:|---|---:|---:|---:|---:|")
        for n in (int(x) for x in args.writers.split(",")):
            for mode in MODES:
                url, drop = pg.fresh_database(admin)
                try:
                    rate, commits, refused, cpu = run(url, mode, n, args.threads, args.queries)
                finally:
                    drop()  # type: ignore[operator]
                row = (
                    f"| {n} | {args.threads} | {mode} | {rate:.0f} | {commits:.2f} | {cpu:.2f} | {refused} |"
                )
                print(row, flush=True)
    finally:
        if cluster is not None:
            cluster.stop()  # type: ignore[operator]


if __name__ == "__main__":
    main()
