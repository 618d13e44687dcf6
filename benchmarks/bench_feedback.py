"""Benchmark of the EvoRAG backward pass: time per query for 100 paths of up to 3 hops.

Target (brief): backpropagation ≤ 1 ms per query. Reported as medians over many runs, each run a
fresh random query (paths drawn from a pool of triples so that triples are shared across paths
and sometimes repeated within one):

- ``gradient``   PathIndex.build + loss_and_gradient (eq. 3–7), the mathematics alone;
- ``step/memory`` FeedbackOptimizer.step with the in-memory score store (gradient, bounded update,
  cache, α step) — the backprop cost of one feedback event;
- ``step/sqlite`` the same step writing through the SQLite store (one transaction of atomic
  increments plus the α parameter), for reference: this runs on the background worker;
- ``rerank``     the synchronous priority P(t) for 100 candidate ids from the cache.

Run: ``python benchmarks/bench_feedback.py [--runs 2000] [--paths 100] [--hops 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from triage_plugins.feedback.backprop import FeedbackOptimizer, loss_and_gradient
from triage_plugins.feedback.priority import PathIndex, unit_priority
from triage_plugins.feedback.scores import ContributionScores, MemoryScoreStore


def make_query(rng: np.random.Generator, n_paths: int, max_hops: int, pool: int):
    ids = [f"t{k}" for k in rng.choice(10 * pool, size=pool, replace=False)]
    paths = [
        [ids[j] for j in rng.integers(0, pool, size=rng.integers(1, max_hops + 1))] for _ in range(n_paths)
    ]
    utilities = rng.uniform(-1.0, 1.0, n_paths).tolist()
    relevance = {i: float(rng.uniform(0.01, 1.0)) for i in ids}
    return paths, utilities, relevance


def median_us(fn: Callable[[int], None], runs: int) -> tuple[float, float]:
    times = []
    for k in range(runs):
        t0 = time.perf_counter_ns()
        fn(k)
        times.append((time.perf_counter_ns() - t0) / 1e3)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--paths", type=int, default=100)
    parser.add_argument("--hops", type=int, default=3)
    parser.add_argument("--pool", type=int, default=150, help="distinct triples per query")
    args = parser.parse_args(argv)

    rng = np.random.default_rng(0)
    queries = [make_query(rng, args.paths, args.hops, args.pool) for _ in range(200)]
    rows: list[tuple[str, float, float]] = []

    def gradient(k: int) -> None:
        paths, utilities, relevance = queries[k % len(queries)]
        index = PathIndex.build(paths)
        s_r = np.fromiter((relevance[i] for i in index.ids), dtype=np.float64, count=len(index.ids))
        s_c = np.full(len(index.ids), 0.5)
        loss_and_gradient(s_r, s_c, 0.5, index, utilities)

    rows.append(("gradient", *median_us(gradient, args.runs)))

    mem = FeedbackOptimizer(ContributionScores(MemoryScoreStore(), "triple"))

    def step_memory(k: int) -> None:
        paths, utilities, relevance = queries[k % len(queries)]
        mem.step(paths, utilities, relevance)

    rows.append(("step/memory", *median_us(step_memory, args.runs)))

    try:
        from triage_plugins.store import Store
    except ImportError:
        Store = None  # noqa: N806
    if Store is not None:
        with tempfile.TemporaryDirectory() as tmp:
            store = Store.open(Path(tmp) / "bench.sqlite")
            sql = FeedbackOptimizer(ContributionScores(store, "triple"))

            def step_sqlite(k: int) -> None:
                paths, utilities, relevance = queries[k % len(queries)]
                sql.step(paths, utilities, relevance)

            rows.append(("step/sqlite", *median_us(step_sqlite, max(50, args.runs // 10))))
            store.close()

    scores = mem.scores
    cands = [(list(q[2]), np.fromiter(q[2].values(), dtype=np.float64)) for q in queries]
    for ids, _ in cands:
        scores.raw(ids)  # warm the cache, as the rerank path sees it after the first query

    def rerank(k: int) -> None:
        ids, rel = cands[k % len(cands)]
        unit_priority(rel[:100], scores.normalized(ids[:100]), 0.5).tolist()

    rows.append(("rerank(100 ids)", *median_us(rerank, args.runs)))

    print(
        f"EvoRAG backprop, {args.paths} paths of 1-{args.hops} hops, {args.pool} distinct triples, {args.runs} runs"
    )
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}")
    print(f"{'what':<18}{'median µs':>12}{'p95 µs':>10}")
    for name, med, p95 in rows:
        print(f"{name:<18}{med:>12.1f}{p95:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
