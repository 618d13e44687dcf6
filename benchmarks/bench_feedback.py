"""Benchmark of the EvoRAG backward pass: time per query for 100 paths of up to 3 hops.

Target (brief): backpropagation ≤ 1 ms per query. Reported as medians over many runs, each run a
fresh random query (paths drawn from a pool of triples so that triples are shared across paths
and sometimes repeated within one):

- ``gradient``   PathIndex.build + loss_and_gradient (eq. 3–7), the mathematics alone;
- ``step/memory`` FeedbackOptimizer.step with the in-memory score store (gradient, bounded update,
  cache, α step) — the backprop cost of one feedback event;
- ``step/sqlite`` the same step writing through the SQLite store (one transaction of atomic
  increments plus the α parameter), for reference: this runs on the background worker;
- ``rerank``     the synchronous priority P(t) for 100 candidate ids from the cache;
- ``handler/…``  the whole feedback handler, ``FeedbackLearner.learn`` for one feedback event
  (look-up of the query's retrieval and generation, paths, evaluator, S_r, backprop step with
  in-memory scores), per query at 100 paths (issue #20 item 3: target ≤ 0.5 ms). Queries are
  walks of 1–3 hops from the topic entity over 150 triples with readable labels, the answer
  grounded, the feedback alternating good / bad:

  * ``handler/gold``   retrieval with paths and gold answers (the gold evaluator), S_r sent with
    ``triage_rerank`` (as the reference pipeline and the adapters do);
  * ``handler/answer`` the same without gold (the answer-support evaluator);
  * ``handler/flat``   a flat retrieval (no paths: 100 retrieved triples as one-hop paths, as
    LightRAG / GraphRAG / LlamaIndex report), answer-support evaluator;
  * ``handler/token-sr`` as ``handler/answer`` but with no S_r sent, so the learner computes the
    default token relevance.

Run: ``python benchmarks/bench_feedback.py [--runs 2000] [--paths 100] [--hops 3]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

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


def make_handler_queries(
    rng: np.random.Generator, n: int, n_paths: int, max_hops: int, *, gold: bool, flat: bool, sr: bool
) -> list[tuple[Any, ...]]:
    """Events of ``n`` queries for the whole-handler rows (module docstring)."""
    from triage_plugins.contract.events import (
        GenerationEvent,
        Gold,
        Path,
        RerankRequest,
        RetrievalEvent,
        Subgraph,
        Triple,
    )

    out = []
    for q in range(n):
        topic = f"Topic Person {q}"
        hop1 = [Triple.of(topic, f"relation {k % 7}", f"First Hop Entity {q}-{k}") for k in range(30)]
        hop2 = [
            Triple.of(t.object, f"relation {k % 5}", f"Second Hop {q}-{j}-{k}")
            for j, t in enumerate(hop1)
            for k in range(2)
        ]
        hop3 = [Triple.of(t.object, "relation 9", f"Third Hop City {q}-{j}") for j, t in enumerate(hop2)]
        triples = hop1 + hop2 + hop3
        nxt: dict[str, list[Triple]] = {}
        for t in hop2 + hop3:
            nxt.setdefault(t.subject, []).append(t)
        walks = []
        for _ in range(n_paths):
            walk = [hop1[int(rng.integers(len(hop1)))]]
            for _ in range(int(rng.integers(1, max_hops + 1)) - 1):
                walk.append(nxt[walk[-1].object][int(rng.integers(len(nxt[walk[-1].object])))])
            walks.append(walk)
        answer = walks[0][-1].object
        qid = f"h{q}"
        query = f"Which entity is linked to {topic}?"
        if flat:
            retrieved = tuple(dict.fromkeys(t for w in walks for t in w))[:n_paths]
            retrieval = RetrievalEvent("bench", qid, query, (topic,), {topic: topic}, Subgraph(retrieved))
        else:
            retrieved = tuple(triples)
            retrieval = RetrievalEvent(
                "bench",
                qid,
                query,
                (topic,),
                {topic: topic},
                Subgraph(retrieved),
                tuple(Path(tuple(t.id for t in w), 1.0) for w in walks),
                gold=Gold(answers=(walks[1][-1].object,)) if gold else None,
            )
        generation = GenerationEvent("bench", qid, answer, (answer,), {answer: answer})
        rerank = None
        if sr:
            ids = tuple(t.id for t in retrieved)
            rerank = RerankRequest(
                "bench", query, "triple", ids, tuple(rng.uniform(0.01, 1.0, len(ids)).tolist()), query_id=qid
            )
        out.append((retrieval, generation, rerank))
    return out


def handler_us(queries: list[tuple[Any, ...]], runs: int) -> tuple[float, float]:
    """Median (p95) µs of ``FeedbackLearner.learn`` per feedback event, in-memory scores."""
    from types import SimpleNamespace

    from triage_plugins.contract.config import TriageConfig
    from triage_plugins.contract.events import FeedbackEvent
    from triage_plugins.plugins.feedback import FeedbackLearner

    learner = FeedbackLearner(SimpleNamespace(store=None, config=TriageConfig()))
    for retrieval, generation, rerank in queries:
        learner.triage_retrieval(retrieval)
        learner.triage_generation(generation)
        if rerank is not None:
            learner.triage_rerank(rerank)
    events = [
        FeedbackEvent("bench", r.query_id, float(k % 2), "human") for k, (r, _, _) in enumerate(queries)
    ]
    for event in events[:20]:
        learner.learn(event)  # warm caches, as a serving process is
    return median_us(lambda k: learner.learn(events[k % len(events)]), runs)


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

    settings = {
        "handler/gold": dict(gold=True, flat=False, sr=True),
        "handler/answer": dict(gold=False, flat=False, sr=True),
        "handler/flat": dict(gold=False, flat=True, sr=True),
        "handler/token-sr": dict(gold=False, flat=False, sr=False),
    }
    for name, kw in settings.items():
        handler_queries = make_handler_queries(rng, 100, args.paths, args.hops, **kw)
        rows.append((name, *handler_us(handler_queries, args.runs)))

    print(
        f"EvoRAG backprop, {args.paths} paths of 1-{args.hops} hops, {args.pool} distinct triples, {args.runs} runs"
    )
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, load average {os.getloadavg()[0]:.2f}")
    print(f"{'what':<18}{'median µs':>12}{'p95 µs':>10}")
    for name, med, p95 in rows:
        print(f"{name:<18}{med:>12.1f}{p95:>10.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
