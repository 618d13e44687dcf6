"""A graph snapshot stored as a delta (issue #34): a 1M-triple graph, then the same graph updated by
10 documents, recorded as two graph events into SQLite and PostgreSQL, one run.

Reported per store: the characters each event added to the store (``blobs`` + ``parts``: before
schema 8 each event stored its whole text), the time to record it, and the time to read both back
(``store.events("graph")``, checked equal to the events recorded), with the process's peak RSS.

PostgreSQL: ``--postgres URL`` (a database it may fill), else a throw-away cluster started with the
test suite's ``tests/store/pgserver.py``.

    python benchmarks/bench_store_graph.py --docs 50000 --new-docs 10
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import tempfile
import time
from pathlib import Path

from pg_cluster import postgres

TRIPLES_PER_DOC = 20


def graphs(n_docs: int, new_docs: int):
    """Two graph events: ``n_docs`` documents' triples, then the same plus ``new_docs`` documents."""
    from triage_plugins.contract.events import GraphEvent, Triple
    from triage_plugins.contract.graph_view import GraphView

    rng = random.Random(0)
    entities = n_docs * 2
    triples, sources = [], {}
    for doc in range(n_docs + new_docs):
        if doc == n_docs:
            first = (list(triples), dict(sources))
        for k in range(TRIPLES_PER_DOC):
            s, p, o = rng.randrange(entities), rng.randrange(200), rng.randrange(entities)
            triple = Triple.of(f"Entity {s}", f"relation_{p}", f"Entity {o}")
            triples.append(triple)
            sources[triple.id] = [f"doc-{doc}-chunk-{k // 5}"]
    out = []
    for kept, provenance in (first, (triples, sources)):
        nodes = sorted({n for t in kept for n in (t.subject, t.object)}, key=lambda n: int(n.split()[1]))
        view = GraphView(kept, nodes=nodes, labels={n: n.lower() for n in nodes}, sources=provenance)
        out.append(GraphEvent("lightrag", view))
    return out


def stored_chars(store) -> int:
    sql = "SELECT (SELECT COALESCE(SUM(LENGTH(json)), 0) FROM blobs) + (SELECT COALESCE(SUM(LENGTH(json)), 0) FROM parts)"
    return int(store._read(sql)[0][0])


def measure(url: str, events) -> list[str]:
    from triage_plugins.store import open_store

    rows = []
    with open_store(url) as store:
        run = store.start_run("bench")
        texts = [e.to_json() for e in events]
        for name, event in zip(("1M triples", "+10 documents"), events, strict=True):
            before = stored_chars(store)
            start = time.perf_counter()
            store.record_event(event, run)
            seconds = time.perf_counter() - start
            added = stored_chars(store) - before
            rows.append(
                f"{name} | {len(event.graph.triples):,} | {len(texts[len(rows)]):,} | {added:,} | {seconds:.2f} s"
            )
        start = time.perf_counter()
        read = [e.to_json() for e in store.events("graph")]
        reading = time.perf_counter() - start
    if read != texts:
        raise SystemExit("the events read back differ from those recorded")
    return [f"{row} | {reading:.2f} s (both)" for row in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=50_000, help="documents of 20 triples in the first graph")
    parser.add_argument("--new-docs", type=int, default=10)
    parser.add_argument("--postgres", default=os.environ.get("TRIAGE_BENCH_POSTGRES_URL"))
    args = parser.parse_args()
    events = graphs(args.docs, args.new_docs)
    with postgres(args.postgres) as (pg, admin):
        print(
            "| store | event | triples | event JSON (chars) | added to the store (chars) | record | read back |"
        )
        print("|---|---|---:|---:|---:|---:|---:|")
        sqlite_url = str(Path(tempfile.mkdtemp(prefix="bench-graph-")) / "g.sqlite")
        for row in measure(sqlite_url, events):
            print(f"| sqlite | {row} |", flush=True)
        url, drop = pg.fresh_database(admin)
        try:
            for row in measure(url, events):
                print(f"| postgres | {row} |", flush=True)
        finally:
            drop()  # type: ignore[operator]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"\npeak RSS {peak:.2f} GB")


if __name__ == "__main__":
    main()
