"""Latency of the core pieces whose speed the tests used to assert (house rule: speed is measured here).

Each figure is the best of ``--repeat`` batch medians (or batch means for the one-shot costs), so a
busy shared machine shows as spread, not as a wrong number. Run from the repo root::

    python benchmarks/bench_core.py [--data ../shared/data] [--repeat 5]

Measured: the embedded world's generation; the hashing embedder on 5,000 short strings; SQLite
event and metric writes; the usage metrics and the pre-inference gate on a 200-triple subgraph;
and, when ``../shared/data`` is present, the MetaQA KB load and the grounder's build and per-query
cost on MetaQA (128k triples).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from triage_plugins.contract.events import GenerationEvent, RetrievalEvent, Subgraph, Triple

DEFAULT_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def best_median(fn: Callable[[], Any], calls: int, repeat: int) -> float:
    """Best of ``repeat`` medians of ``calls`` timed calls (seconds per call)."""
    medians = []
    for _ in range(repeat):
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            fn()
            times.append(time.perf_counter() - start)
        medians.append(statistics.median(times))
    return min(medians)


def best_mean(fn: Callable[[], Any], calls: int, repeat: int) -> float:
    """Best of ``repeat`` batch means of ``calls`` calls (seconds per call)."""
    means = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        means.append((time.perf_counter() - start) / calls)
    return min(means)


def row(what: str, seconds: float, budget: str) -> None:
    value = f"{seconds * 1e3:.3f} ms" if seconds < 1.0 else f"{seconds:.2f} s"
    print(f"| {what} | {value} | {budget} |")


def subgraph_event() -> tuple[RetrievalEvent, GenerationEvent]:
    triples = tuple(
        Triple.of(f"Entity {i}", f"rel {i % 7}", f"Entity {(i * 7 + 1) % 150}") for i in range(200)
    )
    mentions = {"Entity 5": "Entity 5", "Entity 77": "Entity 77", "Entity 110": "Entity 110", "Nobody": None}
    event = RetrievalEvent(
        framework="bench",
        query_id="q",
        query="How is Entity 5 related to Entity 77 and Entity 110 or Nobody?",
        mentions=tuple(mentions),
        grounding=mentions,
        subgraph=Subgraph(triples, ()),
    )
    generation = GenerationEvent("bench", "q", "Entity 5 rel 3 Entity 3", ("Entity 5", "Entity 3"),
                                 {"Entity 5": "Entity 5", "Entity 3": "Entity 3"})  # fmt: skip
    return event, generation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="the shared KGQA data folder")
    parser.add_argument("--repeat", type=int, default=5, help="batches per figure (the best is kept)")
    args = parser.parse_args(argv)

    from triage_plugins.contract.config import TriageConfig
    from triage_plugins.metrics.per_query import usage_metrics
    from triage_plugins.offline.embedder import HashingEmbedder
    from triage_plugins.offline.world import generate_world
    from triage_plugins.plugins.gate import DefaultGate
    from triage_plugins.store import open_store

    print("| what | time | budget the tests used to assert |")
    print("|---|---|---|")
    row(
        "`generate_world(0)` (embedded world)",
        best_mean(lambda: generate_world(0), 3, args.repeat),
        "< 0.5 s",
    )
    embedder = HashingEmbedder()
    texts = [f"entity {i} of the synthetic world" for i in range(5000)]
    embedder.embed(texts[:10])
    row(
        "hashing embedder, 5,000 short strings",
        best_mean(lambda: embedder.embed(texts), 1, args.repeat),
        "< 1 s",
    )
    event, generation = subgraph_event()
    row("usage metrics, 200-triple subgraph (median)", best_median(lambda: usage_metrics(event, generation), 200,
        args.repeat), "≤ 0.2 ms")  # fmt: skip
    gate = DefaultGate(SimpleNamespace(config=TriageConfig()))
    row("pre-inference gate, 200-triple subgraph (median)", best_median(lambda: gate.triage_gate(event), 200,
        args.repeat), "< 0.2 ms")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(Path(tmp) / "bench.sqlite")
        try:
            counter = iter(range(10**9))
            row(
                "store: one event write",
                best_mean(lambda: store.record_event(event), 300, args.repeat),
                "< 5 ms",
            )
            row("store: one metric write", best_mean(lambda: store.record_metric(
                "query", f"q{next(counter)}", "ERC", 0.5, framework="f"), 300, args.repeat), "< 5 ms")  # fmt: skip
        finally:
            store.close()

    derived = args.data / "metaqa" / "derived"
    parts = [derived / "kb_reconstructed.part1.txt", derived / "kb_reconstructed.part2.txt"]
    questions_file = args.data / "metaqa" / "1-hop" / "qa_dev.txt"
    if not all(p.is_file() for p in (*parts, questions_file)):
        print(f"\nMetaQA not found under {args.data}: KB load and grounding skipped", file=sys.stderr)
        return 0
    from triage_plugins.contract.graph_view import GraphView
    from triage_plugins.datasets import load_kb
    from triage_plugins.kg.grounding import Grounder

    row(
        "MetaQA KB load (128,512 triples)", best_mean(lambda: load_kb(parts), 1, min(args.repeat, 3)), "< 3 s"
    )
    graph = GraphView(list(load_kb(parts)))
    row("grounder build on MetaQA", best_mean(lambda: Grounder(graph), 1, min(args.repeat, 3)), "< 5 s")
    grounder = Grounder(graph)
    questions = [q.split("\t")[0] for q in questions_file.read_text(encoding="utf-8").splitlines()[:500]]
    row("grounding one MetaQA question (mean of 500)", best_mean(lambda: [grounder.ground(q) for q in questions],
        1, args.repeat) / len(questions), "< 1 ms")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
