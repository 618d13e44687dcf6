"""Durable queries per second on PostgreSQL: one commit per query vs group commits, side by side (issue #34).

Each writer process runs a real :class:`~triage_plugins.runtime.manager.TriageManager` (asynchronous
delivery, the recorder and the feedback learner) on one shared PostgreSQL store, with ``--threads``
host threads each serving ``--queries`` queries: a retrieval event, a generation event and
``emit_feedback(wait=True)``, which returns only after the feedback and its score updates committed.
Every such call must return ``True`` (counted when not). Reported: queries per second summed over
writers (all queries / the slowest writer's wall time), the transactions the server counted per query
(``pg_stat_database.xact_commit``: write commits and autocommitted reads), the writers' own CPU
time per query (all their threads), the server's CPU time per query (its processes' ``/proc`` times,
when it runs on this machine), and the statements per query whose answer a writer waited for (a
statement outside a pipeline, a pipeline, an ``executemany``). The last four do not depend on how
loaded the machine is; queries per second does.

``ungrouped``: every write in its own transaction (``PostgresStore.group_commits = False``: the
behaviour before group commits). ``grouped-apart``: the writes of one delivery batch commit together,
and the learner's score update and α step are two statements that each wait for their answer (the
behaviour before ``add_scores_and_param``). ``grouped-pipelined``: as ``grouped-apart``, with the score
update and the α step in one round trip (one statement now; a pipeline of one statement per id before),
the per-query cap counter a round trip of its own, and the score cache dropped whenever a staleness
look sees a recent change. ``grouped``: the
cap counter in the same pipeline, and a staleness look merges only the scores changed since the last
one (``scores_changed_since``). ``grouped-atonce``: as ``grouped``, with each feedback stepped when it
is delivered (the behaviour before the learner stepped a batch's feedback at the batch's end, just
before its commit); ``grouped`` steps them there. ``ungrouped`` and ``grouped-apart`` keep the older
behaviour throughout. ``--sample-locks`` samples ``pg_stat_activity`` every 5 ms during each run and
reports how many of the writers' sessions were waiting for a lock, on average.
Modes alternate per writer count, each on a fresh database, so all see the same machine load.
``--modes`` picks some; ``--profile`` prints the writers' hottest functions (cProfile in every thread).

PostgreSQL: ``--postgres URL`` (a database it may fill), else a throw-away cluster with
``fsync=on`` (durable commits) started with the test suite's ``tests/store/pgserver.py``.

    python benchmarks/bench_store_commits.py --writers 1,4 --threads 4 --queries 100
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import threading
import time
from pathlib import Path

from pg_cluster import postgres

MODES = ("ungrouped", "grouped-apart", "grouped-pipelined", "grouped-atonce", "grouped")


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


def _set_mode(mode: str) -> None:
    """Put this writer process's store and learner in ``mode`` (module docstring)."""
    from triage_plugins.plugins.feedback import FeedbackLearner
    from triage_plugins.store.postgres import PostgresStore
    from triage_plugins.store.sql import SQLStore

    PostgresStore.group_commits = mode != "ungrouped"
    if mode in ("ungrouped", "grouped-apart"):  # the learner writes scores and α in two answered statements
        PostgresStore.add_scores_and_param = None  # type: ignore[assignment,method-assign]
    if mode != "grouped":  # each feedback stepped as it is delivered, not at its batch's end
        init = FeedbackLearner.__init__

        def at_once(self, manager) -> None:
            init(self, manager)
            self._batched = False

        FeedbackLearner.__init__ = at_once  # type: ignore[method-assign]
    if mode not in ("grouped", "grouped-atonce"):  # the cap counter on its own; the cache dropped on a change
        FeedbackLearner._deferred_cap = lambda self, event: None  # type: ignore[method-assign]
        SQLStore.scores_changed_since = None  # type: ignore[assignment,method-assign]


