"""Store throughput of LightRAG-sized retrieval events in a query stream: whole texts vs shared parts.

Issue 20 (store >= 20k large events/s). Queries over one graph retrieve the same edges and chunks
again and again; the store keeps each retrieval event as a skeleton naming its triples and chunks and
each distinct triple or chunk once (table ``parts``). This script writes one stream of events both
ways, interleaved, in one run:

- ``whole``: every event's whole JSON text in its row (the layout before schema 5);
- ``parts``: the store as it is (skeleton + parts);
- ``bare table``: the whole texts, pre-encoded, ``executemany``'d into a one-column table (no
  encoding, no indexes): the ceiling of any whole-text layout on this machine.

Events are shaped like an offline LightRAG hybrid query's (63 triples, 13 chunks of 1,100
characters, ~26 KB of JSON), drawn from a pool the size of the ``large`` LightRAG corpus (2,503 edges,
1,000 chunks) with a skew (index = pool * u^2: popular edges come back more often). ``reused`` builds
one object per edge and chunk, as the adapters keep them; ``fresh`` builds new objects for every
event (nothing memoized: every part is encoded and hashed again). The rate counts everything
``record_events`` does (encoding included), in batches of 256 (the delivery worker's batch size).

Run from the repository root::

    python benchmarks/bench_store_parts.py --events 8192 --repeat 5
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from triage_plugins.contract import events as ev
from triage_plugins.contract.events import Chunk, Event, RetrievalEvent, Subgraph, Triple
from triage_plugins.store.sqlite import SQLiteStore

BATCH = 256
TEXT = 'Some retrieved passage text, with a quote " and an accent: é. ' * 40


class WholeTextStore(SQLiteStore):
    """The store writing whole event texts (no parts), as before schema 5."""

    @staticmethod
    def _event_row(event: Event, run_id: str | None, ts: float, parts: dict[str, str]) -> tuple:
        own: dict[str, str] = {}  # the event's parts go here: the batch's stay empty
        row = SQLiteStore._event_row(event, run_id, ts, own)
        if not own:
            return row
        text = event.to_json()
        return (*row[:5], text, row[6], text)


def _pool(n_triples: int, n_chunks: int) -> tuple[list[tuple], list[tuple]]:
    triples = [
        (f"Entity {k % 900}", f"rel {k % 37} of some keywords", f"Entity {(k * 7 + 1) % 900}")
        for k in range(n_triples)
    ]
    chunks = [(f"chunk-{k:032x}", f"doc{k % 40}.txt", f"{k}: {TEXT[: 1100 - 8]}") for k in range(n_chunks)]
    return triples, chunks


def stream(
    n: int, seed: int, reuse: bool, n_triples: int = 2503, n_chunks: int = 1000
) -> list[RetrievalEvent]:
    """``n`` retrieval events drawn from one pool (see the module docstring)."""
    rng = random.Random(seed)
    t_pool, c_pool = _pool(n_triples, n_chunks)
    t_objs = [Triple(f"{s}|{o}|{k}", s, p, o) for k, (s, p, o) in enumerate(t_pool)]
    c_objs = [Chunk(*c) for c in c_pool]

    def draw(size: int, count: int) -> list[int]:
        out: dict[int, None] = {}
        while len(out) < count:
            out[int(size * rng.random() ** 2)] = None
        return list(out)

    events = []
    for i in range(n):
        ti, ci = draw(n_triples, 63), draw(n_chunks, 13)
        if reuse:
            triples, chunks = tuple(t_objs[k] for k in ti), tuple(c_objs[k] for k in ci)
        else:
            triples = tuple(Triple(f"{t_pool[k][0]}|{t_pool[k][2]}|{k}", *t_pool[k]) for k in ti)
            chunks = tuple(Chunk(*c_pool[k]) for k in ci)
        nodes = tuple(dict.fromkeys(t.subject for t in triples))[:20]
        events.append(
            RetrievalEvent(
                "bench", f"q{i}", f"How is Entity {i % 900} related to Entity {(i * 3) % 900}?",
                subgraph=Subgraph(triples, nodes), chunks=chunks, expanded_nodes=80, seconds=0.01,
                retriever="hybrid",
            )
        )  # fmt: skip
    return events


def _write(store: Any, events: list[RetrievalEvent]) -> float:
    ev._memo = ev._Memo()  # each figure starts with an empty memo (the first sight of a part is paid)
    start = time.perf_counter()
    for first in range(0, len(events), BATCH):
        store.record_events(events[first : first + BATCH])
    return time.perf_counter() - start


def _bare(store: Any, events: list[RetrievalEvent]) -> float:
    texts = [(e.to_json(),) for e in events]
    db = store._handle().db
    db.execute("CREATE TABLE IF NOT EXISTS bare (id INTEGER PRIMARY KEY, json TEXT NOT NULL)")
    start = time.perf_counter()
    for first in range(0, len(texts), BATCH):
        db.execute("BEGIN IMMEDIATE")
        db.executemany("INSERT INTO bare (json) VALUES (?)", texts[first : first + BATCH])
        db.execute("COMMIT")
    return time.perf_counter() - start


def measure(events: list[RetrievalEvent], how: str) -> tuple[float, int]:
    """Seconds to write ``events`` one way, and the file's size after (bytes, WAL included)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.sqlite"
        store = (WholeTextStore if how == "whole" else SQLiteStore)(path)
        try:
            seconds = _bare(store, events) if how == "bare" else _write(store, events)
            if how == "parts":  # every event reads back as it was written
                assert [e.to_json() for e in store.events()] == [e.to_json() for e in events]
        finally:
            store.close()
        size = sum(p.stat().st_size for p in Path(tmp).iterdir())
    return seconds, size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=8192, help="events per figure")
    parser.add_argument("--repeat", type=int, default=5, help="runs per figure (median)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if args.events < 1 or args.repeat < 1:
        parser.error("--events and --repeat must be >= 1")
    for reuse in (True, False):
        events = stream(args.events, args.seed, reuse)
        refs = sum(len(e.subgraph.triples) + len(e.chunks) for e in events)
        distinct = len(
            {t.id for e in events for t in e.subgraph.triples} | {c.id for e in events for c in e.chunks}
        )
        size = statistics.mean(len(e.to_json()) for e in events)
        print(f"\n{'reused' if reuse else 'fresh'} objects: {len(events):,} events, {size:,.0f} chars of JSON "
              f"each; {refs:,} triple/chunk references, {distinct:,} distinct ({1 - distinct / refs:.1%} "
              f"repeated)")  # fmt: skip
        hows = ("whole", "parts", "bare") if reuse else ("whole", "parts")
        seconds: dict[str, list[float]] = {h: [] for h in hows}
        sizes: dict[str, int] = {}
        for _ in range(args.repeat):  # interleaved
            for how in hows:
                s, sizes[how] = measure(events, how)
                seconds[how].append(s)
        print(f"{'layout':12s} {'events/s':>10s} {'file MB':>8s}")
        for how in hows:
            rate = len(events) / statistics.median(seconds[how])
            label = "bare table" if how == "bare" else how
            print(f"{label:12s} {rate:10,.0f} {sizes[how] / 1e6:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
