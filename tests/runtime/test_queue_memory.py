"""The delivery queue's memory bound holds for large events (issue #34, item 7: "a queue of 10,000
large distinct events holds +697 MB"): an event's weight is its estimated size in bytes
(:func:`~triage_plugins.runtime.dispatch.event_weight`), so ``max_queued_weight`` bounds bytes."""

from __future__ import annotations

import gc
import os
import threading
import tracemalloc

from triage_plugins.contract.events import (
    Chunk,
    FeedbackEvent,
    GenerationEvent,
    GraphEvent,
    Path,
    RetrievalEvent,
    Subgraph,
    Triple,
)
from triage_plugins.contract.graph_view import GraphView
from triage_plugins.contract.hookspecs import hookimpl
from triage_plugins.runtime.dispatch import event_weight
from triage_plugins.runtime.manager import TriageManager

MB = 2**20


def _large(i: int) -> RetrievalEvent:
    """A distinct retrieval of ~90 kB: 10 chunks of 8 kB and 20 triples with long predicates."""
    triples = tuple(Triple.of(f"S{i}.{j}", f"relates to {'p' * 200} {i}", f"O{i}.{j}") for j in range(20))
    chunks = tuple(Chunk(f"c{i}.{j}", f"d{i}", f"{i}.{j} " + "text " * 1600) for j in range(10))
    return RetrievalEvent(
        "t", f"q{i}", f"question {i}?", subgraph=Subgraph(triples), chunks=chunks,
        paths=tuple(Path((t.id,)) for t in triples[:5]), mentions=(f"S{i}.0",),
    )  # fmt: skip


def _traced_bytes(make, n: int = 50) -> float:
    """Bytes one event built by ``make(i)`` holds, measured with tracemalloc over ``n`` of them."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [make(i) for i in range(n)]
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == n
    return (after - before) / n


def _graph(i: int) -> GraphEvent:
    triples = [Triple.of(f"N{i}.{j}", f"linked with {'q' * 40}", f"N{i}.{j + 1}") for j in range(300)]
    return GraphEvent("t", GraphView(triples))


def test_an_event_weighs_at_least_the_bytes_it_holds():
    shapes = {
        "retrieval": _large,
        "retrieval, triples only": lambda i: RetrievalEvent(
            "t", f"q{i}", "q?", subgraph=Subgraph(tuple(Triple.of(f"a{i}.{j}", "r", "b") for j in range(300)))
        ),
        "generation": lambda i: GenerationEvent(
            "t", f"q{i}", f"answer {i} " * 500, answer_mentions=(f"m{i}",)
        ),
        "graph": _graph,
        "feedback": lambda i: FeedbackEvent("t", f"q{i}", 1.0),
    }
    for name, make in shapes.items():
        held = _traced_bytes(make)
        weight = event_weight(make(10_000))
        assert held <= weight <= 3 * held + 1024, (name, held, weight)


class _Blocked:
    """A third-party plugin that blocks its lane's worker until released."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.seen = 0

    @hookimpl
    def triage_retrieval(self, event):
        self.release.wait(60)
        self.seen += 1


def _rss() -> int:
    with open(f"/proc/{os.getpid()}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_ten_thousand_large_events_stay_within_the_queued_bytes_bound():
    bound = 32 * MB
    manager = TriageManager(
        entry_points=False, defaults=False, synchronous=False, schedule_delay=0, max_queued_weight=bound
    )
    blocked = _Blocked()
    manager.register(blocked, name="blocked")
    lanes = list(manager._lanes.values())
    peak = 0
    gc.collect()
    rss = _rss()
    try:
        for i in range(10_000):  # ~900 MB if every event were kept
            manager.emit_retrieval(_large(i))
            peak = max(peak, max(lane._weight for lane in lanes))
        grown = _rss() - rss
        dropped = manager.dropped
        assert peak <= bound  # the queue's accounted bytes never exceeded the bound
        assert dropped >= 9_000  # ~350 of ~90 kB fit in 32 MB: the rest were dropped and counted
        assert grown < 8 * bound, f"RSS grew {grown / MB:.0f} MB"  # generous: allocator slack, not 900 MB
    finally:
        blocked.release.set()
        manager.close(timeout=30)
    # Every event delivered or counted as dropped (read after close: events the defaults' lane still
    # held when the loop ended were handed on, and some dropped, afterwards).
    assert blocked.seen + manager.dropped == 10_000