def _count_round_trips() -> list[int]:
    """Count the statements this process sends that wait for their answer: a statement outside a
    pipeline, a pipeline, an ``executemany`` (psycopg pipelines it); commits are counted by the server."""
    import psycopg

    counter = [0]
    execute, pipeline = psycopg.Connection.execute, psycopg.Connection.pipeline
    executemany = psycopg.Cursor.executemany

    def counted_execute(self, *args, **kwargs):
        if self._pipeline is None:
            counter[0] += 1
        return execute(self, *args, **kwargs)

    def counted_pipeline(self):
        if self._pipeline is None:
            counter[0] += 1
        return pipeline(self)

    def counted_executemany(self, *args, **kwargs):
        if self._conn._pipeline is None:
            counter[0] += 1
        return executemany(self, *args, **kwargs)

    psycopg.Connection.execute = counted_execute  # type: ignore[method-assign]
    psycopg.Connection.pipeline = counted_pipeline  # type: ignore[method-assign]
    psycopg.Cursor.executemany = counted_executemany  # type: ignore[method-assign]
    return counter


def _profiled_threads(profiles: list) -> None:
    """Run every thread started from now on under a cProfile profile of its own, timed by the thread's
    CPU clock (kept in ``profiles``)."""
    import cProfile

    run = threading.Thread.run

    def profiled(self):
        profile = cProfile.Profile(time.thread_time)  # CPU time, not time spent waiting
        profiles.append(profile)
        profile.runcall(run, self)

    threading.Thread.run = profiled  # type: ignore[method-assign]


def _writer(
    url: str, mode: str, worker: int, threads: int, n_queries: int, barrier, out, profile=False
) -> None:
    os.environ["TRIAGE_DISABLE_PLUGINS"] = "triage.implementation,triage.usage,triage.gate,triage.otel"
    from triage_plugins.runtime.manager import TriageManager

    _set_mode(mode)
    trips = _count_round_trips()
    profiles: list = []
    if profile:
        _profiled_threads(profiles)
    manager = TriageManager(
        store=url, entry_points=False, spill_dir=Path(os.environ["BENCH_SPILL"]) / str(worker)
    )
    refused: list[int] = []
    hosts = [
        threading.Thread(target=_serve, args=(manager, worker, t, n_queries, refused)) for t in range(threads)
    ]
    barrier.wait()
    start, cpu, sent = time.perf_counter(), time.process_time(), trips[0]
    for host in hosts:
        host.start()
    for host in hosts:
        host.join()
    seconds, cpu, sent = time.perf_counter() - start, time.process_time() - cpu, trips[0] - sent
    failures = manager.write_failures
    manager.close()
    if profiles:
        import pstats

        stats = pstats.Stats(*profiles)
        print(f"--- writer {worker}, {mode}: hottest functions (own time, all threads) ---", flush=True)
        stats.sort_stats("tottime").print_stats(25)
    out.put((threads * n_queries, seconds, len(refused), failures, cpu, sent))


def _commits(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return int(
            conn.execute(
                "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()[0]
        )


def _server_cpu(url: str) -> float | None:
    """CPU seconds the PostgreSQL server has used so far (postmaster, its live children and its reaped
    ones, from ``/proc``); ``None`` when the server does not run on this machine."""
    import psycopg

    def times(pid: int) -> tuple[int, list[int]]:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return int(fields[1]), [int(x) for x in fields[11:15]]  # ppid; utime, stime, cutime, cstime

    try:
        with psycopg.connect(url, autocommit=True) as conn:
            backend = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
            postmaster = times(backend)[0]
            total = sum(times(postmaster)[1])
            for entry in Path("/proc").iterdir():
                if entry.name.isdigit():
                    try:
                        ppid, used = times(int(entry.name))
                    except (OSError, ValueError, IndexError):
                        continue
                    if ppid == postmaster:
                        total += used[0] + used[1]
    except (OSError, psycopg.Error):
        return None
    return total / os.sysconf("SC_CLK_TCK")


def _sample_locks(url: str, stop: threading.Event, out: list[tuple[float, float]]) -> None:
    """Every 5 ms until ``stop``: how many other sessions of this database wait for a lock, and for the
    advisory lock; the means over the samples in which any of them was not idle (the writers at work)
    are appended to ``out``."""
    import psycopg

    sql = (
        "SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), "
        "count(*) FILTER (WHERE wait_event_type = 'Lock' AND wait_event = 'advisory'), "
        "count(*) FILTER (WHERE state <> 'idle') "
        "FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
    )
    samples: list[tuple[int, int]] = []
    with psycopg.connect(url, autocommit=True) as conn:
        while not stop.wait(0.005):
            waiting, advisory, busy = conn.execute(sql).fetchone()
            if busy:
                samples.append((int(waiting), int(advisory)))
    n = max(1, len(samples))
    out.append((sum(w for w, _ in samples) / n, sum(a for _, a in samples) / n))


def run(
    url: str,
    mode: str,
    writers: int,
    threads: int,
    n_queries: int,
    profile: bool = False,
    locks: bool = False,
) -> tuple[float, float, int, float, float, float | None, tuple[float, float] | None]:
    """``(queries/s, commits per query, wait=True calls that returned False, writer CPU ms per query,
    answered round trips per query, server CPU ms per query, (sessions waiting for a lock, of them for
    the advisory lock))`` of one configuration (the last ``None`` unless ``locks``; the sampler's own
    autocommitted reads are then counted among the transactions)."""
    from triage_plugins.store import open_store

    open_store(url).close()
    ctx = multiprocessing.get_context("fork")
    barrier, out = ctx.Barrier(writers), ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(url, mode, w, threads, n_queries, barrier, out, profile))
        for w in range(writers)
    ]
    before, server = _commits(url), _server_cpu(url)
    stop, waiting = threading.Event(), []  # type: ignore[var-annotated]
    sampler = threading.Thread(target=_sample_locks, args=(url, stop, waiting)) if locks else None
    for p in procs:
        p.start()
    if sampler is not None:
        sampler.start()
    results = [out.get(timeout=600) for _ in procs]
    stop.set()
    if sampler is not None:
        sampler.join()
    for p in procs:
        p.join(60)
    time.sleep(0.6)  # pg_stat_database is reported by each backend at most every 0.5 s
    queries = sum(r[0] for r in results)
    commits = _commits(url) - before
    server_after = _server_cpu(url)
    server_ms = None if server is None or server_after is None else (server_after - server) / queries * 1e3
    refused = sum(r[2] for r in results)
    if any(r[3] for r in results):
        raise SystemExit(f"store writes failed: {[r[3] for r in results]}")
    cpu = sum(r[4] for r in results) / queries * 1e3
    trips = sum(r[5] for r in results) / queries
    rate = queries / max(r[1] for r in results)
    return rate, commits / queries, refused, cpu, trips, server_ms, waiting[0] if waiting else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--writers", default="1,4", help="writer processes, comma-separated")
    parser.add_argument("--threads", type=int, default=4, help="host threads per writer")
    parser.add_argument("--queries", type=int, default=100, help="queries per host thread")
    parser.add_argument("--postgres", default=os.environ.get("TRIAGE_BENCH_POSTGRES_URL"))
    parser.add_argument("--modes", default=",".join(MODES), help=f"comma-separated, of {', '.join(MODES)}")
    parser.add_argument("--profile", action="store_true", help="print each writer's hottest functions")
    parser.add_argument("--sample-locks", action="store_true", help="sample sessions waiting for a lock")
    args = parser.parse_args()
    import tempfile

    os.environ["BENCH_SPILL"] = tempfile.mkdtemp(prefix="bench-spill-")
    with postgres(args.postgres, fsync=True) as (pg, admin):
        print(
            "| writers | host threads each | mode | queries/s (all writers) | transactions per query "
            "| writer CPU ms per query | server CPU ms per query | answered round trips per query "
            "| sessions waiting for a lock (advisory) | wait=True refused |"
        )
        print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
        for n in (int(x) for x in args.writers.split(",")):
            for mode in args.modes.split(","):
                url, drop = pg.fresh_database(admin)
                try:
                    rate, commits, refused, cpu, trips, server, waiting = run(
                        url, mode, n, args.threads, args.queries, args.profile, args.sample_locks
                    )
                finally:
                    drop()  # type: ignore[operator]
                row = (
                    f"| {n} | {args.threads} | {mode} | {rate:.0f} | {commits:.2f} | {cpu:.2f} "
                    f"| {'n/a' if server is None else f'{server:.2f}'} | {trips:.2f} "
                    f"| {'n/a' if waiting is None else f'{waiting[0]:.2f} ({waiting[1]:.2f})'} | {refused} |"
                )
                print(row, flush=True)


if __name__ == "__main__":
    main()
